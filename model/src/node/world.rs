//! The node model's world: one destination node leading every partition of the mirrored
//! topics (or down, between a crash and its restart), the source leader of every source
//! partition, the destination's `__mirror_state` coordinator and controller catalogue, and the
//! messages in flight.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use kmirror_kernel::batch::BatchHeader;
use kmirror_kernel::controller::{TopicCatalogue, TopicInfo};
use kmirror_kernel::coordinator::Coordinator;
use kmirror_kernel::desired::DesiredState;
use kmirror_kernel::effect::RequestId;
use kmirror_kernel::mem_log::MemLog;
use kmirror_kernel::node::{CoalescedFetch, FetchSlot, NodeInput, NodeMirror, PartitionKey};
use kmirror_kernel::partition::PartitionMirror;
use kmirror_kernel::records::{LastMirroredEpochsValue, MirrorPartitionStateValue};
use kmirror_kernel::state::MirrorState;
use kmirror_kernel::types::{
    BrokerId, LeaderEpoch, MirrorPartition, PartitionIndex, StateEpoch, TimestampMs, TopicId,
};
use serde::{Deserialize, Serialize};

use super::config::{NodeModelConfig, NODE_TOPICS};
use crate::shared::Shared;
use crate::world::ClusterId;

/// The destination broker that runs the node manager and leads every mirrored partition.
pub const NODE_BROKER: BrokerId = 1;
/// The source broker leading every source partition (one fetcher serves them all).
pub const SOURCE_BROKER: BrokerId = 101;
/// The destination's leader epoch of every partition at the start.
pub const DEST_EPOCH: LeaderEpoch = 1;
/// The source's leader epoch (one ahead: mirrored batches carry an epoch the destination has
/// not reached, as in the single-partition model).
pub const SOURCE_EPOCH: LeaderEpoch = 2;
/// The `__mirror_state` partition count: one coordinator holds every key.
pub const MIRROR_STATE_PARTITIONS: u32 = 1;
/// Most batches one partition's part of a fetch returns.
pub const MAX_FETCH_BATCHES: usize = 1;

/// A request to the destination's `__mirror_state` coordinator.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize)]
pub enum CoordinatorRequest {
    /// `ReadMirrorStates`.
    Read,
    /// `WriteMirrorStates`.
    Write {
        /// The record.
        value: MirrorPartitionStateValue,
        /// The state epoch the writer read.
        expected_state_epoch: Option<StateEpoch>,
    },
    /// The LME record.
    WriteLastMirroredEpoch {
        /// The record.
        value: LastMirroredEpochsValue,
        /// The state epoch of the STOPPING record (the fence).
        expected_state_epoch: Option<StateEpoch>,
    },
}

/// A message in flight.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize)]
pub enum NodeMessage {
    /// A partition's request to the destination's `__mirror_state` coordinator.
    Coordinator {
        /// The `__mirror_state` key.
        key: MirrorPartition,
        /// The partition's correlation id.
        request: RequestId,
        /// What is asked.
        body: CoordinatorRequest,
    },
    /// A partition's LME query to the source cluster (which mirrors nothing: no LME).
    QueryLastMirroredEpoch {
        /// The partition.
        key: PartitionKey,
        /// The partition's correlation id.
        request: RequestId,
    },
    /// A partition's leader-epoch bump, to the destination's controller.
    BumpLeaderEpoch {
        /// The partition.
        key: PartitionKey,
        /// The partition's correlation id.
        request: RequestId,
        /// The smallest acceptable epoch.
        at_least: LeaderEpoch,
    },
    /// A coalesced fetch from the node to the source broker.
    Fetch(CoalescedFetch),
    /// An answer for the node, with the fetched batches of each partition (a fetch response).
    Answer {
        /// The node input it becomes.
        input: NodeInput,
        /// Each partition's fetched batches.
        batches: BTreeMap<PartitionKey, Vec<BatchHeader>>,
    },
}

/// What the destination's broker and controller hold for one partition besides its log.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct DestPartition {
    /// The controller's leader epoch of the partition (persisted: survives a crash).
    pub leader_epoch: LeaderEpoch,
    /// The broker's produce gate as the kernel last set it (persisted: survives a crash).
    pub writable: bool,
    /// The attempt of the partition's pending retry timer (in memory: lost in a crash).
    pub retry_timer: Option<u32>,
}

