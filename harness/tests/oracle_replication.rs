//! Differential test of the kernel's replication rules ([`kmirror_kernel::replication`]) against
//! Apache Kafka 4.4.0's own classes (run with `cargo test --release -- --include-ignored
//! oracle`).
//!
//! **Compared, against `org.apache.kafka.server.replica.Replica`** (`dev.kmirror.oracle.
//! ReplicaOracle`): the leader's record of one follower. Random sequences of fetch-state
//! updates (`updateFetchStateOrThrow`: fetch offset, follower log start, fetch time, leader LEO;
//! offsets behind, at and past the leader's LEO, times mostly increasing, sometimes equal or
//! going back), resets (`resetReplicaState`, new leader or not, in sync or not) and caught-up
//! queries (`ReplicaState.isCaughtUp`) run through [`FollowerState`] and through Kafka's class;
//! every answer — the whole `stateSnapshot()` (log start offset, LEO, last fetch leader LEO,
//! last fetch time, last caught-up time) or the boolean — must be equal. Half the sequences are
//! not random offsets but a replication run: a leader [`MemLog`] takes appends, a follower
//! fetches with [`serve_fetch`] and [`follower_fetch`], and the report the kernel derives from
//! each answer (the fetch offset, not the follower's LEO after the append) is what both sides
//! receive, with the leader's LEO of the read.
//!
//! **Not compared here**: which offset Kafka's leader passes to `updateFetchStateOrThrow` is
//! decided in `kafka.cluster.Partition.fetchRecords` (it passes
//! `LogReadInfo.fetchedData.fetchOffsetMetadata`, the read's start = the fetch offset, and skips
//! the update for a diverging epoch or an error), which needs a whole `Partition` with a
//! `LogManager`; the leader HW (`Partition.maybeIncrementLeaderHW`) and ISR expansion
//! (`Partition.isFollowerInSync`) likewise. Those rules are the kernel's by reading Kafka
//! 4.4.0's bytecode and are pinned by the kernel's unit tests, not by this oracle. The broker
//! epoch check of `updateFetchStateOrThrow` is skipped (epoch -1), as the kernel has none.
//!
//! On the first difference the sequence is shrunk by greedy delta debugging and printed with
//! both answers.

use std::fmt;
use std::time::Instant;

use kmirror_kernel::batch::LeaderBatch;
use kmirror_kernel::config::FetchIsolation;
use kmirror_kernel::fetch::serve_fetch;
use kmirror_kernel::log::{LogView, PartitionLog};
use kmirror_kernel::mem_log::MemLog;
use kmirror_kernel::replication::{follower_fetch, FollowerLogOp, FollowerState, TimestampMs};
use kmirror_kernel::types::Offset;
use kmirror_testsupport::jvm::Oracle;
use kmirror_testsupport::oracle_support::{shrink, LineOracle, SplitMix64};

/// One operation on Kafka's `Replica`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    /// `updateFetchStateOrThrow(fetch offset, follower log start, fetch time, leader LEO)`.
    Fetch {
        fetch_offset: Offset,
        follower_log_start_offset: Offset,
        time: TimestampMs,
        leader_log_end_offset: Offset,
    },
    /// `resetReplicaState(now, leader LEO, new leader, in sync)`.
    Reset {
        now: TimestampMs,
        leader_log_end_offset: Offset,
        new_leader: bool,
        in_sync: bool,
    },
    /// `stateSnapshot().isCaughtUp(leader LEO, now, max lag)`.
    CaughtUp {
        leader_log_end_offset: Offset,
        now: TimestampMs,
        max_lag: i64,
    },
}

impl fmt::Display for Op {
    /// The oracle's request line.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Op::Fetch {
                fetch_offset,
                follower_log_start_offset,
                time,
                leader_log_end_offset,
            } => write!(
                f,
                "FETCH {fetch_offset} {follower_log_start_offset} {time} {leader_log_end_offset}"
            ),
            Op::Reset {
                now,
                leader_log_end_offset,
                new_leader,
                in_sync,
            } => write!(
                f,
                "RESET_STATE {now} {leader_log_end_offset} {} {}",
                u8::from(new_leader),
                u8::from(in_sync)
            ),
            Op::CaughtUp {
                leader_log_end_offset,
                now,
                max_lag,
            } => write!(f, "CAUGHT_UP {leader_log_end_offset} {now} {max_lag}"),
        }
    }
}

/// How one side answers an operation, in the oracle's answer format.
type Answerer = fn(&mut FollowerState, Op) -> String;

fn state_answer(s: &FollowerState) -> String {
    format!(
        "ok {} {} {} {} {}",
        s.log_start_offset,
        s.log_end_offset,
        s.last_fetch_leader_log_end_offset,
        s.last_fetch_time_ms,
        s.last_caught_up_time_ms
    )
}

