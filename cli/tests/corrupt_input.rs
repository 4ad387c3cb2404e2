//! Bad input to the `kmirror` binary on a node destination: a damaged log is found by
//! `kmirror verify` (exit code 1, the damaged file and byte named) and changes no file, and bad
//! arguments are usage errors (exit code 2, no panic). `node_corrupt_input.rs` feeds the other
//! commands damaged files.

use std::fs;
use std::path::Path;
use std::process::Command;

use kmirror_harness::file_log::{FileLog, FileLogConfig};
use kmirror_harness::record_batch::{RawBatch, Record};
use kmirror_kernel::batch::BatchHeader;
use kmirror_kernel::log::{LogView, PartitionLog};
use kmirror_kernel::types::TopicId;
use kmirror_testsupport::dir_tree::snapshot;

const TOPIC: &str = "orders";

/// Held while a test spawns a process and while one builds directories in-process: a child
/// forked while another test holds a cluster lock inherits the lock's descriptor until its
/// `exec`, and would make that test's next open find the directory busy.
static SPAWN: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn spawn_lock() -> std::sync::MutexGuard<'static, ()> {
    SPAWN.lock().unwrap_or_else(|p| p.into_inner())
}

fn flip(path: &Path, at: usize) {
    let mut bytes = fs::read(path).unwrap();
    assert!(bytes.len() > at, "{} is too short", path.display());
    bytes[at] ^= 0x40;
    fs::write(path, bytes).unwrap();
}

/// Runs `command`, failing the test if it does not exit within 30 seconds.
fn run_with_timeout(command: &mut Command, what: &str) -> std::process::Output {
    use std::process::Stdio;
    let spawning = spawn_lock();
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(spawning); // `spawn` returns once the child has exec'd (and closed our descriptors)
    let start = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > std::time::Duration::from_secs(30) {
            child.kill().unwrap();
            panic!("{what}: still running after 30 s");
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    child.wait_with_output().unwrap()
}

/// A node destination `dir` holding topic orders (2 partitions of 3 batches) and 2
/// `__mirror_state` partitions, closed: every batch below its recovery point.
fn node_destination(dir: &Path) {
    use kmirror_harness::file_log::{TopicPartition, Verify};
    use kmirror_harness::log_dir_checkpoints::LogDirCheckpoints;
    use kmirror_harness::node::{NodeDest, NodeDriver, NodeDriverOptions, NodeMeta};
    let _spawning = spawn_lock();
    let mut dest = NodeDest::create(dir, NodeMeta::new(None, 2)).unwrap();
    dest.add_topic(TOPIC, TopicId::from_u64(7), 2, None)
        .unwrap();
    drop(dest);
    let data = dir.join("data");
    let store = std::sync::Arc::new(LogDirCheckpoints::open(&data).unwrap());
    for p in 0..2 {
        let tp = TopicPartition::new(TOPIC, p).unwrap();
        let (mut log, _) = FileLog::open_in_log_dir(
            &data,
            tp,
            FileLogConfig::default(),
            Verify::FromRecoveryPoint,
            store.clone(),
        )
        .unwrap();
        for _ in 0..3 {
            let leo = log.log_end_offset();
            let record = Record {
                attributes: 0,
                timestamp_delta: 0,
                offset_delta: 0,
                key: None,
                value: Some(vec![7; 40]),
                headers: Vec::new(),
            };
            let batch = RawBatch::encode(&BatchHeader::plain(leo, leo, 0), 0, &[record]).unwrap();
            log.append_as_follower(&[batch]).unwrap();
        }
        let leo = log.log_end_offset();
        log.advance_high_watermark(leo).unwrap();
        log.close().unwrap();
    }
    store.write().unwrap();
    // Creates the __mirror_state partitions; the close checkpoints every recovery point.
    NodeDriver::open(dir, None, NodeDriverOptions::default())
        .unwrap()
        .close()
        .unwrap();
}

/// The same on a node destination: a flipped payload byte below the recovery point of one
/// partition does not stop `status` (a normal open trusts flushed data); `verify` scans every
/// partition and `__mirror_state` partition, lists each, names the damaged one with file and
/// byte, exits with 1 and changes no file. A node destination held by another process is not
/// scanned (exit code 2).
#[test]
fn a_node_destination_is_verified_log_by_log() {
    let base = tempfile::tempdir().unwrap();
    let dir = base.path().join("west-node");
    node_destination(&dir);
    let bin = env!("CARGO_BIN_EXE_kmirror");
    let dir_text = dir.display().to_string();
    let run = |args: &[&str]| run_with_timeout(Command::new(bin).args(args), &args.join(" "));
    let out = run(&["verify", &dir_text]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(stdout.lines().count(), 4, "{stdout}");
    assert_eq!(
        stdout.matches("every CRC-32C checked, all good").count(),
        4,
        "{stdout}"
    );
    for log in [
        "orders-0",
        "orders-1",
        "__mirror_state-0",
        "__mirror_state-1",
    ] {
        assert!(
            stdout.contains(&format!("data/{log}: ")),
            "{log} in {stdout}"
        );
    }

    let seg = dir.join("data/orders-1/00000000000000000000.log");
    flip(&seg, 70);
    let out = run(&["status", "--dest", &dir_text]);
    assert!(out.status.success(), "status: {out:?}");
    let before = snapshot(&dir);
    let out = run(&["verify", &dir_text]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with("kmirror: 1 of 4 logs is damaged"),
        "{stderr}"
    );
    for expected in [
        seg.display().to_string(),
        "below the recovery point".into(),
        "fails its CRC-32C check".into(),
    ] {
        assert!(stderr.contains(&expected), "{expected:?} in {stderr}");
    }
    let damaged: Vec<&str> = stdout.lines().filter(|l| l.contains("DAMAGED")).collect();
    assert_eq!(damaged.len(), 1, "{stdout}");
    assert!(damaged[0].contains("data/orders-1: DAMAGED: "), "{stdout}");
    assert_eq!(stdout.matches("all good").count(), 3, "{stdout}");
    assert!(snapshot(&dir) == before, "verify changed a file");

    // In use by another process: not scanned.
    let _held = kmirror_harness::node::NodeDest::open(&dir).unwrap();
    let out = run(&["verify", &dir_text]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("in use by another kmirror process"),
        "{stderr}"
    );
}

#[test]
fn bad_arguments_are_usage_errors() {
    let bin = env!("CARGO_BIN_EXE_kmirror");
    for args in [
        vec!["mirror", "--dest", "x"],
        vec!["mirror", "--source-bootstrap", "h:1", "--dest", "x"],
        vec![
            "mirror",
            "--source-bootstrap",
            "h:1",
            "--topics",
            "orders",
            "--dest",
            "b",
            "--flush",
            "sometimes",
        ],
        vec!["verify"],
        // Options of the retired single-partition commands.
        vec!["mirror", "--source", "a", "--dest", "b"],
        vec!["produce", "--dir", "x", "plain:1"],
        vec!["start", "--dest", "x", "--source", "y"],
    ] {
        let out = {
            let _spawning = spawn_lock();
            Command::new(bin).args(&args).output().unwrap()
        };
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(!String::from_utf8_lossy(&out.stderr).contains("panicked"));
    }
    for command in [
        "mirror", "stop", "pause", "resume", "status", "verify", "sync", "serve", "convert", "demo",
    ] {
        let out = {
            let _spawning = spawn_lock();
            Command::new(bin)
                .args([command, "--help"])
                .output()
                .unwrap()
        };
        assert!(out.status.success(), "{command} --help");
        assert!(String::from_utf8_lossy(&out.stdout).contains("Usage: kmirror"));
    }
}
