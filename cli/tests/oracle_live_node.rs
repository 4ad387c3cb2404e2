//! One `kmirror` process mirrors many topics and partitions of a live 3-broker Apache Kafka
//! 4.4.0 cluster into a node destination (`-- --include-ignored oracle`).
//!
//! Two topics (`orders`, 6 partitions, and `pay.eu`, 4, replication factor 3) written by Kafka's
//! own Java producer (plain batches, committed and aborted transactions on every partition);
//! `kmirror mirror --topics 'orders,pay.*' --until-caught-up`; every partition equals a source
//! replica's partition directory byte for byte; `kmirror stop --topics orders` fails orders
//! over (its partitions STOPPED and writable, their mirrored bytes kept, a `MIRROR_PID_RESET`
//! after them) while pay.eu stays MIRRORING; bad topics are per-topic errors that change
//! nothing.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
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
    let cluster = KafkaCluster::start(&oracle, &tmp.path().join("cluster"), 3, &[])
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
    let same = |topic: &str, count: i32, exact: bool| {
        for p in 0..count {
            let (leader, _) = cluster
                .leader(topic, p)
                .expect("metadata")
                .expect("a leader");
            let source = segment_bytes(&cluster.partition_dir(leader, topic, p));
            let copy = segment_bytes(&dest_path.join("data").join(format!("{topic}-{p}")));
            assert!(!source.is_empty(), "{topic}-{p} has data at the source");
            if exact {
                assert!(
                    copy == source,
                    "{topic}-{p} differs from broker {leader}'s replica"
                );
            } else {
                assert!(
                    copy.len() > source.len() && copy.starts_with(&source),
                    "{topic}-{p}: the mirrored bytes are kept, the stop's batch follows them"
                );
            }
        }
    };
    same("orders", 6, true);
    same("pay.eu", 4, true);

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
    same("orders", 6, false);
    same("pay.eu", 4, true);

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
    same("pay.eu", 4, true);
    let s = status(dest);
    for p in 0..6 {
        assert_eq!(partition(&s, "orders", p)["state"], "STOPPED");
    }
    eprintln!("done after {:?}", started.elapsed());
}