/// The kernel's answer to `op`, applied to `state`.
fn kernel_answer(state: &mut FollowerState, op: Op) -> String {
    match op {
        Op::Fetch {
            fetch_offset,
            follower_log_start_offset,
            time,
            leader_log_end_offset,
        } => {
            state.update_fetch_state(
                fetch_offset,
                follower_log_start_offset,
                time,
                leader_log_end_offset,
            );
            state_answer(state)
        }
        Op::Reset {
            now,
            leader_log_end_offset,
            new_leader,
            in_sync,
        } => {
            state.reset(now, leader_log_end_offset, new_leader, in_sync);
            state_answer(state)
        }
        Op::CaughtUp {
            leader_log_end_offset,
            now,
            max_lag,
        } => state
            .is_caught_up(leader_log_end_offset, now, max_lag)
            .to_string(),
    }
}

/// A deliberately wrong kernel: a fetch counts as caught up only strictly past the leader's
/// LEO. Used to prove the comparison and the shrinker bite.
fn broken_answer(state: &mut FollowerState, op: Op) -> String {
    if let Op::Fetch {
        fetch_offset,
        leader_log_end_offset,
        ..
    } = op
    {
        let before = state.last_caught_up_time_ms;
        let answer = kernel_answer(state, op);
        if fetch_offset == leader_log_end_offset {
            state.last_caught_up_time_ms = before;
            return state_answer(state);
        }
        return answer;
    }
    kernel_answer(state, op)
}

/// A random sequence of up to `max_len` operations on offsets near a growing leader LEO.
fn random_sequence(rng: &mut SplitMix64, max_len: u64) -> Vec<Op> {
    let len = 1 + rng.below(max_len);
    let mut leader_leo: Offset = rng.range(0, 5);
    let mut time: TimestampMs = 0;
    let mut ops = Vec::new();
    for _ in 0..len {
        leader_leo += rng.range(0, 3);
        time += match rng.below(10) {
            0 => -rng.range(0, 20),
            1 => 0,
            _ => rng.range(1, 30),
        };
        let op = match rng.below(10) {
            0..=5 => Op::Fetch {
                fetch_offset: (leader_leo + rng.range(-6, 1)).max(-1),
                follower_log_start_offset: rng.range(-1, 3),
                time,
                leader_log_end_offset: if rng.chance(10) {
                    leader_leo - rng.range(0, 4)
                } else {
                    leader_leo
                },
            },
            6 => Op::Reset {
                now: time,
                leader_log_end_offset: leader_leo,
                new_leader: rng.chance(50),
                in_sync: rng.chance(50),
            },
            _ => Op::CaughtUp {
                leader_log_end_offset: leader_leo + rng.range(-1, 1),
                now: time + rng.range(0, 60),
                max_lag: rng.range(0, 40),
            },
        };
        ops.push(op);
    }
    ops
}

/// A sequence from a replication run: a leader log takes appends, the follower fetches with the
/// kernel's rules, and each records answer becomes the fetch report the kernel derives, at
/// increasing times; caught-up queries in between.
fn replication_sequence(rng: &mut SplitMix64, max_len: u64) -> Vec<Op> {
    let len = 1 + rng.below(max_len);
    let mut leader = MemLog::new();
    let mut follower = MemLog::new();
    let mut time: TimestampMs = 0;
    let mut ops = Vec::new();
    while (ops.len() as u64) < len {
        time += rng.range(1, 20);
        match rng.below(10) {
            0..=3 => {
                let batch = LeaderBatch::Records {
                    record_count: rng.range(1, 3) as u32,
                    producer: None,
                    transactional: false,
                };
                leader
                    .append_as_leader(0, batch)
                    .expect("appends to an in-memory leader succeed");
            }
            4..=8 => {
                let leo = follower.log_end_offset();
                let response = serve_fetch(
                    &leader,
                    leo,
                    follower.epoch_cache().latest_epoch(),
                    FetchIsolation::Follower,
                    1 + rng.below(2) as usize,
                );
                let fetch = follower_fetch(
                    response,
                    leo,
                    follower.log_start_offset(),
                    follower.epoch_cache(),
                );
                if let Some(FollowerLogOp::Append(batches)) = fetch.log_op {
                    follower
                        .append_as_follower(&batches)
                        .expect("the follower appends at its LEO");
                }
                if let Some(report) = fetch.report {
                    ops.push(Op::Fetch {
                        fetch_offset: report.fetch_offset,
                        follower_log_start_offset: report.follower_log_start_offset,
                        time,
                        leader_log_end_offset: report.leader_log_end_offset,
                    });
                }
            }
            _ => ops.push(Op::CaughtUp {
                leader_log_end_offset: leader.log_end_offset(),
                now: time,
                max_lag: rng.range(0, 40),
            }),
        }
    }
    ops
}

