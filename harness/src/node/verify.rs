//! The full scan of a node destination (`kmirror verify DIR`): every partition log of its log
//! dir, every `__mirror_state` partition and every follower replica's log opened with
//! [`Verify::All`], every batch's CRC-32C checked, below the recovery point too; one result per
//! log.
//!
//! Opening a log the normal way ([`Verify::FromRecoveryPoint`]: every other command and the
//! [`NodeDriver`](super::NodeDriver)) checks CRCs only from the recovery point on and trusts
//! what was flushed below it, as Kafka's recovery does; damage there is found when the batch
//! is read, or by this scan. The scan repairs only what a normal open repairs (a torn tail
//! past the recovery point); damage below the recovery point is reported with the file and
//! byte position, never repaired. It holds the destination's lock, so it refuses a directory
//! a running `kmirror` holds.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use kmirror_kernel::log::LogView;
use kmirror_kernel::types::Offset;

use crate::file_log::{FileLog, FileLogConfig, TopicPartition, Verify};
use crate::log_dir_checkpoints::LogDirCheckpoints;
use crate::mirror_state_log::MIRROR_STATE_TOPIC;
use crate::recovery::RecoveryReport;

use super::{NodeDest, NodeError};

/// One log that passed the full scan.
#[derive(Debug)]
pub struct LogScan {
    /// Segment files.
    pub segments: usize,
    /// The log start offset.
    pub log_start_offset: Offset,
    /// The log end offset.
    pub log_end_offset: Offset,
    /// What opening found and repaired (a torn tail past the recovery point is cut, as a
    /// normal open cuts it); its `verified_bytes` are the bytes whose CRC-32C was checked.
    pub report: RecoveryReport,
}

/// The verdict on one log of a node destination.
#[derive(Debug)]
pub struct LogVerdict {
    /// The partition directory.
    pub dir: PathBuf,
    /// The scan, or why the log is damaged (a bad batch below the recovery point, a missing
    /// directory, ...).
    pub result: Result<LogScan, NodeError>,
}

/// Scans every log of the node destination at `root` with [`Verify::All`]: each partition of
/// every topic in `node.properties`, every `__mirror_state` partition, and any other
/// `<topic>-<partition>` directory of the log dir, in directory-name order; then every
/// follower broker's log dir (`replicas/broker-<id>/`), each of its partition directories. A
/// follower without a partition's directory is not damaged (it copies the partition from the
/// leader again), so only the leader's listed partitions are missed when missing. Fails as a
/// whole only when the destination cannot be read (not a node destination, in use, a damaged
/// `node.properties` or log-dir checkpoint file); a damaged log is its own verdict.
pub fn verify_node(root: &Path) -> Result<Vec<LogVerdict>, NodeError> {
    let dest = NodeDest::open(root)?;
    let meta = dest.meta();
    // What node.properties says the node holds, then whatever else the log dir holds.
    let mut listed = BTreeSet::new();
    for (name, topic) in &meta.topics {
        for p in 0..topic.partitions {
            listed.insert(format!("{name}-{p}"));
        }
    }
    for k in 0..meta.mirror_state_partitions {
        listed.insert(format!("{MIRROR_STATE_TOPIC}-{k}"));
    }
    let config = dest.file_log_config();
    let mut verdicts = scan_log_dir(&dest.log_dir(), listed, config)?;
    for id in meta.follower_ids() {
        let log_dir = dest.replica_log_dir(id);
        if log_dir.is_dir() {
            verdicts.extend(scan_log_dir(&log_dir, BTreeSet::new(), config)?);
        }
    }
    Ok(verdicts)
}

