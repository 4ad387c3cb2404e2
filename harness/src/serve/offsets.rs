//! ListOffsets and OffsetForLeaderEpoch: where a consumer starts, and how it checks after a
//! leader change that the log it read is still the log (KIP-320).

use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::offset_for_leader_epoch_response::{
    EpochEndOffset, OffsetForLeaderTopicResult,
};
use kafka_protocol::messages::{
    ListOffsetsRequest, ListOffsetsResponse, OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
};
use kmirror_kernel::log::LogView;
use kmirror_kernel::node::PartitionKey;
use kmirror_kernel::types::{LeaderEpoch, Offset};

use crate::file_log::FileLog;

use super::broker::{leader_epoch, partition_key, ServedNode};
use super::metadata::UNKNOWN_TOPIC_OR_PARTITION;

/// `FENCED_LEADER_EPOCH`: the client's leader epoch is older than the node's.
pub const FENCED_LEADER_EPOCH: i16 = 74;
/// `UNKNOWN_LEADER_EPOCH`: the client's leader epoch is newer than the node's.
pub const UNKNOWN_LEADER_EPOCH: i16 = 76;
/// `KAFKA_STORAGE_ERROR`: the log cannot be read.
pub const KAFKA_STORAGE_ERROR: i16 = 56;

/// ListOffsets' special timestamps.
const LATEST: i64 = -1;
const EARLIEST: i64 = -2;
const MAX_TIMESTAMP: i64 = -3;
const EARLIEST_LOCAL: i64 = -4;

/// Batches read at a time while searching by timestamp.
const SCAN_BATCHES: usize = 256;

/// Kafka's check of the leader epoch a client believes current (`-1`: none given).
pub fn check_leader_epoch(client: LeaderEpoch, ours: LeaderEpoch) -> Option<i16> {
    if client < 0 || client == ours {
        None
    } else if client < ours {
        Some(FENCED_LEADER_EPOCH)
    } else {
        Some(UNKNOWN_LEADER_EPOCH)
    }
}

/// A partition a request names: its key and current leader epoch, or the error to answer.
fn lookup(
    node: &dyn ServedNode,
    topic: &str,
    partition: i32,
    client_epoch: LeaderEpoch,
) -> Result<(PartitionKey, LeaderEpoch), i16> {
    let key = partition_key(node, topic, partition).ok_or(UNKNOWN_TOPIC_OR_PARTITION)?;
    node.log(&key).ok_or(UNKNOWN_TOPIC_OR_PARTITION)?;
    let epoch = leader_epoch(node, topic, &key);
    match check_leader_epoch(client_epoch, epoch) {
        Some(code) => Err(code),
        None => Ok((key, epoch)),
    }
}

/// Answers ListOffsets: earliest (-2, -4), latest (-1: the high watermark, or the last stable
/// offset for read-committed), max timestamp (-3), or the first offset whose timestamp is at
/// or after the one given.
pub fn list(node: &dyn ServedNode, request: &ListOffsetsRequest) -> ListOffsetsResponse {
    let read_committed = request.isolation_level == 1;
    let mut response = ListOffsetsResponse::default();
    for t in &request.topics {
        let mut out = ListOffsetsTopicResponse::default().with_name(t.name.clone());
        for p in &t.partitions {
            let mut answer = ListOffsetsPartitionResponse::default()
                .with_partition_index(p.partition_index)
                .with_timestamp(-1)
                .with_offset(-1)
                .with_leader_epoch(-1);
            match lookup(node, &t.name, p.partition_index, p.current_leader_epoch) {
                Err(code) => answer.error_code = code,
                Ok((key, _)) => {
                    let Some(log) = node.log(&key) else { continue };
                    match locate(log, p.timestamp, read_committed) {
                        Ok(Some((offset, timestamp))) => {
                            answer.offset = offset;
                            answer.timestamp = timestamp;
                            answer.leader_epoch = epoch_of(log, offset);
                        }
                        Ok(None) => {}
                        Err(()) => answer.error_code = KAFKA_STORAGE_ERROR,
                    }
                }
            }
            out.partitions.push(answer);
        }
        response.topics.push(out);
    }
    response
}

