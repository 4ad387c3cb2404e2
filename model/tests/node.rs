//! The node model: partitions of several topics sharing one kernel `NodeMirror` and one
//! `__mirror_state` coordinator, through fetch faults, restarts, operator requests and a
//! changing source. Two configurations are exhausted with their state counts pinned: every
//! property holds for the unmutated kernel, and each node mutant breaks the property it is
//! named for, with a counterexample that replays. A kernel finding of the lifecycle (a stop
//! racing a deleted source's FAILED write, left undone) is pinned as fixed.

use kmirror_kernel::desired::DesiredState;
use kmirror_kernel::mutant::Mutant;
use kmirror_model::node::liveness::{failed_for_good, reaches};
use kmirror_model::node::runner::{check, find, NodeCheckReport};
use kmirror_model::node::world::NodeWorld;
use kmirror_model::node::{NodeModel, NodeModelConfig};
use kmirror_model::runner::{CheckReport, RunOptions, Verdict};
use stateright::Model;

fn exhaust(config: &NodeModelConfig) -> NodeCheckReport {
    check(
        config,
        &RunOptions {
            threads: 1,
            shorten: false,
            ..RunOptions::default()
        },
    )
}

/// The `sometimes` properties about restarts, failbacks and a changing source: a configuration
/// without them cannot reach these.
const LIFECYCLE_EXAMPLES: [&str; 5] = [
    "restart_with_stopped_writable_partition",
    "partition_failed_back",
    "grown_partition_mirrors_data",
    "stopped_topic_grown_writable",
    "deleted_source_topic_failed",
];

/// The `sometimes` properties about fetch faults: a configuration without them cannot reach
/// these.
const FAULT_EXAMPLES: [&str; 2] = ["fault_beside_another_part", "fetch_backed_off"];

/// The properties of `report` with another verdict than expected: every property but `failing`
/// holds (those have a counterexample), and every `sometimes` property but `unreachable` is
/// reached.
fn unexpected<'a>(
    report: &'a CheckReport,
    unreachable: &[&str],
    failing: &[&str],
) -> Vec<(&'a str, Verdict)> {
    report
        .properties
        .iter()
        .filter(|p| {
            let name = p.name.as_str();
            match p.verdict {
                Verdict::Counterexample => !failing.contains(&name),
                Verdict::NotReached => !unreachable.contains(&name),
                _ => failing.contains(&name),
            }
        })
        .map(|p| (p.name.as_str(), p.verdict))
        .collect()
}

/// Asserts that `report` is exhaustive, that every property holds, and that every `sometimes`
/// property but `unreachable` is reached.
fn assert_all_hold(report: &CheckReport, unreachable: &[&str]) {
    assert!(report.exhaustive);
    let bad = unexpected(report, unreachable, &[]);
    assert!(bad.is_empty(), "{bad:?}\n{}", report.table());
}

/// The node configuration `kmirror check --node` runs (about two seconds in release mode):
/// every property holds, every `sometimes` property is reached but those of the lifecycle (it
/// has no restart, one operator request, no change of the source), and the state count is
/// pinned.
#[test]
fn node_configuration_state_count_is_pinned() {
    let report = exhaust(&NodeModelConfig::default_check()).report;
    assert_all_hold(&report, &LIFECYCLE_EXAMPLES);
    assert_eq!(report.unique, NODE_UNIQUE, "the node state space changed");
}

const NODE_UNIQUE: usize = 28_867;

/// Whether `world` ends with a stop left undone: a partition of a topic the source deleted,
/// asked to stop, FAILED for good.
fn stop_stuck_in_failed(world: &NodeWorld) -> bool {
    world.keys().any(|k| {
        world.source_deleted(k.topic_id)
            && matches!(world.desired(k.topic_id), DesiredState::Stop(_))
            && failed_for_good(world, k)
    })
}

/// The lifecycle configuration CI checks too (`NodeModelConfig::lifecycle_check`): a restart of
/// the node, a stop then a failback, a re-run of the selection or a partition added to the
/// failed-over topic at the destination, a partition added to the source topic or the topic
/// deleted; no fetch fault. Every property holds, every `sometimes` property is reached but
/// those of fetch faults, and the state count is pinned (240,654 before the destination's
/// growth of a stopped topic was an operator request).
#[test]
fn lifecycle_configuration_state_count_is_pinned() {
    let report = exhaust(&NodeModelConfig::lifecycle_check()).report;
    assert_all_hold(&report, &FAULT_EXAMPLES);
    assert_eq!(
        report.unique, LIFECYCLE_UNIQUE,
        "the lifecycle state space changed"
    );
}

const LIFECYCLE_UNIQUE: usize = 245_004;

