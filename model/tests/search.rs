//! Depth-first and breadth-first search explore the same states and reach the same verdicts;
//! every report carries the run's peak memory.

use kmirror_model::runner::{check, RunOptions, Verdict};
use kmirror_model::ModelConfig;

fn verdicts(options: &RunOptions) -> (usize, Vec<(String, Verdict)>) {
    let report = check(&ModelConfig::tiny(), options);
    assert!(report.exhaustive);
    assert!(
        report.peak_rss_bytes.is_some_and(|b| b > 0),
        "peak memory is read from /proc/self/status on Linux"
    );
    let verdicts = report
        .properties
        .into_iter()
        .map(|p| (p.name, p.verdict))
        .collect();
    (report.unique, verdicts)
}

#[test]
fn dfs_explores_exactly_the_states_bfs_does() {
    let bfs = verdicts(&RunOptions {
        shorten: false,
        ..RunOptions::default()
    });
    let dfs = verdicts(&RunOptions {
        shorten: false,
        dfs: true,
        ..RunOptions::default()
    });
    assert_eq!(bfs, dfs);
    assert!(bfs.1.iter().all(|(_, v)| !v.is_failure()));
}

#[test]
fn dfs_with_two_threads_agrees() {
    let one = verdicts(&RunOptions {
        shorten: false,
        dfs: true,
        ..RunOptions::default()
    });
    let two = verdicts(&RunOptions {
        threads: 2,
        shorten: false,
        dfs: true,
        ..RunOptions::default()
    });
    assert_eq!(one, two);
}
