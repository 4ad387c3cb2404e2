//! [`NodeDriver`]: the kernel's node manager ([`NodeMirror`]) run over a node destination
//! ([`NodeDest`]) and a live source cluster ([`SourceCluster`]).
//!
//! **The kernel decides, the driver does.** Every input goes to [`NodeMirror::handle`]; every
//! tagged effect it returns is executed here in one `match`, and each completion is queued as
//! the next input:
//!
//! | effect | executed as |
//! |---|---|
//! | `ReadState` | read from the coordinator of `__mirror_state` partition `mirror_state_partition(key)`, answered as `CoordinatorAnswer` |
//! | `WriteState` / `WriteLastMirroredEpoch` | fenced by that coordinator and staged; at the end of the round, group-committed ([`super::commit`]): the partition logs the round's records name made durable, then each `__mirror_state-<k>` appended and fsynced once, then the answers fed (the flush rules below) |
//! | `QueryLastMirroredEpoch` | a stock Kafka source keeps no `__mirror_state`: "no LME" with the source's log start offset (ListOffsets earliest, every pending query of a round in one request per broker), as [`KafkaSource`](crate::wire::KafkaSource) answers |
//! | `Log(_)` | `apply_log_effect` on the partition's [`FileLog`], with its share of the fetched batches byte for byte; then its high watermark moves to its log end offset (one replica) and a partition waiting for its `MIRROR_PID_RESET` to commit hears `HighWatermarkAdvanced` |
//! | `BumpLeaderEpoch` | the partition's leader epoch in `node.properties`: written once per round, in the group commit, before any answer |
//! | `SetWritable` | the partition's produce gate in `node.properties` |
//! | `ScheduleRetry` | a timer per partition, fired once the caller's clock passes it |
//! | `StartFetcher` / `StopFetcher` | nothing: the node manager keeps the fetch slots |
//! | `CreatePartitions` | the topic grows to the source's count: new partition directories, `node.properties`, then the new partitions are led |
//!
//! **Fetches** are the node manager's: [`NodeMirror::poll_fetches`] gives one coalesced fetch
//! per source leader (and fetcher); all of a round go to [`SourceCluster::fetch`] in one call,
//! which sends ONE Fetch per source broker; the answers are split back per fetcher
//! ([`NodeInput::FetchResponse`]): records and diverging epochs as `Completed`, retryable
//! errors (leadership moved, broker unreachable) as `Retriable` (the partition waits the fetch
//! backoff, the metadata is refreshed), others as `Failed` (the partition goes FAILED and
//! retries with its backoff).
//! Each fetcher's answer is fed as soon as all its partitions are answered, in the kernel's
//! fetcher order, while the other brokers' Fetches are still being read
//! ([`SourceCluster::fetch_each`]): the first broker's records are written while the last
//! one's are on the wire, and a fetcher answered wholly from the fetch-ahead is fed while the
//! round's Fetches run. The order of the inputs, hence of the effects, is the order without
//! it: only when they run changes. The answers complete last are fed after the round's
//! Fetches, while, if any answer says the source has more, every partition answered with
//! records is fetched again on a second thread, from where the kernel will ask next; the next
//! round takes such an answer only for a request exactly equal to the one guessed (leaving out
//! a partition it found with nothing new, as an incremental fetch session does) and fetches
//! the rest as usual ([`fetch_ahead`](super::fetch_ahead)): while the source has more, a round
//! asks the source only for partitions the last round did not (newly ready ones).
//! [`NodeDriverOptions::fetch_ahead`] turns both off:
//! fetching and feeding then take turns.
//!
//! **Source leaders** are input ([`NodeInput::SourceTopic`]): fed at start and after every
//! round in which the source cluster's metadata names other leaders.
//!
//! **Mirror requests** ([`NodeDriver::request`], [`NodeDriver::add_topics`]) go through the
//! kernel's controller functions and are answered per topic with Kafka's error codes; an
//! accepted topic's new `mirror.name` is written to `node.properties` first, then the node
//! hears [`NodeInput::Topic`] (fanned out to the topic's partitions).
//!
//! **No clock**: every call takes `now_ms` from the caller; [`NodeDriver::run`] takes a
//! [`Clock`].
//!
//! # What is on disk when: the flush rules
//!
//! A node holds many partitions, so what it fsyncs per partition decides its speed
//! (BENCHMARKS.md, `node_mirroring` and `node_failover`). State changes are group-committed
//! per round ([`super::commit`]): where the log dir's file system has a `syncfs` that reports
//! errors ([`FsBarrier`]), one or two `syncfs` make every log a round's records name durable,
//! whatever their number. The rules, from what a crash can take back and what the source can
//! serve again:
//!
//! | what | on disk (fsynced) | why that is enough |
//! |---|---|---|
//! | a `__mirror_state` record (state, LME) | before the completion is fed to the kernel: staged, then in the round's group commit one batch and one fsync per `__mirror_state` partition, then every answer of the round fed | persist first, act after, per round: the kernel acts on a completion only once nothing can take it back |
//! | a partition's log, up to its end | before the round's `__mirror_state` records that name it are written (group commit: one `syncfs`; the epoch checkpoint of an epoch begun since is deferred, the recovery point held below it; without a barrier, each log by itself: the `.log` fdatasynced, the epoch checkpoint written if it changed, see `crate::file_log`) | a record never acknowledges data a crash can lose: the LME record's offset, and STOPPED after the `MIRROR_PID_RESET`, name durable bytes |
//! | `MIRROR_PID_RESET`, ABORT markers (leader appends) | with a barrier: in the group commit of the round whose records name them (the append leaves the log's recovery point below them until then); without one, before the append returns | this cluster's own decision: no source holds it; STOPPED is staged only after it, and the commit that writes STOPPED makes the partition's log durable first |
//! | a new partition's directory and empty log, `node.properties` naming a new topic | one `syncfs` for all of a request's new partitions, then `node.properties` once | a topic is named only once its logs exist on disk |
//! | truncations (LME, LSO, divergence) | before the truncation returns; a lowered recovery point or high watermark, or a new log start, is written to the log dir's checkpoint files *before* the segment changes | the kernel names the new end in records it writes next; a recovery point left above a cut would make recovery trust later, unflushed bytes |
//! | mirrored batches (follower appends), one write per partition per fetch round | **no** (`--flush kafka`): at a segment roll, before a `__mirror_state` write of the partition, and at close; their writeback is started at each append ([`crate::writeback`]), so those fsyncs wait only for what was appended last | a machine crash loses at most the unflushed tail: recovery verifies from the recovery point on and cuts a torn tail, and the fetcher fetches it again from the recovered log end, byte for byte at the same offsets. A SIGKILL loses nothing (the page cache survives) |
//! | the offset index | never fsynced | derived data: recovery checks every index against its segment's batches and rebuilds one that does not match |
//! | the leader-epoch checkpoint | after an append that changed the epoch cache, at the next flush that writes it (a segment roll, the periodic flush of logs whose checkpoint lags, the close; not a group commit), before the recovery point passes the new entry (atomically; a log's first entry in place and fdatasynced, one file sync where the atomic write makes a new file and syncs it and the directory) | recovery rebuilds the cache from the batches and only checks the checkpoint below the recovery point, so it may lag what lies above the recovery point (an unflushed tail, or durable batches whose checkpoint a group commit deferred); it may not lag what lies below |
//! | recovery points, high watermarks, log start offsets | in the log dir's three checkpoint files, every partition's line in one atomic write per file: after opening the logs, at the start of every fetch round when one moved (group commit), at close; lowered or moved ones at once (above) | the log raises its recovery point in memory only after the fsync, so the file never names unflushed data; lagging only makes recovery verify more. The high watermark is re-derived on restart (one replica: the leader's HW moves to its LEO) |
//!
//! `--flush every-append` fsyncs every append before it returns as well (and records every
//! high-watermark change, written with the next round's checkpoint write); the rules above
//! still hold. So after any crash: recovery succeeds (or refuses with a typed error when
//! something below the recovery point is damaged), each log is a byte prefix of its source
//! (plus this node's own markers), nothing a `__mirror_state` record acknowledges is lost, and
//! a restart fetches the rest. `harness/src/node/crash_tests.rs` checks this after a kill at
//! every effect, a torn `__mirror_state` write and a machine crash that cuts every unflushed
//! tail and tears offset indexes, and after a process death inside every file write of a
//! mirroring and of a stop (each write cut short in turn by the test build's write seam).

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use kmirror_kernel::apply::apply_log_effect;
use kmirror_kernel::config::{FetchIsolation, MirrorConfig};
use kmirror_kernel::controller::{
    apply_config_record, handle_mirror_request, ControllerConfig, MirrorErrorCode, MirrorRequest,
    MirrorRequestError,
};
use kmirror_kernel::coordinator::Coordinator;
use kmirror_kernel::desired::DesiredState;
use kmirror_kernel::effect::{Effect, LogEffect, RequestId};
use kmirror_kernel::input::{FetchOutcome, Input};
use kmirror_kernel::log::{LogView, PartitionLog};
use kmirror_kernel::node::{
    CoalescedFetch, CoalescedFetchResponse, NodeConfig, NodeEffect, NodeError as KernelNodeError,
    NodeInput, NodeMirror, PartitionFetchResponse, PartitionFetchResult, PartitionKey,
};
use kmirror_kernel::partition::Activity;
use kmirror_kernel::partitioner::mirror_state_partition;
use kmirror_kernel::records::MirrorPartitionStateValue;
use kmirror_kernel::state::MirrorState;
use kmirror_kernel::types::{MirrorName, MirrorPartition, PartitionIndex, TopicId};

