//! [`LogDirCheckpoints`]: Kafka's log-dir-level offset checkpoints, one file of each kind for
//! every partition of a log dir, as Kafka's `LogManager` keeps them.
//!
//! | file (in the log dir) | one line per partition |
//! |---|---|
//! | `recovery-point-offset-checkpoint` | the recovery point: every batch below it was fsynced |
//! | `replication-offset-checkpoint` | the high watermark |
//! | `log-start-offset-checkpoint` | the log start offset |
//!
//! Each is Kafka's `OffsetCheckpointFile` text format, `0` (version), the entry count, then
//! `<topic> <partition> <offset>` per partition, written atomically (`<name>.tmp`, fsync,
//! rename, directory fsync; a leftover `.tmp` is removed on open).
//!
//! A [`FileLog`](crate::file_log::FileLog) opened with a `LogDirCheckpoints`
//! ([`FileLog::open_in_log_dir`](crate::file_log::FileLog::open_in_log_dir)) keeps its
//! offsets here instead of in per-partition files. What it *raises* (the recovery point after
//! an fsync, the high watermark) is only recorded in memory and reaches the disk with the next
//! [`LogDirCheckpoints::write`], which the owner of the log dir calls once per fetch round and
//! at close, one write per file for all partitions (group commit). That is safe because a
//! checkpoint that lags only makes recovery verify more: the recovery point on disk never
//! names data that was not fsynced, since the log records it in memory only after the fsync.
//! What a log *lowers* or *moves* (a truncation lowering the recovery point or the high
//! watermark, a new log start offset) is written before the log changes its files
//! ([`LogDirCheckpoints::set_now`]): a recovery point left above a truncation would make
//! recovery trust bytes appended after it that were never fsynced.

use std::collections::BTreeMap;
use std::fs;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use kmirror_kernel::types::{Offset, PartitionIndex};

use crate::checkpoint_files::{
    decode_offset_checkpoint_entries, HIGH_WATERMARK_FILE, LOG_START_OFFSET_FILE,
    RECOVERY_POINT_FILE,
};
use crate::error::{CheckpointError, FileLogError};
use crate::segment;
use crate::topic_partition::TopicPartition;

/// One of the three log-dir-level offset checkpoints.
#[derive(Clone, Copy, PartialEq, Eq, Debug, PartialOrd, Ord)]
pub enum CheckpointKind {
    /// `recovery-point-offset-checkpoint`.
    RecoveryPoint,
    /// `replication-offset-checkpoint` (the high watermark).
    HighWatermark,
    /// `log-start-offset-checkpoint`.
    LogStartOffset,
}

impl CheckpointKind {
    /// Every kind, in the order files are written.
    pub const ALL: [CheckpointKind; 3] = [
        CheckpointKind::RecoveryPoint,
        CheckpointKind::HighWatermark,
        CheckpointKind::LogStartOffset,
    ];

    /// The file name (Kafka's).
    pub fn file_name(self) -> &'static str {
        match self {
            CheckpointKind::RecoveryPoint => RECOVERY_POINT_FILE,
            CheckpointKind::HighWatermark => HIGH_WATERMARK_FILE,
            CheckpointKind::LogStartOffset => LOG_START_OFFSET_FILE,
        }
    }

    fn index(self) -> usize {
        match self {
            CheckpointKind::RecoveryPoint => 0,
            CheckpointKind::HighWatermark => 1,
            CheckpointKind::LogStartOffset => 2,
        }
    }
}

type Entries = BTreeMap<(String, PartitionIndex), Offset>;

#[derive(Debug, Default)]
struct Files {
    /// The current entries of each kind.
    current: [Entries; 3],
    /// What each file holds on disk (as last read or written).
    on_disk: [Entries; 3],
}

/// The log-dir-level checkpoints of one log dir. See the [module documentation](self).
#[derive(Debug)]
pub struct LogDirCheckpoints {
    dir: PathBuf,
    files: Mutex<Files>,
}

impl LogDirCheckpoints {
    /// Reads the checkpoints of `log_dir` (a missing file has no entries), removing leftover
    /// `.tmp` files of an interrupted write. A file that does not parse is
    /// [`FileLogError::Checkpoint`] naming it and the line.
    pub fn open(log_dir: &Path) -> Result<Self, FileLogError> {
        Self::load(log_dir, true)
    }