/// Scans the `listed` partitions of `log_dir` and every other partition directory it holds.
fn scan_log_dir(
    log_dir: &Path,
    listed: BTreeSet<String>,
    config: FileLogConfig,
) -> Result<Vec<LogVerdict>, NodeError> {
    let checkpoints =
        Arc::new(
            LogDirCheckpoints::open(log_dir).map_err(|source| NodeError::Log {
                dir: log_dir.to_path_buf(),
                source: Box::new(source),
            })?,
        );
    let mut names = listed;
    let entries = fs::read_dir(log_dir).map_err(|source| NodeError::Io {
        action: "list",
        path: log_dir.to_path_buf(),
        source,
    })?;
    for entry in entries {
        let entry = entry.map_err(|source| NodeError::Io {
            action: "list",
            path: log_dir.to_path_buf(),
            source,
        })?;
        let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
            continue;
        };
        if entry.path().is_dir() && TopicPartition::from_dir_name(&name).is_ok() {
            names.insert(name);
        }
    }
    let mut verdicts = Vec::with_capacity(names.len());
    for name in names {
        let dir = log_dir.join(&name);
        let result = match TopicPartition::from_dir_name(&name) {
            Err(e) => Err(NodeError::Invalid {
                message: format!("{}: {e}", dir.display()),
            }),
            // Opening would create it: a listed partition without its directory lost its log.
            Ok(_) if !dir.is_dir() => Err(NodeError::Invalid {
                message: format!(
                    "{} is missing: node.properties lists {name}, which has lost its log \
                     directory (restore it from a backup)",
                    dir.display()
                ),
            }),
            Ok(tp) => {
                FileLog::open_in_log_dir(log_dir, tp, config, Verify::All, checkpoints.clone())
                    .map(|(log, report)| LogScan {
                        segments: log.segments().len(),
                        log_start_offset: log.log_start_offset(),
                        log_end_offset: log.log_end_offset(),
                        report,
                    })
                    .map_err(|source| NodeError::Log {
                        dir: dir.clone(),
                        source: Box::new(source),
                    })
            }
        };
        verdicts.push(LogVerdict { dir, result });
    }
    Ok(verdicts)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;
    use crate::error::FileLogError;
    use crate::node::fixture::{added, fake};
    use crate::node::{NodeDriver, NodeDriverOptions, NodeUntil};

    /// A flipped payload byte below the recovery point: a normal open trusts it (as Kafka's
    /// recovery does), the full scan names it; a listed partition without its directory is a
    /// verdict of its own; nothing else is reported and the scan changes no file.
    #[test]
    fn the_full_scan_finds_what_a_normal_open_trusts() {
        let fake = fake();
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("west");
        let mut driver = added(&fake, &root);
        driver
            .run(
                &mut ManualClock::default(),
                NodeUntil::CaughtUp,
                &mut |_, _| {},
            )
            .unwrap();
        driver.close().unwrap();

        let verdicts = verify_node(&root).unwrap();
        // orders 3 + pay.eu 2 + __mirror_state 4.
        assert_eq!(verdicts.len(), 9, "{verdicts:#?}");
        assert!(verdicts.iter().all(|v| v.result.is_ok()), "{verdicts:#?}");
        let scanned: u64 = verdicts
            .iter()
            .map(|v| v.result.as_ref().unwrap().report.verified_bytes)
            .sum();
        assert!(scanned > 0);

        let segment = root.join("data/orders-1/00000000000000000000.log");
        let mut bytes = fs::read(&segment).unwrap();
        bytes[70] ^= 0x40; // inside the first batch's records
        fs::write(&segment, bytes).unwrap();
        // A normal open trusts orders-1 below its recovery point.
        NodeDriver::open(&root, None, NodeDriverOptions::default())
            .unwrap()
            .close()
            .unwrap();
        fs::remove_dir_all(root.join("data/orders-2")).unwrap();

        let before = fs::read(&segment).unwrap();
        let verdicts = verify_node(&root).unwrap();
        assert_eq!(verdicts.len(), 9);
        let bad: Vec<(String, &NodeError)> = verdicts
            .iter()
            .filter_map(|v| {
                let name = v.dir.file_name().unwrap().to_str().unwrap().to_owned();
                v.result.as_ref().err().map(|e| (name, e))
            })
            .collect();
        assert_eq!(bad.len(), 2, "{bad:#?}");
        assert_eq!(bad[0].0, "orders-1");
        assert!(
            matches!(
                bad[0].1,
                NodeError::Log { source, .. }
                    if matches!(**source, FileLogError::CorruptSegment { .. })
            ),
            "{}",
            bad[0].1
        );
        assert!(bad[0].1.to_string().contains("below the recovery point"));
        assert_eq!(bad[1].0, "orders-2");
        assert!(bad[1].1.to_string().contains("is missing"), "{}", bad[1].1);
        assert!(
            !root.join("data/orders-2").exists(),
            "the scan created a log"
        );
        assert_eq!(fs::read(&segment).unwrap(), before, "the scan repaired");
    }
}
