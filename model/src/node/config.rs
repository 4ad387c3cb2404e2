//! The node model's bounds.

use kmirror_kernel::config::MirrorConfig;
use kmirror_kernel::mutant::Mutant;
use kmirror_kernel::types::{PartitionIndex, TopicId};
use serde::{Deserialize, Serialize};

use crate::world::{TOPIC, TOPIC_ID};

/// The topics the node model can mirror, by name and id (the same ids on both clusters): the
/// single-partition model's topic first.
pub const NODE_TOPICS: [(&str, TopicId); 3] = [
    (TOPIC, TOPIC_ID),
    ("pay", TopicId::from_u64(0x0070_6179)),
    ("audit", TopicId::from_u64(0x0061_7564_6974)),
];

/// Bounds on the node model's nondeterminism, and the kernel variant under test. Every bound is
/// a budget consumed by its action, so the state space is finite.
#[derive(Clone, PartialEq, Eq, Hash, Debug, Serialize, Deserialize)]
pub struct NodeModelConfig {
    /// The partition count of each mirrored topic: topic `i` is `NODE_TOPICS[i]` (at most
    /// three topics).
    pub topics: Vec<PartitionIndex>,
    /// Batches the source's producers may append, over all partitions.
    pub records: u8,
    /// Fetch faults: one partition's part of a coalesced response failed (non-retriable) or
    /// retriable, or a whole coalesced request lost.
    pub faults: u8,
    /// Operator requests: through the kernel's controller a stop of one topic, a re-run of
    /// the selection (AddTopicsToMirror of what discovery finds), a failback of one topic;
    /// and a partition added to a failed-over topic at the destination (CreatePartitions).
    pub operator_steps: u8,
    /// Crashes of the node (each followed by a restart, when the world chooses).
    #[serde(default)]
    pub restarts: u8,
    /// Changes of the source's topics: a topic gains a partition (at most one), or is deleted.
    #[serde(default)]
    pub source_changes: u8,
    /// Steps the fault-free scheduler may take in the bounded liveness property.
    pub liveness_bound: u16,
    /// The kernel variant.
    pub kernel: MirrorConfig,
}

impl NodeModelConfig {
    /// The configuration `kmirror check --node` and CI check: two topics of one partition
    /// each (so the two partitions share the node, its one fetcher and the coordinator, and a
    /// stop of one topic has another beside it), one batch, one fault, one stop; no restart,
    /// no change of the source.
    pub fn default_check() -> Self {
        NodeModelConfig {
            topics: vec![1, 1],
            records: 1,
            faults: 1,
            operator_steps: 1,
            restarts: 0,
            source_changes: 0,
            liveness_bound: 200,
            kernel: Self::node_kernel(),
        }
    }

    /// The kernel configuration the harness's node driver runs: the defaults, with no write of
    /// an earlier leadership able to land once the node (re)starts
    /// ([`MirrorConfig::predecessors_may_write`] off: the node's coordinator is in-process and
    /// a restart drops everything in flight, as this model's crash does).
    pub fn node_kernel() -> MirrorConfig {
        MirrorConfig {
            predecessors_may_write: false,
            ..MirrorConfig::default()
        }
    }

    /// The lifecycle configuration CI also checks: one topic of one partition (the source's
    /// growth adds a second), one batch, no fetch fault; one restart of the node, two operator
    /// requests (a stop, then a failback, a re-run of the selection or a partition added to
    /// the failed-over topic at the destination) and one change of the source (a partition
    /// added or the topic deleted). A second topic multiplies the
    /// interleavings past what CI can exhaust (more than 860,000 states, unfinished).
    pub fn lifecycle_check() -> Self {
        NodeModelConfig {
            topics: vec![1],
            faults: 0,
            operator_steps: 2,
            restarts: 1,
            source_changes: 1,
            ..Self::default_check()
        }
    }

    /// The partition count topic `topic_id` starts with at the source and the destination.
    pub fn partitions(&self, topic_id: TopicId) -> Option<PartitionIndex> {
        NODE_TOPICS
            .iter()
            .zip(&self.topics)
            .find(|((_, id), _)| *id == topic_id)
            .map(|(_, &partitions)| partitions)
    }

    /// Every topic of this configuration, by name and id.
    pub fn topic_ids(&self) -> impl Iterator<Item = (&'static str, TopicId)> + '_ {
        NODE_TOPICS.iter().take(self.topics.len()).copied()
    }

    /// This configuration with kernel `mutant` switched on.
    pub fn with_mutant(mut self, mutant: Mutant) -> Self {
        self.kernel.mutant = Some(mutant);
        self
    }

    /// Why this configuration cannot be checked, if it cannot.
    pub fn validate(&self) -> Result<(), InvalidNodeModel> {
        if self.topics.is_empty() || self.topics.len() > NODE_TOPICS.len() {
            return Err(InvalidNodeModel::TopicCount(self.topics.len()));
        }
        if let Some(&count) = self.topics.iter().find(|&&p| !(1..=4).contains(&p)) {
            return Err(InvalidNodeModel::PartitionCount(count));
        }
        Ok(())
    }
}

impl Default for NodeModelConfig {
    fn default() -> Self {
        Self::default_check()
    }
}

/// A [`NodeModelConfig`] the node model cannot run.
#[derive(Clone, Copy, PartialEq, Eq, Debug, thiserror::Error)]
pub enum InvalidNodeModel {
    /// Too few or too many topics.
    #[error("the node model mirrors 1 to 3 topics; {0} were given")]
    TopicCount(usize),
    /// A topic with no partitions or too many to check.
    #[error("a topic of the node model has 1 to 4 partitions; {0} was given")]
    PartitionCount(PartitionIndex),
}
