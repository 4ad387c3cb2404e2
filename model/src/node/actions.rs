//! The node model's nondeterministic actions, each bounded by a
//! [`NodeBudget`](super::world::NodeBudget) or enabled by the world.

use std::sync::Arc;

use kmirror_kernel::batch::LeaderBatch;
use kmirror_kernel::controller::{
    apply_config_records, handle_mirror_request, ConfigRecord, ControllerConfig, MirrorRequest,
};
use kmirror_kernel::desired::DesiredState;
use kmirror_kernel::input::Input;
use kmirror_kernel::log::{LogView, PartitionLog};
use kmirror_kernel::mem_log::MemLog;
use kmirror_kernel::node::{FetchStatus, NodeInput, PartitionFetchResult, PartitionKey};
use kmirror_kernel::partition::PartitionMirror;
use kmirror_kernel::types::{MirrorPartition, TopicId};
use serde::{Deserialize, Serialize};

use super::config::{NodeModelConfig, NODE_TOPICS};
use super::executor::Fetched;
use super::world::{
    mirror_name, DestPartition, NodeMessage, NodeViolation, NodeWorld, SOURCE_EPOCH,
};
use crate::shared::Shared;

/// A fault of one partition's part of a coalesced fetch response.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize)]
pub enum PartFault {
    /// A non-retriable error (the partition is told: it fails and retries after its backoff).
    Failed,
    /// A retriable error (the node backs the partition's fetch off; the partition is not told).
    Retriable,
}

/// One step of the node model's world.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize)]
pub enum NodeAction {
    /// Deliver a message.
    Deliver(Arc<NodeMessage>),
    /// The source answers a coalesced fetch with one partition's part replaced by a fault.
    FaultPart(Arc<NodeMessage>, PartitionKey, PartFault),
    /// A coalesced fetch is lost as a whole (connection lost): the node is told it failed.
    LoseFetch(Arc<NodeMessage>),
    /// The source's producer appends a batch to a source partition.
    Produce(PartitionKey),
    /// The node's clock moves to the earliest backed-off fetch.
    BackoffElapses,
    /// A partition's retry timer fires.
    FireRetry(PartitionKey),
    /// The operator stops one topic (RemoveTopicsFromMirror) through the controller.
    Stop(TopicId),
}

/// What a stop must leave unchanged of a partition of another topic.
type Untouched = (
    Option<PartitionMirror>,
    Option<kmirror_kernel::node::FetchSlot>,
    Option<MemLog>,
    Option<DestPartition>,
);

impl NodeWorld {
    /// Every action enabled in this world.
    pub fn enabled_actions(&self, config: &NodeModelConfig, actions: &mut Vec<NodeAction>) {
        for message in self.net.keys() {
            actions.push(NodeAction::Deliver(Arc::clone(message)));
            if let (NodeMessage::Fetch(fetch), true) = (message.as_ref(), self.budget.faults > 0) {
                for (key, _) in &fetch.partitions {
                    for fault in [PartFault::Failed, PartFault::Retriable] {
                        actions.push(NodeAction::FaultPart(Arc::clone(message), *key, fault));
                    }
                }
                actions.push(NodeAction::LoseFetch(Arc::clone(message)));
            }
        }
        if self.budget.records > 0 {
            actions.extend(self.keys().map(|k| NodeAction::Produce(*k)));
        }
        self.progress_timers(actions);
        if self.budget.operator_steps > 0 {
            for (&(_, topic_id), _) in NODE_TOPICS.iter().zip(&config.topics) {
                // Only a stop the controller accepts: an enabled action always changes the world
                // (stateright's simulation cannot replay a path through one that does not).
                if matches!(self.desired(topic_id), DesiredState::Mirror(_))
                    && !self.stop_records(config, topic_id).is_empty()
                {
                    actions.push(NodeAction::Stop(topic_id));
                }
            }
        }
    }

    /// The timer actions enabled: the backoff clock and the partitions' retry timers.
    pub fn progress_timers(&self, actions: &mut Vec<NodeAction>) {
        if self.next_backoff_end().is_some() {
            actions.push(NodeAction::BackoffElapses);
        }
        for (key, p) in &self.dest {
            if p.retry_timer.is_some() {
                actions.push(NodeAction::FireRetry(*key));
            }
        }
    }

    /// The earliest end of a fetch backoff still running, if any. (The node's
    /// `next_fetch_due` also counts a fetch already due but waiting for its fetcher.)
    pub fn next_backoff_end(&self) -> Option<u64> {
        self.keys()
            .filter_map(|k| match self.node.fetch_slot(k)?.status {
                FetchStatus::Ready {
                    not_before: Some(t),
                } if t > self.now => Some(t),
                _ => None,
            })
            .min()
    }

    /// Applies `action`; `None` when it changes nothing.
    pub fn apply(&self, config: &NodeModelConfig, action: NodeAction) -> Option<NodeWorld> {
        let mut w = self.clone();
        w.perform(config, action).then_some(w)
    }

