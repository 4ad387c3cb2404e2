//! `kmirror check|simulate|explore --node`: the node model (`kmirror_model::node`), several
//! topics' partitions sharing one kernel node manager and one `__mirror_state` coordinator.
//!
//! The kernel-variant flags (`--mutant`, `--stop-strategy`, `--fetch-isolation`, one
//! `--stop-order`, `--liveness-bound`) apply to it as to the single-partition model; the
//! single-partition world's bounds (`--replicas`, `--crashes`...) conflict with `--node`, and
//! the node world has its own (`--node-topics`, `--node-records`, `--node-faults`,
//! `--node-operator-steps`, `--node-restarts`, `--node-source-changes`).

use std::path::Path;
use std::process::ExitCode;

use clap::Args;
use kmirror_kernel::config::MirrorConfig;
use kmirror_model::node::runner::{self, NodeCheckReport};
use kmirror_model::node::NodeModelConfig;
use kmirror_model::runner::RunOptions;
use kmirror_model::ModelConfig;

/// The node model's world (used with `--node`).
#[derive(Args, Debug, Clone)]
pub struct NodeArgs {
    /// Check the node model instead of the single-partition one: several topics' partitions
    /// sharing one node manager and one __mirror_state coordinator (docs/model-checking.md).
    #[arg(long, conflicts_with_all = [
        "replicas", "records", "transactions", "elections", "crashes", "network_faults",
        "coordinator_moves", "isr_shrinks", "operator_steps", "pause_resume", "unclean",
        "quorum", "refuse_stop_from_paused", "sync_steps", "mirror_cycles",
    ])]
    pub node: bool,
    /// With --node: the partition count of each mirrored topic (1 to 3 topics of 1 to 4
    /// partitions), comma-separated.
    #[arg(long, value_name = "N,N...", value_delimiter = ',', requires = "node",
          default_values_t = NodeModelConfig::default_check().topics)]
    node_topics: Vec<i32>,
    /// With --node: batches the source may append over all partitions.
    #[arg(long, requires = "node", default_value_t = NodeModelConfig::default_check().records)]
    node_records: u8,
    /// With --node: fetch faults (one partition's part failed or retriable, or a whole
    /// coalesced fetch lost).
    #[arg(long, requires = "node", default_value_t = NodeModelConfig::default_check().faults)]
    node_faults: u8,
    /// With --node: operator requests through the controller: a stop of one topic, a re-run of
    /// the selection (`kmirror mirror --topics` again), a failback of one topic.
    #[arg(long, alias = "node-stops", requires = "node",
          default_value_t = NodeModelConfig::default_check().operator_steps)]
    node_operator_steps: u8,
    /// With --node: crashes of the node, each followed by a restart (what is in memory and in
    /// flight is lost; the logs, the __mirror_state records, the topics' mirror.name and each
    /// partition's leader epoch and produce gate stay).
    #[arg(long, requires = "node", default_value_t = NodeModelConfig::default_check().restarts)]
    node_restarts: u8,
    /// With --node: changes of the source: a topic gains a partition (one at most), or is
    /// deleted.
    #[arg(long, requires = "node",
          default_value_t = NodeModelConfig::default_check().source_changes)]
    node_source_changes: u8,
}

impl NodeArgs {
    /// The node model configuration: these bounds, and the kernel variant and liveness bound
    /// of `model` (the single-partition model's flags, already checked by the caller).
    pub fn config(&self, model: &ModelConfig) -> Result<NodeModelConfig, String> {
        let config = NodeModelConfig {
            topics: self.node_topics.clone(),
            records: self.node_records,
            faults: self.node_faults,
            operator_steps: self.node_operator_steps,
            restarts: self.node_restarts,
            source_changes: self.node_source_changes,
            liveness_bound: model.liveness_bound,
            // The kernel as the node driver runs it (`NodeModelConfig::node_kernel`): no write
            // of an earlier leadership lands once the node restarts.
            kernel: MirrorConfig {
                predecessors_may_write: false,
                ..model.kernel.clone()
            },
        };
        config
            .validate()
            .map_err(|e| format!("--node-topics: {e}"))?;
        Ok(config)
    }
}

/// `kmirror check --node`: exit 0 when every property holds, 1 on a violation.
pub fn check(
    config: &NodeModelConfig,
    options: &RunOptions,
    save_dir: &Path,
    json: bool,
) -> Result<ExitCode, String> {
    let report = runner::check(config, options);
    finish(&report, save_dir, json)
}

/// `kmirror simulate --node`: exit 0 when no walk found a violation, 1 otherwise.
pub fn simulate(
    config: &NodeModelConfig,
    seed: u64,
    walks: usize,
    depth: usize,
    save_dir: &Path,
    json: bool,
) -> Result<ExitCode, String> {
    let report = runner::simulate(config, seed, walks, depth);
    finish(&report, save_dir, json)
}

/// `kmirror explore --node`: serves until interrupted.
pub fn explore(config: &NodeModelConfig, address: &str) -> Result<ExitCode, String> {
    eprintln!("kmirror: serving the node model's Explorer on http://{address}");
    runner::explore(config, address);
    Ok(ExitCode::SUCCESS)
}

/// Prints the report, saves and prints counterexamples (`<save-dir>/node-<property>.json`,
/// shown again by `kmirror show`); exit 1 on a violation.
fn finish(report: &NodeCheckReport, save_dir: &Path, json: bool) -> Result<ExitCode, String> {
    let mut text = String::new();
    if json {
        text = serde_json::to_string_pretty(report).map_err(|e| e.to_string())? + "\n";
    } else {
        text.push_str(&report.report.table());
    }
    for p in report
        .report
        .properties
        .iter()
        .filter(|p| p.verdict.is_failure())
    {
        let Some(trace) = report.traces.get(&p.name) else {
            continue;
        };
        std::fs::create_dir_all(save_dir)
            .map_err(|e| format!("cannot create {}: {e}", save_dir.display()))?;
        let path = save_dir.join(format!("node-{}.json", p.name));
        let saved = serde_json::to_string_pretty(trace).map_err(|e| e.to_string())?;
        std::fs::write(&path, saved)
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        if !json {
            text.push_str(&format!(
                "\ncounterexample for `{}` (saved to {}):\n",
                p.name,
                path.display()
            ));
            match trace.render() {
                Ok(story) => text.push_str(&story),
                Err(e) => text.push_str(&format!("  (cannot render: {e})\n")),
            }
        }
    }
    use std::io::Write;
    let _ = std::io::stdout().lock().write_all(text.as_bytes());
    Ok(if report.report.all_hold() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
