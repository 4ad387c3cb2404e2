//! `kmirror replay`: a model trace replayed on real logs, compared with the model after every
//! step.
//!
//! The model checker saves counterexamples as a [`Trace`]; [`Trace::journal`] turns it into
//! steps, each with the events the model made (kernel inputs with the effects the model's kernel
//! returned, and every operation on a replica's log) and the world after the step. Replaying
//! builds a *disk world* beside it and drives it with the same events:
//!
//! - **Replicas.** Each broker of each cluster has a [`FileLog`] for the partition
//!   ([`TOPIC`]-[`PARTITION`]) in `<root>/<cluster>/broker-<b>/` (see [`replica_log_dir`]), with
//!   small segments ([`REPLAY_LOG_CONFIG`]) so that rolls and truncations across segments
//!   happen. A [`LogOp`] is applied to that log: kernel log effects through
//!   [`apply_log_effect`], leader appends with [`PartitionLog::append_as_leader`], follower
//!   copies, truncations and high-watermark moves. Batches a log copies from another (a follower
//!   from its leader, a mirror from the source cluster's `AppendFetched`) are the **bytes** of
//!   the batch with the same header in the source cluster's logs, leader first, read back from
//!   disk; when the source no longer holds it (truncated since it was fetched) it is
//!   [synthesized](RawBatch::synthesize) from the header. Leader appends in step `n` are stamped
//!   [`APPEND_TIMESTAMP_BASE_MS`]` + n`, so copied and synthesized bytes differ.
//! - **Kernels.** Each broker runs its own kernel [`PartitionMirror`], created as the model
//!   creates it, dropped when the step's action crashes the broker and re-created when it
//!   restarts. A [`Event::Kernel`] feeds the same input to it, with the broker's `FileLog` as its
//!   [`LogView`]; the effects it returns must equal the model's (the kernel is deterministic, so
//!   a difference means the disk log shows the kernel something else than the model's log).
//! - **Crashes.** When the action crashes or restarts a broker, its log is dropped without
//!   closing (as a crash does) and reopened through recovery before the step's events.
//! - **`__mirror_state`.** Each cluster keeps its coordinator's records in a partition log
//!   `<root>/<cluster>/coordinator/__mirror_state-0/` (see [`mirror_state_log_dir`]): after each
//!   step, the records that turn the previous coordinator into the step's one (a value per
//!   changed key, a tombstone per deleted key) are encoded with the kernel's codec
//!   ([`MirrorStateRecord::encode`]) and appended as one record batch by the harness's
//!   [`MirrorStateLog`] (the type both destination formats use); then the whole log is read
//!   back from disk, decoded and replayed with [`Coordinator::replay`].
//!
//! After every step, each replica is compared with the model's: kernel state, log start offset,
//! LEO, HW, LSO, every batch header (offsets, epochs, producer fields, flags, control type) read
//! back from the segments, the epoch cache, the producer state, and the checkpoint files re-read
//! from disk (`leader-epoch-checkpoint`, `replication-offset-checkpoint`,
//! `log-start-offset-checkpoint`); each cluster's rebuilt coordinator is compared with the
//! model's. At the end every log is dropped (as in a crash) and reopened through recovery, and
//! compared once more. The first difference is a [`ReplayError::Mismatch`] naming the step, its
//! action, the place and the field, with both values.
//!
//! What this cannot tell apart: [`FileLog`] makes its decisions with a kernel [`MemLog`] of the
//! headers, so offsets, epochs and producer state agree with the model's by construction while
//! the process runs; what the replay checks on top is what the disk holds (batches re-read and
//! CRC-checked, checkpoint files, the state recovery rebuilds after a crash) and the bytes of
//! copied batches.

use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{SystemTime, UNIX_EPOCH};

use clap::Args;
use kmirror_kernel::apply::apply_log_effect;
use kmirror_kernel::batch::BatchHeader;
use kmirror_kernel::coordinator::Coordinator;
use kmirror_kernel::effect::LogEffect;
use kmirror_kernel::epoch_cache::EpochCache;
use kmirror_kernel::log::{LogView, PartitionLog};
use kmirror_kernel::mem_log::MemLog;
use kmirror_kernel::partition::PartitionMirror;
use kmirror_kernel::records::MirrorStateRecord;
use kmirror_kernel::types::BrokerId;
use kmirror_model::actions::Action;
use kmirror_model::journal::{Event, LogOp};
use kmirror_model::trace::{describe, JournalStep, ReplayError as TraceReplayError, Trace};
use kmirror_model::world::{ClusterId, World, PARTITION, TOPIC, TOPIC_ID};
use kmirror_model::ModelConfig;
use serde::Serialize;

use kmirror_harness::error::FileLogError;
use kmirror_harness::file_log::{
    decode_offset_checkpoint, FileLog, FileLogConfig, FlushPolicy, TopicPartition,
    HIGH_WATERMARK_FILE, LEADER_EPOCH_FILE, LOG_START_OFFSET_FILE,
};
use kmirror_harness::mirror_state_log::{MirrorStateLog, MirrorStateLogError, MIRROR_STATE_TOPIC};
use kmirror_harness::record_batch::RawBatch;

/// The timestamp (ms) stamped on leader appends of step 0; step `n` stamps this plus `n`.
pub const APPEND_TIMESTAMP_BASE_MS: i64 = 1_700_000_000_000;

