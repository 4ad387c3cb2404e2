//! [`KafkaSource`]: one partition of a live Kafka cluster as the [`Source`] of a mirror.
//!
//! It answers the driver's requests the way the kernel's
//! [`serve_fetch`](kmirror_kernel::fetch::serve_fetch) answers for a local source:
//!
//! - **Fetch**: a consumer Fetch (replica id -1, no fetch session) by topic id, carrying the last
//!   fetched epoch. Kafka's `Partition.readRecords` applies the KIP-320 check to consumer
//!   fetches as well, with the rules `serve_fetch` copies: an undefined end offset for the
//!   epoch, or a fetch offset below the log start, is `OFFSET_OUT_OF_RANGE`; an end offset
//!   below the fetch offset or a smaller epoch is a diverging epoch. So the broker's answer maps
//!   one to one:
//!   - a diverging epoch -> [`FetchResponse::Diverging`];
//!   - `OFFSET_OUT_OF_RANGE` -> [`FetchResponse::OffsetOutOfRange`] with the log start offset
//!     (ListOffsets earliest) and, as the log end offset, the **high watermark** (ListOffsets
//!     latest, read-uncommitted): a consumer cannot see the LEO. The kernel's rule then
//!     truncates at most to the HW, which only re-fetches what is above it;
//!   - records -> [`FetchResponse::Records`]: the raw batches exactly as the broker sent them,
//!     without a partial trailing batch (Kafka cuts the last batch at `max_bytes`), without
//!     batches that end below the fetch offset, only those ending below the isolation bound
//!     (the LSO for read-committed, the HW otherwise), at most `max_batches`. A read-committed
//!     fetch returns aborted transactions' batches and their markers like any other batch: the
//!     mirror copies them as they are (the consumer-side filtering is not applied).
//!
//!   The fetcher's `FetchIsolation::Follower` (up to the LEO) cannot be had as a consumer; it
//!   reads up to the HW, like read-uncommitted.
//! - **LME query**: a stock Kafka broker has no KIP-1279 `__mirror_state`, so the answer is
//!   always "no LME" (Kafka's -1), with the log start offset from ListOffsets (earliest).
//! - **Topic ids**: Metadata gives the topic's id; a fetch for another id is answered
//!   `UNKNOWN_TOPIC_ID` by the broker and reported as [`SourceError::UnknownTopicId`] naming
//!   the broker, the topic and both ids.
//!
//! It sits on a [`SourceCluster`] selecting just its topic: requests go to the partition's
//! leader (found with Metadata from a broker, the bootstrap addresses first), through the
//! cluster's coalesced fetch with this one partition (sent without a current leader epoch, -1,
//! as before the cluster layer existed). A failed request is reported as it is (the kernel
//! retries with its back-off); the connection is reopened and the leader looked up again on the
//! next request. [`Source::release`] keeps the connections: a broker serves many clients at
//! once.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use kmirror_kernel::config::FetchIsolation;
use kmirror_kernel::fetch::FetchResponse;
use kmirror_kernel::types::{LeaderEpoch, MirrorName, Offset, PartitionIndex, TopicId};

use super::client::{PartitionMetadata, TopicMetadata, EARLIEST_TIMESTAMP};
use super::security::SecurityConfig;
#[cfg(test)]
use super::source_cluster::split_batches;
use super::source_cluster::{
    ClusterError, CurrentLeaderEpoch, PartitionFetchError, PartitionFetchRequest, PartitionFetched,
    SourceCluster, SourceClusterOptions, TopicError,
};
use super::topic_selection::{TopicPattern, TopicSelection};
use super::{codes, error_name, WireError};
use crate::record_batch::RawBatch;
use crate::source::{LmeAnswer, Source, SourceError, SourcePosition};

/// Timeouts and sizes of a [`KafkaSource`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KafkaSourceOptions {
    /// How long a TCP connect may take.
    pub connect_timeout: Duration,
    /// How long a request may wait for its answer.
    pub request_timeout: Duration,
    /// How long the broker may hold a Fetch waiting for data (`max_wait_ms`).
    pub fetch_max_wait_ms: i32,
    /// The most bytes of records one Fetch returns (`max_bytes`, `partition_max_bytes`).
    pub fetch_max_bytes: i32,
}

