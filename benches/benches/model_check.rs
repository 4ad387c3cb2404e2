//! Model checking: unique states per second of an exhaustive breadth-first check of the tiny
//! configuration (`ModelConfig::tiny()`, one thread), the criterion-side figure beside the runs
//! of the default configuration that `BENCHMARKS.md` (`model_check`) describes.
//!
//! Baseline, same run: stateright's own two-phase-commit example (`examples/2pc.rs` of
//! stateright 0.31.0, MIT-licensed, its model reproduced below unchanged but for names and
//! docs) with 6 resource managers, checked the same way (breadth-first, one thread, no
//! symmetry). Throughput is each model's unique state count per check.

use std::collections::BTreeSet;
use std::ops::Range;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use kmirror_model::runner::{check, RunOptions};
use kmirror_model::ModelConfig;
use stateright::{Checker, Model, Property};

/// Resource managers of the 2pc baseline.
const RMS: usize = 6;

/// Stateright's `TwoPhaseSys`: a transaction manager and `rms` resource managers.
#[derive(Clone)]
struct TwoPhaseSys {
    rms: Range<usize>,
}

#[derive(Clone, Debug, Eq, Hash, PartialEq)]
struct TwoPhaseState {
    rm_state: Vec<RmState>,
    tm_state: TmState,
    tm_prepared: Vec<bool>,
    msgs: BTreeSet<Message>,
}

#[derive(Clone, Debug, Eq, Hash, Ord, PartialEq, PartialOrd)]
enum Message {
    Prepared { rm: usize },
    Commit,
    Abort,
}

#[derive(Clone, Debug, Eq, Hash, Ord, PartialEq, PartialOrd)]
enum RmState {
    Working,
    Prepared,
    Committed,
    Aborted,
}

#[derive(Clone, Debug, Eq, Hash, PartialEq)]
enum TmState {
    Init,
    Committed,
    Aborted,
}

#[derive(Clone, Debug, PartialEq)]
enum Action {
    TmRcvPrepared(usize),
    TmCommit,
    TmAbort,
    RmPrepare(usize),
    RmChooseToAbort(usize),
    RmRcvCommitMsg(usize),
    RmRcvAbortMsg(usize),
}

impl Model for TwoPhaseSys {
    type State = TwoPhaseState;
    type Action = Action;

    fn init_states(&self) -> Vec<Self::State> {
        vec![TwoPhaseState {
            rm_state: self.rms.clone().map(|_| RmState::Working).collect(),
            tm_state: TmState::Init,
            tm_prepared: self.rms.clone().map(|_| false).collect(),
            msgs: Default::default(),
        }]
    }

    fn actions(&self, state: &Self::State, actions: &mut Vec<Self::Action>) {
        if state.tm_state == TmState::Init && state.tm_prepared.iter().all(|p| *p) {
            actions.push(Action::TmCommit);
        }
        if state.tm_state == TmState::Init {
            actions.push(Action::TmAbort);
        }
        for rm in self.rms.clone() {
            if state.tm_state == TmState::Init && state.msgs.contains(&Message::Prepared { rm }) {
                actions.push(Action::TmRcvPrepared(rm));
            }
            if state.rm_state.get(rm) == Some(&RmState::Working) {
                actions.push(Action::RmPrepare(rm));
                actions.push(Action::RmChooseToAbort(rm));
            }
            if state.msgs.contains(&Message::Commit) {
                actions.push(Action::RmRcvCommitMsg(rm));
            }
            if state.msgs.contains(&Message::Abort) {
                actions.push(Action::RmRcvAbortMsg(rm));
            }
        }
    }

    fn next_state(&self, last_state: &Self::State, action: Self::Action) -> Option<Self::State> {
        let mut state = last_state.clone();
        match action {
            Action::TmRcvPrepared(rm) => state.tm_prepared[rm] = true,
            Action::TmCommit => {
                state.tm_state = TmState::Committed;
                state.msgs.insert(Message::Commit);
            }
            Action::TmAbort => {
                state.tm_state = TmState::Aborted;
                state.msgs.insert(Message::Abort);
            }
            Action::RmPrepare(rm) => {
                state.rm_state[rm] = RmState::Prepared;
                state.msgs.insert(Message::Prepared { rm });
            }
            Action::RmChooseToAbort(rm) | Action::RmRcvAbortMsg(rm) => {
                state.rm_state[rm] = RmState::Aborted;
            }
            Action::RmRcvCommitMsg(rm) => state.rm_state[rm] = RmState::Committed,
        }
        Some(state)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::<Self>::sometimes("abort agreement", |_, state| {
                state.rm_state.iter().all(|s| s == &RmState::Aborted)
            }),
            Property::<Self>::sometimes("commit agreement", |_, state| {
                state.rm_state.iter().all(|s| s == &RmState::Committed)
            }),
            Property::<Self>::always("consistent", |_, state| {
                !state.rm_state.iter().any(|s1| {
                    state
                        .rm_state
                        .iter()
                        .any(|s2| s1 == &RmState::Aborted && s2 == &RmState::Committed)
                })
            }),
        ]
    }
}

/// Unique states of an exhaustive one-thread BFS of 2pc.
fn check_2pc() -> usize {
    let checker = TwoPhaseSys { rms: 0..RMS }.checker().spawn_bfs().join();
    assert!(checker.is_done());
    checker.unique_state_count()
}

/// Unique states of an exhaustive one-thread BFS of the tiny configuration.
fn check_tiny() -> usize {
    let options = RunOptions {
        threads: 1,
        shorten: false,
        ..RunOptions::default()
    };
    let report = check(&ModelConfig::tiny(), &options);
    assert!(report.exhaustive && report.all_hold());
    report.unique
}

fn model_check(c: &mut Criterion) {
    let mut group = c.benchmark_group("model_check");
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(10));
    type Run = fn() -> usize;
    let runs: [(&str, Run); 2] = [
        ("kmirror_tiny_bfs_1_thread", check_tiny),
        ("stateright_2pc_6_bfs_1_thread", check_2pc),
    ];
    for (name, run) in runs {
        group.throughput(Throughput::Elements(run() as u64));
        group.bench_function(name, |b| b.iter(run));
    }
    group.finish();
}

criterion_group!(benches, model_check);
criterion_main!(benches);
