//! [`MirrorStateLog`]: the `__mirror_state` topic partition of a cluster on disk, and the
//! [`Coordinator`] rebuilt from it.
//!
//! # On disk
//!
//! `__mirror_state` is an ordinary partition directory `<log dir>/__mirror_state-0/` written by a
//! [`FileLog`] (segments of record batches v2, Kafka's checkpoints; see
//! [`file_log`](crate::file_log)). Each accepted coordinator write is one batch appended at the log
//! end offset and fsynced before the write is acknowledged:
//!
//! - a plain data batch (no producer, not transactional), leader epoch
//!   [`MIRROR_STATE_LEADER_EPOCH`], records stamped with the timestamp the caller passes;
//! - one record per [`MirrorStateRecord`], key and value encoded by
//!   [`kmirror_kernel::records`] (a tombstone has a null value).
//!
//! The harness runs `__mirror_state` with one partition: every key's
//! [`mirror_state_partition`](kmirror_kernel::partitioner::mirror_state_partition) of 1 is 0.
//! The high watermark is advanced to the log end offset after each append (the coordinator is the
//! only replica).
//!
//! # Reading it back
//!
//! [`MirrorStateLog::open`] recovers the directory ([`FileLog::open`]), decodes every record and
//! replays them in offset order with [`Coordinator::replay`]: the compacted view, the last value
//! per key winning. A record that does not decode is a [`MirrorStateLogError::BadRecord`] naming
//! the directory and offset: the coordinator refuses to start on a log it cannot read rather than
//! forget a state.
//!
//! # Writes
//!
//! [`MirrorStateLog::write_state`] applies the coordinator's fences to a copy of the store; only
//! an accepted write is appended, and the store is updated only once the append is on disk, so a
//! crash never leaves an acknowledged write unlogged or a refused one logged.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use kmirror_kernel::batch::BatchHeader;
use kmirror_kernel::coordinator::{Coordinator, WriteRefused};
use kmirror_kernel::log::{LogView, PartitionLog};
use kmirror_kernel::records::{
    LastMirroredEpochsValue, MirrorPartitionStateValue, MirrorStateRecord, RecordDecodeError,
    RecordEncodeError,
};
use kmirror_kernel::state::TransitionTable;
use kmirror_kernel::types::{
    LeaderEpoch, MirrorPartition, Offset, PartitionIndex, StateEpoch, TopicId,
};

use crate::error::{BatchError, FileLogError};
use crate::file_log::{FileLog, FileLogConfig, FlushPolicy, TopicPartition};
use crate::record_batch::{RawBatch, Record};
use crate::recovery::RecoveryReport;

pub use crate::topic_partition::MIRROR_STATE_TOPIC;
/// The partition of `__mirror_state` the harness uses (it runs the topic with one partition).
pub const MIRROR_STATE_PARTITION: PartitionIndex = 0;
/// The leader epoch stamped on `__mirror_state` batches (the coordinator never moves).
pub const MIRROR_STATE_LEADER_EPOCH: LeaderEpoch = 0;

