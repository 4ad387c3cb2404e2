//! The per-partition mirroring state machine: inputs in, effects out.
//!
//! One [`PartitionMirror`] runs on the broker that holds (or may come to hold) the leadership of
//! a mirrored partition. It keeps nothing that matters only in memory: the persisted
//! [`MirrorPartitionStateValue`] is the truth, re-read on every leadership change, and each
//! state's side effect is idempotent so re-running it after a crash is safe.
//!
//! Two rules order every transition:
//! - **persist first, act after**: a state's side effect (start the fetcher, bump the epoch,
//!   truncate, make writable...) runs only once the coordinator acknowledged the state;
//! - **revoke early**: taking a permission away (making the partition read-only, removing the
//!   fetcher) happens before the write, because it can never make a stale state unsafe. So the
//!   KIP's STOPPING step 1 (remove the fetcher, `docs/design.md` section 5.4) runs as the STOPPING record is written.
//!
//! While a state write is in flight the partition does nothing else: fetch responses are
//! dropped (they are stale once the write lands) and desired-state changes wait for the answer.
//!
//! The same machine runs the KIP authors' prototype when the config says so
//! ([`MirrorConfig::prototype`]): its extra states (EPOCH_FENCING, ULE_RECOVERY, PAUSING), its
//! decisions (on triggers only, FAILED first) and its stop's choices are branches of the one
//! kernel, not a second copy (`docs/design.md`, section 10).

use std::hash::{Hash, Hasher};

use im::OrdSet;
use serde::{Deserialize, Serialize};

use crate::config::{
    FailedRetry, LmeCapture, MirrorConfig, StopStep, StopStrategy, TruncationQuorum,
};
use crate::desired::DesiredState;
use crate::effect::{Effect, LogEffect, RequestId, TruncationCause};
use crate::fetch::{divergence_truncation_offset, resolve_out_of_range, OutOfRangeResolution};
use crate::input::{FetchOutcome, Input};
use crate::log::LogView;
use crate::mutant::{self, Mutant};
use crate::records::{LastMirroredEpochsValue, MirrorPartitionStateValue, NON_RETRYABLE_ATTEMPT};
use crate::state::{Design, MirrorState};
use crate::types::{
    BrokerId, EpochAndOffset, LeaderEpoch, MirrorPartition, Offset, PartitionIndex, ProducerEpoch,
    ProducerId, TopicId,
};

/// How a written FAILED record is retried.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Failure {
    /// By the retry policy, to the recorded state (and any write that is not FAILED).
    Retried,
    /// Never (the prototype's non-retryable failures).
    NotRetried,
    /// Never; its recorded exit is STOPPING, taken when the operator stops the topic (the
    /// source topic is gone: a stop needs nothing of it).
    ExitOnlyByStop,
}

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

