//! Damaged files in a node destination, fed to the `kmirror` binary: `node.properties`, a
//! `__mirror_state` segment, a partition segment (the leader's or a follower's), a
//! leader-epoch checkpoint, a log-dir checkpoint file, a lost log directory, a directory that
//! is no node destination. Every command that reads the damage refuses it with one `kmirror:`
//! line naming the file and what is wrong (exit code 2; `kmirror verify` exits with 1 when it
//! scanned and found a damaged log) and leaves every file and directory byte for byte as it
//! was. What Kafka's log recovery repairs by itself is repaired the same way and loses
//! nothing: a bad offset index is rebuilt, a torn tail past the recovery point is cut and
//! fetched again, deleted leader-epoch, recovery-point and log-start-offset checkpoints are
//! rebuilt from the segments, a lost follower directory is copied again from the leader, a
//! damaged `status.json` is rewritten and a damaged control request answered with an error.
//! A request a failed-over topic cannot take (pause, resume) is refused per topic and a repeated
//! stop is a no-op, neither writing a file. The destinations are made by the binary itself,
//! mirroring the harness's fake Kafka source (no Kafka cluster needed).

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use kmirror_harness::record_batch::{RawBatch, Record};
use kmirror_harness::wire::fake_broker::{FakeCluster, FakePartition, FakeTopic};
use kmirror_kernel::batch::BatchHeader;
use kmirror_kernel::types::TopicId;
use kmirror_testsupport::dir_tree::{self, changed, snapshot};

const ORDERS: TopicId = TopicId([1; 16]);
const PAY_EU: TopicId = TopicId([2; 16]);
const SEGMENT: &str = "00000000000000000000.log";
const INDEX: &str = "00000000000000000000.index";

/// orders: 3 partitions of 100, 5 and 6 batches (LEO 200, 10, 12: orders-0's offset index has
/// entries); pay.eu: 2 partitions of 2 batches (LEO 4); two records a batch; brokers 1 and 2.
fn fake() -> FakeCluster {
    let batches = [100, 5, 6];
    FakeCluster::start(
        2,
        vec![
            FakeTopic {
                name: "orders".into(),
                id: ORDERS,
                partitions: (0..3)
                    .map(|i| FakePartition::with_batches(1 + i % 2, 5, batches[i as usize]))
                    .collect(),
            },
            FakeTopic {
                name: "pay.eu".into(),
                id: PAY_EU,
                partitions: (0..2)
                    .map(|i| FakePartition::with_batches(2 - i % 2, 3, 2))
                    .collect(),
            },
        ],
    )
}

/// Runs `kmirror ARGS`, failing the test if it is still running after 30 seconds.
fn kmirror(args: &[String]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_kmirror"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run kmirror");
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > Duration::from_secs(30) {
            child.kill().unwrap();
            child.wait().unwrap();
            panic!("kmirror {}: still running after 30 s", args.join(" "));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    child.wait_with_output().unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|a| a.to_string()).collect()
}

/// `base/clean/west`: orders and pay.eu mirrored from `fake` until caught up (mirror `east`,
/// 2 replicas, so every partition has a follower in `replicas/broker-1/`), then pay.eu failed
/// over (STOPPED, writable); closed.
fn pristine(fake: &FakeCluster, base: &Path) -> PathBuf {
    let clean = base.join("clean");
    let west = clean.join("west").display().to_string();
    let out = kmirror(&strings(&[
        "mirror",
        "--source-bootstrap",
        &fake.address(1),
        "--topics",
        "orders,pay.eu",
        "--dest",
        &west,
        "--mirror-name",
        "east",
        "--replicas",
        "2",
        "--until-caught-up",
        "--quiet",
    ]));
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = kmirror(&strings(&[
        "stop", "--dest", &west, "--topics", "pay.eu", "--quiet",
    ]));
    assert!(out.status.success(), "{}", text(&out.stderr));
    clean
}

fn flip(path: &Path, at: usize) {
    let mut bytes = fs::read(path).unwrap();
    assert!(bytes.len() > at, "{} is too short", path.display());
    bytes[at] ^= 0x40;
    fs::write(path, bytes).unwrap();
}

/// Cuts the last `by` bytes of `path`.
fn cut(path: &Path, by: usize) {
    let bytes = fs::read(path).unwrap();
    fs::write(path, &bytes[..bytes.len() - by]).unwrap();
}

