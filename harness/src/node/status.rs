//! [`NodeStatus`]: what `kmirror status` shows of a node destination: one row per partition
//! (state, LEO, HW, LSO, lag in records) and a rollup per topic.
//!
//! The lag is the source's last stable offset (as of the last fetch of the run that wrote
//! `status.json`, or of the running driver) minus the partition's log end offset: the records
//! (offsets) the destination still has to copy. It is unknown (`-`) before any fetch.

use std::collections::BTreeMap;
use std::path::Path;

use kmirror_kernel::log::LogView;
use kmirror_kernel::node::PartitionKey;
use kmirror_kernel::types::{LeaderEpoch, Offset, PartitionIndex};
use serde::{Deserialize, Serialize};

use crate::driver::cluster::topic_id_hex;
use crate::file_log::FileLog;

use super::dest::NodeMeta;
use super::driver::persisted_state;
use super::state_log::StatePartition;

/// One partition of a node destination.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionStatus {
    /// The topic.
    pub topic: String,
    /// The partition index.
    pub partition: PartitionIndex,
    /// The persisted mirror state (`UNKNOWN` when nothing is stored).
    pub state: String,
    /// The leader epoch.
    pub leader_epoch: LeaderEpoch,
    /// Whether local producers may write (STOPPED, or not mirrored).
    pub writable: bool,
    /// The log start offset.
    pub log_start_offset: Offset,
    /// The log end offset.
    pub log_end_offset: Offset,
    /// The high watermark.
    pub high_watermark: Offset,
    /// The last stable offset.
    pub last_stable_offset: Offset,
    /// The source's last stable offset, when known.
    pub source_last_stable_offset: Option<Offset>,
    /// Records still to copy: source LSO minus LEO (never negative), when known.
    pub lag: Option<i64>,
    /// The last fetch or LME error of the running driver, if the partition has one now.
    pub error: Option<String>,
}

impl PartitionStatus {
    /// The status of `key` (topic `topic`) from its log and the `__mirror_state` partitions.
    pub fn of(
        meta: &NodeMeta,
        states: &BTreeMap<u32, StatePartition>,
        topic: &str,
        key: PartitionKey,
        log: &FileLog,
        source_lso: Option<Offset>,
    ) -> Self {
        let controller = meta
            .partitions
            .get(&(topic.to_owned(), key.partition))
            .copied()
            .unwrap_or_default();
        let leo = log.log_end_offset();
        PartitionStatus {
            topic: topic.to_owned(),
            partition: key.partition,
            state: persisted_state(meta, states, &key).to_string(),
            leader_epoch: controller.leader_epoch,
            writable: controller.writable,
            log_start_offset: log.log_start_offset(),
            log_end_offset: leo,
            high_watermark: log.high_watermark(),
            last_stable_offset: log.last_stable_offset(),
            source_last_stable_offset: source_lso,
            lag: source_lso.map(|s| (s - leo).max(0)),
            error: None,
        }
    }
}

/// One topic's rollup.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicStatus {
    /// The topic.
    pub topic: String,
    /// Its id, 32 hex digits.
    pub topic_id: String,
    /// Its `mirror.name` (empty: not mirrored).
    pub mirror_name: String,
    /// Its partition count.
    pub partitions: PartitionIndex,
    /// How many partitions are in each state.
    pub states: BTreeMap<String, u32>,
    /// The sum of the partitions' log end offsets (records held, with the log start offsets).
    pub log_end_offset_total: i64,
    /// The sum of the known lags.
    pub lag_total: Option<i64>,
}

/// A node destination's status. See the [module documentation](self).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeStatus {
    /// The directory.
    pub dest: String,
    /// The source's bootstrap addresses.
    pub source_bootstrap: Option<String>,
    /// Every partition, by topic and index.
    pub partitions: Vec<PartitionStatus>,
    /// Every topic.
    pub topics: Vec<TopicStatus>,
}

