//! The source cluster of a mirror, as the destination's executor reaches it.
//!
//! [`Source`] is what the driver needs from the other cluster: a consumer Fetch (served by the
//! kernel's [`serve_fetch`](kmirror_kernel::fetch::serve_fetch) with the isolation the kernel
//! asked for) and the LME query (answered
//! from the LastMirroredEpochs records the source holds in its own `__mirror_state`).
//! [`LocalSource`](crate::driver::LocalSource) is a cluster directory on the local disk;
//! [`KafkaSource`](crate::wire::KafkaSource) is a live Kafka broker. Each lives beside what it
//! reads, so that this module depends on no driver.

use std::path::PathBuf;

use kmirror_kernel::config::FetchIsolation;
use kmirror_kernel::fetch::FetchResponse;
use kmirror_kernel::types::{
    EpochAndOffset, LeaderEpoch, MirrorName, Offset, PartitionIndex, TopicId,
};

use crate::record_batch::RawBatch;

/// Why a source could not answer a request.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    /// Another process holds the source right now; the request should be retried later.
    #[error("source {} is in use by another kmirror process", dir.display())]
    Busy {
        /// The source directory.
        dir: PathBuf,
    },
    /// The source cannot be reached or read.
    #[error("source {} is unavailable: {reason}", dir.display())]
    Unavailable {
        /// The source directory.
        dir: PathBuf,
        /// What went wrong.
        reason: String,
    },
    /// The source does not host the partition asked about.
    #[error(
        "source {} hosts topic id {hosted}, not the mirrored topic id {asked} (UNKNOWN_TOPIC_ID)",
        dir.display()
    )]
    UnknownTopicId {
        /// The source directory (a live broker's `host:port` for a
        /// [`KafkaSource`](crate::wire::KafkaSource)).
        dir: PathBuf,
        /// The topic id it hosts.
        hosted: String,
        /// The topic id asked for.
        asked: String,
    },
    /// A live Kafka broker could not answer (unreachable, a Kafka error code, a malformed
    /// response); the message names the broker and the API.
    #[error(transparent)]
    Kafka(#[from] crate::wire::WireError),
}

/// The source's answer to the LME query.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LmeAnswer {
    /// The LME the source recorded when it last stopped mirroring this partition, with the
    /// offset its mirrored copy ended at; `None` for Kafka's -1.
    pub lme: Option<EpochAndOffset>,
    /// The source's log start offset.
    pub log_start_offset: Offset,
}

/// Where the source is, for progress reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct SourcePosition {
    /// The source's log start offset.
    pub log_start_offset: Offset,
    /// The source's high watermark.
    pub high_watermark: Offset,
    /// The source's last stable offset.
    pub last_stable_offset: Offset,
    /// The source's log end offset.
    pub log_end_offset: Offset,
}

/// The other end of a mirror. `Send`: the driver reads the next fetch on a second thread
/// while it appends the last ([`crate::driver`]'s fetch-ahead).
pub trait Source: Send {
    /// A human-readable name of the source (its directory or address).
    fn describe(&self) -> String;

    /// The name of the source cluster.
    fn cluster_name(&mut self) -> Result<MirrorName, SourceError>;

    /// The topic name and id the source hosts.
    fn topic(&mut self) -> Result<(String, TopicId), SourceError>;

    /// Serves a consumer Fetch of the mirrored partition from `fetch_offset`, carrying the
    /// fetcher's last fetched epoch, reading up to the bound of `isolation`, at most
    /// `max_batches` whole batches.
    fn fetch(
        &mut self,
        topic_id: TopicId,
        fetch_offset: Offset,
        last_fetched_epoch: Option<LeaderEpoch>,
        isolation: FetchIsolation,
        max_batches: usize,
    ) -> Result<FetchResponse<RawBatch>, SourceError>;

    /// Answers the LME query for `topic_id` / `partition`.
    fn last_mirrored_epoch(
        &mut self,
        topic_id: TopicId,
        partition: PartitionIndex,
    ) -> Result<LmeAnswer, SourceError>;

    /// Where the source's log is (as of the last request served).
    fn position(&self) -> Option<SourcePosition>;

    /// Lets go of the source until the next request (closes files, releases locks), so that
    /// others can write to it; the next request sees what they wrote.
    fn release(&mut self);
}