/// Replaces the line of `path` that starts with `prefix` by `line`.
fn edit_line(path: &Path, prefix: &str, line: &str) {
    let text = fs::read_to_string(path).unwrap();
    assert!(
        text.lines().any(|l| l.starts_with(prefix)),
        "{} has no line starting with {prefix:?}:\n{text}",
        path.display()
    );
    let edited: String = text
        .lines()
        .map(|l| {
            if l.starts_with(prefix) {
                format!("{line}\n")
            } else {
                format!("{l}\n")
            }
        })
        .collect();
    fs::write(path, edited).unwrap();
}

/// The segment of the first `__mirror_state` partition that holds records, relative to the
/// destination.
fn mirror_state_segment(west: &Path) -> String {
    (0..8)
        .map(|k| format!("data/__mirror_state-{k}/{SEGMENT}"))
        .find(|s| fs::metadata(west.join(s)).unwrap().len() > 0)
        .expect("a __mirror_state partition with records")
}

/// Appends to a `__mirror_state` segment a whole, CRC-valid batch whose record's key is no
/// `__mirror_state` key (type 7), past the recovery point; returns the segment.
fn garbage_mirror_state_record(west: &Path) -> String {
    let rel = mirror_state_segment(west);
    let path = west.join(&rel);
    let mut bytes = fs::read(&path).unwrap();
    let last = RawBatch::parse_many(&bytes)
        .unwrap()
        .last()
        .unwrap()
        .header();
    let record = Record {
        attributes: 0,
        timestamp_delta: 0,
        offset_delta: 0,
        key: Some(vec![0, 7, 0, 0]),
        value: Some(vec![0xde, 0xad]),
        headers: Vec::new(),
    };
    let next = last.last_offset + 1;
    let header = BatchHeader::plain(next, next, last.partition_leader_epoch);
    let batch = RawBatch::encode(&header, 1_700_000_000_000, &[record]).unwrap();
    bytes.extend_from_slice(batch.bytes());
    fs::write(&path, bytes).unwrap();
    rel
}

/// A command of the binary on the destination `d` (the source, when it needs one, is the
/// fake at `src`).
#[derive(Clone, Copy, Debug)]
enum Cmd {
    Status,
    Mirror,
    Stop,
    Pause,
    Resume,
    Serve,
    Verify,
    Sync,
}

const ALL: &[Cmd] = &[
    Cmd::Status,
    Cmd::Mirror,
    Cmd::Stop,
    Cmd::Pause,
    Cmd::Resume,
    Cmd::Serve,
    Cmd::Verify,
    Cmd::Sync,
];

/// Every command that opens the node for writing (leader logs, followers, `__mirror_state`).
const OPENING: &[Cmd] = &[
    Cmd::Mirror,
    Cmd::Stop,
    Cmd::Pause,
    Cmd::Resume,
    Cmd::Serve,
    Cmd::Verify,
    Cmd::Sync,
];

impl Cmd {
    fn args(self, d: &str, src: &str) -> Vec<String> {
        let args: &[&str] = match self {
            Cmd::Status => &["status", "--dest", d],
            Cmd::Mirror => &[
                "mirror",
                "--source-bootstrap",
                src,
                "--topics",
                "orders,pay.eu",
                "--dest",
                d,
                "--mirror-name",
                "east",
                "--until-caught-up",
                "--quiet",
            ],
            Cmd::Stop => &["stop", "--dest", d, "--topics", "orders", "--quiet"],
            Cmd::Pause => &["pause", "--dest", d, "--topics", "orders", "--quiet"],
            Cmd::Resume => &["resume", "--dest", d, "--topics", "orders", "--quiet"],
            Cmd::Serve => &["serve", "--dest", d, "--listen", "127.0.0.1:0"],
            Cmd::Verify => &["verify", d],
            // Refused or not, the source is never reached: the node is opened first.
            Cmd::Sync => &[
                "sync",
                "--source-bootstrap",
                "127.0.0.1:1",
                "--dest",
                d,
                "--once",
            ],
        };
        strings(args)
    }
}

