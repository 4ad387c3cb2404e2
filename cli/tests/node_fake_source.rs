//! `kmirror mirror|stop|status --topics` against the harness's fake multi-broker Kafka source
//! (`kmirror_harness::wire::fake_broker`, feature `testkit`), process against process:
//!
//! - a following `kmirror mirror` takes `kmirror stop --topics` through the control channel:
//!   exact per-topic lines and summary, exit code 2 for a refused entry, the stopped topic
//!   STOPPED and writable while the other keeps following; a holder that is not a mirror
//!   makes the command give up, withdrawing its request;
//! - a topic already in another mirror, and a topic whose source lost a partition: one clear
//!   per-topic error, exit code 2, and the destination byte-identical before and after;
//! - `kmirror status` changes nothing, and refuses a destination missing a directory without
//!   creating it; while `kmirror serve` holds the destination it shows what serve writes;
//! - a failed-over topic deleted by a Kafka client is mirrored again by a running mirror whose
//!   selection names it.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use kmirror_harness::node::{NodeDriver, NodeDriverOptions, NodeStatus};
use kmirror_harness::wire::fake_broker::{FakeCluster, FakePartition, FakeTopic};
use kmirror_kernel::types::TopicId;

const ORDERS: TopicId = TopicId([1; 16]);
const PAY_EU: TopicId = TopicId([2; 16]);

fn kmirror(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kmirror"))
        .args(args)
        .output()
        .expect("run kmirror")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// orders: 3 partitions of 4, 5 and 6 batches (LEO 8, 10, 12); pay.eu: 2 partitions of 2
/// batches (LEO 4); two records a batch; brokers 1 and 2, long-polling empty fetches.
fn fake() -> FakeCluster {
    let fake = FakeCluster::start(
        2,
        vec![
            FakeTopic {
                name: "orders".into(),
                id: ORDERS,
                partitions: (0..3)
                    .map(|i| FakePartition::with_batches(1 + i % 2, 5, 4 + i64::from(i)))
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
    );
    fake.state().long_poll = true;
    fake
}

/// Every directory (ending in `/`) and file under `root`, with the file's bytes.
fn snapshot(root: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                out.insert(format!("{}/", path.display()), Vec::new());
                stack.push(path);
            } else {
                out.insert(path.display().to_string(), std::fs::read(&path).unwrap());
            }
        }
    }
    out
}

/// The paths whose presence or bytes differ between two snapshots.
fn changed(a: &BTreeMap<String, Vec<u8>>, b: &BTreeMap<String, Vec<u8>>) -> Vec<String> {
    let keys: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    keys.into_iter()
        .filter(|k| a.get(*k) != b.get(*k))
        .cloned()
        .collect()
}

/// A `kmirror` child (a following mirror, a serving node), killed when dropped.
struct Mirror(Child);

