//! The operator's requests, each through the kernel's controller (`handle_mirror_request`) on
//! the destination's catalogue: a stop of one topic (RemoveTopicsFromMirror), the same
//! selection run again (`kmirror mirror --topics`: AddTopicsToMirror of what the kernel's
//! discovery finds among the model's topics) and the explicit failback of one topic
//! (AddTopicsToMirror of that topic, discovered with the failback asked); and, beside the
//! controller, a partition added to a failed-over topic at the destination (CreatePartitions
//! through `kmirror serve`).
//!
//! The catalogue changes whether the node is up or down (a re-run writes `node.properties`
//! before it starts the node); a node that is up hears each changed topic's metadata at once.

use kmirror_kernel::controller::{
    apply_config_records, handle_mirror_request, ConfigRecord, ControllerConfig, MirrorRequest,
};
use kmirror_kernel::desired::DesiredState;
use kmirror_kernel::discovery::discover;
use kmirror_kernel::mem_log::MemLog;
use kmirror_kernel::node::{FetchSlot, NodeInput, PartitionKey};
use kmirror_kernel::partition::PartitionMirror;
use kmirror_kernel::state::MirrorState;
use kmirror_kernel::types::{MirrorPartition, PartitionIndex, TopicId};

use super::config::NodeModelConfig;
use super::executor::Fetched;
use super::world::{mirror_name, DestPartition, NodeViolation, NodeWorld};
use crate::shared::Shared;

/// What a stop must leave unchanged of a partition of another topic.
type Untouched = (
    Option<PartitionMirror>,
    Option<FetchSlot>,
    Option<MemLog>,
    Option<DestPartition>,
);

impl NodeWorld {
    /// The operator's RemoveTopicsFromMirror for `topic_id`; false when the controller refuses
    /// it. Flags [`NodeViolation::StopChangedOtherTopic`] when the step changed a partition of
    /// another topic.
    pub fn stop(&mut self, config: &NodeModelConfig, topic_id: TopicId) -> bool {
        let others: Vec<PartitionKey> = self
            .keys()
            .filter(|k| k.topic_id != topic_id)
            .copied()
            .collect();
        let before: Vec<Untouched> = others.iter().map(|k| self.untouched(k)).collect();
        if !self.request(config, &self.stop_request(topic_id)) {
            return false;
        }
        let after = others.iter().map(|k| self.untouched(k));
        if !after.eq(before) {
            self.violate(NodeViolation::StopChangedOtherTopic);
        }
        true
    }

    /// The operator runs the same selection again: AddTopicsToMirror of the topics the kernel's
    /// discovery adds among all the model's topics (never a failed-over one, unless mutant
    /// `ImplicitFailback`); false when there is none or the controller refuses.
    pub fn remirror(&mut self, config: &NodeModelConfig) -> bool {
        self.request(config, &self.remirror_request(config))
    }

    /// The operator's explicit failback of `topic_id`; false when the controller refuses it
    /// (a partition is not STOPPED, or the topic is not failed over). Records the failback of
    /// each of the topic's STOPPED partitions for `no_failback_without_asking`.
    pub fn failback(&mut self, config: &NodeModelConfig, topic_id: TopicId) -> bool {
        if self.grown_past_source(topic_id)
            || !self.request(config, &self.failback_request(config, topic_id))
        {
            return false;
        }
        let keys: Vec<PartitionKey> = self.topic_keys(topic_id).collect();
        self.ghosts.failback_asked.extend(keys);
        true
    }

    /// Whether the destination's `topic_id` has more partitions than the source's (it was
    /// grown after its failover): its failback is refused, as the harness's `add_topics`
    /// refuses a destination topic with more partitions than the source's (partitions cannot
    /// be removed). A topic the source deleted is left to the controller.
    pub fn grown_past_source(&self, topic_id: TopicId) -> bool {
        let source = self.source_partitions(topic_id);
        source > 0 && self.dest_partitions(topic_id) > source
    }

    /// Whether the operator may add a partition to `topic_id` at the destination (Kafka's
    /// CreatePartitions, which `kmirror serve` carries out on a failed-over topic): an
    /// operator step is left, the node is up (it serves the request), the topic asks STOP and
    /// every partition of it is STOPPED (serve refuses the request otherwise), and it has at
    /// most as many partitions as it started with (one growth, by the source or here).
    pub fn may_grow_stopped(&self, config: &NodeModelConfig, topic_id: TopicId) -> bool {
        self.budget.operator_steps > 0
            && self.node.is_some()
            && matches!(self.desired(topic_id), DesiredState::Stop(_))
            && self
                .topic_keys(topic_id)
                .all(|k| self.stored_state(&k) == MirrorState::Stopped)
            && config
                .partitions(topic_id)
                .is_some_and(|n| self.dest_partitions(topic_id) <= n)
    }