/// The layout of every replayed log: segments of at most 256 bytes (three or four of the
/// model's batches), so that rolls and truncations across segments happen; an index entry per
/// batch or two; an fsync on every append (what makes reopening after a crash lossless).
pub const REPLAY_LOG_CONFIG: FileLogConfig = FileLogConfig {
    segment_bytes: 256,
    index_interval_bytes: 100,
    flush: FlushPolicy::EveryAppend,
    append_timestamp_ms: APPEND_TIMESTAMP_BASE_MS,
    deferred_durability: false,
};

/// Arguments of `kmirror replay`.
#[derive(Args, Debug, Clone)]
pub struct ReplayArgs {
    /// The trace: JSON saved by `kmirror check` or `kmirror simulate`.
    #[arg(value_name = "TRACE")]
    pub trace: PathBuf,
    /// Build the logs in DIR and keep them (DIR must be empty or absent); by default a
    /// temporary directory is used and removed.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// Print the outcome as one JSON object instead of a line per step.
    #[arg(long)]
    pub json: bool,
}

/// Where a difference was found.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Serialize)]
pub enum Place {
    /// The partition replica of broker `broker` of `cluster` (its log and its kernel).
    Replica {
        /// The cluster.
        cluster: ClusterId,
        /// The broker.
        broker: BrokerId,
    },
    /// The `__mirror_state` log of `cluster` and the coordinator rebuilt from it.
    MirrorState {
        /// The cluster.
        cluster: ClusterId,
    },
}

impl fmt::Display for Place {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Place::Replica { cluster, broker } => write!(f, "{cluster}/broker {broker}"),
            Place::MirrorState { cluster } => write!(f, "{cluster}/{MIRROR_STATE_TOPIC}"),
        }
    }
}

/// The first difference between the model's world and the disk world.
#[derive(Clone, PartialEq, Eq, Debug, Serialize)]
pub struct Difference {
    /// The step (0: the initial world, `n`: the trace's `n`th action, as `kmirror show`
    /// numbers them).
    pub step: usize,
    /// The step's action, described.
    pub action: String,
    /// Where.
    pub place: Place,
    /// What differs (e.g. `high watermark`, `batch 2`, `leader-epoch-checkpoint file`).
    pub field: String,
    /// The model's value.
    pub model: String,
    /// The disk world's value.
    pub disk: String,
}

impl fmt::Display for Difference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "step {} ({}): {}: {} differs: the model has {}, the disk world has {}",
            self.step, self.action, self.place, self.field, self.model, self.disk
        )
    }
}

/// Why a trace does not replay on disk.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// The trace does not even replay in the model (another model version or configuration).
    #[error(transparent)]
    Trace(#[from] TraceReplayError),
    /// The root directory cannot be prepared.
    #[error("cannot {action} {}: {source}", path.display())]
    Root {
        /// What was being done.
        action: &'static str,
        /// The directory.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The disk world differs from the model's.
    #[error("{0}")]
    Mismatch(Box<Difference>),
    /// An operation on a disk log failed for another reason than a refusal by the log contract
    /// (the model applies refused operations as no-ops, and so does the replay; the comparison
    /// after the step tells whether the model refused it too).
    #[error("step {step} ({action}): {place}: {operation} failed: {source}")]
    Disk {
        /// The step.
        step: usize,
        /// The step's action, described.
        action: String,
        /// The replica (or `__mirror_state` log).
        place: Place,
        /// The operation.
        operation: String,
        /// The failure.
        source: Box<FileLogError>,
    },
    /// The `__mirror_state` log of a cluster cannot be written or read back.
    #[error("step {step} ({action}): {place}: {source}")]
    MirrorState {
        /// The step.
        step: usize,
        /// The step's action, described.
        action: String,
        /// The `__mirror_state` log.
        place: Place,
        /// The failure.
        source: Box<MirrorStateLogError>,
    },
    /// The journal asks something the disk world cannot do (an input for a kernel of a broker
    /// that is down, a replica that does not exist).
    #[error("step {step} ({action}): {place}: {reason}")]
    Journal {
        /// The step.
        step: usize,
        /// The step's action, described.
        action: String,
        /// Where.
        place: Place,
        /// What is wrong.
        reason: String,
    },
}

impl ReplayError {
    /// Whether the error is a finding of the replay (the disk world and the model disagree),
    /// as opposed to a trace or directory that cannot be used.
    pub fn is_difference(&self) -> bool {
        !matches!(self, ReplayError::Trace(_) | ReplayError::Root { .. })
    }

    /// The difference, for a [`ReplayError::Mismatch`].
    pub fn difference(&self) -> Option<&Difference> {
        match self {
            ReplayError::Mismatch(d) => Some(d),
            _ => None,
        }
    }
}

/// One replayed step, reported when it compared equal.
#[derive(Clone, PartialEq, Eq, Debug, Serialize)]
pub struct StepReport {
    /// The step (0: the initial world).
    pub step: usize,
    /// The step's action, described.
    pub action: String,
    /// Kernel inputs fed in the step.
    pub kernel_inputs: usize,
    /// Log operations applied in the step.
    pub log_operations: usize,
}

/// What a replay did.
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize)]
pub struct ReplaySummary {
    /// Steps replayed and compared (the initial world included).
    pub steps: usize,
    /// Kernel inputs fed, each with its effects compared.
    pub kernel_inputs: usize,
    /// Log operations applied.
    pub log_operations: usize,
    /// Log operations the log contract refused (as the model's log did, or the comparison
    /// would have failed).
    pub refused_operations: usize,
    /// Batches copied byte for byte from another replica's log.
    pub batches_copied: usize,
    /// Batches synthesized from their header because no source log held them any more.
    pub batches_synthesized: usize,
    /// `__mirror_state` records written.
    pub mirror_state_records: usize,
    /// Logs dropped and reopened through recovery (crashes, restarts, the final check).
    pub reopened_logs: usize,
    /// Reopenings whose recovery repaired something (a cut tail, a rebuilt index, ...).
    pub repaired_recoveries: usize,
    /// Replica comparisons made (one per replica per step, plus the final one).
    pub replica_comparisons: usize,
}

