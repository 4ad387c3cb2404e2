//! Mirror requests and topic changes: what changes which topics a node mirrors, and how.
//!
//! **Mirror requests** ([`NodeDriver::request`], [`NodeDriver::request_topics`],
//! [`NodeDriver::add_topics`]) go through the kernel's controller functions and are answered
//! per topic with Kafka's error codes; an accepted topic's new `mirror.name` is written to
//! `node.properties` first, then the node hears [`NodeInput::Topic`] (fanned out to the topic's
//! partitions). The controller decides on stored states, so what is staged for the group
//! commit is committed first.
//!
//! **The control channel** ([`crate::node::control`]): the [`ControlServer`] claims the
//! requests other kmirror processes hand a running mirror and hands each back to the driver,
//! which applies it through [`NodeDriver::request_topics`] and gives the server the results to
//! answer with once the partitions settled ([`NodeDriver::serve_control`]). The server never
//! calls into the driver: it is given the results and the status it answers with.
//!
//! **A topic's growth** (the `CreatePartitions` effect, [`NodeDriver::grow_topic`]): new
//! partition directories and logs made durable, then `node.properties`, then the new
//! partitions are led.

use std::collections::{BTreeMap, BTreeSet};

use kmirror_kernel::controller::{
    apply_config_record, handle_mirror_request, ControllerConfig, MirrorErrorCode, MirrorRequest,
    MirrorRequestError,
};
use kmirror_kernel::node::NodeInput;
use kmirror_kernel::partitioner::mirror_state_partition;
use kmirror_kernel::state::MirrorState;
use kmirror_kernel::types::{MirrorName, MirrorPartition, PartitionIndex, TopicId};

use crate::node::control::{Claim, ControlServer, TopicsVerb};
use crate::node::dest::NodeTopic;
use crate::node::NodeError;
use crate::wire::topic_selection::SelectionMiss;
use crate::wire::TopicSelection;

use super::{NodeDriver, Queued};

/// One topic's answer to a mirror request (Kafka's per-topic result).
pub type TopicResults = BTreeMap<String, Result<TopicChange, MirrorRequestError>>;

/// What an accepted topic's request changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum TopicChange {
    /// Its `mirror.name` changed (or it was created): the partitions move on.
    Changed,
    /// Its `mirror.name` already said so (a repeat): nothing was written.
    Unchanged,
}

impl NodeDriver {
    /// Sends `request` to the controller: the kernel's [`handle_mirror_request`] answers each
    /// topic against `node.properties` and the persisted states; the accepted topics' new
    /// `mirror.name` is written, then the node hears it. Unknown topics are
    /// `UNKNOWN_TOPIC_OR_PARTITION`; nothing changes for a refused topic.
    pub fn request(
        &mut self,
        request: &MirrorRequest,
        now_ms: i64,
    ) -> Result<TopicResults, NodeError> {
        // The controller decides on stored states: the staged ones first.
        self.commit()?;
        self.now_ms = now_ms;
        let meta = self.dest.meta().clone();
        let catalogue = meta.catalogue();
        let states = &self.states;
        let lookup = |k: &MirrorPartition| -> Option<MirrorState> {
            let n = meta.mirror_state_partitions;
            let p = mirror_state_partition(k, n).ok()?;
            states.get(&p)?.coordinator().read_state(k).map(|v| v.state)
        };
        let outcome =
            handle_mirror_request(&catalogue, &lookup, &ControllerConfig::default(), request);
        let mut next = catalogue;
        for record in &outcome.records {
            next = apply_config_record(&next, record);
        }
        let mut new_meta = meta.clone();
        let mut changed = Vec::new();
        for (name, topic) in new_meta.topics.iter_mut() {
            let info = next.topic(name).map(|t| t.mirror_name.clone());
            if let Some(mirror_name) = info {
                if mirror_name != topic.mirror_name {
                    topic.mirror_name = mirror_name;
                    changed.push(name.clone());
                }
            }
        }
        if !changed.is_empty() {
            self.dest.set_meta(new_meta.clone())?;
        }
        let results = outcome
            .results
            .into_iter()
            .map(|(topic, r)| {
                let change = if changed.contains(&topic) {
                    TopicChange::Changed
                } else {
                    TopicChange::Unchanged
                };
                (topic, r.map(|()| change))
            })
            .collect();
        if self.started {
            for name in changed {
                let topic = &new_meta.topics[&name];
                self.queue.push_back(Queued::plain(NodeInput::Topic {
                    topic_id: topic.topic_id,
                    desired: topic.desired(&name)?,
                    partitions: topic.partitions,
                }));
            }
        }
        Ok(results)
    }

