//! Differential test of the kernel's producer state and last stable offset against Apache Kafka
//! 4.4.0's own `ProducerStateManager` (run with `cargo test --release -- --include-ignored
//! oracle`).
//!
//! Random sequences of leader appends (plain, idempotent and transactional batches as a client
//! sends them, retries of retained batches, stale producer epochs, sequence gaps, COMMIT and
//! ABORT markers as the coordinator writes them), follower appends and high-watermark advances
//! run through the kernel's `MemLog` and through `dev.kmirror.oracle.LogOracle`, which feeds the
//! same batch bytes to Kafka's `ProducerStateManager` the way `UnifiedLog` does. After every
//! operation the answers (accepted, duplicate, or the error), every producer's state (epoch,
//! open transaction, retained batches) and the LSO are compared.
//!
//! This test found that the kernel released the LSO as soon as a transaction's marker was
//! appended, where Kafka keeps a completed transaction in its LSO until the high watermark passes
//! the marker; the kernel now does as Kafka (`oracle_log_lso_holds_until_the_marker_is_replicated`).

use std::fmt;

use kmirror_harness::record_batch::{leader_batch_header, RawBatch};
use kmirror_kernel::batch::{BatchHeader, ControlType, LeaderBatch, ProducerBatchInfo};
use kmirror_kernel::log::{LogError, LogView, PartitionLog};
use kmirror_kernel::mem_log::MemLog;
use kmirror_kernel::types::{Offset, ProducerEpoch, ProducerId, Sequence};
use kmirror_testsupport::jvm::Oracle;
use kmirror_testsupport::oracle_support::{scratch_dir, shrink, LineOracle, SplitMix64};

/// The leader epoch of every append: producer state does not depend on it.
const EPOCH: i32 = 0;

/// One operation on the log.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Op {
    /// A leader append of `batch` at LEO.
    Leader(LeaderBatch),
    /// A follower append at LEO of a batch with these producer fields.
    Follower {
        records: u32,
        producer_id: ProducerId,
        producer_epoch: ProducerEpoch,
        base_sequence: Sequence,
        transactional: bool,
        control: Option<ControlType>,
    },
    /// Advances the high watermark by this much (at most to LEO).
    AdvanceHw(i64),
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Op::Leader(LeaderBatch::Records {
                record_count,
                producer,
                transactional,
            }) => match producer {
                Some(p) => write!(
                    f,
                    "leader {record_count} records pid {} epoch {} seq {}{}",
                    p.producer_id,
                    p.producer_epoch,
                    p.base_sequence,
                    if *transactional { " txn" } else { "" }
                ),
                None => write!(f, "leader {record_count} plain records"),
            },
            Op::Leader(LeaderBatch::Control { control, producer }) => {
                write!(f, "leader {control:?} {producer:?}")
            }
            Op::Follower {
                records,
                producer_id,
                producer_epoch,
                base_sequence,
                transactional,
                control,
            } => write!(
                f,
                "follower {records} pid {producer_id} epoch {producer_epoch} seq \
                 {base_sequence} txn {transactional} control {control:?}"
            ),
            Op::AdvanceHw(by) => write!(f, "advance HW by {by}"),
        }
    }
}

