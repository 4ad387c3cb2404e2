//! The controller side of cluster mirroring: the topic catalogue, the four mirror requests, and
//! the produce gate. Pure: inputs in, answers and `ConfigRecord`s out.
//!
//! # Flow (KIP-1279, steps 1 to 5 of "Add Topics to Mirror" and 1 to 2 of "Remove"; `docs/design.md`, section 3)
//!
//! 1. A client sends `AddTopicsToMirror` (or `RemoveTopicsFromMirror`, `PauseMirrorTopics`,
//!    `ResumeMirrorTopics`) naming one mirror and a list of topics; the broker forwards it to the
//!    active controller.
//! 2. The controller validates **each topic on its own** against its [`TopicCatalogue`] (does the
//!    topic exist, what does its `mirror.name` say, see [`DesiredState`]) and against the mirror
//!    state of the topic's partitions as persisted in `__mirror_state` (given here as a
//!    [`MirrorStateLookup`], because the catalogue does not hold it).
//! 3. For every accepted topic whose `mirror.name` has to change, it emits one [`ConfigRecord`]
//!    into the metadata log. These functions only *emit*; [`apply_config_record`] applies a
//!    record to a catalogue, so a model can persist records first and apply them after.
//! 4. The response carries one answer per topic ([`MirrorRequestOutcome::results`]): a request
//!    is never all-or-nothing, a refused topic does not stop an accepted one.
//! 5. The partition leaders see the config change and run the per-partition state machine (the
//!    rest of the kernel); until a partition is STOPPED, [`check_produce`] refuses local
//!    producers with `READ_ONLY_TOPIC`.
//!
//! # Decisions, per topic
//!
//! Request-level checks come first and are answered on every topic of the request: the mirror
//! name must be a valid [`MirrorName`] (`INVALID_CLUSTER_MIRROR_NAME`), and a mirror known to
//! this cluster (`UNKNOWN_CLUSTER_MIRROR`). Then, per topic: it must exist
//! (`UNKNOWN_TOPIC_OR_PARTITION`) and its stored `mirror.name` must parse
//! (`INVALID_CLUSTER_MIRROR_NAME`, the message says it is the stored value; never a panic).
//!
//! **Aggregation over partitions.** A topic's partitions move through the state machine
//! independently, so they may be in different states. A request that depends on the mirror state
//! requires **every** partition to be in an allowed state; the error names the lowest partition
//! that is not. A partition with nothing persisted counts as UNKNOWN. States are looked up under
//! the mirror the topic's `mirror.name` names (the key of `__mirror_state` is mirror, topic id,
//! partition). A topic with no partitions passes every such check vacuously.
//!
//! `M` is the mirror of the request, `N` any other mirror; "desired" is the topic's
//! `mirror.name`.
//!
//! | request | desired | partitions | answer |
//! |---|---|---|---|
//! | add | not mirrored | - | ok, writes `M` |
//! | add | `M` | - | ok, no record (repeat) |
//! | add | `N` or `*.paused` | - | `TOPIC_ALREADY_IN_CLUSTER_MIRROR` |
//! | add | `M.removed` or `N.removed` | all STOPPED | ok, writes `M` (failback) |
//! | add | `*.removed` | some not STOPPED | `TOPIC_ALREADY_IN_CLUSTER_MIRROR` |
//! | remove | not mirrored, or `N*` | - | `TOPIC_NOT_IN_CLUSTER_MIRROR` |
//! | remove | `M.removed` | - | ok, no record (repeat) |
//! | remove | `M` | all MIRRORING (\*) | ok, writes `M.removed` |
//! | remove | `M.paused` | all MIRRORING or PAUSED, switch on | ok, writes `M.removed` |
//! | remove | `M.paused` with switch off, or other states | | `INVALID_CLUSTER_MIRROR_STATE` |
//! | pause | not mirrored, or `N*` | - | `TOPIC_NOT_IN_CLUSTER_MIRROR` |
//! | pause | `M.paused` | - | ok, no record (repeat) |
//! | pause | `M` | all MIRRORING | ok, writes `M.paused` |
//! | pause | `M` (other states) or `M.removed` | | `INVALID_CLUSTER_MIRROR_STATE` |
//! | resume | not mirrored, or `N*` | - | `TOPIC_NOT_IN_CLUSTER_MIRROR` |
//! | resume | `M.paused` | all MIRRORING or PAUSED | ok, writes `M` |
//! | resume | `M.paused` | some other state | `INVALID_CLUSTER_MIRROR_STATE` |
//! | resume | `M` | some PAUSED | ok, no record (repeat while the resume is in flight) |
//! | resume | `M` | none PAUSED | `MIRROR_TOPIC_NOT_PAUSED` |
//! | resume | `M.removed` | - | `MIRROR_TOPIC_NOT_PAUSED` |
//!
//! (\*) With [`ControllerConfig::allow_stop_from_paused`] on, PAUSED partitions are also accepted
//! (a resume may be in flight). The KIP prototypes disagree on stopping a paused topic, hence the
//! switch; it should match the [`TransitionTable`](crate::state::TransitionTable) in use.
//!
//! **Repeats.** A request repeated after it succeeded is answered ok without a second record:
//! add, remove and pause recognise their own result in `mirror.name` whatever the partitions do.
//! Resume cannot: once its record is applied, `mirror.name=M` looks exactly like a topic that was
//! never paused. A repeated resume is therefore a no-op success while any partition is still
//! PAUSED (the resume has not finished), and `MIRROR_TOPIC_NOT_PAUSED` once every partition has
//! left PAUSED; either way nothing is written. Failback is not a repeat: a `*.removed` topic whose
//! partitions are all STOPPED is simply free to join a mirror again.
//!
//! A topic named twice in one request is evaluated once; it has one answer and at most one
//! record.

use std::collections::BTreeMap;
use std::fmt;

use im::{OrdMap, OrdSet};
use serde::{Deserialize, Serialize};

use crate::desired::{DesiredState, MIRROR_NAME_CONFIG};
use crate::state::MirrorState;
use crate::types::{InvalidMirrorName, MirrorName, MirrorPartition, PartitionIndex, TopicId};

/// What the controller knows of one topic.
#[derive(Clone, PartialEq, Eq, Hash, Debug, Serialize, Deserialize)]
pub struct TopicInfo {
    /// The topic's id (the `topic_id` of its `__mirror_state` keys).
    pub topic_id: TopicId,
    /// Number of partitions; partitions are `0..partitions` (a negative count means none).
    pub partitions: PartitionIndex,
    /// The raw `mirror.name` config value; `None` when the config is absent.
    pub mirror_name: Option<String>,
}

impl TopicInfo {
    /// A topic that is not mirrored (`mirror.name` absent).
    pub fn new(topic_id: TopicId, partitions: PartitionIndex) -> Self {
        TopicInfo {
            topic_id,
            partitions,
            mirror_name: None,
        }
    }

    /// The desired state its `mirror.name` encodes, or why that value does not parse.
    pub fn desired_state(&self) -> Result<DesiredState, InvalidMirrorName> {
        DesiredState::parse(self.mirror_name.as_deref())
    }

    /// The partition indexes of the topic, in order.
    pub fn partition_indexes(&self) -> std::ops::Range<PartitionIndex> {
        0..self.partitions.max(0)
    }
}

/// The controller's view of a cluster: its topics by name and the mirrors created on it.
///
/// A value type on persistent `im` collections (cloning is O(1)), ordered, so it can be part of
/// a model state.
#[derive(Clone, PartialEq, Eq, Hash, Debug, Default, Serialize, Deserialize)]
pub struct TopicCatalogue {
    topics: OrdMap<String, TopicInfo>,
    mirrors: OrdSet<MirrorName>,
}

impl TopicCatalogue {
    /// An empty catalogue: no topics, no mirrors.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds (or replaces) topic `name`; returns the previous entry.
    pub fn insert_topic(&mut self, name: impl Into<String>, info: TopicInfo) -> Option<TopicInfo> {
        self.topics.insert(name.into(), info)
    }

    /// Builder form of [`TopicCatalogue::insert_topic`].
    pub fn with_topic(mut self, name: impl Into<String>, info: TopicInfo) -> Self {
        self.insert_topic(name, info);
        self
    }

    /// Records that mirror `name` exists on this cluster; false if it already did.
    pub fn insert_mirror(&mut self, name: MirrorName) -> bool {
        self.mirrors.insert(name).is_none()
    }

    /// Builder form of [`TopicCatalogue::insert_mirror`].
    pub fn with_mirror(mut self, name: MirrorName) -> Self {
        self.insert_mirror(name);
        self
    }