impl std::ops::AddAssign<&ReplaySummary> for ReplaySummary {
    /// Adds the counts of another replay (to total several).
    fn add_assign(&mut self, other: &ReplaySummary) {
        self.steps += other.steps;
        self.kernel_inputs += other.kernel_inputs;
        self.log_operations += other.log_operations;
        self.refused_operations += other.refused_operations;
        self.batches_copied += other.batches_copied;
        self.batches_synthesized += other.batches_synthesized;
        self.mirror_state_records += other.mirror_state_records;
        self.reopened_logs += other.reopened_logs;
        self.repaired_recoveries += other.repaired_recoveries;
        self.replica_comparisons += other.replica_comparisons;
    }
}

/// The log directory of broker `broker` of `cluster` under `root` (the partition directory
/// `orders-0` is inside it).
pub fn replica_log_dir(root: &Path, cluster: ClusterId, broker: BrokerId) -> PathBuf {
    root.join(cluster.to_string())
        .join(format!("broker-{broker}"))
}

/// The partition directory of broker `broker` of `cluster` under `root`.
pub fn replica_partition_dir(root: &Path, cluster: ClusterId, broker: BrokerId) -> PathBuf {
    replica_log_dir(root, cluster, broker).join(partition().dir_name())
}

/// The log directory holding `cluster`'s `__mirror_state-0` partition directory.
pub fn mirror_state_log_dir(root: &Path, cluster: ClusterId) -> PathBuf {
    root.join(cluster.to_string()).join("coordinator")
}

fn partition() -> TopicPartition {
    TopicPartition {
        topic: TOPIC.to_owned(),
        partition: PARTITION,
    }
}

/// Replays `trace` in `root` (which should be empty): see the [module documentation](self).
pub fn replay_trace(trace: &Trace, root: &Path) -> Result<ReplaySummary, ReplayError> {
    let steps = trace.journal()?;
    replay_journal(&trace.config, &steps, root, |_| {})
}

/// Replays the journal `steps` of a trace of `config` in `root` (which should be empty),
/// calling `on_step` after each step that compared equal. `steps` must start with the initial
/// world, as [`Trace::journal`] returns them.
pub fn replay_journal(
    config: &ModelConfig,
    steps: &[JournalStep],
    root: &Path,
    mut on_step: impl FnMut(&StepReport),
) -> Result<ReplaySummary, ReplayError> {
    let Some(first) = steps.first() else {
        return Ok(ReplaySummary::default());
    };
    let mut summary = ReplaySummary::default();
    let mut disk = DiskWorld::create(config, root, &first.world)?;
    let mut before: Option<&World> = None;
    for (n, step) in steps.iter().enumerate() {
        let ctx = Ctx {
            step: n,
            action: step
                .action
                .as_ref()
                .map_or_else(|| "initial world".to_owned(), describe),
        };
        disk.set_timestamp(APPEND_TIMESTAMP_BASE_MS + n as i64);
        if let Some(action) = &step.action {
            disk.before_step(&ctx, action, &step.world, &mut summary)?;
        }
        let mut report = StepReport {
            step: n,
            action: ctx.action.clone(),
            kernel_inputs: 0,
            log_operations: 0,
        };
        let leaders = Leaders::new(before, &step.world);
        for event in &step.events {
            match event {
                Event::Log {
                    cluster,
                    broker,
                    op,
                } => {
                    report.log_operations += 1;
                    disk.apply_log_op(&ctx, *cluster, *broker, op, &leaders, &mut summary)?;
                }
                Event::Kernel {
                    cluster,
                    broker,
                    input,
                    effects,
                } => {
                    report.kernel_inputs += 1;
                    disk.feed(&ctx, config, *cluster, *broker, input, effects)?;
                }
            }
        }
        disk.sync_mirror_state(&ctx, &step.world, &mut summary)?;
        disk.compare(&ctx, &step.world, &mut summary)?;
        summary.steps += 1;
        summary.kernel_inputs += report.kernel_inputs;
        summary.log_operations += report.log_operations;
        on_step(&report);
        before = Some(&step.world);
    }
    if let Some(last) = steps.last() {
        let ctx = Ctx {
            step: steps.len() - 1,
            action: format!(
                "{}, then every log dropped and reopened",
                last.action
                    .as_ref()
                    .map_or_else(|| "initial world".to_owned(), describe)
            ),
        };
        disk.reopen_all(&ctx, &mut summary)?;
        disk.compare(&ctx, &last.world.logs_as_loaded(), &mut summary)?;
    }
    Ok(summary)
}

