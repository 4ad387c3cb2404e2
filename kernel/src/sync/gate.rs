//! When a sync write may land (see the [module documentation](super) for the design).
//!
//! [`open`] starts a round from what the partition leader knows and returns the
//! [`SyncFence`] the round carries; [`admit`] checks that fence against the authoritative
//! `__mirror_state` record and `mirror.name` immediately before each write. The executor must
//! run `admit` and the write atomically with respect to state writes of the same partition (the
//! harness holds the destination directory's lock; a broker would do it on the partition
//! leader, under the partition's lock).

use serde::{Deserialize, Serialize};

use crate::config::MirrorConfig;
use crate::desired::DesiredState;
use crate::mutant::{self, Mutant};
use crate::records::MirrorPartitionStateValue;
use crate::state::MirrorState;
use crate::types::{LeaderEpoch, MirrorName, StateEpoch};

/// What a sync round read when it started: a write computed from it may land only while the
/// partition is still exactly there.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize)]
pub struct SyncFence {
    /// The mirror the topic was in.
    pub mirror: MirrorName,
    /// The persisted state (MIRRORING or PAUSED).
    pub state: MirrorState,
    /// The leader epoch of the persisted record.
    pub leader_epoch: LeaderEpoch,
    /// The state epoch of the persisted record (every accepted state write increments it).
    pub state_epoch: StateEpoch,
}

/// Why no sync may start, or why a sync write is refused.
#[derive(Clone, PartialEq, Eq, Debug, thiserror::Error)]
pub enum SyncRefused {
    /// The topic is not in a mirror.
    #[error("the topic is not in a mirror (mirror.name is empty): its metadata is its own")]
    NotMirrored,
    /// A stop (failover) was requested.
    #[error(
        "mirror.name is {mirror}.removed: the topic is failing over and the destination now \
         owns its metadata; nothing more is synced"
    )]
    StopRequested {
        /// The mirror.
        mirror: MirrorName,
    },
    /// The topic is now in another mirror than the one the round read.
    #[error("the topic moved from mirror {read} to {now}; the round's writes are dropped")]
    OtherMirror {
        /// The mirror the round read.
        read: MirrorName,
        /// The desired state now.
        now: String,
    },
    /// Nothing is persisted for the partition yet.
    #[error("no mirror state is persisted for the partition yet; wait for it to reach MIRRORING")]
    NothingPersisted,
    /// The persisted state does not allow syncing.
    #[error("the partition is {state}; metadata is synced only while MIRRORING or PAUSED")]
    NotSyncable {
        /// The persisted state.
        state: MirrorState,
    },
    /// The persisted record changed since the round read it: the write is stale.
    #[error(
        "the partition's mirror state changed since the round read it ({read_state} at state \
         epoch {read_epoch}, now {now_state} at state epoch {now_epoch}); the stale write is \
         dropped and the next round reads again"
    )]
    Fenced {
        /// The state the round read.
        read_state: MirrorState,
        /// Its state epoch.
        read_epoch: StateEpoch,
        /// The state now.
        now_state: MirrorState,
        /// Its state epoch.
        now_epoch: StateEpoch,
    },
}

/// Whether metadata may be synced while the persisted state is `state` (MIRRORING or PAUSED).
pub fn state_allows_sync(config: &MirrorConfig, state: MirrorState) -> bool {
    if mutant::active(config.mutant, Mutant::SyncAfterStop)
        && matches!(state, MirrorState::Stopping | MirrorState::Stopped)
    {
        return true;
    }
    matches!(state, MirrorState::Mirroring | MirrorState::Paused)
}

/// The mirror a desired state lets metadata be synced from (`mirror.name=<m>` or
/// `<m>.paused`).
fn syncing_mirror<'a>(
    config: &MirrorConfig,
    desired: &'a DesiredState,
) -> Result<&'a MirrorName, SyncRefused> {
    match desired {
        DesiredState::NotMirrored => Err(SyncRefused::NotMirrored),
        DesiredState::Mirror(m) | DesiredState::Pause(m) => Ok(m),
        DesiredState::Stop(m) if mutant::active(config.mutant, Mutant::SyncAfterStop) => Ok(m),
        DesiredState::Stop(m) => Err(SyncRefused::StopRequested { mirror: m.clone() }),
    }
}

/// Starts a sync round: `desired` is the topic's `mirror.name`, `stored` the persisted record
/// of the partition under that mirror, as the partition leader knows them.
pub fn open(
    config: &MirrorConfig,
    desired: &DesiredState,
    stored: Option<&MirrorPartitionStateValue>,
) -> Result<SyncFence, SyncRefused> {
    let mirror = syncing_mirror(config, desired)?;
    let stored = stored.ok_or(SyncRefused::NothingPersisted)?;
    if !state_allows_sync(config, stored.state) {
        return Err(SyncRefused::NotSyncable {
            state: stored.state,
        });
    }
    Ok(SyncFence {
        mirror: mirror.clone(),
        state: stored.state,
        leader_epoch: stored.leader_epoch,
        state_epoch: stored.state_epoch,
    })
}

