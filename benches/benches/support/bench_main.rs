//! The `main` of a criterion bench that does its own setup: `--help` (or `-h`) prints the
//! bench's own reproduction notes before criterion's help, and only `cargo bench` (`--bench`
//! on the command line) runs anything, so a test build of the bench (`cargo test
//! --all-targets`) does not start clusters or copy gigabytes.

/// Runs `benches` (a `criterion_group!`) and criterion's final summary under `cargo bench`,
/// printing `help` first when asked (nothing when it is empty).
pub fn run(help: &str, benches: fn()) {
    let args: Vec<String> = std::env::args().collect();
    if !help.is_empty() && args.iter().any(|a| a == "--help" || a == "-h") {
        print!("{help}");
    }
    if !args.iter().any(|a| a == "--bench") {
        return;
    }
    benches();
    criterion::Criterion::default()
        .configure_from_args()
        .final_summary();
}
