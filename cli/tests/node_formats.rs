//! A single-partition destination (the retired format) is refused by every command with a
//! message naming `kmirror convert`, which makes a node destination of it; bad `--topics` input
//! is a one-line error (exit code 2) that creates nothing.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use kmirror_testsupport::dir_tree;

fn kmirror(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kmirror"))
        .args(args)
        .output()
        .expect("run kmirror")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Every command refuses a single-partition destination (the retired format), naming
/// `kmirror convert`, and changes nothing in it.
#[test]
fn a_single_partition_destination_is_refused_naming_convert() {
    let tmp = tempfile::tempdir().unwrap();
    let single = tmp.path().join("west");
    single_partition_fixture(&single);
    let before = files(&single);
    let single = single.to_str().unwrap();

    for args in [
        vec!["stop", "--dest", single, "--topics", "orders"],
        vec!["stop", "--dest", single],
        vec!["pause", "--dest", single, "--topics", "orders"],
        vec!["resume", "--dest", single, "--topics", "orders"],
        vec![
            "mirror",
            "--source-bootstrap",
            "127.0.0.1:1",
            "--topics",
            "orders",
            "--dest",
            single,
        ],
        vec!["status", "--dest", single],
        vec!["verify", single],
        vec![
            "sync",
            "--source-bootstrap",
            "127.0.0.1:1",
            "--dest",
            single,
            "--once",
        ],
        vec!["serve", "--dest", single, "--listen", "127.0.0.1:0"],
    ] {
        let out = kmirror(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        let err = stderr(&out);
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(
            err.contains("single-partition cluster directory"),
            "{args:?}: {err}"
        );
        assert!(
            err.contains("kmirror convert --from DIR"),
            "{args:?}: {err}"
        );
    }
    assert_eq!(files(Path::new(single)), before, "nothing changed");
}

#[test]
fn bad_topics_input_is_one_line_and_creates_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let dest = tmp.path().join("west");
    let dest_s = dest.to_str().unwrap();
    // An unreachable source: nothing is created.
    let out = kmirror(&[
        "mirror",
        "--source-bootstrap",
        "127.0.0.1:1",
        "--topics",
        "orders,pay.*",
        "--dest",
        dest_s,
        "--until-caught-up",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).starts_with("kmirror: "), "{}", stderr(&out));
    assert!(!dest.exists());
    // A bad selection.
    let out = kmirror(&[
        "mirror",
        "--source-bootstrap",
        "127.0.0.1:1",
        "--topics",
        "a/b",
        "--dest",
        dest_s,
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    // --topics needs --source-bootstrap.
    let out = kmirror(&["mirror", "--topics", "orders", "--dest", dest_s]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(!dest.exists());
    // Not a node destination at all.
    std::fs::create_dir_all(&dest).unwrap();
    let out = kmirror(&["stop", "--dest", dest_s, "--topics", "orders"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("not a node destination"),
        "{}",
        stderr(&out)
    );
}

/// Copies the checked-in single-partition destination (`tests/fixtures/single-partition/west`,
/// made by the binary before the format was retired; see the fixture's README) to `to`.
fn single_partition_fixture(to: &Path) {
    dir_tree::copy(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/single-partition/west"),
        to,
    );
}

/// Every directory and file under `dir` but the lock file (which a command may create).
fn files(dir: &Path) -> BTreeMap<PathBuf, Option<Vec<u8>>> {
    let mut files = dir_tree::snapshot(dir);
    files.remove(Path::new(".lock"));
    files
}

/// `kmirror convert`: a failed-over single-partition destination (mirrored with transactions,
/// stopped, then written to locally; two replicas, two segments) becomes a node destination with
/// the same log bytes, state, leader epoch, produce gate and replica count, in the node's log-dir
/// checkpoint layout; the old directory is left byte for byte as it was; a repeat into the same
/// directory and a node as the source are refused, changing nothing.
#[test]
fn a_single_partition_destination_converts_into_a_node_destination() {
    let tmp = tempfile::tempdir().unwrap();
    let path = |name: &str| tmp.path().join(name).to_str().unwrap().to_owned();
    let (west, node) = (path("west"), path("node"));
    let ok = |args: &[&str]| {
        let out = kmirror(args);
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    single_partition_fixture(Path::new(&west));
    let before = files(Path::new(&west));
    let old_segments: Vec<Vec<u8>> = ["00000000000000000000.log", "00000000000000000019.log"]
        .iter()
        .map(|s| {
            before[&PathBuf::from("broker-0/orders-0").join(s)]
                .clone()
                .unwrap()
        })
        .collect();

    let said = ok(&["convert", "--from", &west, "--dest", &node]);
    assert!(
        said.contains("holding orders-0 (STOPPED, LEO 23, 2 replicas)"),
        "{said}"
    );
    assert!(said.contains("kmirror serve --dest"), "{said}");
    let new_segments: Vec<Vec<u8>> = ["00000000000000000000.log", "00000000000000000019.log"]
        .iter()
        .map(|s| std::fs::read(tmp.path().join("node/data/orders-0").join(s)).unwrap())
        .collect();
    assert_eq!(new_segments, old_segments, "the log, byte for byte");
    let props = std::fs::read_to_string(tmp.path().join("node/node.properties")).unwrap();
    for line in [
        "format=kmirror-node-2",
        "replicas=2",
        "mirror_state.partitions=1",
        "partition=orders-0,1,1",
    ] {
        assert!(props.lines().any(|l| l == line), "{line} not in {props}");
    }
    assert!(
        props.contains("topic=orders,") && props.contains(",1,east.removed"),
        "{props}"
    );
    assert!(
        !tmp.path()
            .join("node/data/orders-0/replication-offset-checkpoint")
            .exists(),
        "migrated into the log dir's files"
    );
    let status = ok(&["status", "--dest", &node]);
    assert!(
        status
            .lines()
            .any(|l| l.starts_with("orders-0") && l.contains("STOPPED") && l.contains("yes")),
        "{status}"
    );
    // Every log of the node verifies; the old directory is as it was.
    let verified = ok(&["verify", &node]);
    assert!(
        verified.contains("orders-0: 1261 bytes in 2 segments, offsets 0..23")
            && verified.lines().all(|l| l.ends_with("all good")),
        "{verified}"
    );
    assert_eq!(
        files(Path::new(&west)),
        before,
        "the old directory, byte for byte"
    );

    for (args, says) in [
        (
            vec!["convert", "--from", &west, "--dest", &node],
            "exists and is not empty",
        ),
        (
            vec!["convert", "--from", &node, "--dest", &path("again")],
            "is a node destination already",
        ),
    ] {
        let out = kmirror(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(stderr(&out).contains(says), "{args:?}: {}", stderr(&out));
    }
    assert!(!tmp.path().join("again").exists());
    assert_eq!(
        std::fs::read(
            tmp.path()
                .join("node/data/orders-0/00000000000000000000.log")
        )
        .unwrap(),
        old_segments[0]
    );
}
