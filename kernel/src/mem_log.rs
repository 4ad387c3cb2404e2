//! [`MemLog`]: the in-memory partition log, a value the model checker clones in O(1).
//!
//! It implements the [`LogView`] / [`PartitionLog`] contract with Kafka's `UnifiedLog`
//! semantics, keeping only batch headers. Where the contract leaves a choice, `MemLog` decides
//! as follows (the conformance suite in `testkit` pins every choice but the
//! batch-size limits, so the harness's file log must decide the same way):
//!
//! - **Leader append**: the batch gets offsets from LEO and the leader epoch; the epoch cache
//!   is assigned `(leader_epoch, base offset)`; producer state validates the append as Kafka does
//!   for a client or coordinator append (see [`producer_state`](crate::producer_state)). A retry
//!   of one of a producer's last five batches (same producer epoch, same sequence range) is
//!   answered, as in Kafka, with the header of the batch already in the log and appends nothing.
//! - **An epoch below the latest is accepted, as Kafka accepts it**: an append (leader or
//!   follower) at a leader epoch below the latest epoch of the cache succeeds, and the cache's
//!   `assign` ([`EpochCache::assign`], Kafka's `LeaderEpochFileCache.assign`) drops every entry
//!   at or above that epoch, leaving batches of a newer epoch below an older one and the newer
//!   epoch's history gone. The replication protocol (KIP-320 truncation) keeps that from
//!   happening to a follower, and KIP-1279's epoch bump keeps it from a mirror destination's
//!   local writes; where it happens anyway the log shows it as Kafka's would (the model's
//!   `batch_epochs_never_decrease` flags it). Only a negative epoch is refused.
//! - **A new leader's epoch**: [`PartitionLog::assign_epoch_start_offset`] records an epoch
//!   starting at an offset with no batch yet, as Kafka's `Partition.makeLeader` does for every
//!   new leader epoch (`UnifiedLog.assignEpochStartOffset(epoch, LEO)`).
//! - **Follower append**: batches keep their offsets and epochs. The first must start exactly at
//!   LEO and each following one right after the previous one ([`LogError::NonContiguousAppend`]).
//!   Kafka refuses a first offset below LEO but accepts gaps (compacted topics); the contract
//!   here asks for contiguity. Producer state is updated for every batch, checking only what
//!   Kafka checks for `AppendOrigin.REPLICATION` (no non-transactional batch inside an open
//!   transaction).
//! - **Truncation to an offset inside a batch** removes the whole batch: the new LEO is the
//!   batch's base offset. (Kafka's `LogSegment.truncateTo` also drops the whole batch containing
//!   the offset, but `LocalLog.truncateTo` then sets LEO to the requested offset, leaving a hole;
//!   `MemLog` keeps LEO at the end of its last batch.) A negative offset is refused; an offset at
//!   or above LEO changes nothing; an offset below the log start offset truncates fully and
//!   starts the log at that offset, as Kafka does.
//! - **Batch sizes**: a batch spans at most `i32::MAX + 1` offsets (Kafka's `lastOffsetDelta`
//!   is an `int32`) and cannot end at `Offset::MAX`; larger ones are refused with
//!   [`LogError::OffsetOutOfRange`] naming the batch's last offset.
//! - **High watermark**: only [`advance_high_watermark`](PartitionLog::advance_high_watermark)
//!   moves it forward (within `[HW, LEO]`, else [`LogError::OffsetOutOfRange`]); truncation
//!   clamps it to the new LEO. Appends never move it.
//! - **Log start offset**: [`MemLog::increment_log_start_offset`] moves it forward, as Kafka's
//!   `UnifiedLog.maybeIncrementLogStartOffset` does for DeleteRecords: up to the high watermark
//!   (beyond is [`LogError::OffsetOutOfRange`]), never back. Batches wholly below it are dropped;
//!   a batch it falls inside is kept whole (a read from the log start returns it, as Kafka's
//!   does), the epoch cache is truncated from the start (Kafka's `truncateFromStart`), and the
//!   producer state is rebuilt from the batches kept, as a replay of the log would build it.
//!   (Kafka keeps a producer whose batches are all deleted, from its producer-state snapshots;
//!   a log without snapshots forgets it, here at once rather than at the next restart.)
//!
//! Every refused operation leaves the log exactly as it was: operations work on a clone (O(1)
//! for `im` collections) that replaces `self` only on success.