use crate::driver::cluster::topic_id_hex;
use crate::driver::Clock;
use crate::durability::FsBarrier;
use crate::file_log::{EpochCheckpoint, FileLog, FlushPolicy, Verify};
use crate::log_dir_checkpoints::LogDirCheckpoints;
use crate::record_batch::RawBatch;
use crate::source::SourcePosition;
use crate::wire::client::{EARLIEST_TIMESTAMP, LATEST_TIMESTAMP};
use crate::wire::source_cluster::{
    CurrentLeaderEpoch, PartitionFetchError, PartitionFetchRequest, PartitionFetched, SourceCluster,
};
use crate::wire::topic_selection::SelectionMiss;
use crate::wire::TopicSelection;

use super::commit::{make_durable, CommitParts, Staged};
use super::control::{ControlServer, TopicsVerb};
use super::dest::{NodeDest, NodeMeta};
use super::fetch_ahead::{guess_next, source_has_more, AheadAnswer, FetchedAhead};
use super::follow::{discover_topics, is_gone, left_line, Follow, CHECKPOINT_INTERVAL_MS};
use super::state_log::StatePartition;
use super::status::{NodeStatus, PartitionStatus};
use super::NodeError;

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
    pub fetch_backoff_ms: u64,
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
    /// Calls to the source cluster's fetch, each at most one Fetch per source broker (and
    /// isolation level): a round's own, and its fetch-ahead.
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

/// One topic's answer to a mirror request (Kafka's per-topic result).
pub type TopicResults = BTreeMap<String, Result<TopicChange, MirrorRequestError>>;

/// What an accepted topic's request changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum TopicChange {
    /// Its `mirror.name` changed (or it was created): the partitions move on.
    Changed,
    /// Its `mirror.name` already said so (a repeat): nothing was written.
    Unchanged,
}

/// One partition of a fetch round.
struct RoundItem {
    key: PartitionKey,
    /// The kernel's request id.
    request: RequestId,
    asked: PartitionFetchRequest,
    answer: RoundAnswer,
}

/// Where a partition's answer in a fetch round is.
enum RoundAnswer {
    /// Asked of the source in this round's Fetches; not read yet.
    Waiting,
    /// The source's answer, or the one read ahead.
    Answered(Result<PartitionFetched, PartitionFetchError>),
    /// Read ahead with nothing new: left out of the fetcher's answer, asked again next round.
    LeftOut,
}

struct Queued {
    input: NodeInput,
    batches: BTreeMap<PartitionKey, Vec<RawBatch>>,
}

impl Queued {
    fn plain(input: NodeInput) -> Self {
        Queued {
            input,
            batches: BTreeMap::new(),
        }
    }
}

/// A fetch round's answers turned into the kernel's inputs, one coalesced response per fetcher
/// in the kernel's order, each as soon as all its partitions are answered.
struct RoundStream {
    /// Where each fetcher's partitions are in the round (consecutive, in fetcher order).
    ranges: Vec<std::ops::Range<usize>>,
    /// The next fetcher to turn into an input.
    next: usize,
    /// How many of the round's partitions still wait for the source's answer.
    unanswered: usize,
    /// The inputs made and not fed, in order.
    unfed: Vec<Queued>,
    /// What the next round is expected to ask.
    next_round: NextRound,
}

/// The next fetch round as a round's answers predict it ([`fetch_ahead`](super::fetch_ahead)).
#[derive(Default)]
struct NextRound {
    /// The guessed next request of each partition answered with records, or left out.
    guesses: Vec<(PartitionKey, PartitionFetchRequest)>,
    /// Whether an answer said the source has more: only then is the next round read ahead.
    source_has_more: bool,
}

impl RoundStream {
    /// The stream of `round`, whose items are `fetches`' partitions, fetcher after fetcher.
    fn new(fetches: &[CoalescedFetch], round: &[RoundItem]) -> Self {
        let mut start = 0;
        let ranges = fetches
            .iter()
            .map(|f| {
                let range = start..start + f.partitions.len();
                start = range.end;
                range
            })
            .collect();
        RoundStream {
            ranges,
            next: 0,
            unanswered: round
                .iter()
                .filter(|item| matches!(item.answer, RoundAnswer::Waiting))
                .count(),
            unfed: Vec::new(),
            next_round: NextRound::default(),
        }
    }

    /// The next fetcher's input, if all its partitions are answered.
    fn next_complete(
        &mut self,
        driver: &mut NodeDriver,
        fetches: &[CoalescedFetch],
        round: &mut [RoundItem],
    ) -> Option<Queued> {
        let fetch = fetches.get(self.next)?;
        let range = self.ranges[self.next].clone();
        if round[range.clone()]
            .iter()
            .any(|item| matches!(item.answer, RoundAnswer::Waiting))
        {
            return None;
        }
        self.next += 1;
        let mut batches = BTreeMap::new();
        let mut partitions = Vec::with_capacity(range.len());
        for item in &mut round[range] {
            if matches!(item.answer, RoundAnswer::LeftOut) {
                self.next_round.guesses.push((item.key, item.asked));
                continue;
            }
            partitions.push(PartitionFetchResponse {
                key: item.key,
                request: item.request,
                result: driver.hear_answer(item, &mut batches, &mut self.next_round),
            });
        }
        Some(Queued {
            input: NodeInput::FetchResponse(CoalescedFetchResponse {
                fetcher: fetch.fetcher,
                partitions,
            }),
            batches,
        })
    }
}

/// A running mirror's selection and what it has seen of the source ([`super::follow`]).
#[derive(Debug)]
struct Following {
    follow: Follow,
    /// The source metadata generation discovery last ran on.
    generation: u64,
    /// Topics reported as left out or refused, so each is reported once per run.
    reported: BTreeSet<String>,
    /// Mirrored topics the source no longer has (their partitions were told).
    deleted: BTreeSet<TopicId>,
    /// When the next refresh of the source's metadata may be attempted (ms).
    next_refresh_ms: i64,
}

/// A node's partitions and the world they act on. See the [module documentation](self).
pub struct NodeDriver {
    dest: NodeDest,
    options: NodeDriverOptions,
    node: NodeMirror,
    logs: BTreeMap<PartitionKey, FileLog>,
    states: BTreeMap<u32, StatePartition>,
    /// The log dir's recovery points, high watermarks and log start offsets.
    checkpoints: Arc<LogDirCheckpoints>,
    source: Option<SourceCluster>,
    queue: VecDeque<Queued>,
    pending_lme: BTreeMap<PartitionKey, RequestId>,
    timers: BTreeMap<PartitionKey, (u32, i64)>,
    positions: BTreeMap<PartitionKey, SourcePosition>,
    last_errors: BTreeMap<PartitionKey, String>,
    caught_up: BTreeSet<PartitionKey>,
    /// The answers read ahead for the next round.
    fetched_ahead: FetchedAhead,
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
    /// `node.properties` once the inputs queued so far are handled ([`Self::persist_gates`]).
    gates: BTreeMap<PartitionKey, bool>,
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
    /// Opens the node destination at `root` (every log and `__mirror_state` partition is
    /// recovered and read) with the source cluster it mirrors from, if any.
    pub fn open(
        root: &Path,
        source: Option<SourceCluster>,
        options: NodeDriverOptions,
    ) -> Result<Self, NodeError> {
        Self::from_dest(NodeDest::open(root)?, source, options)
    }

    /// A driver over an opened destination.
    pub fn from_dest(
        dest: NodeDest,
        source: Option<SourceCluster>,
        mut options: NodeDriverOptions,
    ) -> Result<Self, NodeError> {
        // This process holds the destination (its lock) and its coordinators: no write of an
        // earlier process can land once it runs, so states read are acted on as they are.
        options.mirror.predecessors_may_write = false;
        let meta = dest.meta().clone();
        let mut node_config = NodeConfig::new(meta.broker);
        node_config.mirror_state_partitions = meta.mirror_state_partitions;
        node_config.fetch_backoff_ms = options.fetch_backoff_ms;
        let node = NodeMirror::new(node_config).map_err(|e| NodeError::Invalid {
            message: e.to_string(),
        })?;
        let log_dir = dest.log_dir();
        // Opened before anything is written, so that it reports every writeback error of what
        // this process writes.
        let barrier = FsBarrier::open(&log_dir).map_err(|source| NodeError::Log {
            dir: log_dir.clone(),
            source: Box::new(source),
        })?;
        let mut log_config = dest.file_log_config();
        log_config.flush = options.flush;
        log_config.deferred_durability = barrier.is_some();
        let checkpoints =
            Arc::new(
                LogDirCheckpoints::open(&log_dir).map_err(|source| NodeError::Log {
                    dir: log_dir.clone(),
                    source: Box::new(source),
                })?,
            );
        let mut states = BTreeMap::new();
        for k in 0..meta.mirror_state_partitions {
            let table = options.mirror.transitions.clone();
            let store = Arc::clone(&checkpoints);
            states.insert(
                k,
                StatePartition::open(&log_dir, k, table, log_config, store)?,
            );
        }
        let mut driver = NodeDriver {
            dest,
            options,
            node,
            logs: BTreeMap::new(),
            states,
            checkpoints,
            source,
            queue: VecDeque::new(),
            pending_lme: BTreeMap::new(),
            timers: BTreeMap::new(),
            positions: BTreeMap::new(),
            last_errors: BTreeMap::new(),
            caught_up: BTreeSet::new(),
            fetched_ahead: FetchedAhead::default(),
            leaders_fed: BTreeMap::new(),
            events: Vec::new(),
            stats: NodeStats::default(),
            now_ms: 0,
            started: false,
            effects: 0,
            last_state_write: None,
            control: None,
            following: None,
            next_tick_ms: i64::MIN,
            interrupt: None,
            staged: Staged::default(),
            barrier,
            gates: BTreeMap::new(),
        };
        for (name, topic) in &meta.topics {
            driver.open_logs(name, topic.topic_id, 0..topic.partitions)?;
        }
        // Logs (and `__mirror_state` partitions) created empty just now, without syncs.
        driver.make_created_durable()?;
        // Every log's recovered offsets in the log dir's files, then (older layout) the
        // per-partition files they were read from go.
        driver.write_checkpoints()?;
        driver.dest.finish_migration()?;
        Ok(driver)
    }

