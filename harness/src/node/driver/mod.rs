//! [`NodeDriver`]: the kernel's node manager ([`NodeMirror`]) run over a node destination
//! ([`NodeDest`]) and a live source cluster ([`SourceCluster`]).
//!
//! **The kernel decides, the driver does.** Every input goes to [`NodeMirror::handle`]; every
//! tagged effect it returns is executed in one `match`, and each completion is queued as the
//! next input. [`NodeDriver::run_once`] does one unit of work, in this order of priority: the
//! control channel's requests, the next queued input, the round's group commit, the produce
//! gates and the periodic tick, the source's metadata, a due retry timer, the pending LME
//! queries, and last one fetch round. [`NodeDriver::run`] steps until a [`NodeUntil`] is met.
//!
//! **No clock**: every call takes `now_ms` from the caller; [`NodeDriver::run`] takes a
//! [`Clock`].
//!
//! The driver's jobs, one file each:
//! - this file: the driver, its options and counters, what it shows (the accessors,
//!   [`NodeDriver::status`], [`NodeDriver::writable`]), and the loop
//!   ([`NodeDriver::run_once`], [`NodeDriver::run`], [`NodeDriver::all_caught_up`]);
//! - `execute.rs`: the effect executor, the one `match` over every effect (the table of what
//!   each effect is executed as), and the round's group commit;
//! - `followers.rs`: the in-process follower replicas, replicated after every change of the
//!   leader's log;
//! - `fetch_round.rs`: one fetch round, each fetcher's answer fed as soon as it is complete,
//!   and the next round read ahead;
//! - `source.rs`: the source cluster apart from the fetches: its leaders, the LME queries,
//!   following its metadata, the offsets of the partitions not fetching;
//! - `requests.rs`: mirror requests (from the API and from the control channel) and a topic's
//!   growth to the source's partition count;
//! - `clients.rs`: Kafka clients ([`crate::serve`]), answered between the kernel's steps;
//! - `topic_admin.rs`: the topic changes clients ask (a growth, a deletion), durable before
//!   they are answered, and what open removes of a deletion a crash interrupted;
//! - `lifecycle.rs`: opening, starting, the periodic tick, writing the produce gates, and
//!   closing, with the flush rules (what is on disk when).

mod clients;
mod execute;
mod fetch_pipeline;
mod fetch_round;
mod followers;
mod lifecycle;
mod requests;
mod source;
mod topic_admin;

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use kmirror_kernel::config::MirrorConfig;
use kmirror_kernel::coordinator::Coordinator;
use kmirror_kernel::desired::DesiredState;
use kmirror_kernel::effect::RequestId;
use kmirror_kernel::input::Input;
use kmirror_kernel::node::{NodeInput, NodeMirror, PartitionKey};
use kmirror_kernel::partition::Activity;
use kmirror_kernel::partitioner::mirror_state_partition;
use kmirror_kernel::records::MirrorPartitionStateValue;
use kmirror_kernel::state::MirrorState;
use kmirror_kernel::types::{MirrorPartition, PartitionIndex, TopicId};

use crate::clock::Clock;
use crate::durability::FsBarrier;
use crate::file_log::{FileLog, FlushPolicy};
use crate::log_dir_checkpoints::LogDirCheckpoints;
use crate::record_batch::RawBatch;
use crate::replicas::Follower;
use crate::wire::source_cluster::SourceCluster;

use super::commit::Staged;
use super::control::ControlServer;
use super::dest::NodeDest;
use super::fetch_ahead::FetchedAhead;
use super::follow::CHECKPOINT_INTERVAL_MS;
use super::status::{persisted_record_in, NodeStatus, PartitionStatus, SourceLink};
use super::NodeError;
use crate::mirror_state_log::MirrorStateLog;

use fetch_round::SourceView;
use source::Following;

pub use lifecycle::CLOSE_THREADS;
pub use requests::{TopicChange, TopicResults};

/// Most batches one partition's share of a fetch returns, by default.
pub const DEFAULT_MAX_FETCH_BATCHES: usize = 100;

