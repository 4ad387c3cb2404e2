//! [`SourceCluster`]: every partition of the selected topics of a live Kafka cluster, fetched
//! the way Kafka's replica fetchers do: ONE Fetch per source broker per round, covering all the
//! partitions that broker leads.
//!
//! - **Metadata** ([`SourceMetadata`]): for every selected topic ([`TopicSelection`]: names and
//!   globs) its name, id and partitions, each partition's leader and leader epoch, and the
//!   brokers' addresses. It is asked from a broker already connected (then the bootstrap
//!   addresses) on the first request, on demand ([`SourceCluster::refresh_metadata`],
//!   [`SourceCluster::invalidate_metadata`]), when older than
//!   [`SourceClusterOptions::metadata_max_age`], and before the next round after any
//!   partition's leadership error or a broker's failure. A selected name the cluster does not
//!   have, or a glob matching nothing, is an error of that entry alone
//!   ([`SourceMetadata::errors`]).
//! - **Connections**: one [`KafkaClient`] per source broker, keyed by broker id, connected on
//!   first use, closed after a connection error and reopened on the next request (to the
//!   broker's current address).
//! - **The coalesced fetch** ([`SourceCluster::fetch`]): the per-partition requests are grouped
//!   by their leader in the metadata; each broker gets one Fetch (one per isolation level asked:
//!   Kafka's Fetch has one) with all its partitions, the brokers in parallel (one thread each,
//!   like Kafka's fetcher threads; [`SourceCluster::fetch_each`] hands each broker's answers
//!   over as soon as they are read), the partitions' order rotated every round so that a full
//!   response does not always starve the same ones. Each partition's answer is mapped exactly as
//!   [`KafkaSource`](super::KafkaSource) maps its single partition (same function): records
//!   as raw batches (a partial trailing batch dropped, batches ending below the fetch offset
//!   skipped, only batches ending below the isolation bound), a diverging epoch (KIP-320: after
//!   an unclean election on the source the new leader's shorter epoch is reported as it is, for
//!   the kernel's truncation rules), `OFFSET_OUT_OF_RANGE` with ListOffsets earliest / latest
//!   (one request each per broker for all such partitions).
//! - **Errors are per partition** ([`PartitionFetchError`]): a leadership error
//!   (`NOT_LEADER_OR_FOLLOWER`, `FENCED_LEADER_EPOCH`, `UNKNOWN_LEADER_EPOCH`,
//!   `LEADER_NOT_AVAILABLE`, `UNKNOWN_TOPIC_OR_PARTITION`...) fails that partition only, as
//!   retryable, and schedules a metadata refresh; a broker that cannot be reached fails only the
//!   partitions it leads; the other partitions of the same round are answered.
//!
//! [`SourceCluster::request_stats`] counts the requests sent to each broker (to see the
//! coalescing: one Fetch per broker per round, whatever the number of partitions).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use kmirror_kernel::config::FetchIsolation;
use kmirror_kernel::fetch::{FetchResponse, FetchedRecords};
use kmirror_kernel::types::{LeaderEpoch, Offset, PartitionIndex, TopicId};

use super::authorization::{self, AclNeeded, AclResource};
use super::client::{
    FetchManyParams, FetchPartitionParams, KafkaClient, MetadataSnapshot, PartitionFetch,
    EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, READ_COMMITTED, READ_UNCOMMITTED,
};
use super::fetch_session::FetchSession;
use super::security::SecurityConfig;
use super::topic_selection::{SelectionMiss, TopicSelection};
use super::{codes, error_name, WireError};
use crate::error::BatchError;
use crate::record_batch::{batch_size_from_prefix, RawBatch, LOG_OVERHEAD};
use crate::source::SourcePosition;

/// Timeouts, sizes and the metadata's age of a [`SourceCluster`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SourceClusterOptions {
    /// How long a TCP connect may take.
    pub connect_timeout: Duration,
    /// How long a request may wait for its answer.
    pub request_timeout: Duration,
    /// How long a broker may hold a Fetch waiting for data (`max_wait_ms`).
    pub fetch_max_wait_ms: i32,
    /// The most bytes of records one Fetch returns in all (`max_bytes`).
    pub fetch_max_bytes: i32,
    /// The most bytes of records one Fetch returns per partition (`partition_max_bytes`).
    pub partition_max_bytes: i32,
    /// The metadata is asked again when older than this (Kafka's `metadata.max.age.ms`).
    pub metadata_max_age: Duration,
    /// A refresh scheduled by an error waits at least this long after the previous attempt
    /// (Kafka's `retry.backoff.ms`), so that rounds failing fast (a broker refusing
    /// connections) do not ask Metadata each time.
    pub metadata_refresh_backoff: Duration,
    /// Whether the coalesced Fetch of each broker runs in a fetch session (KIP-227): after
    /// the first, full request only the partitions that changed are sent, and only those with
    /// news are answered ([`FetchSession`]).
    pub fetch_sessions: bool,
}

impl Default for SourceClusterOptions {
    /// 3 s to connect, 30 s per request, fetches held at most 100 ms, 10 MiB per fetch and
    /// 1 MiB per partition (the KIP-1279 prototype's `mirror.fetch.response.max.bytes` and
    /// `mirror.fetch.max.bytes`, Kafka's replica fetcher defaults: a mirror fetches as a
    /// follower does; smaller answers also let the node driver write one while it reads the
    /// next, see BENCHMARKS.md, `node_mirroring`), metadata at most 5 minutes old and
    /// refreshed at most every 100 ms, fetch sessions on.
    fn default() -> Self {
        SourceClusterOptions {
            connect_timeout: Duration::from_secs(3),
            request_timeout: Duration::from_secs(30),
            fetch_max_wait_ms: 100,
            fetch_max_bytes: 10 << 20,
            partition_max_bytes: 1 << 20,
            metadata_max_age: Duration::from_secs(300),
            metadata_refresh_backoff: Duration::from_millis(100),
            fetch_sessions: true,
        }
    }
}

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

/// Which current leader epoch a partition's Fetch carries (KIP-320's fencing).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum CurrentLeaderEpoch {
    /// The leader epoch of the metadata, as Kafka's consumer sends it: a broker that is behind
    /// or ahead answers `UNKNOWN_LEADER_EPOCH` / `FENCED_LEADER_EPOCH` (retryable).
    #[default]
    FromMetadata,
    /// -1: no check.
    Unchecked,
    /// This epoch.
    Known(LeaderEpoch),
}

/// What the fetcher asks for one partition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PartitionFetchRequest {
    /// The topic id.
    pub topic_id: TopicId,
    /// The partition.
    pub partition: PartitionIndex,
    /// The offset to read from.
    pub fetch_offset: Offset,
    /// The epoch of the last batch the fetcher holds (KIP-320), if any.
    pub last_fetched_epoch: Option<LeaderEpoch>,
    /// The current leader epoch sent.
    pub current_leader_epoch: CurrentLeaderEpoch,
    /// The isolation the kernel asked for (`Follower` reads as read-uncommitted: up to the HW).
    pub isolation: FetchIsolation,
    /// At most this many whole batches are returned.
    pub max_batches: usize,
}

/// A partition's answer to a coalesced fetch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionFetched {
    /// The answer, as the kernel's `serve_fetch` gives it for a local source.
    pub response: FetchResponse<RawBatch>,
    /// Where the source's partition is (from the Fetch; `None` after `OFFSET_OUT_OF_RANGE`,
    /// whose answer carries no position).
    pub position: Option<SourcePosition>,
}

