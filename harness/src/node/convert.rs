//! A single-partition cluster directory (the older destination format, `cluster.properties`)
//! converted into a node destination holding its one partition (`kmirror convert`).
//!
//! The old directory is read ([`SinglePartitionDir`]) and left as it is; it stays locked while it
//! is copied, and its logs are recovered as copies, when the node is first opened. The node is built beside its final path
//! (`.<name>.converting`) and renamed into place, so a crash leaves no node or a whole one:
//!
//! - the leader's log `broker-<leader>/<topic>-0/` is copied to `data/<topic>-0/`, with its
//!   segments, indexes and checkpoint files;
//! - the cluster's `__mirror_state` log `broker-<leader>/__mirror_state-0/` to
//!   `data/__mirror_state-0/`: the node has `mirror_state.partitions=1`, so every record's key
//!   maps to partition 0, where it already is;
//! - `cluster.properties`, `controller-state` and `produce-gate` become `node.properties`:
//!   `broker.id` the leader, `replicas` the replica count, `segment.bytes`, `mirrors`, the topic
//!   with its id, one partition and its `mirror.name`, the partition's leader epoch and produce
//!   gate (which the kernel re-decides when the node next runs: it is closed until then).
//!
//! The node is written in the older node layout (`format=kmirror-node-1`: checkpoint files in
//! each partition directory, as the single-partition format keeps them), and then opened once,
//! which recovers every log and migrates the checkpoints into the log dir's files. The
//! followers' logs are not copied: the node's followers copy the leader's log when it is first
//! led. Where the cluster mirrored from (`source.dir`, a local directory) is not carried: a node
//! mirrors from a live cluster (`kmirror mirror --source-bootstrap ... --mirror-name <the
//! topic's mirror>`).

use std::fs;
use std::path::{Path, PathBuf};

use kmirror_kernel::desired::DesiredState;
use kmirror_kernel::log::LogView;
use kmirror_kernel::node::PartitionKey;
use kmirror_kernel::state::MirrorState;
use kmirror_kernel::types::Offset;

use crate::dir_lock;
use crate::segment;

use super::dest::{
    NodeMeta, NodePartition, NodeTopic, LOG_DIR, NODE_FILE, NODE_FORMAT,
    NODE_FORMAT_PER_PARTITION_CHECKPOINTS,
};
use super::single_partition::SinglePartitionDir;
use super::{NodeDriver, NodeDriverOptions, NodeError};

/// What a conversion made.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Converted {
    /// The topic.
    pub topic: String,
    /// Its `mirror.name` (`None`: not mirrored).
    pub mirror_name: Option<String>,
    /// The partition's persisted mirror state, as the node reads it.
    pub state: MirrorState,
    /// The partition's log end offset.
    pub log_end_offset: Offset,
    /// Replicas of the partition (the node's `replicas`).
    pub replicas: u32,
}

