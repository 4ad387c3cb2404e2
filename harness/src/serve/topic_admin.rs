//! CreatePartitions and DeleteTopics: checked here, carried out by the node's driver (as is
//! CreateTopics, checked in [`super::create_topics`]).
//!
//! On a topic that is mirrored and not STOPPED (its `mirror.name` asks to mirror or pause, or a
//! partition's produce gate is closed) each is refused with `READ_ONLY_TOPIC`, as the KIP's
//! prototype refuses them: a mirror's partitions and existence are the source's. A topic in no
//! mirror, or failed over (`<mirror>.removed`) with every partition STOPPED, is a regular topic:
//!
//! - **CreatePartitions** grows it to the count asked, as Kafka's controller does: a count not
//!   above the current one is `INVALID_PARTITIONS` with Kafka's message; assignments, if given,
//!   must be one per new partition, each naming this node (the only broker) once, else
//!   `INVALID_REPLICA_ASSIGNMENT`; `validate_only` answers without growing. The new partitions
//!   are never mirrored and are writable once the answer comes: a failed-over topic stays
//!   failed over, and the kernel writes its new partitions, which never mirrored, STOPPED.
//! - **DeleteTopics** (by name, or by id from v6) removes the topic: its logs, its partition
//!   directories, its config overrides and its groups' committed offsets.
//!
//! An unknown topic is `UNKNOWN_TOPIC_OR_PARTITION` (`UNKNOWN_TOPIC_ID` when named by id); a
//! topic named twice in one request is `INVALID_REQUEST`, as from Kafka.
//!
//! The broker does not change the node itself: it returns a [`TopicWork`], the edits to make
//! and the answer that waits for them. The node's driver makes each edit durable, then sends
//! the answer ([`TopicWork::answer`]): a client hears of success only once a crash keeps it.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::mpsc::SyncSender;

use kafka_protocol::messages::create_partitions_request::{
    CreatePartitionsAssignment, CreatePartitionsTopic,
};
use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::{
    CreatePartitionsRequest, CreatePartitionsResponse, DeleteTopicsRequest, DeleteTopicsResponse,
    ResponseKind, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use kmirror_kernel::desired::DesiredState;
use kmirror_kernel::node::PartitionKey;
use kmirror_kernel::types::{PartitionIndex, TopicId};
use uuid::Uuid;

use super::broker::ServedNode;
use super::metadata::{UNKNOWN_TOPIC_ID, UNKNOWN_TOPIC_OR_PARTITION};
use super::offsets::KAFKA_STORAGE_ERROR;
use super::produce::READ_ONLY_TOPIC;
use super::Reply;

/// `INVALID_PARTITIONS`: a partition count that is not an increase.
pub const INVALID_PARTITIONS: i16 = 37;
/// `INVALID_REPLICA_ASSIGNMENT`: an assignment this node cannot take.
pub const INVALID_REPLICA_ASSIGNMENT: i16 = 39;
/// `INVALID_REQUEST`: a topic named twice, or named by both name and id.
pub const INVALID_REQUEST: i16 = 42;
/// Most partitions a topic may grow to on this node (each is a directory and open files).
pub const MAX_PARTITIONS: PartitionIndex = 10_000;

/// One change of a topic's shape a client asked for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TopicEdit {
    /// Grow topic `name` to `total` partitions (out of its mirror, if it was failed over).
    Grow {
        /// The topic.
        name: String,
        /// Its id.
        topic_id: TopicId,
        /// The partition count asked.
        total: PartitionIndex,
    },
    /// Create topic `name`, in no mirror, with `partitions` partitions and `configs` as its
    /// config overrides.
    Create {
        /// The topic.
        name: String,
        /// Its id (fresh).
        topic_id: TopicId,
        /// Its partition count.
        partitions: PartitionIndex,
        /// Its config overrides.
        configs: BTreeMap<String, String>,
    },
    /// Delete topic `name`.
    Delete {
        /// The topic.
        name: String,
        /// Its id.
        topic_id: TopicId,
    },
}

