//! Producer state: Kafka's `ProducerStateManager` (storage module) as a value.
//!
//! For every producer id seen in the log the table keeps the producer epoch, the metadata of the
//! producer's last few batches (so the next idempotent append can be checked for sequence
//! continuity and retries recognised as duplicates) and the first offset of the producer's open
//! transaction. The last stable offset derives from the open transactions and from the
//! completed ones whose marker the high watermark has not passed yet.
//!
//! # What of Kafka is implemented
//!
//! [`ProducerStateTable::apply`] is the state update of `ProducerAppendInfo` +
//! `ProducerStateEntry` when a batch is appended, as done for every origin:
//! - a data batch with a producer id records its sequence range (a new producer epoch first
//!   forgets the batches of the old one; at most [`NUM_BATCHES_TO_RETAIN`] = 5 are kept, as in
//!   Kafka) and, when transactional and none is open, opens a transaction at its base offset;
//! - a COMMIT or ABORT marker takes the marker's producer epoch (forgetting batches of an older
//!   epoch) and closes the producer's open transaction, if any; a producer never seen before gets
//!   an entry, as in Kafka; the closed transaction stays *unreplicated* (Kafka's
//!   `unreplicatedTxns`) until the high watermark passes its marker
//!   ([`ProducerStateTable::on_high_watermark`], Kafka's `onHighWatermarkUpdated`): until then it
//!   still holds the LSO at its first offset ([`ProducerStateTable::first_unstable_offset`]), so
//!   a read-committed reader never gets ahead of a marker a new leader might not have;
//! - `MIRROR_PID_RESET` (KIP-1279) expires every entry, open transactions included (closed,
//!   unreplicated transactions keep holding the LSO until their markers are replicated);
//! - batches without a producer id change nothing.
//!
//! [`ProducerStateTable::validate_leader_append`] is the validation of a client append
//! (`AppendOrigin.CLIENT` for data, `COORDINATOR` for markers), with transaction version 0/1
//! rules:
//! - `checkProducerEpoch`: a batch or marker whose producer epoch is below the producer's
//!   current epoch is refused ([`LogError::InvalidProducerEpoch`]);
//! - `checkSequence`: with a new (greater) epoch the first sequence must be 0 unless the producer
//!   is unknown; with the same epoch the first sequence must follow the last one (wrapping at
//!   `i32::MAX`), unless the producer is unknown (its state expired or was reset), in which case
//!   any sequence is accepted ([`LogError::OutOfOrderSequence`]);
//! - `appendDataBatch`: a non-transactional batch from a producer with an open transaction is
//!   refused (`InvalidTxnStateException`, here [`LogError::InvalidTransaction`]);
//! - `LogValidator` / `ProduceRequest`: a transactional batch or a transaction marker needs a
//!   producer id, and a batch with a producer id needs a sequence.
//!
//! [`ProducerStateTable::find_duplicate`] is `ProducerStateEntry.findDuplicateBatch`: same epoch
//! and exactly the sequence range of one of the retained batches. Kafka answers such a retry with
//! the offsets of the batch already written and appends nothing.
//!
//! [`ProducerStateTable::validate_replicated`] is what Kafka still checks on a follower append
//! (`AppendOrigin.REPLICATION`): only the open-transaction rule; epochs are merely logged and
//! sequences not checked.
//!
//! Not modelled (there is no field for them in [`BatchHeader`] or no clock in the kernel):
//! coordinator epochs of markers, timestamps and producer-id expiration by time, transaction
//! version 2 marker epochs (`markerEpoch > currentEpoch`), KIP-890 transaction verification,
//! and the log-start-offset handling of `onLogStartOffsetIncremented` (the kernel's logs only
//! lose their prefix by full truncation).

use std::borrow::Borrow;

use serde::{Deserialize, Serialize};

use crate::batch::{BatchHeader, ControlType};
use crate::log::LogError;
use crate::types::{Offset, ProducerEpoch, ProducerId, Sequence, NO_PRODUCER_EPOCH, NO_SEQUENCE};

/// How many batches per producer Kafka retains for duplicate detection
/// (`ProducerStateEntry.NUM_BATCHES_TO_RETAIN`).
pub const NUM_BATCHES_TO_RETAIN: usize = 5;