struct Case {
    name: &'static str,
    /// The directory the commands are given, under the case's root (`west`: the pristine
    /// destination).
    dest: &'static str,
    /// Damages the destination `west`; returns the damaged file, relative to it (or "").
    corrupt: fn(&Path) -> String,
    commands: &'static [Cmd],
    /// What stderr must say; `{d}` is the destination's path, `{file}` the damaged file's.
    expect: &'static [&'static str],
    /// `verify`'s exit code: 1 for a damaged log it scanned, 2 when it cannot scan.
    verify_exit: i32,
}

fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "node.properties cut in the middle of a line",
            dest: "west",
            corrupt: |w| {
                let path = w.join("node.properties");
                let text = fs::read_to_string(&path).unwrap();
                let at = text.find("\ntopic=").unwrap() + "\ntopi".len();
                fs::write(&path, &text[..at]).unwrap();
                "node.properties".into()
            },
            commands: ALL,
            expect: &["{file}:7: \"topi\" is not key=value"],
            verify_exit: 2,
        },
        Case {
            name: "a partition's leader epoch in node.properties is not a number",
            dest: "west",
            corrupt: |w| {
                edit_line(
                    &w.join("node.properties"),
                    "partition=orders-1,",
                    "partition=orders-1,banana,0",
                );
                "node.properties".into()
            },
            commands: ALL,
            expect: &["{file}:10: partition=\"orders-1,banana,0\" is not an epoch"],
            verify_exit: 2,
        },
        Case {
            name: "a topic's mirror.name names a mirror the node does not have",
            dest: "west",
            corrupt: |w| {
                let id = "01010101010101010101010101010101";
                edit_line(
                    &w.join("node.properties"),
                    "topic=orders,",
                    &format!("topic=orders,{id},3,east.stopped"),
                );
                "node.properties".into()
            },
            commands: ALL,
            expect: &[
                "{file}:",
                "topic orders: mirror.name names mirror east.stopped, which is not in mirrors=",
            ],
            verify_exit: 2,
        },
        Case {
            name: "a topic's mirror.name with stacked suffixes",
            dest: "west",
            corrupt: |w| {
                let id = "01010101010101010101010101010101";
                edit_line(
                    &w.join("node.properties"),
                    "topic=orders,",
                    &format!("topic=orders,{id},3,east.paused.removed"),
                );
                "node.properties".into()
            },
            commands: ALL,
            expect: &[
                "{file}:7: mirror name \"east.paused\" ends in the reserved suffix \".paused\"",
            ],
            verify_exit: 2,
        },
        Case {
            name: "an unknown key in node.properties",
            dest: "west",
            corrupt: |w| {
                edit_line(&w.join("node.properties"), "replicas=", "replicaz=2");
                "node.properties".into()
            },
            commands: ALL,
            expect: &["{file}:5: unknown key \"replicaz\""],
            verify_exit: 2,
        },
        Case {
            name: "a node.properties format this kmirror does not know",
            dest: "west",
            corrupt: |w| {
                edit_line(
                    &w.join("node.properties"),
                    "format=",
                    "format=kmirror-node-9",
                );
                "node.properties".into()
            },
            commands: ALL,
            expect: &[
                "{file}:",
                "\"kmirror-node-9\"",
                "this is not a node destination this kmirror can read",
            ],
            verify_exit: 2,
        },
        Case {
            name: "a flipped byte in a __mirror_state segment",
            dest: "west",
            corrupt: |w| {
                let rel = mirror_state_segment(w);
                flip(&w.join(&rel), 75);
                rel
            },
            commands: ALL,
            expect: &["{file}", "fails its CRC-32C check"],
            verify_exit: 1,
        },
        Case {
            name: "a __mirror_state segment cut short below its recovery point",
            dest: "west",
            corrupt: |w| {
                let rel = mirror_state_segment(w);
                cut(&w.join(&rel), 7);
                rel
            },
            commands: ALL,
            expect: &[
                "{file} is corrupt in the record batch starting at byte",
                "below the recovery point",
                "incomplete record batch",
            ],
            verify_exit: 1,
        },
        Case {
            name: "a CRC-valid __mirror_state record with an unknown key type",
            dest: "west",
            corrupt: garbage_mirror_state_record,
            // Every CRC holds: `verify` finds nothing.
            commands: &[
                Cmd::Status,
                Cmd::Mirror,
                Cmd::Stop,
                Cmd::Pause,
                Cmd::Resume,
                Cmd::Serve,
                Cmd::Sync,
            ],
            expect: &["unknown __mirror_state key type 7"],
            verify_exit: 1,
        },
        Case {
            name: "a partition segment cut short below its recovery point",
            dest: "west",
            corrupt: |w| {
                let rel = format!("data/orders-1/{SEGMENT}");
                cut(&w.join(&rel), 7);
                rel
            },
            commands: ALL,
            expect: &[
                "{file} is corrupt in the record batch starting at byte 380, below the \
                 recovery point 10",
                "incomplete record batch at byte 380",
            ],
            verify_exit: 1,
        },
        Case {
            name: "a follower's segment cut short below its recovery point",
            dest: "west",
            corrupt: |w| {
                let rel = format!("replicas/broker-1/orders-1/{SEGMENT}");
                cut(&w.join(&rel), 7);
                rel
            },
            commands: OPENING,
            expect: &[
                "{file} is corrupt in the record batch starting at byte 380, below the \
                 recovery point 10",
                "incomplete record batch at byte 380",
            ],
            verify_exit: 1,
        },
        Case {
            name: "a flipped payload byte in a follower's segment",
            dest: "west",
            corrupt: |w| {
                let rel = format!("replicas/broker-1/orders-2/{SEGMENT}");
                flip(&w.join(&rel), 150);
                rel
            },
            commands: &[Cmd::Verify],
            expect: &[
                "1 of 18 logs is damaged",
                "{file} is corrupt",
                "below the recovery point",
                "fails its CRC-32C check",
            ],
            verify_exit: 1,
        },
        Case {
            name: "a bad line in a leader's leader-epoch-checkpoint",
            dest: "west",
            corrupt: |w| {
                let rel = "data/orders-0/leader-epoch-checkpoint".to_owned();
                fs::write(w.join(&rel), "0\n2\n0 0\nbanana\n").unwrap();
                rel
            },
            commands: OPENING,
            expect: &[
                "{file} is invalid at line 4",
                "expected 2 fields `<epoch> <start offset>`, found 1",
            ],
            verify_exit: 1,
        },
        Case {
            name: "a bad line in a follower's leader-epoch-checkpoint",
            dest: "west",
            corrupt: |w| {
                let rel = "replicas/broker-1/orders-0/leader-epoch-checkpoint".to_owned();
                fs::write(w.join(&rel), "0\n2\n0 0\nbanana\n").unwrap();
                rel
            },
            commands: OPENING,
            expect: &[
                "{file} is invalid at line 4",
                "expected 2 fields `<epoch> <start offset>`, found 1",
            ],
            verify_exit: 1,
        },
        Case {
            name: "a negative offset in the log dir's high-watermark checkpoint",
            dest: "west",
            corrupt: |w| {
                let rel = "data/replication-offset-checkpoint".to_owned();
                edit_line(&w.join(&rel), "orders 1 ", "orders 1 -5");
                rel
            },
            commands: ALL,
            expect: &["{file} is invalid at line 12: offset -5 is negative"],
            verify_exit: 2,
        },
        Case {
            name: "an offset that is not a number in the log dir's recovery-point checkpoint",
            dest: "west",
            corrupt: |w| {
                let rel = "data/recovery-point-offset-checkpoint".to_owned();
                edit_line(&w.join(&rel), "orders 1 ", "orders 1 x");
                rel
            },
            commands: ALL,
            expect: &["{file} is invalid at line 12: offset \"x\" is not a number"],
            verify_exit: 2,
        },
        Case {
            name: "the log dir's log-start-offset checkpoint announcing more entries than it holds",
            dest: "west",
            corrupt: |w| {
                let rel = "data/log-start-offset-checkpoint".to_owned();
                edit_line(&w.join(&rel), "13", "14");
                rel
            },
            commands: ALL,
            expect: &["{file} is invalid at line 2: the file announces 14 entries but holds 13"],
            verify_exit: 2,
        },
        Case {
            name: "a negative offset in a follower's high-watermark checkpoint",
            dest: "west",
            corrupt: |w| {
                let rel = "replicas/broker-1/replication-offset-checkpoint".to_owned();
                edit_line(&w.join(&rel), "orders 1 ", "orders 1 -5");
                rel
            },
            commands: OPENING,
            expect: &["{file} is invalid at line 4: offset -5 is negative"],
            verify_exit: 2,
        },
        Case {
            name: "a partition's log directory lost",
            dest: "west",
            corrupt: |w| {
                fs::remove_dir_all(w.join("data/orders-1")).unwrap();
                "data/orders-1".into()
            },
            commands: ALL,
            expect: &[
                "{file} is missing",
                "lost its log directory (restore it from a backup)",
            ],
            verify_exit: 1,
        },
        Case {
            name: "a __mirror_state partition's log directory lost",
            dest: "west",
            corrupt: |w| {
                let rel = mirror_state_segment(w);
                let dir = Path::new(&rel).parent().unwrap().to_owned();
                fs::remove_dir_all(w.join(&dir)).unwrap();
                dir.display().to_string()
            },
            // `status` and `verify` only: the commands that open the node for writing create a
            // missing `__mirror_state` partition directory, empty.
            commands: &[Cmd::Status, Cmd::Verify],
            expect: &[
                "{file} is missing",
                "has lost its log directory (restore it from a backup)",
            ],
            verify_exit: 1,
        },
        Case {
            name: "no destination at all",
            dest: "nowhere",
            corrupt: |_| String::new(),
            commands: &[
                Cmd::Status,
                Cmd::Serve,
                Cmd::Verify,
                Cmd::Sync,
                Cmd::Stop,
                Cmd::Pause,
                Cmd::Resume,
            ],
            expect: &["{d} does not exist", "kmirror serve --create"],
            verify_exit: 2,
        },
        Case {
            name: "a directory that is not a node destination",
            dest: "plain",
            corrupt: |w| {
                let plain = w.parent().unwrap().join("plain");
                fs::create_dir(&plain).unwrap();
                fs::write(plain.join("x"), "x").unwrap();
                String::new()
            },
            commands: &[
                Cmd::Stop,
                Cmd::Pause,
                Cmd::Resume,
                Cmd::Serve,
                Cmd::Status,
                Cmd::Verify,
                Cmd::Sync,
            ],
            expect: &["{d} is not a node destination (no node.properties)"],
            verify_exit: 2,
        },
        Case {
            name: "a mirror into a directory that is neither empty nor a node destination",
            dest: "plain",
            corrupt: |w| {
                let plain = w.parent().unwrap().join("plain");
                fs::create_dir(&plain).unwrap();
                fs::write(plain.join("x"), "x").unwrap();
                String::new()
            },
            commands: &[Cmd::Mirror],
            expect: &[
                "{d} exists and is neither empty nor a node destination (no node.properties); \
                 pick a new directory",
            ],
            verify_exit: 2,
        },
    ]
}

