//! Bounded liveness, sound in stateright: from a state in which no fault can happen any more,
//! a fair, fault-free scheduler must reach the target within
//! [`ModelConfig::liveness_bound`](crate::config::ModelConfig::liveness_bound) steps.
//!
//! Stateright's `eventually` is unreliable on cycles (a mirror keeps fetching forever), so each
//! liveness property is an `always` property that runs this scheduler: it takes only progress
//! actions (deliveries, follower fetches, restarts, elections of a missing leader, retry
//! timers), rotating through the enabled ones so none is starved, and never a produce, an
//! operator request or a fault.

use std::sync::Arc;

use kmirror_kernel::desired::DesiredState;
use kmirror_kernel::state::MirrorState;
use kmirror_kernel::types::BrokerId;

use crate::actions::Action;
use crate::model::MirrorModel;
use crate::world::{ClusterId, World};

/// Whether `action` is progress (not a fault, a produce or an operator request).
fn is_progress(world: &World, action: &Action) -> bool {
    match action {
        Action::Deliver(_)
        | Action::FollowerFetch(..)
        | Action::Restart(..)
        | Action::FireRetry(..) => true,
        Action::Elect(c, _, unclean) => !unclean && world.leader(*c).is_none(),
        _ => false,
    }
}

/// The progress actions enabled in `world`, in the order [`World::enabled_actions`] lists
/// them: what that list keeps after filtering with [`is_progress`], without building the
/// rest of it.
fn progress_actions(world: &World, actions: &mut Vec<Action>) {
    for message in world.net.keys() {
        if world.deliverable(message) {
            actions.push(Action::Deliver(Arc::clone(message)));
        }
    }
    for c in ClusterId::BOTH {
        let cluster = world.cluster(c);
        let leaderless = world.leader(c).is_none();
        for (i, replica) in cluster.replicas.iter().enumerate() {
            let b = i as BrokerId;
            if !replica.alive {
                actions.push(Action::Restart(c, b));
                continue;
            }
            if world.follower_behind(c, b) {
                actions.push(Action::FollowerFetch(c, b));
            }
            if leaderless && cluster.leader != Some(b) && cluster.isr.contains(&b) {
                actions.push(Action::Elect(c, b, false));
            }
            if replica.retry_timer.is_some() {
                actions.push(Action::FireRetry(c, b));
            }
        }
    }
}

/// Runs the fair fault-free scheduler from `world` until `done` holds (true) or the bound is
/// spent or nothing can progress (false).
pub fn reaches(model: &MirrorModel, world: &World, done: impl Fn(&World) -> bool) -> bool {
    run_until(model, world, done).is_some()
}

/// Runs the fair fault-free scheduler from `world` until `done` holds and returns the world it
/// reached, or `None` when the bound is spent or nothing can progress first.
pub fn run_until(
    model: &MirrorModel,
    world: &World,
    done: impl Fn(&World) -> bool,
) -> Option<World> {
    let mut w = world.clone();
    let mut actions = Vec::new();
    for step in 0..model.config.liveness_bound as usize {
        if done(&w) {
            return Some(w);
        }
        actions.clear();
        progress_actions(&w, &mut actions);
        debug_assert_eq!(actions, {
            let mut all = Vec::new();
            w.enabled_actions(&model.config, &mut all);
            all.retain(|a| is_progress(&w, a));
            all
        });
        if actions.is_empty() {
            return None;
        }
        let action = actions.swap_remove(step % actions.len());
        w.perform(&model.config, action);
    }
    done(&w).then_some(w)
}

/// Premise shared by the liveness properties: no fault can happen any more.
fn faults_over(world: &World) -> bool {
    world.budget.faults_exhausted()
}

/// A cluster asked to stop reaches STOPPED.
pub fn stop_reaches_stopped(model: &MirrorModel, world: &World) -> bool {
    ClusterId::BOTH.into_iter().all(|c| {
        !faults_over(world)
            || !matches!(world.desired_ref(c), DesiredState::Stop(_))
            || world.stored_state(c) == MirrorState::Stopped
            || world.stored_state(c) == MirrorState::Unknown
            || reaches(model, world, |w| w.stored_state(c) == MirrorState::Stopped)
    })
}

/// Whether both clusters are asked to mirror (or pause mirroring) each other: a cycle the
/// operator made ([`ModelConfig::mirror_cycles`](crate::ModelConfig)). The kernel's
/// reverse-mirror check keeps a partition of it FAILED, retrying, until one side is stopped:
/// the liveness properties below do not expect a cycle to settle.
fn in_cycle(world: &World) -> bool {
    ClusterId::BOTH.into_iter().all(|c| {
        matches!(
            world.desired_ref(c),
            DesiredState::Mirror(_) | DesiredState::Pause(_)
        )
    })
}

/// A cluster asked to mirror reaches MIRRORING, unless it is in a cycle.
pub fn mirror_reaches_mirroring(model: &MirrorModel, world: &World) -> bool {
    ClusterId::BOTH.into_iter().all(|c| {
        !faults_over(world)
            || !matches!(world.desired_ref(c), DesiredState::Mirror(_))
            || in_cycle(world)
            || world.stored_state(c) == MirrorState::Mirroring
            || reaches(model, world, |w| {
                w.stored_state(c) == MirrorState::Mirroring
            })
    })
}

/// A MIRRORING partition asked to mirror ends up holding exactly what its source lets it read:
/// the source leader's batches below its read bound (the LSO for read-committed fetches, the
/// HW for read-uncommitted). The scheduler never produces, so the source stops changing but
/// for a missing leader's election; this is what a destination holding a batch its source lost
/// fails, when it never acts on the divergence.
pub fn mirror_converges(model: &MirrorModel, world: &World) -> bool {
    ClusterId::BOTH.into_iter().all(|c| {
        !faults_over(world)
            || !matches!(world.desired_ref(c), DesiredState::Mirror(_))
            || world.stored_state(c) != MirrorState::Mirroring
            || reaches(model, world, |w| {
                w.stored_state(c) == MirrorState::Mirroring && w.mirror_caught_up(c, model)
            })
    })
}

/// A FAILED partition retries (leaves FAILED), unless it is in a cycle.
pub fn failed_retries(model: &MirrorModel, world: &World) -> bool {
    ClusterId::BOTH.into_iter().all(|c| {
        !faults_over(world)
            || in_cycle(world)
            || world.stored_state(c) != MirrorState::Failed
            || reaches(model, world, |w| w.stored_state(c) != MirrorState::Failed)
    })
}