/// Runs `kmirror replay`: prints a line per step and a summary (or one JSON object with
/// `--json`). Exit status 0 when every step compared equal, 1 on the first difference; `Err`
/// when the trace cannot be read or replayed in the model, or the directory cannot be used.
pub fn run(args: ReplayArgs) -> Result<ExitCode, String> {
    let text = fs::read_to_string(&args.trace)
        .map_err(|e| format!("cannot read {}: {e}", args.trace.display()))?;
    let trace: Trace = serde_json::from_str(&text)
        .map_err(|e| format!("{} is not a kmirror trace: {e}", args.trace.display()))?;
    let steps = trace
        .journal()
        .map_err(|e| format!("{}: {e}", args.trace.display()))?;
    let (root, _temporary) = match &args.dir {
        Some(dir) => {
            prepare_dir(dir)?;
            (dir.clone(), None)
        }
        None => {
            let temporary = TemporaryDir::create()?;
            (temporary.0.clone(), Some(temporary))
        }
    };
    if !args.json {
        if let Some(p) = &trace.property {
            println!(
                "replaying trace for property `{p}` ({} steps) in {}",
                trace.actions.len(),
                root.display()
            );
        } else {
            println!(
                "replaying trace ({} steps) in {}",
                trace.actions.len(),
                root.display()
            );
        }
    }
    let mut reports = Vec::new();
    let result = replay_journal(&trace.config, &steps, &root, |report| {
        if !args.json {
            println!("{:>3}. {}  OK", report.step, report.action);
        }
        reports.push(report.clone());
    });
    if let Err(e) = &result {
        if !e.is_difference() {
            return Err(format!("{}: {e}", args.trace.display()));
        }
    }
    if args.json {
        let outcome = JsonOutcome {
            trace: &args.trace,
            property: trace.property.as_deref(),
            dir: args.dir.as_deref(),
            ok: result.is_ok(),
            steps: &reports,
            summary: result.as_ref().ok(),
            difference: result.as_ref().err().and_then(ReplayError::difference),
            error: result.as_ref().err().map(ToString::to_string),
        };
        println!(
            "{}",
            serde_json::to_string_pretty(&outcome).map_err(|e| e.to_string())?
        );
    } else {
        match &result {
            Ok(s) => {
                println!(
                    "OK: {} steps, {} kernel inputs with identical effects, {} log operations \
                     ({} refused as in the model), {} batches copied byte for byte, {} \
                     synthesized, {} __mirror_state records, {} logs reopened ({} repaired)",
                    s.steps,
                    s.kernel_inputs,
                    s.log_operations,
                    s.refused_operations,
                    s.batches_copied,
                    s.batches_synthesized,
                    s.mirror_state_records,
                    s.reopened_logs,
                    s.repaired_recoveries
                );
                if let Some(dir) = &args.dir {
                    println!("logs kept in {}", dir.display());
                }
            }
            Err(e) => {
                println!("DIFFERENCE: {e}");
                if let Some(dir) = &args.dir {
                    println!("logs kept in {}", dir.display());
                }
            }
        }
    }
    Ok(if result.is_ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// The `--json` output.
#[derive(Serialize)]
struct JsonOutcome<'a> {
    trace: &'a Path,
    property: Option<&'a str>,
    dir: Option<&'a Path>,
    ok: bool,
    steps: &'a [StepReport],
    summary: Option<&'a ReplaySummary>,
    difference: Option<&'a Difference>,
    error: Option<String>,
}

/// Checks that `dir` is absent or empty, and creates it.
fn prepare_dir(dir: &Path) -> Result<(), String> {
    if dir.exists() {
        let mut entries =
            fs::read_dir(dir).map_err(|e| format!("cannot read {}: {e}", dir.display()))?;
        if entries.next().is_some() {
            return Err(format!(
                "{} is not empty; replay needs an empty or absent directory",
                dir.display()
            ));
        }
    }
    fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))
}

/// A directory under the system's temporary directory, removed on drop.
struct TemporaryDir(PathBuf);

impl TemporaryDir {
    fn create() -> Result<Self, String> {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let path =
            std::env::temp_dir().join(format!("kmirror-replay-{}-{nanos}", std::process::id()));
        fs::create_dir_all(&path).map_err(|e| format!("cannot create {}: {e}", path.display()))?;
        Ok(TemporaryDir(path))
    }
}

impl Drop for TemporaryDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// The step being replayed, for error messages.
struct Ctx {
    step: usize,
    action: String,
}

impl Ctx {
    fn mismatch(
        &self,
        place: Place,
        field: impl Into<String>,
        model: impl Into<String>,
        disk: impl Into<String>,
    ) -> ReplayError {
        ReplayError::Mismatch(Box::new(Difference {
            step: self.step,
            action: self.action.clone(),
            place,
            field: field.into(),
            model: model.into(),
            disk: disk.into(),
        }))
    }

    fn disk(&self, place: Place, operation: impl Into<String>, e: FileLogError) -> ReplayError {
        ReplayError::Disk {
            step: self.step,
            action: self.action.clone(),
            place,
            operation: operation.into(),
            source: Box::new(e),
        }
    }

