//! The driver: runs the kernel's [`PartitionMirror`] for the partition of a destination cluster
//! directory against real logs.
//!
//! **The kernel decides, the driver does.** The driver feeds kernel inputs
//! ([`PartitionMirror::handle`]), executes every [`Effect`] it returns in one `match`
//! ([`Driver`]'s `execute`), and feeds each completion back as the next input. It never decides
//! anything about mirroring itself; the log rules it needs are the kernel's
//! ([`apply_log_effect`], [`serve_fetch`](kmirror_kernel::fetch::serve_fetch) through the
//! [`Source`], the follower rules in [`cluster`]).
//!
//! | effect | executed as |
//! |---|---|
//! | `ReadState` | read from the coordinator rebuilt from `__mirror_state` |
//! | `WriteState` | the leader's log flushed; fenced by the coordinator, appended to `__mirror_state` and fsynced, then acknowledged |
//! | `WriteLastMirroredEpoch` | the leader's log flushed; appended to `__mirror_state` and fsynced, then acknowledged |
//! | `QueryLastMirroredEpoch` | the source answers from its own `__mirror_state` |
//! | `Fetch` | the source serves it ([`Source::fetch`]); an empty answer is held (long poll) |
//! | `Log(_)` | [`apply_log_effect`] on the leader's [`FileLog`](crate::file_log::FileLog), with the fetched [`RawBatch`]es byte for byte |
//! | `BumpLeaderEpoch` | the controller state file gets the new epoch (atomically) |
//! | `SetWritable` | the `produce-gate` file the producer checks |
//! | `ScheduleRetry` | a timer fired by [`Driver::run_once`] once the caller's clock passes it |
//! | `StartFetcher` / `StopFetcher` | the fetch slot is opened / emptied |
//!
//! Completions are queued and fed one per [`Driver::run_once`], in order. Between them the
//! followers replicate from the leader (Kafka follower semantics, [`Cluster::replicate_round`]),
//! report `ReplicaFetched` to the kernel, and the kernel hears `HighWatermarkAdvanced` whenever
//! the leader's high watermark moves.
//!
//! **Fetch-ahead**: while a fetch answered with records is fed (its batches appended), the fetch
//! the kernel will ask next is sent on a second thread ([`fetch_ahead`]). Its answer is kept
//! only for the kernel's next request and only when that asks exactly the same fetch, and it is
//! dropped when the driver lets go of the source; [`DriverOptions::fetch_ahead`] turns it off.
//!
//! **Nothing the kernel needs is held only in memory**: every write the kernel acts on is on
//! disk before its completion is fed. A restarted driver re-opens everything and feeds
//! `BecameLeader`; the kernel re-reads its state and re-runs that state's side effect.
//!
//! **Flushing** follows Kafka ([`FlushPolicy::Kafka`](crate::file_log::FlushPolicy), the
//! default; the argument is in [`file_log`](crate::file_log)): mirrored batches are appended a
//! fetch round per write and stay in the page cache, their writeback started at once
//! ([`crate::writeback`]): the source can serve them again after a machine crash, and recovery
//! cuts the lost tail. The leader's log is flushed before every
//! `__mirror_state` write, `__mirror_state` records and the destination's own batches
//! (`MIRROR_PID_RESET`, ABORT markers) are fsynced before they are acknowledged, and `close`
//! flushes everything.
//!
//! **No clock**: every call takes `now_ms` from the caller; [`Driver::run`] takes a [`Clock`].
//!
//! Beside the driver, on the same cluster directories: [`metadata_sync`] (a
//! [`sync`](crate::sync) round's source and sink) and [`consumer`] (a small consumer for tests
//! and demos).

pub mod cluster;
pub mod consumer;
pub mod error;
pub mod event;
pub mod fetch_ahead;
pub mod local_source;
pub mod metadata_sync;
pub mod run;
pub mod status;

use std::collections::VecDeque;
use std::path::PathBuf;

