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
//! Requests go to the partition's leader (found with Metadata from the bootstrap broker). A
//! failed request is reported as it is (the kernel retries with its back-off); the connection
//! is reopened and the leader looked up again on the next request. [`Source::release`] keeps
//! the connections: a broker serves many clients at once.

use std::path::PathBuf;
use std::time::Duration;

use kmirror_kernel::config::FetchIsolation;
use kmirror_kernel::fetch::FetchResponse;
use kmirror_kernel::types::{LeaderEpoch, MirrorName, Offset, PartitionIndex, TopicId};

use super::client::{
    FetchParams, KafkaClient, TopicMetadata, EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, READ_UNCOMMITTED,
};
#[cfg(test)]
use super::source_cluster::split_batches;
use super::source_cluster::{isolation_level, map_fetch_answer, FetchAnswer};
use super::{codes, WireError};
use crate::driver::cluster::topic_id_hex;
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

/// A partition of a live Kafka cluster. See the [module documentation](self).
#[derive(Debug)]
pub struct KafkaSource {
    bootstrap: KafkaClient,
    leader: Option<KafkaClient>,
    topic: String,
    partition: PartitionIndex,
    options: KafkaSourceOptions,
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
        KafkaSource {
            bootstrap: KafkaClient::new(
                bootstrap,
                options.connect_timeout,
                options.request_timeout,
            ),
            leader: None,
            topic: topic.to_owned(),
            partition,
            options,
            metadata: None,
            position: None,
        }
    }

    /// The bootstrap broker's address.
    pub fn bootstrap(&self) -> &str {
        self.bootstrap.address()
    }

    /// The topic's metadata (asked again when `refresh`, or when none is cached).
    pub fn metadata(&mut self, refresh: bool) -> Result<&TopicMetadata, SourceError> {
        if refresh || self.metadata.is_none() {
            self.metadata = None;
            let metadata = self.bootstrap.metadata(&self.topic)?;
            if !metadata
                .partitions
                .iter()
                .any(|p| p.index == self.partition)
            {
                return Err(SourceError::Kafka(WireError::Broker {
                    address: self.bootstrap.address().to_owned(),
                    api: "Metadata",
                    what: format!(
                        "topic {} partition {} (the topic has {} partitions)",
                        self.topic,
                        self.partition,
                        metadata.partitions.len()
                    ),
                    code: codes::UNKNOWN_TOPIC_OR_PARTITION,
                    name: super::error_name(codes::UNKNOWN_TOPIC_OR_PARTITION),
                }));
            }
            self.metadata = Some(metadata);
        }
        self.metadata
            .as_ref()
            .ok_or_else(|| SourceError::Unavailable {
                dir: self.address_path(),
                reason: "no metadata".into(),
            })
    }

    fn address_path(&self) -> PathBuf {
        PathBuf::from(self.bootstrap.address())
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
                Some(id) => format!("{} for topic {}", topic_id_hex(id), self.topic),
                None => format!("none for topic {} (it does not exist)", self.topic),
            },
            asked: topic_id_hex(asked),
        }
    }

    /// The client of the partition's leader (the bootstrap broker's address when the metadata
    /// names no other).
    fn leader(&mut self) -> Result<&mut KafkaClient, SourceError> {
        let partition = self.partition;
        let address = self
            .metadata(false)?
            .leader_address(partition)
            .map(str::to_owned)
            .unwrap_or_else(|| self.bootstrap.address().to_owned());
        if self.leader.as_ref().map(KafkaClient::address) != Some(address.as_str()) {
            self.leader = Some(KafkaClient::new(
                &address,
                self.options.connect_timeout,
                self.options.request_timeout,
            ));
        }
        self.leader
            .as_mut()
            .ok_or_else(|| SourceError::Unavailable {
                dir: PathBuf::from(&address),
                reason: "no leader connection".into(),
            })
    }

    /// Forgets the metadata after a failure, so that the next request looks the leader up
    /// again.
    fn failed(&mut self, error: WireError) -> SourceError {
        self.metadata = None;
        SourceError::Kafka(error)
    }

    fn list_offset(&mut self, timestamp: i64, isolation: i8) -> Result<Offset, SourceError> {
        let topic = self.topic.clone();
        let partition = self.partition;
        let result = self
            .leader()?
            .list_offset(&topic, partition, timestamp, isolation);
        result.map(|(offset, _)| offset).map_err(|e| self.failed(e))
    }

    /// Kafka's own check of a fetcher's last fetched epoch, asked separately: OffsetForLeaderEpoch
    /// as a consumer for `epoch`. (The fetch path does not need it: the broker applies the same
    /// check to the Fetch itself.)
    pub fn end_offset_for_epoch(
        &mut self,
        epoch: LeaderEpoch,
    ) -> Result<kmirror_kernel::types::EpochAndOffset, SourceError> {
        let topic = self.topic.clone();
        let partition = self.partition;
        let result = self
            .leader()?
            .offset_for_leader_epoch(&topic, partition, epoch);
        result.map_err(|e| self.failed(e))
    }

    /// Splits a fetch's records into whole batches (dropping a partial trailing one).
    #[cfg(test)]
    fn batches(&self, records: &[u8]) -> Result<Vec<RawBatch>, SourceError> {
        split_batches(records).map_err(|(pos, e)| self.bad_batch(pos, e))
    }

    fn bad_batch(&self, pos: usize, e: crate::error::BatchError) -> SourceError {
        SourceError::Kafka(WireError::Malformed {
            address: self
                .leader
                .as_ref()
                .map_or(self.bootstrap.address(), KafkaClient::address)
                .to_owned(),
            api: "Fetch",
            version: -1,
            reason: format!(
                "the record batch at byte {pos} of {}-{} does not parse: {e}",
                self.topic, self.partition
            ),
        })
    }
}