/// The leader epoch of the batch holding `offset` (the latest epoch at the log end).
fn epoch_of(log: &FileLog, offset: Offset) -> LeaderEpoch {
    let cache = log.mem_log().epoch_cache();
    if offset >= log.mem_log().log_end_offset() {
        return cache.latest_epoch().unwrap_or(-1);
    }
    cache.epoch_for_offset(offset).unwrap_or(-1)
}

/// The offset (and timestamp, -1 when none) ListOffsets answers for `timestamp`; `None` when
/// no record is at or after it.
fn locate(
    log: &FileLog,
    timestamp: i64,
    read_committed: bool,
) -> Result<Option<(Offset, i64)>, ()> {
    let mem = log.mem_log();
    let bound = if read_committed {
        mem.last_stable_offset()
    } else {
        mem.high_watermark()
    };
    match timestamp {
        EARLIEST | EARLIEST_LOCAL => Ok(Some((mem.log_start_offset(), -1))),
        LATEST => Ok(Some((bound, -1))),
        MAX_TIMESTAMP => {
            let mut best: Option<(Offset, i64)> = None;
            scan(log, mem.log_start_offset(), bound, |b| {
                if best.is_none_or(|(_, t)| b.max_timestamp() > t) {
                    best = Some((b.header().last_offset, b.max_timestamp()));
                }
                false
            })?;
            Ok(best)
        }
        t if t >= 0 => {
            let mut found = None;
            scan(log, mem.log_start_offset(), bound, |b| {
                if b.max_timestamp() < t {
                    return false;
                }
                // The first record at or after `t` (the batch's base when its records are
                // compressed: Kafka's answer for those is the same batch).
                let base = b.header().base_offset;
                let offset = b
                    .records()
                    .ok()
                    .and_then(|rs| {
                        rs.iter()
                            .find(|r| b.base_timestamp() + r.timestamp_delta >= t)
                            .map(|r| base + i64::from(r.offset_delta))
                    })
                    .unwrap_or(base);
                found = Some((offset, b.max_timestamp()));
                true
            })?;
            Ok(found)
        }
        _ => Ok(None),
    }
}

/// Calls `visit` on each data batch in `[from, below)` until it returns true.
fn scan(
    log: &FileLog,
    mut from: Offset,
    below: Offset,
    mut visit: impl FnMut(&crate::record_batch::RawBatch) -> bool,
) -> Result<(), ()> {
    while from < below {
        let batches = log
            .try_read_at_most(from, below, SCAN_BATCHES)
            .map_err(|_| ())?;
        let Some(last) = batches.last() else {
            return Ok(());
        };
        from = last.header().last_offset + 1;
        for b in batches.iter().filter(|b| b.header().control.is_none()) {
            if visit(b) {
                return Ok(());
            }
        }
    }
    Ok(())
}

/// Answers OffsetForLeaderEpoch: for each partition, the largest epoch at or below the one
/// asked and the offset where it ends (Kafka's `endOffsetForEpoch`).
pub fn for_leader_epoch(
    node: &dyn ServedNode,
    request: &OffsetForLeaderEpochRequest,
) -> OffsetForLeaderEpochResponse {
    let mut response = OffsetForLeaderEpochResponse::default();
    for t in &request.topics {
        let mut out = OffsetForLeaderTopicResult::default().with_topic(t.topic.clone());
        for p in &t.partitions {
            let mut answer = EpochEndOffset::default()
                .with_partition(p.partition)
                .with_leader_epoch(-1)
                .with_end_offset(-1);
            match lookup(node, &t.topic, p.partition, p.current_leader_epoch) {
                Err(code) => answer.error_code = code,
                Ok((key, _)) => {
                    if let Some(log) = node.log(&key) {
                        let mem = log.mem_log();
                        let found = mem
                            .epoch_cache()
                            .end_offset_for(p.leader_epoch, mem.log_end_offset());
                        answer.leader_epoch = found.epoch;
                        answer.end_offset = found.end_offset;
                    }
                }
            }
            out.partitions.push(answer);
        }
        response.topics.push(out);
    }
    response
}
