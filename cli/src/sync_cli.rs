//! `kmirror sync`: the binary's side of a node destination's metadata sync (it sleeps between
//! periodic rounds; the library never does), and the policy arguments it shares with
//! `kmirror mirror --sync-interval-ms`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{ArgGroup, Args};
use kmirror_kernel::state::MirrorState;
use kmirror_kernel::sync::acl::{AclFilter, ResourceType};
use kmirror_kernel::sync::gate::SyncRefused;
use kmirror_kernel::sync::pattern::{Glob, NameFilter};

use kmirror_harness::node::{
    NodeDriver, NodeDriverOptions, NodeError, NodeSync, NodeSyncPolicy, NodeSyncReport,
};
use kmirror_harness::sync::SyncError;
use kmirror_harness::wire::{KafkaMetadataSource, MetadataSourceOptions};

/// `kmirror sync`.
#[derive(Args, Debug)]
#[command(group(ArgGroup::new("mode").required(true).args(["once", "interval_ms"])))]
pub struct SyncArgs {
    /// A broker of the source cluster: `host:port`.
    #[arg(long, value_name = "HOST:PORT")]
    pub source_bootstrap: String,
    /// How to connect to --source-bootstrap: a Kafka client.properties file (TLS, SASL; see
    /// docs/live-source.md). Default: PLAINTEXT.
    #[arg(long, value_name = "FILE")]
    pub source_config: Option<PathBuf>,
    /// The node destination, which no `kmirror mirror --topics` holds (that one syncs itself
    /// with --sync-interval-ms).
    #[arg(long, value_name = "DIR")]
    pub dest: PathBuf,
    /// Run one round; exit code 1 when no topic takes part (none is MIRRORING or PAUSED).
    #[arg(long)]
    pub once: bool,
    /// Run a round every MS milliseconds until every topic left MIRRORING / PAUSED (a stop is
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
    fn filters(&self) -> Result<Option<Vec<AclFilter>>, String> {
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

    /// The policy of a node destination's sync.
    pub fn node_policy(&self) -> Result<NodeSyncPolicy, String> {
        let mut policy = NodeSyncPolicy::default();
        policy.configs.excluded = self.exclude_config.iter().cloned().collect();
        policy.groups.groups = self.group_filter();
        policy.acl_filters = self.filters()?;
        policy.acl_principals = Glob::new(&self.acl_principals);
        Ok(policy)
    }
}

fn parse_acl_filter(text: &str) -> Result<AclFilter, String> {
    let invalid = |why: String| {
        format!("--acl-filter {text:?}: {why}; write TYPE:GLOB, e.g. TOPIC:orders or GROUP:*")
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

/// One round on the node destination, opened and locked for the round, so it runs only while
/// no `kmirror mirror --topics` holds it (that process syncs itself with `--sync-interval-ms`).
/// `Err`: the round could not start (the message for the user); `Ok(Err(..))`: the round
/// failed.
fn round(args: &SyncArgs) -> Result<Result<NodeSyncReport, SyncError>, String> {
    // Bad arguments are refused before the node is opened (and its logs recovered).
    let policy = args.policy.node_policy()?;
    let security = crate::log_cli::source_security(args.source_config.as_deref())?;
    let driver = match NodeDriver::open(&args.dest, None, NodeDriverOptions::default()) {
        Err(NodeError::Busy { dir }) => {
            return Err(format!(
                "{} is held by a running kmirror (its .lock is taken), most likely `kmirror \
                 mirror --topics`: run the sync inside that process with --sync-interval-ms MS \
                 (see docs/sync.md), or sync when it ends",
                dir.display()
            ))
        }
        other => other.map_err(|e| e.to_string())?,
    };
    let first = driver
        .dest()
        .meta()
        .topics
        .keys()
        .next()
        .cloned()
        .unwrap_or_default();
    let mut source = KafkaMetadataSource::new(
        &args.source_bootstrap,
        &first,
        MetadataSourceOptions::default(),
    )
    .with_security(security);
    let report = NodeSync::new(policy, 1).round(&driver, &mut source);
    driver.close().map_err(|e| e.to_string())?;
    Ok(report)
}

/// `kmirror sync --dest NODE`: a round, or one per interval; a round in which no topic takes
/// part refuses `--once` (exit code 1) and ends the periodic mode when every topic left its
/// mirror.
pub fn sync(args: SyncArgs) -> Result<ExitCode, String> {
    let ended = |report: &NodeSyncReport| {
        report.topics.is_empty()
            && !report.left_out.is_empty()
            && report.left_out.iter().all(|(_, r)| ends_sync(r))
    };
    let Some(interval_ms) = args.interval_ms.filter(|_| !args.once) else {
        let report = round(&args)?.map_err(|e| e.to_string())?;
        print!("{}", report.render());
        return Ok(if report.topics.is_empty() {
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
        match round(&args)? {
            Ok(report) => {
                print!("round {rounds}: {}", report.render());
                if ended(&report) {
                    println!("kmirror: the destination owns its metadata now; sync ends");
                    return Ok(ExitCode::SUCCESS);
                }
            }
            // A broker that is down for a while: the next round tries again.
            Err(e @ SyncError::SourceUnavailable { .. }) => {
                println!("round {rounds}: {e}; round skipped")
            }
            Err(e) => return Err(e.to_string()),
        }
        if args.max_rounds.is_some_and(|m| rounds >= m) {
            return Ok(ExitCode::SUCCESS);
        }
        std::thread::sleep(Duration::from_millis(interval_ms));
    }
}
