//! Log operations against the size of the leader-epoch cache, and LME truncation against the
//! size of the log.
//!
//! `epoch_cache/{op}/{n}`: kmirror's [`EpochCache`] with n = 10, 1,000 and 100,000 entries
//! (epoch i starting at offset i * 10^12), each operation timed on its own (the clock read
//! around it included; `clock` is that cost alone), state restored untimed between operations:
//! - `assign`: a new latest epoch (removed again untimed);
//! - `truncate_end`: the latest entry removed (re-added untimed);
//! - `truncate_start`: the log start moved up by one offset (the first entry replaced);
//! - `end_offset_for`: the middle epoch.
//!
//! Baseline, same run: the same operations through Apache Kafka 4.4.0's `LeaderEpochFileCache`
//! (`kafka/{mode}/{op}/{n}`), timed by `oracle/.../EpochCacheBench.java` with `System.nanoTime`
//! after JIT warm-up and handed to criterion with `iter_custom`. Mode `memory` discards Kafka's
//! checkpoint writes (its in-memory work only, the like-for-like comparison); mode `file` is the
//! cache as Kafka uses it, whose `assign` writes and fsyncs the checkpoint file before returning
//! (truncations schedule their flush on a background thread; it runs untimed here). Without
//! `java` and `mvn` the Kafka side is skipped with a loud message.
//!
//! `lme_truncation/{batches}`: PREPARING's LME truncation on a [`MemLog`] of 16 KiB batches
//! holding 10 MiB, 1 GiB and 10 GiB of data (642 to 655,360 batch headers, a new epoch every
//! 64 batches): `end_offset_for` of the LME (the second-to-last epoch) and `truncate_to` the
//! start of the last epoch, on an O(1) clone of the log.

use std::hint::black_box;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Stdio};
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use kmirror_kernel::batch::BatchHeader;
use kmirror_kernel::epoch_cache::{EpochCache, EpochEntry};
use kmirror_kernel::log::{LogView, PartitionLog};
use kmirror_kernel::mem_log::MemLog;
use kmirror_testsupport::jvm::Oracle;

/// Offsets between the start offsets of consecutive epochs (as in `EpochCacheBench.java`).
const SPACING: i64 = 1_000_000_000_000;
/// Cache sizes measured.
const SIZES: [usize; 3] = [10, 1_000, 100_000];
/// The operations, named as `EpochCacheBench.java` names them.
const OPS: [&str; 5] = [
    "clock",
    "assign",
    "truncate_end",
    "truncate_start",
    "end_offset_for",
];

/// A cache of `n` entries: epoch i starts at i * SPACING.
fn cache_of(n: usize) -> EpochCache {
    EpochCache::from_entries((0..n).map(|i| EpochEntry {
        epoch: i as i32,
        start_offset: i as i64 * SPACING,
    }))
    .expect("increasing entries")
}

/// Runs `iters` operations `op` on `cache` (of `n` entries), timing each alone.
fn run_op(cache: &mut EpochCache, n: usize, op: &str, iters: u64, log_start: &mut i64) -> Duration {
    let n_epoch = n as i32;
    let latest_start = (n as i64 - 1) * SPACING;
    let mut total = Duration::ZERO;
    for _ in 0..iters {
        match op {
            "clock" => {
                let t0 = Instant::now();
                total += t0.elapsed();
            }
            "assign" => {
                let t0 = Instant::now();
                black_box(cache.assign(n_epoch, n as i64 * SPACING).expect("valid"));
                total += t0.elapsed();
                cache.truncate_from_end(n as i64 * SPACING);
            }
            "truncate_end" => {
                let t0 = Instant::now();
                black_box(cache.truncate_from_end(latest_start));
                total += t0.elapsed();
                cache.assign(n_epoch - 1, latest_start).expect("valid");
            }
            "truncate_start" => {
                *log_start += 1;
                assert!(
                    *log_start < SPACING,
                    "truncate_start ran past the first entry"
                );
                let t0 = Instant::now();
                black_box(cache.truncate_from_start(*log_start));
                total += t0.elapsed();
            }
            "end_offset_for" => {
                let t0 = Instant::now();
                black_box(cache.end_offset_for(black_box(n_epoch / 2), n as i64 * SPACING));
                total += t0.elapsed();
            }
            other => panic!("unknown op {other}"),
        }
    }
    total
}

/// `EpochCacheBench.java` running in a JVM.
struct Kafka {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    _dir: tempfile::TempDir,
}

