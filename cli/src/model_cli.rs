//! The model subcommands of `kmirror`: `check`, `simulate`, `explore`, `show`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use clap::{Args, ValueEnum};
use kmirror_kernel::config::{
    FailedRetry, FetchIsolation, LmeCapture, StopOrder, StopStrategy, TruncationQuorum,
};
use kmirror_kernel::mutant::Mutant;
use kmirror_kernel::state::Design;
use kmirror_kernel::state_fencing::StateFencing;
use kmirror_model::config::EpochLead;
use kmirror_model::node::trace::NodeTrace;
use kmirror_model::runner::{self, CheckReport, RunOptions};
use kmirror_model::swarm::{self, SimulateOptions};
use kmirror_model::trace::Trace;
use kmirror_model::world::ClusterId;
use kmirror_model::ModelConfig;

use crate::node_model_cli::{self, NodeArgs};

/// Where `check` and `simulate` save counterexamples unless `--save-dir` says otherwise (under
/// `target/`, so a run does not leave files in the repository).
pub const DEFAULT_SAVE_DIR: &str = "target/kmirror-traces";

/// The world's bounds and the kernel variant (defaults: the default check configuration).
#[derive(Args, Debug, Clone)]
pub struct ModelArgs {
    /// Replicas per cluster.
    #[arg(long, default_value_t = ModelConfig::default_check().replicas, value_parser = clap::value_parser!(u8).range(1..=5))]
    replicas: u8,
    /// Cluster B's replicas, when they differ from --replicas (a one-replica destination beside
    /// a two-replica source keeps an unclean-source run small).
    #[arg(long, value_parser = clap::value_parser!(u8).range(1..=5))]
    replicas_b: Option<u8>,
    /// Data batches producers may append in all.
    #[arg(long, default_value_t = ModelConfig::default_check().records)]
    records: u8,
    /// Transactions producers may open.
    #[arg(long, default_value_t = ModelConfig::default_check().transactions)]
    transactions: u8,
    /// Leader elections that replace a live leader.
    #[arg(long, default_value_t = ModelConfig::default_check().elections)]
    elections: u8,
    /// Broker crashes.
    #[arg(long, default_value_t = ModelConfig::default_check().crashes)]
    crashes: u8,
    /// Lost or duplicated messages.
    #[arg(long, default_value_t = ModelConfig::default_check().network_faults)]
    network_faults: u8,
    /// Moves of a __mirror_state coordinator.
    #[arg(long, default_value_t = ModelConfig::default_check().coordinator_moves)]
    coordinator_moves: u8,
    /// ISR shrinks of a lagging follower.
    #[arg(long, default_value_t = ModelConfig::default_check().isr_shrinks)]
    isr_shrinks: u8,
    /// Accepted operator requests (stop, failback, pause, resume).
    #[arg(long, default_value_t = ModelConfig::default_check().operator_steps)]
    operator_steps: u8,
    /// Let the operator pause and resume.
    #[arg(long)]
    pause_resume: bool,
    /// Let a mirror destination elect a replica outside its ISR.
    #[arg(long)]
    unclean: bool,
    /// Let the source crash and elect a replica outside its ISR while it is mirrored (the
    /// destination must truncate by KIP-320's divergence rules).
    #[arg(long)]
    unclean_source: bool,
    /// Crashes and budgeted elections hit only the source (a cluster whose topic is in no
    /// mirror); the destination only mirrors.
    #[arg(long)]
    source_faults_only: bool,
    /// Producers write plain batches only (no idempotent producer; transactions still follow
    /// --transactions).
    #[arg(long)]
    plain_records: bool,
    /// The state machine's design: the KIP text's (`seed`, docs/design.md) or the KIP authors'
    /// prototype (`prototype`, docs/prototype.md). The options below default to the design's
    /// choice and override it one by one.
    #[arg(long, value_enum, default_value_t = DesignArg::Seed)]
    design: DesignArg,
    /// How STOPPING removes half transactions [default: the design's: seed lso, prototype abort].
    #[arg(long, value_enum)]
    stop_strategy: Option<StopArg>,
    /// The order of STOPPING's steps 2-5 (bump, truncate, lme, reset) [default: the design's:
    /// seed bump,truncate,lme,reset; prototype lme,bump,truncate,reset]; `all` (check only)
    /// checks each of the 24 orders and prints one verdict line per order.
    #[arg(long, value_name = "ORDER|all", value_parser = parse_stop_order)]
    stop_order: Option<StopOrderArg>,
    /// Who must truncate before MIRRORING (`all` = mirror.support.unclean.leader.election; in the
    /// prototype also what sends a divergence to ULE_RECOVERY instead of FAILED).
    #[arg(long, value_enum, default_value_t = QuorumArg::Isr)]
    quorum: QuorumArg,
    /// Isolation level of the mirror fetcher [default: the design's: seed committed, prototype
    /// uncommitted].
    #[arg(long, value_enum)]
    fetch_isolation: Option<IsolationArg>,
    /// Refuse to stop a PAUSED partition (the KIP's texts, and the prototype's controller and
    /// table, disagree).
    #[arg(long)]
    refuse_stop_from_paused: bool,
    /// Which state a FAILED retry writes [default: previous, the state recorded with the
    /// failure; `log-alignment` is the prototype's javadoc].
    #[arg(long, value_enum)]
    failed_retry: Option<FailedRetryArg>,
    /// The prototype's proactive bump: after appending batches within this many epochs of the
    /// leader epoch, bump it (`none`: never) [default: the design's: seed none, prototype 3].
    #[arg(long, value_name = "N|none", value_parser = parse_threshold)]
    bump_threshold: Option<Threshold>,
    /// A bump asks for at least the source's epoch plus this [default: the design's: seed 1,
    /// prototype 10; 0 is the prototype's javadoc, "bump to match"].
    #[arg(long, value_name = "N")]
    bump_increment: Option<u16>,
    /// Whether a fetched batch at exactly the leader epoch already waits for a bump [default:
    /// the design's: seed true, prototype false].
    #[arg(long, value_name = "BOOL", action = clap::ArgAction::Set)]
    bump_at_equal_epoch: Option<bool>,
    /// What the stop records as the LME: the end of the mirrored data (`before-stop-writes`, the
    /// seed) or the log's end whenever the step runs (`log-end`, the prototype) [default: the
    /// design's].
    #[arg(long, value_enum)]
    lme_capture: Option<LmeCaptureArg>,
    /// Whether the LME write is fenced by the STOPPING record's state epoch [default: the
    /// design's: seed true, prototype false].
    #[arg(long, value_name = "BOOL", action = clap::ArgAction::Set)]
    lme_fence: Option<bool>,
    /// How the coordinators number and fence state writes: `exact` (the seed's: first state
    /// epoch 0, the expected epoch must be the stored one) or `prototype` (first 1, -1 skips,
    /// fenced only by a greater stored epoch) [default: the design's].
    #[arg(long, value_enum)]
    state_fencing: Option<StateFencingArg>,
    /// Steps the fault-free scheduler may take in the bounded liveness properties.
    #[arg(long, default_value_t = ModelConfig::default_check().liveness_bound)]
    liveness_bound: u16,
    /// Metadata sync rounds a destination's leader may start (0: no sync in the model; adds
    /// property no_sync_write_after_stop).
    #[arg(long, default_value_t = 0)]
    sync_steps: u8,
    /// Which cluster's leader-epoch counter starts ahead, and by how much (`a:N` or `b:N`;
    /// `a:1` is the default world, `a:0` makes the epochs tie).
    #[arg(long, value_name = "a:N|b:N", default_value = "a:1", value_parser = parse_epoch_lead)]
    epoch_lead: EpochLead,
    /// Let the operator order a failback while the other cluster still mirrors the topic from
    /// this one (a mirror cycle), which the kernel's reverse-mirror check must refuse.
    #[arg(long)]
    mirror_cycles: bool,
    /// Check a deliberately broken kernel (a build with `--features mutants` only).
    #[arg(long, value_name = "NAME", value_parser = mutant_parser())]
    mutant: Option<Mutant>,
}

