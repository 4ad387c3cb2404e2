//! The node model: two partitions of two topics sharing one kernel `NodeMirror` and one
//! `__mirror_state` coordinator. Its state count is pinned, every property holds for the
//! unmutated kernel, and each node-manager mutant breaks the property it is named for, with a
//! counterexample that replays.

use kmirror_kernel::mutant::Mutant;
use kmirror_model::node::runner::{check, find, NodeCheckReport};
use kmirror_model::node::{NodeModel, NodeModelConfig};
use kmirror_model::runner::{RunOptions, Verdict};
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

/// The node configuration `kmirror check --node` runs (about two seconds in release mode):
/// every property holds, every `sometimes` property is reached, and the state count is pinned.
#[test]
fn node_configuration_state_count_is_pinned() {
    let report = exhaust(&NodeModelConfig::default_check()).report;
    assert!(report.exhaustive);
    let bad: Vec<_> = report
        .properties
        .iter()
        .filter(|p| matches!(p.verdict, Verdict::Counterexample | Verdict::NotReached))
        .map(|p| (p.name.as_str(), p.verdict))
        .collect();
    assert!(bad.is_empty(), "{bad:?}\n{}", report.table());
    assert_eq!(report.unique, NODE_UNIQUE, "the node state space changed");
}

const NODE_UNIQUE: usize = 28_867;

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
    assert!(report.exhaustive);
    let bad: Vec<_> = report
        .properties
        .iter()
        .filter(|p| matches!(p.verdict, Verdict::Counterexample | Verdict::NotReached))
        .map(|p| (p.name.as_str(), p.verdict))
        .collect();
    assert!(bad.is_empty(), "{bad:?}\n{}", report.table());
    assert_eq!(
        report.unique, 1_094_550,
        "the [2,1] node state space changed"
    );
}

/// The property node mutant `mutant` breaks in the node configuration.
fn case(mutant: Mutant) -> &'static str {
    match mutant {
        // The part after a failed or retriable one is dropped: that partition never fetches
        // again, and a batch produced to it is never mirrored.
        Mutant::CoalescedFetchDropsAfterFailure => "every_partition_progresses_once_faults_stop",
        // The stop of one topic reaches the other topic's partition in the same step.
        Mutant::StopRoutedToEveryTopic => "stop_leaves_other_topics_alone",
        // A coalesced response of two partitions, one with a batch: each gets the other's part.
        Mutant::FetchPartToWrongPartition => "coalesced_fetch_part_as_lone_fetch",
        other => unreachable!("{other:?} is not a node mutant (model/tests/mutants.rs)"),
    }
}

fn assert_caught(mutant: Mutant) {
    let property = case(mutant);
    let config = NodeModelConfig::default_check().with_mutant(mutant);
    let trace =
        find(&config, property, 1).unwrap_or_else(|| panic!("{mutant:?} must break {property}"));
    let story = trace.render().expect("the counterexample replays");
    // The trace's last world breaks the property; the unmutated kernel passes it everywhere
    // (`node_configuration_state_count_is_pinned`).
    let last = trace.replay().unwrap().pop().unwrap();
    let model = NodeModel::new(config);
    let p = model
        .properties()
        .into_iter()
        .find(|p| p.name == property)
        .unwrap();
    assert!(
        !(p.condition)(&model, &last),
        "{property} holds at the end:\n{story}"
    );
    eprintln!("{mutant:?} breaks {property}:\n{story}");
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
    let failed: Vec<_> = report
        .properties
        .iter()
        .filter(|p| matches!(p.verdict, Verdict::Counterexample | Verdict::NotReached))
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
        ..NodeModelConfig::default_check()
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