    /// Reads the checkpoints of `log_dir` as [`LogDirCheckpoints::open`] does, changing
    /// nothing (a leftover `.tmp` stays). For readers only: never [`LogDirCheckpoints::write`]
    /// through it.
    pub fn open_read_only(log_dir: &Path) -> Result<Self, FileLogError> {
        Self::load(log_dir, false)
    }

    fn load(log_dir: &Path, remove_leftovers: bool) -> Result<Self, FileLogError> {
        let mut files = Files::default();
        let mut removed = false;
        for kind in CheckpointKind::ALL {
            let path = log_dir.join(kind.file_name());
            let tmp = log_dir.join(format!("{}.tmp", kind.file_name()));
            if remove_leftovers {
                match fs::remove_file(&tmp) {
                    Ok(()) => removed = true,
                    Err(e) if e.kind() == ErrorKind::NotFound => {}
                    Err(e) => return Err(FileLogError::io("delete", tmp, e)),
                }
            }
            let text = match fs::read(&path) {
                Ok(bytes) => String::from_utf8(bytes).map_err(|e| {
                    FileLogError::Checkpoint(CheckpointError {
                        file: path.clone(),
                        line: 0,
                        reason: format!("not UTF-8 text (byte {})", e.utf8_error().valid_up_to()),
                    })
                })?,
                Err(e) if e.kind() == ErrorKind::NotFound => continue,
                Err(e) => return Err(FileLogError::io("read", path, e)),
            };
            let entries: Entries = decode_offset_checkpoint_entries(&text, &path)?
                .into_iter()
                .collect();
            files.on_disk[kind.index()] = entries.clone();
            files.current[kind.index()] = entries;
        }
        if removed {
            segment::sync_dir(log_dir)?;
        }
        Ok(LogDirCheckpoints {
            dir: log_dir.to_path_buf(),
            files: Mutex::new(files),
        })
    }