/// How the node driver runs the kernel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeDriverOptions {
    /// The kernel's configuration.
    pub mirror: MirrorConfig,
    /// Most batches one partition's share of a fetch returns.
    pub max_fetch_batches: usize,
    /// How long a partition waits after a retryable fetch error (ms).
    pub fetch_backoff_ms: i64,
    /// When the partition logs fsync.
    pub flush: FlushPolicy,
    /// Fault injection: fail with [`NodeError::Halted`] right after this many effects were
    /// executed (counted from the driver's creation), leaving the files as a crash at that
    /// point would. Crash tests drop the driver (or kill the process) there.
    pub halt_after_effects: Option<u64>,
    /// Whether each broker's answer is written while the other brokers' are still read, and
    /// the next round's fetches are read while this round's answers are written
    /// ([`fetch_ahead`](super::fetch_ahead); on by default). Off, fetching and writing take
    /// turns.
    pub fetch_ahead: bool,
}

impl Default for NodeDriverOptions {
    fn default() -> Self {
        NodeDriverOptions {
            mirror: MirrorConfig::default(),
            max_fetch_batches: DEFAULT_MAX_FETCH_BATCHES,
            fetch_backoff_ms: 500,
            flush: FlushPolicy::Kafka,
            halt_after_effects: None,
            fetch_ahead: true,
        }
    }
}

/// How long [`NodeDriver::run`] goes on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeUntil {
    /// Until every partition of a mirrored topic is MIRRORING with nothing left to fetch (or
    /// FAILED for good), and nothing else is pending.
    CaughtUp,
    /// Until nothing is pending but fetches (stop, pause, resume: no source needed).
    Settled,
    /// Follow the source, sleeping `poll_ms` when idle.
    Forever {
        /// The idle sleep.
        poll_ms: i64,
    },
}

/// Why [`NodeDriver::run_once`] has nothing to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeIdle {
    /// Every partition of a mirrored topic has fetched everything the source has.
    CaughtUp,
    /// Nothing pending (fetches aside, when there is no source or they back off).
    Settled,
    /// A retry timer is pending.
    WaitingForRetry {
        /// When the first fires.
        due_ms: i64,
    },
    /// [`NodeDriver::run`] stopped because its interrupt flag was raised
    /// ([`NodeDriver::interrupt_on`]).
    Interrupted,
}

/// Work counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NodeStats {
    /// Fetch rounds: the kernel's coalesced fetches asked together, each answered from the
    /// source (one Fetch per source broker) or from the last round's fetch-ahead.
    pub rounds: u64,
    /// Calls to the source cluster's fetch, each at most one Fetch per source broker and fetch
    /// lane (and isolation level): a round's own, and its fetch-ahead.
    pub source_fetches: u64,
    /// Partition answers fed back.
    pub partition_fetches: u64,
    /// Partition answers that came from the last round's fetch-ahead.
    pub fetched_ahead: u64,
    /// Partitions left out of a round's answers because the last round's fetch-ahead read
    /// nothing new for them (asked again in the next round).
    pub left_out_ahead: u64,
    /// Fetchers' answers fed while other brokers' answers of the same round were still being
    /// read.
    pub fed_while_fetching: u64,
    /// Batches appended.
    pub batches: u64,
    /// Bytes appended.
    pub bytes: u64,
    /// Offsets appended from the source (records and control records).
    pub offsets: u64,
    /// Inputs the kernel refused (stale answers and the like; expected, counted).
    pub refused: u64,
}

/// One input waiting for the node manager, with the fetched batches its effects append.
struct Queued {
    input: NodeInput,
    batches: BTreeMap<PartitionKey, Vec<RawBatch>>,
}

impl Queued {
    /// An input that carries no batches.
    fn plain(input: NodeInput) -> Self {
        Queued {
            input,
            batches: BTreeMap::new(),
        }
    }
}

