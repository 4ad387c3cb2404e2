//! A restart of the node, as the harness's node destination does it: one process holds the
//! destination, its `__mirror_state` coordinator is in-process, and each partition's leader
//! epoch and produce gate are persisted (`node.properties`).
//!
//! A crash loses everything in memory: the node manager, its retry timers and every message to
//! or from it (coordinator requests and answers, fetches and their answers, leader-epoch bumps,
//! LME queries). What survives is what the harness persists: the coordinator's records, the
//! controller's catalogue, the destination logs (one replica, flushed: whole) and each
//! partition's leader epoch and produce gate. The restart is `NodeDriver::start`: a new node
//! manager told every topic, the source's leaders (or that the source deleted the topic), then
//! its leadership of every partition at the persisted leader epoch.

use kmirror_kernel::input::Input;
use kmirror_kernel::node::{NodeConfig, NodeInput, NodeMirror, PartitionKey};
use kmirror_kernel::types::{PartitionIndex, TopicId};

use super::config::NodeModelConfig;
use super::executor::Fetched;
use super::world::{NodeWorld, MIRROR_STATE_PARTITIONS, NODE_BROKER, SOURCE_BROKER};

impl NodeWorld {
    /// The node crashes: what is in memory is lost, what is persisted stays. False when the
    /// node is already down or no restart is left.
    pub fn crash(&mut self) -> bool {
        if self.node.is_none() || self.budget.restarts == 0 {
            return false;
        }
        self.budget.restarts -= 1;
        self.node = None;
        self.net.clear();
        for p in self.dest.values_mut() {
            p.retry_timer = None;
        }
        true
    }

    /// The node starts (again): a new node manager told every topic of the catalogue, its
    /// source leaders (or its deletion at the source), then `BecameLeader` for every partition
    /// at its persisted leader epoch. False when the node is up.
    pub fn start(&mut self, config: &NodeModelConfig) -> bool {
        if self.node.is_some() {
            return false;
        }
        self.node = Some(
            NodeMirror::new(NodeConfig {
                broker: NODE_BROKER,
                num_fetchers: 1,
                fetch_backoff_ms: 1,
                mirror_state_partitions: MIRROR_STATE_PARTITIONS,
            })
            .expect("a valid constant node configuration"),
        );
        let topics: Vec<(TopicId, PartitionIndex)> = self
            .catalogue
            .topics()
            .map(|(_, t)| (t.topic_id, t.partitions))
            .collect();
        for &(topic_id, partitions) in &topics {
            let input = NodeInput::Topic {
                topic_id,
                desired: self.desired(topic_id),
                partitions,
            };
            self.run(config, input, &Fetched::new());
        }
        for &(topic_id, _) in &topics {
            let input = self.source_topic(topic_id);
            self.run(config, input, &Fetched::new());
        }
        // The partitions as the node found them: one created while leading these (the source
        // grew) is led by its creation.
        let keys: Vec<PartitionKey> = topics
            .iter()
            .flat_map(|&(topic_id, n)| (0..n).map(move |p| PartitionKey::new(topic_id, p)))
            .collect();
        for key in keys {
            self.lead(config, key);
        }
        true
    }

    /// The source's metadata of `topic_id` as the node hears it: its partitions' leaders, or
    /// that the source no longer has it.
    pub fn source_topic(&self, topic_id: TopicId) -> NodeInput {
        match self.source_partitions(topic_id) {
            0 => NodeInput::SourceTopicDeleted { topic_id },
            n => NodeInput::SourceTopic {
                topic_id,
                leaders: vec![Some(SOURCE_BROKER); usize::try_from(n).unwrap_or(0)],
            },
        }
    }

    /// `BecameLeader` for `key` at its persisted leader epoch (the node is its one replica).
    pub fn lead(&mut self, config: &NodeModelConfig, key: PartitionKey) {
        let Some(leader_epoch) = self.dest.get(&key).map(|p| p.leader_epoch) else {
            return;
        };
        let input = Input::BecameLeader {
            leader_epoch,
            replicas: im::ordset![NODE_BROKER],
            isr: im::ordset![NODE_BROKER],
        };
        self.run(config, NodeInput::Partition { key, input }, &Fetched::new());
    }
}
