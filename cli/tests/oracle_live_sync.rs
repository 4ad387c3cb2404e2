//! The metadata sync from a live Apache Kafka 4.4.0 broker (`-- --include-ignored oracle`).
//!
//! One single-node KRaft broker with the `StandardAuthorizer` serves the whole test. Kafka's own
//! clients write the source's metadata (`LiveGroup`: topic config overrides and ACLs through
//! `Admin`, committed offsets through a `KafkaConsumer` in a classic and in a KIP-848 consumer
//! group, and a forged commit beyond the log end through `alterConsumerGroupOffsets`);
//! `kmirror mirror --topics` copies the partition into a node destination, `kmirror sync
//! --source-bootstrap` copies the metadata, `kmirror stop` fails over, and Kafka's consumer of
//! the group, served by `kmirror serve`, resumes on the destination exactly at the synced
//! offset. A second node (`kmirror mirror --topics --sync-interval-ms`) gets the same metadata
//! from the mirroring process itself.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use kmirror_testsupport::oracle_support::run;

use kmirror_harness::sync::local::MetadataDir;
use kmirror_harness::sync::MetadataSource;
use kmirror_harness::wire::{KafkaMetadataSource, MetadataSourceOptions};
use kmirror_kernel::sync::group_offsets::TopicPartition;
use kmirror_kernel::types::Offset;
use kmirror_testsupport::jvm::Oracle;
use kmirror_testsupport::kafka_broker::KafkaBroker;
use serde_json::Value;

mod serving;
use serving::Serving;

const TOPIC: &str = "orders";
/// Records produced to the source: 4 batches of 5.
const RECORDS: Offset = 20;
/// Records the group `billing` consumes on the source before the sync.
const BEFORE_SYNC: Offset = 7;
/// Records it consumes on the source after the last sync, before the failover.
const AFTER_SYNC: Offset = 5;

/// A Java oracle program (`LiveProducer`, `LiveGroup`) on `bootstrap` and [`TOPIC`]: the JSON
/// line of each step.
fn java(oracle: &Oracle, program: &str, bootstrap: &str, steps: &[&str]) -> Vec<Value> {
    let mut command = oracle.command(&format!("dev.kmirror.oracle.{program}"));
    command.arg(bootstrap).arg(TOPIC).args(steps);
    let output = run(command, Duration::from_secs(120));
    assert!(
        output.status.success(),
        "{program} {steps:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l:?}: {e}")))
        .collect()
}

/// `LiveGroup STEPS` whose consumers stay in their groups: the JSON lines up to its
/// `holding` line, and the running process (kill it when done).
fn java_holding(
    oracle: &Oracle,
    bootstrap: &str,
    steps: &[&str],
    log: &Path,
) -> (Vec<Value>, std::process::Child) {
    let log_file = std::fs::File::create(log).expect("LiveGroup log file");
    let mut command = oracle.command("dev.kmirror.oracle.LiveGroup");
    command
        .arg(bootstrap)
        .arg(TOPIC)
        .args(steps)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::from(log_file));
    let mut child = command.spawn().expect("LiveGroup starts");
    let stdout = child.stdout.take().expect("piped");
    let mut lines = Vec::new();
    for line in std::io::BufRead::lines(std::io::BufReader::new(stdout)) {
        let line = line.expect("LiveGroup output");
        let value: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{line:?}: {e}"));
        if value["step"] == "holding" {
            return (lines, child);
        }
        lines.push(value);
    }
    let _ = child.kill();
    let _ = child.wait();
    panic!(
        "LiveGroup {steps:?} ended before holding its members: {lines:?}; see {}",
        log.display()
    );
}

/// `kmirror ARGS`: exit code, stdout, stderr.
fn kmirror(args: &[&str]) -> (i32, String, String) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_kmirror"));
    command.args(args);
    let output = run(command, Duration::from_secs(120));
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

fn kmirror_ok(args: &[&str]) -> String {
    let (code, out, err) = kmirror(args);
    assert_eq!(code, 0, "kmirror {args:?}: {out}{err}");
    out
}