impl Default for KafkaSourceOptions {
    /// 3 s to connect, 30 s per request, fetches held at most 100 ms, 8 MiB per fetch.
    fn default() -> Self {
        KafkaSourceOptions {
            connect_timeout: Duration::from_secs(3),
            request_timeout: Duration::from_secs(30),
            fetch_max_wait_ms: 100,
            fetch_max_bytes: 8 << 20,
        }
    }
}

impl From<KafkaSourceOptions> for SourceClusterOptions {
    /// The same timeouts; `fetch_max_bytes` both in all and per partition.
    fn from(o: KafkaSourceOptions) -> Self {
        SourceClusterOptions {
            connect_timeout: o.connect_timeout,
            request_timeout: o.request_timeout,
            fetch_max_wait_ms: o.fetch_max_wait_ms,
            fetch_max_bytes: o.fetch_max_bytes,
            partition_max_bytes: o.fetch_max_bytes,
            ..SourceClusterOptions::default()
        }
    }
}

/// A partition of a live Kafka cluster. See the [module documentation](self).
#[derive(Debug)]
pub struct KafkaSource {
    bootstrap: String,
    cluster: SourceCluster,
    topic: String,
    partition: PartitionIndex,
    metadata: Option<TopicMetadata>,
    position: Option<SourcePosition>,
}

impl KafkaSource {
    /// Partition `partition` of `topic` at the cluster whose broker listens at `bootstrap`
    /// (`host:port`). Nothing is sent until the first request.
    pub fn new(
        bootstrap: &str,
        topic: &str,
        partition: PartitionIndex,
        options: KafkaSourceOptions,
    ) -> Self {
        // A name that is no legal topic name selects nothing: Metadata is still asked (and the
        // broker says the topic is unknown), as before the cluster layer.
        let selection = TopicSelection::names(&[topic]).unwrap_or_else(|_| {
            TopicSelection::from_patterns(vec![TopicPattern::Name(topic.to_owned())])
        });
        KafkaSource {
            bootstrap: bootstrap.to_owned(),
            cluster: SourceCluster::new(bootstrap, selection, options.into()),
            topic: topic.to_owned(),
            partition,
            metadata: None,
            position: None,
        }
    }

    /// The bootstrap broker's address.
    pub fn bootstrap(&self) -> &str {
        &self.bootstrap
    }

    /// The cluster layer underneath (its metadata, its request counts).
    pub fn cluster(&self) -> &SourceCluster {
        &self.cluster
    }

    /// The same source, every connection with `security` (TLS, SASL).
    pub fn with_security(mut self, security: Arc<SecurityConfig>) -> Self {
        self.cluster.set_security(security);
        self
    }

    /// Checks that this client may read the partition (see
    /// [`SourceCluster::check_read_access`]): a missing ACL, a refused login or an untrusted
    /// certificate is the error.
    pub fn check_read_access(&mut self) -> Result<(), WireError> {
        self.cluster.check_read_access()
    }