/// An answer and the edits it waits for, each with the index of its result in the answer.
pub type Planned<R> = (R, Vec<(usize, TopicEdit)>);

/// A CreateTopics, CreatePartitions or DeleteTopics whose answer waits until its edits are
/// durable. See the [module documentation](self).
#[derive(Debug)]
pub struct TopicWork {
    edits: Vec<(usize, TopicEdit)>,
    answer: ResponseKind,
    reply: SyncSender<Reply>,
}

impl TopicWork {
    /// The work of `planned`, answered on `reply`; `None` when it has no edits (the answer is
    /// sent at once).
    pub fn of(
        edits: Vec<(usize, TopicEdit)>,
        answer: ResponseKind,
        reply: SyncSender<Reply>,
    ) -> Option<TopicWork> {
        if edits.is_empty() {
            let _ = reply.send(answer.into());
            return None;
        }
        Some(TopicWork {
            edits,
            answer,
            reply,
        })
    }

    /// The edits to make, in request order.
    pub fn edits(&self) -> impl Iterator<Item = &TopicEdit> {
        self.edits.iter().map(|(_, e)| e)
    }

    /// Sends the answer: every edit was made.
    pub fn succeed(self) {
        let _ = self.reply.send(self.answer.into());
    }

    /// Sends the answer: the first `done` edits were made; the rest were not, because a disk
    /// write failed (`failure` says why): they are answered `KAFKA_STORAGE_ERROR`.
    pub fn answer(self, done: usize, failure: &str) {
        let TopicWork {
            edits,
            mut answer,
            reply,
        } = self;
        let message = || Some(StrBytes::from_string(failure.to_owned()));
        for (index, _) in edits.iter().skip(done) {
            match &mut answer {
                ResponseKind::CreateTopics(r) => {
                    if let Some(result) = r.topics.get_mut(*index) {
                        result.error_code = KAFKA_STORAGE_ERROR;
                        result.error_message = message();
                    }
                }
                ResponseKind::CreatePartitions(r) => {
                    if let Some(result) = r.results.get_mut(*index) {
                        result.error_code = KAFKA_STORAGE_ERROR;
                        result.error_message = message();
                    }
                }
                ResponseKind::DeleteTopics(r) => {
                    if let Some(result) = r.responses.get_mut(*index) {
                        result.error_code = KAFKA_STORAGE_ERROR;
                        result.error_message = message();
                    }
                }
                _ => {}
            }
        }
        let _ = reply.send(answer.into());
    }
}

/// `READ_ONLY_TOPIC` and its message when topic `name` is mirrored and not STOPPED; `None` for
/// a regular topic (in no mirror, or failed over with every partition's gate open).
fn refusal(node: &dyn ServedNode, name: &str, verb: &str) -> Option<(i16, String)> {
    let topic = node.meta().topics.get(name)?;
    let regular = match topic.desired(name) {
        Ok(DesiredState::NotMirrored) => true,
        Ok(DesiredState::Stop(_)) => {
            (0..topic.partitions).all(|p| node.writable(&PartitionKey::new(topic.topic_id, p)))
        }
        _ => false,
    };
    (!regular).then(|| {
        (
            READ_ONLY_TOPIC,
            format!(
                "READ_ONLY_TOPIC: {name} is mirrored and not STOPPED: it cannot be {verb}; \
                 `kmirror stop --topics {name}` fails it over"
            ),
        )
    })
}

