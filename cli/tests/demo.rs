//! `kmirror demo`, as a new user runs it: two nodes on Kafka's wire tell the story in six
//! steps, each step's table and notes saying what the kernel did, and the nodes end byte for
//! byte equal. A second run into the same directory is refused and changes nothing.

use std::process::{Command, Output};

use serde_json::Value;

fn kmirror(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kmirror"))
        .args(args)
        .output()
        .expect("run kmirror")
}

/// The row of `node` in `step`.
fn row<'a>(step: &'a Value, node: &str) -> &'a Value {
    step["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["node"] == node)
        .unwrap_or_else(|| panic!("no row of {node} in {step}"))
}

/// Whether a note of `step` contains `text`.
fn noted(step: &Value, text: &str) -> bool {
    step["notes"]
        .as_array()
        .unwrap()
        .iter()
        .any(|n| n.as_str().unwrap().contains(text))
}

#[test]
fn the_demo_tells_the_story_and_the_nodes_end_equal() {
    let out = kmirror(&["demo", "--json"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["verified"], true, "{report}");
    let steps = report["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 6);
    let leo = |r: &Value| r["log_end_offset"].as_i64().unwrap();

    // 2: west caught up, read-only.
    let (east, west) = (row(&steps[1], "east"), row(&steps[1], "west"));
    assert_eq!(
        (leo(west), &west["state"]),
        (leo(east), &"MIRRORING".into())
    );
    assert_eq!(west["writable"], false);

    // 3: west holds a transaction without its COMMIT; a producer is refused.
    let west = row(&steps[2], "west");
    assert_ne!(west["open_transactions"], "-", "{west}");
    assert!(west["last_stable_offset"].as_i64() < west["log_end_offset"].as_i64());
    assert!(leo(west) < leo(row(&steps[2], "east")));
    assert!(
        noted(&steps[2], "error code 134 (READ_ONLY_TOPIC)"),
        "{}",
        steps[2]
    );

    // 4: failover: truncated to the LSO, MIRROR_PID_RESET, a new epoch, writable.
    let stopped = row(&steps[3], "west");
    assert_eq!(stopped["state"], "STOPPED");
    assert_eq!(stopped["writable"], true);
    assert_eq!(stopped["open_transactions"], "-");
    assert_eq!(
        leo(stopped),
        west["last_stable_offset"].as_i64().unwrap() + 1
    );
    assert!(
        noted(&steps[3], "(stop: truncation to LSO)"),
        "{}",
        steps[3]
    );
    assert!(
        noted(&steps[3], "MIRROR_PID_RESET appended"),
        "{}",
        steps[3]
    );

    // 6: failback: east cut to the LME, then mirrors west's writes.
    let (west, east) = (row(&steps[5], "west"), row(&steps[5], "east"));
    assert_eq!(east["state"], "MIRRORING");
    assert_eq!(leo(east), leo(west));
    assert_eq!(east["epochs"], west["epochs"]);
    assert!(noted(&steps[5], "(LME truncation)"), "{}", steps[5]);
}

#[test]
fn a_second_demo_into_the_same_directory_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("demo");
    let dir = dir.to_str().unwrap();
    let first = kmirror(&["demo", "--dir", dir]);
    assert_eq!(first.status.code(), Some(0));
    let text = String::from_utf8_lossy(&first.stdout);
    assert!(text.contains("OK: east and west hold the same"), "{text}");
    let verified = kmirror(&["verify", &format!("{dir}/west")]);
    assert_eq!(verified.status.code(), Some(0), "{verified:?}");
    let again = kmirror(&["demo", "--dir", dir]);
    assert_eq!(again.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&again.stderr);
    assert!(
        stderr.contains("exists (a previous demo?); remove it or pick another directory"),
        "{stderr}"
    );
}
