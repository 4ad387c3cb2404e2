//! `kmirror sync` on a node destination: while a mirror holds it the answer is one clear line
//! naming `--sync-interval-ms` (exit code 2, nothing written); once it is free the sync runs
//! there and the gate leaves out the partitions not yet MIRRORING (exit code 1 with --once).

use std::process::{Command, Output};

use kmirror_harness::node::{NodeDest, NodeDriver, NodeDriverOptions, NodeMeta};
use kmirror_kernel::types::{MirrorName, TopicId};

fn kmirror(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kmirror"))
        .args(args)
        .output()
        .expect("run kmirror")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn a_standalone_sync_of_a_node_being_mirrored_says_to_sync_inside_the_mirror() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("west");
    let dest = NodeDest::create(&root, NodeMeta::new(Some("127.0.0.1:1".into()), 4)).unwrap();
    let mut driver = NodeDriver::from_dest(dest, None, NodeDriverOptions::default()).unwrap();
    let mirror = MirrorName::new("east").unwrap();
    let added = driver
        .add_topics(&mirror, &[("orders".into(), TopicId([7; 16]), 2)], 0)
        .unwrap();
    assert!(added["orders"].is_ok(), "{added:?}");
    let root_s = root.to_str().unwrap();
    let sync = [
        "sync",
        "--source-bootstrap",
        "127.0.0.1:1",
        "--dest",
        root_s,
        "--once",
    ];

    // The driver holds the node's lock, as a running `kmirror mirror --topics` does.
    let out = kmirror(&sync);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.starts_with("kmirror: "), "{err}");
    assert!(err.contains("held by a running kmirror"), "{err}");
    assert!(err.contains("--sync-interval-ms"), "{err}");
    assert!(!root.join("metadata").exists(), "nothing written");
    driver.close().unwrap();

    // Free: the sync runs on the node. No partition is MIRRORING yet, so the gate leaves the
    // topic out before the (unreachable) source is asked, and --once is refused.
    let out = kmirror(&sync);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let report = text(&out.stdout);
    assert!(report.contains("sync of no topic"), "{report}");
    assert!(
        report.contains("left out orders: no mirror state is persisted"),
        "{report}"
    );
    assert!(!root.join("metadata").exists(), "nothing written");

    // A node destination syncs from a live cluster only: a source directory is not an option.
    let out = kmirror(&["sync", "--source", root_s, "--dest", root_s, "--once"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("unexpected argument '--source'"),
        "{}",
        text(&out.stderr)
    );
}
