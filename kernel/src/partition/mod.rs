//! The per-partition mirroring state machine: inputs in, effects out.
//!
//! One [`PartitionMirror`] runs on the broker that holds (or may come to hold) the leadership of
//! a mirrored partition. It keeps nothing that matters only in memory: the persisted
//! [`MirrorPartitionStateValue`] is the truth, re-read on every leadership change, and each
//! state's side effect is idempotent so re-running it after a crash is safe.
//!
//! # The contract
//!
//! - **Persist first, act after**: a state's side effect (start the fetcher, bump the epoch,
//!   truncate, make writable...) runs only once the coordinator acknowledged the state.
//! - **Revoke early**: taking a permission away (making the partition read-only, removing the
//!   fetcher) happens before the write, because it can never make a stale state unsafe. So the
//!   KIP's STOPPING step 1 (remove the fetcher, `docs/design.md` section 5.4) runs as the
//!   STOPPING record is written.
//! - **One thing at a time**: while a state read or write is in flight the partition does
//!   nothing else: fetch responses are dropped (they are stale once the write lands) and
//!   desired-state changes wait for the answer.
//! - **Who owns what after a restart**: the `__mirror_state` record is the truth, read again by
//!   every [`Input::BecameLeader`]. A record an earlier leadership wrote is written again
//!   (re-asserted) before it is acted on, unless no earlier leadership can write any more
//!   ([`MirrorConfig::predecessors_may_write`] off); one written at this leadership's own epoch
//!   never is.
//! - **The produce gate is the kernel's alone**: every `BecameLeader` closes it
//!   ([`Effect::SetWritable`]`(false)`) before any other effect, whatever the executor holds,
//!   and it is opened only once STOPPED is read or written in this leadership.
//! - **Stale inputs change nothing**: a late, duplicated or misplaced input is reported as
//!   [`Ignored`], never a panic.
//!
//! # Two designs, one machine
//!
//! The same machine runs the KIP authors' prototype when the config says so
//! ([`MirrorConfig::prototype`], `docs/design.md` section 10). Its extra states
//! (EPOCH_FENCING, ULE_RECOVERY, PAUSING) are rows of its transition table with their own side
//! effects; where it decides differently from the seed (on triggers only, FAILED first, what a
//! fetch ahead of the leader epoch or a divergence leads to, which state a retry writes) the
//! difference is one entry of a per-design table (`design.rs`), looked up at the one place it
//! applies; its other choices (stop order, LME capture, bump numbers...) are
//! [`MirrorConfig`] values. Each deliberate bug ([`Mutant`]) is a one-line switch,
//! `mutated(config, Mutant::...)`, at the point it perverts.
//!
//! # Where each concern lives
//!
//! - this file: the types, the accessors, and [`PartitionMirror::handle`]'s dispatch of each
//!   input to its concern;
//! - `leadership.rs`: becoming leader or follower, the produce gate, the leader epoch and its
//!   bumps, re-asserting a record an earlier leadership wrote;
//! - `design.rs`: where the seed and the prototype differ by a decision, as data;
//! - `decide.rs`: the desired state, the transition it asks for, and each state's side effect;
//! - `state_write.rs`: reading and writing the `__mirror_state` record, revoking early;
//! - `prepare.rs`: PREPARING (the LME truncation, waiting for the replicas) and ULE_RECOVERY;
//! - `fetch.rs`: MIRRORING (fetch, append, the epoch bump, divergence, out of range) and
//!   EPOCH_FENCING;
//! - `stop.rs`: the STOPPING sequence in its configured order, over the log its own effects
//!   leave (`StopLog`);
//! - `failure.rs`: failed requests, FAILED and its retry, a deleted source topic.

mod decide;
mod design;
mod failure;
mod fetch;
mod leadership;
mod prepare;
mod state_write;
mod stop;

use std::hash::{Hash, Hasher};

use im::OrdSet;
use serde::{Deserialize, Serialize};

use crate::config::MirrorConfig;
use crate::desired::DesiredState;
use crate::effect::{Effect, RequestId};
use crate::input::Input;
use crate::log::LogView;
use crate::mutant::{self, Mutant};
use crate::records::MirrorPartitionStateValue;
use crate::state::MirrorState;
use crate::types::{BrokerId, LeaderEpoch, MirrorPartition, Offset, PartitionIndex, TopicId};

