//! Metadata: the node as the only broker (and controller) of the cluster it serves, and each
//! topic it holds with its id and partitions, every one led by the node at its leader epoch.
//! `__mirror_state` is the node's own and not listed; unknown topics are
//! `UNKNOWN_TOPIC_OR_PARTITION` (topics are never created by a Metadata request).

use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{BrokerId, MetadataRequest, MetadataResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use kmirror_kernel::node::PartitionKey;
use uuid::Uuid;

use crate::mirror_state_log::MIRROR_STATE_TOPIC;

use super::broker::{leader_epoch, ServedNode};

/// `UNKNOWN_TOPIC_OR_PARTITION`.
pub const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
/// `UNKNOWN_TOPIC_ID`.
pub const UNKNOWN_TOPIC_ID: i16 = 100;

/// The cluster id the node reports: its broker id and directory name make it stable.
pub fn cluster_id(node: &dyn ServedNode) -> String {
    node_cluster_id(node.root(), node.meta().broker)
}

/// The cluster id of the node at `root` with broker id `broker`, served or not (a mirror of
/// it is named so by default, and a node asks its source for "its mirror of me" by it).
pub fn node_cluster_id(root: &std::path::Path, broker: i32) -> String {
    let dir = root
        .file_name()
        .map_or_else(|| "node".to_owned(), |n| n.to_string_lossy().into_owned());
    format!("kmirror-{dir}-{broker}")
}

/// Answers a Metadata request.
pub fn answer(
    node: &dyn ServedNode,
    host: &str,
    port: i32,
    request: &MetadataRequest,
    _version: i16,
) -> MetadataResponse {
    let broker = node.meta().broker;
    let mut response = MetadataResponse::default();
    response.brokers = vec![MetadataResponseBroker::default()
        .with_node_id(BrokerId(broker))
        .with_host(StrBytes::from_string(host.to_owned()))
        .with_port(port)];
    response.cluster_id = Some(StrBytes::from_string(cluster_id(node)));
    response.controller_id = BrokerId(broker);
    let meta = node.meta();
    response.topics = match &request.topics {
        None => meta
            .topics
            .keys()
            .filter(|n| n.as_str() != MIRROR_STATE_TOPIC)
            .map(|n| topic(node, n))
            .collect(),
        Some(asked) => asked
            .iter()
            .map(|t| match &t.name {
                Some(name) => topic(node, name),
                None => by_id(node, t.topic_id),
            })
            .collect(),
    };
    response
}

/// One topic asked by id (Metadata v10+ may name topics by id only).
fn by_id(node: &dyn ServedNode, id: Uuid) -> MetadataResponseTopic {
    let name = node
        .meta()
        .topic_name(kmirror_kernel::types::TopicId(*id.as_bytes()))
        .map(str::to_owned);
    match name {
        Some(name) => topic(node, &name),
        None => MetadataResponseTopic::default()
            .with_error_code(UNKNOWN_TOPIC_ID)
            .with_topic_id(id),
    }
}

/// One topic's entry.
fn topic(node: &dyn ServedNode, name: &str) -> MetadataResponseTopic {
    let entry = MetadataResponseTopic::default()
        .with_name(Some(TopicName(StrBytes::from_string(name.to_owned()))));
    let Some(t) = node
        .meta()
        .topics
        .get(name)
        .filter(|_| name != MIRROR_STATE_TOPIC)
    else {
        return entry.with_error_code(UNKNOWN_TOPIC_OR_PARTITION);
    };
    let broker = BrokerId(node.meta().broker);
    // The node leads every partition; its in-process followers stay in the ISR (they copy each
    // step's appends within the step) but are not brokers a client can reach.
    let replicas: Vec<BrokerId> = node
        .meta()
        .replica_set()
        .into_iter()
        .map(BrokerId)
        .collect();
    entry
        .with_topic_id(Uuid::from_bytes(t.topic_id.0))
        .with_partitions(
            (0..t.partitions)
                .map(|p| {
                    let key = PartitionKey::new(t.topic_id, p);
                    MetadataResponsePartition::default()
                        .with_partition_index(p)
                        .with_leader_id(broker)
                        .with_leader_epoch(leader_epoch(node, name, &key))
                        .with_replica_nodes(replicas.clone())
                        .with_isr_nodes(replicas.clone())
                })
                .collect(),
        )
}
