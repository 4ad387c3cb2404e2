//! Each partition's own error in a coalesced fetch or ListOffsets ([`PartitionFetchError`]),
//! and how a broker's answer or a whole request's failure becomes one.

use kmirror_kernel::types::{PartitionIndex, TopicId};

use super::super::authorization::{self, AclResource};
use super::super::client::ListOffsetAnswer;

use super::super::{codes, error_name, WireError};
use kmirror_kernel::types::Offset;

/// Why one partition of a coalesced fetch got no answer. See [`is_retryable`](Self::is_retryable).
#[derive(Debug, Clone, thiserror::Error)]
pub enum PartitionFetchError {
    /// The broker is no longer (or not yet) the partition's leader, or its epoch differs:
    /// `NOT_LEADER_OR_FOLLOWER`, `FENCED_LEADER_EPOCH`, `UNKNOWN_LEADER_EPOCH`,
    /// `LEADER_NOT_AVAILABLE`, `UNKNOWN_TOPIC_OR_PARTITION`... The metadata is refreshed
    /// before the next round.
    #[error(
        "{api} of topic {topic} partition {partition} at Kafka broker {broker} ({address}) \
         failed: {name} (error code {code}); the leader is looked up again"
    )]
    Leadership {
        /// The API (`Fetch`, `ListOffsets`).
        api: &'static str,
        /// The topic.
        topic: String,
        /// The partition.
        partition: PartitionIndex,
        /// The broker asked.
        broker: i32,
        /// Its address.
        address: String,
        /// Kafka's error code.
        code: i16,
        /// Kafka's name of it.
        name: String,
    },
    /// The metadata names no leader (or an unknown broker) for the partition right now.
    #[error(
        "topic {topic} partition {partition} has no leader in the source's metadata (from Kafka \
         broker {address}); the leader is looked up again"
    )]
    NoLeader {
        /// The topic.
        topic: String,
        /// The partition.
        partition: PartitionIndex,
        /// The broker whose Metadata said so.
        address: String,
    },
    /// The partition's leader cannot be reached (connect refused, the connection broke or
    /// timed out): only its partitions fail.
    #[error("topic {topic} partition {partition}: Kafka broker {broker} is unreachable: {source}")]
    Unreachable {
        /// The topic.
        topic: String,
        /// The partition.
        partition: PartitionIndex,
        /// The leader's broker id.
        broker: i32,
        /// The connection error (naming the address and the API).
        source: Box<WireError>,
    },
    /// The source does not host this topic id (deleted, or deleted and re-created under a new
    /// id) or the topic has no such partition: `UNKNOWN_TOPIC_ID`.
    #[error(
        "the source cluster (Kafka broker {address}) hosts {hosted}, not topic id {asked} \
         partition {partition} (UNKNOWN_TOPIC_ID)"
    )]
    UnknownTopicId {
        /// The broker that said so (or whose Metadata lacks the topic id).
        address: String,
        /// What it hosts instead (`topic orders with id ...`, or `no selected topic with that
        /// id`).
        hosted: String,
        /// The topic id asked for, in hex.
        asked: String,
        /// The partition asked for.
        partition: PartitionIndex,
    },
    /// No metadata could be had from any broker.
    #[error("topic id {topic_id} partition {partition}: no source metadata: {source}")]
    NoMetadata {
        /// The topic id, in hex.
        topic_id: String,
        /// The partition.
        partition: PartitionIndex,
        /// Why (the last broker's error).
        source: Box<WireError>,
    },
    /// The same partition was asked twice in one fetch (the second is not sent).
    #[error("topic id {topic_id} partition {partition} is asked twice in one fetch")]
    Duplicate {
        /// The topic id, in hex.
        topic_id: String,
        /// The partition.
        partition: PartitionIndex,
    },
    /// Any other failure: another Kafka error code, a malformed answer or record batch.
    #[error("topic {topic} partition {partition}: {source}")]
    Failed {
        /// The topic.
        topic: String,
        /// The partition.
        partition: PartitionIndex,
        /// The error, naming the broker and the API.
        source: Box<WireError>,
    },
}

