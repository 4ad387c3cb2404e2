//! `kmirror serve` against a Kafka broker holding the same data, with Kafka's own perf tools.
//!
//! Set up once, untimed: one Apache Kafka 4.4.0 broker on loopback ([`KafkaCluster`] of one
//! node), topic `serve.data` (6 partitions, 50,000 records of a 100-byte value each, written
//! by Kafka's producer) and topic `serve.produce` (6 empty partitions). Both are mirrored into a
//! node destination (`kmirror mirror --topics 'serve.*' --until-caught-up`), `serve.produce` is
//! failed over (`kmirror stop`), and the destination is served on a loopback port by a
//! `NodeDriver` on its own thread, as `kmirror serve` runs it.
//!
//! - `serve/consume/{kafka_broker,kmirror_serve}`: `kafka-consumer-perf-test` reads all of
//!   `serve.data` (300,000 records) with a fresh group, read-committed, from the broker
//!   (baseline) and from the serving node: metadata, group join, fetches, close.
//! - `serve/produce/{kafka_broker,kmirror_serve}`: `kafka-producer-perf-test` writes 100,000
//!   records of 100 bytes to `serve.produce` (idempotent, `acks=all`, Kafka's default
//!   batching, no throughput cap) to the broker (baseline) and to the serving node.
//!
//! - `serve/mirror/{alone,consumer_on_broker,consumer_on_kmirror}`: an in-process mirror of
//!   `serve.mirror` (6 partitions, 200,000 records of 100 bytes each) into a fresh destination
//!   that serves clients, timed from AddTopicsToMirror until caught up: alone (the baseline),
//!   while `kafka-consumer-perf-test` reads the broker's copy at full speed (what the client's
//!   own CPU costs on these two cores), and while it reads the mirror being written through the
//!   node's listener (what serving costs on top).
//!
//! Both tools run in one warm JVM (`ConsumerPerfBench.java`), so no run pays a JVM start. The
//! ratios of the criterion medians are printed at the end. Without `java` and `mvn` the bench
//! prints a `SKIPPED` banner and measures nothing.
//!
//! Reproduce: `cargo bench -p kmirror-benches --bench serve`.

use std::path::Path;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{criterion_group, Criterion, SamplingMode, Throughput};
use kmirror::log_cli::SystemClock;
use kmirror_harness::node::{NodeDriver, NodeDriverOptions, NodeUntil};
use kmirror_harness::serve::ServeOptions;
use kmirror_testsupport::jvm::Oracle;
use kmirror_testsupport::kafka_broker::KafkaCluster;

#[path = "support/bench_main.rs"]
mod bench_main;
#[path = "support/kmirror_cli.rs"]
mod kmirror_cli;
#[path = "support/perf_test.rs"]
mod perf_test;
#[path = "support/served.rs"]
mod served;
use kmirror_cli::{kmirror, kmirror_mirror};
use perf_test::{java, PerfTest};
use served::Served;

/// Partitions of each topic, records per partition of `serve.data`, and the value size.
const PARTITIONS: u64 = 6;
const RECORDS_PER_PARTITION: u64 = 50_000;
const VALUE_BYTES: usize = 100;
/// Records each producer run writes.
const PRODUCED: u64 = 100_000;
/// Records per partition of `serve.mirror`.
const MIRRORED_PER_PARTITION: u64 = 200_000;

