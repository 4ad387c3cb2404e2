//! `kmirror sync` and `kmirror group`: the binary's side of the metadata sync (it sleeps
//! between periodic rounds and waits for a busy directory; the library never does).

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::{ArgGroup, Args, Subcommand};
use kmirror_kernel::state::MirrorState;
use kmirror_kernel::sync::acl::{AclFilter, ResourceType};
use kmirror_kernel::sync::gate::SyncRefused;
use kmirror_kernel::sync::pattern::{Glob, NameFilter};

use kmirror_harness::driver::consumer;
use kmirror_harness::driver::metadata_sync::{LocalMetadataSink, LocalMetadataSource};
use kmirror_harness::driver::{Cluster, DriverError};
use kmirror_harness::node::{
    NodeDest, NodeDriver, NodeDriverOptions, NodeError, NodeSync, NodeSyncPolicy, NodeSyncReport,
};
use kmirror_harness::sync::local::MetadataDir;
use kmirror_harness::sync::{
    run_round, MetadataSink, MetadataSource, RoundReport, SyncError, SyncPolicy,
};
use kmirror_harness::wire::{KafkaMetadataSource, KafkaSourceOptions};

/// How long a command waits for a directory another kmirror process holds.
const BUSY_WAIT: Duration = Duration::from_secs(10);

/// `kmirror sync`.
#[derive(Args, Debug)]
#[command(group(ArgGroup::new("mode").required(true).args(["once", "interval_ms"])))]
#[command(group(ArgGroup::new("from").required(true).args(["source", "source_bootstrap"])))]
pub struct SyncArgs {
    /// The source cluster directory.
    #[arg(long, value_name = "DIR")]
    pub source: Option<PathBuf>,
    /// A live Kafka broker of the source cluster, instead of a directory (the topic is the
    /// destination's).
    #[arg(long, value_name = "HOST:PORT")]
    pub source_bootstrap: Option<String>,
    /// How to connect to --source-bootstrap: a Kafka client.properties file (TLS, SASL; see
    /// docs/live-source.md). Default: PLAINTEXT.
    #[arg(long, value_name = "FILE", requires = "source_bootstrap")]
    pub source_config: Option<PathBuf>,
    /// The destination: a cluster directory, or a node destination (many topics; its
    /// source is --source-bootstrap) that no `kmirror mirror --topics` holds (that one syncs
    /// itself with --sync-interval-ms).
    #[arg(long, value_name = "DIR")]
    pub dest: PathBuf,
    /// Run one round; exit code 1 when the gate refuses it (the topic is not MIRRORING or
    /// PAUSED).
    #[arg(long)]
    pub once: bool,
    /// Run a round every MS milliseconds until the topic leaves MIRRORING / PAUSED (a stop is
    /// requested, or it is STOPPING or STOPPED), --max-rounds, or Ctrl-C.
    #[arg(long, value_name = "MS")]
    pub interval_ms: Option<u64>,
    /// With --interval-ms: stop after N rounds.
    #[arg(long, value_name = "N")]
    pub max_rounds: Option<u64>,
    /// What is synced: configs kept local, groups, ACL filters and principals.
    #[command(flatten)]
    pub policy: SyncPolicyArgs,
}

/// What a metadata sync copies (`kmirror sync`, and `kmirror mirror --topics ...
/// --sync-interval-ms MS`).
#[derive(Args, Debug, Clone)]
pub struct SyncPolicyArgs {
    /// A topic config key to keep local, besides mirror.name, throttles, min.insync.replicas,
    /// unclean.leader.election.enable and tiered storage (repeatable).
    #[arg(long = "exclude-config", value_name = "KEY")]
    pub exclude_config: Vec<String>,
    /// Groups to sync: glob patterns, `*` and `?` (repeatable; default every group).
    #[arg(long = "group", value_name = "GLOB")]
    pub groups: Vec<String>,
    /// Groups not to sync, even when matched by --group (repeatable).
    #[arg(long = "exclude-group", value_name = "GLOB")]
    pub exclude_groups: Vec<String>,
    /// ACL filter TYPE:GLOB selecting source bindings by resource, TYPE one of Kafka's resource
    /// types or ANY (repeatable; default: a TOPIC filter for each mirrored topic, and GROUP:*).
    #[arg(long = "acl-filter", value_name = "TYPE:GLOB")]
    pub acl_filters: Vec<String>,
    /// The principals the mirror may grant to (glob); a selected binding for another principal
    /// is rejected.
    #[arg(long, value_name = "GLOB", default_value = "*")]
    pub acl_principals: String,
}