    /// The topic called `name`, if it exists.
    pub fn topic(&self, name: &str) -> Option<&TopicInfo> {
        self.topics.get(name)
    }

    /// Every topic, by name in order.
    pub fn topics(&self) -> impl Iterator<Item = (&String, &TopicInfo)> {
        self.topics.iter()
    }

    /// Whether mirror `name` exists on this cluster.
    pub fn contains_mirror(&self, name: &MirrorName) -> bool {
        self.mirrors.contains(name)
    }

    /// Every mirror, in order.
    pub fn mirrors(&self) -> impl Iterator<Item = &MirrorName> {
        self.mirrors.iter()
    }
}

/// A topic config change, as written to the metadata log (Kafka's `ConfigRecord` for a topic).
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize)]
pub struct ConfigRecord {
    /// The topic's name.
    pub topic: String,
    /// The config key; the requests here only write [`MIRROR_NAME_CONFIG`].
    pub key: String,
    /// The new value; `None` deletes the config (Kafka's null value).
    pub value: Option<String>,
}

impl ConfigRecord {
    /// A record setting `mirror.name` of `topic` to the encoding of `desired`.
    pub fn mirror_name(topic: impl Into<String>, desired: &DesiredState) -> Self {
        ConfigRecord {
            topic: topic.into(),
            key: MIRROR_NAME_CONFIG.to_string(),
            value: Some(desired.config_value()),
        }
    }
}

/// Applies `record` to `catalogue` and returns the result (the input is left untouched).
///
/// Only `mirror.name` is held by the catalogue: a record for any other key, or for a topic the
/// catalogue does not know (for instance deleted since), leaves it unchanged. A `None` value
/// removes the config, making the topic not mirrored.
pub fn apply_config_record(catalogue: &TopicCatalogue, record: &ConfigRecord) -> TopicCatalogue {
    let mut next = catalogue.clone();
    if record.key != MIRROR_NAME_CONFIG {
        return next;
    }
    if let Some(info) = next.topics.get_mut(&record.topic) {
        info.mirror_name = record.value.clone();
    }
    next
}

/// Applies `records` in order with [`apply_config_record`].
pub fn apply_config_records<'a>(
    catalogue: &TopicCatalogue,
    records: impl IntoIterator<Item = &'a ConfigRecord>,
) -> TopicCatalogue {
    records
        .into_iter()
        .fold(catalogue.clone(), |c, r| apply_config_record(&c, r))
}

/// The persisted mirror state of partitions, as the controller sees it (from `__mirror_state`).
///
/// `None` means nothing is persisted for that partition, which counts as UNKNOWN. Implemented for
/// closures `Fn(&MirrorPartition) -> Option<MirrorState>` and for ordered maps from
/// [`MirrorPartition`] to [`MirrorState`].
pub trait MirrorStateLookup {
    /// The persisted state of `partition`, `None` if nothing is persisted.
    fn mirror_state(&self, partition: &MirrorPartition) -> Option<MirrorState>;
}

impl<F> MirrorStateLookup for F
where
    F: Fn(&MirrorPartition) -> Option<MirrorState>,
{
    fn mirror_state(&self, partition: &MirrorPartition) -> Option<MirrorState> {
        self(partition)
    }
}

impl MirrorStateLookup for BTreeMap<MirrorPartition, MirrorState> {
    fn mirror_state(&self, partition: &MirrorPartition) -> Option<MirrorState> {
        self.get(partition).copied()
    }
}

impl MirrorStateLookup for OrdMap<MirrorPartition, MirrorState> {
    fn mirror_state(&self, partition: &MirrorPartition) -> Option<MirrorState> {
        self.get(partition).copied()
    }
}

/// Switches of the controller's request validation.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Serialize, Deserialize)]
pub struct ControllerConfig {
    /// Whether `RemoveTopicsFromMirror` accepts PAUSED partitions (and a `.paused` topic) as well
    /// as MIRRORING ones. Should agree with the transition table's `PAUSED -> STOPPING` edge.
    pub allow_stop_from_paused: bool,
    /// Whether `ResumeMirrorTopics` needs every partition PAUSED (the prototype's broker
    /// validation, `docs/prototype.md` section 4.1) rather than PAUSED or still MIRRORING (a
    /// pause in flight).
    #[serde(default)]
    pub resume_only_when_paused: bool,
}

impl ControllerConfig {
    /// The validation that agrees with the partitions' `config`: stopping a PAUSED topic as its
    /// table allows, resuming only a PAUSED one in the prototype design.
    pub fn for_kernel(config: &crate::config::MirrorConfig) -> Self {
        ControllerConfig {
            allow_stop_from_paused: config.transitions.is_legal(
                MirrorState::Paused,
                MirrorState::Stopping,
                None,
            ),
            resume_only_when_paused: config.design == crate::state::Design::Prototype,
        }
    }
}

impl Default for ControllerConfig {
    /// Stopping from PAUSED allowed, like `TransitionTable::default()`.
    fn default() -> Self {
        ControllerConfig {
            allow_stop_from_paused: true,
            resume_only_when_paused: false,
        }
    }
}

/// Kafka's error names for the mirror requests.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize)]
pub enum MirrorErrorCode {
    /// `UNKNOWN_TOPIC_OR_PARTITION`: the topic does not exist.
    UnknownTopicOrPartition,
    /// `UNKNOWN_CLUSTER_MIRROR`: no mirror of that name exists on this cluster.
    UnknownClusterMirror,
    /// `TOPIC_ALREADY_IN_CLUSTER_MIRROR`: the topic belongs to a mirror and is not STOPPED.
    TopicAlreadyInClusterMirror,
    /// `TOPIC_NOT_IN_CLUSTER_MIRROR`: the topic does not belong to the mirror named.
    TopicNotInClusterMirror,
    /// `INVALID_CLUSTER_MIRROR_NAME`: a mirror name (requested or stored) is invalid.
    InvalidClusterMirrorName,
    /// `INVALID_CLUSTER_MIRROR_STATE`: the topic's mirror state does not allow the request.
    InvalidClusterMirrorState,
    /// `MIRROR_TOPIC_NOT_PAUSED`: resume of a topic that is not paused.
    MirrorTopicNotPaused,
}

impl MirrorErrorCode {
    /// Every code.
    pub const ALL: [MirrorErrorCode; 7] = [
        MirrorErrorCode::UnknownTopicOrPartition,
        MirrorErrorCode::UnknownClusterMirror,
        MirrorErrorCode::TopicAlreadyInClusterMirror,
        MirrorErrorCode::TopicNotInClusterMirror,
        MirrorErrorCode::InvalidClusterMirrorName,
        MirrorErrorCode::InvalidClusterMirrorState,
        MirrorErrorCode::MirrorTopicNotPaused,
    ];

    /// Kafka's name of the error, e.g. `"UNKNOWN_CLUSTER_MIRROR"`.
    pub const fn name(self) -> &'static str {
        match self {
            MirrorErrorCode::UnknownTopicOrPartition => "UNKNOWN_TOPIC_OR_PARTITION",
            MirrorErrorCode::UnknownClusterMirror => "UNKNOWN_CLUSTER_MIRROR",
            MirrorErrorCode::TopicAlreadyInClusterMirror => "TOPIC_ALREADY_IN_CLUSTER_MIRROR",
            MirrorErrorCode::TopicNotInClusterMirror => "TOPIC_NOT_IN_CLUSTER_MIRROR",
            MirrorErrorCode::InvalidClusterMirrorName => "INVALID_CLUSTER_MIRROR_NAME",
            MirrorErrorCode::InvalidClusterMirrorState => "INVALID_CLUSTER_MIRROR_STATE",
            MirrorErrorCode::MirrorTopicNotPaused => "MIRROR_TOPIC_NOT_PAUSED",
        }
    }

    /// The generic description of the error (like the default message of Kafka's `Errors`).
    pub const fn default_message(self) -> &'static str {
        match self {
            MirrorErrorCode::UnknownTopicOrPartition => {
                "This server does not host this topic-partition."
            }
            MirrorErrorCode::UnknownClusterMirror => "The cluster mirror does not exist.",
            MirrorErrorCode::TopicAlreadyInClusterMirror => {
                "The topic already belongs to a cluster mirror that is not stopped."
            }
            MirrorErrorCode::TopicNotInClusterMirror => {
                "The topic does not belong to the cluster mirror."
            }
            MirrorErrorCode::InvalidClusterMirrorName => "The cluster mirror name is invalid.",
            MirrorErrorCode::InvalidClusterMirrorState => {
                "The mirror state of the topic does not allow this request."
            }
            MirrorErrorCode::MirrorTopicNotPaused => "The mirror topic is not paused.",
        }
    }
}

