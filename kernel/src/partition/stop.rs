//! STOPPING (`docs/design.md`, section 5.4), re-entrant: step 1 removes the fetcher (already
//! gone when the record was written: revoke early), then steps 2 to 5 run in the configured
//! [`StopOrder`](crate::config::StopOrder), then STOPPED is written once the stop's writes are
//! committed.
//!
//! Whether a step is done is derived from the persisted record and the log, never from
//! memory, so a crash or a leader change anywhere re-runs the sequence safely:
//! - bump: the STOPPING record has `previous_state == STOPPING`; its leader epoch is then the
//!   stop epoch (before the bump, the epoch the STOPPING record was written at);
//! - truncate: a batch at the stop epoch or later exists (with `TruncateToLso`: in the KIP's
//!   order the truncation precedes every write of the stop, so such a batch means it ran and
//!   running it again would cut the stop's own writes), or the LSO is the LEO; with
//!   `AbortOpenTransactions`: no transaction is open;
//! - LME: only the coordinator's acknowledgement says so: the record is not read back, so a
//!   re-entry writes it again (idempotent when nothing changed); on the acknowledgement the
//!   sequence resumes after the LME step;
//! - reset: the last batch is a `MIRROR_PID_RESET` at the stop epoch or later.
//!
//! Log effects are applied only after `handle` returns, so the steps after one read
//! [`StopLog`], the log as the effects emitted so far leave it. Each step runs at most once per
//! call: whatever an order does, one call ends.

use super::{mutated, Activity, Ignored, PartitionMirror};
use crate::batch::ControlType;
use crate::config::{LmeCapture, MirrorConfig, StopStep, StopStrategy};
use crate::effect::{Effect, LogEffect, RequestId, TruncationCause};
use crate::log::LogView;
use crate::mutant::Mutant;
use crate::records::LastMirroredEpochsValue;
use crate::state::MirrorState;
use crate::types::{LeaderEpoch, MirrorPartition, Offset, ProducerEpoch, ProducerId, StateEpoch};

impl PartitionMirror {
    /// STOPPING's side effect: remove the fetcher, then run the steps not done yet.
    pub(super) fn run_stop_sequence(
        &mut self,
        config: &MirrorConfig,
        log: &impl LogView,
        out: &mut Vec<Effect>,
    ) {
        if !mutated(config, Mutant::FetcherRunsInStopping) {
            self.stop_fetcher(out);
        }
        if mutated(config, Mutant::WritableBeforeStopped) {
            self.open_gate(out);
        }
        self.run_stop_steps(config, log, false, out);
    }

    /// `LastMirroredEpochWritten`: the LME step is done; resume after it.
    pub(super) fn on_lme_written(
        &mut self,
        config: &MirrorConfig,
        request: RequestId,
        log: &impl LogView,
        out: &mut Vec<Effect>,
    ) -> Result<(), Ignored> {
        self.expect(Activity::AwaitingLmeWrite(request), request)?;
        if !mutated(config, Mutant::StallAfterLmeWrite) {
            self.run_stop_steps(config, log, true, out);
        }
        Ok(())
    }

    /// `HighWatermarkAdvanced`: the stop's writes may be committed now.
    pub(super) fn on_high_watermark_advanced(
        &mut self,
        config: &MirrorConfig,
        log: &impl LogView,
        out: &mut Vec<Effect>,
    ) -> Result<(), Ignored> {
        if self.activity != Activity::AwaitingPidResetCommit {
            return Err(self.not_applicable("HighWatermarkAdvanced"));
        }
        let committed = log.high_watermark() >= log.log_end_offset();
        self.write_stopped_when(config, committed, out);
        Ok(())
    }