impl SyncPolicyArgs {
    fn filters(&self) -> Result<Option<Vec<AclFilter>>, SyncError> {
        if self.acl_filters.is_empty() {
            return Ok(None);
        }
        self.acl_filters
            .iter()
            .map(|f| parse_acl_filter(f))
            .collect::<Result<_, _>>()
            .map(Some)
    }

    fn group_filter(&self) -> NameFilter {
        NameFilter {
            include: if self.groups.is_empty() {
                vec![Glob::any()]
            } else {
                self.groups.iter().map(Glob::new).collect()
            },
            exclude: self.exclude_groups.iter().map(Glob::new).collect(),
        }
    }

    fn policy(&self, topic: &str) -> Result<SyncPolicy, SyncError> {
        let mut policy = SyncPolicy::for_topic(topic);
        policy.configs.excluded = self.exclude_config.iter().cloned().collect();
        policy.groups.groups = self.group_filter();
        if let Some(filters) = self.filters()? {
            policy.acls.filters = filters;
        }
        policy.acls.principals = Glob::new(&self.acl_principals);
        Ok(policy)
    }

    /// The policy of a node destination's sync.
    pub fn node_policy(&self) -> Result<NodeSyncPolicy, SyncError> {
        let mut policy = NodeSyncPolicy::default();
        policy.configs.excluded = self.exclude_config.iter().cloned().collect();
        policy.groups.groups = self.group_filter();
        policy.acl_filters = self.filters()?;
        policy.acl_principals = Glob::new(&self.acl_principals);
        Ok(policy)
    }
}

fn parse_acl_filter(text: &str) -> Result<AclFilter, SyncError> {
    let invalid = |why: String| {
        SyncError::from(DriverError::Invalid(format!(
            "--acl-filter {text:?}: {why}; write TYPE:GLOB, e.g. TOPIC:orders or GROUP:*"
        )))
    };
    let (t, name) = text
        .split_once(':')
        .ok_or_else(|| invalid("no `:`".into()))?;
    let resource_type = if t.eq_ignore_ascii_case("ANY") {
        None
    } else {
        Some(
            ResourceType::from_kafka_name(t)
                .ok_or_else(|| invalid(format!("{t:?} is not a resource type")))?,
        )
    };
    Ok(AclFilter {
        resource_type,
        resource_name: Glob::new(name),
    })
}

/// The cluster directory another process holds, when that is why `e` stopped the round.
fn busy_dir(e: &SyncError) -> Option<&Path> {
    match e {
        SyncError::Cluster(cause) => match cause.downcast_ref::<DriverError>() {
            Some(DriverError::Busy { dir }) => Some(dir),
            _ => None,
        },
        _ => None,
    }
}

/// Runs `open` until it does not fail because the directory is busy, for at most
/// [`BUSY_WAIT`].
fn wait_busy<T>(mut open: impl FnMut() -> Result<T, SyncError>) -> Result<T, SyncError> {
    let start = Instant::now();
    loop {
        match open() {
            Err(e) if busy_dir(&e).is_some() && start.elapsed() < BUSY_WAIT => {
                std::thread::sleep(Duration::from_millis(20));
            }
            other => return other,
        }
    }
}

fn round(args: &SyncArgs) -> Result<RoundReport, SyncError> {
    let mut sink = wait_busy(|| LocalMetadataSink::open(&args.dest))?;
    let topic = sink.topic().0;
    let policy = args.policy.policy(&topic)?;
    let mut source: Box<dyn MetadataSource> = match (&args.source, &args.source_bootstrap) {
        (_, Some(bootstrap)) => {
            let security = crate::log_cli::source_security(args.source_config.as_deref())
                .map_err(|e| SyncError::from(DriverError::Invalid(e)))?;
            Box::new(
                KafkaMetadataSource::new(bootstrap, &topic, KafkaSourceOptions::default())
                    .with_security(security),
            )
        }
        (Some(dir), None) => Box::new(LocalMetadataSource::new(dir)),
        (None, None) => {
            return Err(SyncError::from(DriverError::Invalid(
                "give --source DIR or --source-bootstrap HOST:PORT".into(),
            )))
        }
    };
    wait_busy(|| run_round(source.as_mut(), &mut sink, &policy))
}

/// Whether a refusal means the topic left MIRRORING / PAUSED for good (the periodic mode ends).
fn ends_sync(refused: &SyncRefused) -> bool {
    matches!(
        refused,
        SyncRefused::StopRequested { .. }
            | SyncRefused::NotMirrored
            | SyncRefused::NotSyncable {
                state: MirrorState::Stopping | MirrorState::Stopped
            }
    )
}

