//! PREPARING: ask the source for its last mirrored epoch (LME), truncate by the LME rule
//! ([`crate::lme`]), then wait for the truncation quorum to follow before MIRRORING (or
//! STOPPING, when a stop was asked meanwhile). ULE_RECOVERY (the prototype design) waits for
//! the replicas the same way.

use im::OrdSet;

use super::{mutated, Activity, Ignored, PartitionMirror};
use crate::config::{MirrorConfig, TruncationQuorum};
use crate::desired::DesiredState;
use crate::effect::{Effect, RequestId};
use crate::log::LogView;
use crate::mutant::Mutant;
use crate::reverse_mirror::check_reverse_mirror;
use crate::state::MirrorState;
use crate::types::{BrokerId, EpochAndOffset, MirrorPartition, Offset};

impl PartitionMirror {
    /// PREPARING's side effect: stop the fetcher and ask the source for the LME of `key`.
    pub(super) fn query_lme(&mut self, key: MirrorPartition, out: &mut Vec<Effect>) {
        self.stop_fetcher(out);
        let query = |request| Effect::QueryLastMirroredEpoch { request, key };
        self.send(Activity::AwaitingLme, query, out);
    }

    /// `LastMirroredEpochReceived`: truncate by the LME rule, then wait for the replicas.
    ///
    /// The cut is the start of the first local epoch above the LME (`end_offset_for(LME)`),
    /// and never above the offset at which the other cluster's mirrored copy of the LME ended:
    /// with the epoch alone, data this cluster wrote in the LME epoch after the other side
    /// stopped mirroring survives PREPARING (the model's counterexample; only the next fetch's
    /// divergence check would remove it).
    pub(super) fn on_lme(
        &mut self,
        config: &MirrorConfig,
        request: RequestId,
        lme: Option<EpochAndOffset>,
        source_log_start_offset: Offset,
        log: &impl LogView,
        out: &mut Vec<Effect>,
    ) -> Result<(), Ignored> {
        self.expect(Activity::AwaitingLme(request), request)?;
        let (truncated_to, effect) =
            crate::lme::lme_truncation(lme, source_log_start_offset, log, config.mutant);
        out.extend(effect.map(Effect::Log));
        self.await_replicas(config, truncated_to, out);
        Ok(())
    }

    /// `SourceMirrorStateReceived`: the LME answer of a source that keeps `__mirror_state`.
    /// Its own mirror of this partition from this cluster must be absent or STOPPED
    /// ([`crate::reverse_mirror`]); otherwise the partition goes FAILED (retried by the
    /// policy) with the reason, and nothing is truncated.
    pub(super) fn on_source_mirror_state(
        &mut self,
        config: &MirrorConfig,
        request: RequestId,
        reverse: MirrorState,
        (lme, source_log_start_offset): (Option<EpochAndOffset>, Offset),
        log: &impl LogView,
        out: &mut Vec<Effect>,
    ) -> Result<(), Ignored> {
        self.expect(Activity::AwaitingLme(request), request)?;
        let verdict = if mutated(config, Mutant::ReverseMirrorIgnored) {
            Ok(())
        } else {
            check_reverse_mirror(reverse)
        };
        match verdict {
            Ok(()) => self.on_lme(config, request, lme, source_log_start_offset, log, out),
            Err(refusal) => {
                self.write_state(config, MirrorState::Failed, Some(refusal.to_string()), out);
                Ok(())
            }
        }
    }

    /// Waits for the truncation quorum to reach `truncated_to` (the leader already has).
    pub(super) fn await_replicas(
        &mut self,
        config: &MirrorConfig,
        truncated_to: Offset,
        out: &mut Vec<Effect>,
    ) {
        self.activity = Activity::AwaitingReplicas {
            truncated_to,
            done: OrdSet::unit(self.broker),
        };
        self.check_replicas_done(config, out);
    }

    /// `ReplicaFetched`: a follower at or below the truncation point has truncated.
    pub(super) fn on_replica_fetched(
        &mut self,
        config: &MirrorConfig,
        replica: BrokerId,
        log_end_offset: Offset,
        out: &mut Vec<Effect>,
    ) -> Result<(), Ignored> {
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
        if !mutated(config, Mutant::IgnoreReplicaReports) {
            done.insert(replica);
        }
        self.check_replicas_done(config, out);
        Ok(())
    }

    /// Once the quorum truncated, writes the state the wait leads to: STOPPING when a stop
    /// is asked, else MIRRORING.
    pub(super) fn check_replicas_done(&mut self, config: &MirrorConfig, out: &mut Vec<Effect>) {
        let (Activity::AwaitingReplicas { done, .. }, Some(leadership)) =
            (&self.activity, &self.leadership)
        else {
            return;
        };
        let quorum = match config.truncation_quorum {
            TruncationQuorum::Isr => &leadership.isr,
            TruncationQuorum::AllReplicas => &leadership.replicas,
        };
        let complete =
            quorum.iter().all(|r| done.contains(r)) || mutated(config, Mutant::SkipIsrWait);
        if complete {
            let next = match self.desired {
                DesiredState::Stop(_) => MirrorState::Stopping,
                _ => MirrorState::Mirroring,
            };
            self.write_state(config, next, None, out);
        }
    }
}
