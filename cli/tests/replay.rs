//! Model traces replayed on real logs (`kmirror replay`): examples from an exhaustive check of
//! the tiny configuration, seeded random walks through failover and failback on two-replica
//! clusters, and tampering that the replay must notice.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::ExitCode;
use std::sync::OnceLock;

use kmirror::replay::{
    replay_journal, replay_trace, replica_partition_dir, run, Place, ReplayArgs, ReplayError,
    ReplaySummary, REPLAY_LOG_CONFIG,
};
use kmirror_harness::file_log::FileLog;
use kmirror_harness::record_batch::RawBatch;
use kmirror_kernel::config::StopStrategy;
use kmirror_kernel::effect::LogEffect;
use kmirror_kernel::log::LogView;
use kmirror_kernel::state::MirrorState;
use kmirror_model::actions::Action;
use kmirror_model::journal::{Event, LogOp};
use kmirror_model::runner::{check, RunOptions};
use kmirror_model::trace::Trace;
use kmirror_model::world::{ClusterId, World};
use kmirror_model::ModelConfig;

/// The example traces of the tiny configuration's exhaustive check (checked once per test
/// binary).
fn tiny_examples() -> Vec<(String, Trace)> {
    static EXAMPLES: OnceLock<Vec<(String, Trace)>> = OnceLock::new();
    EXAMPLES
        .get_or_init(|| {
            // Stateright's own examples (the last state found in the whole search), not the
            // first found: `mirrored_batches_keep_the_source_bytes` needs a failback after B
            // mirrored A's batches, which the shortest failback does not have.
            let options = RunOptions {
                prune_examples: false,
                ..RunOptions::default()
            };
            let report = check(&ModelConfig::tiny(), &options);
            [
                "failback_completes",
                "divergence_truncation",
                "failover_with_open_transaction",
                "refused_produce",
            ]
            .into_iter()
            .map(|name| {
                let trace = report
                    .properties
                    .iter()
                    .find(|p| p.name == name)
                    .and_then(|p| p.trace.clone())
                    .unwrap_or_else(|| panic!("{name} has an example in the tiny configuration"));
                (name.to_owned(), trace)
            })
            .collect()
        })
        .clone()
}

fn replay_ok(name: &str, trace: &Trace) -> ReplaySummary {
    let dir = tempfile::tempdir().unwrap();
    match replay_trace(trace, dir.path()) {
        Ok(summary) => summary,
        Err(e) => panic!("{name}: {e}\n{}", trace.render().unwrap_or_default()),
    }
}

#[test]
fn tiny_check_examples_replay_on_disk() {
    let mut total = ReplaySummary::default();
    for (name, trace) in tiny_examples() {
        let s = replay_ok(&name, &trace);
        assert_eq!(s.steps, trace.actions.len() + 1, "{name}");
        assert!(s.kernel_inputs > 0 && s.log_operations > 0, "{name}: {s:?}");
        total += &s;
    }
    assert!(total.steps > 40, "{total:?}");
    assert!(
        total.batches_copied > 0,
        "mirrored batches are copied byte for byte: {total:?}"
    );
    assert!(total.mirror_state_records > 0, "{total:?}");
}

/// A small seeded PRNG (xorshift64*).
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// The configuration of the random walks: two replicas per cluster, so followers copy,
/// truncate and take over; a crash, an election, an ISR shrink and a network fault.
fn walk_config() -> ModelConfig {
    ModelConfig {
        replicas: 2,
        records: 3,
        elections: 1,
        crashes: 1,
        network_faults: 1,
        isr_shrinks: 1,
        ..ModelConfig::default_check()
    }
}

fn failed_back(w: &World) -> bool {
    w.stored_state(ClusterId::B) == MirrorState::Stopped
        && w.stored_state(ClusterId::A) == MirrorState::Mirroring
}

/// A random walk of at most `max_steps` actions from the initial world, ending at the first
/// world where B is STOPPED and A MIRRORING from it (failback); `None` if it does not get there.
fn walk(config: &ModelConfig, seed: u64, max_steps: usize) -> Option<Trace> {
    let mut rng = Rng::new(seed);
    let mut world = World::initial(config);
    let mut actions = Vec::new();
    let mut enabled = Vec::new();
    while actions.len() < max_steps {
        enabled.clear();
        world.enabled_actions(config, &mut enabled);
        if enabled.is_empty() {
            return None;
        }
        let action = enabled[rng.below(enabled.len())].clone();
        if let Some(next) = world.apply(config, action.clone()) {
            world = next;
            actions.push(action);
            if failed_back(&world) {
                return Some(Trace {
                    property: Some(format!("random walk, seed {seed}")),
                    config: config.clone(),
                    actions,
                });
            }
        }
    }
    None
}