    /// Writes the log dir's checkpoint files whose entries changed (one atomic write per file
    /// for every partition): see the [module documentation](self).
    fn write_checkpoints(&self) -> Result<(), NodeError> {
        self.checkpoints
            .write()
            .map(|_| ())
            .map_err(|source| NodeError::Log {
                dir: self.checkpoints.dir().to_path_buf(),
                source: Box::new(source),
            })
    }

    fn open_logs(
        &mut self,
        name: &str,
        topic_id: TopicId,
        partitions: std::ops::Range<PartitionIndex>,
    ) -> Result<(), NodeError> {
        let mut config = self.dest.file_log_config();
        config.flush = self.options.flush;
        config.deferred_durability = self.barrier.is_some();
        for p in partitions {
            let key = PartitionKey::new(topic_id, p);
            if self.logs.contains_key(&key) {
                continue;
            }
            let tp =
                crate::file_log::TopicPartition::new(name, p).map_err(|e| NodeError::Invalid {
                    message: e.to_string(),
                })?;
            let dir = self.dest.log_dir().join(tp.dir_name());
            if !dir.is_dir() {
                return Err(NodeError::Invalid {
                    message: format!(
                        "{} is missing: partition {p} of {name} has lost its log directory \
                         (restore it from a backup)",
                        dir.display()
                    ),
                });
            }
            let (log, _report) = FileLog::open_in_log_dir(
                &self.dest.log_dir(),
                tp,
                config,
                Verify::FromRecoveryPoint,
                Arc::clone(&self.checkpoints),
            )
            .map_err(|source| NodeError::Log {
                dir,
                source: Box::new(source),
            })?;
            self.logs.insert(key, log);
        }
        Ok(())
    }

    /// The destination.
    pub fn dest(&self) -> &NodeDest {
        &self.dest
    }

    /// How this driver runs the kernel.
    pub fn options(&self) -> &NodeDriverOptions {
        &self.options
    }

    /// Serves the destination's control channel ([`super::control`]): from now on the driver
    /// loop applies the `stop`, `pause` and `resume` requests other kmirror processes hand it,
    /// between fetch rounds, and answers each once its partitions settled.
    pub fn serve_control(&mut self) -> Result<(), NodeError> {
        if self.control.is_none() {
            self.control = Some(ControlServer::new(self.dest.root())?);
        }
        Ok(())
    }

    /// Adds a line to the events ([`NodeDriver::take_events`]).
    pub(super) fn note(&mut self, line: String) {
        self.events.push(line);
    }

    /// The node manager (read only).
    pub fn node(&self) -> &NodeMirror {
        &self.node
    }

    /// The log of `key`.
    pub fn log(&self, key: &PartitionKey) -> Option<&FileLog> {
        self.logs.get(key)
    }

    /// The source cluster, if any.
    pub fn source(&self) -> Option<&SourceCluster> {
        self.source.as_ref()
    }

    /// Replaces the source cluster (`None`: no fetches and no LME answers; stop, pause and
    /// resume need none). Returns the previous one.
    pub fn set_source(&mut self, source: Option<SourceCluster>) -> Option<SourceCluster> {
        self.fetched_ahead.clear();
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
        persisted_state(self.dest.meta(), &self.states, key)
    }

    /// The persisted `__mirror_state` record of `key` (a partition under a named mirror), read
    /// from the coordinator of its `__mirror_state` partition: the metadata sync's gate input.
    pub fn persisted_record(&self, key: &MirrorPartition) -> Option<&MirrorPartitionStateValue> {
        let n = self.dest.meta().mirror_state_partitions;
        let k = mirror_state_partition(key, n).ok()?;
        self.states.get(&k)?.coordinator().read_state(key)
    }

    /// Starts leading every partition: the topics' metadata, the source's leaders (when known)
    /// and `BecameLeader` for each partition with its persisted leader epoch.
    pub fn start(&mut self, now_ms: i64) -> Result<(), NodeError> {
        self.now_ms = now_ms;
        self.started = true;
        // The first periodic flush one interval from now: at start nothing lags yet, and a
        // failover's deferred epoch checkpoints are written after it, not in its midst.
        self.next_tick_ms = now_ms.saturating_add(CHECKPOINT_INTERVAL_MS);
        if let Some(source) = self.source.as_mut() {
            // Unreachable now: the first fetch round asks again.
            let _ = source.metadata();
        }
        let meta = self.dest.meta().clone();
        for (name, topic) in &meta.topics {
            let desired = topic.desired(name)?;
            self.feed(Queued::plain(NodeInput::Topic {
                topic_id: topic.topic_id,
                desired,
                partitions: topic.partitions,
            }))?;
        }
        self.sync_source_leaders(true);
        while let Some(q) = self.queue.pop_front() {
            self.feed(q)?;
        }
        for (name, topic) in &meta.topics {
            self.lead(name, topic.topic_id, 0..topic.partitions)?;
        }
        Ok(())
    }

    fn lead(
        &mut self,
        name: &str,
        topic_id: TopicId,
        partitions: std::ops::Range<PartitionIndex>,
    ) -> Result<(), NodeError> {
        let broker = self.dest.meta().broker;
        for p in partitions {
            // Kafka's makeLeader: with the ISR {this broker} the leader's HW moves to its LEO at
            // once (maybeIncrementLeaderHW). The checkpointed HW lags the log after a restart;
            // left there, the LSO (capped by the HW) would lag too, and a stop would truncate
            // mirrored, committed batches.
            self.advance_high_watermark(PartitionKey::new(topic_id, p))?;
            let epoch = self
                .dest
                .meta()
                .partitions
                .get(&(name.to_owned(), p))
                .map_or(0, |s| s.leader_epoch);
            self.queue.push_back(Queued::plain(NodeInput::Partition {
                key: PartitionKey::new(topic_id, p),
                input: Input::BecameLeader {
                    leader_epoch: epoch,
                    replicas: im::ordset![broker],
                    isr: im::ordset![broker],
                },
            }));
        }
        Ok(())
    }

    /// Feeds the source's leaders of every topic it knows when they differ from what the node
    /// was last told (or always, with `force`).
    fn sync_source_leaders(&mut self, force: bool) {
        let Some(metadata) = self
            .source
            .as_ref()
            .and_then(SourceCluster::cached_metadata)
        else {
            return;
        };
        let mut inputs = Vec::new();
        for topic in self.dest.meta().topics.values() {
            let Some(source) = metadata.topic_by_id(topic.topic_id) else {
                continue;
            };
            let count = source
                .partitions
                .iter()
                .map(|p| p.index + 1)
                .max()
                .unwrap_or(0);
            let mut leaders = vec![None; usize::try_from(count).unwrap_or(0)];
            for p in &source.partitions {
                if let Some(slot) = usize::try_from(p.index)
                    .ok()
                    .and_then(|i| leaders.get_mut(i))
                {
                    *slot = p.leader;
                }
            }
            if force || self.leaders_fed.get(&topic.topic_id) != Some(&leaders) {
                // Answers read ahead from the old leaders are asked again.
                self.fetched_ahead.clear();
                self.leaders_fed.insert(topic.topic_id, leaders.clone());
                inputs.push(NodeInput::SourceTopic {
                    topic_id: topic.topic_id,
                    leaders,
                });
            }
        }
        for input in inputs {
            self.queue.push_back(Queued::plain(input));
        }
    }

