//! The node model's properties: the three of issue #11 (see the [module doc](super)), and
//! `sometimes` properties proving the situations they are about are reached.
//!
//! The liveness property is bounded, as in [`crate::liveness`]: from every state in which no
//! fault can happen any more, a fair fault-free scheduler (deliveries, the backoff clock, retry
//! timers; no produce, no stop, no fault), rotating through the enabled actions, must settle
//! every partition within [`NodeModelConfig::liveness_bound`] steps.
//!
//! [`NodeModelConfig::liveness_bound`]: super::config::NodeModelConfig::liveness_bound

use std::collections::BTreeMap;
use std::sync::Arc;

use kmirror_kernel::desired::DesiredState;
use kmirror_kernel::log::LogView;
use kmirror_kernel::node::{FetchStatus, PartitionKey};
use kmirror_kernel::state::MirrorState;
use stateright::Property;

use super::actions::NodeAction;
use super::model::NodeModel;
use super::world::{NodeMessage, NodeViolation, NodeWorld};

/// Every property of the node model, safety first.
pub fn all() -> Vec<Property<NodeModel>> {
    vec![
        Property::always(
            "stop_leaves_other_topics_alone",
            |_: &NodeModel, w: &NodeWorld| {
                w.ghosts.violation != Some(NodeViolation::StopChangedOtherTopic)
                    && w.keys().all(|k| {
                        !matches!(w.desired(k.topic_id), DesiredState::Mirror(_))
                            || !matches!(
                                w.stored_state(k),
                                MirrorState::Stopping | MirrorState::Stopped
                            )
                    })
            },
        ),
        Property::always(
            "coalesced_fetch_part_as_lone_fetch",
            |_: &NodeModel, w: &NodeWorld| {
                w.ghosts.violation != Some(NodeViolation::CoalescedPartDiffers)
            },
        ),
        Property::always(
            "every_partition_progresses_once_faults_stop",
            |m: &NodeModel, w: &NodeWorld| every_partition_progresses(m, w),
        ),
        Property::sometimes(
            "fetch_coalesces_two_partitions",
            |_: &NodeModel, w: &NodeWorld| {
                w.net
                    .keys()
                    .any(|m| matches!(m.as_ref(), NodeMessage::Fetch(f) if f.partitions.len() > 1))
            },
        ),
        Property::sometimes(
            "fault_beside_another_part",
            |_: &NodeModel, w: &NodeWorld| w.ghosts.fault_beside_another_part,
        ),
        Property::sometimes("partition_failed", |_: &NodeModel, w: &NodeWorld| {
            w.keys().any(|k| w.stored_state(k) == MirrorState::Failed)
        }),
        Property::sometimes("fetch_backed_off", |_: &NodeModel, w: &NodeWorld| {
            w.keys().any(|k| {
                w.node.fetch_slot(k).is_some_and(
                    |s| matches!(s.status, FetchStatus::Ready { not_before: Some(t) } if t > w.now),
                )
            })
        }),
        Property::sometimes(
            "one_topic_stopped_another_mirroring_data",
            |_: &NodeModel, w: &NodeWorld| {
                w.keys().any(|a| w.stored_state(a) == MirrorState::Stopped)
                    && w.keys().any(|b| {
                        w.stored_state(b) == MirrorState::Mirroring
                            && w.dest_logs.get(b).is_some_and(|l| l.log_end_offset() > 0)
                    })
            },
        ),
    ]
}

/// Whether partition `key` is where its topic's desired state leads: MIRRORING with the
/// source's batches, or STOPPED.
fn settled(w: &NodeWorld, key: &PartitionKey) -> bool {
    let state = w.stored_state(key);
    match w.desired(key.topic_id) {
        DesiredState::Mirror(_) => {
            state == MirrorState::Mirroring
                && match (w.dest_logs.get(key), w.source_logs.get(key)) {
                    (Some(d), Some(s)) => d.batches() == s.batches(),
                    _ => false,
                }
        }
        DesiredState::Stop(_) => state == MirrorState::Stopped,
        DesiredState::Pause(_) | DesiredState::NotMirrored => true,
    }
}

/// Once no fault can happen, every partition settles: one partition's failure or backoff
/// stalls no other.
fn every_partition_progresses(model: &NodeModel, w: &NodeWorld) -> bool {
    if w.budget.faults > 0 {
        return true;
    }
    let done = |w: &NodeWorld| w.keys().all(|k| settled(w, k));
    reaches(model, w, done)
}

/// The progress actions enabled in `w`: deliveries and timers, never a fault, a produce or a
/// stop.
fn progress_actions(w: &NodeWorld, actions: &mut Vec<NodeAction>) {
    actions.extend(w.net.keys().map(|m| NodeAction::Deliver(Arc::clone(m))));
    w.progress_timers(actions);
}

/// Runs the fair fault-free scheduler from `w` until `done` holds (true) or the bound is
/// spent or nothing can progress (false). The scheduler takes the action enabled the longest
/// (first in [`NodeWorld::enabled_actions`] order among equals): a rotation by step number is
/// not fair here, since a fetch loop keeps the number of enabled actions constant and can keep
/// another message at a position the rotation never reaches.
pub fn reaches(model: &NodeModel, w: &NodeWorld, done: impl Fn(&NodeWorld) -> bool) -> bool {
    let mut w = w.clone();
    let mut actions = Vec::new();
    let mut enabled_since: BTreeMap<NodeAction, usize> = BTreeMap::new();
    for step in 0..model.config.liveness_bound as usize {
        if done(&w) {
            return true;
        }
        actions.clear();
        progress_actions(&w, &mut actions);
        enabled_since.retain(|a, _| actions.contains(a));
        for a in &actions {
            enabled_since.entry(a.clone()).or_insert(step);
        }
        let Some(action) = actions.iter().min_by_key(|a| enabled_since[*a]).cloned() else {
            return false;
        };
        enabled_since.remove(&action);
        w.perform(&model.config, action);
    }
    done(&w)
}