    fn journal(&self, place: Place, reason: impl Into<String>) -> ReplayError {
        ReplayError::Journal {
            step: self.step,
            action: self.action.clone(),
            place,
            reason: reason.into(),
        }
    }

    fn mirror_state(&self, cluster: ClusterId, e: MirrorStateLogError) -> ReplayError {
        ReplayError::MirrorState {
            step: self.step,
            action: self.action.clone(),
            place: Place::MirrorState { cluster },
            source: Box::new(e),
        }
    }
}

/// The leaders of each cluster before and after the step, in the order to look for a batch's
/// bytes.
struct Leaders([Vec<BrokerId>; 2]);

impl Leaders {
    fn new(before: Option<&World>, after: &World) -> Self {
        Leaders(ClusterId::BOTH.map(|c| {
            let mut order = Vec::new();
            for w in before.into_iter().chain(Some(after)) {
                if let Some(l) = w.cluster(c).leader {
                    if !order.contains(&l) {
                        order.push(l);
                    }
                }
            }
            order
        }))
    }

    fn of(&self, c: ClusterId) -> &[BrokerId] {
        &self.0[c.index()]
    }
}

/// One replica on disk.
struct DiskReplica {
    log_dir: PathBuf,
    /// Always `Some` outside [`DiskReplica::reopen`].
    log: Option<FileLog>,
    kernel: Option<PartitionMirror>,
}

impl DiskReplica {
    fn log(&self) -> &FileLog {
        self.log
            .as_ref()
            .expect("a replica's log is open outside reopen")
    }

    fn log_mut(&mut self) -> &mut FileLog {
        self.log
            .as_mut()
            .expect("a replica's log is open outside reopen")
    }

    /// Drops the log without closing it (a crash) and opens it again through recovery.
    fn reopen(&mut self, summary: &mut ReplaySummary) -> Result<(), FileLogError> {
        drop(self.log.take());
        let (log, report) = FileLog::open(&self.log_dir, partition(), REPLAY_LOG_CONFIG)?;
        self.log = Some(log);
        summary.reopened_logs += 1;
        if !report.is_clean() {
            summary.repaired_recoveries += 1;
        }
        Ok(())
    }
}

/// One cluster on disk.
struct DiskCluster {
    replicas: Vec<DiskReplica>,
    state_log_dir: PathBuf,
    /// Always `Some` outside [`DiskWorld::reopen_all`].
    state_log: Option<MirrorStateLog>,
    /// The coordinator rebuilt from `state_log` after the last step.
    coordinator: Coordinator,
}

/// The disk world: see the [module documentation](self).
struct DiskWorld {
    clusters: [DiskCluster; 2],
    empty_coordinator: Coordinator,
}

impl DiskWorld {
    /// Creates the logs under `root` and the kernels as the model's initial world creates them
    /// (before the initial elections, which are the journal of step 0).
    fn create(
        config: &ModelConfig,
        root: &Path,
        initial: &World,
    ) -> Result<DiskWorld, ReplayError> {
        let ctx = Ctx {
            step: 0,
            action: "initial world".to_owned(),
        };
        fs::create_dir_all(root).map_err(|source| ReplayError::Root {
            action: "create",
            path: root.to_path_buf(),
            source,
        })?;
        let empty_coordinator =
            Coordinator::new(config.kernel.transitions.clone()).with_mutant(config.kernel.mutant);
        let cluster = |c: ClusterId| -> Result<DiskCluster, ReplayError> {
            let desired = initial.desired(c);
            let mut replicas = Vec::new();
            for b in 0..BrokerId::from(config.replicas) {
                let place = Place::Replica {
                    cluster: c,
                    broker: b,
                };
                let log_dir = replica_log_dir(root, c, b);
                let (log, _) = FileLog::open(&log_dir, partition(), REPLAY_LOG_CONFIG)
                    .map_err(|e| ctx.disk(place, "creating the log", e))?;
                replicas.push(DiskReplica {
                    log_dir,
                    log: Some(log),
                    kernel: Some(PartitionMirror::new(
                        b,
                        TOPIC_ID,
                        PARTITION,
                        desired.clone(),
                    )),
                });
            }
            let state_log_dir = mirror_state_log_dir(root, c);
            let state_log = MirrorStateLog::create(
                &state_log_dir,
                config.kernel.transitions.clone(),
                REPLAY_LOG_CONFIG,
            )
            .map_err(|e| ctx.mirror_state(c, e))?;
            Ok(DiskCluster {
                replicas,
                state_log_dir,
                state_log: Some(state_log),
                coordinator: empty_coordinator.clone(),
            })
        };
        Ok(DiskWorld {
            clusters: [cluster(ClusterId::A)?, cluster(ClusterId::B)?],
            empty_coordinator,
        })
    }

    fn cluster(&self, c: ClusterId) -> &DiskCluster {
        &self.clusters[c.index()]
    }

    fn cluster_mut(&mut self, c: ClusterId) -> &mut DiskCluster {
        &mut self.clusters[c.index()]
    }

    fn replica_mut(
        &mut self,
        ctx: &Ctx,
        c: ClusterId,
        b: BrokerId,
    ) -> Result<&mut DiskReplica, ReplayError> {
        usize::try_from(b)
            .ok()
            .and_then(|i| self.clusters[c.index()].replicas.get_mut(i))
            .ok_or_else(|| {
                ctx.journal(
                    Place::Replica {
                        cluster: c,
                        broker: b,
                    },
                    "no such replica",
                )
            })
    }