use serde::{Deserialize, Serialize};

use crate::batch::{BatchHeader, ControlType, LeaderBatch};
use crate::epoch_cache::{EpochCache, NegativeEpochEntry};
use crate::log::{LogError, LogView, PartitionLog};
use crate::producer_state::ProducerStateTable;
use crate::types::{LeaderEpoch, Offset, NO_PRODUCER_EPOCH, NO_PRODUCER_ID, NO_SEQUENCE};

/// An in-memory partition log of batch headers.
#[derive(Clone, PartialEq, Eq, Hash, Debug, Serialize, Deserialize)]
pub struct MemLog {
    batches: im::Vector<BatchHeader>,
    log_start_offset: Offset,
    log_end_offset: Offset,
    high_watermark: Offset,
    epoch_cache: EpochCache,
    producer_state: ProducerStateTable,
}

impl Default for MemLog {
    fn default() -> Self {
        Self::new()
    }
}

impl MemLog {
    /// An empty log starting at offset 0.
    pub fn new() -> Self {
        MemLog {
            batches: im::Vector::new(),
            log_start_offset: 0,
            log_end_offset: 0,
            high_watermark: 0,
            epoch_cache: EpochCache::new(),
            producer_state: ProducerStateTable::new(),
        }
    }

    /// An empty log starting at `offset`, or `None` if `offset` is negative.
    pub fn starting_at(offset: Offset) -> Option<Self> {
        let mut log = Self::new();
        log.truncate_fully_and_start_at(offset).ok()?;
        Some(log)
    }

    /// The batches, oldest first.
    pub fn batches(&self) -> &im::Vector<BatchHeader> {
        &self.batches
    }

    /// The index of the first batch whose last offset is at or above `offset`
    /// (`batches.len()` if none).
    fn first_batch_ending_at_or_after(&self, offset: Offset) -> usize {
        self.batches
            .binary_search_by(|b| {
                if b.last_offset < offset {
                    std::cmp::Ordering::Less
                } else {
                    std::cmp::Ordering::Greater
                }
            })
            .unwrap_or_else(|i| i)
    }

    /// Moves the log start offset forward to `offset` (see the [module documentation](self)):
    /// whether it moved (`false`: `offset` is at or below it already).
    pub fn increment_log_start_offset(&mut self, offset: Offset) -> Result<bool, LogError> {
        if offset > self.high_watermark {
            return Err(self.out_of_range(offset));
        }
        if offset <= self.log_start_offset {
            return Ok(false);
        }
        let drop = self.first_batch_ending_at_or_after(offset);
        self.batches = self.batches.skip(drop);
        self.log_start_offset = offset;
        self.epoch_cache.truncate_from_start(offset);
        self.producer_state = ProducerStateTable::rebuild(self.batches.iter());
        self.producer_state.on_high_watermark(self.high_watermark);
        Ok(true)
    }

    /// Refuses an append at `epoch` if it is negative.
    fn check_epoch(&self, epoch: LeaderEpoch, base_offset: Offset) -> Result<(), LogError> {
        if epoch < 0 || base_offset < 0 {
            return Err(NegativeEpochEntry {
                epoch,
                start_offset: base_offset,
            }
            .into());
        }
        Ok(())
    }

    /// Refuses a batch with no records, more than Kafka's `int32` `lastOffsetDelta` allows, or
    /// ending at `Offset::MAX` (no offset would follow it).
    fn check_span(&self, header: &BatchHeader) -> Result<(), LogError> {
        if header.last_offset < header.base_offset {
            return Err(LogError::EmptyBatch {
                base_offset: header.base_offset,
                last_offset: header.last_offset,
            });
        }
        let delta = i128::from(header.last_offset) - i128::from(header.base_offset);
        if delta > i128::from(i32::MAX) || header.last_offset == Offset::MAX {
            return Err(self.out_of_range(header.last_offset));
        }
        Ok(())
    }

    /// Appends `header` (already validated), updating LEO, the epoch cache and producer state.
    fn push(&mut self, header: BatchHeader) -> Result<(), LogError> {
        self.epoch_cache
            .assign(header.partition_leader_epoch, header.base_offset)?;
        self.producer_state.apply(&header);
        self.log_end_offset = header.next_offset();
        self.batches.push_back(header);
        Ok(())
    }