/// What Kafka's `BatchMetadata` remembers of one appended batch of a producer.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize)]
pub struct BatchMetadata {
    /// Sequence of the first record.
    pub first_seq: Sequence,
    /// Sequence of the last record.
    pub last_seq: Sequence,
    /// Offset of the first record.
    pub first_offset: Offset,
    /// Offset of the last record.
    pub last_offset: Offset,
}

/// The state of one producer id (Kafka's `ProducerStateEntry`).
#[derive(Clone, PartialEq, Eq, Hash, Debug, Serialize, Deserialize)]
pub struct ProducerEntry {
    /// The producer epoch of the latest batch or marker.
    pub producer_epoch: ProducerEpoch,
    /// The last batches of the current epoch, oldest first, at most [`NUM_BATCHES_TO_RETAIN`].
    pub batches: im::Vector<BatchMetadata>,
    /// First offset of the producer's open transaction.
    pub current_txn_first_offset: Option<Offset>,
}

impl ProducerEntry {
    /// An entry for a producer id never seen (Kafka's `ProducerStateEntry.empty`).
    fn empty() -> Self {
        ProducerEntry {
            producer_epoch: NO_PRODUCER_EPOCH,
            batches: im::Vector::new(),
            current_txn_first_offset: None,
        }
    }

    /// Sequence of the last record of the last retained batch, or [`NO_SEQUENCE`].
    pub fn last_seq(&self) -> Sequence {
        self.batches.last().map_or(NO_SEQUENCE, |b| b.last_seq)
    }

    /// Offset of the last record of the last retained batch.
    pub fn last_data_offset(&self) -> Option<Offset> {
        self.batches.last().map(|b| b.last_offset)
    }

    /// Kafka's `maybeUpdateProducerEpoch`: a new epoch forgets the batches of the old one.
    fn set_epoch(&mut self, epoch: ProducerEpoch) {
        if self.producer_epoch != epoch {
            self.batches.clear();
            self.producer_epoch = epoch;
        }
    }

    /// Kafka's `addBatchMetadata`: keeps the newest [`NUM_BATCHES_TO_RETAIN`].
    fn add_batch(&mut self, meta: BatchMetadata) {
        if self.batches.len() >= NUM_BATCHES_TO_RETAIN {
            self.batches.pop_front();
        }
        self.batches.push_back(meta);
    }
}

/// Kafka's `ProducerStateManager` as a value: per producer id its [`ProducerEntry`], plus the
/// open transactions ordered by first offset (Kafka's `ongoingTxns`) and the closed ones whose
/// marker is not yet below the high watermark (Kafka's `unreplicatedTxns`).
#[derive(Clone, PartialEq, Eq, Hash, Debug, Default, Serialize, Deserialize)]
pub struct ProducerStateTable {
    producers: im::OrdMap<ProducerId, ProducerEntry>,
    /// `(first offset, producer id)` of every open transaction.
    ongoing: im::OrdSet<(Offset, ProducerId)>,
    /// `(first offset, marker offset, producer id)` of every closed transaction whose marker
    /// the high watermark has not passed.
    unreplicated: im::OrdSet<(Offset, Offset, ProducerId)>,
}

/// Whether `next` follows `last` (Kafka's `ProducerAppendInfo.inSequence`).
fn in_sequence(last: Sequence, next: Sequence) -> bool {
    i64::from(next) == i64::from(last) + 1 || (next == 0 && last == i32::MAX)
}

impl ProducerStateTable {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// The table after applying `batches` in order to an empty table (Kafka's
    /// `rebuildProducerState` over the batches of a log).
    pub fn rebuild<I>(batches: I) -> Self
    where
        I: IntoIterator,
        I::Item: Borrow<BatchHeader>,
    {
        let mut table = Self::new();
        for batch in batches {
            table.apply(batch.borrow());
        }
        table
    }

    /// First offset of the earliest open transaction.
    pub fn first_open_transaction_offset(&self) -> Option<Offset> {
        self.ongoing.get_min().map(|&(offset, _)| offset)
    }