/// `--mutant`'s parser: the names and help lines of [`Mutant::ALL`], so a new kernel mutant is
/// listed by `--help` without a change here.
fn mutant_parser() -> impl TypedValueParser<Value = Mutant> {
    PossibleValuesParser::new(Mutant::ALL.map(|m| PossibleValue::new(m.name()).help(m.help())))
        .try_map(|name| name.parse::<Mutant>())
}

/// `--epoch-lead`: a cluster (`a` or `b`), a colon, its initial leader epoch.
fn parse_epoch_lead(s: &str) -> Result<EpochLead, String> {
    let (cluster, by) = s
        .split_once(':')
        .ok_or_else(|| format!("`{s}` is not CLUSTER:N (e.g. a:5 or b:5)"))?;
    let cluster = match cluster {
        "a" | "A" => ClusterId::A,
        "b" | "B" => ClusterId::B,
        other => return Err(format!("cluster `{other}` is neither a nor b")),
    };
    let by = by
        .parse()
        .map_err(|_| format!("epoch lead `{by}` is not a number from 0 to 255"))?;
    Ok(EpochLead { cluster, by })
}

/// `--stop-order`: one order, or all 24.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum StopOrderArg {
    One(StopOrder),
    All,
}

fn parse_stop_order(s: &str) -> Result<StopOrderArg, String> {
    if s == "all" {
        return Ok(StopOrderArg::All);
    }
    s.parse().map(StopOrderArg::One).map_err(|e| e.to_string())
}