    /// Does one unit of work: the next queued input, or a due retry timer, or the pending LME
    /// queries, or one fetch round. Returns why it is idle when there is nothing to do.
    pub fn run_once(&mut self, now_ms: i64) -> Result<Option<NodeIdle>, NodeError> {
        if !self.started {
            self.start(now_ms)?;
            return Ok(None);
        }
        self.now_ms = now_ms;
        if let Some(mut control) = self.control.take() {
            let polled = control.poll(self, now_ms);
            self.control = Some(control);
            if polled? {
                return Ok(None);
            }
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
                    clock.sleep_until(due_ms.min(now + poll_ms.max(1)))
                }
                (NodeIdle::WaitingForRetry { due_ms }, _) => clock.sleep_until(due_ms),
                (_, NodeUntil::Forever { poll_ms }) => clock.sleep_until(now + poll_ms.max(1)),
                (NodeIdle::CaughtUp, _) => return Ok(NodeIdle::CaughtUp),
                (NodeIdle::Interrupted, _) => return Ok(NodeIdle::Interrupted),
                (NodeIdle::Settled, NodeUntil::Settled) => return Ok(NodeIdle::Settled),
                (NodeIdle::Settled, NodeUntil::CaughtUp) => {
                    if self.source.is_none() {
                        return Ok(NodeIdle::Settled);
                    }
                    // Fetches backing off after a retryable error: wait for them.
                    let due = self
                        .node
                        .next_fetch_due()
                        .map_or(now + 50, |d| i64::try_from(d).unwrap_or(i64::MAX));
                    clock.sleep_until(due.max(now + 1));
                }
            }
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
                || (matches!(pm.activity(), Activity::Fetching(_)) && self.caught_up.contains(key))
        })
    }

    fn answer_lme_queries(&mut self) {
        let pending: Vec<(PartitionKey, RequestId)> = std::mem::take(&mut self.pending_lme)
            .into_iter()
            .filter(|(key, request)| {
                self.node
                    .partition(key)
                    .is_some_and(|pm| *pm.activity() == Activity::AwaitingLme(*request))
            })
            .collect();
        let Some(source) = self.source.as_mut() else {
            return;
        };
        let asked: Vec<(TopicId, PartitionIndex)> = pending
            .iter()
            .map(|(k, _)| (k.topic_id, k.partition))
            .collect();
        let answers =
            source.list_offsets(&asked, EARLIEST_TIMESTAMP, FetchIsolation::ReadUncommitted);
        for ((key, request), answer) in pending.into_iter().zip(answers) {
            // A stock Kafka broker keeps no KIP-1279 __mirror_state: no LME (Kafka's -1).
            let input = match answer {
                Ok(start) => Input::LastMirroredEpochReceived {
                    request,
                    lme: None,
                    source_log_start_offset: start,
                },
                Err(e) => {
                    let error = e.to_string();
                    self.last_errors.insert(key, error.clone());
                    Input::RequestFailed { request, error }
                }
            };
            self.queue
                .push_back(Queued::plain(NodeInput::Partition { key, input }));
        }
    }

    /// One fetch round: every ready coalesced fetch, sent as one call to the source cluster
    /// (one Fetch per source broker), except the partitions whose request the last round's
    /// fetch-ahead answered or found with nothing new (those are left out of the answers).
    /// With fetch-ahead, while an answer says the source has more, the round's answers are
    /// fed while the next round's guessed fetches are read on a second thread
    /// ([`fetch_ahead`](super::fetch_ahead)); otherwise they are queued. False when the kernel
    /// asked no fetch.
    fn fetch_round(&mut self) -> Result<bool, NodeError> {
        if self.source.is_none() {
            return Ok(false);
        }
        // Group commit of the offsets the last round's flushes moved: one write per file.
        self.write_checkpoints()?;
        let Some(source) = self.source.as_mut() else {
            return Ok(false);
        };
        // The leaders first: asked on the first round, when stale, and after leadership errors
        // (a failure leaves the old ones; the partitions' errors say what failed).
        if source.metadata_is_stale() {
            let _ = source.metadata();
        }
        self.sync_source_leaders(false);
        if !self.queue.is_empty() {
            return Ok(true);
        }
        let now = u64::try_from(self.now_ms).unwrap_or(0);
        let fetches = self.node.poll_fetches(now);
        // What was read ahead serves this round or nothing.
        let mut ahead = std::mem::take(&mut self.fetched_ahead);
        if fetches.is_empty() {
            return Ok(false);
        }
        let max_batches = self.options.max_fetch_batches.max(1);
        // Every partition of the round in the kernel's order, fetcher after fetcher: its key,
        // request id, what is asked, and the answer once there is one.
        let mut round: Vec<RoundItem> = Vec::new();
        let mut requests = Vec::new();
        for f in &fetches {
            for (key, req) in &f.partitions {
                let asked = PartitionFetchRequest {
                    topic_id: key.topic_id,
                    partition: key.partition,
                    fetch_offset: req.fetch_offset,
                    last_fetched_epoch: req.last_fetched_epoch,
                    current_leader_epoch: CurrentLeaderEpoch::FromMetadata,
                    isolation: req.isolation,
                    max_batches,
                };
                let answer = match ahead.take(key, &asked) {
                    Some(AheadAnswer::Fetched(fetched)) => {
                        self.stats.fetched_ahead += 1;
                        RoundAnswer::Answered(Ok(fetched))
                    }
                    Some(AheadAnswer::NothingNew) => {
                        self.stats.left_out_ahead += 1;
                        RoundAnswer::LeftOut
                    }
                    None => {
                        requests.push(asked);
                        RoundAnswer::Waiting
                    }
                };
                round.push(RoundItem {
                    key: *key,
                    request: req.request,
                    asked,
                    answer,
                });
            }
        }
        drop(ahead);
        self.stats.rounds += 1;
        let mut stream = RoundStream::new(&fetches, &round);
        let mut fed = Ok(());
        if !requests.is_empty() {
            let Some(mut source) = self.source.take() else {
                return Ok(false);
            };
            let waiting: Vec<usize> = (0..round.len())
                .filter(|&i| matches!(round[i].answer, RoundAnswer::Waiting))
                .collect();
            let streaming = self.options.fetch_ahead;
            source.fetch_each(&requests, |answered| {
                for (k, result) in answered {
                    round[waiting[k]].answer = RoundAnswer::Answered(result.outcome);
                    stream.unanswered -= 1;
                }
                // Each fetcher's answer is fed once complete, in the kernel's order, while
                // other brokers' answers are still read; the last is left to the fetch-ahead.
                if streaming && stream.unanswered > 0 {
                    while let Some(queued) = stream.next_complete(self, &fetches, &mut round) {
                        if fed.is_ok() {
                            self.stats.fed_while_fetching += 1;
                            fed = self.feed(queued);
                        } else {
                            stream.unfed.push(queued);
                        }
                    }
                }
            });
            self.source = Some(source);
            self.stats.source_fetches += 1;
        }
        while let Some(queued) = stream.next_complete(self, &fetches, &mut round) {
            stream.unfed.push(queued);
        }
        // The round's unfed answers go before whatever the fed ones queued, as if every
        // answer had been queued before any was fed.
        let count = stream.unfed.len();
        for queued in stream.unfed.into_iter().rev() {
            self.queue.push_front(queued);
        }
        if let Err(e) = fed {
            self.sync_source_leaders(false);
            return Err(e);
        }
        let next_round = stream.next_round;
        if !self.options.fetch_ahead || !next_round.source_has_more {
            self.sync_source_leaders(false);
            return Ok(true);
        }
        let fed = self.feed_while_fetching_ahead(count, &next_round.guesses);
        self.sync_source_leaders(false);
        fed.map(|()| true)
    }

    /// A partition's answer as the kernel hears it: records the driver's bookkeeping (the
    /// source position, caught up, the last error) and the guess of its next request.
    fn hear_answer(
        &mut self,
        item: &mut RoundItem,
        batches: &mut BTreeMap<PartitionKey, Vec<RawBatch>>,
        next_round: &mut NextRound,
    ) -> PartitionFetchResult {
        let key = item.key;
        match std::mem::replace(&mut item.answer, RoundAnswer::LeftOut) {
            RoundAnswer::Answered(Ok(PartitionFetched { response, position })) => {
                if let Some(p) = position {
                    self.positions.insert(key, p);
                }
                let more = source_has_more(&item.asked, &response);
                next_round.source_has_more |= more;
                if let Some(next) = guess_next(&item.asked, &response) {
                    next_round.guesses.push((key, next));
                }
                let (outcome, fetched) = response.into_parts();
                // Caught up: nothing new, and not because the response's bytes went to others.
                let nothing_new =
                    fetched.is_empty() && !more && matches!(outcome, FetchOutcome::Records { .. });
                if nothing_new {
                    self.caught_up.insert(key);
                } else {
                    self.caught_up.remove(&key);
                }
                self.last_errors.remove(&key);
                if !fetched.is_empty() {
                    batches.insert(key, fetched);
                }
                PartitionFetchResult::Completed(outcome)
            }
            RoundAnswer::Answered(Err(e)) => {
                self.caught_up.remove(&key);
                let error = e.to_string();
                self.last_errors.insert(key, error.clone());
                if e.is_retryable() {
                    PartitionFetchResult::Retriable(error)
                } else {
                    PartitionFetchResult::Failed(error)
                }
            }
            RoundAnswer::Waiting | RoundAnswer::LeftOut => {
                // The source cluster answers every request it is given.
                self.caught_up.remove(&key);
                PartitionFetchResult::Retriable(format!(
                    "no answer to the fetch of partition {key}"
                ))
            }
        }
    }

    /// Feeds the first `count` queued inputs (a round's answers) while `guesses` are fetched
    /// from the source on a second thread; their answers are kept for the next round unless a
    /// feed fails (the rest of the round then stays queued).
    fn feed_while_fetching_ahead(
        &mut self,
        count: usize,
        guesses: &[(PartitionKey, PartitionFetchRequest)],
    ) -> Result<(), NodeError> {
        let Some(mut source) = self.source.take() else {
            return Ok(());
        };
        let requests: Vec<PartitionFetchRequest> = guesses.iter().map(|(_, r)| *r).collect();
        let (fed, results) = std::thread::scope(|scope| {
            let reading = scope.spawn(|| source.fetch(&requests));
            let mut fed = Ok(());
            for _ in 0..count {
                let Some(queued) = self.queue.pop_front() else {
                    break;
                };
                fed = self.feed(queued);
                if fed.is_err() {
                    break;
                }
            }
            match reading.join() {
                Ok(results) => (fed, results),
                Err(panic) => std::panic::resume_unwind(panic),
            }
        });
        self.source = Some(source);
        self.stats.source_fetches += 1;
        if fed.is_ok() {
            self.fetched_ahead.keep(guesses, results);
        }
        fed
    }

    /// Feeds one input to the node and executes its effects, in order.
    fn feed(&mut self, queued: Queued) -> Result<(), NodeError> {
        let Queued { input, batches } = queued;
        if let NodeInput::FetchResponse(r) = &input {
            self.stats.partition_fetches += r.partitions.len() as u64;
        }
        let config = self.options.mirror.clone();
        let now = u64::try_from(self.now_ms).unwrap_or(0);
        let output = self.node.handle(&config, now, input, &self.logs);
        for error in &output.errors {
            match error {
                KernelNodeError::Ignored { .. } | KernelNodeError::StaleFetch { .. } => {
                    self.stats.refused += 1
                }
                other => self.events.push(format!("node: {other}")),
            }
        }
        let mut touched = BTreeSet::new();
        for effect in output.effects {
            self.last_state_write = None;
            match effect {
                NodeEffect::Partition { key, effect } => {
                    if matches!(effect, Effect::Log(_)) {
                        touched.insert(key);
                    }
                    let fetched = batches.get(&key).map_or(&[][..], Vec::as_slice);
                    self.execute(key, effect, fetched)?;
                }
                NodeEffect::CreatePartitions { topic_id, total } => {
                    self.grow_topic(topic_id, total)?
                }
            }
            self.effects += 1;
            if self.options.halt_after_effects == Some(self.effects) {
                return Err(NodeError::Halted {
                    effects: self.effects,
                });
            }
        }
        for key in touched {
            self.advance_high_watermark(key)?;
        }
        Ok(())
    }

    /// One replica: the high watermark is the log end offset. A partition waiting for its
    /// `MIRROR_PID_RESET` to be committed hears it.
    fn advance_high_watermark(&mut self, key: PartitionKey) -> Result<(), NodeError> {
        let Some(log) = self.logs.get_mut(&key) else {
            return Ok(());
        };
        let leo = log.log_end_offset();
        if log.high_watermark() < leo {
            let dir = log.dir().to_path_buf();
            log.advance_high_watermark(leo)
                .map_err(|source| NodeError::Log {
                    dir,
                    source: Box::new(source),
                })?;
            if self
                .node
                .partition(&key)
                .is_some_and(|pm| *pm.activity() == Activity::AwaitingPidResetCommit)
            {
                self.queue.push_back(Queued::plain(NodeInput::Partition {
                    key,
                    input: Input::HighWatermarkAdvanced,
                }));
            }
        }
        Ok(())
    }

    fn state_partition(
        &mut self,
        key: &MirrorPartition,
    ) -> Result<(u32, &mut StatePartition), NodeError> {
        let n = self.dest.meta().mirror_state_partitions;
        let k = mirror_state_partition(key, n).map_err(|e| NodeError::Invalid {
            message: e.to_string(),
        })?;
        let state = self.states.get_mut(&k).ok_or_else(|| NodeError::Invalid {
            message: format!("__mirror_state partition {k} is not open"),
        })?;
        Ok((k, state))
    }

    /// Executes one effect of partition `key`: the single `match` over every [`Effect`].
    fn execute(
        &mut self,
        key: PartitionKey,
        effect: Effect,
        fetched: &[RawBatch],
    ) -> Result<(), NodeError> {
        let now = self.now_ms;
        match effect {
            Effect::ReadState { request, key: mk } => {
                let (k, state) = self.state_partition(&mk)?;
                let value = state.coordinator().read_state(&mk).cloned();
                self.coordinator_answer(k, mk, Input::StateRead { request, value });
            }
            Effect::WriteState {
                request,
                key: mk,
                value,
                expected_state_epoch,
            } => {
                let name = self.topic_name(&key);
                let (k, state) = self.state_partition(&mk)?;
                let staged = state.stage_state(&mk, value, expected_state_epoch);
                let written = staged.is_ok();
                let input = match staged {
                    Ok(stored) => {
                        let line = format!(
                            "{name}-{}: state {} persisted (leader epoch {}, state epoch {}){}",
                            key.partition,
                            stored.state,
                            stored.leader_epoch,
                            stored.state_epoch,
                            stored
                                .error_message
                                .as_deref()
                                .map(|e| format!(": {e}"))
                                .unwrap_or_default()
                        );
                        self.events.push(line);
                        Input::StateWritten {
                            request,
                            value: stored,
                        }
                    }
                    Err(refused) => Input::WriteFenced {
                        request,
                        reason: refused.reason(),
                    },
                };
                self.stage_answer(key, k, mk, input, written);
            }
            Effect::WriteLastMirroredEpoch {
                request,
                key: mk,
                value,
                expected_state_epoch,
            } => {
                let (k, state) = self.state_partition(&mk)?;
                let staged = state.stage_last_mirrored_epoch(&mk, value, expected_state_epoch);
                let input = match staged {
                    Ok(()) => Input::LastMirroredEpochWritten { request },
                    Err(ref refused) => Input::WriteFenced {
                        request,
                        reason: refused.reason(),
                    },
                };
                self.stage_answer(key, k, mk, input, staged.is_ok());
            }
            Effect::QueryLastMirroredEpoch { request, .. } => {
                self.pending_lme.insert(key, request);
            }
            Effect::Log(log_effect) => self.apply_log(key, &log_effect, fetched)?,
            Effect::StartFetcher | Effect::StopFetcher | Effect::Fetch { .. } => {
                self.caught_up.remove(&key);
            }
            Effect::BumpLeaderEpoch { request, at_least } => {
                let name = self.topic_name(&key);
                // Written with the round's group commit, before the bump is answered.
                let leader_epoch = self.dest.stage_leader_epoch(&name, key.partition, at_least);
                self.events.push(format!(
                    "{name}-{}: leader epoch bumped to {leader_epoch}",
                    key.partition
                ));
                self.staged.bump(NodeInput::Partition {
                    key,
                    input: Input::LeaderEpochBumped {
                        request,
                        leader_epoch,
                    },
                });
            }
            Effect::SetWritable(writable) => {
                self.gates.insert(key, writable);
            }
            Effect::ScheduleRetry { attempt, delay_ms } => {
                let delay = i64::try_from(delay_ms).unwrap_or(i64::MAX);
                self.timers
                    .insert(key, (attempt, now.saturating_add(delay)));
            }
        }
        Ok(())
    }

    /// Withholds a coordinator's answer about `key` (`__mirror_state` partition `k`) until the
    /// round's group commit: a `written` one names `key`'s log, made durable first.
    fn stage_answer(
        &mut self,
        key: PartitionKey,
        k: u32,
        mk: MirrorPartition,
        input: Input,
        written: bool,
    ) {
        let answer = NodeInput::CoordinatorAnswer {
            coordinator_partition: k,
            key: mk,
            input,
        };
        if written {
            self.staged.write(key, answer);
        } else {
            self.staged.answer(answer);
        }
    }

    /// The round's group commit ([`super::commit`]): every staged state change made durable,
    /// then its answer queued. Nothing staged: nothing done.
    fn commit(&mut self) -> Result<(), NodeError> {
        if self.staged.is_empty() {
            return Ok(());
        }
        let staged = std::mem::take(&mut self.staged);
        let parts = CommitParts {
            logs: &mut self.logs,
            states: &mut self.states,
            dest: &self.dest,
            barrier: self.barrier.as_ref(),
            now_ms: self.now_ms,
        };
        let (effects, halt_after) = (&mut self.effects, self.options.halt_after_effects);
        let last_state_write = &mut self.last_state_write;
        let mut halt = |state: Option<u32>| {
            *effects += 1;
            *last_state_write = state;
            match halt_after {
                Some(n) if n == *effects => Err(NodeError::Halted { effects: n }),
                _ => Ok(()),
            }
        };
        let answers = staged.commit(parts, &mut halt)?;
        self.last_state_write = None;
        self.queue.extend(answers.into_iter().map(Queued::plain));
        Ok(())
    }

    fn coordinator_answer(
        &mut self,
        coordinator_partition: u32,
        key: MirrorPartition,
        input: Input,
    ) {
        self.queue
            .push_back(Queued::plain(NodeInput::CoordinatorAnswer {
                coordinator_partition,
                key,
                input,
            }));
    }

    /// The name of `key`'s topic: its log's (a lookup by key), else from the metadata.
    fn topic_name(&self, key: &PartitionKey) -> String {
        match self.logs.get(key) {
            Some(log) => log.topic_partition().topic.clone(),
            None => self
                .dest
                .meta()
                .topic_name(key.topic_id)
                .unwrap_or("?")
                .to_owned(),
        }
    }

    fn apply_log(
        &mut self,
        key: PartitionKey,
        effect: &LogEffect,
        fetched: &[RawBatch],
    ) -> Result<(), NodeError> {
        let now = self.now_ms;
        let log = self.logs.get_mut(&key).ok_or_else(|| NodeError::Invalid {
            message: format!("no log for partition {key}"),
        })?;
        log.set_append_timestamp(now);
        apply_log_effect(log, effect, fetched).map_err(|source| NodeError::LogEffect {
            dir: log.dir().to_path_buf(),
            effect: format!("{effect:?}"),
            source: Box::new(source),
        })?;
        if matches!(effect, LogEffect::AppendFetched) {
            self.stats.batches += fetched.len() as u64;
            self.stats.bytes += fetched
                .iter()
                .map(|b| b.size_in_bytes() as u64)
                .sum::<u64>();
            self.stats.offsets += fetched
                .iter()
                .map(|b| {
                    let h = b.header();
                    u64::try_from(h.last_offset - h.base_offset + 1).unwrap_or(0)
                })
                .sum::<u64>();
        }
        Ok(())
    }

    /// Kafka Admin `createPartitions` on this node: the topic grows to `total` partitions (new
    /// directories and logs made durable, then `node.properties`), and the node leads the new
    /// ones.
    fn grow_topic(&mut self, topic_id: TopicId, total: PartitionIndex) -> Result<(), NodeError> {
        let Some(name) = self.dest.meta().topic_name(topic_id).map(str::to_owned) else {
            return Ok(());
        };
        let topic = self.dest.meta().topics[&name].clone();
        if total <= topic.partitions {
            return Ok(());
        }
        let mut meta = self.dest.meta().clone();
        self.dest
            .add_topic_to(&mut meta, &name, topic_id, total, topic.mirror_name.clone())?;
        self.open_logs(&name, topic_id, topic.partitions..total)?;
        self.make_created_durable()?;
        self.dest.set_meta(meta)?;
        self.events.push(format!(
            "{name}: grown from {} to {total} partitions (the source's count)",
            topic.partitions
        ));
        self.queue.push_back(Queued::plain(NodeInput::Topic {
            topic_id,
            desired: topic.desired(&name)?,
            partitions: total,
        }));
        self.lead(&name, topic_id, topic.partitions..total)
    }

    /// Sends `request` to the controller: the kernel's [`handle_mirror_request`] answers each
    /// topic against `node.properties` and the persisted states; the accepted topics' new
    /// `mirror.name` is written, then the node hears it. Unknown topics are
    /// `UNKNOWN_TOPIC_OR_PARTITION`; nothing changes for a refused topic.
    pub fn request(
        &mut self,
        request: &MirrorRequest,
        now_ms: i64,
    ) -> Result<TopicResults, NodeError> {
        // The controller decides on stored states: the staged ones first.
        self.commit()?;
        self.now_ms = now_ms;
        let meta = self.dest.meta().clone();
        let catalogue = meta.catalogue();
        let states = &self.states;
        let lookup = |k: &MirrorPartition| -> Option<MirrorState> {
            let n = meta.mirror_state_partitions;
            let p = mirror_state_partition(k, n).ok()?;
            states.get(&p)?.coordinator().read_state(k).map(|v| v.state)
        };
        let outcome =
            handle_mirror_request(&catalogue, &lookup, &ControllerConfig::default(), request);
        let mut next = catalogue;
        for record in &outcome.records {
            next = apply_config_record(&next, record);
        }
        let mut new_meta = meta.clone();
        let mut changed = Vec::new();
        for (name, topic) in new_meta.topics.iter_mut() {
            let info = next.topic(name).map(|t| t.mirror_name.clone());
            if let Some(mirror_name) = info {
                if mirror_name != topic.mirror_name {
                    topic.mirror_name = mirror_name;
                    changed.push(name.clone());
                }
            }
        }
        if !changed.is_empty() {
            self.dest.set_meta(new_meta.clone())?;
        }
        let results = outcome
            .results
            .into_iter()
            .map(|(topic, r)| {
                let change = if changed.contains(&topic) {
                    TopicChange::Changed
                } else {
                    TopicChange::Unchanged
                };
                (topic, r.map(|()| change))
            })
            .collect();
        if self.started {
            for name in changed {
                let topic = &new_meta.topics[&name];
                self.queue.push_back(Queued::plain(NodeInput::Topic {
                    topic_id: topic.topic_id,
                    desired: topic.desired(&name)?,
                    partitions: topic.partitions,
                }));
            }
        }
        Ok(results)
    }

    /// `kmirror stop|pause|resume --topics`: resolves `topics` (names and globs, separated by
    /// commas) on this node's topics and sends one RemoveTopicsFromMirror, PauseMirrorTopics
    /// or ResumeMirrorTopics per mirror (each topic under the mirror its `mirror.name` names,
    /// or `mirror`) through [`NodeDriver::request`]. An entry selecting no topic is answered
    /// `UNKNOWN_TOPIC_OR_PARTITION` under its own text; a selection that does not parse is
    /// [`NodeError::Invalid`], changing nothing.
    pub fn request_topics(
        &mut self,
        verb: TopicsVerb,
        topics: &str,
        mirror: Option<&str>,
        now_ms: i64,
    ) -> Result<TopicResults, NodeError> {
        let selection = TopicSelection::parse(topics).map_err(|e| NodeError::Invalid {
            message: e.to_string(),
        })?;
        let meta = self.dest.meta().clone();
        let (selected, misses) = selection.resolve(meta.topics.keys().map(|n| (n.as_str(), false)));
        let mut results = TopicResults::new();
        for miss in misses {
            let (entry, message) = match miss {
                SelectionMiss::UnknownTopic { topic } => {
                    (topic, "the destination has no such topic".to_owned())
                }
                SelectionMiss::NoMatch { glob } => (
                    glob,
                    "the glob matches no topic of the destination".to_owned(),
                ),
            };
            results.insert(
                entry,
                Err(MirrorRequestError::new(
                    MirrorErrorCode::UnknownTopicOrPartition,
                    message,
                )),
            );
        }
        // One request per mirror, each topic under the mirror its mirror.name names.
        let mut by_mirror: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for name in selected {
            let named = meta.topics[&name]
                .desired(&name)
                .ok()
                .and_then(|d| d.mirror().map(ToString::to_string));
            let m = mirror.map(str::to_owned).or(named).unwrap_or_default();
            by_mirror.entry(m).or_default().push(name);
        }
        for (m, names) in by_mirror {
            let request = match verb {
                TopicsVerb::Stop => MirrorRequest::RemoveTopics {
                    mirror: m,
                    topics: names,
                },
                TopicsVerb::Pause => MirrorRequest::PauseTopics {
                    mirror: m,
                    topics: names,
                },
                TopicsVerb::Resume => MirrorRequest::ResumeTopics {
                    mirror: m,
                    topics: names,
                },
            };
            results.extend(self.request(&request, now_ms)?);
        }
        Ok(results)
    }

    /// `AddTopicsToMirror(mirror, topics)` for topics of the source (`(name, id, partition
    /// count)`): a topic new to this node is created (same id and partition count) and put in
    /// `mirror`; one it holds must have the same id and no more partitions than the source. The
    /// mirror is created on the node if needed. Per-topic results, as Kafka gives them.
    pub fn add_topics(
        &mut self,
        mirror: &MirrorName,
        topics: &[(String, TopicId, PartitionIndex)],
        now_ms: i64,
    ) -> Result<TopicResults, NodeError> {
        self.commit()?;
        self.now_ms = now_ms;
        let meta = self.dest.meta().clone();
        let mut results = TopicResults::new();
        let mut candidates = Vec::new();
        for (name, id, count) in topics {
            match meta.topics.get(name) {
                Some(t) if t.topic_id != *id => {
                    results.insert(
                        name.clone(),
                        Err(MirrorRequestError::new(
                            MirrorErrorCode::InvalidClusterMirrorState,
                            format!(
                                "the destination's {name} has topic id {}, the source's has {}: \
                                 the source topic was deleted and re-created; mirror it into a \
                                 new destination",
                                crate::driver::cluster::topic_id_hex(t.topic_id),
                                crate::driver::cluster::topic_id_hex(*id)
                            ),
                        )),
                    );
                }
                Some(t) if t.partitions > *count => {
                    results.insert(
                        name.clone(),
                        Err(MirrorRequestError::new(
                            MirrorErrorCode::InvalidClusterMirrorState,
                            format!(
                                "the source's {name} has {count} partitions but the destination \
                                 has {}: partitions cannot be removed, nothing changes",
                                t.partitions
                            ),
                        )),
                    );
                }
                _ => candidates.push(name.clone()),
            }
        }
        // The controller decides on a catalogue where the new topics exist, unmirrored.
        let mut trial = meta.clone();
        trial.mirrors.insert(mirror.clone());
        for (name, id, count) in topics {
            if candidates.contains(name) && !trial.topics.contains_key(name) {
                trial.topics.insert(
                    name.clone(),
                    super::dest::NodeTopic {
                        topic_id: *id,
                        partitions: *count,
                        mirror_name: None,
                    },
                );
            }
        }
        let catalogue = trial.catalogue();
        let states = &self.states;
        let lookup = |k: &MirrorPartition| -> Option<MirrorState> {
            let p = mirror_state_partition(k, meta.mirror_state_partitions).ok()?;
            states.get(&p)?.coordinator().read_state(k).map(|v| v.state)
        };
        let request = MirrorRequest::AddTopics {
            mirror: mirror.to_string(),
            topics: candidates.clone(),
        };
        let outcome =
            handle_mirror_request(&catalogue, &lookup, &ControllerConfig::default(), &request);
        let mut next = catalogue;
        for record in &outcome.records {
            next = apply_config_record(&next, record);
        }
        let accepted: Vec<String> = candidates
            .iter()
            .filter(|n| matches!(outcome.result(n), Some(Ok(()))))
            .cloned()
            .collect();
        // Every accepted topic's change in one new `node.properties`, written once: after the
        // new partitions' directories and logs exist (one barrier makes them durable), so
        // that the file never names a partition a crash could lose.
        let mut changed = BTreeSet::new();
        let mut next_meta = self.dest.meta().clone();
        if !accepted.is_empty() {
            next_meta.mirrors.insert(mirror.clone());
        }
        let mut new_logs = Vec::new();
        for name in &accepted {
            let (_, id, count) = topics
                .iter()
                .find(|(n, _, _)| n == name)
                .cloned()
                .unwrap_or_default();
            let mirror_name = next.topic(name).and_then(|t| t.mirror_name.clone());
            let existed = next_meta.topics.get(name).cloned();
            let partitions = existed.as_ref().map_or(count, |t| t.partitions);
            if existed
                .as_ref()
                .is_some_and(|t| t.mirror_name == mirror_name)
            {
                continue;
            }
            changed.insert(name.clone());
            self.dest
                .add_topic_to(&mut next_meta, name, id, partitions, mirror_name)?;
            new_logs.push((name.clone(), id, partitions, existed.is_none()));
        }
        for (name, id, partitions, _) in &new_logs {
            self.open_logs(name, *id, 0..*partitions)?;
        }
        if next_meta != *self.dest.meta() {
            self.make_created_durable()?;
            self.dest.set_meta(next_meta)?;
        }
        if self.started {
            for (name, id, partitions, new) in new_logs {
                let desired = self.dest.meta().topics[&name].desired(&name)?;
                self.queue.push_back(Queued::plain(NodeInput::Topic {
                    topic_id: id,
                    desired,
                    partitions,
                }));
                if new {
                    self.lead(&name, id, 0..partitions)?;
                }
            }
        }
        results.extend(outcome.results.into_iter().map(|(topic, r)| {
            let change = if changed.contains(&topic) {
                TopicChange::Changed
            } else {
                TopicChange::Unchanged
            };
            (topic, r.map(|()| change))
        }));
        Ok(results)
    }

    /// Makes the files created without syncs (new partitions' directories, segments and
    /// checkpoints: [`FileLogConfig::deferred_durability`](crate::file_log::FileLogConfig))
    /// durable with one `syncfs`, before anything names them. Without a barrier they were
    /// synced as they were created.
    fn make_created_durable(&self) -> Result<(), NodeError> {
        match &self.barrier {
            Some(barrier) => barrier.sync().map_err(|source| NodeError::Log {
                dir: barrier.dir().to_path_buf(),
                source: Box::new(source),
            }),
            None => {
                crate::segment::sync_dir(&self.dest.log_dir()).map_err(|source| NodeError::Log {
                    dir: self.dest.log_dir(),
                    source: Box::new(source),
                })
            }
        }
    }

    /// Makes [`NodeDriver::run`] return [`NodeIdle::Interrupted`] at its next step once `flag`
    /// is raised (a signal handler's flag): the caller then closes the driver as after any
    /// other end.
    pub fn interrupt_on(&mut self, flag: Arc<AtomicBool>) {
        self.interrupt = Some(flag);
    }

    /// Follows the source's changes with `follow` from now on: see [`super::follow`]. The
    /// source cluster (set with [`NodeDriver::set_source`]) should select
    /// [`Follow::source_selection`].
    /// `reported` are topics the caller already reported as left out (not reported again).
    pub fn follow(&mut self, follow: Follow, reported: BTreeSet<String>) {
        self.following = Some(Following {
            follow,
            generation: 0,
            reported,
            deleted: BTreeSet::new(),
            next_refresh_ms: i64::MIN,
        });
    }

    /// Refreshes the source's metadata when [`Follow::metadata_refresh_ms`] passed, and runs
    /// discovery on each new metadata ([`super::follow`]): new topics put in the mirror,
    /// deleted ones told to their partitions. Returns whether it did anything.
    fn follow_source(&mut self, now_ms: i64) -> Result<bool, NodeError> {
        let (Some(following), Some(source)) = (self.following.as_mut(), self.source.as_mut())
        else {
            return Ok(false);
        };
        let refresh_ms = following.follow.metadata_refresh_ms.max(1);
        let due = source
            .metadata_age()
            .is_none_or(|age| age.as_millis() >= u128::try_from(refresh_ms).unwrap_or(0));
        if due && now_ms >= following.next_refresh_ms {
            // At most one attempt per interval: a failure keeps the old metadata, and the
            // fetch rounds refresh it themselves after errors.
            following.next_refresh_ms = now_ms.saturating_add(refresh_ms);
            if let Err(e) = source.refresh_metadata() {
                self.events
                    .push(format!("the source's metadata could not be refreshed: {e}"));
            }
        }
        let generation = source.metadata_generation();
        if generation == following.generation {
            return Ok(false);
        }
        following.generation = generation;
        let Some(metadata) = source.cached_metadata().cloned() else {
            return Ok(true);
        };
        let found = discover_topics(
            &following.follow,
            &metadata,
            self.dest.meta(),
            &following.deleted,
        );
        let mut gone: Vec<(String, TopicId)> = found.recreated.clone();
        for (name, id) in &found.missing {
            if is_gone(source.topic_exists(name), *id) {
                gone.push((name.clone(), *id));
            }
        }
        let mut notes = Vec::new();
        for (topic, left) in &found.left {
            if following.reported.insert(topic.clone()) {
                notes.push(left_line(topic, left));
            }
        }
        let mirror = following.follow.mirror.clone();
        self.events.extend(notes);
        if !found.add.is_empty() {
            let results = self.add_topics(&mirror, &found.add, now_ms)?;
            let following = self.following.as_mut().expect("following");
            for (topic, result) in results {
                match result {
                    Ok(TopicChange::Changed) => {
                        following.reported.remove(&topic);
                        self.events
                            .push(format!("{topic}: found at the source: in mirror {mirror}"));
                    }
                    Ok(TopicChange::Unchanged) => {}
                    Err(e) if following.reported.insert(topic.clone()) => self
                        .events
                        .push(format!("{topic}: not mirrored: {}: {}", e.code, e.message)),
                    Err(_) => {}
                }
            }
        }
        for (name, topic_id) in gone {
            let following = self.following.as_mut().expect("following");
            if !following.deleted.insert(topic_id) {
                continue;
            }
            self.events.push(format!(
                "{name}: the source no longer has this topic (id {}): deleted, or re-created \
                 under another id; its partitions go FAILED and are not retried, keeping what \
                 they mirrored, read-only",
                topic_id_hex(topic_id)
            ));
            self.queue
                .push_back(Queued::plain(NodeInput::SourceTopicDeleted { topic_id }));
        }
        self.sync_source_leaders(false);
        Ok(true)
    }

    /// The periodic work of a running node (every [`CHECKPOINT_INTERVAL_MS`]): a flush of each
    /// log whose epoch cache changed since its last one, the high watermarks to the log dir's
    /// checkpoint file, as Kafka's
    /// `replica.high.watermark.checkpoint.interval.ms` does (a high watermark above what a crash
    /// keeps is clamped to the log end by recovery), and the source's last stable offset of
    /// every mirrored partition that is not fetching (paused, failed, preparing), so that its
    /// lag is measured, not remembered.
    fn tick(&mut self) -> Result<(), NodeError> {
        // A log whose epoch began since its last flush is flushed, all of them together: its
        // leader-epoch checkpoint follows within the interval (epochs begin rarely: a source
        // leader change, a bump), not only at the next segment roll or state write.
        let mut lagging: Vec<&mut FileLog> = Vec::new();
        for log in self.logs.values_mut() {
            if log.epoch_checkpoint_lags() {
                lagging.push(log);
            } else {
                log.checkpoint_high_watermark()
                    .map_err(|source| NodeError::Log {
                        dir: log.dir().to_path_buf(),
                        source: Box::new(source),
                    })?;
            }
        }
        if !lagging.is_empty() {
            make_durable(
                &mut lagging,
                self.barrier.as_ref(),
                EpochCheckpoint::Written,
            )?;
        }
        self.write_checkpoints()?;
        let Some(source) = self.source.as_mut() else {
            return Ok(());
        };
        let idle: Vec<PartitionKey> = self
            .node
            .partitions()
            .filter(|(key, pm)| {
                matches!(
                    self.node.desired(&key.topic_id),
                    Some(DesiredState::Mirror(_) | DesiredState::Pause(_))
                ) && !matches!(pm.activity(), Activity::Fetching(_))
            })
            .map(|(key, _)| *key)
            .collect();
        if idle.is_empty() {
            return Ok(());
        }
        let asked: Vec<(TopicId, PartitionIndex)> =
            idle.iter().map(|k| (k.topic_id, k.partition)).collect();
        let answers = source.list_offsets(&asked, LATEST_TIMESTAMP, FetchIsolation::ReadCommitted);
        for (key, answer) in idle.into_iter().zip(answers) {
            match answer {
                Ok(lso) => {
                    self.positions.entry(key).or_default().last_stable_offset = lso;
                }
                // Unknown now: the lag is not shown rather than shown stale.
                Err(_) => {
                    self.positions.remove(&key);
                }
            }
        }
        Ok(())
    }

    /// Writes the produce gates the kernel set to `node.properties` (one atomic write), if any
    /// differs from what it says. The file's gate is what a process that does not hold the
    /// destination shows (`kmirror status`); it is never read back as a permission: every
    /// leadership starts with the gate closed until the kernel opens it, so a gate closed and
    /// reopened while the queue drained (a STOPPED partition reopened) writes nothing, and a
    /// crash before this write loses nothing the next process does not decide again.
    fn persist_gates(&mut self) -> Result<(), NodeError> {
        let meta = self.dest.meta();
        let names: BTreeMap<TopicId, &str> = meta
            .topics
            .iter()
            .map(|(name, t)| (t.topic_id, name.as_str()))
            .collect();
        let changed: Vec<((String, PartitionIndex), bool)> = self
            .gates
            .iter()
            .filter_map(|(key, &writable)| {
                let name = (*names.get(&key.topic_id)?).to_owned();
                let at = (name, key.partition);
                let now = meta.partitions.get(&at).is_some_and(|p| p.writable);
                (now != writable).then_some((at, writable))
            })
            .collect();
        if changed.is_empty() {
            return Ok(());
        }
        let mut meta = meta.clone();
        for (at, writable) in changed {
            meta.partitions.entry(at).or_default().writable = writable;
        }
        self.dest.set_meta(meta)
    }

    /// Whether local producers may write to `key`: a topic in no mirror always; a mirrored
    /// one once the kernel opened its gate in this process, or, before the node is started,
    /// when `node.properties` says so of a partition whose persisted state is STOPPED (the only
    /// state the kernel opens it in).
    pub fn writable(&self, key: &PartitionKey) -> bool {
        let meta = self.dest.meta();
        let Some(name) = meta.topic_name(key.topic_id) else {
            return false;
        };
        if matches!(
            meta.topics[name].desired(name),
            Ok(DesiredState::NotMirrored)
        ) {
            return true;
        }
        if self.started {
            return self.gates.get(key).copied().unwrap_or(false);
        }
        meta.partitions
            .get(&(name.to_owned(), key.partition))
            .is_some_and(|p| p.writable)
            && self.persisted_state(key) == MirrorState::Stopped
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
                let mut s = PartitionStatus::of(
                    self.dest.meta(),
                    persisted_state(self.dest.meta(), &self.states, &key),
                    name,
                    key,
                    log,
                    log.segments().iter().map(|s| s.size()).sum(),
                    self.positions
                        .get(&key)
                        .filter(|_| mirrored)
                        .map(|p| p.last_stable_offset),
                );
                // A FAILED partition shows why its record says it failed; others their last
                // fetch or LME error.
                s.error = persisted_record_in(
                    self.dest.meta(),
                    &|k| self.states.get(&k).map(StatePartition::coordinator),
                    &key,
                )
                .filter(|v| v.state == MirrorState::Failed)
                .and_then(|v| v.error_message.clone())
                .or_else(|| self.last_errors.get(&key).cloned());
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
        NodeStatus::new(self.dest.root(), self.dest.meta(), partitions)
            .with_source_partitions(&source_partitions)
    }

    /// Commits what is staged, then makes every log and `__mirror_state` partition durable
    /// and writes the log dir's checkpoint files: with the file-system barrier, two `syncfs`
    /// for all of them; without, each log closed by itself on a pool of threads. The first
    /// error is returned.
    pub fn close(mut self) -> Result<(), NodeError> {
        // Staged changes are committed first: their answers are then simply never fed.
        self.commit()?;
        // Requests still waiting for their partitions are answered with what they are now.
        if let Some(mut control) = self.control.take() {
            control.answer_settled(&self, self.now_ms, true)?;
        }
        self.persist_gates()?;
        let logs: Vec<FileLog> = std::mem::take(&mut self.logs).into_values().collect();
        match self.barrier.as_ref() {
            // Every log and `__mirror_state` partition made durable with two `syncfs`
            // ([`make_durable`]), then the log dir's checkpoint files move the recovery points.
            Some(barrier) => {
                let mut logs = logs;
                let mut all: Vec<&mut FileLog> = logs.iter_mut().collect();
                all.extend(self.states.values_mut().map(StatePartition::log_mut));
                make_durable(&mut all, Some(barrier), EpochCheckpoint::Written)?;
            }
            None => {
                close_on_pool(logs)?;
                for (_, state) in std::mem::take(&mut self.states) {
                    state.close()?;
                }
            }
        }
        self.write_checkpoints()
    }
}

