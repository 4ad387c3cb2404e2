//! A live 3-broker source: records per second that `kmirror mirror --topics`
//! copies from a real Apache Kafka 4.4.0 cluster, against Kafka's own
//! `kafka-consumer-perf-test` reading the same topics from the same brokers in the same run.
//!
//! Set up once, untimed: a 3-broker KRaft cluster on loopback
//! ([`KafkaCluster`]: broker and controller in each JVM), 10 topics `perf.t00`..`perf.t09` of 6
//! partitions each, **replication factor 3** (every broker leads 20 partitions and follows 40),
//! filled by Kafka's own Java producer (`LiveCluster fill`: idempotent, `acks=all`, Kafka's
//! default batching, no compression) with 40,000 records of a 100-byte value and no key per
//! partition: 2,400,000 records in 60 partitions (the bytes are printed: about 264 MB of
//! batches). The first run of each side is checked: kmirror's destination holds every record and
//! every partition equals its source leader's segment files byte for byte; Kafka's tool read
//! every record.
//!
//! - `live_cluster/10x6/kmirror_node_mirror`: `kmirror mirror --source-bootstrap B --topics 'perf.t*' --dest DIR
//!   --until-caught-up --quiet` into a fresh destination, run in this process through the
//!   `kmirror` crate's own command code (the binary's `main` minus the process start): the
//!   topics' metadata, the node destination created, 60 partitions taken to MIRRORING, one
//!   Fetch per source broker per round (read-committed, the source cluster's defaults: 10 MiB
//!   per response, 1 MiB per partition, Kafka's replica fetcher defaults) until caught up,
//!   every batch written to the destination's segment files (`--flush kafka`: left in the
//!   page cache, fsynced at close) and `__mirror_state` written. The destination is deleted untimed.
//! - `live_cluster/10x6/kafka_consumer_perf_test` (baseline): `org.apache.kafka.tools.ConsumerPerformance` (the
//!   class behind `kafka-consumer-perf-test.sh`) with `--include 'perf\.t[0-9]+'` (4.4 reads
//!   several topics through one regex subscription), `--num-records 2400000`, a fresh
//!   `--group` per run (so from the earliest offset: `auto.offset.reset=earliest` is the tool's
//!   default), `isolation.level=read_committed` as kmirror reads, its default 1 MiB fetch size.
//!   It runs in one warm JVM (`ConsumerPerfBench.java` calls the tool's `main` once per line),
//!   timed around `main`: consumer creation, group join, fetching and decoding every record,
//!   close. It writes nothing.
//!
//! Neither side pays a process or JVM start. The tool's own figures (its `nMsg.sec`, and
//! `fetch.nMsg.sec` without the group join) are printed after criterion's, and so is kmirror's
//! time split into phases (metadata and destination created, AddTopicsToMirror, to MIRRORING,
//! fetching until caught up, close) over five more runs through the same harness calls, and the
//! ratio of five interleaved pairs (a kmirror run, then a run of the tool), which a load
//! drifting between criterion's two functions does not skew.
//!
//! `live_cluster/single_partition/*`: the same two against one topic `perf.single` of one partition
//! (replication factor 3, 400,000 records of 100 bytes): `--topics perf.single` and
//! `--topic perf.single`.
//!
//! Without `java` and `mvn` (or when the oracle cannot be built) the bench prints a loud
//! `SKIPPED` banner and measures nothing. Every broker and JVM is killed when it ends.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use criterion::{criterion_group, Criterion, SamplingMode, Throughput};
use kmirror::log_cli::SystemClock;
use kmirror_harness::clock::Clock;
use kmirror_harness::node::{
    NodeDest, NodeDriver, NodeDriverOptions, NodeIdle, NodeMeta, NodeUntil,
};
use kmirror_harness::wire::{SourceCluster, SourceClusterOptions, TopicSelection};
use kmirror_kernel::config::{MirrorConfig, StopStrategy};
use kmirror_kernel::node::DEFAULT_MIRROR_STATE_PARTITIONS;
use kmirror_kernel::state::MirrorState;
use kmirror_kernel::types::MirrorName;
use kmirror_testsupport::jvm::Oracle;
use kmirror_testsupport::kafka_broker::KafkaCluster;

#[path = "support/bench_main.rs"]
mod bench_main;
#[path = "support/kmirror_cli.rs"]
mod kmirror_cli;
#[path = "support/perf_test.rs"]
mod perf_test;
use kmirror_cli::kmirror_mirror;
use perf_test::{java, PerfTest};