    /// The topic's metadata (asked again when `refresh`, when none is cached, or after a
    /// failure).
    pub fn metadata(&mut self, refresh: bool) -> Result<&TopicMetadata, SourceError> {
        if refresh || self.metadata.is_none() || self.cluster.metadata_is_stale() {
            self.metadata = None;
            let answer = if refresh {
                self.cluster.refresh_metadata()
            } else {
                self.cluster.metadata()
            };
            let metadata = answer.map_err(cluster_error)?;
            let metadata_error = |code: i16, what: String| {
                SourceError::Kafka(WireError::Broker {
                    address: metadata.answered_by.clone(),
                    api: "Metadata",
                    what,
                    code,
                    name: error_name(code),
                })
            };
            if let Some(error) = metadata.errors.first() {
                let code = match error {
                    TopicError::Selection { .. } => codes::UNKNOWN_TOPIC_OR_PARTITION,
                    TopicError::Broker { code, .. } => *code,
                    TopicError::Denied {
                        address,
                        code,
                        name,
                        acl,
                    } => {
                        return Err(SourceError::Kafka(WireError::Denied {
                            address: address.clone(),
                            api: "Metadata",
                            code: *code,
                            name: name.clone(),
                            acl: Box::new(acl.clone()),
                        }))
                    }
                };
                return Err(metadata_error(code, format!("topic {}", self.topic)));
            }
            let Some(topic) = metadata.topics.get(&self.topic) else {
                return Err(metadata_error(
                    codes::UNKNOWN_TOPIC_OR_PARTITION,
                    format!("topic {}", self.topic),
                ));
            };
            if topic.partition(self.partition).is_none() {
                return Err(metadata_error(
                    codes::UNKNOWN_TOPIC_OR_PARTITION,
                    format!(
                        "topic {} partition {} (the topic has {} partitions)",
                        self.topic,
                        self.partition,
                        topic.partitions.len()
                    ),
                ));
            }
            self.metadata = Some(TopicMetadata {
                cluster_id: metadata.cluster_id.clone(),
                topic: topic.name.clone(),
                topic_id: topic.topic_id,
                partitions: topic
                    .partitions
                    .iter()
                    .map(|p| PartitionMetadata {
                        index: p.index,
                        leader_id: p.leader.unwrap_or(-1),
                        leader_epoch: p.leader_epoch,
                        error_code: p.error_code,
                    })
                    .collect(),
                brokers: metadata
                    .brokers
                    .iter()
                    .map(|(id, a)| (*id, a.clone()))
                    .collect(),
            });
        }
        self.metadata
            .as_ref()
            .ok_or_else(|| SourceError::Unavailable {
                dir: self.address_path(),
                reason: "no metadata".into(),
            })
    }

    fn address_path(&self) -> PathBuf {
        PathBuf::from(&self.bootstrap)
    }

    /// Checks that the broker hosts `topic_id` under our topic name (asking Metadata again
    /// when the cached id differs).
    fn check_topic(&mut self, topic_id: TopicId) -> Result<(), SourceError> {
        if self.metadata(false)?.topic_id == topic_id {
            return Ok(());
        }
        let hosted = self.metadata(true)?.topic_id;
        if hosted == topic_id {
            return Ok(());
        }
        Err(self.unknown_topic_id(Some(hosted), topic_id))
    }

    fn unknown_topic_id(&self, hosted: Option<TopicId>, asked: TopicId) -> SourceError {
        SourceError::UnknownTopicId {
            dir: self.address_path(),
            hosted: match hosted {
                Some(id) => format!("{id} for topic {}", self.topic),
                None => format!("none for topic {} (it does not exist)", self.topic),
            },
            asked: asked.to_string(),
        }
    }

    /// The topic's id, from the metadata.
    fn topic_id(&mut self) -> Result<TopicId, SourceError> {
        Ok(self.metadata(false)?.topic_id)
    }

    /// A partition's error as the source's: the wire error (naming the broker and the API) as
    /// before the cluster layer; the metadata is asked again on the next request.
    fn failed(&mut self, error: PartitionFetchError) -> SourceError {
        self.metadata = None;
        self.cluster.invalidate_metadata();
        SourceError::Kafka(match error {
            PartitionFetchError::Leadership {
                api,
                topic,
                partition,
                address,
                code,
                name,
                ..
            } => WireError::Broker {
                address,
                api,
                what: format!("topic {topic} partition {partition}"),
                code,
                name,
            },
            PartitionFetchError::NoLeader {
                topic,
                partition,
                address,
            } => WireError::Broker {
                address,
                api: "Metadata",
                what: format!("the leader of topic {topic} partition {partition}"),
                code: codes::LEADER_NOT_AVAILABLE,
                name: error_name(codes::LEADER_NOT_AVAILABLE),
            },
            PartitionFetchError::Unreachable { source, .. }
            | PartitionFetchError::NoMetadata { source, .. }
            | PartitionFetchError::Failed { source, .. } => *source,
            other @ (PartitionFetchError::UnknownTopicId { .. }
            | PartitionFetchError::Duplicate { .. }) => WireError::Broker {
                address: self.bootstrap.clone(),
                api: "Fetch",
                what: other.to_string(),
                code: codes::UNKNOWN_TOPIC_ID,
                name: error_name(codes::UNKNOWN_TOPIC_ID),
            },
        })
    }

