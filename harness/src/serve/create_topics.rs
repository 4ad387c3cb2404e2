//! CreateTopics: a Kafka client creates a regular topic on the node, as on any broker, so that
//! a node stands alone as a cluster (a failed-over destination whose applications need a new
//! topic, or a node that other nodes mirror from).
//!
//! Each topic is checked as Kafka's controller checks it, with its error codes and messages:
//!
//! - the name: Kafka's rules (`INVALID_TOPIC_EXCEPTION`); `__consumer_offsets`,
//!   `__transaction_state` and `__mirror_state` are internal (`INVALID_REQUEST`); a name that
//!   exists, or that differs from an existing one only by `.` against `_` (their metric names
//!   collide), is `TOPIC_ALREADY_EXISTS` or `INVALID_TOPIC_EXCEPTION`;
//! - a name the running mirror's selection takes (`kmirror mirror --topics`) is
//!   `POLICY_VIOLATION`: the mirror creates that topic itself, with the source's id, when the
//!   source has it;
//! - the partition count: `-1` is the default (1), anything else not positive or above
//!   [`MAX_PARTITIONS`] is `INVALID_PARTITIONS`; the replication factor: `-1` or the node's
//!   replica count (`--replicas`, 1 by default: the node and its in-process followers keep
//!   every partition), else `INVALID_REPLICATION_FACTOR`; manual assignments, with both of them
//!   `-1`, give partitions `0..n` each on exactly the node's replicas
//!   (`INVALID_REPLICA_ASSIGNMENT`);
//! - the configs: each a topic config Kafka knows with a valid value, and not `mirror.name`
//!   (which only a mirror's requests set), else `INVALID_CONFIG`.
//!
//! A topic that passes gets a fresh random topic id, and with `validate_only` nothing more. The
//! broker does not create it: it returns a [`TopicEdit::Create`] for the node's driver, which
//! makes the topic durable (its directories and logs, its config overrides, then
//! `node.properties`) before the client hears of it. The topic is in no mirror: clients write
//! to it at once. The answer carries the id, the partition count, the replication factor and
//! the config overrides, as Kafka's does from v5.

use std::collections::{BTreeMap, BTreeSet};

use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::create_topics_response::{
    CreatableTopicConfigs, CreatableTopicResult,
};
use kafka_protocol::messages::{CreateTopicsRequest, CreateTopicsResponse};
use kafka_protocol::protocol::StrBytes;
use kmirror_kernel::sync::topic_config;
use kmirror_kernel::types::{PartitionIndex, TopicId};
use uuid::Uuid;

use super::broker::ServedNode;
use super::configs::POLICY_VIOLATION;
use super::topic_admin::{
    check_replicas, repeated, Planned, TopicEdit, INVALID_PARTITIONS, INVALID_REPLICA_ASSIGNMENT,
    INVALID_REQUEST, MAX_PARTITIONS,
};
use crate::topic_partition::{check_topic, MIRROR_STATE_TOPIC};

/// `INVALID_TOPIC_EXCEPTION`: a name Kafka does not take.
pub const INVALID_TOPIC_EXCEPTION: i16 = 17;
/// `TOPIC_ALREADY_EXISTS`.
pub const TOPIC_ALREADY_EXISTS: i16 = 36;
/// `INVALID_REPLICATION_FACTOR`: another replica count than the node keeps.
pub const INVALID_REPLICATION_FACTOR: i16 = 38;
/// `INVALID_CONFIG`: a config key or value Kafka would refuse.
pub const INVALID_CONFIG: i16 = 40;
/// Kafka's `num.partitions` default, used for `-1`. A replication factor of `-1` is the node's
/// replica count (`replicas` in `node.properties`), the only one it keeps.
const DEFAULT_PARTITIONS: PartitionIndex = 1;
/// The config source of an override given at creation (`DYNAMIC_TOPIC_CONFIG`).
const DYNAMIC_TOPIC_CONFIG: i8 = 1;
/// Topics Kafka keeps for itself, and the node's own.
const INTERNAL: [&str; 3] = [
    "__consumer_offsets",
    "__transaction_state",
    MIRROR_STATE_TOPIC,
];

/// A refusal: Kafka's error code and message.
type Refusal = (i16, String);