/// What a set of traces exercises on the disk side.
#[derive(Default, Debug)]
struct Coverage {
    kinds: BTreeSet<&'static str>,
}

impl Coverage {
    fn add(&mut self, trace: &Trace) {
        for action in &trace.actions {
            match action {
                Action::Crash(..) => self.kinds.insert("crash"),
                Action::Restart(..) => self.kinds.insert("restart"),
                Action::Elect(..) => self.kinds.insert("election"),
                _ => false,
            };
        }
        for step in trace.journal().unwrap() {
            for event in &step.events {
                let Event::Log { op, .. } = event else {
                    continue;
                };
                self.kinds.insert(match op {
                    LogOp::Effect { effect, .. } => match effect {
                        LogEffect::AppendFetched => "append fetched",
                        LogEffect::TruncateTo { .. } => "kernel truncate",
                        LogEffect::TruncateFullyAndStartAt { .. } => "kernel truncate fully",
                        LogEffect::AbortTransaction { .. } => "abort marker",
                        LogEffect::AppendPidReset { .. } => "pid reset marker",
                    },
                    LogOp::AppendAsLeader { .. } => "leader append",
                    LogOp::AppendAsFollower { .. } => "follower append",
                    LogOp::TruncateTo { .. } => "follower truncate",
                    LogOp::TruncateFullyAndStartAt { .. } => "follower truncate fully",
                    LogOp::AdvanceHighWatermark { .. } => "advance hw",
                    LogOp::AssignEpochStartOffset { .. } => "new leader epoch",
                });
            }
        }
    }
}

/// The first `count` walks of `config`, seeds from 1 on, that fail back and satisfy `keep`.
fn failback_walks(config: &ModelConfig, count: usize, keep: impl Fn(&Trace) -> bool) -> Vec<Trace> {
    let walks: Vec<Trace> = (1..=2000u64)
        .filter_map(|seed| walk(config, seed, 400))
        .filter(|t| keep(t))
        .take(count)
        .collect();
    assert_eq!(walks.len(), count, "enough seeded walks reach failback");
    walks
}

/// Whether the trace's journal has a kernel log effect matching `f`.
fn has_effect(trace: &Trace, f: impl Fn(&LogEffect) -> bool) -> bool {
    trace.journal().unwrap().iter().any(|s| {
        s.events
            .iter()
            .any(|e| matches!(e, Event::Log { op: LogOp::Effect { effect, .. }, .. } if f(effect)))
    })
}

#[test]
fn seeded_random_walks_through_failover_and_failback_replay_on_disk() {
    // Four walks with the KIP text's stop (truncate to the LSO, docs/design.md), two with the
    // later prototype's (ABORT markers for open transactions) that do write an ABORT marker.
    let mut walks = failback_walks(&walk_config(), 4, |_| true);
    let abort = walk_config().with_stop_strategy(StopStrategy::AbortOpenTransactions);
    walks.extend(failback_walks(&abort, 2, |t| {
        has_effect(t, |e| matches!(e, LogEffect::AbortTransaction { .. }))
    }));
    let mut coverage = Coverage::default();
    let mut total = ReplaySummary::default();
    for trace in &walks {
        coverage.add(trace);
        let name = trace.property.clone().unwrap_or_default();
        total += &replay_ok(&name, trace);
    }
    eprintln!("walks cover {:?}; {total:?}", coverage.kinds);
    for kind in [
        "leader append",
        "follower append",
        "append fetched",
        "pid reset marker",
        "abort marker",
        "advance hw",
        "crash",
        "restart",
    ] {
        assert!(coverage.kinds.contains(kind), "no walk has a {kind}");
    }
    assert!(
        total.batches_copied > 0 && total.reopened_logs > 0,
        "{total:?}"
    );
}