impl PartitionFetchError {
    /// Whether asking again (after the refresh this error scheduled) may succeed without
    /// anything else changing: leadership errors, no leader, an unreachable broker, no metadata.
    pub fn is_retryable(&self) -> bool {
        match self {
            PartitionFetchError::Leadership { .. }
            | PartitionFetchError::NoLeader { .. }
            | PartitionFetchError::Unreachable { .. }
            | PartitionFetchError::NoMetadata { .. } => true,
            PartitionFetchError::Failed { source, .. } => source.is_connection(),
            PartitionFetchError::UnknownTopicId { .. } | PartitionFetchError::Duplicate { .. } => {
                false
            }
        }
    }

    /// The wire error underneath, if there is one.
    pub fn wire(&self) -> Option<&WireError> {
        match self {
            PartitionFetchError::Unreachable { source, .. }
            | PartitionFetchError::NoMetadata { source, .. }
            | PartitionFetchError::Failed { source, .. } => Some(source.as_ref()),
            _ => None,
        }
    }
}

/// A partition at a broker, to name in its errors.
pub(super) struct PartitionAt<'a> {
    pub(super) topic: &'a str,
    pub(super) topic_id: TopicId,
    pub(super) partition: PartitionIndex,
    pub(super) broker: i32,
    pub(super) address: &'a str,
}

impl PartitionAt<'_> {
    /// The partition's error for a whole request's failure.
    pub(super) fn request_failed(&self, e: WireError) -> PartitionFetchError {
        if e.is_connection() {
            PartitionFetchError::Unreachable {
                topic: self.topic.to_owned(),
                partition: self.partition,
                broker: self.broker,
                source: Box::new(e),
            }
        } else {
            PartitionFetchError::Failed {
                topic: self.topic.to_owned(),
                partition: self.partition,
                source: Box::new(e),
            }
        }
    }

    /// The partition's error for its Kafka error code (an authorization error names the ACL
    /// `principal` lacks).
    pub(super) fn error(
        &self,
        api: &'static str,
        code: i16,
        principal: Option<String>,
    ) -> PartitionFetchError {
        if code == codes::UNKNOWN_TOPIC_ID {
            return PartitionFetchError::UnknownTopicId {
                address: self.address.to_owned(),
                hosted: format!(
                    "no topic with that id (it hosts topic {} under another id, or none)",
                    self.topic
                ),
                asked: self.topic_id.to_string(),
                partition: self.partition,
            };
        }
        if codes::is_leadership(code) {
            return PartitionFetchError::Leadership {
                api,
                topic: self.topic.to_owned(),
                partition: self.partition,
                broker: self.broker,
                address: self.address.to_owned(),
                code,
                name: error_name(code),
            };
        }
        let resource = AclResource::Topic(self.topic.to_owned());
        let source = match authorization::needed(api, code, resource, principal) {
            Some(acl) => WireError::Denied {
                address: self.address.to_owned(),
                api,
                code,
                name: error_name(code),
                acl: Box::new(acl),
            },
            None => WireError::Broker {
                address: self.address.to_owned(),
                api,
                what: format!("topic {} partition {}", self.topic, self.partition),
                code,
                name: error_name(code),
            },
        };
        PartitionFetchError::Failed {
            topic: self.topic.to_owned(),
            partition: self.partition,
            source: Box::new(source),
        }
    }
}

/// A partition's answer in a ListOffsets answer.
pub(super) fn list_offset_answer(
    at: &PartitionAt<'_>,
    answer: Option<&ListOffsetAnswer>,
) -> Result<Offset, PartitionFetchError> {
    match answer {
        Some(Ok((offset, _))) => Ok(*offset),
        Some(Err(e)) => Err(match e.code() {
            Some(code) if !matches!(e, WireError::Denied { .. }) => {
                at.error("ListOffsets", code, None)
            }
            Some(_) | None => PartitionFetchError::Failed {
                topic: at.topic.to_owned(),
                partition: at.partition,
                source: Box::new(e.clone()),
            },
        }),
        None => Err(PartitionFetchError::Failed {
            topic: at.topic.to_owned(),
            partition: at.partition,
            source: Box::new(WireError::Malformed {
                address: at.address.to_owned(),
                api: "ListOffsets",
                version: -1,
                reason: "an answer is missing".into(),
            }),
        }),
    }
}
