//! A live 3-broker Kafka 4.4.0 cluster 50 ms of round trip away: records per second that
//! `kmirror mirror --topics` copies through the link, against Kafka's own
//! `kafka-consumer-perf-test` reading the same topics through the same link in the same run.
//!
//! Set up once, untimed: a 3-broker KRaft cluster on loopback whose every broker has a second
//! listener, `LINK`, reached only through a [`Link`](kmirror_testsupport::link::Link) proxy
//! that delays each direction by 25 ms; each broker advertises its proxy's address on `LINK`,
//! so clients that bootstrap there and follow the metadata stay behind the link
//! ([`KafkaCluster::start_behind_links`]). 10 topics `link.t00`..`link.t09` of 6 partitions,
//! replication factor 3, filled directly (not through the link) by Kafka's producer with 20,000
//! records of a 100-byte value per partition: 1,200,000 records in 60 partitions.
//!
//! - `live_link/50ms/kmirror_node_mirror`: `kmirror mirror --source-bootstrap <link addresses>
//!   --topics 'link.t*' --dest DIR --until-caught-up --quiet` into a fresh destination, in this
//!   process (the default Fetches in flight, from the round trip it measures).
//! - `live_link/50ms/kafka_consumer_perf_test` (baseline): `ConsumerPerformance` with `--include
//!   'link\.t[0-9]+'`, `--num-records 1200000`, a fresh group, read-committed, in one warm JVM.
//!
//! Reproduce: `cargo bench -p kmirror-benches --bench live_link` (Java 17 and Maven; without
//! them a `SKIPPED` banner and nothing measured).

use std::process::Stdio;
use std::time::Duration;

use criterion::{criterion_group, Criterion, SamplingMode, Throughput};
use kmirror_testsupport::jvm::Oracle;
use kmirror_testsupport::kafka_broker::KafkaCluster;
use kmirror_testsupport::link::LinkOptions;

#[path = "support/bench_main.rs"]
mod bench_main;
#[path = "support/kmirror_cli.rs"]
mod kmirror_cli;
#[path = "support/perf_test.rs"]
mod perf_test;
use kmirror_cli::kmirror_mirror;
use perf_test::{java, PerfTest};

const TOPICS: usize = 10;
const PER_TOPIC: u64 = 6;
const RECORDS_PER_PARTITION: u64 = 20_000;
const VALUE_BYTES: usize = 100;
const ONE_WAY: Duration = Duration::from_millis(25);

fn live_link(c: &mut Criterion) {
    let oracle = match Oracle::build() {
        Ok(oracle) => oracle,
        Err(error) => {
            eprintln!(
                "\n========== SKIPPED: live_link ==========\n{error}\nThe benchmark needs \
                 Java 17+ and Maven (Apache Kafka 4.4.0's jars); nothing was measured.\n\
                 ========================================\n"
            );
            return;
        }
    };
    let work = tempfile::tempdir().expect("a temp dir");
    let link = LinkOptions {
        one_way_delay: ONE_WAY,
        ..LinkOptions::default()
    };
    let cluster =
        KafkaCluster::start_behind_links(&oracle, &work.path().join("cluster"), 3, &[], link)
            .unwrap_or_else(|e| panic!("{e}"));
    let mut steps: Vec<String> = (0..TOPICS)
        .map(|t| format!("create:link.t{t:02}:{PER_TOPIC}:3"))
        .collect();
    steps.extend(
        (0..TOPICS).map(|t| format!("fill:link.t{t:02}:{RECORDS_PER_PARTITION}:{VALUE_BYTES}")),
    );
    let output = java(&oracle, "dev.kmirror.oracle.LiveCluster")
        .arg(cluster.bootstrap())
        .args(&steps)
        .stdin(Stdio::null())
        .output()
        .expect("java starts");
    assert!(
        output.status.success(),
        "LiveCluster failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let behind = cluster.link_bootstrap();
    let records = TOPICS as u64 * PER_TOPIC * RECORDS_PER_PARTITION;
    let mut perf = PerfTest::start(&oracle, &behind);
    let mut group = c.benchmark_group("live_link/50ms");
    group.sampling_mode(SamplingMode::Flat);
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(60));
    group.throughput(Throughput::Elements(records));
    let mut run = 0;
    group.bench_function("kmirror_node_mirror", |b| {
        b.iter_custom(|iters| {
            (0..iters)
                .map(|_| {
                    run += 1;
                    let dest = work.path().join(format!("dest-{run}"));
                    let t = kmirror_mirror(&behind, "link.t*", &dest);
                    std::fs::remove_dir_all(&dest).expect("removed");
                    t
                })
                .sum()
        })
    });
    group.bench_function("kafka_consumer_perf_test", |b| {
        b.iter_custom(|iters| {
            (0..iters)
                .map(|_| perf.run("50ms", ["--include", "link\\.t[0-9]+"], records))
                .sum()
        })
    });
    group.finish();
    drop(perf);
    drop(cluster);
}

criterion_group!(benches, live_link);

fn main() {
    bench_main::run("", benches);
}