/// `(replicas, isr)` with `isr` sharing `replicas`' nodes when the two sets are equal (the usual
/// case): an `im` set of one broker still takes a whole node (about 800 bytes), so an idle
/// partition keeps one instead of two. Equality, order and hashing are unchanged.
fn share_equal_sets(
    replicas: OrdSet<BrokerId>,
    isr: OrdSet<BrokerId>,
) -> (OrdSet<BrokerId>, OrdSet<BrokerId>) {
    if isr == replicas {
        let shared = replicas.clone();
        (replicas, shared)
    } else {
        (replicas, isr)
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
            Input::BecameLeader {
                leader_epoch,
                replicas,
                isr,
            } => self.on_became_leader(config, leader_epoch, replicas, isr, &mut out)?,
            Input::BecameFollower => self.on_became_follower(&mut out),
            Input::IsrChanged { replicas, isr } => {
                let leadership = self.leadership.as_mut().ok_or(Ignored::NotLeader)?;
                let (replicas, isr) = share_equal_sets(replicas, isr);
                leadership.replicas = replicas;
                leadership.isr = isr;
                self.check_replicas_done(config, &mut out);
            }
            Input::DesiredStateChanged(desired) => self.on_desired(config, desired, log, &mut out),
            Input::StateRead { request, value } => {
                self.expect(Activity::Reading(request), request)?;
                self.stored = Some(value);
                self.reconcile(config, log, &mut out);
            }
            Input::StateWritten { request, value } => {
                let Activity::Writing { request: r, .. } = self.activity else {
                    return Err(Ignored::StaleCompletion(request));
                };
                if r != request {
                    return Err(Ignored::StaleCompletion(request));
                }
                self.stored = Some(Some(value));
                self.asserted = true;
                self.activity = Activity::Settled;
                // The prototype decides on triggers only (leadership, a desired-state change,
                // a read): after its own write it runs the written state's side effect.
                let decide = config.design == Design::Seed || self.decision_pending;
                self.decision_pending = false;
                self.reconcile_with(config, log, decide, &mut out);
            }
            Input::WriteFenced { request, .. } => {
                match self.activity {
                    Activity::Writing { request: r, .. } if r == request => {}
                    // The state was written since this leader wrote STOPPING: a successor (or a
                    // later incarnation) owns the stop. Act on nothing until re-read and
                    // re-asserted.
                    Activity::AwaitingLmeWrite(r) if r == request => self.asserted = false,
                    _ => return Err(Ignored::StaleCompletion(request)),
                }
                self.read_state(&mut out);
            }
            Input::LastMirroredEpochReceived {
                request,
                lme,
                source_log_start_offset,
            } => {
                self.expect(Activity::AwaitingLme(request), request)?;
                self.on_lme(config, lme, source_log_start_offset, log, &mut out);
            }
            Input::ReplicaFetched {
                replica,
                log_end_offset,
            } => {
                let Activity::AwaitingReplicas { truncated_to, done } = &mut self.activity else {
                    return Err(self.not_applicable("ReplicaFetched"));
                };
                if log_end_offset > *truncated_to {
                    return Err(Ignored::NotApplicable {
                        input: "ReplicaFetched",
                        activity: format!(
                            "replica {replica} at LEO {log_end_offset} has not truncated to {truncated_to}"
                        ),
                    });
                }
                if !mutant::active(config.mutant, Mutant::IgnoreReplicaReports) {
                    done.insert(replica);
                }
                self.check_replicas_done(config, &mut out);
            }
            Input::FetchCompleted { request, outcome } => {
                let running_in_stopping =
                    mutant::active(config.mutant, Mutant::FetcherRunsInStopping)
                        && self.fetcher_running
                        && self.state() == MirrorState::Stopping;
                if self.activity != Activity::Fetching(request) && !running_in_stopping {
                    return Err(Ignored::StaleCompletion(request));
                }
                self.on_fetch(config, outcome, log, &mut out);
            }
            Input::LeaderEpochBumped {
                request,
                leader_epoch,
            } if self.activity == Activity::AwaitingFetchEpochBump(request) => {
                if let Some(l) = self.leadership.as_mut() {
                    l.leader_epoch = l.leader_epoch.max(leader_epoch);
                }
                let fetch_offset = log.log_end_offset();
                let last_fetched_epoch = log.epoch_cache().latest_epoch();
                self.fetch(config, fetch_offset, last_fetched_epoch, &mut out);
            }
            Input::LeaderEpochBumped {
                request,
                leader_epoch,
            } if self.activity == Activity::AwaitingFencingBump(request) => {
                if let Some(l) = self.leadership.as_mut() {
                    l.leader_epoch = l.leader_epoch.max(leader_epoch);
                }
                self.write_state(config, MirrorState::Mirroring, None, &mut out);
            }
            Input::LeaderEpochBumped {
                request,
                leader_epoch,
            } => {
                self.expect(Activity::AwaitingEpochBump(request), request)?;
                if let Some(l) = self.leadership.as_mut() {
                    l.leader_epoch = l.leader_epoch.max(leader_epoch);
                }
                // Persist the new epoch with the STOPPING record before writing anything at it:
                // the record's `previous_state == STOPPING` marks "epoch bumped".
                self.write_state(config, MirrorState::Stopping, None, &mut out);
            }
            Input::HighWatermarkAdvanced => {
                if self.activity != Activity::AwaitingPidResetCommit {
                    return Err(self.not_applicable("HighWatermarkAdvanced"));
                }
                self.write_stopped_once_committed(config, log, &mut out);
            }
            Input::LastMirroredEpochWritten { request } => {
                self.expect(Activity::AwaitingLmeWrite(request), request)?;
                if mutant::active(config.mutant, Mutant::StallAfterLmeWrite) {
                    return Ok(out);
                }
                self.run_stop_steps(config, log, true, &mut out);
            }
            Input::RequestFailed { request, error } => {
                self.on_failure(config, request, error, &mut out)?
            }
            Input::SourceTopicDeleted => {
                if self.source_deleted {
                    return Err(self.not_applicable("SourceTopicDeleted"));
                }
                self.source_deleted = true;
                if self.leadership.is_some()
                    && self.stored.is_some()
                    && self.fails_for_deleted_source(self.state())
                {
                    match self.activity {
                        // Decided when the answer arrives.
                        Activity::Reading(_) | Activity::Writing { .. } => {
                            self.decision_pending = config.design == Design::Prototype;
                        }
                        _ => self.fail_for_deleted_source(config, &mut out),
                    }
                }
            }
            Input::RetryDue { attempt } => {
                if self.activity != (Activity::AwaitingRetry { attempt }) {
                    return Err(self.not_applicable("RetryDue"));
                }
                match self.stored_value().cloned() {
                    Some(v) if v.state == MirrorState::Failed => match retry_target(config, &v) {
                        Some(target) => self.write_state(config, target, None, &mut out),
                        // The table refuses the retry: FAILED until an operator acts.
                        None => self.activity = Activity::Settled,
                    },
                    // The timer was for a failed read or write of the state itself.
                    _ => self.read_state(&mut out),
                }
            }
        }
        Ok(out)
    }

    fn expect(&self, activity: Activity, request: RequestId) -> Result<(), Ignored> {
        if self.activity == activity {
            Ok(())
        } else {
            Err(Ignored::StaleCompletion(request))
        }
    }

    fn not_applicable(&self, input: &'static str) -> Ignored {
        Ignored::NotApplicable {
            input,
            activity: format!("{:?} in {}", self.activity, self.state()),
        }
    }

    fn request(&mut self) -> RequestId {
        self.next_request += 1;
        RequestId(self.next_request)
    }

    fn on_became_leader(
        &mut self,
        config: &MirrorConfig,
        leader_epoch: LeaderEpoch,
        replicas: OrdSet<BrokerId>,
        isr: OrdSet<BrokerId>,
        out: &mut Vec<Effect>,
    ) -> Result<(), Ignored> {
        let (replicas, isr) = share_equal_sets(replicas, isr);
        if let Some(current) = &self.leadership {
            if leader_epoch < current.leader_epoch {
                return Err(Ignored::StaleLeaderEpoch {
                    current: current.leader_epoch,
                    got: leader_epoch,
                });
            }
            if leader_epoch == current.leader_epoch {
                // A repeated notification only refreshes the replica sets.
                self.leadership = Some(Leadership {
                    leader_epoch,
                    replicas,
                    isr,
                });
                return Ok(());
            }
        }
        // The produce gate is the kernel's: whatever the executor holds (an earlier leadership
        // or process may have opened it and persisted that), it is closed before anything else
        // and opened again only once this leadership reads or writes STOPPED.
        if self.writable || !mutant::active(config.mutant, Mutant::KeepPersistedGate) {
            out.push(Effect::SetWritable(false));
        }
        self.writable = false;
        self.on_became_follower(out);
        self.leadership = Some(Leadership {
            leader_epoch,
            replicas,
            isr,
        });
        if self.key().is_some() {
            self.read_state(out);
        }
        Ok(())
    }

    fn on_became_follower(&mut self, out: &mut Vec<Effect>) {
        if self.fetcher_running {
            out.push(Effect::StopFetcher);
        }
        if self.writable {
            out.push(Effect::SetWritable(false));
        }
        *self = PartitionMirror {
            next_request: self.next_request,
            desired: self.desired.clone(),
            ..PartitionMirror::new(
                self.broker,
                self.topic_id,
                self.partition,
                DesiredState::NotMirrored,
            )
        };
    }

    fn on_desired(
        &mut self,
        config: &MirrorConfig,
        desired: DesiredState,
        log: &impl LogView,
        out: &mut Vec<Effect>,
    ) {
        let same_mirror = desired.mirror() == self.desired.mirror();
        self.desired = desired;
        if self.leadership.is_none() {
            return;
        }
        if !same_mirror {
            // Another key: everything known so far belongs to the old one.
            if self.fetcher_running {
                self.fetcher_running = false;
                out.push(Effect::StopFetcher);
            }
            self.stored = None;
            self.asserted = false;
            self.activity = Activity::Idle;
            if self.key().is_some() {
                self.read_state(out);
            }
            return;
        }
        match self.activity {
            // Decided when the answer arrives.
            Activity::Reading(_) | Activity::Writing { .. } => {
                self.decision_pending = config.design == Design::Prototype;
            }
            _ => self.reconcile(config, log, out),
        }
    }

    fn read_state(&mut self, out: &mut Vec<Effect>) {
        let Some(key) = self.key() else {
            self.activity = Activity::Idle;
            return;
        };
        let request = self.request();
        self.activity = Activity::Reading(request);
        out.push(Effect::ReadState { request, key });
    }

    /// The transition the desired state asks for right now from `from`, if any. Transitions
    /// that must wait for a state's work (PREPARING -> MIRRORING, STOPPING -> STOPPED) are not
    /// here: the work itself moves on when it finishes.
    fn immediate_transition(
        &self,
        config: &MirrorConfig,
        from: MirrorState,
    ) -> Option<MirrorState> {
        use MirrorState::*;
        if config.design == Design::Prototype {
            return self.prototype_decision(config, from);
        }
        let to = match (&self.desired, from) {
            (DesiredState::Mirror(_), Stopped)
                if mutant::active(config.mutant, Mutant::FailbackWithoutPreparing) =>
            {
                return Some(Mirroring);
            }
            (DesiredState::Stop(_), Failed) if self.failed_until_stopped() => {
                return config
                    .transitions
                    .is_legal(Failed, Stopping, Some(Stopping))
                    .then_some(Stopping);
            }
            (DesiredState::Mirror(_) | DesiredState::Pause(_), Unknown | Stopped) => Preparing,
            (DesiredState::Mirror(_), Paused) => Mirroring,
            (DesiredState::Pause(_), Mirroring) => Paused,
            (DesiredState::Stop(_), Preparing | Mirroring | Paused) => Stopping,
            _ => return None,
        };
        config.transitions.is_legal(from, to, None).then_some(to)
    }

    /// The prototype's decision function (`docs/prototype.md` section 3.1): FAILED wins over
    /// every request (its retry decides); a stop or a pause is asked of any state the table
    /// lets go there, and a request the table refuses is dropped, not remembered.
    fn prototype_decision(&self, config: &MirrorConfig, from: MirrorState) -> Option<MirrorState> {
        use MirrorState::*;
        let to = match (&self.desired, from) {
            (DesiredState::Mirror(_), Stopped)
                if mutant::active(config.mutant, Mutant::FailbackWithoutPreparing) =>
            {
                return Some(Mirroring);
            }
            (DesiredState::Stop(_), Failed) if self.failed_until_stopped() => Stopping,
            (_, Failed) => return None,
            (DesiredState::Stop(_), _) => Stopping,
            (DesiredState::Pause(_), _) => Pausing,
            (DesiredState::Mirror(_), Paused) => Mirroring,
            (DesiredState::Mirror(_), Unknown | Stopped) => Preparing,
            _ => return None,
        };
        (to != from && config.transitions.is_legal(from, to, None)).then_some(to)
    }

    /// [`Self::reconcile_with`], deciding.
    fn reconcile(&mut self, config: &MirrorConfig, log: &impl LogView, out: &mut Vec<Effect>) {
        self.reconcile_with(config, log, true, out);
    }

    /// Moves on from the persisted state: either the transition the desired state asks for
    /// (only when `decide`), or (re-)running the current state's side effect.
    ///
    /// A leader acts on a state only once it has itself written it in this leadership: a state
    /// merely read may be overtaken by a write its predecessor still has in flight (the model
    /// found that race), so the first time it re-asserts the record (a self-transition). The
    /// write fences the predecessor by leader epoch, or is itself fenced by state epoch if the
    /// predecessor's write landed first, and the partition re-reads.
    fn reconcile_with(
        &mut self,
        config: &MirrorConfig,
        log: &impl LogView,
        decide: bool,
        out: &mut Vec<Effect>,
    ) {
        if self.leadership.is_none() || self.stored.is_none() {
            return;
        }
        let state = self.state();
        if decide && self.fails_for_deleted_source(state) {
            self.fail_for_deleted_source(config, out);
            return;
        }
        let transition = decide
            .then(|| self.immediate_transition(config, state))
            .flatten();
        match transition {
            Some(to) => self.write_state(config, to, None, out),
            None if !self.asserted && self.needs_reassert(config) => self.reassert(config, out),
            None => self.enter(config, state, log, out),
        }
    }

    /// Writes FAILED for good: the source's topic is gone, and only a stop leaves it.
    fn fail_for_deleted_source(&mut self, config: &MirrorConfig, out: &mut Vec<Effect>) {
        let error = "the source topic was deleted (or re-created under another topic id): the \
                     partition stays FAILED and read-only, with what it mirrored, until its \
                     topic is stopped"
            .to_owned();
        self.write_value(
            config,
            MirrorState::Failed,
            Some(error),
            Failure::ExitOnlyByStop,
            out,
        );
    }

    /// Whether the partition is FAILED for good with STOPPING as its only exit (its source
    /// topic is gone): a stop of its topic takes it there, nothing else does.
    fn failed_until_stopped(&self) -> bool {
        self.stored_value().is_some_and(|v| {
            v.state == MirrorState::Failed
                && v.retry_attempt == NON_RETRYABLE_ATTEMPT
                && v.previous_state == Some(MirrorState::Stopping)
        })
    }

    /// Whether the source's topic is gone while the operator still asks to mirror (or pause)
    /// from it in a state that needs the source: FAILED for good. A stop (STOPPING, STOPPED,
    /// or a stop asked) needs nothing of the source and goes on; a FAILED record that is not
    /// retried already says it.
    fn fails_for_deleted_source(&self, state: MirrorState) -> bool {
        use MirrorState::*;
        self.source_deleted
            && matches!(
                self.desired,
                DesiredState::Mirror(_) | DesiredState::Pause(_)
            )
            && match state {
                Stopping | Stopped => false,
                Failed => {
                    self.stored_value().map(|v| v.retry_attempt) != Some(NON_RETRYABLE_ATTEMPT)
                }
                _ => true,
            }
    }

    /// Whether the stored state must be re-asserted before its side effect runs: every stored
    /// state except a STOPPING whose epoch bump is not recorded yet when the stop order starts
    /// with the bump (its side effect starts by writing exactly that record). In any other
    /// order the first step acts on the log, so the record is re-asserted first.
    ///
    /// A record written at this leadership's own epoch needs no re-assertion: an epoch is one
    /// leadership, so its writer was this leadership (an earlier incarnation of it, which the
    /// executor guarantees can write no more, as a node's lock does across a restart), and
    /// the coordinator already fences every older leader's late write by leader epoch.
    ///
    /// Where no earlier leadership can write any more ([`MirrorConfig::predecessors_may_write`]
    /// off: a node reopened after its previous process ended), no record needs it.
    fn needs_reassert(&self, config: &MirrorConfig) -> bool {
        let epoch = self.leadership.as_ref().map(|l| l.leader_epoch);
        self.stored_value().is_some_and(|v| {
            config.predecessors_may_write
                && Some(v.leader_epoch) != epoch
                && (v.state != MirrorState::Stopping
                    || v.previous_state == Some(MirrorState::Stopping)
                    || config.stop_order.steps()[0] != StopStep::Bump)
        })
    }

    /// Writes the stored record again under this leadership. A STOPPING record that carries
    /// the stop epoch keeps it: the epoch boundary between mirrored and local writes.
    fn reassert(&mut self, config: &MirrorConfig, out: &mut Vec<Effect>) {
        let (Some(key), Some(leadership), Some(stored)) =
            (self.key(), self.leadership.as_ref(), self.stored_value())
        else {
            return;
        };
        let mut value = stored.clone();
        if value.state != MirrorState::Stopping {
            value.leader_epoch = leadership.leader_epoch;
        }
        let expected_state_epoch = Some(stored.state_epoch);
        let target = value.state;
        self.revoke_for(config, target, out);
        let request = self.request();
        self.activity = Activity::Writing { request, target };
        out.push(Effect::WriteState {
            request,
            key,
            value,
            expected_state_epoch,
        });
    }

    /// Asks the coordinator to store `target` (persist first); revokes writability first.
    fn write_state(
        &mut self,
        config: &MirrorConfig,
        target: MirrorState,
        error: Option<String>,
        out: &mut Vec<Effect>,
    ) {
        self.write_value(config, target, error, Failure::Retried, out);
    }

    /// [`Self::write_state`] of FAILED with `error`, never retried automatically (the
    /// prototype's non-retryable failures).
    fn write_non_retryable_failure(
        &mut self,
        config: &MirrorConfig,
        error: String,
        out: &mut Vec<Effect>,
    ) {
        self.write_value(
            config,
            MirrorState::Failed,
            Some(error),
            Failure::NotRetried,
            out,
        );
    }

    fn write_value(
        &mut self,
        config: &MirrorConfig,
        target: MirrorState,
        error: Option<String>,
        failure: Failure,
        out: &mut Vec<Effect>,
    ) {
        let non_retryable = failure != Failure::Retried;
        let (Some(key), Some(leadership)) = (self.key(), self.leadership.as_ref()) else {
            return;
        };
        let stored = self.stored_value();
        let from = stored.map_or(MirrorState::Unknown, |v| v.state);
        let attempts = stored.map_or(0, |v| v.retry_attempt);
        let value = MirrorPartitionStateValue {
            state: target,
            leader_epoch: leadership.leader_epoch,
            state_epoch: stored.map_or(0, |v| v.state_epoch),
            error_message: error,
            // Counts failures in a row: a retry keeps the count, any other success clears it.
            retry_attempt: match (from, target) {
                _ if non_retryable => NON_RETRYABLE_ATTEMPT,
                (_, MirrorState::Failed) if attempts == NON_RETRYABLE_ATTEMPT => attempts,
                (_, MirrorState::Failed) => attempts.saturating_add(1),
                // Only the operator's stop leaves a FAILED that is not retried: a fresh count.
                (MirrorState::Failed, _) if attempts == NON_RETRYABLE_ATTEMPT => 0,
                (MirrorState::Failed, _) => attempts,
                _ => 0,
            },
            // For FAILED the state to retry; a failed retry keeps the original target.
            previous_state: Some(match (from, target) {
                _ if failure == Failure::ExitOnlyByStop
                    && !mutant::active(config.mutant, Mutant::DeletedSourceFailedForever) =>
                {
                    MirrorState::Stopping
                }
                (MirrorState::Failed, MirrorState::Failed) => {
                    stored.and_then(|v| v.previous_state).unwrap_or(from)
                }
                _ => from,
            }),
        };
        let expected_state_epoch = stored.map(|v| v.state_epoch);
        self.revoke_for(config, target, out);
        let request = self.request();
        self.activity = Activity::Writing { request, target };
        out.push(Effect::WriteState {
            request,
            key,
            value,
            expected_state_epoch,
        });
        if mutant::active(config.mutant, Mutant::ActBeforePersist) && target == MirrorState::Stopped
        {
            self.writable = true;
            out.push(Effect::SetWritable(true));
        }
    }

    /// Revoke early: before writing `target`, take away what `target` does not allow (writes
    /// by local producers, the fetcher). A revocation is safe whatever the write's outcome;
    /// granting waits for the acknowledgement.
    fn revoke_for(&mut self, config: &MirrorConfig, target: MirrorState, out: &mut Vec<Effect>) {
        if self.writable && !target.is_writable() {
            self.writable = false;
            out.push(Effect::SetWritable(false));
        }
        let kept = target == MirrorState::Stopping
            && mutant::active(config.mutant, Mutant::FetcherRunsInStopping);
        if !target.runs_fetcher() && !kept {
            self.stop_fetcher(out);
        }
    }

    /// Runs the side effect of the persisted `state` (idempotent: also used after a restart).
    fn enter(
        &mut self,
        config: &MirrorConfig,
        state: MirrorState,
        log: &impl LogView,
        out: &mut Vec<Effect>,
    ) {
        let Some(key) = self.key() else { return };
        match state {
            MirrorState::Unknown => self.activity = Activity::Settled,
            MirrorState::Preparing => {
                self.stop_fetcher(out);
                let request = self.request();
                self.activity = Activity::AwaitingLme(request);
                out.push(Effect::QueryLastMirroredEpoch { request, key });
            }
            MirrorState::Mirroring => {
                if !self.fetcher_running {
                    self.fetcher_running = true;
                    out.push(Effect::StartFetcher);
                }
                let fetch_offset = log.log_end_offset();
                let last_fetched_epoch = log.epoch_cache().latest_epoch();
                self.fetch(config, fetch_offset, last_fetched_epoch, out);
            }
            MirrorState::Paused => {
                self.stop_fetcher(out);
                self.activity = Activity::Settled;
            }
            MirrorState::Pausing => {
                self.stop_fetcher(out);
                self.write_state(config, MirrorState::Paused, None, out);
            }
            MirrorState::EpochFencing => self.fence_epoch(config, log, out),
            MirrorState::UleRecovery => {
                // Wait until the replicas converged on the truncated log, then mirror again.
                self.stop_fetcher(out);
                self.activity = Activity::AwaitingReplicas {
                    truncated_to: log.log_end_offset(),
                    done: OrdSet::unit(self.broker),
                };
                self.check_replicas_done(config, out);
            }
            MirrorState::Stopping => self.run_stop_sequence(config, log, out),
            MirrorState::Stopped => {
                self.stop_fetcher(out);
                if !self.writable {
                    self.writable = true;
                    out.push(Effect::SetWritable(true));
                }
                self.activity = Activity::Settled;
            }
            MirrorState::Failed => {
                self.stop_fetcher(out);
                let attempt = self.stored_value().map_or(1, |v| v.retry_attempt);
                if attempt != NON_RETRYABLE_ATTEMPT
                    && config.retry.allows(attempt)
                    && !mutant::active(config.mutant, Mutant::NeverRetry)
                {
                    self.activity = Activity::AwaitingRetry { attempt };
                    out.push(Effect::ScheduleRetry {
                        attempt,
                        delay_ms: config.retry.delay_ms(attempt),
                    });
                } else {
                    self.activity = Activity::Settled;
                }
            }
        }
    }

    /// EPOCH_FENCING (the prototype design): bump the leader epoch above the source's epoch
    /// `S` (the fencing batch's, or after a leader change the log's latest) when `S` is within
    /// the bump rule's threshold of the leader epoch `L` (`S > L - threshold`), then MIRRORING;
    /// otherwise MIRRORING at once.
    fn fence_epoch(&mut self, config: &MirrorConfig, log: &impl LogView, out: &mut Vec<Effect>) {
        self.stop_fetcher(out);
        let leader_epoch = self.leadership.as_ref().map_or(0, |l| l.leader_epoch);
        let source_epoch = self
            .fencing_epoch
            .take()
            .or(log.epoch_cache().latest_epoch())
            .unwrap_or(leader_epoch);
        let threshold = config.epoch_bump.proactive_threshold.unwrap_or(0);
        if source_epoch > leader_epoch.saturating_sub(i32::from(threshold)) {
            let request = self.request();
            self.activity = Activity::AwaitingFencingBump(request);
            out.push(Effect::BumpLeaderEpoch {
                request,
                at_least: config.epoch_bump.target(source_epoch),
            });
        } else {
            self.write_state(config, MirrorState::Mirroring, None, out);
        }
    }

    fn stop_fetcher(&mut self, out: &mut Vec<Effect>) {
        if self.fetcher_running {
            self.fetcher_running = false;
            out.push(Effect::StopFetcher);
        }
    }

    fn fetch(
        &mut self,
        config: &MirrorConfig,
        fetch_offset: Offset,
        last_fetched_epoch: Option<LeaderEpoch>,
        out: &mut Vec<Effect>,
    ) {
        let last_fetched_epoch = last_fetched_epoch
            .filter(|_| !mutant::active(config.mutant, Mutant::FetchWithoutLastEpoch));
        let request = RequestId::for_fetch(fetch_offset, last_fetched_epoch);
        self.activity = Activity::Fetching(request);
        out.push(Effect::Fetch {
            request,
            fetch_offset,
            last_fetched_epoch,
            isolation: config.fetch_isolation,
        });
    }

    /// PREPARING: truncate by the LME rule, then wait for the replicas.
    ///
    /// The cut is the start of the first local epoch above the LME (`end_offset_for(LME)`),
    /// and never above the offset at which the other cluster's mirrored copy of the LME ended:
    /// with the epoch alone, data this cluster wrote in the LME epoch after the other side
    /// stopped mirroring survives PREPARING (the model's counterexample; only the next fetch's
    /// divergence check would remove it).
    fn on_lme(
        &mut self,
        config: &MirrorConfig,
        lme: Option<EpochAndOffset>,
        source_log_start_offset: Offset,
        log: &impl LogView,
        out: &mut Vec<Effect>,
    ) {
        let (truncated_to, effect) =
            crate::lme::lme_truncation(lme, source_log_start_offset, log, config.mutant);
        out.extend(effect.map(Effect::Log));
        self.activity = Activity::AwaitingReplicas {
            truncated_to,
            done: OrdSet::unit(self.broker),
        };
        self.check_replicas_done(config, out);
    }

    fn check_replicas_done(&mut self, config: &MirrorConfig, out: &mut Vec<Effect>) {
        let (Activity::AwaitingReplicas { done, .. }, Some(leadership)) =
            (&self.activity, &self.leadership)
        else {
            return;
        };
        let quorum = match config.truncation_quorum {
            TruncationQuorum::Isr => &leadership.isr,
            TruncationQuorum::AllReplicas => &leadership.replicas,
        };
        let complete = quorum.iter().all(|r| done.contains(r))
            || mutant::active(config.mutant, Mutant::SkipIsrWait);
        if complete {
            let next = match self.desired {
                DesiredState::Stop(_) => MirrorState::Stopping,
                _ => MirrorState::Mirroring,
            };
            self.write_state(config, next, None, out);
        }
    }

    /// MIRRORING: act on one fetch response and send the next fetch.
    fn on_fetch(
        &mut self,
        config: &MirrorConfig,
        outcome: FetchOutcome,
        log: &impl LogView,
        out: &mut Vec<Effect>,
    ) {
        let leo = log.log_end_offset();
        let cache = log.epoch_cache();
        match outcome {
            FetchOutcome::Records {
                next_offset,
                last_epoch,
            } => {
                let leader_epoch = self.leadership.as_ref().map_or(0, |l| l.leader_epoch);
                let source_ahead = if mutant::active(config.mutant, Mutant::EpochTieNotBumped) {
                    last_epoch.is_some_and(|e| e > leader_epoch)
                } else {
                    last_epoch.is_some_and(|e| config.epoch_bump.reactive(e, leader_epoch))
                };
                if next_offset > leo
                    && source_ahead
                    && !mutant::active(config.mutant, Mutant::SkipEpochBump)
                {
                    // The destination's epoch must stay above every mirrored epoch (KIP-1279's
                    // leader-epoch invariant), or a later leader writes at an epoch a replica
                    // already holds mirrored data for. Bump first, then fetch again.
                    let source_epoch = last_epoch.unwrap_or(leader_epoch);
                    if config.design == Design::Prototype {
                        // The prototype persists EPOCH_FENCING, whose side effect bumps.
                        self.fencing_epoch = Some(source_epoch);
                        self.write_state(config, MirrorState::EpochFencing, None, out);
                        return;
                    }
                    let request = self.request();
                    self.activity = Activity::AwaitingFetchEpochBump(request);
                    out.push(Effect::BumpLeaderEpoch {
                        request,
                        at_least: config.epoch_bump.target(source_epoch),
                    });
                } else if next_offset > leo {
                    out.push(Effect::Log(LogEffect::AppendFetched));
                    let appended_epoch = last_epoch.unwrap_or(leader_epoch);
                    if last_epoch.is_some()
                        && config.epoch_bump.proactive(appended_epoch, leader_epoch)
                    {
                        // The prototype's proactive bump, without leaving MIRRORING: the next
                        // fetch waits for it.
                        let request = self.request();
                        self.activity = Activity::AwaitingFetchEpochBump(request);
                        out.push(Effect::BumpLeaderEpoch {
                            request,
                            at_least: config.epoch_bump.target(appended_epoch),
                        });
                        return;
                    }
                    self.fetch(
                        config,
                        next_offset,
                        last_epoch.or(cache.latest_epoch()),
                        out,
                    );
                } else {
                    self.fetch(config, leo, cache.latest_epoch(), out);
                }
            }
            FetchOutcome::Diverging(diverging) => {
                let (offset, epoch) =
                    if mutant::active(config.mutant, Mutant::DivergenceTakenAtItsWord) {
                        (diverging.end_offset.clamp(0, leo), Some(diverging.epoch))
                    } else {
                        let offset =
                            if mutant::active(config.mutant, Mutant::DivergenceTruncatesToLogEnd) {
                                leo
                            } else {
                                divergence_truncation_offset(cache, leo, diverging)
                            };
                        (offset, cache.epoch_for_offset(offset - 1))
                    };
                if offset < leo {
                    out.push(Effect::Log(LogEffect::TruncateTo {
                        offset,
                        cause: TruncationCause::DivergingEpoch,
                    }));
                    if config.design == Design::Prototype {
                        // The source lost data it had served: an unclean election there. The
                        // prototype recovers (ULE_RECOVERY) only when unclean elections are
                        // supported, else fails for good.
                        if config.truncation_quorum == TruncationQuorum::AllReplicas {
                            self.write_state(config, MirrorState::UleRecovery, None, out);
                        } else {
                            self.write_non_retryable_failure(
                                config,
                                "log truncation while mirroring implies an unclean leader \
                                 election in the source cluster"
                                    .into(),
                                out,
                            );
                        }
                        return;
                    }
                }
                self.fetch(config, offset, epoch, out);
            }
            FetchOutcome::OffsetOutOfRange {
                log_start_offset,
                log_end_offset,
            } => match resolve_out_of_range(leo, log_start_offset, log_end_offset) {
                OutOfRangeResolution::TruncateTo(offset) => {
                    out.push(Effect::Log(LogEffect::TruncateTo {
                        offset,
                        cause: TruncationCause::OffsetOutOfRange,
                    }));
                    self.fetch(config, offset, cache.epoch_for_offset(offset - 1), out);
                }
                OutOfRangeResolution::TruncateFullyAndStartAt(offset) => {
                    out.push(Effect::Log(LogEffect::TruncateFullyAndStartAt {
                        offset,
                        cause: TruncationCause::OffsetOutOfRange,
                    }));
                    self.fetch(config, offset, None, out);
                }
                OutOfRangeResolution::FetchFrom(offset) => {
                    self.fetch(config, offset, cache.latest_epoch(), out);
                }
            },
        }
    }

    /// STOPPING, re-entrant: step 1 removes the fetcher (already gone when the record was
    /// written: revoke early), then [`Self::run_stop_steps`] runs steps 2 to 5 in
    /// `config.stop_order`, then STOPPED once the stop's writes are committed.
    fn run_stop_sequence(
        &mut self,
        config: &MirrorConfig,
        log: &impl LogView,
        out: &mut Vec<Effect>,
    ) {
        let fetcher_kept = mutant::active(config.mutant, Mutant::FetcherRunsInStopping);
        if !fetcher_kept {
            self.stop_fetcher(out);
        }
        if mutant::active(config.mutant, Mutant::WritableBeforeStopped) && !self.writable {
            self.writable = true;
            out.push(Effect::SetWritable(true));
        }
        self.run_stop_steps(config, log, false, out);
    }

    /// STOPPING's steps 2 to 5 (`docs/design.md`, section 5.4) in the configured
    /// [`StopOrder`](crate::config::StopOrder): runs every step that is not done yet, in order,
    /// until one waits for a completion (the epoch bump, the STOPPING record, the LME write);
    /// once all are done, STOPPED is written when the stop's writes are committed.
    ///
    /// Whether a step is done is derived from the persisted record and the log, never from
    /// memory, so a crash or a leader change anywhere re-runs the sequence safely:
    /// - bump: the STOPPING record has `previous_state == STOPPING`; its leader epoch is then the
    ///   stop epoch (before the bump, the epoch the STOPPING record was written at);
    /// - truncate: a batch at the stop epoch or later exists (with `TruncateToLso`: in the KIP's
    ///   order the truncation precedes every write of the stop, so such a batch means it ran and
    ///   running it again would cut the stop's own writes), or the LSO is the LEO; with
    ///   `AbortOpenTransactions`: no transaction is open;
    /// - LME: only the coordinator's acknowledgement (`lme_acked`, this call) says so: the record
    ///   is not read back, so a re-entry writes it again (idempotent when nothing changed); on
    ///   the acknowledgement the runner resumes after the LME step;
    /// - reset: the last batch is a `MIRROR_PID_RESET` at the stop epoch or later.
    ///
    /// Log effects are applied only after `handle` returns, so the steps after one read
    /// [`StopLog`], the log as the effects emitted so far leave it. Each step runs at most
    /// once per call: whatever an order does, one call ends.
    fn run_stop_steps(
        &mut self,
        config: &MirrorConfig,
        log: &impl LogView,
        lme_acked: bool,
        out: &mut Vec<Effect>,
    ) {
        let (Some(key), Some(leadership), Some(stored)) = (
            self.key(),
            self.leadership.clone(),
            self.stored_value().cloned(),
        ) else {
            return;
        };
        let bumped = stored.previous_state == Some(MirrorState::Stopping);
        // Every write of this stop carries at least `stop_epoch`; mirrored epochs are below it.
        let stop_epoch = stored.leader_epoch;
        let mut view = StopLog::new(log, stop_epoch);
        // On the LME's acknowledgement the steps before it are done: the call that sent the
        // write ran them (a step that waits returns before the LME), and only this stop's own
        // effects change the leader's log. They are not re-derived: a truncation to the LSO
        // can cut a closed transaction's marker, and looking again would truncate further.
        let first = if lme_acked {
            config.stop_order.position(StopStep::Lme) + 1
        } else {
            0
        };
        for step in config.stop_order.steps().into_iter().skip(first) {
            match step {
                StopStep::Bump => {
                    if bumped {
                        continue;
                    }
                    let latest = view.latest_epoch;
                    let above_log = latest.is_none_or(|e| leadership.leader_epoch > e);
                    if above_log || mutant::active(config.mutant, Mutant::SkipEpochBump) {
                        // Local writes already carry a larger epoch than anything in the log:
                        // no bump is needed, only the record of the epoch the stop writes at.
                        self.write_state(config, MirrorState::Stopping, None, out);
                    } else {
                        let request = self.request();
                        self.activity = Activity::AwaitingEpochBump(request);
                        out.push(Effect::BumpLeaderEpoch {
                            request,
                            at_least: leadership.leader_epoch.max(latest.unwrap_or(0)) + 1,
                        });
                    }
                    // The bumped epoch is persisted with the STOPPING record before anything
                    // else runs: the record's `previous_state == STOPPING` marks it done.
                    return;
                }
                StopStep::Truncate => {
                    if mutant::active(config.mutant, Mutant::SkipLsoTruncation) {
                        continue;
                    }
                    match config.stop_strategy {
                        StopStrategy::TruncateToLso => {
                            // A batch at the stop epoch means step 3 already ran: truncating
                            // again would cut this stop's own MIRROR_PID_RESET below the HW and
                            // write a second one at the same offset that followers holding the
                            // first do not share.
                            if view.stop_writes_start.is_some() {
                                continue;
                            }
                            let lso = if mutant::active(config.mutant, Mutant::LsoReleasedAtMarker)
                            {
                                view.lso_released_at_marker(log)
                            } else {
                                view.last_stable_offset(log)
                            };
                            if lso < view.log_end_offset {
                                out.push(Effect::Log(LogEffect::TruncateTo {
                                    offset: lso,
                                    cause: TruncationCause::LastStableOffset,
                                }));
                                view.truncate_to(lso);
                            }
                        }
                        StopStrategy::AbortOpenTransactions => {
                            for (producer_id, producer_epoch) in view.open_transactions(log) {
                                out.push(Effect::Log(LogEffect::AbortTransaction {
                                    producer_id,
                                    producer_epoch,
                                    leader_epoch: leadership.leader_epoch,
                                }));
                                view.append_control(leadership.leader_epoch, false);
                            }
                        }
                    }
                }
                StopStep::Lme => {
                    if lme_acked {
                        continue;
                    }
                    // The LME ends where the first batch written at the stop epoch (or later)
                    // begins, or at the log end. The prototype records the log's latest epoch
                    // and its end, whatever the stop wrote before.
                    let (last_mirrored_epoch, last_mirrored_offset) =
                        if config.lme_capture == LmeCapture::LogEnd {
                            (view.latest_epoch, view.log_end_offset)
                        } else {
                            let offset = view
                                .stop_writes_start
                                .map_or(view.log_end_offset, |s| s.min(view.log_end_offset));
                            (log.epoch_cache().epoch_for_offset(offset - 1), offset)
                        };
                    let request = self.request();
                    self.activity = Activity::AwaitingLmeWrite(request);
                    out.push(Effect::WriteLastMirroredEpoch {
                        request,
                        key,
                        value: LastMirroredEpochsValue {
                            last_mirrored_epoch,
                            last_mirrored_offset,
                        },
                        expected_state_epoch: config.lme_write_fenced.then_some(stored.state_epoch),
                    });
                    return;
                }
                StopStep::Reset => {
                    if mutant::active(config.mutant, Mutant::SkipPidReset)
                        || view.last_is_stop_reset
                    {
                        continue;
                    }
                    out.push(Effect::Log(LogEffect::AppendPidReset {
                        leader_epoch: leadership.leader_epoch,
                    }));
                    view.append_control(leadership.leader_epoch, true);
                }
            }
        }
        // STOPPED once the stop's writes are committed (without a reset: at once, the mutant).
        if mutant::active(config.mutant, Mutant::SkipPidReset)
            || view.high_watermark >= view.log_end_offset
        {
            self.write_state(config, MirrorState::Stopped, None, out);
        } else {
            self.activity = Activity::AwaitingPidResetCommit;
        }
    }

    /// STOPPED is persisted only once the stop's writes are committed (HW at LEO): a follower
    /// elected before it copied the `MIRROR_PID_RESET` batch would otherwise open a STOPPED
    /// partition to producers whose ids collide with mirrored ones (the model's counterexample
    /// with two replicas).
    fn write_stopped_once_committed(
        &mut self,
        config: &MirrorConfig,
        log: &impl LogView,
        out: &mut Vec<Effect>,
    ) {
        if log.high_watermark() >= log.log_end_offset() {
            self.write_state(config, MirrorState::Stopped, None, out);
        } else {
            self.activity = Activity::AwaitingPidResetCommit;
        }
    }

    fn on_failure(
        &mut self,
        config: &MirrorConfig,
        request: RequestId,
        error: String,
        out: &mut Vec<Effect>,
    ) -> Result<(), Ignored> {
        match self.activity {
            // The coordinator failed (nothing can be persisted), or a STOPPING step did: the
            // stop sequence is re-entrant, so re-read and re-run it after a backoff instead of
            // persisting FAILED (which would forget whether the epoch was already bumped).
            Activity::Reading(r)
            | Activity::Writing { request: r, .. }
            | Activity::AwaitingEpochBump(r)
            | Activity::AwaitingLmeWrite(r)
                if r == request =>
            {
                let attempt = self.stored_value().map_or(0, |v| v.retry_attempt) + 1;
                if matches!(
                    self.activity,
                    Activity::Reading(_) | Activity::Writing { .. }
                ) && !mutant::active(config.mutant, Mutant::KeepStateAfterFailedWrite)
                {
                    // Whether the write landed is unknown: act on nothing until re-read.
                    self.stored = None;
                    self.asserted = false;
                }
                self.activity = Activity::AwaitingRetry { attempt };
                out.push(Effect::ScheduleRetry {
                    attempt,
                    delay_ms: config.retry.delay_ms(attempt),
                });
                Ok(())
            }
            Activity::AwaitingLme(r)
            | Activity::Fetching(r)
            | Activity::AwaitingFetchEpochBump(r)
            | Activity::AwaitingFencingBump(r)
                if r == request =>
            {
                self.write_state(config, MirrorState::Failed, Some(error), out);
                Ok(())
            }
            _ => Err(Ignored::StaleCompletion(request)),
        }
    }
}

