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
//! Both tools run in one warm JVM (`ConsumerPerfBench.java`), so no run pays a JVM start. The
//! ratios of the criterion medians are printed at the end. Without `java` and `mvn` the bench
//! prints a `SKIPPED` banner and measures nothing.
//!
//! Reproduce: `cargo bench -p kmirror-benches --bench serve`.

use std::path::Path;
use std::process::{ExitCode, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use clap::Parser;
use criterion::{criterion_group, Criterion, SamplingMode, Throughput};
use kmirror::log_cli::SystemClock;
use kmirror_harness::node::{NodeDriver, NodeDriverOptions, NodeUntil};
use kmirror_harness::serve::ServeOptions;
use kmirror_testsupport::jvm::Oracle;
use kmirror_testsupport::kafka_broker::KafkaCluster;

#[path = "support/perf_test.rs"]
mod perf_test;
use perf_test::{java, PerfTest};

/// Partitions of each topic, records per partition of `serve.data`, and the value size.
const PARTITIONS: u64 = 6;
const RECORDS_PER_PARTITION: u64 = 50_000;
const VALUE_BYTES: usize = 100;
/// Records each producer run writes.
const PRODUCED: u64 = 100_000;

/// The argument parser of the `kmirror` binary's log commands.
#[derive(Parser)]
struct Kmirror {
    #[command(subcommand)]
    command: kmirror::log_cli::LogCommand,
}

/// Runs one `kmirror` command in this process.
fn kmirror(args: &[&str]) {
    let cli = Kmirror::try_parse_from(args).expect("valid arguments");
    let code = kmirror::log_cli::run(cli.command).unwrap_or_else(|e| panic!("kmirror: {e}"));
    assert_eq!(code, ExitCode::SUCCESS, "kmirror {args:?}");
}

/// The destination served on a thread until dropped.
struct Served {
    address: String,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Served {
    fn start(dest: &Path) -> Served {
        let mut driver =
            NodeDriver::open(dest, None, NodeDriverOptions::default()).expect("opened");
        let address = driver
            .serve_clients(&ServeOptions::new("127.0.0.1:0"))
            .expect("listening")
            .to_string();
        let stop = Arc::new(AtomicBool::new(false));
        driver.interrupt_on(stop.clone());
        let thread = std::thread::spawn(move || {
            driver
                .run(
                    &mut SystemClock,
                    NodeUntil::Forever { poll_ms: 200 },
                    &mut |_, _| {},
                )
                .expect("serves");
            driver.close().expect("closed");
        });
        Served {
            address,
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn setup(oracle: &Oracle, bootstrap: &str, dest: &Path) {
    let steps = [
        format!("create:serve.data:{PARTITIONS}:1"),
        format!("create:serve.produce:{PARTITIONS}:1"),
        format!("fill:serve.data:{RECORDS_PER_PARTITION}:{VALUE_BYTES}"),
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
    kmirror(&[
        "kmirror",
        "mirror",
        "--source-bootstrap",
        bootstrap,
        "--topics",
        "serve.*",
        "--dest",
        dest,
        "--until-caught-up",
        "--quiet",
    ]);
    kmirror(&[
        "kmirror",
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
    drop(tools);
    drop(served);
    drop(cluster);
}

criterion_group!(benches, serve);

fn main() {
    // Only under `cargo bench` (`--bench`): a test build runs nothing.
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    benches();
    criterion::Criterion::default()
        .configure_from_args()
        .final_summary();
}
