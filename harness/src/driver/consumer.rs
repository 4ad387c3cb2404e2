//! A small consumer for tests and demos: it reads a cluster directory's partition from a
//! group's committed offset and commits where it stopped, in the cluster's metadata directory.
//!
//! It reads whole batches below the leader's last stable offset and skips control batches
//! (`read_committed` for logs without aborted transactions; it does not consult an abort
//! index). A group without a committed offset starts at the log start offset
//! (`auto.offset.reset=earliest`).

use std::path::Path;

use kmirror_kernel::log::LogView;
use kmirror_kernel::sync::group_offsets::TopicPartition;
use kmirror_kernel::types::Offset;

use super::{Cluster, PARTITION};
use crate::file_log::FileLog;
use crate::sync::local::MetadataDir;
use crate::sync::{GroupRecord, SyncError};

/// One record read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConsumedRecord {
    /// Its offset.
    pub offset: Offset,
    /// Its value (`None`: null).
    pub value: Option<Vec<u8>>,
}

/// What a poll returned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Consumed {
    /// Where the poll started.
    pub from: Offset,
    /// The records, in offset order.
    pub records: Vec<ConsumedRecord>,
    /// The offset to commit: after the last record read (or `from`).
    pub next_offset: Offset,
}

/// At most `max` records of `log` from offset `from`, below the last stable offset.
pub fn poll(log: &FileLog, from: Offset, max: usize) -> Result<Consumed, SyncError> {
    let bound = log.last_stable_offset();
    let batches = log.try_read(from, bound).map_err(|e| SyncError::Io {
        action: "read",
        path: log.dir().to_path_buf(),
        source: std::io::Error::other(e.to_string()),
    })?;
    let mut records = Vec::new();
    let mut next_offset = from;
    'batches: for batch in batches {
        let header = batch.header();
        if header.last_offset >= bound {
            break;
        }
        if header.control.is_some() {
            next_offset = next_offset.max(header.last_offset + 1);
            continue;
        }
        let decoded = batch.records().map_err(|e| SyncError::Io {
            action: "decode a batch of",
            path: log.dir().to_path_buf(),
            source: std::io::Error::other(e.to_string()),
        })?;
        for r in decoded {
            let offset = header.base_offset + i64::from(r.offset_delta);
            if offset < from {
                continue;
            }
            if records.len() >= max {
                break 'batches;
            }
            records.push(ConsumedRecord {
                offset,
                value: r.value,
            });
            next_offset = offset + 1;
        }
    }
    Ok(Consumed {
        from,
        records,
        next_offset,
    })
}

/// Group `group`'s committed offset for the partition of cluster directory `root`.
pub fn committed(root: &Path, topic: &str, group: &str) -> Result<Option<Offset>, SyncError> {
    let groups = MetadataDir::of(root).read_groups()?;
    Ok(groups
        .value
        .get(group)
        .and_then(|g| g.offsets.get(&TopicPartition::new(topic, PARTITION)))
        .copied())
}

/// Commits `offset` for group `group` on the partition of the open cluster `cluster`, with
/// `members` as the group's active members.
pub fn commit(
    cluster: &Cluster,
    group: &str,
    offset: Offset,
    members: &[String],
) -> Result<(), SyncError> {
    let meta = MetadataDir::of(cluster.dir.root());
    let mut record = meta
        .read_groups()?
        .value
        .remove(group)
        .unwrap_or_else(GroupRecord::default);
    record.members = members.to_vec();
    record.offsets.insert(
        TopicPartition::new(cluster.dir.config().topic.clone(), PARTITION),
        offset,
    );
    meta.write_group(group, &record)
}

/// Consumes at most `max` records of cluster directory `root` as group `group` (from its
/// committed offset), then commits the next offset (`commit = true`) and leaves the group.
pub fn consume_as_group(
    root: &Path,
    group: &str,
    max: usize,
    commit_after: bool,
) -> Result<Consumed, SyncError> {
    let cluster = Cluster::open_leader_only(root)?;
    let topic = cluster.dir.config().topic.clone();
    let from = match committed(root, &topic, group)? {
        Some(o) => o,
        None => cluster.leader.log_start_offset(),
    };
    let consumed = poll(&cluster.leader, from, max)?;
    if commit_after {
        commit(&cluster, group, consumed.next_offset, &[])?;
    }
    Ok(consumed)
}
