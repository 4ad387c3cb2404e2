//! How a `__mirror_state` coordinator numbers and fences state writes: kmirror's rule or the
//! KIP authors' prototype's (`docs/prototype.md`, section 4.2). The two differ in the first
//! state epoch and in what a writer's expected epochs must be; both check the leader epoch
//! before the state epoch, and both fence a second writer that read the same record as a first
//! whose write landed (compare-and-set).

use serde::{Deserialize, Serialize};

use crate::records::MirrorPartitionStateValue;
use crate::state::Design;
use crate::types::{LeaderEpoch, StateEpoch, UNDEFINED_EPOCH};

/// The prototype's expected state epoch that skips the check (the wire's -1).
pub const SKIP_STATE_EPOCH_CHECK: StateEpoch = -1;

/// What fenced a state write (see [`StateFencing::check`]).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum Fenced {
    /// The write's leader epoch is below the stored record's.
    LeaderEpoch,
    /// The writer's expected state epoch does not admit the stored one.
    StateEpoch,
}

/// A coordinator's rule for state epochs.
#[derive(
    Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize,
)]
pub enum StateFencing {
    /// kmirror's (the seed design's): the first write of a key gets state epoch 0; a write's
    /// leader epoch must not be below the stored one, and the writer's expected state epoch must
    /// be exactly the stored one, `None` exactly when nothing is stored.
    #[default]
    Exact,
    /// The prototype's shard (`ClusterMirrorCoordinatorShard.writePartitionState`): a missing
    /// record counts as state epoch 0, so the first write gets 1; a leader epoch of -1 skips the
    /// leader-epoch check and an expected state epoch of -1 ([`SKIP_STATE_EPOCH_CHECK`]) the
    /// state-epoch check; any other expectation is fenced only by a stored state epoch greater
    /// than it. A writer that read no record (`None`) expects 0, the state epoch of the
    /// prototype's empty cache entry, which its broker sends with a first write.
    Prototype,
}

impl StateFencing {
    /// The design's rule.
    pub fn for_design(design: Design) -> Self {
        match design {
            Design::Seed => StateFencing::Exact,
            Design::Prototype => StateFencing::Prototype,
        }
    }

    /// The state epoch the first accepted write of a key gets.
    pub fn first_state_epoch(self) -> StateEpoch {
        match self {
            StateFencing::Exact => 0,
            StateFencing::Prototype => 1,
        }
    }

    /// What fences a write at `leader_epoch` from a writer expecting `expected_state_epoch`
    /// when `stored` is the key's record: the leader epoch is checked first.
    pub fn check(
        self,
        stored: Option<&MirrorPartitionStateValue>,
        leader_epoch: LeaderEpoch,
        expected_state_epoch: Option<StateEpoch>,
    ) -> Option<Fenced> {
        let skip_leader_epoch = self == StateFencing::Prototype && leader_epoch == UNDEFINED_EPOCH;
        if stored.is_some_and(|s| leader_epoch < s.leader_epoch) && !skip_leader_epoch {
            return Some(Fenced::LeaderEpoch);
        }
        let stored_epoch = stored.map(|s| s.state_epoch);
        let fenced = match self {
            StateFencing::Exact => expected_state_epoch != stored_epoch,
            StateFencing::Prototype => {
                let expected = expected_state_epoch.unwrap_or(0);
                expected != SKIP_STATE_EPOCH_CHECK && stored_epoch.unwrap_or(0) > expected
            }
        };
        fenced.then_some(Fenced::StateEpoch)
    }
}