    /// `kmirror stop|pause|resume --topics`: resolves `topics` (names and globs, separated by
    /// commas) on this node's topics and sends one RemoveTopicsFromMirror, PauseMirrorTopics
    /// or ResumeMirrorTopics per mirror (each topic under the mirror its `mirror.name` names,
    /// or `mirror`) through [`NodeDriver::request`]. An entry selecting no topic is answered
    /// `UNKNOWN_TOPIC_OR_PARTITION` under its own text; a selection that does not parse is
    /// [`NodeError::Invalid`], changing nothing.
    pub fn request_topics(
        &mut self,
        verb: TopicsVerb,
        topics: &str,
        mirror: Option<&str>,
        now_ms: i64,
    ) -> Result<TopicResults, NodeError> {
        let selection = TopicSelection::parse(topics).map_err(|e| NodeError::Invalid {
            message: e.to_string(),
        })?;
        let meta = self.dest.meta().clone();
        let (selected, misses) = selection.resolve(meta.topics.keys().map(|n| (n.as_str(), false)));
        let mut results = TopicResults::new();
        for miss in misses {
            let (entry, message) = match miss {
                SelectionMiss::UnknownTopic { topic } => {
                    (topic, "the destination has no such topic".to_owned())
                }
                SelectionMiss::NoMatch { glob } => (
                    glob,
                    "the glob matches no topic of the destination".to_owned(),
                ),
            };
            results.insert(
                entry,
                Err(MirrorRequestError::new(
                    MirrorErrorCode::UnknownTopicOrPartition,
                    message,
                )),
            );
        }
        // One request per mirror, each topic under the mirror its mirror.name names.
        let mut by_mirror: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for name in selected {
            let named = meta.topics[&name]
                .desired(&name)
                .ok()
                .and_then(|d| d.mirror().map(ToString::to_string));
            let m = mirror.map(str::to_owned).or(named).unwrap_or_default();
            by_mirror.entry(m).or_default().push(name);
        }
        for (m, names) in by_mirror {
            let request = match verb {
                TopicsVerb::Stop => MirrorRequest::RemoveTopics {
                    mirror: m,
                    topics: names,
                },
                TopicsVerb::Pause => MirrorRequest::PauseTopics {
                    mirror: m,
                    topics: names,
                },
                TopicsVerb::Resume => MirrorRequest::ResumeTopics {
                    mirror: m,
                    topics: names,
                },
            };
            results.extend(self.request(&request, now_ms)?);
        }
        Ok(results)
    }

