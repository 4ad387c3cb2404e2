//! The owner of `__mirror_state`: a keyed store of partition states and LMEs that fences writes.
//!
//! [`Coordinator`] is a value type on [`im::OrdMap`] (cheap to clone, deterministic to iterate),
//! so a model can hold it in its state and a harness can rebuild it from a log with
//! [`Coordinator::replay`].
//!
//! # Fencing
//!
//! [`Coordinator::write_state`] accepts a `MirrorPartitionStateValue` only if, in this order:
//!
//! 1. its `leader_epoch` is not below the stored record's (else
//!    [`WriteRefused::FencedLeaderEpoch`]): a newer leader has written the key;
//! 2. the writer's `expected_state_epoch` is the stored record's `state_epoch`, `None` exactly
//!    when nothing is stored (else [`WriteRefused::FencedStateEpoch`]): the record changed since
//!    the writer read it;
//! 3. the [`TransitionTable`] allows `stored state -> value.state` (`UNKNOWN` when nothing is
//!    stored; a FAILED record's `previous_state` is its retry target), else
//!    [`WriteRefused::IllegalTransition`].
//!
//! An accepted write stores the value with a state epoch the coordinator assigns (the writer's
//! `state_epoch` field is ignored): **0 for the first write of a key** (or the first after a
//! tombstone), the stored epoch + 1 after that, so the state epoch is the number of accepted
//! writes before this one. A refused write changes nothing.
//!
//! That is [`StateFencing::Exact`], the seed design's. A coordinator built with
//! [`Coordinator::with_fencing`]`(`[`StateFencing::Prototype`]`)` numbers and fences as the KIP
//! authors' prototype does instead (the first write gets 1; -1 skips either check; a state epoch
//! is fenced only by a greater stored one); the transition table applies either way.
//!
//! Deleting a key (a tombstone) forgets its state epoch; a writer that read the key before the
//! delete may be accepted after a later re-creation reaches the same epoch. Leader epochs still
//! fence such a writer whenever it is an older leader.
//!
//! # The log
//!
//! The store is the compacted view of the `__mirror_state` log: [`Coordinator::apply`] applies
//! one record as compaction would (the last value per key wins, a tombstone deletes) without
//! fencing, since what is in the log was accepted when it was written; [`Coordinator::records`]
//! exports the contents as records, a compacted log from which [`Coordinator::replay`] rebuilds
//! the same store.

use std::borrow::Borrow;

use im::OrdMap;
use serde::{Deserialize, Serialize};

use crate::input::FenceReason;
use crate::mutant::{self, Mutant};
use crate::records::{LastMirroredEpochsValue, MirrorPartitionStateValue, MirrorStateRecord};
use crate::state::{MirrorState, TransitionTable};
use crate::state_fencing::{Fenced, StateFencing};
use crate::types::{LeaderEpoch, MirrorPartition, StateEpoch};

/// The state epoch of the first accepted write of a key ([`StateFencing::Exact`]).
pub const FIRST_STATE_EPOCH: StateEpoch = 0;

/// Why [`Coordinator::write_state`] refused a write; [`WriteRefused::reason`] gives the Kafka
/// error carried back to the writer.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, thiserror::Error)]
pub enum WriteRefused {
    /// The write's leader epoch is below the stored one: a newer leader wrote the key.
    #[error(
        "FENCED_LEADER_EPOCH: the write carries leader epoch {written}, \
         below the stored leader epoch {stored}"
    )]
    FencedLeaderEpoch {
        /// The leader epoch of the refused write.
        written: LeaderEpoch,
        /// The leader epoch of the stored record.
        stored: LeaderEpoch,
    },
    /// The writer's expected state epoch is not the stored one.
    #[error(
        "FENCED_STATE_EPOCH: the writer expected {}, but {} is stored; re-read and retry",
        describe_epoch(.expected),
        describe_epoch(.stored)
    )]
    FencedStateEpoch {
        /// The state epoch the writer last read (`None`: it read nothing).
        expected: Option<StateEpoch>,
        /// The stored state epoch (`None`: nothing stored).
        stored: Option<StateEpoch>,
    },
    /// The stored state epoch is `StateEpoch::MAX` and cannot be incremented.
    #[error("FENCED_STATE_EPOCH: state epoch {stored} is the largest possible and cannot be incremented")]
    StateEpochExhausted {
        /// The stored state epoch.
        stored: StateEpoch,
    },
    /// The transition table does not allow the transition.
    #[error(
        "INVALID_CLUSTER_MIRROR_STATE: {from} -> {to} is not a legal transition{}",
        describe_retry_target(.from, .retry_target)
    )]
    IllegalTransition {
        /// The stored state (`UNKNOWN` when nothing is stored).
        from: MirrorState,
        /// The state the write asked for.
        to: MirrorState,
        /// The stored retry target when `from` is FAILED.
        retry_target: Option<MirrorState>,
    },
}