impl Kafka {
    /// Starts the JVM, or says loudly why the Kafka side is skipped.
    fn start() -> Option<Kafka> {
        let oracle = match Oracle::build() {
            Ok(oracle) => oracle,
            Err(error) => {
                eprintln!(
                    "\n========== SKIPPED: Kafka's LeaderEpochFileCache ==========\n{error}\n\
                     The kafka/* baselines did NOT run; only kmirror's figures follow.\n\
                     ===========================================================\n"
                );
                return None;
            }
        };
        let dir = tempfile::tempdir().expect("a temp dir");
        let mut child = oracle
            .command("dev.kmirror.oracle.EpochCacheBench")
            .arg(dir.path())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("java starts");
        let stdin = child.stdin.take().expect("piped stdin");
        let stdout = BufReader::new(child.stdout.take().expect("piped stdout"));
        Some(Kafka {
            child,
            stdin,
            stdout,
            _dir: dir,
        })
    }

    fn request(&mut self, line: &str) -> String {
        writeln!(self.stdin, "{line}").expect("the JVM reads");
        self.stdin.flush().expect("the JVM reads");
        let mut answer = String::new();
        self.stdout.read_line(&mut answer).expect("the JVM answers");
        answer.trim().to_owned()
    }

    fn setup(&mut self, n: usize, mode: &str) {
        assert_eq!(self.request(&format!("setup {n} {mode}")), "ok");
    }

    fn run(&mut self, op: &str, iters: u64) -> Duration {
        let answer = self.request(&format!("run {op} {iters}"));
        Duration::from_nanos(
            answer
                .parse()
                .unwrap_or_else(|_| panic!("nanos, got {answer}")),
        )
    }
}

impl Drop for Kafka {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn epoch_cache(c: &mut Criterion) {
    let mut kafka = Kafka::start();
    for n in SIZES {
        let mut group = c.benchmark_group("epoch_cache");
        group.warm_up_time(Duration::from_secs(1));
        group.measurement_time(Duration::from_secs(2));
        for op in OPS {
            let mut cache = cache_of(n);
            let mut log_start = 0;
            group.bench_function(format!("kmirror/{op}/{n}"), |b| {
                b.iter_custom(|iters| run_op(&mut cache, n, op, iters, &mut log_start))
            });
        }
        if let Some(kafka) = kafka.as_mut() {
            for mode in ["memory", "file"] {
                kafka.setup(n, mode);
                // An fsync per `assign` takes milliseconds: fewer samples.
                group.sample_size(if mode == "file" { 10 } else { 100 });
                for op in OPS {
                    if mode == "file" && matches!(op, "clock" | "end_offset_for") {
                        continue; // no checkpoint write: the same as in memory
                    }
                    group.bench_function(format!("kafka/{mode}/{op}/{n}"), |b| {
                        b.iter_custom(|iters| kafka.run(op, iters))
                    });
                }
            }
        }
        group.finish();
    }
}

/// Batches of 16 KiB per GiB.
const BATCHES_PER_GIB: usize = 65_536;
/// Batches per leader epoch in the LME truncation logs.
const BATCHES_PER_EPOCH: usize = 64;

/// A log of `batches` single-record batch headers (each standing for 16 KiB of data), a new
/// epoch every `BATCHES_PER_EPOCH` batches.
fn big_log(batches: usize) -> MemLog {
    let mut log = MemLog::new();
    let headers: Vec<BatchHeader> = (0..batches)
        .map(|i| BatchHeader::plain(i as i64, i as i64, (i / BATCHES_PER_EPOCH) as i32))
        .collect();
    for chunk in headers.chunks(10_000) {
        log.append_as_follower(chunk).expect("contiguous batches");
    }
    log
}

fn lme_truncation(c: &mut Criterion) {
    let mut group = c.benchmark_group("lme_truncation");
    group.sample_size(20);
    for (label, batches) in [
        ("10MiB", BATCHES_PER_GIB / 102),
        ("1GiB", BATCHES_PER_GIB),
        ("10GiB", BATCHES_PER_GIB * 10),
    ] {
        let log = big_log(batches);
        let latest = log.epoch_cache().latest_epoch().expect("epochs");
        let lme_epoch = latest - 1;
        group.bench_function(format!("{label}/{batches}_batches"), |b| {
            b.iter_batched(
                || log.clone(),
                |mut log| {
                    let leo = log.log_end_offset();
                    let end = log.epoch_cache().end_offset_for(lme_epoch, leo).end_offset;
                    log.truncate_to(end).expect("truncates");
                    log
                },
                BatchSize::SmallInput,
            )
        });
    }
    group.finish();
}

criterion_group!(benches, epoch_cache, lme_truncation);
criterion_main!(benches);