/// Most threads [`NodeDriver::close`] closes partition logs on. The work is fsyncs, which
/// wait on the disk rather than the CPU: the block layer merges the cache flushes of
/// concurrent fsyncs, so more threads than cores pay off (32 against 8 halved the close of
/// 1,000 partitions in the `node_mirroring` bench).
pub const CLOSE_THREADS: usize = 32;

/// Closes `logs` file by file on up to [`CLOSE_THREADS`] threads, as Kafka's `LogManager`
/// closes a log dir's logs on a pool: each log's fsyncs keep their order, different logs'
/// overlap. The first error in `logs`' order is returned.
fn close_on_pool(logs: Vec<FileLog>) -> Result<(), NodeError> {
    let per_thread = logs.len().div_ceil(CLOSE_THREADS).max(1);
    let mut chunks: Vec<Vec<FileLog>> = Vec::new();
    let mut rest = logs.into_iter();
    loop {
        let chunk: Vec<FileLog> = rest.by_ref().take(per_thread).collect();
        if chunk.is_empty() {
            break;
        }
        chunks.push(chunk);
    }
    let results: Vec<Result<(), NodeError>> = if chunks.len() <= 1 {
        chunks.into_iter().map(close_logs).collect()
    } else {
        std::thread::scope(|scope| {
            let handles: Vec<_> = chunks
                .into_iter()
                .map(|chunk| scope.spawn(move || close_logs(chunk)))
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join().unwrap_or_else(|_| {
                        Err(NodeError::Invalid {
                            message: "a thread closing partition logs panicked".into(),
                        })
                    })
                })
                .collect()
        })
    };
    results.into_iter().collect()
}