use kmirror_kernel::apply::apply_log_effect;
use kmirror_kernel::config::{FetchIsolation, MirrorConfig};
use kmirror_kernel::controller::{
    apply_config_record, handle_mirror_request, ConfigRecord, ControllerConfig, MirrorRequest,
};
use kmirror_kernel::desired::DesiredState;
use kmirror_kernel::effect::{Effect, LogEffect, RequestId};
use kmirror_kernel::fetch::FetchResponse;
use kmirror_kernel::input::Input;
use kmirror_kernel::log::LogView;
use kmirror_kernel::partition::{Activity, PartitionMirror};
use kmirror_kernel::state::MirrorState;
use kmirror_kernel::types::{LeaderEpoch, MirrorName, MirrorPartition, Offset};

use crate::record_batch::RawBatch;
use crate::source::{Source, SourceError, SourcePosition};

use fetch_ahead::{FetchParams, FetchedAhead};

pub use crate::clock::{Clock, ManualClock};
pub use cluster::{Cluster, ClusterConfig, ClusterDir, ControllerState, PARTITION};
pub use error::DriverError;
pub use event::Event;
pub use local_source::LocalSource;
pub use run::{Idle, Progress, RunEnd, Stats, Until};
pub use status::{
    format_epochs, format_epochs_compact, ClusterStatus, LmeStatus, ReplicaStatus,
    StateRecordStatus,
};

/// Most batches one mirror fetch returns, by default.
pub const DEFAULT_MAX_FETCH_BATCHES: usize = 100;
/// How long [`Driver::run`] waits before polling a busy source again (ms).
pub const BUSY_POLL_MS: i64 = 50;

/// How the driver runs the kernel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DriverOptions {
    /// The kernel's configuration.
    pub mirror: MirrorConfig,
    /// Most batches one mirror fetch returns.
    pub max_fetch_batches: usize,
    /// Most batches one follower fetch returns.
    pub max_follower_batches: usize,
    /// Whether the next fetch is read from the source while the last one's batches are
    /// appended ([`fetch_ahead`]; on by default). Off, fetching and appending take turns.
    pub fetch_ahead: bool,
    /// Fault injection: return [`DriverError::Halted`] right after this many effects were
    /// executed, leaving the files as a crash at that point would (crash tests kill the
    /// process there).
    pub halt_after_effects: Option<u64>,
}

impl Default for DriverOptions {
    fn default() -> Self {
        DriverOptions {
            mirror: MirrorConfig::default(),
            max_fetch_batches: DEFAULT_MAX_FETCH_BATCHES,
            max_follower_batches: DEFAULT_MAX_FETCH_BATCHES,
            fetch_ahead: true,
            halt_after_effects: None,
        }
    }
}

#[derive(Clone, Debug)]
struct Completion {
    input: Input,
    batches: Vec<RawBatch>,
    /// For a fetch answered with records: the fetch to send ahead while they are appended
    /// ([`fetch_ahead`]).
    next: Option<FetchParams>,
}

#[derive(Clone, Copy, Debug)]
struct PendingFetch {
    request: RequestId,
    fetch_offset: Offset,
    last_fetched_epoch: Option<LeaderEpoch>,
    isolation: FetchIsolation,
    held: bool,
}

#[derive(Clone, Copy, Debug)]
struct Timer {
    attempt: u32,
    due_ms: i64,
}

/// The kernel of one destination partition and the world it acts on. See the [module
/// documentation](self).
pub struct Driver {
    cluster: Cluster,
    source: Option<Box<dyn Source>>,
    kernel: PartitionMirror,
    options: DriverOptions,
    completions: VecDeque<Completion>,
    pending_fetch: Option<PendingFetch>,
    fetched_ahead: Option<FetchedAhead>,
    pending_lme: Option<(RequestId, MirrorPartition)>,
    timer: Option<Timer>,
    fetcher_running: bool,
    now_ms: i64,
    started: bool,
    events: Vec<Event>,
    stats: Stats,
    effects: u64,
}

impl std::fmt::Debug for Driver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Driver")
            .field("dir", &self.cluster.dir.root())
            .field("kernel", &self.kernel)
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

