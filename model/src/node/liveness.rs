//! The node model's bounded liveness, as in [`crate::liveness`]: from a state, a fair scheduler
//! of progress actions alone (deliveries, the node's start, the backoff clock, retry timers; no
//! produce, no fault, no crash, no operator request, no change of the source) must settle the
//! partitions within [`NodeModelConfig::liveness_bound`] steps.
//!
//! The scheduler never spends a budget, so its run from a state does not depend on the budgets
//! left: evaluated where crashes, operator requests or source changes are still possible, it
//! asks what happens if they stop there. Both properties are evaluated from every state in
//! which no fault can happen any more (as the first one always was), so the second one covers
//! the states after a stop whose second operator request never comes, too.
//!
//! [`NodeModelConfig::liveness_bound`]: super::config::NodeModelConfig::liveness_bound

use std::collections::BTreeMap;
use std::sync::Arc;

use kmirror_kernel::desired::DesiredState;
use kmirror_kernel::node::PartitionKey;
use kmirror_kernel::records::NON_RETRYABLE_ATTEMPT;
use kmirror_kernel::state::MirrorState;

use super::actions::NodeAction;
use super::model::NodeModel;
use super::world::NodeWorld;

/// Whether partition `key` is where its topic's desired state and its source lead: MIRRORING
/// with the source's batches, FAILED for good if the source deleted its topic, or STOPPED.
pub fn settled(w: &NodeWorld, key: &PartitionKey) -> bool {
    let state = w.stored_state(key);
    match w.desired(key.topic_id) {
        DesiredState::Mirror(_) if w.source_deleted(key.topic_id) => failed_for_good(w, key),
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

/// Whether `key` stores FAILED, not to be retried.
pub fn failed_for_good(w: &NodeWorld, key: &PartitionKey) -> bool {
    w.stored(key)
        .is_some_and(|v| v.state == MirrorState::Failed && v.retry_attempt == NON_RETRYABLE_ATTEMPT)
}

/// `every_partition_progresses_once_faults_stop`: once no fault can happen, every destination
/// partition settles: one partition's failure or backoff stalls no other.
pub fn every_partition_progresses(model: &NodeModel, w: &NodeWorld) -> bool {
    if w.budget.faults > 0 {
        return true;
    }
    reaches(model, w, |w| w.keys().all(|k| settled(w, k)))
}

/// `every_selected_partition_mirrored_once_source_stops_changing`: once no fault can happen,
/// and crashes, operator requests and changes of the source stop, every partition the source
/// has of every topic asked to mirror (the destination creating the ones it lacks) settles, and
/// so does every destination partition.
pub fn every_selected_partition_mirrored(model: &NodeModel, w: &NodeWorld) -> bool {
    if w.budget.faults > 0 {
        return true;
    }
    reaches(model, w, |w| {
        w.keys().all(|k| settled(w, k))
            && w.source_logs
                .keys()
                .all(|k| !matches!(w.desired(k.topic_id), DesiredState::Mirror(_)) || settled(w, k))
    })
}

/// The progress actions enabled in `w`: deliveries, the node's start and the timers.
fn progress_actions(w: &NodeWorld, actions: &mut Vec<NodeAction>) {
    actions.extend(w.net.keys().map(|m| NodeAction::Deliver(Arc::clone(m))));
    w.start_and_timers(actions);
}

/// Runs the fair scheduler from `w` until `done` holds (true) or the bound is spent or nothing
/// can progress (false). The scheduler takes the action enabled the longest (first in
/// [`NodeWorld::enabled_actions`] order among equals): a rotation by step number is not fair
/// here, since a fetch loop keeps the number of enabled actions constant and can keep another
/// message at a position the rotation never reaches.
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
