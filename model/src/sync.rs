//! The metadata sync in the model: a destination's partition leader starts a sync round (reads
//! the source's metadata and the fence, [`Action::SyncRead`]) and its write lands later
//! ([`Action::SyncWrite`]), so every interleaving of a stale sync with a stop, a failback or a
//! leader change is explored.
//!
//! Both steps are the kernel's gate ([`kmirror_kernel::sync::gate`]): a round starts only when
//! [`gate::open`] accepts what the leader's kernel knows, and its write lands only when
//! [`gate::admit`] accepts the fence against the coordinator's record and the controller's
//! `mirror.name` at that moment. The world only records where a write landed; property
//! `no_sync_write_after_stop` fails when one lands while the partition is STOPPING or STOPPED.

use kmirror_kernel::state::MirrorState;
use kmirror_kernel::sync::gate::{self, SyncFence};
use kmirror_kernel::types::MirrorPartition;

use crate::actions::Action;
use crate::config::ModelConfig;
use crate::world::{ClusterId, Violation, World, PARTITION, TOPIC_ID};

impl World {
    /// The sync actions enabled in this world.
    pub fn sync_actions(&self, config: &ModelConfig, actions: &mut Vec<Action>) {
        for c in ClusterId::BOTH {
            if self.cluster(c).sync_in_flight.is_some() {
                actions.push(Action::SyncWrite(c));
            } else if self.budget.sync_steps > 0 && self.sync_fence(config, c).is_some() {
                actions.push(Action::SyncRead(c));
            }
        }
    }

    /// The fence cluster `c`'s partition leader would read to start a round, if its kernel lets
    /// a round start.
    fn sync_fence(&self, config: &ModelConfig, c: ClusterId) -> Option<SyncFence> {
        let leader = self.leader(c)?;
        let mirror = leader.mirror.as_ref()?;
        mirror.leadership()?;
        gate::open(&config.kernel, mirror.desired(), mirror.stored_value()).ok()
    }

    /// Cluster `c`'s leader starts a sync round.
    pub fn sync_read(&mut self, config: &ModelConfig, c: ClusterId) -> Option<()> {
        let fence = self.sync_fence(config, c)?;
        self.budget.sync_steps = self.budget.sync_steps.checked_sub(1)?;
        self.cluster_mut(c).sync_in_flight = Some(fence);
        Some(())
    }

    /// The write of cluster `c`'s sync round reaches the destination's metadata: admitted or
    /// refused by the gate against the authoritative record and `mirror.name`.
    pub fn sync_write(&mut self, config: &ModelConfig, c: ClusterId) -> Option<()> {
        let fence = self.cluster_mut(c).sync_in_flight.take()?;
        let key = MirrorPartition {
            mirror: fence.mirror.clone(),
            topic_id: TOPIC_ID,
            partition: PARTITION,
        };
        let stored = self.cluster(c).coordinator.read_state(&key).cloned();
        match gate::admit(&config.kernel, &fence, self.desired_ref(c), stored.as_ref()) {
            Ok(()) => {
                self.ghosts.sync_landed = true;
                if matches!(
                    self.stored_state(c),
                    MirrorState::Stopping | MirrorState::Stopped
                ) {
                    self.violate(Violation::SyncWriteAfterStop);
                }
            }
            Err(_) => self.ghosts.sync_fenced = true,
        }
        Some(())
    }
}
