//! The metadata cache of a [`SourceCluster`]: the selected topics, their partitions' leaders
//! and epochs, and the brokers' addresses, as the last Metadata answer gave them; when it is
//! asked again (stale, too old, after errors, on demand) and how a partition's leader is
//! looked up in it.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use kmirror_kernel::types::{LeaderEpoch, PartitionIndex, TopicId};

use super::super::authorization::{self, AclNeeded, AclResource};
use super::super::client::MetadataSnapshot;
use super::super::topic_selection::SelectionMiss;
use super::super::{codes, error_name, WireError};
use super::{PartitionFetchError, SourceCluster};

/// A partition as the source's metadata describes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SourcePartition {
    /// The partition index.
    pub index: PartitionIndex,
    /// The leader's broker id (`None`: no leader right now).
    pub leader: Option<i32>,
    /// The leader epoch.
    pub leader_epoch: LeaderEpoch,
    /// The partition's error code in the metadata (0: none).
    pub error_code: i16,
}

/// A selected topic of the source.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SourceTopic {
    /// The topic's name.
    pub name: String,
    /// The topic's id.
    pub topic_id: TopicId,
    /// Its partitions, by index.
    pub partitions: Vec<SourcePartition>,
}

impl SourceTopic {
    /// Partition `index`, if the topic has it.
    pub fn partition(&self, index: PartitionIndex) -> Option<&SourcePartition> {
        self.partitions.iter().find(|p| p.index == index)
    }
}

/// A selected topic the metadata cannot give.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TopicError {
    /// A selected name the cluster does not have, or a glob matching nothing.
    #[error("{miss} (Metadata from Kafka broker {address})")]
    Selection {
        /// Which entry, and why.
        miss: SelectionMiss,
        /// The broker that answered the Metadata.
        address: String,
    },
    /// The topic exists but its metadata carries an error (`LEADER_NOT_AVAILABLE` while it is
    /// being created...): retried with the next refresh.
    #[error(
        "Metadata of topic {topic} at Kafka broker {address} failed: {name} (error code {code})"
    )]
    Broker {
        /// The topic.
        topic: String,
        /// The broker that answered.
        address: String,
        /// Kafka's error code.
        code: i16,
        /// Kafka's name of it.
        name: String,
    },
    /// The principal may not describe the topic (`TOPIC_AUTHORIZATION_FAILED`): the error
    /// names the missing ACL.
    #[error(
        "the source denied {acl} ({name} from Kafka broker {address} in Metadata): grant it \
         with `{}`",
        acl.grant_command(address)
    )]
    Denied {
        /// The broker that answered.
        address: String,
        /// Kafka's error code.
        code: i16,
        /// Kafka's name of it.
        name: String,
        /// The missing ACL.
        acl: AclNeeded,
    },
}

/// The selected topics of the source, as one Metadata answer describes them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SourceMetadata {
    /// The cluster id (`None` from a broker that does not say).
    pub cluster_id: Option<String>,
    /// The brokers: id -> `host:port`.
    pub brokers: BTreeMap<i32, String>,
    /// The selected topics, by name.
    pub topics: BTreeMap<String, SourceTopic>,
    /// The entries of the selection that selected nothing, and the selected topics whose
    /// metadata carries an error.
    pub errors: Vec<TopicError>,
    /// The address of the broker that answered.
    pub answered_by: String,
}

impl SourceMetadata {
    /// The selected topic with id `topic_id`.
    pub fn topic_by_id(&self, topic_id: TopicId) -> Option<&SourceTopic> {
        self.topics.values().find(|t| t.topic_id == topic_id)
    }

    /// The topic and partition of `topic_id` / `partition`.
    pub fn partition(
        &self,
        topic_id: TopicId,
        partition: PartitionIndex,
    ) -> Option<(&SourceTopic, &SourcePartition)> {
        let topic = self.topic_by_id(topic_id)?;
        Some((topic, topic.partition(partition)?))
    }

    /// The leader's broker id of `topic_id` / `partition`, if it has one.
    pub fn leader_of(&self, topic_id: TopicId, partition: PartitionIndex) -> Option<i32> {
        self.partition(topic_id, partition)?.1.leader
    }

