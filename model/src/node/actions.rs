//! The node model's nondeterministic actions, each bounded by a
//! [`NodeBudget`](super::world::NodeBudget) or enabled by the world.

use std::sync::Arc;

use kmirror_kernel::desired::DesiredState;
use kmirror_kernel::input::Input;
use kmirror_kernel::node::{FetchStatus, NodeInput, PartitionFetchResult, PartitionKey};
use kmirror_kernel::types::{TimestampMs, TopicId};
use serde::{Deserialize, Serialize};

use super::config::NodeModelConfig;
use super::executor::Fetched;
use super::world::{NodeMessage, NodeWorld};

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
    /// The operator runs the same selection again (`kmirror mirror --topics`): AddTopicsToMirror
    /// of the topics the kernel's discovery adds.
    Remirror,
    /// The operator fails one topic back (AddTopicsToMirror of a failed-over topic).
    Failback(TopicId),
    /// The operator adds a partition to a failed-over topic at the destination
    /// (CreatePartitions through `kmirror serve`).
    GrowStopped(TopicId),
    /// The node crashes: everything in memory and in flight is lost.
    Crash,
    /// The node starts again.
    Start,
    /// The source topic gains a partition.
    SourceAddsPartition(TopicId),
    /// The source deletes the topic.
    SourceDeletesTopic(TopicId),
}

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
            actions.extend(self.source_logs.keys().map(|k| NodeAction::Produce(*k)));
        }
        self.start_and_timers(actions);
        if self.budget.restarts > 0 && self.node.is_some() {
            actions.push(NodeAction::Crash);
        }
        // Only requests the controller accepts: an enabled action always changes the world
        // (stateright's simulation cannot replay a path through one that does not).
        if self.budget.operator_steps > 0 {
            for (_, topic_id) in config.topic_ids() {
                let desired = self.desired(topic_id);
                if matches!(desired, DesiredState::Mirror(_))
                    && self.accepts(config, &self.stop_request(topic_id))
                {
                    actions.push(NodeAction::Stop(topic_id));
                }
                if matches!(desired, DesiredState::Stop(_))
                    && !self.grown_past_source(topic_id)
                    && self.accepts(config, &self.failback_request(config, topic_id))
                {
                    actions.push(NodeAction::Failback(topic_id));
                }
                if self.may_grow_stopped(config, topic_id) {
                    actions.push(NodeAction::GrowStopped(topic_id));
                }
            }
            if self.accepts(config, &self.remirror_request(config)) {
                actions.push(NodeAction::Remirror);
            }
        }
        for (_, topic_id) in config.topic_ids() {
            if self.may_add_partition(config, topic_id) {
                actions.push(NodeAction::SourceAddsPartition(topic_id));
            }
            if self.may_delete_topic(topic_id) {
                actions.push(NodeAction::SourceDeletesTopic(topic_id));
            }
        }
    }

    /// The progress actions enabled: the node's start when it is down, the backoff clock and
    /// the partitions' retry timers.
    pub fn start_and_timers(&self, actions: &mut Vec<NodeAction>) {
        if self.node.is_none() {
            actions.push(NodeAction::Start);
        }
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
    pub fn next_backoff_end(&self) -> Option<TimestampMs> {
        self.keys()
            .filter_map(|k| match self.fetch_slot(k)?.status {
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
            NodeAction::Remirror => self.remirror(config),
            NodeAction::Failback(topic_id) => self.failback(config, topic_id),
            NodeAction::GrowStopped(topic_id) => self.grow_stopped(config, topic_id),
            NodeAction::Crash => self.crash(),
            NodeAction::Start => self.start(config),
            NodeAction::SourceAddsPartition(topic_id) => {
                self.add_source_partition(config, topic_id)
            }
            NodeAction::SourceDeletesTopic(topic_id) => self.delete_source_topic(config, topic_id),
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
}
