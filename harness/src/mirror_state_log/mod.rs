//! [`MirrorStateLog`]: one partition of the `__mirror_state` topic on disk, and the
//! [`Coordinator`] rebuilt from it. A node destination runs `mirror_state.partitions` of them
//! (`data/__mirror_state-<k>/`, each key on partition
//! [`mirror_state_partition`](kmirror_kernel::partitioner::mirror_state_partition)); a
//! standalone log (`kmirror replay`'s clusters) runs partition 0 alone.
//!
//! # On disk
//!
//! The partition is an ordinary partition directory written by a [`FileLog`] (segments of
//! record batches v2; see [`file_log`](crate::file_log)). Its offsets live where the format
//! keeps them: in the log dir's checkpoint files for a node destination
//! ([`MirrorStateLog::open_in_log_dir`]), in the partition directory's own files for a
//! standalone log ([`MirrorStateLog::open`]). Each commit is one plain batch ([`batch_parts`]) at leader
//! epoch [`MIRROR_STATE_LEADER_EPOCH`], one record per [`MirrorStateRecord`], records stamped
//! with the timestamp the caller passes. The high watermark follows the log end offset (the
//! coordinator is the only replica).
//!
//! # Reading it back
//!
//! Opening recovers the directory, decodes every record ([`decode_batches`]) and replays
//! them in offset order with [`Coordinator::replay`]: the compacted view, the last value per
//! key winning. A record that does not decode is a [`MirrorStateLogError::BadRecord`] naming
//! the directory and offset: the coordinator refuses to start on a log it cannot read rather
//! than forget a state.
//!
//! # Writes: staged, then committed
//!
//! A write is fenced by the coordinator ([`MirrorStateLog::stage_state`],
//! [`MirrorStateLog::stage_last_mirrored_epoch`]) against what is stored *and* staged, and
//! staged; [`MirrorStateLog::commit`] appends every staged record as one batch and fsyncs it,
//! and only then does the coordinator hold them. So a crash never leaves an acknowledged write
//! unlogged or a refused one logged, and a node group-commits a whole round's writes of one
//! partition with one write and one sync. [`MirrorStateLog::write_state`] and
//! [`MirrorStateLog::write_last_mirrored_epoch`] stage one write and commit it at once.

mod codec;
mod error;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use kmirror_kernel::coordinator::{Coordinator, WriteRefused};
use kmirror_kernel::log::{LogView, PartitionLog};
use kmirror_kernel::records::{
    LastMirroredEpochsValue, MirrorPartitionStateValue, MirrorStateRecord,
};
use kmirror_kernel::state::TransitionTable;
use kmirror_kernel::types::{MirrorPartition, Offset, PartitionIndex, StateEpoch, TopicId};

use crate::file_log::{FileLog, FileLogConfig, FlushPolicy, TopicPartition, Verify};
use crate::log_dir_checkpoints::LogDirCheckpoints;
use crate::recovery::RecoveryReport;

pub use crate::topic_partition::MIRROR_STATE_TOPIC;
pub use codec::{
    batch_parts, decode_batches, encode_batch, read_records, MIRROR_STATE_LEADER_EPOCH,
};
pub use error::MirrorStateLogError;

/// The partition of `__mirror_state` a standalone log uses (it runs the topic with one
/// partition).
pub const MIRROR_STATE_PARTITION: PartitionIndex = 0;

/// One `__mirror_state` partition and the coordinator it holds. See the
/// [module documentation](self).
#[derive(Debug)]
pub struct MirrorStateLog {
    partition: PartitionIndex,
    log: FileLog,
    /// What the log holds: only records on disk.
    coordinator: Coordinator,
    /// Records staged for the next commit, in order.
    staged: Vec<MirrorStateRecord>,
    /// The coordinator with the staged records applied, while some are staged: the fences of
    /// the next staged write see them.
    pending: Option<Coordinator>,
    /// For each LME key, the offset of its latest record (to answer with the newest one).
    lme_written_at: BTreeMap<MirrorPartition, Offset>,
    report: RecoveryReport,
}

impl MirrorStateLog {
    /// The topic partition of a standalone log.
    pub fn topic_partition() -> TopicPartition {
        TopicPartition {
            topic: MIRROR_STATE_TOPIC.to_owned(),
            partition: MIRROR_STATE_PARTITION,
        }
    }

    /// Creates (or opens, if it exists) a standalone log in
    /// `log_dir/__mirror_state-0/`, its offsets in its own checkpoint files.
    pub fn create(
        log_dir: &Path,
        table: TransitionTable,
        config: FileLogConfig,
    ) -> Result<Self, MirrorStateLogError> {
        let tp = Self::topic_partition();
        let dir = log_dir.join(tp.dir_name());
        let (log, report) =
            FileLog::open(log_dir, tp, config).map_err(|source| MirrorStateLogError::Log {
                dir,
                source: Box::new(source),
            })?;
        Self::from_log(log, report, table)
    }

