//! Swarm simulation (`kmirror simulate`): reproducible from a seed on one thread, bounded by
//! walks or by a time budget, and able to find what the exhaustive check finds.

use std::time::Duration;

use kmirror_kernel::mutant::Mutant;
use kmirror_model::runner::Verdict;
use kmirror_model::swarm::{simulate, SimulateOptions};
use kmirror_model::ModelConfig;

fn walks(seed: u64, walks: usize, swarm: bool) -> SimulateOptions {
    SimulateOptions {
        seed,
        walks: Some(walks),
        depth: 60,
        threads: 1,
        time_budget: None,
        swarm,
        progress: None,
    }
}

#[test]
fn one_thread_and_a_seed_give_the_same_walks() {
    let config = ModelConfig::tiny();
    let first = simulate(&config, &walks(7, 200, true));
    let again = simulate(&config, &walks(7, 200, true));
    assert_eq!(first.states, again.states);
    assert_eq!(first.unique, again.unique);
    assert!(first.unique > 100, "covered only {} states", first.unique);
    assert!(!first.exhaustive);
    assert!(first.all_hold(), "{}", first.table());
}

#[test]
fn swarm_mixes_change_the_walks() {
    // Uniform walks and swarm walks from the same seed cover different sets of states (a walk
    // whose mix leaves out crashes or producers goes elsewhere).
    let config = ModelConfig::tiny();
    let swarm = simulate(&config, &walks(3, 300, true));
    let uniform = simulate(&config, &walks(3, 300, false));
    assert_ne!(
        (swarm.states, swarm.unique),
        (uniform.states, uniform.unique)
    );
}

#[test]
fn a_time_budget_alone_ends_the_run() {
    let options = SimulateOptions {
        walks: None,
        threads: 2,
        time_budget: Some(Duration::from_secs(2)),
        ..walks(1, 0, true)
    };
    let report = simulate(&ModelConfig::tiny(), &options);
    assert!(report.states > 0);
    assert!(report.unique > 0 && report.unique <= report.states);
}

#[test]
fn swarm_walks_catch_a_mutant_with_a_counterexample() {
    let config = ModelConfig::tiny().with_mutant(Mutant::SkipLsoTruncation);
    let options = SimulateOptions {
        threads: 2,
        ..walks(11, 20_000, true)
    };
    let report = simulate(&config, &options);
    let property = report
        .properties
        .iter()
        .find(|p| p.name == "no_half_transaction_survives_stop")
        .expect("the property is checked");
    assert_eq!(
        property.verdict,
        Verdict::Counterexample,
        "{}",
        report.table()
    );
    let trace = property.trace.as_ref().expect("a counterexample trace");
    if let Err(e) = trace.worlds() {
        panic!("the trace does not replay: {e}");
    }
}