/// The offset of `group` on partition 0 of [`TOPIC`] in the destination's metadata.
fn committed(dir: &Path, group: &str) -> Option<Offset> {
    let groups = MetadataDir::of(dir)
        .read_groups()
        .expect("destination groups read");
    groups
        .value
        .get(group)
        .and_then(|g| g.offsets.get(&TopicPartition::new(TOPIC, 0)))
        .copied()
}

/// The scenario on a live broker: configs, group offsets (classic and KIP-848 groups)
/// and ACLs synced with `kmirror sync --source-bootstrap`, hostile items rejected one by one,
/// a failover, and the group resuming on the destination exactly at the synced offset (no
/// record skipped, duplicates bounded by what it consumed on the source after the sync); then
/// no sync after the stop.
#[test]
#[ignore = "needs Java 17 and Maven; run with `-- --include-ignored oracle`"]
fn oracle_live_sync_group_resumes_after_failover() {
    let Some(oracle) = Oracle::for_tests("oracle_live_sync_group_resumes_after_failover") else {
        return;
    };
    let started = Instant::now();
    let tmp = tempfile::tempdir().expect("temp dir");
    let mut broker = KafkaBroker::start(
        &oracle,
        &tmp.path().join("broker"),
        &[
            (
                "authorizer.class.name",
                "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            ),
            ("super.users", "User:ANONYMOUS"),
            ("allow.everyone.if.no.acl.found", "true"),
        ],
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let bootstrap = broker.bootstrap();
    eprintln!("broker up at {bootstrap} after {:?}", started.elapsed());

    // The source: records, then its metadata written with Kafka's own clients.
    let produced = java(
        &oracle,
        "LiveProducer",
        &bootstrap,
        &["create", "plain:4:5"],
    );
    assert_eq!(produced[1]["last_offset"].as_i64(), Some(RECORDS - 1));
    let before = format!("consume:billing:{BEFORE_SYNC}:classic");
    let steps = java(
        &oracle,
        "LiveGroup",
        &bootstrap,
        &[
            "config:retention.ms=86400000",
            "config:max.message.bytes=200000",
            "config:min.insync.replicas=1",
            "config:segment.ms=soon",
            "acl:User:app-billing,TOPIC,orders,READ,ALLOW",
            "acl:User:app-billing,GROUP,billing,READ,ALLOW",
            "acl:User:mallory,TOPIC,orders,ALL,ALLOW",
            &before,
            "consume:audit:3:consumer",
            "commit:forged:1000",
        ],
    );
    let accepted: Vec<bool> = steps[..4]
        .iter()
        .map(|s| s["accepted"].as_bool().expect("accepted"))
        .collect();
    // Kafka validates topic configs itself: a value that does not parse never reaches a live
    // source (the kernel's rejection of one is covered by the local tests).
    assert_eq!(accepted, [true, true, true, false], "{steps:?}");
    eprintln!("Kafka refuses segment.ms=soon: {}", steps[3]["error"]);
    assert_eq!(
        steps[7]["committed"].as_i64(),
        Some(BEFORE_SYNC),
        "{steps:?}"
    );
    assert_eq!(steps[8]["committed"].as_i64(), Some(3), "{steps:?}");
    // Kafka's OffsetCommit does not check offsets against the log: 1000 beyond an LEO of 20.
    assert_eq!(steps[9]["committed"].as_i64(), Some(1000), "{steps:?}");

    // What the wire source reads.
    let mut source = KafkaMetadataSource::new(&bootstrap, TOPIC, MetadataSourceOptions::default());
    let tp = TopicPartition::new(TOPIC, 0);
    assert_eq!(source.log_end_offset(&tp).expect("LEO"), RECORDS);
    let configs = source.topic_config(TOPIC).expect("configs");
    assert!(configs.rejected.is_empty(), "{:?}", configs.rejected);
    assert_eq!(
        configs.value.keys().map(String::as_str).collect::<Vec<_>>(),
        ["max.message.bytes", "min.insync.replicas", "retention.ms"]
    );
    let groups = source.groups().expect("groups");
    assert!(groups.rejected.is_empty(), "{:?}", groups.rejected);
    let offsets: Vec<(&str, Offset)> = groups
        .value
        .iter()
        .map(|(g, r)| (g.as_str(), r.offsets[&tp]))
        .collect();
    assert_eq!(
        offsets,
        [("audit", 3), ("billing", BEFORE_SYNC), ("forged", 1000)]
    );
    assert!(groups.value.values().all(|r| r.members.is_empty()));
    let acls = source.acls().expect("acls");
    assert_eq!(acls.value.len(), 3, "{:?}", acls.value);
    source.release();

    // Mirror the partition, then one sync round.
    let west = tmp.path().join("west");
    let w = west.to_str().expect("utf-8 path");
    kmirror_ok(&[
        "mirror",
        "--source-bootstrap",
        &bootstrap,
        "--topics",
        TOPIC,
        "--dest",
        w,
        "--mirror-name",
        "east",
        "--until-caught-up",
        "--quiet",
    ]);
    let sync_args = [
        "sync",
        "--source-bootstrap",
        &bootstrap,
        "--dest",
        w,
        "--acl-principals",
        "User:app-*",
    ];
    let once = [&sync_args[..], &["--once"]].concat();
    let out = kmirror_ok(&once);
    println!("{out}");
    for expected in [
        "config   orders SET max.message.bytes=200000",
        "config   orders SET retention.ms=86400000",
        "offsets  audit orders-0: commit 3 (source 3, was none)",
        &format!(
            "offsets  billing orders-0: commit {BEFORE_SYNC} (source {BEFORE_SYNC}, was none)"
        ),
        "acl      CREATE (ALLOW TOPIC:orders LITERAL User:app-billing READ from *)",
        "acl      CREATE (ALLOW GROUP:billing LITERAL User:app-billing READ from *)",
        "6 change(s) written, 2 item(s) rejected",
    ] {
        assert!(out.contains(expected), "{expected:?} missing from:\n{out}");
    }
    let rejected: Vec<&str> = out.lines().filter(|l| l.contains("REJECTED")).collect();
    assert_eq!(rejected.len(), 2, "{out}");
    assert!(
        rejected
            .iter()
            .any(|l| l.contains("\"forged\"") && l.contains("1000") && l.contains("20")),
        "{out}"
    );
    assert!(rejected.iter().any(|l| l.contains("User:mallory")), "{out}");

    // The destination holds exactly what was synced.
    let meta = MetadataDir::of(&west);
    let dest_config = meta.read_topic_config(TOPIC).expect("dest config").value;
    assert_eq!(dest_config["retention.ms"], "86400000");
    assert_eq!(dest_config["max.message.bytes"], "200000");
    assert!(!dest_config.contains_key("min.insync.replicas"));
    assert_eq!(committed(&west, "billing"), Some(BEFORE_SYNC));
    assert_eq!(committed(&west, "audit"), Some(3));
    assert_eq!(committed(&west, "forged"), None);
    let dest_acls = meta.read_acls().expect("acls.json").expect("parses");
    assert_eq!(dest_acls.created_by_mirror.len(), 2);
    assert!(dest_acls
        .bindings
        .iter()
        .all(|b| b.principal == "User:app-billing"));

    // A node destination syncs inside its mirror: the same metadata, one process.
    let node = tmp.path().join("node");
    let out = kmirror_ok(&[
        "mirror",
        "--source-bootstrap",
        &bootstrap,
        "--topics",
        TOPIC,
        "--dest",
        node.to_str().expect("utf-8 path"),
        "--mirror-name",
        "east",
        "--until-caught-up",
        "--sync-interval-ms",
        "200",
        "--acl-principals",
        "User:app-*",
    ]);
    println!("{out}");
    for expected in [
        "config   orders SET max.message.bytes=200000",
        "config   orders SET retention.ms=86400000",
        &format!(
            "offsets  billing orders-0: commit {BEFORE_SYNC} (source {BEFORE_SYNC}, was none)"
        ),
        "acl      CREATE (ALLOW GROUP:billing LITERAL User:app-billing READ from *)",
    ] {
        assert!(out.contains(expected), "{expected:?} missing from:\n{out}");
    }
    let node_meta = MetadataDir::of(&node);
    assert_eq!(
        node_meta
            .read_topic_config(TOPIC)
            .expect("node config")
            .value,
        dest_config
    );
    assert_eq!(committed(&node, "billing"), Some(BEFORE_SYNC));
    assert_eq!(committed(&node, "forged"), None);
    assert_eq!(
        node_meta.read_acls().expect("acls.json").expect("parses"),
        dest_acls
    );

    // A broker that cannot be reached stops the round, naming its address.
    let (code, out, err) = kmirror(&[
        "sync",
        "--source-bootstrap",
        "127.0.0.1:1",
        "--dest",
        w,
        "--once",
    ]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(err.contains("127.0.0.1:1"), "{err}");

    // The periodic mode: a second round changes nothing (rejections are reported again).
    let periodic = [
        &sync_args[..],
        &["--interval-ms", "200", "--max-rounds", "2"],
    ]
    .concat();
    let out = kmirror_ok(&periodic);
    println!("{out}");
    assert!(out.contains("syncing every 200 ms"), "{out}");
    assert!(
        out.lines()
            .any(|l| l.contains("0 change(s) written, 2 item(s) rejected")),
        "{out}"
    );

    // The group consumes more on the source after the last sync; then the source is lost and
    // the destination fails over.
    // Both consumers stay in their groups while the wire source reads the members
    // (DescribeGroups for the classic group, ConsumerGroupDescribe for the KIP-848 one).
    let after = format!("consume:billing:{AFTER_SYNC}:classic:stay");
    let (steps, mut members) = java_holding(
        &oracle,
        &bootstrap,
        &[&after, "consume:audit:2:consumer:stay"],
        &tmp.path().join("live-group.log"),
    );
    let source_position = BEFORE_SYNC + AFTER_SYNC;
    assert_eq!(steps[0]["first_offset"].as_i64(), Some(BEFORE_SYNC));
    assert_eq!(steps[0]["committed"].as_i64(), Some(source_position));
    let groups = source.groups().expect("groups");
    let _ = members.kill();
    let _ = members.wait();
    assert!(groups.rejected.is_empty(), "{:?}", groups.rejected);
    for (group, offset) in [("billing", source_position), ("audit", 5)] {
        let record = &groups.value[group];
        assert_eq!(record.members.len(), 1, "{group}: {record:?}");
        assert_eq!(record.offsets[&tp], offset, "{group}: {record:?}");
    }
    eprintln!(
        "members on the source: billing {:?}, audit {:?}",
        groups.value["billing"].members, groups.value["audit"].members
    );
    let out = kmirror_ok(&["stop", "--dest", w, "--topics", TOPIC, "--quiet"]);
    println!("{out}");

    // The group resumes on the destination, served to Kafka's consumer, at the synced offset:
    // it reads every record after it (the stop's MIRROR_PID_RESET at offset RECORDS is a
    // control batch it steps over).
    let served = Serving::serve(w);
    let steps = java(
        &oracle,
        "LiveGroup",
        &served.address,
        &[&format!(
            "consume:billing:{}:classic",
            RECORDS - BEFORE_SYNC
        )],
    );
    assert_eq!(served.stop(), Some(0), "serve closes cleanly");
    assert_eq!(
        steps[0]["first_offset"].as_i64(),
        Some(BEFORE_SYNC),
        "{steps:?}"
    );
    // Resuming at the synced offset re-reads what the group consumed on the source after the
    // last sync, and skips nothing.
    println!(
        "resumed at offset {BEFORE_SYNC} (the synced offset); {} record(s) re-read (consumed \
         on the source since the last sync); none skipped",
        source_position - BEFORE_SYNC
    );
    let end = committed(&west, "billing").expect("the group committed on the destination");
    assert!(end >= RECORDS, "the group read to the end: {end}");

    // After the stop the destination owns its metadata: no sync.
    let (code, out, err) = kmirror(&once);
    assert_eq!(code, 1, "{out}{err}");
    assert!(out.contains("sync of no topic"), "{out}");
    assert_eq!(committed(&west, "billing"), Some(end));

    broker.stop().unwrap_or_else(|e| panic!("{e}"));
    eprintln!("done in {:?}", started.elapsed());
}