/// Every case of [`cases`] with every command it lists, each on a fresh copy of the pristine
/// destination: the exit code, one `kmirror:` line with the expected text, no panic, and every
/// file and directory under the case's root as it was.
#[test]
fn damaged_node_files_are_refused_in_one_line_naming_the_file_and_nothing_changes() {
    let fake = fake();
    let base = tempfile::tempdir().unwrap();
    let clean = pristine(&fake, base.path());
    let src = fake.address(1);
    let mut runs = 0;
    for (i, c) in cases().into_iter().enumerate() {
        for (j, cmd) in c.commands.iter().enumerate() {
            let root = base.path().join(format!("case-{i}-{j}"));
            dir_tree::copy(&clean, &root);
            let west = root.join("west");
            let rel = (c.corrupt)(&west);
            let file = west.join(&rel).display().to_string();
            let dest = root.join(c.dest).display().to_string();
            let before = snapshot(&root);
            let args = cmd.args(&dest, &src);
            let what = format!("{} / kmirror {}", c.name, args.join(" "));
            let out = kmirror(&args);
            runs += 1;
            let stderr = text(&out.stderr);
            let code = if matches!(cmd, Cmd::Verify) {
                c.verify_exit
            } else {
                2
            };
            assert_eq!(out.status.code(), Some(code), "{what}: exit code\n{stderr}");
            assert!(stderr.starts_with("kmirror: "), "{what}: {stderr}");
            assert_eq!(stderr.lines().count(), 1, "{what}: one line\n{stderr}");
            for expected in c.expect {
                let expected = expected.replace("{d}", &dest).replace("{file}", &file);
                assert!(
                    stderr.contains(&expected),
                    "{what}: expected {expected:?} in\n{stderr}"
                );
            }
            assert!(!stderr.contains("panicked"), "{what}: {stderr}");
            let after = snapshot(&root);
            assert_eq!(
                changed(&before, &after),
                Vec::<PathBuf>::new(),
                "{what}: files changed, appeared or vanished"
            );
        }
    }
    assert!(runs >= 100, "{runs} runs");
}