    /// First offset of the earliest transaction that is open or whose marker the high watermark
    /// has not passed yet (Kafka's `firstUnstableOffset`): the LSO is this, capped by the HW.
    pub fn first_unstable_offset(&self) -> Option<Offset> {
        let unreplicated = self.unreplicated.get_min().map(|&(offset, _, _)| offset);
        match (self.first_open_transaction_offset(), unreplicated) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Forgets the closed transactions whose marker lies below `high_watermark` (Kafka's
    /// `onHighWatermarkUpdated`). A log calls it whenever its HW moves or its batches change,
    /// so that the table is a function of the batches and the HW.
    pub fn on_high_watermark(&mut self, high_watermark: Offset) {
        let replicated: Vec<_> = self
            .unreplicated
            .iter()
            .filter(|&&(_, marker, _)| marker < high_watermark)
            .copied()
            .collect();
        for entry in replicated {
            self.unreplicated.remove(&entry);
        }
    }

    /// The open transactions as `(producer id, producer epoch, first offset)`, ordered by first
    /// offset: the transactions the ABORT stop strategy closes.
    pub fn open_transactions(
        &self,
    ) -> impl Iterator<Item = (ProducerId, ProducerEpoch, Offset)> + '_ {
        self.ongoing.iter().filter_map(move |&(offset, pid)| {
            self.producers
                .get(&pid)
                .map(|entry| (pid, entry.producer_epoch, offset))
        })
    }

    /// The entry of `producer_id`, if the producer is known.
    pub fn get(&self, producer_id: ProducerId) -> Option<&ProducerEntry> {
        self.producers.get(&producer_id)
    }

    /// Every known producer with its entry, by producer id.
    pub fn producers(&self) -> impl Iterator<Item = (ProducerId, &ProducerEntry)> + '_ {
        self.producers.iter().map(|(pid, entry)| (*pid, entry))
    }

    /// Number of known producers.
    pub fn len(&self) -> usize {
        self.producers.len()
    }

    /// Whether no producer is known.
    pub fn is_empty(&self) -> bool {
        self.producers.is_empty()
    }

    /// Forgets every producer and transaction (Kafka's `truncateFullyAndStartAt`).
    pub fn clear(&mut self) {
        self.producers.clear();
        self.ongoing.clear();
        self.unreplicated.clear();
    }

    /// `MIRROR_PID_RESET`: forgets every producer and open transaction; closed transactions
    /// whose markers are not replicated yet keep holding the LSO.
    fn reset_producers(&mut self) {
        self.producers.clear();
        self.ongoing.clear();
    }

    /// Updates the table for `batch`, just appended to the log (see the module documentation).
    /// Never fails: validation is [`validate_leader_append`](Self::validate_leader_append)'s and
    /// [`validate_replicated`](Self::validate_replicated)'s job.
    pub fn apply(&mut self, batch: &BatchHeader) {
        match batch.control {
            Some(ControlType::MirrorPidReset) => self.reset_producers(),
            Some(ControlType::Abort | ControlType::Commit) => {
                if !batch.has_producer_id() {
                    return;
                }
                let pid = batch.producer_id;
                let mut entry = self
                    .producers
                    .get(&pid)
                    .cloned()
                    .unwrap_or_else(ProducerEntry::empty);
                entry.set_epoch(batch.producer_epoch);
                if let Some(first) = entry.current_txn_first_offset.take() {
                    self.ongoing.remove(&(first, pid));
                    self.unreplicated.insert((first, batch.base_offset, pid));
                }
                self.producers.insert(pid, entry);
            }
            None => {
                if !batch.has_producer_id() {
                    return;
                }
                let pid = batch.producer_id;
                let mut entry = self
                    .producers
                    .get(&pid)
                    .cloned()
                    .unwrap_or_else(ProducerEntry::empty);
                entry.set_epoch(batch.producer_epoch);
                entry.add_batch(BatchMetadata {
                    first_seq: batch.base_sequence,
                    last_seq: last_sequence(batch),
                    first_offset: batch.base_offset,
                    last_offset: batch.last_offset,
                });
                if batch.is_transactional && entry.current_txn_first_offset.is_none() {
                    entry.current_txn_first_offset = Some(batch.base_offset);
                    self.ongoing.insert((batch.base_offset, pid));
                }
                self.producers.insert(pid, entry);
            }
        }
    }

