//! The topic changes Kafka clients ask ([`crate::serve::topic_admin`]): a regular topic
//! created, grown or deleted, each durable before the client is answered
//! ([`NodeDriver::carry_out`]).
//!
//! **A creation** writes the topic's config overrides (or removes a stale file of that name),
//! then makes it as a growth from no partitions: the directories and logs durable, then
//! `node.properties` naming it, then the node leads its partitions, writable at once (it is in
//! no mirror). A crash before `node.properties` leaves directories open removes and an
//! overrides file no topic names, which the next creation or mirror of that name replaces.
//!
//! **A growth** is the source's growth ([`NodeDriver::grow_topic`]): the new partitions'
//! directories and logs made durable, then `node.properties`, then the node manager hears the
//! topic and leads the new partitions. Those of a topic in no mirror are writable at once. Those
//! of a failed-over topic (`<mirror>.removed`, which it stays: discovery never puts it back)
//! read no mirror state, and the kernel writes them STOPPED, which opens their gates; the answer
//! waits for that (at most [`GATE_WAIT_MS`]), so that a client's first write to a new partition
//! is accepted.
//!
//! **A deletion**, in an order a crash anywhere in it leaves to [`NodeDriver::open`]:
//!
//! 1. the node manager hears `BecameFollower` for each partition: it stops leading them and
//!    keeps them inert, as for any leadership that moved (it has no other way to let a
//!    partition go; a topic id is never reused, so nothing routes to them again);
//! 2. `node.properties` is written without the topic: from here on the topic does not exist;
//! 3. the logs (the followers' too) are dropped (not flushed: nothing of them is kept), their lines leave the log
//!    dir's checkpoint files, their directories are deleted and the log dir is synced;
//! 4. its config overrides and its groups' committed offsets are dropped.
//!
//! A crash after step 2 leaves directories and checkpoint lines no topic names: open removes
//! them before it opens a log ([`remove_unnamed_partitions`]), so that a topic created later
//! under the same name starts empty. The other order, directories first, would leave
//! `node.properties` naming partitions whose directories are gone, which open refuses as lost
//! logs.

use std::collections::BTreeMap;
use std::fs;
use std::io::ErrorKind;
use std::path::Path;

use kmirror_kernel::input::Input;
use kmirror_kernel::node::{NodeInput, PartitionKey};
use kmirror_kernel::types::{PartitionIndex, TopicId};

use crate::file_log::TopicPartition;
use crate::log_dir_checkpoints::LogDirCheckpoints;
use crate::node::dest::NodeMeta;
use crate::node::NodeError;
use crate::serve::{TopicEdit, TopicWork};
use crate::sync::local::MetadataDir;
use crate::topic_partition::MIRROR_STATE_TOPIC;

use super::{NodeDriver, Queued};

/// How long the answer to a CreateTopics or CreatePartitions waits for the new partitions'
/// gates to open (ms); past it the client is answered anyway (the partitions are durable; the
/// gates open a step later).
pub const GATE_WAIT_MS: i64 = 5_000;

/// A CreateTopics or CreatePartitions carried out, whose answer waits for its new partitions' gates.
pub(super) struct Growing {
    work: TopicWork,
    /// The new partitions.
    keys: Vec<PartitionKey>,
    /// When it is answered whatever the gates say.
    deadline_ms: i64,
}

impl NodeDriver {
    /// Makes the edits of `work` in order, then answers it: the edits made succeed, and from
    /// the first that failed on disk on, each is answered `KAFKA_STORAGE_ERROR`; that failure
    /// is then the node's error. A growth's answer waits for the new partitions' gates (see
    /// the [module documentation](self)).
    pub(super) fn carry_out(&mut self, now_ms: i64, work: TopicWork) -> Result<(), NodeError> {
        let mut done = 0;
        let mut failure = None;
        let mut keys = Vec::new();
        for edit in work.edits() {
            let made = match edit {
                TopicEdit::Grow {
                    name,
                    topic_id,
                    total,
                } => self
                    .grow_for_client(name, *topic_id, *total)
                    .map(|new| keys.extend(new)),
                TopicEdit::Create {
                    name,
                    topic_id,
                    partitions,
                    configs,
                } => self
                    .create_for_client(name, *topic_id, *partitions, configs)
                    .map(|new| keys.extend(new)),
                TopicEdit::Delete { name, topic_id } => self.delete_topic(name, *topic_id),
            };
            match made {
                Ok(()) => done += 1,
                Err(e) => {
                    failure = Some(e);
                    break;
                }
            }
        }
        if let Some(e) = failure {
            work.answer(done, &e.to_string());
            return Err(e);
        }
        let growing = Growing {
            work,
            keys,
            deadline_ms: now_ms.saturating_add(GATE_WAIT_MS),
        };
        match self.clients.as_mut() {
            Some(clients) => clients.growing.push(growing),
            None => growing.work.succeed(),
        }
        self.answer_grown(now_ms);
        Ok(())
    }