impl DestPartition {
    /// A partition the controller has just created: at the first leader epoch, read-only.
    pub fn created() -> Self {
        DestPartition {
            leader_epoch: DEST_EPOCH,
            writable: false,
            retry_timer: None,
        }
    }
}

/// What remains of each bounded source of nondeterminism.
#[derive(Clone, PartialEq, Eq, Hash, Debug, Serialize, Deserialize)]
pub struct NodeBudget {
    /// Batches the source may still append.
    pub records: u8,
    /// Fetch faults.
    pub faults: u8,
    /// Operator requests: stops, re-runs of the selection, failbacks.
    pub operator_steps: u8,
    /// Crashes of the node.
    pub restarts: u8,
    /// Changes of the source's topics: a partition added, a topic deleted.
    pub source_changes: u8,
}

/// A safety violation seen while a step ran (a property fails on the first state carrying
/// one).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize)]
pub enum NodeViolation {
    /// A stop of one topic changed a partition of another topic, or a partition whose topic is
    /// asked to mirror began a stop (wrote STOPPING or STOPPED).
    StopChangedOtherTopic,
    /// A part of a coalesced fetch response did to its partition something else than the same
    /// answer does to the partition alone (or a fetch escaped the node uncoalesced).
    CoalescedPartDiffers,
    /// A STOPPED partition's stored state left STOPPED without a failback of its topic asked
    /// since it became STOPPED.
    FailbackWithoutAsking,
}

/// Observations that are history, not state.
#[derive(Clone, PartialEq, Eq, Hash, Debug, Default)]
pub struct NodeGhosts {
    /// The first violation seen.
    pub violation: Option<NodeViolation>,
    /// Whether a fault hit one part of a coalesced fetch that carried another partition too.
    pub fault_beside_another_part: bool,
    /// The STOPPED partitions whose topic the operator failed back since, until each leaves
    /// STOPPED.
    pub failback_asked: BTreeSet<PartitionKey>,
    /// Whether a partition left STOPPED after its topic's failback.
    pub failed_back: bool,
}

/// The whole world.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct NodeWorld {
    /// The destination's node manager, the kernel's, leading every partition; `None` while the
    /// node is down (from a crash to its restart).
    pub node: Option<NodeMirror>,
    /// The destination partitions' logs (one replica: the high watermark is the log end).
    pub dest_logs: BTreeMap<PartitionKey, MemLog>,
    /// The destination partitions' epochs, read-only flags and retry timers.
    pub dest: BTreeMap<PartitionKey, DestPartition>,
    /// The source partitions' logs (the source leader's; changed by producers, by a new
    /// partition and by the deletion of a topic, which takes its partitions away).
    pub source_logs: Shared<BTreeMap<PartitionKey, MemLog>>,
    /// The destination's `__mirror_state` coordinator.
    pub coordinator: Shared<Coordinator>,
    /// The destination controller's topic catalogue (`mirror.name` of every topic).
    pub catalogue: Shared<TopicCatalogue>,
    /// Messages in flight, with their multiplicity.
    pub net: BTreeMap<Arc<NodeMessage>, u8>,
    /// The node's clock, in the node's milliseconds: it moves only when a backed-off fetch
    /// becomes due ([`super::actions::NodeAction::BackoffElapses`]).
    pub now: TimestampMs,
    /// Remaining nondeterminism.
    pub budget: NodeBudget,
    /// History kept for the properties.
    pub ghosts: NodeGhosts,
}

/// The mirror the destination's topics are in (the destination mirrors cluster A).
pub fn mirror_name() -> kmirror_kernel::types::MirrorName {
    ClusterId::A.mirror_name()
}