    /// Opens a standalone log in `log_dir/__mirror_state-0/`, recovering it
    /// after a crash, and rebuilds the coordinator (fencing writes with `table`) by replaying
    /// every record. A missing directory is an error: opening would silently create an empty
    /// coordinator.
    pub fn open(
        log_dir: &Path,
        table: TransitionTable,
        config: FileLogConfig,
    ) -> Result<Self, MirrorStateLogError> {
        let dir = log_dir.join(Self::topic_partition().dir_name());
        if !dir.is_dir() {
            return Err(MirrorStateLogError::Missing { dir });
        }
        Self::create(log_dir, table, config)
    }

    /// Opens (creating if needed) a node destination's partition `partition` in
    /// `log_dir/__mirror_state-<partition>/`, recovering it (its offsets in the log dir's
    /// `checkpoints`), and replays its records into a coordinator fencing with `table`.
    pub fn open_in_log_dir(
        log_dir: &Path,
        partition: u32,
        table: TransitionTable,
        config: FileLogConfig,
        checkpoints: Arc<LogDirCheckpoints>,
    ) -> Result<Self, MirrorStateLogError> {
        let (tp, dir) = state_partition(log_dir, partition)?;
        let (log, report) =
            FileLog::open_in_log_dir(log_dir, tp, config, Verify::FromRecoveryPoint, checkpoints)
                .map_err(|source| MirrorStateLogError::Log {
                dir,
                source: Box::new(source),
            })?;
        Self::from_log(log, report, table)
    }

    /// The coordinator of a node destination's partition `partition` under `log_dir`, read
    /// changing nothing ([`FileLog::inspect_in_log_dir`]): for `kmirror status`.
    pub fn inspect(
        log_dir: &Path,
        partition: u32,
        table: TransitionTable,
        checkpoints: Arc<LogDirCheckpoints>,
    ) -> Result<Coordinator, MirrorStateLogError> {
        let (tp, dir) = state_partition(log_dir, partition)?;
        let log_error = |source| MirrorStateLogError::Log {
            dir: dir.clone(),
            source: Box::new(source),
        };
        let inspection =
            FileLog::inspect_in_log_dir(log_dir, tp, checkpoints).map_err(log_error)?;
        let batches = inspection.read_batches().map_err(log_error)?;
        let records = decode_batches(&dir, batches)?;
        Ok(Coordinator::new(table).replay(records.iter().map(|(_, r)| r)))
    }

    fn from_log(
        log: FileLog,
        report: RecoveryReport,
        table: TransitionTable,
    ) -> Result<Self, MirrorStateLogError> {
        let records = read_records(&log)?;
        let mut lme_written_at = BTreeMap::new();
        for (offset, record) in &records {
            note_lme(&mut lme_written_at, *offset, record);
        }
        let coordinator = Coordinator::new(table).replay(records.iter().map(|(_, r)| r));
        Ok(MirrorStateLog {
            partition: log.topic_partition().partition,
            log,
            coordinator,
            staged: Vec::new(),
            pending: None,
            lme_written_at,
            report,
        })
    }

    /// The partition index.
    pub fn partition(&self) -> PartitionIndex {
        self.partition
    }

    /// The coordinator: the compacted contents of the log (what is on disk, nothing staged).
    pub fn coordinator(&self) -> &Coordinator {
        &self.coordinator
    }

    /// The underlying partition log.
    pub fn log(&self) -> &FileLog {
        &self.log
    }

    /// The underlying partition log, to flush with the partition logs at close.
    pub fn log_mut(&mut self) -> &mut FileLog {
        &mut self.log
    }

    /// What opening the directory repaired.
    pub fn recovery_report(&self) -> &RecoveryReport {
        &self.report
    }

    /// Every record in the log with its offset, oldest first, read from disk.
    pub fn records(&self) -> Result<Vec<(Offset, MirrorStateRecord)>, MirrorStateLogError> {
        read_records(&self.log)
    }

    /// Stages the fenced `WriteMirrorStates` of one key for the next
    /// [`MirrorStateLog::commit`]: the value as it will be stored (its new state epoch), or the
    /// coordinator's refusal (nothing staged). The fences see the records staged before it.
    pub fn stage_state(
        &mut self,
        key: &MirrorPartition,
        value: MirrorPartitionStateValue,
        expected_state_epoch: Option<StateEpoch>,
    ) -> Result<MirrorPartitionStateValue, WriteRefused> {
        let pending = self.pending.get_or_insert_with(|| self.coordinator.clone());
        let stored = pending.write_state(key, value, expected_state_epoch)?;
        self.staged.push(MirrorStateRecord::PartitionState {
            partition: key.clone(),
            value: stored.clone(),
        });
        Ok(stored)
    }

    /// Stages `key`'s LME record for the next [`MirrorStateLog::commit`] if the coordinator's
    /// fence lets it through (`expected_state_epoch`: the state epoch the writer wrote; see
    /// [`Coordinator::write_last_mirrored_epoch`]); a refusal stages nothing.
    pub fn stage_last_mirrored_epoch(
        &mut self,
        key: &MirrorPartition,
        value: LastMirroredEpochsValue,
        expected_state_epoch: Option<StateEpoch>,
    ) -> Result<(), WriteRefused> {
        let pending = self.pending.get_or_insert_with(|| self.coordinator.clone());
        pending.write_last_mirrored_epoch(key, value, expected_state_epoch)?;
        self.staged.push(MirrorStateRecord::LastMirroredEpochs {
            partition: key.clone(),
            value,
        });
        Ok(())
    }