/// The state a retry of the FAILED record `failed` writes, or `None` when the table refuses it
/// (the prototype: a FAILED EPOCH_FENCING, ULE_RECOVERY, PAUSING, PAUSED or STOPPED stays
/// FAILED until an operator acts, `docs/prototype.md` D1).
fn retry_target(config: &MirrorConfig, failed: &MirrorPartitionStateValue) -> Option<MirrorState> {
    let recorded = failed.previous_state;
    if config.design == Design::Seed && config.failed_retry == FailedRetry::PreviousState {
        return Some(recorded.unwrap_or(MirrorState::Unknown));
    }
    let target = match config.failed_retry {
        FailedRetry::PreviousState => recorded
            .filter(|&s| s != MirrorState::Unknown)
            .unwrap_or(MirrorState::Preparing),
        FailedRetry::LogAlignment => MirrorState::Preparing,
    };
    config
        .transitions
        .is_legal(MirrorState::Failed, target, recorded)
        .then_some(target)
}

/// The log as the STOPPING steps emitted so far in one `handle` call leave it: log effects are
/// applied after the call returns, so a step after another reads this instead of the log.
/// Only what the steps consult is tracked.
struct StopLog {
    log_end_offset: Offset,
    high_watermark: Offset,
    latest_epoch: Option<LeaderEpoch>,
    /// The stop epoch the steps compare batches with.
    stop_epoch: LeaderEpoch,
    /// Where the first batch at the stop epoch or later starts (the stop's own writes).
    stop_writes_start: Option<Offset>,
    /// Whether the last batch is a `MIRROR_PID_RESET` at the stop epoch or later.
    last_is_stop_reset: bool,
    /// Whether an effect of this call changed the log (the producer state is then known only
    /// through what the effects did: no transaction is open after any of them).
    changed: bool,
}