    /// The header a leader would write for `batch` at LEO, before producer-state validation.
    fn leader_header(
        &self,
        leader_epoch: LeaderEpoch,
        batch: LeaderBatch,
    ) -> Result<BatchHeader, LogError> {
        let base = self.log_end_offset;
        let mut header = BatchHeader::plain(base, base, leader_epoch);
        match batch {
            LeaderBatch::Records {
                record_count,
                producer,
                transactional,
            } => {
                if record_count == 0 {
                    return Err(LogError::EmptyBatch {
                        base_offset: base,
                        last_offset: base - 1,
                    });
                }
                header.last_offset = base
                    .checked_add(i64::from(record_count) - 1)
                    .ok_or_else(|| self.out_of_range(base))?;
                self.check_span(&header)?;
                if let Some(p) = producer {
                    header.producer_id = p.producer_id;
                    header.producer_epoch = p.producer_epoch;
                    header.base_sequence = p.base_sequence;
                    if p.producer_id == NO_PRODUCER_ID {
                        return Err(LogError::InvalidTransaction(format!(
                            "batch at offset {base} names producer id {NO_PRODUCER_ID}"
                        )));
                    }
                }
                header.is_transactional = transactional;
            }
            LeaderBatch::Control { control, producer } => {
                header.control = Some(control);
                match (control, producer) {
                    (ControlType::MirrorPidReset, None) => {}
                    (ControlType::MirrorPidReset, Some(_)) => {
                        return Err(LogError::InvalidTransaction(format!(
                            "MIRROR_PID_RESET at offset {base} must carry no producer"
                        )));
                    }
                    (ControlType::Abort | ControlType::Commit, Some((pid, epoch))) => {
                        header.producer_id = pid;
                        header.producer_epoch = epoch;
                        header.base_sequence = NO_SEQUENCE;
                        header.is_transactional = true;
                    }
                    (ControlType::Abort | ControlType::Commit, None) => {
                        return Err(LogError::InvalidTransaction(format!(
                            "{control:?} marker at offset {base} needs a producer"
                        )));
                    }
                }
            }
        }
        if header.producer_id == NO_PRODUCER_ID {
            header.producer_epoch = NO_PRODUCER_EPOCH;
            header.base_sequence = NO_SEQUENCE;
        }
        Ok(header)
    }

    fn try_append_as_leader(
        &mut self,
        leader_epoch: LeaderEpoch,
        batch: LeaderBatch,
    ) -> Result<BatchHeader, LogError> {
        self.check_epoch(leader_epoch, self.log_end_offset)?;
        let header = self.leader_header(leader_epoch, batch)?;
        if let Some(dup) = self.producer_state.find_duplicate(&header) {
            let i = self.first_batch_ending_at_or_after(dup.last_offset);
            if let Some(original) = self.batches.get(i) {
                if original.last_offset == dup.last_offset {
                    return Ok(*original);
                }
            }
        }
        self.producer_state.validate_leader_append(&header)?;
        self.push(header)?;
        Ok(header)
    }

    fn try_append_as_follower(&mut self, batches: &[BatchHeader]) -> Result<(), LogError> {
        for header in batches {
            self.check_span(header)?;
            if header.base_offset != self.log_end_offset {
                return Err(LogError::NonContiguousAppend {
                    expected: self.log_end_offset,
                    got: header.base_offset,
                });
            }
            self.check_epoch(header.partition_leader_epoch, header.base_offset)?;
            self.producer_state.validate_replicated(header)?;
            self.push(*header)?;
        }
        Ok(())
    }

    fn try_truncate_to(&mut self, offset: Offset) -> Result<(), LogError> {
        if offset < 0 {
            return Err(self.out_of_range(offset));
        }
        if offset >= self.log_end_offset {
            // Kafka still trims cache entries at or after LEO (none exist here).
            self.epoch_cache.truncate_from_end(self.log_end_offset);
            return Ok(());
        }
        if offset < self.log_start_offset {
            return self.try_truncate_fully_and_start_at(offset);
        }
        let keep = self.first_batch_ending_at_or_after(offset);
        let new_end = match keep.checked_sub(1).and_then(|i| self.batches.get(i)) {
            Some(last_kept) => last_kept.next_offset(),
            None => self.log_start_offset,
        };
        // Producer state only changes if a removed batch touched it: rebuilding from every kept
        // batch would make a short truncation of a long log linear in the log's length.
        let touches_producers = self
            .batches
            .skip(keep)
            .iter()
            .any(|b| b.has_producer_id() || b.control == Some(ControlType::MirrorPidReset));
        self.batches.truncate(keep);
        self.log_end_offset = new_end;
        self.epoch_cache.truncate_from_end(new_end);
        self.high_watermark = self.high_watermark.min(new_end);
        if touches_producers {
            self.producer_state = ProducerStateTable::rebuild(self.batches.iter());
        }
        self.producer_state.on_high_watermark(self.high_watermark);
        Ok(())
    }