fn setup(oracle: &Oracle, bootstrap: &str, dest: &Path) {
    let steps = [
        format!("create:serve.data:{PARTITIONS}:1"),
        format!("create:serve.produce:{PARTITIONS}:1"),
        format!("fill:serve.data:{RECORDS_PER_PARTITION}:{VALUE_BYTES}"),
        format!("create:serve.mirror:{PARTITIONS}:1"),
        format!("fill:serve.mirror:{MIRRORED_PER_PARTITION}:{VALUE_BYTES}"),
    ];
    let output = java(oracle, "dev.kmirror.oracle.LiveCluster")
        .arg(bootstrap)
        .args(&steps)
        .stdin(Stdio::null())
        .output()
        .expect("java starts");
    assert!(
        output.status.success(),
        "LiveCluster failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let dest = dest.to_str().expect("a UTF-8 path");
    kmirror_mirror(bootstrap, "serve.data,serve.produce", Path::new(dest));
    kmirror(&[
        "stop",
        "--dest",
        dest,
        "--topics",
        "serve.produce",
        "--quiet",
    ]);
}

fn serve(c: &mut Criterion) {
    let oracle = match Oracle::build() {
        Ok(oracle) => oracle,
        Err(error) => {
            eprintln!(
                "\n========== SKIPPED: serve ==========\n{error}\nThe serve benchmark needs \
                 Java 17+ and Maven (Apache Kafka 4.4.0's jars); nothing was measured.\n\
                 ====================================\n"
            );
            return;
        }
    };
    let work = tempfile::tempdir().expect("a temp dir");
    let started = Instant::now();
    let cluster = KafkaCluster::start(&oracle, &work.path().join("cluster"), 1, &[])
        .unwrap_or_else(|e| panic!("{e}"));
    let bootstrap = cluster.bootstrap();
    let dest = work.path().join("west");
    setup(&oracle, &bootstrap, &dest);
    println!(
        "serve: broker filled and mirrored after {:.1?}",
        started.elapsed()
    );
    let served = Served::start(&dest);
    let mut tools = [
        ("kafka_broker", PerfTest::start(&oracle, &bootstrap)),
        ("kmirror_serve", PerfTest::start(&oracle, &served.address)),
    ];
    let records = PARTITIONS * RECORDS_PER_PARTITION;

    let mut group = c.benchmark_group("serve/consume");
    group.sampling_mode(SamplingMode::Flat);
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(30));
    group.throughput(Throughput::Elements(records));
    for (name, tool) in &mut tools {
        group.bench_function(*name, |b| {
            b.iter_custom(|iters| {
                (0..iters)
                    .map(|_| tool.run("consume", ["--topic", "serve.data"], records))
                    .sum()
            })
        });
    }
    group.finish();

    let mut group = c.benchmark_group("serve/produce");
    group.sampling_mode(SamplingMode::Flat);
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(30));
    group.throughput(Throughput::Elements(PRODUCED));
    for (name, tool) in &mut tools {
        group.bench_function(*name, |b| {
            b.iter_custom(|iters| {
                (0..iters)
                    .map(|_| {
                        let line = format!(
                            "producer --topic serve.produce --num-records {PRODUCED} \
                             --record-size {VALUE_BYTES} --throughput -1 --producer-props \
                             bootstrap.servers={} acks=all",
                            tool.bootstrap
                        );
                        let (time, summary) = tool.ask(&line);
                        let sent: u64 = summary
                            .split_whitespace()
                            .next()
                            .and_then(|n| n.parse().ok())
                            .unwrap_or_else(|| panic!("the producer tool's summary: {summary}"));
                        assert_eq!(sent, PRODUCED, "every record acknowledged: {summary}");
                        time
                    })
                    .sum()
            })
        });
    }
    group.finish();

    let mut group = c.benchmark_group("serve/mirror");
    group.sampling_mode(SamplingMode::Flat);
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(30));
    group.throughput(Throughput::Elements(PARTITIONS * MIRRORED_PER_PARTITION));
    let mut run = 0;
    for (name, reader) in [
        ("alone", Reader::Nobody),
        ("consumer_on_broker", Reader::Broker),
        ("consumer_on_kmirror", Reader::Kmirror),
    ] {
        group.bench_function(name, |b| {
            b.iter_custom(|iters| {
                (0..iters)
                    .map(|_| {
                        run += 1;
                        mirror_once(&bootstrap, work.path(), reader, &mut tools[0].1, run)
                    })
                    .sum()
            })
        });
    }
    group.finish();
    drop(tools);
    drop(served);
    drop(cluster);
}