/// Runs `ops` from a new replica through `ours` and through Kafka; the index of the first
/// operation they answer differently.
fn first_difference(kafka: &mut LineOracle, ours: Answerer, ops: &[Op]) -> Option<usize> {
    let mut state = FollowerState::EMPTY;
    assert_eq!(kafka.ask("RESET"), state_answer(&state));
    ops.iter()
        .position(|&op| ours(&mut state, op) != kafka.ask(&op.to_string()))
}

/// Runs `cases` sequences per seed through `ours` and Kafka; on the first difference, returns
/// the shrunk sequence and a report of both sides' answers.
fn compare_many(
    kafka: &mut LineOracle,
    ours: Answerer,
    seeds: &[u64],
    cases: usize,
    max_len: u64,
) -> Result<usize, (Vec<Op>, String)> {
    let mut operations = 0;
    for &seed in seeds {
        let mut rng = SplitMix64::new(seed);
        for case in 0..cases {
            let ops = if case % 2 == 0 {
                random_sequence(&mut rng, max_len)
            } else {
                replication_sequence(&mut rng, max_len)
            };
            operations += ops.len();
            if first_difference(kafka, ours, &ops).is_none() {
                continue;
            }
            let shrunk = shrink(&ops, |ops| first_difference(kafka, ours, ops));
            return Err((
                shrunk.clone(),
                report(kafka, ours, seed, case, &ops, &shrunk),
            ));
        }
    }
    Ok(operations)
}

/// Both sides' answers to every operation of `shrunk`, for the failure message.
fn report(
    kafka: &mut LineOracle,
    ours: Answerer,
    seed: u64,
    case: usize,
    original: &[Op],
    shrunk: &[Op],
) -> String {
    let mut out = format!(
        "seed {seed}, case {case}: the kernel's FollowerState and Kafka's Replica differ.\n\
         Original sequence: {} operations; shrunk to {}:\n",
        original.len(),
        shrunk.len()
    );
    let mut state = FollowerState::EMPTY;
    kafka.ask("RESET");
    for (i, &op) in shrunk.iter().enumerate() {
        let mine = ours(&mut state, op);
        let theirs = kafka.ask(&op.to_string());
        let mark = if mine == theirs { "  " } else { "!!" };
        out += &format!(
            "{mark} {i:>2}. {:<28} kernel: {mine:<26} kafka: {theirs}\n",
            op.to_string()
        );
    }
    out
}

/// The kernel's [`FollowerState`] answers every operation exactly as Kafka 4.4.0's `Replica`
/// does: fetch-state updates (the fetch offset becomes the follower's LEO; the caught-up time
/// moves by the current or previous leader LEO), resets for a new or the same leader, and
/// caught-up queries.
#[test]
#[ignore = "needs Java 17 and Maven; run with `-- --include-ignored oracle`"]
fn oracle_replica_fetch_state_matches_kafka() {
    let Some(oracle) = Oracle::for_tests("oracle_replica_fetch_state_matches_kafka") else {
        return;
    };
    let no_args: [&str; 0] = [];
    let mut kafka = LineOracle::start(&oracle, "dev.kmirror.oracle.ReplicaOracle", &no_args);
    let started = Instant::now();
    let seeds = [1, 2, 3, 0x5EED, 0xC0FFEE];
    match compare_many(&mut kafka, kernel_answer, &seeds, 1000, 40) {
        Ok(operations) => eprintln!(
            "{} sequences, {operations} operations agree with Kafka in {:.1?}",
            seeds.len() * 1000,
            started.elapsed()
        ),
        Err((_, report)) => panic!("{report}"),
    }
}

/// The comparison is not vacuous: a kernel that counts a fetch at exactly the leader's LEO as
/// not caught up is caught, and the difference shrinks to a single operation.
#[test]
#[ignore = "needs Java 17 and Maven; run with `-- --include-ignored oracle`"]
fn oracle_replica_catches_and_shrinks_a_planted_bug() {
    let Some(oracle) = Oracle::for_tests("oracle_replica_catches_and_shrinks_a_planted_bug") else {
        return;
    };
    let no_args: [&str; 0] = [];
    let mut kafka = LineOracle::start(&oracle, "dev.kmirror.oracle.ReplicaOracle", &no_args);
    let Err((shrunk, report)) = compare_many(&mut kafka, broken_answer, &[7], 500, 40) else {
        panic!("the planted caught-up bug went unnoticed");
    };
    eprintln!("{report}");
    assert!(
        shrunk.len() <= 2,
        "shrinking left {} operations:\n{report}",
        shrunk.len()
    );
    assert!(matches!(shrunk.last(), Some(Op::Fetch { .. })));
}
