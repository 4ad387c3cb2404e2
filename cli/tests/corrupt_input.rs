//! Bad input to the `kmirror` binary: every case gives a clear error (`kmirror: <message>`,
//! exit code 2, no panic; `kmirror verify` exits with 1 when it finds a damaged log) and leaves
//! every file exactly as it was.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use kmirror_harness::driver::cluster::{ClusterConfig, ClusterDir};
use kmirror_harness::driver::LocalSource;
use kmirror_harness::driver::{Cluster, Driver, DriverOptions, ManualClock, Until};
use kmirror_harness::file_log::{FileLog, FileLogConfig};
use kmirror_harness::mirror_state_log::MirrorStateLog;
use kmirror_harness::producer;
use kmirror_harness::record_batch::{RawBatch, Record};
use kmirror_kernel::batch::BatchHeader;
use kmirror_kernel::log::{LogView, PartitionLog};
use kmirror_kernel::types::{MirrorName, TopicId};

const TOPIC: &str = "orders";

fn name(s: &str) -> MirrorName {
    MirrorName::new(s).unwrap()
}

/// Held while a test spawns a process and while one builds directories in-process: a child
/// forked while another test holds a cluster lock inherits the lock's descriptor until its
/// `exec`, and would make that test's next open find the directory busy.
static SPAWN: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn spawn_lock() -> std::sync::MutexGuard<'static, ()> {
    SPAWN.lock().unwrap_or_else(|p| p.into_inner())
}

/// A clean source `east` and a 2-replica destination `west` mirroring it, both closed.
fn pristine(root: &Path) {
    let _spawning = spawn_lock();
    let east = root.join("east");
    let config = ClusterConfig::new(name("east"), TOPIC, TopicId::from_u64(7));
    let mut cluster =
        Cluster::open_dir(ClusterDir::create(&east, config, 1).unwrap(), true).unwrap();
    let ops: Vec<_> = "plain:3 idem:1:2 txn:7:2 commit:7 bump-epoch plain:2"
        .split_whitespace()
        .map(|s| s.parse().unwrap())
        .collect();
    producer::produce(&mut cluster, &ops, 1).unwrap();
    cluster.close().unwrap();
    let west = root.join("west");
    let mut config = ClusterConfig::new(name("west"), TOPIC, TopicId::from_u64(7));
    config.mirror_name = Some("east".into());
    config.mirrors.insert(name("east"));
    ClusterDir::create(&west, config, 2).unwrap();
    let mut d = Driver::open(
        &west,
        Some(Box::new(LocalSource::open(&east).unwrap())),
        DriverOptions::default(),
    )
    .unwrap();
    d.run(&mut ManualClock::default(), Until::Idle, &mut |_, _| {})
        .unwrap();
    d.close().unwrap();
    // Another topic, for the mismatch case.
    let other = root.join("other");
    let config = ClusterConfig::new(name("other"), "payments", TopicId::from_u64(8));
    ClusterDir::create(&other, config, 1).unwrap();
}

/// Every file under `root` with its bytes (directories included as empty entries).
fn snapshot(root: &Path) -> BTreeMap<PathBuf, Option<Vec<u8>>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let rel = path.strip_prefix(root).unwrap().to_path_buf();
            if path.is_dir() {
                out.insert(rel, None);
                stack.push(path);
            } else {
                out.insert(rel, Some(fs::read(&path).unwrap()));
            }
        }
    }
    out
}

fn copy_tree(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for entry in fs::read_dir(from).unwrap() {
        let path = entry.unwrap().path();
        let target = to.join(path.file_name().unwrap());
        if path.is_dir() {
            copy_tree(&path, &target);
        } else {
            fs::copy(&path, &target).unwrap();
        }
    }
}

fn segment(root: &Path, cluster: &str, broker: u32, topic: &str) -> PathBuf {
    root.join(cluster)
        .join(format!("broker-{broker}"))
        .join(format!("{topic}-0"))
        .join("00000000000000000000.log")
}

fn flip(path: &Path, at: usize) {
    let mut bytes = fs::read(path).unwrap();
    assert!(bytes.len() > at, "{} is too short", path.display());
    bytes[at] ^= 0x40;
    fs::write(path, bytes).unwrap();
}

fn cut(path: &Path, keep: usize) {
    let bytes = fs::read(path).unwrap();
    fs::write(path, &bytes[..keep]).unwrap();
}

