//! Produce and InitProducerId: clients write to the partitions whose gate the kernel opened
//! (STOPPED, or not mirrored), and get producer ids from a block no mirrored producer holds.
//!
//! **Producer ids.** The node hands out ids from blocks of [`BLOCK`], the next block's start
//! kept in `<dest>/producer-ids` (written atomically before any id of the block is given
//! out, so a restart never hands out an id twice). The first block starts above every
//! producer id in the node's logs and at or above 2^40, far above the ids a Kafka cluster's
//! controller hands out from 0: a new producer is never taken for a mirrored one. (After a
//! failover the `MIRROR_PID_RESET` marker has expired every mirrored producer anyway; the
//! separate range keeps the logs readable.)

use std::fs;
use std::path::{Path, PathBuf};

use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::{
    InitProducerIdRequest, InitProducerIdResponse, ProduceRequest, ProduceResponse, ProducerId,
};
use kafka_protocol::protocol::StrBytes;
use kmirror_kernel::log::{LogError, LogView};

use crate::error::FileLogError;
use crate::record_batch::RawBatch;

use super::broker::{leader_epoch, partition_key, ServedNode};
use super::metadata::UNKNOWN_TOPIC_OR_PARTITION;
use super::offsets::KAFKA_STORAGE_ERROR;
use super::ServeError;

/// `READ_ONLY_TOPIC`: the KIP's prototype's code for a write to a mirrored partition.
pub const READ_ONLY_TOPIC: i16 = 134;
/// `CORRUPT_MESSAGE`.
pub const CORRUPT_MESSAGE: i16 = 2;
/// `OUT_OF_ORDER_SEQUENCE_NUMBER`.
pub const OUT_OF_ORDER_SEQUENCE_NUMBER: i16 = 45;
/// `INVALID_PRODUCER_EPOCH`.
pub const INVALID_PRODUCER_EPOCH: i16 = 47;
/// `INVALID_TXN_STATE`.
pub const INVALID_TXN_STATE: i16 = 48;
/// `INVALID_REQUEST`.
pub const INVALID_REQUEST: i16 = 42;
/// `UNKNOWN_SERVER_ERROR`.
pub const UNKNOWN_SERVER_ERROR: i16 = -1;

/// Ids per block.
pub const BLOCK: i64 = 1_000;
/// The lowest id the node hands out.
pub const FIRST_ID: i64 = 1 << 40;
/// The file that keeps the next block's start.
pub const PRODUCER_IDS_FILE: &str = "producer-ids";

/// The producer-id allocator. See the [module documentation](self).
#[derive(Debug)]
pub struct ProducerIds {
    path: PathBuf,
    /// The next id to hand out and the end of the block it is in (`None`: no block yet).
    block: Option<(i64, i64)>,
    /// The next block's start as the file says (`None`: no file yet).
    stored: Option<i64>,
}

impl ProducerIds {
    /// Reads `<root>/producer-ids` (no block is taken until an id is asked for).
    pub fn open(root: &Path) -> Result<Self, ServeError> {
        let path = root.join(PRODUCER_IDS_FILE);
        let stored = match fs::read_to_string(&path) {
            Ok(text) => Some(
                text.trim()
                    .parse::<i64>()
                    .map_err(|e| ServeError::ProducerIds {
                        action: "parse",
                        path: path.clone(),
                        source: std::io::Error::new(std::io::ErrorKind::InvalidData, e),
                    })?,
            ),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(source) => {
                return Err(ServeError::ProducerIds {
                    action: "read",
                    path,
                    source,
                })
            }
        };
        Ok(ProducerIds {
            path,
            block: None,
            stored,
        })
    }

    /// The next id, taking (and persisting) a new block when the current one is used up.
    pub fn next(&mut self, node: &dyn ServedNode) -> Result<i64, ServeError> {
        if let Some((next, end)) = self.block {
            if next < end {
                self.block = Some((next + 1, end));
                return Ok(next);
            }
        }
        let start = match self.stored {
            Some(s) => s,
            None => FIRST_ID.max(highest_logged_producer(node) + 1),
        };
        let end = start + BLOCK;
        let dir = self.path.parent().unwrap_or(Path::new("."));
        crate::segment::write_atomically(dir, PRODUCER_IDS_FILE, format!("{end}\n").as_bytes())
            .map_err(|e| ServeError::ProducerIds {
                action: "write",
                path: self.path.clone(),
                source: std::io::Error::other(e.to_string()),
            })?;
        self.stored = Some(end);
        self.block = Some((start + 1, end));
        Ok(start)
    }

    /// Answers InitProducerId: a new id at epoch 0 for an idempotent producer. A transactional
    /// id is the transaction coordinator's ([`super::txn`]; the broker hands it there): here it
    /// is refused (`INVALID_REQUEST`).
    pub fn answer(
        &mut self,
        node: &dyn ServedNode,
        request: &InitProducerIdRequest,
    ) -> Result<InitProducerIdResponse, ServeError> {
        let mut response = InitProducerIdResponse::default()
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1);
        if request.transactional_id.is_some() {
            response.error_code = INVALID_REQUEST;
            return Ok(response);
        }
        if request.producer_id.0 >= 0 {
            // A producer bumping its epoch after an error keeps its id (KIP-360).
            return Ok(response
                .with_producer_id(request.producer_id)
                .with_producer_epoch(request.producer_epoch.saturating_add(1)));
        }
        let id = self.next(node)?;
        Ok(response
            .with_producer_id(ProducerId(id))
            .with_producer_epoch(0))
    }
}