    /// Every selected partition: `(topic, partition)`, by topic name then index.
    pub fn partitions(&self) -> impl Iterator<Item = (&SourceTopic, &SourcePartition)> {
        self.topics
            .values()
            .flat_map(|t| t.partitions.iter().map(move |p| (t, p)))
    }

    /// How many partitions the selected topics have in all.
    pub fn partition_count(&self) -> usize {
        self.topics.values().map(|t| t.partitions.len()).sum()
    }
}

/// Why the metadata could not be had at all.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ClusterError {
    /// No broker answered Metadata.
    #[error(
        "no broker of the source cluster answered Metadata (tried {tried}); the last error: {last}"
    )]
    Metadata {
        /// The addresses tried.
        tried: String,
        /// The last error (naming its broker).
        last: WireError,
    },
}

impl ClusterError {
    /// The last wire error.
    pub fn wire(&self) -> &WireError {
        match self {
            ClusterError::Metadata { last, .. } => last,
        }
    }
}

/// Whether the source has a topic, asked by name ([`SourceCluster::topic_exists`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TopicExistence {
    /// The topic exists with this id.
    Exists(TopicId),
    /// The source answers `UNKNOWN_TOPIC_OR_PARTITION`: no topic of that name.
    Unknown,
    /// The source answers something else (not authorized, not available yet): nothing can be
    /// concluded.
    Undecided,
}

/// A partition's leader as the metadata names it.
pub(super) struct Leader {
    pub(super) topic: String,
    pub(super) broker: i32,
    pub(super) address: String,
    pub(super) leader_epoch: LeaderEpoch,
}

impl SourceCluster {
    /// The metadata last had, however old (`None` before the first refresh succeeded).
    pub fn cached_metadata(&self) -> Option<&SourceMetadata> {
        self.metadata.as_ref()
    }

    /// How many times the metadata was refreshed successfully: a caller that acts on each new
    /// metadata compares it with the count it last acted on.
    pub fn metadata_generation(&self) -> u64 {
        self.metadata_generation
    }

    /// When the metadata was last refreshed successfully.
    pub fn metadata_age(&self) -> Option<Duration> {
        self.metadata_at.map(|at| at.elapsed())
    }

    /// Asks one broker (one already connected first) whether the source has topic `name`, by
    /// name: a listing of every topic leaves out those the principal may not describe, so a
    /// topic missing from one is not yet known to be deleted. An unreachable cluster is
    /// [`TopicExistence::Undecided`].
    pub fn topic_exists(&mut self, name: &str) -> TopicExistence {
        let names = [name.to_owned()];
        let mut ids: Vec<i32> = self.brokers.keys().copied().collect();
        ids.sort_by_key(|id| (!self.brokers[id].client().is_connected(), *id));
        let mut answer = None;
        for id in ids {
            if let Some(connection) = self.brokers.get_mut(&id) {
                connection.stats.metadata_requests += 1;
                if let Ok(snapshot) = connection.client_mut().metadata_topics(Some(&names)) {
                    answer = Some(snapshot);
                    break;
                }
                connection.stats.failed_requests += 1;
            }
        }
        if answer.is_none() {
            for client in &mut self.bootstrap {
                self.bootstrap_metadata_requests += 1;
                if let Ok(snapshot) = client.metadata_topics(Some(&names)) {
                    client.disconnect();
                    answer = Some(snapshot);
                    break;
                }
            }
        }
        let Some(topic) = answer.and_then(|s| s.topics.into_iter().find(|t| t.name == name)) else {
            return TopicExistence::Undecided;
        };
        match topic.error_code {
            0 => TopicExistence::Exists(topic.topic_id),
            codes::UNKNOWN_TOPIC_OR_PARTITION => TopicExistence::Unknown,
            _ => TopicExistence::Undecided,
        }
    }

    /// Marks the metadata stale: the next request asks for it again first.
    pub fn invalidate_metadata(&mut self) {
        self.stale = true;
    }

    /// Whether the next request asks for the metadata first.
    pub fn metadata_is_stale(&self) -> bool {
        self.stale
            || self.metadata.is_none()
            || match self.metadata_at {
                None => true,
                Some(at) => at.elapsed() >= self.options.metadata_max_age,
            }
    }