/// Answers CreateTopics: the response, and the creations it waits for.
pub fn create_topics(
    node: &dyn ServedNode,
    request: &CreateTopicsRequest,
) -> Planned<CreateTopicsResponse> {
    let duplicates = repeated(request.topics.iter().map(|t| t.name.0.as_str()));
    let mut taken: BTreeSet<TopicId> = node.meta().topics.values().map(|t| t.topic_id).collect();
    let mut response = CreateTopicsResponse::default();
    let mut edits = Vec::new();
    for (index, t) in request.topics.iter().enumerate() {
        let mut result = CreatableTopicResult::default()
            .with_name(t.name.clone())
            .with_error_message(None)
            .with_num_partitions(-1)
            .with_replication_factor(-1);
        let planned = if duplicates.contains(t.name.0.as_str()) {
            Err((INVALID_REQUEST, "Duplicate topic name.".to_owned()))
        } else {
            plan(node, t)
        };
        match planned {
            Ok((partitions, configs)) => {
                let topic_id = fresh_topic_id(&taken);
                taken.insert(topic_id);
                result.topic_id = Uuid::from_bytes(topic_id.0);
                result.num_partitions = partitions;
                result.replication_factor =
                    i16::try_from(node.meta().replica_set().len()).unwrap_or(i16::MAX);
                result.configs = Some(described(&configs));
                if !request.validate_only {
                    edits.push((
                        index,
                        TopicEdit::Create {
                            name: t.name.0.to_string(),
                            topic_id,
                            partitions,
                            configs,
                        },
                    ));
                }
            }
            Err((code, message)) => {
                result.error_code = code;
                result.error_message = Some(StrBytes::from_string(message));
            }
        }
        response.topics.push(result);
    }
    (response, edits)
}

/// Checks one topic of a CreateTopics: its partition count and config overrides, or why it is
/// refused (see the [module documentation](self)).
fn plan(
    node: &dyn ServedNode,
    t: &CreatableTopic,
) -> Result<(PartitionIndex, BTreeMap<String, String>), Refusal> {
    let name = t.name.0.as_str();
    check_name(node, name)?;
    let partitions = partition_count(&node.meta().replica_set(), t)?;
    let configs = check_configs(t)?;
    Ok((partitions, configs))
}

/// The name's checks, in Kafka's order: internal, valid, taken, colliding; then the mirror's.
fn check_name(node: &dyn ServedNode, name: &str) -> Result<(), Refusal> {
    if INTERNAL.contains(&name) {
        return Err((
            INVALID_REQUEST,
            format!("Creation of internal topic {name} is prohibited."),
        ));
    }
    check_topic(name).map_err(|message| (INVALID_TOPIC_EXCEPTION, message))?;
    if node.meta().topics.contains_key(name) {
        return Err((
            TOPIC_ALREADY_EXISTS,
            format!("Topic '{name}' already exists."),
        ));
    }
    let unified = |n: &str| n.replace('.', "_");
    if let Some(other) = node
        .meta()
        .topics
        .keys()
        .find(|other| unified(other) == unified(name))
    {
        return Err((
            INVALID_TOPIC_EXCEPTION,
            format!("Topic '{name}' collides with existing topic: {other}"),
        ));
    }
    if let Some(mirror) = node.mirror_selecting(name) {
        return Err((
            POLICY_VIOLATION,
            format!(
                "{name} is in the selection of mirror {mirror}, which this node runs: the mirror \
                 creates it, with the source's topic id, when the source has it"
            ),
        ));
    }
    Ok(())
}