    fn list_offset(
        &mut self,
        timestamp: i64,
        isolation: FetchIsolation,
    ) -> Result<Offset, SourceError> {
        let topic_id = self.topic_id()?;
        let answer = self
            .cluster
            .list_offsets(&[(topic_id, self.partition)], timestamp, isolation)
            .pop();
        match answer {
            Some(Ok(offset)) => Ok(offset),
            Some(Err(e)) => Err(self.failed(e)),
            None => Err(SourceError::Unavailable {
                dir: self.address_path(),
                reason: "ListOffsets gave no answer".into(),
            }),
        }
    }

    /// Kafka's own check of a fetcher's last fetched epoch, asked separately: OffsetForLeaderEpoch
    /// as a consumer for `epoch`. (The fetch path does not need it: the broker applies the same
    /// check to the Fetch itself.)
    pub fn end_offset_for_epoch(
        &mut self,
        epoch: LeaderEpoch,
    ) -> Result<kmirror_kernel::types::EpochAndOffset, SourceError> {
        let topic_id = self.topic_id()?;
        let partition = self.partition;
        let result = match self.cluster.leader_client(topic_id, partition) {
            Ok((client, topic, _)) => client
                .offset_for_leader_epoch(&topic, partition, epoch)
                .map_err(|e| PartitionFetchError::Failed {
                    topic,
                    partition,
                    source: Box::new(e),
                }),
            Err(e) => Err(e),
        };
        result.map_err(|e| self.failed(e))
    }

    /// Splits a fetch's records into whole batches (dropping a partial trailing one).
    #[cfg(test)]
    fn batches(&self, records: &[u8]) -> Result<Vec<RawBatch>, SourceError> {
        split_batches(&bytes::Bytes::copy_from_slice(records)).map_err(|(pos, e)| {
            SourceError::Kafka(WireError::Malformed {
                address: self.bootstrap.clone(),
                api: "Fetch",
                version: -1,
                reason: format!(
                    "the record batch at byte {pos} of {}-{} does not parse: {e}",
                    self.topic, self.partition
                ),
            })
        })
    }
}

/// The cluster layer's failure to get metadata as the source's: the last broker's error.
fn cluster_error(e: ClusterError) -> SourceError {
    SourceError::Kafka(e.wire().clone())
}

impl Source for KafkaSource {
    fn describe(&self) -> String {
        format!(
            "Kafka broker {} (topic {} partition {})",
            self.bootstrap, self.topic, self.partition
        )
    }

    fn cluster_name(&mut self) -> Result<MirrorName, SourceError> {
        let dir = self.address_path();
        let id = self.metadata(false)?.cluster_id.clone();
        let id = id.ok_or_else(|| SourceError::Unavailable {
            dir: dir.clone(),
            reason: "the broker reports no cluster id; give the mirror a name".into(),
        })?;
        MirrorName::new(id.clone()).map_err(|e| SourceError::Unavailable {
            dir,
            reason: format!(
                "its cluster id {id:?} cannot be a mirror name ({e}); give the mirror a name"
            ),
        })
    }

    fn topic(&mut self) -> Result<(String, TopicId), SourceError> {
        let m = self.metadata(true)?;
        Ok((m.topic.clone(), m.topic_id))
    }