/// A node's partitions and the world they act on. See the [module documentation](self).
pub struct NodeDriver {
    dest: NodeDest,
    options: NodeDriverOptions,
    node: NodeMirror,
    logs: BTreeMap<PartitionKey, FileLog>,
    /// Every partition's in-process followers.
    followers: followers::NodeFollowers,
    states: BTreeMap<u32, MirrorStateLog>,
    /// The log dir's recovery points, high watermarks and log start offsets.
    checkpoints: Arc<LogDirCheckpoints>,
    source: Option<SourceCluster>,
    queue: VecDeque<Queued>,
    pending_lme: BTreeMap<PartitionKey, RequestId>,
    /// Whether the run already said that the source does not serve the LME lookup.
    said_no_lme_lookup: bool,
    timers: BTreeMap<PartitionKey, (u32, i64)>,
    /// What the driver last heard from the source of each partition.
    heard: SourceView,
    /// The answers read ahead for the next round.
    fetched_ahead: FetchedAhead,
    /// The fetchers' requests on the wire, when fetching is pipelined.
    pipelined: fetch_pipeline::Pipelined,
    leaders_fed: BTreeMap<TopicId, Vec<Option<i32>>>,
    events: Vec<String>,
    stats: NodeStats,
    now_ms: i64,
    started: bool,
    /// Effects executed so far (for [`NodeDriverOptions::halt_after_effects`]).
    effects: u64,
    /// The `__mirror_state` partition the last executed effect appended to, if it did.
    last_state_write: Option<u32>,
    /// The control channel, when this driver serves one ([`NodeDriver::serve_control`]).
    control: Option<ControlServer>,
    /// What the running mirror follows at the source, when it follows ([`NodeDriver::follow`]).
    following: Option<Following>,
    /// When the next periodic checkpoint and source-offset refresh is due (ms).
    next_tick_ms: i64,
    /// Raised to make [`NodeDriver::run`] return at its next step (SIGINT, SIGTERM).
    interrupt: Option<Arc<AtomicBool>>,
    /// The round's state changes waiting for their group commit ([`super::commit`]).
    staged: Staged,
    /// The log dir's file-system barrier (`syncfs`), where it reports errors.
    barrier: Option<FsBarrier>,
    /// The produce gate of each partition as the kernel last set it (`SetWritable`): closed
    /// until the kernel opens it in this process, whatever `node.properties` says. Written to
    /// `node.properties` once the inputs queued so far are handled
    /// ([`NodeDriver::persist_gates`]).
    gates: BTreeMap<PartitionKey, bool>,
    /// The Kafka clients served, when the driver serves them ([`NodeDriver::serve_clients`]).
    clients: Option<clients::Clients>,
}

impl std::fmt::Debug for NodeDriver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeDriver")
            .field("dest", &self.dest.root())
            .field("partitions", &self.logs.len())
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

impl NodeDriver {
    /// The destination.
    pub fn dest(&self) -> &NodeDest {
        &self.dest
    }

    /// How this driver runs the kernel.
    pub fn options(&self) -> &NodeDriverOptions {
        &self.options
    }

    /// The node manager (read only).
    pub fn node(&self) -> &NodeMirror {
        &self.node
    }

    /// The log of `key`.
    pub fn log(&self, key: &PartitionKey) -> Option<&FileLog> {
        self.logs.get(key)
    }

    /// The in-process follower replicas of `key` (none with one replica per partition).
    pub fn followers(&self, key: &PartitionKey) -> &[Follower] {
        self.followers.of(key)
    }

    /// The source cluster, if any.
    pub fn source(&self) -> Option<&SourceCluster> {
        self.source.as_ref()
    }

    /// Replaces the source cluster (`None`: no fetches and no LME answers; stop, pause and
    /// resume need none). Returns the previous one.
    pub fn set_source(&mut self, source: Option<SourceCluster>) -> Option<SourceCluster> {
        self.fetched_ahead.clear();
        self.abandon_pipelined();
        std::mem::replace(&mut self.source, source)
    }