fn describe_epoch(epoch: &Option<StateEpoch>) -> String {
    match epoch {
        Some(e) => format!("state epoch {e}"),
        None => "no record".to_owned(),
    }
}

fn describe_retry_target(from: &MirrorState, target: &Option<MirrorState>) -> String {
    match (from, target) {
        (MirrorState::Failed, Some(t)) => format!(" (FAILED may only retry {t})"),
        (MirrorState::Failed, None) => " (FAILED has no retry target)".to_owned(),
        _ => String::new(),
    }
}

impl WriteRefused {
    /// The Kafka error the writer receives.
    pub fn reason(&self) -> FenceReason {
        match self {
            WriteRefused::FencedLeaderEpoch { .. } => FenceReason::FencedLeaderEpoch,
            WriteRefused::FencedStateEpoch { .. } | WriteRefused::StateEpochExhausted { .. } => {
                FenceReason::FencedStateEpoch
            }
            WriteRefused::IllegalTransition { .. } => FenceReason::IllegalTransition,
        }
    }
}

impl From<WriteRefused> for FenceReason {
    fn from(refused: WriteRefused) -> FenceReason {
        refused.reason()
    }
}

/// The contents of `__mirror_state` and the rules for writing them.
#[derive(Clone, PartialEq, Eq, Hash, Debug, Serialize, Deserialize)]
pub struct Coordinator {
    table: TransitionTable,
    fencing: StateFencing,
    mutant: Option<Mutant>,
    states: OrdMap<MirrorPartition, MirrorPartitionStateValue>,
    last_mirrored_epochs: OrdMap<MirrorPartition, LastMirroredEpochsValue>,
}

impl Default for Coordinator {
    /// An empty coordinator with the default transition table (`docs/design.md`, section 2) and no
    /// mutant.
    fn default() -> Self {
        Coordinator::new(TransitionTable::default())
    }
}

impl Coordinator {
    /// An empty coordinator that allows the transitions of `table`.
    pub fn new(table: TransitionTable) -> Self {
        Coordinator {
            table,
            fencing: StateFencing::Exact,
            mutant: None,
            states: OrdMap::new(),
            last_mirrored_epochs: OrdMap::new(),
        }
    }

    /// The same coordinator with `mutant` configured (it only takes effect with feature
    /// `mutants`; the coordinator reacts to [`Mutant::AcceptFencedWrite`]).
    pub fn with_mutant(mut self, mutant: Option<Mutant>) -> Self {
        self.mutant = mutant;
        self
    }

    /// The same coordinator numbering and fencing state writes by `fencing`.
    pub fn with_fencing(mut self, fencing: StateFencing) -> Self {
        self.fencing = fencing;
        self
    }

    /// The transition table writes are checked against.
    pub fn table(&self) -> &TransitionTable {
        &self.table
    }

    /// The rule state writes are numbered and fenced by.
    pub fn fencing(&self) -> StateFencing {
        self.fencing
    }

    /// The configured mutant, if any.
    pub fn mutant(&self) -> Option<Mutant> {
        self.mutant
    }

    /// The stored state of `key`, if any.
    pub fn read_state(&self, key: &MirrorPartition) -> Option<&MirrorPartitionStateValue> {
        self.states.get(key)
    }

    /// The stored LME record of `key`, if any.
    pub fn read_last_mirrored_epoch(
        &self,
        key: &MirrorPartition,
    ) -> Option<&LastMirroredEpochsValue> {
        self.last_mirrored_epochs.get(key)
    }

    /// Stores `value` as `key`'s state if the write passes the fences and the transition table
    /// (see the module doc), and returns the value as stored, with the state epoch the
    /// coordinator assigned. A refused write changes nothing.
    ///
    /// `expected_state_epoch` is the state epoch the writer last read, `None` if it read no
    /// record. With [`Mutant::AcceptFencedWrite`] active, the leader- and state-epoch fences are
    /// skipped (the transition table still applies).
    pub fn write_state(
        &mut self,
        key: &MirrorPartition,
        value: MirrorPartitionStateValue,
        expected_state_epoch: Option<StateEpoch>,
    ) -> Result<MirrorPartitionStateValue, WriteRefused> {
        let stored = self.states.get(key);
        let skip_fences = mutant::active(self.mutant, Mutant::AcceptFencedWrite);
        let stored_epoch = stored.map(|s| s.state_epoch);
        match self
            .fencing
            .check(stored, value.leader_epoch, expected_state_epoch)
        {
            _ if skip_fences => {}
            None => {}
            Some(Fenced::LeaderEpoch) => {
                return Err(WriteRefused::FencedLeaderEpoch {
                    written: value.leader_epoch,
                    stored: stored.map_or(value.leader_epoch, |s| s.leader_epoch),
                })
            }
            Some(Fenced::StateEpoch) => {
                return Err(WriteRefused::FencedStateEpoch {
                    expected: expected_state_epoch,
                    stored: stored_epoch,
                })
            }
        }

        let from = stored.map_or(MirrorState::Unknown, |s| s.state);
        let retry_target = stored
            .filter(|s| s.state == MirrorState::Failed)
            .and_then(|s| s.previous_state);
        if !self.table.is_legal(from, value.state, retry_target) {
            return Err(WriteRefused::IllegalTransition {
                from,
                to: value.state,
                retry_target,
            });
        }

        let state_epoch = match stored_epoch {
            None => self.fencing.first_state_epoch(),
            Some(e) => e
                .checked_add(1)
                .ok_or(WriteRefused::StateEpochExhausted { stored: e })?,
        };
        // The prototype keeps the highest leader epoch it saw (a -1 write does not lower it);
        // an accepted write of kmirror's carries at least the stored one anyway.
        let leader_epoch = match stored {
            Some(s) if self.fencing == StateFencing::Prototype => {
                s.leader_epoch.max(value.leader_epoch)
            }
            _ => value.leader_epoch,
        };
        let stored = MirrorPartitionStateValue {
            state_epoch,
            leader_epoch,
            ..value
        };
        self.states.insert(key.clone(), stored.clone());
        Ok(stored)
    }