/// `kmirror diagram`'s options.
#[derive(Args, Debug, Clone)]
pub struct DiagramArgs {
    /// Whose transition table: the KIP text's (`seed`) or the authors' prototype's.
    #[arg(long, value_enum, default_value_t = DesignArg::Seed)]
    design: DesignArg,
}

/// `kmirror diagram`: the design's transition table as Mermaid.
pub fn diagram(args: DiagramArgs) -> Result<ExitCode, String> {
    print_out(&kmirror_kernel::diagram::mermaid_for(args.design.into()));
    Ok(ExitCode::SUCCESS)
}

impl From<DesignArg> for Design {
    fn from(design: DesignArg) -> Design {
        match design {
            DesignArg::Seed => Design::Seed,
            DesignArg::Prototype => Design::Prototype,
        }
    }
}

/// `--bump-threshold`: a number of epochs, or `none`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Threshold(Option<u16>);

fn parse_threshold(s: &str) -> Result<Threshold, String> {
    if s == "none" {
        return Ok(Threshold(None));
    }
    s.parse()
        .map(|n| Threshold(Some(n)))
        .map_err(|_| format!("`{s}` is neither `none` nor a number of epochs from 0 to 65535"))
}

#[derive(ValueEnum, Clone, Copy, Debug)]
enum DesignArg {
    /// The KIP's text: seven states (docs/design.md).
    Seed,
    /// The KIP authors' prototype: ten states, its decisions (docs/prototype.md).
    Prototype,
}

#[derive(ValueEnum, Clone, Copy, Debug)]
enum StateFencingArg {
    /// The seed's: state epochs from 0, the expected one must be the stored one.
    Exact,
    /// The prototype's shard: from 1, -1 skips a check, fenced only by a greater stored epoch.
    Prototype,
}

#[derive(ValueEnum, Clone, Copy, Debug)]
enum LmeCaptureArg {
    /// Where the stop's own writes begin, or the log end (the seed).
    BeforeStopWrites,
    /// The log's latest epoch and end offset when the step runs (the prototype).
    LogEnd,
}

#[derive(ValueEnum, Clone, Copy, Debug)]
enum FailedRetryArg {
    /// The state recorded with the failure (the seed; the prototype's code).
    Previous,
    /// Always LOG_ALIGNMENT / PREPARING (the prototype's javadoc).
    LogAlignment,
}

#[derive(ValueEnum, Clone, Copy, Debug)]
enum StopArg {
    /// Truncate to the LSO (the KIP text, docs/design.md 5.4).
    Lso,
    /// Append ABORT markers for open transactions (the KIP's later prototype).
    Abort,
}

#[derive(ValueEnum, Clone, Copy, Debug)]
enum QuorumArg {
    /// Every ISR member.
    Isr,
    /// Every assigned replica.
    All,
}

#[derive(ValueEnum, Clone, Copy, Debug)]
enum IsolationArg {
    /// read_committed: up to the source LSO (docs/design.md 5.3).
    Committed,
    /// read_uncommitted: up to the source HW (what the KIP text's LSO truncation at stop implies).
    Uncommitted,
}