impl StopLog {
    fn new(log: &impl LogView, stop_epoch: LeaderEpoch) -> Self {
        StopLog {
            log_end_offset: log.log_end_offset(),
            high_watermark: log.high_watermark(),
            latest_epoch: log.epoch_cache().latest_epoch(),
            stop_epoch,
            stop_writes_start: log
                .epoch_cache()
                .entries()
                .find(|e| e.epoch >= stop_epoch)
                .map(|e| e.start_offset),
            last_is_stop_reset: log.last_batch().is_some_and(|b| {
                b.control == Some(crate::batch::ControlType::MirrorPidReset)
                    && b.partition_leader_epoch >= stop_epoch
            }),
            changed: false,
        }
    }

    /// The LSO. After a truncation to the LSO, ABORT markers or a `MIRROR_PID_RESET` no
    /// transaction is open, and the LSO is the HW.
    fn last_stable_offset(&self, log: &impl LogView) -> Offset {
        if self.changed {
            self.high_watermark
        } else {
            log.last_stable_offset()
        }
    }

    /// The LSO of mutant `LsoReleasedAtMarker`: closed transactions never hold it.
    fn lso_released_at_marker(&self, log: &impl LogView) -> Offset {
        let hw = self.high_watermark;
        if self.changed {
            return hw;
        }
        log.producer_state()
            .first_open_transaction_offset()
            .map_or(hw, |first| first.min(hw))
    }