    /// Steps 2 to 5 in the configured order: runs every step that is not done yet, in order,
    /// until one waits for a completion (the epoch bump, the STOPPING record, the LME write);
    /// once all are done, STOPPED is written when the stop's writes are committed.
    /// `lme_acked`: this call is the LME write's acknowledgement.
    fn run_stop_steps(
        &mut self,
        config: &MirrorConfig,
        log: &impl LogView,
        lme_acked: bool,
        out: &mut Vec<Effect>,
    ) {
        let (Some(key), Some(leadership), Some(stored)) =
            (self.key(), self.leadership.as_ref(), self.stored_value())
        else {
            return;
        };
        let leader_epoch = leadership.leader_epoch;
        let bumped = stored.previous_state == Some(MirrorState::Stopping);
        let state_epoch = stored.state_epoch;
        // Every write of this stop carries at least `stop_epoch`; mirrored epochs are below it.
        let mut view = StopLog::new(log, stored.leader_epoch);
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
                StopStep::Bump if bumped => {}
                // The bumped epoch is persisted with the STOPPING record before anything else
                // runs: the record's `previous_state == STOPPING` marks it done.
                StopStep::Bump => return self.bump_for_stop(config, leader_epoch, &view, out),
                StopStep::Truncate if mutated(config, Mutant::SkipLsoTruncation) => {}
                StopStep::Truncate => view.close_transactions(config, log, leader_epoch, out),
                StopStep::Lme if lme_acked => {}
                StopStep::Lme => return self.write_lme(config, key, state_epoch, log, &view, out),
                StopStep::Reset if mutated(config, Mutant::SkipPidReset) => {}
                StopStep::Reset => view.append_pid_reset(leader_epoch, out),
            }
        }
        // STOPPED once the stop's writes are committed (without a reset: at once, the mutant).
        let committed = view.high_watermark >= view.log_end_offset;
        self.write_stopped_when(
            config,
            committed || mutated(config, Mutant::SkipPidReset),
            out,
        );
    }

    /// The bump step: above every epoch in the log, or no bump is needed and only the STOPPING
    /// record of the epoch the stop writes at.
    fn bump_for_stop(
        &mut self,
        config: &MirrorConfig,
        leader_epoch: LeaderEpoch,
        view: &StopLog,
        out: &mut Vec<Effect>,
    ) {
        let latest = view.latest_epoch;
        let above_log = latest.is_none_or(|e| leader_epoch > e);
        if above_log || mutated(config, Mutant::SkipEpochBump) {
            // Local writes already carry a larger epoch than anything in the log: no bump is
            // needed, only the record of the epoch the stop writes at.
            self.write_state(config, MirrorState::Stopping, None, out);
        } else {
            let at_least = leader_epoch.max(latest.unwrap_or(0)) + 1;
            self.ask_bump(Activity::AwaitingEpochBump, at_least, out);
        }
    }

    /// The LME step: record the last mirrored epoch and offset of `key` (fenced by the
    /// STOPPING record's `state_epoch` when the config says so).
    fn write_lme(
        &mut self,
        config: &MirrorConfig,
        key: MirrorPartition,
        state_epoch: StateEpoch,
        log: &impl LogView,
        view: &StopLog,
        out: &mut Vec<Effect>,
    ) {
        let (last_mirrored_epoch, last_mirrored_offset) =
            view.last_mirrored(config.lme_capture, log);
        let value = LastMirroredEpochsValue {
            last_mirrored_epoch,
            last_mirrored_offset,
        };
        let expected_state_epoch = config.lme_write_fenced.then_some(state_epoch);
        let write = |request| Effect::WriteLastMirroredEpoch {
            request,
            key,
            value,
            expected_state_epoch,
        };
        self.send(Activity::AwaitingLmeWrite, write, out);
    }

    /// STOPPED is persisted only once the stop's writes are `committed` (HW at LEO): a
    /// follower elected before it copied the `MIRROR_PID_RESET` batch would otherwise open a
    /// STOPPED partition to producers whose ids collide with mirrored ones (the model's
    /// counterexample with two replicas). Until then, wait for the high watermark.
    fn write_stopped_when(
        &mut self,
        config: &MirrorConfig,
        committed: bool,
        out: &mut Vec<Effect>,
    ) {
        if committed {
            self.write_state(config, MirrorState::Stopped, None, out);
        } else {
            self.activity = Activity::AwaitingPidResetCommit;
        }
    }
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
                b.control == Some(ControlType::MirrorPidReset)
                    && b.partition_leader_epoch >= stop_epoch
            }),
            changed: false,
        }
    }

    /// The truncate step: closes the transactions open at the stop as `config.stop_strategy`
    /// says, emitting the log effects at `leader_epoch`.
    fn close_transactions(
        &mut self,
        config: &MirrorConfig,
        log: &impl LogView,
        leader_epoch: LeaderEpoch,
        out: &mut Vec<Effect>,
    ) {
        match config.stop_strategy {
            StopStrategy::TruncateToLso => {
                // A batch at the stop epoch means step 3 already ran: truncating again would
                // cut this stop's own MIRROR_PID_RESET below the HW and write a second one at
                // the same offset that followers holding the first do not share.
                if self.stop_writes_start.is_some() {
                    return;
                }
                let lso = if mutated(config, Mutant::LsoReleasedAtMarker) {
                    self.lso_released_at_marker(log)
                } else {
                    self.last_stable_offset(log)
                };
                if lso < self.log_end_offset {
                    out.push(Effect::Log(LogEffect::TruncateTo {
                        offset: lso,
                        cause: TruncationCause::LastStableOffset,
                    }));
                    self.truncate_to(lso);
                }
            }
            StopStrategy::AbortOpenTransactions => {
                for (producer_id, producer_epoch) in self.open_transactions(log) {
                    out.push(Effect::Log(LogEffect::AbortTransaction {
                        producer_id,
                        producer_epoch,
                        leader_epoch,
                    }));
                    self.append_control(leader_epoch, false);
                }
            }
        }
    }

    /// The reset step: appends `MIRROR_PID_RESET` at `leader_epoch` unless the last batch is
    /// already this stop's.
    fn append_pid_reset(&mut self, leader_epoch: LeaderEpoch, out: &mut Vec<Effect>) {
        if !self.last_is_stop_reset {
            out.push(Effect::Log(LogEffect::AppendPidReset { leader_epoch }));
            self.append_control(leader_epoch, true);
        }
    }

    /// What the LME step records, by `capture`: the end of the mirrored data (where the first
    /// batch written at the stop epoch or later begins, or the log end) and its epoch; or, as
    /// the prototype does, the log's latest epoch and its end, whatever the stop wrote before.
    fn last_mirrored(
        &self,
        capture: LmeCapture,
        log: &impl LogView,
    ) -> (Option<LeaderEpoch>, Offset) {
        if capture == LmeCapture::LogEnd {
            return (self.latest_epoch, self.log_end_offset);
        }
        let offset = self
            .stop_writes_start
            .map_or(self.log_end_offset, |s| s.min(self.log_end_offset));
        (log.epoch_cache().epoch_for_offset(offset - 1), offset)
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
