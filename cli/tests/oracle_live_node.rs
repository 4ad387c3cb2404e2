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

use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use kmirror_testsupport::jvm::Oracle;
use kmirror_testsupport::kafka_broker::KafkaCluster;
use kmirror_testsupport::oracle_support::run;
use serde_json::Value;

fn kmirror(args: &[&str]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_kmirror"));
    command.args(args);
    run(command, Duration::from_secs(180))
}

fn kmirror_ok(args: &[&str]) -> String {
    let output = kmirror(args);
    assert!(
        output.status.success(),
        "kmirror {args:?} failed: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

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
        String::from_utf8_lossy(&out.stderr).contains("audit.* matches no topic"),
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