/// Answers CreatePartitions: the response, and the growths it waits for.
pub fn create_partitions(
    node: &dyn ServedNode,
    request: &CreatePartitionsRequest,
) -> Planned<CreatePartitionsResponse> {
    let mut response = CreatePartitionsResponse::default();
    let mut edits = Vec::new();
    let duplicates = repeated(request.topics.iter().map(|t| t.name.0.as_str()));
    for (index, t) in request.topics.iter().enumerate() {
        let name = t.name.0.as_str();
        let (code, message) = if duplicates.contains(name) {
            (INVALID_REQUEST, Some("Duplicate topic name.".to_owned()))
        } else {
            match growth(node, t) {
                Ok(edit) => {
                    if !request.validate_only {
                        edits.push((index, edit));
                    }
                    (0, None)
                }
                Err((code, message)) => (code, message),
            }
        };
        response.results.push(
            CreatePartitionsTopicResult::default()
                .with_name(t.name.clone())
                .with_error_code(code)
                .with_error_message(message.map(StrBytes::from_string)),
        );
    }
    (response, edits)
}

/// The names `names` holds more than once (a request naming a topic twice is refused for
/// each, as Kafka refuses it).
pub(super) fn repeated<'a>(names: impl Iterator<Item = &'a str>) -> BTreeSet<&'a str> {
    let mut seen = BTreeSet::new();
    names.filter(|n| !seen.insert(*n)).collect()
}

/// The growth one topic of a CreatePartitions asks, or its error code and message.
fn growth(
    node: &dyn ServedNode,
    t: &CreatePartitionsTopic,
) -> Result<TopicEdit, (i16, Option<String>)> {
    let name = t.name.0.as_str();
    let topic = node
        .meta()
        .topics
        .get(name)
        .ok_or((UNKNOWN_TOPIC_OR_PARTITION, None))?;
    if let Some((code, message)) = refusal(node, name, "given partitions") {
        return Err((code, Some(message)));
    }
    let current = topic.partitions;
    let invalid = |message: String| Err((INVALID_PARTITIONS, Some(message)));
    if t.count < current {
        return invalid(format!(
            "The topic {name} currently has {current} partition(s); {} would not be an \
             increase.",
            t.count
        ));
    }
    if t.count == current {
        return invalid(format!("Topic already has {current} partition(s)."));
    }
    if t.count > MAX_PARTITIONS {
        return invalid(format!(
            "{} partitions is more than this node holds per topic ({MAX_PARTITIONS}).",
            t.count
        ));
    }
    if let Some(assignments) = &t.assignments {
        check_assignments(&node.meta().replica_set(), t.count - current, assignments)
            .map_err(|message| (INVALID_REPLICA_ASSIGNMENT, Some(message)))?;
    }
    Ok(TopicEdit::Grow {
        name: name.to_owned(),
        topic_id: topic.topic_id,
        total: t.count,
    })
}

/// Checks manual assignments of `added` new partitions on a node whose partitions have the
/// replicas `replicas`, with the messages of Kafka's controller.
fn check_assignments(
    replicas: &[i32],
    added: PartitionIndex,
    assignments: &[CreatePartitionsAssignment],
) -> Result<(), String> {
    if usize::try_from(added).ok() != Some(assignments.len()) {
        return Err(format!(
            "Attempted to add {added} additional partition(s), but only {} assignment(s) were \
             specified.",
            assignments.len()
        ));
    }
    for a in assignments {
        let ids: Vec<i32> = a.broker_ids.iter().map(|b| b.0).collect();
        check_replicas(replicas, &ids)?;
    }
    Ok(())
}

/// Checks one partition's manual replica list `ids` on a node whose partitions have the
/// replicas `replicas`: exactly those, each once, with the messages of Kafka's controller
/// where Kafka has one.
pub(super) fn check_replicas(replicas: &[i32], ids: &[i32]) -> Result<(), String> {
    if ids.is_empty() {
        return Err("The manual partition assignment includes an empty replica list.".into());
    }
    if let Some(other) = ids.iter().find(|b| !replicas.contains(b)) {
        return Err(format!(
            "The manual partition assignment includes broker {other}, but no such broker is \
             registered."
        ));
    }
    let mut seen = Vec::with_capacity(ids.len());
    for id in ids {
        if seen.contains(id) {
            return Err(format!(
                "The manual partition assignment includes the broker {id} more than once."
            ));
        }
        seen.push(*id);
    }
    if ids.len() < replicas.len() {
        return Err(format!(
            "The manual partition assignment lists {} of this node's {} replicas {replicas:?}: \
             it keeps every partition on all of them (--replicas).",
            ids.len(),
            replicas.len()
        ));
    }
    Ok(())
}

