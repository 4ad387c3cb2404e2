//! [`Broker`]: the node-thread side of serving. It answers each [`ClientCall`] from a
//! [`ServedNode`] view of the node's logs and gates, parks the Fetches that wait for data,
//! and answers them when data comes or their wait ends ([`Broker::poll`]).

use std::path::Path;

use kafka_protocol::messages::{RequestKind, ResponseKind};
use kmirror_kernel::batch::BatchHeader;
use kmirror_kernel::log::LogView;
use kmirror_kernel::node::PartitionKey;
use kmirror_kernel::types::{LeaderEpoch, PartitionIndex};

use crate::file_log::FileLog;
use crate::node::dest::NodeMeta;
use crate::record_batch::RawBatch;

use super::fetch::{self, FetchAnswer};
use super::produce::ProducerIds;
use super::{metadata, offsets, produce, CallId, ClientCall, ServeError};

/// What the broker reads and writes of the node, lent by the node driver for one call.
pub trait ServedNode {
    /// The node's metadata (topics, partitions, leader epochs).
    fn meta(&self) -> &NodeMeta;
    /// The destination directory.
    fn root(&self) -> &Path;
    /// The log of `key`.
    fn log(&self, key: &PartitionKey) -> Option<&FileLog>;
    /// Whether clients may write to `key` (the kernel's produce gate).
    fn writable(&self, key: &PartitionKey) -> bool;
    /// Appends a client's batch to `key` as its leader at `leader_epoch`; the high watermark
    /// follows (one replica).
    fn append(
        &mut self,
        key: &PartitionKey,
        leader_epoch: LeaderEpoch,
        batch: &RawBatch,
    ) -> Result<BatchHeader, ServeError>;
}

/// The partition `partition` of topic `name` on `node`, if the node has it.
pub fn partition_key(
    node: &dyn ServedNode,
    name: &str,
    partition: PartitionIndex,
) -> Option<PartitionKey> {
    let topic = node.meta().topics.get(name)?;
    (0..topic.partitions)
        .contains(&partition)
        .then(|| PartitionKey::new(topic.topic_id, partition))
}

/// The leader epoch clients see for `key`: the node's (`node.properties`), or the log's
/// latest when that is larger (a mirrored epoch beyond the node's own).
pub fn leader_epoch(node: &dyn ServedNode, name: &str, key: &PartitionKey) -> LeaderEpoch {
    let own = node
        .meta()
        .partitions
        .get(&(name.to_owned(), key.partition))
        .map_or(0, |p| p.leader_epoch);
    let logged = node
        .log(key)
        .and_then(|l| l.mem_log().epoch_cache().latest_epoch())
        .unwrap_or(0);
    own.max(logged)
}

/// A Fetch waiting for data.
struct Parked {
    call: ClientCall,
    deadline_ms: i64,
}

/// Serving state on the node's thread. See the [module documentation](self).
pub struct Broker {
    host: String,
    port: i32,
    parked: Vec<Parked>,
    producer_ids: ProducerIds,
    /// The total of the logs' end offsets when the parked Fetches were last looked at.
    seen_ends: i64,
}

impl std::fmt::Debug for Broker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Broker")
            .field("advertised", &format!("{}:{}", self.host, self.port))
            .field("parked", &self.parked.len())
            .finish_non_exhaustive()
    }
}

impl Broker {
    /// A broker advertising `advertised` (`host:port`) for the node at `root`.
    pub fn new(advertised: &str, root: &Path) -> Result<Self, ServeError> {
        let (host, port) = advertised
            .rsplit_once(':')
            .and_then(|(h, p)| Some((h.to_owned(), p.parse::<i32>().ok()?)))
            .ok_or_else(|| ServeError::BadAdvertised(advertised.to_owned()))?;
        Ok(Broker {
            host,
            port,
            parked: Vec::new(),
            producer_ids: ProducerIds::open(root)?,
            seen_ends: -1,
        })
    }

    /// The advertised host and port.
    pub fn advertised(&self) -> (&str, i32) {
        (&self.host, self.port)
    }