impl fmt::Display for MirrorErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Why one topic of a mirror request was refused: a Kafka error code and a specific message.
#[derive(Clone, PartialEq, Eq, Hash, Debug, Serialize, Deserialize, thiserror::Error)]
#[error("{code}: {message}")]
pub struct MirrorRequestError {
    /// The error code.
    pub code: MirrorErrorCode,
    /// What exactly is wrong, for a human.
    pub message: String,
}

impl MirrorRequestError {
    /// An error with `code` and `message`.
    pub fn new(code: MirrorErrorCode, message: impl Into<String>) -> Self {
        MirrorRequestError {
            code,
            message: message.into(),
        }
    }
}

/// The answer to a mirror request: one result per distinct topic, and the records to persist.
#[derive(Clone, PartialEq, Eq, Hash, Debug, Default, Serialize, Deserialize)]
pub struct MirrorRequestOutcome {
    /// Each topic of the request (named once or more) with its answer.
    pub results: BTreeMap<String, Result<(), MirrorRequestError>>,
    /// One record per accepted topic whose `mirror.name` changes, in request order.
    pub records: Vec<ConfigRecord>,
}

impl MirrorRequestOutcome {
    /// The answer for `topic`, if it was part of the request.
    pub fn result(&self, topic: &str) -> Option<&Result<(), MirrorRequestError>> {
        self.results.get(topic)
    }

    /// The error code for `topic`: `None` when it succeeded or was not part of the request.
    pub fn error_code(&self, topic: &str) -> Option<MirrorErrorCode> {
        match self.results.get(topic) {
            Some(Err(e)) => Some(e.code),
            _ => None,
        }
    }

    /// Whether every topic succeeded.
    pub fn all_ok(&self) -> bool {
        self.results.values().all(Result::is_ok)
    }
}

/// One of the four mirror requests, as data (for models that generate requests).
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize)]
pub enum MirrorRequest {
    /// `AddTopicsToMirror`.
    AddTopics {
        /// The mirror name as sent (validated on handling).
        mirror: String,
        /// The topics.
        topics: Vec<String>,
    },
    /// `RemoveTopicsFromMirror`.
    RemoveTopics {
        /// The mirror name as sent.
        mirror: String,
        /// The topics.
        topics: Vec<String>,
    },
    /// `PauseMirrorTopics`.
    PauseTopics {
        /// The mirror name as sent.
        mirror: String,
        /// The topics.
        topics: Vec<String>,
    },
    /// `ResumeMirrorTopics`.
    ResumeTopics {
        /// The mirror name as sent.
        mirror: String,
        /// The topics.
        topics: Vec<String>,
    },
}

/// Handles any [`MirrorRequest`] with the matching function below.
pub fn handle_mirror_request(
    catalogue: &TopicCatalogue,
    states: &impl MirrorStateLookup,
    config: &ControllerConfig,
    request: &MirrorRequest,
) -> MirrorRequestOutcome {
    match request {
        MirrorRequest::AddTopics { mirror, topics } => {
            add_topics_to_mirror(catalogue, states, mirror, topics)
        }
        MirrorRequest::RemoveTopics { mirror, topics } => {
            remove_topics_from_mirror(catalogue, states, config, mirror, topics)
        }
        MirrorRequest::PauseTopics { mirror, topics } => {
            pause_mirror_topics(catalogue, states, mirror, topics)
        }
        MirrorRequest::ResumeTopics { mirror, topics } => {
            resume_mirror_topics(catalogue, states, config, mirror, topics)
        }
    }
}

/// `AddTopicsToMirror`: puts each topic in `mirror` (`mirror.name=<mirror>`).
///
/// A topic is accepted if it is not mirrored, or if its `mirror.name` ends in `.removed` and
/// every partition is STOPPED (failback; the new mirror may differ from the old one). A topic
/// already in `mirror` is a no-op success. See the module table for every case.
pub fn add_topics_to_mirror<S: AsRef<str>>(
    catalogue: &TopicCatalogue,
    states: &impl MirrorStateLookup,
    mirror: &str,
    topics: &[S],
) -> MirrorRequestOutcome {
    handle(catalogue, mirror, topics, |m, topic, info, desired| {
        use MirrorErrorCode::TopicAlreadyInClusterMirror as Already;
        match desired {
            DesiredState::NotMirrored => Ok(Some(DesiredState::Mirror(m.clone()))),
            DesiredState::Mirror(n) if n == *m => Ok(None),
            DesiredState::Mirror(n) => Err(MirrorRequestError::new(
                Already,
                format!("topic {topic:?} is already in cluster mirror {n}"),
            )),
            DesiredState::Pause(n) => Err(MirrorRequestError::new(
                Already,
                format!("topic {topic:?} is already in cluster mirror {n} (paused)"),
            )),
            DesiredState::Stop(n) => {
                match first_outside(states, &n, info, &[MirrorState::Stopped]) {
                    None => Ok(Some(DesiredState::Mirror(m.clone()))),
                    Some((p, s)) => Err(MirrorRequestError::new(
                        Already,
                        format!(
                            "topic {topic:?} is being removed from cluster mirror {n} but \
                             partition {p} is {s}, not STOPPED; it can join a mirror once \
                             every partition is STOPPED"
                        ),
                    )),
                }
            }
        }
    })
}

/// `RemoveTopicsFromMirror`: stops (fails over) each topic of `mirror` (`.removed` suffix).
///
/// Each topic must be in `mirror` with every partition MIRRORING; with
/// [`ControllerConfig::allow_stop_from_paused`] a paused topic and PAUSED partitions are accepted
/// too. A topic already `.removed` from `mirror` is a no-op success.
pub fn remove_topics_from_mirror<S: AsRef<str>>(
    catalogue: &TopicCatalogue,
    states: &impl MirrorStateLookup,
    config: &ControllerConfig,
    mirror: &str,
    topics: &[S],
) -> MirrorRequestOutcome {
    let allowed: &[MirrorState] = if config.allow_stop_from_paused {
        &[MirrorState::Mirroring, MirrorState::Paused]
    } else {
        &[MirrorState::Mirroring]
    };
    handle(catalogue, mirror, topics, |m, topic, info, desired| {
        match in_mirror(m, topic, desired)? {
            DesiredState::Stop(_) => return Ok(None),
            DesiredState::Pause(_) if !config.allow_stop_from_paused => {
                return Err(MirrorRequestError::new(
                    MirrorErrorCode::InvalidClusterMirrorState,
                    format!(
                        "topic {topic:?} is paused in cluster mirror {m}; resume it before \
                         removing it (stopping a paused topic is disabled)"
                    ),
                ))
            }
            _ => {}
        }
        require_all(states, m, topic, info, allowed, "removed from")?;
        Ok(Some(DesiredState::Stop(m.clone())))
    })
}

/// `PauseMirrorTopics`: pauses each topic of `mirror` (`.paused` suffix).
///
/// Each topic must be in `mirror`, not removed, with every partition MIRRORING. A topic already
/// paused is a no-op success.
pub fn pause_mirror_topics<S: AsRef<str>>(
    catalogue: &TopicCatalogue,
    states: &impl MirrorStateLookup,
    mirror: &str,
    topics: &[S],
) -> MirrorRequestOutcome {
    handle(catalogue, mirror, topics, |m, topic, info, desired| {
        match in_mirror(m, topic, desired)? {
            DesiredState::Pause(_) => return Ok(None),
            DesiredState::Stop(_) => {
                return Err(MirrorRequestError::new(
                    MirrorErrorCode::InvalidClusterMirrorState,
                    removed_message(states, m, topic, info, "paused"),
                ))
            }
            _ => {}
        }
        require_all(
            states,
            m,
            topic,
            info,
            &[MirrorState::Mirroring],
            "paused in",
        )?;
        Ok(Some(DesiredState::Pause(m.clone())))
    })
}