impl ModelArgs {
    /// The model configuration these arguments describe.
    pub fn config(&self) -> ModelConfig {
        let mut config = ModelConfig {
            replicas: self.replicas,
            replicas_b: self.replicas_b,
            records: self.records,
            transactions: self.transactions,
            elections: self.elections,
            crashes: self.crashes,
            network_faults: self.network_faults,
            coordinator_moves: self.coordinator_moves,
            isr_shrinks: self.isr_shrinks,
            operator_steps: self.operator_steps,
            pause_resume: self.pause_resume,
            unclean_elections: self.unclean,
            unclean_source: self.unclean_source,
            source_faults_only: self.source_faults_only,
            plain_records: self.plain_records,
            liveness_bound: self.liveness_bound,
            state_fencing: self.state_fencing.map(|f| match f {
                StateFencingArg::Exact => StateFencing::Exact,
                StateFencingArg::Prototype => StateFencing::Prototype,
            }),
            sync_steps: self.sync_steps,
            epoch_lead: self.epoch_lead,
            mirror_cycles: self.mirror_cycles,
            ..ModelConfig::default_check()
        }
        .with_design(self.design.into())
        .with_quorum(match self.quorum {
            QuorumArg::Isr => TruncationQuorum::Isr,
            QuorumArg::All => TruncationQuorum::AllReplicas,
        })
        .with_stop_from_paused(!self.refuse_stop_from_paused);
        let kernel = &mut config.kernel;
        if let Some(strategy) = self.stop_strategy {
            kernel.stop_strategy = match strategy {
                StopArg::Lso => StopStrategy::TruncateToLso,
                StopArg::Abort => StopStrategy::AbortOpenTransactions,
            };
        }
        if let Some(isolation) = self.fetch_isolation {
            kernel.fetch_isolation = match isolation {
                IsolationArg::Committed => FetchIsolation::ReadCommitted,
                IsolationArg::Uncommitted => FetchIsolation::ReadUncommitted,
            };
        }
        if let Some(StopOrderArg::One(order)) = self.stop_order {
            kernel.stop_order = order;
        }
        if let Some(retry) = self.failed_retry {
            kernel.failed_retry = match retry {
                FailedRetryArg::Previous => FailedRetry::PreviousState,
                FailedRetryArg::LogAlignment => FailedRetry::LogAlignment,
            };
        }
        if let Some(Threshold(threshold)) = self.bump_threshold {
            kernel.epoch_bump.proactive_threshold = threshold;
        }
        if let Some(increment) = self.bump_increment {
            kernel.epoch_bump.increment = increment;
        }
        if let Some(at_equal) = self.bump_at_equal_epoch {
            kernel.epoch_bump.reactive_at_equal = at_equal;
        }
        if let Some(capture) = self.lme_capture {
            kernel.lme_capture = match capture {
                LmeCaptureArg::BeforeStopWrites => LmeCapture::BeforeStopWrites,
                LmeCaptureArg::LogEnd => LmeCapture::LogEnd,
            };
        }
        if let Some(fenced) = self.lme_fence {
            kernel.lme_write_fenced = fenced;
        }
        kernel.mutant = self.mutant;
        config
    }

    /// [`Self::config`], refused when it asks for a mutant this build cannot run: without
    /// feature `mutants` the kernel's mutated branches are compiled out (a production build
    /// never carries them), so the check would silently run the correct kernel.
    fn runnable_config(&self, command: &str) -> Result<ModelConfig, String> {
        match self.mutant {
            Some(mutant) if !cfg!(feature = "mutants") => Err(format!(
                "--mutant {mutant} needs a build with the kernel's mutants; rebuild with \
                 `cargo run --release --features mutants -- {command} --mutant {mutant}`"
            )),
            _ if self.stop_order == Some(StopOrderArg::All) && command != "check" => Err(format!(
                "--stop-order all works with `check` only; give `{command}` one order"
            )),
            _ => Ok(self.config()),
        }
    }
}

