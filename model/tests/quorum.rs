//! Design question 4 (`model/FINDINGS.md`): the ISR is not enough once the ISR can shrink,
//! waiting for every replica is. Pinned in the smallest configuration that separates the two,
//! for the seed's design and the prototype's.

use kmirror_kernel::config::TruncationQuorum;
use kmirror_kernel::state::Design;
use kmirror_model::runner::find;
use kmirror_model::ModelConfig;

/// Two replicas, one batch, no transaction, no crash or election, one ISR shrink, a failover, a
/// failback and a second stop.
fn separating(design: Design, quorum: TruncationQuorum) -> ModelConfig {
    ModelConfig {
        replicas: 2,
        records: 1,
        transactions: 0,
        crashes: 0,
        elections: 0,
        isr_shrinks: 1,
        operator_steps: 3,
        ..ModelConfig::tiny()
    }
    .with_design(design)
    .with_quorum(quorum)
}

const PROPERTY: &str = "isr_agrees_below_high_watermark";

#[test]
#[cfg_attr(debug_assertions, ignore = "exhaustive searches: run with --release")]
fn an_out_of_isr_replica_misses_the_lme_truncation_unless_every_replica_is_awaited() {
    for (design, steps) in [(Design::Seed, 39), (Design::Prototype, 43)] {
        let trace = find(&separating(design, TruncationQuorum::Isr), PROPERTY, 1)
            .unwrap_or_else(|| panic!("{design}: the ISR quorum must fail {PROPERTY}"));
        trace.render().expect("the counterexample replays");
        assert_eq!(
            trace.actions.len(),
            steps,
            "{design}: shortest counterexample"
        );
        assert!(
            find(
                &separating(design, TruncationQuorum::AllReplicas),
                PROPERTY,
                1
            )
            .is_none(),
            "{design}: waiting for every replica keeps {PROPERTY}"
        );
    }
}