/// Why one partition of a coalesced fetch got no answer. See [`is_retryable`](Self::is_retryable).
#[derive(Debug, Clone, thiserror::Error)]
pub enum PartitionFetchError {
    /// The broker is no longer (or not yet) the partition's leader, or its epoch differs:
    /// `NOT_LEADER_OR_FOLLOWER`, `FENCED_LEADER_EPOCH`, `UNKNOWN_LEADER_EPOCH`,
    /// `LEADER_NOT_AVAILABLE`, `UNKNOWN_TOPIC_OR_PARTITION`... The metadata is refreshed
    /// before the next round.
    #[error(
        "{api} of topic {topic} partition {partition} at Kafka broker {broker} ({address}) \
         failed: {name} (error code {code}); the leader is looked up again"
    )]
    Leadership {
        /// The API (`Fetch`, `ListOffsets`).
        api: &'static str,
        /// The topic.
        topic: String,
        /// The partition.
        partition: PartitionIndex,
        /// The broker asked.
        broker: i32,
        /// Its address.
        address: String,
        /// Kafka's error code.
        code: i16,
        /// Kafka's name of it.
        name: String,
    },
    /// The metadata names no leader (or an unknown broker) for the partition right now.
    #[error(
        "topic {topic} partition {partition} has no leader in the source's metadata (from Kafka \
         broker {address}); the leader is looked up again"
    )]
    NoLeader {
        /// The topic.
        topic: String,
        /// The partition.
        partition: PartitionIndex,
        /// The broker whose Metadata said so.
        address: String,
    },
    /// The partition's leader cannot be reached (connect refused, the connection broke or
    /// timed out): only its partitions fail.
    #[error("topic {topic} partition {partition}: Kafka broker {broker} is unreachable: {source}")]
    Unreachable {
        /// The topic.
        topic: String,
        /// The partition.
        partition: PartitionIndex,
        /// The leader's broker id.
        broker: i32,
        /// The connection error (naming the address and the API).
        source: Box<WireError>,
    },
    /// The source does not host this topic id (deleted, or deleted and re-created under a new
    /// id) or the topic has no such partition: `UNKNOWN_TOPIC_ID`.
    #[error(
        "the source cluster (Kafka broker {address}) hosts {hosted}, not topic id {asked} \
         partition {partition} (UNKNOWN_TOPIC_ID)"
    )]
    UnknownTopicId {
        /// The broker that said so (or whose Metadata lacks the topic id).
        address: String,
        /// What it hosts instead (`topic orders with id ...`, or `no selected topic with that
        /// id`).
        hosted: String,
        /// The topic id asked for, in hex.
        asked: String,
        /// The partition asked for.
        partition: PartitionIndex,
    },
    /// No metadata could be had from any broker.
    #[error("topic id {topic_id} partition {partition}: no source metadata: {source}")]
    NoMetadata {
        /// The topic id, in hex.
        topic_id: String,
        /// The partition.
        partition: PartitionIndex,
        /// Why (the last broker's error).
        source: Box<WireError>,
    },
    /// The same partition was asked twice in one fetch (the second is not sent).
    #[error("topic id {topic_id} partition {partition} is asked twice in one fetch")]
    Duplicate {
        /// The topic id, in hex.
        topic_id: String,
        /// The partition.
        partition: PartitionIndex,
    },
    /// Any other failure: another Kafka error code, a malformed answer or record batch.
    #[error("topic {topic} partition {partition}: {source}")]
    Failed {
        /// The topic.
        topic: String,
        /// The partition.
        partition: PartitionIndex,
        /// The error, naming the broker and the API.
        source: Box<WireError>,
    },
}

impl PartitionFetchError {
    /// Whether asking again (after the refresh this error scheduled) may succeed without
    /// anything else changing: leadership errors, no leader, an unreachable broker, no metadata.
    pub fn is_retryable(&self) -> bool {
        match self {
            PartitionFetchError::Leadership { .. }
            | PartitionFetchError::NoLeader { .. }
            | PartitionFetchError::Unreachable { .. }
            | PartitionFetchError::NoMetadata { .. } => true,
            PartitionFetchError::Failed { source, .. } => source.is_connection(),
            PartitionFetchError::UnknownTopicId { .. } | PartitionFetchError::Duplicate { .. } => {
                false
            }
        }
    }

    /// The wire error underneath, if there is one.
    pub fn wire(&self) -> Option<&WireError> {
        match self {
            PartitionFetchError::Unreachable { source, .. }
            | PartitionFetchError::NoMetadata { source, .. }
            | PartitionFetchError::Failed { source, .. } => Some(source.as_ref()),
            _ => None,
        }
    }
}

/// One partition's result of [`SourceCluster::fetch`].
#[derive(Debug, Clone)]
pub struct PartitionFetchResult {
    /// The topic id asked.
    pub topic_id: TopicId,
    /// The partition asked.
    pub partition: PartitionIndex,
    /// The broker the request went to (`None` when it was not sent).
    pub broker: Option<i32>,
    /// The answer.
    pub outcome: Result<PartitionFetched, PartitionFetchError>,
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

/// Requests sent to one broker.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BrokerStats {
    /// Fetch requests (each covering many partitions).
    pub fetch_requests: u64,
    /// Partition entries in those Fetch requests.
    pub partitions_fetched: u64,
    /// ListOffsets requests (after `OFFSET_OUT_OF_RANGE`, or asked directly).
    pub list_offsets_requests: u64,
    /// Metadata requests.
    pub metadata_requests: u64,
    /// Requests that failed as a whole (connection errors, malformed answers).
    pub failed_requests: u64,
    /// Fetch requests sent incremental in a fetch session (a subset of `fetch_requests`).
    pub incremental_fetch_requests: u64,
    /// Partition entries actually sent in Fetch requests (in a fetch session, only the
    /// changed ones; without, as `partitions_fetched`).
    pub partitions_sent: u64,
}

#[derive(Debug)]
struct BrokerConnection {
    client: KafkaClient,
    stats: BrokerStats,
    rotation: usize,
    /// The fetch sessions, by isolation level (read-uncommitted, read-committed).
    sessions: [FetchSession; 2],
}

/// Many partitions of a live Kafka cluster. See the [module documentation](self).
#[derive(Debug)]
pub struct SourceCluster {
    bootstrap: Vec<KafkaClient>,
    bootstrap_metadata_requests: u64,
    selection: TopicSelection,
    options: SourceClusterOptions,
    security: Arc<SecurityConfig>,
    metadata: Option<SourceMetadata>,
    metadata_at: Option<Instant>,
    refreshed_at: Option<Instant>,
    stale: bool,
    last_metadata_error: Option<WireError>,
    brokers: HashMap<i32, BrokerConnection>,
    /// Successful metadata refreshes so far.
    metadata_generation: u64,
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

/// The partitions of one broker's share of a round.
struct BrokerJob {
    broker: i32,
    connection: BrokerConnection,
    items: Vec<JobItem>,
}

/// A partition's leader as the metadata names it.
struct Leader {
    topic: String,
    broker: i32,
    address: String,
    leader_epoch: LeaderEpoch,
}

/// A partition at a broker, to name in its errors.
struct PartitionAt<'a> {
    topic: &'a str,
    topic_id: TopicId,
    partition: PartitionIndex,
    broker: i32,
    address: &'a str,
}

struct JobItem {
    index: usize,
    topic: String,
    request: PartitionFetchRequest,
    current_leader_epoch: Option<LeaderEpoch>,
}

/// One partition's outcome.
type Outcome = Result<PartitionFetched, PartitionFetchError>;

struct JobOutput {
    broker: i32,
    connection: BrokerConnection,
    results: Vec<(usize, Outcome)>,
    refresh: bool,
}

impl SourceCluster {
    /// The cluster reached at `bootstrap` (`host:port`, several separated by commas), its
    /// topics selected by `selection`. Nothing is sent until the first request.
    pub fn new(bootstrap: &str, selection: TopicSelection, options: SourceClusterOptions) -> Self {
        let bootstrap = bootstrap
            .split(',')
            .map(str::trim)
            .filter(|a| !a.is_empty())
            .map(|a| KafkaClient::new(a, options.connect_timeout, options.request_timeout))
            .collect();
        SourceCluster {
            bootstrap,
            bootstrap_metadata_requests: 0,
            selection,
            options,
            security: Arc::default(),
            metadata: None,
            metadata_at: None,
            refreshed_at: None,
            stale: true,
            last_metadata_error: None,
            brokers: HashMap::new(),
            metadata_generation: 0,
        }
    }

    /// The same cluster, every connection (bootstrap, Metadata, Fetch, ListOffsets) with
    /// `security` (TLS, SASL). Open connections are closed.
    pub fn with_security(mut self, security: Arc<SecurityConfig>) -> Self {
        self.set_security(security);
        self
    }

