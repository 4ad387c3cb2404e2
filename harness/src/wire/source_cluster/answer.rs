//! One partition's Fetch answer as the kernel's `serve_fetch` gives it for a local source, for
//! [`SourceCluster`](super::SourceCluster).

use bytes::Bytes;
use kmirror_kernel::config::FetchIsolation;
use kmirror_kernel::fetch::{FetchResponse, FetchedRecords};
use kmirror_kernel::types::Offset;

use super::super::client::{PartitionFetch, READ_COMMITTED, READ_UNCOMMITTED};
use super::super::codes;
use crate::error::BatchError;
use crate::record_batch::{batch_size_from_prefix, RawBatch, LOG_OVERHEAD};
use crate::wire::source_cluster::SourcePosition;

/// What to do with one partition's Fetch answer.
#[derive(Debug)]
pub(crate) enum FetchAnswer {
    /// The kernel's answer and where the source's partition is.
    Answer(FetchResponse<RawBatch>, SourcePosition),
    /// `OFFSET_OUT_OF_RANGE`: ask ListOffsets for the log start and the high watermark.
    OutOfRange,
    /// Another Kafka error code.
    Error(i16),
}

/// Maps one partition's Fetch answer as `serve_fetch` answers for a local source: a diverging
/// epoch as is;
/// records as whole raw batches, those ending below the fetch offset skipped, only those ending
/// below the isolation bound (LSO for read-committed, HW otherwise), at most `max_batches`.
/// A batch that does not parse is the error `(byte position, why)`.
pub(crate) fn map_fetch_answer(
    answer: &PartitionFetch,
    fetch_offset: Offset,
    isolation: FetchIsolation,
    max_batches: usize,
) -> Result<FetchAnswer, (usize, BatchError)> {
    match answer.error_code {
        0 => {}
        codes::OFFSET_OUT_OF_RANGE => return Ok(FetchAnswer::OutOfRange),
        code => return Ok(FetchAnswer::Error(code)),
    }
    let position = SourcePosition {
        log_start_offset: answer.log_start_offset,
        high_watermark: answer.high_watermark,
        last_stable_offset: answer.last_stable_offset,
        // A consumer cannot see the LEO: the high watermark stands for it.
        log_end_offset: answer.high_watermark,
    };
    if let Some(diverging) = answer.diverging_epoch {
        return Ok(FetchAnswer::Answer(
            FetchResponse::Diverging(diverging),
            position,
        ));
    }
    let bound = match isolation {
        FetchIsolation::ReadCommitted => answer.last_stable_offset,
        FetchIsolation::ReadUncommitted | FetchIsolation::Follower => answer.high_watermark,
    };
    let batches: Vec<RawBatch> = split_batches(&answer.records)?
        .into_iter()
        .filter(|b| b.header().last_offset >= fetch_offset)
        .take_while(|b| b.header().last_offset < bound)
        .take(max_batches)
        .collect();
    let last = batches.last().map(RawBatch::header);
    Ok(FetchAnswer::Answer(
        FetchResponse::Records(FetchedRecords {
            next_offset: last.map_or(fetch_offset, |h| h.last_offset.saturating_add(1)),
            last_epoch: last.map(|h| h.partition_leader_epoch),
            batches,
            log_start_offset: position.log_start_offset,
            high_watermark: position.high_watermark,
            last_stable_offset: position.last_stable_offset,
            log_end_offset: position.log_end_offset,
        }),
        position,
    ))
}

/// Splits a fetch's records into whole batches, dropping a partial trailing one (Kafka cuts
/// the last batch at `max_bytes`). Each batch is a slice of `records` (the response's buffer),
/// not a copy. A batch that does not parse is `(byte position, why)`.
pub(crate) fn split_batches(records: &Bytes) -> Result<Vec<RawBatch>, (usize, BatchError)> {
    let mut out = Vec::new();
    let mut pos = 0usize;
    while records.len() - pos >= LOG_OVERHEAD {
        let size = batch_size_from_prefix(&records[pos..]).map_err(|e| (pos, e))?;
        if records.len() - pos < size {
            break;
        }
        out.push(RawBatch::parse(records.slice(pos..pos + size)).map_err(|e| (pos, e))?);
        pos += size;
    }
    Ok(out)
}

/// The Kafka isolation level of the kernel's.
pub(crate) fn isolation_level(isolation: FetchIsolation) -> i8 {
    match isolation {
        FetchIsolation::ReadCommitted => READ_COMMITTED,
        FetchIsolation::ReadUncommitted | FetchIsolation::Follower => READ_UNCOMMITTED,
    }
}
