//! Failure: a failed request, FAILED and its retry, and a source topic that is gone.
//!
//! A failed coordinator request, or a failed STOPPING step, is retried after a backoff without
//! persisting anything (the stop sequence is re-entrant, and FAILED would forget whether the
//! epoch was already bumped); any other failed step persists FAILED, which records the state
//! to retry. A deleted source topic leaves the partition FAILED for good, with STOPPING as its
//! only exit.

use super::design::DesignRules;
use super::{mutated, Activity, Ignored, PartitionMirror};
use crate::config::{FailedRetry, MirrorConfig};
use crate::desired::DesiredState;
use crate::effect::{Effect, RequestId};
use crate::mutant::Mutant;
use crate::records::{MirrorPartitionStateValue, NON_RETRYABLE_ATTEMPT};
use crate::state::MirrorState;

/// How a written FAILED record is retried.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Failure {
    /// By the retry policy, to the recorded state (and any write that is not FAILED).
    Retried,
    /// Never (the prototype's non-retryable failures).
    NotRetried,
    /// Never; its recorded exit is STOPPING, taken when the operator stops the topic (the
    /// source topic is gone: a stop needs nothing of it).
    ExitOnlyByStop,
}

impl PartitionMirror {
    /// `RequestFailed`: retry a coordinator request or a STOPPING step after a backoff; fail
    /// any other step (FAILED, retried by the policy).
    pub(super) fn on_failure(
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
                let state_request = matches!(
                    self.activity,
                    Activity::Reading(_) | Activity::Writing { .. }
                );
                if state_request && !mutated(config, Mutant::KeepStateAfterFailedWrite) {
                    // Whether the write landed is unknown: act on nothing until re-read.
                    self.stored = None;
                    self.asserted = false;
                }
                self.schedule_retry(config, attempt, out);
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

    /// Sets the timer of retry `attempt` and waits for it.
    fn schedule_retry(&mut self, config: &MirrorConfig, attempt: u32, out: &mut Vec<Effect>) {
        self.activity = Activity::AwaitingRetry { attempt };
        out.push(Effect::ScheduleRetry {
            attempt,
            delay_ms: config.retry.delay_ms(attempt),
        });
    }

    /// FAILED's side effect: stop the fetcher and schedule the retry the record and the policy
    /// allow (none for a failure that is not retried).
    pub(super) fn await_retry(&mut self, config: &MirrorConfig, out: &mut Vec<Effect>) {
        self.stop_fetcher(out);
        let attempt = self.stored_value().map_or(1, |v| v.retry_attempt);
        if attempt != NON_RETRYABLE_ATTEMPT
            && config.retry.allows(attempt)
            && !mutated(config, Mutant::NeverRetry)
        {
            self.schedule_retry(config, attempt, out);
        } else {
            self.activity = Activity::Settled;
        }
    }

    /// `RetryDue`: a FAILED record is retried to the design's retry target; a failed read or
    /// write of the state itself reads again.
    pub(super) fn on_retry_due(
        &mut self,
        config: &MirrorConfig,
        attempt: u32,
        out: &mut Vec<Effect>,
    ) -> Result<(), Ignored> {
        if self.activity != (Activity::AwaitingRetry { attempt }) {
            return Err(self.not_applicable("RetryDue"));
        }
        let failed = self
            .stored_value()
            .filter(|v| v.state == MirrorState::Failed);
        match failed.map(|v| (DesignRules::of(config).retry_target)(config, v)) {
            Some(Some(target)) => self.write_state(config, target, None, out),
            // The table refuses the retry: FAILED until an operator acts.
            Some(None) => self.activity = Activity::Settled,
            // The timer was for a failed read or write of the state itself.
            None => self.read_state(out),
        }
        Ok(())
    }

    /// `SourceTopicDeleted`: remembered for this leadership; FAILED for good now (or when the
    /// answer in flight arrives) if the partition still needs the source.
    pub(super) fn on_source_deleted(
        &mut self,
        config: &MirrorConfig,
        out: &mut Vec<Effect>,
    ) -> Result<(), Ignored> {
        if self.source_deleted {
            return Err(self.not_applicable("SourceTopicDeleted"));
        }
        self.source_deleted = true;
        if self.leadership.is_some()
            && self.stored.is_some()
            && self.fails_for_deleted_source(self.state())
            && !self.defers_to_answer(config)
        {
            self.fail_for_deleted_source(config, out);
        }
        Ok(())
    }

    /// Writes FAILED for good: the source's topic is gone, and only a stop leaves it.
    pub(super) fn fail_for_deleted_source(&mut self, config: &MirrorConfig, out: &mut Vec<Effect>) {
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
    pub(super) fn failed_until_stopped(&self) -> bool {
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
    pub(super) fn fails_for_deleted_source(&self, state: MirrorState) -> bool {
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
}

/// The seed's [`DesignRules::retry_target`]: with [`FailedRetry::PreviousState`], the state
/// recorded with the FAILED record `failed` (UNKNOWN when none), as the table's
/// `FAILED -> retry` edge says; otherwise as [`table_retry_target`].
pub(super) fn seed_retry_target(
    config: &MirrorConfig,
    failed: &MirrorPartitionStateValue,
) -> Option<MirrorState> {
    match config.failed_retry {
        FailedRetry::PreviousState => Some(failed.previous_state.unwrap_or(MirrorState::Unknown)),
        FailedRetry::LogAlignment => table_retry_target(config, failed),
    }
}

/// The prototype's [`DesignRules::retry_target`]: the state [`MirrorConfig::failed_retry`]
/// names for the FAILED record `failed` (the recorded state, PREPARING when none; or
/// PREPARING), or `None` when the table refuses it (the prototype: a FAILED EPOCH_FENCING,
/// ULE_RECOVERY, PAUSING, PAUSED or STOPPED stays FAILED until an operator acts,
/// `docs/prototype.md` D1).
pub(super) fn table_retry_target(
    config: &MirrorConfig,
    failed: &MirrorPartitionStateValue,
) -> Option<MirrorState> {
    let recorded = failed.previous_state;
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