/// The partition count a topic asks, by count or by manual assignment.
fn partition_count(replicas: &[i32], t: &CreatableTopic) -> Result<PartitionIndex, Refusal> {
    if !t.assignments.is_empty() {
        if t.num_partitions != -1 || t.replication_factor != -1 {
            return Err((
                INVALID_REQUEST,
                "Both numPartitions or replicationFactor and replicasAssignments were set. Both \
                 cannot be used at the same time."
                    .to_owned(),
            ));
        }
        let mut indexes: Vec<i32> = t.assignments.iter().map(|a| a.partition_index).collect();
        indexes.sort_unstable();
        if indexes.iter().zip(0..).any(|(i, expected)| *i != expected) {
            return Err((
                INVALID_REPLICA_ASSIGNMENT,
                "Partitions should be a consecutive 0-based integer sequence".to_owned(),
            ));
        }
        for a in &t.assignments {
            let ids: Vec<i32> = a.broker_ids.iter().map(|b| b.0).collect();
            check_replicas(replicas, &ids).map_err(|m| (INVALID_REPLICA_ASSIGNMENT, m))?;
        }
        let count = PartitionIndex::try_from(t.assignments.len()).unwrap_or(PartitionIndex::MAX);
        return within_cap(count);
    }
    let count = match t.num_partitions {
        -1 => DEFAULT_PARTITIONS,
        n if n <= 0 => {
            return Err((
                INVALID_PARTITIONS,
                "Number of partitions was set to an invalid non-positive value.".to_owned(),
            ))
        }
        n => n,
    };
    let count_of_replicas = i16::try_from(replicas.len()).unwrap_or(i16::MAX);
    match t.replication_factor {
        -1 => {}
        n if n == count_of_replicas => {}
        n if n <= 0 => {
            return Err((
                INVALID_REPLICATION_FACTOR,
                "Replication factor must be larger than 0, or -1 to use the default value."
                    .to_owned(),
            ))
        }
        n if n > count_of_replicas => {
            return Err((
                INVALID_REPLICATION_FACTOR,
                format!(
                    "Unable to replicate the partition {n} time(s): The target replication \
                     factor of {n} cannot be reached because only {count_of_replicas} \
                     broker(s) are registered."
                ),
            ))
        }
        n => {
            return Err((
                INVALID_REPLICATION_FACTOR,
                format!(
                    "Unable to replicate the partition {n} time(s): this node keeps every \
                     partition on its {count_of_replicas} replicas (--replicas); ask \
                     {count_of_replicas} or -1."
                ),
            ))
        }
    }
    within_cap(count)
}

/// `count`, if this node holds that many partitions of one topic.
fn within_cap(count: PartitionIndex) -> Result<PartitionIndex, Refusal> {
    if count > MAX_PARTITIONS {
        return Err((
            INVALID_PARTITIONS,
            format!(
                "{count} partitions is more than this node holds per topic ({MAX_PARTITIONS})."
            ),
        ));
    }
    Ok(count)
}

/// The config overrides a topic asks, each a key Kafka knows with a valid value.
fn check_configs(t: &CreatableTopic) -> Result<BTreeMap<String, String>, Refusal> {
    let mut configs = BTreeMap::new();
    for c in &t.configs {
        let key = c.name.to_string();
        let invalid = |message: String| Err((INVALID_CONFIG, message));
        if key == "mirror.name" {
            return invalid(
                "mirror.name is set by a mirror's requests (kmirror mirror --topics), not at \
                 creation"
                    .to_owned(),
            );
        }
        let Some(value) = c.value.as_ref().map(|v| v.to_string()) else {
            return invalid(format!("Null value not supported for topic configs: {key}"));
        };
        if topic_config::config_type(&key).is_none() {
            return invalid(format!("Unknown topic config name: {key}"));
        }
        topic_config::validate(&key, &value).map_err(|e| (INVALID_CONFIG, e.to_string()))?;
        if configs.insert(key.clone(), value).is_some() {
            return invalid(format!("Duplicate config name: {key}"));
        }
    }
    Ok(configs)
}

/// The answer's `configs`: the overrides given, as DescribeConfigs shows them.
fn described(configs: &BTreeMap<String, String>) -> Vec<CreatableTopicConfigs> {
    configs
        .iter()
        .map(|(k, v)| {
            CreatableTopicConfigs::default()
                .with_name(StrBytes::from_string(k.clone()))
                .with_value(Some(StrBytes::from_string(v.clone())))
                .with_config_source(DYNAMIC_TOPIC_CONFIG)
        })
        .collect()
}

/// A random topic id no topic of the node has, neither nil nor one whose base64 form starts
/// with `-` (Kafka's `Uuid.randomUuid` rules: such an id would read as a command-line flag).
fn fresh_topic_id(taken: &BTreeSet<TopicId>) -> TopicId {
    loop {
        let id = TopicId(*Uuid::new_v4().as_bytes());
        if id.0 != [0; 16] && id.0[0] >> 2 != 62 && !taken.contains(&id) {
            return id;
        }
    }
}
