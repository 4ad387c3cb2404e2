//! The conformance suite of the log contract (feature `testkit`), generic over
//! [`PartitionLog`], in the style of openraft's log-store suite.
//!
//! Every implementation of the contract (the kernel's [`MemLog`](crate::mem_log::MemLog), the
//! harness's file log) runs the same cases:
//!
//! ```ignore
//! kmirror_kernel::testkit::run_all(|| MyLog::open_empty(tempdir()));
//! ```
//!
//! Each case builds fresh logs through `new_log` and touches them only through the trait.
//! Batches for follower appends are obtained by appending as leader to a second fresh log and
//! reading them back, so the suite works whatever `L::Batch` is. After every mutation the case
//! checks [`check_invariants`]; after every refused operation it checks that the observable state
//! ([`LogSnapshot`]) did not change. A failing case panics with a message naming the operation
//! and showing the log; [`Suite::cases`] lists the cases by name, to run them one by one.

use std::fmt::Debug;
use std::marker::PhantomData;

use crate::batch::{BatchHeader, ControlType, LeaderBatch, ProducerBatchInfo};
use crate::epoch_cache::{EpochCache, EpochEntry};
use crate::log::PartitionLog;
use crate::producer_state::ProducerStateTable;
use crate::types::{
    LeaderEpoch, Offset, ProducerEpoch, ProducerId, Sequence, NO_PRODUCER_EPOCH, NO_PRODUCER_ID,
    NO_SEQUENCE,
};

/// Runs every case of the suite against logs made by `new_log` (each call must return an empty
/// log starting at offset 0).
pub fn run_all<L, F>(new_log: F)
where
    L: PartitionLog,
    F: FnMut() -> L,
{
    Suite::new(new_log).run_all();
}

/// `record_count` plain records.
pub fn records(record_count: u32) -> LeaderBatch {
    LeaderBatch::Records {
        record_count,
        producer: None,
        transactional: false,
    }
}

/// `record_count` records of an idempotent producer, starting at sequence `base_sequence`.
pub fn idempotent(
    record_count: u32,
    producer_id: ProducerId,
    producer_epoch: ProducerEpoch,
    base_sequence: Sequence,
) -> LeaderBatch {
    LeaderBatch::Records {
        record_count,
        producer: Some(ProducerBatchInfo {
            producer_id,
            producer_epoch,
            base_sequence,
        }),
        transactional: false,
    }
}

/// `record_count` records of a transactional producer, starting at sequence `base_sequence`.
pub fn transactional(
    record_count: u32,
    producer_id: ProducerId,
    producer_epoch: ProducerEpoch,
    base_sequence: Sequence,
) -> LeaderBatch {
    LeaderBatch::Records {
        record_count,
        producer: Some(ProducerBatchInfo {
            producer_id,
            producer_epoch,
            base_sequence,
        }),
        transactional: true,
    }
}

/// A transaction marker of `control` type for the producer.
pub fn marker(
    control: ControlType,
    producer_id: ProducerId,
    producer_epoch: ProducerEpoch,
) -> LeaderBatch {
    LeaderBatch::Control {
        control,
        producer: Some((producer_id, producer_epoch)),
    }
}

/// The `MIRROR_PID_RESET` control batch.
pub fn pid_reset() -> LeaderBatch {
    LeaderBatch::Control {
        control: ControlType::MirrorPidReset,
        producer: None,
    }
}

/// Everything a caller can observe of a log through [`LogView`](crate::log::LogView) and
/// [`PartitionLog::read`].
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct LogSnapshot {
    /// The log start offset.
    pub log_start_offset: Offset,
    /// The log end offset.
    pub log_end_offset: Offset,
    /// The high watermark.
    pub high_watermark: Offset,
    /// The last stable offset.
    pub last_stable_offset: Offset,
    /// The epoch cache.
    pub epoch_cache: EpochCache,
    /// The producer state.
    pub producer_state: ProducerStateTable,
    /// The last batch's header.
    pub last_batch: Option<BatchHeader>,
    /// The headers of every batch, oldest first.
    pub batches: Vec<BatchHeader>,
}

impl LogSnapshot {
    /// The observable state of `log`.
    pub fn of<L: PartitionLog>(log: &L) -> Self {
        LogSnapshot {
            log_start_offset: log.log_start_offset(),
            log_end_offset: log.log_end_offset(),
            high_watermark: log.high_watermark(),
            last_stable_offset: log.last_stable_offset(),
            epoch_cache: log.epoch_cache().clone(),
            producer_state: log.producer_state().clone(),
            last_batch: log.last_batch(),
            batches: headers(log),
        }
    }
}

/// The headers of every batch of `log`, oldest first.
pub fn headers<L: PartitionLog>(log: &L) -> Vec<BatchHeader> {
    log.read(log.log_start_offset(), Offset::MAX)
        .iter()
        .map(L::header)
        .collect()
}

/// The epoch cache a log holding `batches` must have: Kafka's `assign` of each batch's
/// `(epoch, base offset)` in order. With epochs that never decrease that is one entry per run of
/// equal epochs, at the run's first base offset; a batch at a lower epoch than an earlier one
/// drops the earlier epochs' entries from its own on, as Kafka's cache does. (A truncation
/// after such a batch leaves a cache only the history explains, which no case of the suite
/// builds.)
pub fn expected_epoch_cache(batches: &[BatchHeader]) -> Vec<EpochEntry> {
    let mut cache = crate::epoch_cache::EpochCache::new();
    for b in batches {
        cache
            .assign(b.partition_leader_epoch, b.base_offset)
            .expect("a stored batch has a non-negative epoch and offset");
    }
    cache.entries().collect()
}