/// `kmirror check`.
#[derive(Args, Debug)]
pub struct CheckArgs {
    #[command(flatten)]
    model: ModelArgs,
    #[command(flatten)]
    node: NodeArgs,
    /// Worker threads.
    #[arg(long, default_value_t = 2)]
    threads: usize,
    /// Stop after this many generated states (the check is then not exhaustive).
    #[arg(long)]
    max_states: Option<usize>,
    /// Reduce by replica symmetry (replicas of a cluster are interchangeable; searches
    /// depth-first).
    #[arg(long)]
    symmetry: bool,
    /// Search breadth-first: shortest counterexamples straight away, but the whole frontier of
    /// full states in memory (4 GB for the default configuration). The default is depth-first:
    /// memory for the visited fingerprints only (0.1 GB), counterexamples shortened afterwards
    /// by a per-property breadth-first search that stops at the first discovery.
    #[arg(long, conflicts_with = "symmetry")]
    bfs: bool,
    /// Directory where counterexamples are saved as JSON traces.
    #[arg(long, default_value = DEFAULT_SAVE_DIR)]
    save_dir: PathBuf,
    /// Print the report as JSON on stdout instead of a table.
    #[arg(long)]
    json: bool,
    /// No progress line.
    #[arg(long)]
    quiet: bool,
}

/// `kmirror simulate`.
#[derive(Args, Debug)]
pub struct SimulateArgs {
    #[command(flatten)]
    model: ModelArgs,
    #[command(flatten)]
    node: NodeArgs,
    /// Random seed (thread t starts from seed + t).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Walks to run (about walks x depth states); default 10000, or unbounded with
    /// --time-budget.
    #[arg(long)]
    walks: Option<usize>,
    /// Steps per walk.
    #[arg(long, default_value_t = 200)]
    depth: usize,
    /// Worker threads (default: every core; the single-partition model's swarm walks).
    #[arg(long, conflicts_with = "node")]
    threads: Option<usize>,
    /// Stop after this long: seconds, or a number with s, m or h (`90s`, `10m`, `1h`).
    #[arg(long, value_parser = parse_duration, conflicts_with = "node")]
    time_budget: Option<Duration>,
    /// Uniform walks instead of swarm walks (each walk its own subset of action kinds).
    #[arg(long, conflicts_with = "node")]
    no_swarm: bool,
    /// Directory where counterexamples are saved as JSON traces.
    #[arg(long, default_value = DEFAULT_SAVE_DIR)]
    save_dir: PathBuf,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
    /// No progress line.
    #[arg(long)]
    quiet: bool,
}

/// A duration as `--time-budget` takes it: `600`, `600s`, `10m`, `1h`.
fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let (number, unit) = match text.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
        Some((i, _)) => text.split_at(i),
        None => (text, "s"),
    };
    let seconds_per_unit = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        _ => {
            return Err(format!(
                "`{text}`: give seconds, or a number with s, m or h (`10m`)"
            ))
        }
    };
    let n: u64 = number
        .parse()
        .map_err(|_| format!("`{text}`: give seconds, or a number with s, m or h (`10m`)"))?;
    if n == 0 {
        return Err("a time budget of zero runs nothing: give at least 1s".to_owned());
    }
    Ok(Duration::from_secs(n.saturating_mul(seconds_per_unit)))
}

/// `kmirror explore`.
#[derive(Args, Debug)]
pub struct ExploreArgs {
    #[command(flatten)]
    model: ModelArgs,
    #[command(flatten)]
    node: NodeArgs,
    /// Address to serve on (loopback only by default).
    #[arg(long, default_value = "127.0.0.1:3000")]
    address: String,
}

/// `kmirror show`.
#[derive(Args, Debug)]
pub struct ShowArgs {
    /// A trace saved by `check` or `simulate`.
    trace: PathBuf,
}

/// `kmirror check`: exit 0 when every property holds, 1 on a violation.
pub fn check(args: CheckArgs) -> Result<ExitCode, String> {
    if args.node.node {
        return check_node(&args);
    }
    if args.model.stop_order == Some(StopOrderArg::All) {
        return check_stop_orders(&args);
    }
    let config = args.model.runnable_config("check")?;
    let options = RunOptions {
        threads: args.threads,
        state_limit: args.max_states,
        progress: (!args.quiet && !args.json).then_some(Duration::from_secs(2)),
        shorten: true,
        symmetry: args.symmetry,
        dfs: !args.bfs,
        prune_examples: true,
    };
    let report = runner::check(&config, &options);
    finish(&report, &args.save_dir, args.json)
}