    /// Sets the timestamp of later leader appends on every replica.
    fn set_timestamp(&mut self, timestamp_ms: i64) {
        for cluster in &mut self.clusters {
            for replica in &mut cluster.replicas {
                replica.log_mut().set_append_timestamp(timestamp_ms);
            }
        }
    }

    /// What the step's action does to a broker before its events: a crash loses the kernel
    /// (and the log goes through recovery); a restart starts a fresh kernel reading the topic's
    /// desired state (and reopens the log).
    fn before_step(
        &mut self,
        ctx: &Ctx,
        action: &Action,
        after: &World,
        summary: &mut ReplaySummary,
    ) -> Result<(), ReplayError> {
        let (c, b, restart) = match action {
            Action::Crash(c, b) => (*c, *b, false),
            Action::Restart(c, b) => (*c, *b, true),
            _ => return Ok(()),
        };
        let place = Place::Replica {
            cluster: c,
            broker: b,
        };
        let replica = self.replica_mut(ctx, c, b)?;
        replica.kernel =
            restart.then(|| PartitionMirror::new(b, TOPIC_ID, PARTITION, after.desired(c)));
        replica
            .reopen(summary)
            .map_err(|e| ctx.disk(place, "reopening the log after the crash", e))?;
        replica
            .log_mut()
            .set_append_timestamp(APPEND_TIMESTAMP_BASE_MS + ctx.step as i64);
        Ok(())
    }

    /// The bytes of the batch `header` as cluster `c` holds it (its leaders first), or a
    /// synthesized batch when no replica of `c` holds it any more.
    fn source_batch(
        &self,
        ctx: &Ctx,
        c: ClusterId,
        header: &BatchHeader,
        leaders: &Leaders,
        summary: &mut ReplaySummary,
    ) -> Result<RawBatch, ReplayError> {
        let cluster = self.cluster(c);
        let others = (0..cluster.replicas.len() as BrokerId).filter(|b| !leaders.of(c).contains(b));
        for b in leaders.of(c).iter().copied().chain(others) {
            let Some(replica) = cluster.replicas.get(b as usize) else {
                continue;
            };
            let log = replica.log();
            if header.base_offset < log.log_start_offset()
                || header.base_offset >= log.log_end_offset()
            {
                continue;
            }
            let batches = log
                .try_read(header.base_offset, header.base_offset + 1)
                .map_err(|e| {
                    ctx.disk(
                        Place::Replica {
                            cluster: c,
                            broker: b,
                        },
                        format!("reading the batch at offset {}", header.base_offset),
                        e,
                    )
                })?;
            if let Some(batch) = batches.into_iter().find(|batch| batch.header() == *header) {
                summary.batches_copied += 1;
                return Ok(batch);
            }
        }
        summary.batches_synthesized += 1;
        RawBatch::synthesize(header, APPEND_TIMESTAMP_BASE_MS + ctx.step as i64).map_err(|e| {
            ctx.disk(
                Place::Replica {
                    cluster: c,
                    broker: leaders.of(c).first().copied().unwrap_or(0),
                },
                format!("synthesizing the batch {header:?}"),
                FileLogError::Encode(e),
            )
        })
    }

    /// Applies one journalled log operation to broker `b` of cluster `c`.
    fn apply_log_op(
        &mut self,
        ctx: &Ctx,
        c: ClusterId,
        b: BrokerId,
        op: &LogOp,
        leaders: &Leaders,
        summary: &mut ReplaySummary,
    ) -> Result<(), ReplayError> {
        // Copied batches come from the source cluster (a mirror's fetch) or from the replica's
        // own cluster (a follower's fetch).
        let copied = match op {
            LogOp::Effect {
                effect: LogEffect::AppendFetched,
                fetched,
            } => Some((c.other(), fetched)),
            LogOp::AppendAsFollower { batches } => Some((c, batches)),
            _ => None,
        };
        let mut batches = Vec::new();
        if let Some((source, headers)) = copied {
            for header in headers {
                batches.push(self.source_batch(ctx, source, header, leaders, summary)?);
            }
        }
        let place = Place::Replica {
            cluster: c,
            broker: b,
        };
        let log = self.replica_mut(ctx, c, b)?.log_mut();
        let result = match op {
            LogOp::Effect { effect, .. } => apply_log_effect(log, effect, &batches),
            LogOp::AppendAsLeader { epoch, batch } => {
                log.append_as_leader(*epoch, *batch).map(drop)
            }
            LogOp::AppendAsFollower { .. } => log.append_as_follower(&batches),
            LogOp::TruncateTo { offset } => log.truncate_to(*offset),
            LogOp::TruncateFullyAndStartAt { offset } => log.truncate_fully_and_start_at(*offset),
            LogOp::AdvanceHighWatermark { offset } => log.advance_high_watermark(*offset),
            LogOp::AssignEpochStartOffset { epoch, offset } => {
                log.assign_epoch_start_offset(*epoch, *offset)
            }
        };
        match result {
            Ok(()) => Ok(()),
            // The model ignores a refused operation too; the comparison tells if it refused it.
            Err(FileLogError::Log(_)) => {
                summary.refused_operations += 1;
                Ok(())
            }
            Err(e) => Err(ctx.disk(place, format!("{op:?}"), e)),
        }
    }