/// Why the `__mirror_state` log cannot be read or written.
#[derive(Debug, thiserror::Error)]
pub enum MirrorStateLogError {
    /// The partition directory itself failed (I/O, corrupt segment, bad checkpoint...).
    #[error("__mirror_state log {}: {source}", dir.display())]
    Log {
        /// The `__mirror_state-0` directory.
        dir: PathBuf,
        /// What failed.
        source: Box<FileLogError>,
    },
    /// A record whose bytes are not a `__mirror_state` record.
    #[error(
        "__mirror_state log {} holds an unreadable record at offset {offset}: {source}; the \
         coordinator cannot rebuild its state (restore the directory from a backup)",
        dir.display()
    )]
    BadRecord {
        /// The `__mirror_state-0` directory.
        dir: PathBuf,
        /// The record's offset.
        offset: Offset,
        /// Why it does not decode.
        source: RecordDecodeError,
    },
    /// A batch whose records cannot be decoded at all (compressed, malformed).
    #[error(
        "__mirror_state log {} holds an unreadable batch at offset {offset}: {source}",
        dir.display()
    )]
    BadBatch {
        /// The `__mirror_state-0` directory.
        dir: PathBuf,
        /// The batch's base offset.
        offset: Offset,
        /// Why its records do not decode.
        source: BatchError,
    },
    /// A record without a key (every `__mirror_state` record has one).
    #[error(
        "__mirror_state log {} holds a record without a key at offset {offset}",
        dir.display()
    )]
    MissingKey {
        /// The `__mirror_state-0` directory.
        dir: PathBuf,
        /// The record's offset.
        offset: Offset,
    },
    /// A record the kernel's codec refuses to encode.
    #[error("cannot encode a __mirror_state record: {0}")]
    Encode(#[from] RecordEncodeError),
    /// The batch holding new records could not be built.
    #[error("cannot build a __mirror_state batch: {0}")]
    Batch(BatchError),
    /// The directory does not exist (opening would silently create an empty coordinator).
    #[error(
        "__mirror_state log {} does not exist; the cluster directory is incomplete",
        dir.display()
    )]
    Missing {
        /// The missing directory.
        dir: PathBuf,
    },
}

/// The `__mirror_state` log of one cluster and the coordinator it holds. See the
/// [module documentation](self).
#[derive(Debug)]
pub struct MirrorStateLog {
    log: FileLog,
    coordinator: Coordinator,
    /// For each LME key, the offset of its latest record (to answer with the newest one).
    lme_written_at: BTreeMap<MirrorPartition, Offset>,
    report: RecoveryReport,
}

impl MirrorStateLog {
    /// The topic partition of the log.
    pub fn topic_partition() -> TopicPartition {
        TopicPartition {
            topic: MIRROR_STATE_TOPIC.to_owned(),
            partition: MIRROR_STATE_PARTITION,
        }
    }

    /// Creates (or opens, if it exists) the log in `log_dir/__mirror_state-0/`.
    pub fn create(
        log_dir: &Path,
        table: TransitionTable,
        config: FileLogConfig,
    ) -> Result<Self, MirrorStateLogError> {
        Self::open_inner(log_dir, table, config)
    }

    /// Opens the existing log in `log_dir/__mirror_state-0/`, recovering it after a crash, and
    /// rebuilds the coordinator (fencing writes with `table`) by replaying every record.
    pub fn open(
        log_dir: &Path,
        table: TransitionTable,
        config: FileLogConfig,
    ) -> Result<Self, MirrorStateLogError> {
        let dir = log_dir.join(Self::topic_partition().dir_name());
        if !dir.is_dir() {
            return Err(MirrorStateLogError::Missing { dir });
        }
        Self::open_inner(log_dir, table, config)
    }

    fn open_inner(
        log_dir: &Path,
        table: TransitionTable,
        config: FileLogConfig,
    ) -> Result<Self, MirrorStateLogError> {
        let dir = log_dir.join(Self::topic_partition().dir_name());
        let (log, report) =
            FileLog::open(log_dir, Self::topic_partition(), config).map_err(|source| {
                MirrorStateLogError::Log {
                    dir: dir.clone(),
                    source: Box::new(source),
                }
            })?;
        let records = read_records(&log)?;
        let mut lme_written_at = BTreeMap::new();
        for (offset, record) in &records {
            if let MirrorStateRecord::LastMirroredEpochs { partition, .. } = record {
                lme_written_at.insert(partition.clone(), *offset);
            }
            if let MirrorStateRecord::LastMirroredEpochsTombstone(partition) = record {
                lme_written_at.remove(partition);
            }
        }
        let coordinator = Coordinator::new(table).replay(records.iter().map(|(_, r)| r));
        Ok(MirrorStateLog {
            log,
            coordinator,
            lme_written_at,
            report,
        })
    }

    /// The coordinator: the compacted contents of the log.
    pub fn coordinator(&self) -> &Coordinator {
        &self.coordinator
    }

    /// The underlying partition log.
    pub fn log(&self) -> &FileLog {
        &self.log
    }