/// `ResumeMirrorTopics`: resumes each paused topic of `mirror` (drops the `.paused` suffix).
///
/// Each topic must be paused in `mirror` with every partition PAUSED or MIRRORING (a pause may
/// still be in flight; only PAUSED with [`ControllerConfig::resume_only_when_paused`]); a topic
/// that is not paused is `MIRROR_TOPIC_NOT_PAUSED`, except that a repeat while a partition is
/// still PAUSED is a no-op success (see the module doc).
pub fn resume_mirror_topics<S: AsRef<str>>(
    catalogue: &TopicCatalogue,
    states: &impl MirrorStateLookup,
    config: &ControllerConfig,
    mirror: &str,
    topics: &[S],
) -> MirrorRequestOutcome {
    handle(
        catalogue,
        mirror,
        topics,
        |m, topic, info, desired| match in_mirror(m, topic, desired)? {
            DesiredState::Pause(_) => {
                require_all(
                    states,
                    m,
                    topic,
                    info,
                    if config.resume_only_when_paused {
                        &[MirrorState::Paused]
                    } else {
                        &[MirrorState::Paused, MirrorState::Mirroring]
                    },
                    "resumed in",
                )?;
                Ok(Some(DesiredState::Mirror(m.clone())))
            }
            DesiredState::Mirror(_) => {
                let any_paused =
                    partition_states(states, m, info).any(|(_, s)| s == MirrorState::Paused);
                if any_paused {
                    Ok(None)
                } else {
                    Err(MirrorRequestError::new(
                        MirrorErrorCode::MirrorTopicNotPaused,
                        format!("topic {topic:?} is not paused in cluster mirror {m}"),
                    ))
                }
            }
            _ => Err(MirrorRequestError::new(
                MirrorErrorCode::MirrorTopicNotPaused,
                removed_message(states, m, topic, info, "resumed"),
            )),
        },
    )
}

/// Why a topic removed from mirror `m` cannot be `verb` (paused, resumed): failed over once
/// every partition is STOPPED, still failing over otherwise.
fn removed_message(
    states: &impl MirrorStateLookup,
    m: &MirrorName,
    topic: &str,
    info: &TopicInfo,
    verb: &str,
) -> String {
    if partition_states(states, m, info).all(|(_, s)| s == MirrorState::Stopped) {
        format!(
            "topic {topic:?} was removed from cluster mirror {m} and is stopped (failed over, \
             writable): it cannot be {verb}; a failback (AddTopicsToMirror) mirrors it again"
        )
    } else {
        format!("topic {topic:?} is being removed from cluster mirror {m}: it cannot be {verb}")
    }
}

/// Why a produce request to a partition is refused.
#[derive(Clone, PartialEq, Eq, Hash, Debug, Serialize, Deserialize, thiserror::Error)]
pub enum ProduceError {
    /// `UNKNOWN_TOPIC_OR_PARTITION`: the topic does not exist.
    #[error("UNKNOWN_TOPIC_OR_PARTITION: topic {topic:?} does not exist")]
    UnknownTopicOrPartition {
        /// The topic asked for.
        topic: String,
    },
    /// `READ_ONLY_TOPIC`: the topic is mirrored and the partition is not STOPPED.
    #[error(
        "READ_ONLY_TOPIC: topic {topic:?} is mirrored (mirror.name={mirror_name:?}) and the \
         partition is {state}, not STOPPED"
    )]
    ReadOnlyTopic {
        /// The topic.
        topic: String,
        /// Its raw `mirror.name` value.
        mirror_name: String,
        /// The partition's mirror state.
        state: MirrorState,
    },
}

impl ProduceError {
    /// Kafka's name of the error.
    pub const fn name(&self) -> &'static str {
        match self {
            ProduceError::UnknownTopicOrPartition { .. } => "UNKNOWN_TOPIC_OR_PARTITION",
            ProduceError::ReadOnlyTopic { .. } => "READ_ONLY_TOPIC",
        }
    }
}

/// The produce gate: may local clients write to a partition of `topic` whose mirror state is
/// `mirror_state` (pass UNKNOWN when nothing is persisted)?
///
/// A topic that is not mirrored (`mirror.name` absent or empty) is writable whatever
/// `mirror_state` says. A mirrored topic is writable only when the partition is STOPPED; this
/// includes a `mirror.name` that does not parse, which fails closed (it is non-empty, so the
/// topic is treated as mirrored).
pub fn check_produce(
    catalogue: &TopicCatalogue,
    topic: &str,
    mirror_state: MirrorState,
) -> Result<(), ProduceError> {
    let info = catalogue
        .topic(topic)
        .ok_or_else(|| ProduceError::UnknownTopicOrPartition {
            topic: topic.to_string(),
        })?;
    let mirrored = !matches!(info.desired_state(), Ok(DesiredState::NotMirrored));
    if !mirrored || mirror_state.is_writable() {
        return Ok(());
    }
    Err(ProduceError::ReadOnlyTopic {
        topic: topic.to_string(),
        mirror_name: info.mirror_name.clone().unwrap_or_default(),
        state: mirror_state,
    })
}

/// A topic's decision: `Ok(Some(d))` accept and write `d`, `Ok(None)` accept without a record.
type Decision = Result<Option<DesiredState>, MirrorRequestError>;

/// The common driver: request-level checks, per-topic existence and parsing, then `decide`.
fn handle<S: AsRef<str>>(
    catalogue: &TopicCatalogue,
    mirror: &str,
    topics: &[S],
    decide: impl Fn(&MirrorName, &str, &TopicInfo, DesiredState) -> Decision,
) -> MirrorRequestOutcome {
    let request_error = match MirrorName::new(mirror) {
        Err(e) => Err(MirrorRequestError::new(
            MirrorErrorCode::InvalidClusterMirrorName,
            format!("invalid cluster mirror name {mirror:?}: {e}"),
        )),
        Ok(m) if !catalogue.contains_mirror(&m) => Err(MirrorRequestError::new(
            MirrorErrorCode::UnknownClusterMirror,
            format!("cluster mirror {m} does not exist on this cluster"),
        )),
        Ok(m) => Ok(m),
    };
    let mut outcome = MirrorRequestOutcome::default();
    for topic in topics {
        let topic = topic.as_ref();
        if outcome.results.contains_key(topic) {
            continue;
        }
        let result = match &request_error {
            Err(e) => Err(e.clone()),
            Ok(m) => decide_topic(catalogue, m, topic, &decide).map(|write| {
                if let Some(desired) = write {
                    outcome
                        .records
                        .push(ConfigRecord::mirror_name(topic, &desired));
                }
            }),
        };
        outcome.results.insert(topic.to_string(), result);
    }
    outcome
}

/// Existence and parse checks of one topic, then `decide`.
fn decide_topic(
    catalogue: &TopicCatalogue,
    mirror: &MirrorName,
    topic: &str,
    decide: &impl Fn(&MirrorName, &str, &TopicInfo, DesiredState) -> Decision,
) -> Decision {
    let info = catalogue.topic(topic).ok_or_else(|| {
        MirrorRequestError::new(
            MirrorErrorCode::UnknownTopicOrPartition,
            format!("topic {topic:?} does not exist"),
        )
    })?;
    let desired = info.desired_state().map_err(|e| {
        MirrorRequestError::new(
            MirrorErrorCode::InvalidClusterMirrorName,
            format!(
                "topic {topic:?} has an invalid stored {MIRROR_NAME_CONFIG}={:?}: {e}",
                info.mirror_name.as_deref().unwrap_or_default()
            ),
        )
    })?;
    decide(mirror, topic, info, desired)
}

/// `desired` if it names `mirror`, else `TOPIC_NOT_IN_CLUSTER_MIRROR`.
fn in_mirror(
    mirror: &MirrorName,
    topic: &str,
    desired: DesiredState,
) -> Result<DesiredState, MirrorRequestError> {
    match desired.mirror() {
        Some(n) if n == mirror => Ok(desired),
        Some(n) => Err(MirrorRequestError::new(
            MirrorErrorCode::TopicNotInClusterMirror,
            format!("topic {topic:?} is in cluster mirror {n}, not {mirror}"),
        )),
        None => Err(MirrorRequestError::new(
            MirrorErrorCode::TopicNotInClusterMirror,
            format!("topic {topic:?} is not mirrored"),
        )),
    }
}

/// The state of each partition of the topic under `mirror` (UNKNOWN when nothing is persisted).
fn partition_states<'a>(
    states: &'a impl MirrorStateLookup,
    mirror: &'a MirrorName,
    info: &'a TopicInfo,
) -> impl Iterator<Item = (PartitionIndex, MirrorState)> + 'a {
    info.partition_indexes().map(move |partition| {
        let key = MirrorPartition {
            mirror: mirror.clone(),
            topic_id: info.topic_id,
            partition,
        };
        (
            partition,
            states.mirror_state(&key).unwrap_or(MirrorState::Unknown),
        )
    })
}

/// The lowest partition whose state is not in `allowed`, if any.
fn first_outside(
    states: &impl MirrorStateLookup,
    mirror: &MirrorName,
    info: &TopicInfo,
    allowed: &[MirrorState],
) -> Option<(PartitionIndex, MirrorState)> {
    partition_states(states, mirror, info).find(|(_, s)| !allowed.contains(s))
}

