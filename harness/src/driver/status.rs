//! [`ClusterStatus`]: everything `kmirror status` shows of a cluster directory, read from an
//! opened [`Cluster`], with its text rendering.

use kmirror_kernel::desired::DesiredState;
use kmirror_kernel::log::LogView;
use kmirror_kernel::types::{BrokerId, LeaderEpoch, Offset};
use serde::Serialize;

use super::cluster::Cluster;

/// Everything `kmirror status` shows of a cluster directory.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct ClusterStatus {
    /// The directory.
    pub dir: String,
    /// The cluster's name.
    pub cluster: String,
    /// The topic partition (`<topic>-0`).
    pub partition: String,
    /// The topic id (hex).
    pub topic_id: String,
    /// The raw `mirror.name`.
    pub mirror_name: Option<String>,
    /// The desired state in words.
    pub desired: String,
    /// The persisted mirror state (UNKNOWN when nothing is stored).
    pub state: String,
    /// The persisted record, if any.
    pub state_record: Option<StateRecordStatus>,
    /// The leader broker.
    pub leader: BrokerId,
    /// The leader epoch.
    pub leader_epoch: LeaderEpoch,
    /// The in-sync replicas.
    pub isr: Vec<BrokerId>,
    /// Whether local producers may write (the produce gate and the kernel's rule).
    pub writable: bool,
    /// The remembered source directory.
    pub source_dir: Option<String>,
    /// Every replica's log.
    pub replicas: Vec<ReplicaStatus>,
    /// Every LME record held by this cluster's `__mirror_state`.
    pub last_mirrored_epochs: Vec<LmeStatus>,
}

/// A persisted `MirrorPartitionStateValue`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct StateRecordStatus {
    /// The state.
    pub state: String,
    /// The leader epoch it was written at.
    pub leader_epoch: LeaderEpoch,
    /// The coordinator's state epoch.
    pub state_epoch: i32,
    /// The state before.
    pub previous_state: Option<String>,
    /// Failures in a row.
    pub retry_attempt: u32,
    /// The error of a FAILED state.
    pub error_message: Option<String>,
}

/// One replica's log.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct ReplicaStatus {
    /// The broker.
    pub broker: BrokerId,
    /// Whether it leads.
    pub leader: bool,
    /// Log start offset.
    pub log_start_offset: Offset,
    /// Log end offset.
    pub log_end_offset: Offset,
    /// High watermark.
    pub high_watermark: Offset,
    /// Last stable offset.
    pub last_stable_offset: Offset,
    /// The epoch cache: `[epoch, start offset]` pairs.
    pub epochs: Vec<(LeaderEpoch, Offset)>,
    /// Number of batches.
    pub batches: usize,
    /// Open transactions: `[producer id, first offset]`.
    pub open_transactions: Vec<(i64, Offset)>,
}

/// One LME record.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct LmeStatus {
    /// The mirror it was recorded for.
    pub mirror: String,
    /// The epoch (`None`: -1).
    pub last_mirrored_epoch: Option<LeaderEpoch>,
    /// The offset the mirrored copy ended at.
    pub last_mirrored_offset: Offset,
}

impl ClusterStatus {
    /// The status of an opened cluster.
    pub fn of(cluster: &Cluster) -> Self {
        let dir = &cluster.dir;
        let config = dir.config();
        let record = cluster.persisted_state();
        let state = cluster.mirror_state();
        let desired = match dir.desired_state() {
            Ok(DesiredState::NotMirrored) => "not mirrored (writable topic)".to_owned(),
            Ok(DesiredState::Mirror(m)) => format!("mirror from cluster mirror {m}"),
            Ok(DesiredState::Pause(m)) => format!("paused in cluster mirror {m}"),
            Ok(DesiredState::Stop(m)) => format!("stopped (failed over) from cluster mirror {m}"),
            Err(e) => format!("invalid: {e}"),
        };
        let gate =
            kmirror_kernel::controller::check_produce(&config.catalogue(), &config.topic, state)
                .is_ok();
        let mirrored = !matches!(dir.desired_state(), Ok(DesiredState::NotMirrored));
        let replica =
            |broker: BrokerId, log: &crate::file_log::FileLog, leader: bool| ReplicaStatus {
                broker,
                leader,
                log_start_offset: log.log_start_offset(),
                log_end_offset: log.log_end_offset(),
                high_watermark: log.high_watermark(),
                last_stable_offset: log.last_stable_offset(),
                epochs: log
                    .epoch_cache()
                    .entries()
                    .map(|e| (e.epoch, e.start_offset))
                    .collect(),
                batches: log.mem_log().batches().len(),
                open_transactions: log
                    .producer_state()
                    .open_transactions()
                    .map(|(pid, _, first)| (pid, first))
                    .collect(),
            };
        let mut replicas = vec![replica(dir.controller().leader, &cluster.leader, true)];
        replicas.extend(
            cluster
                .followers
                .iter()
                .map(|f| replica(f.id, &f.log, false)),
        );
        ClusterStatus {
            dir: dir.root().display().to_string(),
            cluster: config.name.to_string(),
            partition: dir.topic_partition().dir_name(),
            topic_id: config.topic_id.to_string(),
            mirror_name: config.mirror_name.clone(),
            desired,
            state: state.to_string(),
            state_record: record.map(|v| StateRecordStatus {
                state: v.state.to_string(),
                leader_epoch: v.leader_epoch,
                state_epoch: v.state_epoch,
                previous_state: v.previous_state.map(|s| s.to_string()),
                retry_attempt: v.retry_attempt,
                error_message: v.error_message.clone(),
            }),
            leader: dir.controller().leader,
            leader_epoch: dir.controller().leader_epoch,
            isr: dir.controller().isr.clone(),
            writable: gate && (!mirrored || dir.writable()),
            source_dir: config.source_dir.as_ref().map(|p| p.display().to_string()),
            replicas,
            last_mirrored_epochs: cluster
                .state_log
                .coordinator()
                .last_mirrored_epochs()
                .filter(|(k, _)| k.topic_id == config.topic_id)
                .map(|(k, v)| LmeStatus {
                    mirror: k.mirror.to_string(),
                    last_mirrored_epoch: v.last_mirrored_epoch,
                    last_mirrored_offset: v.last_mirrored_offset,
                })
                .collect(),
        }
    }