    /// Records `bootstrap` as the node's source in `node.properties` (if it differs).
    pub fn set_source_bootstrap(&mut self, bootstrap: &str) -> Result<(), NodeError> {
        if self.dest.meta().source_bootstrap.as_deref() == Some(bootstrap) {
            return Ok(());
        }
        let mut meta = self.dest.meta().clone();
        meta.source_bootstrap = Some(bootstrap.to_owned());
        self.dest.set_meta(meta)
    }

    /// Work counters.
    pub fn stats(&self) -> NodeStats {
        self.stats
    }

    /// The notable events since the last call, one line each.
    pub fn take_events(&mut self) -> Vec<String> {
        std::mem::take(&mut self.events)
    }

    /// The key of partition `partition` of topic `name`.
    pub fn key_of(&self, name: &str, partition: PartitionIndex) -> Option<PartitionKey> {
        let t = self.dest.meta().topics.get(name)?;
        Some(PartitionKey::new(t.topic_id, partition))
    }

    /// Effects executed since the driver was created.
    pub fn effects(&self) -> u64 {
        self.effects
    }

    /// The `__mirror_state` partition the last executed effect appended a record to (`None`
    /// when it wrote none): where a crash inside that effect would have torn a write.
    pub fn last_state_write(&self) -> Option<u32> {
        self.last_state_write
    }

    /// Each `__mirror_state` partition with its coordinator: the records acknowledged so far
    /// (a record reaches the coordinator only once it is appended and fsynced).
    pub fn mirror_state(&self) -> impl Iterator<Item = (u32, &Coordinator)> {
        self.states.iter().map(|(k, s)| (*k, s.coordinator()))
    }

    /// The persisted mirror state of `key` (from its `__mirror_state` partition).
    pub fn persisted_state(&self, key: &PartitionKey) -> MirrorState {
        self.persisted_record_of(key)
            .map_or(MirrorState::Unknown, |v| v.state)
    }

    /// The persisted `__mirror_state` record of `key` under its topic's mirror.
    fn persisted_record_of(&self, key: &PartitionKey) -> Option<&MirrorPartitionStateValue> {
        persisted_record_in(
            self.dest.meta(),
            &|k| self.states.get(&k).map(MirrorStateLog::coordinator),
            key,
        )
    }

    /// The persisted `__mirror_state` record of `key` (a partition under a named mirror), read
    /// from the coordinator of its `__mirror_state` partition: the metadata sync's gate input.
    pub fn persisted_record(&self, key: &MirrorPartition) -> Option<&MirrorPartitionStateValue> {
        let n = self.dest.meta().mirror_state_partitions;
        let k = mirror_state_partition(key, n).ok()?;
        self.states.get(&k)?.coordinator().read_state(key)
    }

    /// Whether local producers may write to `key`: a topic in no mirror always; a mirrored
    /// one once the kernel opened its gate in this process, or, before the node is started,
    /// when `node.properties` says so of a partition whose persisted state is STOPPED (the only
    /// state the kernel opens it in).
    pub fn writable(&self, key: &PartitionKey) -> bool {
        gate_open(
            self.dest.meta(),
            self.started,
            &self.gates,
            &self.states,
            key,
        )
    }

