//! The source cluster's changes, and the destination's growth that follows them.
//!
//! The source's producers append batches; a source topic may gain a partition (at most one
//! more than it started with) or be deleted. A node that is up hears the change as the
//! harness's metadata refresh gives it (`SourceTopic` with the new leaders,
//! `SourceTopicDeleted`); a node that is down hears it when it starts. A deleted topic's
//! partitions are gone from the source: fetches and LME queries for them answer
//! [`UNKNOWN_TOPIC_ID`](super::executor::UNKNOWN_TOPIC_ID).
//!
//! The node's `CreatePartitions` is executed as the harness's `grow_topic` does: the new
//! destination partitions (log, leader epoch, produce gate), the catalogue's partition count,
//! the topic's metadata with the new count to the node, then its leadership of each new
//! partition.

use kmirror_kernel::batch::LeaderBatch;
use kmirror_kernel::log::{LogView, PartitionLog};
use kmirror_kernel::mem_log::MemLog;
use kmirror_kernel::node::{NodeInput, PartitionKey};
use kmirror_kernel::types::{PartitionIndex, TopicId};

use super::config::NodeModelConfig;
use super::executor::Fetched;
use super::world::{DestPartition, NodeWorld, SOURCE_EPOCH};

impl NodeWorld {
    /// The source's producer appends one plain batch to `key` (one source replica: the high
    /// watermark follows).
    pub fn produce(&mut self, key: PartitionKey) -> bool {
        if self.budget.records == 0 {
            return false;
        }
        let logs = &mut *self.source_logs;
        let Some(log) = logs.get_mut(&key) else {
            return false;
        };
        let batch = LeaderBatch::Records {
            record_count: 1,
            producer: None,
            transactional: false,
        };
        if log.append_as_leader(SOURCE_EPOCH, batch).is_err() {
            return false;
        }
        let end = log.log_end_offset();
        let _ = log.advance_high_watermark(end);
        self.budget.records -= 1;
        true
    }

    /// Whether the source's `topic_id` may gain a partition: a source change is left, the
    /// topic is not deleted and has not grown yet.
    pub fn may_add_partition(&self, config: &NodeModelConfig, topic_id: TopicId) -> bool {
        let count = self.source_partitions(topic_id);
        self.budget.source_changes > 0
            && count > 0
            && config.partitions(topic_id).is_some_and(|n| count <= n)
    }

    /// Whether the source's `topic_id` may be deleted: a source change is left and it is not
    /// deleted yet.
    pub fn may_delete_topic(&self, topic_id: TopicId) -> bool {
        self.budget.source_changes > 0 && !self.source_deleted(topic_id)
    }

    /// The source's `topic_id` gains a partition (empty); the node hears the new leaders.
    pub fn add_source_partition(&mut self, config: &NodeModelConfig, topic_id: TopicId) -> bool {
        if !self.may_add_partition(config, topic_id) {
            return false;
        }
        self.budget.source_changes -= 1;
        let key = PartitionKey::new(topic_id, self.source_partitions(topic_id));
        self.source_logs.insert(key, MemLog::new());
        let input = self.source_topic(topic_id);
        self.run(config, input, &Fetched::new());
        true
    }

    /// The source deletes `topic_id` and its partitions; the node hears it.
    pub fn delete_source_topic(&mut self, config: &NodeModelConfig, topic_id: TopicId) -> bool {
        if !self.may_delete_topic(topic_id) {
            return false;
        }
        self.budget.source_changes -= 1;
        self.source_logs.retain(|k, _| k.topic_id != topic_id);
        self.run(
            config,
            NodeInput::SourceTopicDeleted { topic_id },
            &Fetched::new(),
        );
        true
    }

    /// Executes the node's `CreatePartitions` of `topic_id` up to `total` partitions.
    pub fn create_partitions(
        &mut self,
        config: &NodeModelConfig,
        topic_id: TopicId,
        total: PartitionIndex,
    ) {
        let name = Self::topic_name(topic_id);
        let Some(mut info) = self.catalogue.topic(name).cloned() else {
            return;
        };
        let created = info.partitions..total;
        if created.is_empty() {
            return;
        }
        info.partitions = total;
        self.catalogue.insert_topic(name, info);
        for p in created.clone() {
            let key = PartitionKey::new(topic_id, p);
            self.dest_logs.insert(key, MemLog::new());
            self.dest.insert(key, DestPartition::created());
        }
        let input = NodeInput::Topic {
            topic_id,
            desired: self.desired(topic_id),
            partitions: total,
        };
        self.run(config, input, &Fetched::new());
        for p in created {
            self.lead(config, PartitionKey::new(topic_id, p));
        }
    }
}
