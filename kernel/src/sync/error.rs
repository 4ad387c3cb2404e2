//! Why one item of source metadata is not synced. Each rejection concerns one item (a config
//! key, a group's offset for a partition, an ACL binding); the rest of the sync proceeds.

use crate::types::{Offset, PartitionIndex};

/// One item of source metadata the sync refuses, with what to do about it.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Debug, thiserror::Error)]
pub enum SyncItemError {
    /// A topic config value that does not parse as the key's type.
    #[error(
        "topic config {key}={value:?} on the source is not {expected}; the destination keeps \
         its value (fix the source's config)"
    )]
    InvalidConfigValue {
        /// The config key.
        key: String,
        /// The source's value.
        value: String,
        /// What the key's values look like.
        expected: &'static str,
    },
    /// A topic config key Apache Kafka does not know (a broker would refuse it).
    #[error(
        "topic config {key} on the source is not a topic config Apache Kafka knows; it is not \
         synced (exclude it from the sync to silence this)"
    )]
    UnknownConfig {
        /// The config key.
        key: String,
    },
    /// A committed offset below zero (Kafka's -1 means "no offset" and is never committed).
    #[error(
        "group {group:?} has committed offset {offset} for {topic}-{partition} on the source, \
         which is negative; the destination's offset is left as it is"
    )]
    NegativeOffset {
        /// The group.
        group: String,
        /// The topic.
        topic: String,
        /// The partition.
        partition: PartitionIndex,
        /// The offset.
        offset: Offset,
    },
    /// A committed offset beyond the source partition's log end offset: no consumer could have
    /// read that far, so the source metadata is corrupt or forged.
    #[error(
        "group {group:?} has committed offset {offset} for {topic}-{partition} on the source, \
         beyond the source's log end offset {source_log_end_offset}; not synced (reset the \
         group's offset on the source)"
    )]
    OffsetBeyondSourceEnd {
        /// The group.
        group: String,
        /// The topic.
        topic: String,
        /// The partition.
        partition: PartitionIndex,
        /// The offset.
        offset: Offset,
        /// The source partition's log end offset.
        source_log_end_offset: Offset,
    },
    /// A group id Kafka refuses (empty).
    #[error("a source group has an empty group id; not synced")]
    EmptyGroupId,
    /// An ACL binding selected by the mirror's filters whose principal is outside the principal
    /// pattern the mirror may grant to.
    #[error(
        "ACL binding {binding} on the source grants to {principal}, outside the mirror's \
         principal pattern {pattern:?}; not synced (widen the pattern if this is intended)"
    )]
    AclPrincipalOutsidePattern {
        /// The binding, formatted.
        binding: String,
        /// The principal.
        principal: String,
        /// The mirror's principal pattern.
        pattern: String,
    },
    /// An ACL binding whose fields do not parse.
    #[error("ACL binding {binding} on the source is invalid: {reason}; not synced")]
    InvalidAcl {
        /// The binding as read.
        binding: String,
        /// What is wrong.
        reason: String,
    },
}
