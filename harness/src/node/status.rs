//! [`NodeStatus`]: what `kmirror status` shows of a node destination: one row per partition
//! (state, LEO, HW, LSO, lag in records and in bytes) and a rollup per topic.
//!
//! The lag is the source's last stable offset (as of the last fetch of the run that wrote
//! `status.json`, or of the running driver) minus the partition's log end offset: the records
//! (offsets) the destination still has to copy. It is unknown (`-`) before any fetch.
//!
//! **The lag in bytes** is exact when nothing is left to copy (`0 B`). Otherwise the source's
//! batch sizes are not known here (a live source tells a consumer its offsets, not the bytes
//! between them), so it is an **estimate**, shown as `~12.3 MiB` and flagged
//! `lag_bytes_estimated` in the JSON: the lag in offsets times the partition's mean bytes per
//! offset mirrored so far (its segment bytes over the offsets it holds), or, for a partition
//! that holds nothing yet, the mean over every partition of the destination. With nothing
//! mirrored anywhere it is unknown (`-`).

use std::collections::BTreeMap;
use std::path::Path;

use kmirror_kernel::log::LogView;
use kmirror_kernel::node::PartitionKey;
use kmirror_kernel::types::{LeaderEpoch, Offset, PartitionIndex};
use serde::{Deserialize, Serialize};

use std::sync::Arc;

use kmirror_kernel::config::MirrorConfig;
use kmirror_kernel::coordinator::Coordinator;
use kmirror_kernel::desired::DesiredState;
use kmirror_kernel::partitioner::mirror_state_partition;
use kmirror_kernel::records::MirrorPartitionStateValue;
use kmirror_kernel::state::MirrorState;

use crate::file_log::{FileLog, TopicPartition};
use crate::log_dir_checkpoints::LogDirCheckpoints;

use super::dest::{NodeDest, NodeMeta, LOG_DIR};
use super::NodeError;
use crate::mirror_state_log::MirrorStateLog;

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
    /// The bytes of the partition's segments.
    #[serde(default)]
    pub log_bytes: u64,
    /// Bytes still to copy, when the lag is known (see the [module documentation](self)).
    #[serde(default)]
    pub lag_bytes: Option<u64>,
    /// Whether `lag_bytes` is an estimate (from the mean bytes per offset mirrored so far).
    #[serde(default)]
    pub lag_bytes_estimated: bool,
    /// The last fetch or LME error of the running driver, if the partition has one now.
    pub error: Option<String>,
}

impl PartitionStatus {
    /// The status of `key` (topic `topic`) in persisted mirror state `state`, from its log
    /// (`log_bytes` of batches) and the source's last stable offset if known.
    pub fn of(
        meta: &NodeMeta,
        state: MirrorState,
        topic: &str,
        key: PartitionKey,
        log: &impl LogView,
        log_bytes: u64,
        source_lso: Option<Offset>,
    ) -> Self {
        let controller = meta
            .partitions
            .get(&(topic.to_owned(), key.partition))
            .copied()
            .unwrap_or_default();
        let leo = log.log_end_offset();
        let mirrored = !matches!(
            meta.topics.get(topic).map(|t| t.desired(topic)),
            Some(Ok(DesiredState::NotMirrored))
        );
        PartitionStatus {
            topic: topic.to_owned(),
            partition: key.partition,
            state: state.to_string(),
            leader_epoch: controller.leader_epoch,
            // The gate on disk is what the last process left; the kernel opens it only in
            // STOPPED, and closes it first thing on every start.
            writable: !mirrored || (controller.writable && state == MirrorState::Stopped),
            log_start_offset: log.log_start_offset(),
            log_end_offset: leo,
            high_watermark: log.high_watermark(),
            last_stable_offset: log.last_stable_offset(),
            source_last_stable_offset: source_lso,
            lag: source_lso.map(|s| (s - leo).max(0)),
            log_bytes,
            lag_bytes: None,
            lag_bytes_estimated: false,
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
    /// The sum of the known lags in bytes.
    #[serde(default)]
    pub lag_bytes_total: Option<u64>,
    /// Whether `lag_bytes_total` includes an estimate.
    #[serde(default)]
    pub lag_bytes_estimated: bool,
    /// The source's partition count, when known (a running mirror's metadata): more than
    /// `partitions` while the new ones are being created, and the lag is then unknown.
    #[serde(default)]
    pub source_partitions: Option<PartitionIndex>,
}

/// How a running mirror fetches from its source over the link between them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceLink {
    /// The shortest round trip to the source its connections measured, in microseconds.
    pub round_trip_us: u64,
    /// The most Fetches one source broker has in flight at once.
    pub fetches_in_flight: usize,
}

/// A node destination's status. See the [module documentation](self).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeStatus {
    /// The directory.
    pub dest: String,
    /// The source's bootstrap addresses.
    pub source_bootstrap: Option<String>,
    /// Replicas of every partition, the leader included (`replicas` in `node.properties`).
    #[serde(default = "one_replica")]
    pub replicas: u32,
    /// Every partition, by topic and index.
    pub partitions: Vec<PartitionStatus>,
    /// Every topic.
    pub topics: Vec<TopicStatus>,
    /// When the source's positions were measured (milliseconds since the Unix epoch), if the
    /// status was written by a run (`status.json`).
    #[serde(default)]
    pub measured_at_ms: Option<i64>,
    /// The round trip to the source and the Fetches in flight, if a run measured them.
    #[serde(default)]
    pub source_link: Option<SourceLink>,
}

