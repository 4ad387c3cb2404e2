//! Periodic metadata sync on real cluster directories: topic configs, consumer group offsets
//! and ACLs from a source to a destination, decided by the kernel
//! ([`kmirror_kernel::sync`]), executed here.
//!
//! **The kernel decides, the executor does.** A round ([`executor::run_round`]) has two steps,
//! exactly like the model's sync action:
//!
//! 1. **Read** ([`executor::read_round`]): the destination's `mirror.name` and persisted mirror
//!    state go through [`gate::open`](kmirror_kernel::sync::gate::open), which yields the
//!    round's fence (or refuses: the topic is not MIRRORING or PAUSED). Then the source's
//!    metadata ([`MetadataSource`]) and the destination's ([`MetadataSink`]) are read, and the
//!    kernel plans the three change lists.
//! 2. **Land** ([`executor::land`]): before each write (configs, offsets, ACLs), the fence goes
//!    through [`gate::admit`](kmirror_kernel::sync::gate::admit) against the destination's
//!    *current* `mirror.name` and `__mirror_state` record; a refused write is dropped and
//!    reported. The local sink holds the destination directory's lock from before the check to
//!    after the write, so a `kmirror stop` cannot slip in between: no sync write lands after a
//!    stop began.
//!
//! Invalid or hostile source metadata is rejected per item (a config line or value, a group
//! file or offset, an ACL binding) with a message naming it; the rest of the round proceeds.
//! Only what stops the whole round is an error ([`SyncError`]).
//!
//! The local implementations ([`driver::metadata_sync`](crate::driver::metadata_sync), beside
//! the cluster directories they read, so that this module does not depend on the driver) keep
//! metadata in a cluster directory's `metadata/` directory ([`local`] documents the format). A
//! Kafka wire source implements [`MetadataSource`] with `Metadata`, `ListOffsets`,
//! `DescribeConfigs`, `ListGroups`, `FindCoordinator`, `DescribeGroups`, `OffsetFetch` and
//! `DescribeAcls`; the destination stays a local cluster directory
//! ([`LocalMetadataSink`](crate::driver::metadata_sync::LocalMetadataSink)).

pub mod error;
pub mod executor;
pub mod local;
pub mod report;

use std::collections::{BTreeMap, BTreeSet};

use kmirror_kernel::desired::DesiredState;
use kmirror_kernel::records::MirrorPartitionStateValue;
use kmirror_kernel::sync::acl::{AclBinding, AclPlan, RawAclBinding};
use kmirror_kernel::sync::group_offsets::{OffsetCommit, TopicPartition};
use kmirror_kernel::sync::topic_config::ConfigChange;
use kmirror_kernel::types::{MirrorName, Offset, PartitionIndex, TopicId};

pub use error::SyncError;
pub use executor::{land, read_round, run_round, PendingSync, SyncPolicy};
pub use report::RoundReport;

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

/// The destination's metadata and its mirror state, where a sync round writes.
///
/// The gate's inputs are read from their authority ([`Self::desired_state`],
/// [`Self::stored_state`]), and an implementation must make "read the gate's inputs, then
/// write" atomic with respect to the partition's mirror-state writes (the local sink holds the
/// cluster directory's lock for its whole life).
pub trait MetadataSink {
    /// The destination, for messages.
    fn describe(&self) -> String;

    /// The topic name and id.
    fn topic(&self) -> (String, TopicId);

    /// The index of the topic's partition whose offsets the round syncs (a cluster directory
    /// hosts one).
    fn partition(&self) -> PartitionIndex;

    /// The topic's `mirror.name`, now.
    fn desired_state(&mut self) -> Result<DesiredState, SyncError>;

    /// The partition's persisted mirror state under mirror `mirror`, now.
    fn stored_state(
        &mut self,
        mirror: &MirrorName,
    ) -> Result<Option<MirrorPartitionStateValue>, SyncError>;

    /// The partition's log start offset and last stable offset.
    fn log_bounds(&mut self) -> Result<(Offset, Offset), SyncError>;

    /// The topic's config overrides.
    fn topic_config(&mut self) -> Result<BTreeMap<String, String>, SyncError>;

    /// Every consumer group.
    fn groups(&mut self) -> Result<BTreeMap<String, GroupRecord>, SyncError>;

    /// Every ACL binding, and the ones the mirror created.
    fn acls(&mut self) -> Result<(BTreeSet<AclBinding>, BTreeSet<AclBinding>), SyncError>;

    /// Applies topic config changes.
    fn apply_config(&mut self, changes: &[ConfigChange]) -> Result<(), SyncError>;

    /// Commits group offsets.
    fn commit_offsets(&mut self, commits: &[OffsetCommit]) -> Result<(), SyncError>;

    /// Creates and deletes ACL bindings, recording which ones the mirror created.
    fn apply_acls(&mut self, plan: &AclPlan) -> Result<(), SyncError>;
}