/// A step `n` of `trace` after which replica `b` of `c` has a non-empty epoch cache that step
/// `n + 1` leaves alone (so a tampered checkpoint file is not rewritten).
fn quiet_step(trace: &Trace, c: ClusterId, b: i32) -> Option<usize> {
    let steps = trace.journal().unwrap();
    (1..steps.len().saturating_sub(1)).find(|&n| {
        let now = &*steps[n].world.cluster(c).replicas[b as usize].log;
        let next = &*steps[n + 1].world.cluster(c).replicas[b as usize].log;
        !LogView::epoch_cache(now).is_empty()
            && LogView::epoch_cache(now) == LogView::epoch_cache(next)
    })
}

#[test]
fn a_tampered_epoch_checkpoint_is_reported_at_the_next_step() {
    let (_, trace) = tiny_examples()
        .into_iter()
        .find(|(name, _)| name == "failback_completes")
        .unwrap();
    let (c, b) = (ClusterId::B, 0i32);
    let n = quiet_step(&trace, c, b).expect("a step leaves B/0's epoch cache alone");
    let steps = trace.journal().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_path_buf();
    let err = replay_journal(&trace.config, &steps, &root, |report| {
        if report.step == n {
            // A checkpoint claiming epoch 77 from offset 0: valid text, wrong content.
            let file = replica_partition_dir(&root, c, b).join("leader-epoch-checkpoint");
            std::fs::write(file, "0\n1\n77 0\n").unwrap();
        }
    })
    .expect_err("the tampered checkpoint is noticed");
    eprintln!("{err}");
    let d = err
        .difference()
        .unwrap_or_else(|| panic!("a mismatch: {err}"));
    assert_eq!(d.step, n + 1, "{err}");
    assert_eq!(
        d.place,
        Place::Replica {
            cluster: c,
            broker: b
        },
        "{err}"
    );
    assert_eq!(d.field, "leader-epoch-checkpoint file", "{err}");
    assert_eq!(d.disk, "[77@0]", "{err}");
    let message = err.to_string();
    assert!(message.contains(&format!("step {}", n + 1)), "{message}");
    assert!(message.contains("B/broker 0"), "{message}");
}

#[test]
fn a_corrupted_segment_is_reported_naming_the_replica() {
    let (_, trace) = tiny_examples()
        .into_iter()
        .find(|(name, _)| name == "failback_completes")
        .unwrap();
    let steps = trace.journal().unwrap();
    let (c, b) = (ClusterId::A, 0i32);
    // The first step after which A/0 holds a batch.
    let n = steps
        .iter()
        .position(|s| LogView::log_end_offset(&*s.world.cluster(c).replicas[b as usize].log) > 0)
        .expect("A/0 gets a batch");
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_path_buf();
    let err = replay_journal(&trace.config, &steps, &root, |report| {
        if report.step == n {
            flip_last_byte_of_first_segment(&replica_partition_dir(&root, c, b));
        }
    })
    .expect_err("the corrupt segment is noticed");
    eprintln!("{err}");
    let message = err.to_string();
    assert!(
        matches!(
            &err,
            ReplayError::Disk { place, step, .. }
                if *place == Place::Replica { cluster: c, broker: b } && *step > n
        ),
        "{message}"
    );
    assert!(message.contains("A/broker 0"), "{message}");
}

/// Flips the last byte of the oldest segment of a partition directory (a record's value, under
/// the batch's CRC).
fn flip_last_byte_of_first_segment(dir: &Path) {
    let mut segments: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect();
    segments.sort();
    let file = &segments[0];
    let mut bytes = std::fs::read(file).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::write(file, bytes).unwrap();
}

#[test]
fn a_tampered_journal_is_reported_with_both_values() {
    let (_, trace) = tiny_examples()
        .into_iter()
        .find(|(name, _)| name == "failback_completes")
        .unwrap();
    let mut steps = trace.journal().unwrap();
    // Drop the first high-watermark advance: the replica's HW stays behind the model's.
    let (n, i) = steps
        .iter()
        .enumerate()
        .find_map(|(n, s)| {
            s.events
                .iter()
                .position(|e| {
                    matches!(
                        e,
                        Event::Log {
                            op: LogOp::AdvanceHighWatermark { .. },
                            ..
                        }
                    )
                })
                .map(|i| (n, i))
        })
        .expect("the trace advances a high watermark");
    let Event::Log {
        cluster,
        broker,
        op: LogOp::AdvanceHighWatermark { offset },
    } = steps[n].events.remove(i)
    else {
        unreachable!()
    };
    let dir = tempfile::tempdir().unwrap();
    let err = replay_journal(&trace.config, &steps, dir.path(), |_| {})
        .expect_err("the missing HW advance is noticed");
    eprintln!("{err}");
    let d = err
        .difference()
        .unwrap_or_else(|| panic!("a mismatch: {err}"));
    assert_eq!(d.step, n, "{err}");
    assert_eq!(d.place, Place::Replica { cluster, broker }, "{err}");
    // Either the HW itself or something the kernel derived from it (its effects) differs
    // first; an HW difference names both values.
    if d.field == "high watermark" {
        assert_eq!(d.model, offset.to_string(), "{err}");
    } else {
        assert!(d.field.starts_with("effects of kernel input"), "{err}");
    }
}