/// Why an input changed nothing. Stale and duplicate inputs are expected in a distributed
/// system; they are reported, never a panic, and never change the partition.
#[derive(Clone, PartialEq, Eq, Debug, thiserror::Error)]
pub enum Ignored {
    /// The input needs the partition leadership, which this broker does not hold.
    #[error("this broker is not the partition leader")]
    NotLeader,
    /// A `BecameLeader` whose epoch is older than the one this broker already leads with.
    #[error("stale leadership: epoch {got} is older than the current leader epoch {current}")]
    StaleLeaderEpoch {
        /// The epoch this broker leads with.
        current: LeaderEpoch,
        /// The epoch in the input.
        got: LeaderEpoch,
    },
    /// A completion of a request the partition is not waiting for (late, duplicated, or from
    /// before a leadership change).
    #[error("stale completion of request {0:?}")]
    StaleCompletion(RequestId),
    /// An input that does not apply in the current activity (for example a retry timer while the
    /// partition is not FAILED).
    #[error("{input} does not apply while {activity}")]
    NotApplicable {
        /// What arrived.
        input: &'static str,
        /// What the partition is doing.
        activity: String,
    },
}

/// What the partition is doing right now (in memory; rebuilt from the persisted state).
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize)]
pub enum Activity {
    /// Not the leader, or nothing to do.
    Idle,
    /// Waiting for the coordinator's answer to `ReadState`.
    Reading(RequestId),
    /// Waiting for the coordinator to store `target`.
    Writing {
        /// The request.
        request: RequestId,
        /// The state being written.
        target: MirrorState,
    },
    /// PREPARING: waiting for the source's LME.
    AwaitingLme(RequestId),
    /// PREPARING: truncated locally to `truncated_to`; waiting for the quorum to follow.
    AwaitingReplicas {
        /// The leader's LEO after LME truncation.
        truncated_to: Offset,
        /// Followers known to have truncated.
        done: OrdSet<BrokerId>,
    },
    /// MIRRORING: a fetch is in flight.
    Fetching(RequestId),
    /// STOPPING: waiting for the controller to bump the leader epoch.
    AwaitingEpochBump(RequestId),
    /// MIRRORING: the source's epoch caught up with ours; waiting for the bump before
    /// appending (the fetched batches are fetched again).
    AwaitingFetchEpochBump(RequestId),
    /// STOPPING: waiting for the LME record to be stored.
    AwaitingLmeWrite(RequestId),
    /// EPOCH_FENCING (the prototype design): waiting for the controller's bump, then
    /// MIRRORING.
    AwaitingFencingBump(RequestId),
    /// STOPPING: waiting for the high watermark to reach the `MIRROR_PID_RESET` batch.
    AwaitingPidResetCommit,
    /// FAILED: waiting for the retry timer of `attempt`.
    AwaitingRetry {
        /// The attempt the timer is for.
        attempt: u32,
    },
    /// Nothing in flight in a state that needs nothing more (PAUSED, STOPPED, UNKNOWN...).
    Settled,
}

/// The leadership this broker holds for the partition.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Debug, Serialize, Deserialize)]
pub struct Leadership {
    /// The current leader epoch.
    pub leader_epoch: LeaderEpoch,
    /// All assigned replicas.
    pub replicas: OrdSet<BrokerId>,
    /// The in-sync replicas.
    pub isr: OrdSet<BrokerId>,
}

/// Hashes the epoch and both sets with [`hash_broker_set`] (a model checker fingerprints
/// every state it visits, and iterating an `im` set allocates its path).
impl Hash for Leadership {
    fn hash<H: Hasher>(&self, state: &mut H) {
        let Leadership {
            leader_epoch,
            replicas,
            isr,
        } = self;
        leader_epoch.hash(state);
        hash_broker_set(replicas, state);
        hash_broker_set(isr, state);
    }
}

/// Feeds `set` to `state` as a function of its members only (so equal sets hash equally),
/// without iterating it when it has at most two members: its size, smallest and largest
/// member then determine it. Iterating an `im` set allocates the iterator's path, which made
/// hashing replica sets a large part of a model checker's fingerprinting.
pub fn hash_broker_set<H: Hasher>(set: &OrdSet<BrokerId>, state: &mut H) {
    state.write_usize(set.len());
    if set.len() <= 2 {
        set.get_min().hash(state);
        set.get_max().hash(state);
    } else {
        for b in set {
            b.hash(state);
        }
    }
}

