//! A source topic that is gone (`Input::SourceTopicDeleted`): a partition still asked to mirror
//! goes FAILED, never retried, its data kept; the operator's stop is its one way out, even when
//! the stop races the FAILED write; a stop already under way goes on.

mod common;

use common::*;
use kmirror_kernel::config::MirrorConfig;
use kmirror_kernel::desired::DesiredState;
use kmirror_kernel::effect::Effect;
use kmirror_kernel::input::Input;
use kmirror_kernel::partition::{Activity, Ignored};
use kmirror_kernel::records::{MirrorPartitionStateValue, NON_RETRYABLE_ATTEMPT};
use kmirror_kernel::state::MirrorState;

const REASON: &str = "the source topic was deleted (or re-created under another topic id): the \
                      partition stays FAILED and read-only, with what it mirrored, until its \
                      topic is stopped";

/// The FAILED record written for a deleted source: never retried, STOPPING its only exit.
fn failed_for_good(leader_epoch: i32) -> MirrorPartitionStateValue {
    MirrorPartitionStateValue {
        error_message: Some(REASON.into()),
        retry_attempt: NON_RETRYABLE_ATTEMPT,
        ..value(MirrorState::Failed, leader_epoch, 0, MirrorState::Stopping)
    }
}

#[test]
fn a_mirroring_partition_fails_for_good_and_only_a_stop_leaves_it() {
    let mut d = mirroring(MirrorConfig::default());
    let w = d.step(Input::SourceTopicDeleted);
    assert_eq!(
        w,
        vec![Effect::StopFetcher, write(5, failed_for_good(1), Some(1))]
    );
    assert_eq!(d.ack_write(&w), vec![], "no retry is scheduled");
    assert_eq!(d.mirror.state(), MirrorState::Failed);
    assert_eq!(d.mirror.activity(), &Activity::Settled);
    assert!(matches!(
        d.mirror
            .handle(&d.config, Input::SourceTopicDeleted, &d.log),
        Err(Ignored::NotApplicable { .. })
    ));
    // The operator's stop takes it to STOPPING, with a fresh retry count.
    let w = d.step(Input::DesiredStateChanged(DesiredState::Stop(mirror())));
    assert_eq!(
        w,
        vec![write(
            6,
            value(MirrorState::Stopping, 1, 0, MirrorState::Failed),
            Some(2)
        )]
    );
    d.ack_write(&w);
    assert_eq!(d.mirror.state(), MirrorState::Stopping);
}

#[test]
fn a_stop_accepted_while_the_failure_is_written_still_stops() {
    let mut d = mirroring(MirrorConfig::default());
    let failing = d.step(Input::SourceTopicDeleted);
    // The controller accepted the stop before FAILED landed: the partition hears it while
    // the write is in flight and decides once it is answered.
    assert_eq!(
        d.step(Input::DesiredStateChanged(DesiredState::Stop(mirror()))),
        vec![]
    );
    let w = d.ack_write(&failing);
    assert_eq!(
        w,
        vec![write(
            6,
            value(MirrorState::Stopping, 1, 0, MirrorState::Failed),
            Some(2)
        )]
    );
}

#[test]
fn a_stop_under_way_needs_nothing_of_the_source() {
    let mut d = mirroring(MirrorConfig::default());
    let w = d.step(Input::DesiredStateChanged(DesiredState::Stop(mirror())));
    let next = d.ack_write(&w);
    assert_eq!(d.mirror.state(), MirrorState::Stopping);
    let activity = d.mirror.activity().clone();
    assert_eq!(
        d.step(Input::SourceTopicDeleted),
        vec![],
        "the stop goes on"
    );
    assert_eq!(d.mirror.activity(), &activity, "{next:?}");
}