    /// What opening the directory repaired.
    pub fn recovery_report(&self) -> &RecoveryReport {
        &self.report
    }

    /// Every record in the log with its offset, oldest first, read from disk.
    pub fn records(&self) -> Result<Vec<(Offset, MirrorStateRecord)>, MirrorStateLogError> {
        read_records(&self.log)
    }

    /// Appends `records` as one batch (fsynced) stamped `timestamp_ms`, applies them to the
    /// coordinator, and returns the offset of the first. Records are not fenced: use
    /// [`MirrorStateLog::write_state`] for state writes.
    pub fn append(
        &mut self,
        records: &[MirrorStateRecord],
        timestamp_ms: i64,
    ) -> Result<Offset, MirrorStateLogError> {
        let base = self.log.log_end_offset();
        if records.is_empty() {
            return Ok(base);
        }
        let (header, encoded) = batch_parts(base, records)?;
        let batch = RawBatch::encode(&header, timestamp_ms, &encoded)
            .map_err(MirrorStateLogError::Batch)?;
        let dir = self.log.dir().to_path_buf();
        let log_err = |source| MirrorStateLogError::Log {
            dir: dir.clone(),
            source: Box::new(source),
        };
        self.log.append_as_follower(&[batch]).map_err(log_err)?;
        // Persist first, act after, under every flush policy: the record is on disk before
        // the write is acknowledged (with `EveryAppend` the append itself fsynced it).
        if self.log.config().flush != FlushPolicy::EveryAppend {
            self.log.sync_data().map_err(log_err)?;
        }
        let leo = self.log.log_end_offset();
        self.log.advance_high_watermark(leo).map_err(log_err)?;
        for (delta, record) in records.iter().enumerate() {
            match record {
                MirrorStateRecord::LastMirroredEpochs { partition, .. } => {
                    self.lme_written_at
                        .insert(partition.clone(), base + delta as Offset);
                }
                MirrorStateRecord::LastMirroredEpochsTombstone(partition) => {
                    self.lme_written_at.remove(partition);
                }
                _ => {}
            }
            self.coordinator.apply(record);
        }
        Ok(base)
    }

    /// The coordinator's `WriteMirrorStates` for one key: checks the fences on a copy of the
    /// store; if the write is accepted, appends the stored value (with the state epoch the
    /// coordinator assigned) to the log, fsynced, and only then returns it. A refused write
    /// changes nothing and is returned as the inner `Err`.
    pub fn write_state(
        &mut self,
        key: &MirrorPartition,
        value: MirrorPartitionStateValue,
        expected_state_epoch: Option<StateEpoch>,
        timestamp_ms: i64,
    ) -> Result<Result<MirrorPartitionStateValue, WriteRefused>, MirrorStateLogError> {
        let mut next = self.coordinator.clone();
        let stored = match next.write_state(key, value, expected_state_epoch) {
            Ok(stored) => stored,
            Err(refused) => return Ok(Err(refused)),
        };
        self.append(
            &[MirrorStateRecord::PartitionState {
                partition: key.clone(),
                value: stored.clone(),
            }],
            timestamp_ms,
        )?;
        debug_assert_eq!(self.coordinator.read_state(key), Some(&stored));
        Ok(Ok(stored))
    }

    /// Stores `key`'s LME record (appended and fsynced before returning) if the coordinator's
    /// fence lets it through (`expected_state_epoch`: the state epoch the writer wrote; see
    /// [`Coordinator::write_last_mirrored_epoch`]); a refusal writes nothing and is returned as
    /// the inner `Err`.
    pub fn write_last_mirrored_epoch(
        &mut self,
        key: &MirrorPartition,
        value: LastMirroredEpochsValue,
        expected_state_epoch: Option<StateEpoch>,
        timestamp_ms: i64,
    ) -> Result<Result<(), WriteRefused>, MirrorStateLogError> {
        if let Err(refused) =
            self.coordinator
                .clone()
                .write_last_mirrored_epoch(key, value, expected_state_epoch)
        {
            return Ok(Err(refused));
        }
        self.append(
            &[MirrorStateRecord::LastMirroredEpochs {
                partition: key.clone(),
                value,
            }],
            timestamp_ms,
        )?;
        Ok(Ok(()))
    }

