//! The `kmirror` commands that run the kernel on a node destination's real logs: `mirror`,
//! `stop`, `pause`, `resume`, `status`, `verify`, `sync`, `serve` and `demo`. This module holds
//! their arguments and dispatches them ([`crate::node_cli`] does the work); `verify`'s report
//! and the binary's clock ([`SystemClock`], the only place that reads the time or sleeps) live
//! here too.
//!
//! A single-partition cluster directory (the format before the node destination) is refused by
//! every command with a message naming `kmirror convert`, which makes a node destination of it.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use clap::{Args, Subcommand, ValueEnum};

use kmirror_harness::clock::Clock;
use kmirror_harness::file_log::FlushPolicy;
use kmirror_harness::node::driver::DEFAULT_MAX_FETCH_BATCHES;
use kmirror_harness::wire::SecurityConfig;

/// The commands on real logs (flattened into the `kmirror` binary's commands).
#[derive(Subcommand, Debug)]
pub enum LogCommand {
    /// Mirror topics of a live Kafka cluster into a node destination (created if missing).
    ///
    /// A new destination gets --replicas replicas of every partition (default 1) and the mirror
    /// --mirror-name (default: the source's cluster id). The source is read as a
    /// read-committed consumer over Kafka's wire protocol. Without --until-caught-up it keeps
    /// following the source, printing a progress line every second; interrupting it is safe
    /// (everything acknowledged is on disk, and the next run resumes from the persisted state).
    Mirror(Box<MirrorArgs>),
    /// Fail over: remove the topic from its mirror and drive it to STOPPED.
    ///
    /// RemoveTopicsFromMirror sets mirror.name=MIRROR.removed; the kernel then removes the
    /// fetcher, bumps the leader epoch, truncates the log to its LSO, records the LME, appends
    /// MIRROR_PID_RESET and makes the partition writable. Re-running it after a crash finishes
    /// the same stop.
    ///
    /// When a running `kmirror mirror --topics` holds the destination, the request is handed
    /// to it through DIR/control/ and applied between fetch rounds; its per-topic answer is
    /// printed once the partitions are STOPPED (no mirror claiming it within 10 s: the request
    /// is withdrawn and nothing changes).
    Stop(StopArgs),
    /// Pause mirroring and drive the partition to PAUSED.
    ///
    /// PauseMirrorTopics sets mirror.name=MIRROR.paused; the fetcher is removed and the
    /// partition stays read-only. When a running `kmirror mirror --topics` holds the
    /// destination, the request goes to it through DIR/control/ (see `stop`).
    Pause(PauseArgs),
    /// Resume a paused mirror, then mirror.
    ///
    /// ResumeMirrorTopics sets mirror.name=MIRROR again; with --until-caught-up it then
    /// mirrors like `kmirror mirror`. When a running `kmirror mirror --topics` holds the
    /// destination, the request goes to it through DIR/control/ (see `stop`), which fetches
    /// the resumed topics itself.
    Resume(ResumeArgs),
    /// Show a node destination: every partition's state, LEO, HW, LSO, leader epoch and lag.
    ///
    /// Reads only; while a following `kmirror mirror` holds the destination, shows the status
    /// that process last wrote.
    Status(StatusArgs),
    /// CRC-check every batch of every log of a node destination (`FileLog` opened with
    /// `Verify::All`).
    ///
    /// Opening a log after a crash checks CRCs only from its recovery point on and trusts what
    /// was flushed below it (Kafka's recovery); this reads every byte of every log (every
    /// partition, its follower replicas and every __mirror_state partition) and prints one
    /// line per log, a damaged batch below the recovery point named with the file and byte
    /// position. Repairs only what opening repairs (a torn tail past the recovery point). Exit
    /// code 0: every log passed; 1: some log is damaged; 2: DIR cannot be scanned (missing,
    /// not a destination, in use).
    Verify(VerifyArgs),
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
    /// leaves MIRRORING / PAUSED. See docs/sync.md.
    Sync(crate::sync_cli::SyncArgs),
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
    /// Stop once the destination caught up with the source and its followers with it.
    #[arg(long)]
    pub until_caught_up: bool,
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
pub struct MirrorArgs {
    /// The source cluster's brokers to bootstrap from: one or more `host:port`, separated by
    /// commas.
    #[arg(long, value_name = "HOST:PORT[,HOST:PORT...]", required = true)]
    pub source_bootstrap: Option<String>,
    /// How to connect to --source-bootstrap: a Kafka client.properties file
    /// (security.protocol, ssl.truststore.location as PEM, ssl.keystore.location,
    /// ssl.endpoint.identification.algorithm, sasl.mechanism, sasl.jaas.config; see
    /// docs/live-source.md). Default: PLAINTEXT.
    #[arg(long, value_name = "FILE", requires = "source_bootstrap")]
    pub source_config: Option<PathBuf>,
    /// Topics to mirror (every partition of each): names and globs separated by commas, e.g.
    /// 'orders,pay.*' (see docs/node.md).
    #[arg(long, value_name = "LIST", required = true)]
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
    /// The node destination (created if it does not exist or is empty).
    #[arg(long, value_name = "DIR")]
    pub dest: PathBuf,
    /// Number of replicas of every partition of a new destination (1 leader + N-1 in-process
    /// followers; default 1); checked against an existing one.
    #[arg(long, value_name = "N")]
    pub replicas: Option<u32>,
    /// The mirror name of a new destination (default: the source's cluster id).
    #[arg(long, value_name = "NAME")]
    pub mirror_name: Option<String>,
    /// How long to run.
    #[command(flatten)]
    pub run: RunArgs,
    /// Sync topic configs, group offsets and ACLs from the source in this
    /// process, a round every MS milliseconds between fetch rounds (and one at the end of an
    /// --until-caught-up run); see docs/sync.md.
    #[arg(long, value_name = "MS")]
    pub sync_interval_ms: Option<u64>,
    /// What --sync-interval-ms syncs.
    #[command(flatten)]
    pub sync: crate::sync_cli::SyncPolicyArgs,
    /// Serve the node destination to Kafka clients while it mirrors.
    #[command(flatten)]
    pub serve: crate::serve_cli::ListenArgs,
}

/// `kmirror stop`.
#[derive(Args, Debug)]
pub struct StopArgs {
    /// The node destination.
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

/// `kmirror pause`.
#[derive(Args, Debug)]
pub struct PauseArgs {
    /// The node destination.
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
    /// The node destination.
    #[arg(long, value_name = "DIR")]
    pub dest: PathBuf,
    /// The topics of a node destination to resume (names and globs).
    #[arg(long, value_name = "LIST")]
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
    /// The node destination.
    #[arg(long, visible_alias = "dir", value_name = "DIR")]
    pub dest: PathBuf,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// `kmirror verify`.
#[derive(Args, Debug)]
pub struct VerifyArgs {
    /// The node destination to check.
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,
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

/// Runs a command on real logs; `Err` is the message for `kmirror: <message>` (exit code 2).
pub fn run(command: LogCommand) -> Result<ExitCode, String> {
    match command {
        LogCommand::Mirror(args) => crate::node_cli::mirror(*args),
        LogCommand::Stop(args) => crate::node_cli::stop(args),
        LogCommand::Pause(args) => crate::node_cli::pause(args),
        LogCommand::Resume(args) => crate::node_cli::resume(args),
        LogCommand::Status(args) => crate::node_cli::status(args),
        LogCommand::Verify(args) => crate::node_cli::verify(args),
        LogCommand::Demo(args) => crate::demo::run_command(args),
        LogCommand::Sync(args) => crate::sync_cli::sync(args),
        LogCommand::Serve(args) => crate::serve_cli::serve(args),
    }
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