    /// Kafka's `findDuplicateBatch`: the retained batch of `batch`'s producer that has `batch`'s
    /// producer epoch and exactly its sequence range, if any. Only data batches with a producer
    /// id can be duplicates. A leader checks this before
    /// [`validate_leader_append`](Self::validate_leader_append) and answers a duplicate with the
    /// batch already written, appending nothing.
    pub fn find_duplicate(&self, batch: &BatchHeader) -> Option<BatchMetadata> {
        if batch.is_control() || !batch.has_producer_id() || batch.base_sequence == NO_SEQUENCE {
            return None;
        }
        let entry = self.producers.get(&batch.producer_id)?;
        if entry.producer_epoch != batch.producer_epoch {
            return None;
        }
        let last_seq = last_sequence(batch);
        entry
            .batches
            .iter()
            .find(|m| m.first_seq == batch.base_sequence && m.last_seq == last_seq)
            .copied()
    }

    /// Validates `batch` (offsets already assigned) for a leader append: the client and
    /// coordinator checks of Kafka listed in the module documentation. `Ok` means
    /// [`apply`](Self::apply) may follow.
    pub fn validate_leader_append(&self, batch: &BatchHeader) -> Result<(), LogError> {
        if batch.is_transactional && !batch.has_producer_id() {
            return Err(LogError::InvalidTransaction(format!(
                "transactional batch at offset {} has no producer id",
                batch.base_offset
            )));
        }
        match batch.control {
            Some(ControlType::MirrorPidReset) => {
                if batch.has_producer_id() || batch.is_transactional {
                    return Err(LogError::InvalidTransaction(format!(
                        "MIRROR_PID_RESET at offset {} must carry no producer and no \
                         transactional flag",
                        batch.base_offset
                    )));
                }
                Ok(())
            }
            Some(marker @ (ControlType::Abort | ControlType::Commit)) => {
                if !batch.has_producer_id() || !batch.is_transactional {
                    return Err(LogError::InvalidTransaction(format!(
                        "{marker:?} marker at offset {} needs a producer id and the \
                         transactional flag",
                        batch.base_offset
                    )));
                }
                self.check_producer_ids(batch)?;
                self.check_producer_epoch(batch)
            }
            None => {
                if !batch.has_producer_id() {
                    return Ok(());
                }
                self.check_producer_ids(batch)?;
                self.check_producer_epoch(batch)?;
                self.check_sequence(batch)?;
                self.check_transaction_state(batch)
            }
        }
    }

    /// What Kafka still checks of a replicated batch (`AppendOrigin.REPLICATION`): a
    /// non-transactional data batch from a producer with an open transaction is refused
    /// (`InvalidTxnStateException`). Producer epochs and sequences are not checked.
    pub fn validate_replicated(&self, batch: &BatchHeader) -> Result<(), LogError> {
        if batch.control.is_none() && batch.has_producer_id() {
            self.check_transaction_state(batch)?;
        }
        Ok(())
    }

    /// Producer id and epoch must be real values (not negative) when a producer id is given.
    fn check_producer_ids(&self, batch: &BatchHeader) -> Result<(), LogError> {
        if batch.producer_id < 0 || batch.producer_epoch < 0 {
            return Err(LogError::InvalidTransaction(format!(
                "batch at offset {} has producer id {} and producer epoch {}; both must be >= 0",
                batch.base_offset, batch.producer_id, batch.producer_epoch
            )));
        }
        Ok(())
    }

    /// Kafka's `checkProducerEpoch` (transaction version 0/1): an older epoch is a zombie.
    fn check_producer_epoch(&self, batch: &BatchHeader) -> Result<(), LogError> {
        match self.producers.get(&batch.producer_id) {
            Some(entry) if batch.producer_epoch < entry.producer_epoch => {
                Err(LogError::InvalidProducerEpoch {
                    producer_id: batch.producer_id,
                    current: entry.producer_epoch,
                    got: batch.producer_epoch,
                })
            }
            _ => Ok(()),
        }
    }