/// One round on a node destination (many topics): opened and locked for the round, so it
/// runs only while no `kmirror mirror --topics` holds it (that process syncs itself with
/// `--sync-interval-ms`).
fn node_round(args: &SyncArgs) -> Result<NodeSyncReport, SyncError> {
    let Some(bootstrap) = &args.source_bootstrap else {
        return Err(SyncError::from(DriverError::Invalid(format!(
            "{} is a node destination, mirrored from a live cluster: give --source-bootstrap \
             HOST:PORT",
            args.dest.display()
        ))));
    };
    let driver = match NodeDriver::open(&args.dest, None, NodeDriverOptions::default()) {
        Err(NodeError::Busy { dir }) => {
            return Err(SyncError::from(DriverError::Invalid(format!(
                "{} is held by a running kmirror (its .lock is taken), most likely `kmirror \
                 mirror --topics`: run the sync inside that process with --sync-interval-ms MS \
                 (see docs/sync.md), or sync when it ends",
                dir.display()
            ))))
        }
        other => other?,
    };
    let policy = args.policy.node_policy()?;
    let first = driver
        .dest()
        .meta()
        .topics
        .keys()
        .next()
        .cloned()
        .unwrap_or_default();
    let security = crate::log_cli::source_security(args.source_config.as_deref())
        .map_err(|e| SyncError::from(DriverError::Invalid(e)))?;
    let mut source = KafkaMetadataSource::new(bootstrap, &first, KafkaSourceOptions::default())
        .with_security(security);
    let report = NodeSync::new(policy, 1).round(&driver, &mut source);
    driver.close()?;
    report
}

/// `kmirror sync --dest NODE`: like the single-partition sync, a round per interval; a round
/// in which no topic takes part refuses `--once` (exit code 1) and ends the periodic mode when
/// every topic left its mirror.
fn node_sync(args: &SyncArgs) -> Result<ExitCode, SyncError> {
    let ended = |report: &NodeSyncReport| {
        report.topics.is_empty()
            && !report.left_out.is_empty()
            && report.left_out.iter().all(|(_, r)| ends_sync(r))
    };
    let Some(interval_ms) = args.interval_ms.filter(|_| !args.once) else {
        let report = node_round(args)?;
        print!("{}", report.render());
        return Ok(if report.topics.is_empty() {
            ExitCode::from(1)
        } else {
            ExitCode::SUCCESS
        });
    };
    let mut rounds = 0u64;
    loop {
        rounds += 1;
        match node_round(args) {
            Ok(report) => {
                print!("round {rounds}: {}", report.render());
                if ended(&report) {
                    println!("kmirror: the destination owns its metadata now; sync ends");
                    return Ok(ExitCode::SUCCESS);
                }
            }
            Err(e @ SyncError::SourceUnavailable { .. }) => {
                println!("round {rounds}: {e}; round skipped")
            }
            Err(e) => return Err(e),
        }
        if args.max_rounds.is_some_and(|m| rounds >= m) {
            return Ok(ExitCode::SUCCESS);
        }
        std::thread::sleep(Duration::from_millis(interval_ms));
    }
}

/// `kmirror sync`.
pub fn sync(args: SyncArgs) -> Result<ExitCode, SyncError> {
    if NodeDest::is_node_dest(&args.dest) {
        return node_sync(&args);
    }
    if args
        .source
        .as_ref()
        .is_some_and(|s| std::path::absolute(s).ok() == std::path::absolute(&args.dest).ok())
    {
        return Err(SyncError::from(DriverError::Invalid(
            "the source and the destination are the same directory".into(),
        )));
    }
    let Some(interval_ms) = args.interval_ms.filter(|_| !args.once) else {
        let report = round(&args)?;
        print!("{}", report.render());
        return Ok(if report.started.is_err() {
            ExitCode::from(1)
        } else {
            ExitCode::SUCCESS
        });
    };
    println!(
        "kmirror: syncing every {interval_ms} ms; after a failover a consumer re-reads at most \
         what its group consumed on the source during the last {interval_ms} ms (plus one round)"
    );
    let mut rounds = 0u64;
    loop {
        rounds += 1;
        match round(&args) {
            Ok(report) => {
                print!("round {rounds}: {}", report.render());
                if let Err(r) = &report.started {
                    if ends_sync(r) {
                        println!("kmirror: the destination owns its metadata now; sync ends");
                        return Ok(ExitCode::SUCCESS);
                    }
                }
            }
            Err(e) => {
                if let Some(dir) = busy_dir(&e) {
                    println!(
                        "round {rounds}: {} stayed busy; round skipped",
                        dir.display()
                    );
                } else if matches!(e, SyncError::SourceUnavailable { .. }) {
                    // A broker that is down for a while: the next round tries again.
                    println!("round {rounds}: {e}; round skipped");
                } else {
                    return Err(e);
                }
            }
        }
        if args.max_rounds.is_some_and(|m| rounds >= m) {
            return Ok(ExitCode::SUCCESS);
        }
        std::thread::sleep(Duration::from_millis(interval_ms));
    }
}