/// The kernel finding of the lifecycle (model/FINDINGS.md, "The node model"): the source
/// deletes a MIRRORING partition's topic, the node writes FAILED for good, and the operator's
/// stop is accepted while that write is in flight (the controller still reads MIRRORING). The
/// kernel used to leave the partition FAILED under `<mirror>.removed` forever; a deleted
/// source's FAILED now records STOPPING as its exit, so no state of the smallest world that
/// reaches the race ends with the stop undone, and both liveness properties hold.
#[test]
fn a_stop_racing_a_deleted_source_is_carried_out() {
    let config = stop_racing_deletion();
    let report = exhaust(&config).report;
    assert!(report.exhaustive);
    let failed: Vec<_> = report
        .properties
        .iter()
        .filter(|p| p.verdict == Verdict::Counterexample)
        .map(|p| p.name.as_str())
        .collect();
    assert!(failed.is_empty(), "{failed:?}\n{}", report.table());
}

/// The smallest world of the stop racing a deleted source: one topic, its source deleted, one
/// operator request (`DeletedSourceFailedForever` shows the race in it).
fn stop_racing_deletion() -> NodeModelConfig {
    one_topic(0, 1, 1)
}

/// Whether `property` holds in `world`.
fn holds(config: &NodeModelConfig, property: &str, world: &NodeWorld) -> bool {
    let model = NodeModel::new(config.clone());
    let p = model
        .properties()
        .into_iter()
        .find(|p| p.name == property)
        .unwrap();
    (p.condition)(&model, world)
}

/// Topics `[2, 1]`: two partitions of one topic coalesced beside a partition of another. About
/// 70 s of CPU in release mode (docs/model-checking.md, "Why CI checks topics `[1,1]`"), so not
/// in CI: `cargo test --release -p kmirror-model --test node -- --ignored`.
#[test]
#[ignore = "about 70 s of CPU in release mode; run with -- --ignored"]
fn node_two_partitions_of_one_topic_exhaustively() {
    let config = NodeModelConfig {
        topics: vec![2, 1],
        ..NodeModelConfig::default_check()
    };
    let report = exhaust(&config).report;
    assert_all_hold(&report, &LIFECYCLE_EXAMPLES);
    assert_eq!(
        report.unique, 1_094_550,
        "the [2,1] node state space changed"
    );
}

/// One topic of one partition, nothing but what `budgets` allows (restarts, operator requests,
/// source changes): the smallest world a lifecycle mutant shows in.
fn one_topic(restarts: u8, operator_steps: u8, source_changes: u8) -> NodeModelConfig {
    NodeModelConfig {
        topics: vec![1],
        records: 0,
        faults: 0,
        operator_steps,
        restarts,
        source_changes,
        ..NodeModelConfig::default_check()
    }
}

/// The configuration node mutant `mutant` shows in, and the property it breaks there.
fn case(mutant: Mutant) -> (NodeModelConfig, &'static str) {
    match mutant {
        // The part after a failed or retriable one is dropped: that partition never fetches
        // again, and a batch produced to it is never mirrored.
        Mutant::CoalescedFetchDropsAfterFailure => (
            NodeModelConfig::default_check(),
            "every_partition_progresses_once_faults_stop",
        ),
        // The stop of one topic reaches the other topic's partition in the same step.
        Mutant::StopRoutedToEveryTopic => (
            NodeModelConfig::default_check(),
            "stop_leaves_other_topics_alone",
        ),
        // A coalesced response of two partitions, one with a batch: each gets the other's part.
        Mutant::FetchPartToWrongPartition => (
            NodeModelConfig::default_check(),
            "coalesced_fetch_part_as_lone_fetch",
        ),
        // Stopped and writable, the node crashes; the topic is failed back; the restarted node
        // leaves the persisted gate open while the partition goes PREPARING.
        Mutant::KeepPersistedGate => (one_topic(1, 2, 0), "read_only_unless_stopped"),
        // Stopped, the operator runs the same selection again: discovery re-adds the topic.
        Mutant::ImplicitFailback => (one_topic(0, 2, 0), "no_failback_without_asking"),
        // The source deletes the topic; the stop accepted while FAILED is written is never
        // carried out (the partition ends FAILED under `<mirror>.removed`).
        Mutant::DeletedSourceFailedForever => (
            stop_racing_deletion(),
            "every_partition_progresses_once_faults_stop",
        ),
        // The source's topic gains a partition the destination never creates.
        Mutant::SourceGrowthIgnored => (
            one_topic(0, 0, 1),
            "every_selected_partition_mirrored_once_source_stops_changing",
        ),
        // The topic is stopped, then grown at the destination: its new partition, with no
        // saved state, stays UNKNOWN and read-only instead of being written STOPPED.
        Mutant::GrownStoppedTopicStaysUnknown => (
            one_topic(0, 2, 0),
            "every_partition_progresses_once_faults_stop",
        ),
        other => unreachable!("{other:?} is not a node mutant (model/tests/mutants.rs)"),
    }
}

fn assert_caught(mutant: Mutant) {
    let (config, property) = case(mutant);
    let config = config.with_mutant(mutant);
    let trace =
        find(&config, property, 1).unwrap_or_else(|| panic!("{mutant:?} must break {property}"));
    let story = trace.render().expect("the counterexample replays");
    // The trace's last world breaks the property; the unmutated kernel passes it everywhere
    // (`node_configuration_state_count_is_pinned`, `lifecycle_configuration_state_count_is_pinned`).
    let last = trace.replay().unwrap().pop().unwrap();
    assert!(
        !holds(&config, property, &last),
        "{property} holds at the end:\n{story}"
    );
    if mutant == Mutant::DeletedSourceFailedForever {
        let model = NodeModel::new(config.clone());
        assert!(reaches(&model, &last, stop_stuck_in_failed), "{story}");
    }
    eprintln!(
        "{mutant:?} breaks {property} in {} steps:\n{story}",
        trace.actions.len()
    );
}