    /// Whether records wait for [`MirrorStateLog::commit`].
    pub fn has_staged(&self) -> bool {
        !self.staged.is_empty()
    }

    /// Appends every staged record as one batch stamped `timestamp_ms` and fsyncs it; then,
    /// and only then, the coordinator holds them. Nothing staged: nothing written. A failed
    /// append drops the staged records (none was acknowledged).
    pub fn commit(&mut self, timestamp_ms: i64) -> Result<(), MirrorStateLogError> {
        let records = std::mem::take(&mut self.staged);
        self.pending = None;
        self.append(&records, timestamp_ms).map(|_| ())
    }

    /// Appends `records` as one batch (fsynced) stamped `timestamp_ms`, applies them to the
    /// coordinator, and returns the offset of the first. Records are not fenced: writers stage
    /// and commit; this is for a log written from outside the coordinator (the model-trace
    /// replay writes the model's records).
    pub fn append(
        &mut self,
        records: &[MirrorStateRecord],
        timestamp_ms: i64,
    ) -> Result<Offset, MirrorStateLogError> {
        let base = self.log.log_end_offset();
        if records.is_empty() {
            return Ok(base);
        }
        let batch = encode_batch(base, records, timestamp_ms)?;
        let dir = self.log.dir().to_path_buf();
        let log_err = |source| MirrorStateLogError::Log {
            dir: dir.clone(),
            source: Box::new(source),
        };
        self.log.append_as_follower(&[batch]).map_err(log_err)?;
        // Persist first, act after, under every flush policy: the records are on disk before
        // any write is acknowledged (with `EveryAppend` the append itself fsynced them).
        if self.log.config().flush != FlushPolicy::EveryAppend {
            self.log.sync_data().map_err(log_err)?;
        }
        let leo = self.log.log_end_offset();
        self.log.advance_high_watermark(leo).map_err(log_err)?;
        for (delta, record) in records.iter().enumerate() {
            note_lme(&mut self.lme_written_at, base + delta as Offset, record);
            self.coordinator.apply(record);
        }
        Ok(base)
    }

    /// The coordinator's `WriteMirrorStates` for one key, committed at once: fenced as
    /// [`MirrorStateLog::stage_state`], appended and fsynced, and only then returned. A refused
    /// write changes nothing and is returned as the inner `Err`.
    pub fn write_state(
        &mut self,
        key: &MirrorPartition,
        value: MirrorPartitionStateValue,
        expected_state_epoch: Option<StateEpoch>,
        timestamp_ms: i64,
    ) -> Result<Result<MirrorPartitionStateValue, WriteRefused>, MirrorStateLogError> {
        let staged = self.stage_state(key, value, expected_state_epoch);
        self.commit(timestamp_ms)?;
        Ok(staged)
    }

    /// Stores `key`'s LME record, committed at once (appended and fsynced before returning) if
    /// the coordinator's fence lets it through; a refusal writes nothing and is returned as the
    /// inner `Err`.
    pub fn write_last_mirrored_epoch(
        &mut self,
        key: &MirrorPartition,
        value: LastMirroredEpochsValue,
        expected_state_epoch: Option<StateEpoch>,
        timestamp_ms: i64,
    ) -> Result<Result<(), WriteRefused>, MirrorStateLogError> {
        let staged = self.stage_last_mirrored_epoch(key, value, expected_state_epoch);
        self.commit(timestamp_ms)?;
        Ok(staged)
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

    /// Flushes and closes the log (records still staged are dropped: none was acknowledged).
    pub fn close(self) -> Result<(), MirrorStateLogError> {
        let dir = self.log.dir().to_path_buf();
        self.log.close().map_err(|source| MirrorStateLogError::Log {
            dir,
            source: Box::new(source),
        })
    }
}

/// Keeps `lme_written_at` up to date with `record` at `offset`.
fn note_lme(
    lme_written_at: &mut BTreeMap<MirrorPartition, Offset>,
    offset: Offset,
    record: &MirrorStateRecord,
) {
    match record {
        MirrorStateRecord::LastMirroredEpochs { partition, .. } => {
            lme_written_at.insert(partition.clone(), offset);
        }
        MirrorStateRecord::LastMirroredEpochsTombstone(partition) => {
            lme_written_at.remove(partition);
        }
        _ => {}
    }
}

/// Partition `partition` of `__mirror_state` and its directory under `log_dir`.
fn state_partition(
    log_dir: &Path,
    partition: u32,
) -> Result<(TopicPartition, std::path::PathBuf), MirrorStateLogError> {
    let tp = TopicPartition {
        topic: MIRROR_STATE_TOPIC.to_owned(),
        partition: PartitionIndex::try_from(partition)
            .map_err(|_| MirrorStateLogError::PartitionOutOfRange(partition))?,
    };
    let dir = log_dir.join(tp.dir_name());
    Ok((tp, dir))
}
