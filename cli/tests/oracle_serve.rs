//! Kafka's own Java clients against `kmirror mirror --topics ... --listen` (`-- --include-ignored
//! oracle`): a live 3-broker Apache Kafka 4.4.0 cluster is mirrored into a node destination
//! that serves Kafka's protocol while it mirrors.
//!
//! Kafka's Java consumer reads every partition of the serving mirror, read-committed and
//! read-uncommitted, with the same offsets, keys and values as from the source (a digest per
//! partition), and so do kafka-python and librdkafka (confluent-kafka); Kafka's idempotent producer is refused while the topic is MIRRORING, and after
//! `kmirror stop --topics` (which reaches the running mirror through its control channel) it
//! writes, its records after the `MIRROR_PID_RESET` marker. A consumer group that read part of
//! the topic on the source resumes on the destination at the offsets the metadata sync
//! committed there: nothing lost, and read twice only what it read after the last synced commit.
//! Kafka's Admin client is refused adding partitions or deleting the topic while it is
//! MIRRORING (`READ_ONLY_TOPIC`); after the stop it adds a partition, which the producer
//! writes to, and deletes the topic. After a stop, Kafka's transactional producer commits one
//! transaction (with a group's offset) and aborts another, and read-committed consumers see only
//! the committed one. A node of its own (`kmirror serve --create`) takes a topic Kafka's Admin
//! client creates and Kafka's producers write, and a second node mirrors it over the wire. Kafka's
//! clients log in to a SASL listener with SCRAM-SHA-512.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use kmirror_testsupport::jvm::Oracle;
use kmirror_testsupport::kafka_broker::KafkaCluster;
use kmirror_testsupport::oracle_support::run;
use serde_json::Value;

mod serving;

use serving::{commits, java, kmirror_ok, read_group_file, wait_for_group_file, Serving};

/// `tests/clients/read_all.py` with `client` (kafka-python or confluent-kafka): its `read`
/// lines; `None` (a note on stderr) when python3 or the client library is missing outside CI.
fn python_read(client: &str, bootstrap: &str, topic: &str, isolation: &str) -> Option<Vec<Value>> {
    let module = client.replace('-', "_");
    let probe = Command::new("python3")
        .args([
            "-c",
            &format!(
                "import {}",
                if module == "kafka_python" {
                    "kafka"
                } else {
                    &module
                }
            ),
        ])
        .output();
    if !probe.is_ok_and(|o| o.status.success()) {
        assert!(
            !kmirror_testsupport::jvm::in_ci(),
            "python3 with {client} is needed under CI (`pip install {client}`)"
        );
        eprintln!("skipping the {client} reader: python3 with {client} is not installed");
        return None;
    }
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/clients/read_all.py");
    let mut command = Command::new("python3");
    command.args([script, client, bootstrap, topic, isolation]);
    let output = run(command, Duration::from_secs(120));
    assert!(
        output.status.success(),
        "{client} reader failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    Some(
        String::from_utf8_lossy(&output.stdout)
            .lines()
            .map(|l| serde_json::from_str(l).expect("a JSON line"))
            .collect(),
    )
}

/// The `read` lines of one topic, by partition, without the step name.
fn reads(lines: &[Value]) -> Vec<Value> {
    lines
        .iter()
        .filter(|l| l["step"] == "read")
        .cloned()
        .collect()
}

/// A live 3-broker Apache Kafka cluster under `dir`, given `LiveCluster` `steps` (topics and
/// records).
fn source(oracle: &Oracle, dir: &Path, steps: &[&str]) -> KafkaCluster {
    let cluster =
        KafkaCluster::start(oracle, &dir.join("cluster"), 3, &[]).unwrap_or_else(|e| panic!("{e}"));
    java(
        oracle,
        "dev.kmirror.oracle.LiveCluster",
        &cluster.bootstrap(),
        steps,
    );
    cluster
}

