//! Fixtures shared by the criterion benchmarks in `benches/` (figures in `BENCHMARKS.md`).
//!
//! [`Executor`] is the smallest complete executor of the kernel's effects, the one of the
//! kernel's crate documentation grown a source: the `__mirror_state` coordinator is a local
//! [`Coordinator`], the source answers every fetch at once (with one new batch of
//! [`Executor::source_batch_records`] records, or nothing), epoch bumps and LME writes are
//! acknowledged at once, and the log is a [`MemLog`] with a single replica (everything appended
//! is committed at once). It lets a benchmark drive one partition, or a million, through every
//! state without I/O, so what is timed is the kernel and its log operations.

pub mod node;

use kmirror_kernel::apply::apply_log_effect;
use kmirror_kernel::batch::{BatchHeader, ControlType};
use kmirror_kernel::config::MirrorConfig;
use kmirror_kernel::coordinator::Coordinator;
use kmirror_kernel::desired::DesiredState;
use kmirror_kernel::effect::Effect;
use kmirror_kernel::input::{FetchOutcome, Input};
use kmirror_kernel::log::{LogView, PartitionLog};
use kmirror_kernel::mem_log::MemLog;
use kmirror_kernel::partition::PartitionMirror;
use kmirror_kernel::types::{EpochAndOffset, LeaderEpoch, MirrorName, Offset, TopicId};

/// The mirror every benchmark partition belongs to.
pub fn mirror_name() -> MirrorName {
    MirrorName::new("east").expect("a valid mirror name")
}

/// The leader epoch the source's batches carry: below every destination leader epoch used
/// here, so mirrored batches never ask for a fetch-time epoch bump.
pub const SOURCE_EPOCH: LeaderEpoch = 0;

/// A minimal in-memory executor of kernel effects. See the [crate documentation](crate).
#[derive(Debug)]
pub struct Executor {
    /// The kernel configuration.
    pub config: MirrorConfig,
    /// The `__mirror_state` coordinator, shared by every partition driven.
    pub coordinator: Coordinator,
    /// Records per batch the source returns on a fetch when [`Executor::source_has_data`].
    pub source_batch_records: i64,
    /// Whether a fetch returns a new batch (`true`) or nothing new (`false`: caught up).
    pub source_has_data: bool,
    /// Inputs handed to the kernel so far.
    pub inputs: u64,
}

impl Default for Executor {
    fn default() -> Self {
        Executor::new()
    }
}

impl Executor {
    /// An executor with the default kernel configuration and an empty coordinator, whose
    /// source is caught up.
    pub fn new() -> Self {
        let config = MirrorConfig::default();
        Executor {
            coordinator: Coordinator::new(config.transitions.clone()),
            config,
            source_batch_records: 1,
            source_has_data: false,
            inputs: 0,
        }
    }

    /// Handles `input` and every completion it causes, except fetch completions: those are
    /// returned (the fetcher loops forever; the caller decides how many to feed).
    pub fn drive(
        &mut self,
        input: Input,
        partition: &mut PartitionMirror,
        log: &mut MemLog,
    ) -> Vec<(Input, Vec<BatchHeader>)> {
        let mut fetches = Vec::new();
        let mut pending = vec![(input, Vec::new())];
        while let Some((input, batches)) = pending.pop() {
            if matches!(input, Input::FetchCompleted { .. }) {
                fetches.push((input, batches));
                continue;
            }
            self.inputs += 1;
            let effects = partition
                .handle(&self.config, input, &*log)
                .expect("the executor only sends expected inputs");
            self.execute(effects, &batches, log, &mut pending);
        }
        fetches
    }

    /// Handles one fetch completion (as returned by [`Executor::drive`]) and returns the next.
    pub fn fetch_once(
        &mut self,
        completion: (Input, Vec<BatchHeader>),
        partition: &mut PartitionMirror,
        log: &mut MemLog,
    ) -> (Input, Vec<BatchHeader>) {
        self.inputs += 1;
        let (input, batches) = completion;
        let effects = partition
            .handle(&self.config, input, &*log)
            .expect("a fetch completion the partition waits for");
        let mut pending = Vec::new();
        self.execute(effects, &batches, log, &mut pending);
        let mut next = None;
        for (input, batches) in pending {
            if matches!(input, Input::FetchCompleted { .. }) {
                next = Some((input, batches));
            } else {
                let more = self.drive(input, partition, log);
                next = next.or(more.into_iter().next());
            }
        }
        next.expect("the partition fetches again")
    }