/// `INVALID_CLUSTER_MIRROR_STATE` unless every partition is in `allowed`.
fn require_all(
    states: &impl MirrorStateLookup,
    mirror: &MirrorName,
    topic: &str,
    info: &TopicInfo,
    allowed: &[MirrorState],
    action: &str,
) -> Result<(), MirrorRequestError> {
    match first_outside(states, mirror, info, allowed) {
        None => Ok(()),
        Some((p, s)) => {
            let allowed: Vec<String> = allowed.iter().map(ToString::to_string).collect();
            Err(MirrorRequestError::new(
                MirrorErrorCode::InvalidClusterMirrorState,
                format!(
                    "topic {topic:?} cannot be {action} cluster mirror {mirror}: partition {p} \
                     is {s}, every partition must be {}",
                    allowed.join(" or ")
                ),
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::MirrorErrorCode::*;
    use super::MirrorState::*;
    use super::*;
    use proptest::prelude::*;

    type States = BTreeMap<MirrorPartition, MirrorState>;

    fn name(s: &str) -> MirrorName {
        MirrorName::new(s).unwrap()
    }

    fn id(n: u64) -> TopicId {
        TopicId::from_u64(n)
    }

    /// Mirrors `east` and `west`; topics `a` (3 partitions, id 1), `b` (1, id 2), `c` (2, id 3),
    /// all not mirrored.
    fn catalogue() -> TopicCatalogue {
        TopicCatalogue::new()
            .with_mirror(name("east"))
            .with_mirror(name("west"))
            .with_topic("a", TopicInfo::new(id(1), 3))
            .with_topic("b", TopicInfo::new(id(2), 1))
            .with_topic("c", TopicInfo::new(id(3), 2))
    }

    fn set(cat: &TopicCatalogue, topic: &str, value: &str) -> TopicCatalogue {
        apply_config_record(
            cat,
            &ConfigRecord {
                topic: topic.into(),
                key: MIRROR_NAME_CONFIG.into(),
                value: Some(value.into()),
            },
        )
    }

    /// Every partition of `topic` under `mirror` in `state`.
    fn put(states: &mut States, cat: &TopicCatalogue, mirror: &str, topic: &str, s: MirrorState) {
        let info = cat.topic(topic).unwrap();
        for p in info.partition_indexes() {
            put_one(states, cat, mirror, topic, p, s);
        }
    }

    fn put_one(
        states: &mut States,
        cat: &TopicCatalogue,
        mirror: &str,
        topic: &str,
        partition: PartitionIndex,
        s: MirrorState,
    ) {
        let key = MirrorPartition {
            mirror: name(mirror),
            topic_id: cat.topic(topic).unwrap().topic_id,
            partition,
        };
        states.insert(key, s);
    }

    fn rec(topic: &str, value: &str) -> ConfigRecord {
        ConfigRecord {
            topic: topic.into(),
            key: MIRROR_NAME_CONFIG.into(),
            value: Some(value.into()),
        }
    }

    fn code(o: &MirrorRequestOutcome, topic: &str) -> Option<MirrorErrorCode> {
        assert!(o.result(topic).is_some(), "no answer for {topic}");
        o.error_code(topic)
    }

    const ON: ControllerConfig = ControllerConfig {
        allow_stop_from_paused: true,
        resume_only_when_paused: false,
    };
    const OFF: ControllerConfig = ControllerConfig {
        allow_stop_from_paused: false,
        resume_only_when_paused: false,
    };

    fn add(cat: &TopicCatalogue, st: &States, m: &str, t: &[&str]) -> MirrorRequestOutcome {
        add_topics_to_mirror(cat, st, m, t)
    }
    fn remove(
        cat: &TopicCatalogue,
        st: &States,
        cfg: ControllerConfig,
        m: &str,
        t: &[&str],
    ) -> MirrorRequestOutcome {
        remove_topics_from_mirror(cat, st, &cfg, m, t)
    }
    fn pause(cat: &TopicCatalogue, st: &States, m: &str, t: &[&str]) -> MirrorRequestOutcome {
        pause_mirror_topics(cat, st, m, t)
    }
    fn resume(cat: &TopicCatalogue, st: &States, m: &str, t: &[&str]) -> MirrorRequestOutcome {
        resume_mirror_topics(cat, st, &ON, m, t)
    }

    /// All four requests on the same catalogue, mirror and topics.
    fn all_requests(
        cat: &TopicCatalogue,
        st: &States,
        m: &str,
        t: &[&str],
    ) -> Vec<MirrorRequestOutcome> {
        vec![
            add(cat, st, m, t),
            remove(cat, st, ON, m, t),
            remove(cat, st, OFF, m, t),
            pause(cat, st, m, t),
            resume(cat, st, m, t),
        ]
    }

    // ---- request-level and common per-topic errors, for every request ----

    #[test]
    fn invalid_mirror_name_is_answered_on_every_topic_of_every_request() {
        let cat = catalogue();
        for bad in ["", "a b", "east.removed", "east.paused", ".."] {
            for o in all_requests(&cat, &States::new(), bad, &["a", "nope"]) {
                assert_eq!(code(&o, "a"), Some(InvalidClusterMirrorName), "{bad:?}");
                assert_eq!(code(&o, "nope"), Some(InvalidClusterMirrorName));
                assert!(o.records.is_empty());
            }
        }
    }

    #[test]
    fn unknown_mirror_is_answered_on_every_topic_of_every_request() {
        let cat = catalogue();
        for o in all_requests(&cat, &States::new(), "north", &["a", "b"]) {
            assert_eq!(code(&o, "a"), Some(UnknownClusterMirror));
            assert_eq!(code(&o, "b"), Some(UnknownClusterMirror));
            assert!(o.records.is_empty());
            assert!(o
                .result("a")
                .unwrap()
                .as_ref()
                .unwrap_err()
                .message
                .contains("north"));
        }
    }

    #[test]
    fn unknown_topic_for_every_request() {
        let cat = catalogue();
        for o in all_requests(&cat, &States::new(), "east", &["nope"]) {
            assert_eq!(code(&o, "nope"), Some(UnknownTopicOrPartition));
            assert!(o.records.is_empty());
        }
    }

    #[test]
    fn unparsable_stored_mirror_name_is_reported_per_topic_for_every_request() {
        let cat = set(&catalogue(), "a", "east west");
        let cat = set(&cat, "c", "east.paused.removed");
        for o in all_requests(&cat, &States::new(), "east", &["a", "b", "c"]) {
            assert_eq!(code(&o, "a"), Some(InvalidClusterMirrorName));
            assert_eq!(code(&o, "c"), Some(InvalidClusterMirrorName));
            let msg = &o.result("a").unwrap().as_ref().unwrap_err().message;
            assert!(msg.contains("stored"), "{msg}");
            // `b` is answered on its own merits.
            assert!(o.result("b").is_some());
            assert!(o.records.iter().all(|r| r.topic == "b"));
        }
    }

    // ---- AddTopicsToMirror ----

    #[test]
    fn add_accepts_unmirrored_topics_and_emits_one_record_each() {
        let cat = catalogue();
        let o = add(&cat, &States::new(), "east", &["a", "b"]);
        assert!(o.all_ok());
        assert_eq!(o.records, vec![rec("a", "east"), rec("b", "east")]);
        // The request itself does not change the catalogue; applying does.
        assert_eq!(cat.topic("a").unwrap().mirror_name, None);
        let cat = apply_config_records(&cat, &o.records);
        assert_eq!(cat.topic("a").unwrap().mirror_name.as_deref(), Some("east"));
    }

    #[test]
    fn add_treats_empty_mirror_name_as_not_mirrored() {
        let cat = set(&catalogue(), "a", "");
        let o = add(&cat, &States::new(), "east", &["a"]);
        assert!(o.all_ok());
        assert_eq!(o.records, vec![rec("a", "east")]);
    }

    #[test]
    fn add_repeated_is_a_noop_success_whatever_the_partitions() {
        let cat = set(&catalogue(), "a", "east");
        for s in MirrorState::ALL {
            let mut st = States::new();
            put(&mut st, &cat, "east", "a", s);
            let o = add(&cat, &st, "east", &["a"]);
            assert!(o.all_ok(), "{s}");
            assert!(o.records.is_empty());
        }
    }

    #[test]
    fn add_refuses_a_topic_active_or_paused_in_another_or_same_mirror() {
        let cat = set(&catalogue(), "a", "west");
        let cat = set(&cat, "b", "east.paused");
        let cat = set(&cat, "c", "west.paused");
        let mut st = States::new();
        put(&mut st, &cat, "west", "a", Stopped); // even STOPPED: a re-add to west is pending
        let o = add(&cat, &st, "east", &["a", "b", "c"]);
        assert_eq!(code(&o, "a"), Some(TopicAlreadyInClusterMirror));
        assert_eq!(code(&o, "b"), Some(TopicAlreadyInClusterMirror));
        assert_eq!(code(&o, "c"), Some(TopicAlreadyInClusterMirror));
        assert!(o.records.is_empty());
    }

    #[test]
    fn add_refuses_a_removed_topic_until_every_partition_is_stopped() {
        let cat = set(&catalogue(), "a", "west.removed");
        let mut st = States::new();
        put(&mut st, &cat, "west", "a", Stopped);
        put_one(&mut st, &cat, "west", "a", 1, Stopping);
        let o = add(&cat, &st, "east", &["a"]);
        assert_eq!(code(&o, "a"), Some(TopicAlreadyInClusterMirror));
        let msg = &o.result("a").unwrap().as_ref().unwrap_err().message;
        assert!(msg.contains("partition 1 is STOPPING"), "{msg}");
        // Nothing persisted counts as UNKNOWN, not STOPPED.
        let mut st2 = States::new();
        put_one(&mut st2, &cat, "west", "a", 0, Stopped);
        let o = add(&cat, &st2, "east", &["a"]);
        assert_eq!(code(&o, "a"), Some(TopicAlreadyInClusterMirror));
        // Once every partition is STOPPED it is accepted.
        put_one(&mut st, &cat, "west", "a", 1, Stopped);
        let o = add(&cat, &st, "east", &["a"]);
        assert!(o.all_ok());
        assert_eq!(o.records, vec![rec("a", "east")]);
    }

    #[test]
    fn add_failback_of_a_stopped_topic_to_the_same_or_another_mirror() {
        let cat = set(&catalogue(), "a", "east.removed");
        let mut st = States::new();
        put(&mut st, &cat, "east", "a", Stopped);
        for m in ["east", "west"] {
            let o = add(&cat, &st, m, &["a"]);
            assert!(o.all_ok(), "{m}");
            assert_eq!(o.records, vec![rec("a", m)]);
            // The repeat after applying is a no-op success.
            let after = apply_config_records(&cat, &o.records);
            let again = add(&after, &st, m, &["a"]);
            assert!(again.all_ok());
            assert!(again.records.is_empty());
        }
    }

    #[test]
    fn add_looks_states_up_under_the_topics_own_mirror() {
        // STOPPED under `east` says nothing about a topic removed from `west`.
        let cat = set(&catalogue(), "b", "west.removed");
        let mut st = States::new();
        put(&mut st, &cat, "east", "b", Stopped);
        let o = add(&cat, &st, "east", &["b"]);
        assert_eq!(code(&o, "b"), Some(TopicAlreadyInClusterMirror));
    }

    // ---- RemoveTopicsFromMirror ----

    #[test]
    fn remove_accepts_mirroring_topics_and_appends_removed() {
        let cat = set(&set(&catalogue(), "a", "east"), "b", "east");
        let mut st = States::new();
        put(&mut st, &cat, "east", "a", Mirroring);
        put(&mut st, &cat, "east", "b", Mirroring);
        for cfg in [ON, OFF] {
            let o = remove(&cat, &st, cfg, "east", &["a", "b"]);
            assert!(o.all_ok());
            assert_eq!(
                o.records,
                vec![rec("a", "east.removed"), rec("b", "east.removed")]
            );
        }
    }

    #[test]
    fn remove_refuses_topics_not_in_the_mirror() {
        let cat = set(&catalogue(), "a", "west");
        let cat = set(&cat, "c", "west.removed");
        let mut st = States::new();
        put(&mut st, &cat, "west", "a", Mirroring);
        let o = remove(&cat, &st, ON, "east", &["a", "b", "c"]);
        assert_eq!(code(&o, "a"), Some(TopicNotInClusterMirror));
        assert_eq!(code(&o, "b"), Some(TopicNotInClusterMirror));
        assert_eq!(code(&o, "c"), Some(TopicNotInClusterMirror));
        assert!(o.records.is_empty());
    }

    #[test]
    fn remove_refuses_partitions_that_are_not_mirroring() {
        let cat = set(&catalogue(), "a", "east");
        for s in [Unknown, Preparing, Stopping, Stopped, Failed] {
            let mut st = States::new();
            put(&mut st, &cat, "east", "a", Mirroring);
            put_one(&mut st, &cat, "east", "a", 2, s);
            for cfg in [ON, OFF] {
                let o = remove(&cat, &st, cfg, "east", &["a"]);
                assert_eq!(code(&o, "a"), Some(InvalidClusterMirrorState), "{s}");
                let msg = &o.result("a").unwrap().as_ref().unwrap_err().message;
                assert!(msg.contains(&format!("partition 2 is {s}")), "{msg}");
                assert!(o.records.is_empty());
            }
        }
    }

    #[test]
    fn remove_of_paused_depends_on_the_switch() {
        // Desired paused, partitions PAUSED (or a pause still in flight).
        let cat = set(&catalogue(), "a", "east.paused");
        let mut st = States::new();
        put(&mut st, &cat, "east", "a", Paused);
        put_one(&mut st, &cat, "east", "a", 0, Mirroring);
        let o = remove(&cat, &st, ON, "east", &["a"]);
        assert!(o.all_ok());
        assert_eq!(o.records, vec![rec("a", "east.removed")]);
        let o = remove(&cat, &st, OFF, "east", &["a"]);
        assert_eq!(code(&o, "a"), Some(InvalidClusterMirrorState));
        assert!(o.records.is_empty());
        // Desired paused but every partition still MIRRORING: still refused with the switch off.
        let mut st = States::new();
        put(&mut st, &cat, "east", "a", Mirroring);
        let o = remove(&cat, &st, OFF, "east", &["a"]);
        assert_eq!(code(&o, "a"), Some(InvalidClusterMirrorState));
        // Desired mirroring (resume in flight), a partition still PAUSED.
        let cat = set(&catalogue(), "a", "east");
        let mut st = States::new();
        put(&mut st, &cat, "east", "a", Mirroring);
        put_one(&mut st, &cat, "east", "a", 1, Paused);
        assert!(remove(&cat, &st, ON, "east", &["a"]).all_ok());
        let o = remove(&cat, &st, OFF, "east", &["a"]);
        assert_eq!(code(&o, "a"), Some(InvalidClusterMirrorState));
    }

    #[test]
    fn remove_repeated_is_a_noop_success_whatever_the_partitions() {
        let cat = set(&catalogue(), "a", "east.removed");
        for s in MirrorState::ALL {
            let mut st = States::new();
            put(&mut st, &cat, "east", "a", s);
            for cfg in [ON, OFF] {
                let o = remove(&cat, &st, cfg, "east", &["a"]);
                assert!(o.all_ok(), "{s}");
                assert!(o.records.is_empty());
            }
        }
    }

    // ---- PauseMirrorTopics ----

    #[test]
    fn pause_accepts_mirroring_topics_and_repeats_are_noops() {
        let cat = set(&catalogue(), "a", "east");
        let mut st = States::new();
        put(&mut st, &cat, "east", "a", Mirroring);
        let o = pause(&cat, &st, "east", &["a"]);
        assert!(o.all_ok());
        assert_eq!(o.records, vec![rec("a", "east.paused")]);
        let cat = apply_config_records(&cat, &o.records);
        for s in MirrorState::ALL {
            put(&mut st, &cat, "east", "a", s);
            let again = pause(&cat, &st, "east", &["a"]);
            assert!(again.all_ok(), "{s}");
            assert!(again.records.is_empty());
        }
    }

    #[test]
    fn pause_refuses_topics_not_in_the_mirror() {
        let cat = set(&catalogue(), "a", "west");
        let cat = set(&cat, "c", "west.paused");
        let o = pause(&cat, &States::new(), "east", &["a", "b", "c"]);
        assert_eq!(code(&o, "a"), Some(TopicNotInClusterMirror));
        assert_eq!(code(&o, "b"), Some(TopicNotInClusterMirror));
        assert_eq!(code(&o, "c"), Some(TopicNotInClusterMirror));
    }

    #[test]
    fn pause_refuses_non_mirroring_partitions_and_removed_topics() {
        let cat = set(&catalogue(), "a", "east");
        for s in MirrorState::ALL.into_iter().filter(|&s| s != Mirroring) {
            let mut st = States::new();
            put(&mut st, &cat, "east", "a", Mirroring);
            put_one(&mut st, &cat, "east", "a", 1, s);
            let o = pause(&cat, &st, "east", &["a"]);
            assert_eq!(code(&o, "a"), Some(InvalidClusterMirrorState), "{s}");
            assert!(o.records.is_empty());
        }
        let cat = set(&catalogue(), "a", "east.removed");
        let mut st = States::new();
        put(&mut st, &cat, "east", "a", Mirroring);
        let o = pause(&cat, &st, "east", &["a"]);
        assert_eq!(code(&o, "a"), Some(InvalidClusterMirrorState));
    }

    // ---- ResumeMirrorTopics ----

    #[test]
    fn resume_accepts_paused_topics_including_a_pause_in_flight() {
        let cat = set(&catalogue(), "a", "east.paused");
        let mut st = States::new();
        put(&mut st, &cat, "east", "a", Paused);
        put_one(&mut st, &cat, "east", "a", 2, Mirroring);
        let o = resume(&cat, &st, "east", &["a"]);
        assert!(o.all_ok());
        assert_eq!(o.records, vec![rec("a", "east")]);
    }

    #[test]
    fn the_prototype_resumes_only_when_every_partition_is_paused() {
        let cat = set(&catalogue(), "a", "east.paused");
        let mut st = States::new();
        put(&mut st, &cat, "east", "a", Paused);
        put_one(&mut st, &cat, "east", "a", 2, Pausing);
        let prototype = ControllerConfig::for_kernel(&crate::config::MirrorConfig::prototype());
        assert_eq!(
            prototype,
            ControllerConfig {
                allow_stop_from_paused: true,
                resume_only_when_paused: true
            }
        );
        let o = resume_mirror_topics(&cat, &st, &prototype, "east", &["a"]);
        assert_eq!(code(&o, "a"), Some(InvalidClusterMirrorState));
        put_one(&mut st, &cat, "east", "a", 2, Mirroring);
        let o = resume_mirror_topics(&cat, &st, &prototype, "east", &["a"]);
        assert_eq!(
            code(&o, "a"),
            Some(InvalidClusterMirrorState),
            "a pause in flight"
        );
        put_one(&mut st, &cat, "east", "a", 2, Paused);
        let o = resume_mirror_topics(&cat, &st, &prototype, "east", &["a"]);
        assert!(o.all_ok());
        assert_eq!(
            ControllerConfig::for_kernel(&crate::config::MirrorConfig::default()),
            ON
        );
    }

    #[test]
    fn resume_refuses_a_paused_topic_with_a_partition_in_another_state() {
        let cat = set(&catalogue(), "a", "east.paused");
        for s in [Unknown, Preparing, Stopping, Stopped, Failed] {
            let mut st = States::new();
            put(&mut st, &cat, "east", "a", Paused);
            put_one(&mut st, &cat, "east", "a", 0, s);
            let o = resume(&cat, &st, "east", &["a"]);
            assert_eq!(code(&o, "a"), Some(InvalidClusterMirrorState), "{s}");
            assert!(o.records.is_empty());
        }
    }

    #[test]
    fn resume_of_a_topic_that_is_not_paused() {
        let cat = set(&catalogue(), "a", "east");
        let cat = set(&cat, "c", "east.removed");
        let mut st = States::new();
        put(&mut st, &cat, "east", "a", Mirroring);
        put(&mut st, &cat, "east", "c", Paused);
        let o = resume(&cat, &st, "east", &["a", "c"]);
        assert_eq!(code(&o, "a"), Some(MirrorTopicNotPaused));
        assert_eq!(code(&o, "c"), Some(MirrorTopicNotPaused));
        assert!(o.records.is_empty());
        for s in [Unknown, Preparing, Stopping, Stopped, Failed] {
            put(&mut st, &cat, "east", "a", s);
            let o = resume(&cat, &st, "east", &["a"]);
            assert_eq!(code(&o, "a"), Some(MirrorTopicNotPaused), "{s}");
        }
    }

    #[test]
    fn resume_repeated_while_in_flight_is_a_noop_then_not_paused() {
        let cat = set(&catalogue(), "a", "east.paused");
        let mut st = States::new();
        put(&mut st, &cat, "east", "a", Paused);
        let o = resume(&cat, &st, "east", &["a"]);
        let cat = apply_config_records(&cat, &o.records);
        // Repeat before any partition left PAUSED, and while some still are.
        let again = resume(&cat, &st, "east", &["a"]);
        assert!(again.all_ok());
        assert!(again.records.is_empty());
        put_one(&mut st, &cat, "east", "a", 0, Mirroring);
        assert!(resume(&cat, &st, "east", &["a"]).all_ok());
        // Every partition back to MIRRORING: the topic is simply not paused.
        put(&mut st, &cat, "east", "a", Mirroring);
        let late = resume(&cat, &st, "east", &["a"]);
        assert_eq!(code(&late, "a"), Some(MirrorTopicNotPaused));
        assert!(late.records.is_empty());
    }

    #[test]
    fn resume_refuses_topics_not_in_the_mirror() {
        let cat = set(&catalogue(), "a", "west.paused");
        let o = resume(&cat, &States::new(), "east", &["a", "b"]);
        assert_eq!(code(&o, "a"), Some(TopicNotInClusterMirror));
        assert_eq!(code(&o, "b"), Some(TopicNotInClusterMirror));
    }

    // ---- cross-cutting ----

    #[test]
    fn topics_of_one_request_are_answered_independently() {
        let cat = set(&catalogue(), "b", "west");
        let cat = set(&cat, "c", "east");
        let o = add(&cat, &States::new(), "east", &["a", "nope", "b", "c"]);
        assert_eq!(o.results.len(), 4);
        assert_eq!(o.result("a"), Some(&Ok(())));
        assert_eq!(code(&o, "nope"), Some(UnknownTopicOrPartition));
        assert_eq!(code(&o, "b"), Some(TopicAlreadyInClusterMirror));
        assert_eq!(o.result("c"), Some(&Ok(())));
        assert!(!o.all_ok());
        assert_eq!(o.records, vec![rec("a", "east")]);

        // Same for remove: one MIRRORING, one PREPARING, one not in the mirror.
        let cat = set(&set(&catalogue(), "a", "east"), "b", "east");
        let mut st = States::new();
        put(&mut st, &cat, "east", "a", Mirroring);
        put(&mut st, &cat, "east", "b", Preparing);
        let o = remove(&cat, &st, ON, "east", &["a", "b", "c"]);
        assert_eq!(o.result("a"), Some(&Ok(())));
        assert_eq!(code(&o, "b"), Some(InvalidClusterMirrorState));
        assert_eq!(code(&o, "c"), Some(TopicNotInClusterMirror));
        assert_eq!(o.records, vec![rec("a", "east.removed")]);
    }

    #[test]
    fn a_topic_named_twice_is_answered_once_with_one_record() {
        let cat = catalogue();
        let o = add(&cat, &States::new(), "east", &["b", "a", "b"]);
        assert_eq!(o.results.len(), 2);
        assert!(o.all_ok());
        assert_eq!(o.records, vec![rec("b", "east"), rec("a", "east")]);
    }

    #[test]
    fn full_lifecycle_with_failback() {
        let cfg = ControllerConfig::default();
        let mut cat = catalogue();
        let mut st = States::new();
        let step = |cat: &TopicCatalogue, st: &States, r: MirrorRequest| {
            let o = handle_mirror_request(cat, st, &cfg, &r);
            assert!(o.all_ok(), "{r:?}: {o:?}");
            assert_eq!(o.records.len(), 1, "{r:?}");
            apply_config_records(cat, &o.records)
        };
        let req =
            |f: fn(String, Vec<String>) -> MirrorRequest, m: &str| f(m.into(), vec!["b".into()]);
        let add_r = |m: String, topics| MirrorRequest::AddTopics { mirror: m, topics };
        let pause_r = |m: String, topics| MirrorRequest::PauseTopics { mirror: m, topics };
        let resume_r = |m: String, topics| MirrorRequest::ResumeTopics { mirror: m, topics };
        let remove_r = |m: String, topics| MirrorRequest::RemoveTopics { mirror: m, topics };

        cat = step(&cat, &st, req(add_r, "east"));
        assert_eq!(
            check_produce(&cat, "b", Unknown).unwrap_err().name(),
            "READ_ONLY_TOPIC"
        );
        put(&mut st, &cat, "east", "b", Mirroring);
        cat = step(&cat, &st, req(pause_r, "east"));
        put(&mut st, &cat, "east", "b", Paused);
        cat = step(&cat, &st, req(resume_r, "east"));
        put(&mut st, &cat, "east", "b", Mirroring);
        cat = step(&cat, &st, req(remove_r, "east"));
        assert!(check_produce(&cat, "b", Stopping).is_err());
        put(&mut st, &cat, "east", "b", Stopped);
        assert_eq!(check_produce(&cat, "b", Stopped), Ok(()));
        // Failback through the reverse mirror.
        cat = step(&cat, &st, req(add_r, "west"));
        assert_eq!(cat.topic("b").unwrap().mirror_name.as_deref(), Some("west"));
        assert!(check_produce(&cat, "b", Unknown).is_err());
    }

    #[test]
    fn lookup_accepts_closures_and_im_maps() {
        let cat = set(&catalogue(), "b", "east");
        let closure = |p: &MirrorPartition| (p.mirror.as_str() == "east").then_some(Mirroring);
        let o = pause_mirror_topics(&cat, &closure, "east", &["b"]);
        assert!(o.all_ok());
        let mut ord: OrdMap<MirrorPartition, MirrorState> = OrdMap::new();
        ord.insert(
            MirrorPartition {
                mirror: name("east"),
                topic_id: id(2),
                partition: 0,
            },
            Mirroring,
        );
        let o = pause_mirror_topics(&cat, &ord, "east", &[String::from("b")]);
        assert!(o.all_ok());
        let none = |_: &MirrorPartition| None;
        let o = pause_mirror_topics(&cat, &none, "east", &["b"]);
        assert_eq!(code(&o, "b"), Some(InvalidClusterMirrorState));
    }

    #[test]
    fn a_topic_without_partitions_passes_partition_checks_vacuously() {
        let cat = catalogue().with_topic("z", TopicInfo::new(id(9), -1));
        let cat = set(&cat, "z", "east.removed");
        let o = add(&cat, &States::new(), "west", &["z"]);
        assert!(o.all_ok());
    }

    #[test]
    fn apply_config_record_ignores_other_keys_and_unknown_topics_and_none_clears() {
        let cat = set(&catalogue(), "a", "east");
        let other = ConfigRecord {
            topic: "a".into(),
            key: "retention.ms".into(),
            value: Some("1".into()),
        };
        assert_eq!(apply_config_record(&cat, &other), cat);
        assert_eq!(apply_config_record(&cat, &rec("nope", "east")), cat);
        let cleared = apply_config_record(
            &cat,
            &ConfigRecord {
                topic: "a".into(),
                key: MIRROR_NAME_CONFIG.into(),
                value: None,
            },
        );
        assert_eq!(cleared.topic("a").unwrap().mirror_name, None);
        assert_eq!(cat.topic("a").unwrap().mirror_name.as_deref(), Some("east"));
    }

    #[test]
    fn error_codes_have_kafka_names() {
        let names: Vec<_> = MirrorErrorCode::ALL.iter().map(|c| c.name()).collect();
        assert_eq!(
            names,
            [
                "UNKNOWN_TOPIC_OR_PARTITION",
                "UNKNOWN_CLUSTER_MIRROR",
                "TOPIC_ALREADY_IN_CLUSTER_MIRROR",
                "TOPIC_NOT_IN_CLUSTER_MIRROR",
                "INVALID_CLUSTER_MIRROR_NAME",
                "INVALID_CLUSTER_MIRROR_STATE",
                "MIRROR_TOPIC_NOT_PAUSED",
            ]
        );
        for c in MirrorErrorCode::ALL {
            assert_eq!(c.to_string(), c.name());
            assert!(!c.default_message().is_empty());
        }
        let e = MirrorRequestError::new(MirrorTopicNotPaused, "x");
        assert_eq!(e.to_string(), "MIRROR_TOPIC_NOT_PAUSED: x");
    }

    // ---- produce gate ----

    #[test]
    fn produce_gate_across_every_state() {
        let cat = set(&catalogue(), "a", "east");
        let cat = set(&cat, "b", "east.removed");
        let cat = set(&cat, "c", "east.paused");
        for s in MirrorState::ALL {
            for t in ["a", "b", "c"] {
                let r = check_produce(&cat, t, s);
                if s == Stopped {
                    assert_eq!(r, Ok(()), "{t} {s}");
                } else {
                    let e = r.unwrap_err();
                    assert_eq!(e.name(), "READ_ONLY_TOPIC");
                    assert!(matches!(e, ProduceError::ReadOnlyTopic { state, .. } if state == s));
                }
            }
        }
    }

    #[test]
    fn produce_gate_not_mirrored_topics_are_writable_in_any_state() {
        let cat = set(&catalogue(), "b", "");
        for s in MirrorState::ALL {
            assert_eq!(check_produce(&cat, "a", s), Ok(()));
            assert_eq!(check_produce(&cat, "b", s), Ok(()));
        }
    }

    #[test]
    fn produce_gate_unknown_topic_and_unparsable_config_fails_closed() {
        let cat = set(&catalogue(), "a", "bad name");
        for s in MirrorState::ALL {
            let e = check_produce(&cat, "nope", s).unwrap_err();
            assert_eq!(e.name(), "UNKNOWN_TOPIC_OR_PARTITION");
            let r = check_produce(&cat, "a", s);
            assert_eq!(r.is_ok(), s == Stopped, "{s}");
        }
        let e = check_produce(&cat, "a", Mirroring).unwrap_err();
        assert!(e.to_string().starts_with("READ_ONLY_TOPIC"), "{e}");
    }

    // ---- properties ----

    fn arb_state() -> impl Strategy<Value = MirrorState> {
        prop::sample::select(MirrorState::ALL.to_vec())
    }

    proptest! {
        /// Arbitrary names and stored values never panic; every distinct topic is answered;
        /// records exist only for accepted topics, at most one each; applying the records and
        /// repeating add/remove/pause yields no record.
        #[test]
        fn requests_never_panic_and_records_match_answers(
            mirror in prop::sample::select(vec!["east", "west", "north", "", "e st", "east.paused"]),
            stored in prop::collection::vec(
                prop::option::of(prop::sample::select(vec![
                    "", "east", "east.paused", "east.removed", "west", "west.removed", "x y",
                    ".removed", "east.paused.removed",
                ])),
                3,
            ),
            state_list in prop::collection::vec(prop::option::of(arb_state()), 12),
            topics in prop::collection::vec(prop::sample::select(vec!["a", "b", "c", "nope"]), 0..6),
            kind in 0u8..4,
            allow in any::<bool>(),
        ) {
            let mut cat = catalogue();
            for (t, v) in ["a", "b", "c"].iter().zip(&stored) {
                if let Some(v) = v {
                    cat = set(&cat, t, v);
                }
            }
            let mut st = States::new();
            let mut slots = state_list.iter();
            for m in ["east", "west"] {
                for (t, n) in [("a", 3), ("b", 1), ("c", 2)] {
                    for p in 0..n {
                        if let Some(Some(s)) = slots.next() {
                            put_one(&mut st, &cat, m, t, p, *s);
                        }
                    }
                }
            }
            let cfg = ControllerConfig { allow_stop_from_paused: allow, resume_only_when_paused: false };
            let topics: Vec<String> = topics.into_iter().map(String::from).collect();
            let req = match kind {
                0 => MirrorRequest::AddTopics { mirror: mirror.into(), topics: topics.clone() },
                1 => MirrorRequest::RemoveTopics { mirror: mirror.into(), topics: topics.clone() },
                2 => MirrorRequest::PauseTopics { mirror: mirror.into(), topics: topics.clone() },
                _ => MirrorRequest::ResumeTopics { mirror: mirror.into(), topics: topics.clone() },
            };
            let o = handle_mirror_request(&cat, &st, &cfg, &req);
            let distinct: std::collections::BTreeSet<_> = topics.iter().cloned().collect();
            prop_assert_eq!(o.results.keys().cloned().collect::<std::collections::BTreeSet<_>>(), distinct);
            let mut seen = std::collections::BTreeSet::new();
            for r in &o.records {
                prop_assert!(seen.insert(r.topic.clone()));
                prop_assert_eq!(o.result(&r.topic), Some(&Ok(())));
                prop_assert_eq!(r.key.as_str(), MIRROR_NAME_CONFIG);
            }
            if kind < 3 {
                let after = apply_config_records(&cat, &o.records);
                let again = handle_mirror_request(&after, &st, &cfg, &req);
                for (t, r) in &o.results {
                    if r.is_ok() {
                        prop_assert_eq!(again.result(t), Some(&Ok(())));
                    }
                }
                prop_assert!(again.records.is_empty());
            }
        }
    }
}
