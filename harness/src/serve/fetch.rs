//! Fetch, as a consumer sends it: records up to the high watermark (read-uncommitted) or the
//! last stable offset (read-committed, with the aborted transactions of the records
//! returned), KIP-320's diverging epoch, and long polls (the [`Broker`](super::Broker) parks a
//! Fetch with fewer than `min_bytes` for up to `max_wait_ms`). A partition's records are whole
//! batches of one segment, taken from the log's index as a region of the segment file
//! ([`crate::file_region`]) that the connection's thread sends without reading
//! ([`fetch_frame`](super::fetch_frame)); the node's thread reads no record.
//!
//! Which partitions a Fetch reads and which of their answers it gets is its fetch session's
//! business ([`fetch_session`](super::fetch_session)); this module reads them.

use bytes::Bytes;
use kafka_protocol::messages::fetch_request::FetchPartition;
use kafka_protocol::messages::fetch_response::{
    AbortedTransaction, EpochEndOffset, LeaderIdAndEpoch, PartitionData,
};
use kafka_protocol::messages::{BrokerId, FetchRequest, ProducerId};
use kmirror_kernel::batch::ControlType;
use kmirror_kernel::log::{LogView, PartitionLog};
use kmirror_kernel::types::{Offset, ProducerId as Pid, TopicId};
use std::collections::BTreeMap;

use crate::file_log::FileLog;
use crate::file_region::FileRegion;

use super::broker::{leader_epoch, partition_key, ServedNode};
use super::fetch_session::{TopicRef, Wanted};
use super::metadata::{UNKNOWN_TOPIC_ID, UNKNOWN_TOPIC_OR_PARTITION};
use super::offsets::{check_leader_epoch, KAFKA_STORAGE_ERROR};

/// `OFFSET_OUT_OF_RANGE`.
pub const OFFSET_OUT_OF_RANGE: i16 = 1;

/// Offsets looked at a time past the records returned, for the markers that say which of
/// their transactions aborted.
const MARKER_WINDOW: i64 = 10_000;

/// One partition of a Fetch, read: its answer, and the region of a segment file its records
/// are (the answer's `records` then an empty placeholder the connection's thread fills from
/// the region; [`crate::file_region`]).
pub type Read = (Wanted, PartitionData, Option<FileRegion>);

/// A Fetch's partitions read, or that it waits for data.
#[derive(Debug)]
pub enum FetchAnswer {
    /// Each partition read, with its answer, in the order asked.
    Ready(Vec<Read>),
    /// Fewer bytes than `min_bytes` and no error: park it until data comes or its wait ends.
    Wait,
}

/// Reads `wanted`, the partitions of `request` or of its fetch session
/// ([`fetch_session`](super::fetch_session)); `expired`: its wait is over, answer whatever
/// there is.
pub fn answer(
    node: &dyn ServedNode,
    request: &FetchRequest,
    wanted: Vec<Wanted>,
    expired: bool,
) -> FetchAnswer {
    let read_committed = request.isolation_level == 1;
    let mut budget = u64::try_from(request.max_bytes.max(0)).unwrap_or(u64::MAX);
    let mut total = 0u64;
    let mut errors = false;
    // Kafka answers at once a Fetch that reads no partition (a client closing its session
    // sends one), that may not wait, that has enough bytes, or that met an error.
    let asks_for_data = !wanted.is_empty();
    let mut read = Vec::with_capacity(wanted.len());
    for w in wanted {
        let name = match &w.topic {
            TopicRef::Id(id) => node
                .meta()
                .topic_name(TopicId(*id.as_bytes()))
                .map(str::to_owned),
            TopicRef::Name(name) => Some(name.clone()),
        };
        let (data, region) = match &name {
            None => (failed(w.params.partition, UNKNOWN_TOPIC_ID), None),
            Some(name) => {
                let first = total == 0;
                let (data, region) =
                    partition(node, name, &w.params, read_committed, &mut budget, first);
                total += region.as_ref().map_or(0, FileRegion::len);
                (data, region)
            }
        };
        errors |= data.error_code != 0;
        read.push((w, data, region));
    }
    if asks_for_data && !expired && !errors && request.max_wait_ms > 0 && total < min_bytes(request)
    {
        return FetchAnswer::Wait;
    }
    FetchAnswer::Ready(read)
}

fn min_bytes(request: &FetchRequest) -> u64 {
    u64::try_from(request.min_bytes.max(1)).unwrap_or(1)
}

