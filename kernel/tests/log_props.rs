//! Property tests of [`MemLog`]: random sequences of leader appends (plain, idempotent,
//! transactional, markers, `MIRROR_PID_RESET`), follower appends, truncations and high-watermark
//! moves, valid or not. After every operation the log must be consistent
//! (`log start <= LSO <= HW <= LEO`, contiguous batches, a strictly increasing epoch cache equal
//! to the one Kafka's `LeaderEpochFileCache` calls would build (`assign` per appended batch,
//! lower epochs included, `truncateFromEnd` per truncation), producer state equal to a rebuild
//! from the batches with the HW applied); a refused operation must change nothing; an accepted
//! one must do what the contract says.

use kmirror_kernel::batch::{BatchHeader, ControlType, LeaderBatch, ProducerBatchInfo};
use kmirror_kernel::epoch_cache::{EpochCache, EpochEntry};
use kmirror_kernel::log::{LogView, PartitionLog};
use kmirror_kernel::mem_log::MemLog;
use kmirror_kernel::producer_state::ProducerStateTable;
use kmirror_kernel::types::{
    LeaderEpoch, Offset, ProducerEpoch, ProducerId, Sequence, NO_PRODUCER_EPOCH, NO_PRODUCER_ID,
    NO_SEQUENCE,
};
use proptest::prelude::*;

/// How an idempotent or transactional batch picks its first sequence.
#[derive(Clone, Copy, Debug)]
enum SeqChoice {
    /// The one the producer state expects (0 for an unknown producer or a new epoch).
    Next,
    /// Zero.
    Zero,
    /// Anything.
    Any(Sequence),
}

/// A leader batch, relative to the log's current state.
#[derive(Clone, Copy, Debug)]
enum LeaderSpec {
    Plain(u32),
    Producer {
        count: u32,
        pid: ProducerId,
        epoch: ProducerEpoch,
        seq: SeqChoice,
        transactional: bool,
    },
    Marker {
        control: ControlType,
        pid: ProducerId,
        epoch: ProducerEpoch,
    },
    PidReset,
    /// A batch the log must refuse or handle without panicking.
    Odd(LeaderBatch),
}

/// A batch for a follower append, placed at the log's end plus `gap`.
#[derive(Clone, Copy, Debug)]
struct FollowerSpec {
    count: i64,
    epoch_delta: i32,
    gap: i64,
    producer: Option<(ProducerId, ProducerEpoch, Sequence)>,
    transactional: bool,
    control: Option<ControlType>,
}

#[derive(Clone, Debug)]
enum Op {
    Leader {
        epoch_delta: i32,
        spec: LeaderSpec,
    },
    Follower(Vec<FollowerSpec>),
    /// Truncate to `percent` of LEO, plus `jitter`.
    TruncateTo {
        percent: u8,
        jitter: i64,
    },
    TruncateFully(Offset),
    /// Move HW to `percent` of the way from HW to LEO, plus `jitter`.
    AdvanceHw {
        percent: u8,
        jitter: i64,
    },
}

fn seq_choice() -> impl Strategy<Value = SeqChoice> {
    prop_oneof![
        6 => Just(SeqChoice::Next),
        1 => Just(SeqChoice::Zero),
        1 => (-2..20i32).prop_map(SeqChoice::Any),
    ]
}

fn control_type() -> impl Strategy<Value = ControlType> {
    prop_oneof![
        Just(ControlType::Abort),
        Just(ControlType::Commit),
        Just(ControlType::MirrorPidReset),
    ]
}

fn leader_spec() -> impl Strategy<Value = LeaderSpec> {
    prop_oneof![
        3 => (1..4u32).prop_map(LeaderSpec::Plain),
        6 => (1..4u32, 0..3i64, 0..3i16, seq_choice(), any::<bool>()).prop_map(
            |(count, pid, epoch, seq, transactional)| LeaderSpec::Producer {
                count,
                pid,
                epoch,
                seq,
                transactional,
            }
        ),
        3 => (
            prop_oneof![Just(ControlType::Abort), Just(ControlType::Commit)],
            0..3i64,
            0..3i16
        )
            .prop_map(|(control, pid, epoch)| LeaderSpec::Marker {
                control,
                pid,
                epoch
            }),
        1 => Just(LeaderSpec::PidReset),
        1 => (
            0..2u32,
            proptest::option::of((-2..3i64, -1..3i16, -1..5i32)),
            any::<bool>(),
            control_type(),
            proptest::option::of((-1..3i64, -1..3i16)),
            any::<bool>()
        )
            .prop_map(|(count, producer, transactional, control, marker_producer, is_control)| {
                LeaderSpec::Odd(if is_control {
                    LeaderBatch::Control {
                        control,
                        producer: marker_producer,
                    }
                } else {
                    LeaderBatch::Records {
                        record_count: count,
                        producer: producer.map(|(producer_id, producer_epoch, base_sequence)| {
                            ProducerBatchInfo {
                                producer_id,
                                producer_epoch,
                                base_sequence,
                            }
                        }),
                        transactional,
                    }
                })
            }),
    ]
}