    fn fetch(
        &mut self,
        topic_id: TopicId,
        fetch_offset: Offset,
        last_fetched_epoch: Option<LeaderEpoch>,
        isolation: FetchIsolation,
        max_batches: usize,
    ) -> Result<FetchResponse<RawBatch>, SourceError> {
        self.check_topic(topic_id)?;
        let request = PartitionFetchRequest {
            topic_id,
            partition: self.partition,
            fetch_offset,
            last_fetched_epoch,
            current_leader_epoch: CurrentLeaderEpoch::Unchecked,
            isolation,
            max_batches,
        };
        let outcome = self.cluster.fetch(&[request]).pop().map(|r| r.outcome);
        match outcome {
            Some(Ok(PartitionFetched { response, position })) => {
                if position.is_some() {
                    self.position = position;
                }
                Ok(response)
            }
            Some(Err(PartitionFetchError::UnknownTopicId { .. })) => {
                self.metadata = None;
                let hosted = match self.metadata(true) {
                    Ok(m) => Some(m.topic_id),
                    Err(SourceError::Kafka(e))
                        if e.code() == Some(codes::UNKNOWN_TOPIC_OR_PARTITION) =>
                    {
                        None
                    }
                    Err(e) => return Err(e),
                };
                Err(self.unknown_topic_id(hosted, topic_id))
            }
            Some(Err(e)) => Err(self.failed(e)),
            None => Err(SourceError::Unavailable {
                dir: self.address_path(),
                reason: "the fetch gave no answer".into(),
            }),
        }
    }

    fn last_mirrored_epoch(
        &mut self,
        topic_id: TopicId,
        partition: PartitionIndex,
    ) -> Result<LmeAnswer, SourceError> {
        self.check_topic(topic_id)?;
        if partition != self.partition {
            return Err(SourceError::Unavailable {
                dir: self.address_path(),
                reason: format!(
                    "asked about partition {partition} of {}, but this source reads partition {}",
                    self.topic, self.partition
                ),
            });
        }
        // A stock Kafka broker keeps no KIP-1279 __mirror_state: no LME (Kafka's -1).
        let log_start_offset =
            self.list_offset(EARLIEST_TIMESTAMP, FetchIsolation::ReadUncommitted)?;
        Ok(LmeAnswer {
            lme: None,
            log_start_offset,
        })
    }

    fn position(&self) -> Option<SourcePosition> {
        self.position
    }

    fn release(&mut self) {
        // Nothing to release: the broker serves other clients while we hold a connection.
    }
}

#[cfg(test)]
mod tests {
    use kmirror_kernel::batch::BatchHeader;

    use super::*;

    fn source() -> KafkaSource {
        KafkaSource::new("127.0.0.1:1", "orders", 0, KafkaSourceOptions::default())
    }

    fn batch(base: Offset, last: Offset) -> RawBatch {
        RawBatch::synthesize(&BatchHeader::plain(base, last, 0), 1_000).expect("batch")
    }

    #[test]
    fn a_partial_trailing_batch_is_dropped() {
        let mut buf = Vec::new();
        buf.extend_from_slice(batch(0, 2).bytes());
        buf.extend_from_slice(batch(3, 4).bytes());
        let whole = source().batches(&buf).expect("parse");
        assert_eq!(whole.len(), 2);
        for cut in [1, 11, 12, 30] {
            let parsed = source().batches(&buf[..buf.len() - cut]).expect("parse");
            assert_eq!(parsed, vec![batch(0, 2)], "cut {cut}");
        }
        assert!(source().batches(&[]).expect("empty").is_empty());
    }

    #[test]
    fn a_corrupt_batch_is_a_malformed_fetch() {
        let mut buf = batch(0, 2).bytes().to_vec();
        let last = buf.len() - 1;
        buf[last] ^= 0xff;
        let error = source().batches(&buf).expect_err("bad CRC");
        assert!(
            matches!(
                error,
                SourceError::Kafka(WireError::Malformed { api: "Fetch", .. })
            ),
            "{error}"
        );
        assert!(error.to_string().contains("orders-0"), "{error}");
    }

    #[test]
    fn an_unreachable_broker_is_a_clear_source_error() {
        let error = source().topic().expect_err("nothing listens on port 1");
        let message = error.to_string();
        assert!(
            message.contains("cannot connect to Kafka broker 127.0.0.1:1"),
            "{message}"
        );
    }