    fn try_truncate_fully_and_start_at(&mut self, offset: Offset) -> Result<(), LogError> {
        if offset < 0 {
            return Err(self.out_of_range(offset));
        }
        self.batches.clear();
        self.log_start_offset = offset;
        self.log_end_offset = offset;
        self.high_watermark = offset;
        self.epoch_cache.clear();
        self.producer_state.clear();
        Ok(())
    }

    fn out_of_range(&self, offset: Offset) -> LogError {
        LogError::OffsetOutOfRange {
            offset,
            log_start_offset: self.log_start_offset,
            log_end_offset: self.log_end_offset,
        }
    }

    /// Runs `op` on a clone and keeps the result only if `op` succeeds.
    fn atomically<T>(
        &mut self,
        op: impl FnOnce(&mut Self) -> Result<T, LogError>,
    ) -> Result<T, LogError> {
        let mut next = self.clone();
        let out = op(&mut next)?;
        *self = next;
        Ok(out)
    }
}

impl LogView for MemLog {
    fn log_start_offset(&self) -> Offset {
        self.log_start_offset
    }

    fn log_end_offset(&self) -> Offset {
        self.log_end_offset
    }

    fn high_watermark(&self) -> Offset {
        self.high_watermark
    }

    fn epoch_cache(&self) -> &EpochCache {
        &self.epoch_cache
    }

    fn producer_state(&self) -> &ProducerStateTable {
        &self.producer_state
    }

    fn last_batch(&self) -> Option<BatchHeader> {
        self.batches.last().copied()
    }
}

impl PartitionLog for MemLog {
    type Batch = BatchHeader;
    type Error = LogError;

    fn header(batch: &BatchHeader) -> BatchHeader {
        *batch
    }

    fn append_as_leader(
        &mut self,
        leader_epoch: LeaderEpoch,
        batch: LeaderBatch,
    ) -> Result<BatchHeader, LogError> {
        self.atomically(|log| log.try_append_as_leader(leader_epoch, batch))
    }

    fn append_as_follower(&mut self, batches: &[BatchHeader]) -> Result<(), LogError> {
        self.atomically(|log| log.try_append_as_follower(batches))
    }

    fn read(&self, from: Offset, below: Offset) -> Vec<BatchHeader> {
        let start = self.first_batch_ending_at_or_after(from);
        self.batches
            .iter()
            .skip(start)
            .take_while(|b| b.base_offset < below)
            .copied()
            .collect()
    }

    fn truncate_to(&mut self, offset: Offset) -> Result<(), LogError> {
        self.atomically(|log| log.try_truncate_to(offset))
    }

    fn truncate_fully_and_start_at(&mut self, offset: Offset) -> Result<(), LogError> {
        self.atomically(|log| log.try_truncate_fully_and_start_at(offset))
    }

    fn advance_high_watermark(&mut self, offset: Offset) -> Result<(), LogError> {
        if offset < self.high_watermark || offset > self.log_end_offset {
            return Err(self.out_of_range(offset));
        }
        self.high_watermark = offset;
        self.producer_state.on_high_watermark(offset);
        Ok(())
    }