/// Who reads while the mirror copies `serve.mirror`.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Reader {
    Nobody,
    Broker,
    Kmirror,
}

/// One mirror of `serve.mirror` into a fresh destination under `work` that serves clients,
/// with `reader` reading at full speed meanwhile; the time from AddTopicsToMirror until caught
/// up.
fn mirror_once(
    bootstrap: &str,
    work: &Path,
    reader: Reader,
    tool: &mut PerfTest,
    run: u64,
) -> Duration {
    use kmirror_harness::clock::Clock;
    use kmirror_harness::node::{NodeDest, NodeIdle, NodeMeta};
    use kmirror_harness::wire::{SourceCluster, SourceClusterOptions, TopicSelection};
    use kmirror_kernel::node::DEFAULT_MIRROR_STATE_PARTITIONS;
    use kmirror_kernel::types::MirrorName;

    let dest = work.join(format!("mirror-{run}"));
    let selection = TopicSelection::parse("serve.mirror").expect("a selection");
    let mut source = SourceCluster::new(bootstrap, selection, SourceClusterOptions::default());
    let metadata = source.metadata().expect("metadata").clone();
    let mirror = MirrorName::new(metadata.cluster_id.expect("a cluster id").as_str())
        .expect("a mirror name");
    let meta = NodeMeta::new(Some(bootstrap.to_owned()), DEFAULT_MIRROR_STATE_PARTITIONS);
    let node_dest = NodeDest::create(&dest, meta).expect("created");
    let mut driver =
        NodeDriver::from_dest(node_dest, None, NodeDriverOptions::default()).expect("a driver");
    let address = driver
        .serve_clients(&ServeOptions::new("127.0.0.1:0"))
        .expect("listening")
        .to_string();
    let wanted: Vec<_> = metadata
        .topics
        .values()
        .map(|t| (t.name.clone(), t.topic_id, t.partitions.len() as i32))
        .collect();
    let records = PARTITIONS * MIRRORED_PER_PARTITION;
    let reading = |at: &str| {
        format!(
            "--bootstrap-server {at} --topic serve.mirror --num-records {records} --group \
             kmirror-serve-mirror-{}-{run} --hide-header --timeout 60000",
            std::process::id()
        )
    };
    match reader {
        Reader::Nobody => {}
        Reader::Broker => tool.send(&reading(bootstrap)),
        Reader::Kmirror => tool.send(&reading(&address)),
    }
    let mut clock = SystemClock;
    let start = Instant::now();
    let added = driver
        .add_topics(&mirror, &wanted, clock.now_ms())
        .expect("added");
    assert!(added.values().all(Result::is_ok), "{added:?}");
    driver.set_source(Some(source));
    let end = driver
        .run(&mut clock, NodeUntil::CaughtUp, &mut |_, _| {})
        .expect("runs");
    let elapsed = start.elapsed();
    assert_eq!(end, NodeIdle::CaughtUp);
    if reader == Reader::Kmirror {
        // The consumer reads the rest from the caught-up node, then leaves.
        let (_, csv) = std::thread::scope(|scope| {
            let stop = Arc::new(AtomicBool::new(false));
            driver.interrupt_on(stop.clone());
            let serving = scope.spawn(|| {
                driver
                    .run(
                        &mut SystemClock,
                        NodeUntil::Forever { poll_ms: 50 },
                        &mut |_, _| {},
                    )
                    .expect("serves")
            });
            let answer = tool.receive();
            stop.store(true, Ordering::Relaxed);
            serving.join().expect("the node thread");
            answer
        });
        assert!(
            csv.contains(&records.to_string()),
            "the consumer read the mirror: {csv}"
        );
    } else if reader == Reader::Broker {
        tool.receive();
    }
    driver.close().expect("closed");
    std::fs::remove_dir_all(&dest).expect("removed");
    elapsed
}

criterion_group!(benches, serve);

fn main() {
    bench_main::run("", benches);
}