/// Panics unless `log` is consistent: `log start <= LSO <= HW <= LEO`; batches non-empty and
/// contiguous from the log start offset to LEO; the epoch cache strictly increasing and exactly
/// [`expected_epoch_cache`], but for a last entry starting at LEO (a new leader's epoch,
/// [`PartitionLog::assign_epoch_start_offset`], no batch yet); producer state equal to a rebuild
/// from the batches with the HW applied; `last_batch` the last batch.
pub fn check_invariants<L: PartitionLog>(log: &L) {
    let s = LogSnapshot::of(log);
    assert!(
        s.log_start_offset <= s.last_stable_offset
            && s.last_stable_offset <= s.high_watermark
            && s.high_watermark <= s.log_end_offset,
        "offsets out of order: {s:?}"
    );
    let mut next = s.log_start_offset;
    for b in &s.batches {
        assert!(b.last_offset >= b.base_offset, "empty batch {b:?} in {s:?}");
        assert_eq!(b.base_offset, next, "batches not contiguous: {s:?}");
        next = b.next_offset();
    }
    assert_eq!(
        next, s.log_end_offset,
        "LEO is not the end of the last batch: {s:?}"
    );
    let entries: Vec<EpochEntry> = s.epoch_cache.entries().collect();
    assert!(
        entries
            .windows(2)
            .all(|w| w[0].epoch < w[1].epoch && w[0].start_offset < w[1].start_offset),
        "epoch cache not strictly increasing: {s:?}"
    );
    let mut expected = expected_epoch_cache(&s.batches);
    if let Some(elected) = entries
        .last()
        .filter(|e| e.start_offset == s.log_end_offset)
    {
        expected.push(*elected);
    }
    assert_eq!(
        entries, expected,
        "epoch cache does not follow the batches: {s:?}"
    );
    let mut rebuilt = ProducerStateTable::rebuild(&s.batches);
    rebuilt.on_high_watermark(s.high_watermark);
    assert_eq!(
        s.producer_state, rebuilt,
        "producer state differs from a rebuild from the batches: {s:?}"
    );
    assert_eq!(s.last_batch, s.batches.last().copied(), "last_batch: {s:?}");
}

/// The suite: one public method per case, and [`run_all`](Suite::run_all).
pub struct Suite<L, F> {
    new_log: F,
    _log: PhantomData<fn() -> L>,
}