/// The mirroring state machine of one partition on one broker.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize)]
pub struct PartitionMirror {
    broker: BrokerId,
    topic_id: TopicId,
    partition: PartitionIndex,
    desired: DesiredState,
    leadership: Option<Leadership>,
    /// `None` until read; then the stored record (`Some(None)`: nothing stored).
    stored: Option<Option<MirrorPartitionStateValue>>,
    activity: Activity,
    fetcher_running: bool,
    writable: bool,
    /// Whether this leadership has had a state write acknowledged (see [`Self::reconcile`]).
    asserted: bool,
    /// The prototype design: the source epoch of the fetched batch that sent the partition to
    /// EPOCH_FENCING, which the bump must exceed (in memory only, like the prototype's fresh
    /// source metadata; a new leader falls back to its log's latest epoch and, if that bump
    /// falls short, the next fetch fences again).
    fencing_epoch: Option<LeaderEpoch>,
    /// The prototype design: a desired-state change arrived while a read or write was in
    /// flight, so the answer is a trigger to decide on.
    decision_pending: bool,
    /// The source's topic is gone ([`Input::SourceTopicDeleted`]); in memory only, like the
    /// source metadata it comes from: what persists is the FAILED record it leads to.
    source_deleted: bool,
    next_request: u64,
}

/// Whether `config` carries the deliberate bug `mutant` (and the crate was built with feature
/// `mutants`): the one-line switch each mutant hangs on, at the point it perverts.
fn mutated(config: &MirrorConfig, mutant: Mutant) -> bool {
    mutant::active(config.mutant, mutant)
}

impl PartitionMirror {
    /// A partition on `broker`, not leader yet, with the desired state `desired`.
    pub fn new(
        broker: BrokerId,
        topic_id: TopicId,
        partition: PartitionIndex,
        desired: DesiredState,
    ) -> Self {
        PartitionMirror {
            broker,
            topic_id,
            partition,
            desired,
            leadership: None,
            stored: None,
            activity: Activity::Idle,
            fetcher_running: false,
            writable: false,
            asserted: false,
            fencing_epoch: None,
            decision_pending: false,
            source_deleted: false,
            next_request: 0,
        }
    }

    /// The `__mirror_state` key, when the topic is in a mirror.
    pub fn key(&self) -> Option<MirrorPartition> {
        self.desired.mirror().map(|mirror| MirrorPartition {
            mirror: mirror.clone(),
            topic_id: self.topic_id,
            partition: self.partition,
        })
    }

    /// The persisted state as last read or written (`Unknown` when nothing is stored or it has
    /// not been read yet).
    pub fn state(&self) -> MirrorState {
        self.stored_value()
            .map_or(MirrorState::Unknown, |v| v.state)
    }

    /// The persisted record as last read or written.
    pub fn stored_value(&self) -> Option<&MirrorPartitionStateValue> {
        self.stored.as_ref().and_then(Option::as_ref)
    }

    /// What the operator asked for.
    pub fn desired(&self) -> &DesiredState {
        &self.desired
    }

    /// The leadership held, if any.
    pub fn leadership(&self) -> Option<&Leadership> {
        self.leadership.as_ref()
    }

    /// This state machine with every broker id renamed by `rename` (its own id, the replica
    /// sets, the followers known to have truncated): for model checkers that reduce by replica
    /// symmetry. `rename` must be a permutation.
    pub fn renumbered(&self, rename: impl Fn(BrokerId) -> BrokerId) -> Self {
        let mut renamed = self.clone();
        renamed.broker = rename(self.broker);
        let rename_set = |set: &OrdSet<BrokerId>| set.iter().map(|&b| rename(b)).collect();
        if let Some(l) = renamed.leadership.as_mut() {
            l.replicas = rename_set(&l.replicas);
            l.isr = rename_set(&l.isr);
        }
        if let Activity::AwaitingReplicas { done, .. } = &mut renamed.activity {
            *done = rename_set(done);
        }
        renamed
    }

    /// What the partition is doing.
    pub fn activity(&self) -> &Activity {
        &self.activity
    }