/// The batch header `op` appends at `leo` (`None` for a high-watermark advance).
fn header_at(op: &Op, leo: Offset) -> Option<BatchHeader> {
    match op {
        Op::Leader(batch) => Some(leader_batch_header(batch, leo, EPOCH).expect("encodable")),
        Op::Follower {
            records,
            producer_id,
            producer_epoch,
            base_sequence,
            transactional,
            control,
        } => {
            let records = if control.is_some() { 1 } else { *records };
            let mut h = BatchHeader::plain(leo, leo + i64::from(records) - 1, EPOCH);
            h.producer_id = *producer_id;
            h.producer_epoch = *producer_epoch;
            h.base_sequence = if control.is_some() {
                -1
            } else {
                *base_sequence
            };
            h.is_transactional = *transactional || control.is_some();
            h.control = *control;
            Some(h)
        }
        Op::AdvanceHw(_) => None,
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Kafka's exception class for a kernel refusal.
fn error_class(e: &LogError) -> String {
    match e {
        LogError::InvalidProducerEpoch { .. } => "InvalidProducerEpochException".into(),
        LogError::OutOfOrderSequence { .. } => "OutOfOrderSequenceException".into(),
        LogError::InvalidTransaction(_) => "InvalidTxnStateException".into(),
        other => format!("unexpected kernel error {other:?}"),
    }
}

/// The kernel's producer state in the oracle's `STATE` format.
fn state_answer(log: &MemLog) -> String {
    let mut out = "ok".to_owned();
    for (pid, entry) in log.producer_state().producers() {
        let txn = entry
            .current_txn_first_offset
            .map_or("-".to_owned(), |o| o.to_string());
        let batches: Vec<String> = entry
            .batches
            .iter()
            .map(|b| {
                format!(
                    "{}-{}@{}-{}",
                    b.first_seq, b.last_seq, b.first_offset, b.last_offset
                )
            })
            .collect();
        out += &format!(
            " {pid}:{}:{txn}:[{}]",
            entry.producer_epoch,
            batches.join(",")
        );
    }
    out
}

/// Both sides' answers to one operation: the append's outcome, then the producer state, then
/// the LSO.
#[derive(Debug, PartialEq, Eq)]
struct Answers {
    outcome: String,
    state: String,
    lso: String,
}

/// Applies `op` to the kernel's `log`; its answers.
fn kernel_step(log: &mut MemLog, op: &Op) -> Answers {
    let leo = log.log_end_offset();
    let outcome = match op {
        Op::Leader(batch) => match log.append_as_leader(EPOCH, *batch) {
            Ok(h) if h.base_offset == leo => "ok".to_owned(),
            Ok(h) => format!("dup {} {}", h.base_offset, h.last_offset),
            Err(e) => format!("err {}", error_class(&e)),
        },
        Op::Follower { .. } => {
            let header = header_at(op, leo).expect("a batch");
            match log.append_as_follower(&[header]) {
                Ok(()) => "ok".to_owned(),
                Err(e) => format!("err {}", error_class(&e)),
            }
        }
        Op::AdvanceHw(by) => {
            let hw = (log.high_watermark() + by).min(leo);
            log.advance_high_watermark(hw).expect("within [HW, LEO]");
            "ok".to_owned()
        }
    };
    Answers {
        outcome,
        state: state_answer(log),
        lso: log.last_stable_offset().to_string(),
    }
}

/// Sends `op` to Kafka (computing the batch at the kernel's LEO before the step, `leo`, and
/// the new high watermark from the kernel's, `hw_after`); its answers.
fn kafka_step(kafka: &mut LineOracle, op: &Op, leo: Offset, hw_after: Offset) -> Answers {
    let outcome = match op {
        Op::AdvanceHw(_) => kafka.ask(&format!("HW {hw_after}")),
        _ => {
            let header = header_at(op, leo).expect("a batch");
            let bytes = RawBatch::synthesize(&header, 1_700_000_000_000).expect("encodable");
            let side = if matches!(op, Op::Leader(_)) {
                "LEADER"
            } else {
                "FOLLOWER"
            };
            kafka.ask(&format!("{side} {}", hex(bytes.bytes())))
        }
    };
    Answers {
        outcome,
        state: kafka.ask("STATE"),
        lso: kafka.ask("LSO"),
    }
}

/// The outcome of running a sequence on both sides.
struct Run {
    /// The first step whose answers differ, with
    /// both answers.
    difference: Option<(usize, Answers, Answers)>,
    /// Steps where a closed transaction whose marker is not below the HW held the LSO.
    unreplicated_marker_steps: usize,
    /// How often each kind of outcome (`ok`, `dup`, `err <class>`) was seen.
    outcomes: std::collections::BTreeMap<String, usize>,
}

/// Runs `ops` on both sides from empty, appending a line per step to `trace` if given.
fn run(kafka: &mut LineOracle, ops: &[Op], mut trace: Option<&mut String>) -> Run {
    assert_eq!(kafka.ask("RESET"), "ok");
    let mut log = MemLog::new();
    let mut unreplicated_marker_steps = 0;
    let mut outcomes = std::collections::BTreeMap::new();
    for (i, op) in ops.iter().enumerate() {
        let leo = log.log_end_offset();
        let ours = kernel_step(&mut log, op);
        let theirs = kafka_step(kafka, op, leo, log.high_watermark());
        let open_or_hw = log
            .producer_state()
            .first_open_transaction_offset()
            .map_or(log.high_watermark(), |first| {
                first.min(log.high_watermark())
            });
        if log.last_stable_offset() < open_or_hw {
            unreplicated_marker_steps += 1;
        }
        if let Some(t) = trace.as_deref_mut() {
            let mark = if ours == theirs { "  " } else { "!!" };
            *t +=
                &format!("{mark} {i:>2}. {op}\n      kernel: {ours:?}\n      kafka:  {theirs:?}\n");
        }
        let kind = match ours.outcome.split_once(' ') {
            Some(("dup", _)) => "dup".to_owned(),
            _ => ours.outcome.clone(),
        };
        *outcomes
            .entry(format!(
                "{} {kind}",
                if matches!(op, Op::Leader(_)) {
                    "leader"
                } else if matches!(op, Op::Follower { .. }) {
                    "follower"
                } else {
                    "hw"
                }
            ))
            .or_default() += 1;
        if ours != theirs {
            return Run {
                difference: Some((i, ours, theirs)),
                unreplicated_marker_steps,
                outcomes,
            };
        }
    }
    Run {
        difference: None,
        unreplicated_marker_steps,
        outcomes,
    }
}

/// A producer pool and a random operation given the kernel's current `log`.
fn random_op(rng: &mut SplitMix64, log: &MemLog) -> Op {
    let pid = rng.range(1, 3);
    let entry = log.producer_state().get(pid);
    let current_epoch = entry.map_or(0, |e| e.producer_epoch.max(0));
    let epoch = match rng.below(10) {
        0 => current_epoch + 1,
        1 if current_epoch > 0 => current_epoch - 1,
        _ => current_epoch,
    };
    let next_seq = entry.map_or(0, |e| e.last_seq().wrapping_add(1).max(0));
    let in_txn = entry.is_some_and(|e| e.current_txn_first_offset.is_some());
    let records = rng.range(1, 4) as u32;
    match rng.below(100) {
        0..=44 => {
            let seq = match rng.below(10) {
                0 => 0,
                1 => next_seq + rng.range(1, 3) as i32,
                2 if next_seq > 0 => next_seq - 1,
                3 => i32::MAX - rng.range(0, 2) as i32,
                _ if epoch != current_epoch => 0,
                _ => next_seq,
            };
            let transactional = if in_txn {
                rng.chance(90)
            } else {
                rng.chance(35)
            };
            Op::Leader(LeaderBatch::Records {
                record_count: records,
                producer: Some(ProducerBatchInfo {
                    producer_id: pid,
                    producer_epoch: epoch as ProducerEpoch,
                    base_sequence: seq,
                }),
                transactional,
            })
        }
        45..=52 => {
            // A retry of one of the producer's retained batches.
            let retained: Vec<_> = entry
                .map(|e| e.batches.iter().copied().collect())
                .unwrap_or_default();
            if retained.is_empty() {
                return Op::AdvanceHw(rng.range(0, 3));
            }
            let b = *rng.pick(&retained);
            Op::Leader(LeaderBatch::Records {
                record_count: (b.last_offset - b.first_offset + 1) as u32,
                producer: Some(ProducerBatchInfo {
                    producer_id: pid,
                    producer_epoch: entry.map_or(0, |e| e.producer_epoch),
                    base_sequence: b.first_seq,
                }),
                transactional: in_txn,
            })
        }
        53..=57 => Op::Leader(LeaderBatch::Records {
            record_count: records,
            producer: None,
            transactional: false,
        }),
        58..=69 => Op::Leader(LeaderBatch::Control {
            control: if rng.chance(60) {
                ControlType::Commit
            } else {
                ControlType::Abort
            },
            producer: Some((pid, epoch as ProducerEpoch)),
        }),
        70..=84 => {
            let control = if rng.chance(25) {
                Some(*rng.pick(&[ControlType::Commit, ControlType::Abort]))
            } else {
                None
            };
            Op::Follower {
                records,
                producer_id: if rng.chance(15) { -1 } else { pid },
                producer_epoch: epoch as ProducerEpoch,
                base_sequence: if rng.chance(80) {
                    next_seq
                } else {
                    rng.range(0, 20) as i32
                },
                transactional: if in_txn {
                    rng.chance(85)
                } else {
                    rng.chance(30)
                },
                control,
            }
        }
        _ => Op::AdvanceHw(rng.range(0, 8)),
    }
}

fn random_sequence(rng: &mut SplitMix64, max_len: u64) -> Vec<Op> {
    let mut log = MemLog::new();
    let mut ops = Vec::new();
    for _ in 0..1 + rng.below(max_len) {
        let mut op = random_op(rng, &log);
        // A follower batch without a producer carries no producer fields.
        if let Op::Follower {
            producer_id: -1,
            producer_epoch,
            base_sequence,
            transactional,
            control,
            ..
        } = &mut op
        {
            *producer_epoch = -1;
            *base_sequence = -1;
            *transactional = false;
            *control = None;
        }
        kernel_step(&mut log, &op);
        ops.push(op);
    }
    ops
}

/// The kernel's producer state agrees with Kafka 4.4.0's `ProducerStateManager` on every append
/// — what a leader accepts, answers as a duplicate or refuses (stale producer epoch,
/// out-of-order sequence, non-transactional write inside a transaction), what a follower
/// accepts, and the resulting producer epochs, open transactions and retained batches — and on
/// the LSO, including while a closed transaction's marker is not yet below the HW.
#[test]
#[ignore = "needs Java 17 and Maven; run with `-- --include-ignored oracle`"]
fn oracle_log_producer_state_matches_kafka() {
    let Some(oracle) = Oracle::for_tests("oracle_log_producer_state_matches_kafka") else {
        return;
    };
    let dir = scratch_dir();
    let mut kafka = LineOracle::start(&oracle, "dev.kmirror.oracle.LogOracle", &[dir.path()]);
    let mut steps = 0;
    let mut unreplicated_marker_steps = 0;
    let mut outcomes = std::collections::BTreeMap::new();
    for seed in [11, 12, 13] {
        let mut rng = SplitMix64::new(seed);
        for case in 0..400 {
            let ops = random_sequence(&mut rng, 40);
            let outcome = run(&mut kafka, &ops, None);
            unreplicated_marker_steps += outcome.unreplicated_marker_steps;
            for (kind, n) in &outcome.outcomes {
                *outcomes.entry(kind.clone()).or_insert(0) += n;
            }
            if outcome.difference.is_some() {
                let shrunk = shrink(&ops, |ops| {
                    run(&mut kafka, ops, None).difference.map(|d| d.0)
                });
                let mut trace = String::new();
                run(&mut kafka, &shrunk, Some(&mut trace));
                panic!(
                    "seed {seed}, case {case}: the kernel and Kafka's ProducerStateManager \
                     differ; shrunk from {} to {} operations:\n{trace}",
                    ops.len(),
                    shrunk.len()
                );
            }
            steps += ops.len();
        }
    }
    eprintln!(
        "{steps} operations agree with Kafka; in {unreplicated_marker_steps} steps an \
         unreplicated marker held the LSO"
    );
    eprintln!("outcomes: {outcomes:?}");
    assert!(
        unreplicated_marker_steps > 0,
        "the sequences should reach an LSO held by an unreplicated marker"
    );
    for kind in [
        "leader ok",
        "leader dup",
        "leader err InvalidProducerEpochException",
        "leader err OutOfOrderSequenceException",
        "leader err InvalidTxnStateException",
        "follower ok",
        "follower err InvalidTxnStateException",
    ] {
        assert!(
            outcomes.contains_key(kind),
            "no {kind:?} among {outcomes:?}"
        );
    }
}

/// The case this oracle found: a transaction's data at 0..=1, its COMMIT marker at 2, the high
/// watermark at 2. Like Kafka, the kernel keeps the LSO at 0 until the high watermark passes the
/// marker (the marker could still be lost with the leader, and a stop truncating to the LSO
/// would otherwise keep an aborted transaction's data without its marker); at HW 3 both say 3.
#[test]
#[ignore = "needs Java 17 and Maven; run with `-- --include-ignored oracle`"]
fn oracle_log_lso_holds_until_the_marker_is_replicated() {
    let Some(oracle) = Oracle::for_tests("oracle_log_lso_holds_until_the_marker_is_replicated")
    else {
        return;
    };
    let dir = scratch_dir();
    let mut kafka = LineOracle::start(&oracle, "dev.kmirror.oracle.LogOracle", &[dir.path()]);
    let ops = [
        Op::Leader(LeaderBatch::Records {
            record_count: 2,
            producer: Some(ProducerBatchInfo {
                producer_id: 1,
                producer_epoch: 0,
                base_sequence: 0,
            }),
            transactional: true,
        }),
        Op::Leader(LeaderBatch::Control {
            control: ControlType::Commit,
            producer: Some((1, 0)),
        }),
        Op::AdvanceHw(2),
        Op::AdvanceHw(1),
    ];
    assert_eq!(kafka.ask("RESET"), "ok");
    let mut log = MemLog::new();
    let mut lsos = Vec::new();
    for op in &ops {
        let leo = log.log_end_offset();
        let ours = kernel_step(&mut log, op);
        let theirs = kafka_step(&mut kafka, op, leo, log.high_watermark());
        assert_eq!(ours.outcome, theirs.outcome, "{op}");
        assert_eq!(ours.state, theirs.state, "{op}");
        lsos.push((ours.lso, theirs.lso));
    }
    let pairs: Vec<(&str, &str)> = lsos.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
    // (kernel, Kafka) after each step.
    assert_eq!(pairs, [("0", "0"), ("0", "0"), ("0", "0"), ("3", "3")]);
}