/// The `status` line of `partition`, split at whitespace: name, state, epoch, writable, LEO,
/// HW, LSO...
fn status_row(stdout: &str, partition: &str) -> Vec<String> {
    stdout
        .lines()
        .map(|l| l.split_whitespace().map(str::to_owned).collect::<Vec<_>>())
        .find(|f| f.first().map(String::as_str) == Some(partition))
        .unwrap_or_else(|| panic!("no {partition} in\n{stdout}"))
}

struct Repair {
    name: &'static str,
    corrupt: fn(&Path),
    /// Checks `status`'s output on the damaged destination.
    status: fn(&str),
    /// Paths (relative to the destination) the repairing `mirror` may leave different from
    /// the pristine destination, besides `status.json`.
    differs: &'static [&'static str],
}

fn repairs() -> Vec<Repair> {
    vec![
        Repair {
            name: "an offset index entry pointing past its segment",
            corrupt: |w| flip(&w.join("data/orders-0").join(INDEX), 9),
            status: |out| {
                assert_eq!(status_row(out, "orders-0")[4], "200");
            },
            differs: &[],
        },
        Repair {
            name: "an offset index cut in the middle of an entry",
            corrupt: |w| cut(&w.join("data/orders-0").join(INDEX), 11),
            status: |out| {
                assert_eq!(status_row(out, "orders-0")[4], "200");
            },
            differs: &[],
        },
        Repair {
            name: "a torn tail past the recovery point",
            corrupt: |w| {
                edit_line(
                    &w.join("data/recovery-point-offset-checkpoint"),
                    "orders 1 ",
                    "orders 1 8",
                );
                cut(&w.join("data/orders-1").join(SEGMENT), 7);
            },
            // The log up to its last whole batch; the cut is left to the next writer.
            status: |out| {
                assert_eq!(status_row(out, "orders-1")[4..7], ["8", "8", "8"]);
            },
            differs: &[],
        },
        Repair {
            name: "leader-epoch checkpoints deleted",
            corrupt: |w| {
                fs::remove_file(w.join("data/orders-0/leader-epoch-checkpoint")).unwrap();
                fs::remove_file(w.join("replicas/broker-1/orders-0/leader-epoch-checkpoint"))
                    .unwrap();
            },
            status: |out| {
                assert_eq!(status_row(out, "orders-0")[2], "6");
            },
            differs: &[],
        },
        Repair {
            name: "the log dir's recovery-point and log-start-offset checkpoints deleted",
            corrupt: |w| {
                fs::remove_file(w.join("data/recovery-point-offset-checkpoint")).unwrap();
                fs::remove_file(w.join("data/log-start-offset-checkpoint")).unwrap();
            },
            status: |out| {
                assert_eq!(status_row(out, "orders-2")[4], "12");
            },
            differs: &[],
        },
        Repair {
            name: "a follower's partition directory lost",
            corrupt: |w| fs::remove_dir_all(w.join("replicas/broker-1/orders-1")).unwrap(),
            status: |out| {
                assert_eq!(status_row(out, "orders-1")[4], "10");
            },
            differs: &[],
        },
        Repair {
            name: "a status.json that is not JSON",
            corrupt: |w| fs::write(w.join("status.json"), "{garbage").unwrap(),
            status: |out| {
                assert_eq!(
                    status_row(out, "pay.eu-0")[..4],
                    ["pay.eu-0", "STOPPED", "4", "yes"]
                );
            },
            differs: &[],
        },
        Repair {
            name: "a control request that is not JSON",
            corrupt: |w| {
                fs::create_dir_all(w.join("control")).unwrap();
                fs::write(w.join("control/abc.request"), "{garbage").unwrap();
            },
            status: |out| {
                assert_eq!(status_row(out, "orders-0")[1], "MIRRORING");
            },
            differs: &["control/abc.response"],
        },
    ]
}

