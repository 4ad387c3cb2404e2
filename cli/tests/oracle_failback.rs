//! The KIP's whole loop on the wire with Kafka's Java clients (`-- --include-ignored oracle`):
//! a live 3-broker Apache Kafka 4.4.0 cluster K is mirrored into node A (serving); A fails over
//! and Kafka's producer writes to it; node B mirrors A over the wire and fails over; the
//! producer writes to A (what B never copies) and to B; A fails back from B. A asks B for the
//! LME (`ReadMirrorStates`), truncates exactly the records B never had (counted: not the whole
//! log), and every partition of A ends byte for byte equal to B's.

use std::path::Path;
use std::time::{Duration, Instant};

use kmirror_testsupport::jvm::Oracle;
use kmirror_testsupport::kafka_broker::KafkaCluster;
use serde_json::Value;

mod serving;

use serving::{java, kmirror_ok, Serving};

const CLIENTS: &str = "dev.kmirror.oracle.ServeClients";

/// Each partition's read (`read_uncommitted`) of `orders` at `bootstrap`.
fn read(oracle: &Oracle, bootstrap: &str) -> Vec<Value> {
    java(
        oracle,
        CLIENTS,
        bootstrap,
        &["read:orders:read_uncommitted"],
    )
    .into_iter()
    .filter(|l| l.get("digest").is_some())
    .collect()
}

/// Waits until `orders` at `mirror` reads as at `source`.
fn wait_equal(oracle: &Oracle, mirror: &str, source: &str) {
    let want = read(oracle, source);
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let got = read(oracle, mirror);
        if got == want {
            return;
        }
        assert!(Instant::now() < deadline, "{got:?}\nvs\n{want:?}");
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// Kafka's idempotent producer writes `n` records to `orders` at `bootstrap`, acked.
fn produce(oracle: &Oracle, bootstrap: &str, n: usize) {
    let written = java(
        oracle,
        CLIENTS,
        bootstrap,
        &[&format!("produce:orders:{n}:true")],
    );
    assert_eq!(written[0]["acked"], n, "{written:?}");
}

/// The bytes of every segment of `orders-<partition>` in the node destination `dest`.
fn log_bytes(dest: &Path, partition: i32) -> Vec<u8> {
    let dir = dest.join("data").join(format!("orders-{partition}"));
    let mut segments: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "log"))
        .collect();
    segments.sort();
    segments
        .iter()
        .flat_map(|p| std::fs::read(p).expect("segment"))
        .collect()
}

#[test]
#[ignore = "needs Java 17 and Maven; run with `-- --include-ignored oracle`"]
fn oracle_failback_two_nodes_fail_over_and_back_truncating_only_what_the_other_never_had() {
    let Some(oracle) = Oracle::for_tests(
        "oracle_failback_two_nodes_fail_over_and_back_truncating_only_what_the_other_never_had",
    ) else {
        return;
    };
    let tmp = tempfile::tempdir().expect("tempdir");
    let cluster = KafkaCluster::start(&oracle, &tmp.path().join("cluster"), 3, &[])
        .unwrap_or_else(|e| panic!("{e}"));
    let k = cluster.bootstrap();
    java(
        &oracle,
        "dev.kmirror.oracle.LiveCluster",
        &k,
        &["create:orders:3:3", "plain:orders:3:4"],
    );
    let (a_path, b_path) = (tmp.path().join("a"), tmp.path().join("b"));
    let (a_dir, b_dir) = (
        a_path.to_str().expect("utf-8"),
        b_path.to_str().expect("utf-8"),
    );

    // K into A, which serves; A fails over and takes the producer.
    let a = Serving::start(&k, a_dir, "orders");
    wait_equal(&oracle, &a.address, &k);
    kmirror_ok(&["stop", "--dest", a_dir, "--topics", "orders", "--quiet"]);
    produce(&oracle, &a.address, 6);

    // B mirrors A over the wire and fails over.
    let b = Serving::start(&a.address, b_dir, "orders");
    wait_equal(&oracle, &b.address, &a.address);
    kmirror_ok(&["stop", "--dest", b_dir, "--topics", "orders", "--quiet"]);
    // What A takes after B stopped copying (B never has it), and what B takes.
    produce(&oracle, &a.address, 6);
    produce(&oracle, &b.address, 9);
    assert_eq!(a.stop(), Some(0), "A closes cleanly");

    // A fails back from B: the preview says what goes, then it runs.
    let out = kmirror_ok(&[
        "mirror",
        "--source-bootstrap",
        &b.address,
        "--topics",
        "orders",
        "--dest",
        a_dir,
        "--failback",
        "--yes",
        "--until-caught-up",
        "--quiet",
    ]);
    eprintln!("{out}");
    assert!(!out.contains("truncates all"), "{out}");
    let truncated: i64 = out
        .lines()
        .filter_map(|l| l.split_once(": failback truncates ")?.1.split_once(' '))
        .map(|(n, _)| n.parse::<i64>().expect("a count"))
        .sum();
    // Kafka's producer spreads 6 records as 2 per partition (as `oracle_serve` asserts): each
    // partition of A loses exactly those 2 records (and nothing B has).
    assert_eq!(truncated, 6, "{out}");

    assert_eq!(b.stop(), Some(0), "B closes cleanly");
    for p in 0..3 {
        let (a_log, b_log) = (log_bytes(&a_path, p), log_bytes(&b_path, p));
        assert!(!a_log.is_empty());
        assert!(
            a_log == b_log,
            "orders-{p}: A and B differ after the failback"
        );
    }
}
