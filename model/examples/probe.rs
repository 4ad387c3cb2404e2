//! Scratch probe (not part of the product): print the shortest trace for a property.
use kmirror_kernel::mutant::Mutant;
use kmirror_model::runner::find;
use kmirror_model::ModelConfig;
fn main() {
    let which = std::env::args().nth(1).unwrap();
    let (cfg, prop): (ModelConfig, &'static str) = match which.as_str() {
        "isr" => (
            ModelConfig {
                replicas: 2,
                records: 1,
                transactions: 0,
                elections: 1,
                operator_steps: 3,
                ..ModelConfig::tiny()
            },
            "isr_agrees_below_high_watermark",
        ),
        "reports" => (
            ModelConfig {
                replicas: 2,
                records: 0,
                transactions: 0,
                operator_steps: 0,
                ..ModelConfig::tiny()
            }
            .with_mutant(Mutant::IgnoreReplicaReports),
            "mirror_reaches_mirroring_once_faults_stop",
        ),
        _ => panic!(),
    };
    match find(&cfg, prop, 2) {
        Some(t) => println!("{}", t.render().unwrap()),
        None => println!("not found"),
    }
}
