//! The richer faults that KIP-1279 has to survive, each in the smallest
//! configuration that shows it: the clusters' leader-epoch counters far apart in either
//! direction. Each test checks the unmutated kernel (every property holds) and the mutant the
//! fault's property must catch.

use kmirror_kernel::mutant::Mutant;
use kmirror_kernel::state::MirrorState;
use kmirror_model::actions::{Action, OperatorRequest, ProduceKind};
use kmirror_model::runner::{check, find, RunOptions, Verdict};
use kmirror_model::world::{ClusterId, Violation, World};
use kmirror_model::ModelConfig;

fn assert_all_hold(config: &ModelConfig) {
    let report = check(
        config,
        &RunOptions {
            threads: 1,
            shorten: false,
            ..RunOptions::default()
        },
    );
    let failed = report.failed();
    assert!(failed.is_empty(), "{config:?}: {failed:?}");
    assert!(report.exhaustive);
    let failback = report
        .properties
        .iter()
        .find(|p| p.name == "failback_completes")
        .expect("the property exists");
    assert_eq!(
        failback.verdict,
        Verdict::ExampleFound,
        "no failback in {config:?}"
    );
}

/// The source far ahead (A's epochs at 6, B's at 1): B must bump far, not by one, before it
/// appends; without the bump (`skip-epoch-bump`) B's first mirrored append breaks the invariant.
#[test]
fn source_epochs_far_ahead() {
    let config = ModelConfig::tiny().with_epoch_lead(ClusterId::A, 5);
    assert_all_hold(&config);
    let trace = find(
        &config.with_mutant(Mutant::SkipEpochBump),
        "mirrored_epochs_below_leader_epoch",
        1,
    )
    .expect("skip-epoch-bump is caught with A ahead");
    trace.render().expect("the counterexample replays");
}

/// The destination far ahead (B's epochs at 6, A's at 1): B mirrors without any bump and stops
/// without one; the bump that matters is A's, on failback, above B's local epoch 6. Without it
/// (`skip-epoch-bump`) the invariant breaks only then, so the counterexample contains the
/// failback.
#[test]
fn destination_epochs_far_ahead() {
    let config = ModelConfig::tiny().with_epoch_lead(ClusterId::B, 5);
    assert_all_hold(&config);
    let trace = find(
        &config.with_mutant(Mutant::SkipEpochBump),
        "mirrored_epochs_below_leader_epoch",
        1,
    )
    .expect("skip-epoch-bump is caught with B ahead");
    let story = trace.render().expect("the counterexample replays");
    assert!(
        trace
            .actions
            .contains(&Action::Operator(ClusterId::A, OperatorRequest::Mirror)),
        "no failback in:\n{story}"
    );
}

/// A coordinator move between a state write and its acknowledgement, during STOPPING: the
/// STOPPED write lands, the move fails its reply, and the kernel must not act on what it last
/// knew. With `keep-state-after-failed-write` it does (a re-mirror request runs against the
/// STOPPING it still believes while STOPPED is stored).
#[test]
fn coordinator_moves_between_write_and_acknowledgement() {
    let config = ModelConfig {
        transactions: 0,
        coordinator_moves: 1,
        ..ModelConfig::tiny()
    };
    assert_all_hold(&config);
    let trace = find(
        &config.with_mutant(Mutant::KeepStateAfterFailedWrite),
        "state_persisted_before_acted_on",
        1,
    )
    .expect("keep-state-after-failed-write is caught");
    let worlds = trace.worlds().expect("the counterexample replays");
    let moved = trace
        .actions
        .iter()
        .position(|a| *a == Action::MoveCoordinator(ClusterId::B))
        .expect("the coordinator moves");
    // Just before the move, the write has landed (STOPPED stored) while B's leader, which sent
    // it from STOPPING, still waits for the acknowledgement the move fails.
    let before = &worlds[moved];
    assert_eq!(before.stored_state(ClusterId::B), MirrorState::Stopped);
    let leader = before.leader(ClusterId::B).expect("B has a leader");
    let kernel = leader.mirror.as_ref().expect("it runs");
    assert_eq!(kernel.state(), MirrorState::Stopping);
}

/// Delivers messages (the first deliverable one each time) until `done` holds.
fn deliver_until(config: &ModelConfig, world: &mut World, done: impl Fn(&World) -> bool) {
    for _ in 0..200 {
        if done(world) {
            return;
        }
        let mut actions = Vec::new();
        world.enabled_actions(config, &mut actions);
        let next = actions
            .into_iter()
            .find(|a| matches!(a, Action::Deliver(_) | Action::FollowerFetch(..)))
            .expect("something to deliver");
        world.perform(config, next);
    }
    panic!("not reached in 200 deliveries");
}

