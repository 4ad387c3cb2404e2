//! The `kmirror` commands that run the kernel on real logs: `mirror`, `stop`, `start`, `pause`,
//! `resume`, `status`, `produce` and `demo`.
//!
//! Every command works on cluster directories (see [`cluster`](kmirror_harness::driver::cluster) for the
//! layout and the `cluster.properties` format). Mirror requests (`start`, `stop`, `pause`,
//! `resume`) go through the kernel's controller functions, which answer per topic with Kafka's
//! error codes; the new `mirror.name` is persisted, then the partition's kernel is driven until
//! it settles. Errors are typed ([`DriverError`]) and reported by the binary as
//! `kmirror: <message>` with exit code 2.
//!
//! This module is the binary's side of the library: it is the only place that reads the clock
//! ([`SystemClock`]) or sleeps.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use clap::{Args, Subcommand, ValueEnum};
use kmirror_kernel::config::{MirrorConfig, RetryPolicy, StopStrategy};
use kmirror_kernel::controller::MirrorRequest;
use kmirror_kernel::desired::DesiredState;
use kmirror_kernel::log::LogView;
use kmirror_kernel::state::MirrorState;
use kmirror_kernel::types::{MirrorName, TopicId};

use kmirror_harness::driver::cluster::{ClusterConfig, ClusterDir};
use kmirror_harness::driver::LocalSource;
use kmirror_harness::driver::{
    Clock, Cluster, ClusterStatus, Driver, DriverError, DriverOptions, Event, RunEnd, Until,
    DEFAULT_MAX_FETCH_BATCHES,
};
use kmirror_harness::file_log::{FileLog, FlushPolicy, TopicPartition, Verify};
use kmirror_harness::mirror_state_log::MirrorStateLog;
use kmirror_harness::producer::{self, ProduceOp};
use kmirror_harness::source::{Source, SourceError};
use kmirror_harness::topic_partition::parse_topic_id;
use kmirror_harness::wire::{KafkaSource, SecurityConfig};

/// The commands on real logs (flattened into the `kmirror` binary's commands).
#[derive(Subcommand, Debug)]
pub enum LogCommand {
    /// Mirror a source cluster directory, or a live Kafka broker's topic, into a destination
    /// (created if missing).
    ///
    /// The destination gets --replicas replicas (default 3) and mirror.name=<the source's
    /// cluster.name> (a live broker's cluster id) when it is created. With --source-bootstrap
    /// HOST:PORT --topic NAME the source is a running Kafka broker, read as a read-committed
    /// consumer over its wire protocol. Without --once or --until-caught-up it keeps following the source, printing a progress
    /// line every second; interrupting it is safe (everything acknowledged is on disk, and the
    /// next run resumes from the persisted state).
    Mirror(Box<MirrorArgs>),
    /// Fail over: remove the topic from its mirror and drive it to STOPPED.
    ///
    /// RemoveTopicsFromMirror sets mirror.name=MIRROR.removed; the kernel then removes the
    /// fetcher, bumps the leader epoch, truncates the log to its LSO, records the LME, appends
    /// MIRROR_PID_RESET and makes the partition writable. Re-running it after a crash finishes
    /// the same stop.
    ///
    /// On a node destination (--topics) held by a running `kmirror mirror --topics`, the
    /// request is handed to that mirror through DIR/control/ and applied by it between fetch
    /// rounds; its per-topic answer is printed once the partitions are STOPPED (no mirror
    /// claiming it within 10 s: the request is withdrawn and nothing changes).
    Stop(StopArgs),
    /// Add a topic to a mirror (first time, or failback), then mirror.
    ///
    /// AddTopicsToMirror on the destination, with the mirror named after the source (created on
    /// the destination if needed): a topic that is not mirrored, or a STOPPED one (failback:
    /// the old source mirrors from the new one). Then runs like `kmirror mirror`.
    Start(StartArgs),
    /// Pause mirroring and drive the partition to PAUSED.
    ///
    /// PauseMirrorTopics sets mirror.name=MIRROR.paused; the fetcher is removed and the
    /// partition stays read-only. On a node destination held by a running `kmirror mirror
    /// --topics`, the request goes to that mirror through DIR/control/ (see `stop`).
    Pause(PauseArgs),
    /// Resume a paused mirror, then mirror.
    ///
    /// ResumeMirrorTopics sets mirror.name=MIRROR again; then runs like `kmirror mirror`. On a
    /// node destination held by a running `kmirror mirror --topics`, the request goes to that
    /// mirror through DIR/control/ (see `stop`), which fetches the resumed topics itself.
    Resume(ResumeArgs),
    /// Show a cluster directory: state, LEO, HW, LSO, epochs, coordinator records.
    ///
    /// Prints mirror.name, the persisted mirror state record, the leader epoch and ISR, for
    /// every replica its log start, LEO, HW, LSO, epoch cache and open transactions, and the
    /// LastMirroredEpochs records the cluster's __mirror_state holds. Reads only.
    Status(StatusArgs),
    /// CRC-check every batch of every log of a destination, single-partition or node
    /// (`FileLog` opened with `Verify::All`).
    ///
    /// Opening a log after a crash checks CRCs only from its recovery point on and trusts what
    /// was flushed below it (Kafka's recovery); this reads every byte of every log (every
    /// replica and __mirror_state; on a node destination every partition and every
    /// __mirror_state partition) and prints one line per log, a damaged batch below the
    /// recovery point named with the file and byte position. Repairs only what opening repairs
    /// (a torn tail past the recovery point). Exit code 0: every log passed; 1: some log is
    /// damaged; 2: DIR cannot be scanned (missing, not a destination, in use).
    Verify(VerifyArgs),
    /// Write batches to a cluster directory as local producers (creating it with --topic).
    ///
    /// Every batch passes the produce gate: a mirrored topic is writable only once STOPPED
    /// (READ_ONLY_TOPIC otherwise). The followers replicate each batch before the next.
    ///
    /// Operations: plain:N, idem:PID:N, txn:PID:N, commit:PID, abort:PID, bump-epoch,
    /// unclean:OFFSET (PID may be PID/EPOCH). Example:
    /// `kmirror produce --dir east --topic orders plain:3 idem:1:2 txn:7:2 commit:7`
    Produce(ProduceArgs),
    /// Mirror, fail over with an open transaction, produce, fail back: step by step.
    ///
    /// Starts two nodes on loopback: producers write to east over Kafka's wire, west mirrors
    /// it, fails over while a transaction is half mirrored and takes writes, and east fails
    /// back from west; prints each step as a table.
    Demo(DemoArgs),
    /// Sync topic configs, consumer group offsets and ACLs from the source (KIP-1279).
    ///
    /// Only while the topic is MIRRORING or PAUSED: once a stop is requested the destination
    /// owns its metadata. Prints every change, skip and rejection (a bad source item is
    /// rejected alone). --once runs one round; --interval-ms runs one every MS until the topic
    /// leaves MIRRORING / PAUSED. See the README (metadata sync).
    Sync(crate::sync_cli::SyncArgs),
    /// Commit, consume or list a local consumer group of a cluster directory.
    Group(crate::sync_cli::GroupArgs),
    /// Serve a node destination to Kafka's own clients (consumers, producers, groups).
    ///
    /// The node is the only broker of its metadata and the leader of every partition.
    /// Consumers read while it mirrors (here or in a `kmirror mirror --topics ... --listen`);
    /// producers are refused with READ_ONLY_TOPIC until `kmirror stop --topics` fails the
    /// topic over, and are accepted from the next request on, without reconnecting.
    Serve(crate::serve_cli::ServeArgs),
}