impl Driver {
    /// Opens the destination cluster directory `root` (every log and file is read and checked
    /// first; nothing is written) with the source it mirrors from, if any.
    pub fn open(
        root: &std::path::Path,
        source: Option<Box<dyn Source>>,
        options: DriverOptions,
    ) -> Result<Self, DriverError> {
        Self::from_cluster(Cluster::open(root)?, source, options)
    }

    /// A driver for an opened cluster.
    pub fn from_cluster(
        cluster: Cluster,
        source: Option<Box<dyn Source>>,
        options: DriverOptions,
    ) -> Result<Self, DriverError> {
        let desired = cluster.dir.desired_state()?;
        let kernel = PartitionMirror::new(
            cluster.dir.controller().leader,
            cluster.dir.config().topic_id,
            PARTITION,
            desired,
        );
        Ok(Driver {
            cluster,
            source,
            kernel,
            options,
            completions: VecDeque::new(),
            pending_fetch: None,
            fetched_ahead: None,
            pending_lme: None,
            timer: None,
            fetcher_running: false,
            now_ms: 0,
            started: false,
            events: Vec::new(),
            stats: Stats::default(),
            effects: 0,
        })
    }

    /// The cluster (logs, config, controller state).
    pub fn cluster(&self) -> &Cluster {
        &self.cluster
    }

    /// The kernel's state machine (read only).
    pub fn kernel(&self) -> &PartitionMirror {
        &self.kernel
    }

    /// The persisted mirror state.
    pub fn state(&self) -> MirrorState {
        self.cluster.mirror_state()
    }

    /// Whether the kernel asked for the fetcher to run.
    pub fn fetcher_running(&self) -> bool {
        self.fetcher_running
    }

    /// Work counters.
    pub fn stats(&self) -> Stats {
        self.stats
    }

    /// The events recorded since the last call.
    pub fn take_events(&mut self) -> Vec<Event> {
        std::mem::take(&mut self.events)
    }

    /// The source's position as of the last request it served.
    pub fn source_position(&self) -> Option<SourcePosition> {
        self.source.as_ref().and_then(|s| s.position())
    }

    /// A snapshot for progress lines.
    pub fn progress(&self) -> Progress {
        let leader = &self.cluster.leader;
        Progress {
            state: self.state().to_string(),
            log_end_offset: leader.log_end_offset(),
            high_watermark: leader.high_watermark(),
            last_stable_offset: leader.last_stable_offset(),
            source_last_stable_offset: self.source_position().map(|p| p.last_stable_offset),
            stats: self.stats,
        }
    }

    /// Becomes the partition leader with the controller's epoch and ISR: the kernel reads its
    /// persisted state and moves on from there (after a restart: re-runs its side effect).
    pub fn start(&mut self, now_ms: i64) -> Result<(), DriverError> {
        self.set_now(now_ms);
        self.started = true;
        let c = self.cluster.dir.controller();
        let input = Input::BecameLeader {
            leader_epoch: c.leader_epoch,
            replicas: c.replica_set(),
            isr: c.isr_set(),
        };
        self.feed(input, &[])
    }

    /// Applies a controller `ConfigRecord` (from the kernel's controller functions) to the
    /// topic config: persists the new `mirror.name`, then tells the kernel.
    pub fn apply_config_record(
        &mut self,
        record: &ConfigRecord,
        now_ms: i64,
    ) -> Result<(), DriverError> {
        let config = self.cluster.dir.config();
        let catalogue = apply_config_record(&config.catalogue(), record);
        let mut next = config.clone();
        next.mirror_name = catalogue
            .topic(&config.topic)
            .and_then(|t| t.mirror_name.clone());
        self.set_config(next, now_ms)
    }

