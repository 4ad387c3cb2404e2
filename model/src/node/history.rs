//! What the properties need of the history: each state record the coordinator accepts is
//! compared with the one it replaces, in the step that writes it.
//!
//! - A partition leaves STOPPED only after the operator failed its topic back since it became
//!   STOPPED ([`NodeViolation::FailbackWithoutAsking`]; the failback is recorded in
//!   [`NodeGhosts::failback_asked`](super::world::NodeGhosts::failback_asked)).
//! - A partition whose topic is asked to mirror never begins a stop (STOPPING or STOPPED from
//!   another state; [`NodeViolation::StopChangedOtherTopic`]). A partition asked to mirror may
//!   still *be* STOPPED: between its topic's failback and its first write.

use kmirror_kernel::desired::DesiredState;
use kmirror_kernel::node::PartitionKey;
use kmirror_kernel::records::MirrorPartitionStateValue;
use kmirror_kernel::state::MirrorState;
use kmirror_kernel::types::MirrorPartition;

use super::world::{NodeViolation, NodeWorld};

impl NodeWorld {
    /// Records what the coordinator's acceptance of `after` over `before` (none: the key's
    /// first record) tells the properties.
    pub fn observe_write(
        &mut self,
        key: &MirrorPartition,
        before: Option<&MirrorPartitionStateValue>,
        after: &MirrorPartitionStateValue,
    ) {
        let key = PartitionKey::new(key.topic_id, key.partition);
        let from = before.map_or(MirrorState::Unknown, |v| v.state);
        if from == MirrorState::Stopped && after.state != MirrorState::Stopped {
            if self.ghosts.failback_asked.remove(&key) {
                self.ghosts.failed_back = true;
            } else {
                self.violate(NodeViolation::FailbackWithoutAsking);
            }
        }
        let stop = |s: MirrorState| matches!(s, MirrorState::Stopping | MirrorState::Stopped);
        if stop(after.state)
            && !stop(from)
            && matches!(self.desired(key.topic_id), DesiredState::Mirror(_))
        {
            self.violate(NodeViolation::StopChangedOtherTopic);
        }
    }
}