    /// The log dir.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Files> {
        self.files.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The offset of kind `kind` recorded for `tp` (in memory: what the next
    /// [`LogDirCheckpoints::write`] writes).
    pub fn get(&self, kind: CheckpointKind, tp: &TopicPartition) -> Option<Offset> {
        self.lock().current[kind.index()]
            .get(&(tp.topic.clone(), tp.partition))
            .copied()
    }

    /// The offset of kind `kind` for `tp` in the file on disk.
    pub fn on_disk(&self, kind: CheckpointKind, tp: &TopicPartition) -> Option<Offset> {
        self.lock().on_disk[kind.index()]
            .get(&(tp.topic.clone(), tp.partition))
            .copied()
    }

    /// Records `offset` for `tp`, in memory; the next [`LogDirCheckpoints::write`] writes it.
    pub fn set(&self, kind: CheckpointKind, tp: &TopicPartition, offset: Offset) {
        self.lock().current[kind.index()].insert((tp.topic.clone(), tp.partition), offset);
    }

    /// Records `offset` for `tp` and writes that kind's file before returning (with every
    /// other partition's current entry of that kind).
    pub fn set_now(
        &self,
        kind: CheckpointKind,
        tp: &TopicPartition,
        offset: Offset,
    ) -> Result<(), FileLogError> {
        let mut files = self.lock();
        files.current[kind.index()].insert((tp.topic.clone(), tp.partition), offset);
        self.write_kind(&mut files, kind)
    }

    /// Forgets every entry of `tp` (a deleted partition), in memory; the next
    /// [`LogDirCheckpoints::write`] leaves it out of the files.
    pub fn forget(&self, tp: &TopicPartition) {
        let at = (tp.topic.clone(), tp.partition);
        for entries in &mut self.lock().current {
            entries.remove(&at);
        }
    }

    /// The partitions with an entry of any kind (in memory).
    pub fn partitions(&self) -> Vec<(String, PartitionIndex)> {
        let files = self.lock();
        let mut all: Vec<(String, PartitionIndex)> = files
            .current
            .iter()
            .flat_map(|e| e.keys().cloned())
            .collect();
        all.sort();
        all.dedup();
        all
    }

    /// Whether some entry differs from the files on disk.
    pub fn is_dirty(&self) -> bool {
        let files = self.lock();
        CheckpointKind::ALL
            .iter()
            .any(|k| files.current[k.index()] != files.on_disk[k.index()])
    }

    /// Writes every file whose entries changed since it was last read or written (atomically,
    /// one write per file for every partition). Returns how many files were written.
    pub fn write(&self) -> Result<usize, FileLogError> {
        let mut files = self.lock();
        let mut written = 0;
        for kind in CheckpointKind::ALL {
            if files.current[kind.index()] != files.on_disk[kind.index()] {
                self.write_kind(&mut files, kind)?;
                written += 1;
            }
        }
        Ok(written)
    }

    fn write_kind(&self, files: &mut Files, kind: CheckpointKind) -> Result<(), FileLogError> {
        let entries = &files.current[kind.index()];
        let text = encode_offset_checkpoint_entries(entries);
        segment::write_atomically(&self.dir, kind.file_name(), text.as_bytes())?;
        files.on_disk[kind.index()] = entries.clone();
        Ok(())
    }
}

/// Kafka's `OffsetCheckpointFile` text of `entries`.
fn encode_offset_checkpoint_entries(entries: &Entries) -> String {
    let mut out = format!("0\n{}\n", entries.len());
    for ((topic, partition), offset) in entries {
        out.push_str(&format!("{topic} {partition} {offset}\n"));
    }
    out
}

/// Where a log keeps its recovery point, high watermark and log start offset.
#[derive(Clone, Debug)]
pub(crate) enum Checkpoints {
    /// In its own directory, one file each (standalone logs, and the older node layout).
    PerPartition,
    /// In its log dir's [`LogDirCheckpoints`], with every other partition of that log dir
    /// (the node layout, Kafka's).
    LogDir(Arc<LogDirCheckpoints>),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raised_offsets_wait_for_write_and_lowered_ones_are_written_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let a = TopicPartition::new("a", 0).unwrap();
        let b = TopicPartition::new("b", 3).unwrap();
        let c = LogDirCheckpoints::open(dir.path()).unwrap();
        c.set(CheckpointKind::RecoveryPoint, &a, 10);
        c.set(CheckpointKind::RecoveryPoint, &b, 20);
        assert!(c.is_dirty());
        assert_eq!(c.get(CheckpointKind::RecoveryPoint, &a), Some(10));
        assert_eq!(c.on_disk(CheckpointKind::RecoveryPoint, &a), None);
        assert!(!dir.path().join(RECOVERY_POINT_FILE).exists());
        assert_eq!(c.write().unwrap(), 1);
        assert!(!c.is_dirty());
        assert_eq!(
            fs::read_to_string(dir.path().join(RECOVERY_POINT_FILE)).unwrap(),
            "0\n2\na 0 10\nb 3 20\n"
        );
        c.set(CheckpointKind::HighWatermark, &a, 7);
        c.set_now(CheckpointKind::RecoveryPoint, &b, 5).unwrap();
        assert_eq!(
            fs::read_to_string(dir.path().join(RECOVERY_POINT_FILE)).unwrap(),
            "0\n2\na 0 10\nb 3 5\n"
        );
        assert!(c.is_dirty(), "the high watermark is not written yet");
        assert_eq!(c.write().unwrap(), 1);
        assert_eq!(c.write().unwrap(), 0);
        drop(c);
        fs::write(dir.path().join("log-start-offset-checkpoint.tmp"), "x").unwrap();
        let c = LogDirCheckpoints::open(dir.path()).unwrap();
        assert!(!dir.path().join("log-start-offset-checkpoint.tmp").exists());
        assert_eq!(c.on_disk(CheckpointKind::RecoveryPoint, &b), Some(5));
        assert_eq!(c.get(CheckpointKind::HighWatermark, &a), Some(7));
        assert_eq!(c.get(CheckpointKind::LogStartOffset, &a), None);
    }

    #[test]
    fn a_damaged_file_is_refused_naming_it_and_the_line() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join(HIGH_WATERMARK_FILE), "0\n2\na 0 1\na 0 2\n").unwrap();
        let e = LogDirCheckpoints::open(dir.path()).unwrap_err();
        let FileLogError::Checkpoint(e) = e else {
            panic!("{e}")
        };
        assert_eq!(e.line, 4);
        assert!(e.file.ends_with(HIGH_WATERMARK_FILE));
    }
}