    /// Refreshes stale metadata before a request, unless the last attempt was less than
    /// [`SourceClusterOptions::metadata_refresh_backoff`] ago (and some metadata is at hand).
    /// A failure keeps the old metadata: the partitions say what failed.
    pub(super) fn refresh_if_due(&mut self) {
        let due = self.metadata.is_none()
            || match self.refreshed_at {
                None => true,
                Some(at) => at.elapsed() >= self.options.metadata_refresh_backoff,
            };
        if due && self.metadata_is_stale() {
            let _ = self.refresh_metadata();
        }
    }

    /// The metadata, asked again first if it is stale.
    pub fn metadata(&mut self) -> Result<&SourceMetadata, ClusterError> {
        if self.metadata_is_stale() {
            self.refresh_metadata()?;
        }
        self.metadata.as_ref().ok_or_else(|| self.no_metadata())
    }

    pub(super) fn no_metadata(&self) -> ClusterError {
        ClusterError::Metadata {
            tried: self.bootstrap(),
            last: self
                .last_metadata_error
                .clone()
                .unwrap_or_else(|| WireError::Connect {
                    address: self.bootstrap(),
                    source: std::io::Error::other("no metadata yet"),
                }),
        }
    }

    /// Asks for the metadata now: from the brokers already connected, then the others known,
    /// then the bootstrap addresses, until one answers. On failure the old metadata (if any)
    /// stays and is still used, marked stale.
    pub fn refresh_metadata(&mut self) -> Result<&SourceMetadata, ClusterError> {
        self.refreshed_at = Some(Instant::now());
        let names = self.selection.exact_names();
        let mut tried: Vec<String> = Vec::new();
        let mut last: Option<WireError> = None;
        let mut ids: Vec<i32> = self.brokers.keys().copied().collect();
        ids.sort_by_key(|id| (!self.brokers[id].client().is_connected(), *id));
        let mut answer: Option<(MetadataSnapshot, String)> = None;
        for id in ids {
            let Some(connection) = self.brokers.get_mut(&id) else {
                continue;
            };
            connection.stats.metadata_requests += 1;
            let address = connection.client().address().to_owned();
            match connection.client_mut().metadata_topics(names.as_deref()) {
                Ok(snapshot) => {
                    let measured = connection.client().round_trip();
                    self.round_trip = min_round_trip(self.round_trip, measured);
                    answer = Some((snapshot, address));
                    break;
                }
                Err(e) => {
                    connection.stats.failed_requests += 1;
                    tried.push(address);
                    last = Some(e);
                }
            }
        }
        if answer.is_none() {
            for client in &mut self.bootstrap {
                if tried.iter().any(|a| a == client.address()) {
                    continue;
                }
                self.bootstrap_metadata_requests += 1;
                match client.metadata_topics(names.as_deref()) {
                    Ok(snapshot) => {
                        self.round_trip = min_round_trip(self.round_trip, client.round_trip());
                        answer = Some((snapshot, client.address().to_owned()));
                        // Later refreshes go to the brokers themselves.
                        client.disconnect();
                        break;
                    }
                    Err(e) => {
                        tried.push(client.address().to_owned());
                        last = Some(e);
                    }
                }
            }
        }
        let Some((snapshot, address)) = answer else {
            self.stale = true;
            let last = last.unwrap_or_else(|| WireError::Connect {
                address: self.bootstrap(),
                source: std::io::Error::other("no bootstrap address"),
            });
            self.last_metadata_error = Some(last.clone());
            return Err(ClusterError::Metadata {
                tried: tried.join(", "),
                last,
            });
        };
        let metadata = self.select(snapshot, address);
        // Brokers gone from the metadata (down, fenced) lose their connections; their counts
        // stay.
        for (id, connection) in &mut self.brokers {
            if !metadata.brokers.contains_key(id) {
                connection.disconnect();
            }
        }
        self.metadata = Some(metadata);
        self.metadata_at = Some(Instant::now());
        self.stale = false;
        self.last_metadata_error = None;
        self.metadata_generation += 1;
        self.metadata.as_ref().ok_or_else(|| self.no_metadata())
    }