    /// Answers the growths whose new partitions are all writable, or whose wait ended.
    pub(super) fn answer_grown(&mut self, now_ms: i64) {
        let Some(clients) = self.clients.as_mut() else {
            return;
        };
        if clients.growing.is_empty() {
            return;
        }
        let growing = std::mem::take(&mut clients.growing);
        let mut waiting = Vec::new();
        for g in growing {
            if now_ms >= g.deadline_ms || g.keys.iter().all(|k| self.writable(k)) {
                g.work.succeed();
            } else {
                waiting.push(g);
            }
        }
        if let Some(clients) = self.clients.as_mut() {
            clients.growing = waiting;
        }
    }

    /// CreatePartitions of a regular topic: it grows to `total` partitions. Returns the new
    /// partitions.
    fn grow_for_client(
        &mut self,
        name: &str,
        topic_id: TopicId,
        total: PartitionIndex,
    ) -> Result<Vec<PartitionKey>, NodeError> {
        let Some(topic) = self.dest.meta().topics.get(name).cloned() else {
            return Ok(Vec::new());
        };
        if topic.topic_id != topic_id || total <= topic.partitions {
            return Ok(Vec::new());
        }
        self.grow_topic_to(topic_id, total)?;
        self.events.push(format!(
            "{name}: grown from {} to {total} partitions (CreatePartitions)",
            topic.partitions
        ));
        Ok((topic.partitions..total)
            .map(|p| PartitionKey::new(topic_id, p))
            .collect())
    }

    /// CreateTopics: topic `name` is created in no mirror, with `configs` as its overrides.
    /// Returns its partitions.
    fn create_for_client(
        &mut self,
        name: &str,
        topic_id: TopicId,
        partitions: PartitionIndex,
        configs: &BTreeMap<String, String>,
    ) -> Result<Vec<PartitionKey>, NodeError> {
        if self.dest.meta().topics.contains_key(name) {
            return Ok(Vec::new());
        }
        let dir = MetadataDir::of(self.dest.root());
        if configs.is_empty() {
            remove_file(&dir.topic_config_path(name))?;
        } else {
            dir.write_topic_config(name, configs)
                .map_err(|e| NodeError::Metadata(Box::new(e)))?;
        }
        self.extend_topic(name, topic_id, 0, partitions, None)?;
        self.events.push(format!(
            "{name}: created with {partitions} partition(s) (CreateTopics)"
        ));
        Ok((0..partitions)
            .map(|p| PartitionKey::new(topic_id, p))
            .collect())
    }

    /// DeleteTopics of a regular topic: see the [module documentation](self) for the order.
    fn delete_topic(&mut self, name: &str, topic_id: TopicId) -> Result<(), NodeError> {
        let Some(topic) = self.dest.meta().topics.get(name).cloned() else {
            return Ok(());
        };
        if topic.topic_id != topic_id {
            return Ok(());
        }
        // What is staged may name these partitions: committed first, while they exist.
        self.commit()?;
        let keys: Vec<PartitionKey> = (0..topic.partitions)
            .map(|p| PartitionKey::new(topic_id, p))
            .collect();
        // 1. The node manager lets them go.
        for key in &keys {
            self.feed(Queued::plain(NodeInput::Partition {
                key: *key,
                input: Input::BecameFollower,
            }))?;
        }
        self.queue.retain(|q| !names_topic(&q.input, topic_id));
        for key in &keys {
            self.gates.remove(key);
            self.timers.remove(key);
            self.pending_lme.remove(key);
            self.heard.positions.remove(key);
            self.heard.last_errors.remove(key);
            self.heard.caught_up.remove(key);
        }
        self.leaders_fed.remove(&topic_id);
        // Answers read ahead may name its partitions: dropped, the others are fetched again.
        self.fetched_ahead.clear();
        // 2. The topic no longer exists.
        let mut meta = self.dest.meta().clone();
        meta.topics.remove(name);
        meta.partitions.retain(|(t, _), _| t != name);
        self.dest.set_meta(meta)?;
        // 3. Its logs, checkpoint lines and directories go, the followers' too.
        let mut follower_dirs = Vec::new();
        for key in &keys {
            follower_dirs.extend(self.followers.forget_partition(key));
            let Some(log) = self.logs.remove(key) else {
                continue;
            };
            let tp = log.topic_partition().clone();
            drop(log);
            self.checkpoints.forget(&tp);
        }
        self.write_checkpoints()?;
        let log_dir = self.dest.log_dir();
        for p in 0..topic.partitions {
            remove_dir(&log_dir.join(format!("{name}-{p}")))?;
        }
        for dir in &follower_dirs {
            remove_dir(dir)?;
        }
        self.make_created_durable()?;
        // 4. Its configs and committed offsets.
        remove_file(&MetadataDir::of(self.dest.root()).topic_config_path(name))?;
        if let Some(clients) = self.clients.as_mut() {
            clients.forget_topic(name)?;
        }
        self.events.push(format!(
            "{name}: deleted with its {} partition(s) (DeleteTopics)",
            topic.partitions
        ));
        Ok(())
    }
}