/// A partition's answer carrying only `code`.
fn failed(partition: i32, code: i16) -> PartitionData {
    PartitionData::default()
        .with_partition_index(partition)
        .with_error_code(code)
        .with_high_watermark(-1)
        .with_last_stable_offset(-1)
        .with_log_start_offset(-1)
}

/// One partition's answer, and the region of a segment file its records are.
fn partition(
    node: &dyn ServedNode,
    name: &str,
    p: &FetchPartition,
    read_committed: bool,
    budget: &mut u64,
    first: bool,
) -> (PartitionData, Option<FileRegion>) {
    let Some(key) = partition_key(node, name, p.partition) else {
        return (failed(p.partition, UNKNOWN_TOPIC_OR_PARTITION), None);
    };
    let Some(log) = node.log(&key) else {
        return (failed(p.partition, UNKNOWN_TOPIC_OR_PARTITION), None);
    };
    let epoch = leader_epoch(node, name, &key);
    let current = LeaderIdAndEpoch::default()
        .with_leader_id(BrokerId(node.meta().broker))
        .with_leader_epoch(epoch);
    if let Some(code) = check_leader_epoch(p.current_leader_epoch, epoch) {
        return (failed(p.partition, code).with_current_leader(current), None);
    }
    let mem = log.mem_log();
    let data = PartitionData::default()
        .with_partition_index(p.partition)
        .with_high_watermark(mem.high_watermark())
        .with_last_stable_offset(mem.last_stable_offset())
        .with_log_start_offset(mem.log_start_offset())
        .with_preferred_read_replica(BrokerId(-1));
    if p.fetch_offset < mem.log_start_offset() || p.fetch_offset > mem.log_end_offset() {
        return (data.with_error_code(OFFSET_OUT_OF_RANGE), None);
    }
    if p.last_fetched_epoch >= 0 {
        let end = mem
            .epoch_cache()
            .end_offset_for(p.last_fetched_epoch, mem.log_end_offset());
        if end.epoch < p.last_fetched_epoch || end.end_offset < p.fetch_offset {
            let diverging = EpochEndOffset::default()
                .with_epoch(end.epoch)
                .with_end_offset(end.end_offset);
            return (data.with_diverging_epoch(diverging), None);
        }
    }
    let bound = if read_committed {
        mem.last_stable_offset()
    } else {
        mem.high_watermark()
    };
    let limit = u64::try_from(p.partition_max_bytes.max(0))
        .unwrap_or(0)
        .min(*budget);
    let region = match log.region(p.fetch_offset, bound, limit, first) {
        Ok(region) => region,
        Err(_) => return (data.with_error_code(KAFKA_STORAGE_ERROR), None),
    };
    *budget = budget.saturating_sub(region.as_ref().map_or(0, FileRegion::len));
    let mut data = data.with_records(Some(Bytes::new()));
    if read_committed {
        let end = region
            .as_ref()
            .map_or(p.fetch_offset, |r| r.last_offset() + 1);
        data.aborted_transactions = Some(
            aborted(log, p.fetch_offset, end)
                .into_iter()
                .map(|(pid, first)| {
                    AbortedTransaction::default()
                        .with_producer_id(ProducerId(pid))
                        .with_first_offset(first)
                })
                .collect(),
        );
    }
    (data, region)
}

/// The aborted transactions of the data batches in `[from, end)`: `(producer id, first
/// offset)`, one per aborted transaction, found by following each producer's batches to its
/// marker (in the in-memory batch headers, up to the high watermark).
fn aborted(log: &FileLog, from: Offset, end: Offset) -> Vec<(Pid, Offset)> {
    let mem = log.mem_log();
    let hw = mem.high_watermark();
    let mut open: BTreeMap<Pid, Offset> = BTreeMap::new();
    let mut out = Vec::new();
    let mut at = from;
    while at < hw {
        let below = at.saturating_add(MARKER_WINDOW).min(hw);
        for h in mem.read(at, below) {
            match h.control {
                Some(ControlType::Abort) => {
                    if let Some(first) = open.remove(&h.producer_id) {
                        out.push((h.producer_id, first));
                    }
                }
                Some(_) => {
                    open.remove(&h.producer_id);
                }
                None if h.is_transactional && h.base_offset < end => {
                    open.entry(h.producer_id).or_insert(h.base_offset.max(from));
                }
                None => {}
            }
        }
        if at >= end && open.is_empty() {
            break;
        }
        at = below;
    }
    out.sort_by_key(|(_, first)| *first);
    out
}