fn follower_spec() -> impl Strategy<Value = FollowerSpec> {
    (
        prop_oneof![8 => 1..4i64, 1 => -1..1i64],
        prop_oneof![6 => Just(0), 3 => Just(1), 1 => Just(-1)],
        prop_oneof![12 => Just(0i64), 1 => -1..3i64],
        proptest::option::of((0..3i64, 0..3i16, 0..6i32)),
        any::<bool>(),
        proptest::option::of(control_type()),
    )
        .prop_map(
            |(count, epoch_delta, gap, producer, transactional, control)| FollowerSpec {
                count,
                epoch_delta,
                gap,
                producer,
                transactional,
                control,
            },
        )
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        10 => (prop_oneof![8 => Just(0), 3 => Just(1), 1 => Just(-1)], leader_spec())
            .prop_map(|(epoch_delta, spec)| Op::Leader { epoch_delta, spec }),
        3 => proptest::collection::vec(follower_spec(), 0..4).prop_map(Op::Follower),
        3 => (0..=100u8, -2..3i64).prop_map(|(percent, jitter)| Op::TruncateTo { percent, jitter }),
        1 => (-1..30i64).prop_map(Op::TruncateFully),
        4 => (0..=100u8, -1..2i64).prop_map(|(percent, jitter)| Op::AdvanceHw { percent, jitter }),
    ]
}

fn latest_epoch(log: &MemLog) -> LeaderEpoch {
    log.epoch_cache().latest_epoch().unwrap_or(0)
}

/// The sequence `pid` at `epoch` must use next, as the producer state says.
fn next_sequence(log: &MemLog, pid: ProducerId, epoch: ProducerEpoch) -> Sequence {
    match log.producer_state().get(pid) {
        Some(e) if e.producer_epoch == epoch => match e.last_seq() {
            NO_SEQUENCE | i32::MAX => 0,
            last => last + 1,
        },
        _ => 0,
    }
}

fn leader_batch(log: &MemLog, spec: LeaderSpec) -> LeaderBatch {
    match spec {
        LeaderSpec::Plain(n) => LeaderBatch::Records {
            record_count: n,
            producer: None,
            transactional: false,
        },
        LeaderSpec::Producer {
            count,
            pid,
            epoch,
            seq,
            transactional,
        } => LeaderBatch::Records {
            record_count: count,
            producer: Some(ProducerBatchInfo {
                producer_id: pid,
                producer_epoch: epoch,
                base_sequence: match seq {
                    SeqChoice::Next => next_sequence(log, pid, epoch),
                    SeqChoice::Zero => 0,
                    SeqChoice::Any(s) => s,
                },
            }),
            transactional,
        },
        LeaderSpec::Marker {
            control,
            pid,
            epoch,
        } => LeaderBatch::Control {
            control,
            producer: Some((pid, epoch)),
        },
        LeaderSpec::PidReset => LeaderBatch::Control {
            control: ControlType::MirrorPidReset,
            producer: None,
        },
        LeaderSpec::Odd(batch) => batch,
    }
}

fn follower_batches(log: &MemLog, specs: &[FollowerSpec]) -> Vec<BatchHeader> {
    let mut next = log.log_end_offset();
    let mut epoch = latest_epoch(log);
    let mut out = Vec::new();
    for s in specs {
        epoch = (epoch + s.epoch_delta).max(-1);
        let base = next + s.gap;
        let (producer_id, producer_epoch, base_sequence) = match (s.control, s.producer) {
            (Some(ControlType::MirrorPidReset), _) | (_, None) => {
                (NO_PRODUCER_ID, NO_PRODUCER_EPOCH, NO_SEQUENCE)
            }
            (Some(_), Some((pid, pe, _))) => (pid, pe, NO_SEQUENCE),
            (None, Some(p)) => p,
        };
        let header = BatchHeader {
            base_offset: base,
            last_offset: base + s.count - 1,
            partition_leader_epoch: epoch,
            producer_id,
            producer_epoch,
            base_sequence,
            is_transactional: s.transactional
                || matches!(s.control, Some(ControlType::Abort | ControlType::Commit)),
            control: s.control,
        };
        next = header.next_offset();
        out.push(header);
    }
    out
}