    /// Every partition's status (and the per-topic rollup).
    pub fn status(&self) -> NodeStatus {
        let partitions = self
            .dest
            .meta()
            .partitions
            .keys()
            .filter_map(|(name, p)| {
                let key = self.key_of(name, *p)?;
                let log = self.logs.get(&key)?;
                // The source's position only means a lag while the topic is mirrored.
                let mirrored = matches!(
                    self.node.desired(&key.topic_id),
                    Some(DesiredState::Mirror(_) | DesiredState::Pause(_))
                );
                let record = self.persisted_record_of(&key);
                let mut s = PartitionStatus::of(
                    self.dest.meta(),
                    record.map_or(MirrorState::Unknown, |v| v.state),
                    name,
                    key,
                    log,
                    log.segments().iter().map(|s| s.size()).sum(),
                    self.heard
                        .positions
                        .get(&key)
                        .filter(|_| mirrored)
                        .map(|p| p.last_stable_offset),
                );
                // A FAILED partition shows why its record says it failed; others their last
                // fetch or LME error.
                s.error = record
                    .filter(|v| v.state == MirrorState::Failed)
                    .and_then(|v| v.error_message.clone())
                    .or_else(|| self.heard.last_errors.get(&key).cloned());
                s.writable = self.writable(&key);
                Some(s)
            })
            .collect();
        let source_partitions: BTreeMap<String, PartitionIndex> = self
            .leaders_fed
            .iter()
            .filter_map(|(id, leaders)| {
                let name = self.dest.meta().topic_name(*id)?.to_owned();
                Some((name, PartitionIndex::try_from(leaders.len()).ok()?))
            })
            .collect();
        let mut status = NodeStatus::new(self.dest.root(), self.dest.meta(), partitions)
            .with_source_partitions(&source_partitions);
        status.source_link = self.source.as_ref().and_then(|source| {
            Some(SourceLink {
                round_trip_us: u64::try_from(source.measured_round_trip()?.as_micros())
                    .unwrap_or(u64::MAX),
                fetches_in_flight: source.most_fetches_in_flight(),
            })
        });
        status
    }

    /// Makes [`NodeDriver::run`] return [`NodeIdle::Interrupted`] at its next step once `flag`
    /// is raised (a signal handler's flag): the caller then closes the driver as after any
    /// other end.
    pub fn interrupt_on(&mut self, flag: Arc<AtomicBool>) {
        self.interrupt = Some(flag);
    }

    /// Does one unit of work: the control channel's new requests, or the next queued input,
    /// or the round's group commit, or a due retry timer, or the pending LME queries, or one
    /// fetch round (the produce gates, the periodic tick and the source's metadata are looked
    /// at on the way). Returns why it is idle when there is nothing to do.
    pub fn run_once(&mut self, now_ms: i64) -> Result<Option<NodeIdle>, NodeError> {
        if !self.started {
            self.start(now_ms)?;
            return Ok(None);
        }
        self.now_ms = now_ms;
        if self.poll_control(now_ms)? {
            return Ok(None);
        }
        if self.poll_clients(now_ms)? {
            return Ok(None);
        }
        if let Some(q) = self.queue.pop_front() {
            self.feed(q)?;
            return Ok(None);
        }
        if !self.staged.is_empty() {
            self.commit()?;
            return Ok(None);
        }
        self.persist_gates()?;
        if now_ms >= self.next_tick_ms {
            self.next_tick_ms = now_ms.saturating_add(CHECKPOINT_INTERVAL_MS);
            self.tick()?;
        }
        if self.follow_source(now_ms)? {
            return Ok(None);
        }
        if let Some((&key, &(attempt, _))) = self.timers.iter().find(|(_, (_, d))| *d <= now_ms) {
            self.timers.remove(&key);
            self.feed(Queued::plain(NodeInput::Partition {
                key,
                input: Input::RetryDue { attempt },
            }))?;
            return Ok(None);
        }
        if !self.pending_lme.is_empty() && self.source.is_some() {
            self.answer_lme_queries();
            return Ok(None);
        }
        if self.fetch_round()? {
            return Ok(None);
        }
        if let Some(due_ms) = self.timers.values().map(|(_, d)| *d).min() {
            return Ok(Some(NodeIdle::WaitingForRetry { due_ms }));
        }
        Ok(Some(if self.all_caught_up() {
            NodeIdle::CaughtUp
        } else {
            NodeIdle::Settled
        }))
    }