/// What Kafka's recovery repairs by itself, `kmirror mirror` repairs and loses nothing: after
/// it the destination is byte for byte the pristine one (its `status.json` aside). Before it,
/// `kmirror status` shows the damaged destination as opening would recover it and changes
/// nothing.
#[test]
fn what_kafkas_log_recovery_repairs_is_repaired_byte_for_byte() {
    let fake = fake();
    let base = tempfile::tempdir().unwrap();
    let clean = pristine(&fake, base.path());
    let pristine_files = snapshot(&clean.join("west"));
    let src = fake.address(1);
    for (i, r) in repairs().into_iter().enumerate() {
        let root = base.path().join(format!("repair-{i}"));
        dir_tree::copy(&clean, &root);
        let west = root.join("west");
        (r.corrupt)(&west);
        let dest = west.display().to_string();

        let before = snapshot(&west);
        let out = kmirror(&Cmd::Status.args(&dest, &src));
        let what = format!("{}: status", r.name);
        assert!(out.status.success(), "{what}: {}", text(&out.stderr));
        (r.status)(&text(&out.stdout));
        assert_eq!(
            changed(&before, &snapshot(&west)),
            Vec::<PathBuf>::new(),
            "{what}"
        );

        let out = kmirror(&Cmd::Mirror.args(&dest, &src));
        let what = format!("{}: mirror", r.name);
        assert!(out.status.success(), "{what}: {}", text(&out.stderr));
        let mut differs: Vec<PathBuf> = changed(&pristine_files, &snapshot(&west));
        differs.retain(|p| p != Path::new("status.json"));
        let allowed: Vec<PathBuf> = r.differs.iter().map(PathBuf::from).collect();
        assert_eq!(
            differs, allowed,
            "{what}: differs from the pristine destination"
        );
        let status: serde_json::Value =
            serde_json::from_slice(&fs::read(west.join("status.json")).unwrap()).unwrap();
        assert_eq!(
            status["partitions"].as_array().map(Vec::len),
            Some(5),
            "{what}"
        );
        // The damaged control request is answered with an error naming it; the mirror went on.
        if r.differs.contains(&"control/abc.response") {
            let response = fs::read(west.join("control/abc.response")).unwrap();
            let response: serde_json::Value = serde_json::from_slice(&response).unwrap();
            let error = response["error"].as_str().unwrap();
            assert!(
                error.ends_with(
                    "control/abc.taken is not a control request: key must be a string at line 1 \
                     column 2"
                ),
                "{what}: {error}"
            );
        }
    }
}