/// Checks `log`, whose epoch cache must be `epochs` (Kafka's cache after the same calls).
fn check_invariants(log: &MemLog, epochs: &EpochCache) -> Result<(), TestCaseError> {
    let (start, lso, hw, leo) = (
        log.log_start_offset(),
        log.last_stable_offset(),
        log.high_watermark(),
        log.log_end_offset(),
    );
    prop_assert!(
        start <= lso && lso <= hw && hw <= leo,
        "{start} {lso} {hw} {leo}"
    );
    let batches: Vec<BatchHeader> = log.batches().iter().copied().collect();
    prop_assert_eq!(&log.read(start, Offset::MAX), &batches);
    let mut next = start;
    for b in &batches {
        prop_assert!(b.last_offset >= b.base_offset);
        prop_assert_eq!(b.base_offset, next);
        next = b.next_offset();
    }
    prop_assert_eq!(next, leo);
    let cache: Vec<EpochEntry> = log.epoch_cache().entries().collect();
    for w in cache.windows(2) {
        prop_assert!(w[0].epoch < w[1].epoch && w[0].start_offset < w[1].start_offset);
    }
    prop_assert_eq!(log.epoch_cache(), epochs);
    let mut rebuilt = ProducerStateTable::rebuild(log.batches().iter());
    rebuilt.on_high_watermark(log.high_watermark());
    prop_assert_eq!(log.producer_state(), &rebuilt);
    prop_assert_eq!(log.last_batch(), batches.last().copied());
    Ok(())
}

/// Applies `op`, checking what the contract promises of its result; `epochs` follows as Kafka's
/// epoch cache would.
fn step(log: &mut MemLog, epochs: &mut EpochCache, op: &Op) -> Result<(), TestCaseError> {
    let before = log.clone();
    let accepted = match op {
        Op::Leader { epoch_delta, spec } => {
            let epoch = latest_epoch(log) + epoch_delta;
            let batch = leader_batch(log, *spec);
            match log.append_as_leader(epoch, batch) {
                Ok(h) if h.base_offset == before.log_end_offset() => {
                    prop_assert_eq!(log.last_batch(), Some(h));
                    prop_assert_eq!(h.partition_leader_epoch, epoch);
                    prop_assert_eq!(log.batches().len(), before.batches().len() + 1);
                    prop_assert!(epochs.assign(epoch, h.base_offset).is_ok());
                    true
                }
                Ok(h) => {
                    // A duplicate: the batch already in the log, nothing appended.
                    prop_assert!(before.batches().contains(&h), "{h:?} is not in the log");
                    prop_assert_eq!(&*log, &before);
                    true
                }
                Err(_) => false,
            }
        }
        Op::Follower(specs) => {
            let batches = follower_batches(log, specs);
            let ok = log.append_as_follower(&batches).is_ok();
            if ok {
                let mut expected = before.batches().clone();
                expected.extend(batches.iter().copied());
                prop_assert_eq!(log.batches(), &expected);
                prop_assert_eq!(log.high_watermark(), before.high_watermark());
                for b in &batches {
                    prop_assert!(epochs
                        .assign(b.partition_leader_epoch, b.base_offset)
                        .is_ok());
                }
            }
            ok
        }
        Op::TruncateTo { percent, jitter } => {
            let target = before.log_end_offset() * i64::from(*percent) / 100 + jitter;
            let ok = log.truncate_to(target).is_ok();
            if ok && target < before.log_start_offset() {
                epochs.clear();
            } else if ok {
                epochs.truncate_from_end(log.log_end_offset());
            }
            if ok {
                if target >= before.log_end_offset() {
                    prop_assert_eq!(&*log, &before);
                } else if target < before.log_start_offset() {
                    prop_assert_eq!(log.log_start_offset(), target);
                    prop_assert_eq!(log.log_end_offset(), target);
                    prop_assert!(log.batches().is_empty());
                } else {
                    let leo = log.log_end_offset();
                    prop_assert!(leo <= target);
                    // Only the batch holding `target` (if any) goes below it.
                    prop_assert!(before
                        .batches()
                        .iter()
                        .all(|b| b.base_offset < leo || b.last_offset >= target));
                    let kept: Vec<_> = before.batches().iter().take(log.batches().len()).collect();
                    prop_assert_eq!(kept, log.batches().iter().collect::<Vec<_>>());
                    prop_assert_eq!(log.high_watermark(), before.high_watermark().min(leo));
                }
            } else {
                prop_assert!(target < 0);
            }
            ok
        }
        Op::TruncateFully(offset) => {
            let ok = log.truncate_fully_and_start_at(*offset).is_ok();
            prop_assert_eq!(ok, *offset >= 0);
            if ok {
                epochs.clear();
            }
            if ok {
                prop_assert_eq!(
                    (
                        log.log_start_offset(),
                        log.log_end_offset(),
                        log.high_watermark()
                    ),
                    (*offset, *offset, *offset)
                );
                prop_assert!(log.producer_state().is_empty() && log.epoch_cache().is_empty());
            }
            ok
        }
        Op::AdvanceHw { percent, jitter } => {
            let (hw, leo) = (before.high_watermark(), before.log_end_offset());
            let target = hw + (leo - hw) * i64::from(*percent) / 100 + jitter;
            let ok = log.advance_high_watermark(target).is_ok();
            prop_assert_eq!(ok, hw <= target && target <= leo);
            if ok {
                prop_assert_eq!(log.high_watermark(), target);
            }
            ok
        }
    };
    if !accepted {
        prop_assert_eq!(&*log, &before, "a refused {:?} changed the log", op);
    }
    check_invariants(log, epochs)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn random_operations_keep_the_log_consistent(ops in proptest::collection::vec(op(), 1..40)) {
        let mut log = MemLog::new();
        let mut epochs = EpochCache::new();
        for op in &ops {
            step(&mut log, &mut epochs, op)?;
        }
    }

    #[test]
    fn a_follower_copy_equals_its_source(ops in proptest::collection::vec(op(), 1..30)) {
        let mut src = MemLog::new();
        let mut epochs = EpochCache::new();
        for op in &ops {
            step(&mut src, &mut epochs, op)?;
        }
        let mut dst = MemLog::starting_at(src.log_start_offset()).expect("start");
        let batches = src.read(src.log_start_offset(), Offset::MAX);
        prop_assert!(dst.append_as_follower(&batches).is_ok());
        prop_assert_eq!(dst.batches(), src.batches());
        // The copy's cache is Kafka's `assign` of its batches in order: the source's, unless a
        // truncation followed a batch below an earlier epoch (the source's cache then remembers
        // history its batches do not show).
        let mut copied = EpochCache::new();
        for b in &batches {
            prop_assert!(copied.assign(b.partition_leader_epoch, b.base_offset).is_ok());
        }
        prop_assert_eq!(dst.epoch_cache(), &copied);
        // Producer state depends on the HW too (closed transactions with unreplicated markers).
        prop_assert!(dst.advance_high_watermark(src.high_watermark()).is_ok());
        prop_assert_eq!(dst.producer_state(), src.producer_state());
    }
}