    /// Kafka's `checkSequence` for a client append (epoch already checked not to be older).
    fn check_sequence(&self, batch: &BatchHeader) -> Result<(), LogError> {
        let entry = self.producers.get(&batch.producer_id);
        let current_epoch = entry.map_or(NO_PRODUCER_EPOCH, |e| e.producer_epoch);
        let first = batch.base_sequence;
        let expected = if batch.producer_epoch != current_epoch {
            // A new epoch starts again at 0, unless nothing is known of the producer.
            if current_epoch == NO_PRODUCER_EPOCH {
                None
            } else {
                Some(0)
            }
        } else if current_epoch == NO_PRODUCER_EPOCH {
            None
        } else {
            let last = entry.map_or(NO_SEQUENCE, ProducerEntry::last_seq);
            (!in_sequence(last, first)).then(|| next_sequence(last))
        };
        if first < 0 {
            return Err(LogError::OutOfOrderSequence {
                producer_id: batch.producer_id,
                expected: expected.unwrap_or(0),
                got: first,
            });
        }
        match expected {
            Some(expected) if expected != first => Err(LogError::OutOfOrderSequence {
                producer_id: batch.producer_id,
                expected,
                got: first,
            }),
            _ => Ok(()),
        }
    }

    /// Kafka's `InvalidTxnStateException` in `appendDataBatch`.
    fn check_transaction_state(&self, batch: &BatchHeader) -> Result<(), LogError> {
        let open = self
            .producers
            .get(&batch.producer_id)
            .and_then(|e| e.current_txn_first_offset);
        match open {
            Some(first) if !batch.is_transactional => Err(LogError::InvalidTransaction(format!(
                "producer {} wrote a non-transactional batch at offset {} while its transaction \
                 opened at offset {first} is open",
                batch.producer_id, batch.base_offset
            ))),
            _ => Ok(()),
        }
    }
}

/// Sequence of `batch`'s last record, wrapping at `i32::MAX` as Kafka's does
/// ([`BatchHeader::last_sequence`] computed without any possible overflow, whatever the header).
fn last_sequence(batch: &BatchHeader) -> Sequence {
    if batch.base_sequence == NO_SEQUENCE {
        return NO_SEQUENCE;
    }
    let delta = i128::from(batch.last_offset) - i128::from(batch.base_offset);
    let wrapped = (i128::from(batch.base_sequence) + delta).rem_euclid(i128::from(i32::MAX) + 1);
    Sequence::try_from(wrapped).unwrap_or(NO_SEQUENCE)
}

