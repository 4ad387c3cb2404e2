//! DeleteRecords, the admin request that changes a partition's data. On a mirrored partition
//! that is not STOPPED (its produce gate closed) it is refused with `READ_ONLY_TOPIC`, as the
//! KIP's prototype refuses it: a mirror's log is the source's. (CreatePartitions and
//! DeleteTopics, which change a topic's shape: [`super::topic_admin`].)
//!
//! Elsewhere (a STOPPED partition, or one never mirrored) DeleteRecords does what Kafka's
//! `UnifiedLog.deleteRecords` does: the partition's log start offset moves forward to the
//! offset asked (-1: the high watermark; above the high watermark, or another negative offset,
//! is `OFFSET_OUT_OF_RANGE`; below the log start changes nothing), durably before the answer,
//! on the node's thread like a Produce; the segments wholly below it are deleted; the answer's
//! low watermark is the log start offset.

use kafka_protocol::messages::delete_records_response::{
    DeleteRecordsPartitionResult, DeleteRecordsTopicResult,
};
use kafka_protocol::messages::{DeleteRecordsRequest, DeleteRecordsResponse};
use kmirror_kernel::log::{LogError, LogView};

use crate::error::FileLogError;

use super::broker::{partition_key, ServedNode};
use super::fetch::OFFSET_OUT_OF_RANGE;
use super::metadata::UNKNOWN_TOPIC_OR_PARTITION;
use super::offsets::KAFKA_STORAGE_ERROR;
use super::produce::READ_ONLY_TOPIC;
use super::ServeError;

/// `DeleteRecordsRequest.HIGH_WATERMARK`: delete up to the high watermark.
pub const HIGH_WATERMARK: i64 = -1;

/// Answers DeleteRecords. Returns the response and the disk failure that ended a deletion, if
/// one did (the node must hear of it).
pub fn delete_records(
    node: &mut dyn ServedNode,
    request: &DeleteRecordsRequest,
) -> (DeleteRecordsResponse, Option<ServeError>) {
    let mut response = DeleteRecordsResponse::default();
    let mut failure = None;
    for t in &request.topics {
        let mut out = DeleteRecordsTopicResult::default().with_name(t.name.clone());
        for p in &t.partitions {
            let (code, low_watermark) =
                match delete_partition(node, &t.name, p.partition_index, p.offset) {
                    Ok(low_watermark) => (0, low_watermark),
                    Err((code, failed)) => {
                        failure = failure.or(failed);
                        (code, -1)
                    }
                };
            out.partitions.push(
                DeleteRecordsPartitionResult::default()
                    .with_partition_index(p.partition_index)
                    .with_low_watermark(low_watermark)
                    .with_error_code(code),
            );
        }
        response.topics.push(out);
    }
    (response, failure)
}

/// One partition's DeleteRecords: its new log start offset, or the error code and the disk
/// failure behind it.
fn delete_partition(
    node: &mut dyn ServedNode,
    topic: &str,
    index: i32,
    offset: i64,
) -> Result<i64, (i16, Option<ServeError>)> {
    let key = partition_key(node, topic, index).ok_or((UNKNOWN_TOPIC_OR_PARTITION, None))?;
    if !node.writable(&key) {
        return Err((READ_ONLY_TOPIC, None));
    }
    let log = node.log(&key).ok_or((UNKNOWN_TOPIC_OR_PARTITION, None))?;
    let offset = match offset {
        HIGH_WATERMARK => log.mem_log().high_watermark(),
        o if o < 0 => return Err((OFFSET_OUT_OF_RANGE, None)),
        o => o,
    };
    node.delete_records(&key, offset).map_err(|e| match e {
        ServeError::Log { source, .. }
            if matches!(
                *source,
                FileLogError::Log(LogError::OffsetOutOfRange { .. })
            ) =>
        {
            (OFFSET_OUT_OF_RANGE, None)
        }
        other => (KAFKA_STORAGE_ERROR, Some(other)),
    })
}
