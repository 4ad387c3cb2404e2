//! Topic metadata: a `mirror.name` change fans out to the topic's led partitions; a source
//! topic with more partitions asks for the destination's (Kafka Admin `createPartitions`), one
//! with fewer is refused.

use crate::config::MirrorConfig;
use crate::desired::DesiredState;
use crate::input::Input;
use crate::mutant::{self, Mutant};
use crate::types::{BrokerId, PartitionIndex, TopicId};

use super::{
    fetcher_id, FetchStatus, FetcherKey, NodeEffect, NodeError, NodeLogs, NodeMirror, NodeOutput,
    PartitionKey, Topic,
};

impl NodeMirror {
    pub(super) fn on_topic(
        &mut self,
        config: &MirrorConfig,
        topic_id: TopicId,
        desired: DesiredState,
        partitions: PartitionIndex,
        logs: &impl NodeLogs,
        out: &mut NodeOutput,
    ) {
        let changed = match self.topics.get_mut(&topic_id) {
            None => {
                self.topics.insert(
                    topic_id,
                    Topic {
                        desired: desired.clone(),
                        partitions,
                        source_leaders: None,
                        requested_partitions: None,
                        source_deleted: false,
                    },
                );
                false
            }
            Some(topic) if partitions < topic.partitions => {
                out.errors.push(NodeError::DestinationPartitionsShrank {
                    topic_id,
                    current: topic.partitions,
                    got: partitions,
                });
                return;
            }
            Some(topic) => {
                topic.partitions = partitions;
                let changed = topic.desired != desired;
                topic.desired.clone_from(&desired);
                changed
            }
        };
        if changed {
            let keys: Vec<PartitionKey> =
                if mutant::active(config.mutant, Mutant::StopRoutedToEveryTopic)
                    && matches!(desired, DesiredState::Stop(_))
                {
                    self.led.keys().copied().collect()
                } else {
                    self.led
                        .range(PartitionKey::topic_range(topic_id))
                        .map(|(k, _)| *k)
                        .collect()
                };
            for key in keys {
                let input = Input::DesiredStateChanged(desired.clone());
                self.route_unchecked(config, key, input, logs, out);
            }
        }
        self.check_growth(config, topic_id, out);
    }

    pub(super) fn on_source_topic(
        &mut self,
        config: &MirrorConfig,
        topic_id: TopicId,
        leaders: Vec<Option<BrokerId>>,
        out: &mut NodeOutput,
    ) {
        let Some(topic) = self.topics.get_mut(&topic_id) else {
            out.errors.push(NodeError::UnknownTopic { topic_id });
            return;
        };
        let source_partitions =
            PartitionIndex::try_from(leaders.len()).unwrap_or(PartitionIndex::MAX);
        let mirrored = matches!(
            topic.desired,
            DesiredState::Mirror(_) | DesiredState::Pause(_)
        );
        if mirrored && source_partitions < topic.partitions {
            out.errors.push(NodeError::SourcePartitionsShrank {
                topic_id,
                source_partitions,
                destination_partitions: topic.partitions,
            });
            return;
        }
        topic.source_leaders = Some(leaders);
        // A fetch in flight to a broker that no longer leads its partition is sent again to the
        // new leader; the old leader's answer will be stale.
        let num_fetchers = self.config.num_fetchers;
        let topics = &self.topics;
        for (key, led) in self.led.range_mut(PartitionKey::topic_range(topic_id)) {
            let Some(slot) = led.fetch.as_mut() else {
                continue;
            };
            if let FetchStatus::InFlight(fetcher) = slot.status {
                let leader = topics
                    .get(&key.topic_id)
                    .and_then(|t| t.source_leaders.as_ref())
                    .and_then(|l| {
                        l.get(usize::try_from(key.partition).ok()?)
                            .copied()
                            .flatten()
                    });
                let current = leader.map(|source_broker| FetcherKey {
                    source_broker,
                    fetcher_id: fetcher_id(key, num_fetchers),
                });
                if current != Some(fetcher) {
                    slot.status = FetchStatus::Ready { not_before: None };
                }
            }
        }
        self.check_growth(config, topic_id, out);
    }

    pub(super) fn on_source_topic_deleted(
        &mut self,
        config: &MirrorConfig,
        topic_id: TopicId,
        logs: &impl NodeLogs,
        out: &mut NodeOutput,
    ) {
        let Some(topic) = self.topics.get_mut(&topic_id) else {
            out.errors.push(NodeError::UnknownTopic { topic_id });
            return;
        };
        if std::mem::replace(&mut topic.source_deleted, true) {
            return;
        }
        topic.source_leaders = None;
        let keys: Vec<PartitionKey> = self
            .led
            .range(PartitionKey::topic_range(topic_id))
            .map(|(k, _)| *k)
            .collect();
        for key in keys {
            self.route_unchecked(config, key, Input::SourceTopicDeleted, logs, out);
        }
    }

    /// Whether the source no longer has `topic_id`.
    pub(super) fn source_deleted(&self, topic_id: &TopicId) -> bool {
        self.topics.get(topic_id).is_some_and(|t| t.source_deleted)
    }

    /// Asks for the destination partitions the source has and the destination lacks, once per
    /// count, from the leader of destination partition 0 only.
    pub(super) fn check_growth(
        &mut self,
        config: &MirrorConfig,
        topic_id: TopicId,
        out: &mut NodeOutput,
    ) {
        if !self.led.contains_key(&PartitionKey::new(topic_id, 0)) {
            return;
        }
        let Some(topic) = self.topics.get_mut(&topic_id) else {
            return;
        };
        let Some(leaders) = &topic.source_leaders else {
            return;
        };
        let source = PartitionIndex::try_from(leaders.len()).unwrap_or(PartitionIndex::MAX);
        let mirrored = matches!(
            topic.desired,
            DesiredState::Mirror(_) | DesiredState::Pause(_)
        );
        if mirrored
            && source > topic.partitions
            && topic.requested_partitions.is_none_or(|r| r < source)
            && !mutant::active(config.mutant, Mutant::SourceGrowthIgnored)
        {
            topic.requested_partitions = Some(source);
            out.effects.push(NodeEffect::CreatePartitions {
                topic_id,
                total: source,
            });
        }
    }
}
