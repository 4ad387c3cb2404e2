//! [`StatePartition`]: partition `k` of a node destination's `__mirror_state`
//! (`data/__mirror_state-<k>/`) and the [`Coordinator`] rebuilt from it.
//!
//! The records are exactly those of [`mirror_state_log`](crate::mirror_state_log), built by
//! [`batch_parts`]; a node **group-commits** them: each write is staged
//! ([`StatePartition::stage_state`], fenced against what is stored and staged), and
//! [`StatePartition::commit`] appends every staged record as one batch, fsynced before any of
//! them is acknowledged (the high watermark at the log end offset). Only the partition differs
//! from the single-partition format: the single-partition
//! cluster directory runs `__mirror_state` with partition 0 alone, a node destination with
//! `mirror_state.partitions` of them, each key on partition
//! [`mirror_state_partition`](kmirror_kernel::partitioner::mirror_state_partition).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use kmirror_kernel::coordinator::{Coordinator, WriteRefused};
use kmirror_kernel::log::{LogView, PartitionLog};
use kmirror_kernel::records::{
    LastMirroredEpochsValue, MirrorPartitionStateValue, MirrorStateRecord,
};
use kmirror_kernel::state::TransitionTable;
use kmirror_kernel::types::{MirrorPartition, Offset, StateEpoch};

use crate::file_log::{FileLog, FileLogConfig, FlushPolicy, TopicPartition, Verify};
use crate::log_dir_checkpoints::LogDirCheckpoints;
use crate::mirror_state_log::{batch_parts, MirrorStateLogError, MIRROR_STATE_TOPIC};
use crate::record_batch::RawBatch;

use super::NodeError;

/// One `__mirror_state` partition of a node destination. See the [module documentation](self).
#[derive(Debug)]
pub struct StatePartition {
    partition: u32,
    log: FileLog,
    /// What the log holds: only records on disk.
    coordinator: Coordinator,
    /// Records staged for the next commit, in order.
    staged: Vec<MirrorStateRecord>,
    /// The coordinator with the staged records applied, while some are staged: the fences of
    /// the next staged write see them.
    pending: Option<Coordinator>,
}

impl StatePartition {
    /// Opens (creating if needed) `log_dir/__mirror_state-<partition>/`, recovering it (its
    /// offsets in the log dir's `checkpoints`), and replays its records into a coordinator
    /// fencing with `table`.
    pub fn open(
        log_dir: &Path,
        partition: u32,
        table: TransitionTable,
        config: FileLogConfig,
        checkpoints: Arc<LogDirCheckpoints>,
    ) -> Result<Self, NodeError> {
        let (tp, dir) = state_partition(log_dir, partition)?;
        let (log, _report) =
            FileLog::open_in_log_dir(log_dir, tp, config, Verify::FromRecoveryPoint, checkpoints)
                .map_err(|source| NodeError::Log {
                dir: dir.clone(),
                source: Box::new(source),
            })?;
        let records = read_records(&log)?;
        let coordinator = Coordinator::new(table).replay(records.iter().map(|(_, r)| r));
        Ok(StatePartition {
            partition,
            log,
            coordinator,
            staged: Vec::new(),
            pending: None,
        })
    }

    /// The partition index.
    pub fn partition(&self) -> u32 {
        self.partition
    }

    /// The coordinator: the compacted contents of this partition.
    pub fn coordinator(&self) -> &Coordinator {
        &self.coordinator
    }

    /// The underlying log.
    pub fn log(&self) -> &FileLog {
        &self.log
    }

    /// Stages the fenced `WriteMirrorStates` of one key for the next [`StatePartition::commit`]:
    /// the value as it will be stored (its new state epoch), or the coordinator's refusal
    /// (nothing staged). The fences see the records staged before it.
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

    /// Stages `key`'s LME record for the next [`StatePartition::commit`] if the coordinator's
    /// fence lets it through (see [`Coordinator::write_last_mirrored_epoch`]); a refusal stages
    /// nothing.
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

