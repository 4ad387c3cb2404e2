//! The node model's properties (see the [module doc](super)), and `sometimes` properties
//! proving the situations they are about are reached. The two liveness properties are bounded
//! ([`super::liveness`]).

use kmirror_kernel::log::LogView;
use kmirror_kernel::node::FetchStatus;
use kmirror_kernel::state::MirrorState;
use stateright::Property;

use super::liveness::{
    every_partition_progresses, every_selected_partition_mirrored, failed_for_good,
};
use super::model::NodeModel;
use super::world::{NodeMessage, NodeViolation, NodeWorld};

/// Every property of the node model, safety first.
pub fn all() -> Vec<Property<NodeModel>> {
    vec![
        Property::always(
            "stop_leaves_other_topics_alone",
            |_: &NodeModel, w: &NodeWorld| {
                w.ghosts.violation != Some(NodeViolation::StopChangedOtherTopic)
            },
        ),
        Property::always(
            "coalesced_fetch_part_as_lone_fetch",
            |_: &NodeModel, w: &NodeWorld| {
                w.ghosts.violation != Some(NodeViolation::CoalescedPartDiffers)
            },
        ),
        Property::always(
            "read_only_unless_stopped",
            |_: &NodeModel, w: &NodeWorld| {
                w.dest
                    .iter()
                    .all(|(k, p)| !p.writable || w.stored_state(k) == MirrorState::Stopped)
            },
        ),
        Property::always(
            "no_failback_without_asking",
            |_: &NodeModel, w: &NodeWorld| {
                w.ghosts.violation != Some(NodeViolation::FailbackWithoutAsking)
            },
        ),
        Property::always(
            "every_partition_progresses_once_faults_stop",
            |m: &NodeModel, w: &NodeWorld| every_partition_progresses(m, w),
        ),
        Property::always(
            "every_selected_partition_mirrored_once_source_stops_changing",
            |m: &NodeModel, w: &NodeWorld| every_selected_partition_mirrored(m, w),
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
                w.fetch_slot(k).is_some_and(
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
        Property::sometimes(
            "restart_with_stopped_writable_partition",
            |_: &NodeModel, w: &NodeWorld| {
                w.node.is_none()
                    && w.dest
                        .iter()
                        .any(|(k, p)| p.writable && w.stored_state(k) == MirrorState::Stopped)
            },
        ),
        Property::sometimes("partition_failed_back", |_: &NodeModel, w: &NodeWorld| {
            w.ghosts.failed_back
        }),
        Property::sometimes(
            "grown_partition_mirrors_data",
            |m: &NodeModel, w: &NodeWorld| {
                w.keys().any(|k| {
                    m.config
                        .partitions(k.topic_id)
                        .is_some_and(|n| k.partition >= n)
                        && w.stored_state(k) == MirrorState::Mirroring
                        && w.dest_logs.get(k).is_some_and(|l| l.log_end_offset() > 0)
                })
            },
        ),
        Property::sometimes(
            "stopped_topic_grown_writable",
            |_: &NodeModel, w: &NodeWorld| {
                w.dest.iter().any(|(k, p)| {
                    p.writable
                        && !w.source_logs.contains_key(k)
                        && !w.source_deleted(k.topic_id)
                        && w.stored_state(k) == MirrorState::Stopped
                })
            },
        ),
        Property::sometimes(
            "deleted_source_topic_failed",
            |_: &NodeModel, w: &NodeWorld| {
                w.keys()
                    .any(|k| w.source_deleted(k.topic_id) && failed_for_good(w, k))
            },
        ),
    ]
}