    mod on_a_fake_cluster {
        use super::super::super::fake_broker::{FakeCluster, FakePartition, FakeTopic};
        use super::*;

        const ORDERS: TopicId = TopicId([1; 16]);

        fn fake() -> FakeCluster {
            FakeCluster::start(
                2,
                vec![FakeTopic {
                    name: "orders".into(),
                    id: ORDERS,
                    partitions: vec![
                        FakePartition::with_batches(1, 3, 4),
                        FakePartition::with_batches(2, 3, 4),
                    ],
                }],
            )
        }

        #[test]
        fn fetches_follow_the_leader_and_map_like_before() {
            let fake = fake();
            let mut source =
                KafkaSource::new(&fake.address(1), "orders", 1, KafkaSourceOptions::default());
            assert_eq!(source.topic().expect("metadata"), ("orders".into(), ORDERS));
            assert_eq!(
                source.cluster_name().expect("name").to_string(),
                "fake-cluster"
            );
            let fetched = source
                .fetch(ORDERS, 2, None, FetchIsolation::ReadCommitted, 2)
                .expect("fetch");
            let FetchResponse::Records(r) = fetched else {
                panic!("{fetched:?}")
            };
            assert_eq!(
                (r.batches.len(), r.next_offset, r.last_epoch),
                (2, 6, Some(3))
            );
            assert_eq!(source.position().map(|p| p.high_watermark), Some(8));
            // Partition 1 moves to broker 1: one NOT_LEADER_OR_FOLLOWER naming broker 2, then
            // the next request follows the new leader.
            fake.state().topics[0].partitions[1].leader = 1;
            let error = source
                .fetch(ORDERS, 6, Some(3), FetchIsolation::ReadCommitted, 2)
                .expect_err("moved");
            let message = error.to_string();
            assert!(
                message.contains("NOT_LEADER_OR_FOLLOWER") && message.contains(&fake.address(2)),
                "{message}"
            );
            let fetched = source
                .fetch(ORDERS, 6, Some(3), FetchIsolation::ReadCommitted, 2)
                .expect("fetch from the new leader");
            assert!(matches!(fetched, FetchResponse::Records(r) if r.next_offset == 8));
            // Out of range: the log start and the HW from ListOffsets.
            assert_eq!(
                source
                    .fetch(ORDERS, 99, None, FetchIsolation::ReadCommitted, 2)
                    .expect("fetch"),
                FetchResponse::OffsetOutOfRange {
                    log_start_offset: 0,
                    log_end_offset: 8
                }
            );
            let lme = source.last_mirrored_epoch(ORDERS, 1).expect("LME");
            assert_eq!((lme.lme, lme.log_start_offset), (None, 0));
            // Another topic id: UNKNOWN_TOPIC_ID naming the broker, the topic and both ids.
            let error = source
                .fetch(TopicId([7; 16]), 0, None, FetchIsolation::ReadCommitted, 2)
                .expect_err("wrong id");
            assert!(
                matches!(error, SourceError::UnknownTopicId { .. }),
                "{error}"
            );
            let message = error.to_string();
            assert!(message.contains("orders") && message.contains(&fake.address(1)));
        }

        #[test]
        fn a_missing_topic_or_partition_is_a_metadata_error() {
            let fake = fake();
            let mut source =
                KafkaSource::new(&fake.address(1), "audit", 0, KafkaSourceOptions::default());
            let error = source.topic().expect_err("no such topic");
            assert_eq!(
                match &error {
                    SourceError::Kafka(e) => e.code(),
                    _ => None,
                },
                Some(codes::UNKNOWN_TOPIC_OR_PARTITION),
                "{error}"
            );
            assert!(error.to_string().contains("topic audit"), "{error}");
            let mut source =
                KafkaSource::new(&fake.address(1), "orders", 5, KafkaSourceOptions::default());
            let error = source.topic().expect_err("no partition 5");
            assert!(error.to_string().contains("has 2 partitions"), "{error}");
        }
    }
}