/// The sequence after `last` (wrapping at `i32::MAX`; 0 after [`NO_SEQUENCE`]).
fn next_sequence(last: Sequence) -> Sequence {
    if last == i32::MAX {
        0
    } else {
        last.saturating_add(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::NO_PRODUCER_ID;

    fn data(
        base: Offset,
        count: i64,
        pid: ProducerId,
        epoch: ProducerEpoch,
        seq: Sequence,
    ) -> BatchHeader {
        BatchHeader {
            producer_id: pid,
            producer_epoch: epoch,
            base_sequence: seq,
            ..BatchHeader::plain(base, base + count - 1, 0)
        }
    }

    fn txn(
        base: Offset,
        count: i64,
        pid: ProducerId,
        epoch: ProducerEpoch,
        seq: Sequence,
    ) -> BatchHeader {
        BatchHeader {
            is_transactional: true,
            ..data(base, count, pid, epoch, seq)
        }
    }

    fn marker(
        at: Offset,
        control: ControlType,
        pid: ProducerId,
        epoch: ProducerEpoch,
    ) -> BatchHeader {
        BatchHeader {
            producer_id: pid,
            producer_epoch: epoch,
            is_transactional: true,
            control: Some(control),
            ..BatchHeader::plain(at, at, 0)
        }
    }

    fn pid_reset(at: Offset) -> BatchHeader {
        BatchHeader {
            control: Some(ControlType::MirrorPidReset),
            ..BatchHeader::plain(at, at, 0)
        }
    }

    #[test]
    fn data_batches_record_sequences_and_keep_five() {
        let mut t = ProducerStateTable::new();
        for i in 0..7 {
            let b = data(i * 2, 2, 7, 0, (i * 2) as Sequence);
            assert_eq!(t.validate_leader_append(&b), Ok(()));
            t.apply(&b);
        }
        let e = t.get(7).expect("producer 7 known");
        assert_eq!(e.batches.len(), NUM_BATCHES_TO_RETAIN);
        assert_eq!(e.last_seq(), 13);
        assert_eq!(e.last_data_offset(), Some(13));
        assert_eq!(e.batches.front().map(|m| m.first_seq), Some(4));
        assert_eq!(t.first_open_transaction_offset(), None);
    }

    #[test]
    fn sequence_rules_follow_kafka() {
        let mut t = ProducerStateTable::new();
        // Unknown producer: any sequence.
        let first = data(0, 3, 1, 2, 40);
        assert_eq!(t.validate_leader_append(&first), Ok(()));
        t.apply(&first);
        // Same epoch: must follow 42.
        assert_eq!(
            t.validate_leader_append(&data(3, 1, 1, 2, 44)),
            Err(LogError::OutOfOrderSequence {
                producer_id: 1,
                expected: 43,
                got: 44
            })
        );
        assert_eq!(t.validate_leader_append(&data(3, 1, 1, 2, 43)), Ok(()));
        // New epoch: must start at 0.
        assert_eq!(
            t.validate_leader_append(&data(3, 1, 1, 3, 43)),
            Err(LogError::OutOfOrderSequence {
                producer_id: 1,
                expected: 0,
                got: 43
            })
        );
        assert_eq!(t.validate_leader_append(&data(3, 1, 1, 3, 0)), Ok(()));
        // Older epoch: fenced.
        assert_eq!(
            t.validate_leader_append(&data(3, 1, 1, 1, 0)),
            Err(LogError::InvalidProducerEpoch {
                producer_id: 1,
                current: 2,
                got: 1
            })
        );
        // A producer id without a sequence.
        assert!(matches!(
            t.validate_leader_append(&data(3, 1, 5, 0, NO_SEQUENCE)),
            Err(LogError::OutOfOrderSequence { got: -1, .. })
        ));
        // Plain batches are not checked.
        assert_eq!(
            t.validate_leader_append(&BatchHeader::plain(3, 9, 0)),
            Ok(())
        );
    }

    #[test]
    fn sequence_wraps_at_i32_max() {
        let mut t = ProducerStateTable::new();
        t.apply(&data(0, 1, 1, 0, i32::MAX));
        assert_eq!(t.validate_leader_append(&data(1, 1, 1, 0, 0)), Ok(()));
        assert!(t.validate_leader_append(&data(1, 1, 1, 0, 1)).is_err());
    }

    #[test]
    fn duplicates_need_same_epoch_and_exact_range() {
        let mut t = ProducerStateTable::new();
        t.apply(&data(0, 3, 1, 0, 0));
        t.apply(&data(3, 2, 1, 0, 3));
        let dup = t.find_duplicate(&data(10, 3, 1, 0, 0));
        assert_eq!(
            dup,
            Some(BatchMetadata {
                first_seq: 0,
                last_seq: 2,
                first_offset: 0,
                last_offset: 2
            })
        );
        assert_eq!(t.find_duplicate(&data(10, 2, 1, 0, 0)), None);
        assert_eq!(t.find_duplicate(&data(10, 3, 1, 1, 0)), None);
        assert_eq!(t.find_duplicate(&data(10, 3, 2, 0, 0)), None);
        assert_eq!(
            t.find_duplicate(&marker(10, ControlType::Commit, 1, 0)),
            None
        );
    }

    #[test]
    fn transactions_open_at_first_batch_and_close_on_marker() {
        let mut t = ProducerStateTable::new();
        t.apply(&data(0, 2, 1, 0, 0));
        t.apply(&txn(2, 2, 2, 0, 0));
        t.apply(&txn(4, 1, 3, 5, 0));
        t.apply(&txn(5, 1, 2, 0, 2));
        assert_eq!(t.first_open_transaction_offset(), Some(2));
        assert_eq!(
            t.open_transactions().collect::<Vec<_>>(),
            vec![(2, 0, 2), (3, 5, 4)]
        );
        // Non-transactional data while the transaction is open.
        assert!(matches!(
            t.validate_leader_append(&data(6, 1, 2, 0, 3)),
            Err(LogError::InvalidTransaction(_))
        ));
        assert!(t.validate_replicated(&data(6, 1, 2, 0, 3)).is_err());
        // Replication checks neither sequences nor epochs.
        assert_eq!(t.validate_replicated(&txn(6, 1, 2, 0, 99)), Ok(()));
        assert_eq!(t.validate_replicated(&txn(6, 1, 2, -5, 99)), Ok(()));
        let commit = marker(6, ControlType::Commit, 2, 0);
        assert_eq!(t.validate_leader_append(&commit), Ok(()));
        t.apply(&commit);
        assert_eq!(t.first_open_transaction_offset(), Some(4));
        // The entry keeps its sequences across the marker (same epoch).
        assert_eq!(t.get(2).map(ProducerEntry::last_seq), Some(2));
        let abort = marker(7, ControlType::Abort, 3, 6);
        t.apply(&abort);
        assert_eq!(t.first_open_transaction_offset(), None);
        // A marker with a new epoch forgets the old epoch's batches.
        assert_eq!(
            t.get(3).map(|e| (e.producer_epoch, e.batches.len())),
            Some((6, 0))
        );
        // A marker for an unknown producer creates its entry.
        t.apply(&marker(8, ControlType::Abort, 9, 1));
        assert_eq!(t.get(9).map(|e| e.producer_epoch), Some(1));
    }

    #[test]
    fn markers_are_validated() {
        let mut t = ProducerStateTable::new();
        t.apply(&txn(0, 1, 2, 3, 0));
        assert!(matches!(
            t.validate_leader_append(&marker(1, ControlType::Abort, 2, 2)),
            Err(LogError::InvalidProducerEpoch {
                current: 3,
                got: 2,
                ..
            })
        ));
        assert_eq!(
            t.validate_leader_append(&marker(1, ControlType::Abort, 2, 4)),
            Ok(())
        );
        let no_pid = marker(1, ControlType::Commit, NO_PRODUCER_ID, NO_PRODUCER_EPOCH);
        assert!(matches!(
            t.validate_leader_append(&no_pid),
            Err(LogError::InvalidTransaction(_))
        ));
        let not_txn = BatchHeader {
            is_transactional: false,
            ..marker(1, ControlType::Commit, 2, 3)
        };
        assert!(t.validate_leader_append(&not_txn).is_err());
        let txn_no_pid = BatchHeader {
            is_transactional: true,
            ..BatchHeader::plain(1, 1, 0)
        };
        assert!(t.validate_leader_append(&txn_no_pid).is_err());
        assert_eq!(t.validate_leader_append(&pid_reset(1)), Ok(()));
        let reset_with_pid = BatchHeader {
            producer_id: 2,
            ..pid_reset(1)
        };
        assert!(t.validate_leader_append(&reset_with_pid).is_err());
    }

    #[test]
    fn mirror_pid_reset_expires_everything() {
        let batches = [
            data(0, 2, 1, 0, 0),
            txn(2, 2, 2, 0, 0),
            pid_reset(4),
            data(5, 1, 3, 0, 0),
        ];
        let t = ProducerStateTable::rebuild(batches.iter());
        assert_eq!(t.len(), 1);
        assert!(t.get(1).is_none() && t.get(2).is_none());
        assert_eq!(t.first_open_transaction_offset(), None);
        let before = ProducerStateTable::rebuild(&batches[..2]);
        assert_eq!(before.len(), 2);
        assert_eq!(before.first_open_transaction_offset(), Some(2));
        // After the reset, producer 1 is unknown and may use any sequence.
        assert_eq!(t.validate_leader_append(&data(6, 1, 1, 0, 77)), Ok(()));
    }

    #[test]
    fn extreme_headers_never_panic() {
        let mut t = ProducerStateTable::new();
        for (base, last, seq) in [
            (i64::MIN, i64::MAX, i32::MAX),
            (i64::MAX, i64::MIN, i32::MIN),
            (0, i64::MAX, i32::MAX),
        ] {
            let b = data(0, 1, 1, 0, seq);
            let b = BatchHeader {
                base_offset: base,
                last_offset: last,
                ..b
            };
            let _ = t.find_duplicate(&b);
            let _ = t.validate_leader_append(&b);
            t.apply(&b);
        }
        assert_eq!(last_sequence(&data(10, 5, 1, 0, i32::MAX - 1)), 2);
        assert_eq!(last_sequence(&data(10, 5, 1, 0, 3)), 7);
    }

    #[test]
    fn batches_without_producer_change_nothing() {
        let mut t = ProducerStateTable::new();
        t.apply(&BatchHeader::plain(0, 4, 1));
        t.apply(&marker(
            5,
            ControlType::Commit,
            NO_PRODUCER_ID,
            NO_PRODUCER_EPOCH,
        ));
        t.apply(&BatchHeader {
            is_transactional: true,
            ..BatchHeader::plain(6, 6, 1)
        });
        assert!(t.is_empty());
        assert_eq!(t, ProducerStateTable::default());
    }
}