impl Source for KafkaSource {
    fn describe(&self) -> String {
        format!(
            "Kafka broker {} (topic {} partition {})",
            self.bootstrap.address(),
            self.topic,
            self.partition
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
        let isolation_level = isolation_level(isolation);
        let params = FetchParams {
            topic_id,
            partition: self.partition,
            fetch_offset,
            last_fetched_epoch,
            isolation_level,
            max_wait_ms: self.options.fetch_max_wait_ms,
            max_bytes: self.options.fetch_max_bytes,
        };
        let result = self.leader()?.fetch(&params);
        let answer = result.map_err(|e| self.failed(e))?;
        let mapped = map_fetch_answer(&answer, fetch_offset, isolation, max_batches)
            .map_err(|(pos, e)| self.bad_batch(pos, e))?;
        match mapped {
            FetchAnswer::Answer(response, position) => {
                self.position = Some(position);
                Ok(response)
            }
            FetchAnswer::OutOfRange => {
                let log_start_offset = self.list_offset(EARLIEST_TIMESTAMP, READ_UNCOMMITTED)?;
                let high_watermark = self.list_offset(LATEST_TIMESTAMP, READ_UNCOMMITTED)?;
                Ok(FetchResponse::OffsetOutOfRange {
                    log_start_offset,
                    log_end_offset: high_watermark,
                })
            }
            FetchAnswer::Error(codes::UNKNOWN_TOPIC_ID) => {
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
            FetchAnswer::Error(code) => {
                let address = self
                    .leader
                    .as_ref()
                    .map_or(self.bootstrap.address(), KafkaClient::address)
                    .to_owned();
                Err(self.failed(WireError::Broker {
                    address,
                    api: "Fetch",
                    what: format!("topic {} partition {}", self.topic, self.partition),
                    code,
                    name: super::error_name(code),
                }))
            }
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
        let log_start_offset = self.list_offset(EARLIEST_TIMESTAMP, READ_UNCOMMITTED)?;
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
}
