//! The node's interface: its inputs, its effects, and the logs it reads.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::desired::DesiredState;
use crate::effect::Effect;
use crate::input::Input;
use crate::log::LogView;
use crate::types::{BrokerId, MirrorPartition, PartitionIndex, TopicId};

use super::{CoalescedFetchResponse, FetcherKey, NodeError, PartitionKey};

/// The local logs of the partitions this node leads, read only.
pub trait NodeLogs {
    /// The log type.
    type Log: LogView;
    /// The log of `key`, if the executor has it.
    fn log(&self, key: &PartitionKey) -> Option<&Self::Log>;
}

impl<L: LogView> NodeLogs for BTreeMap<PartitionKey, L> {
    type Log = L;
    fn log(&self, key: &PartitionKey) -> Option<&L> {
        self.get(key)
    }
}

impl<L: LogView + Clone> NodeLogs for im::OrdMap<PartitionKey, L> {
    type Log = L;
    fn log(&self, key: &PartitionKey) -> Option<&L> {
        self.get(key)
    }
}

/// An event for the node.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize)]
pub enum NodeInput {
    /// The destination topic's metadata: its `mirror.name` (parsed) and partition count. A
    /// changed desired state is fanned out to every partition of the topic this node leads.
    Topic {
        /// The topic.
        topic_id: TopicId,
        /// What its `mirror.name` asks.
        desired: DesiredState,
        /// Its partition count.
        partitions: PartitionIndex,
    },
    /// The source topic's metadata: the leader of each partition (index = partition; `None`:
    /// no leader known). Its length is the source's partition count.
    SourceTopic {
        /// The topic (the same id on both clusters).
        topic_id: TopicId,
        /// The source leader of each partition.
        leaders: Vec<Option<BrokerId>>,
    },
    /// The source cluster no longer has the topic (its metadata has no topic with this id):
    /// every partition of it this node leads, now or later, hears
    /// [`Input::SourceTopicDeleted`]. Sent once; repeats change nothing.
    SourceTopicDeleted {
        /// The topic.
        topic_id: TopicId,
    },
    /// An input for one partition: leadership, ISR, replica reports, the high watermark, or the
    /// completion of one of its requests. Not `DesiredStateChanged` (see [`NodeInput::Topic`]).
    Partition {
        /// The partition.
        key: PartitionKey,
        /// The input.
        input: Input,
    },
    /// A `__mirror_state` coordinator's answer (`StateRead`, `StateWritten`, `WriteFenced`,
    /// `LastMirroredEpochWritten`, `RequestFailed`) about `key`, from `__mirror_state`
    /// partition `coordinator_partition`.
    CoordinatorAnswer {
        /// The `__mirror_state` partition that answered.
        coordinator_partition: u32,
        /// The key answered about.
        key: MirrorPartition,
        /// The answer.
        input: Input,
    },
    /// The leadership of `__mirror_state` partition `coordinator_partition` moved: requests in
    /// flight to it are lost.
    CoordinatorMoved {
        /// The `__mirror_state` partition.
        coordinator_partition: u32,
    },
    /// The source's answer to a [`CoalescedFetch`](super::CoalescedFetch).
    FetchResponse(CoalescedFetchResponse),
    /// A [`CoalescedFetch`](super::CoalescedFetch) failed as a whole (connection lost,
    /// timeout): its partitions are fetched again after the backoff and are not told.
    FetchFailed {
        /// The fetcher whose request failed.
        fetcher: FetcherKey,
    },
}

/// Something the executor must do for the node.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize)]
pub enum NodeEffect {
    /// An effect of one partition's [`PartitionMirror`](crate::partition::PartitionMirror)
    /// (never [`Effect::Fetch`]: fetches go out through
    /// [`NodeMirror::poll_fetches`](super::NodeMirror::poll_fetches)).
    Partition {
        /// The partition.
        key: PartitionKey,
        /// Its effect, unchanged.
        effect: Effect,
    },
    /// Kafka Admin `createPartitions`: grow the destination topic to `total` partitions, the
    /// source's count.
    CreatePartitions {
        /// The topic.
        topic_id: TopicId,
        /// The partition count asked for.
        total: PartitionIndex,
    },
}

/// What one input produced.
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct NodeOutput {
    /// The effects, in order (fanned-out inputs: partition order).
    pub effects: Vec<NodeEffect>,
    /// What changed nothing, one entry per refused input or partition.
    pub errors: Vec<NodeError>,
}

/// The error message fed with [`Input::RequestFailed`] to a partition whose coordinator request
/// was in flight when `__mirror_state` partition `coordinator_partition` moved (Kafka's
/// `NOT_COORDINATOR`).
pub fn coordinator_moved_error(coordinator_partition: u32) -> String {
    format!("NOT_COORDINATOR: __mirror_state partition {coordinator_partition} moved")
}
