//! What `kmirror demo` prints: one table per step, a row per node, read from the node's own
//! driver (its metadata, its partition's log, its produce gate).

use std::fmt::Write as _;

use kmirror_harness::node::NodeDriver;
use kmirror_kernel::log::LogView;
use kmirror_kernel::node::PartitionKey;
use kmirror_kernel::types::{LeaderEpoch, Offset};
use serde::Serialize;

use super::TOPIC;

/// One node in a step's table: partition 0 of the demo's topic on it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct DemoRow {
    /// The node.
    pub node: String,
    /// Its role in this step.
    pub role: String,
    /// The topic's `mirror.name` (`-`: in no mirror).
    pub mirror_name: String,
    /// The partition's persisted mirror state (`-`: never mirrored).
    pub state: String,
    /// The log end offset.
    pub log_end_offset: Offset,
    /// The high watermark.
    pub high_watermark: Offset,
    /// The last stable offset.
    pub last_stable_offset: Offset,
    /// The node's leader epoch of the partition.
    pub leader_epoch: i32,
    /// The epoch cache, `epoch@start`.
    pub epochs: String,
    /// Open transactions, `producer id@first offset`.
    pub open_transactions: String,
    /// Whether producers may write.
    pub writable: bool,
}

impl DemoRow {
    /// The row of `node`'s partition in `driver`, in `role`.
    pub fn of(driver: &NodeDriver, node: &str, role: &str) -> DemoRow {
        let meta = driver.dest().meta();
        let topic = meta.topics.get(TOPIC);
        let key = topic.map(|t| PartitionKey::new(t.topic_id, 0));
        let log = key.and_then(|k| driver.log(&k));
        let mirror_name = topic
            .and_then(|t| t.mirror_name.clone())
            .filter(|m| !m.is_empty());
        DemoRow {
            node: node.to_owned(),
            role: role.to_owned(),
            state: match (&mirror_name, key) {
                (Some(_), Some(k)) => driver.persisted_state(&k).to_string(),
                _ => "-".to_owned(),
            },
            mirror_name: mirror_name.unwrap_or_else(|| "-".to_owned()),
            log_end_offset: log.map_or(0, |l| l.log_end_offset()),
            high_watermark: log.map_or(0, |l| l.high_watermark()),
            last_stable_offset: log.map_or(0, |l| l.last_stable_offset()),
            leader_epoch: meta
                .partitions
                .get(&(TOPIC.to_owned(), 0))
                .map_or(0, |p| p.leader_epoch),
            epochs: log.map_or_else(
                || "-".to_owned(),
                |l| {
                    let epochs: Vec<_> = l
                        .epoch_cache()
                        .entries()
                        .map(|e| (e.epoch, e.start_offset))
                        .collect();
                    format_epochs(&epochs)
                },
            ),
            open_transactions: log
                .map(|l| {
                    l.producer_state()
                        .open_transactions()
                        .map(|(pid, _, first)| format!("{pid}@{first}"))
                        .collect::<Vec<_>>()
                        .join(",")
                })
                .filter(|t| !t.is_empty())
                .unwrap_or_else(|| "-".to_owned()),
            writable: key.is_some_and(|k| driver.writable(&k)),
        }
    }
}

/// One step of the demo.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct DemoStep {
    /// 1-based.
    pub number: usize,
    /// What happens.
    pub title: String,
    /// The nodes after the step.
    pub rows: Vec<DemoRow>,
    /// What to notice: the nodes' own report of what they did, and what a client saw.
    pub notes: Vec<String>,
}

/// The demo's result.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct DemoReport {
    /// Where the nodes are (`None`: a temporary directory, removed).
    pub kept_in: Option<String>,
    /// The steps.
    pub steps: Vec<DemoStep>,
    /// Whether east and west ended byte-for-byte equal.
    pub verified: bool,
    /// The final check, in words.
    pub verification: String,
}

impl DemoReport {
    /// The steps as text tables.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "kmirror demo: KIP-1279 cluster mirroring between two nodes on Kafka's wire{}\n",
            self.kept_in
                .as_deref()
                .map(|d| format!(" (kept in {d})"))
                .unwrap_or_else(|| " (in a temporary directory)".to_owned())
        );
        for step in &self.steps {
            let _ = writeln!(out, "Step {}. {}", step.number, step.title);
            let _ = writeln!(
                out,
                "  {:<5} {:<9} {:<22} {:<10} {:>4} {:>4} {:>4} {:>5}  {:<18} {:<16} writable",
                "",
                "role",
                "mirror.name",
                "state",
                "LEO",
                "HW",
                "LSO",
                "epoch",
                "epochs",
                "open txn"
            );
            for r in &step.rows {
                let _ = writeln!(
                    out,
                    "  {:<5} {:<9} {:<22} {:<10} {:>4} {:>4} {:>4} {:>5}  {:<18} {:<16} {}",
                    r.node,
                    r.role,
                    r.mirror_name,
                    r.state,
                    r.log_end_offset,
                    r.high_watermark,
                    r.last_stable_offset,
                    r.leader_epoch,
                    r.epochs,
                    r.open_transactions,
                    if r.writable { "yes" } else { "no" },
                );
            }
            for n in &step.notes {
                let _ = writeln!(out, "  - {n}");
            }
            let _ = writeln!(out);
        }
        let _ = writeln!(
            out,
            "{} {}",
            if self.verified { "OK:" } else { "MISMATCH:" },
            self.verification
        );
        out
    }
}

/// A leader epoch cache as `epoch@start` pairs, space-separated (`-` for none).
fn format_epochs(epochs: &[(LeaderEpoch, Offset)]) -> String {
    if epochs.is_empty() {
        "-".to_owned()
    } else {
        epochs
            .iter()
            .map(|(e, o)| format!("{e}@{o}"))
            .collect::<Vec<_>>()
            .join(" ")
    }
}