    /// The most recently written LME record of any mirror for `topic_id` / `partition`: what
    /// this cluster answers when another cluster asks it for the LME of that partition (the
    /// record it wrote when it last stopped mirroring the partition).
    pub fn latest_last_mirrored_epoch(
        &self,
        topic_id: TopicId,
        partition: PartitionIndex,
    ) -> Option<(&MirrorPartition, &LastMirroredEpochsValue)> {
        self.coordinator
            .last_mirrored_epochs()
            .filter(|(k, _)| k.topic_id == topic_id && k.partition == partition)
            .max_by_key(|(k, _)| self.lme_written_at.get(*k).copied().unwrap_or(-1))
    }

    /// Flushes and closes the log.
    pub fn close(self) -> Result<(), MirrorStateLogError> {
        let dir = self.log.dir().to_path_buf();
        self.log.close().map_err(|source| MirrorStateLogError::Log {
            dir,
            source: Box::new(source),
        })
    }
}

/// Decodes every record of `log`, oldest first.
fn read_records(log: &FileLog) -> Result<Vec<(Offset, MirrorStateRecord)>, MirrorStateLogError> {
    let dir = log.dir().to_path_buf();
    let batches = log
        .try_read(log.log_start_offset(), log.log_end_offset())
        .map_err(|source| MirrorStateLogError::Log {
            dir: dir.clone(),
            source: Box::new(source),
        })?;
    let mut out = Vec::new();
    for batch in batches {
        let header = batch.header();
        if header.is_control() {
            continue;
        }
        let records = batch
            .records()
            .map_err(|source| MirrorStateLogError::BadBatch {
                dir: dir.clone(),
                offset: header.base_offset,
                source,
            })?;
        for record in records {
            let offset = header.base_offset + Offset::from(record.offset_delta);
            let key = record
                .key
                .as_deref()
                .ok_or_else(|| MirrorStateLogError::MissingKey {
                    dir: dir.clone(),
                    offset,
                })?;
            let decoded =
                MirrorStateRecord::decode(key, record.value.as_deref()).map_err(|source| {
                    MirrorStateLogError::BadRecord {
                        dir: dir.clone(),
                        offset,
                        source,
                    }
                })?;
            out.push((offset, decoded));
        }
    }
    Ok(out)
}