/// Converts the single-partition cluster directory `from` into a new node destination at `to`
/// (missing, or an empty directory). See the [module documentation](self).
pub fn convert_single_partition(from: &Path, to: &Path) -> Result<Converted, NodeError> {
    let invalid = |message: String| NodeError::Invalid { message };
    if super::NodeDest::is_node_dest(from) {
        return Err(invalid(format!(
            "{} is a node destination already; nothing to convert",
            from.display()
        )));
    }
    if to.exists()
        && fs::read_dir(to)
            .map_err(|e| io("read", to, e))?
            .next()
            .is_some()
    {
        return Err(invalid(format!(
            "{} exists and is not empty; convert into a new directory",
            to.display()
        )));
    }
    // Held while it is copied, so no command of the old format writes to it meanwhile.
    let _held = dir_lock::lock_exclusive(from)?;
    let old = SinglePartitionDir::read(from)?;

    let mut meta = NodeMeta::new(None, 1);
    meta.broker = old.leader;
    meta.replicas = old.replicas;
    meta.segment_bytes = old.segment_bytes;
    meta.mirrors = old.mirrors.clone();
    let mirror_name = match old.desired {
        DesiredState::NotMirrored => None,
        _ => old.mirror_name.clone(),
    };
    meta.topics.insert(
        old.topic.clone(),
        NodeTopic {
            topic_id: old.topic_id,
            partitions: 1,
            mirror_name: mirror_name.clone(),
        },
    );
    meta.partitions.insert(
        (old.topic.clone(), 0),
        NodePartition {
            leader_epoch: old.leader_epoch,
            writable: old.writable,
        },
    );

    let building = beside(to, "converting")?;
    if building.exists() {
        // What a crashed conversion left: never named, never used.
        fs::remove_dir_all(&building).map_err(|e| io("delete", &building, e))?;
    }
    let log_dir = building.join(LOG_DIR);
    for dir in [old.leader_log_dir(), old.mirror_state_dir()] {
        // A cluster that never wrote a log has no directory for it: the node creates one.
        if dir.is_dir() {
            copy_dir(&dir, &log_dir.join(dir.file_name().unwrap_or_default()))?;
        }
    }
    segment::sync_dir(&log_dir).map_err(|source| NodeError::Log {
        dir: log_dir.clone(),
        source: Box::new(source),
    })?;
    let text = meta.encode().replacen(
        &format!("format={NODE_FORMAT}\n"),
        &format!("format={NODE_FORMAT_PER_PARTITION_CHECKPOINTS}\n"),
        1,
    );
    segment::write_atomically(&building, NODE_FILE, text.as_bytes()).map_err(|source| {
        NodeError::Log {
            dir: building.join(NODE_FILE),
            source: Box::new(source),
        }
    })?;
    fs::rename(&building, to).map_err(|e| io("rename", &building, e))?;
    if let Some(parent) = to.parent().filter(|p| !p.as_os_str().is_empty()) {
        segment::sync_dir(parent).map_err(|source| NodeError::Log {
            dir: parent.to_path_buf(),
            source: Box::new(source),
        })?;
    }

    // Opened once: every log recovered, the checkpoints migrated to the log dir's files.
    let driver = NodeDriver::open(to, None, NodeDriverOptions::default())?;
    let key = PartitionKey::new(old.topic_id, 0);
    let converted = Converted {
        topic: old.topic.clone(),
        mirror_name,
        state: driver.persisted_state(&key),
        log_end_offset: driver.log(&key).map_or(0, |l| l.log_end_offset()),
        replicas: meta.replicas,
    };
    driver.close()?;
    Ok(converted)
}

/// `.<name>.<what>` beside `path`.
fn beside(path: &Path, what: &str) -> Result<PathBuf, NodeError> {
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| NodeError::Invalid {
            message: format!("{} does not end in a directory name", path.display()),
        })?;
    Ok(path.with_file_name(format!(".{name}.{what}")))
}

/// Copies the files of the log directory `from` into a new directory `to`, each fsynced, then
/// `to` itself.
fn copy_dir(from: &Path, to: &Path) -> Result<(), NodeError> {
    fs::create_dir_all(to).map_err(|e| io("create", to, e))?;
    for entry in fs::read_dir(from).map_err(|e| io("list", from, e))? {
        let entry = entry.map_err(|e| io("list", from, e))?;
        let source = entry.path();
        if !source.is_file() {
            continue;
        }
        let target = to.join(entry.file_name());
        fs::copy(&source, &target).map_err(|e| io("copy", &source, e))?;
        fs::File::open(&target)
            .and_then(|f| f.sync_all())
            .map_err(|e| io("sync", &target, e))?;
    }
    segment::sync_dir(to).map_err(|source| NodeError::Log {
        dir: to.to_path_buf(),
        source: Box::new(source),
    })
}

fn io(action: &'static str, path: &Path, source: std::io::Error) -> NodeError {
    NodeError::Io {
        action,
        path: path.to_path_buf(),
        source,
    }
}