/// The transactional producer after failover: B mirrors a committed transaction of A's
/// transactional producer (id 2, sequence 0), fails over, and B's own transactional producer
/// starts with the same id at sequence 0. The checker's `Produce` already does this (both
/// producers' ids are shared by the clusters, their sequences restart at the stop); this pins
/// the transactional case, which the idempotent one hides in the shortest counterexample:
/// accepted after `MIRROR_PID_RESET`, taken for a retry without it (`skip-pid-reset`).
fn transactional_reuse(mutant: Option<Mutant>) -> Option<Violation> {
    // Two transactions in the budget: A's, mirrored, and B's after the failover.
    let mut config = ModelConfig {
        records: 2,
        transactions: 2,
        ..ModelConfig::tiny()
    };
    config.kernel.mutant = mutant;
    let mut world = World::initial(&config);
    deliver_until(&config, &mut world, |w| {
        w.stored_state(ClusterId::B) == MirrorState::Mirroring
    });
    for kind in [ProduceKind::Transactional, ProduceKind::Commit] {
        assert!(world.perform(&config, Action::Produce(ClusterId::A, kind)));
    }
    deliver_until(&config, &mut world, |w| {
        w.leader(ClusterId::B)
            .is_some_and(|l| l.log.batches().len() == 2)
    });
    assert!(world.perform(
        &config,
        Action::Operator(ClusterId::B, OperatorRequest::Stop)
    ));
    deliver_until(&config, &mut world, |w| {
        w.stored_state(ClusterId::B) == MirrorState::Stopped
            && w.leader(ClusterId::B).is_some_and(|l| l.writable)
    });
    assert_eq!(world.ghosts.violation, None);
    let produce = Action::Produce(ClusterId::B, ProduceKind::Transactional);
    assert!(world.perform(&config, produce));
    world.ghosts.violation
}

#[test]
fn transactional_producer_reuses_a_mirrored_id_after_failover() {
    assert_eq!(transactional_reuse(None), None);
    assert_eq!(
        transactional_reuse(Some(Mutant::SkipPidReset)),
        Some(Violation::ProducerIdCollision)
    );
}

/// An unclean election on the source while B mirrors it: A's leader writes a batch its
/// follower (out of the ISR) never copied, B mirrors it, A's leader crashes and the follower is
/// elected uncleanly and writes its own batch at the same offset. B's next fetch must be
/// answered with the divergence (KIP-320: it carries the last fetched epoch), and B truncates.
fn source_unclean_election(mutant: Option<Mutant>) -> World {
    let mut config = ModelConfig {
        replicas: 2,
        records: 2,
        transactions: 0,
        crashes: 1,
        elections: 1,
        isr_shrinks: 1,
        operator_steps: 0,
        unclean_source: true,
        ..ModelConfig::tiny()
    };
    config.kernel.mutant = mutant;
    let mut world = World::initial(&config);
    deliver_until(&config, &mut world, |w| {
        w.stored_state(ClusterId::B) == MirrorState::Mirroring
    });
    let (a, b) = (ClusterId::A, ClusterId::B);
    for action in [
        Action::Produce(a, ProduceKind::Plain),
        Action::ShrinkIsr(a, 1),
    ] {
        assert!(world.perform(&config, action));
    }
    deliver_until(&config, &mut world, |w| {
        w.leader(b).is_some_and(|l| l.log.batches().len() == 1)
    });
    for action in [
        Action::Crash(a, 0),
        Action::Elect(a, 1, true),
        Action::Produce(a, ProduceKind::Plain),
    ] {
        let shown = format!("{action:?}");
        assert!(world.perform(&config, action), "{shown}");
    }
    let source = world
        .leader(a)
        .expect("A has a leader")
        .log
        .batches()
        .clone();
    deliver_until(&config, &mut world, |w| {
        w.ghosts.violation.is_some() || w.leader(b).is_some_and(|l| *l.log.batches() == source)
    });
    world
}

#[test]
fn unclean_election_on_the_source_while_mirroring() {
    let world = source_unclean_election(None);
    assert_eq!(world.ghosts.violation, None);
    assert!(!world.ghosts.divergence_unreported);
    // The source cannot tell (`divergence_reported_to_mirror`), and B, handed records, keeps
    // what A lost (`fetched_mirror_is_prefix_of_source`).
    let world = source_unclean_election(Some(Mutant::FetchWithoutLastEpoch));
    assert!(world.ghosts.divergence_unreported);
    assert_eq!(world.ghosts.violation, Some(Violation::DivergentAfterFetch));
}
