//! The admin requests that change a topic's data or shape: DeleteRecords, CreatePartitions and
//! DeleteTopics. On a mirrored partition that is not STOPPED (its produce gate closed) each is
//! refused with `READ_ONLY_TOPIC`, as the KIP's prototype refuses them: a mirror's log and
//! partition count are the source's. Elsewhere they are refused with `POLICY_VIOLATION` and a
//! message: this node does not delete records, add partitions or delete topics yet.

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
use kmirror_kernel::node::PartitionKey;
use kmirror_kernel::types::TopicId;

use super::broker::{partition_key, ServedNode};
use super::metadata::UNKNOWN_TOPIC_OR_PARTITION;
use super::produce::READ_ONLY_TOPIC;

/// `POLICY_VIOLATION`: what this node does not do yet.
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
            format!("this kmirror node does not {verb} topics yet ({name})"),
        )
    })
}

/// Answers DeleteRecords.
pub fn delete_records(
    node: &dyn ServedNode,
    request: &DeleteRecordsRequest,
) -> DeleteRecordsResponse {
    let mut response = DeleteRecordsResponse::default();
    for t in &request.topics {
        let mut out = DeleteRecordsTopicResult::default().with_name(t.name.clone());
        for p in &t.partitions {
            let code = match partition_key(node, &t.name, p.partition_index) {
                None => UNKNOWN_TOPIC_OR_PARTITION,
                Some(key) if !node.writable(&key) => READ_ONLY_TOPIC,
                Some(_) => POLICY_VIOLATION,
            };
            out.partitions.push(
                DeleteRecordsPartitionResult::default()
                    .with_partition_index(p.partition_index)
                    .with_low_watermark(-1)
                    .with_error_code(code),
            );
        }
        response.topics.push(out);
    }
    response
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