    /// Whether records wait for [`StatePartition::commit`].
    pub fn has_staged(&self) -> bool {
        !self.staged.is_empty()
    }

    /// Appends every staged record as one batch and fsyncs it (one write and one sync for a
    /// whole round's records on this partition); then, and only then, the coordinator holds
    /// them. Nothing staged: nothing written.
    pub fn commit(&mut self, timestamp_ms: i64) -> Result<(), NodeError> {
        if self.staged.is_empty() {
            return Ok(());
        }
        let records = std::mem::take(&mut self.staged);
        self.pending = None;
        let base = self.log.log_end_offset();
        let (header, encoded) = batch_parts(base, &records).map_err(MirrorStateLogError::from)?;
        let batch = RawBatch::encode(&header, timestamp_ms, &encoded)
            .map_err(MirrorStateLogError::Batch)?;
        let dir = self.log.dir().to_path_buf();
        let log_err = |source| NodeError::Log {
            dir: dir.clone(),
            source: Box::new(source),
        };
        self.log.append_as_follower(&[batch]).map_err(log_err)?;
        if self.log.config().flush != FlushPolicy::EveryAppend {
            self.log.sync_data().map_err(log_err)?;
        }
        let leo = self.log.log_end_offset();
        self.log.advance_high_watermark(leo).map_err(log_err)?;
        for record in &records {
            self.coordinator.apply(record);
        }
        Ok(())
    }

    /// The log, to flush with the partition logs at close.
    pub(super) fn log_mut(&mut self) -> &mut FileLog {
        &mut self.log
    }

    /// Flushes and closes the log.
    pub fn close(self) -> Result<(), NodeError> {
        let dir = self.log.dir().to_path_buf();
        self.log.close().map_err(|source| NodeError::Log {
            dir,
            source: Box::new(source),
        })
    }
}

/// Decodes every record of `log`, oldest first.
pub(super) fn read_records(log: &FileLog) -> Result<Vec<(Offset, MirrorStateRecord)>, NodeError> {
    let dir = log.dir().to_path_buf();
    let batches = log
        .try_read(log.log_start_offset(), log.log_end_offset())
        .map_err(|source| NodeError::Log {
            dir: dir.clone(),
            source: Box::new(source),
        })?;
    decode_records(&dir, batches)
}

/// The coordinator of `__mirror_state` partition `partition` under `log_dir`, read changing
/// nothing ([`FileLog::inspect_in_log_dir`]): for `kmirror status`.
pub fn inspect_coordinator(
    log_dir: &Path,
    partition: u32,
    table: TransitionTable,
    checkpoints: Arc<LogDirCheckpoints>,
) -> Result<Coordinator, NodeError> {
    let (tp, dir) = state_partition(log_dir, partition)?;
    let log_error = |source| NodeError::Log {
        dir: dir.clone(),
        source: Box::new(source),
    };
    let inspection = FileLog::inspect_in_log_dir(log_dir, tp, checkpoints).map_err(log_error)?;
    let batches = inspection.read_batches().map_err(log_error)?;
    let records = decode_records(&dir, batches)?;
    Ok(Coordinator::new(table).replay(records.iter().map(|(_, r)| r)))
}

/// `__mirror_state` partition `partition` and its directory under `log_dir`.
fn state_partition(log_dir: &Path, partition: u32) -> Result<(TopicPartition, PathBuf), NodeError> {
    let index = i32::try_from(partition).map_err(|_| NodeError::Invalid {
        message: format!("__mirror_state partition {partition} is out of range"),
    })?;
    let tp = TopicPartition {
        topic: MIRROR_STATE_TOPIC.to_owned(),
        partition: index,
    };
    let dir = log_dir.join(tp.dir_name());
    Ok((tp, dir))
}

/// Decodes every record of `batches` (of `__mirror_state` partition directory `dir`).
fn decode_records(
    dir: &Path,
    batches: Vec<crate::record_batch::RawBatch>,
) -> Result<Vec<(Offset, MirrorStateRecord)>, NodeError> {
    let dir = dir.to_path_buf();
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