    /// The status as a human-readable block.
    pub fn render(&self) -> String {
        use std::fmt::Write as _;
        let mut out = String::new();
        let _ = writeln!(out, "cluster      {} ({})", self.cluster, self.dir);
        let _ = writeln!(
            out,
            "partition    {}  topic id {}",
            self.partition, self.topic_id
        );
        let _ = writeln!(
            out,
            "mirror.name  {}  -> {}",
            self.mirror_name.as_deref().unwrap_or("(absent)"),
            self.desired
        );
        match &self.state_record {
            Some(r) => {
                let _ = writeln!(
                    out,
                    "state        {}  (state epoch {}, written at leader epoch {}, previous {}{}{})",
                    r.state,
                    r.state_epoch,
                    r.leader_epoch,
                    r.previous_state.as_deref().unwrap_or("-"),
                    if r.retry_attempt > 0 {
                        format!(", retry attempt {}", r.retry_attempt)
                    } else {
                        String::new()
                    },
                    r.error_message
                        .as_deref()
                        .map(|e| format!(", error: {e}"))
                        .unwrap_or_default()
                );
            }
            None => {
                let _ = writeln!(out, "state        {}  (nothing persisted)", self.state);
            }
        }
        let _ = writeln!(
            out,
            "leader       broker {}, leader epoch {}, ISR {:?}; {}",
            self.leader,
            self.leader_epoch,
            self.isr,
            if self.writable {
                "writable by local producers"
            } else {
                "read-only for local producers"
            }
        );
        if let Some(s) = &self.source_dir {
            let _ = writeln!(out, "source       {s}");
        }
        for l in &self.last_mirrored_epochs {
            let _ = writeln!(
                out,
                "LME          mirror {}: epoch {}, offset {}",
                l.mirror,
                l.last_mirrored_epoch
                    .map_or("-1".to_owned(), |e| e.to_string()),
                l.last_mirrored_offset
            );
        }
        let _ = writeln!(
            out,
            "{:<10} {:>8} {:>8} {:>8} {:>8} {:>8}  epochs (epoch@start)  open txns",
            "replica", "start", "LEO", "HW", "LSO", "batches"
        );
        for r in &self.replicas {
            let _ = writeln!(
                out,
                "{:<10} {:>8} {:>8} {:>8} {:>8} {:>8}  {:<20}  {}",
                format!("{}{}", r.broker, if r.leader { " leader" } else { "" }),
                r.log_start_offset,
                r.log_end_offset,
                r.high_watermark,
                r.last_stable_offset,
                r.batches,
                format_epochs_compact(&r.epochs),
                if r.open_transactions.is_empty() {
                    "-".to_owned()
                } else {
                    r.open_transactions
                        .iter()
                        .map(|(p, o)| format!("pid {p}@{o}"))
                        .collect::<Vec<_>>()
                        .join(" ")
                }
            );
        }
        out
    }
}

/// `epoch@start` pairs, space-separated (`-` for none).
pub fn format_epochs(epochs: &[(LeaderEpoch, Offset)]) -> String {
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

/// Like [`format_epochs`], eliding the middle of a long cache.
pub fn format_epochs_compact(epochs: &[(LeaderEpoch, Offset)]) -> String {
    if epochs.len() <= 8 {
        return format_epochs(epochs);
    }
    format!(
        "{} .. ({} epochs) .. {}",
        format_epochs(&epochs[..2]),
        epochs.len(),
        format_epochs(&epochs[epochs.len() - 3..])
    )
}
