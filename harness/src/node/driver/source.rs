//! The source cluster apart from the fetch rounds: what the driver asks it and feeds the node
//! manager, and what it follows there.
//!
//! - **Source leaders** are input ([`NodeInput::SourceTopic`]): fed at start and after every
//!   round in which the source cluster's metadata names other leaders
//!   ([`NodeDriver::sync_source_leaders`]); answers read ahead from the old leaders are dropped.
//! - **LME queries** ([`NodeDriver::answer_lme_queries`]): the source's log start offsets, in
//!   one ListOffsets (earliest) per broker, and its mirror of us with its LME, in one
//!   `ReadMirrorStates` per broker ([`crate::node::lme_lookup`]). A stock Kafka source does not
//!   serve that lookup (it keeps no `__mirror_state`): every query is answered "no LME", said
//!   once per run in an event line.
//! - **Following** ([`NodeDriver::follow`], [`crate::node::follow`]): the source's metadata is
//!   refreshed on its interval and each new one is searched for new, grown and deleted topics.
//! - **The offsets of the partitions not fetching** (paused, failed, preparing) are asked on
//!   the periodic tick, so that their lag is measured, not remembered
//!   ([`NodeDriver::measure_idle_offsets`]).

use std::collections::BTreeSet;

use kmirror_kernel::config::FetchIsolation;
use kmirror_kernel::desired::DesiredState;
use kmirror_kernel::effect::RequestId;
use kmirror_kernel::input::Input;
use kmirror_kernel::node::{NodeInput, PartitionKey};
use kmirror_kernel::partition::Activity;
use kmirror_kernel::types::{PartitionIndex, TopicId};

use crate::node::follow::{discover_topics, is_gone, left_line, Follow};
use crate::node::NodeError;
use crate::serve::metadata::node_cluster_id;
use crate::wire::client::{EARLIEST_TIMESTAMP, LATEST_TIMESTAMP};
use crate::wire::source_cluster::SourceCluster;

use super::{NodeDriver, Queued, TopicChange};
use crate::node::lme_lookup::{read_reverse_mirrors, ReverseAnswer};

/// A running mirror's selection and what it has seen of the source ([`crate::node::follow`]).
#[derive(Debug)]
pub(super) struct Following {
    follow: Follow,
    /// The source metadata generation discovery last ran on.
    generation: u64,
    /// Topics reported as left out or refused, so each is reported once per run.
    reported: BTreeSet<String>,
    /// Mirrored topics the source no longer has (their partitions were told).
    deleted: BTreeSet<TopicId>,
    /// When the next refresh of the source's metadata may be attempted (ms).
    next_refresh_ms: i64,
}

impl Following {
    /// The selection followed.
    pub(super) fn follow(&self) -> &Follow {
        &self.follow
    }
}

impl NodeDriver {
    /// Feeds the source's leaders of every topic it knows when they differ from what the node
    /// was last told (or always, with `force`).
    pub(super) fn sync_source_leaders(&mut self, force: bool) {
        let Some(metadata) = self
            .source
            .as_ref()
            .and_then(SourceCluster::cached_metadata)
        else {
            return;
        };
        let mut inputs = Vec::new();
        for topic in self.dest.meta().topics.values() {
            let Some(source) = metadata.topic_by_id(topic.topic_id) else {
                continue;
            };
            let count = source
                .partitions
                .iter()
                .map(|p| p.index + 1)
                .max()
                .unwrap_or(0);
            let mut leaders = vec![None; usize::try_from(count).unwrap_or(0)];
            for p in &source.partitions {
                if let Some(slot) = usize::try_from(p.index)
                    .ok()
                    .and_then(|i| leaders.get_mut(i))
                {
                    *slot = p.leader;
                }
            }
            if force || self.leaders_fed.get(&topic.topic_id) != Some(&leaders) {
                // Answers read ahead from the old leaders are asked again.
                self.fetched_ahead.clear();
                self.leaders_fed.insert(topic.topic_id, leaders.clone());
                inputs.push(NodeInput::SourceTopic {
                    topic_id: topic.topic_id,
                    leaders,
                });
            }
        }
        for input in inputs {
            self.queue.push_back(Queued::plain(input));
        }
    }