    /// Applies the selection to a Metadata answer.
    fn select(&self, snapshot: MetadataSnapshot, address: String) -> SourceMetadata {
        // A topic with an error other than "unknown" exists: the selection finds it, and its
        // error is reported.
        let present: Vec<(&str, bool)> = snapshot
            .topics
            .iter()
            .filter(|t| t.error_code != codes::UNKNOWN_TOPIC_OR_PARTITION && !t.name.is_empty())
            .map(|t| (t.name.as_str(), t.is_internal))
            .collect();
        let (selected, misses) = self.selection.resolve(present.iter().copied());
        let mut errors: Vec<TopicError> = misses
            .into_iter()
            .map(|miss| TopicError::Selection {
                miss,
                address: address.clone(),
            })
            .collect();
        let mut topics = BTreeMap::new();
        for entry in snapshot.topics {
            if !selected.contains(&entry.name) {
                continue;
            }
            let denied = authorization::needed(
                "Metadata",
                entry.error_code,
                AclResource::Topic(entry.name.clone()),
                self.security.principal(),
            );
            if let Some(acl) = denied {
                errors.push(TopicError::Denied {
                    address: address.clone(),
                    code: entry.error_code,
                    name: error_name(entry.error_code),
                    acl,
                });
                continue;
            }
            if entry.error_code != 0 {
                errors.push(TopicError::Broker {
                    topic: entry.name.clone(),
                    address: address.clone(),
                    code: entry.error_code,
                    name: error_name(entry.error_code),
                });
                continue;
            }
            let mut partitions: Vec<SourcePartition> = entry
                .partitions
                .iter()
                .map(|p| SourcePartition {
                    index: p.index,
                    leader: (p.leader_id >= 0).then_some(p.leader_id),
                    leader_epoch: p.leader_epoch,
                    error_code: p.error_code,
                })
                .collect();
            partitions.sort_by_key(|p| p.index);
            topics.insert(
                entry.name.clone(),
                SourceTopic {
                    name: entry.name,
                    topic_id: entry.topic_id,
                    partitions,
                },
            );
        }
        SourceMetadata {
            cluster_id: snapshot.cluster_id,
            brokers: snapshot.brokers.into_iter().collect(),
            topics,
            errors,
            answered_by: address,
        }
    }

    /// The leader of `topic_id` / `partition` in the metadata last had, or why there is none
    /// (no metadata, an unknown topic id or partition, no leader).
    pub(super) fn resolve(
        &self,
        topic_id: TopicId,
        partition: PartitionIndex,
    ) -> Result<Leader, PartitionFetchError> {
        let hex = || topic_id.to_string();
        let Some(metadata) = self.metadata.as_ref() else {
            return Err(PartitionFetchError::NoMetadata {
                topic_id: hex(),
                partition,
                source: Box::new(self.no_metadata().wire().clone()),
            });
        };
        let Some((topic, p)) = metadata.partition(topic_id, partition) else {
            let hosted = match metadata.topic_by_id(topic_id) {
                Some(t) => format!(
                    "topic {} with id {} and {} partitions",
                    t.name,
                    hex(),
                    t.partitions.len()
                ),
                None => "no selected topic with that id".to_owned(),
            };
            return Err(PartitionFetchError::UnknownTopicId {
                address: metadata.answered_by.clone(),
                hosted,
                asked: hex(),
                partition,
            });
        };
        match p
            .leader
            .and_then(|id| metadata.brokers.get(&id).map(|a| (id, a)))
        {
            Some((broker, address)) => Ok(Leader {
                topic: topic.name.clone(),
                broker,
                address: address.clone(),
                leader_epoch: p.leader_epoch,
            }),
            None => Err(PartitionFetchError::NoLeader {
                topic: topic.name.clone(),
                partition,
                address: metadata.answered_by.clone(),
            }),
        }
    }
}

/// The shorter of the round trip `known` and the one just `measured`.
pub(super) fn min_round_trip(
    known: Option<Duration>,
    measured: Option<Duration>,
) -> Option<Duration> {
    match (known, measured) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}
