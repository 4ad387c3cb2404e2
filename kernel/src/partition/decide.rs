//! Deciding: what the operator's desired state asks of the stored state, and running the
//! stored state's side effect when it asks nothing (or the design decides on triggers only).
//!
//! Each design's decision function is here; which one runs is
//! [`DesignRules::transition`](super::design::DesignRules).

use super::design::DesignRules;
use super::{mutated, Activity, PartitionMirror};
use crate::config::MirrorConfig;
use crate::desired::DesiredState;
use crate::effect::Effect;
use crate::log::LogView;
use crate::mutant::Mutant;
use crate::state::MirrorState;

impl PartitionMirror {
    /// `DesiredStateChanged`: another mirror (or none) drops everything known and reads the
    /// new key's state; the same mirror is decided on at once, or when the answer to a read or
    /// write in flight arrives.
    pub(super) fn on_desired(
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
            self.stop_fetcher(out);
            self.stored = None;
            self.asserted = false;
            self.activity = Activity::Idle;
            if self.key().is_some() {
                self.read_state(out);
            }
            return;
        }
        if !self.defers_to_answer(config) {
            self.reconcile(config, log, out);
        }
    }

    /// Whether a state read or write is in flight, so a trigger is decided when its answer
    /// arrives (the prototype remembers that one is pending; the seed decides after every
    /// write anyway).
    pub(super) fn defers_to_answer(&mut self, config: &MirrorConfig) -> bool {
        let in_flight = matches!(
            self.activity,
            Activity::Reading(_) | Activity::Writing { .. }
        );
        if in_flight {
            self.decision_pending = DesignRules::of(config).triggers_only;
        }
        in_flight
    }

    /// [`Self::reconcile_with`], deciding.
    pub(super) fn reconcile(
        &mut self,
        config: &MirrorConfig,
        log: &impl LogView,
        out: &mut Vec<Effect>,
    ) {
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
    pub(super) fn reconcile_with(
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

    /// The transition the desired state asks for right now from `from`, if any, by the
    /// design's decision function. Transitions that must wait for a state's work (PREPARING ->
    /// MIRRORING, STOPPING -> STOPPED) are not decided: the work itself moves on when it
    /// finishes.
    fn immediate_transition(
        &self,
        config: &MirrorConfig,
        from: MirrorState,
    ) -> Option<MirrorState> {
        let failback =
            matches!(self.desired, DesiredState::Mirror(_)) && from == MirrorState::Stopped;
        if failback && mutated(config, Mutant::FailbackWithoutPreparing) {
            return Some(MirrorState::Mirroring);
        }
        (DesignRules::of(config).transition)(self, config, from)
    }

    /// The seed's decision function: one step along the table towards the desired state.
    pub(super) fn seed_transition(
        &self,
        config: &MirrorConfig,
        from: MirrorState,
    ) -> Option<MirrorState> {
        use MirrorState::*;
        let to = match (&self.desired, from) {
            (DesiredState::Stop(_), Failed) if self.failed_until_stopped() => {
                return config
                    .transitions
                    .is_legal(Failed, Stopping, Some(Stopping))
                    .then_some(Stopping);
            }
            (DesiredState::Mirror(_) | DesiredState::Pause(_), Unknown | Stopped) => Preparing,
            // Nothing persisted under a topic that failed over: a partition added after the
            // failover, which never mirrored (PREPARING is written before any fetch). There is
            // nothing to stop; it is written STOPPED, so that its gate opens like its
            // siblings' and a failback finds the whole topic STOPPED.
            (DesiredState::Stop(_), Unknown)
                if !mutated(config, Mutant::GrownStoppedTopicStaysUnknown) =>
            {
                Stopped
            }
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
    pub(super) fn prototype_transition(
        &self,
        config: &MirrorConfig,
        from: MirrorState,
    ) -> Option<MirrorState> {
        use MirrorState::*;
        let to = match (&self.desired, from) {
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

    /// Runs the side effect of the persisted `state` (idempotent: also used after a restart).
    pub(super) fn enter(
        &mut self,
        config: &MirrorConfig,
        state: MirrorState,
        log: &impl LogView,
        out: &mut Vec<Effect>,
    ) {
        let Some(key) = self.key() else { return };
        match state {
            MirrorState::Unknown => self.activity = Activity::Settled,
            MirrorState::Preparing => self.query_lme(key, out),
            MirrorState::Mirroring => self.start_mirroring(config, log, out),
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
                self.await_replicas(config, log.log_end_offset(), out);
            }
            MirrorState::Stopping => self.run_stop_sequence(config, log, out),
            MirrorState::Stopped => {
                self.stop_fetcher(out);
                self.open_gate(out);
                self.activity = Activity::Settled;
            }
            MirrorState::Failed => self.await_retry(config, out),
        }
    }
}
