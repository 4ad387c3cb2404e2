//! The `__mirror_state` record: reading it, writing it (persist first: what a state allows
//! waits for the acknowledgement; revoke early: what it forbids is taken away before the
//! write), and the coordinator's answers.

use super::design::DesignRules;
use super::failure::Failure;
use super::{mutated, Activity, Ignored, PartitionMirror};
use crate::config::MirrorConfig;
use crate::effect::{Effect, RequestId};
use crate::log::LogView;
use crate::mutant::Mutant;
use crate::records::{MirrorPartitionStateValue, NON_RETRYABLE_ATTEMPT};
use crate::state::MirrorState;
use crate::types::{MirrorPartition, StateEpoch};

impl PartitionMirror {
    /// Asks the coordinator for the stored record (nothing to read without a mirror: idle).
    pub(super) fn read_state(&mut self, out: &mut Vec<Effect>) {
        let Some(key) = self.key() else {
            self.activity = Activity::Idle;
            return;
        };
        self.send(
            Activity::Reading,
            |request| Effect::ReadState { request, key },
            out,
        );
    }

    /// `StateRead`: the stored record, the truth to decide on.
    pub(super) fn on_state_read(
        &mut self,
        config: &MirrorConfig,
        request: RequestId,
        value: Option<MirrorPartitionStateValue>,
        log: &impl LogView,
        out: &mut Vec<Effect>,
    ) -> Result<(), Ignored> {
        self.expect(Activity::Reading(request), request)?;
        self.stored = Some(value);
        self.reconcile(config, log, out);
        Ok(())
    }

    /// `StateWritten`: the record is stored and this leadership has asserted it. The
    /// prototype decides on triggers only (leadership, a desired-state change, a read): after
    /// its own write it runs the written state's side effect.
    pub(super) fn on_state_written(
        &mut self,
        config: &MirrorConfig,
        request: RequestId,
        value: MirrorPartitionStateValue,
        log: &impl LogView,
        out: &mut Vec<Effect>,
    ) -> Result<(), Ignored> {
        if !matches!(self.activity, Activity::Writing { request: r, .. } if r == request) {
            return Err(Ignored::StaleCompletion(request));
        }
        self.stored = Some(Some(value));
        self.asserted = true;
        self.activity = Activity::Settled;
        let decide = !DesignRules::of(config).triggers_only || self.decision_pending;
        self.decision_pending = false;
        self.reconcile_with(config, log, decide, out);
        Ok(())
    }

    /// `WriteFenced`: the state was written by someone else since it was read; read it again.
    pub(super) fn on_write_fenced(
        &mut self,
        request: RequestId,
        out: &mut Vec<Effect>,
    ) -> Result<(), Ignored> {
        match self.activity {
            Activity::Writing { request: r, .. } if r == request => {}
            // The state was written since this leader wrote STOPPING: a successor (or a
            // later incarnation) owns the stop. Act on nothing until re-read and re-asserted.
            Activity::AwaitingLmeWrite(r) if r == request => self.asserted = false,
            _ => return Err(Ignored::StaleCompletion(request)),
        }
        self.read_state(out);
        Ok(())
    }

    /// Asks the coordinator to store `target` (persist first); revokes what it forbids first.
    pub(super) fn write_state(
        &mut self,
        config: &MirrorConfig,
        target: MirrorState,
        error: Option<String>,
        out: &mut Vec<Effect>,
    ) {
        self.write_value(config, target, error, Failure::Retried, out);
    }

    /// [`Self::write_state`], a FAILED `target` retried as `failure` says.
    pub(super) fn write_value(
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
                    && !mutated(config, Mutant::DeletedSourceFailedForever) =>
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
        self.send_write(config, key, value, expected_state_epoch, out);
        if target == MirrorState::Stopped && mutated(config, Mutant::ActBeforePersist) {
            self.writable = true;
            out.push(Effect::SetWritable(true));
        }
    }

    /// Sends the write of `value` (revoking early what its state forbids) and waits for it.
    pub(super) fn send_write(
        &mut self,
        config: &MirrorConfig,
        key: MirrorPartition,
        value: MirrorPartitionStateValue,
        expected_state_epoch: Option<StateEpoch>,
        out: &mut Vec<Effect>,
    ) {
        let target = value.state;
        self.revoke_for(config, target, out);
        let write = |request| Effect::WriteState {
            request,
            key,
            value,
            expected_state_epoch,
        };
        self.send(|request| Activity::Writing { request, target }, write, out);
    }

    /// Revoke early: before writing `target`, take away what `target` does not allow (writes
    /// by local producers, the fetcher). A revocation is safe whatever the write's outcome;
    /// granting waits for the acknowledgement.
    fn revoke_for(&mut self, config: &MirrorConfig, target: MirrorState, out: &mut Vec<Effect>) {
        if !target.is_writable() {
            self.close_gate(out);
        }
        let kept =
            target == MirrorState::Stopping && mutated(config, Mutant::FetcherRunsInStopping);
        if !target.runs_fetcher() && !kept {
            self.stop_fetcher(out);
        }
    }
}
