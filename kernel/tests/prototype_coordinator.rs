//! The KIP authors' coordinator tests, replayed: each case of `ClusterMirrorCoordinatorShardTest`
//! (GitHub `showuon/kafka`, `mirror-coordinator/src/test/java/org/apache/kafka/coordinator/
//! mirror/ClusterMirrorCoordinatorShardTest.java`) paraphrased against kmirror's
//! [`Coordinator`] built for `--design prototype` (its transition table, its
//! [`StateFencing::Prototype`]), each citing the test it follows. Where the seed design's
//! coordinator answers differently, the same case pins the seed's answer beside it
//! (`model/FINDINGS.md`, "The prototype's coordinator and numbers": whether it matters).
//!
//! The prototype's `LOG_TRUNCATION` is kmirror's PREPARING (`docs/prototype.md` section 2); its
//! -1 for "skip the check" is [`SKIP_STATE_EPOCH_CHECK`] for the expected state epoch and
//! [`UNDEFINED_EPOCH`] for the leader epoch; kmirror's `None` (the writer read no record) is
//! the prototype's 0 (its broker's empty cache entry) and, for the seed, "nothing is stored".

use kmirror_kernel::config::MirrorConfig;
use kmirror_kernel::coordinator::{Coordinator, WriteRefused};
use kmirror_kernel::records::{MirrorPartitionStateValue, MirrorStateRecord};
use kmirror_kernel::state::{Design, MirrorState};
use kmirror_kernel::state_fencing::{StateFencing, SKIP_STATE_EPOCH_CHECK};
use kmirror_kernel::types::{
    LeaderEpoch, MirrorName, MirrorPartition, StateEpoch, TopicId, UNDEFINED_EPOCH,
};

use MirrorState::{Failed, Mirroring, Preparing};

/// Partition `p` of the test's topic in mirror `my-mirror`.
fn tp(p: i32) -> MirrorPartition {
    MirrorPartition {
        mirror: MirrorName::new("my-mirror").expect("a valid name"),
        topic_id: TopicId::from_u64(0x6d79),
        partition: p,
    }
}

/// The coordinator `design` runs.
fn coordinator(design: Design) -> Coordinator {
    Coordinator::new(MirrorConfig::for_design(design).transitions)
        .with_fencing(StateFencing::for_design(design))
}

/// A record as the shard's log holds it (the test's `replayState`): applied without fencing.
fn replayed(
    mut c: Coordinator,
    key: &MirrorPartition,
    state: MirrorState,
    leader_epoch: LeaderEpoch,
    state_epoch: StateEpoch,
) -> Coordinator {
    c.apply(&MirrorStateRecord::PartitionState {
        partition: key.clone(),
        value: MirrorPartitionStateValue {
            state,
            leader_epoch,
            state_epoch,
            error_message: None,
            retry_attempt: 0,
            previous_state: None,
        },
    });
    c
}

/// A write of `state` at `leader_epoch`, expecting `expected` (`None`: no record was read).
fn write(
    c: &mut Coordinator,
    key: &MirrorPartition,
    state: MirrorState,
    leader_epoch: LeaderEpoch,
    expected: Option<StateEpoch>,
) -> Result<StateEpoch, WriteRefused> {
    let value = MirrorPartitionStateValue {
        state,
        leader_epoch,
        state_epoch: 0,
        error_message: (state == Failed).then(|| "error".to_owned()),
        retry_attempt: 0,
        previous_state: None,
    };
    c.write_state(key, value, expected).map(|v| v.state_epoch)
}

fn fenced_leader(r: Result<StateEpoch, WriteRefused>) -> bool {
    matches!(r, Err(WriteRefused::FencedLeaderEpoch { .. }))
}

fn fenced_state(r: Result<StateEpoch, WriteRefused>) -> bool {
    matches!(r, Err(WriteRefused::FencedStateEpoch { .. }))
}

/// `testWritePartitionStateIncrementsStateEpoch`: the first write of a key gets state epoch 1.
/// The seed's first write gets 0.
#[test]
fn first_write_gets_state_epoch_one() {
    let mut c = coordinator(Design::Prototype);
    assert_eq!(
        write(&mut c, &tp(0), Preparing, 0, Some(SKIP_STATE_EPOCH_CHECK)),
        Ok(1)
    );
    let mut read_nothing = coordinator(Design::Prototype);
    assert_eq!(write(&mut read_nothing, &tp(0), Preparing, 0, None), Ok(1));
    let mut seed = coordinator(Design::Seed);
    assert_eq!(write(&mut seed, &tp(0), Preparing, 0, None), Ok(0));
}