    /// Applies `action` in place, then sends the fetches the node has ready; false (and the
    /// world unchanged) when it changes nothing.
    pub fn perform(&mut self, config: &NodeModelConfig, action: NodeAction) -> bool {
        let changed = match action {
            NodeAction::Deliver(message) => {
                self.deliver(config, &message);
                true
            }
            NodeAction::FaultPart(message, key, fault) => self.fault_part(&message, key, fault),
            NodeAction::LoseFetch(message) => {
                let NodeMessage::Fetch(fetch) = message.as_ref() else {
                    return false;
                };
                if !self.take(&message) {
                    return false;
                }
                self.budget.faults -= 1;
                let input = NodeInput::FetchFailed {
                    fetcher: fetch.fetcher,
                };
                self.run(config, input, &Fetched::new());
                true
            }
            NodeAction::Produce(key) => self.produce(key),
            NodeAction::BackoffElapses => match self.next_backoff_end() {
                Some(t) => {
                    self.now = t;
                    true
                }
                None => false,
            },
            NodeAction::FireRetry(key) => {
                let Some(attempt) = self.dest.get_mut(&key).and_then(|p| p.retry_timer.take())
                else {
                    return false;
                };
                let input = NodeInput::Partition {
                    key,
                    input: Input::RetryDue { attempt },
                };
                self.run(config, input, &Fetched::new());
                true
            }
            NodeAction::Stop(topic_id) => self.stop(config, topic_id),
        };
        if changed {
            self.poll();
        }
        changed
    }

    /// The source answers `message` with `key`'s part replaced by `fault`.
    fn fault_part(&mut self, message: &NodeMessage, key: PartitionKey, fault: PartFault) -> bool {
        let NodeMessage::Fetch(fetch) = message else {
            return false;
        };
        if self.budget.faults == 0 || !self.take(message) {
            return false;
        }
        self.budget.faults -= 1;
        if fetch.partitions.len() > 1 {
            self.ghosts.fault_beside_another_part = true;
        }
        let result = match fault {
            PartFault::Failed => PartitionFetchResult::Failed("TOPIC_AUTHORIZATION_FAILED".into()),
            PartFault::Retriable => {
                PartitionFetchResult::Retriable("NOT_LEADER_OR_FOLLOWER".into())
            }
        };
        let (response, batches) = self.serve_fetch(fetch, Some((key, result)));
        self.send(NodeMessage::Answer {
            input: NodeInput::FetchResponse(response),
            batches,
        });
        true
    }

    /// The source's producer appends one plain batch to `key` (one source replica: the high
    /// watermark follows).
    fn produce(&mut self, key: PartitionKey) -> bool {
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

    /// The operator's RemoveTopicsFromMirror for `topic_id`, through the kernel's controller,
    /// then the topic's new `mirror.name` to the node; false when the controller refuses it.
    /// Flags [`NodeViolation::StopChangedOtherTopic`] when the step changed a partition of
    /// another topic.
    fn stop(&mut self, config: &NodeModelConfig, topic_id: TopicId) -> bool {
        let records = self.stop_records(config, topic_id);
        if records.is_empty() {
            return false;
        }
        let name = Self::topic_name(topic_id);
        let catalogue = apply_config_records(&self.catalogue, &records);
        self.catalogue = Shared::new(catalogue);
        self.budget.operator_steps -= 1;
        let others: Vec<PartitionKey> = self
            .keys()
            .filter(|k| k.topic_id != topic_id)
            .copied()
            .collect();
        let before: Vec<Untouched> = others.iter().map(|k| self.untouched(k)).collect();
        let partitions = self
            .catalogue
            .topic(name)
            .map_or(0, |t| t.partition_indexes().end);
        let input = NodeInput::Topic {
            topic_id,
            desired: self.desired(topic_id),
            partitions,
        };
        self.run(config, input, &Fetched::new());
        let after = others.iter().map(|k| self.untouched(k));
        if !after.eq(before) {
            self.violate(NodeViolation::StopChangedOtherTopic);
        }
        true
    }

    /// The `mirror.name` records the controller writes for RemoveTopicsFromMirror of
    /// `topic_id`: none when it refuses the request.
    fn stop_records(&self, config: &NodeModelConfig, topic_id: TopicId) -> Vec<ConfigRecord> {
        let request = MirrorRequest::RemoveTopics {
            mirror: mirror_name().to_string(),
            topics: vec![Self::topic_name(topic_id).to_string()],
        };
        let coordinator = &self.coordinator;
        let lookup = |p: &MirrorPartition| coordinator.read_state(p).map(|v| v.state);
        let controller = ControllerConfig::for_kernel(&config.kernel);
        handle_mirror_request(&self.catalogue, &lookup, &controller, &request).records
    }

    /// What a stop of another topic must leave unchanged of partition `key`.
    fn untouched(&self, key: &PartitionKey) -> Untouched {
        (
            self.node.partition(key).cloned(),
            self.node.fetch_slot(key).copied(),
            self.dest_logs.get(key).cloned(),
            self.dest.get(key).cloned(),
        )
    }
}
