//! The model side of the `kmirror` binary that needs no model run: `--mutant` parsing and its
//! refusal in a build without feature `mutants`, and `kmirror diagram`.

use std::process::{Command, Output};

use kmirror_kernel::mutant::Mutant;

fn kmirror(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kmirror"))
        .args(args)
        .output()
        .expect("the kmirror binary runs")
}

#[test]
fn help_lists_every_kernel_mutant() {
    for command in ["check", "simulate"] {
        let out = kmirror(&[command, "--help"]);
        assert!(out.status.success());
        let help = String::from_utf8_lossy(&out.stdout);
        for m in Mutant::ALL {
            assert!(
                help.contains(m.name()),
                "`{command} --help` lacks {}:\n{help}",
                m.name()
            );
        }
    }
}

#[test]
fn an_unknown_mutant_is_a_usage_error() {
    let out = kmirror(&["check", "--mutant", "no-such-mutant"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no-such-mutant"), "{err}");
    assert!(err.contains("skip-pid-reset"), "{err}");
}

/// Without feature `mutants` the kernel's mutated branches are compiled out, so asking for one
/// is refused (exit 2) with the command that builds a binary that has them; nothing is checked.
#[test]
#[cfg(not(feature = "mutants"))]
fn a_mutant_needs_a_mutants_build() {
    for command in ["check", "simulate"] {
        let out = kmirror(&[command, "--mutant", "skip-pid-reset"]);
        assert_eq!(out.status.code(), Some(2), "{command}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(&format!(
                "cargo run --release --features mutants -- {command} --mutant skip-pid-reset"
            )),
            "{err}"
        );
        assert!(
            out.stdout.is_empty(),
            "{command} ran: {}",
            String::from_utf8_lossy(&out.stdout)
        );
    }
}

#[test]
fn diagram_prints_the_kernels_mermaid() {
    let out = kmirror(&["diagram"]);
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        kmirror_kernel::diagram::mermaid()
    );
    let out = kmirror(&["diagram", "--design", "prototype"]);
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        kmirror_kernel::diagram::mermaid_for(kmirror_kernel::state::Design::Prototype)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("LOG_ALIGNMENT --> MIRRORING"));
}

/// `check --node` exhausts the node model (two topics sharing one node manager) and every
/// property holds; the single-partition world's bounds are refused with it.
#[test]
#[cfg_attr(debug_assertions, ignore = "an exhaustive check: run with --release")]
fn check_node_exhausts_the_node_model() {
    let out = kmirror(&["check", "--node", "--quiet", "--threads", "1"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text.contains("unique 28867 "), "{text}");
    for property in [
        "every_partition_progresses_once_faults_stop",
        "stop_leaves_other_topics_alone",
        "coalesced_fetch_part_as_lone_fetch",
        "read_only_unless_stopped",
        "no_failback_without_asking",
        "every_selected_partition_mirrored_once_source_stops_changing",
    ] {
        assert!(
            text.lines()
                .any(|l| l.contains(property) && l.ends_with("holds")),
            "{property}:\n{text}"
        );
    }
}

/// The node model's lifecycle bounds reach it: a restart and two operator requests on one topic
/// (a stop, then a failback), every property holding and the restart with a STOPPED writable
/// partition reached; `--node-stops`, the old name of `--node-operator-steps`, still works.
#[test]
#[cfg_attr(debug_assertions, ignore = "an exhaustive check: run with --release")]
fn check_node_takes_the_lifecycle_bounds() {
    for operator in ["--node-operator-steps", "--node-stops"] {
        let out = kmirror(&[
            "check",
            "--node",
            "--quiet",
            "--threads",
            "1",
            "--node-topics",
            "1",
            "--node-records",
            "0",
            "--node-faults",
            "0",
            "--node-restarts",
            "1",
            operator,
            "2",
        ]);
        let text = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(0), "{text}");
        assert!(
            text.lines()
                .any(|l| l.contains("restart_with_stopped_writable_partition")
                    && l.ends_with("example found")),
            "{text}"
        );
    }
}

#[test]
fn check_node_refuses_single_partition_bounds_and_bad_topics() {
    let out = kmirror(&["check", "--node", "--replicas", "2"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--replicas"), "{err}");
    let out = kmirror(&["check", "--node", "--node-topics", "1,0"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        err.trim(),
        "kmirror: --node-topics: a topic of the node model has 1 to 4 partitions; 0 was given"
    );
    let out = kmirror(&["check", "--node-topics", "2,1"]);
    assert_eq!(out.status.code(), Some(2), "--node-topics needs --node");
    assert!(out.stdout.is_empty());
}

/// `show` replays a node model trace (here an example of two partitions in one fetch).
#[test]
fn show_renders_a_node_model_trace() {
    let config = kmirror_model::node::NodeModelConfig::default_check();
    let trace = kmirror_model::node::runner::find(&config, "fetch_coalesces_two_partitions", 1)
        .expect("two partitions are fetched together");
    let dir = std::env::temp_dir().join(format!("kmirror-node-trace-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("trace.json");
    std::fs::write(&path, serde_json::to_string(&trace).unwrap()).unwrap();
    let out = kmirror(&["show", path.to_str().unwrap()]);
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    // The story ends with both partitions' fetches in flight together.
    let last: Vec<&str> = text.lines().rev().take(2).collect();
    assert!(
        text.contains("deliver Fetch response [pay-0: records up to 0]")
            && last.iter().all(|l| l.contains("fetch Some(InFlight")),
        "{text}"
    );
}