    /// Answers every pending LME query still awaited with the source's log start offset and,
    /// from a source that serves the lookup, its mirror of us and that mirror's LME (else no
    /// LME), or the error that prevented it; the answers are queued.
    pub(super) fn answer_lme_queries(&mut self) {
        let pending: Vec<(PartitionKey, RequestId)> = std::mem::take(&mut self.pending_lme)
            .into_iter()
            .filter(|(key, request)| {
                self.node
                    .partition(key)
                    .is_some_and(|pm| *pm.activity() == Activity::AwaitingLme(*request))
            })
            .collect();
        let Some(source) = self.source.as_mut() else {
            return;
        };
        let asked: Vec<(TopicId, PartitionIndex)> = pending
            .iter()
            .map(|(k, _)| (k.topic_id, k.partition))
            .collect();
        let starts =
            source.list_offsets(&asked, EARLIEST_TIMESTAMP, FetchIsolation::ReadUncommitted);
        let us = node_cluster_id(self.dest.root(), self.dest.meta().broker);
        let reverse = read_reverse_mirrors(source, &us, &asked);
        let bootstrap = source.bootstrap();
        for ((key, request), (start, reverse)) in
            pending.into_iter().zip(starts.into_iter().zip(reverse))
        {
            let failed = |error: String| Input::RequestFailed { request, error };
            let input = match (start, reverse) {
                (Err(e), _) => failed(e.to_string()),
                (Ok(_), ReverseAnswer::Failed(error)) => failed(error),
                // A stock Kafka broker keeps no KIP-1279 __mirror_state: no LME (Kafka's -1).
                (Ok(start), ReverseAnswer::Unsupported) => {
                    if !std::mem::replace(&mut self.said_no_lme_lookup, true) {
                        self.events.push(format!(
                            "the source {bootstrap} does not serve the LME lookup \
                             (ReadMirrorStates): no last mirrored epoch, so a failback from \
                             it truncates whole partitions and copies them again"
                        ));
                    }
                    Input::LastMirroredEpochReceived {
                        request,
                        lme: None,
                        source_log_start_offset: start,
                    }
                }
                (Ok(start), ReverseAnswer::Found { reverse, lme }) => {
                    Input::SourceMirrorStateReceived {
                        request,
                        reverse,
                        lme,
                        source_log_start_offset: start,
                    }
                }
            };
            if let Input::RequestFailed { error, .. } = &input {
                self.heard.last_errors.insert(key, error.clone());
            }
            self.queue
                .push_back(Queued::plain(NodeInput::Partition { key, input }));
        }
    }

    /// Follows the source's changes with `follow` from now on: see [`crate::node::follow`].
    /// The source cluster (set with [`NodeDriver::set_source`]) should select
    /// [`Follow::source_selection`].
    /// `reported` are topics the caller already reported as left out (not reported again).
    pub fn follow(&mut self, follow: Follow, reported: BTreeSet<String>) {
        self.following = Some(Following {
            follow,
            generation: 0,
            reported,
            deleted: BTreeSet::new(),
            next_refresh_ms: i64::MIN,
        });
    }