/// How long to drive the kernel.
#[derive(Args, Debug, Clone)]
pub struct RunArgs {
    /// Stop after the first fetch from the source has been applied.
    #[arg(long, conflicts_with_all = ["until_caught_up", "max_fetches"])]
    pub once: bool,
    /// Stop once the destination caught up with the source and its followers with it.
    #[arg(long, conflicts_with = "max_fetches")]
    pub until_caught_up: bool,
    /// Stop after this many fetches from the source.
    #[arg(long, value_name = "N")]
    pub max_fetches: Option<u64>,
    /// Most record batches one fetch returns.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_FETCH_BATCHES)]
    pub max_batches: usize,
    /// When following the source: how often to poll it for new data (milliseconds).
    #[arg(long, value_name = "MS", default_value_t = 500)]
    pub poll_ms: u64,
    /// Give up after this many failed retries of a FAILED partition (default: retry forever).
    #[arg(long, value_name = "N")]
    pub max_retries: Option<u32>,
    /// No progress line.
    #[arg(long, short)]
    pub quiet: bool,
    /// Fault injection for crash tests: halt right after the N-th effect and wait to be killed.
    #[arg(long, value_name = "N", hide = true)]
    pub halt_after_effects: Option<u64>,
    /// When the destination's logs fsync: `kafka` (mirrored batches stay in the page cache
    /// until a segment roll or the end of the run, since the source can serve them again;
    /// __mirror_state writes and the destination's own batches are fsynced before they are
    /// acted on) or `every-append` (every append fsynced; slower).
    #[arg(long, value_name = "POLICY", default_value_t = FlushPolicy::Kafka)]
    pub flush: FlushPolicy,
}

/// `kmirror mirror`.
#[derive(Args, Debug)]
#[command(group(clap::ArgGroup::new("from").required(true).args(["source", "source_bootstrap"])))]
pub struct MirrorArgs {
    /// The source cluster directory.
    #[arg(long, value_name = "DIR")]
    pub source: Option<PathBuf>,
    /// Live Kafka brokers to mirror from, instead of a directory (with --topic, or --topics
    /// for a node destination): one or more `host:port`, separated by commas.
    #[arg(long, value_name = "HOST:PORT[,HOST:PORT...]")]
    pub source_bootstrap: Option<String>,
    /// How to connect to --source-bootstrap: a Kafka client.properties file
    /// (security.protocol, ssl.truststore.location as PEM, ssl.keystore.location,
    /// ssl.endpoint.identification.algorithm, sasl.mechanism, sasl.jaas.config; see
    /// docs/live-source.md). Default: PLAINTEXT.
    #[arg(long, value_name = "FILE", requires = "source_bootstrap")]
    pub source_config: Option<PathBuf>,
    /// The topic to mirror from the broker of --source-bootstrap.
    #[arg(long, value_name = "NAME", requires = "source_bootstrap")]
    pub topic: Option<String>,
    /// Topics to mirror into a node destination (many topics and partitions, one process):
    /// names and globs separated by commas, e.g. 'orders,pay.*' (see docs/node.md).
    #[arg(
        long,
        value_name = "LIST",
        requires = "source_bootstrap",
        conflicts_with_all = ["topic", "source"]
    )]
    pub topics: Option<String>,
    /// With --topics: globs of topics not to mirror even when a glob of --topics matches them
    /// (a topic named exactly in --topics is mirrored anyway), applied again at every refresh
    /// of the source's metadata; '' excludes nothing.
    #[arg(long, value_name = "LIST", requires = "topics", default_value = "__*")]
    pub exclude: String,
    /// With --topics: how often a following mirror refreshes the source's metadata, so that
    /// topics and partitions created at the source are mirrored (and deleted ones noticed)
    /// within that time.
    #[arg(long, value_name = "MS", requires = "topics", default_value_t = 30_000)]
    pub metadata_refresh_ms: u64,
    /// With --topics: how many Fetches each source broker has in flight at once, each on its
    /// own connection with a share of the broker's partitions. Default: as many as the
    /// bandwidth-delay product needs, 1 GiB/s times the round trip measured to the source
    /// over 10 MiB answers (one on a local network, six at 50 ms); see docs/live-source.md.
    #[arg(long, value_name = "N", requires = "topics")]
    pub fetches_in_flight: Option<std::num::NonZeroUsize>,
    /// With --topics: also mirror again the selected topics that were failed over
    /// (`kmirror stop`), truncating each partition by the last-mirrored-epoch rule. Without it
    /// such topics are skipped. The command first prints what each partition loses and does
    /// nothing more unless --yes is given (or nothing is lost).
    #[arg(long, requires = "topics")]
    pub failback: bool,
    /// With --failback: go ahead even though the failback truncates local records.
    #[arg(long, requires = "failback")]
    pub yes: bool,
    /// The partition to mirror from the broker of --source-bootstrap.
    #[arg(
        long,
        value_name = "N",
        default_value_t = 0,
        requires = "source_bootstrap"
    )]
    pub partition: i32,
    /// The destination cluster directory (created if it does not exist or is empty).
    #[arg(long, value_name = "DIR")]
    pub dest: PathBuf,
    /// Number of replicas of every partition of a new destination (1 leader + N-1 in-process
    /// followers; default 1 for a node destination, 3 for a single-partition one); checked
    /// against an existing one.
    #[arg(long, value_name = "N")]
    pub replicas: Option<u32>,
    /// The mirror name of a new destination (default: the source's cluster.name).
    #[arg(long, value_name = "NAME")]
    pub mirror_name: Option<String>,
    /// The cluster.name of a new destination (default: the directory's name).
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,
    /// How long to run.
    #[command(flatten)]
    pub run: RunArgs,
    /// With --topics: sync topic configs, group offsets and ACLs from the source in this
    /// process, a round every MS milliseconds between fetch rounds (and one at the end of an
    /// --until-caught-up run); see docs/sync.md.
    #[arg(long, value_name = "MS")]
    pub sync_interval_ms: Option<u64>,
    /// What --sync-interval-ms syncs.
    #[command(flatten)]
    pub sync: crate::sync_cli::SyncPolicyArgs,
    /// Serve the node destination to Kafka clients while it mirrors (with --topics).
    #[command(flatten)]
    pub serve: crate::serve_cli::ListenArgs,
}

