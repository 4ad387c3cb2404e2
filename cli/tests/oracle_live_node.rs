//! One `kmirror` process mirrors many topics and partitions of a live 3-broker Apache Kafka
//! 4.4.0 cluster into a node destination (`-- --include-ignored oracle`).
//!
//! Two topics (`orders`, 6 partitions, and `pay.eu`, 4, replication factor 3) written by Kafka's
//! own Java producer (plain batches, committed and aborted transactions on every partition);
//! `kmirror mirror --topics 'orders,pay.*' --until-caught-up`; every partition equals a source
//! replica's partition directory byte for byte; a `kmirror mirror` that follows the source
//! survives the SIGKILL of a source leader while Kafka's producer writes across it, and catches
//! up byte for byte from the new leaders; `kmirror stop --topics orders` fails orders
//! over (its partitions STOPPED and writable, their mirrored bytes kept, a `MIRROR_PID_RESET`
//! after them) while pay.eu stays MIRRORING; bad topics are per-topic errors that change
//! nothing.
//!
//! A second test runs the node's lifecycle against the same kind of cluster: a repeated stop
//! and a re-run of `kmirror mirror` after a failover write nothing (the stopped topic is
//! skipped, never failed back), a produce gate left open in `node.properties` is closed on the
//! next run, a failback asks for `--yes` and then copies the source again, a following mirror
//! picks up a topic and a partition created at the source within its refresh and fails the
//! partitions of a topic deleted there for good, a paused topic's lag keeps being measured,
//! and SIGTERM closes the destination with its high watermarks and epoch checkpoints written.

use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use kmirror_testsupport::jvm::Oracle;
use kmirror_testsupport::kafka_broker::KafkaCluster;
use kmirror_testsupport::oracle_support::run;
use serde_json::Value;

mod serving;

use serving::{kmirror, kmirror_ok};

/// Kafka's producer and admin (`LiveCluster`): one JSON line per step.
fn live_cluster(oracle: &Oracle, bootstrap: &str, steps: &[&str]) {
    let mut command = oracle.command("dev.kmirror.oracle.LiveCluster");
    command.arg(bootstrap).args(steps);
    let output = run(command, Duration::from_secs(120));
    assert!(
        output.status.success(),
        "LiveCluster {steps:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The bytes of a partition directory's `.log` segments, back to back.
fn segment_bytes(dir: &Path) -> Vec<u8> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect();
    files.sort();
    files
        .iter()
        .flat_map(|f| std::fs::read(f).unwrap_or_else(|e| panic!("{}: {e}", f.display())))
        .collect()
}

fn status(dest: &str) -> Value {
    serde_json::from_str(&kmirror_ok(&["status", "--dest", dest, "--json"])).expect("status JSON")
}

fn partition<'a>(status: &'a Value, topic: &str, p: i64) -> &'a Value {
    status["partitions"]
        .as_array()
        .expect("partitions")
        .iter()
        .find(|x| x["topic"] == topic && x["partition"] == p)
        .unwrap_or_else(|| panic!("{topic}-{p} in {status}"))
}