/// The generators reach the interesting states: open transactions, duplicates, refusals,
/// truncations inside batches.
#[test]
fn generators_reach_interesting_states() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;

    let mut runner = TestRunner::deterministic();
    let (mut open_txn, mut refused, mut truncated_inside, mut went_back) = (0, 0, 0, 0);
    for _ in 0..200 {
        let ops = proptest::collection::vec(op(), 1..40)
            .new_tree(&mut runner)
            .expect("tree")
            .current();
        let mut log = MemLog::new();
        let mut epochs = EpochCache::new();
        for op in &ops {
            let before = log.clone();
            step(&mut log, &mut epochs, op).expect("step");
            let latest_before = before.epoch_cache().latest_epoch();
            if log.batches().len() > before.batches().len()
                && log
                    .last_batch()
                    .zip(latest_before)
                    .is_some_and(|(b, latest)| b.partition_leader_epoch < latest)
            {
                went_back += 1;
            }
            if log
                .producer_state()
                .first_open_transaction_offset()
                .is_some()
            {
                open_txn += 1;
            }
            if log == before && !matches!(op, Op::TruncateTo { .. }) {
                refused += 1;
            }
            if let Op::TruncateTo { percent, jitter } = op {
                let target = before.log_end_offset() * i64::from(*percent) / 100 + jitter;
                if target > log.log_end_offset() && target < before.log_end_offset() {
                    truncated_inside += 1;
                }
            }
        }
    }
    assert!(open_txn > 100, "open transactions: {open_txn}");
    assert!(refused > 100, "refusals: {refused}");
    assert!(
        truncated_inside > 20,
        "truncations inside a batch: {truncated_inside}"
    );
    assert!(
        went_back > 20,
        "appends below the latest epoch: {went_back}"
    );
}