impl NodeStatus {
    /// The status of `partitions`, with the topic rollup from `meta`.
    pub fn new(root: &Path, meta: &NodeMeta, partitions: Vec<PartitionStatus>) -> Self {
        let topics = meta
            .topics
            .iter()
            .map(|(name, t)| {
                let mine: Vec<&PartitionStatus> =
                    partitions.iter().filter(|p| &p.topic == name).collect();
                let mut states = BTreeMap::new();
                for p in &mine {
                    *states.entry(p.state.clone()).or_insert(0) += 1;
                }
                let lags: Vec<i64> = mine.iter().filter_map(|p| p.lag).collect();
                TopicStatus {
                    topic: name.clone(),
                    topic_id: topic_id_hex(t.topic_id),
                    mirror_name: t.mirror_name.clone().unwrap_or_default(),
                    partitions: t.partitions,
                    states,
                    log_end_offset_total: mine.iter().map(|p| p.log_end_offset).sum(),
                    lag_total: (!lags.is_empty()).then(|| lags.iter().sum()),
                }
            })
            .collect();
        NodeStatus {
            dest: root.display().to_string(),
            source_bootstrap: meta.source_bootstrap.clone(),
            partitions,
            topics,
        }
    }

    /// Fills the unknown source positions (and lags) from an older status (`status.json`).
    pub fn with_source_positions_from(mut self, older: &NodeStatus) -> Self {
        for p in &mut self.partitions {
            if p.source_last_stable_offset.is_some() {
                continue;
            }
            if let Some(o) = older
                .partitions
                .iter()
                .find(|o| o.topic == p.topic && o.partition == p.partition)
            {
                p.source_last_stable_offset = o.source_last_stable_offset;
                p.lag = o
                    .source_last_stable_offset
                    .map(|s| (s - p.log_end_offset).max(0));
            }
        }
        for t in &mut self.topics {
            let lags: Vec<i64> = self
                .partitions
                .iter()
                .filter(|p| p.topic == t.topic)
                .filter_map(|p| p.lag)
                .collect();
            t.lag_total = (!lags.is_empty()).then(|| lags.iter().sum());
        }
        self
    }

    /// The table `kmirror status` prints: partitions, then topics.
    pub fn render(&self) -> String {
        let opt = |o: Option<i64>| o.map_or("-".to_owned(), |v| v.to_string());
        let mut out = format!(
            "node destination {} (source {})\n\n",
            self.dest,
            self.source_bootstrap.as_deref().unwrap_or("-")
        );
        let width = self
            .partitions
            .iter()
            .map(|p| p.topic.len() + 1 + p.partition.to_string().len())
            .max()
            .unwrap_or(9)
            .max(9);
        out.push_str(&format!(
            "{:<width$}  {:<10} {:>5} {:>9} {:>10} {:>10} {:>10} {:>10} {:>8}\n",
            "PARTITION", "STATE", "EPOCH", "WRITABLE", "LEO", "HW", "LSO", "SOURCE LSO", "LAG"
        ));
        for p in &self.partitions {
            out.push_str(&format!(
                "{:<width$}  {:<10} {:>5} {:>9} {:>10} {:>10} {:>10} {:>10} {:>8}\n",
                format!("{}-{}", p.topic, p.partition),
                p.state,
                p.leader_epoch,
                if p.writable { "yes" } else { "no" },
                p.log_end_offset,
                p.high_watermark,
                p.last_stable_offset,
                opt(p.source_last_stable_offset),
                opt(p.lag),
            ));
            if let Some(e) = &p.error {
                out.push_str(&format!("    error: {e}\n"));
            }
        }
        out.push('\n');
        let twidth = self
            .topics
            .iter()
            .map(|t| t.topic.len())
            .max()
            .unwrap_or(5)
            .max(5);
        out.push_str(&format!(
            "{:<twidth$}  {:>10}  {:<24} {:>12} {:>8}  {}\n",
            "TOPIC", "PARTITIONS", "MIRROR.NAME", "LEO TOTAL", "LAG", "STATES"
        ));
        for t in &self.topics {
            let states: Vec<String> = t.states.iter().map(|(s, n)| format!("{s} x{n}")).collect();
            out.push_str(&format!(
                "{:<twidth$}  {:>10}  {:<24} {:>12} {:>8}  {}\n",
                t.topic,
                t.partitions,
                if t.mirror_name.is_empty() {
                    "-"
                } else {
                    &t.mirror_name
                },
                t.log_end_offset_total,
                opt(t.lag_total),
                states.join(", ")
            ));
        }
        out
    }
}