/// `testWritePartitionStateIncrementsStateEpochSequentially`: the second write gets 2 (the seed:
/// 1, expecting the 0 it read).
#[test]
fn second_write_gets_state_epoch_two() {
    let skip = Some(SKIP_STATE_EPOCH_CHECK);
    let mut c = coordinator(Design::Prototype);
    assert_eq!(write(&mut c, &tp(0), Preparing, 0, skip), Ok(1));
    assert_eq!(write(&mut c, &tp(0), Mirroring, 0, skip), Ok(2));
    let mut seed = coordinator(Design::Seed);
    assert_eq!(write(&mut seed, &tp(0), Preparing, 0, None), Ok(0));
    assert!(fenced_state(write(&mut seed, &tp(0), Mirroring, 0, None)));
    assert_eq!(write(&mut seed, &tp(0), Mirroring, 0, Some(0)), Ok(1));
}

/// `testWritePartitionStateFencedLeaderEpoch`: a write at leader epoch 3 over a record written
/// at 5 is fenced, in both designs.
#[test]
fn stale_leader_epoch_is_fenced() {
    for design in Design::ALL {
        let mut c = replayed(coordinator(design), &tp(0), Preparing, 5, 1);
        assert!(
            fenced_leader(write(&mut c, &tp(0), Mirroring, 3, Some(1))),
            "{design:?}"
        );
    }
}

/// `testWritePartitionStateLeaderEpochMinusOneSkipsCheck`: leader epoch -1 (and state epoch
/// -1) skip both checks. The seed has no "skip": -1 is a stale leader epoch.
#[test]
fn leader_epoch_minus_one_skips_the_check() {
    let mut c = replayed(coordinator(Design::Prototype), &tp(0), Preparing, 10, 1);
    let skip = Some(SKIP_STATE_EPOCH_CHECK);
    assert_eq!(
        write(&mut c, &tp(0), Mirroring, UNDEFINED_EPOCH, skip),
        Ok(2)
    );
    assert_eq!(
        c.read_state(&tp(0)).map(|v| v.leader_epoch),
        Some(10),
        "the highest leader epoch seen stays"
    );
    let mut seed = replayed(coordinator(Design::Seed), &tp(0), Preparing, 10, 1);
    assert!(fenced_leader(write(
        &mut seed,
        &tp(0),
        Mirroring,
        UNDEFINED_EPOCH,
        Some(1)
    )));
}

/// `testLeaderEpochCheckRunsBeforeStateEpochCheck`: stale in both epochs, the leader epoch is
/// the error, in both designs.
#[test]
fn leader_epoch_is_checked_before_state_epoch() {
    for design in Design::ALL {
        let mut c = replayed(coordinator(design), &tp(0), Preparing, 5, 5);
        assert!(
            fenced_leader(write(&mut c, &tp(0), Mirroring, 3, Some(3))),
            "{design:?}"
        );
    }
}

/// `testWriteStateBatchedLeaderEpochFencing`: one batch for two partitions answers per
/// partition: the stale leader's write is fenced, the other lands. The seed answers the same
/// only to a writer that sends the epoch it read; without one (the prototype's -1) it fences
/// that partition too, by state epoch.
#[test]
fn batched_writes_are_fenced_per_partition_by_leader_epoch() {
    let stored = |design| {
        let c = replayed(coordinator(design), &tp(0), Preparing, 5, 1);
        replayed(c, &tp(1), Preparing, 3, 1)
    };
    let mut c = stored(Design::Prototype);
    let skip = Some(SKIP_STATE_EPOCH_CHECK);
    let answers = [
        write(&mut c, &tp(0), Mirroring, 2, skip),
        write(&mut c, &tp(1), Mirroring, 3, skip),
    ];
    assert!(fenced_leader(answers[0]));
    assert_eq!(answers[1], Ok(2));
    let mut seed = stored(Design::Seed);
    assert!(fenced_leader(write(&mut seed, &tp(0), Mirroring, 2, None)));
    assert!(fenced_state(write(&mut seed, &tp(1), Mirroring, 3, None)));
    assert_eq!(write(&mut seed, &tp(1), Mirroring, 3, Some(1)), Ok(2));
}

/// `testWritePartitionStateFencedStateEpoch` and `...FencedStateEpochProducesNoRecords`: a
/// writer expecting 3 where 5 is stored is fenced and nothing changes, in both designs.
#[test]
fn stale_state_epoch_is_fenced_and_changes_nothing() {
    for design in Design::ALL {
        let mut c = replayed(coordinator(design), &tp(0), Preparing, UNDEFINED_EPOCH, 5);
        let before = c.clone();
        assert!(fenced_state(write(
            &mut c,
            &tp(0),
            Mirroring,
            UNDEFINED_EPOCH,
            Some(3)
        )));
        assert_eq!(c, before, "{design:?}");
        let stored = c.read_state(&tp(0)).expect("still stored");
        assert_eq!((stored.state, stored.state_epoch), (Preparing, 5));
    }
}