    /// Stores `value` as `key`'s LME record and returns the record it replaced, if any.
    ///
    /// The write is fenced by the key's *state* record: `expected_state_epoch` is the state
    /// epoch of the STOPPING record the writer itself wrote, and the write is refused with
    /// [`WriteRefused::FencedStateEpoch`] if the state has been written since (or was never
    /// written). Every leader writes the state record before its stop steps touch the log, so a
    /// deposed or restarted leader's late LME write cannot overwrite the LME its successor
    /// computed from a different log (the model found that race once the leader credited
    /// followers with the fetch offset, as Kafka does). Both records share a key, hence a
    /// `__mirror_state` partition, so one coordinator checks them atomically. With
    /// [`Mutant::AcceptFencedWrite`] active, the fence is skipped; `expected_state_epoch ==
    /// None` skips it too (the prototype's unfenced LME write, `docs/prototype.md` section 4.2).
    pub fn write_last_mirrored_epoch(
        &mut self,
        key: &MirrorPartition,
        value: LastMirroredEpochsValue,
        expected_state_epoch: Option<StateEpoch>,
    ) -> Result<Option<LastMirroredEpochsValue>, WriteRefused> {
        let stored = self.states.get(key).map(|s| s.state_epoch);
        if let Some(expected) = expected_state_epoch {
            if stored != Some(expected) && !mutant::active(self.mutant, Mutant::AcceptFencedWrite) {
                return Err(WriteRefused::FencedStateEpoch {
                    expected: Some(expected),
                    stored,
                });
            }
        }
        Ok(self.last_mirrored_epochs.insert(key.clone(), value))
    }

    /// Deletes `key`'s state (a tombstone) and returns what was stored, if anything.
    pub fn delete_state(&mut self, key: &MirrorPartition) -> Option<MirrorPartitionStateValue> {
        self.states.remove(key)
    }

    /// Deletes `key`'s LME record (a tombstone) and returns what was stored, if anything.
    pub fn delete_last_mirrored_epoch(
        &mut self,
        key: &MirrorPartition,
    ) -> Option<LastMirroredEpochsValue> {
        self.last_mirrored_epochs.remove(key)
    }

    /// Applies one `__mirror_state` record as log compaction would: a value replaces the key's
    /// value, a tombstone deletes it. Nothing is fenced: the log holds only accepted writes.
    pub fn apply(&mut self, record: &MirrorStateRecord) {
        match record {
            MirrorStateRecord::PartitionState { partition, value } => {
                self.states.insert(partition.clone(), value.clone());
            }
            MirrorStateRecord::LastMirroredEpochs { partition, value } => {
                self.last_mirrored_epochs.insert(partition.clone(), *value);
            }
            MirrorStateRecord::PartitionStateTombstone(partition) => {
                self.states.remove(partition);
            }
            MirrorStateRecord::LastMirroredEpochsTombstone(partition) => {
                self.last_mirrored_epochs.remove(partition);
            }
        }
    }

    /// Applies `records` in order (see [`Coordinator::apply`]) and returns the result:
    /// `Coordinator::new(table).replay(log)` rebuilds a coordinator from its log.
    pub fn replay<I>(mut self, records: I) -> Self
    where
        I: IntoIterator,
        I::Item: Borrow<MirrorStateRecord>,
    {
        for record in records {
            self.apply(record.borrow());
        }
        self
    }

    /// The current contents as records (no tombstones): every partition state in key order,
    /// then every LME record in key order. Replaying them into an empty coordinator gives back
    /// the same contents, so they are a compacted rewrite of the log.
    pub fn records(&self) -> Vec<MirrorStateRecord> {
        let states =
            self.states
                .iter()
                .map(|(partition, value)| MirrorStateRecord::PartitionState {
                    partition: partition.clone(),
                    value: value.clone(),
                });
        let lmes = self.last_mirrored_epochs.iter().map(|(partition, value)| {
            MirrorStateRecord::LastMirroredEpochs {
                partition: partition.clone(),
                value: *value,
            }
        });
        states.chain(lmes).collect()
    }