/// The replica count of a status written before nodes had followers.
fn one_replica() -> u32 {
    1
}

impl NodeStatus {
    /// The status of `partitions`, with the topic rollup from `meta`.
    pub fn new(root: &Path, meta: &NodeMeta, mut partitions: Vec<PartitionStatus>) -> Self {
        fill_lag_bytes(&mut partitions);
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
                TopicStatus {
                    topic: name.clone(),
                    topic_id: t.topic_id.to_string(),
                    mirror_name: t.mirror_name.clone().unwrap_or_default(),
                    partitions: t.partitions,
                    states,
                    log_end_offset_total: mine.iter().map(|p| p.log_end_offset).sum(),
                    lag_total: None,
                    lag_bytes_total: None,
                    lag_bytes_estimated: false,
                    source_partitions: None,
                }
            })
            .collect();
        let mut status = NodeStatus {
            dest: root.display().to_string(),
            source_bootstrap: meta.source_bootstrap.clone(),
            replicas: meta.replicas,
            partitions,
            topics,
            measured_at_ms: None,
            source_link: None,
        };
        status.roll_up_lags();
        status
    }

    /// Records the source's partition count of each topic (by name) a running mirror knows.
    pub fn with_source_partitions(mut self, counts: &BTreeMap<String, PartitionIndex>) -> Self {
        for t in &mut self.topics {
            t.source_partitions = counts.get(&t.topic).copied();
        }
        self.roll_up_lags();
        self
    }

    /// Each topic's lag totals from its partitions: known only when every partition's is, and
    /// the source has no partition the destination lacks (a sum over what is known would read
    /// 0 while records wait on a partition not created yet).
    fn roll_up_lags(&mut self) {
        for t in &mut self.topics {
            let mine: Vec<&PartitionStatus> = self
                .partitions
                .iter()
                .filter(|p| p.topic == t.topic)
                .collect();
            let complete = !mine.is_empty()
                && t.source_partitions.is_none_or(|n| n <= t.partitions)
                && mine.len() == usize::try_from(t.partitions).unwrap_or(0);
            let lags: Option<Vec<i64>> = mine.iter().map(|p| p.lag).collect();
            t.lag_total = lags.filter(|_| complete).map(|l| l.iter().sum());
            let bytes: Option<Vec<u64>> = mine.iter().map(|p| p.lag_bytes).collect();
            t.lag_bytes_total = bytes.filter(|_| complete).map(|b| b.iter().sum());
            t.lag_bytes_estimated = t.lag_bytes_total.is_some()
                && mine
                    .iter()
                    .any(|p| p.lag_bytes.is_some() && p.lag_bytes_estimated);
        }
    }

    /// The status of the node destination at `root` read **changing nothing**: its
    /// directories checked ([`NodeDest::check_complete`]), the log dir's checkpoints, every
    /// `__mirror_state` partition and every partition log read as opening would recover them
    /// ([`FileLog::inspect_in_log_dir`]) but with no repair, no lock taken and nothing written.
    /// The source positions are unknown (fill them from `status.json` with
    /// [`NodeStatus::with_source_positions_from`]).
    pub fn inspect(root: &Path) -> Result<NodeStatus, NodeError> {
        let meta = NodeDest::check_complete(root)?;
        let log_dir = root.join(LOG_DIR);
        let log_error = |dir: &Path| {
            let dir = dir.to_path_buf();
            move |source| NodeError::Log {
                dir,
                source: Box::new(source),
            }
        };
        let checkpoints =
            Arc::new(LogDirCheckpoints::open_read_only(&log_dir).map_err(log_error(&log_dir))?);
        let table = MirrorConfig::default().transitions;
        let mut coordinators = BTreeMap::new();
        for k in 0..meta.mirror_state_partitions {
            let c = MirrorStateLog::inspect(&log_dir, k, table.clone(), Arc::clone(&checkpoints))?;
            coordinators.insert(k, c);
        }
        let mut partitions = Vec::new();
        for (name, p) in meta.partitions.keys() {
            let Some(topic) = meta.topics.get(name) else {
                continue;
            };
            let key = PartitionKey::new(topic.topic_id, *p);
            let tp = TopicPartition::new(name, *p).map_err(|e| NodeError::Invalid {
                message: e.to_string(),
            })?;
            let dir = log_dir.join(tp.dir_name());
            let log = FileLog::inspect_in_log_dir(&log_dir, tp, Arc::clone(&checkpoints))
                .map_err(log_error(&dir))?;
            let record = persisted_record_in(&meta, &|k| coordinators.get(&k), &key);
            let state = record.map_or(MirrorState::Unknown, |v| v.state);
            let mut status =
                PartitionStatus::of(&meta, state, name, key, log.mem_log(), log.bytes(), None);
            status.error = record
                .filter(|v| v.state == MirrorState::Failed)
                .and_then(|v| v.error_message.clone());
            partitions.push(status);
        }
        Ok(NodeStatus::new(root, &meta, partitions))
    }

    /// Fills the unknown source positions (and lags) from an older status (`status.json`),
    /// keeping when they were measured.
    pub fn with_source_positions_from(mut self, older: &NodeStatus) -> Self {
        self.measured_at_ms = older.measured_at_ms;
        for t in &mut self.topics {
            t.source_partitions = older
                .topics
                .iter()
                .find(|o| o.topic == t.topic && o.topic_id == t.topic_id)
                .and_then(|o| o.source_partitions);
        }
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
        fill_lag_bytes(&mut self.partitions);
        self.roll_up_lags();
        self
    }

    /// The table `kmirror status` prints: partitions, then topics. A lag the status does not
    /// know is `?` for a partition or topic that is mirrored (never `0`), `-` for one that is
    /// not; `now_ms` (milliseconds since the Unix epoch) dates the source's positions.
    pub fn render(&self, now_ms: i64) -> String {
        let opt = |o: Option<i64>| o.map_or("-".to_owned(), |v| v.to_string());
        let lag = |o: Option<i64>, mirrored: bool| match o {
            Some(v) => v.to_string(),
            None if mirrored => "?".to_owned(),
            None => "-".to_owned(),
        };
        let mut out = format!(
            "node destination {} (source {})\n",
            self.dest,
            self.source_bootstrap.as_deref().unwrap_or("-")
        );
        if self.replicas > 1 {
            out.push_str(&format!(
                "{} replicas per partition: the leader and {} in-process follower(s) \
                 (replicas/); the high watermark waits for them\n",
                self.replicas,
                self.replicas - 1
            ));
        }
        if let Some(at) = self.measured_at_ms {
            out.push_str(&format!(
                "source positions measured {} s ago\n",
                (now_ms - at).max(0) / 1_000
            ));
        }
        if let Some(link) = self.source_link {
            out.push_str(&format!(
                "source round trip {:.1} ms, up to {} Fetch{} in flight per source broker\n",
                link.round_trip_us as f64 / 1_000.0,
                link.fetches_in_flight,
                if link.fetches_in_flight == 1 {
                    ""
                } else {
                    "es"
                }
            ));
        }
        out.push('\n');
        let mirrored_topic = |topic: &str| {
            self.topics.iter().any(|t| {
                t.topic == topic
                    && !t.mirror_name.is_empty()
                    && !t.mirror_name.ends_with(".removed")
            })
        };
        let width = self
            .partitions
            .iter()
            .map(|p| p.topic.len() + 1 + p.partition.to_string().len())
            .max()
            .unwrap_or(9)
            .max(9);
        out.push_str(&format!(
            "{:<width$}  {:<10} {:>5} {:>9} {:>10} {:>10} {:>10} {:>10} {:>8} {:>11}\n",
            "PARTITION",
            "STATE",
            "EPOCH",
            "WRITABLE",
            "LEO",
            "HW",
            "LSO",
            "SOURCE LSO",
            "LAG",
            "LAG BYTES"
        ));
        for p in &self.partitions {
            out.push_str(&format!(
                "{:<width$}  {:<10} {:>5} {:>9} {:>10} {:>10} {:>10} {:>10} {:>8} {:>11}\n",
                format!("{}-{}", p.topic, p.partition),
                p.state,
                p.leader_epoch,
                if p.writable { "yes" } else { "no" },
                p.log_end_offset,
                p.high_watermark,
                p.last_stable_offset,
                opt(p.source_last_stable_offset),
                lag(p.lag, mirrored_topic(&p.topic)),
                lag_bytes(p.lag_bytes, p.lag_bytes_estimated, mirrored_topic(&p.topic)),
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
        let mwidth = self
            .topics
            .iter()
            .map(|t| t.mirror_name.len())
            .max()
            .unwrap_or(11)
            .max(11);
        out.push_str(&format!(
            "{:<twidth$}  {:>10}  {:<mwidth$} {:>12} {:>8} {:>11}  {}\n",
            "TOPIC", "PARTITIONS", "MIRROR.NAME", "LEO TOTAL", "LAG", "LAG BYTES", "STATES"
        ));
        for t in &self.topics {
            let states: Vec<String> = t.states.iter().map(|(s, n)| format!("{s} x{n}")).collect();
            let mirrored = mirrored_topic(&t.topic);
            let partitions = match t.source_partitions {
                Some(n) if n > t.partitions => format!("{} of {n}", t.partitions),
                _ => t.partitions.to_string(),
            };
            out.push_str(&format!(
                "{:<twidth$}  {:>10}  {:<mwidth$} {:>12} {:>8} {:>11}  {}\n",
                t.topic,
                partitions,
                if t.mirror_name.is_empty() {
                    "-"
                } else {
                    &t.mirror_name
                },
                t.log_end_offset_total,
                lag(t.lag_total, mirrored),
                lag_bytes(t.lag_bytes_total, t.lag_bytes_estimated, mirrored),
                states.join(", ")
            ));
        }
        out
    }
}

/// Fills every partition's lag in bytes from its lag in offsets: exact (0) when nothing is
/// left, otherwise estimated from its own mean bytes per offset, or the destination's when it
/// holds nothing (see the [module documentation](self)).
pub fn fill_lag_bytes(partitions: &mut [PartitionStatus]) {
    let held = |p: &PartitionStatus| (p.log_end_offset - p.log_start_offset).max(0);
    let (bytes, offsets) = partitions
        .iter()
        .filter(|p| p.log_bytes > 0 && held(p) > 0)
        .fold((0u64, 0i64), |(b, o), p| (b + p.log_bytes, o + held(p)));
    let node_mean = (offsets > 0).then(|| bytes as f64 / offsets as f64);
    for p in partitions.iter_mut() {
        let (value, estimated) = match p.lag {
            None => (None, false),
            Some(0) => (Some(0), false),
            Some(lag) => {
                let own =
                    (p.log_bytes > 0 && held(p) > 0).then(|| p.log_bytes as f64 / held(p) as f64);
                let mean = own.or(node_mean);
                (mean.map(|m| (lag.max(0) as f64 * m).round() as u64), true)
            }
        };
        p.lag_bytes = value;
        p.lag_bytes_estimated = estimated && value.is_some();
    }
}

/// `1.5 KiB`, `12.3 MiB`, `512 B` (binary units, one decimal).
pub fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

/// The LAG BYTES cell: `?` unknown (`-` when not mirrored), `0 B` exact, `~12.3 MiB` an
/// estimate.
fn lag_bytes(bytes: Option<u64>, estimated: bool, mirrored: bool) -> String {
    match bytes {
        None if mirrored => "?".to_owned(),
        None => "-".to_owned(),
        Some(b) if estimated => format!("~{}", human_bytes(b)),
        Some(b) => human_bytes(b),
    }
}

/// The persisted record of `key` under its topic's mirror, with the coordinator of each
/// `__mirror_state` partition from `coordinator` (the running driver's, or ones read from the
/// files).
pub(super) fn persisted_record_in<'a>(
    meta: &NodeMeta,
    coordinator: &dyn Fn(u32) -> Option<&'a Coordinator>,
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

#[cfg(test)]
mod tests {
    use super::*;

    fn partition(topic: &str, leo: i64, bytes: u64, lag: Option<i64>) -> PartitionStatus {
        PartitionStatus {
            topic: topic.into(),
            partition: 0,
            state: "MIRRORING".into(),
            leader_epoch: 0,
            writable: false,
            log_start_offset: 0,
            log_end_offset: leo,
            high_watermark: leo,
            last_stable_offset: leo,
            source_last_stable_offset: lag.map(|l| leo + l),
            lag,
            log_bytes: bytes,
            lag_bytes: None,
            lag_bytes_estimated: false,
            error: None,
        }
    }

    #[test]
    fn lag_bytes_are_exact_at_zero_and_estimated_from_the_mean_bytes_per_offset() {
        let mut ps = vec![
            // 100 bytes an offset: 10 offsets behind is about 1,000 bytes.
            partition("a", 20, 2_000, Some(10)),
            // Caught up: exactly nothing.
            partition("b", 10, 3_000, Some(0)),
            // Holds nothing yet: the destination's mean, 6,000 bytes over 40 offsets: 150.
            partition("c", 0, 0, Some(6)),
            // No fetch yet: unknown (its bytes count in the mean).
            partition("d", 10, 1_000, None),
        ];
        fill_lag_bytes(&mut ps);
        let got: Vec<(Option<u64>, bool)> = ps
            .iter()
            .map(|p| (p.lag_bytes, p.lag_bytes_estimated))
            .collect();
        assert_eq!(
            got,
            vec![
                (Some(1_000), true),
                (Some(0), false),
                (Some(900), true),
                (None, false)
            ]
        );
        assert_eq!(lag_bytes(Some(12_897_485), true, true), "~12.3 MiB");
        assert_eq!(lag_bytes(Some(0), false, true), "0 B");
        assert_eq!(lag_bytes(None, false, true), "?");
        assert_eq!(lag_bytes(None, false, false), "-");
        assert_eq!(human_bytes(1_536), "1.5 KiB");
    }

    #[test]
    fn with_nothing_mirrored_anywhere_the_lag_in_bytes_is_unknown() {
        let mut ps = vec![partition("a", 0, 0, Some(4))];
        fill_lag_bytes(&mut ps);
        assert_eq!((ps[0].lag_bytes, ps[0].lag_bytes_estimated), (None, false));
    }
}
