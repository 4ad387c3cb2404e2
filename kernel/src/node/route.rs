//! Routing one input to one partition: creating it on `BecameLeader`, retiring it after
//! `BecameFollower`, keeping its fetch slot and its `__mirror_state` placement in step with it.

use crate::config::MirrorConfig;
use crate::effect::Effect;
use crate::input::Input;
use crate::partition::{Activity, PartitionMirror};
use crate::partitioner::mirror_state_partition;

use super::{
    FetchRequest, FetchSlot, FetchStatus, Led, NodeEffect, NodeError, NodeLogs, NodeMirror,
    NodeOutput, PartitionKey,
};

impl NodeMirror {
    /// Routes one partition input, creating the partition on `BecameLeader` and dropping it
    /// after `BecameFollower`.
    pub(super) fn route(
        &mut self,
        config: &MirrorConfig,
        key: PartitionKey,
        input: Input,
        logs: &impl NodeLogs,
        out: &mut NodeOutput,
    ) {
        match &input {
            Input::DesiredStateChanged(_) => {
                out.errors.push(NodeError::TopicWideInput { key });
                return;
            }
            Input::BecameLeader { .. } if !self.led.contains_key(&key) => {
                let Some(topic) = self.topics.get(&key.topic_id) else {
                    out.errors.push(NodeError::UnknownTopic {
                        topic_id: key.topic_id,
                    });
                    return;
                };
                if !(0..topic.partitions).contains(&key.partition) {
                    out.errors.push(NodeError::UnknownPartition { key });
                    return;
                }
                if logs.log(&key).is_none() {
                    out.errors.push(NodeError::NoLog { key });
                    return;
                }
                let mirror = match self.retired.remove(&key) {
                    Some(mut mirror) => {
                        // Not leader: the partition only records the desired state.
                        let desired = Input::DesiredStateChanged(topic.desired.clone());
                        if let Some(log) = logs.log(&key) {
                            let _ = mirror.handle(config, desired, log);
                        }
                        mirror
                    }
                    None => PartitionMirror::new(
                        self.config.broker,
                        key.topic_id,
                        key.partition,
                        topic.desired.clone(),
                    ),
                };
                let coordinator = self.placement(&mirror);
                self.led.insert(
                    key,
                    Led {
                        mirror,
                        fetch: None,
                        coordinator,
                    },
                );
                if let Some(c) = coordinator {
                    self.by_coordinator.entry(c).or_default().insert(key);
                }
            }
            _ => {}
        }
        let follower = matches!(input, Input::BecameFollower);
        let leader = matches!(input, Input::BecameLeader { .. });
        self.route_unchecked(config, key, input, logs, out);
        let told = self
            .led
            .get(&key)
            .is_some_and(|l| l.mirror.source_deleted());
        if leader && !told && self.source_deleted(&key.topic_id) {
            self.route_unchecked(config, key, Input::SourceTopicDeleted, logs, out);
        }
        if follower {
            if let Some(led) = self.led.remove(&key) {
                self.retired.insert(key, led.mirror);
                self.unindex(key, led.coordinator);
            }
        }
        if leader && key.partition == 0 {
            self.check_growth(config, key.topic_id, out);
        }
    }

    /// Hands `input` to the led partition `key` and keeps the fetch slot and the coordinator
    /// index in step with it.
    pub(super) fn route_unchecked(
        &mut self,
        config: &MirrorConfig,
        key: PartitionKey,
        input: Input,
        logs: &impl NodeLogs,
        out: &mut NodeOutput,
    ) {
        let Some(log) = logs.log(&key) else {
            let error = if self.led.contains_key(&key) {
                NodeError::NoLog { key }
            } else {
                NodeError::UnknownPartition { key }
            };
            out.errors.push(error);
            return;
        };
        let placement_partitions = self.config.mirror_state_partitions;
        let Some(led) = self.led.get_mut(&key) else {
            out.errors.push(NodeError::UnknownPartition { key });
            return;
        };
        // The answer to the fetch in the slot empties it: the partition asks again if it wants.
        let answered = match &input {
            Input::FetchCompleted { request, .. } | Input::RequestFailed { request, .. } => {
                Some(*request)
            }
            _ => None,
        };
        // Only a new desired state can move the partition's `__mirror_state` key.
        let desired_changed = matches!(input, Input::DesiredStateChanged(_));
        let before = led.fetch;
        if led
            .fetch
            .is_some_and(|s| Some(s.request.request) == answered)
        {
            led.fetch = None;
        }
        let effects = match led.mirror.handle(config, input, log) {
            Ok(effects) => effects,
            Err(reason) => {
                led.fetch = before;
                out.errors.push(NodeError::Ignored { key, reason });
                return;
            }
        };
        for effect in effects {
            match effect {
                Effect::Fetch {
                    request,
                    fetch_offset,
                    last_fetched_epoch,
                    isolation,
                } => {
                    // The same fetch again keeps its place (in flight or backing off).
                    if led.fetch.is_none_or(|s| s.request.request != request) {
                        led.fetch = Some(FetchSlot {
                            request: FetchRequest {
                                request,
                                fetch_offset,
                                last_fetched_epoch,
                                isolation,
                            },
                            status: FetchStatus::Ready { not_before: None },
                        });
                    }
                }
                effect => out.effects.push(NodeEffect::Partition { key, effect }),
            }
        }
        if led
            .fetch
            .is_some_and(|s| led.mirror.activity() != &Activity::Fetching(s.request.request))
        {
            led.fetch = None;
        }
        if !desired_changed {
            return;
        }
        let coordinator = led
            .mirror
            .key()
            .and_then(|k| mirror_state_partition(&k, placement_partitions).ok());
        if coordinator != led.coordinator {
            let old = std::mem::replace(&mut led.coordinator, coordinator);
            self.unindex(key, old);
            if let Some(c) = coordinator {
                self.by_coordinator.entry(c).or_default().insert(key);
            }
        }
    }

    pub(super) fn placement(&self, mirror: &PartitionMirror) -> Option<u32> {
        mirror
            .key()
            .and_then(|k| mirror_state_partition(&k, self.config.mirror_state_partitions).ok())
    }

    pub(super) fn unindex(&mut self, key: PartitionKey, coordinator: Option<u32>) {
        if let Some(c) = coordinator {
            if let Some(keys) = self.by_coordinator.get_mut(&c) {
                keys.remove(&key);
                if keys.is_empty() {
                    self.by_coordinator.remove(&c);
                }
            }
        }
    }
}
