//! Leadership: a new leader closes the produce gate and reads the state again; a follower
//! keeps nothing but its request numbering; the leader epoch rises with each bump the
//! controller grants; a record an earlier leadership wrote is re-asserted before it is acted on.

use im::OrdSet;

use super::{mutated, Activity, Ignored, Leadership, PartitionMirror};
use crate::config::{MirrorConfig, StopStep};
use crate::desired::DesiredState;
use crate::effect::{Effect, RequestId};
use crate::log::LogView;
use crate::mutant::Mutant;
use crate::state::MirrorState;
use crate::types::{BrokerId, LeaderEpoch};

impl PartitionMirror {
    /// `BecameLeader`: a repeated notification only refreshes the replica sets; a new epoch
    /// closes the produce gate, drops everything the last leadership knew and reads the state.
    pub(super) fn on_became_leader(
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
        if self.writable || !mutated(config, Mutant::KeepPersistedGate) {
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

    /// `BecameFollower`: stop the fetcher, close the gate, and forget everything but the
    /// desired state and the request numbering.
    pub(super) fn on_became_follower(&mut self, out: &mut Vec<Effect>) {
        self.stop_fetcher(out);
        self.close_gate(out);
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

    /// `IsrChanged`: new replica sets, which may complete PREPARING's wait.
    pub(super) fn on_isr_changed(
        &mut self,
        config: &MirrorConfig,
        replicas: OrdSet<BrokerId>,
        isr: OrdSet<BrokerId>,
        out: &mut Vec<Effect>,
    ) -> Result<(), Ignored> {
        let leadership = self.leadership.as_mut().ok_or(Ignored::NotLeader)?;
        let (replicas, isr) = share_equal_sets(replicas, isr);
        leadership.replicas = replicas;
        leadership.isr = isr;
        self.check_replicas_done(config, out);
        Ok(())
    }

    /// The leader epoch this broker holds (0 when not leader).
    pub(super) fn leader_epoch(&self) -> LeaderEpoch {
        self.leadership.as_ref().map_or(0, |l| l.leader_epoch)
    }

    /// Raises the leader epoch to `leader_epoch` (the controller's grant), never lowers it.
    fn raise_leader_epoch(&mut self, leader_epoch: LeaderEpoch) {
        if let Some(l) = self.leadership.as_mut() {
            l.leader_epoch = l.leader_epoch.max(leader_epoch);
        }
    }

    /// Asks the controller for a leader epoch of at least `at_least`, waiting in the activity
    /// `waiting` builds from the request.
    pub(super) fn ask_bump(
        &mut self,
        waiting: fn(RequestId) -> Activity,
        at_least: LeaderEpoch,
        out: &mut Vec<Effect>,
    ) {
        let bump = |request| Effect::BumpLeaderEpoch { request, at_least };
        self.send(waiting, bump, out);
    }

    /// `LeaderEpochBumped`: the controller granted a bump; the partition goes on with what it
    /// asked the bump for.
    pub(super) fn on_epoch_bumped(
        &mut self,
        config: &MirrorConfig,
        request: RequestId,
        leader_epoch: LeaderEpoch,
        log: &impl LogView,
        out: &mut Vec<Effect>,
    ) -> Result<(), Ignored> {
        match self.activity {
            // MIRRORING: fetch the batches again, now above the source's epoch.
            Activity::AwaitingFetchEpochBump(r) if r == request => {
                self.raise_leader_epoch(leader_epoch);
                self.fetch_from_log_end(config, log, out);
            }
            // EPOCH_FENCING (the prototype design): fenced, so mirror again.
            Activity::AwaitingFencingBump(r) if r == request => {
                self.raise_leader_epoch(leader_epoch);
                self.write_state(config, MirrorState::Mirroring, None, out);
            }
            // STOPPING: persist the new epoch with the STOPPING record before writing anything
            // at it: the record's `previous_state == STOPPING` marks "epoch bumped".
            Activity::AwaitingEpochBump(r) if r == request => {
                self.raise_leader_epoch(leader_epoch);
                self.write_state(config, MirrorState::Stopping, None, out);
            }
            _ => return Err(Ignored::StaleCompletion(request)),
        }
        Ok(())
    }

    /// Closes the produce gate if this leadership opened it.
    pub(super) fn close_gate(&mut self, out: &mut Vec<Effect>) {
        if self.writable {
            self.writable = false;
            out.push(Effect::SetWritable(false));
        }
    }

    /// Opens the produce gate if it is closed (only once STOPPED is persisted, save for the
    /// mutants that break exactly that).
    pub(super) fn open_gate(&mut self, out: &mut Vec<Effect>) {
        if !self.writable {
            self.writable = true;
            out.push(Effect::SetWritable(true));
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
    pub(super) fn needs_reassert(&self, config: &MirrorConfig) -> bool {
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
    pub(super) fn reassert(&mut self, config: &MirrorConfig, out: &mut Vec<Effect>) {
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
        self.send_write(config, key, value, expected_state_epoch, out);
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