    /// The operator adds a partition to failed-over `topic_id` at the destination: the node
    /// creates it as for a source's growth ([`NodeWorld::create_partitions`]); it has no saved
    /// state under a topic asking STOP, and the kernel writes it STOPPED. False when
    /// [`NodeWorld::may_grow_stopped`] does not hold.
    pub fn grow_stopped(&mut self, config: &NodeModelConfig, topic_id: TopicId) -> bool {
        if !self.may_grow_stopped(config, topic_id) {
            return false;
        }
        self.budget.operator_steps -= 1;
        let total = self.dest_partitions(topic_id) + 1;
        self.create_partitions(config, topic_id, total);
        true
    }

    /// The partition count of `topic_id` at the destination (its controller's catalogue).
    pub fn dest_partitions(&self, topic_id: TopicId) -> PartitionIndex {
        self.catalogue
            .topic(Self::topic_name(topic_id))
            .map_or(0, |t| t.partitions)
    }

    /// Whether the controller accepts `request` and it changes the catalogue.
    pub fn accepts(&self, config: &NodeModelConfig, request: &MirrorRequest) -> bool {
        !self.records(config, request).is_empty()
    }

    /// RemoveTopicsFromMirror of `topic_id`.
    pub fn stop_request(&self, topic_id: TopicId) -> MirrorRequest {
        MirrorRequest::RemoveTopics {
            mirror: mirror_name().to_string(),
            topics: vec![Self::topic_name(topic_id).to_string()],
        }
    }

    /// The AddTopicsToMirror of a re-run of the selection (every topic of the model).
    pub fn remirror_request(&self, config: &NodeModelConfig) -> MirrorRequest {
        let names = config.topic_ids().map(|(name, _)| name);
        let found = discover(
            &self.catalogue,
            &mirror_name(),
            names,
            false,
            config.kernel.mutant,
        );
        MirrorRequest::AddTopics {
            mirror: mirror_name().to_string(),
            topics: found.request_topics(),
        }
    }

    /// The AddTopicsToMirror of the failback of `topic_id`.
    pub fn failback_request(&self, config: &NodeModelConfig, topic_id: TopicId) -> MirrorRequest {
        let name = Self::topic_name(topic_id);
        let found = discover(
            &self.catalogue,
            &mirror_name(),
            [name],
            true,
            config.kernel.mutant,
        );
        MirrorRequest::AddTopics {
            mirror: mirror_name().to_string(),
            topics: found.request_topics(),
        }
    }

    /// Applies the `mirror.name` records the controller writes for `request`, then tells a
    /// node that is up the metadata of each topic they changed; false when there are none.
    fn request(&mut self, config: &NodeModelConfig, request: &MirrorRequest) -> bool {
        let records = self.records(config, request);
        if records.is_empty() {
            return false;
        }
        self.budget.operator_steps -= 1;
        self.catalogue = Shared::new(apply_config_records(&self.catalogue, &records));
        for record in &records {
            let Some(info) = self.catalogue.topic(&record.topic) else {
                continue;
            };
            let input = NodeInput::Topic {
                topic_id: info.topic_id,
                desired: self.desired(info.topic_id),
                partitions: info.partitions,
            };
            self.run(config, input, &Fetched::new());
        }
        true
    }

    /// The `mirror.name` records the controller writes for `request`: none when it refuses it,
    /// when it changes nothing, or when no operator step is left.
    fn records(&self, config: &NodeModelConfig, request: &MirrorRequest) -> Vec<ConfigRecord> {
        if self.budget.operator_steps == 0 {
            return Vec::new();
        }
        let coordinator = &self.coordinator;
        let lookup = |p: &MirrorPartition| coordinator.read_state(p).map(|v| v.state);
        let controller = ControllerConfig::for_kernel(&config.kernel);
        handle_mirror_request(&self.catalogue, &lookup, &controller, request).records
    }

    /// The partitions of `topic_id` at the destination.
    pub fn topic_keys(&self, topic_id: TopicId) -> impl Iterator<Item = PartitionKey> + '_ {
        self.keys().filter(move |k| k.topic_id == topic_id).copied()
    }

    /// What a stop of another topic must leave unchanged of partition `key`.
    fn untouched(&self, key: &PartitionKey) -> Untouched {
        (
            self.partition(key).cloned(),
            self.fetch_slot(key).copied(),
            self.dest_logs.get(key).cloned(),
            self.dest.get(key).cloned(),
        )
    }
}