/// The configurations the lifecycle mutants show in hold every property for the unmutated
/// kernel: the mutant, not the world, breaks each.
#[test]
fn mutant_configurations_hold_unmutated() {
    for mutant in [
        Mutant::KeepPersistedGate,
        Mutant::ImplicitFailback,
        Mutant::SourceGrowthIgnored,
        Mutant::DeletedSourceFailedForever,
        Mutant::GrownStoppedTopicStaysUnknown,
    ] {
        let (config, _) = case(mutant);
        let report = exhaust(&config).report;
        let failed: Vec<_> = report
            .properties
            .iter()
            .filter(|p| p.verdict == Verdict::Counterexample)
            .map(|p| p.name.as_str())
            .collect();
        assert!(
            report.exhaustive && failed.is_empty(),
            "{mutant:?}: {failed:?}"
        );
    }
}

macro_rules! node_mutant_tests {
    ($($name:ident => $mutant:ident),* $(,)?) => {
        $(
            #[test]
            fn $name() {
                assert_caught(Mutant::$mutant);
            }
        )*

        /// Every node-manager mutant has a test above (the others: model/tests/mutants.rs).
        #[test]
        fn every_node_mutant_is_tested() {
            let tested = [$(Mutant::$mutant),*];
            for m in Mutant::NODE {
                assert!(tested.contains(&m), "{m:?} has no test");
            }
        }
    };
}

node_mutant_tests! {
    coalesced_fetch_drops_after_failure_stalls_another_partition => CoalescedFetchDropsAfterFailure,
    stop_routed_to_every_topic_changes_another_topic => StopRoutedToEveryTopic,
    fetch_part_to_wrong_partition_differs_from_a_lone_fetch => FetchPartToWrongPartition,
    keep_persisted_gate_leaves_a_failed_back_partition_writable => KeepPersistedGate,
    implicit_failback_mirrors_a_stopped_topic_again => ImplicitFailback,
    source_growth_ignored_never_mirrors_a_new_partition => SourceGrowthIgnored,
    deleted_source_failed_forever_leaves_a_stop_undone => DeletedSourceFailedForever,
    grown_stopped_topic_stays_unknown_never_opens_its_gate => GrownStoppedTopicStaysUnknown,
}

/// Three partitions (two of one topic), too many states to exhaust in CI (1.09 M, about four
/// minutes): a thousand random walks find no violation and reach every `sometimes` property.
#[test]
fn three_partitions_random_walks_find_no_violation() {
    let config = NodeModelConfig {
        topics: vec![2, 1],
        ..NodeModelConfig::default_check()
    };
    let report = kmirror_model::node::runner::simulate(&config, 11, 1_000, 80).report;
    let failed = unexpected(&report, &LIFECYCLE_EXAMPLES, &[]);
    assert!(failed.is_empty(), "{failed:?}\n{}", report.table());
}

/// Two topics through the lifecycle (a restart, two operator requests, a source change), too
/// many states to exhaust in CI: five hundred random walks (about 5 s) find no violation.
#[test]
fn two_topics_lifecycle_random_walks_find_no_violation() {
    let config = NodeModelConfig {
        topics: vec![1, 1],
        ..NodeModelConfig::lifecycle_check()
    };
    let report = kmirror_model::node::runner::simulate(&config, 11, 500, 80).report;
    let failed: Vec<_> = report
        .properties
        .iter()
        .filter(|p| p.verdict == Verdict::Counterexample)
        .map(|p| p.name.as_str())
        .collect();
    assert!(failed.is_empty(), "{failed:?}\n{}", report.table());
}

/// Every enabled action changes the world: stateright's simulation cannot replay a path
/// through an action whose `next_state` is `None` (it records its index anyway), which made
/// `kmirror simulate --node --node-topics 3,2` panic while a refused stop was enabled.
#[test]
fn every_enabled_action_changes_the_world() {
    let config = NodeModelConfig {
        topics: vec![3, 2],
        faults: 1,
        ..NodeModelConfig::lifecycle_check()
    };
    let model = NodeModel::new(config.clone());
    let mut seed: u64 = 7;
    let mut applied = 0;
    for _ in 0..100 {
        let mut world = model.init_states().remove(0);
        for _ in 0..80 {
            let mut actions = Vec::new();
            model.actions(&world, &mut actions);
            if actions.is_empty() {
                break;
            }
            let mut next = Vec::new();
            for action in actions {
                let after = world.apply(&config, action.clone());
                assert!(after.is_some(), "{action:?} is enabled but changes nothing");
                next.push(after.unwrap());
                applied += 1;
            }
            seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            world = next.swap_remove((seed >> 33) as usize % next.len());
        }
    }
    assert!(applied > 10_000, "{applied}");
}