/// `kmirror stop`.
#[derive(Args, Debug)]
pub struct StopArgs {
    /// The destination cluster directory.
    #[arg(long, value_name = "DIR")]
    pub dest: PathBuf,
    /// The mirror to remove the topic from (default: the one mirror.name names).
    #[arg(long, value_name = "NAME")]
    pub mirror: Option<String>,
    /// The topics of a node destination to stop (names and globs, e.g. 'orders,pay.*').
    #[arg(long, value_name = "LIST")]
    pub topics: Option<String>,
    /// How STOPPING removes half-mirrored transactions.
    #[arg(long, value_enum, default_value_t = StopStrategyArg::TruncateToLso)]
    pub stop_strategy: StopStrategyArg,
    /// No progress line.
    #[arg(long, short)]
    pub quiet: bool,
    /// Fault injection for crash tests: halt right after the N-th effect and wait to be killed.
    #[arg(long, value_name = "N", hide = true)]
    pub halt_after_effects: Option<u64>,
}

/// `--stop-strategy`.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopStrategyArg {
    /// Truncate the log to its last stable offset (the KIP text's design, docs/design.md 5.4).
    TruncateToLso,
    /// Append an ABORT marker for every open transaction (the KIP's later prototype).
    AbortOpenTransactions,
}

/// `kmirror start`.
#[derive(Args, Debug)]
pub struct StartArgs {
    /// The cluster directory to add to the mirror (it must exist).
    #[arg(long, value_name = "DIR")]
    pub dest: PathBuf,
    /// The cluster directory to mirror from.
    #[arg(long, value_name = "DIR")]
    pub source: PathBuf,
    /// The name of the mirror (default: the source's cluster.name); created on the destination
    /// if it does not exist there yet.
    #[arg(long, value_name = "NAME")]
    pub mirror_name: Option<String>,
    /// How long to run.
    #[command(flatten)]
    pub run: RunArgs,
}

/// `kmirror pause`.
#[derive(Args, Debug)]
pub struct PauseArgs {
    /// The destination cluster directory.
    #[arg(long, value_name = "DIR")]
    pub dest: PathBuf,
    /// The topics of a node destination to pause (names and globs).
    #[arg(long, value_name = "LIST")]
    pub topics: Option<String>,
    /// No progress line.
    #[arg(long, short)]
    pub quiet: bool,
}

/// `kmirror resume`.
#[derive(Args, Debug)]
pub struct ResumeArgs {
    /// The destination cluster directory.
    #[arg(long, value_name = "DIR")]
    pub dest: PathBuf,
    /// The source cluster directory (default: the remembered source.dir).
    #[arg(long, value_name = "DIR")]
    pub source: Option<PathBuf>,
    /// The topics of a node destination to resume (names and globs).
    #[arg(long, value_name = "LIST", conflicts_with = "source")]
    pub topics: Option<String>,
    /// With --topics --until-caught-up: how to connect to the node's source (a Kafka
    /// client.properties file, as for `kmirror mirror`).
    #[arg(long, value_name = "FILE", requires = "topics")]
    pub source_config: Option<PathBuf>,
    /// How long to run.
    #[command(flatten)]
    pub run: RunArgs,
}

/// `kmirror status`.
#[derive(Args, Debug)]
pub struct StatusArgs {
    /// The cluster directory.
    #[arg(long, visible_alias = "dir", value_name = "DIR")]
    pub dest: PathBuf,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// `kmirror verify`.
#[derive(Args, Debug)]
pub struct VerifyArgs {
    /// The destination to check (a cluster directory or a node destination).
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,
}

/// `kmirror produce`.
#[derive(Args, Debug)]
pub struct ProduceArgs {
    /// The cluster directory to write to.
    #[arg(long, value_name = "DIR")]
    pub dir: PathBuf,
    /// Create the cluster with this topic if DIR does not exist (or is empty).
    #[arg(long, value_name = "NAME")]
    pub topic: Option<String>,
    /// cluster.name of a new cluster (default: the directory's name).
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,
    /// Replicas of a new cluster.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub replicas: u32,
    /// Topic id of a new cluster, 32 hex digits (default: a fresh one).
    #[arg(long, value_name = "HEX")]
    pub topic_id: Option<String>,
    /// segment.bytes of a new cluster.
    #[arg(long, value_name = "BYTES")]
    pub segment_bytes: Option<u64>,
    /// Timestamp of the records, ms since the epoch (default: now).
    #[arg(long, value_name = "MS")]
    pub timestamp: Option<i64>,
    /// Run the operations this many times.
    #[arg(long, value_name = "K", default_value_t = 1)]
    pub repeat: u32,
    /// Print what was appended as JSON.
    #[arg(long)]
    pub json: bool,
    /// The operations, in order (see the command's description).
    #[arg(value_name = "OP")]
    pub ops: Vec<ProduceOp>,
}

/// `kmirror demo`.
#[derive(Args, Debug)]
pub struct DemoArgs {
    /// Build the nodes in DIR/east and DIR/west and keep them (default: a temporary directory,
    /// removed); neither may exist yet.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// Print the steps as JSON.
    #[arg(long)]
    pub json: bool,
}

/// The system clock: the binary's only source of time.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&mut self) -> i64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
    }

    fn sleep_until(&mut self, deadline_ms: i64) {
        let now = self.now_ms();
        if deadline_ms > now {
            std::thread::sleep(Duration::from_millis((deadline_ms - now).unsigned_abs()));
        }
    }
}