/// `stop` of a topic already failed over answers that nothing changed, and `pause` and
/// `resume` refuse it with Kafka's error code, one line for the topic and a summary: none of
/// them writes a file.
#[test]
fn requests_a_failed_over_topic_cannot_take_change_nothing() {
    let fake = fake();
    let base = tempfile::tempdir().unwrap();
    let clean = pristine(&fake, base.path());
    let west = clean.join("west");
    let dest = west.display().to_string();
    let before = snapshot(&west);
    let out = kmirror(&strings(&["stop", "--dest", &dest, "--topics", "pay.eu"]));
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout),
        "pay.eu: already removed from its mirror\n\
         pay.eu-0: STOPPED  LEO 5  HW 5  LSO 5  writable\n\
         pay.eu-1: STOPPED  LEO 5  HW 5  LSO 5  writable\n\
         stop: 1 topic stopped (failed over, writable) already; nothing changed\n"
    );
    let refused = "topic \"pay.eu\" was removed from cluster mirror east and is stopped (failed \
                   over, writable)";
    for (verb, code) in [
        ("pause", "INVALID_CLUSTER_MIRROR_STATE"),
        ("resume", "MIRROR_TOPIC_NOT_PAUSED"),
    ] {
        let out = kmirror(&strings(&[verb, "--dest", &dest, "--topics", "pay.eu"]));
        assert_eq!(out.status.code(), Some(2), "{verb}: {}", text(&out.stderr));
        let verbed = if verb == "pause" { "paused" } else { "resumed" };
        assert_eq!(
            text(&out.stderr),
            format!(
                "kmirror: pay.eu: {code}: {refused}: it cannot be {verbed}; a failback \
                 (AddTopicsToMirror) mirrors it again\n\
                 kmirror: {verb}: 1 of 1 topic refused, nothing changed for it\n"
            )
        );
        assert_eq!(text(&out.stdout), "", "{verb}");
    }
    assert_eq!(changed(&before, &snapshot(&west)), Vec::<PathBuf>::new());
}