/// Answers DeleteTopics (topics by name, or from v6 by name or id): the response, and the
/// deletions it waits for.
pub fn delete_topics(
    node: &dyn ServedNode,
    request: &DeleteTopicsRequest,
) -> Planned<DeleteTopicsResponse> {
    // Each entry as (name, id): v0-5 name topics in `topic_names`, v6 in `topics`.
    let entries: Vec<(Option<TopicName>, Option<TopicId>)> = request
        .topic_names
        .iter()
        .map(|n| (Some(n.clone()), None))
        .chain(request.topics.iter().map(|t| {
            let id = (!t.topic_id.is_nil()).then(|| TopicId(*t.topic_id.as_bytes()));
            (t.name.clone(), id)
        }))
        .collect();
    let mut names = BTreeSet::new();
    let mut ids = BTreeSet::new();
    let mut repeated_names = BTreeSet::new();
    let mut repeated_ids = BTreeSet::new();
    for (name, id) in &entries {
        if let Some(n) = name {
            if !names.insert(n.0.as_str()) {
                repeated_names.insert(n.0.as_str());
            }
        }
        if let Some(id) = id {
            if !ids.insert(*id) {
                repeated_ids.insert(*id);
            }
        }
    }
    let mut response = DeleteTopicsResponse::default();
    let mut edits = Vec::new();
    for (index, (name, id)) in entries.iter().enumerate() {
        let known = match (name, id) {
            (Some(n), _) => node.meta().topics.get_key_value(n.0.as_str()),
            (None, Some(id)) => node.meta().topics.iter().find(|(_, t)| t.topic_id == *id),
            (None, None) => None,
        };
        let outcome = match (name, id, known) {
            (Some(_), Some(_), _) => Err((
                INVALID_REQUEST,
                Some("You may not specify both topic name and topic id.".to_owned()),
            )),
            (None, None, _) => Err((
                INVALID_REQUEST,
                Some("Neither topic name nor id were specified.".to_owned()),
            )),
            (Some(n), None, _) if repeated_names.contains(n.0.as_str()) => {
                Err((INVALID_REQUEST, Some("Duplicate topic name.".to_owned())))
            }
            (None, Some(id), _) if repeated_ids.contains(id) => {
                Err((INVALID_REQUEST, Some("Duplicate topic id.".to_owned())))
            }
            (Some(_), None, None) => Err((UNKNOWN_TOPIC_OR_PARTITION, None)),
            (None, Some(_), None) => Err((UNKNOWN_TOPIC_ID, None)),
            (_, _, Some((topic, _))) => match refusal(node, topic, "deleted") {
                Some((code, message)) => Err((code, Some(message))),
                None => Ok(()),
            },
        };
        let mut result = DeletableTopicResult::default().with_name(name.clone());
        if let Some(id) = id {
            result.topic_id = Uuid::from_bytes(id.0);
        }
        if let Some((topic, t)) = known {
            // Kafka answers both the name and the id of a topic it knows.
            result.name = Some(TopicName(StrBytes::from_string(topic.clone())));
            result.topic_id = Uuid::from_bytes(t.topic_id.0);
        }
        match outcome {
            Ok(()) => {
                if let Some((topic, t)) = known {
                    edits.push((
                        index,
                        TopicEdit::Delete {
                            name: topic.clone(),
                            topic_id: t.topic_id,
                        },
                    ));
                }
            }
            Err((code, message)) => {
                result.error_code = code;
                result.error_message = message.map(StrBytes::from_string);
            }
        }
        response.responses.push(result);
    }
    (response, edits)
}