/// Runs a harness command; `Err` is the message for `kmirror: <message>` (exit code 2).
pub fn run(command: LogCommand) -> Result<ExitCode, String> {
    use kmirror_harness::node::NodeDest;
    let node =
        |dir: &Path, topics: &Option<String>| topics.is_some() || NodeDest::is_node_dest(dir);
    let result = match command {
        LogCommand::Mirror(args) if args.topics.is_some() => return crate::node_cli::mirror(*args),
        LogCommand::Stop(args) if node(&args.dest, &args.topics) => {
            return crate::node_cli::stop(args)
        }
        LogCommand::Pause(args) if node(&args.dest, &args.topics) => {
            return crate::node_cli::pause(args)
        }
        LogCommand::Resume(args) if node(&args.dest, &args.topics) => {
            return crate::node_cli::resume(args)
        }
        LogCommand::Status(args) if NodeDest::is_node_dest(&args.dest) => {
            return crate::node_cli::status(args)
        }
        LogCommand::Verify(args) if NodeDest::is_node_dest(&args.dir) => {
            return crate::node_cli::verify(args)
        }
        LogCommand::Mirror(args) if NodeDest::is_node_dest(&args.dest) => {
            return Err(format!(
                "{} is a node destination (many topics and partitions); mirror into it with \
                 --topics LIST (`kmirror mirror --source-bootstrap H:P --topics LIST --dest DIR`)",
                args.dest.display()
            ))
        }
        LogCommand::Produce(args) if NodeDest::is_node_dest(&args.dir) => {
            return Err(served_by_kafka_clients(
                &args.dir,
                "produce",
                "kafka-console-producer.sh --bootstrap-server HOST:PORT --topic TOPIC",
            ))
        }
        LogCommand::Group(args) if NodeDest::is_node_dest(args.command.dir()) => {
            return Err(served_by_kafka_clients(
                args.command.dir(),
                "group",
                "kafka-console-consumer.sh --bootstrap-server HOST:PORT --topic TOPIC --group G",
            ))
        }
        LogCommand::Mirror(args) if args.sync_interval_ms.is_some() => {
            return Err(
                "--sync-interval-ms syncs inside a node destination's mirror (--topics LIST); a \
                 single-partition destination syncs with `kmirror sync` between mirror runs"
                    .to_owned(),
            )
        }
        LogCommand::Mirror(args) => mirror(*args),
        LogCommand::Stop(args) => stop(args),
        LogCommand::Start(args) => start(args),
        LogCommand::Pause(args) => pause(args),
        LogCommand::Resume(args) => resume(args),
        LogCommand::Status(args) => status(args),
        LogCommand::Verify(args) => verify(args),
        LogCommand::Produce(args) => produce(args),
        LogCommand::Demo(args) => return crate::demo::run_command(args),
        LogCommand::Sync(args) => {
            crate::sync_cli::sync(args).map_err(|e| DriverError::Invalid(e.to_string()))
        }
        LogCommand::Serve(args) => return crate::serve_cli::serve(args),
        LogCommand::Group(args) => {
            crate::sync_cli::group(args).map_err(|e| DriverError::Invalid(e.to_string()))
        }
    };
    match result {
        Err(DriverError::Halted { effects }) => {
            // A crash test asked for this point: say so, then wait for its SIGKILL.
            eprintln!("kmirror: halted after {effects} effects; waiting to be killed");
            std::thread::sleep(Duration::from_secs(60));
            Err(format!("halted after {effects} effects and was not killed"))
        }
        other => other.map_err(|e| e.to_string()),
    }
}

/// The refusal of single-partition command `kmirror {command}` on node destination `dir`:
/// Kafka's own clients do that job there, through `kmirror serve` (`example` shows one).
fn served_by_kafka_clients(dir: &Path, command: &str, example: &str) -> String {
    let dir = dir.display();
    format!(
        "{dir} is a node destination: `kmirror {command}` works on single-partition cluster \
         directories; Kafka's own clients do this on a node destination, through \
         `kmirror serve --dest {dir} --listen HOST:PORT` (e.g. `{example}`; a mirrored topic \
         takes writes once `kmirror stop --dest {dir} --topics TOPIC` failed it over)"
    )
}

/// How long a command waits for a directory another kmirror process holds.
const BUSY_WAIT_MS: i64 = 10_000;
/// The status snapshot a following `mirror` keeps in the destination directory, shown by
/// `kmirror status` while that process holds the directory.
pub const STATUS_SNAPSHOT_FILE: &str = "status.json";

/// Runs `open` until it does not fail with [`DriverError::Busy`], for at most
/// [`BUSY_WAIT_MS`] (another command may hold the directory briefly, e.g. a following mirror
/// between two polls of its source).
fn retry_busy<T>(
    clock: &mut SystemClock,
    mut open: impl FnMut() -> Result<T, DriverError>,
) -> Result<T, DriverError> {
    let deadline = clock.now_ms() + BUSY_WAIT_MS;
    loop {
        match open() {
            Err(DriverError::Busy { .. }) if clock.now_ms() < deadline => {
                let now = clock.now_ms();
                clock.sleep_until(now + 20);
            }
            other => return other,
        }
    }
}

fn open_cluster(clock: &mut SystemClock, dir: &Path) -> Result<Cluster, DriverError> {
    retry_busy(clock, || Cluster::open(dir))
}

fn open_source(clock: &mut SystemClock, dir: &Path) -> Result<LocalSource, DriverError> {
    retry_busy(clock, || LocalSource::open(dir))
}

/// A driver for `cluster` mirroring from `source`, its logs fsyncing as `--flush` says.
fn run_driver(
    mut cluster: Cluster,
    source: Box<dyn Source>,
    run: &RunArgs,
) -> Result<Driver, DriverError> {
    cluster.leader.set_flush_policy(run.flush);
    for follower in &mut cluster.followers {
        follower.log.set_flush_policy(run.flush);
    }
    Driver::from_cluster(cluster, Some(source), options(run))
}

fn options(run: &RunArgs) -> DriverOptions {
    DriverOptions {
        mirror: MirrorConfig {
            retry: RetryPolicy {
                max_attempts: run.max_retries,
                ..RetryPolicy::default()
            },
            ..MirrorConfig::default()
        },
        max_fetch_batches: run.max_batches.max(1),
        max_follower_batches: run.max_batches.max(1),
        halt_after_effects: run.halt_after_effects,
        ..DriverOptions::default()
    }
}

fn until(run: &RunArgs) -> Until {
    if run.once {
        Until::Fetches(1)
    } else if let Some(n) = run.max_fetches {
        Until::Fetches(n)
    } else if run.until_caught_up {
        Until::Idle
    } else {
        Until::Forever {
            poll_ms: i64::try_from(run.poll_ms).unwrap_or(i64::MAX),
        }
    }
}

fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}

fn dir_name(path: &Path) -> Result<MirrorName, DriverError> {
    let name = absolute(path)
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("")
        .to_owned();
    MirrorName::new(name.clone()).map_err(|e| {
        DriverError::Invalid(format!(
            "the directory name {name:?} cannot be a cluster name ({e}); pass --name"
        ))
    })
}

fn mirror_name_arg(name: &str) -> Result<MirrorName, DriverError> {
    MirrorName::new(name)
        .map_err(|e| DriverError::Invalid(format!("invalid mirror name {name:?}: {e}")))
}