    fn assign_epoch_start_offset(
        &mut self,
        leader_epoch: LeaderEpoch,
        start_offset: Offset,
    ) -> Result<(), LogError> {
        self.epoch_cache.assign(leader_epoch, start_offset)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::ProducerBatchInfo;

    fn records(n: u32) -> LeaderBatch {
        LeaderBatch::Records {
            record_count: n,
            producer: None,
            transactional: false,
        }
    }

    #[test]
    fn conformance_suite_passes() {
        crate::testkit::run_all(MemLog::new);
    }

    #[test]
    fn the_log_start_moves_up_to_the_high_watermark_dropping_the_batches_wholly_below() {
        let mut log = MemLog::new();
        for _ in 0..3 {
            log.append_as_leader(4, records(10)).unwrap();
        }
        log.advance_high_watermark(25).unwrap();
        assert!(matches!(
            log.clone().increment_log_start_offset(26),
            Err(LogError::OffsetOutOfRange { offset: 26, .. })
        ));
        assert_eq!(log.increment_log_start_offset(15), Ok(true));
        assert_eq!(log.log_start_offset(), 15);
        let kept: Vec<Offset> = log.batches().iter().map(|b| b.base_offset).collect();
        assert_eq!(kept, [10, 20], "the batch holding 15 is kept whole");
        assert_eq!(
            log.epoch_cache().entries().next().map(|e| e.start_offset),
            Some(15)
        );
        assert_eq!(log.increment_log_start_offset(12), Ok(false), "never back");
        assert_eq!(log.increment_log_start_offset(25), Ok(true));
        assert_eq!((log.log_start_offset(), log.log_end_offset()), (25, 30));
    }

    #[test]
    fn starting_at_refuses_negative_offsets() {
        assert!(MemLog::starting_at(-1).is_none());
        let log = MemLog::starting_at(42).expect("non-negative start");
        assert_eq!(
            (
                log.log_start_offset(),
                log.log_end_offset(),
                log.high_watermark()
            ),
            (42, 42, 42)
        );
    }

    #[test]
    fn batches_are_contiguous_headers() {
        let mut log = MemLog::new();
        let a = log.append_as_leader(0, records(2)).expect("append");
        let b = log.append_as_leader(1, records(1)).expect("append");
        assert_eq!(
            log.batches().iter().copied().collect::<Vec<_>>(),
            vec![a, b]
        );
        assert_eq!(b.base_offset, 2);
        assert_eq!(log.epoch_cache().entries().count(), 2);
    }

    #[test]
    fn leader_batch_with_sentinel_producer_id_is_refused() {
        let mut log = MemLog::new();
        let before = log.clone();
        let batch = LeaderBatch::Records {
            record_count: 1,
            producer: Some(ProducerBatchInfo {
                producer_id: NO_PRODUCER_ID,
                producer_epoch: 0,
                base_sequence: 0,
            }),
            transactional: false,
        };
        assert!(matches!(
            log.append_as_leader(0, batch),
            Err(LogError::InvalidTransaction(_))
        ));
        assert_eq!(log, before);
    }

    #[test]
    fn oversized_and_overflowing_batches_are_refused() {
        let mut log = MemLog::new();
        let before = log.clone();
        // Kafka's lastOffsetDelta is an int32: at most i32::MAX + 1 records.
        let too_many = u32::try_from(i32::MAX).expect("fits") + 2;
        assert!(matches!(
            log.append_as_leader(0, records(too_many)),
            Err(LogError::OffsetOutOfRange { .. })
        ));
        let huge = BatchHeader::plain(0, i64::from(i32::MAX) + 1, 0);
        assert!(log.append_as_follower(&[huge]).is_err());
        assert_eq!(log, before);
        // No batch may end at Offset::MAX: nothing could follow it.
        let mut log = MemLog::starting_at(Offset::MAX - 1).expect("start");
        let before = log.clone();
        assert!(log.append_as_leader(0, records(2)).is_err());
        assert!(log
            .append_as_follower(&[BatchHeader::plain(Offset::MAX - 1, Offset::MAX, 0)])
            .is_err());
        assert_eq!(log, before);
        let h = log
            .append_as_leader(0, records(1))
            .expect("one record fits");
        assert_eq!(h.last_offset, Offset::MAX - 1);
        assert_eq!(log.log_end_offset(), Offset::MAX);
        assert!(log.append_as_leader(0, records(1)).is_err());
    }

    #[test]
    fn clones_share_structure_and_diverge_independently() {
        let mut a = MemLog::new();
        a.append_as_leader(0, records(3)).expect("append");
        let mut b = a.clone();
        b.append_as_leader(0, records(1)).expect("append");
        assert_eq!(a.log_end_offset(), 3);
        assert_eq!(b.log_end_offset(), 4);
        assert_eq!(a.batches().len(), 1);
    }
}