    /// Creates cluster mirror `mirror` on this cluster (so that `mirror.name` may name it) and
    /// remembers `source_dir` as its source; persisted at once.
    pub fn create_mirror(
        &mut self,
        mirror: MirrorName,
        source_dir: Option<PathBuf>,
        now_ms: i64,
    ) -> Result<(), DriverError> {
        let mut config = self.cluster.dir.config().clone();
        config.mirrors.insert(mirror);
        if source_dir.is_some() {
            config.source_dir = source_dir;
        }
        self.set_config(config, now_ms)
    }

    /// Sends `request` (which should name this cluster's topic) to the controller: the
    /// kernel's [`handle_mirror_request`] decides against the topic config and the persisted
    /// mirror states; a refusal for the topic is [`DriverError::Refused`] (nothing changes),
    /// an acceptance persists the new `mirror.name` and tells the kernel.
    pub fn request(&mut self, request: &MirrorRequest, now_ms: i64) -> Result<(), DriverError> {
        let records = self.check_request(request, None)?;
        for record in &records {
            self.apply_config_record(record, now_ms)?;
        }
        Ok(())
    }

    /// What the controller would answer to `request` (with mirror `also_known` created on this
    /// cluster first, if given): the records it would write, or its refusal. Changes nothing.
    pub fn check_request(
        &self,
        request: &MirrorRequest,
        also_known: Option<&MirrorName>,
    ) -> Result<Vec<ConfigRecord>, DriverError> {
        let config = self.cluster.dir.config();
        let mut catalogue = config.catalogue();
        if let Some(m) = also_known {
            catalogue.insert_mirror(m.clone());
        }
        let coordinator = self.cluster.state_log.coordinator();
        let lookup = |k: &MirrorPartition| coordinator.read_state(k).map(|v| v.state);
        let outcome =
            handle_mirror_request(&catalogue, &lookup, &ControllerConfig::default(), request);
        if let Some(Err(e)) = outcome.result(&config.topic) {
            return Err(DriverError::Refused(e.clone()));
        }
        Ok(outcome.records)
    }

    /// Persists `config` and, if the desired state changed, feeds `DesiredStateChanged`.
    pub fn set_config(&mut self, config: ClusterConfig, now_ms: i64) -> Result<(), DriverError> {
        let path = self.cluster.dir.config_path();
        let desired = config.desired_state(&path)?;
        self.cluster.dir.set_config(config)?;
        self.desired_changed(desired, now_ms)
    }

    /// Re-reads `cluster.properties` and tells the kernel when `mirror.name` changed.
    pub fn reload_config(&mut self, now_ms: i64) -> Result<(), DriverError> {
        if self.cluster.dir.reload_config()? {
            let desired = self.cluster.dir.desired_state()?;
            self.desired_changed(desired, now_ms)?;
        }
        Ok(())
    }

    fn desired_changed(&mut self, desired: DesiredState, now_ms: i64) -> Result<(), DriverError> {
        if &desired == self.kernel.desired() {
            return Ok(());
        }
        self.set_now(now_ms);
        self.feed(Input::DesiredStateChanged(desired), &[])
    }

    /// Lets go of the source (so others can write to it); a held fetch is served again.
    pub fn release_source(&mut self) {
        if let Some(source) = self.source.as_mut() {
            source.release();
        }
        if let Some(f) = self.pending_fetch.as_mut() {
            f.held = false;
        }
        // Others may write to the source now: nothing read from it before is kept.
        self.fetched_ahead = None;
        for c in &mut self.completions {
            c.next = None;
        }
    }

    /// Replaces the source.
    pub fn set_source(&mut self, source: Option<Box<dyn Source>>) {
        self.release_source();
        self.source = source;
    }

    fn set_now(&mut self, now_ms: i64) {
        self.now_ms = now_ms;
        self.cluster.leader.set_append_timestamp(now_ms);
    }