fn is_empty_or_missing(path: &Path) -> bool {
    !path.exists()
        || (path.is_dir()
            && std::fs::read_dir(path).is_ok_and(|mut entries| entries.next().is_none()))
}

/// The security of `--source-config FILE` (PLAINTEXT without one); the error names the file,
/// the line and the key, never a secret.
pub fn source_security(path: Option<&Path>) -> Result<Arc<SecurityConfig>, String> {
    match path {
        None => Ok(Arc::default()),
        Some(path) => {
            let config =
                SecurityConfig::from_file(path).map_err(|e| format!("--source-config: {e}"))?;
            if !config.ignored_keys.is_empty() {
                eprintln!(
                    "kmirror: warning: --source-config {}: ignoring {} (not read by kmirror)",
                    path.display(),
                    config.ignored_keys.join(", ")
                );
            }
            Ok(Arc::new(config))
        }
    }
}

fn check_same_topic(source: &mut dyn Source, dest: &Cluster) -> Result<(), DriverError> {
    let (topic, id) = source.topic()?;
    let config = dest.dir.config();
    if topic != config.topic || id != config.topic_id {
        return Err(DriverError::TopicMismatch {
            source_topic: format!("{}: {topic} (id {id})", source.describe()),
            dest_topic: format!(
                "{}: {} (id {})",
                dest.dir.root().display(),
                config.topic,
                config.topic_id
            ),
        });
    }
    Ok(())
}

/// Drives `driver` until `until`, with a progress line on stderr (and, when following, the
/// status snapshot) at most once a second, and whenever the persisted state changes: a
/// partition retrying from FAILED shows FAILED, not the state its retry step wrote a moment
/// before failing again.
fn drive(
    driver: &mut Driver,
    clock: &mut SystemClock,
    until: Until,
    quiet: bool,
) -> Result<RunEnd, DriverError> {
    let name = driver.cluster().dir.config().name.to_string();
    let follow = matches!(until, Until::Forever { .. });
    let mut last_print = clock.now_ms();
    let persisted = |d: &Driver| {
        d.cluster()
            .persisted_state()
            .map(|v| (v.state, v.state_epoch))
    };
    let mut last_persisted = persisted(driver);
    let mut on_step = |d: &Driver, now: i64| {
        let now_persisted = persisted(d);
        let changed = now_persisted != last_persisted;
        last_persisted = now_persisted;
        if !changed && now - last_print < 1_000 {
            return;
        }
        last_print = now;
        if follow {
            write_status_snapshot(d);
        }
        if quiet {
            return;
        }
        let p = d.progress();
        let target = p
            .source_last_stable_offset
            .map(|s| {
                let pct = if s > 0 {
                    (p.log_end_offset as f64 / s as f64 * 100.0).min(100.0)
                } else {
                    100.0
                };
                format!(" / source LSO {s} ({pct:.0}%)")
            })
            .unwrap_or_default();
        eprintln!(
            "kmirror: {name} {}  LEO {}{target}  HW {}  LSO {}  {} fetches, {} batches, {} bytes",
            p.state,
            p.log_end_offset,
            p.high_watermark,
            p.last_stable_offset,
            p.stats.fetches,
            p.stats.batches,
            p.stats.bytes
        );
    };
    driver.run(clock, until, &mut on_step)
}

/// Writes the status snapshot `kmirror status` shows while this process holds the directory
/// (best effort: a status file that cannot be written only makes `status` wait).
fn write_status_snapshot(driver: &Driver) {
    let status = ClusterStatus::of(driver.cluster());
    if let Ok(text) = serde_json::to_string_pretty(&status) {
        let _ = kmirror_harness::segment::write_atomically(
            driver.cluster().dir.root(),
            STATUS_SNAPSHOT_FILE,
            text.as_bytes(),
        );
    }
}

/// One line per notable event of a run.
fn print_events(events: &[Event]) {
    for e in events {
        let line = match e {
            Event::StateWritten {
                state,
                leader_epoch,
                state_epoch,
                error,
            } => format!(
                "state {state} persisted (leader epoch {leader_epoch}, state epoch \
                 {state_epoch}){}",
                error
                    .as_deref()
                    .map(|e| format!(": {e}"))
                    .unwrap_or_default()
            ),
            Event::LeaderTruncated { from, to, cause } => {
                format!("leader log truncated from {from} to {to} ({cause})")
            }
            Event::LeaderTruncatedFully { from, start, cause } => {
                format!("leader log emptied (LEO was {from}), restarted at {start} ({cause})")
            }
            Event::FollowerTruncated { replica, from, to } => {
                format!("follower {replica} truncated from {from} to {to}")
            }
            Event::EpochBumped { leader_epoch } => format!("leader epoch bumped to {leader_epoch}"),
            Event::LastMirroredEpochWritten { epoch, offset } => format!(
                "last mirrored epoch recorded: epoch {}, ends at offset {offset}",
                epoch.map_or("-1".to_owned(), |e| e.to_string())
            ),
            Event::PidResetAppended {
                offset,
                leader_epoch,
            } => format!(
                "MIRROR_PID_RESET appended at offset {offset} (leader epoch {leader_epoch})"
            ),
            Event::AbortMarkerAppended {
                offset,
                producer_id,
            } => format!("ABORT marker for producer {producer_id} appended at offset {offset}"),
            Event::WritableChanged { writable } => {
                format!(
                    "local producers {}",
                    if *writable { "allowed" } else { "refused" }
                )
            }
            Event::RetryScheduled { attempt, delay_ms } => {
                format!("retry {attempt} scheduled in {delay_ms} ms")
            }
            Event::RequestFailed { error } => format!("request failed: {error}"),
            Event::WriteFenced { reason } => format!("state write fenced: {reason}"),
            Event::FetcherStarted | Event::FetcherStopped => continue,
        };
        println!("  {line}");
    }
}

fn summary(driver: &Driver, end: RunEnd) -> String {
    let p = driver.progress();
    let how = match end {
        RunEnd::CaughtUp => "caught up with the source",
        RunEnd::Settled => "settled",
        RunEnd::FetchesDone => "fetch budget spent",
        RunEnd::NeedsSource => "waiting for a source",
    };
    format!(
        "{}: {} ({how}); LEO {}, HW {}, LSO {}, leader epoch {}; {} fetches, {} batches mirrored",
        driver.cluster().dir.config().name,
        p.state,
        p.log_end_offset,
        p.high_watermark,
        p.last_stable_offset,
        driver.cluster().dir.controller().leader_epoch,
        p.stats.fetches,
        p.stats.batches
    )
}