/// `kmirror check --node`: the node model with these options.
fn check_node(args: &CheckArgs) -> Result<ExitCode, String> {
    if args.model.stop_order == Some(StopOrderArg::All) {
        return Err(
            "--stop-order all checks the single-partition model; give --node one order".to_string(),
        );
    }
    if args.symmetry {
        return Err(
            "--symmetry renames replicas of the single-partition model; the node \
                    model has one replica per partition (drop --symmetry)"
                .to_string(),
        );
    }
    let config = args
        .node
        .config(&args.model.runnable_config("check --node")?)?;
    let options = RunOptions {
        threads: args.threads,
        state_limit: args.max_states,
        progress: (!args.quiet && !args.json).then_some(Duration::from_secs(2)),
        shorten: true,
        symmetry: false,
        dfs: !args.bfs,
        prune_examples: true,
    };
    node_model_cli::check(&config, &options, &args.save_dir, args.json)
}

/// `kmirror simulate`: swarm random walks on every core (`kmirror_model::swarm`); exit 0 when no
/// walk found a violation, 1 otherwise.
pub fn simulate(args: SimulateArgs) -> Result<ExitCode, String> {
    if args.node.node {
        let config = args.model.runnable_config("simulate --node")?;
        let config = args.node.config(&config)?;
        return node_model_cli::simulate(
            &config,
            args.seed,
            args.walks.unwrap_or(10_000),
            args.depth,
            &args.save_dir,
            args.json,
        );
    }
    let config = args.model.runnable_config("simulate")?;
    let threads = args.threads.unwrap_or_else(|| {
        std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
    });
    let options = SimulateOptions {
        seed: args.seed,
        walks: match (args.walks, args.time_budget) {
            (Some(walks), _) => Some(walks),
            (None, Some(_)) => None,
            (None, None) => Some(10_000),
        },
        depth: args.depth,
        threads,
        time_budget: args.time_budget,
        swarm: !args.no_swarm,
        progress: (!args.quiet && !args.json).then_some(Duration::from_secs(2)),
    };
    let report = swarm::simulate(&config, &options);
    finish(&report, &args.save_dir, args.json)
}

/// `kmirror explore`: serves until interrupted.
pub fn explore(args: ExploreArgs) -> Result<ExitCode, String> {
    if args.node.node {
        let config = args.model.runnable_config("explore --node")?;
        return node_model_cli::explore(&args.node.config(&config)?, &args.address);
    }
    let config = args.model.runnable_config("explore")?;
    eprintln!("kmirror: serving the Explorer on http://{}", args.address);
    runner::explore(&config, &args.address);
    Ok(ExitCode::SUCCESS)
}

/// `kmirror show`: prints a saved trace.
pub fn show(args: ShowArgs) -> Result<ExitCode, String> {
    let text = std::fs::read_to_string(&args.trace)
        .map_err(|e| format!("cannot read {}: {e}", args.trace.display()))?;
    let story = match serde_json::from_str::<Trace>(&text) {
        Ok(trace) => trace.render().map_err(|e| e.to_string()),
        // A trace of the node model (`check --node`).
        Err(e) => match serde_json::from_str::<NodeTrace>(&text) {
            Ok(trace) => trace.render().map_err(|e| e.to_string()),
            Err(_) => {
                return Err(format!(
                    "{} is not a kmirror trace: {e}",
                    args.trace.display()
                ))
            }
        },
    }
    .map_err(|e| format!("{}: {e}", args.trace.display()))?;
    print_out(&story);
    Ok(ExitCode::SUCCESS)
}