    /// Does one unit of work: feeds the next completion, or runs a replication round, or serves
    /// the pending LME query or fetch, or fires a due retry timer. Returns why it is idle when
    /// there is nothing to do at `now_ms`.
    pub fn run_once(&mut self, now_ms: i64) -> Result<Option<Idle>, DriverError> {
        if !self.started {
            self.start(now_ms)?;
            return Ok(None);
        }
        self.set_now(now_ms);
        if let Some(c) = self.completions.pop_front() {
            self.feed_completion(c)?;
            return Ok(None);
        }
        if self.replicate()? {
            return Ok(None);
        }
        let mut idle = None;
        if let Some((request, key)) = self.pending_lme.clone() {
            if *self.kernel.activity() != Activity::AwaitingLme(request) {
                self.pending_lme = None;
            } else {
                match self.source.as_mut() {
                    None => idle = Some(Idle::NeedsSource),
                    Some(source) => match source.last_mirrored_epoch(key.topic_id, key.partition) {
                        Ok(answer) => {
                            self.pending_lme = None;
                            self.complete(Input::LastMirroredEpochReceived {
                                request,
                                lme: answer.lme,
                                source_log_start_offset: answer.log_start_offset,
                            });
                            return Ok(None);
                        }
                        Err(SourceError::Busy { .. }) => idle = Some(Idle::SourceBusy),
                        Err(e) => {
                            self.pending_lme = None;
                            self.fail_request(request, e);
                            return Ok(None);
                        }
                    },
                }
            }
        }
        if let Some(f) = self.pending_fetch {
            if *self.kernel.activity() != Activity::Fetching(f.request) {
                self.pending_fetch = None;
            } else if f.held {
                idle = idle.or(Some(Idle::CaughtUp));
            } else {
                let params = self.fetch_params(&f);
                let ahead = self.fetched_ahead.take().and_then(|a| a.answer(f.request));
                self.stats.fetched_ahead += u64::from(ahead.is_some());
                match self.source.as_mut() {
                    None => idle = idle.or(Some(Idle::NeedsSource)),
                    Some(source) => match ahead.map_or_else(|| params.send(source.as_mut()), Ok) {
                        Ok(FetchResponse::Records(r)) if r.batches.is_empty() => {
                            // Nothing new: hold the fetch until the source changes (Kafka's
                            // fetch purgatory), rather than answer it and be asked again.
                            if let Some(p) = self.pending_fetch.as_mut() {
                                p.held = true;
                            }
                            idle = idle.or(Some(Idle::CaughtUp));
                        }
                        Ok(response) => {
                            self.pending_fetch = None;
                            let (outcome, batches) = response.into_parts();
                            let next = params.after(&outcome).filter(|_| self.options.fetch_ahead);
                            self.completions.push_back(Completion {
                                input: Input::FetchCompleted {
                                    request: f.request,
                                    outcome,
                                },
                                batches,
                                next,
                            });
                            return Ok(None);
                        }
                        Err(SourceError::Busy { .. }) => idle = idle.or(Some(Idle::SourceBusy)),
                        Err(e) => {
                            self.pending_fetch = None;
                            self.fail_request(f.request, e);
                            return Ok(None);
                        }
                    },
                }
            }
        }
        if let Some(t) = self.timer {
            if now_ms >= t.due_ms {
                self.timer = None;
                self.feed(Input::RetryDue { attempt: t.attempt }, &[])?;
                return Ok(None);
            }
            idle = idle.or(Some(Idle::WaitingForRetry { due_ms: t.due_ms }));
        }
        Ok(Some(idle.unwrap_or(
            if matches!(
                self.kernel.activity(),
                Activity::AwaitingReplicas { .. } | Activity::AwaitingPidResetCommit
            ) {
                Idle::WaitingForReplicas
            } else {
                Idle::Settled
            },
        )))
    }