fn edit(path: &Path, from: &str, to: &str) {
    let text = fs::read_to_string(path).unwrap();
    assert!(text.contains(from), "{} has no {from:?}", path.display());
    fs::write(path, text.replace(from, to)).unwrap();
}

/// Appends a CRC-valid batch holding a record whose key is no `__mirror_state` key.
fn garbage_mirror_state_record(root: &Path) {
    let (mut log, _) = FileLog::open(
        &root.join("west/broker-0"),
        MirrorStateLog::topic_partition(),
        FileLogConfig::default(),
    )
    .unwrap();
    let leo = log.log_end_offset();
    let record = Record {
        attributes: 0,
        timestamp_delta: 0,
        offset_delta: 0,
        key: Some(vec![0, 7, 0, 0]),
        value: Some(vec![0xde, 0xad]),
        headers: Vec::new(),
    };
    let batch = RawBatch::encode(&BatchHeader::plain(leo, leo, 0), 0, &[record]).unwrap();
    log.append_as_follower(&[batch]).unwrap();
    log.advance_high_watermark(leo + 1).unwrap();
    log.close().unwrap();
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

struct Case {
    name: &'static str,
    corrupt: Box<dyn Fn(&Path)>,
    /// Arguments; `{}` is replaced by the case's root directory.
    commands: Vec<Vec<&'static str>>,
    /// What stderr must say.
    expect: &'static str,
}

fn case(
    name: &'static str,
    corrupt: impl Fn(&Path) + 'static,
    commands: &[&[&'static str]],
    expect: &'static str,
) -> Case {
    Case {
        name,
        corrupt: Box::new(corrupt),
        commands: commands.iter().map(|c| c.to_vec()).collect(),
        expect,
    }
}

const STATUS: &[&str] = &["status", "--dest", "{}/west"];
const MIRROR: &[&str] = &[
    "mirror",
    "--source",
    "{}/east",
    "--dest",
    "{}/west",
    "--until-caught-up",
];
const STOP: &[&str] = &["stop", "--dest", "{}/west", "-q"];
const PRODUCE: &[&str] = &["produce", "--dir", "{}/west", "plain:1"];
const VERIFY: &[&str] = &["verify", "{}/west"];

fn cases() -> Vec<Case> {
    vec![
        // Payload damage below the recovery point: a plain open trusts flushed data, as Kafka
        // does (see `a_plain_open_trusts_flushed_data_and_verify_checks_it`); `verify` finds it.
        case(
            "flipped byte in the destination leader's segment",
            |r| flip(&segment(r, "west", 0, TOPIC), 80),
            &[VERIFY],
            "fails its CRC-32C check",
        ),
        case(
            "flipped byte in a follower's segment",
            |r| flip(&segment(r, "west", 1, TOPIC), 150),
            &[VERIFY],
            "fails its CRC-32C check",
        ),
        case(
            "flipped byte in the source's segment",
            |r| flip(&segment(r, "east", 0, TOPIC), 80),
            &[&["verify", "{}/east"]],
            "east/broker-0/orders-0/00000000000000000000.log is corrupt in the record batch starting at byte",
        ),
        // __mirror_state is read whole when opened, so every command finds it.
        case(
            "flipped byte in __mirror_state",
            |r| flip(&segment(r, "west", 0, "__mirror_state"), 75),
            &[STATUS, MIRROR, STOP, PRODUCE, VERIFY],
            "__mirror_state-0/00000000000000000000.log",
        ),
        case(
            "truncated destination segment",
            |r| {
                let p = segment(r, "west", 0, TOPIC);
                let len = fs::metadata(&p).unwrap().len() as usize;
                cut(&p, len - 7);
            },
            &[STATUS, MIRROR],
            "incomplete record batch",
        ),
        case(
            "truncated controller-state",
            |r| {
                let p = r.join("west/controller-state");
                let len = fs::metadata(&p).unwrap().len() as usize;
                cut(&p, len / 2);
            },
            &[STATUS, MIRROR, STOP],
            "controller-state",
        ),
        case(
            "bad leader-epoch-checkpoint",
            |r| {
                fs::write(
                    r.join("west/broker-1/orders-0/leader-epoch-checkpoint"),
                    "0\n2\n0 0\nbanana\n",
                )
                .unwrap()
            },
            &[STATUS, MIRROR],
            "leader-epoch-checkpoint",
        ),
        case(
            "bad high-watermark checkpoint",
            |r| {
                fs::write(
                    r.join("west/broker-0/orders-0/replication-offset-checkpoint"),
                    "0\n1\norders 0 -5\n",
                )
                .unwrap()
            },
            &[STATUS],
            "replication-offset-checkpoint is invalid at line 3",
        ),
        case(
            "bad controller-state value",
            |r| {
                let path = r.join("west/controller-state");
                let text = fs::read_to_string(&path).unwrap();
                let line = text
                    .lines()
                    .find(|l| l.starts_with("leader.epoch="))
                    .expect("a leader.epoch line")
                    .to_string();
                edit(&path, &line, "leader.epoch=banana")
            },
            &[STATUS, MIRROR, STOP, PRODUCE],
            "controller-state, line 3: leader.epoch=\"banana\" is not a number",
        ),
        case(
            "garbage __mirror_state record",
            garbage_mirror_state_record,
            &[STATUS, MIRROR, STOP],
            "unknown __mirror_state key type 7",
        ),
        case(
            "unknown mirror.name suffix",
            |r| {
                edit(
                    &r.join("west/cluster.properties"),
                    "mirror.name=east",
                    "mirror.name=east.stopped",
                )
            },
            &[STATUS, MIRROR, STOP, PRODUCE],
            "names cluster mirror \"east.stopped\", which does not exist on this cluster",
        ),
        case(
            "stacked mirror.name suffixes",
            |r| {
                edit(
                    &r.join("west/cluster.properties"),
                    "mirror.name=east",
                    "mirror.name=east.paused.removed",
                )
            },
            &[STATUS, STOP],
            "mirror.name=\"east.paused.removed\" is invalid",
        ),
        case(
            "unknown key in cluster.properties",
            |r| {
                edit(
                    &r.join("west/cluster.properties"),
                    "topic=",
                    "topik=x\ntopic=",
                )
            },
            &[STATUS, MIRROR],
            "unknown key \"topik\"",
        ),
        case(
            "missing replica directory",
            |r| fs::remove_dir_all(r.join("west/broker-1/orders-0")).unwrap(),
            &[STATUS, MIRROR],
            "replica 1 of",
        ),
        case(
            "missing directories",
            |_| {},
            &[
                &["status", "--dest", "{}/nowhere"],
                &["mirror", "--source", "{}/nowhere", "--dest", "{}/west"],
                &["stop", "--dest", "{}/nowhere"],
                &["start", "--dest", "{}/west", "--source", "{}/nowhere"],
            ],
            "nowhere does not exist",
        ),
        case(
            "not a cluster directory",
            |r| {
                fs::create_dir(r.join("plain"))
                    .and_then(|()| fs::write(r.join("plain/x"), "x"))
                    .unwrap()
            },
            &[
                &["status", "--dest", "{}/plain"],
                &["produce", "--dir", "{}/plain", "plain:1"],
            ],
            "is not a kmirror cluster directory",
        ),
        case(
            "a source hosting another topic",
            |_| {},
            &[
                &[
                    "mirror",
                    "--source",
                    "{}/other",
                    "--dest",
                    "{}/west",
                    "--until-caught-up",
                ],
                &["start", "--source", "{}/other", "--dest", "{}/east"],
            ],
            "a mirror copies one topic",
        ),
        case(
            "produce to a mirrored topic",
            |_| {},
            &[PRODUCE],
            "READ_ONLY_TOPIC",
        ),
        case(
            "a commit without a transaction",
            |_| {},
            &[&["produce", "--dir", "{}/east", "commit:5"]],
            "producer 5 has no open transaction",
        ),
        case(
            "stopping a topic that is not mirrored",
            |_| {},
            &[&["stop", "--dest", "{}/east"]],
            "is not in a mirror",
        ),
        case(
            "adding a mirroring topic to another mirror",
            |_| {},
            &[&[
                "start",
                "--dest",
                "{}/west",
                "--source",
                "{}/east",
                "--mirror-name",
                "elsewhere",
                "--until-caught-up",
            ]],
            "TOPIC_ALREADY_IN_CLUSTER_MIRROR",
        ),
    ]
}

#[test]
fn bad_input_is_a_clear_error_and_touches_nothing() {
    let base = tempfile::tempdir().unwrap();
    let clean = base.path().join("clean");
    pristine(&clean);
    let bin = env!("CARGO_BIN_EXE_kmirror");
    for (i, c) in cases().into_iter().enumerate() {
        for (j, command) in c.commands.iter().enumerate() {
            let root = base.path().join(format!("case-{i}-{j}"));
            copy_tree(&clean, &root);
            (c.corrupt)(&root);
            let before = snapshot(&root);
            let root_text = root.display().to_string();
            let args: Vec<String> = command
                .iter()
                .map(|a| a.replace("{}", &root_text))
                .collect();
            let what = format!("{} / kmirror {}", c.name, args.join(" "));
            eprintln!("case: {what}");
            let out = run_with_timeout(Command::new(bin).args(&args), &what);
            let stderr = String::from_utf8_lossy(&out.stderr);
            // `verify` scans every log and reports damage with 1; it refuses with 2 only a
            // directory it cannot scan at all.
            let code = if args[0] == "verify" { 1 } else { 2 };
            assert_eq!(
                out.status.code(),
                Some(code),
                "{what}: exit status\n{stderr}"
            );
            assert!(stderr.starts_with("kmirror: "), "{what}: {stderr}");
            assert!(
                stderr.contains(c.expect),
                "{what}: expected {:?} in\n{stderr}",
                c.expect
            );
            assert!(!stderr.contains("panicked"), "{what}: {stderr}");
            assert_eq!(stderr.lines().count(), 1, "{what}: one line\n{stderr}");
            let after = snapshot(&root);
            assert_eq!(
                before.keys().collect::<Vec<_>>(),
                after.keys().collect::<Vec<_>>(),
                "{what}: files appeared or vanished"
            );
            for (path, bytes) in &before {
                assert!(after[path] == *bytes, "{what}: {} changed", path.display());
            }
        }
    }
}

/// Kafka's recovery trusts what was flushed below the recovery point: a flipped payload byte
/// there does not stop `status` (which reads only batch headers), and `verify` (every CRC) names
/// the file and byte. Neither changes a file.
#[test]
fn a_plain_open_trusts_flushed_data_and_verify_checks_it() {
    let base = tempfile::tempdir().unwrap();
    let root = base.path().join("r");
    pristine(&root);
    let bin = env!("CARGO_BIN_EXE_kmirror");
    let run = |args: &[&str]| {
        let args: Vec<String> = args
            .iter()
            .map(|a| a.replace("{}", &root.display().to_string()))
            .collect();
        run_with_timeout(Command::new(bin).args(&args), &args.join(" "))
    };
    let out = run(VERIFY);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        stdout.matches("every CRC-32C checked").count(),
        3,
        "{stdout}"
    );
    let seg = segment(&root, "west", 0, TOPIC);
    flip(&seg, 80);
    let before = snapshot(&root);
    let out = run(STATUS);
    assert!(out.status.success(), "status: {out:?}");
    let out = run(VERIFY);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.starts_with("kmirror: 1 of 3 logs is damaged"),
        "{stderr}"
    );
    for expected in [
        seg.display().to_string(),
        "below the recovery point".into(),
        "fails its CRC-32C check".into(),
    ] {
        assert!(stderr.contains(&expected), "{expected:?} in {stderr}");
    }
    // Every other log is still scanned and reported.
    assert_eq!(stdout.matches("DAMAGED").count(), 1, "{stdout}");
    assert_eq!(
        stdout.matches("every CRC-32C checked").count(),
        2,
        "{stdout}"
    );
    assert!(snapshot(&root) == before, "status or verify changed a file");
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
        vec!["produce", "--dir", "x", "plain:0"],
        vec!["produce", "--dir", "x", "nonsense"],
        vec!["mirror", "--dest", "x"],
        vec![
            "mirror",
            "--source",
            "a",
            "--dest",
            "b",
            "--flush",
            "sometimes",
        ],
        vec!["verify"],
        vec![
            "mirror",
            "--source",
            "a",
            "--dest",
            "b",
            "--once",
            "--until-caught-up",
        ],
    ] {
        let out = {
            let _spawning = spawn_lock();
            Command::new(bin).args(&args).output().unwrap()
        };
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(!String::from_utf8_lossy(&out.stderr).contains("panicked"));
    }
    for command in [
        "mirror", "stop", "start", "pause", "resume", "status", "produce", "demo", "verify",
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