/// The largest producer id in any of the node's logs, in a batch or in the producer state (-1:
/// none).
fn highest_logged_producer(node: &dyn ServedNode) -> i64 {
    let meta = node.meta();
    meta.topics
        .values()
        .flat_map(|t| {
            (0..t.partitions).map(|p| kmirror_kernel::node::PartitionKey::new(t.topic_id, p))
        })
        .filter_map(|k| node.log(&k))
        .filter_map(|l| {
            // Every batch's producer, not only the live producer state: a MIRROR_PID_RESET
            // expired the mirrored producers, whose ids stay in the log's batches.
            let logged = l.mem_log().batches().iter().map(|b| b.producer_id);
            let live = l.mem_log().producer_state().producers().map(|(p, _)| p);
            logged.chain(live).max()
        })
        .max()
        .unwrap_or(-1)
}

/// Answers a Produce: each partition's batches appended when its gate is open. Returns the
/// response and the disk failure that ended a write, if one did (the node must hear of it).
pub fn answer(
    node: &mut dyn ServedNode,
    request: &ProduceRequest,
    _version: i16,
) -> (ProduceResponse, Option<ServeError>) {
    let mut response = ProduceResponse::default();
    let mut failure = None;
    for t in &request.topic_data {
        let mut out = TopicProduceResponse::default()
            .with_name(t.name.clone())
            .with_topic_id(t.topic_id);
        for p in &t.partition_data {
            let (answer, failed) = partition(node, &t.name, p.index, p.records.as_ref());
            failure = failure.or(failed);
            out.partition_responses.push(answer);
        }
        response.responses.push(out);
    }
    (response, failure)
}

fn partition(
    node: &mut dyn ServedNode,
    topic: &str,
    index: i32,
    records: Option<&bytes::Bytes>,
) -> (PartitionProduceResponse, Option<ServeError>) {
    let answer = PartitionProduceResponse::default()
        .with_index(index)
        .with_base_offset(-1)
        .with_log_append_time_ms(-1)
        .with_log_start_offset(-1);
    let refuse = |code: i16, message: String| {
        (
            answer
                .clone()
                .with_error_code(code)
                .with_error_message(Some(StrBytes::from_string(message))),
            None,
        )
    };
    let Some(key) = partition_key(node, topic, index) else {
        return refuse(
            UNKNOWN_TOPIC_OR_PARTITION,
            format!("this node has no partition {topic}-{index}"),
        );
    };
    if !node.writable(&key) {
        return refuse(
            READ_ONLY_TOPIC,
            format!(
                "READ_ONLY_TOPIC: {topic}-{index} is mirrored and not STOPPED; \
                 `kmirror stop --topics {topic}` fails it over and makes it writable"
            ),
        );
    }
    let batches = match records.map(RawBatch::parse_many_shared).transpose() {
        Ok(b) => b.unwrap_or_default(),
        Err(e) => return refuse(CORRUPT_MESSAGE, format!("the records do not parse: {e}")),
    };
    let epoch = leader_epoch(node, topic, &key);
    let mut base = None;
    for batch in &batches {
        match node.append(&key, epoch, batch) {
            Ok(h) => {
                base.get_or_insert(h.base_offset);
            }
            Err(ServeError::Log { source, dir }) => match *source {
                FileLogError::Log(e) => return refuse(log_error_code(&e), e.to_string()),
                other => {
                    let message = format!("write failed: {other}");
                    let (a, _) = refuse(KAFKA_STORAGE_ERROR, message);
                    return (
                        a,
                        Some(ServeError::Log {
                            dir,
                            source: Box::new(other),
                        }),
                    );
                }
            },
            Err(other) => {
                let (a, _) = refuse(UNKNOWN_SERVER_ERROR, other.to_string());
                return (a, Some(other));
            }
        }
    }
    let log_start = node
        .log(&key)
        .map_or(-1, |l| l.mem_log().log_start_offset());
    (
        answer
            .with_base_offset(base.unwrap_or(-1))
            .with_log_start_offset(log_start),
        None,
    )
}

/// Kafka's code for a producer-state refusal.
fn log_error_code(e: &LogError) -> i16 {
    match e {
        LogError::OutOfOrderSequence { .. } => OUT_OF_ORDER_SEQUENCE_NUMBER,
        LogError::InvalidProducerEpoch { .. } => INVALID_PRODUCER_EPOCH,
        LogError::InvalidTransaction(_) => INVALID_TXN_STATE,
        LogError::EmptyBatch { .. } => CORRUPT_MESSAGE,
        _ => UNKNOWN_SERVER_ERROR,
    }
}