#[test]
#[ignore = "needs Java 17 and Maven; run with `-- --include-ignored oracle`"]
fn oracle_live_node_mirror_many_topics_then_stop_one() {
    let Some(oracle) = Oracle::for_tests("oracle_live_node_mirror_many_topics_then_stop_one")
    else {
        return;
    };
    let started = Instant::now();
    let tmp = tempfile::tempdir().expect("tempdir");
    let mut cluster = KafkaCluster::start(&oracle, &tmp.path().join("cluster"), 3, &[])
        .unwrap_or_else(|e| panic!("{e}"));
    let bootstrap = cluster.bootstrap();
    live_cluster(
        &oracle,
        &bootstrap,
        &[
            "create:orders:6:3",
            "create:pay.eu:4:3",
            "plain:orders:3:4",
            "commit:orders:tx-orders-1:3",
            "abort:orders:tx-orders-2:2",
            "plain:pay.eu:2:5",
            "commit:pay.eu:tx-pay-1:2",
        ],
    );
    eprintln!("3 brokers up and produced after {:?}", started.elapsed());
    let dest_path = tmp.path().join("west");
    let dest = dest_path.to_str().expect("utf-8 path");

    // Bad input first: a glob matching nothing creates nothing.
    let out = kmirror(&[
        "mirror",
        "--source-bootstrap",
        &bootstrap,
        "--topics",
        "audit.*",
        "--dest",
        dest,
        "--until-caught-up",
    ]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("audit.*: UNKNOWN_TOPIC_OR_PARTITION"),
        "{out:?}"
    );
    assert!(!dest_path.exists(), "a refused mirror creates nothing");

    // 1. Mirror both topics, every partition, in one process.
    let out = kmirror_ok(&[
        "mirror",
        "--source-bootstrap",
        &bootstrap,
        "--topics",
        "orders,pay.*",
        "--dest",
        dest,
        "--until-caught-up",
        "--quiet",
    ]);
    eprintln!("{out}");
    eprintln!("mirrored after {:?}", started.elapsed());
    let s = status(dest);
    let partitions = s["partitions"].as_array().expect("partitions");
    assert_eq!(partitions.len(), 10, "{s}");
    for p in partitions {
        assert_eq!(p["state"], "MIRRORING", "{p}");
        assert_eq!(p["lag"], 0, "{p}");
        assert_eq!(p["writable"], false, "{p}");
    }
    let table = kmirror_ok(&["status", "--dest", dest]);
    assert!(
        table.contains("orders-5") && table.contains("MIRRORING x4"),
        "{table}"
    );

    // Every partition equals a source replica byte for byte (the leader's: all in sync).
    let same = |cluster: &KafkaCluster, topic: &str, count: i32, exact: bool| {
        for p in 0..count {
            let (leader, _) = cluster
                .leader(topic, p)
                .expect("metadata")
                .expect("a leader");
            assert!(
                cluster.is_running(leader),
                "{topic}-{p}: leader {leader} is dead"
            );
            let source = segment_bytes(&cluster.partition_dir(leader, topic, p));
            let copy = segment_bytes(&dest_path.join("data").join(format!("{topic}-{p}")));
            assert!(!source.is_empty(), "{topic}-{p} has data at the source");
            if exact {
                assert!(
                    copy == source,
                    "{topic}-{p} differs from broker {leader}'s replica"
                );
            } else {
                let common = copy.iter().zip(&source).take_while(|(a, b)| a == b).count();
                assert!(
                    copy.len() > source.len() && copy.starts_with(&source),
                    "{topic}-{p}: the mirrored bytes are kept, the stop's batch follows them \
                     (copy {} bytes, broker {leader}'s replica {}, equal for the first {common})",
                    copy.len(),
                    source.len()
                );
            }
        }
    };
    same(&cluster, "orders", 6, true);
    same(&cluster, "pay.eu", 4, true);

    // 1b. A source leader dies mid-mirror. One `kmirror mirror` process follows the source
    //     while Kafka's producer writes to every partition and the leader of orders-0 is
    //     SIGKILLed: the process keeps running, follows the new leaders at the same offsets
    //     and catches up with what the producer wrote across the kill.
    let follower_log = tmp.path().join("follower.stderr");
    let mut follower = Command::new(env!("CARGO_BIN_EXE_kmirror"))
        .args([
            "mirror",
            "--source-bootstrap",
            &bootstrap,
            "--topics",
            "orders,pay.*",
            "--dest",
            dest,
            "--quiet",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&follower_log).expect("follower log"))
        .spawn()
        .expect("kmirror mirror starts");
    let producer = {
        let (oracle, bootstrap) = (oracle.clone(), bootstrap.clone());
        std::thread::spawn(move || {
            live_cluster(
                &oracle,
                &bootstrap,
                &[
                    "plain:orders:2:3",
                    "commit:orders:tx-orders-3:2",
                    "plain:pay.eu:1:4",
                    "abort:pay.eu:tx-pay-2:2",
                ],
            )
        })
    };
    std::thread::sleep(Duration::from_millis(1500));
    let (victim, _) = cluster
        .leader("orders", 0)
        .expect("metadata")
        .expect("orders-0 has a leader");
    cluster.kill(victim);
    eprintln!(
        "killed broker {victim} (leader of orders-0) after {:?}",
        started.elapsed()
    );
    producer.join().expect("the producer thread");
    // Caught up: every partition at lag 0 with the source's new leaders' bytes.
    let deadline = Instant::now() + Duration::from_secs(90);
    // A running node's metadata may still name the dead broker for a moment: compare only
    // with a leader that runs.
    let copied = |topic: &str, p: i32| {
        let (leader, _) = cluster.leader(topic, p).ok().flatten()?;
        if !cluster.is_running(leader) {
            return None;
        }
        let source = segment_bytes(&cluster.partition_dir(leader, topic, p));
        let copy = segment_bytes(&dest_path.join("data").join(format!("{topic}-{p}")));
        Some(copy == source)
    };
    loop {
        if let Some(exit) = follower.try_wait().expect("wait") {
            panic!(
                "kmirror mirror exited ({exit}) across the leader's death: {}",
                std::fs::read_to_string(&follower_log).unwrap_or_default()
            );
        }
        let all = (0..6).all(|p| copied("orders", p) == Some(true))
            && (0..4).all(|p| copied("pay.eu", p) == Some(true));
        // The transaction coordinator may have died with the broker: its markers land a little
        // after the producer returns. Until they do the copy (like the source) holds an open
        // transaction, which the stop below would rightly truncate.
        let settled = || {
            status(dest)["partitions"]
                .as_array()
                .expect("partitions")
                .iter()
                .all(|p| p["last_stable_offset"] == p["log_end_offset"])
        };
        if all && settled() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "not caught up 90 s after the kill: {}",
            kmirror_ok(&["status", "--dest", dest])
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    eprintln!(
        "followed the new leaders and caught up after {:?}",
        started.elapsed()
    );
    // Interrupting the follower is safe: everything acknowledged is on disk.
    let interrupted = Command::new("kill")
        .args(["-INT", &follower.id().to_string()])
        .status()
        .expect("kill -INT");
    assert!(interrupted.success());
    let exit = follower.wait().expect("kmirror mirror ends");
    assert!(
        exit.code().is_some() || exit.signal() == Some(2),
        "{exit}: {}",
        std::fs::read_to_string(&follower_log).unwrap_or_default()
    );
    same(&cluster, "orders", 6, true);
    same(&cluster, "pay.eu", 4, true);
    let s = status(dest);

    // 2. Per-topic errors change nothing.
    let out = kmirror(&["stop", "--dest", dest, "--topics", "nope,orders.x*"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("UNKNOWN_TOPIC_OR_PARTITION"), "{err}");
    assert_eq!(status(dest), s, "a refused stop changes nothing");

    // 3. Fail orders over; pay.eu keeps mirroring.
    let out = kmirror_ok(&["stop", "--dest", dest, "--topics", "orders"]);
    assert!(out.contains("orders: removed from its mirror"), "{out}");
    let s = status(dest);
    for p in 0..6 {
        let x = partition(&s, "orders", p);
        assert_eq!(x["state"], "STOPPED", "{x}");
        assert_eq!(x["writable"], true, "{x}");
    }
    for p in 0..4 {
        let x = partition(&s, "pay.eu", p);
        assert_eq!(x["state"], "MIRRORING", "{x}");
        assert_eq!(x["writable"], false, "{x}");
    }
    same(&cluster, "orders", 6, false);
    same(&cluster, "pay.eu", 4, true);

    // pay.eu follows new data; orders (STOPPED) no longer does.
    live_cluster(
        &oracle,
        &bootstrap,
        &["plain:pay.eu:1:2", "plain:orders:1:2"],
    );
    kmirror_ok(&[
        "mirror",
        "--source-bootstrap",
        &bootstrap,
        "--topics",
        "pay.*",
        "--dest",
        dest,
        "--until-caught-up",
        "--quiet",
    ]);
    same(&cluster, "pay.eu", 4, true);
    let s = status(dest);
    for p in 0..6 {
        assert_eq!(partition(&s, "orders", p)["state"], "STOPPED");
    }
    eprintln!("done after {:?}", started.elapsed());
}

/// Every directory (ending in `/`) and file under `root` with its bytes, but `status.json` (a
/// run's dated snapshot, not the destination's state).
fn snapshot(root: &Path) -> std::collections::BTreeMap<String, Vec<u8>> {
    let mut out = std::collections::BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("read_dir") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                out.insert(format!("{}/", path.display()), Vec::new());
                stack.push(path);
            } else if path.file_name().is_some_and(|n| n != "status.json") {
                out.insert(
                    path.display().to_string(),
                    std::fs::read(&path).expect("read"),
                );
            }
        }
    }
    out
}