impl Drop for Mirror {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `kmirror ARGS` in the background, its output dropped.
fn spawn(args: &[&str]) -> Mirror {
    Mirror(
        Command::new(env!("CARGO_BIN_EXE_kmirror"))
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn kmirror"),
    )
}

/// `kmirror mirror --source-bootstrap <fake's broker 1> --topics TOPICS --dest DEST EXTRA...`
/// (a following mirror: the caller adds `--until-caught-up` to run one to its end).
fn mirror_args(fake: &FakeCluster, topics: &str, dest: &str, extra: &[&str]) -> Vec<String> {
    let mut args: Vec<String> = [
        "mirror",
        "--source-bootstrap",
        &fake.address(1),
        "--topics",
        topics,
        "--dest",
        dest,
        "--quiet",
    ]
    .iter()
    .map(|a| a.to_string())
    .collect();
    args.extend(extra.iter().map(|a| a.to_string()));
    args
}

/// Runs `kmirror mirror ... --until-caught-up` of `topics` from `fake` into `dest` to its end.
fn mirror_until_caught_up(fake: &FakeCluster, topics: &str, dest: &str, extra: &[&str]) -> Output {
    let mut args = mirror_args(fake, topics, dest, extra);
    args.push("--until-caught-up".into());
    kmirror(&strs(&args))
}

/// `strings` as the `&str` slice `kmirror` and `spawn` take.
fn strs(strings: &[String]) -> Vec<&str> {
    strings.iter().map(String::as_str).collect()
}

/// The mirror's `status.json` once `ready` holds for it (at most 30 s).
fn wait_for_status(root: &Path, ready: impl Fn(&NodeStatus) -> bool) -> NodeStatus {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let status: Option<NodeStatus> = std::fs::read(root.join("status.json"))
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok());
        if let Some(s) = status.filter(|s| ready(s)) {
            return s;
        }
        assert!(Instant::now() < deadline, "status.json never got ready");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_following_mirror_takes_a_stop_through_the_control_channel() {
    let fake = fake();
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("west");
    let dest = root.to_str().unwrap();
    let _mirror = spawn(&strs(&mirror_args(
        &fake,
        "orders,pay.*",
        dest,
        &["--mirror-name", "east"],
    )));
    let caught_up = |s: &NodeStatus| {
        s.partitions.len() == 5
            && s.partitions
                .iter()
                .all(|p| p.state == "MIRRORING" && p.lag == Some(0))
    };
    wait_for_status(&root, caught_up);

    let out = kmirror(&["stop", "--dest", dest, "--topics", "orders,nope", "--quiet"]);
    assert_eq!(
        text(&out.stdout),
        "orders: removed from its mirror (failing over)\n\
         orders-0: STOPPED  LEO 9  HW 9  LSO 9  writable\n\
         orders-1: STOPPED  LEO 11  HW 11  LSO 11  writable\n\
         orders-2: STOPPED  LEO 13  HW 13  LSO 13  writable\n"
    );
    assert_eq!(
        text(&out.stderr),
        "kmirror: nope: UNKNOWN_TOPIC_OR_PARTITION: the destination has no such topic\n\
         kmirror: stop: 1 of 2 topics refused, nothing changed for it; 1 topic stopped (failed \
         over, writable)\n"
    );
    assert_eq!(out.status.code(), Some(2));

    // The mirror goes on following pay.eu: a new batch at the source arrives.
    {
        let mut state = fake.state();
        let p = &mut state.topics[1].partitions[0];
        let header = kmirror_kernel::batch::BatchHeader::plain(4, 5, 3);
        p.batches
            .push(kmirror_harness::record_batch::RawBatch::synthesize(&header, 4_000).unwrap());
    }
    let status = wait_for_status(&root, |s| {
        s.partitions
            .iter()
            .any(|p| p.topic == "pay.eu" && p.partition == 0 && p.log_end_offset == 6)
    });
    for p in &status.partitions {
        let expected = if p.topic == "orders" {
            ("STOPPED", true)
        } else {
            ("MIRRORING", false)
        };
        assert_eq!((p.state.as_str(), p.writable), expected, "{p:?}");
    }
    // Nothing left behind in the control directory.
    assert_eq!(std::fs::read_dir(root.join("control")).unwrap().count(), 0);
}

/// `kmirror serve` keeps `status.json` current for `kmirror status` while it holds the
/// directory: a stop taken through its control channel shows (STOPPED, writable), and the
/// source positions the last mirror run measured are kept, with their date.
#[test]
fn a_serving_node_keeps_its_status_current() {
    let fake = fake();
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("west");
    let dest = root.to_str().unwrap();
    let out = mirror_until_caught_up(&fake, "orders", dest, &["--mirror-name", "east"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let measured = wait_for_status(&root, |s| s.measured_at_ms.is_some());
    let _serve = spawn(&["serve", "--dest", dest, "--listen", "127.0.0.1:0"]);
    // The stop must reach the serving process (not run alone before serve holds the
    // directory, which would date status.json itself).
    let deadline = Instant::now() + Duration::from_secs(30);
    while kmirror_harness::node::NodeDest::read_lock(&root).is_ok() {
        assert!(
            Instant::now() < deadline,
            "kmirror serve never held the directory"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = kmirror(&["stop", "--dest", dest, "--topics", "orders", "--quiet"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let status = wait_for_status(&root, |s| {
        s.partitions
            .iter()
            .all(|p| p.state == "STOPPED" && p.writable)
    });
    assert_eq!(status.measured_at_ms, measured.measured_at_ms);
    let out = kmirror(&["status", "--dest", dest]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let shown = text(&out.stdout);
    assert!(
        text(&out.stderr).contains("in use by a running kmirror"),
        "{}",
        text(&out.stderr)
    );
    for p in 0..3 {
        assert!(shown.contains(&format!("orders-{p}   STOPPED")), "{shown}");
    }
}

/// A free port on loopback (bound, then let go) for a listener the test must know in advance.
fn free_address() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().to_string()
}

/// A topic failed over and then deleted by a Kafka client (DeleteTopics on the node's listener)
/// is created again by the running mirror whose selection names it, at its next refresh of
/// the source's metadata, as any topic of its selection new to the destination: mirrored
/// again from the source, from offset 0, read-only.
#[test]
fn a_following_mirror_recreates_a_deleted_topic_its_selection_names() {
    use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
    use kafka_protocol::messages::{DeleteTopicsRequest, DeleteTopicsResponse, TopicName};
    use kafka_protocol::protocol::StrBytes;

    let fake = fake();
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("west");
    let dest = root.to_str().unwrap();
    let listen = free_address();
    let extra = [
        "--mirror-name",
        "east",
        "--listen",
        &listen,
        "--metadata-refresh-ms",
        "300",
    ];
    let _mirror = spawn(&strs(&mirror_args(&fake, "orders", dest, &extra)));
    let mirrored = |s: &NodeStatus| {
        s.partitions.len() == 3
            && s.partitions
                .iter()
                .all(|p| p.state == "MIRRORING" && p.lag == Some(0))
    };
    wait_for_status(&root, mirrored);
    let out = kmirror(&["stop", "--dest", dest, "--topics", "orders", "--quiet"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));

    let mut conn = kmirror_harness::wire::Connection::connect(
        &listen,
        Duration::from_secs(2),
        Duration::from_secs(30),
    )
    .unwrap();
    let request = DeleteTopicsRequest::default()
        .with_timeout_ms(5_000)
        .with_topics(vec![DeleteTopicState::default()
            .with_name(Some(TopicName(StrBytes::from_static_str("orders"))))]);
    let answer: DeleteTopicsResponse = conn.send("DeleteTopics", &request, 6).unwrap();
    assert_eq!(answer.responses[0].error_code, 0, "{answer:?}");

    // Mirrored again: MIRRORING, read-only, the source's offsets from 0 (LEO 8, 10, 12; the
    // stop's epoch bump and MIRROR_PID_RESET went with the deleted logs).
    let status = wait_for_status(&root, |s| {
        mirrored(s) && s.partitions.iter().all(|p| !p.writable)
    });
    let ends: Vec<i64> = status.partitions.iter().map(|p| p.log_end_offset).collect();
    assert_eq!(ends, [8, 10, 12]);
}

#[test]
fn a_holder_that_is_not_a_mirror_takes_no_request_and_nothing_changes() {
    let fake = fake();
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("west");
    let dest = root.to_str().unwrap();
    let out = mirror_until_caught_up(&fake, "orders", dest, &["--mirror-name", "east"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    // This test holds the lock, serving no control channel (as another command would).
    let held = NodeDriver::open(&root, None, NodeDriverOptions::default()).unwrap();
    let before = snapshot(&root);
    let out = Command::new(env!("CARGO_BIN_EXE_kmirror"))
        .args(["pause", "--dest", dest, "--topics", "orders"])
        .env("KMIRROR_CONTROL_CLAIM_MS", "300")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        text(&out.stderr),
        format!(
            "kmirror: {dest} is held by another kmirror process that took no control request in \
             300 ms (a running `kmirror mirror --topics` takes one within a second; another \
             command or `kmirror sync` does not); nothing was changed: try again once it is \
             done\n"
        )
    );
    assert_eq!(text(&out.stdout), "");
    // The request was withdrawn: the control directory (the mirror run made it) is empty
    // again, and nothing else changed.
    assert_eq!(std::fs::read_dir(root.join("control")).unwrap().count(), 0);
    assert_eq!(changed(&before, &snapshot(&root)), Vec::<String>::new());
    drop(held);
}

#[test]
fn refused_topics_are_one_line_each_and_leave_the_destination_byte_identical() {
    let fake = fake();
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("west");
    let dest = root.to_str().unwrap();
    let mirror = |name: &str, topics: &str| {
        mirror_until_caught_up(&fake, topics, dest, &["--mirror-name", name])
    };
    let out = mirror("other", "orders");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let before = snapshot(&root);

    // orders belongs to mirror `other`: adding it to `east` is refused.
    let out = mirror("east", "orders");
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        text(&out.stderr),
        "kmirror: orders: TOPIC_ALREADY_IN_CLUSTER_MIRROR: topic \"orders\" is already in \
         cluster mirror other\n\
         kmirror: mirror: 1 of 1 topic refused; nothing changed\n"
    );
    assert_eq!(text(&out.stdout), "");
    assert_eq!(changed(&before, &snapshot(&root)), Vec::<String>::new());

    // The source's orders lost a partition (same topic id): partitions are never removed.
    fake.state().topics[0].partitions.pop();
    let out = mirror("other", "orders");
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        text(&out.stderr),
        "kmirror: orders: INVALID_CLUSTER_MIRROR_STATE: the source's orders has 2 partitions but \
         the destination has 3: partitions cannot be removed, nothing changes\n\
         kmirror: mirror: 1 of 1 topic refused; nothing changed\n"
    );
    assert_eq!(changed(&before, &snapshot(&root)), Vec::<String>::new());

    // `kmirror status` reads only.
    let out = kmirror(&["status", "--dest", dest]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let table = text(&out.stdout);
    assert!(table.contains("LAG BYTES"), "{table}");
    assert_eq!(changed(&before, &snapshot(&root)), Vec::<String>::new());
    // A destination that lost a __mirror_state partition directory: an error naming it, and
    // nothing created.
    let lost = root.join("data").join("__mirror_state-3");
    std::fs::rename(&lost, tmp.path().join("aside")).unwrap();
    let before = snapshot(&root);
    let out = kmirror(&["status", "--dest", dest]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        text(&out.stderr),
        format!(
            "kmirror: {} is missing: __mirror_state partition 3 has lost its log directory \
             (restore it from a backup); nothing was changed\n",
            lost.display()
        )
    );
    assert_eq!(changed(&before, &snapshot(&root)), Vec::<String>::new());
}

/// The partition counts of the Fetches broker `id` of `fake` was sent.
fn fetch_sizes(fake: &FakeCluster, id: i32) -> Vec<usize> {
    // Kafka's API key of Fetch.
    let fetch: i16 = 1;
    fake.state()
        .requests
        .iter()
        .filter(|(b, k, _)| *b == id && *k == fetch)
        .map(|(_, _, n)| *n)
        .collect()
}

#[test]
fn fetches_in_flight_share_each_brokers_partitions_among_that_many_fetches() {
    let tmp = tempfile::tempdir().unwrap();
    let mirror = |fake: &FakeCluster, dest: &str, extra: &[&str]| {
        mirror_until_caught_up(fake, "orders,pay.eu", dest, extra)
    };
    // Broker 1 leads orders-0, orders-2 and pay.eu-1. The read-access check before mirroring
    // asks all three in one Fetch either way.
    let one = fake();
    let dest = tmp.path().join("one");
    let out = mirror(&one, dest.to_str().unwrap(), &["--fetches-in-flight", "1"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let sizes = fetch_sizes(&one, 1);
    assert!(sizes.iter().filter(|n| **n == 3).count() > 1, "{sizes:?}");

    let two = fake();
    let dest = tmp.path().join("two");
    let out = mirror(&two, dest.to_str().unwrap(), &["--fetches-in-flight", "2"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let sizes = fetch_sizes(&two, 1);
    assert_eq!(sizes.iter().filter(|n| **n == 3).count(), 1, "{sizes:?}");
    assert!(sizes.contains(&2) && sizes.contains(&1), "{sizes:?}");
    let out = kmirror(&["status", "--dest", dest.to_str().unwrap()]);
    let table = text(&out.stdout);
    assert!(
        table.lines().filter(|l| l.contains("MIRRORING")).count() >= 5,
        "{table}"
    );

    let out = mirror(&two, dest.to_str().unwrap(), &["--fetches-in-flight", "0"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("--fetches-in-flight"));
}