/// A named case of the suite.
pub type Case<L, F> = (&'static str, fn(&mut Suite<L, F>));

impl<L, F> Suite<L, F>
where
    L: PartitionLog,
    F: FnMut() -> L,
{
    /// A suite making its logs with `new_log`.
    pub fn new(new_log: F) -> Self {
        Suite {
            new_log,
            _log: PhantomData,
        }
    }

    /// Every case, by name.
    pub fn cases() -> Vec<Case<L, F>> {
        vec![
            ("empty_log", Self::empty_log),
            (
                "leader_appends_assign_offsets_and_epochs",
                Self::leader_appends_assign_offsets_and_epochs,
            ),
            (
                "read_returns_whole_batches",
                Self::read_returns_whole_batches,
            ),
            (
                "refused_leader_appends_change_nothing",
                Self::refused_leader_appends_change_nothing,
            ),
            (
                "idempotent_sequences_are_validated",
                Self::idempotent_sequences_are_validated,
            ),
            (
                "idempotent_retries_return_the_original_batch",
                Self::idempotent_retries_return_the_original_batch,
            ),
            ("producer_epoch_fencing", Self::producer_epoch_fencing),
            (
                "transaction_commit_moves_lso",
                Self::transaction_commit_moves_lso,
            ),
            (
                "transaction_abort_moves_lso",
                Self::transaction_abort_moves_lso,
            ),
            (
                "non_transactional_write_inside_transaction_is_refused",
                Self::non_transactional_write_inside_transaction_is_refused,
            ),
            ("stale_marker_is_refused", Self::stale_marker_is_refused),
            (
                "mirror_pid_reset_expires_producer_state",
                Self::mirror_pid_reset_expires_producer_state,
            ),
            (
                "high_watermark_moves_within_hw_and_leo",
                Self::high_watermark_moves_within_hw_and_leo,
            ),
            (
                "follower_append_keeps_offsets_and_epochs",
                Self::follower_append_keeps_offsets_and_epochs,
            ),
            (
                "follower_append_in_pieces_equals_whole",
                Self::follower_append_in_pieces_equals_whole,
            ),
            (
                "refused_follower_appends_change_nothing",
                Self::refused_follower_appends_change_nothing,
            ),
            (
                "a_new_leader_epoch_starts_at_log_end",
                Self::a_new_leader_epoch_starts_at_log_end,
            ),
            (
                "appends_below_the_latest_epoch_drop_its_newer_entries",
                Self::appends_below_the_latest_epoch_drop_its_newer_entries,
            ),
            (
                "truncate_at_batch_boundary",
                Self::truncate_at_batch_boundary,
            ),
            (
                "truncate_inside_batch_removes_the_whole_batch",
                Self::truncate_inside_batch_removes_the_whole_batch,
            ),
            (
                "truncate_at_or_above_leo_changes_nothing",
                Self::truncate_at_or_above_leo_changes_nothing,
            ),
            (
                "truncate_below_hw_clamps_hw",
                Self::truncate_below_hw_clamps_hw,
            ),
            (
                "truncate_to_lso_drops_open_transactions",
                Self::truncate_to_lso_drops_open_transactions,
            ),
            (
                "truncate_to_lso_drops_a_transaction_with_an_unreplicated_marker",
                Self::truncate_to_lso_drops_a_transaction_with_an_unreplicated_marker,
            ),
            (
                "truncate_rebuilds_producer_sequences",
                Self::truncate_rebuilds_producer_sequences,
            ),
            (
                "truncate_below_log_start_truncates_fully",
                Self::truncate_below_log_start_truncates_fully,
            ),
            (
                "truncate_fully_and_start_at_resets_everything",
                Self::truncate_fully_and_start_at_resets_everything,
            ),
            (
                "negative_offsets_are_refused",
                Self::negative_offsets_are_refused,
            ),
        ]
    }

    /// Runs every case.
    pub fn run_all(&mut self) {
        for (_name, case) in Self::cases() {
            case(self);
        }
    }

    fn fresh(&mut self) -> L {
        let log = (self.new_log)();
        assert_eq!(
            (log.log_start_offset(), log.log_end_offset()),
            (0, 0),
            "new_log must return an empty log starting at offset 0"
        );
        log
    }

    /// A log with the batches appended as leader, each `(leader epoch, batch)`.
    fn log_with(&mut self, batches: &[(LeaderEpoch, LeaderBatch)]) -> L {
        let mut log = self.fresh();
        for &(epoch, batch) in batches {
            leader(&mut log, epoch, batch);
        }
        log
    }

    /// A new log whose end is `at`, then `batches` appended as leader; returns their stored
    /// form, for follower appends.
    fn foreign_batches(
        &mut self,
        at: Offset,
        batches: &[(LeaderEpoch, LeaderBatch)],
    ) -> Vec<L::Batch> {
        let mut src = self.fresh();
        src.truncate_fully_and_start_at(at)
            .unwrap_or_else(|e| panic!("truncate_fully_and_start_at({at}): {e:?}"));
        for &(epoch, batch) in batches {
            leader(&mut src, epoch, batch);
        }
        src.read(at, Offset::MAX)
    }

    /// A new log is empty at 0 with nothing known.
    pub fn empty_log(&mut self) {
        let log = self.fresh();
        let s = LogSnapshot::of(&log);
        assert_eq!(
            (
                s.log_start_offset,
                s.log_end_offset,
                s.high_watermark,
                s.last_stable_offset
            ),
            (0, 0, 0, 0)
        );
        assert!(s.epoch_cache.is_empty());
        assert!(s.producer_state.is_empty());
        assert_eq!(s.last_batch, None);
        assert!(s.batches.is_empty());
        assert!(log.read(0, 100).is_empty());
        check_invariants(&log);
    }

    /// Leader appends take offsets from LEO and stamp the leader epoch; the epoch cache gets an
    /// entry per new epoch; HW does not move.
    pub fn leader_appends_assign_offsets_and_epochs(&mut self) {
        let mut log = self.fresh();
        let a = leader(&mut log, 1, records(3));
        assert_eq!(a, BatchHeader::plain(0, 2, 1));
        let b = leader(&mut log, 1, records(2));
        assert_eq!(b, BatchHeader::plain(3, 4, 1));
        let c = leader(&mut log, 4, records(1));
        assert_eq!(c, BatchHeader::plain(5, 5, 4));
        assert_eq!(log.log_end_offset(), 6);
        assert_eq!(log.high_watermark(), 0);
        assert_eq!(log.last_batch(), Some(c));
        assert_eq!(cache_pairs(&log), vec![(1, 0), (4, 5)]);
        assert_eq!(headers(&log), vec![a, b, c]);
        assert!(log.producer_state().is_empty());
    }

    /// `read(from, below)` returns the whole batches overlapping `[from, below)`.
    pub fn read_returns_whole_batches(&mut self) {
        let log = self.log_with(&[(0, records(3)), (0, records(2)), (0, records(4))]);
        let bases = |from, below| -> Vec<Offset> {
            log.read(from, below)
                .iter()
                .map(|b| L::header(b).base_offset)
                .collect()
        };
        assert_eq!(bases(0, 9), vec![0, 3, 5]);
        assert_eq!(bases(0, Offset::MAX), vec![0, 3, 5]);
        assert_eq!(bases(4, 9), vec![3, 5]);
        assert_eq!(bases(3, 5), vec![3]);
        assert_eq!(bases(2, 4), vec![0, 3]);
        assert_eq!(bases(8, 9), vec![5]);
        assert_eq!(bases(9, 20), Vec::<Offset>::new());
        assert_eq!(bases(0, 0), Vec::<Offset>::new());
        assert_eq!(bases(4, 3), Vec::<Offset>::new());
    }

    /// Leader appends the contract refuses leave the log unchanged.
    pub fn refused_leader_appends_change_nothing(&mut self) {
        let mut log = self.log_with(&[(3, records(2))]);
        refused(&mut log, "zero records", |l| {
            l.append_as_leader(3, records(0))
        });
        refused(&mut log, "negative leader epoch", |l| {
            l.append_as_leader(-1, records(1))
        });
        refused(&mut log, "transactional batch without producer", |l| {
            l.append_as_leader(
                3,
                LeaderBatch::Records {
                    record_count: 1,
                    producer: None,
                    transactional: true,
                },
            )
        });
        refused(&mut log, "commit without producer", |l| {
            l.append_as_leader(
                3,
                LeaderBatch::Control {
                    control: ControlType::Commit,
                    producer: None,
                },
            )
        });
        refused(&mut log, "MIRROR_PID_RESET with producer", |l| {
            l.append_as_leader(
                3,
                LeaderBatch::Control {
                    control: ControlType::MirrorPidReset,
                    producer: Some((1, 0)),
                },
            )
        });
        refused(&mut log, "idempotent batch with negative sequence", |l| {
            l.append_as_leader(3, idempotent(1, 1, 0, -3))
        });
        refused(&mut log, "negative producer epoch", |l| {
            l.append_as_leader(3, idempotent(1, 1, -2, 0))
        });
        assert_eq!(log.log_end_offset(), 2);
        // The same epoch and a newer one are still accepted.
        leader(&mut log, 3, records(1));
        leader(&mut log, 5, records(1));
    }

    /// Idempotent appends: any sequence for an unknown producer, then continuity within an
    /// epoch, and sequence 0 to start a new epoch.
    pub fn idempotent_sequences_are_validated(&mut self) {
        let mut log = self.fresh();
        let a = leader(&mut log, 0, idempotent(3, 8, 0, 100));
        assert_eq!(
            (
                a.producer_id,
                a.producer_epoch,
                a.base_sequence,
                a.is_transactional
            ),
            (8, 0, 100, false)
        );
        assert_eq!(a.last_sequence(), 102);
        refused(&mut log, "sequence gap", |l| {
            l.append_as_leader(0, idempotent(1, 8, 0, 104))
        });
        refused(&mut log, "sequence going back", |l| {
            l.append_as_leader(0, idempotent(1, 8, 0, 102))
        });
        leader(&mut log, 0, idempotent(2, 8, 0, 103));
        refused(&mut log, "new producer epoch not at sequence 0", |l| {
            l.append_as_leader(0, idempotent(1, 8, 1, 105))
        });
        leader(&mut log, 0, idempotent(1, 8, 1, 0));
        leader(&mut log, 0, idempotent(1, 8, 1, 1));
        let entry = log.producer_state().get(8).cloned();
        assert_eq!(
            entry.map(|e| (e.producer_epoch, e.last_seq(), e.last_data_offset())),
            Some((1, 1, Some(6)))
        );
        // Another producer is independent.
        leader(&mut log, 0, idempotent(1, 9, 0, 7));
        assert_eq!(log.producer_state().len(), 2);
        assert_eq!(log.log_end_offset(), 8);
        assert_eq!(log.last_stable_offset(), 0);
    }

    /// A retry of one of the producer's last five batches is answered with the batch already in
    /// the log, and nothing is appended; older retries are out of sequence.
    pub fn idempotent_retries_return_the_original_batch(&mut self) {
        let mut log = self.fresh();
        let first = leader(&mut log, 0, idempotent(3, 5, 0, 0));
        let second = leader(&mut log, 0, idempotent(2, 5, 0, 3));
        leader(&mut log, 2, records(1));
        let before = LogSnapshot::of(&log);
        let again = leader(&mut log, 2, idempotent(3, 5, 0, 0));
        assert_eq!(again, first, "a duplicate returns the original batch");
        let again = leader(&mut log, 2, idempotent(2, 5, 0, 3));
        assert_eq!(again, second);
        assert_eq!(LogSnapshot::of(&log), before, "a duplicate appends nothing");
        // Not the same range: not a duplicate, and out of sequence.
        refused(&mut log, "overlapping retry", |l| {
            l.append_as_leader(2, idempotent(2, 5, 0, 0))
        });
        // Five more batches push `first` out of the retained window.
        for seq in 5..10 {
            leader(&mut log, 2, idempotent(1, 5, 0, seq));
        }
        refused(&mut log, "retry older than the retained batches", |l| {
            l.append_as_leader(2, idempotent(3, 5, 0, 0))
        });
        // The newest five are still recognised.
        let last = log.last_batch();
        assert_eq!(Some(leader(&mut log, 2, idempotent(1, 5, 0, 9))), last);
    }

    /// An append from an older producer epoch is fenced.
    pub fn producer_epoch_fencing(&mut self) {
        let mut log = self.log_with(&[(0, idempotent(1, 3, 2, 0))]);
        refused(&mut log, "older producer epoch", |l| {
            l.append_as_leader(0, idempotent(1, 3, 1, 1))
        });
        refused(&mut log, "older producer epoch, transactional", |l| {
            l.append_as_leader(0, transactional(1, 3, 1, 0))
        });
        leader(&mut log, 0, idempotent(1, 3, 2, 1));
    }

    /// A transaction holds the LSO at its first offset until the HW passes its COMMIT marker
    /// (Kafka's `unreplicatedTxns`); the marker is a transactional control batch of the producer.
    pub fn transaction_commit_moves_lso(&mut self) {
        let mut log = self.log_with(&[(1, records(2))]);
        let t1 = leader(&mut log, 1, transactional(2, 9, 0, 0));
        assert!(t1.is_transactional && !t1.is_control());
        advance(&mut log, 4);
        assert_eq!(log.last_stable_offset(), 2);
        assert_eq!(
            log.producer_state().open_transactions().collect::<Vec<_>>(),
            vec![(9, 0, 2)]
        );
        leader(&mut log, 1, transactional(1, 9, 0, 2));
        leader(&mut log, 1, records(1));
        advance(&mut log, 6);
        assert_eq!(log.last_stable_offset(), 2);
        let commit = leader(&mut log, 1, marker(ControlType::Commit, 9, 0));
        assert_eq!(
            commit,
            BatchHeader {
                base_offset: 6,
                last_offset: 6,
                partition_leader_epoch: 1,
                producer_id: 9,
                producer_epoch: 0,
                base_sequence: NO_SEQUENCE,
                is_transactional: true,
                control: Some(ControlType::Commit),
            }
        );
        assert_eq!(log.producer_state().first_open_transaction_offset(), None);
        assert_eq!(
            log.last_stable_offset(),
            2,
            "the marker is not below the HW yet: the transaction still holds the LSO"
        );
        advance(&mut log, 7);
        assert_eq!(
            log.last_stable_offset(),
            7,
            "LSO is HW once nothing is open or unreplicated"
        );
        // The producer keeps its sequence across the marker.
        leader(&mut log, 1, transactional(1, 9, 0, 3));
        assert_eq!(
            log.producer_state().first_open_transaction_offset(),
            Some(7)
        );
    }

    /// Interleaved transactions: the LSO follows the earliest open one as they abort.
    pub fn transaction_abort_moves_lso(&mut self) {
        let mut log = self.log_with(&[
            (2, transactional(2, 1, 0, 0)),
            (2, transactional(1, 2, 4, 0)),
            (2, transactional(1, 1, 0, 2)),
        ]);
        advance(&mut log, 4);
        assert_eq!(log.last_stable_offset(), 0);
        assert_eq!(
            log.producer_state().open_transactions().collect::<Vec<_>>(),
            vec![(1, 0, 0), (2, 4, 2)]
        );
        let abort = leader(&mut log, 2, marker(ControlType::Abort, 1, 0));
        assert_eq!(
            (abort.control, abort.producer_id, abort.is_transactional),
            (Some(ControlType::Abort), 1, true)
        );
        assert_eq!(
            log.last_stable_offset(),
            0,
            "the ABORT at 4 is not below the HW"
        );
        advance(&mut log, 5);
        assert_eq!(log.last_stable_offset(), 2);
        leader(&mut log, 2, marker(ControlType::Abort, 2, 4));
        assert_eq!(
            log.last_stable_offset(),
            2,
            "the ABORT at 5 is not below the HW"
        );
        advance(&mut log, 6);
        assert_eq!(log.last_stable_offset(), 6);
        assert_eq!(log.producer_state().open_transactions().count(), 0);
    }

    /// A producer with an open transaction cannot write outside it.
    pub fn non_transactional_write_inside_transaction_is_refused(&mut self) {
        let mut log = self.log_with(&[(0, transactional(1, 4, 0, 0))]);
        refused(&mut log, "idempotent write inside a transaction", |l| {
            l.append_as_leader(0, idempotent(1, 4, 0, 1))
        });
        leader(&mut log, 0, marker(ControlType::Commit, 4, 0));
        leader(&mut log, 0, idempotent(1, 4, 0, 1));
    }

    /// A marker with an epoch older than the producer's is a zombie's and is refused; a marker
    /// with a newer epoch is accepted and closes the transaction.
    pub fn stale_marker_is_refused(&mut self) {
        let mut log = self.log_with(&[(0, transactional(1, 6, 3, 0))]);
        refused(&mut log, "marker from an older producer epoch", |l| {
            l.append_as_leader(0, marker(ControlType::Abort, 6, 2))
        });
        leader(&mut log, 0, marker(ControlType::Abort, 6, 4));
        assert_eq!(log.producer_state().open_transactions().count(), 0);
        assert_eq!(
            log.producer_state().get(6).map(|e| e.producer_epoch),
            Some(4)
        );
    }

    /// `MIRROR_PID_RESET` expires every producer, open transactions included.
    pub fn mirror_pid_reset_expires_producer_state(&mut self) {
        let mut log = self.log_with(&[(1, idempotent(2, 1, 0, 0)), (1, transactional(2, 2, 0, 0))]);
        advance(&mut log, 4);
        assert_eq!(log.last_stable_offset(), 2);
        let reset = leader(&mut log, 2, pid_reset());
        assert_eq!(
            reset,
            BatchHeader {
                base_offset: 4,
                last_offset: 4,
                partition_leader_epoch: 2,
                producer_id: NO_PRODUCER_ID,
                producer_epoch: NO_PRODUCER_EPOCH,
                base_sequence: NO_SEQUENCE,
                is_transactional: false,
                control: Some(ControlType::MirrorPidReset),
            }
        );
        assert!(log.producer_state().is_empty());
        assert_eq!(log.last_stable_offset(), 4);
        advance(&mut log, 5);
        assert_eq!(log.last_stable_offset(), 5);
        // Both producers are unknown now: any sequence, and no open transaction.
        leader(&mut log, 2, idempotent(1, 1, 0, 1000));
        leader(&mut log, 2, idempotent(1, 2, 0, 7));
        assert_eq!(log.last_stable_offset(), 5);
    }

    /// HW moves only forward, never past LEO.
    pub fn high_watermark_moves_within_hw_and_leo(&mut self) {
        let mut log = self.log_with(&[(0, records(5))]);
        advance(&mut log, 3);
        advance(&mut log, 3);
        refused(&mut log, "HW backwards", |l| l.advance_high_watermark(2));
        refused(&mut log, "HW past LEO", |l| l.advance_high_watermark(6));
        advance(&mut log, 5);
        assert_eq!(log.high_watermark(), 5);
        assert_eq!(log.last_stable_offset(), 5);
    }

    /// Follower appends keep offsets, epochs and producers; the follower's epoch cache and
    /// producer state end up equal to the source's; HW does not move.
    pub fn follower_append_keeps_offsets_and_epochs(&mut self) {
        let mut src = self.log_with(&source_script());
        let batches = src.read(0, Offset::MAX);
        let mut dst = self.fresh();
        follower(&mut dst, &batches);
        assert_eq!(headers(&dst), headers(&src));
        assert_eq!(dst.epoch_cache(), src.epoch_cache());
        assert_eq!(dst.producer_state(), src.producer_state());
        assert_eq!(dst.log_end_offset(), src.log_end_offset());
        assert_eq!(dst.high_watermark(), 0);
        assert_eq!(cache_pairs(&dst), vec![(1, 0), (2, 5), (4, 8)]);
        let src_leo = src.log_end_offset();
        advance(&mut src, src_leo);
        advance(&mut dst, 8);
        // The source's transaction was committed at 7: nothing open.
        assert_eq!(dst.last_stable_offset(), 8);
    }

    /// Appending a source's batches in several calls gives the same log as in one.
    pub fn follower_append_in_pieces_equals_whole(&mut self) {
        let src = self.log_with(&source_script());
        let batches = src.read(0, Offset::MAX);
        let mut whole = self.fresh();
        follower(&mut whole, &batches);
        for split in 0..=batches.len() {
            let mut pieces = self.fresh();
            let (a, b) = batches.split_at(split);
            follower(&mut pieces, a);
            follower(&mut pieces, b);
            assert_eq!(
                LogSnapshot::of(&pieces),
                LogSnapshot::of(&whole),
                "split at {split}"
            );
        }
        // Within a transaction, the follower's LSO follows the open transaction.
        let mut open = self.fresh();
        let upto_txn: Vec<L::Batch> = batches
            .iter()
            .take_while(|b| !L::header(b).is_control())
            .cloned()
            .collect();
        follower(&mut open, &upto_txn);
        let open_leo = open.log_end_offset();
        advance(&mut open, open_leo);
        assert_eq!(open.last_stable_offset(), 5);
    }

    /// Follower appends that do not continue the log or write outside an open transaction are
    /// refused as a whole.
    pub fn refused_follower_appends_change_nothing(&mut self) {
        let src = self.log_with(&source_script());
        let batches = src.read(0, Offset::MAX);
        let mut dst = self.fresh();
        let tail = batches.get(1..).unwrap_or_default();
        refused(&mut dst, "first batch above LEO", |l| {
            l.append_as_follower(tail)
        });
        let gap: Vec<L::Batch> = batches.iter().step_by(2).cloned().collect();
        refused(&mut dst, "gap between batches", |l| {
            l.append_as_follower(&gap)
        });
        assert_eq!(
            dst.log_end_offset(),
            0,
            "nothing of a refused append is kept"
        );
        follower(&mut dst, &[]);
        assert_eq!(LogSnapshot::of(&dst), LogSnapshot::of(&self.fresh()));

        follower(&mut dst, &batches);
        let first = batches.get(..1).unwrap_or_default();
        refused(&mut dst, "batch below LEO", |l| l.append_as_follower(first));
        let leo = dst.log_end_offset();
        let newer = self.foreign_batches(leo, &[(4, records(1)), (6, records(2))]);
        follower(&mut dst, &newer);
        assert_eq!(
            cache_pairs(&dst),
            vec![(1, 0), (2, 5), (4, 8), (6, leo + 1)]
        );

        // Producer 5 opens a transaction on the destination; a batch elsewhere from producer 5
        // outside any transaction cannot follow it.
        let leo = dst.log_end_offset();
        let txn = self.foreign_batches(leo, &[(6, transactional(1, 5, 1, 0))]);
        follower(&mut dst, &txn);
        let outside = self.foreign_batches(leo + 1, &[(6, idempotent(1, 5, 1, 1))]);
        refused(
            &mut dst,
            "non-transactional batch inside a transaction",
            |l| l.append_as_follower(&outside),
        );
    }

    /// A new leader's epoch is recorded at LEO before any batch (Kafka's `makeLeader`), so the
    /// log answers `end_offset_for` of an epoch it skipped with the end of the one before; the
    /// leader's first batch at that epoch leaves the entry as it is.
    pub fn a_new_leader_epoch_starts_at_log_end(&mut self) {
        let mut log = self.log_with(&[(1, records(2))]);
        log.assign_epoch_start_offset(3, 2)
            .unwrap_or_else(|e| panic!("assign_epoch_start_offset(3, 2): {e:?}"));
        assert_eq!(cache_pairs(&log), vec![(1, 0), (3, 2)]);
        assert_eq!(log.log_end_offset(), 2, "no batch is written");
        let answer = |log: &L, epoch| log.epoch_cache().end_offset_for(epoch, 2);
        assert_eq!(
            answer(&log, 2),
            crate::types::EpochAndOffset {
                epoch: 1,
                end_offset: 2
            },
            "an epoch between the two is answered with the end of epoch 1"
        );
        check_invariants(&log);
        let h = leader(&mut log, 3, records(1));
        assert_eq!(h, BatchHeader::plain(2, 2, 3));
        assert_eq!(cache_pairs(&log), vec![(1, 0), (3, 2)]);
        let mut negative = self.fresh();
        refused(&mut negative, "negative epoch", |l| {
            l.assign_epoch_start_offset(-1, 0)
        });
    }

    /// An append at an epoch below the latest is accepted, as Kafka accepts it: the cache's
    /// `assign` drops every entry at or above the batch's epoch, so the newer epochs' history
    /// is gone (Kafka's `LeaderEpochFileCache.assign`; what a mirror destination that bumped its
    /// epoch too little would do to its mirrored epochs with a local write).
    pub fn appends_below_the_latest_epoch_drop_its_newer_entries(&mut self) {
        let mut log = self.log_with(&[(1, records(2)), (3, records(1)), (5, records(2))]);
        assert_eq!(cache_pairs(&log), vec![(1, 0), (3, 2), (5, 3)]);
        let h = leader(&mut log, 4, records(1));
        assert_eq!(h, BatchHeader::plain(5, 5, 4));
        assert_eq!(cache_pairs(&log), vec![(1, 0), (3, 2), (4, 5)]);
        let leo = log.log_end_offset();
        let older = self.foreign_batches(leo, &[(2, records(1))]);
        follower(&mut log, &older);
        assert_eq!(cache_pairs(&log), vec![(1, 0), (2, 6)]);
        assert_eq!(
            headers(&log)
                .iter()
                .map(|b| b.partition_leader_epoch)
                .collect::<Vec<_>>(),
            vec![1, 3, 5, 4, 2],
            "the batches keep their epochs"
        );
        assert_eq!(
            log.epoch_cache().end_offset_for(3, leo + 1),
            crate::types::EpochAndOffset::UNDEFINED,
            "epoch 3 is above every epoch the cache still knows"
        );
    }

    /// Truncation at a batch boundary removes the batches from there, trims the epoch cache and
    /// clamps HW; a lower epoch than the removed ones may then be appended.
    pub fn truncate_at_batch_boundary(&mut self) {
        let mut log = self.log_with(&four_batches());
        advance(&mut log, 10);
        truncate(&mut log, 5);
        assert_eq!(log.log_end_offset(), 5);
        assert_eq!(log.high_watermark(), 5);
        assert_eq!(log.log_start_offset(), 0);
        assert_eq!(cache_pairs(&log), vec![(1, 0)]);
        assert_eq!(log.last_batch(), Some(BatchHeader::plain(3, 4, 1)));
        let h = leader(&mut log, 2, records(1));
        assert_eq!(h, BatchHeader::plain(5, 5, 2));
        assert_eq!(cache_pairs(&log), vec![(1, 0), (2, 5)]);
        truncate(&mut log, 0);
        assert_eq!(
            (
                log.log_start_offset(),
                log.log_end_offset(),
                log.high_watermark()
            ),
            (0, 0, 0)
        );
        assert!(log.epoch_cache().is_empty());
    }

    /// Truncation to an offset inside a batch removes that whole batch: LEO becomes its base.
    pub fn truncate_inside_batch_removes_the_whole_batch(&mut self) {
        let mut log = self.log_with(&four_batches());
        truncate(&mut log, 6);
        assert_eq!(log.log_end_offset(), 5);
        assert_eq!(cache_pairs(&log), vec![(1, 0)]);
        truncate(&mut log, 1);
        assert_eq!(log.log_end_offset(), 0);
        assert!(log.epoch_cache().is_empty());
    }

    /// Truncation at or above LEO changes nothing.
    pub fn truncate_at_or_above_leo_changes_nothing(&mut self) {
        let mut log = self.log_with(&four_batches());
        advance(&mut log, 7);
        let before = LogSnapshot::of(&log);
        truncate(&mut log, 10);
        truncate(&mut log, 25);
        assert_eq!(LogSnapshot::of(&log), before);
    }

    /// HW is clamped to the new LEO; a HW already below stays.
    pub fn truncate_below_hw_clamps_hw(&mut self) {
        let mut log = self.log_with(&four_batches());
        advance(&mut log, 10);
        truncate(&mut log, 8);
        assert_eq!((log.log_end_offset(), log.high_watermark()), (8, 8));
        let mut log = self.log_with(&four_batches());
        advance(&mut log, 3);
        truncate(&mut log, 8);
        assert_eq!((log.log_end_offset(), log.high_watermark()), (8, 3));
    }

    /// An ABORT marker the HW has not passed still holds the LSO at its transaction's first
    /// offset, so truncating to the LSO (the stop's step 3 while a follower lags) removes the
    /// aborted data together with its marker instead of keeping the data without its marker,
    /// which read-committed consumers would then read as committed.
    pub fn truncate_to_lso_drops_a_transaction_with_an_unreplicated_marker(&mut self) {
        let mut log = self.log_with(&[(1, records(1)), (1, transactional(2, 9, 0, 0))]);
        leader(&mut log, 1, marker(ControlType::Abort, 9, 0));
        advance(&mut log, 3);
        assert_eq!(log.producer_state().first_open_transaction_offset(), None);
        assert_eq!(log.last_stable_offset(), 1, "ABORT at 3 is not below HW 3");
        let lso = log.last_stable_offset();
        truncate(&mut log, lso);
        assert_eq!(log.log_end_offset(), 1);
        assert_eq!(log.producer_state().first_open_transaction_offset(), None);
        assert!(log.producer_state().get(9).is_none());
        // Once the HW passes a marker, its transaction no longer holds the LSO.
        leader(&mut log, 1, transactional(1, 9, 0, 0));
        leader(&mut log, 1, marker(ControlType::Commit, 9, 0));
        advance(&mut log, 2);
        assert_eq!(log.last_stable_offset(), 1);
        advance(&mut log, 3);
        assert_eq!(log.last_stable_offset(), 3);
    }

    /// Truncating to the LSO removes every open transaction (the stop sequence's step 3).
    pub fn truncate_to_lso_drops_open_transactions(&mut self) {
        let mut log = self.log_with(&[
            (1, records(2)),
            (1, idempotent(1, 3, 0, 0)),
            (1, transactional(2, 9, 0, 0)),
            (1, idempotent(1, 3, 0, 1)),
            (1, transactional(1, 10, 0, 0)),
        ]);
        advance(&mut log, 7);
        let lso = log.last_stable_offset();
        assert_eq!(lso, 3);
        truncate(&mut log, lso);
        assert_eq!(log.log_end_offset(), 3);
        assert_eq!(log.producer_state().first_open_transaction_offset(), None);
        assert_eq!(log.last_stable_offset(), 3);
        assert_eq!(log.high_watermark(), 3);
        assert!(log.producer_state().get(9).is_none());
        assert_eq!(log.producer_state().get(3).map(|e| e.last_seq()), Some(0));
        // Producer 9 is unknown again: a new transaction at any sequence.
        leader(&mut log, 1, transactional(1, 9, 0, 42));
    }

    /// Producer state after truncation is rebuilt from the remaining batches: sequences and
    /// epochs go back to what those batches say.
    pub fn truncate_rebuilds_producer_sequences(&mut self) {
        let mut log = self.log_with(&[
            (0, idempotent(2, 3, 0, 0)),
            (0, idempotent(2, 3, 0, 2)),
            (0, idempotent(1, 3, 0, 4)),
            (0, idempotent(1, 3, 1, 0)),
        ]);
        let state = |log: &L| {
            log.producer_state()
                .get(3)
                .map(|e| (e.producer_epoch, e.last_seq()))
        };
        assert_eq!(state(&log), Some((1, 0)));
        truncate(&mut log, 5);
        assert_eq!(state(&log), Some((0, 4)), "the old epoch comes back");
        truncate(&mut log, 4);
        assert_eq!(state(&log), Some((0, 3)));
        truncate(&mut log, 2);
        assert_eq!(state(&log), Some((0, 1)));
        refused(&mut log, "sequence of a truncated batch", |l| {
            l.append_as_leader(0, idempotent(1, 3, 0, 4))
        });
        leader(&mut log, 0, idempotent(1, 3, 0, 2));
    }

    /// Truncation below the log start offset empties the log and starts it there.
    pub fn truncate_below_log_start_truncates_fully(&mut self) {
        let mut log = self.fresh();
        log.truncate_fully_and_start_at(10)
            .unwrap_or_else(|e| panic!("truncate_fully_and_start_at(10): {e:?}"));
        check_invariants(&log);
        leader(&mut log, 0, transactional(3, 1, 0, 0));
        truncate(&mut log, 12);
        assert_eq!(log.log_end_offset(), 10, "the only batch holds offset 12");
        leader(&mut log, 0, records(3));
        advance(&mut log, 13);
        truncate(&mut log, 4);
        let s = LogSnapshot::of(&log);
        assert_eq!(
            (
                s.log_start_offset,
                s.log_end_offset,
                s.high_watermark,
                s.last_stable_offset
            ),
            (4, 4, 4, 4)
        );
        assert!(s.epoch_cache.is_empty() && s.producer_state.is_empty() && s.batches.is_empty());
        assert_eq!(leader(&mut log, 1, records(1)), BatchHeader::plain(4, 4, 1));
    }

    /// Full truncation forgets batches, epochs and producers, and may move the start anywhere.
    pub fn truncate_fully_and_start_at_resets_everything(&mut self) {
        let mut log = self.log_with(&[(3, transactional(2, 1, 0, 0)), (5, records(2))]);
        advance(&mut log, 3);
        log.truncate_fully_and_start_at(100)
            .unwrap_or_else(|e| panic!("truncate_fully_and_start_at(100): {e:?}"));
        check_invariants(&log);
        let s = LogSnapshot::of(&log);
        assert_eq!(
            (
                s.log_start_offset,
                s.log_end_offset,
                s.high_watermark,
                s.last_stable_offset
            ),
            (100, 100, 100, 100)
        );
        assert!(s.epoch_cache.is_empty() && s.producer_state.is_empty() && s.batches.is_empty());
        assert!(log.read(0, Offset::MAX).is_empty());
        // Epochs below the forgotten ones are fine now.
        assert_eq!(
            leader(&mut log, 1, records(2)),
            BatchHeader::plain(100, 101, 1)
        );
        assert_eq!(cache_pairs(&log), vec![(1, 100)]);
        log.truncate_fully_and_start_at(0)
            .unwrap_or_else(|e| panic!("truncate_fully_and_start_at(0): {e:?}"));
        check_invariants(&log);
        assert_eq!((log.log_start_offset(), log.log_end_offset()), (0, 0));
    }

    /// Negative offsets are refused by truncation.
    pub fn negative_offsets_are_refused(&mut self) {
        let mut log = self.log_with(&four_batches());
        refused(&mut log, "truncate_to(-1)", |l| l.truncate_to(-1));
        refused(&mut log, "truncate_fully_and_start_at(-1)", |l| {
            l.truncate_fully_and_start_at(-1)
        });
        refused(&mut log, "advance_high_watermark(-1)", |l| {
            l.advance_high_watermark(-1)
        });
    }
}

/// Epoch 1: [0,3) and [3,5); epoch 2: [5,8); epoch 3: [8,10).
fn four_batches() -> Vec<(LeaderEpoch, LeaderBatch)> {
    vec![
        (1, records(3)),
        (1, records(2)),
        (2, records(3)),
        (3, records(2)),
    ]
}

/// Epoch 1: plain [0,3), producer 4 [3,5); epoch 2: producer 5's transaction [5,7) and its
/// COMMIT at 7; epoch 4: plain [8,9).
fn source_script() -> Vec<(LeaderEpoch, LeaderBatch)> {
    vec![
        (1, records(3)),
        (1, idempotent(2, 4, 0, 0)),
        (2, transactional(2, 5, 0, 0)),
        (2, marker(ControlType::Commit, 5, 0)),
        (4, records(1)),
    ]
}

fn cache_pairs<L: PartitionLog>(log: &L) -> Vec<(LeaderEpoch, Offset)> {
    log.epoch_cache()
        .entries()
        .map(|e| (e.epoch, e.start_offset))
        .collect()
}

fn leader<L: PartitionLog>(log: &mut L, epoch: LeaderEpoch, batch: LeaderBatch) -> BatchHeader {
    let header = log
        .append_as_leader(epoch, batch)
        .unwrap_or_else(|e| panic!("append_as_leader({epoch}, {batch:?}) refused: {e:?}"));
    check_invariants(log);
    header
}

fn follower<L: PartitionLog>(log: &mut L, batches: &[L::Batch]) {
    log.append_as_follower(batches)
        .unwrap_or_else(|e| panic!("append_as_follower({batches:?}) refused: {e:?}"));
    check_invariants(log);
}

fn truncate<L: PartitionLog>(log: &mut L, offset: Offset) {
    log.truncate_to(offset)
        .unwrap_or_else(|e| panic!("truncate_to({offset}) refused: {e:?}"));
    check_invariants(log);
}

fn advance<L: PartitionLog>(log: &mut L, offset: Offset) {
    log.advance_high_watermark(offset)
        .unwrap_or_else(|e| panic!("advance_high_watermark({offset}) refused: {e:?}"));
    check_invariants(log);
}

/// Asserts that `op` is refused and leaves the log unchanged.
fn refused<L, T, Op>(log: &mut L, what: &str, op: Op)
where
    L: PartitionLog,
    T: Debug,
    Op: FnOnce(&mut L) -> Result<T, L::Error>,
{
    let before = LogSnapshot::of(log);
    let result = op(log);
    assert!(
        result.is_err(),
        "{what}: expected a refusal, got {result:?}"
    );
    assert_eq!(
        LogSnapshot::of(log),
        before,
        "{what}: a refused operation changed the log"
    );
    check_invariants(log);
}