/// The paths whose presence or bytes differ.
fn changed(
    a: &std::collections::BTreeMap<String, Vec<u8>>,
    b: &std::collections::BTreeMap<String, Vec<u8>>,
) -> Vec<String> {
    let keys: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    keys.into_iter()
        .filter(|k| a.get(*k) != b.get(*k))
        .cloned()
        .collect()
}

/// Polls `kmirror status --json` until `ready` holds (at most `secs`).
fn wait_status(dest: &str, secs: u64, what: &str, ready: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        let s = status(dest);
        if ready(&s) {
            return s;
        }
        assert!(Instant::now() < deadline, "{what} within {secs} s: {s}");
        std::thread::sleep(Duration::from_millis(500));
    }
}

#[test]
#[ignore = "needs Java 17 and Maven; run with `-- --include-ignored oracle`"]
fn oracle_live_node_restarts_reruns_and_a_changing_source() {
    let Some(oracle) = Oracle::for_tests("oracle_live_node_restarts_reruns_and_a_changing_source")
    else {
        return;
    };
    let started = Instant::now();
    let tmp = tempfile::tempdir().expect("tempdir");
    let cluster = KafkaCluster::start(&oracle, &tmp.path().join("cluster"), 3, &[])
        .unwrap_or_else(|e| panic!("{e}"));
    let bootstrap = cluster.bootstrap();
    live_cluster(
        &oracle,
        &bootstrap,
        &[
            "create:orders:4:3",
            "create:pay.eu:3:3",
            "plain:orders:2:5",
            "commit:orders:tx-l-1:2",
            "plain:pay.eu:2:4",
        ],
    );
    let dest_path = tmp.path().join("west");
    let dest = dest_path.to_str().expect("utf-8 path");
    let mirror = |extra: &[&str]| {
        let mut args = vec![
            "mirror",
            "--source-bootstrap",
            &bootstrap,
            "--dest",
            dest,
            "--until-caught-up",
            "--quiet",
        ];
        args.extend_from_slice(extra);
        kmirror(&args)
    };
    let out = mirror(&["--topics", "orders,pay.*"]);
    assert!(out.status.success(), "{out:?}");
    let out = kmirror_ok(&["stop", "--dest", dest, "--topics", "orders", "--quiet"]);
    assert!(out.contains("orders: removed from its mirror"), "{out}");

    // A second stop of a stopped topic: says so, writes nothing.
    let before = snapshot(&dest_path);
    let out = kmirror_ok(&["stop", "--dest", dest, "--topics", "orders", "--quiet"]);
    assert!(
        out.contains("orders: already removed from its mirror"),
        "{out}"
    );
    assert!(out.contains("nothing changed"), "{out}");
    assert_eq!(
        changed(&before, &snapshot(&dest_path)),
        Vec::<String>::new()
    );

    // The same mirror command again: orders is skipped (no failback), nothing of the
    // destination changes (pay.eu is caught up), and the gates stay as the kernel left them.
    let out = mirror(&["--topics", "orders,pay.*"]);
    assert!(out.status.success(), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("orders: skipped: failed over") && stdout.contains("--failback"),
        "{stdout}"
    );
    assert_eq!(
        changed(&before, &snapshot(&dest_path)),
        Vec::<String>::new()
    );
    let s = status(dest);
    for p in 0..4 {
        let x = partition(&s, "orders", p);
        assert_eq!(
            (x["state"].as_str(), x["writable"].as_bool()),
            (Some("STOPPED"), Some(true))
        );
    }

    // A gate an older kmirror left open on a MIRRORING partition: never shown as open, and
    // closed in node.properties by the next run before anything else happens to it.
    let props = dest_path.join("node.properties");
    let text = std::fs::read_to_string(&props).expect("node.properties");
    let line = text
        .lines()
        .find(|l| l.starts_with("partition=pay.eu-0,"))
        .expect("pay.eu-0's line")
        .to_owned();
    let open = format!("{}1", &line[..line.len() - 1]);
    std::fs::write(&props, text.replace(&line, &open)).expect("write node.properties");
    assert_eq!(partition(&status(dest), "pay.eu", 0)["writable"], false);
    let out = mirror(&["--topics", "pay.*"]);
    assert!(out.status.success(), "{out:?}");
    let text = std::fs::read_to_string(&props).expect("node.properties");
    assert!(text.contains(&line), "the gate is closed again: {text}");

    // A failback says what it truncates and waits for --yes.
    let before = snapshot(&dest_path);
    let out = mirror(&["--topics", "orders", "--failback"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("orders-0: failback truncates all"),
        "{stdout}"
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("run again with --yes"),
        "{out:?}"
    );
    assert_eq!(
        changed(&before, &snapshot(&dest_path)),
        Vec::<String>::new()
    );
    let out = mirror(&["--topics", "orders", "--failback", "--yes"]);
    assert!(out.status.success(), "{out:?}");
    let s = status(dest);
    for p in 0..4 {
        let x = partition(&s, "orders", p);
        assert_eq!(
            (x["state"].as_str(), x["writable"].as_bool()),
            (Some("MIRRORING"), Some(false))
        );
        let (leader, _) = cluster
            .leader("orders", p as i32)
            .expect("metadata")
            .expect("leader");
        let source = segment_bytes(&cluster.partition_dir(leader, "orders", p as i32));
        let copy = segment_bytes(&dest_path.join("data").join(format!("orders-{p}")));
        assert!(
            copy == source,
            "orders-{p}: the failback copied the source again"
        );
    }
    eprintln!("reruns and failback checked after {:?}", started.elapsed());

    // A following mirror sees the source change within its refresh.
    let follower_log = tmp.path().join("lifecycle.stdout");
    let mut follower = Command::new(env!("CARGO_BIN_EXE_kmirror"))
        .args([
            "mirror",
            "--source-bootstrap",
            &bootstrap,
            "--topics",
            "orders,pay.*",
            "--dest",
            dest,
            "--metadata-refresh-ms",
            "1000",
        ])
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&follower_log).expect("log"))
        .stderr(Stdio::null())
        .spawn()
        .expect("kmirror mirror starts");
    live_cluster(
        &oracle,
        &bootstrap,
        &[
            "create:pay.us:2:3",
            "plain:pay.us:2:3",
            "grow:pay.eu:5",
            "plain:pay.eu:1:2",
        ],
    );
    let s = wait_status(
        dest,
        60,
        "pay.us and pay.eu's new partitions mirrored",
        |s| {
            let topics = s["topics"].as_array().expect("topics");
            let topic = |name: &str| topics.iter().find(|t| t["topic"] == name);
            topic("pay.us").is_some_and(|t| t["partitions"] == 2 && t["lag_total"] == 0)
                && topic("pay.eu").is_some_and(|t| t["partitions"] == 5 && t["lag_total"] == 0)
        },
    );
    for (topic, count) in [("pay.us", 2), ("pay.eu", 5)] {
        for p in 0..count {
            assert_eq!(partition(&s, topic, p)["state"], "MIRRORING");
            let (leader, _) = cluster
                .leader(topic, p as i32)
                .expect("metadata")
                .expect("leader");
            let source = segment_bytes(&cluster.partition_dir(leader, topic, p as i32));
            let copy = segment_bytes(&dest_path.join("data").join(format!("{topic}-{p}")));
            assert!(copy == source, "{topic}-{p} equals its source replica");
        }
    }
    eprintln!(
        "new topic and partitions mirrored after {:?}",
        started.elapsed()
    );

    // A paused topic's lag is measured while the source moves on.
    let out = kmirror_ok(&["pause", "--dest", dest, "--topics", "pay.eu", "--quiet"]);
    assert!(out.contains("pause: 1 topic paused"), "{out}");
    live_cluster(&oracle, &bootstrap, &["plain:pay.eu:1:3"]);
    wait_status(dest, 30, "the paused topic's lag measured", |s| {
        s["topics"]
            .as_array()
            .expect("topics")
            .iter()
            .any(|t| t["topic"] == "pay.eu" && t["lag_total"] == 15)
    });

    // A topic deleted at the source: its partitions go FAILED for good.
    live_cluster(&oracle, &bootstrap, &["delete:pay.us"]);
    // (A fetch may fail it first, retryably, with UNKNOWN_TOPIC_ID.)
    wait_status(dest, 60, "pay.us FAILED for good", |s| {
        (0..2).all(|p| {
            let x = partition(s, "pay.us", p);
            x["state"] == "FAILED"
                && x["error"]
                    .as_str()
                    .is_some_and(|e| e.contains("source topic was deleted"))
        })
    });

    // SIGTERM: the destination is closed as on a normal end.
    let terminated = Command::new("kill")
        .args(["-TERM", &follower.id().to_string()])
        .status()
        .expect("kill -TERM");
    assert!(terminated.success());
    let exit = follower.wait().expect("kmirror mirror ends");
    let log = std::fs::read_to_string(&follower_log).unwrap_or_default();
    assert!(exit.code().is_some(), "{exit}: {log}");
    assert!(
        log.contains("stopped by a signal (closed cleanly)"),
        "{log}"
    );
    assert!(log.contains("pay.us: found at the source"), "{log}");
    let s = status(dest);
    for p in s["partitions"].as_array().expect("partitions") {
        assert_eq!(p["high_watermark"], p["log_end_offset"], "{p}");
    }
    let epochs = std::fs::read_to_string(dest_path.join("data/pay.eu-4/leader-epoch-checkpoint"))
        .expect("epoch checkpoint");
    assert!(
        epochs.lines().count() > 2,
        "an entry for the mirrored epoch: {epochs}"
    );
    // Restarted, the deleted topic stays FAILED.
    let out = mirror(&["--topics", "pay.eu"]);
    assert!(out.status.code() == Some(1), "{out:?}");
    for p in 0..2 {
        assert_eq!(partition(&status(dest), "pay.us", p)["state"], "FAILED");
    }
    eprintln!("done after {:?}", started.elapsed());
}