    /// Steps until `until` is met, sleeping on `clock` for timers and polls. `on_step` is
    /// called after every step (to print progress; it should rate-limit itself).
    pub fn run(
        &mut self,
        clock: &mut dyn Clock,
        until: Until,
        on_step: &mut dyn FnMut(&Driver, i64),
    ) -> Result<RunEnd, DriverError> {
        let first_fetch = self.stats.fetches;
        loop {
            let now = clock.now_ms();
            let idle = self.run_once(now)?;
            on_step(self, now);
            if let Until::Fetches(n) = until {
                if self.stats.fetches - first_fetch >= n && self.completions.is_empty() {
                    return Ok(RunEnd::FetchesDone);
                }
            }
            let Some(idle) = idle else { continue };
            match (idle, until) {
                (Idle::WaitingForRetry { due_ms }, _) => clock.sleep_until(due_ms),
                (Idle::SourceBusy, _) => {
                    self.release_source();
                    clock.sleep_until(now + BUSY_POLL_MS);
                }
                (Idle::NeedsSource, _) => return Ok(RunEnd::NeedsSource),
                (_, Until::Forever { poll_ms }) => {
                    self.release_source();
                    clock.sleep_until(now + poll_ms.max(1));
                    let now = clock.now_ms();
                    self.reload_config(now)?;
                }
                (Idle::CaughtUp, _) => return Ok(RunEnd::CaughtUp),
                (Idle::Settled | Idle::WaitingForReplicas, _) => return Ok(RunEnd::Settled),
            }
        }
    }

    /// Flushes and closes every log (the source too).
    pub fn close(mut self) -> Result<(), DriverError> {
        self.release_source();
        self.cluster.close()
    }

    fn complete(&mut self, input: Input) {
        self.completions.push_back(Completion {
            input,
            batches: Vec::new(),
            next: None,
        });
    }

    /// What fetch `f` asks the source.
    fn fetch_params(&self, f: &PendingFetch) -> FetchParams {
        FetchParams {
            topic_id: self.cluster.dir.config().topic_id,
            fetch_offset: f.fetch_offset,
            last_fetched_epoch: f.last_fetched_epoch,
            isolation: f.isolation,
            max_batches: self.options.max_fetch_batches,
        }
    }

    /// Feeds a completion; one that names a next fetch has it sent to the source on a second
    /// thread meanwhile, kept when the kernel asks exactly that fetch next ([`fetch_ahead`]).
    fn feed_completion(&mut self, c: Completion) -> Result<(), DriverError> {
        let Completion {
            input,
            batches,
            next,
        } = c;
        let Some(next) = next else {
            return self.feed(input, &batches);
        };
        let Some(mut source) = self.source.take() else {
            return self.feed(input, &batches);
        };
        let (fed, answer) = std::thread::scope(|scope| {
            let ahead = scope.spawn(|| next.send(source.as_mut()));
            let fed = self.feed(input, &batches);
            (fed, ahead.join())
        });
        self.source = Some(source);
        if let (Ok(()), Some(f), Ok(answer)) = (&fed, self.pending_fetch, answer) {
            let asked = self.fetch_params(&f);
            self.fetched_ahead = FetchedAhead::keep(f.request, asked, next, answer);
        }
        fed
    }

    fn fail_request(&mut self, request: RequestId, error: SourceError) {
        let error = error.to_string();
        self.events.push(Event::RequestFailed {
            error: error.clone(),
        });
        self.complete(Input::RequestFailed { request, error });
    }

    /// Feeds one input to the kernel and executes the effects, in order.
    fn feed(&mut self, input: Input, fetched: &[RawBatch]) -> Result<(), DriverError> {
        if matches!(input, Input::FetchCompleted { .. }) {
            self.stats.fetches += 1;
        }
        match self
            .kernel
            .handle(&self.options.mirror, input, &self.cluster.leader)
        {
            Ok(effects) => {
                for effect in effects {
                    self.execute(effect, fetched)?;
                }
            }
            Err(_ignored) => self.stats.ignored += 1,
        }
        Ok(())
    }