    /// Whether the kernel asked for the fetcher to run (and has not stopped it since).
    pub fn fetcher_running(&self) -> bool {
        self.fetcher_running
    }

    /// Whether the kernel made the partition writable (and has not revoked it since).
    pub fn is_writable(&self) -> bool {
        self.writable
    }

    /// Whether this leadership was told the source's topic is gone
    /// ([`Input::SourceTopicDeleted`]).
    pub fn source_deleted(&self) -> bool {
        self.source_deleted
    }

    /// Handles one input against the local log `log` (read only) and returns the effects to
    /// execute, in order. An input that changes nothing returns [`Ignored`].
    pub fn handle(
        &mut self,
        config: &MirrorConfig,
        input: Input,
        log: &impl LogView,
    ) -> Result<Vec<Effect>, Ignored> {
        let mut out = Vec::new();
        match input {
            // leadership.rs
            Input::BecameLeader {
                leader_epoch,
                replicas,
                isr,
            } => self.on_became_leader(config, leader_epoch, replicas, isr, &mut out)?,
            Input::BecameFollower => self.on_became_follower(&mut out),
            Input::IsrChanged { replicas, isr } => {
                self.on_isr_changed(config, replicas, isr, &mut out)?
            }
            Input::LeaderEpochBumped {
                request,
                leader_epoch,
            } => self.on_epoch_bumped(config, request, leader_epoch, log, &mut out)?,
            // decide.rs
            Input::DesiredStateChanged(desired) => self.on_desired(config, desired, log, &mut out),
            // state_write.rs
            Input::StateRead { request, value } => {
                self.on_state_read(config, request, value, log, &mut out)?
            }
            Input::StateWritten { request, value } => {
                self.on_state_written(config, request, value, log, &mut out)?
            }
            Input::WriteFenced { request, .. } => self.on_write_fenced(request, &mut out)?,
            // prepare.rs
            Input::LastMirroredEpochReceived {
                request,
                lme,
                source_log_start_offset,
            } => self.on_lme(config, request, lme, source_log_start_offset, log, &mut out)?,
            Input::SourceMirrorStateReceived {
                request,
                reverse,
                lme,
                source_log_start_offset,
            } => self.on_source_mirror_state(
                config,
                request,
                reverse,
                (lme, source_log_start_offset),
                log,
                &mut out,
            )?,
            Input::ReplicaFetched {
                replica,
                log_end_offset,
            } => self.on_replica_fetched(config, replica, log_end_offset, &mut out)?,
            // fetch.rs
            Input::FetchCompleted { request, outcome } => {
                self.on_fetch_completed(config, request, outcome, log, &mut out)?
            }
            // stop.rs
            Input::HighWatermarkAdvanced => {
                self.on_high_watermark_advanced(config, log, &mut out)?
            }
            Input::LastMirroredEpochWritten { request } => {
                self.on_lme_written(config, request, log, &mut out)?
            }
            // failure.rs
            Input::RequestFailed { request, error } => {
                self.on_failure(config, request, error, &mut out)?
            }
            Input::SourceTopicDeleted => self.on_source_deleted(config, &mut out)?,
            Input::RetryDue { attempt } => self.on_retry_due(config, attempt, &mut out)?,
        }
        Ok(out)
    }

    /// `Ok` when the partition is doing `activity`, else `request` is a stale completion.
    fn expect(&self, activity: Activity, request: RequestId) -> Result<(), Ignored> {
        if self.activity == activity {
            Ok(())
        } else {
            Err(Ignored::StaleCompletion(request))
        }
    }

    /// `input` does not apply to what the partition is doing.
    fn not_applicable(&self, input: &'static str) -> Ignored {
        Ignored::NotApplicable {
            input,
            activity: format!("{:?} in {}", self.activity, self.state()),
        }
    }

    /// Sends the request `effect` builds from a fresh id (never reused, so late answers stay
    /// stale, also across leaderships) and waits for its completion in the activity `waiting`
    /// builds from the same id.
    fn send(
        &mut self,
        waiting: impl FnOnce(RequestId) -> Activity,
        effect: impl FnOnce(RequestId) -> Effect,
        out: &mut Vec<Effect>,
    ) {
        self.next_request += 1;
        let request = RequestId(self.next_request);
        self.activity = waiting(request);
        out.push(effect(request));
    }
}