/// Whether `input` is about topic `topic_id` (a queued input for a topic being deleted).
fn names_topic(input: &NodeInput, topic_id: TopicId) -> bool {
    match input {
        NodeInput::Topic { topic_id: t, .. }
        | NodeInput::SourceTopic { topic_id: t, .. }
        | NodeInput::SourceTopicDeleted { topic_id: t } => *t == topic_id,
        NodeInput::Partition { key, .. } => key.topic_id == topic_id,
        NodeInput::CoordinatorAnswer { key, .. } => key.topic_id == topic_id,
        NodeInput::CoordinatorMoved { .. }
        | NodeInput::FetchResponse(_)
        | NodeInput::FetchFailed { .. } => false,
    }
}

/// Deletes file `path` (gone already is fine).
fn remove_file(path: &Path) -> Result<(), NodeError> {
    remove_with(path, |p| fs::remove_file(p))
}

/// Deletes directory `dir` and what it holds (gone already is fine).
fn remove_dir(dir: &Path) -> Result<(), NodeError> {
    remove_with(dir, |p| fs::remove_dir_all(p))
}

/// Deletes `path` with `remove`; a path already gone is fine.
fn remove_with(path: &Path, remove: fn(&Path) -> std::io::Result<()>) -> Result<(), NodeError> {
    match remove(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(()),
        Err(source) => Err(NodeError::Io {
            action: "delete",
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// Removes the partition directories of `log_dir` that `meta` does not name, and their lines
/// in `checkpoints` (written by the caller): what a crash left of a topic deletion (after
/// `node.properties`, before the directories went) or of a creation (directories made,
/// `node.properties` not written yet). `__mirror_state` partitions are the node's own and
/// stay. Returns the directories removed.
pub(super) fn remove_unnamed_partitions(
    log_dir: &Path,
    meta: &NodeMeta,
    checkpoints: &LogDirCheckpoints,
) -> Result<Vec<String>, NodeError> {
    let named = |topic: &str, partition: PartitionIndex| {
        topic == MIRROR_STATE_TOPIC
            || meta
                .topics
                .get(topic)
                .is_some_and(|t| (0..t.partitions).contains(&partition))
    };
    let mut removed = Vec::new();
    let entries = fs::read_dir(log_dir).map_err(|source| NodeError::Io {
        action: "list",
        path: log_dir.to_path_buf(),
        source,
    })?;
    for entry in entries {
        let entry = entry.map_err(|source| NodeError::Io {
            action: "list",
            path: log_dir.to_path_buf(),
            source,
        })?;
        let file_name = entry.file_name();
        let Some(dir_name) = file_name.to_str() else {
            continue;
        };
        let Ok(tp) = TopicPartition::from_dir_name(dir_name) else {
            continue;
        };
        if !entry.path().is_dir() || named(&tp.topic, tp.partition) {
            continue;
        }
        remove_dir(&entry.path())?;
        removed.push(dir_name.to_owned());
    }
    for (topic, partition) in checkpoints.partitions() {
        if !named(&topic, partition) {
            if let Ok(tp) = TopicPartition::new(&topic, partition) {
                checkpoints.forget(&tp);
            }
        }
    }
    if !removed.is_empty() {
        crate::segment::sync_dir(log_dir).map_err(|source| NodeError::Log {
            dir: log_dir.to_path_buf(),
            source: Box::new(source),
        })?;
    }
    removed.sort();
    Ok(removed)
}