    /// Executes one effect: the single `match` over every [`Effect`] variant.
    fn execute(&mut self, effect: Effect, fetched: &[RawBatch]) -> Result<(), DriverError> {
        let now = self.now_ms;
        match effect {
            Effect::ReadState { request, key } => {
                let value = self
                    .cluster
                    .state_log
                    .coordinator()
                    .read_state(&key)
                    .cloned();
                self.complete(Input::StateRead { request, value });
            }
            Effect::WriteState {
                request,
                key,
                value,
                expected_state_epoch,
            } => {
                // Appended and fsynced before the completion is queued: persist first (the
                // mirrored data it follows first of all, see `flush_before_state_write`).
                self.flush_before_state_write()?;
                match self
                    .cluster
                    .state_log
                    .write_state(&key, value, expected_state_epoch, now)?
                {
                    Ok(stored) => {
                        self.events.push(Event::StateWritten {
                            state: stored.state.to_string(),
                            leader_epoch: stored.leader_epoch,
                            state_epoch: stored.state_epoch,
                            error: stored.error_message.clone(),
                        });
                        self.complete(Input::StateWritten {
                            request,
                            value: stored,
                        });
                    }
                    Err(refused) => {
                        self.events.push(Event::WriteFenced {
                            reason: refused.to_string(),
                        });
                        self.complete(Input::WriteFenced {
                            request,
                            reason: refused.reason(),
                        });
                    }
                }
            }
            Effect::QueryLastMirroredEpoch { request, key } => {
                self.pending_lme = Some((request, key));
            }
            Effect::Log(log_effect) => self.apply_leader_effect(&log_effect, fetched)?,
            Effect::StartFetcher => {
                self.fetcher_running = true;
                self.events.push(Event::FetcherStarted);
            }
            Effect::Fetch {
                request,
                fetch_offset,
                last_fetched_epoch,
                isolation,
            } => {
                self.pending_fetch = Some(PendingFetch {
                    request,
                    fetch_offset,
                    last_fetched_epoch,
                    isolation,
                    held: false,
                });
            }
            Effect::StopFetcher => {
                self.fetcher_running = false;
                self.pending_fetch = None;
                self.events.push(Event::FetcherStopped);
            }
            Effect::BumpLeaderEpoch { request, at_least } => {
                let leader_epoch = self.cluster.dir.bump_leader_epoch(at_least)?;
                self.events.push(Event::EpochBumped { leader_epoch });
                self.complete(Input::LeaderEpochBumped {
                    request,
                    leader_epoch,
                });
            }
            Effect::WriteLastMirroredEpoch {
                request,
                key,
                value,
                expected_state_epoch,
            } => {
                self.flush_before_state_write()?;
                match self.cluster.state_log.write_last_mirrored_epoch(
                    &key,
                    value,
                    expected_state_epoch,
                    now,
                )? {
                    Ok(()) => {
                        self.events.push(Event::LastMirroredEpochWritten {
                            epoch: value.last_mirrored_epoch,
                            offset: value.last_mirrored_offset,
                        });
                        self.complete(Input::LastMirroredEpochWritten { request });
                    }
                    Err(refused) => {
                        self.events.push(Event::WriteFenced {
                            reason: refused.to_string(),
                        });
                        self.complete(Input::WriteFenced {
                            request,
                            reason: refused.reason(),
                        });
                    }
                }
            }
            Effect::SetWritable(writable) => {
                self.cluster.dir.set_writable(writable)?;
                self.events.push(Event::WritableChanged { writable });
            }
            Effect::ScheduleRetry { attempt, delay_ms } => {
                self.timer = Some(Timer {
                    attempt,
                    due_ms: now.saturating_add(delay_ms),
                });
                self.events
                    .push(Event::RetryScheduled { attempt, delay_ms });
            }
        }
        self.effects += 1;
        if self.options.halt_after_effects == Some(self.effects) {
            return Err(DriverError::Halted {
                effects: self.effects,
            });
        }
        Ok(())
    }

    /// Flushes the leader's log (fsync, recovery point, high watermark) before a
    /// `__mirror_state` write: with [`FlushPolicy::Kafka`](crate::file_log::FlushPolicy::Kafka)
    /// mirrored batches wait in the page cache, and a state record (the LME's offset, STOPPED
    /// after the `MIRROR_PID_RESET`) must never name data a machine crash can take back. State
    /// writes are rare (a few per state change), so this costs nothing in steady mirroring.
    fn flush_before_state_write(&mut self) -> Result<(), DriverError> {
        let leader = &mut self.cluster.leader;
        leader.flush().map_err(|source| DriverError::Log {
            dir: leader.dir().to_path_buf(),
            source: Box::new(source),
        })
    }

