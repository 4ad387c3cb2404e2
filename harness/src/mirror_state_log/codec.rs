//! The bytes of `__mirror_state`: one plain record batch per commit, one record per
//! [`MirrorStateRecord`] (key and value encoded by [`kmirror_kernel::records`]; a tombstone has
//! a null value), and the decoding of a log's batches back into records. Every reader of a
//! `__mirror_state` partition (the coordinator's open, `kmirror status`, the crash tests, the
//! model-trace replay) decodes through [`decode_batches`].

use std::path::Path;

use kmirror_kernel::batch::BatchHeader;
use kmirror_kernel::log::LogView;
use kmirror_kernel::records::{MirrorStateRecord, RecordEncodeError};
use kmirror_kernel::types::{LeaderEpoch, Offset};

use crate::file_log::FileLog;
use crate::record_batch::{RawBatch, Record};

use super::MirrorStateLogError;

/// The leader epoch stamped on `__mirror_state` batches (the coordinator never moves).
pub const MIRROR_STATE_LEADER_EPOCH: LeaderEpoch = 0;

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

/// The batch of `records` at offset `base`, stamped `timestamp_ms`.
pub fn encode_batch(
    base: Offset,
    records: &[MirrorStateRecord],
    timestamp_ms: i64,
) -> Result<RawBatch, MirrorStateLogError> {
    let (header, encoded) = batch_parts(base, records)?;
    RawBatch::encode(&header, timestamp_ms, &encoded).map_err(MirrorStateLogError::Batch)
}

/// Every record of `log`, with its offset, oldest first, read from disk.
pub fn read_records(
    log: &FileLog,
) -> Result<Vec<(Offset, MirrorStateRecord)>, MirrorStateLogError> {
    let batches = log
        .try_read(log.log_start_offset(), log.log_end_offset())
        .map_err(|source| MirrorStateLogError::Log {
            dir: log.dir().to_path_buf(),
            source: Box::new(source),
        })?;
    decode_batches(log.dir(), batches)
}

/// Decodes every record of `batches`, read from the `__mirror_state` partition directory
/// `dir` (named in errors), with its offset. Control batches are skipped; a batch or record that
/// does not decode is a typed error naming the directory and offset.
pub fn decode_batches(
    dir: &Path,
    batches: impl IntoIterator<Item = RawBatch>,
) -> Result<Vec<(Offset, MirrorStateRecord)>, MirrorStateLogError> {
    let mut out = Vec::new();
    for batch in batches {
        let header = batch.header();
        if header.is_control() {
            continue;
        }
        let records = batch
            .records()
            .map_err(|source| MirrorStateLogError::BadBatch {
                dir: dir.to_path_buf(),
                offset: header.base_offset,
                source,
            })?;
        for record in records {
            let offset = header.base_offset + Offset::from(record.offset_delta);
            let key = record
                .key
                .as_deref()
                .ok_or_else(|| MirrorStateLogError::MissingKey {
                    dir: dir.to_path_buf(),
                    offset,
                })?;
            let decoded =
                MirrorStateRecord::decode(key, record.value.as_deref()).map_err(|source| {
                    MirrorStateLogError::BadRecord {
                        dir: dir.to_path_buf(),
                        offset,
                        source,
                    }
                })?;
            out.push((offset, decoded));
        }
    }
    Ok(out)
}