    /// `AddTopicsToMirror(mirror, topics)` for topics of the source (`(name, id, partition
    /// count)`): a topic new to this node is created (same id and partition count) and put in
    /// `mirror`; one it holds must have the same id and no more partitions than the source. The
    /// mirror is created on the node if needed. Per-topic results, as Kafka gives them.
    pub fn add_topics(
        &mut self,
        mirror: &MirrorName,
        topics: &[(String, TopicId, PartitionIndex)],
        now_ms: i64,
    ) -> Result<TopicResults, NodeError> {
        self.commit()?;
        self.now_ms = now_ms;
        let meta = self.dest.meta().clone();
        let mut results = TopicResults::new();
        let mut candidates = Vec::new();
        for (name, id, count) in topics {
            match meta.topics.get(name) {
                Some(t) if t.topic_id != *id => {
                    results.insert(
                        name.clone(),
                        Err(MirrorRequestError::new(
                            MirrorErrorCode::InvalidClusterMirrorState,
                            format!(
                                "the destination's {name} has topic id {}, the source's has {}: \
                                 two different topics (the source's was re-created, or the \
                                 destination's was created there); mirror it into a new \
                                 destination, or delete the destination's first",
                                t.topic_id, id
                            ),
                        )),
                    );
                }
                Some(t) if t.partitions > *count => {
                    results.insert(
                        name.clone(),
                        Err(MirrorRequestError::new(
                            MirrorErrorCode::InvalidClusterMirrorState,
                            format!(
                                "the source's {name} has {count} partitions but the destination \
                                 has {}: partitions cannot be removed, nothing changes",
                                t.partitions
                            ),
                        )),
                    );
                }
                _ => candidates.push(name.clone()),
            }
        }
        // The controller decides on a catalogue where the new topics exist, unmirrored.
        let mut trial = meta.clone();
        trial.mirrors.insert(mirror.clone());
        for (name, id, count) in topics {
            if candidates.contains(name) && !trial.topics.contains_key(name) {
                trial.topics.insert(
                    name.clone(),
                    NodeTopic {
                        topic_id: *id,
                        partitions: *count,
                        mirror_name: None,
                    },
                );
            }
        }
        let catalogue = trial.catalogue();
        let states = &self.states;
        let lookup = |k: &MirrorPartition| -> Option<MirrorState> {
            let p = mirror_state_partition(k, meta.mirror_state_partitions).ok()?;
            states.get(&p)?.coordinator().read_state(k).map(|v| v.state)
        };
        let request = MirrorRequest::AddTopics {
            mirror: mirror.to_string(),
            topics: candidates.clone(),
        };
        let outcome =
            handle_mirror_request(&catalogue, &lookup, &ControllerConfig::default(), &request);
        let mut next = catalogue;
        for record in &outcome.records {
            next = apply_config_record(&next, record);
        }
        let accepted: Vec<String> = candidates
            .iter()
            .filter(|n| matches!(outcome.result(n), Some(Ok(()))))
            .cloned()
            .collect();
        // Every accepted topic's change in one new `node.properties`, written once: after the
        // new partitions' directories and logs exist (one barrier makes them durable), so
        // that the file never names a partition a crash could lose.
        let mut changed = BTreeSet::new();
        let mut next_meta = self.dest.meta().clone();
        if !accepted.is_empty() {
            next_meta.mirrors.insert(mirror.clone());
        }
        let mut new_logs = Vec::new();
        for name in &accepted {
            let (_, id, count) = topics
                .iter()
                .find(|(n, _, _)| n == name)
                .cloned()
                .unwrap_or_default();
            let mirror_name = next.topic(name).and_then(|t| t.mirror_name.clone());
            let existed = next_meta.topics.get(name).cloned();
            let partitions = existed.as_ref().map_or(count, |t| t.partitions);
            if existed
                .as_ref()
                .is_some_and(|t| t.mirror_name == mirror_name)
            {
                continue;
            }
            changed.insert(name.clone());
            self.dest
                .add_topic_to(&mut next_meta, name, id, partitions, mirror_name)?;
            new_logs.push((name.clone(), id, partitions, existed.is_none()));
        }
        for (name, id, partitions, _) in &new_logs {
            self.open_logs(name, *id, 0..*partitions)?;
        }
        if next_meta != *self.dest.meta() {
            self.make_created_durable()?;
            self.dest.set_meta(next_meta)?;
        }
        if self.started {
            for (name, id, partitions, new) in new_logs {
                let desired = self.dest.meta().topics[&name].desired(&name)?;
                self.queue.push_back(Queued::plain(NodeInput::Topic {
                    topic_id: id,
                    desired,
                    partitions,
                }));
                if new {
                    self.lead(&name, id, 0..partitions)?;
                }
            }
        }
        results.extend(outcome.results.into_iter().map(|(topic, r)| {
            let change = if changed.contains(&topic) {
                TopicChange::Changed
            } else {
                TopicChange::Unchanged
            };
            (topic, r.map(|()| change))
        }));
        Ok(results)
    }

    /// Kafka Admin `createPartitions` on this node: the topic grows to `total` partitions (new
    /// directories and logs made durable, then `node.properties`), and the node leads the new
    /// ones.
    pub(super) fn grow_topic(
        &mut self,
        topic_id: TopicId,
        total: PartitionIndex,
    ) -> Result<(), NodeError> {
        if let Some((name, from)) = self.grow_topic_to(topic_id, total)? {
            self.events.push(format!(
                "{name}: grown from {from} to {total} partitions (the source's count)"
            ));
        }
        Ok(())
    }