    /// Refreshes the source's metadata when [`Follow::metadata_refresh_ms`] passed, and runs
    /// discovery on each new metadata ([`crate::node::follow`]): new topics put in the mirror,
    /// deleted ones told to their partitions. Returns whether it did anything.
    pub(super) fn follow_source(&mut self, now_ms: i64) -> Result<bool, NodeError> {
        let (Some(following), Some(source)) = (self.following.as_mut(), self.source.as_mut())
        else {
            return Ok(false);
        };
        let refresh_ms = following.follow.metadata_refresh_ms.max(1);
        let due = source
            .metadata_age()
            .is_none_or(|age| age.as_millis() >= u128::try_from(refresh_ms).unwrap_or(0));
        if due && now_ms >= following.next_refresh_ms {
            // At most one attempt per interval: a failure keeps the old metadata, and the
            // fetch rounds refresh it themselves after errors.
            following.next_refresh_ms = now_ms.saturating_add(refresh_ms);
            if let Err(e) = source.refresh_metadata() {
                self.events
                    .push(format!("the source's metadata could not be refreshed: {e}"));
            }
        }
        let generation = source.metadata_generation();
        if generation == following.generation {
            return Ok(false);
        }
        following.generation = generation;
        let Some(metadata) = source.cached_metadata().cloned() else {
            return Ok(true);
        };
        let found = discover_topics(
            &following.follow,
            &metadata,
            self.dest.meta(),
            &following.deleted,
        );
        let mut gone: Vec<(String, TopicId)> = found.recreated.clone();
        for (name, id) in &found.missing {
            if is_gone(source.topic_exists(name), *id) {
                gone.push((name.clone(), *id));
            }
        }
        let mut notes = Vec::new();
        for (topic, left) in &found.left {
            if following.reported.insert(topic.clone()) {
                notes.push(left_line(topic, left));
            }
        }
        let mirror = following.follow.mirror.clone();
        self.events.extend(notes);
        if !found.add.is_empty() {
            let results = self.add_topics(&mirror, &found.add, now_ms)?;
            let following = self.following.as_mut().expect("following");
            for (topic, result) in results {
                match result {
                    Ok(TopicChange::Changed) => {
                        following.reported.remove(&topic);
                        self.events
                            .push(format!("{topic}: found at the source: in mirror {mirror}"));
                    }
                    Ok(TopicChange::Unchanged) => {}
                    Err(e) if following.reported.insert(topic.clone()) => self
                        .events
                        .push(format!("{topic}: not mirrored: {}: {}", e.code, e.message)),
                    Err(_) => {}
                }
            }
        }
        for (name, topic_id) in gone {
            let following = self.following.as_mut().expect("following");
            if !following.deleted.insert(topic_id) {
                continue;
            }
            self.events.push(format!(
                "{name}: the source no longer has this topic (id {}): deleted, or re-created \
                 under another id; its partitions go FAILED and are not retried, keeping what \
                 they mirrored, read-only",
                topic_id
            ));
            self.queue
                .push_back(Queued::plain(NodeInput::SourceTopicDeleted { topic_id }));
        }
        self.sync_source_leaders(false);
        Ok(true)
    }

    /// Asks the source's last stable offset of every mirrored partition that is not fetching
    /// (paused, failed, preparing), so that its lag is measured, not remembered; one that
    /// cannot be had is forgotten (its lag is not shown rather than shown stale).
    pub(super) fn measure_idle_offsets(&mut self) {
        let Some(source) = self.source.as_mut() else {
            return;
        };
        let idle: Vec<PartitionKey> = self
            .node
            .partitions()
            .filter(|(key, pm)| {
                matches!(
                    self.node.desired(&key.topic_id),
                    Some(DesiredState::Mirror(_) | DesiredState::Pause(_))
                ) && !matches!(pm.activity(), Activity::Fetching(_))
            })
            .map(|(key, _)| *key)
            .collect();
        if idle.is_empty() {
            return;
        }
        let asked: Vec<(TopicId, PartitionIndex)> =
            idle.iter().map(|k| (k.topic_id, k.partition)).collect();
        let answers = source.list_offsets(&asked, LATEST_TIMESTAMP, FetchIsolation::ReadCommitted);
        for (key, answer) in idle.into_iter().zip(answers) {
            match answer {
                Ok(lso) => {
                    self.heard
                        .positions
                        .entry(key)
                        .or_default()
                        .last_stable_offset = lso;
                }
                // Unknown now: the lag is not shown rather than shown stale.
                Err(_) => {
                    self.heard.positions.remove(&key);
                }
            }
        }
    }
}