    /// Every stored partition state, in key order.
    pub fn states(&self) -> impl Iterator<Item = (&MirrorPartition, &MirrorPartitionStateValue)> {
        self.states.iter()
    }

    /// Every stored LME record, in key order.
    pub fn last_mirrored_epochs(
        &self,
    ) -> impl Iterator<Item = (&MirrorPartition, &LastMirroredEpochsValue)> {
        self.last_mirrored_epochs.iter()
    }

    /// Whether nothing is stored.
    pub fn is_empty(&self) -> bool {
        self.states.is_empty() && self.last_mirrored_epochs.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::MirrorState::*;
    use super::*;
    use crate::types::{MirrorName, TopicId};

    fn key(partition: i32) -> MirrorPartition {
        MirrorPartition {
            mirror: MirrorName::new("east").unwrap(),
            topic_id: TopicId::from_u64(9),
            partition,
        }
    }

    fn value(state: MirrorState, leader_epoch: LeaderEpoch) -> MirrorPartitionStateValue {
        MirrorPartitionStateValue {
            state,
            leader_epoch,
            state_epoch: 99, // ignored by the coordinator
            error_message: None,
            retry_attempt: 0,
            previous_state: None,
        }
    }

    fn failed(retry: Option<MirrorState>, leader_epoch: LeaderEpoch) -> MirrorPartitionStateValue {
        MirrorPartitionStateValue {
            error_message: Some("disk on fire".to_owned()),
            retry_attempt: 2,
            previous_state: retry,
            ..value(Failed, leader_epoch)
        }
    }

    /// A coordinator whose `key(0)` went through UNKNOWN -> PREPARING -> MIRRORING at leader
    /// epoch 5 (state epoch 1).
    fn mirroring() -> Coordinator {
        let mut c = Coordinator::default();
        c.write_state(&key(0), value(Preparing, 5), None).unwrap();
        c.write_state(&key(0), value(Mirroring, 5), Some(0))
            .unwrap();
        c
    }

    #[test]
    fn the_first_write_gets_state_epoch_zero_and_later_ones_count_up() {
        let mut c = Coordinator::default();
        assert_eq!(c.read_state(&key(0)), None);
        let stored = c.write_state(&key(0), value(Preparing, 3), None).unwrap();
        assert_eq!(stored.state_epoch, FIRST_STATE_EPOCH);
        assert_eq!(stored.state, Preparing);
        assert_eq!(c.read_state(&key(0)), Some(&stored));
        let stored = c
            .write_state(&key(0), value(Mirroring, 3), Some(0))
            .unwrap();
        assert_eq!(stored.state_epoch, 1);
        let stored = c
            .write_state(&key(0), value(Mirroring, 4), Some(1))
            .unwrap();
        assert_eq!(stored.state_epoch, 2);
        assert_eq!(stored.leader_epoch, 4);
        assert_eq!(c.read_state(&key(0)), Some(&stored));
        // Other keys are independent.
        assert_eq!(c.read_state(&key(1)), None);
        let other = c.write_state(&key(1), value(Preparing, 0), None).unwrap();
        assert_eq!(other.state_epoch, 0);
    }

    #[test]
    fn a_lower_leader_epoch_is_fenced_and_changes_nothing() {
        let mut c = mirroring();
        let before = c.clone();
        let err = c
            .write_state(&key(0), value(Stopping, 4), Some(1))
            .unwrap_err();
        assert_eq!(
            err,
            WriteRefused::FencedLeaderEpoch {
                written: 4,
                stored: 5
            }
        );
        assert_eq!(err.reason(), FenceReason::FencedLeaderEpoch);
        assert_eq!(c, before);
        // Equal and higher leader epochs pass.
        c.write_state(&key(0), value(Paused, 5), Some(1)).unwrap();
        c.write_state(&key(0), value(Mirroring, 6), Some(2))
            .unwrap();
        assert_eq!(c.read_state(&key(0)).unwrap().leader_epoch, 6);
    }

    #[test]
    fn the_leader_epoch_fence_is_checked_before_the_state_epoch_fence() {
        let mut c = mirroring();
        let err = c
            .write_state(&key(0), value(Stopping, 1), Some(0))
            .unwrap_err();
        assert_eq!(err.reason(), FenceReason::FencedLeaderEpoch);
    }

    #[test]
    fn a_stale_state_epoch_is_fenced_and_changes_nothing() {
        let mut c = mirroring();
        let before = c.clone();
        for expected in [Some(0), Some(2), Some(-1), None] {
            let err = c
                .write_state(&key(0), value(Stopping, 5), expected)
                .unwrap_err();
            assert_eq!(
                err,
                WriteRefused::FencedStateEpoch {
                    expected,
                    stored: Some(1)
                }
            );
            assert_eq!(err.reason(), FenceReason::FencedStateEpoch);
            assert_eq!(c, before);
        }
    }

    #[test]
    fn expecting_a_record_when_none_is_stored_is_fenced() {
        let mut c = Coordinator::default();
        let err = c
            .write_state(&key(0), value(Preparing, 0), Some(0))
            .unwrap_err();
        assert_eq!(
            err,
            WriteRefused::FencedStateEpoch {
                expected: Some(0),
                stored: None
            }
        );
        assert!(c.is_empty());
        assert_eq!(
            err.to_string(),
            "FENCED_STATE_EPOCH: the writer expected state epoch 0, but no record is stored; \
             re-read and retry"
        );
    }

    #[test]
    fn an_illegal_transition_is_refused_and_changes_nothing() {
        let mut c = Coordinator::default();
        let err = c
            .write_state(&key(0), value(Mirroring, 0), None)
            .unwrap_err();
        assert_eq!(
            err,
            WriteRefused::IllegalTransition {
                from: Unknown,
                to: Mirroring,
                retry_target: None
            }
        );
        assert_eq!(err.reason(), FenceReason::IllegalTransition);
        assert!(c.is_empty());

        let mut c = mirroring();
        let before = c.clone();
        for to in [Unknown, Preparing, Stopped] {
            let err = c.write_state(&key(0), value(to, 5), Some(1)).unwrap_err();
            assert_eq!(
                err,
                WriteRefused::IllegalTransition {
                    from: Mirroring,
                    to,
                    retry_target: None
                }
            );
        }
        assert_eq!(c, before);
        assert_eq!(
            c.write_state(&key(0), value(Stopped, 5), Some(1))
                .unwrap_err()
                .to_string(),
            "INVALID_CLUSTER_MIRROR_STATE: MIRRORING -> STOPPED is not a legal transition"
        );
    }

    #[test]
    fn every_table_edge_and_structural_rule_is_enforced() {
        let table = TransitionTable::default();
        for from in MirrorState::ALL {
            for to in MirrorState::ALL {
                // Reach `from` by loading it (as a replayed log would), then try `to`.
                let mut c = Coordinator::default();
                if from != Unknown {
                    c.apply(&MirrorStateRecord::PartitionState {
                        partition: key(0),
                        value: MirrorPartitionStateValue {
                            state_epoch: 4,
                            ..value(from, 1)
                        },
                    });
                }
                let expected = (from != Unknown).then_some(4);
                let result = c.write_state(&key(0), value(to, 1), expected);
                assert_eq!(
                    result.is_ok(),
                    table.is_legal(from, to, None),
                    "{from} -> {to}: {result:?}"
                );
            }
        }
    }

    #[test]
    fn failed_may_only_retry_its_recorded_target() {
        let mut c = mirroring();
        let stored = c
            .write_state(&key(0), failed(Some(Mirroring), 5), Some(1))
            .unwrap();
        assert_eq!(stored.error_message.as_deref(), Some("disk on fire"));
        assert_eq!(stored.retry_attempt, 2);
        let err = c
            .write_state(&key(0), value(Preparing, 5), Some(2))
            .unwrap_err();
        assert_eq!(
            err,
            WriteRefused::IllegalTransition {
                from: Failed,
                to: Preparing,
                retry_target: Some(Mirroring)
            }
        );
        assert_eq!(
            err.to_string(),
            "INVALID_CLUSTER_MIRROR_STATE: FAILED -> PREPARING is not a legal transition \
             (FAILED may only retry MIRRORING)"
        );
        // Failing again (a retry that failed) is a self-transition.
        c.write_state(&key(0), failed(Some(Mirroring), 5), Some(2))
            .unwrap();
        let stored = c
            .write_state(&key(0), value(Mirroring, 5), Some(3))
            .unwrap();
        assert_eq!(stored.state_epoch, 4);
    }

    #[test]
    fn failed_without_a_retry_target_can_only_stay_failed() {
        let mut c = Coordinator::default();
        c.write_state(&key(0), failed(None, 0), None).unwrap();
        for to in MirrorState::ALL {
            let result = c.clone().write_state(&key(0), value(to, 0), Some(0));
            assert_eq!(result.is_ok(), to == Failed, "FAILED -> {to}");
        }
    }

    #[test]
    fn the_table_is_the_coordinators() {
        let mut strict = Coordinator::new(TransitionTable::kip1279(false));
        let mut lenient = Coordinator::new(TransitionTable::kip1279(true));
        for c in [&mut strict, &mut lenient] {
            c.write_state(&key(0), value(Preparing, 0), None).unwrap();
            c.write_state(&key(0), value(Mirroring, 0), Some(0))
                .unwrap();
            c.write_state(&key(0), value(Paused, 0), Some(1)).unwrap();
        }
        assert_eq!(
            strict
                .write_state(&key(0), value(Stopping, 0), Some(2))
                .map_err(|e| e.reason()),
            Err(FenceReason::IllegalTransition)
        );
        assert!(lenient
            .write_state(&key(0), value(Stopping, 0), Some(2))
            .is_ok());
        assert_eq!(strict.table(), &TransitionTable::kip1279(false));
    }

    #[test]
    fn an_exhausted_state_epoch_is_refused() {
        let mut c = Coordinator::default();
        c.apply(&MirrorStateRecord::PartitionState {
            partition: key(0),
            value: MirrorPartitionStateValue {
                state_epoch: StateEpoch::MAX,
                ..value(Mirroring, 0)
            },
        });
        let before = c.clone();
        let err = c
            .write_state(&key(0), value(Mirroring, 0), Some(StateEpoch::MAX))
            .unwrap_err();
        assert_eq!(
            err,
            WriteRefused::StateEpochExhausted {
                stored: StateEpoch::MAX
            }
        );
        assert_eq!(FenceReason::from(err), FenceReason::FencedStateEpoch);
        assert_eq!(c, before);
    }

    #[test]
    fn fence_messages_name_kafka_errors() {
        let e = WriteRefused::FencedLeaderEpoch {
            written: 1,
            stored: 2,
        };
        assert_eq!(
            e.to_string(),
            "FENCED_LEADER_EPOCH: the write carries leader epoch 1, below the stored leader epoch 2"
        );
        let e = WriteRefused::FencedStateEpoch {
            expected: None,
            stored: Some(3),
        };
        assert_eq!(
            e.to_string(),
            "FENCED_STATE_EPOCH: the writer expected no record, but state epoch 3 is stored; \
             re-read and retry"
        );
    }

    #[test]
    fn the_mutant_does_nothing_unless_built_in() {
        let mut c = mirroring().with_mutant(Some(Mutant::AcceptFencedWrite));
        assert_eq!(c.mutant(), Some(Mutant::AcceptFencedWrite));
        let result = c.write_state(&key(0), value(Stopping, 1), Some(0));
        if cfg!(feature = "mutants") {
            assert!(result.is_ok());
        } else {
            assert_eq!(
                result.map_err(|e| e.reason()),
                Err(FenceReason::FencedLeaderEpoch)
            );
        }
        // Another mutant never affects the coordinator.
        let mut c = mirroring().with_mutant(Some(Mutant::SkipPidReset));
        assert!(c.write_state(&key(0), value(Stopping, 1), Some(1)).is_err());
    }

    #[cfg(feature = "mutants")]
    #[test]
    fn the_accept_fenced_write_mutant_skips_both_epoch_fences_but_not_the_table() {
        let mut c = mirroring().with_mutant(Some(Mutant::AcceptFencedWrite));
        // Stale leader epoch.
        let stored = c.write_state(&key(0), value(Paused, 2), Some(1)).unwrap();
        assert_eq!((stored.leader_epoch, stored.state_epoch), (2, 2));
        // Stale state epoch; the coordinator still counts up from the stored epoch.
        let stored = c
            .write_state(&key(0), value(Mirroring, 2), Some(0))
            .unwrap();
        assert_eq!(stored.state_epoch, 3);
        // Expecting nothing when something is stored.
        let stored = c.write_state(&key(0), value(Mirroring, 2), None).unwrap();
        assert_eq!(stored.state_epoch, 4);
        // Expecting something when nothing is stored.
        let stored = c
            .write_state(&key(1), value(Preparing, 0), Some(7))
            .unwrap();
        assert_eq!(stored.state_epoch, FIRST_STATE_EPOCH);
        // The table still applies.
        assert_eq!(
            c.write_state(&key(0), value(Stopped, 2), Some(0))
                .map_err(|e| e.reason()),
            Err(FenceReason::IllegalTransition)
        );
    }

    #[test]
    fn lme_records_are_written_read_and_deleted_beside_states() {
        let mut c = mirroring();
        let lme = LastMirroredEpochsValue {
            last_mirrored_epoch: Some(5),
            last_mirrored_offset: 120,
        };
        assert_eq!(c.read_last_mirrored_epoch(&key(0)), None);
        assert_eq!(c.write_last_mirrored_epoch(&key(0), lme, Some(1)), Ok(None));
        assert_eq!(c.read_last_mirrored_epoch(&key(0)), Some(&lme));
        let newer = LastMirroredEpochsValue {
            last_mirrored_epoch: Some(6),
            last_mirrored_offset: 130,
        };
        assert_eq!(
            c.write_last_mirrored_epoch(&key(0), newer, Some(1)),
            Ok(Some(lme))
        );
        // Deleting the LME leaves the state, and vice versa.
        assert_eq!(c.delete_last_mirrored_epoch(&key(0)), Some(newer));
        assert_eq!(c.delete_last_mirrored_epoch(&key(0)), None);
        assert_eq!(c.read_state(&key(0)).unwrap().state, Mirroring);
        c.write_last_mirrored_epoch(&key(0), lme, Some(1)).unwrap();
        assert_eq!(c.delete_state(&key(0)).unwrap().state, Mirroring);
        assert_eq!(c.delete_state(&key(0)), None);
        assert_eq!(c.read_last_mirrored_epoch(&key(0)), Some(&lme));
    }

    #[test]
    fn an_lme_write_is_fenced_by_the_state_epoch_its_writer_wrote() {
        let lme = |offset| LastMirroredEpochsValue {
            last_mirrored_epoch: Some(5),
            last_mirrored_offset: offset,
        };
        let mut c = mirroring();
        // The old leader wrote STOPPING (state epoch 2); its successor re-asserted it (3).
        c.write_state(&key(0), value(Stopping, 5), Some(1)).unwrap();
        c.write_state(&key(0), value(Stopping, 6), Some(2)).unwrap();
        c.write_last_mirrored_epoch(&key(0), lme(2), Some(3))
            .unwrap();
        // The old leader's LME, computed from its own log, arrives late: refused.
        assert_eq!(
            c.write_last_mirrored_epoch(&key(0), lme(1), Some(2)),
            Err(WriteRefused::FencedStateEpoch {
                expected: Some(2),
                stored: Some(3)
            })
        );
        assert_eq!(c.read_last_mirrored_epoch(&key(0)), Some(&lme(2)));
        // No state record: nothing to fence against, so nothing is accepted.
        assert_eq!(
            c.write_last_mirrored_epoch(&key(1), lme(1), Some(0))
                .map_err(|e| e.reason()),
            Err(FenceReason::FencedStateEpoch)
        );
    }

    #[cfg(feature = "mutants")]
    #[test]
    fn the_accept_fenced_write_mutant_skips_the_lme_fence() {
        let lme = LastMirroredEpochsValue {
            last_mirrored_epoch: Some(5),
            last_mirrored_offset: 1,
        };
        let mut c = mirroring().with_mutant(Some(Mutant::AcceptFencedWrite));
        assert_eq!(c.write_last_mirrored_epoch(&key(0), lme, Some(0)), Ok(None));
    }

    #[test]
    fn after_a_delete_the_key_starts_over() {
        let mut c = mirroring();
        c.delete_state(&key(0));
        assert_eq!(
            c.write_state(&key(0), value(Preparing, 5), Some(1))
                .map_err(|e| e.reason()),
            Err(FenceReason::FencedStateEpoch)
        );
        let stored = c.write_state(&key(0), value(Preparing, 0), None).unwrap();
        assert_eq!(
            (stored.state_epoch, stored.leader_epoch),
            (FIRST_STATE_EPOCH, 0)
        );
    }

    #[test]
    fn replay_keeps_the_last_value_per_key_and_tombstones_delete() {
        let lme = |e| LastMirroredEpochsValue {
            last_mirrored_epoch: Some(e),
            last_mirrored_offset: 10 * i64::from(e),
        };
        let state = |s, e| MirrorPartitionStateValue {
            state_epoch: e,
            ..value(s, 1)
        };
        let log = vec![
            MirrorStateRecord::PartitionState {
                partition: key(0),
                value: state(Preparing, 0),
            },
            MirrorStateRecord::PartitionState {
                partition: key(1),
                value: state(Preparing, 0),
            },
            MirrorStateRecord::LastMirroredEpochs {
                partition: key(0),
                value: lme(1),
            },
            MirrorStateRecord::PartitionState {
                partition: key(0),
                value: state(Mirroring, 1),
            },
            MirrorStateRecord::LastMirroredEpochs {
                partition: key(1),
                value: lme(2),
            },
            MirrorStateRecord::PartitionStateTombstone(key(1)),
            MirrorStateRecord::LastMirroredEpochs {
                partition: key(0),
                value: lme(3),
            },
            MirrorStateRecord::LastMirroredEpochsTombstone(key(2)),
            MirrorStateRecord::PartitionState {
                partition: key(2),
                value: state(Stopped, 7),
            },
            MirrorStateRecord::LastMirroredEpochsTombstone(key(0)),
            MirrorStateRecord::LastMirroredEpochs {
                partition: key(0),
                value: lme(4),
            },
        ];
        let c = Coordinator::default().replay(&log);
        assert_eq!(c.read_state(&key(0)), Some(&state(Mirroring, 1)));
        assert_eq!(c.read_state(&key(1)), None);
        assert_eq!(c.read_state(&key(2)), Some(&state(Stopped, 7)));
        assert_eq!(c.read_last_mirrored_epoch(&key(0)), Some(&lme(4)));
        assert_eq!(c.read_last_mirrored_epoch(&key(1)), Some(&lme(2)));
        assert_eq!(c.read_last_mirrored_epoch(&key(2)), None);

        // The export is the compacted log, in a fixed order, and replays to the same store.
        let compacted = c.records();
        assert_eq!(
            compacted,
            vec![
                MirrorStateRecord::PartitionState {
                    partition: key(0),
                    value: state(Mirroring, 1)
                },
                MirrorStateRecord::PartitionState {
                    partition: key(2),
                    value: state(Stopped, 7)
                },
                MirrorStateRecord::LastMirroredEpochs {
                    partition: key(0),
                    value: lme(4)
                },
                MirrorStateRecord::LastMirroredEpochs {
                    partition: key(1),
                    value: lme(2)
                },
            ]
        );
        assert_eq!(Coordinator::default().replay(compacted), c);

        // A replayed coordinator fences like the original: the stored state epoch is 1.
        let mut replayed = Coordinator::default().replay(log.iter());
        assert!(replayed
            .write_state(&key(0), value(Stopping, 1), Some(0))
            .is_err());
        assert!(replayed
            .write_state(&key(0), value(Stopping, 1), Some(1))
            .is_ok());
    }

    #[test]
    fn replay_through_the_wire_encoding_gives_the_same_store() {
        let mut c = mirroring();
        c.write_state(&key(3), failed(Some(Preparing), 2), None)
            .unwrap();
        c.write_last_mirrored_epoch(
            &key(3),
            LastMirroredEpochsValue {
                last_mirrored_epoch: None,
                last_mirrored_offset: -1,
            },
            Some(FIRST_STATE_EPOCH),
        )
        .unwrap();
        let decoded: Vec<_> = c
            .records()
            .iter()
            .chain([&MirrorStateRecord::PartitionStateTombstone(key(9))])
            .map(|r| {
                let e = r.encode().unwrap();
                MirrorStateRecord::decode(&e.key, e.value.as_deref()).unwrap()
            })
            .collect();
        assert_eq!(Coordinator::default().replay(decoded), c);
    }

    #[test]
    fn apply_does_not_fence() {
        let mut c = mirroring();
        c.apply(&MirrorStateRecord::PartitionState {
            partition: key(0),
            value: MirrorPartitionStateValue {
                state_epoch: 0,
                ..value(Stopped, 1)
            },
        });
        assert_eq!(c.read_state(&key(0)).unwrap().state, Stopped);
        assert_eq!(c.read_state(&key(0)).unwrap().leader_epoch, 1);
    }

    /// One write attempt in a random history.
    #[derive(Clone, Debug)]
    struct Attempt {
        partition: i32,
        state: MirrorState,
        leader_epoch: LeaderEpoch,
        /// Offset of the expected state epoch from the stored one (0: correct).
        epoch_skew: i8,
        retry: Option<MirrorState>,
    }

    fn attempt() -> impl Strategy<Value = Attempt> {
        (
            0..2i32,
            proptest::sample::select(MirrorState::ALL.to_vec()),
            0..4i32,
            prop_oneof![4 => Just(0i8), 1 => -2..3i8],
            proptest::option::of(proptest::sample::select(MirrorState::ALL.to_vec())),
        )
            .prop_map(
                |(partition, state, leader_epoch, epoch_skew, retry)| Attempt {
                    partition,
                    state,
                    leader_epoch,
                    epoch_skew,
                    retry,
                },
            )
    }

    proptest! {
        #[test]
        fn writes_are_fenced_legal_and_counted(attempts in proptest::collection::vec(attempt(), 0..40)) {
            let table = TransitionTable::default();
            let mut c = Coordinator::new(table.clone());
            for a in attempts {
                let k = key(a.partition);
                let before = c.clone();
                let stored = c.read_state(&k).cloned();
                let expected = match (&stored, a.epoch_skew) {
                    (None, 0) => None,
                    (None, skew) => Some(i32::from(skew)),
                    (Some(_), 1) => None,
                    (Some(s), skew) => Some(s.state_epoch + i32::from(skew)),
                };
                let v = MirrorPartitionStateValue {
                    previous_state: a.retry,
                    ..value(a.state, a.leader_epoch)
                };
                match c.write_state(&k, v, expected) {
                    Ok(written) => {
                        prop_assert_eq!(c.read_state(&k), Some(&written));
                        prop_assert_eq!(written.state, a.state);
                        match &stored {
                            None => prop_assert_eq!(written.state_epoch, FIRST_STATE_EPOCH),
                            Some(s) => {
                                prop_assert_eq!(written.state_epoch, s.state_epoch + 1);
                                prop_assert!(written.leader_epoch >= s.leader_epoch);
                                prop_assert_eq!(expected, Some(s.state_epoch));
                                let target = (s.state == Failed).then_some(s.previous_state).flatten();
                                prop_assert!(table.is_legal(s.state, written.state, target));
                            }
                        }
                        if stored.is_none() {
                            prop_assert_eq!(expected, None);
                            prop_assert!(table.is_legal(Unknown, written.state, None));
                        }
                        // Only the written key changed.
                        let mut check = before.clone();
                        check.apply(&MirrorStateRecord::PartitionState { partition: k, value: written });
                        prop_assert_eq!(&check, &c);
                    }
                    Err(_) => prop_assert_eq!(&c, &before),
                }
            }
            prop_assert_eq!(Coordinator::new(table).replay(c.records()), c);
        }
    }
}
