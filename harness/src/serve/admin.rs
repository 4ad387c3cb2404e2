//! The admin requests that change a topic's data or shape: DeleteRecords, CreatePartitions and
//! DeleteTopics. On a mirrored partition that is not STOPPED (its produce gate closed) each is
//! refused with `READ_ONLY_TOPIC`, as the KIP's prototype refuses them: a mirror's log and
//! partition count are the source's.
//!
//! Elsewhere (a STOPPED partition, or one never mirrored) DeleteRecords does what Kafka's
//! `UnifiedLog.deleteRecords` does: the partition's log start offset moves forward to the
//! offset asked (-1: the high watermark; above the high watermark, or another negative offset,
//! is `OFFSET_OUT_OF_RANGE`; below the log start changes nothing), durably before the answer,
//! on the node's thread like a Produce; the segments wholly below it are deleted; the answer's
//! low watermark is the log start offset. CreatePartitions and DeleteTopics are refused there
//! with `POLICY_VIOLATION` and a message: this node does not add partitions or delete topics.

use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::delete_records_response::{
    DeleteRecordsPartitionResult, DeleteRecordsTopicResult,
};
use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::{
    CreatePartitionsRequest, CreatePartitionsResponse, DeleteRecordsRequest, DeleteRecordsResponse,
    DeleteTopicsRequest, DeleteTopicsResponse,
};
use kafka_protocol::protocol::StrBytes;
use kmirror_kernel::log::{LogError, LogView};
use kmirror_kernel::node::PartitionKey;
use kmirror_kernel::types::TopicId;

use crate::error::FileLogError;

use super::broker::{partition_key, ServedNode};
use super::fetch::OFFSET_OUT_OF_RANGE;
use super::metadata::UNKNOWN_TOPIC_OR_PARTITION;
use super::offsets::KAFKA_STORAGE_ERROR;
use super::produce::READ_ONLY_TOPIC;
use super::ServeError;

/// `POLICY_VIOLATION`: what this node does not do.
pub const POLICY_VIOLATION: i16 = 44;

/// A topic's answer: `None` if the node has no such topic, else the error code and message.
fn topic_refusal(node: &dyn ServedNode, name: &str, verb: &str) -> Option<(i16, String)> {
    let topic = node.meta().topics.get(name)?;
    let read_only =
        (0..topic.partitions).any(|p| !node.writable(&PartitionKey::new(topic.topic_id, p)));
    Some(if read_only {
        (
            READ_ONLY_TOPIC,
            format!(
                "READ_ONLY_TOPIC: {name} is mirrored and not STOPPED: it cannot be {verb}; \
                 `kmirror stop --topics {name}` fails it over"
            ),
        )
    } else {
        (
            POLICY_VIOLATION,
            format!(
                "{name} cannot be {verb} on this kmirror node: it does not add partitions or \
                 delete topics yet"
            ),
        )
    })
}

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

/// Answers CreatePartitions.
pub fn create_partitions(
    node: &dyn ServedNode,
    request: &CreatePartitionsRequest,
) -> CreatePartitionsResponse {
    let mut response = CreatePartitionsResponse::default();
    for t in &request.topics {
        let (code, message) = topic_refusal(node, &t.name, "given partitions").unwrap_or((
            UNKNOWN_TOPIC_OR_PARTITION,
            format!("this node has no topic {}", t.name.0),
        ));
        response.results.push(
            CreatePartitionsTopicResult::default()
                .with_name(t.name.clone())
                .with_error_code(code)
                .with_error_message(Some(StrBytes::from_string(message))),
        );
    }
    response
}

/// Answers DeleteTopics (by name, or by id from v6).
pub fn delete_topics(node: &dyn ServedNode, request: &DeleteTopicsRequest) -> DeleteTopicsResponse {
    let mut response = DeleteTopicsResponse::default();
    let named = request.topic_names.iter().map(|n| (Some(n.clone()), None));
    let stated = request
        .topics
        .iter()
        .map(|t| (t.name.clone(), Some(t.topic_id)));
    for (name, id) in named.chain(stated) {
        let resolved = name.as_ref().map(|n| n.0.to_string()).or_else(|| {
            let id = id?;
            node.meta()
                .topic_name(TopicId(*id.as_bytes()))
                .map(str::to_owned)
        });
        let (code, message) = resolved
            .as_deref()
            .and_then(|n| topic_refusal(node, n, "deleted"))
            .unwrap_or((
                UNKNOWN_TOPIC_OR_PARTITION,
                "no such topic on this node".to_owned(),
            ));
        let mut result = DeletableTopicResult::default()
            .with_name(name)
            .with_error_code(code)
            .with_error_message(Some(StrBytes::from_string(message)));
        if let Some(id) = id {
            result.topic_id = id;
        }
        response.responses.push(result);
    }
    response
}