    /// Feeds `input` to the kernel of broker `b` of cluster `c` and checks its effects.
    fn feed(
        &mut self,
        ctx: &Ctx,
        config: &ModelConfig,
        c: ClusterId,
        b: BrokerId,
        input: &kmirror_kernel::input::Input,
        expected: &[kmirror_kernel::effect::Effect],
    ) -> Result<(), ReplayError> {
        let place = Place::Replica {
            cluster: c,
            broker: b,
        };
        let replica = self.replica_mut(ctx, c, b)?;
        let log = replica
            .log
            .as_ref()
            .expect("a replica's log is open outside reopen");
        let Some(kernel) = replica.kernel.as_mut() else {
            return Err(ctx.journal(
                place,
                format!("the model feeds {input:?} to the kernel of a broker that is down"),
            ));
        };
        let effects = kernel
            .handle(&config.kernel, input.clone(), log)
            .unwrap_or_default();
        if effects != expected {
            return Err(ctx.mismatch(
                place,
                format!("effects of kernel input {input:?}"),
                format!("{expected:?}"),
                format!("{effects:?}"),
            ));
        }
        Ok(())
    }

    /// Writes the records that turn the disk coordinator of each cluster into the model's,
    /// then rebuilds it from the whole log read back from disk.
    fn sync_mirror_state(
        &mut self,
        ctx: &Ctx,
        world: &World,
        summary: &mut ReplaySummary,
    ) -> Result<(), ReplayError> {
        for c in ClusterId::BOTH {
            let target = &world.cluster(c).coordinator;
            let records = coordinator_diff(&self.cluster(c).coordinator, target);
            let empty = self.empty_coordinator.clone();
            let cluster = self.cluster_mut(c);
            let log = cluster
                .state_log
                .as_mut()
                .expect("the __mirror_state log is open outside reopen");
            if !records.is_empty() {
                log.append(&records, APPEND_TIMESTAMP_BASE_MS + ctx.step as i64)
                    .map_err(|e| ctx.mirror_state(c, e))?;
                summary.mirror_state_records += records.len();
            }
            let read = log.records().map_err(|e| ctx.mirror_state(c, e))?;
            cluster.coordinator = empty.replay(read.into_iter().map(|(_, r)| r));
        }
        Ok(())
    }

    /// Drops every log without closing it and reopens it (recovery included).
    fn reopen_all(&mut self, ctx: &Ctx, summary: &mut ReplaySummary) -> Result<(), ReplayError> {
        let empty = self.empty_coordinator.clone();
        for c in ClusterId::BOTH {
            let cluster = self.cluster_mut(c);
            for (b, replica) in cluster.replicas.iter_mut().enumerate() {
                let place = Place::Replica {
                    cluster: c,
                    broker: b as BrokerId,
                };
                replica
                    .reopen(summary)
                    .map_err(|e| ctx.disk(place, "reopening the log", e))?;
            }
            drop(cluster.state_log.take());
            let log = MirrorStateLog::open(
                &cluster.state_log_dir,
                empty.table().clone(),
                REPLAY_LOG_CONFIG,
            )
            .map_err(|e| ctx.mirror_state(c, e))?;
            summary.reopened_logs += 1;
            let read = log.records().map_err(|e| ctx.mirror_state(c, e))?;
            cluster.coordinator = empty.clone().replay(read.into_iter().map(|(_, r)| r));
            cluster.state_log = Some(log);
        }
        Ok(())
    }

    /// Compares every replica and coordinator with the model's world.
    fn compare(
        &self,
        ctx: &Ctx,
        world: &World,
        summary: &mut ReplaySummary,
    ) -> Result<(), ReplayError> {
        for c in ClusterId::BOTH {
            let model = world.cluster(c);
            let disk = self.cluster(c);
            if model.replicas.len() != disk.replicas.len() {
                return Err(ctx.journal(
                    Place::Replica {
                        cluster: c,
                        broker: 0,
                    },
                    format!(
                        "the model has {} replicas, the disk world {}",
                        model.replicas.len(),
                        disk.replicas.len()
                    ),
                ));
            }
            for (b, (m, d)) in model.replicas.iter().zip(&disk.replicas).enumerate() {
                let place = Place::Replica {
                    cluster: c,
                    broker: b as BrokerId,
                };
                if m.mirror != d.kernel {
                    return Err(ctx.mismatch(
                        place,
                        "kernel state",
                        format!("{:?}", m.mirror),
                        format!("{:?}", d.kernel),
                    ));
                }
                compare_log(ctx, place, &m.log, d.log())?;
                summary.replica_comparisons += 1;
            }
            if model.coordinator != disk.coordinator {
                return Err(ctx.mismatch(
                    Place::MirrorState { cluster: c },
                    "coordinator rebuilt from the log",
                    format!("{:?}", model.coordinator.records()),
                    format!("{:?}", disk.coordinator.records()),
                ));
            }
        }
        Ok(())
    }
}

