//! The sync gate as a property: whatever a round read and whatever happened since, a write is
//! admitted only while the stop is not requested and the partition is still exactly in the
//! MIRRORING or PAUSED record the round read.

use kmirror_kernel::config::MirrorConfig;
use kmirror_kernel::desired::DesiredState;
use kmirror_kernel::records::MirrorPartitionStateValue;
use kmirror_kernel::state::MirrorState;
use kmirror_kernel::sync::gate::{admit, open};
use kmirror_kernel::types::MirrorName;
use proptest::prelude::*;

fn state() -> impl Strategy<Value = MirrorState> {
    prop::sample::select(MirrorState::ALL.to_vec())
}

fn desired() -> impl Strategy<Value = DesiredState> {
    let m = |s: &str| MirrorName::new(s).unwrap();
    prop::sample::select(vec![
        DesiredState::NotMirrored,
        DesiredState::Mirror(m("east")),
        DesiredState::Pause(m("east")),
        DesiredState::Stop(m("east")),
        DesiredState::Mirror(m("west")),
    ])
}

fn record() -> impl Strategy<Value = Option<MirrorPartitionStateValue>> {
    prop::option::of(
        (state(), 0i32..3, 0i32..3).prop_map(|(state, leader_epoch, state_epoch)| {
            MirrorPartitionStateValue {
                state,
                leader_epoch,
                state_epoch,
                error_message: None,
                retry_attempt: 0,
                previous_state: None,
            }
        }),
    )
}

proptest! {
    #[test]
    fn a_write_lands_only_in_the_fenced_mirroring_or_paused_record(
        read_desired in desired(),
        read_record in record(),
        now_desired in desired(),
        now_record in record(),
    ) {
        let config = MirrorConfig::default();
        let Ok(fence) = open(&config, &read_desired, read_record.as_ref()) else {
            return Ok(());
        };
        prop_assert!(matches!(fence.state, MirrorState::Mirroring | MirrorState::Paused));
        if admit(&config, &fence, &now_desired, now_record.as_ref()).is_ok() {
            let now = now_record.unwrap();
            prop_assert!(matches!(now.state, MirrorState::Mirroring | MirrorState::Paused));
            prop_assert!(!matches!(now_desired, DesiredState::Stop(_) | DesiredState::NotMirrored));
            prop_assert_eq!(now_desired.mirror(), Some(&fence.mirror));
            prop_assert_eq!((now.state_epoch, now.leader_epoch), (fence.state_epoch, fence.leader_epoch));
        }
        // Nothing changed: the write lands.
        prop_assert!(admit(&config, &fence, &read_desired, read_record.as_ref()).is_ok());
    }
}