/// Topics and partitions per topic of the many-topic data set.
const TOPICS: usize = 10;
const PER_TOPIC: i32 = 6;
/// Records per partition and the size of each record's value.
const RECORDS_PER_PARTITION: u64 = 40_000;
const VALUE_BYTES: usize = 100;
/// Replication factor of every topic.
const REPLICATION: i32 = 3;
/// kmirror's glob and Kafka's regex for the many-topic data set.
const GLOB: &str = "perf.t*";
const REGEX: &str = "perf\\.t[0-9]+";
/// The single-partition topic and its records.
const SINGLE: &str = "perf.single";
const SINGLE_RECORDS: u64 = 400_000;
/// Runs of kmirror's phase split after each group.
const PHASE_RUNS: usize = 5;
/// Interleaved pairs (one kmirror run, then one of the tool) after each group.
const PAIRS: usize = 5;
/// The phases `kmirror_phases` times.
const PHASES: usize = 5;

fn topic_name(t: usize) -> String {
    format!("perf.t{t:02}")
}

/// Creates the topics and fills them with Kafka's producer (`LiveCluster`).
fn produce(oracle: &Oracle, bootstrap: &str) {
    let mut steps: Vec<String> = (0..TOPICS)
        .map(|t| format!("create:{}:{PER_TOPIC}:{REPLICATION}", topic_name(t)))
        .collect();
    steps.push(format!("create:{SINGLE}:1:{REPLICATION}"));
    steps.extend((0..TOPICS).map(|t| {
        format!(
            "fill:{}:{RECORDS_PER_PARTITION}:{VALUE_BYTES}",
            topic_name(t)
        )
    }));
    steps.push(format!("fill:{SINGLE}:{SINGLE_RECORDS}:{VALUE_BYTES}"));
    let output = java(oracle, "dev.kmirror.oracle.LiveCluster")
        .arg(bootstrap)
        .args(&steps)
        .stdin(Stdio::null())
        .output()
        .expect("java starts");
    assert!(
        output.status.success(),
        "LiveCluster failed: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The bytes of a partition directory's `.log` segments, back to back.
fn segment_bytes(dir: &Path) -> Vec<u8> {
    let mut files: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect();
    files.sort();
    files
        .iter()
        .flat_map(|f| fs::read(f).unwrap_or_else(|e| panic!("{}: {e}", f.display())))
        .collect()
}

/// The phases of one mirror like `kmirror_mirror`'s, through the same harness calls the
/// command makes, timed apart: the source's metadata and the node destination created,
/// AddTopicsToMirror, the driver's run until every partition is MIRRORING, from there until
/// caught up, close.
fn kmirror_phases(bootstrap: &str, topics: &str, dest: &Path) -> [Duration; PHASES] {
    let start = Instant::now();
    let selection = TopicSelection::parse(topics).expect("a valid selection");
    let mut source = SourceCluster::new(bootstrap, selection, SourceClusterOptions::default());
    let metadata = source.metadata().expect("metadata").clone();
    let mirror = MirrorName::new(metadata.cluster_id.expect("a cluster id").as_str())
        .expect("a valid mirror name");
    let meta = NodeMeta::new(Some(bootstrap.to_owned()), DEFAULT_MIRROR_STATE_PARTITIONS);
    let node_dest = NodeDest::create(dest, meta).expect("created");
    let options = NodeDriverOptions {
        mirror: MirrorConfig {
            stop_strategy: StopStrategy::TruncateToLso,
            ..MirrorConfig::default()
        },
        ..NodeDriverOptions::default()
    };
    let mut driver = NodeDriver::from_dest(node_dest, None, options).expect("a driver");
    let wanted: Vec<_> = metadata
        .topics
        .values()
        .map(|t| (t.name.clone(), t.topic_id, t.partitions.len() as i32))
        .collect();
    let created = start.elapsed();
    let mut clock = SystemClock;
    let results = driver
        .add_topics(&mirror, &wanted, clock.now_ms())
        .expect("added");
    assert!(results.values().all(Result::is_ok), "{results:?}");
    driver.set_source_bootstrap(bootstrap).expect("recorded");
    driver.set_source(Some(source));
    let setup = start.elapsed();
    let mut mirroring = None;
    let end = driver
        .run(&mut clock, NodeUntil::CaughtUp, &mut |d, _| {
            if mirroring.is_none()
                && d.node().partitions().count() > 0
                && d.node()
                    .partitions()
                    .all(|(_, p)| p.state() == MirrorState::Mirroring)
            {
                mirroring = Some(start.elapsed());
            }
        })
        .expect("runs");
    assert_eq!(end, NodeIdle::CaughtUp);
    let caught_up = start.elapsed();
    driver.close().expect("closed");
    let mirroring = mirroring.expect("every partition MIRRORING");
    [
        created,
        setup - created,
        mirroring - setup,
        caught_up - mirroring,
        start.elapsed() - caught_up,
    ]
}

/// Checks a destination `kmirror_mirror` made: every partition of `topics` (name, partition
/// count) MIRRORING with `records` records each and byte for byte its source leader's
/// segments. Returns the bytes mirrored.
fn check_dest(cluster: &KafkaCluster, dest: &Path, topics: &[(String, i32)], records: u64) -> u64 {
    let driver =
        NodeDriver::open(dest, None, NodeDriverOptions::default()).expect("the destination opens");
    let status = driver.status();
    driver.close().expect("closed");
    let partitions: i32 = topics.iter().map(|(_, n)| n).sum();
    assert_eq!(status.partitions.len(), partitions as usize);
    let mut bytes = 0;
    for p in &status.partitions {
        assert_eq!(p.state, "MIRRORING", "{p:?}");
        assert_eq!(p.log_end_offset, records as i64, "{p:?}");
    }
    for (topic, count) in topics {
        for p in 0..*count {
            let (leader, _) = cluster
                .leader(topic, p)
                .expect("metadata")
                .expect("a leader");
            let source = segment_bytes(&cluster.partition_dir(leader, topic, p));
            let copy = segment_bytes(&dest.join("data").join(format!("{topic}-{p}")));
            assert!(
                copy == source,
                "{topic}-{p} differs from broker {leader}'s replica"
            );
            bytes += copy.len() as u64;
        }
    }
    bytes
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(f64::NAN)
}

/// One comparison: the same records read by both sides.
struct Case {
    /// The group's name (`live_cluster/<name>`).
    name: &'static str,
    /// `kmirror mirror --topics`.
    topics_arg: &'static str,
    /// The tool's topic option and its value (`--include REGEX` or `--topic NAME`).
    selection: [&'static str; 2],
    /// The topics and their partition counts.
    topics: Vec<(String, i32)>,
    /// Records in each partition.
    per_partition: u64,
}

/// The group of `case`: kmirror's node mirror and the tool, each checked on a first run.
fn compare(
    c: &mut Criterion,
    case: &Case,
    cluster: &KafkaCluster,
    perf: &mut PerfTest,
    work: &Path,
) {
    let name = case.name;
    let bootstrap = cluster.bootstrap();
    let partitions: i32 = case.topics.iter().map(|(_, n)| n).sum();
    let total = case.per_partition * partitions as u64;
    // First runs, checked.
    let dest = work.join(format!("{name}-check"));
    let took = kmirror_mirror(&bootstrap, case.topics_arg, &dest);
    let bytes = check_dest(cluster, &dest, &case.topics, case.per_partition);
    fs::remove_dir_all(&dest).expect("dest removed");
    let kafka = perf.run(name, case.selection, total);
    let mib = bytes as f64 / (1 << 20) as f64;
    println!(
        "live_cluster/{name}: {partitions} partitions, {total} records, {bytes} bytes of \
         batches ({mib:.1} MiB); first runs: kmirror {took:.2?} (every partition byte for byte \
         as its source leader's), kafka-consumer-perf-test {kafka:.2?}"
    );

    let mut group = c.benchmark_group(format!("live_cluster/{name}"));
    group.throughput(Throughput::Elements(total));
    group.sampling_mode(SamplingMode::Flat);
    group.sample_size(10);
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(10));
    let mut runs = 0u64;
    group.bench_function("kmirror_node_mirror", |b| {
        b.iter_custom(|iters| {
            let mut sum = Duration::ZERO;
            for _ in 0..iters {
                runs += 1;
                let dest = work.join(format!("{name}-{runs}"));
                sum += kmirror_mirror(&bootstrap, case.topics_arg, &dest);
                fs::remove_dir_all(&dest).expect("dest removed");
            }
            sum
        })
    });
    group.bench_function("kafka_consumer_perf_test", |b| {
        b.iter_custom(|iters| {
            (0..iters)
                .map(|_| perf.run(name, case.selection, total))
                .sum()
        })
    });
    group.finish();
    let phases: Vec<[Duration; PHASES]> = (0..PHASE_RUNS)
        .map(|i| {
            let dest = work.join(format!("{name}-phases-{i}"));
            let phases = kmirror_phases(&bootstrap, case.topics_arg, &dest);
            fs::remove_dir_all(&dest).expect("dest removed");
            phases
        })
        .collect();
    let phase = |i: usize| median(phases.iter().map(|p| p[i].as_secs_f64()).collect());
    println!(
        "live_cluster/{name}: kmirror's phases (median of {PHASE_RUNS} runs): metadata and \
         destination created {:.3} s, AddTopicsToMirror {:.3} s, to MIRRORING {:.3} s, \
         fetching until caught up {:.3} s ({:.0} records/s), close (fsync) {:.3} s",
        phase(0),
        phase(1),
        phase(2),
        phase(3),
        total as f64 / phase(3),
        phase(4)
    );
    // Under a load that drifts over minutes, pairs run back to back compare like with like.
    let mut ratios: Vec<f64> = (0..PAIRS)
        .map(|i| {
            let dest = work.join(format!("{name}-pair-{i}"));
            let mirror = kmirror_mirror(&bootstrap, case.topics_arg, &dest);
            fs::remove_dir_all(&dest).expect("dest removed");
            let tool = perf.run(name, case.selection, total);
            mirror.as_secs_f64() / tool.as_secs_f64()
        })
        .collect();
    ratios.sort_by(f64::total_cmp);
    println!(
        "live_cluster/{name}: {PAIRS} interleaved pairs, kmirror's time / the tool's: median \
         {:.2} (from {:.2} to {:.2})",
        median(ratios.clone()),
        ratios[0],
        ratios[PAIRS - 1]
    );
    let mine: Vec<(f64, f64)> = perf
        .figures
        .iter()
        .filter(|f| f.0 == name)
        .map(|f| (f.1, f.2))
        .collect();
    println!(
        "live_cluster/{name}: MiB/s = {mib:.1} MiB / median time; the tool's own figures over \
         {} runs (median): nMsg.sec {:.0}, fetch.nMsg.sec (without the group join) {:.0}",
        mine.len(),
        median(mine.iter().map(|f| f.0).collect()),
        median(mine.iter().map(|f| f.1).collect()),
    );
}

fn live_cluster(c: &mut Criterion) {
    let oracle = match Oracle::build() {
        Ok(oracle) => oracle,
        Err(error) => {
            eprintln!(
                "\n========== SKIPPED: live_cluster ==========\n{error}\n\
                 The live 3-broker benchmark needs Java 17+ and Maven (Apache Kafka 4.4.0's \
                 jars); nothing was measured.\n\
                 ===========================================\n"
            );
            return;
        }
    };
    let work = tempfile::tempdir().expect("a temp dir");
    let started = Instant::now();
    let cluster = KafkaCluster::start(&oracle, &work.path().join("cluster"), 3, &[])
        .unwrap_or_else(|e| panic!("{e}"));
    let bootstrap = cluster.bootstrap();
    println!("live_cluster: 3 brokers up after {:.1?}", started.elapsed());
    produce(&oracle, &bootstrap);
    println!(
        "live_cluster: {} topics filled by Kafka's producer after {:.1?}",
        TOPICS + 1,
        started.elapsed()
    );
    let mut perf = PerfTest::start(&oracle, &bootstrap);
    let cases = [
        Case {
            name: "10x6",
            topics_arg: GLOB,
            selection: ["--include", REGEX],
            topics: (0..TOPICS).map(|t| (topic_name(t), PER_TOPIC)).collect(),
            per_partition: RECORDS_PER_PARTITION,
        },
        Case {
            name: "single_partition",
            topics_arg: SINGLE,
            selection: ["--topic", SINGLE],
            topics: vec![(SINGLE.to_owned(), 1)],
            per_partition: SINGLE_RECORDS,
        },
    ];
    for case in &cases {
        compare(c, case, &cluster, &mut perf, work.path());
    }
    drop(perf);
    drop(cluster);
}

criterion_group!(benches, live_cluster);

fn main() {
    bench_main::run("", benches);
}
