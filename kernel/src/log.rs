//! The log contract: what every partition log (in memory or on disk) must do.
//!
//! [`LogView`] is the read side the state machine consults to make its decisions (the epoch
//! cache, LEO, HW, LSO); [`PartitionLog`] adds the mutations an executor performs when it applies
//! a [`LogEffect`](crate::effect::LogEffect) with [`apply_log_effect`](crate::apply::apply_log_effect).
//! The kernel's [`MemLog`](crate::mem_log::MemLog) and the harness's file log both implement it,
//! and the conformance suite in `testkit` (feature `testkit`) runs against both.

use crate::batch::{BatchHeader, LeaderBatch};
use crate::epoch_cache::{EpochCache, NegativeEpochEntry};
use crate::producer_state::ProducerStateTable;
use crate::types::{LeaderEpoch, Offset, ProducerEpoch, ProducerId, Sequence};

/// Why a log operation was refused. Nothing is changed by a refused operation.
#[derive(Clone, PartialEq, Eq, Debug, thiserror::Error)]
pub enum LogError {
    /// A follower append whose first batch does not start at the log end offset.
    #[error("batch at offset {got} does not follow the log end offset {expected}")]
    NonContiguousAppend {
        /// The log end offset.
        expected: Offset,
        /// The base offset of the batch offered.
        got: Offset,
    },
    /// A batch whose offsets are not increasing (`last_offset < base_offset`).
    #[error("batch {base_offset}..={last_offset} has no records")]
    EmptyBatch {
        /// Base offset of the batch.
        base_offset: Offset,
        /// Last offset of the batch.
        last_offset: Offset,
    },
    /// A negative epoch or offset.
    #[error(transparent)]
    NegativeEpochEntry(#[from] NegativeEpochEntry),
    /// A transactional batch without a producer id, or a marker for a producer with no open
    /// transaction where one is required.
    #[error("invalid transactional batch: {0}")]
    InvalidTransaction(String),
    /// An idempotent append whose sequence does not follow the producer's last sequence.
    #[error("producer {producer_id}: expected sequence {expected}, got {got}")]
    OutOfOrderSequence {
        /// The producer.
        producer_id: ProducerId,
        /// The next sequence the log expected.
        expected: Sequence,
        /// The batch's base sequence.
        got: Sequence,
    },
    /// An append from a producer epoch older than the one the log knows (a zombie producer).
    #[error("producer {producer_id}: epoch {got} is older than the current epoch {current}")]
    InvalidProducerEpoch {
        /// The producer.
        producer_id: ProducerId,
        /// The producer's current epoch.
        current: ProducerEpoch,
        /// The batch's producer epoch.
        got: ProducerEpoch,
    },
    /// An offset outside `[log_start_offset, log_end_offset]`.
    #[error("offset {offset} is outside the log [{log_start_offset}, {log_end_offset}]")]
    OffsetOutOfRange {
        /// The offset given.
        offset: Offset,
        /// The log start offset.
        log_start_offset: Offset,
        /// The log end offset.
        log_end_offset: Offset,
    },
}

/// The read side of a partition log.
pub trait LogView {
    /// The first offset still in the log.
    fn log_start_offset(&self) -> Offset;
    /// LEO: the offset the next appended record gets.
    fn log_end_offset(&self) -> Offset;
    /// HW: the offset below which every record is replicated to the whole ISR.
    fn high_watermark(&self) -> Offset;
    /// LSO: the first offset of the earliest transaction that is open or whose COMMIT/ABORT
    /// marker is not yet below the HW (Kafka's `firstUnstableOffset`), capped by the HW.
    fn last_stable_offset(&self) -> Offset {
        match self.producer_state().first_unstable_offset() {
            Some(first) => first.min(self.high_watermark()),
            None => self.high_watermark(),
        }
    }
    /// The leader-epoch cache.
    fn epoch_cache(&self) -> &EpochCache;
    /// The producer state of the log (up to LEO).
    fn producer_state(&self) -> &ProducerStateTable;
    /// The header of the last batch, if the log holds any.
    fn last_batch(&self) -> Option<BatchHeader>;
}

/// The mutations of a partition log.
///
/// Every operation either succeeds completely or changes nothing and returns an error.
pub trait PartitionLog: LogView {
    /// A batch as this log stores and serves it (a header, or a header and its bytes).
    type Batch: Clone + std::fmt::Debug;
    /// The log's error: at least every [`LogError`], plus whatever its storage can fail with.
    type Error: std::error::Error + From<LogError>;

    /// The header of a stored batch.
    fn header(batch: &Self::Batch) -> BatchHeader;

    /// Appends as the leader of `leader_epoch`: assigns offsets from LEO, stamps the epoch,
    /// validates producer epoch and sequence, updates the epoch cache and producer state.
    fn append_as_leader(
        &mut self,
        leader_epoch: LeaderEpoch,
        batch: LeaderBatch,
    ) -> Result<BatchHeader, Self::Error>;

    /// Appends batches copied from another log (a follower, or a mirror), keeping their offsets
    /// and leader epochs: the first must start at LEO; the epoch cache follows the batches.
    fn append_as_follower(&mut self, batches: &[Self::Batch]) -> Result<(), Self::Error>;

    /// Whole batches with `last_offset >= from` and `base_offset < below`, oldest first.
    fn read(&self, from: Offset, below: Offset) -> Vec<Self::Batch>;

    /// Truncates to `offset` (a batch boundary at or below LEO; a higher offset is a no-op):
    /// removes batches from `offset` on, truncates the epoch cache from the end, clamps HW to
    /// `offset` and rebuilds producer state up to `offset`.
    fn truncate_to(&mut self, offset: Offset) -> Result<(), Self::Error>;

    /// Removes every batch and starts the log empty at `offset` (LEO = HW = log start =
    /// `offset`); empties the epoch cache and producer state.
    fn truncate_fully_and_start_at(&mut self, offset: Offset) -> Result<(), Self::Error>;

    /// Moves HW to `offset`, which must lie in `[HW, LEO]` (HW only moves back by truncation).
    fn advance_high_watermark(&mut self, offset: Offset) -> Result<(), Self::Error>;

    /// Records that `leader_epoch` starts at `start_offset` (Kafka's
    /// `UnifiedLog.assignEpochStartOffset`, which `Partition.makeLeader` calls with the LEO for
    /// every new leader epoch, before the new leader writes anything): the epoch cache's
    /// `assign`, nothing else. A leader so answers an `end_offset_for` of an epoch it never wrote
    /// in with its LEO at the election, which is what lets a follower (or a mirror) that copied
    /// a later epoch from a deposed leader find its divergence. A restart of the log drops such
    /// an entry while no batch follows it (Kafka's log loading truncates the cache at the LEO).
    /// A negative epoch or offset is refused.
    fn assign_epoch_start_offset(
        &mut self,
        leader_epoch: LeaderEpoch,
        start_offset: Offset,
    ) -> Result<(), Self::Error>;
}