    /// Grows topic `topic_id` to `total` partitions: new partition directories and logs made
    /// durable, then `node.properties`, then the node manager hears the topic and the new
    /// partitions are led. Returns the topic's name and former count, or `None` when nothing
    /// changed (an unknown topic, or `total` not above the current count).
    pub(super) fn grow_topic_to(
        &mut self,
        topic_id: TopicId,
        total: PartitionIndex,
    ) -> Result<Option<(String, PartitionIndex)>, NodeError> {
        let Some(name) = self.dest.meta().topic_name(topic_id).map(str::to_owned) else {
            return Ok(None);
        };
        let topic = self.dest.meta().topics[&name].clone();
        if total <= topic.partitions {
            return Ok(None);
        }
        self.extend_topic(&name, topic_id, topic.partitions, total, topic.mirror_name)?;
        Ok(Some((name, topic.partitions)))
    }

    /// Gives topic `name` (id `topic_id`, `mirror.name` `mirror_name`) partitions `from..total`:
    /// their directories and logs made durable, then `node.properties` naming them (the topic
    /// too, when `from` is 0), then the node manager hears the topic and the new partitions are
    /// led.
    pub(super) fn extend_topic(
        &mut self,
        name: &str,
        topic_id: TopicId,
        from: PartitionIndex,
        total: PartitionIndex,
        mirror_name: Option<String>,
    ) -> Result<(), NodeError> {
        let mut meta = self.dest.meta().clone();
        self.dest
            .add_topic_to(&mut meta, name, topic_id, total, mirror_name)?;
        let desired = meta.topics[name].desired(name)?;
        self.open_logs(name, topic_id, from..total)?;
        self.make_created_durable()?;
        self.dest.set_meta(meta)?;
        self.queue.push_back(Queued::plain(NodeInput::Topic {
            topic_id,
            desired,
            partitions: total,
        }));
        self.lead(name, topic_id, from..total)
    }

    /// Serves the destination's control channel ([`crate::node::control`]): from now on the
    /// driver loop applies the `stop`, `pause` and `resume` requests other kmirror processes
    /// hand it, between fetch rounds, and answers each once its partitions settled.
    pub fn serve_control(&mut self) -> Result<(), NodeError> {
        if self.control.is_none() {
            self.control = Some(ControlServer::new(
                self.dest.root(),
                self.options.mirror.stop_strategy,
            )?);
        }
        Ok(())
    }

    /// At most every [`CONTROL_POLL_MS`](crate::node::control::CONTROL_POLL_MS), when serving
    /// the control channel: answers the settled (or overdue) requests, then claims each new
    /// one and applies it ([`NodeDriver::request_topics`]), handing the results back to the
    /// server. Returns whether a request was claimed.
    pub(super) fn poll_control(&mut self, now_ms: i64) -> Result<bool, NodeError> {
        if !self
            .control
            .as_mut()
            .is_some_and(|control| control.poll_due(now_ms))
        {
            return Ok(false);
        }
        self.answer_control(now_ms, false)?;
        let ids = match &self.control {
            Some(control) => control.requests()?,
            None => Vec::new(),
        };
        let mut claimed = false;
        for id in ids {
            let Some(control) = self.control.as_mut() else {
                break;
            };
            let request = match control.claim(&id)? {
                Claim::Withdrawn => continue,
                Claim::Refused => {
                    claimed = true;
                    continue;
                }
                Claim::Apply(request) => request,
            };
            claimed = true;
            let results = self.request_topics(
                request.verb,
                &request.topics,
                request.mirror.as_deref(),
                now_ms,
            );
            if let Some(control) = self.control.as_mut() {
                let line = control.applied(&id, &request, results, now_ms)?;
                self.events.extend(line);
            }
        }
        Ok(claimed)
    }

    /// Answers the control requests whose partitions settled, or that are overdue, or all of
    /// them with `all` (the mirror is ending), from the driver's status.
    pub(super) fn answer_control(&mut self, now_ms: i64, all: bool) -> Result<(), NodeError> {
        if !self
            .control
            .as_ref()
            .is_some_and(ControlServer::has_pending)
        {
            return Ok(());
        }
        let status = self.status();
        match self.control.as_mut() {
            Some(control) => control.answer_settled(&status, now_ms, all),
            None => Ok(()),
        }
    }
}
