//! Kafka's own Java clients against `kmirror mirror --topics ... --listen` (`-- --include-ignored
//! oracle`): a live 3-broker Apache Kafka 4.4.0 cluster is mirrored into a node destination
//! that serves Kafka's protocol while it mirrors.
//!
//! Kafka's Java consumer reads every partition of the serving mirror, read-committed and
//! read-uncommitted, with the same offsets, keys and values as from the source (a digest per
//! partition); Kafka's idempotent producer is refused while the topic is MIRRORING, and after
//! `kmirror stop --topics` (which reaches the running mirror through its control channel) it
//! writes, its records after the `MIRROR_PID_RESET` marker.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use kmirror_testsupport::jvm::Oracle;
use kmirror_testsupport::kafka_broker::KafkaCluster;
use kmirror_testsupport::oracle_support::run;
use serde_json::Value;

fn kmirror_ok(args: &[&str]) -> String {
    let mut command = Command::new(env!("CARGO_BIN_EXE_kmirror"));
    command.args(args);
    let output = run(command, Duration::from_secs(180));
    assert!(
        output.status.success(),
        "kmirror {args:?} failed: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// A Java program of the oracle: its JSON lines.
fn java(oracle: &Oracle, class: &str, bootstrap: &str, steps: &[&str]) -> Vec<Value> {
    let mut command = oracle.command(class);
    command.arg(bootstrap).args(steps);
    let output = run(command, Duration::from_secs(180));
    assert!(
        output.status.success(),
        "{class} {steps:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect()
}

/// A `kmirror mirror` that follows the source and serves clients; its listen address.
struct Serving {
    child: Child,
    address: String,
}

impl Serving {
    fn start(bootstrap: &str, dest: &str, topics: &str) -> Serving {
        let mut child = Command::new(env!("CARGO_BIN_EXE_kmirror"))
            .args([
                "mirror",
                "--source-bootstrap",
                bootstrap,
                "--topics",
                topics,
                "--dest",
                dest,
                "--listen",
                "127.0.0.1:0",
                "--poll-ms",
                "50",
                "--quiet",
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("kmirror mirror starts");
        let stdout = child.stdout.take().expect("stdout");
        let (send, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                eprintln!("mirror: {line}");
                if send.send(line).is_err() {
                    return;
                }
            }
        });
        let deadline = Instant::now() + Duration::from_secs(60);
        let address = loop {
            let line = lines
                .recv_timeout(deadline.saturating_duration_since(Instant::now()))
                .expect("the mirror says where it serves clients");
            if let Some(rest) = line.strip_prefix("serving Kafka clients on ") {
                break rest.split_whitespace().next().expect("address").to_owned();
            }
        };
        std::thread::spawn(move || for _ in lines {});
        Serving { child, address }
    }

    /// SIGTERM, then the exit status (a clean close is 0).
    fn stop(mut self) -> Option<i32> {
        let pid = self.child.id().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        self.child.wait().expect("wait").code()
    }
}

/// The `read` lines of one topic, by partition, without the step name.
fn reads(lines: &[Value]) -> Vec<Value> {
    lines
        .iter()
        .filter(|l| l["step"] == "read")
        .cloned()
        .collect()
}

#[test]
#[ignore = "needs Java 17 and Maven; run with `-- --include-ignored oracle`"]
fn oracle_serve_java_clients_read_a_serving_mirror_and_write_after_a_stop() {
    let Some(oracle) =
        Oracle::for_tests("oracle_serve_java_clients_read_a_serving_mirror_and_write_after_a_stop")
    else {
        return;
    };
    let tmp = tempfile::tempdir().expect("tempdir");
    let cluster = KafkaCluster::start(&oracle, &tmp.path().join("cluster"), 3, &[])
        .unwrap_or_else(|e| panic!("{e}"));
    let bootstrap = cluster.bootstrap();
    java(
        &oracle,
        "dev.kmirror.oracle.LiveCluster",
        &bootstrap,
        &[
            "create:orders:3:3",
            "plain:orders:3:4",
            "commit:orders:tx-orders-1:3",
            "abort:orders:tx-orders-2:2",
            "plain:orders:2:3",
        ],
    );
    let dest_path = tmp.path().join("west");
    let dest = dest_path.to_str().expect("utf-8 path");
    let serving = Serving::start(&bootstrap, dest, "orders");

    // 1. Kafka's consumer reads the same records from the mirror as from the source, in both
    //    isolation levels (the mirror follows: retried until it caught up).
    let steps = ["read:orders:read_committed", "read:orders:read_uncommitted"];
    let source = reads(&java(
        &oracle,
        "dev.kmirror.oracle.ServeClients",
        &bootstrap,
        &steps,
    ));
    assert_eq!(source.len(), 6, "{source:?}");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let mirror = reads(&java(
            &oracle,
            "dev.kmirror.oracle.ServeClients",
            &serving.address,
            &steps,
        ));
        if mirror == source {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the mirror's records differ from the source's:\n{mirror:?}\n{source:?}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    let committed: i64 = source[..3]
        .iter()
        .map(|l| l["records"].as_i64().unwrap())
        .sum();
    let uncommitted: i64 = source[3..]
        .iter()
        .map(|l| l["records"].as_i64().unwrap())
        .sum();
    assert_eq!(
        uncommitted - committed,
        3 * 2,
        "the aborted records are skipped"
    );

    // 2. Kafka's idempotent producer is refused while the topic is MIRRORING.
    let refused = java(
        &oracle,
        "dev.kmirror.oracle.ServeClients",
        &serving.address,
        &["produce:orders:6:true"],
    );
    assert_eq!(refused[0]["acked"], 0, "{refused:?}");

    // 3. `kmirror stop` reaches the running mirror; the producer then writes after the
    //    MIRROR_PID_RESET marker of each partition.
    let out = kmirror_ok(&["stop", "--dest", dest, "--topics", "orders", "--quiet"]);
    assert!(out.contains("1 topic stopped"), "{out}");
    let written = java(
        &oracle,
        "dev.kmirror.oracle.ServeClients",
        &serving.address,
        &["produce:orders:6:true"],
    );
    assert_eq!(written[0]["acked"], 6, "{written:?}");
    for line in &source[3..] {
        let p = line["partition"].as_i64().unwrap().to_string();
        let end = line["end"].as_i64().unwrap();
        assert_eq!(
            written[0]["offsets"][&p],
            serde_json::json!([end + 1, end + 2]),
            "orders-{p}: the new records follow the marker at {end}: {written:?}"
        );
    }
    let after = reads(&java(
        &oracle,
        "dev.kmirror.oracle.ServeClients",
        &serving.address,
        &["read:orders:read_committed"],
    ));
    for (a, s) in after.iter().zip(&source[..3]) {
        assert_eq!(
            a["records"].as_i64().unwrap(),
            s["records"].as_i64().unwrap() + 2,
            "{a} after {s}"
        );
    }
    assert_eq!(
        serving.stop(),
        Some(0),
        "SIGTERM closes the serving mirror cleanly"
    );
}