/// Kafka's Java consumer's `read` `steps` (both isolation levels of one 3-partition topic) on
/// the source at `bootstrap`, once the mirror serving at `address` answers them the same
/// (retried for 60 s while it catches up).
fn caught_up(oracle: &Oracle, bootstrap: &str, address: &str, steps: &[&str]) -> Vec<Value> {
    let class = "dev.kmirror.oracle.ServeClients";
    let source = reads(&java(oracle, class, bootstrap, steps));
    assert_eq!(source.len(), 6, "{source:?}");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let mirror = reads(&java(oracle, class, address, steps));
        if mirror == source {
            return source;
        }
        assert!(
            Instant::now() < deadline,
            "the mirror's records differ from the source's:\n{mirror:?}\n{source:?}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
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
    let cluster = source(
        &oracle,
        tmp.path(),
        &[
            "create:orders:3:3",
            "plain:orders:3:4",
            "commit:orders:tx-orders-1:3",
            "abort:orders:tx-orders-2:2",
            "plain:orders:2:3",
        ],
    );
    let bootstrap = cluster.bootstrap();
    // A consumer group reads part of the topic on the source and commits.
    let first = java(
        &oracle,
        "dev.kmirror.oracle.ServeClients",
        &bootstrap,
        &["group:billing:orders:20"],
    );
    assert_eq!(first[0]["read"], 20, "{first:?}");
    let dest_path = tmp.path().join("west");
    let dest = dest_path.to_str().expect("utf-8 path");
    let serving = Serving::start(&bootstrap, dest, "orders");

    // 1. Kafka's consumer reads the same records from the mirror as from the source, in both
    //    isolation levels (the mirror follows: retried until it caught up).
    let steps = ["read:orders:read_committed", "read:orders:read_uncommitted"];
    let source = caught_up(&oracle, &bootstrap, &serving.address, &steps);
    // kafka-python and librdkafka (confluent-kafka) read the same records from the mirror.
    for client in ["kafka-python", "confluent-kafka"] {
        for (isolation, expected) in [
            ("read_committed", &source[..3]),
            ("read_uncommitted", &source[3..]),
        ] {
            let Some(lines) = python_read(client, &serving.address, "orders", isolation) else {
                continue;
            };
            assert_eq!(lines.len(), 3, "{client}: {lines:?}");
            for (got, want) in lines.iter().zip(expected) {
                for field in ["partition", "records", "first", "last", "digest"] {
                    assert_eq!(
                        got[field], want[field],
                        "{client} {isolation}: {got} vs {want}"
                    );
                }
            }
        }
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

    // The group's offsets reach the destination (the metadata sync, every 500 ms); then the
    // group reads more on the source and commits again, which the sync may or may not see
    // before the failover: those records are the only ones the group may read twice.
    let synced = wait_for_group_file(&dest_path, "billing");
    let second = java(
        &oracle,
        "dev.kmirror.oracle.ServeClients",
        &bootstrap,
        &["group:billing:orders:10"],
    );
    assert_eq!(second[0]["read"], 10, "{second:?}");

    // 2. Kafka's idempotent producer is refused while the topic is MIRRORING.
    let refused = java(
        &oracle,
        "dev.kmirror.oracle.ServeClients",
        &serving.address,
        &["produce:orders:6:true"],
    );
    assert_eq!(refused[0]["acked"], 0, "{refused:?}");
    // So is Kafka's Admin client, adding partitions or deleting the topic: a mirror's
    // partitions and existence are the source's (134 is GROUP_DELETION_FAILED to a 4.4 client;
    // the message is kmirror's).
    let admin = java(
        &oracle,
        "dev.kmirror.oracle.ServeClients",
        &serving.address,
        &["grow:orders:4", "delete:orders"],
    );
    assert_eq!(admin.len(), 2, "{admin:?}");
    for line in &admin {
        assert!(
            line["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("READ_ONLY_TOPIC")),
            "{line}"
        );
    }

    // 3. `kmirror stop` reaches the running mirror; the producer then writes after the
    //    MIRROR_PID_RESET marker of each partition.
    let at_stop = read_group_file(&dest_path, "billing").unwrap_or(synced);
    let out = kmirror_ok(&["stop", "--dest", dest, "--topics", "orders", "--quiet"]);
    assert!(out.contains("1 topic stopped"), "{out}");

    // 4. The same group, pointed at the destination, resumes at the synced offsets: nothing
    //    lost, and read twice only what it read on the source after the last synced commit.
    let resumed = java(
        &oracle,
        "dev.kmirror.oracle.ServeClients",
        &serving.address,
        &["group:billing:orders:100000"],
    );
    let source_last = commits(&second[0]);
    let mut duplicates = 0;
    for line in &source[..3] {
        let p = line["partition"].as_i64().unwrap();
        let offsets: Vec<i64> = resumed[0]["offsets"][p.to_string()]
            .as_array()
            .map(|a| a.iter().map(|o| o.as_i64().unwrap()).collect())
            .unwrap_or_default();
        let start = at_stop.get(&p).copied().unwrap_or(0);
        let last = line["last"].as_i64().unwrap();
        if start <= last {
            assert_eq!(
                offsets.first(),
                Some(&start),
                "orders-{p} resumes at {start}"
            );
        }
        assert!(
            offsets.last().is_none_or(|o| *o == last),
            "orders-{p} is read to its last committed record {last}: {offsets:?}"
        );
        let committed_on_source = source_last.get(&p).copied().unwrap_or(start);
        duplicates += offsets.iter().filter(|o| **o < committed_on_source).count();
    }
    assert!(
        duplicates <= 10,
        "only what was read after the last synced commit is read twice ({duplicates})"
    );
    eprintln!("group failover: {duplicates} record(s) read twice (at most 10)");
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

    // 5. Failed over, the topic is a regular topic: Kafka's Admin client adds a partition
    //    (written STOPPED by the kernel: it never mirrored), the producer writes to it, and the
    //    topic is deleted.
    let steps = ["grow:orders:4", "produce:orders:8:true", "delete:orders"];
    let regular = java(
        &oracle,
        "dev.kmirror.oracle.ServeClients",
        &serving.address,
        &steps,
    );
    assert_eq!(regular.len(), 3, "{regular:?}");
    assert_eq!(regular[0]["error"], Value::Null, "{regular:?}");
    assert_eq!(regular[1]["acked"], 8, "{regular:?}");
    assert_eq!(
        regular[1]["offsets"]["3"],
        serde_json::json!([0, 1]),
        "the new partition's first records: {regular:?}"
    );
    assert_eq!(regular[2]["error"], Value::Null, "{regular:?}");
    assert!(
        !dest_path.join("data/orders-0").exists(),
        "the deleted topic's directories are gone"
    );
    assert_eq!(
        serving.stop(),
        Some(0),
        "SIGTERM closes the serving mirror cleanly"
    );
}

#[test]
#[ignore = "needs Java 17 and Maven; run with `-- --include-ignored oracle`"]
fn oracle_serve_a_transactional_java_producer_commits_and_aborts_after_a_stop() {
    let Some(oracle) = Oracle::for_tests(
        "oracle_serve_a_transactional_java_producer_commits_and_aborts_after_a_stop",
    ) else {
        return;
    };
    let tmp = tempfile::tempdir().expect("tempdir");
    let cluster = source(
        &oracle,
        tmp.path(),
        &["create:payments:3:3", "plain:payments:3:4"],
    );
    let bootstrap = cluster.bootstrap();
    let dest_path = tmp.path().join("west");
    let dest = dest_path.to_str().expect("utf-8 path");
    let serving = Serving::start(&bootstrap, dest, "payments");
    let steps = [
        "read:payments:read_committed",
        "read:payments:read_uncommitted",
    ];
    let source = caught_up(&oracle, &bootstrap, &serving.address, &steps);
    let out = kmirror_ok(&["stop", "--dest", dest, "--topics", "payments", "--quiet"]);
    assert!(out.contains("1 topic stopped"), "{out}");

    // Kafka's transactional producer (transaction version 1: the node does not advertise 2)
    // commits 6 records with group `ledger`'s offset, then aborts 6 more.
    let txn = java(
        &oracle,
        "dev.kmirror.oracle.ServeClients",
        &serving.address,
        &["txn:payments:6:ledger"],
    );
    assert_eq!(txn.len(), 1, "{txn:?}");
    assert_eq!(txn[0]["committed"], 6, "{txn:?}");
    assert_eq!(txn[0]["aborted"], 6, "{txn:?}");
    assert_eq!(txn[0]["errors"], serde_json::json!({}), "{txn:?}");
    assert_eq!(
        txn[0]["group_offsets"],
        serde_json::json!({"0": 6}),
        "the committed transaction's offset is the group's: {txn:?}"
    );
    assert_eq!(
        read_group_file(&dest_path, "ledger"),
        Some([(0, 6)].into()),
        "kept in the destination's group file"
    );

    // Read committed: the committed records only (2 a partition); read uncommitted: both
    // transactions' (4 a partition). The log holds, after the source's records, the
    // MIRROR_PID_RESET marker, 2 records and a COMMIT marker, 2 records and an ABORT marker.
    let after = reads(&java(
        &oracle,
        "dev.kmirror.oracle.ServeClients",
        &serving.address,
        &steps,
    ));
    assert_eq!(after.len(), 6, "{after:?}");
    for (i, (a, s)) in after.iter().zip(&source).enumerate() {
        let added = if i < 3 { 2 } else { 4 };
        assert_eq!(a["partition"], s["partition"]);
        assert_eq!(
            a["records"].as_i64().unwrap(),
            s["records"].as_i64().unwrap() + added,
            "{a} after {s}"
        );
        assert_eq!(
            a["end"].as_i64().unwrap(),
            s["end"].as_i64().unwrap() + 7,
            "{a}: the LSO is the log end offset once both transactions ended"
        );
    }
    assert_eq!(
        serving.stop(),
        Some(0),
        "SIGTERM closes the serving mirror cleanly"
    );
}

#[test]
#[ignore = "needs Java 17 and Maven; run with `-- --include-ignored oracle`"]
fn oracle_serve_a_node_of_its_own_is_created_written_and_mirrored_with_kafkas_clients() {
    let Some(oracle) = Oracle::for_tests(
        "oracle_serve_a_node_of_its_own_is_created_written_and_mirrored_with_kafkas_clients",
    ) else {
        return;
    };
    let tmp = tempfile::tempdir().expect("tempdir");
    let east_path = tmp.path().join("east");
    let east = Serving::new_node(east_path.to_str().expect("utf-8 path"), &[]);
    let class = "dev.kmirror.oracle.ServeClients";

    // Kafka's Admin client creates the topic (a second time: TopicExistsException), an
    // idempotent producer writes it at once, a transactional one commits and aborts.
    let lines = java(
        &oracle,
        class,
        &east.address,
        &[
            "create:events:3",
            "create:events:3",
            "produce:events:30:true",
            "txn:events:6:ledger",
        ],
    );
    assert_eq!(lines.len(), 4, "{lines:?}");
    assert_eq!(lines[0]["error"], Value::Null, "{lines:?}");
    assert_eq!(lines[1]["error"], "TopicExistsException", "{lines:?}");
    assert_eq!(lines[1]["message"], "Topic 'events' already exists.");
    assert_eq!(lines[2]["acked"], 30, "{lines:?}");
    assert_eq!(
        (&lines[3]["committed"], &lines[3]["aborted"]),
        (&serde_json::json!(6), &serde_json::json!(6)),
        "{lines:?}"
    );

    // A second node mirrors it from east's listener and serves the same records, both
    // isolation levels, partition for partition.
    let west_path = tmp.path().join("west");
    let west = Serving::start(&east.address, west_path.to_str().unwrap(), "events");
    let steps = ["read:events:read_committed", "read:events:read_uncommitted"];
    let read = caught_up(&oracle, &east.address, &west.address, &steps);
    let committed: i64 = read[..3]
        .iter()
        .map(|r| r["records"].as_i64().unwrap())
        .sum();
    let uncommitted: i64 = read[3..]
        .iter()
        .map(|r| r["records"].as_i64().unwrap())
        .sum();
    assert_eq!((committed, uncommitted), (36, 42), "{read:?}");
    assert_eq!(west.stop(), Some(0));
    assert_eq!(east.stop(), Some(0), "SIGTERM closes kmirror serve cleanly");
}

/// Kafka's Java clients log in to a SASL_PLAINTEXT listener with SCRAM-SHA-512 (the node
/// checks their proofs, they check its signature), create a topic, write and read it.
#[test]
#[ignore = "needs Java 17 and Maven; run with `-- --include-ignored oracle`"]
fn oracle_serve_java_clients_log_in_with_scram() {
    let Some(oracle) = Oracle::for_tests("oracle_serve_java_clients_log_in_with_scram") else {
        return;
    };
    let tmp = tempfile::tempdir().expect("tempdir");
    let listener = tmp.path().join("listener.properties");
    std::fs::write(
        &listener,
        "security.protocol=SASL_PLAINTEXT\nsasl.enabled.mechanisms=SCRAM-SHA-512\n\
         sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required \
         user_alice=\"alice-secret\";\n",
    )
    .expect("listener config");
    let client = tmp.path().join("client.properties");
    std::fs::write(
        &client,
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n\
         sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \
         username=\"alice\" password=\"alice-secret\";\n",
    )
    .expect("client config");
    let dest = tmp.path().join("east");
    let listener = listener.to_str().expect("utf-8 path");
    let node = Serving::new_node(
        dest.to_str().expect("utf-8 path"),
        &["--listener-config", listener],
    );
    let config = format!("config:{}", client.display());
    let lines = java(
        &oracle,
        "dev.kmirror.oracle.ServeClients",
        &node.address,
        &[
            &config,
            "create:events:2",
            "produce:events:10:true",
            "read:events:read_committed",
        ],
    );
    assert_eq!(lines[0]["error"], Value::Null, "{lines:?}");
    assert_eq!(lines[1]["acked"], 10, "{lines:?}");
    let read: i64 = reads(&lines)
        .iter()
        .map(|r| r["records"].as_i64().unwrap())
        .sum();
    assert_eq!(read, 10, "{lines:?}");
    assert_eq!(node.stop(), Some(0));
}