    /// The open transactions, `(producer id, producer epoch)`.
    fn open_transactions(&self, log: &impl LogView) -> Vec<(ProducerId, ProducerEpoch)> {
        if self.changed {
            return Vec::new();
        }
        log.producer_state()
            .open_transactions()
            .map(|(producer_id, producer_epoch, _)| (producer_id, producer_epoch))
            .collect()
    }

    /// After `TruncateTo { offset }` (at or below the LEO).
    fn truncate_to(&mut self, offset: Offset) {
        self.log_end_offset = offset;
        self.high_watermark = self.high_watermark.min(offset);
        if self.stop_writes_start.is_some_and(|s| s >= offset) {
            self.stop_writes_start = None;
        }
        // The truncation ran because no batch at the stop epoch was left: neither is a reset.
        self.last_is_stop_reset = false;
        self.changed = true;
    }

    /// After a control batch (an ABORT marker, or `MIRROR_PID_RESET` when `reset`) appended
    /// at `leader_epoch`.
    fn append_control(&mut self, leader_epoch: LeaderEpoch, reset: bool) {
        let at_stop_epoch = leader_epoch >= self.stop_epoch;
        if at_stop_epoch && self.stop_writes_start.is_none() {
            self.stop_writes_start = Some(self.log_end_offset);
        }
        self.log_end_offset += 1;
        self.latest_epoch = Some(
            self.latest_epoch
                .map_or(leader_epoch, |e| e.max(leader_epoch)),
        );
        self.last_is_stop_reset = reset && at_stop_epoch;
        self.changed = true;
    }
}