    /// Steps until `until` is met, sleeping on `clock` for timers and polls; `on_step` is called
    /// after every step (to print progress; it should rate-limit itself).
    pub fn run(
        &mut self,
        clock: &mut dyn Clock,
        until: NodeUntil,
        on_step: &mut dyn FnMut(&mut NodeDriver, i64),
    ) -> Result<NodeIdle, NodeError> {
        loop {
            if self
                .interrupt
                .as_ref()
                .is_some_and(|f| f.load(Ordering::Relaxed))
            {
                return Ok(NodeIdle::Interrupted);
            }
            let now = clock.now_ms();
            let idle = self.run_once(now)?;
            on_step(self, now);
            if until == NodeUntil::CaughtUp && self.all_caught_up() {
                return Ok(NodeIdle::CaughtUp);
            }
            let Some(idle) = idle else { continue };
            match (idle, until) {
                (NodeIdle::WaitingForRetry { due_ms }, NodeUntil::Forever { poll_ms }) => {
                    self.idle_until(clock, now, due_ms.min(now + poll_ms.max(1)))
                }
                (NodeIdle::WaitingForRetry { due_ms }, _) => self.idle_until(clock, now, due_ms),
                (_, NodeUntil::Forever { poll_ms }) => {
                    self.idle_until(clock, now, now + poll_ms.max(1))
                }
                (NodeIdle::CaughtUp, _) => return Ok(NodeIdle::CaughtUp),
                (NodeIdle::Interrupted, _) => return Ok(NodeIdle::Interrupted),
                (NodeIdle::Settled, NodeUntil::Settled) => return Ok(NodeIdle::Settled),
                (NodeIdle::Settled, NodeUntil::CaughtUp) => {
                    if self.source.is_none() {
                        return Ok(NodeIdle::Settled);
                    }
                    // Fetches backing off after a retryable error: wait for them.
                    let due = self.node.next_fetch_due().unwrap_or(now + 50);
                    clock.sleep_until(due.max(now + 1));
                }
            }
        }
    }

    /// Waits until `until_ms`: on the clients' calls when it serves clients (a call ends the
    /// wait), otherwise on `clock`.
    fn idle_until(&mut self, clock: &mut dyn Clock, now_ms: i64, until_ms: i64) {
        if !self.wait_for_clients(now_ms, until_ms) {
            clock.sleep_until(until_ms);
        }
    }

    /// Whether every partition of a topic in a mirror (`mirror.name=<m>`) is MIRRORING and has
    /// fetched everything the source has, or is FAILED with no retry left; and nothing else
    /// is pending.
    pub fn all_caught_up(&self) -> bool {
        if !self.started
            || !self.queue.is_empty()
            || !self.staged.is_empty()
            || !self.pending_lme.is_empty()
        {
            return false;
        }
        if self
            .control
            .as_ref()
            .is_some_and(ControlServer::has_pending)
        {
            // A control request waits for its partitions: keep running until it is answered.
            return false;
        }
        self.node.partitions().all(|(key, pm)| {
            let mirrored = matches!(
                self.node.desired(&key.topic_id),
                Some(DesiredState::Mirror(_))
            );
            let failed_for_good =
                pm.state() == MirrorState::Failed && !self.timers.contains_key(key);
            if !mirrored {
                return !self.timers.contains_key(key);
            }
            failed_for_good
                || (matches!(pm.activity(), Activity::Fetching(_))
                    && self.heard.caught_up.contains(key))
        })
    }
}

/// Whether local clients may write to `key`: a topic in no mirror always; a mirrored one once
/// the kernel opened its gate in this process (`started`), or, before the node is started,
/// when `node.properties` says so of a partition whose persisted state is STOPPED (the only
/// state the kernel opens it in).
fn gate_open(
    meta: &super::dest::NodeMeta,
    started: bool,
    gates: &BTreeMap<PartitionKey, bool>,
    states: &BTreeMap<u32, MirrorStateLog>,
    key: &PartitionKey,
) -> bool {
    let Some(name) = meta.topic_name(key.topic_id) else {
        return false;
    };
    if matches!(
        meta.topics[name].desired(name),
        Ok(DesiredState::NotMirrored)
    ) {
        return true;
    }
    if started {
        return gates.get(key).copied().unwrap_or(false);
    }
    let persisted = persisted_record_in(
        meta,
        &|k| states.get(&k).map(MirrorStateLog::coordinator),
        key,
    )
    .map_or(MirrorState::Unknown, |v| v.state);
    meta.partitions
        .get(&(name.to_owned(), key.partition))
        .is_some_and(|p| p.writable)
        && persisted == MirrorState::Stopped
}
