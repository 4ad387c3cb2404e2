//! The state space is pinned: any change to the world, the kernel or the bounds that changes
//! how many states the checker explores shows up here, and the unmutated kernel must pass every
//! property in the configurations the README documents.

use kmirror_kernel::state::Design;
use kmirror_model::runner::{check, RunOptions, Verdict};
use kmirror_model::ModelConfig;

fn exhaust(config: &ModelConfig, threads: usize) -> kmirror_model::runner::CheckReport {
    let report = check(
        config,
        &RunOptions {
            threads,
            // Depth-first, as `kmirror check` runs: the same unique states, 0.1 GB instead of 4.
            dfs: true,
            shorten: false,
            ..RunOptions::default()
        },
    );
    let failed = report.failed();
    assert!(failed.is_empty(), "properties failed: {failed:?}");
    assert!(report.exhaustive);
    report
}

#[test]
fn tiny_configuration_state_count_is_pinned() {
    let report = exhaust(&ModelConfig::tiny(), 1);
    assert_eq!(report.unique, TINY_UNIQUE, "the tiny state space changed");
}

/// Failbacks ordered while the other side still mirrors or is stopping (`--mirror-cycles`):
/// the kernel's reverse-mirror check refuses them (FAILED, "mirror loop", retried), which
/// nothing else in the tiny configuration reaches, and every property holds, in both designs.
#[test]
fn mirror_cycles_configuration_state_count_is_pinned() {
    for (design, pinned) in [
        (Design::Seed, MIRROR_CYCLES_UNIQUE),
        (Design::Prototype, MIRROR_CYCLES_PROTOTYPE_UNIQUE),
    ] {
        let report = exhaust(
            &ModelConfig::tiny().with_mirror_cycles().with_design(design),
            1,
        );
        assert_eq!(
            report.unique, pinned,
            "the {design:?} cycles state space changed"
        );
        let failed = report
            .properties
            .iter()
            .find(|p| p.name == "reaches_failed")
            .expect("reaches_failed");
        assert_eq!(
            failed.verdict,
            Verdict::ExampleFound,
            "{design:?}: no failback refused"
        );
    }
}

/// The default `kmirror check` configuration (about a minute and 0.1 GB in release mode on two
/// cores, depth-first; far slower unoptimised, hence ignored in debug builds).
#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "exhaustive default check: run with --release"
)]
fn default_configuration_state_count_is_pinned() {
    let report = exhaust(&ModelConfig::default_check(), 2);
    assert_eq!(
        report.unique, DEFAULT_UNIQUE,
        "the default state space changed"
    );
    let reached: Vec<_> = report
        .properties
        .iter()
        .filter(|p| p.kind == "sometimes" && p.verdict == Verdict::NotReached)
        .map(|p| p.name.as_str())
        .collect();
    // FAILED needs a lost message; the network-fault run covers it (see README).
    assert_eq!(
        reached,
        ["reaches_failed"],
        "sometimes-properties not reached"
    );
}

/// Three replicas per cluster: the two followers are interchangeable, so symmetry reduction
/// (depth-first) explores fewer worlds than the plain search; both counts are pinned.
#[test]
fn symmetry_reduction_counts_are_pinned() {
    let config = ModelConfig {
        replicas: 3,
        records: 1,
        transactions: 0,
        operator_steps: 1,
        ..ModelConfig::tiny()
    };
    let plain = exhaust(&config, 1);
    let reduced = check(
        &config,
        &RunOptions {
            symmetry: true,
            shorten: false,
            ..RunOptions::default()
        },
    );
    assert!(reduced.all_hold());
    assert_eq!(
        (plain.unique, reduced.unique),
        (SYMMETRIC_PLAIN_UNIQUE, SYMMETRIC_REDUCED_UNIQUE)
    );
}

const SYMMETRIC_PLAIN_UNIQUE: usize = 3994;
const SYMMETRIC_REDUCED_UNIQUE: usize = 3002;
const TINY_UNIQUE: usize = 7190;
const MIRROR_CYCLES_UNIQUE: usize = 98_646;
const MIRROR_CYCLES_PROTOTYPE_UNIQUE: usize = 142_628;
const DEFAULT_UNIQUE: usize = 5_189_670;