    /// Sets the security of every connection; open connections are closed.
    pub fn set_security(&mut self, security: Arc<SecurityConfig>) {
        for client in &mut self.bootstrap {
            let plain = KafkaClient::new(
                client.address(),
                self.options.connect_timeout,
                self.options.request_timeout,
            );
            *client = plain.with_security(security.clone());
        }
        self.brokers.clear();
        self.security = security;
    }

    /// The security of its connections.
    pub fn security(&self) -> &Arc<SecurityConfig> {
        &self.security
    }

    /// The bootstrap addresses, separated by commas.
    pub fn bootstrap(&self) -> String {
        self.bootstrap
            .iter()
            .map(KafkaClient::address)
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The topic selection.
    pub fn selection(&self) -> &TopicSelection {
        &self.selection
    }

    /// The options.
    pub fn options(&self) -> &SourceClusterOptions {
        &self.options
    }

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
        ids.sort_by_key(|id| (!self.brokers[id].client.is_connected(), *id));
        let mut answer = None;
        for id in ids {
            if let Some(connection) = self.brokers.get_mut(&id) {
                connection.stats.metadata_requests += 1;
                if let Ok(snapshot) = connection.client.metadata_topics(Some(&names)) {
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
    fn refresh_if_due(&mut self) {
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

    fn no_metadata(&self) -> ClusterError {
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
        ids.sort_by_key(|id| (!self.brokers[id].client.is_connected(), *id));
        let mut answer: Option<(MetadataSnapshot, String)> = None;
        for id in ids {
            let Some(connection) = self.brokers.get_mut(&id) else {
                continue;
            };
            connection.stats.metadata_requests += 1;
            let address = connection.client.address().to_owned();
            match connection.client.metadata_topics(names.as_deref()) {
                Ok(snapshot) => {
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
                connection.client.disconnect();
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

    /// Checks that this client may read every selected partition before anything is mirrored:
    /// one Fetch per leader broker with all its selected partitions, nothing waited for and at
    /// most one byte asked (Kafka still returns at most one whole batch). The first
    /// authorization error ([`WireError::Denied`], or a TLS / SASL failure) is returned; other
    /// errors are left to the mirror, which reports them per partition.
    pub fn check_read_access(&mut self) -> Result<(), WireError> {
        let metadata = self.metadata().map_err(|e| e.wire().clone())?.clone();
        let mut by_leader: BTreeMap<i32, Vec<(String, FetchPartitionParams)>> = BTreeMap::new();
        for (topic, p) in metadata.partitions() {
            let Some(leader) = p.leader else { continue };
            by_leader.entry(leader).or_default().push((
                topic.name.clone(),
                FetchPartitionParams {
                    topic_id: topic.topic_id,
                    partition: p.index,
                    fetch_offset: 0,
                    last_fetched_epoch: None,
                    current_leader_epoch: None,
                    partition_max_bytes: 1,
                },
            ));
        }
        for (broker, partitions) in by_leader {
            let Some(address) = metadata.brokers.get(&broker) else {
                continue;
            };
            let mut connection = self.take_connection(broker, address);
            let params = FetchManyParams {
                isolation_level: READ_UNCOMMITTED,
                max_wait_ms: 0,
                max_bytes: 1,
                partitions: partitions.iter().map(|(_, p)| *p).collect(),
            };
            connection.stats.fetch_requests += 1;
            connection.stats.partitions_fetched += partitions.len() as u64;
            connection.stats.partitions_sent += partitions.len() as u64;
            let answer = connection.client.fetch_many(&params);
            let principal = connection.client.security().principal();
            self.brokers.insert(broker, connection);
            let answers = match answer {
                Err(e) if e.is_security() => return Err(e),
                Err(_) => continue,
                Ok(answers) => answers,
            };
            for ((topic, _), answer) in partitions.iter().zip(answers) {
                let Ok(answer) = answer else { continue };
                let resource = AclResource::Topic(topic.clone());
                if let Some(acl) =
                    authorization::needed("Fetch", answer.error_code, resource, principal.clone())
                {
                    return Err(WireError::Denied {
                        address: address.clone(),
                        api: "Fetch",
                        code: answer.error_code,
                        name: error_name(answer.error_code),
                        acl: Box::new(acl),
                    });
                }
            }
        }
        Ok(())
    }

    /// Requests sent so far, per broker id.
    pub fn request_stats(&self) -> BTreeMap<i32, BrokerStats> {
        self.brokers.iter().map(|(id, c)| (*id, c.stats)).collect()
    }

    /// Metadata requests sent to the bootstrap addresses (not yet known by broker id).
    pub fn bootstrap_metadata_requests(&self) -> u64 {
        self.bootstrap_metadata_requests
    }

    /// The connection of broker `id` at `address` (a new one if it moved).
    fn take_connection(&mut self, id: i32, address: &str) -> BrokerConnection {
        match self.brokers.remove(&id) {
            Some(c) if c.client.address() == address => c,
            old => BrokerConnection {
                client: KafkaClient::new(
                    address,
                    self.options.connect_timeout,
                    self.options.request_timeout,
                )
                .with_security(self.security.clone()),
                stats: old.map(|c| c.stats).unwrap_or_default(),
                rotation: 0,
                sessions: Default::default(),
            },
        }
    }

    /// The client of broker `id` (connected lazily), for requests this layer does not make.
    pub fn broker_client(&mut self, id: i32) -> Result<&mut KafkaClient, ClusterError> {
        let address =
            self.metadata()?
                .brokers
                .get(&id)
                .cloned()
                .ok_or_else(|| ClusterError::Metadata {
                    tried: self.bootstrap(),
                    last: WireError::Connect {
                        address: format!("broker id {id}"),
                        source: std::io::Error::other("the source's metadata has no such broker"),
                    },
                })?;
        let connection = self.take_connection(id, &address);
        Ok(&mut self.brokers.entry(id).or_insert(connection).client)
    }

    /// The leader of `topic_id` / `partition` in the metadata last had, or why there is none
    /// (no metadata, an unknown topic id or partition, no leader).
    fn resolve(
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

    /// The client of the leader of `topic_id` / `partition` (for requests this layer does not
    /// make, as OffsetForLeaderEpoch), with the topic's name and the leader's id. The
    /// metadata is asked first if it is stale; a failed request through the client should be
    /// followed by [`invalidate_metadata`](Self::invalidate_metadata).
    pub fn leader_client(
        &mut self,
        topic_id: TopicId,
        partition: PartitionIndex,
    ) -> Result<(&mut KafkaClient, String, i32), PartitionFetchError> {
        self.refresh_if_due();
        let leader = self.resolve(topic_id, partition).inspect_err(|e| {
            if !matches!(e, PartitionFetchError::NoMetadata { .. }) {
                self.stale = true;
            }
        })?;
        let connection = self.take_connection(leader.broker, &leader.address);
        let connection = self.brokers.entry(leader.broker).or_insert(connection);
        Ok((&mut connection.client, leader.topic, leader.broker))
    }

    /// ListOffsets of many partitions at `timestamp` ([`EARLIEST_TIMESTAMP`]: the log start;
    /// [`LATEST_TIMESTAMP`]: the HW for read-uncommitted, the LSO for read-committed), one
    /// request per leader broker; one result per partition, in the order asked, with the
    /// errors of [`fetch`](Self::fetch).
    pub fn list_offsets(
        &mut self,
        partitions: &[(TopicId, PartitionIndex)],
        timestamp: i64,
        isolation: FetchIsolation,
    ) -> Vec<Result<Offset, PartitionFetchError>> {
        self.refresh_if_due();
        let mut out: Vec<Option<Result<Offset, PartitionFetchError>>> =
            (0..partitions.len()).map(|_| None).collect();
        let mut groups: BTreeMap<i32, (String, Vec<(usize, String)>)> = BTreeMap::new();
        let mut refresh = false;
        for (index, (topic_id, partition)) in partitions.iter().enumerate() {
            match self.resolve(*topic_id, *partition) {
                Err(e) => {
                    refresh |= !matches!(e, PartitionFetchError::NoMetadata { .. });
                    out[index] = Some(Err(e));
                }
                Ok(leader) => groups
                    .entry(leader.broker)
                    .or_insert_with(|| (leader.address.clone(), Vec::new()))
                    .1
                    .push((index, leader.topic)),
            }
        }
        for (broker, (address, items)) in groups {
            let mut connection = self.take_connection(broker, &address);
            let asked: Vec<(String, i32)> = items
                .iter()
                .map(|(i, topic)| (topic.clone(), partitions[*i].1))
                .collect();
            connection.stats.list_offsets_requests += 1;
            let answer =
                connection
                    .client
                    .list_offsets(&asked, timestamp, isolation_level(isolation));
            if answer.is_err() {
                connection.stats.failed_requests += 1;
                refresh = true;
            }
            for (k, (index, topic)) in items.into_iter().enumerate() {
                let (topic_id, partition) = partitions[index];
                let at = PartitionAt {
                    topic: &topic,
                    topic_id,
                    partition,
                    broker,
                    address: &address,
                };
                let result = match &answer {
                    Err(e) => Err(at.request_failed(e.clone())),
                    Ok(all) => list_offset_answer(&at, all.get(k)),
                };
                if matches!(result, Err(PartitionFetchError::Leadership { .. })) {
                    refresh = true;
                }
                out[index] = Some(result);
            }
            self.brokers.insert(broker, connection);
        }
        if refresh {
            self.stale = true;
        }
        out.into_iter()
            .zip(partitions)
            .map(|(r, (topic_id, partition))| {
                r.unwrap_or_else(|| {
                    Err(PartitionFetchError::Duplicate {
                        topic_id: topic_id.to_string(),
                        partition: *partition,
                    })
                })
            })
            .collect()
    }

    /// Fetches every partition of `requests`: one Fetch per leader broker (per isolation
    /// level), the brokers in parallel; one result per request, in the order asked. See the
    /// [module documentation](self).
    pub fn fetch(&mut self, requests: &[PartitionFetchRequest]) -> Vec<PartitionFetchResult> {
        let mut results: Vec<Option<PartitionFetchResult>> =
            (0..requests.len()).map(|_| None).collect();
        self.fetch_each(requests, |answered| {
            for (index, result) in answered {
                results[index] = Some(result);
            }
        });
        requests
            .iter()
            .zip(results)
            .map(|(request, result)| result.unwrap_or_else(|| unfinished(request)))
            .collect()
    }

    /// As [`SourceCluster::fetch`], but hands the results to `on_answered` as they come, on the
    /// calling thread: once the Fetches are sent, those known without asking (possibly none),
    /// then each broker's as soon as its Fetch is read, while the other brokers' are still
    /// being read (each broker's Fetch runs on a thread of its own, even when there is one).
    /// Each result comes with its index in `requests`; every request gets exactly one.
    pub fn fetch_each(
        &mut self,
        requests: &[PartitionFetchRequest],
        mut on_answered: impl FnMut(Vec<(usize, PartitionFetchResult)>),
    ) {
        let mut answered = vec![false; requests.len()];
        let mut deliver = |answered: &mut Vec<bool>,
                           results: Vec<(usize, Option<i32>, Outcome)>| {
            let results = results
                .into_iter()
                .map(|(index, broker, outcome)| {
                    answered[index] = true;
                    let request = &requests[index];
                    let result = PartitionFetchResult {
                        topic_id: request.topic_id,
                        partition: request.partition,
                        broker,
                        outcome,
                    };
                    (index, result)
                })
                .collect();
            on_answered(results);
        };
        let mut early = Vec::new();
        self.refresh_if_due();
        let mut jobs: BTreeMap<i32, Vec<JobItem>> = BTreeMap::new();
        let mut addresses: BTreeMap<i32, String> = BTreeMap::new();
        let mut seen = HashSet::new();
        let mut refresh = false;
        for (index, request) in requests.iter().enumerate() {
            let hex = || request.topic_id.to_string();
            if !seen.insert((request.topic_id, request.partition)) {
                early.push((
                    index,
                    None,
                    Err(PartitionFetchError::Duplicate {
                        topic_id: hex(),
                        partition: request.partition,
                    }),
                ));
                continue;
            }
            match self.resolve(request.topic_id, request.partition) {
                Err(error) => {
                    refresh |= !matches!(error, PartitionFetchError::NoMetadata { .. });
                    early.push((index, None, Err(error)));
                }
                Ok(leader) => {
                    addresses.insert(leader.broker, leader.address);
                    jobs.entry(leader.broker).or_default().push(JobItem {
                        index,
                        topic: leader.topic,
                        request: *request,
                        current_leader_epoch: match request.current_leader_epoch {
                            CurrentLeaderEpoch::FromMetadata => Some(leader.leader_epoch),
                            CurrentLeaderEpoch::Unchecked => None,
                            CurrentLeaderEpoch::Known(e) => Some(e),
                        },
                    });
                }
            }
        }

        let jobs: Vec<BrokerJob> = jobs
            .into_iter()
            .map(|(broker, items)| BrokerJob {
                broker,
                connection: self.take_connection(broker, &addresses[&broker]),
                items,
            })
            .collect();
        let options = self.options;
        let (done, outputs) = std::sync::mpsc::channel();
        std::thread::scope(|scope| {
            let handles: Vec<_> = jobs
                .into_iter()
                .map(|job| {
                    let done = done.clone();
                    let options = &options;
                    scope.spawn(move || {
                        let _ = done.send(run_job(job, options));
                    })
                })
                .collect();
            drop(done);
            // The Fetches are under way: the caller may work on what it already has.
            deliver(&mut answered, early);
            // Until every thread has sent its output or died (a panicked one sends none).
            for output in outputs {
                refresh |= output.refresh;
                let broker = output.broker;
                self.brokers.insert(broker, output.connection);
                let results = output
                    .results
                    .into_iter()
                    .map(|(index, outcome)| (index, Some(broker), outcome))
                    .collect();
                deliver(&mut answered, results);
            }
            for handle in handles {
                let _ = handle.join();
            }
        });
        if refresh {
            self.stale = true;
        }
        let missing: Vec<(usize, Option<i32>, Outcome)> = answered
            .iter()
            .enumerate()
            .filter(|(_, done)| !**done)
            .map(|(index, _)| (index, None, unfinished(&requests[index]).outcome))
            .collect();
        if !missing.is_empty() {
            deliver(&mut answered, missing);
        }
    }
}

/// The result of a partition whose broker's fetch did not finish (only a panicked fetch
/// thread leaves one).
fn unfinished(request: &PartitionFetchRequest) -> PartitionFetchResult {
    PartitionFetchResult {
        topic_id: request.topic_id,
        partition: request.partition,
        broker: None,
        outcome: Err(PartitionFetchError::Failed {
            topic: request.topic_id.to_string(),
            partition: request.partition,
            source: Box::new(WireError::Malformed {
                address: String::new(),
                api: "Fetch",
                version: -1,
                reason: "the fetch of this partition's broker did not finish".into(),
            }),
        }),
    }
}

/// What to do with one partition's Fetch answer.
#[derive(Debug)]
pub(crate) enum FetchAnswer {
    /// The kernel's answer and where the source's partition is.
    Answer(FetchResponse<RawBatch>, SourcePosition),
    /// `OFFSET_OUT_OF_RANGE`: ask ListOffsets for the log start and the high watermark.
    OutOfRange,
    /// Another Kafka error code.
    Error(i16),
}

/// Maps one partition's Fetch answer as `serve_fetch` answers for a local source (shared by
/// [`KafkaSource`](super::KafkaSource) and [`SourceCluster`]): a diverging epoch as is;
/// records as whole raw batches, those ending below the fetch offset skipped, only those ending
/// below the isolation bound (LSO for read-committed, HW otherwise), at most `max_batches`.
/// A batch that does not parse is the error `(byte position, why)`.
pub(crate) fn map_fetch_answer(
    answer: &PartitionFetch,
    fetch_offset: Offset,
    isolation: FetchIsolation,
    max_batches: usize,
) -> Result<FetchAnswer, (usize, BatchError)> {
    match answer.error_code {
        0 => {}
        codes::OFFSET_OUT_OF_RANGE => return Ok(FetchAnswer::OutOfRange),
        code => return Ok(FetchAnswer::Error(code)),
    }
    let position = SourcePosition {
        log_start_offset: answer.log_start_offset,
        high_watermark: answer.high_watermark,
        last_stable_offset: answer.last_stable_offset,
        // A consumer cannot see the LEO: the high watermark stands for it.
        log_end_offset: answer.high_watermark,
    };
    if let Some(diverging) = answer.diverging_epoch {
        return Ok(FetchAnswer::Answer(
            FetchResponse::Diverging(diverging),
            position,
        ));
    }
    let bound = match isolation {
        FetchIsolation::ReadCommitted => answer.last_stable_offset,
        FetchIsolation::ReadUncommitted | FetchIsolation::Follower => answer.high_watermark,
    };
    let batches: Vec<RawBatch> = split_batches(&answer.records)?
        .into_iter()
        .filter(|b| b.header().last_offset >= fetch_offset)
        .take_while(|b| b.header().last_offset < bound)
        .take(max_batches)
        .collect();
    let last = batches.last().map(RawBatch::header);
    Ok(FetchAnswer::Answer(
        FetchResponse::Records(FetchedRecords {
            next_offset: last.map_or(fetch_offset, |h| h.last_offset.saturating_add(1)),
            last_epoch: last.map(|h| h.partition_leader_epoch),
            batches,
            log_start_offset: position.log_start_offset,
            high_watermark: position.high_watermark,
            last_stable_offset: position.last_stable_offset,
            log_end_offset: position.log_end_offset,
        }),
        position,
    ))
}

/// Splits a fetch's records into whole batches, dropping a partial trailing one (Kafka cuts
/// the last batch at `max_bytes`). Each batch is a slice of `records` (the response's buffer),
/// not a copy. A batch that does not parse is `(byte position, why)`.
pub(crate) fn split_batches(records: &Bytes) -> Result<Vec<RawBatch>, (usize, BatchError)> {
    let mut out = Vec::new();
    let mut pos = 0usize;
    while records.len() - pos >= LOG_OVERHEAD {
        let size = batch_size_from_prefix(&records[pos..]).map_err(|e| (pos, e))?;
        if records.len() - pos < size {
            break;
        }
        out.push(RawBatch::parse(records.slice(pos..pos + size)).map_err(|e| (pos, e))?);
        pos += size;
    }
    Ok(out)
}

/// The Kafka isolation level of the kernel's.
pub(crate) fn isolation_level(isolation: FetchIsolation) -> i8 {
    match isolation {
        FetchIsolation::ReadCommitted => READ_COMMITTED,
        FetchIsolation::ReadUncommitted | FetchIsolation::Follower => READ_UNCOMMITTED,
    }
}

/// One broker's share of a round: its Fetch (one per isolation level), then ListOffsets for
/// the partitions out of range.
fn run_job(mut job: BrokerJob, options: &SourceClusterOptions) -> JobOutput {
    let broker = job.broker;
    let mut results = Vec::with_capacity(job.items.len());
    let mut refresh = false;
    let connection = &mut job.connection;
    let address = connection.client.address().to_owned();
    let mut out_of_range: Vec<&JobItem> = Vec::new();
    for level in [READ_COMMITTED, READ_UNCOMMITTED] {
        let mut items: Vec<&JobItem> = job
            .items
            .iter()
            .filter(|i| isolation_level(i.request.isolation) == level)
            .collect();
        if items.is_empty() {
            continue;
        }
        let len = items.len();
        items.rotate_left(connection.rotation % len);
        connection.rotation = connection.rotation.wrapping_add(1);
        let params = FetchManyParams {
            isolation_level: level,
            max_wait_ms: options.fetch_max_wait_ms,
            max_bytes: options.fetch_max_bytes,
            partitions: items
                .iter()
                .map(|i| FetchPartitionParams {
                    topic_id: i.request.topic_id,
                    partition: i.request.partition,
                    fetch_offset: i.request.fetch_offset,
                    last_fetched_epoch: i.request.last_fetched_epoch,
                    current_leader_epoch: i.current_leader_epoch,
                    partition_max_bytes: options.partition_max_bytes,
                })
                .collect(),
        };
        connection.stats.fetch_requests += 1;
        connection.stats.partitions_fetched += len as u64;
        let answer = if options.fetch_sessions {
            let session = &mut connection.sessions[usize::from(level == READ_COMMITTED)];
            let (incremental, sent) = (session.incremental_requests, session.partitions_sent);
            let answer = connection.client.fetch_many_in_session(session, &params);
            connection.stats.incremental_fetch_requests +=
                session.incremental_requests - incremental;
            connection.stats.partitions_sent += session.partitions_sent - sent;
            answer
        } else {
            connection.stats.partitions_sent += len as u64;
            connection.client.fetch_many(&params)
        };
        let answers = match answer {
            Ok(answers) => answers,
            Err(e) => {
                connection.stats.failed_requests += 1;
                refresh = true;
                for item in items {
                    let at = PartitionAt::of(item, broker, &address);
                    results.push((item.index, Err(at.request_failed(e.clone()))));
                }
                continue;
            }
        };
        for (item, answer) in items.into_iter().zip(answers) {
            let r = &item.request;
            let outcome = match answer {
                Err(e) => Err(PartitionFetchError::Failed {
                    topic: item.topic.clone(),
                    partition: r.partition,
                    source: Box::new(e),
                }),
                Ok(answer) => {
                    match map_fetch_answer(&answer, r.fetch_offset, r.isolation, r.max_batches) {
                        Ok(FetchAnswer::Answer(response, position)) => Ok(PartitionFetched {
                            response,
                            position: Some(position),
                        }),
                        Ok(FetchAnswer::OutOfRange) => {
                            out_of_range.push(item);
                            continue;
                        }
                        Ok(FetchAnswer::Error(code)) => {
                            if codes::is_leadership(code) || code == codes::UNKNOWN_TOPIC_ID {
                                refresh = true;
                            }
                            let principal = connection.client.security().principal();
                            Err(PartitionAt::of(item, broker, &address)
                                .error("Fetch", code, principal))
                        }
                        Err((pos, e)) => Err(PartitionFetchError::Failed {
                            topic: item.topic.clone(),
                            partition: r.partition,
                            source: Box::new(WireError::Malformed {
                                address: address.clone(),
                                api: "Fetch",
                                version: -1,
                                reason: format!(
                                    "the record batch at byte {pos} of {}-{} does not parse: {e}",
                                    item.topic, r.partition
                                ),
                            }),
                        }),
                    }
                }
            };
            results.push((item.index, outcome));
        }
    }
    if !out_of_range.is_empty() {
        let asked: Vec<(String, i32)> = out_of_range
            .iter()
            .map(|i| (i.topic.clone(), i.request.partition))
            .collect();
        let mut answers = Vec::new();
        for timestamp in [EARLIEST_TIMESTAMP, LATEST_TIMESTAMP] {
            connection.stats.list_offsets_requests += 1;
            let answer = connection
                .client
                .list_offsets(&asked, timestamp, READ_UNCOMMITTED);
            if answer.is_err() {
                connection.stats.failed_requests += 1;
                refresh = true;
            }
            answers.push(answer);
        }
        for (k, item) in out_of_range.into_iter().enumerate() {
            let at = PartitionAt::of(item, broker, &address);
            let offset =
                |answer: &Result<Vec<super::client::ListOffsetAnswer>, WireError>| match answer {
                    Err(e) => Err(at.request_failed(e.clone())),
                    Ok(all) => list_offset_answer(&at, all.get(k)),
                };
            let outcome = offset(&answers[0]).and_then(|log_start_offset| {
                offset(&answers[1]).map(|high_watermark| PartitionFetched {
                    response: FetchResponse::OffsetOutOfRange {
                        log_start_offset,
                        log_end_offset: high_watermark,
                    },
                    position: None,
                })
            });
            if matches!(outcome, Err(PartitionFetchError::Leadership { .. })) {
                refresh = true;
            }
            results.push((item.index, outcome));
        }
    }
    JobOutput {
        broker,
        connection: job.connection,
        results,
        refresh,
    }
}

impl PartitionAt<'_> {
    fn of<'a>(item: &'a JobItem, broker: i32, address: &'a str) -> PartitionAt<'a> {
        PartitionAt {
            topic: &item.topic,
            topic_id: item.request.topic_id,
            partition: item.request.partition,
            broker,
            address,
        }
    }

    /// The partition's error for a whole request's failure.
    fn request_failed(&self, e: WireError) -> PartitionFetchError {
        if e.is_connection() {
            PartitionFetchError::Unreachable {
                topic: self.topic.to_owned(),
                partition: self.partition,
                broker: self.broker,
                source: Box::new(e),
            }
        } else {
            PartitionFetchError::Failed {
                topic: self.topic.to_owned(),
                partition: self.partition,
                source: Box::new(e),
            }
        }
    }

    /// The partition's error for its Kafka error code (an authorization error names the ACL
    /// `principal` lacks).
    fn error(
        &self,
        api: &'static str,
        code: i16,
        principal: Option<String>,
    ) -> PartitionFetchError {
        if code == codes::UNKNOWN_TOPIC_ID {
            return PartitionFetchError::UnknownTopicId {
                address: self.address.to_owned(),
                hosted: format!(
                    "no topic with that id (it hosts topic {} under another id, or none)",
                    self.topic
                ),
                asked: self.topic_id.to_string(),
                partition: self.partition,
            };
        }
        if codes::is_leadership(code) {
            return PartitionFetchError::Leadership {
                api,
                topic: self.topic.to_owned(),
                partition: self.partition,
                broker: self.broker,
                address: self.address.to_owned(),
                code,
                name: error_name(code),
            };
        }
        let resource = AclResource::Topic(self.topic.to_owned());
        let source = match authorization::needed(api, code, resource, principal) {
            Some(acl) => WireError::Denied {
                address: self.address.to_owned(),
                api,
                code,
                name: error_name(code),
                acl: Box::new(acl),
            },
            None => WireError::Broker {
                address: self.address.to_owned(),
                api,
                what: format!("topic {} partition {}", self.topic, self.partition),
                code,
                name: error_name(code),
            },
        };
        PartitionFetchError::Failed {
            topic: self.topic.to_owned(),
            partition: self.partition,
            source: Box::new(source),
        }
    }
}

/// A partition's answer in a ListOffsets answer.
fn list_offset_answer(
    at: &PartitionAt<'_>,
    answer: Option<&super::client::ListOffsetAnswer>,
) -> Result<Offset, PartitionFetchError> {
    match answer {
        Some(Ok((offset, _))) => Ok(*offset),
        Some(Err(e)) => Err(match e.code() {
            Some(code) if !matches!(e, WireError::Denied { .. }) => {
                at.error("ListOffsets", code, None)
            }
            Some(_) | None => PartitionFetchError::Failed {
                topic: at.topic.to_owned(),
                partition: at.partition,
                source: Box::new(e.clone()),
            },
        }),
        None => Err(PartitionFetchError::Failed {
            topic: at.topic.to_owned(),
            partition: at.partition,
            source: Box::new(WireError::Malformed {
                address: at.address.to_owned(),
                api: "ListOffsets",
                version: -1,
                reason: "an answer is missing".into(),
            }),
        }),
    }
}

#[cfg(test)]
mod tests {
    use kafka_protocol::messages::ApiKey;

    use super::super::fake_broker::{FakeCluster, FakePartition, FakeTopic};
    use super::*;

    const ORDERS: TopicId = TopicId([1; 16]);
    const PAY_EU: TopicId = TopicId([2; 16]);

    #[test]
    fn split_batches_slices_the_response_and_drops_a_partial_trailing_batch() {
        use kmirror_kernel::batch::BatchHeader;
        let one = RawBatch::synthesize(&BatchHeader::plain(0, 1, 0), 0).unwrap();
        let two = RawBatch::synthesize(&BatchHeader::plain(2, 4, 0), 0).unwrap();
        let mut buf = one.bytes().to_vec();
        buf.extend_from_slice(two.bytes());
        buf.extend_from_slice(&two.bytes()[..20]); // the response's max_bytes cut this one
        let records = Bytes::from(buf);
        let batches = split_batches(&records).unwrap();
        assert_eq!(batches, vec![one.clone(), two]);
        assert_eq!(
            batches[1].bytes().as_ptr(),
            records[one.size_in_bytes()..].as_ptr(),
            "a batch is a slice of the response, not a copy"
        );
    }

    fn options() -> SourceClusterOptions {
        SourceClusterOptions {
            connect_timeout: Duration::from_secs(1),
            request_timeout: Duration::from_secs(2),
            metadata_refresh_backoff: Duration::ZERO,
            ..SourceClusterOptions::default()
        }
    }

    /// Brokers 1 and 2; `orders` with 4 partitions led alternately by 1 and 2, `pay.eu` with
    /// 2 partitions led by 2; 3 batches of 2 records in each partition.
    fn fake() -> FakeCluster {
        FakeCluster::start(
            2,
            vec![
                FakeTopic {
                    name: "orders".into(),
                    id: ORDERS,
                    partitions: (0..4)
                        .map(|i| FakePartition::with_batches(1 + i % 2, 5, 3))
                        .collect(),
                },
                FakeTopic {
                    name: "pay.eu".into(),
                    id: PAY_EU,
                    partitions: (0..2)
                        .map(|_| FakePartition::with_batches(2, 7, 3))
                        .collect(),
                },
            ],
        )
    }

    fn cluster(fake: &FakeCluster, selection: &str) -> SourceCluster {
        SourceCluster::new(
            &fake.address(1),
            TopicSelection::parse(selection).expect("selection"),
            options(),
        )
    }

    fn request(topic_id: TopicId, partition: i32, fetch_offset: Offset) -> PartitionFetchRequest {
        PartitionFetchRequest {
            topic_id,
            partition,
            fetch_offset,
            last_fetched_epoch: None,
            current_leader_epoch: CurrentLeaderEpoch::FromMetadata,
            isolation: FetchIsolation::ReadCommitted,
            max_batches: 100,
        }
    }

    fn all(from: Offset) -> Vec<PartitionFetchRequest> {
        let mut r: Vec<_> = (0..4).map(|p| request(ORDERS, p, from)).collect();
        r.extend((0..2).map(|p| request(PAY_EU, p, from)));
        r
    }

    fn records(result: &PartitionFetchResult) -> &FetchedRecords<RawBatch> {
        match &result.outcome {
            Ok(PartitionFetched {
                response: FetchResponse::Records(r),
                ..
            }) => r,
            other => panic!("expected records, got {other:?}"),
        }
    }

    #[test]
    fn metadata_selects_names_and_globs_and_reports_misses() {
        let fake = fake();
        let mut source = cluster(&fake, "orders,pay.*,audit,x*");
        let metadata = source.metadata().expect("metadata");
        assert_eq!(metadata.cluster_id.as_deref(), Some("fake-cluster"));
        assert_eq!(
            metadata.topics.keys().collect::<Vec<_>>(),
            vec!["orders", "pay.eu"]
        );
        assert_eq!(metadata.partition_count(), 6);
        assert_eq!(metadata.leader_of(ORDERS, 1), Some(2));
        assert_eq!(metadata.topics["pay.eu"].partitions[0].leader_epoch, 7);
        assert_eq!(metadata.brokers.len(), 2);
        let errors: Vec<String> = metadata.errors.iter().map(ToString::to_string).collect();
        assert_eq!(errors.len(), 2, "{errors:?}");
        assert!(
            errors[0].contains("topic audit does not exist"),
            "{errors:?}"
        );
        assert!(errors[1].contains("glob x* matches no topic"), "{errors:?}");
        assert!(errors[0].contains(&fake.address(1)), "{errors:?}");
        // Names only: Metadata asks for just them; an unknown one is its own error.
        let mut named = cluster(&fake, "orders,audit");
        let metadata = named.metadata().expect("metadata");
        assert_eq!(metadata.topics.len(), 1);
        assert!(matches!(
            &metadata.errors[..],
            [TopicError::Selection {
                miss: SelectionMiss::UnknownTopic { .. },
                ..
            }]
        ));
    }

    #[test]
    fn one_fetch_per_broker_covers_all_its_partitions() {
        let fake = fake();
        let mut source = cluster(&fake, "orders,pay.*");
        for round in 0..3 {
            let results = source.fetch(&all(2 * round));
            assert_eq!(results.len(), 6);
            for (r, asked) in results.iter().zip(all(2 * round)) {
                assert_eq!((r.topic_id, r.partition), (asked.topic_id, asked.partition));
                let got = records(r);
                assert_eq!(got.batches.len() as i64, 3 - round, "{r:?}");
                assert_eq!(got.next_offset, 6);
                assert_eq!(got.high_watermark, 6);
            }
            assert_eq!(results[1].broker, Some(2));
            assert_eq!(results[2].broker, Some(1));
        }
        let state = fake.state();
        assert_eq!(state.count(1, ApiKey::Fetch), 3);
        assert_eq!(state.count(2, ApiKey::Fetch), 3);
        // Broker 1 leads orders-0 and orders-2; broker 2 the other four partitions.
        assert!(state
            .requests
            .iter()
            .filter(|(_, k, _)| *k == ApiKey::Fetch as i16)
            .all(|(b, _, n)| *n == if *b == 1 { 2 } else { 4 }));
        drop(state);
        let stats = source.request_stats();
        assert_eq!(stats[&1].fetch_requests, 3);
        assert_eq!(stats[&2].fetch_requests, 3);
        assert_eq!(stats[&2].partitions_fetched, 12);
        assert_eq!(source.bootstrap_metadata_requests(), 1);
    }

    #[test]
    fn fetch_each_hands_over_each_brokers_answers_as_one_batch_and_answers_everything_once() {
        let fake = fake();
        let mut source = cluster(&fake, "orders,pay.*");
        let mut asked = all(0);
        // A duplicate is answered without asking anyone, before the brokers' answers.
        asked.push(asked[0]);
        let mut calls: Vec<Vec<(usize, Option<i32>)>> = Vec::new();
        source.fetch_each(&asked, |answered| {
            calls.push(answered.iter().map(|(i, r)| (*i, r.broker)).collect());
        });
        // Once the Fetches are sent (the duplicate), then once per broker.
        assert_eq!(calls.len(), 3, "{calls:?}");
        assert_eq!(calls[0], vec![(6, None)]);
        let mut brokers: Vec<i32> = calls[1..]
            .iter()
            .map(|call| {
                let broker = call[0].1.expect("a broker's answer");
                assert!(call.iter().all(|(_, b)| *b == Some(broker)), "{call:?}");
                broker
            })
            .collect();
        brokers.sort();
        assert_eq!(brokers, vec![1, 2]);
        let mut indices: Vec<usize> = calls.iter().flatten().map(|(i, _)| *i).collect();
        indices.sort();
        assert_eq!(indices, (0..asked.len()).collect::<Vec<_>>());
    }

    #[test]
    fn fetch_sessions_send_only_changes_and_answer_idle_partitions_from_the_session() {
        let fake = fake();
        fake.state().fetch_sessions = true;
        let mut source = cluster(&fake, "orders,pay.*");
        // Round 1 is full and opens a session per broker; everything is read.
        for r in source.fetch(&all(0)) {
            assert_eq!(records(&r).next_offset, 6, "{r:?}");
        }
        // Rounds 2 and 3, caught up: round 2 sends the new offsets, round 3 nothing; the
        // broker answers nothing new and every partition is answered from the session.
        for _ in 0..2 {
            for r in source.fetch(&all(6)) {
                let got = records(&r);
                assert!(got.batches.is_empty(), "{r:?}");
                assert_eq!((got.next_offset, got.high_watermark), (6, 6), "{r:?}");
                assert_eq!(got.log_start_offset, 0);
            }
        }
        // A new batch on orders-1 (broker 2) is the only news.
        {
            let mut state = fake.state();
            let batch =
                RawBatch::synthesize(&kmirror_kernel::batch::BatchHeader::plain(6, 7, 5), 1_000)
                    .expect("batch");
            state.topics[0].partitions[1].batches.push(batch);
        }
        let results = source.fetch(&all(6));
        for r in &results {
            let got = records(r);
            if (r.topic_id, r.partition) == (ORDERS, 1) {
                assert_eq!((got.batches.len(), got.next_offset), (1, 8), "{r:?}");
                assert_eq!(got.high_watermark, 8);
            } else {
                assert!(got.batches.is_empty(), "{r:?}");
            }
        }
        // The broker forgets the sessions (a restart): the next round reopens them at once.
        fake.state().sessions.clear();
        let mut asked = all(6);
        asked[1].fetch_offset = 8;
        for r in source.fetch(&asked) {
            assert!(records(&r).batches.is_empty(), "{r:?}");
        }
        let state = fake.state();
        let broker2: Vec<usize> = state
            .requests
            .iter()
            .filter(|(b, k, _)| *b == 2 && *k == ApiKey::Fetch as i16)
            .map(|(_, _, n)| *n)
            .collect();
        // Full (4), the new offsets (4), nothing (0), nothing (0), the rejected incremental
        // carrying orders-1's new offset (1), full again (4).
        assert_eq!(broker2, vec![4, 4, 0, 0, 1, 4]);
        drop(state);
        let stats = source.request_stats()[&2];
        assert_eq!(stats.fetch_requests, 5);
        assert_eq!(stats.incremental_fetch_requests, 3);
        assert_eq!(stats.partitions_fetched, 20);
        assert_eq!(stats.partitions_sent, 13);
    }

    #[test]
    fn without_fetch_sessions_every_request_is_full() {
        let fake = fake();
        fake.state().fetch_sessions = true;
        let mut source = SourceCluster::new(
            &fake.address(1),
            TopicSelection::parse("orders").expect("selection"),
            SourceClusterOptions {
                fetch_sessions: false,
                ..options()
            },
        );
        for from in [0, 6, 6] {
            for r in source.fetch(&(0..4).map(|p| request(ORDERS, p, from)).collect::<Vec<_>>()) {
                assert_eq!(records(&r).next_offset, 6);
            }
        }
        assert!(fake.state().sessions.is_empty());
        assert_eq!(source.request_stats()[&1].incremental_fetch_requests, 0);
    }

    #[test]
    fn each_partition_gets_its_own_outcome_in_one_request() {
        let fake = fake();
        let mut source = cluster(&fake, "orders");
        source.metadata().expect("metadata");
        {
            let mut state = fake.state();
            let orders = &mut state.topics[0].partitions;
            // orders-0 (broker 1): diverging after an unclean election on the source.
            orders[0].diverging = Some((4, 3));
            // orders-2 (broker 1): its leader moved to broker 2 (the cached metadata is old).
            orders[2].leader = 2;
            orders[2].epoch = 6;
            // orders-1 (broker 2): the log start moved past the fetch offset.
            orders[1].log_start = 4;
            orders[1].batches.drain(..2);
            // orders-3 (broker 2): some other error.
            orders[3].fetch_error = Some(87);
        }
        let mut asked: Vec<_> = (0..4).map(|p| request(ORDERS, p, 2)).collect();
        asked[0].last_fetched_epoch = Some(5);
        let results = source.fetch(&asked);
        match &results[0].outcome {
            Ok(PartitionFetched {
                response: FetchResponse::Diverging(d),
                position: Some(_),
            }) => assert_eq!((d.epoch, d.end_offset), (4, 3)),
            other => panic!("expected diverging, got {other:?}"),
        }
        match &results[1].outcome {
            Ok(PartitionFetched {
                response:
                    FetchResponse::OffsetOutOfRange {
                        log_start_offset,
                        log_end_offset,
                    },
                position: None,
            }) => assert_eq!((*log_start_offset, *log_end_offset), (4, 6)),
            other => panic!("expected out of range, got {other:?}"),
        }
        let error = results[2].outcome.as_ref().expect_err("not the leader");
        assert!(
            matches!(
                error,
                PartitionFetchError::Leadership {
                    code: 6,
                    broker: 1,
                    ..
                }
            ),
            "{error}"
        );
        assert!(error.is_retryable());
        let message = error.to_string();
        for part in [
            "orders",
            "partition 2",
            "NOT_LEADER_OR_FOLLOWER",
            &fake.address(1),
        ] {
            assert!(message.contains(part), "{message}");
        }
        let error = results[3].outcome.as_ref().expect_err("other error");
        assert!(
            matches!(error, PartitionFetchError::Failed { .. }),
            "{error}"
        );
        assert!(!error.is_retryable());
        // One Fetch per broker, one ListOffsets pair for the partition out of range.
        assert_eq!(fake.state().count(1, ApiKey::Fetch), 1);
        assert_eq!(fake.state().count(2, ApiKey::Fetch), 1);
        assert_eq!(fake.state().count(2, ApiKey::ListOffsets), 2);

        // The leadership error refreshed the metadata: orders-2 now goes to broker 2, at the
        // same offset.
        assert!(source.metadata_is_stale());
        let results = source.fetch(&[request(ORDERS, 2, 2)]);
        assert_eq!(results[0].broker, Some(2));
        assert_eq!(records(&results[0]).next_offset, 6);
    }

    #[test]
    fn an_unreachable_broker_fails_only_its_partitions() {
        let fake = fake();
        let mut source = cluster(&fake, "orders,pay.*");
        source.metadata().expect("metadata");
        fake.state().down.insert(2);
        let results = source.fetch(&all(0));
        for r in &results {
            if r.broker == Some(2) {
                let error = r.outcome.as_ref().expect_err("broker 2 is down");
                assert!(
                    matches!(error, PartitionFetchError::Unreachable { broker: 2, .. }),
                    "{error}"
                );
                assert!(error.is_retryable());
                assert!(error.to_string().contains(&fake.address(2)), "{error}");
            } else {
                assert_eq!(records(r).batches.len(), 3);
            }
        }
        assert_eq!(results.iter().filter(|r| r.outcome.is_ok()).count(), 2);
        // The leaders move to broker 1; the next round follows them.
        {
            let mut state = fake.state();
            for t in &mut state.topics {
                for p in &mut t.partitions {
                    p.leader = 1;
                    p.epoch += 1;
                }
            }
        }
        let results = source.fetch(&all(0));
        assert!(results.iter().all(|r| r.broker == Some(1)), "{results:?}");
        assert!(results.iter().all(|r| records(r).batches.len() == 3));
        assert_eq!(source.request_stats()[&2].failed_requests, 1);
    }

    #[test]
    fn refreshes_after_errors_wait_for_the_backoff() {
        let fake = fake();
        let mut source = SourceCluster::new(
            &fake.address(1),
            TopicSelection::parse("orders").expect("selection"),
            SourceClusterOptions {
                metadata_refresh_backoff: Duration::from_secs(3600),
                ..options()
            },
        );
        source.metadata().expect("metadata");
        fake.state().topics[0].partitions[0].leader = 2;
        let metadata_requests = |fake: &FakeCluster| {
            let state = fake.state();
            state.count(1, ApiKey::Metadata) + state.count(2, ApiKey::Metadata)
        };
        assert_eq!(metadata_requests(&fake), 1);
        for _ in 0..3 {
            let results = source.fetch(&[request(ORDERS, 0, 0)]);
            assert!(matches!(
                results[0].outcome,
                Err(PartitionFetchError::Leadership { code: 6, .. })
            ));
        }
        assert_eq!(metadata_requests(&fake), 1, "no refresh within the backoff");
        assert!(source.metadata_is_stale());
        // Asked for explicitly, it refreshes at once.
        source.refresh_metadata().expect("metadata");
        assert_eq!(
            records(&source.fetch(&[request(ORDERS, 0, 0)])[0])
                .batches
                .len(),
            3
        );
    }

    #[test]
    fn fenced_and_unknown_leader_epochs_are_retryable() {
        let fake = fake();
        let mut source = cluster(&fake, "orders");
        let mut asked = vec![request(ORDERS, 0, 0), request(ORDERS, 2, 0)];
        asked[0].current_leader_epoch = CurrentLeaderEpoch::Known(4);
        asked[1].current_leader_epoch = CurrentLeaderEpoch::Known(9);
        let results = source.fetch(&asked);
        let codes: Vec<i16> = results
            .iter()
            .map(|r| match r.outcome.as_ref().expect_err("fenced") {
                PartitionFetchError::Leadership { code, .. } => *code,
                other => panic!("{other}"),
            })
            .collect();
        assert_eq!(codes, vec![74, 75]);
        // Unchecked: the broker does not compare.
        asked[0].current_leader_epoch = CurrentLeaderEpoch::Unchecked;
        assert_eq!(records(&source.fetch(&asked[..1])[0]).batches.len(), 3);
    }

    #[test]
    fn unknown_topic_ids_duplicates_and_no_metadata_are_per_partition() {
        let fake = fake();
        let mut source = cluster(&fake, "orders");
        let results = source.fetch(&[
            request(ORDERS, 0, 0),
            request(ORDERS, 0, 0),
            request(TopicId([9; 16]), 0, 0),
            request(ORDERS, 7, 0),
        ]);
        assert_eq!(records(&results[0]).batches.len(), 3);
        assert!(matches!(
            results[1].outcome,
            Err(PartitionFetchError::Duplicate { .. })
        ));
        let error = results[2].outcome.as_ref().expect_err("unknown id");
        assert!(matches!(error, PartitionFetchError::UnknownTopicId { .. }));
        assert!(error.to_string().contains("UNKNOWN_TOPIC_ID"), "{error}");
        let error = results[3].outcome.as_ref().expect_err("no partition 7");
        assert!(error.to_string().contains("4 partitions"), "{error}");

        // Nothing listens: every partition says so, naming the address.
        let mut nowhere = SourceCluster::new(
            "127.0.0.1:1",
            TopicSelection::parse("orders").expect("selection"),
            options(),
        );
        let error = nowhere.metadata().expect_err("nothing listens");
        assert!(error.to_string().contains("127.0.0.1:1"), "{error}");
        let results = nowhere.fetch(&[request(ORDERS, 0, 0)]);
        let error = results[0].outcome.as_ref().expect_err("no metadata");
        assert!(
            matches!(error, PartitionFetchError::NoMetadata { .. }),
            "{error}"
        );
        assert!(error.to_string().contains("127.0.0.1:1"), "{error}");
    }

    #[test]
    fn a_partial_trailing_batch_and_max_batches_trim_like_kafka_source() {
        let answer = |records: Vec<u8>| PartitionFetch {
            error_code: 0,
            high_watermark: 10,
            last_stable_offset: 4,
            log_start_offset: 0,
            diverging_epoch: None,
            aborted_transactions: vec![],
            records: records.into(),
        };
        let batch = |b, l| {
            RawBatch::synthesize(&kmirror_kernel::batch::BatchHeader::plain(b, l, 0), 1)
                .expect("batch")
        };
        let mut bytes = Vec::new();
        for (b, l) in [(0, 1), (2, 3), (4, 5)] {
            bytes.extend_from_slice(batch(b, l).bytes());
        }
        bytes.truncate(bytes.len() - 3);
        let map = |iso, max| match map_fetch_answer(&answer(bytes.clone()), 2, iso, max) {
            Ok(FetchAnswer::Answer(FetchResponse::Records(r), _)) => r,
            other => panic!("{other:?}"),
        };
        // From offset 2, below the LSO 4: only [2, 3].
        let r = map(FetchIsolation::ReadCommitted, 10);
        assert_eq!(r.batches, vec![batch(2, 3)]);
        assert_eq!((r.next_offset, r.last_epoch), (4, Some(0)));
        // Read-uncommitted reads to the HW, but [4, 5] is cut: still only [2, 3].
        assert_eq!(map(FetchIsolation::ReadUncommitted, 10).batches.len(), 1);
        assert!(map(FetchIsolation::ReadCommitted, 0).batches.is_empty());
        assert_eq!(map(FetchIsolation::ReadCommitted, 0).next_offset, 2);
    }
}