/// Compares one replica's disk log with the model's log.
fn compare_log(ctx: &Ctx, place: Place, model: &MemLog, disk: &FileLog) -> Result<(), ReplayError> {
    let offsets = [
        (
            "log start offset",
            model.log_start_offset(),
            disk.log_start_offset(),
        ),
        (
            "log end offset",
            model.log_end_offset(),
            disk.log_end_offset(),
        ),
        (
            "high watermark",
            model.high_watermark(),
            disk.high_watermark(),
        ),
        (
            "last stable offset",
            model.last_stable_offset(),
            disk.last_stable_offset(),
        ),
    ];
    for (field, m, d) in offsets {
        if m != d {
            return Err(ctx.mismatch(place, field, m.to_string(), d.to_string()));
        }
    }
    let read = disk
        .try_read(disk.log_start_offset(), disk.log_end_offset())
        .map_err(|e| ctx.disk(place, "reading the log back", e))?;
    let on_disk: Vec<BatchHeader> = read.iter().map(RawBatch::header).collect();
    let in_model: Vec<BatchHeader> = model.batches().iter().copied().collect();
    if on_disk != in_model {
        let i = on_disk
            .iter()
            .zip(&in_model)
            .position(|(d, m)| d != m)
            .unwrap_or(on_disk.len().min(in_model.len()));
        let show =
            |h: Option<&BatchHeader>| h.map_or_else(|| "no batch".to_owned(), |h| format!("{h:?}"));
        return Err(ctx.mismatch(
            place,
            format!(
                "batch {i} (of {} in the model, {} on disk)",
                in_model.len(),
                on_disk.len()
            ),
            show(in_model.get(i)),
            show(on_disk.get(i)),
        ));
    }
    if model.epoch_cache() != disk.epoch_cache() {
        return Err(ctx.mismatch(
            place,
            "epoch cache",
            show_epochs(model.epoch_cache()),
            show_epochs(disk.epoch_cache()),
        ));
    }
    if model.producer_state() != disk.producer_state() {
        return Err(ctx.mismatch(
            place,
            "producer state",
            format!("{:?}", model.producer_state()),
            format!("{:?}", disk.producer_state()),
        ));
    }
    // The checkpoint files, re-read from disk.
    let file = disk.dir().join(LEADER_EPOCH_FILE);
    let text = read_file(ctx, place, &file)?;
    match kmirror_kernel::checkpoint::decode(&text) {
        Ok(cache) if cache == *model.epoch_cache() => {}
        Ok(cache) => {
            return Err(ctx.mismatch(
                place,
                format!("{LEADER_EPOCH_FILE} file"),
                show_epochs(model.epoch_cache()),
                show_epochs(&cache),
            ))
        }
        Err(e) => {
            return Err(ctx.mismatch(
                place,
                format!("{LEADER_EPOCH_FILE} file"),
                show_epochs(model.epoch_cache()),
                format!("unreadable: {e}"),
            ))
        }
    }
    for (name, expected) in [
        (HIGH_WATERMARK_FILE, model.high_watermark()),
        (LOG_START_OFFSET_FILE, model.log_start_offset()),
    ] {
        let file = disk.dir().join(name);
        let text = read_file(ctx, place, &file)?;
        let found = match decode_offset_checkpoint(&text, &file, disk.topic_partition()) {
            Ok(Some(offset)) => offset.to_string(),
            Ok(None) => "no entry for the partition".to_owned(),
            Err(e) => format!("unreadable: {e}"),
        };
        if found != expected.to_string() {
            return Err(ctx.mismatch(place, format!("{name} file"), expected.to_string(), found));
        }
    }
    Ok(())
}

fn read_file(ctx: &Ctx, place: Place, file: &Path) -> Result<String, ReplayError> {
    fs::read_to_string(file).map_err(|e| {
        ctx.disk(
            place,
            format!("reading {}", file.display()),
            FileLogError::io("read", file, e),
        )
    })
}

/// An epoch cache as `[epoch@start ...]`.
fn show_epochs(cache: &EpochCache) -> String {
    let entries: Vec<String> = cache
        .entries()
        .map(|e| format!("{}@{}", e.epoch, e.start_offset))
        .collect();
    format!("[{}]", entries.join(" "))
}

/// The records that turn `from` into `to`: a value for every key whose value is new or
/// changed, a tombstone for every key `to` no longer has.
fn coordinator_diff(from: &Coordinator, to: &Coordinator) -> Vec<MirrorStateRecord> {
    let mut records = Vec::new();
    for (partition, value) in to.states() {
        if from.read_state(partition) != Some(value) {
            records.push(MirrorStateRecord::PartitionState {
                partition: partition.clone(),
                value: value.clone(),
            });
        }
    }
    for (partition, _) in from.states() {
        if to.read_state(partition).is_none() {
            records.push(MirrorStateRecord::PartitionStateTombstone(
                partition.clone(),
            ));
        }
    }
    for (partition, value) in to.last_mirrored_epochs() {
        if from.read_last_mirrored_epoch(partition) != Some(value) {
            records.push(MirrorStateRecord::LastMirroredEpochs {
                partition: partition.clone(),
                value: *value,
            });
        }
    }
    for (partition, _) in from.last_mirrored_epochs() {
        if to.read_last_mirrored_epoch(partition).is_none() {
            records.push(MirrorStateRecord::LastMirroredEpochsTombstone(
                partition.clone(),
            ));
        }
    }
    records
}