/// Whether a write computed under `fence` may land now: `desired` is the topic's current
/// `mirror.name` and `stored` the current persisted record of the partition under the fence's
/// mirror, both read from their authority at the moment of the write.
pub fn admit(
    config: &MirrorConfig,
    fence: &SyncFence,
    desired: &DesiredState,
    stored: Option<&MirrorPartitionStateValue>,
) -> Result<(), SyncRefused> {
    if mutant::active(config.mutant, Mutant::SyncWriteUnfenced) {
        return Ok(());
    }
    let mirror = syncing_mirror(config, desired)?;
    if *mirror != fence.mirror {
        return Err(SyncRefused::OtherMirror {
            read: fence.mirror.clone(),
            now: desired.config_value(),
        });
    }
    let stored = stored.ok_or(SyncRefused::NothingPersisted)?;
    if !state_allows_sync(config, stored.state) {
        return Err(SyncRefused::NotSyncable {
            state: stored.state,
        });
    }
    if stored.state_epoch != fence.state_epoch || stored.leader_epoch != fence.leader_epoch {
        return Err(SyncRefused::Fenced {
            read_state: fence.state,
            read_epoch: fence.state_epoch,
            now_state: stored.state,
            now_epoch: stored.state_epoch,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(state: MirrorState, state_epoch: StateEpoch) -> MirrorPartitionStateValue {
        MirrorPartitionStateValue {
            state,
            leader_epoch: 3,
            state_epoch,
            error_message: None,
            retry_attempt: 0,
            previous_state: None,
        }
    }

    fn east() -> MirrorName {
        MirrorName::new("east").unwrap()
    }

    #[test]
    fn only_mirroring_and_paused_allow_sync() {
        let c = MirrorConfig::default();
        let allowed: Vec<_> = MirrorState::ALL
            .into_iter()
            .filter(|s| state_allows_sync(&c, *s))
            .collect();
        assert_eq!(allowed, vec![MirrorState::Mirroring, MirrorState::Paused]);
    }

    #[test]
    fn open_reads_the_fence() {
        let c = MirrorConfig::default();
        let m = DesiredState::Mirror(east());
        let fence = open(&c, &m, Some(&record(MirrorState::Mirroring, 4))).unwrap();
        assert_eq!(
            fence,
            SyncFence {
                mirror: east(),
                state: MirrorState::Mirroring,
                leader_epoch: 3,
                state_epoch: 4
            }
        );
        let paused = DesiredState::Pause(east());
        assert!(open(&c, &paused, Some(&record(MirrorState::Paused, 5))).is_ok());
        assert_eq!(
            open(
                &c,
                &DesiredState::Stop(east()),
                Some(&record(MirrorState::Mirroring, 4))
            ),
            Err(SyncRefused::StopRequested { mirror: east() })
        );
        assert_eq!(
            open(&c, &m, Some(&record(MirrorState::Preparing, 2))),
            Err(SyncRefused::NotSyncable {
                state: MirrorState::Preparing
            })
        );
        assert_eq!(open(&c, &m, None), Err(SyncRefused::NothingPersisted));
        assert_eq!(
            open(&c, &DesiredState::NotMirrored, None),
            Err(SyncRefused::NotMirrored)
        );
    }

    #[test]
    fn a_stale_write_is_fenced_by_the_state_epoch() {
        let c = MirrorConfig::default();
        let m = DesiredState::Mirror(east());
        let fence = open(&c, &m, Some(&record(MirrorState::Mirroring, 4))).unwrap();
        assert_eq!(
            admit(&c, &fence, &m, Some(&record(MirrorState::Mirroring, 4))),
            Ok(())
        );
        // Paused and resumed in between: same state, newer epoch.
        assert!(matches!(
            admit(&c, &fence, &m, Some(&record(MirrorState::Mirroring, 6))),
            Err(SyncRefused::Fenced {
                read_epoch: 4,
                now_epoch: 6,
                ..
            })
        ));
        // Stop requested: refused before STOPPING is even written.
        assert_eq!(
            admit(
                &c,
                &fence,
                &DesiredState::Stop(east()),
                Some(&record(MirrorState::Mirroring, 4))
            ),
            Err(SyncRefused::StopRequested { mirror: east() })
        );
        // Failed back and mirroring again from the same mirror: STOPPED, then a new epoch.
        assert_eq!(
            admit(&c, &fence, &m, Some(&record(MirrorState::Stopped, 7))),
            Err(SyncRefused::NotSyncable {
                state: MirrorState::Stopped
            })
        );
        let west = DesiredState::Mirror(MirrorName::new("west").unwrap());
        assert!(matches!(
            admit(&c, &fence, &west, Some(&record(MirrorState::Mirroring, 4))),
            Err(SyncRefused::OtherMirror { .. })
        ));
    }
}