/// The header and records of one `__mirror_state` batch of `records` at offset `base` (a plain
/// batch at [`MIRROR_STATE_LEADER_EPOCH`], one record per entry, keyed as the codec says).
pub fn batch_parts(
    base: Offset,
    records: &[MirrorStateRecord],
) -> Result<(BatchHeader, Vec<Record>), RecordEncodeError> {
    let mut encoded = Vec::with_capacity(records.len());
    for (delta, record) in records.iter().enumerate() {
        let e = record.encode()?;
        encoded.push(Record {
            attributes: 0,
            timestamp_delta: 0,
            offset_delta: delta as i32,
            key: Some(e.key),
            value: e.value,
            headers: Vec::new(),
        });
    }
    let last = base + records.len() as Offset - 1;
    Ok((
        BatchHeader::plain(base, last, MIRROR_STATE_LEADER_EPOCH),
        encoded,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use kmirror_kernel::state::MirrorState;
    use kmirror_kernel::types::MirrorName;

    fn key(mirror: &str) -> MirrorPartition {
        MirrorPartition {
            mirror: MirrorName::new(mirror).unwrap(),
            topic_id: TopicId::from_u64(9),
            partition: 0,
        }
    }

    fn value(state: MirrorState) -> MirrorPartitionStateValue {
        MirrorPartitionStateValue {
            state,
            leader_epoch: 1,
            state_epoch: 0,
            error_message: None,
            retry_attempt: 0,
            previous_state: None,
        }
    }

    #[test]
    fn writes_survive_reopening_and_refused_writes_are_not_logged() {
        let tmp = tempfile::tempdir().unwrap();
        let table = TransitionTable::default();
        let mut log =
            MirrorStateLog::create(tmp.path(), table.clone(), FileLogConfig::default()).unwrap();
        let k = key("east");
        let stored = log
            .write_state(&k, value(MirrorState::Preparing), None, 5)
            .unwrap()
            .unwrap();
        assert_eq!(stored.state_epoch, 0);
        // Stale state epoch: refused, nothing appended.
        let leo = log.log().log_end_offset();
        assert!(log
            .write_state(&k, value(MirrorState::Mirroring), None, 6)
            .unwrap()
            .is_err());
        assert_eq!(log.log().log_end_offset(), leo);
        log.write_state(&k, value(MirrorState::Mirroring), Some(0), 7)
            .unwrap()
            .unwrap();
        let lme = LastMirroredEpochsValue {
            last_mirrored_epoch: Some(3),
            last_mirrored_offset: 40,
        };
        // An LME write is fenced by its key's state epoch: none stored yet, refused.
        let leo = log.log().log_end_offset();
        assert!(log
            .write_last_mirrored_epoch(&key("old"), lme, Some(0), 8)
            .unwrap()
            .is_err());
        assert_eq!(log.log().log_end_offset(), leo);
        for k in ["old", "b"] {
            log.write_state(&key(k), value(MirrorState::Preparing), None, 8)
                .unwrap()
                .unwrap();
        }
        log.write_last_mirrored_epoch(&key("old"), lme, Some(0), 8)
            .unwrap()
            .unwrap();
        let newer = LastMirroredEpochsValue {
            last_mirrored_epoch: Some(2),
            last_mirrored_offset: 20,
        };
        log.write_last_mirrored_epoch(&key("b"), newer, Some(0), 9)
            .unwrap()
            .unwrap();
        log.close().unwrap();

        let log = MirrorStateLog::open(tmp.path(), table, FileLogConfig::default()).unwrap();
        let state = log.coordinator().read_state(&k).unwrap();
        assert_eq!(
            (state.state, state.state_epoch),
            (MirrorState::Mirroring, 1)
        );
        // The newest LME record wins, whatever the key order.
        let (k2, v2) = log
            .latest_last_mirrored_epoch(TopicId::from_u64(9), 0)
            .unwrap();
        assert_eq!((k2.mirror.as_str(), *v2), ("b", newer));
        assert!(log
            .latest_last_mirrored_epoch(TopicId::from_u64(8), 0)
            .is_none());
        assert_eq!(log.records().unwrap().len(), 6);
    }

    #[test]
    fn a_garbage_record_is_a_typed_error() {
        let tmp = tempfile::tempdir().unwrap();
        let table = TransitionTable::default();
        let mut log =
            MirrorStateLog::create(tmp.path(), table.clone(), FileLogConfig::default()).unwrap();
        log.write_state(&key("east"), value(MirrorState::Preparing), None, 1)
            .unwrap()
            .unwrap();
        log.close().unwrap();
        let (mut raw, _) = FileLog::open(
            tmp.path(),
            MirrorStateLog::topic_partition(),
            FileLogConfig::default(),
        )
        .unwrap();
        let leo = raw.log_end_offset();
        let garbage = Record {
            attributes: 0,
            timestamp_delta: 0,
            offset_delta: 0,
            key: Some(vec![0, 9, 1, 2]),
            value: Some(vec![1]),
            headers: Vec::new(),
        };
        let batch = RawBatch::encode(&BatchHeader::plain(leo, leo, 0), 0, &[garbage]).unwrap();
        raw.append_as_follower(&[batch]).unwrap();
        raw.close().unwrap();
        let err = MirrorStateLog::open(tmp.path(), table, FileLogConfig::default()).unwrap_err();
        assert!(
            matches!(err, MirrorStateLogError::BadRecord { offset, .. } if offset == leo),
            "{err}"
        );
        assert!(err
            .to_string()
            .contains("unknown __mirror_state key type 9"));
    }
}
