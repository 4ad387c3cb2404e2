//! The node model: two partitions of two topics sharing one kernel `NodeMirror` and one
//! `__mirror_state` coordinator. Its state count is pinned, every property holds for the
//! unmutated kernel, and each node-manager mutant breaks the property it is named for, with a
//! counterexample that replays.

use kmirror_kernel::mutant::Mutant;
use kmirror_model::node::runner::{check, find, NodeCheckReport};
use kmirror_model::node::NodeModelConfig;
use kmirror_model::runner::{RunOptions, Verdict};

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

fn assert_caught(mutant: Mutant, property: &'static str) {
    let config = NodeModelConfig::default_check().with_mutant(mutant);
    let trace =
        find(&config, property, 1).unwrap_or_else(|| panic!("{mutant:?} must break {property}"));
    let story = trace.render().expect("the counterexample replays");
    eprintln!("{mutant:?} breaks {property}:\n{story}");
}

#[test]
fn coalesced_fetch_drops_after_failure_stalls_another_partition() {
    assert_caught(
        Mutant::CoalescedFetchDropsAfterFailure,
        "every_partition_progresses_once_faults_stop",
    );
}

#[test]
fn stop_routed_to_every_topic_changes_another_topic() {
    assert_caught(
        Mutant::StopRoutedToEveryTopic,
        "stop_leaves_other_topics_alone",
    );
}

#[test]
fn fetch_part_to_wrong_partition_differs_from_a_lone_fetch() {
    assert_caught(
        Mutant::FetchPartToWrongPartition,
        "coalesced_fetch_part_as_lone_fetch",
    );
}