    /// Fetches waiting for data.
    pub fn parked(&self) -> usize {
        self.parked.len()
    }

    /// When the first parked Fetch's wait ends.
    pub fn next_deadline_ms(&self) -> Option<i64> {
        self.parked.iter().map(|p| p.deadline_ms).min()
    }

    /// Answers `call` (or parks it, a Fetch waiting for data). A failed disk write is an
    /// error for the node; the client is answered first.
    pub fn handle(
        &mut self,
        now_ms: i64,
        call: ClientCall,
        node: &mut dyn ServedNode,
    ) -> Result<(), ServeError> {
        let version = call.header.request_api_version;
        let response = match &call.request {
            RequestKind::Metadata(r) => {
                ResponseKind::Metadata(metadata::answer(node, &self.host, self.port, r, version))
            }
            RequestKind::ListOffsets(r) => ResponseKind::ListOffsets(offsets::list(node, r)),
            RequestKind::OffsetForLeaderEpoch(r) => {
                ResponseKind::OffsetForLeaderEpoch(offsets::for_leader_epoch(node, r))
            }
            RequestKind::Fetch(r) => match fetch::answer(node, r, version, false) {
                FetchAnswer::Ready(response) => ResponseKind::Fetch(response),
                FetchAnswer::Wait => {
                    let deadline_ms = now_ms.saturating_add(i64::from(r.max_wait_ms.max(0)));
                    self.parked.push(Parked { call, deadline_ms });
                    return Ok(());
                }
            },
            RequestKind::InitProducerId(r) => {
                ResponseKind::InitProducerId(self.producer_ids.answer(node, r)?)
            }
            RequestKind::Produce(r) => {
                // acks=0: the connection thread writes no response (Kafka sends none).
                let (response, failure) = produce::answer(node, r, version);
                let _ = call.reply.send(ResponseKind::Produce(response));
                return failure.map_or(Ok(()), Err);
            }
            other => {
                // The listener passes only what `versions` lists; dropping the call closes the
                // connection with a line that names it.
                eprintln!(
                    "serve: no handler for {:?}; closing the connection",
                    api_name(other)
                );
                return Ok(());
            }
        };
        let _ = call.reply.send(response);
        Ok(())
    }

    /// Answers the parked Fetches that now have data (the logs moved since the last look) or
    /// whose wait ended.
    pub fn poll(&mut self, now_ms: i64, node: &mut dyn ServedNode) {
        if self.parked.is_empty() {
            return;
        }
        let ends = total_log_end(node);
        let moved = ends != self.seen_ends;
        self.seen_ends = ends;
        let mut still = Vec::new();
        for parked in std::mem::take(&mut self.parked) {
            let expired = now_ms >= parked.deadline_ms;
            if !moved && !expired {
                still.push(parked);
                continue;
            }
            let RequestKind::Fetch(r) = &parked.call.request else {
                continue;
            };
            let version = parked.call.header.request_api_version;
            match fetch::answer(node, r, version, expired) {
                FetchAnswer::Ready(response) => {
                    let _ = parked.call.reply.send(ResponseKind::Fetch(response));
                }
                FetchAnswer::Wait => still.push(parked),
            }
        }
        self.parked = still;
    }

    /// The calls this broker holds (parked Fetches), to be dropped when their connections close.
    pub fn parked_calls(&self) -> Vec<CallId> {
        self.parked.iter().map(|p| p.call.id).collect()
    }
}

/// The sum of every log's end offset: moves whenever any log grows or is truncated.
fn total_log_end(node: &dyn ServedNode) -> i64 {
    let meta = node.meta();
    meta.topics
        .values()
        .flat_map(|t| (0..t.partitions).map(|p| PartitionKey::new(t.topic_id, p)))
        .filter_map(|k| node.log(&k))
        .map(|l| l.mem_log().log_end_offset())
        .fold(0i64, i64::wrapping_add)
}

/// The name of a request's API, for log lines.
fn api_name(request: &RequestKind) -> String {
    let debug = format!("{request:?}");
    debug.split('(').next().unwrap_or("?").to_owned()
}