#[test]
fn mirrored_batches_keep_the_source_bytes() {
    let (_, trace) = tiny_examples()
        .into_iter()
        .find(|(name, _)| name == "failback_completes")
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let summary = replay_trace(&trace, dir.path()).unwrap();
    assert_eq!(summary.batches_synthesized, 0, "{summary:?}");
    let open = |c| {
        let dir = replica_partition_dir(dir.path(), c, 0);
        let (log, _) = FileLog::open_dir(&dir, REPLAY_LOG_CONFIG).unwrap();
        let leo = LogView::log_end_offset(&log);
        log.try_read(0, leo).unwrap()
    };
    let (a, b) = (open(ClusterId::A), open(ClusterId::B));
    let mut shared = 0;
    for batch in &b {
        if let Some(source) = a.iter().find(|s| s.header() == batch.header()) {
            assert_eq!(source.bytes(), batch.bytes(), "{:?}", batch.header());
            shared += 1;
        }
    }
    assert!(shared > 0, "B mirrored batches of A");
    // Leader appends are stamped with their step, so a synthesized copy would differ.
    let stamps: BTreeSet<i64> = a.iter().chain(&b).map(RawBatch::base_timestamp).collect();
    assert!(stamps.len() > 1, "{stamps:?}");
}

#[test]
fn the_replay_command_reports_ok_and_refuses_a_used_directory() {
    let (_, trace) = tiny_examples()
        .into_iter()
        .find(|(name, _)| name == "refused_produce")
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("trace.json");
    std::fs::write(&file, serde_json::to_string_pretty(&trace).unwrap()).unwrap();
    let args = |logs: Option<&str>, json| ReplayArgs {
        trace: file.clone(),
        dir: logs.map(|l| dir.path().join(l)),
        json,
    };
    assert_eq!(run(args(None, false)), Ok(ExitCode::SUCCESS));
    assert_eq!(run(args(Some("logs"), true)), Ok(ExitCode::SUCCESS));
    assert!(replica_partition_dir(&dir.path().join("logs"), ClusterId::B, 0).is_dir());
    let err = run(args(Some("logs"), false)).unwrap_err();
    assert!(err.contains("not empty"), "{err}");
    std::fs::write(&file, "{}").unwrap();
    let err = run(args(None, false)).unwrap_err();
    assert!(err.contains("is not a kmirror trace"), "{err}");
}

/// A longer soak: many walks of bigger configurations, failback or not (`cargo test --release
/// -- --ignored`).
#[test]
#[ignore = "soak: minutes"]
fn soak_many_random_walks() {
    let configs = [
        walk_config(),
        walk_config().with_stop_strategy(StopStrategy::AbortOpenTransactions),
        ModelConfig {
            replicas: 3,
            unclean_elections: true,
            elections: 2,
            coordinator_moves: 1,
            network_faults: 2,
            pause_resume: true,
            operator_steps: 4,
            ..walk_config()
        },
    ];
    let seeds: u64 = std::env::var("KMIRROR_SOAK_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(200);
    let mut total = ReplaySummary::default();
    for config in &configs {
        for seed in 1..=seeds {
            let mut rng = Rng::new(seed);
            let mut world = World::initial(config);
            let mut actions = Vec::new();
            let mut enabled = Vec::new();
            for _ in 0..300 {
                enabled.clear();
                world.enabled_actions(config, &mut enabled);
                if enabled.is_empty() {
                    break;
                }
                let action = enabled[rng.below(enabled.len())].clone();
                if let Some(next) = world.apply(config, action.clone()) {
                    world = next;
                    actions.push(action);
                }
            }
            let trace = Trace {
                property: Some(format!("soak seed {seed}")),
                config: config.clone(),
                actions,
            };
            total += &replay_ok(&format!("seed {seed} of {config:?}"), &trace);
        }
    }
    eprintln!("{total:?}");
}