    fn apply_leader_effect(
        &mut self,
        effect: &LogEffect,
        fetched: &[RawBatch],
    ) -> Result<(), DriverError> {
        let leader = &mut self.cluster.leader;
        let leo = leader.log_end_offset();
        let start = leader.log_start_offset();
        apply_log_effect(leader, effect, fetched).map_err(|source| DriverError::LogEffect {
            dir: leader.dir().to_path_buf(),
            effect: format!("{effect:?}"),
            source: Box::new(source),
        })?;
        let new_leo = leader.log_end_offset();
        match *effect {
            LogEffect::TruncateTo { cause, .. } => {
                if leader.log_start_offset() != start {
                    self.events.push(Event::LeaderTruncatedFully {
                        from: leo,
                        start: leader.log_start_offset(),
                        cause: cause.to_string(),
                    });
                } else if new_leo < leo {
                    self.events.push(Event::LeaderTruncated {
                        from: leo,
                        to: new_leo,
                        cause: cause.to_string(),
                    });
                }
                self.cluster.leader_truncated();
            }
            LogEffect::TruncateFullyAndStartAt { offset, cause } => {
                self.events.push(Event::LeaderTruncatedFully {
                    from: leo,
                    start: offset,
                    cause: cause.to_string(),
                });
                self.cluster.leader_truncated();
            }
            LogEffect::AppendFetched => {
                self.stats.batches += fetched.len() as u64;
                self.stats.bytes += fetched
                    .iter()
                    .map(|b| b.size_in_bytes() as u64)
                    .sum::<u64>();
            }
            LogEffect::AbortTransaction { producer_id, .. } => {
                self.events.push(Event::AbortMarkerAppended {
                    offset: leo,
                    producer_id,
                });
            }
            LogEffect::AppendPidReset { leader_epoch } => {
                self.events.push(Event::PidResetAppended {
                    offset: leo,
                    leader_epoch,
                });
            }
        }
        Ok(())
    }

    /// Feeds an input the kernel may not be waiting for (a replica report, an HW advance);
    /// returns whether it changed anything.
    fn tell(&mut self, input: Input) -> Result<bool, DriverError> {
        let before = self.kernel.activity().clone();
        match self
            .kernel
            .handle(&self.options.mirror, input, &self.cluster.leader)
        {
            Ok(effects) => {
                let changed = !effects.is_empty() || *self.kernel.activity() != before;
                for effect in effects {
                    self.execute(effect, &[])?;
                }
                Ok(changed)
            }
            Err(_not_waiting) => Ok(false),
        }
    }

    /// One replication round when the followers are behind or the kernel waits for them;
    /// feeds their `ReplicaFetched` reports. Returns whether anything changed.
    fn replicate(&mut self) -> Result<bool, DriverError> {
        let awaited = matches!(
            self.kernel.activity(),
            Activity::AwaitingReplicas { .. } | Activity::AwaitingPidResetCommit
        );
        if self.cluster.in_sync() && !awaited {
            return Ok(false);
        }
        let hw = self.cluster.leader.high_watermark();
        let report = self
            .cluster
            .replicate_round(self.options.max_follower_batches)?;
        for &(replica, from, to) in &report.truncations {
            self.events
                .push(Event::FollowerTruncated { replica, from, to });
        }
        let mut progressed = report.changed;
        for (replica, log_end_offset) in report.fetched {
            progressed |= self.tell(Input::ReplicaFetched {
                replica,
                log_end_offset,
            })?;
        }
        if self.cluster.leader.high_watermark() > hw {
            // The kernel waits for the stop's MIRROR_PID_RESET to be committed.
            progressed |= self.tell(Input::HighWatermarkAdvanced)?;
        }
        if awaited && self.cluster.followers.is_empty() {
            progressed = false;
        }
        Ok(progressed)
    }
}