/// Closes `logs` in order, stopping at the first error.
fn close_logs(logs: Vec<FileLog>) -> Result<(), NodeError> {
    for log in logs {
        let dir = log.dir().to_path_buf();
        log.close().map_err(|source| NodeError::Log {
            dir,
            source: Box::new(source),
        })?;
    }
    Ok(())
}

/// The persisted state of `key` under its topic's mirror, from its `__mirror_state` partition.
pub(super) fn persisted_state(
    meta: &NodeMeta,
    states: &BTreeMap<u32, StatePartition>,
    key: &PartitionKey,
) -> MirrorState {
    persisted_state_in(
        meta,
        &|k| states.get(&k).map(StatePartition::coordinator),
        key,
    )
}

/// [`persisted_state`] with the coordinator of each `__mirror_state` partition from `coordinator`.
pub(super) fn persisted_state_in<'a>(
    meta: &NodeMeta,
    coordinator: &dyn Fn(u32) -> Option<&'a kmirror_kernel::coordinator::Coordinator>,
    key: &PartitionKey,
) -> MirrorState {
    persisted_record_in(meta, coordinator, key).map_or(MirrorState::Unknown, |v| v.state)
}

/// The persisted record of `key` under its topic's mirror, with the coordinator of each
/// `__mirror_state` partition from `coordinator`.
pub(super) fn persisted_record_in<'a>(
    meta: &NodeMeta,
    coordinator: &dyn Fn(u32) -> Option<&'a kmirror_kernel::coordinator::Coordinator>,
    key: &PartitionKey,
) -> Option<&'a MirrorPartitionStateValue> {
    let name = meta.topic_name(key.topic_id)?;
    let mirror = meta.topics[name].desired(name).ok()?.mirror().cloned()?;
    let mk = key.in_mirror(mirror);
    mirror_state_partition(&mk, meta.mirror_state_partitions)
        .ok()
        .and_then(coordinator)
        .and_then(|c| c.read_state(&mk))
}