impl NodeWorld {
    /// The initial world: every topic in mirror `from-a`, and the node started as after a
    /// restart (told the topics, their source leaders and its leadership of every partition:
    /// its first reads in flight).
    pub fn initial(config: &NodeModelConfig) -> NodeWorld {
        let desired = DesiredState::Mirror(mirror_name());
        let mut catalogue = TopicCatalogue::new().with_mirror(mirror_name());
        let mut keys = Vec::new();
        for (&(name, topic_id), &partitions) in NODE_TOPICS.iter().zip(&config.topics) {
            let mut info = TopicInfo::new(topic_id, partitions);
            info.mirror_name = Some(desired.config_value());
            catalogue.insert_topic(name, info);
            keys.extend((0..partitions).map(|p| PartitionKey::new(topic_id, p)));
        }
        let mut world = NodeWorld {
            node: None,
            dest_logs: keys.iter().map(|k| (*k, MemLog::new())).collect(),
            dest: keys
                .iter()
                .map(|k| (*k, DestPartition::created()))
                .collect(),
            source_logs: Shared::new(keys.iter().map(|k| (*k, MemLog::new())).collect()),
            coordinator: Shared::new(
                Coordinator::new(config.kernel.transitions.clone())
                    .with_mutant(config.kernel.mutant),
            ),
            catalogue: Shared::new(catalogue),
            net: BTreeMap::new(),
            now: 0,
            budget: NodeBudget {
                records: config.records,
                faults: config.faults,
                operator_steps: config.operator_steps,
                restarts: config.restarts,
                source_changes: config.source_changes,
            },
            ghosts: NodeGhosts::default(),
        };
        world.start(config);
        world.poll();
        world
    }

    /// Every mirrored partition, in key order.
    pub fn keys(&self) -> impl Iterator<Item = &PartitionKey> {
        self.dest_logs.keys()
    }

    /// The topic name of `topic_id`.
    pub fn topic_name(topic_id: TopicId) -> &'static str {
        NODE_TOPICS
            .iter()
            .find(|(_, id)| *id == topic_id)
            .map_or("?", |(name, _)| name)
    }

    /// What the operator asked of `topic_id` (NOT_MIRRORED when its `mirror.name` does not
    /// parse).
    pub fn desired(&self, topic_id: TopicId) -> DesiredState {
        self.catalogue
            .topic(Self::topic_name(topic_id))
            .and_then(|t| t.desired_state().ok())
            .unwrap_or(DesiredState::NotMirrored)
    }

    /// The record the coordinator stores for partition `key`, if any.
    pub fn stored(&self, key: &PartitionKey) -> Option<&MirrorPartitionStateValue> {
        self.coordinator.read_state(&key.in_mirror(mirror_name()))
    }

    /// The state the coordinator stores for partition `key` (UNKNOWN if none).
    pub fn stored_state(&self, key: &PartitionKey) -> MirrorState {
        self.stored(key).map_or(MirrorState::Unknown, |v| v.state)
    }

    /// The partition count of `topic_id` at the source: 0 once the source deleted it.
    pub fn source_partitions(&self, topic_id: TopicId) -> PartitionIndex {
        let keys = self.source_logs.range(
            PartitionKey::new(topic_id, PartitionIndex::MIN)
                ..=PartitionKey::new(topic_id, PartitionIndex::MAX),
        );
        PartitionIndex::try_from(keys.count()).unwrap_or(PartitionIndex::MAX)
    }

    /// Whether the source deleted `topic_id` (every topic of the model has a partition at the
    /// source until then).
    pub fn source_deleted(&self, topic_id: TopicId) -> bool {
        self.source_partitions(topic_id) == 0
    }

    /// The state machine of `key`, if the node is up and leads it.
    pub fn partition(&self, key: &PartitionKey) -> Option<&PartitionMirror> {
        self.node.as_ref()?.partition(key)
    }

    /// The fetch `key`'s partition asked for, if the node is up and leads it.
    pub fn fetch_slot(&self, key: &PartitionKey) -> Option<&FetchSlot> {
        self.node.as_ref()?.fetch_slot(key)
    }

    /// Adds one copy of `message` to the network.
    pub fn send(&mut self, message: NodeMessage) {
        *self.net.entry(Arc::new(message)).or_insert(0) += 1;
    }

    /// Removes one copy of `message` from the network; false if there was none.
    pub fn take(&mut self, message: &NodeMessage) -> bool {
        match self.net.get_mut(message) {
            Some(n) if *n > 1 => {
                *n -= 1;
                true
            }
            Some(_) => {
                self.net.remove(message);
                true
            }
            None => false,
        }
    }

    /// Records the first violation.
    pub fn violate(&mut self, violation: NodeViolation) {
        self.ghosts.violation.get_or_insert(violation);
    }
}