/// Prints the report, saves and prints counterexamples; exit 1 on a violation.
fn finish(
    report: &CheckReport,
    save_dir: &std::path::Path,
    json: bool,
) -> Result<ExitCode, String> {
    let mut saved = Vec::new();
    for p in report.properties.iter().filter(|p| p.verdict.is_failure()) {
        if let Some(trace) = &p.trace {
            std::fs::create_dir_all(save_dir)
                .map_err(|e| format!("cannot create {}: {e}", save_dir.display()))?;
            let path = save_dir.join(format!("{}.json", p.name));
            let text = serde_json::to_string_pretty(trace).map_err(|e| e.to_string())?;
            std::fs::write(&path, text)
                .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
            saved.push((p.name.clone(), path, trace));
        }
    }
    let mut text = String::new();
    if json {
        text = serde_json::to_string_pretty(report).map_err(|e| e.to_string())? + "\n";
    } else {
        text.push_str(&report.table());
        for (name, path, trace) in &saved {
            text.push_str(&format!(
                "\ncounterexample for `{name}` (saved to {}):\n",
                path.display()
            ));
            match trace.render() {
                Ok(story) => text.push_str(&story),
                Err(e) => text.push_str(&format!("  (cannot render: {e})\n")),
            }
        }
    }
    print_out(&text);
    Ok(if report.all_hold() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// Writes `text` to stdout; a closed pipe (`kmirror check | head`) is not an error.
fn print_out(text: &str) {
    use std::io::Write;
    let _ = std::io::stdout().lock().write_all(text.as_bytes());
}

/// `kmirror check --stop-order all`: the same configuration with each of the 24 stop orders
/// ([`StopOrder::ALL`]), one verdict line per order (or a JSON array with `--json`);
/// counterexamples are saved under `<save-dir>/stop-order-<order>/`. Exit 1 when the KIP's
/// order, the kernel's default, fails; the other orders' failures are the answer, not an error.
fn check_stop_orders(args: &CheckArgs) -> Result<ExitCode, String> {
    let base = args.model.runnable_config("check")?;
    let options = RunOptions {
        threads: args.threads,
        state_limit: args.max_states,
        progress: None,
        shorten: true,
        symmetry: args.symmetry,
        dfs: !args.bfs,
        ..RunOptions::default()
    };
    let mut kip_holds = true;
    let mut reports = Vec::new();
    for order in StopOrder::ALL {
        let report = runner::check(&base.clone().with_stop_order(order), &options);
        let dir = args.save_dir.join(format!(
            "stop-order-{}",
            order.to_string().replace(',', "-")
        ));
        let mut failures = Vec::new();
        for p in report.properties.iter().filter(|p| p.verdict.is_failure()) {
            let steps = p.trace.as_ref().map_or(0, |t| t.actions.len());
            failures.push(format!("{} ({steps} steps)", p.name));
            if let Some(trace) = &p.trace {
                std::fs::create_dir_all(&dir)
                    .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
                let path = dir.join(format!("{}.json", p.name));
                let text = serde_json::to_string_pretty(trace).map_err(|e| e.to_string())?;
                std::fs::write(&path, text)
                    .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
            }
        }
        if order == StopOrder::KIP {
            kip_holds = report.all_hold();
        }
        if !args.json {
            let verdict = if failures.is_empty() {
                "safe".to_string()
            } else {
                format!("UNSAFE: {}", failures.join(", "))
            };
            print_out(&format!(
                "{:<24} {:<9} unique {:>10}  {:>6.1} s{}  {verdict}\n",
                order.to_string(),
                if order == StopOrder::KIP { "(KIP)" } else { "" },
                report.unique,
                report.seconds,
                if report.exhaustive {
                    ""
                } else {
                    " (not exhaustive)"
                },
            ));
        }
        reports.push(serde_json::json!({ "stop_order": order.to_string(), "report": report }));
    }
    if args.json {
        let text = serde_json::to_string_pretty(&reports).map_err(|e| e.to_string())?;
        print_out(&(text + "\n"));
    }
    Ok(if kip_holds {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn epoch_lead_parses_a_cluster_and_an_epoch() {
        assert_eq!(
            parse_epoch_lead("a:5"),
            Ok(EpochLead {
                cluster: ClusterId::A,
                by: 5
            })
        );
        assert_eq!(
            parse_epoch_lead("B:0"),
            Ok(EpochLead {
                cluster: ClusterId::B,
                by: 0
            })
        );
        assert!(parse_epoch_lead("c:1")
            .unwrap_err()
            .contains("neither a nor b"));
        assert!(parse_epoch_lead("a").unwrap_err().contains("CLUSTER:N"));
        assert!(parse_epoch_lead("a:300").unwrap_err().contains("0 to 255"));
    }
}
