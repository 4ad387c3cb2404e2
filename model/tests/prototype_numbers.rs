//! The KIP authors' integration and system tests pin numbers about a stop (GitHub
//! `showuon/kafka`: `core/src/test/java/kafka/server/mirror/ClusterMirroringIntegrationTest.java`,
//! `tests/kafkatest/tests/core/cluster_mirroring_test.py`); each is replayed here on the model's
//! world under `--design prototype`, paraphrased and citing the test it follows, with the
//! seed design's answer pinned beside it where it differs (`model/FINDINGS.md`, "The
//! prototype's coordinator and numbers"). Between operator steps the world runs the fair
//! fault-free scheduler of the liveness properties.

use kmirror_kernel::log::LogView;
use kmirror_kernel::state::{Design, MirrorState};
use kmirror_model::actions::{Action, OperatorRequest, ProduceKind};
use kmirror_model::liveness::run_until;
use kmirror_model::world::{ClusterId, World};
use kmirror_model::{MirrorModel, ModelConfig};

const A: ClusterId = ClusterId::A;
const B: ClusterId = ClusterId::B;

/// A's leader's (LEO, LSO) and B's leader's LEO once B, having mirrored what A's producers
/// wrote (`writes`), is stopped and STOPPED.
fn stopped_after(design: Design, writes: &[ProduceKind]) -> ((i64, i64), i64) {
    let config = ModelConfig {
        records: writes.len() as u8,
        transactions: 1,
        crashes: 0,
        ..ModelConfig::tiny()
    }
    .with_design(design);
    let model = MirrorModel::new(config.clone());
    let mut world = World::initial(&config);
    for &kind in writes {
        assert!(world.perform(&config, Action::Produce(A, kind)), "{kind:?}");
    }
    // B mirrors all it may read: A's batches below the read bound.
    let world = run_until(&model, &world, |w| {
        w.stored_state(B) == MirrorState::Mirroring && w.mirror_caught_up(B, &model)
    })
    .expect("B catches up");
    let mut world = world;
    assert!(world.perform(&config, Action::Operator(B, OperatorRequest::Stop)));
    let world = run_until(&model, &world, |w| {
        w.stored_state(B) == MirrorState::Stopped && w.leader(B).is_some_and(|l| l.writable)
    })
    .expect("B stops");
    assert_eq!(world.ghosts.violation, None);
    let a = &world.leader(A).expect("A leads").log;
    let b = &world.leader(B).expect("B leads").log;
    (
        (a.log_end_offset(), a.last_stable_offset()),
        b.log_end_offset(),
    )
}

/// `ClusterMirroringIntegrationTest.testStoppedMirrorDoesNotOverwriteOffsets`: with no open
/// transaction, a stopped mirror's log ends one past the source's, the `MIRROR_PID_RESET`
/// (records + 1). The seed design answers the same.
#[test]
fn a_stop_without_open_transactions_ends_one_past_the_source() {
    let writes = [ProduceKind::Plain, ProduceKind::Idempotent];
    for design in Design::ALL {
        let ((a_leo, _), b_leo) = stopped_after(design, &writes);
        assert_eq!(a_leo, 2, "{design:?}");
        assert_eq!(b_leo, a_leo + 1, "{design:?}");
    }
}

/// `cluster_mirroring_test.py`, `test_stop_with_txns`: each transaction open at the stop gets an
/// ABORT marker, then the reset: the destination ends (open transactions + 1) past the source
/// (the prototype copies the open transaction's data, reading up to the HW). The seed reads up
/// to the LSO and so copies nothing from the open transaction on: its stop ends one past the
/// source's LSO.
#[test]
fn a_stop_with_an_open_transaction_aborts_it_then_resets() {
    let writes = [
        ProduceKind::Plain,
        ProduceKind::Transactional,
        ProduceKind::Plain,
    ];
    let ((a_leo, a_lso), b_leo) = stopped_after(Design::Prototype, &writes);
    assert_eq!((a_leo, a_lso), (3, 1));
    assert_eq!(b_leo, a_leo + 1 + 1, "one ABORT marker, one reset");
    let ((a_leo, a_lso), b_leo) = stopped_after(Design::Seed, &writes);
    assert_eq!((a_leo, a_lso), (3, 1));
    assert_eq!(
        b_leo,
        a_lso + 1,
        "the seed copies nothing from the open transaction on"
    );
}