    fn execute(
        &mut self,
        effects: Vec<Effect>,
        fetched: &[BatchHeader],
        log: &mut MemLog,
        completions: &mut Vec<(Input, Vec<BatchHeader>)>,
    ) {
        for effect in effects {
            let input = match effect {
                Effect::Log(e) => {
                    apply_log_effect(log, &e, fetched).expect("log effect applies");
                    if log.high_watermark() < log.log_end_offset() {
                        log.advance_high_watermark(log.log_end_offset())
                            .expect("HW within the log");
                        if log
                            .last_batch()
                            .is_some_and(|b| b.control == Some(ControlType::MirrorPidReset))
                        {
                            completions.push((Input::HighWatermarkAdvanced, Vec::new()));
                        }
                    }
                    continue;
                }
                Effect::ReadState { request, key } => Input::StateRead {
                    request,
                    value: self.coordinator.read_state(&key).cloned(),
                },
                Effect::WriteState {
                    request,
                    key,
                    value,
                    expected_state_epoch,
                } => Input::StateWritten {
                    request,
                    value: self
                        .coordinator
                        .write_state(&key, value, expected_state_epoch)
                        .expect("write accepted"),
                },
                Effect::QueryLastMirroredEpoch { request, key } => {
                    let stored = self.coordinator.read_last_mirrored_epoch(&key);
                    Input::LastMirroredEpochReceived {
                        request,
                        lme: stored.and_then(|v| {
                            v.last_mirrored_epoch.map(|epoch| EpochAndOffset {
                                epoch,
                                end_offset: v.last_mirrored_offset,
                            })
                        }),
                        source_log_start_offset: 0,
                    }
                }
                Effect::Fetch {
                    request,
                    fetch_offset,
                    ..
                } => {
                    let (outcome, batches) = self.serve(fetch_offset);
                    completions.push((Input::FetchCompleted { request, outcome }, batches));
                    continue;
                }
                Effect::BumpLeaderEpoch { request, at_least } => Input::LeaderEpochBumped {
                    request,
                    leader_epoch: at_least,
                },
                Effect::WriteLastMirroredEpoch {
                    request,
                    key,
                    value,
                    expected_state_epoch,
                } => match self.coordinator.write_last_mirrored_epoch(
                    &key,
                    value,
                    expected_state_epoch,
                ) {
                    Ok(_) => Input::LastMirroredEpochWritten { request },
                    Err(refused) => Input::WriteFenced {
                        request,
                        reason: refused.reason(),
                    },
                },
                Effect::StartFetcher | Effect::StopFetcher | Effect::SetWritable(_) => continue,
                Effect::ScheduleRetry { .. } => panic!("nothing fails in the benchmarks"),
            };
            completions.push((input, Vec::new()));
        }
    }

    /// The source's answer to a fetch at `fetch_offset`.
    fn serve(&self, fetch_offset: Offset) -> (FetchOutcome, Vec<BatchHeader>) {
        if !self.source_has_data {
            let outcome = FetchOutcome::Records {
                next_offset: fetch_offset,
                last_epoch: None,
            };
            return (outcome, Vec::new());
        }
        let last = fetch_offset + self.source_batch_records - 1;
        let outcome = FetchOutcome::Records {
            next_offset: last + 1,
            last_epoch: Some(SOURCE_EPOCH),
        };
        (
            outcome,
            vec![BatchHeader::plain(fetch_offset, last, SOURCE_EPOCH)],
        )
    }
}

/// A new partition `index` of topic 7 on broker 1 that should be mirrored.
pub fn new_partition(index: i32) -> PartitionMirror {
    PartitionMirror::new(
        1,
        TopicId::from_u64(7),
        index,
        DesiredState::Mirror(mirror_name()),
    )
}

/// The `BecameLeader` input for broker 1 alone at `leader_epoch`.
pub fn became_leader(leader_epoch: LeaderEpoch) -> Input {
    Input::BecameLeader {
        leader_epoch,
        replicas: im::ordset![1],
        isr: im::ordset![1],
    }
}

/// One whole lifecycle of a fresh partition on a fresh log and coordinator, returning the
/// inputs handled: UNKNOWN -> PREPARING -> MIRRORING, `fetches` fetches of one new batch each,
/// a stop (STOPPING: LSO truncation, LME record, `MIRROR_PID_RESET`) to STOPPED, a failback
/// (PREPARING with the LME, truncation) to MIRRORING, and `fetches` more fetches.
pub fn lifecycle(fetches: usize) -> u64 {
    let mut exec = Executor::new();
    exec.source_has_data = true;
    let mut partition = new_partition(0);
    let mut log = MemLog::new();
    let mirror_for =
        |exec: &mut Executor, partition: &mut PartitionMirror, log: &mut MemLog, input| {
            let mut next = exec.drive(input, partition, log).pop();
            for _ in 0..fetches {
                let completion = next.take().expect("MIRRORING fetches");
                next = Some(exec.fetch_once(completion, partition, log));
            }
        };
    mirror_for(&mut exec, &mut partition, &mut log, became_leader(1));
    let stop = Input::DesiredStateChanged(DesiredState::Stop(mirror_name()));
    exec.drive(stop, &mut partition, &mut log);
    let failback = Input::DesiredStateChanged(DesiredState::Mirror(mirror_name()));
    mirror_for(&mut exec, &mut partition, &mut log, failback);
    exec.inputs
}