/// Prints the end of a run and picks the exit code: 1 when the partition is FAILED for good.
fn finish(mut driver: Driver, end: RunEnd) -> Result<ExitCode, DriverError> {
    print_events(&driver.take_events());
    println!("{}", summary(&driver, end));
    let failed = driver.state() == MirrorState::Failed;
    if end == RunEnd::NeedsSource {
        driver.close()?;
        return Err(DriverError::Invalid(
            "the partition needs its source to go on; run `kmirror mirror --source DIR --dest \
             DIR`"
                .to_owned(),
        ));
    }
    driver.close()?;
    Ok(if failed {
        eprintln!("kmirror: the partition is FAILED and will not be retried (see --max-retries)");
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// The configuration of a new destination of `source`: its topic name and id, `--name` (or the
/// directory's name) as `cluster.name`, and `--mirror-name` (or the source's cluster name) as
/// the mirror it is in.
fn new_destination_config(
    args: &MirrorArgs,
    source: &mut dyn Source,
) -> Result<ClusterConfig, DriverError> {
    let (topic, topic_id) = source.topic()?;
    let name = match &args.name {
        Some(n) => mirror_name_arg(n)?,
        None => dir_name(&args.dest)?,
    };
    let mirror = match &args.mirror_name {
        Some(m) => mirror_name_arg(m)?,
        None => source.cluster_name()?,
    };
    let mut config = ClusterConfig::new(name, topic, topic_id);
    config.mirror_name = Some(mirror.to_string());
    config.mirrors.insert(mirror);
    Ok(config)
}

fn mirror(args: MirrorArgs) -> Result<ExitCode, DriverError> {
    let Some(source_dir) = args.source.clone() else {
        return mirror_live(args);
    };
    let mut clock = SystemClock;
    if absolute(&source_dir) == absolute(&args.dest) {
        return Err(DriverError::Invalid(
            "the source and the destination are the same directory".to_owned(),
        ));
    }
    let mut source = open_source(&mut clock, &source_dir)?;
    let cluster = if is_empty_or_missing(&args.dest) {
        let mut config = new_destination_config(&args, &mut source)?;
        config.source_dir = Some(absolute(&source_dir));
        config.segment_bytes = source.config()?.segment_bytes;
        let dir = ClusterDir::create(&args.dest, config, args.replicas.unwrap_or(3))?;
        Cluster::open_dir(dir, true)?
    } else {
        let mut cluster = open_cluster(&mut clock, &args.dest)?;
        check_same_topic(&mut source, &cluster)?;
        check_existing_dest(&args, &cluster)?;
        let mut config = cluster.dir.config().clone();
        if config.source_dir.as_deref() != Some(&absolute(&source_dir)) {
            config.source_dir = Some(absolute(&source_dir));
            cluster.dir.set_config(config)?;
        }
        cluster
    };
    warn_if_not_mirrored(&args, &cluster)?;
    let mut driver = run_driver(cluster, Box::new(source), &args.run)?;
    let end = drive(&mut driver, &mut clock, until(&args.run), args.run.quiet)?;
    finish(driver, end)
}

/// Refuses `kmirror mirror` options that contradict an existing destination.
fn check_existing_dest(args: &MirrorArgs, cluster: &Cluster) -> Result<(), DriverError> {
    let count = cluster.dir.controller().replicas.len() as u32;
    if let Some(n) = args.replicas.filter(|n| *n != count) {
        return Err(DriverError::Invalid(format!(
            "{} has {count} replicas, not {n}; the replica count of an existing cluster \
             cannot change",
            args.dest.display()
        )));
    }
    if let Some(m) = &args.mirror_name {
        let current = cluster.dir.desired_state()?;
        if current.mirror().map(MirrorName::as_str) != Some(m.as_str()) {
            return Err(DriverError::Invalid(format!(
                "{} is not in mirror {m:?} ({}); use `kmirror start` to add it to a mirror",
                args.dest.display(),
                current
            )));
        }
    }
    Ok(())
}

/// Says so when the destination's topic is not in a mirror (it is only driven to its state).
fn warn_if_not_mirrored(args: &MirrorArgs, cluster: &Cluster) -> Result<(), DriverError> {
    match cluster.dir.desired_state()? {
        DesiredState::Mirror(_) => {}
        other => eprintln!(
            "kmirror: {} has {other}: the topic is not being mirrored (use `kmirror start` to \
             add it to a mirror); driving it to its current state",
            args.dest.display()
        ),
    }
    Ok(())
}

/// `kmirror mirror --source-bootstrap HOST:PORT --topic NAME`: a live Kafka broker as the
/// source (see [`KafkaSource`]). A new destination takes the topic's name and id from the
/// broker's Metadata and, unless --mirror-name is given, the cluster id as the mirror's name;
/// no `source.dir` is recorded. An existing destination must hold the same topic and id; when
/// the broker cannot be reached, a following mirror starts anyway and the kernel retries.
fn mirror_live(args: MirrorArgs) -> Result<ExitCode, DriverError> {
    let mut clock = SystemClock;
    let (Some(bootstrap), Some(topic)) = (&args.source_bootstrap, &args.topic) else {
        return Err(DriverError::Invalid(
            "give either --source DIR or --source-bootstrap HOST:PORT with --topic NAME (one \
             partition) or --topics LIST (a node destination)"
                .into(),
        ));
    };
    if args.partition != kmirror_harness::driver::PARTITION {
        return Err(DriverError::Invalid(format!(
            "a destination holds one partition ({topic}-{}); mirroring partition {} of a live \
             broker is not supported yet",
            kmirror_harness::driver::PARTITION,
            args.partition
        )));
    }
    let security = source_security(args.source_config.as_deref()).map_err(DriverError::Invalid)?;
    let mut source = KafkaSource::new(bootstrap, topic, args.partition, Default::default())
        .with_security(security);
    // A refused login, an untrusted certificate or a missing ACL: nothing is created or run.
    match source.check_read_access() {
        Err(e) if !e.is_connection() => return Err(DriverError::Source(SourceError::Kafka(e))),
        _ => {}
    }
    let cluster = if is_empty_or_missing(&args.dest) {
        let config = new_destination_config(&args, &mut source)?;
        let dir = ClusterDir::create(&args.dest, config, args.replicas.unwrap_or(3))?;
        Cluster::open_dir(dir, true)?
    } else {
        let cluster = open_cluster(&mut clock, &args.dest)?;
        match check_same_topic(&mut source, &cluster) {
            Err(DriverError::Source(SourceError::Kafka(e)))
                if e.is_connection() && matches!(until(&args.run), Until::Forever { .. }) =>
            {
                eprintln!("kmirror: {e}; mirroring starts when the broker answers");
            }
            other => other?,
        }
        check_existing_dest(&args, &cluster)?;
        cluster
    };
    warn_if_not_mirrored(&args, &cluster)?;
    let mut driver = run_driver(cluster, Box::new(source), &args.run)?;
    let end = drive(&mut driver, &mut clock, until(&args.run), args.run.quiet)?;
    finish(driver, end)
}

fn stop(args: StopArgs) -> Result<ExitCode, DriverError> {
    let mut clock = SystemClock;
    let cluster = open_cluster(&mut clock, &args.dest)?;
    let topic = cluster.dir.config().topic.clone();
    let mirror = match &args.mirror {
        Some(m) => m.clone(),
        None => match cluster.dir.desired_state()?.mirror() {
            Some(m) => m.to_string(),
            None => {
                return Err(DriverError::Invalid(format!(
                    "topic {topic} of {} is not in a mirror (mirror.name is empty); there is \
                     nothing to stop",
                    args.dest.display()
                )))
            }
        },
    };
    let stop_strategy = match args.stop_strategy {
        StopStrategyArg::TruncateToLso => StopStrategy::TruncateToLso,
        StopStrategyArg::AbortOpenTransactions => StopStrategy::AbortOpenTransactions,
    };
    let options = DriverOptions {
        mirror: MirrorConfig {
            stop_strategy,
            ..MirrorConfig::default()
        },
        halt_after_effects: args.halt_after_effects,
        ..DriverOptions::default()
    };
    let mut driver = Driver::from_cluster(cluster, None, options)?;
    let now = clock.now_ms();
    driver.start(now)?;
    driver.request(
        &MirrorRequest::RemoveTopics {
            mirror,
            topics: vec![topic],
        },
        now,
    )?;
    let end = drive(&mut driver, &mut clock, Until::Idle, args.quiet)?;
    let state = driver.state();
    let code = finish(driver, end)?;
    if state != MirrorState::Stopped {
        return Err(DriverError::Invalid(format!(
            "the partition settled in {state}, not STOPPED; see `kmirror status --dest {}`",
            args.dest.display()
        )));
    }
    Ok(code)
}

fn start(args: StartArgs) -> Result<ExitCode, DriverError> {
    let mut clock = SystemClock;
    if absolute(&args.source) == absolute(&args.dest) {
        return Err(DriverError::Invalid(
            "the source and the destination are the same directory".to_owned(),
        ));
    }
    let mut source = open_source(&mut clock, &args.source)?;
    let cluster = open_cluster(&mut clock, &args.dest)?;
    check_same_topic(&mut source, &cluster)?;
    let mirror = match &args.mirror_name {
        Some(m) => mirror_name_arg(m)?,
        None => source.cluster_name()?,
    };
    let topic = cluster.dir.config().topic.clone();
    let mut driver = run_driver(cluster, Box::new(source), &args.run)?;
    let now = clock.now_ms();
    // Refused requests change nothing: check before creating the mirror.
    let request = MirrorRequest::AddTopics {
        mirror: mirror.to_string(),
        topics: vec![topic],
    };
    driver.check_request(&request, Some(&mirror))?;
    driver.create_mirror(mirror, Some(absolute(&args.source)), now)?;
    driver.request(&request, now)?;
    let end = drive(&mut driver, &mut clock, until(&args.run), args.run.quiet)?;
    finish(driver, end)
}

fn pause(args: PauseArgs) -> Result<ExitCode, DriverError> {
    let mut clock = SystemClock;
    let cluster = open_cluster(&mut clock, &args.dest)?;
    let topic = cluster.dir.config().topic.clone();
    let Some(mirror) = cluster.dir.desired_state()?.mirror().cloned() else {
        return Err(DriverError::Invalid(format!(
            "topic {topic} is not in a mirror; there is nothing to pause"
        )));
    };
    let mut driver = Driver::from_cluster(cluster, None, DriverOptions::default())?;
    let now = clock.now_ms();
    driver.start(now)?;
    driver.request(
        &MirrorRequest::PauseTopics {
            mirror: mirror.to_string(),
            topics: vec![topic],
        },
        now,
    )?;
    let end = drive(&mut driver, &mut clock, Until::Idle, args.quiet)?;
    finish(driver, end)
}

fn resume(args: ResumeArgs) -> Result<ExitCode, DriverError> {
    let mut clock = SystemClock;
    let cluster = open_cluster(&mut clock, &args.dest)?;
    let config = cluster.dir.config().clone();
    let source_dir = args
        .source
        .clone()
        .or_else(|| config.source_dir.clone())
        .ok_or_else(|| {
            DriverError::Invalid("no source.dir is remembered; pass --source DIR".to_owned())
        })?;
    let mut source = open_source(&mut clock, &source_dir)?;
    check_same_topic(&mut source, &cluster)?;
    let Some(mirror) = cluster.dir.desired_state()?.mirror().cloned() else {
        return Err(DriverError::Invalid(format!(
            "topic {} is not in a mirror; there is nothing to resume",
            config.topic
        )));
    };
    let mut driver = run_driver(cluster, Box::new(source), &args.run)?;
    let now = clock.now_ms();
    driver.start(now)?;
    driver.request(
        &MirrorRequest::ResumeTopics {
            mirror: mirror.to_string(),
            topics: vec![config.topic.clone()],
        },
        now,
    )?;
    let end = drive(&mut driver, &mut clock, until(&args.run), args.run.quiet)?;
    finish(driver, end)
}

/// `kmirror verify DIR` of a single-partition cluster directory: every replica's log and
/// `__mirror_state`, opened with [`Verify::All`]. A node destination goes to
/// [`crate::node_cli::verify`]; both print with [`report_verdicts`].
fn verify(args: VerifyArgs) -> Result<ExitCode, DriverError> {
    let dir = ClusterDir::open(&args.dir)?;
    let config = dir.file_log_config();
    let leader = dir.controller().leader;
    let mut logs: Vec<(PathBuf, TopicPartition)> = dir
        .controller()
        .replicas
        .iter()
        .map(|&b| (dir.broker_dir(b), dir.topic_partition()))
        .collect();
    logs.push((dir.broker_dir(leader), MirrorStateLog::topic_partition()));
    let mut verdicts = Vec::new();
    for (log_dir, tp) in logs {
        let path = log_dir.join(tp.dir_name());
        let outcome = if path.is_dir() {
            FileLog::open_with(&log_dir, tp, config, Verify::All)
                .map(|(log, report)| {
                    scan_line(
                        &report,
                        log.segments().len(),
                        log.log_start_offset(),
                        log.log_end_offset(),
                    )
                })
                .map_err(|source| source.to_string())
        } else {
            Err(DriverError::Missing {
                path: path.clone(),
                hint: "; restore it, or recreate the cluster".into(),
            }
            .to_string())
        };
        verdicts.push(Verdict { path, outcome });
    }
    Ok(report_verdicts(&verdicts))
}

/// One log's outcome in `kmirror verify`: its summary line, or what is damaged (the error
/// names the damaged file).
pub(crate) struct Verdict {
    /// The partition directory.
    pub path: PathBuf,
    /// The summary of a log that passed, or the damage found.
    pub outcome: Result<String, String>,
}

/// The summary of a log that passed the full scan.
pub(crate) fn scan_line(
    report: &kmirror_harness::recovery::RecoveryReport,
    segments: usize,
    log_start_offset: i64,
    log_end_offset: i64,
) -> String {
    format!(
        "{} bytes in {segments} segment{}, offsets {log_start_offset}..{log_end_offset}: every \
         CRC-32C checked, all good{}",
        report.verified_bytes,
        if segments == 1 { "" } else { "s" },
        match &report.truncated_tail {
            Some(tail) => format!(
                " (an unflushed tail past the recovery point was cut at offset {}: {})",
                tail.first_lost_offset, tail.reason
            ),
            None => String::new(),
        }
    )
}

/// Prints one line per log on stdout (`DIR: summary`, or `DIR: DAMAGED: what`) and returns
/// `kmirror verify`'s exit code: 0 when every log passed; 1 when some log is damaged, after
/// one `kmirror:` line on stderr saying how many and what the first damage is. (2, for a
/// directory that cannot be scanned at all, is the caller's error.)
pub(crate) fn report_verdicts(verdicts: &[Verdict]) -> ExitCode {
    let mut damaged = Vec::new();
    for v in verdicts {
        match &v.outcome {
            Ok(line) => println!("{}: {line}", v.path.display()),
            Err(e) => {
                println!("{}: DAMAGED: {e}", v.path.display());
                damaged.push(e);
            }
        }
    }
    match damaged.first() {
        None => ExitCode::SUCCESS,
        Some(first) => {
            eprintln!(
                "kmirror: {} of {} logs {} damaged (listed above); the first: {first}",
                damaged.len(),
                verdicts.len(),
                if damaged.len() == 1 { "is" } else { "are" }
            );
            ExitCode::from(1)
        }
    }
}

fn status(args: StatusArgs) -> Result<ExitCode, DriverError> {
    let cluster = match Cluster::open(&args.dest) {
        Err(DriverError::Busy { dir }) => {
            // A following mirror holds the directory: show its latest snapshot.
            let path = dir.join(STATUS_SNAPSHOT_FILE);
            let Ok(text) = std::fs::read_to_string(&path) else {
                return Err(DriverError::Busy { dir });
            };
            if args.json {
                println!("{}", text.trim_end());
            } else {
                let status: ClusterStatus = serde_json::from_str(&text).map_err(|e| {
                    DriverError::Invalid(format!(
                        "{} is not a status snapshot: {e}",
                        path.display()
                    ))
                })?;
                print!("{}", status.render());
                eprintln!(
                    "kmirror: note: {} is held by a running kmirror; this is the snapshot it \
                     wrote to {}",
                    dir.display(),
                    path.display()
                );
            }
            return Ok(ExitCode::SUCCESS);
        }
        other => other?,
    };
    let status = ClusterStatus::of(&cluster);
    if args.json {
        let text = serde_json::to_string_pretty(&status)
            .map_err(|e| DriverError::Invalid(format!("cannot encode the status: {e}")))?;
        println!("{text}");
    } else {
        print!("{}", status.render());
        for (dir, report) in &cluster.repaired {
            eprintln!(
                "kmirror: note: {} was repaired when opened (an earlier crash): {:?}",
                dir.display(),
                report
            );
        }
    }
    // Read only: the logs are dropped without a flush.
    drop(cluster);
    Ok(ExitCode::SUCCESS)
}

/// A fresh topic id from the clock and the process id (binary-side randomness).
fn fresh_topic_id(clock: &mut SystemClock, topic: &str) -> TopicId {
    let seed = format!("{}:{}:{topic}", clock.now_ms(), std::process::id());
    let mut id = [0u8; 16];
    for (i, chunk) in id.chunks_mut(4).enumerate() {
        let h = kmirror_kernel::partitioner::murmur2(format!("{i}:{seed}").as_bytes());
        chunk.copy_from_slice(&h.to_be_bytes());
    }
    TopicId(id)
}

fn produce(args: ProduceArgs) -> Result<ExitCode, DriverError> {
    let mut clock = SystemClock;
    let mut cluster = if is_empty_or_missing(&args.dir) {
        let Some(topic) = &args.topic else {
            return Err(DriverError::Missing {
                path: args.dir.clone(),
                hint: "; pass --topic NAME to create a cluster there".to_owned(),
            });
        };
        let name = match &args.name {
            Some(n) => mirror_name_arg(n)?,
            None => dir_name(&args.dir)?,
        };
        let topic_id = match &args.topic_id {
            Some(hex) => parse_topic_id(hex).map_err(DriverError::Invalid)?,
            None => fresh_topic_id(&mut clock, topic),
        };
        let mut config = ClusterConfig::new(name, topic.clone(), topic_id);
        config.segment_bytes = args.segment_bytes;
        Cluster::open_dir(ClusterDir::create(&args.dir, config, args.replicas)?, true)?
    } else {
        let cluster = open_cluster(&mut clock, &args.dir)?;
        if let Some(t) = args
            .topic
            .as_ref()
            .filter(|t| **t != cluster.dir.config().topic)
        {
            return Err(DriverError::Invalid(format!(
                "{} hosts topic {}, not {t}",
                args.dir.display(),
                cluster.dir.config().topic
            )));
        }
        cluster
    };
    let timestamp = args.timestamp.unwrap_or_else(|| clock.now_ms());
    let ops: Vec<ProduceOp> = (0..args.repeat)
        .flat_map(|_| args.ops.iter().copied())
        .collect();
    let report = producer::produce(&mut cluster, &ops, timestamp);
    // Flush what was appended even when an operation was refused part-way.
    cluster.close()?;
    let report = report?;
    if args.json {
        let text = serde_json::to_string_pretty(&report)
            .map_err(|e| DriverError::Invalid(format!("cannot encode the report: {e}")))?;
        println!("{text}");
    } else {
        let range = match (report.appended.first(), report.appended.last()) {
            (Some(f), Some(l)) => format!(" at offsets {}..={}", f.base_offset, l.last_offset),
            _ => String::new(),
        };
        println!(
            "appended {} batches{range}; LEO {}, HW {}, LSO {}, leader epoch {}",
            report.appended.len(),
            report.log_end_offset,
            report.high_watermark,
            report.last_stable_offset,
            report.leader_epoch
        );
    }
    Ok(ExitCode::SUCCESS)
}