/// `testWritePartitionStateStateEpochMinusOneSkipsCheck`: a writer expecting -1 lands on a
/// record at state epoch 10 and gets 11. A writer that read no record expects 0 and is fenced
/// by the 10 stored; the seed fences it as well (`None`: "I read no record").
#[test]
fn state_epoch_minus_one_skips_the_check() {
    let stored = |design| replayed(coordinator(design), &tp(0), Preparing, UNDEFINED_EPOCH, 10);
    let mut c = stored(Design::Prototype);
    let skip = Some(SKIP_STATE_EPOCH_CHECK);
    assert_eq!(
        write(&mut c, &tp(0), Mirroring, UNDEFINED_EPOCH, skip),
        Ok(11)
    );
    for design in Design::ALL {
        let mut c = stored(design);
        assert!(
            fenced_state(write(&mut c, &tp(0), Mirroring, UNDEFINED_EPOCH, None)),
            "{design:?}"
        );
    }
}

/// `testWriteStateBatchedStateEpochFencing`: per partition, expecting 2 where 5 is stored is
/// fenced, expecting 3 where 3 is stored lands at 4; the same in both designs.
#[test]
fn batched_writes_are_fenced_per_partition_by_state_epoch() {
    for design in Design::ALL {
        let c = replayed(coordinator(design), &tp(0), Preparing, UNDEFINED_EPOCH, 5);
        let mut c = replayed(c, &tp(1), Preparing, UNDEFINED_EPOCH, 3);
        assert!(fenced_state(write(
            &mut c,
            &tp(0),
            Mirroring,
            UNDEFINED_EPOCH,
            Some(2)
        )));
        assert_eq!(
            write(&mut c, &tp(1), Mirroring, UNDEFINED_EPOCH, Some(3)),
            Ok(4)
        );
    }
}

/// `testBrokersRaceSimulation`: two writers read state epoch 5; the first's FAILED lands, the
/// second's MIRRORING, expecting the same 5, is fenced (compare-and-set), in both designs.
#[test]
fn two_writers_of_the_same_read_fence_the_second() {
    for design in Design::ALL {
        let mut c = replayed(coordinator(design), &tp(0), Preparing, UNDEFINED_EPOCH, 5);
        assert_eq!(
            write(&mut c, &tp(0), Failed, UNDEFINED_EPOCH, Some(5)),
            Ok(6)
        );
        assert!(
            fenced_state(write(&mut c, &tp(0), Mirroring, UNDEFINED_EPOCH, Some(5))),
            "{design:?}"
        );
    }
}

/// The prototype's fence is "stored greater than expected" (`docs/prototype.md`, D13): a writer
/// expecting more than is stored lands. The seed fences any other epoch than the stored one.
#[test]
fn expecting_more_than_is_stored_lands_only_in_the_prototype() {
    let mut c = replayed(coordinator(Design::Prototype), &tp(0), Preparing, 1, 3);
    assert_eq!(write(&mut c, &tp(0), Mirroring, 1, Some(7)), Ok(4));
    let mut seed = replayed(coordinator(Design::Seed), &tp(0), Preparing, 1, 3);
    assert!(fenced_state(write(
        &mut seed,
        &tp(0),
        Mirroring,
        1,
        Some(7)
    )));
}

/// `testReplayPopulatesLeaderEpoch`, `testReplayPopulatesStateEpoch`,
/// `testReadStateIncludesLeaderEpoch`, `testReadStateIncludesStateEpoch`: a replayed record is
/// read back with its state, leader epoch and state epoch, in both designs.
#[test]
fn replayed_records_are_read_back() {
    for design in Design::ALL {
        let c = replayed(coordinator(design), &tp(0), Preparing, 4, 2);
        let read = c.read_state(&tp(0)).expect("stored");
        assert_eq!(
            (read.state, read.leader_epoch, read.state_epoch),
            (Preparing, 4, 2)
        );
    }
}

/// `testTombstoneRemovesLeaderEpoch`, `testTombstoneRemovesStateEpoch`: a tombstone forgets the
/// record, so the next write is a first write again (state epoch 1; the seed's 0), whatever
/// leader epoch it carries.
#[test]
fn a_tombstone_forgets_both_epochs() {
    for (design, first) in [(Design::Prototype, 1), (Design::Seed, 0)] {
        let mut c = replayed(coordinator(design), &tp(0), Preparing, 5, 5);
        c.apply(&MirrorStateRecord::PartitionStateTombstone(tp(0)));
        assert_eq!(c.read_state(&tp(0)), None);
        assert_eq!(
            write(&mut c, &tp(0), Preparing, 1, None),
            Ok(first),
            "{design:?}"
        );
    }
}
