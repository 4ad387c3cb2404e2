//! What a node destination's metadata sync reads and where it keeps it: the source's metadata
//! ([`MetadataSource`], implemented over Kafka's wire by
//! [`KafkaMetadataSource`](crate::wire::KafkaMetadataSource) and in tests by a directory),
//! the destination's `metadata/` directory ([`local`] documents the format), the kinds of
//! metadata and the per-item rejections ([`report`]), and the errors that stop a round
//! ([`SyncError`]). The kernel decides ([`kmirror_kernel::sync`]); the node's
//! [`NodeSync`](crate::node::NodeSync) runs the rounds.
//!
//! Invalid or hostile source metadata is rejected per item (a config line or value, a group
//! or offset, an ACL binding) with a message naming it; the rest of the round proceeds. Only
//! what stops the whole round is an error.

pub mod error;
pub mod local;
pub mod report;

use std::collections::BTreeMap;

use kmirror_kernel::sync::acl::RawAclBinding;
use kmirror_kernel::sync::group_offsets::TopicPartition;
use kmirror_kernel::types::{Offset, TopicId};

pub use error::SyncError;

/// What was read, with the items that could not be (each a message naming the item).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Read<T> {
    /// What was read.
    pub value: T,
    /// Items rejected while reading.
    pub rejected: Vec<String>,
}

/// A consumer group: its active members and committed offsets.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GroupRecord {
    /// Ids of the active members (empty: nobody consumes).
    pub members: Vec<String>,
    /// Committed offsets.
    pub offsets: BTreeMap<TopicPartition, Offset>,
}

/// The source cluster's metadata, as a sync round reads it. Every method is a read.
///
/// A Kafka wire implementation maps each method to the RPCs named on it; items that fail
/// per item (a group whose `OffsetFetch` returns an error, an ACL that does not parse) go to
/// [`Read::rejected`], while an unreachable broker is a [`SyncError::SourceUnavailable`].
pub trait MetadataSource {
    /// The source, for messages (a directory or a bootstrap address).
    fn describe(&self) -> String;

    /// The topic name and id of the mirrored topic on the source (`Metadata`).
    fn topic(&mut self) -> Result<(String, TopicId), SyncError>;

    /// The log end offset of `partition` on the source (`ListOffsets`, timestamp -1).
    fn log_end_offset(&mut self, partition: &TopicPartition) -> Result<Offset, SyncError>;

    /// The topic's config overrides (`DescribeConfigs` of the topic resource, the entries whose
    /// source is `DYNAMIC_TOPIC_CONFIG`).
    fn topic_config(&mut self, topic: &str) -> Result<Read<BTreeMap<String, String>>, SyncError>;

    /// Every consumer group with its members and committed offsets (`ListGroups` on every
    /// broker, then per group `FindCoordinator` (key type GROUP), `DescribeGroups` (classic) or
    /// `ConsumerGroupDescribe` (KIP-848) for the members, and `OffsetFetch` for the offsets; a
    /// group whose coordinator answers an error goes to [`Read::rejected`]).
    fn groups(&mut self) -> Result<Read<BTreeMap<String, GroupRecord>>, SyncError>;

    /// Every ACL binding (`DescribeAcls` with a match-any filter).
    fn acls(&mut self) -> Result<Read<Vec<RawAclBinding>>, SyncError>;

    /// Lets go of the source (locks, connections) until the next call.
    fn release(&mut self);
}