/// `kmirror group`.
#[derive(Args, Debug)]
pub struct GroupArgs {
    /// What to do.
    #[command(subcommand)]
    pub command: GroupCommand,
}

/// The `kmirror group` commands (a local consumer group, in a cluster's `metadata/`).
#[derive(Subcommand, Debug)]
pub enum GroupCommand {
    /// Commit an offset for a group on a cluster directory's partition.
    Commit {
        /// The cluster directory.
        #[arg(long, value_name = "DIR")]
        dir: PathBuf,
        /// The group id.
        #[arg(long)]
        group: String,
        /// The offset.
        #[arg(long)]
        offset: i64,
        /// An active member of the group (repeatable; none: the group is empty).
        #[arg(long = "member", value_name = "ID")]
        members: Vec<String>,
    },
    /// Consume records as a group from its committed offset, then commit.
    Consume {
        /// The cluster directory.
        #[arg(long, value_name = "DIR")]
        dir: PathBuf,
        /// The group id.
        #[arg(long)]
        group: String,
        /// Most records to read.
        #[arg(long, default_value_t = 500)]
        max: usize,
        /// Do not commit the new position.
        #[arg(long)]
        no_commit: bool,
    },
    /// List the groups of a cluster directory with their members and offsets.
    List {
        /// The cluster directory.
        #[arg(long, value_name = "DIR")]
        dir: PathBuf,
    },
}

impl GroupCommand {
    /// The directory the command works on.
    pub fn dir(&self) -> &Path {
        match self {
            GroupCommand::Commit { dir, .. }
            | GroupCommand::Consume { dir, .. }
            | GroupCommand::List { dir } => dir,
        }
    }
}

/// `kmirror group`.
pub fn group(args: GroupArgs) -> Result<ExitCode, SyncError> {
    match args.command {
        GroupCommand::Commit {
            dir,
            group,
            offset,
            members,
        } => {
            let cluster = wait_busy(|| Ok(Cluster::open_leader_only(&dir)?))?;
            consumer::commit(&cluster, &group, offset, &members)?;
            println!("group {group}: committed offset {offset}");
        }
        GroupCommand::Consume {
            dir,
            group,
            max,
            no_commit,
        } => {
            let consumed = wait_busy(|| consumer::consume_as_group(&dir, &group, max, !no_commit))?;
            for r in &consumed.records {
                let value = r
                    .value
                    .as_deref()
                    .map_or("null".into(), |v| String::from_utf8_lossy(v).into_owned());
                println!("{}\t{value}", r.offset);
            }
            println!(
                "group {group}: read {} record(s) from offset {}; next offset {}{}",
                consumed.records.len(),
                consumed.from,
                consumed.next_offset,
                if no_commit {
                    " (not committed)"
                } else {
                    " (committed)"
                }
            );
        }
        GroupCommand::List { dir } => list(&dir)?,
    }
    Ok(ExitCode::SUCCESS)
}

fn list(dir: &Path) -> Result<(), SyncError> {
    if !dir.is_dir() {
        return Err(SyncError::from(DriverError::Missing {
            path: dir.to_path_buf(),
            hint: String::new(),
        }));
    }
    let groups = MetadataDir::of(dir).read_groups()?;
    for (g, record) in &groups.value {
        let offsets: Vec<String> = record
            .offsets
            .iter()
            .map(|(tp, o)| format!("{tp}={o}"))
            .collect();
        println!(
            "{g}\tmembers [{}]\toffsets {}",
            record.members.join(","),
            offsets.join(" ")
        );
    }
    for r in &groups.rejected {
        eprintln!("kmirror: {r}");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_busy_cluster_directory_is_found_through_the_boxed_cause() {
        let busy = SyncError::from(DriverError::Busy {
            dir: PathBuf::from("/clusters/west"),
        });
        assert_eq!(busy_dir(&busy), Some(Path::new("/clusters/west")));
        let invalid = SyncError::from(DriverError::Invalid("no".into()));
        assert_eq!(busy_dir(&invalid), None);
        assert_eq!(busy_dir(&SyncError::Halted { writes: 1 }), None);
    }
}
