//! Where the seed's machine and the KIP authors' prototype decide differently, as data: one
//! [`DesignRules`] per [`Design`], each entry looked up at the one place it applies.
//!
//! What is not here is shared or configured: both designs run the same side effects, stop
//! steps and log rules; the prototype's extra states are rows of its transition table
//! ([`TransitionTable::prototype`](crate::state::TransitionTable::prototype)), and its other
//! choices are [`MirrorConfig`] values set by [`MirrorConfig::prototype`] (stop order and
//! strategy, LME capture, unfenced LME write, epoch-bump numbers, retry policy).

use super::PartitionMirror;
use crate::config::MirrorConfig;
use crate::effect::Effect;
use crate::records::MirrorPartitionStateValue;
use crate::state::{Design, MirrorState};
use crate::types::{LeaderEpoch, Offset};

/// The decisions in which one design differs from the other (`docs/design.md` section 10,
/// `docs/prototype.md`).
pub(super) struct DesignRules {
    /// The transition the desired state asks for from the stored state, if any
    /// (`decide.rs`): the seed's moves one step along its table; the prototype's lets FAILED
    /// win and asks any state the table allows for a stop or a pause.
    pub(super) transition: fn(&PartitionMirror, &MirrorConfig, MirrorState) -> Option<MirrorState>,
    /// Whether decisions are taken on triggers only (a leadership, a desired-state change, a
    /// read): after its own write the partition then runs the written state's side effect
    /// unless a trigger arrived while the write was in flight. The seed decides after every
    /// write.
    pub(super) triggers_only: bool,
    /// What a fetched batch at or above the leader epoch (by the bump rule) leads to, given
    /// the source's epoch (`fetch.rs`): the seed bumps while mirroring; the prototype
    /// persists EPOCH_FENCING, whose side effect bumps.
    pub(super) source_ahead: fn(&mut PartitionMirror, &MirrorConfig, LeaderEpoch, &mut Vec<Effect>),
    /// What a truncation for a diverging epoch leads to, given where the log now ends and its
    /// epoch there (`fetch.rs`): the seed fetches on from the cut; the prototype reads it as an
    /// unclean election at the source and recovers (ULE_RECOVERY) or fails for good.
    pub(super) diverged:
        fn(&mut PartitionMirror, &MirrorConfig, Offset, Option<LeaderEpoch>, &mut Vec<Effect>),
    /// The state a retry of a FAILED record writes, or `None` when the table refuses it
    /// (`failure.rs`).
    pub(super) retry_target: fn(&MirrorConfig, &MirrorPartitionStateValue) -> Option<MirrorState>,
}

impl DesignRules {
    /// The KIP's text (`docs/design.md`).
    const SEED: DesignRules = DesignRules {
        transition: PartitionMirror::seed_transition,
        triggers_only: false,
        source_ahead: PartitionMirror::bump_while_mirroring,
        diverged: PartitionMirror::fetch,
        retry_target: super::failure::seed_retry_target,
    };

    /// The KIP authors' prototype (`docs/prototype.md`).
    const PROTOTYPE: DesignRules = DesignRules {
        transition: PartitionMirror::prototype_transition,
        triggers_only: true,
        source_ahead: PartitionMirror::enter_epoch_fencing,
        diverged: PartitionMirror::recover_from_source_loss,
        retry_target: super::failure::table_retry_target,
    };

    /// The rules of `config`'s design.
    pub(super) fn of(config: &MirrorConfig) -> &'static DesignRules {
        match config.design {
            Design::Seed => &Self::SEED,
            Design::Prototype => &Self::PROTOTYPE,
        }
    }
}
