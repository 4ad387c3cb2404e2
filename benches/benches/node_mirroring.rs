//! The data path at node scale: bytes per second mirrored by the
//! [`NodeDriver`] into 1,000 partitions (100 topics x 10) of a node destination on real
//! segment files, `--flush kafka` and `--flush every-append`, from a fake 3-broker Kafka source on loopback
//! (`support/fake_source.rs`: in-memory partitions served over the Kafka protocol, the
//! records sent from memory without a user-space copy, as a broker sends them zero-copy).
//!
//! Each partition holds 16 batches of 500 synthetic records (11,858 bytes each; Kafka's
//! default `batch.size` is 16 KiB): 1,000 partitions, 16,000 batches, 189,732,000 bytes
//! (181 MiB). Each sample builds
//! a fresh destination untimed and brings its 1,000 partitions to MIRRORING against the empty
//! source (each partition's leader epoch 1, above the source batches' epoch 0, so no epoch bump
//! comes with the data); then the source gets its data at once and the timed part runs: fetch
//! rounds (one Fetch per source broker, 10 MiB per response and 1 MiB per partition, Kafka's
//! replica fetcher defaults; 100 batches per partition at most) until every partition has everything,
//! then `close` (every segment fsynced). The destination is deleted untimed. Every fetching
//! variant uses one client of the source kept warm across samples ([`WarmSource`]), as a
//! running process keeps its connections: the response buffers (up to 10 MiB per broker, two
//! per connection with fetch-ahead) are allocated and page-faulted once, by the first run, not
//! by each sample.
//!
//! - `node_mirror_kafka`: the above (fetch-ahead on, the default).
//! - `node_mirror_kafka_3_replicas`: the same on a node created with `--replicas 3`: every
//!   partition's two in-process followers copy each round's appends from the leader before the
//!   round goes on, and the close fsyncs their logs too (the bytes counted are the mirrored
//!   ones, so its throughput against `node_mirror_kafka`'s is what the followers cost).
//! - `node_mirror_kafka_steady`: a mirror already running: each sample's untimed setup also
//!   mirrors every partition's first batch, closes the driver and opens it again (so each
//!   partition's leader-epoch entry is on disk, as in any mirror past its first flush); the
//!   timed part mirrors the other 15 batches of each partition (169.6 MiB) and closes. Its
//!   throughput against the baselines' (which copy all 16 batches, so their fixed costs are
//!   spread over 1/15 more bytes) is the steady-state ratio.
//! - `node_mirror_kafka_steady_serial`: the same with fetch-ahead off
//!   (`NodeDriverOptions::fetch_ahead`): fetching and writing take turns.
//! - `node_mirror_kafka_steady_small_answers` and `..._serial`: the running mirror with each
//!   partition's answer capped at four batches (`partition_max_bytes` 48 KiB), so that every
//!   answer but the last leaves more at the source, as in a backlog larger than one answer:
//!   four rounds carry data, each read ahead while the last is written (or not, `_serial`).
//! - `node_mirror_every_append`: the same with `--flush every-append` (each partition's append
//!   of each round fdatasynced before the round goes on).
//! - `raw_copy_same_writes` (baseline, same run): the same bytes written into 1,000 fresh
//!   segment files under the same directory layout, one `write` per partition per fetch round
//!   as the driver's group commit does, in the same round order, then every file fdatasynced
//!   and closed the way [`NodeDriver::close`] closes its logs: in partition order, split into
//!   consecutive chunks over up to [`CLOSE_THREADS`] threads. The destination side of the
//!   mirror with no decision, no parsing, no index, no checkpoint and no network.
//! - `raw_copy_with_first_checkpoints` (decomposition, same run): the raw copy plus what a new
//!   destination cannot skip: each partition's first `leader-epoch-checkpoint` (epoch 0 from
//!   offset 0), written as the driver's close writes it, right after the partition's data is
//!   fdatasynced (a `.tmp` file written and fsynced, renamed, the directory fsynced).
//! - `raw_copy_with_first_checkpoints_in_background` (decomposition, same run): the same
//!   checkpoints handed to a pool of [`CLOSE_THREADS`] threads as each partition's first bytes
//!   are written, and waited for before the close: what writing them during the fetch rounds
//!   instead of at close would gain.
//! - `fetch_only` (decomposition, same run): the same fetch rounds through
//!   [`SourceCluster::fetch`] with nothing written: the wire protocol, the fake broker and the
//!   client's batch parsing (CRC-32C checked), which the raw copy does not pay.
//! - `mm2_style` (baseline, same run): what a consumer-producer pair (MirrorMaker 2) does with
//!   the same data: the same fetch rounds through [`SourceCluster::fetch`] (the consumer),
//!   every record of every batch decoded and a new batch encoded from them with a recomputed
//!   CRC-32C ([`RawBatch::encode`], the producer), one write per partition per round into the
//!   same 1,000 fresh files, then every file fdatasynced on threads as the raw copy does. No
//!   producer network and no broker on the
//!   destination side: a lower bound on MM2's cost.
//!
//! The time to bring the 1,000 partitions to MIRRORING on real files (the state writes, each
//! fsynced) is printed once, before criterion runs.
//!
//! `NODE_MIRRORING_FETCH_MAX_MIB=<n>` sets each Fetch response's `max_bytes` in MiB (default
//! the source cluster's, 10; Kafka's consumer default is 50).
//!
//! Two environment variables help find where the time goes. `NODE_MIRRORING_SPLIT=1` prints
//! each sample's split: the mirror's fetch rounds and close, the raw copy's writes and close,
//! and the CPU time the process used in the timed part (the mirror's threads, the fake
//! brokers', the baselines'; not the kernel's writeback). `NODE_MIRRORING_PERF=<control
//! fifo>,<ack fifo>` lets `perf record -D -1 --control=fifo:<control fifo>,<ack fifo>` sample
//! only the timed part of the mirror's and the raw copy's samples (the recipe: BENCHMARKS.md,
//! `node_mirroring`).

#[path = "support/bench_main.rs"]
mod bench_main;
#[path = "support/fake_source.rs"]
mod fake_source;
#[path = "support/node_setup.rs"]
mod node_setup;

use std::cell::Cell;
use std::fs;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use criterion::{criterion_group, Criterion, Throughput};
use fake_source::{back_to_back, uniform_topics, FakeSource, FakeTopic};
use kmirror_harness::file_log::{FlushPolicy, LEADER_EPOCH_FILE};
use kmirror_harness::node::driver::CLOSE_THREADS;
use kmirror_harness::node::{NodeDriver, NodeDriverOptions};
use kmirror_harness::record_batch::RawBatch;
use kmirror_harness::segment;
use kmirror_harness::wire::source_cluster::{CurrentLeaderEpoch, PartitionFetchRequest};
use kmirror_harness::wire::{SourceCluster, SourceClusterOptions, TopicSelection};
use kmirror_kernel::batch::BatchHeader;
use kmirror_kernel::checkpoint;
use kmirror_kernel::config::FetchIsolation;
use kmirror_kernel::epoch_cache::EpochCache;
use kmirror_kernel::types::TopicId;

/// Topics and partitions per topic.
const TOPICS: u64 = 100;
const PER_TOPIC: i32 = 10;
const PARTITIONS: usize = TOPICS as usize * PER_TOPIC as usize;
/// Batches per partition and records per batch.
const BATCHES: i64 = 16;
const RECORDS: i64 = 500;
/// Source brokers.
const BROKERS: i32 = 3;

fn topic_name(t: u64) -> String {
    format!("t{t:03}")
}

fn topic_id(t: u64) -> TopicId {
    TopicId::from_u64(0x6b6d_0000 + t)
}

/// The source: every partition its own copy of the same 16 batches (epoch 0), leaders spread
/// over the brokers.
fn source_topics() -> Vec<FakeTopic> {
    let batches: Vec<RawBatch> = (0..BATCHES)
        .map(|b| {
            let header = BatchHeader::plain(b * RECORDS, (b + 1) * RECORDS - 1, 0);
            RawBatch::synthesize(&header, 1_700_000_000_000).expect("batch")
        })
        .collect();
    let (one, ends) = back_to_back(&batches);
    uniform_topics(
        TOPICS,
        PER_TOPIC,
        BROKERS,
        |t| (topic_name(t), topic_id(t)),
        &ends,
        || Bytes::from(one.clone()),
    )
}

/// The most bytes a partition's answer holds in the `small_answers` variants: four batches.
const SMALL_ANSWER_BYTES: i32 = 48 << 10;

/// Each Fetch response's `max_bytes` in MiB: `NODE_MIRRORING_FETCH_MAX_MIB`, by default the
/// source cluster's (10, Kafka's replica fetcher default).
fn fetch_max_mib() -> i32 {
    match std::env::var("NODE_MIRRORING_FETCH_MAX_MIB") {
        Err(_) => SourceClusterOptions::default().fetch_max_bytes >> 20,
        Ok(v) => v
            .parse()
            .ok()
            .filter(|m| (1..=1024).contains(m))
            .unwrap_or_else(|| {
                panic!("NODE_MIRRORING_FETCH_MAX_MIB={v:?}: expected whole MiB from 1 to 1024")
            }),
    }
}

fn source_options() -> SourceClusterOptions {
    SourceClusterOptions {
        fetch_max_wait_ms: 0,
        fetch_max_bytes: fetch_max_mib() << 20,
        ..SourceClusterOptions::default()
    }
}

/// The fake source and one client of it kept warm between samples, as a running mirror keeps
/// its connections: each broker's response buffers are allocated (and page-faulted) once, by
/// the warm-up run, not by every sample. The fake's side reuses its send buffer per connection
/// likewise.
struct WarmSource<'a> {
    fake: &'a FakeSource,
    options: SourceClusterOptions,
    warm: Cell<Option<SourceCluster>>,
}

impl<'a> WarmSource<'a> {
    fn new(fake: &'a FakeSource, options: SourceClusterOptions) -> Self {
        WarmSource {
            fake,
            options,
            warm: Cell::new(None),
        }
    }

    /// The warm client (a new one the first time).
    fn take(&self) -> SourceCluster {
        self.warm.take().unwrap_or_else(|| {
            let names: Vec<String> = (0..TOPICS).map(topic_name).collect();
            let selection = TopicSelection::names(&names).expect("valid names");
            SourceCluster::new(&self.fake.bootstrap(), selection, self.options)
        })
    }

    /// Keeps `cluster` warm for the next sample.
    fn give_back(&self, cluster: Option<SourceCluster>) {
        if let Some(cluster) = cluster {
            self.warm.set(Some(cluster));
        }
    }
}

/// A node destination at `root` with every partition MIRRORING against the empty source;
/// returns the driver and the time it took from creating the destination.
fn mirroring_dest(
    source: &WarmSource,
    root: &Path,
    options: &NodeDriverOptions,
) -> (NodeDriver, Duration) {
    mirroring_dest_replicated(source, root, options, 1)
}

/// [`mirroring_dest`] on a node with `replicas` replicas of every partition.
fn mirroring_dest_replicated(
    source: &WarmSource,
    root: &Path,
    options: &NodeDriverOptions,
    replicas: u32,
) -> (NodeDriver, Duration) {
    let fake = source.fake;
    fake.set_filled(false);
    let start = Instant::now();
    let topics: Vec<(String, TopicId, i32)> = (0..TOPICS)
        .map(|t| (topic_name(t), topic_id(t), PER_TOPIC))
        .collect();
    let driver = node_setup::mirroring_dest(
        root,
        &fake.bootstrap(),
        &topics,
        source.take(),
        options.clone(),
        replicas,
    );
    (driver, start.elapsed())
}

/// [`mirroring_dest`], then every partition's first batch mirrored, the driver closed and the
/// destination opened again; returns the driver (every partition MIRRORING and caught up with
/// that batch).
fn steady_dest(source: &WarmSource, root: &Path, options: &NodeDriverOptions) -> NodeDriver {
    let fake = source.fake;
    let (mut driver, _) = mirroring_dest(source, root, options);
    fake.set_visible_batches(1);
    let first_batches = first_batches_bytes();
    let mut now = 500_000;
    while driver.stats().bytes < first_batches || !driver.all_caught_up() {
        now += 1;
        driver.run_once(now).expect("runs");
    }
    let cluster = driver.set_source(None);
    driver.close().expect("closed");
    let mut driver = NodeDriver::open(root, cluster, options.clone()).expect("reopened");
    while !driver.all_caught_up() {
        now += 1;
        driver.run_once(now).expect("runs");
    }
    fake.set_filled(false);
    driver
}

/// The driver's options with `flush` (fetch-ahead on, the default).
fn options(flush: FlushPolicy) -> NodeDriverOptions {
    NodeDriverOptions {
        flush,
        ..NodeDriverOptions::default()
    }
}

/// The driver's options with `flush`, fetch-ahead off: fetching and writing take turns.
fn serial_options(flush: FlushPolicy) -> NodeDriverOptions {
    NodeDriverOptions {
        fetch_ahead: false,
        ..options(flush)
    }
}

/// The bytes of every partition's first batch.
fn first_batches_bytes() -> u64 {
    let header = BatchHeader::plain(0, RECORDS - 1, 0);
    let batch = RawBatch::synthesize(&header, 1_700_000_000_000).expect("batch");
    batch.size_in_bytes() as u64 * PARTITIONS as u64
}

/// The timed part: the data mirrored, then `close`.
fn mirror(source: &WarmSource, mut driver: NodeDriver, total: u64) -> Duration {
    let fake = source.fake;
    fake.set_filled(true);
    let cpu = cpu_time();
    perf_control("enable");
    let start = Instant::now();
    node_setup::mirror_backlog(&mut driver, total);
    let rounds = start.elapsed();
    let driver_stats = driver.stats();
    source.give_back(driver.set_source(None));
    driver.close().expect("closed");
    let elapsed = start.elapsed();
    perf_control("disable");
    if std::env::var_os("NODE_MIRRORING_SPLIT").is_some() {
        let stats = driver_stats;
        println!(
            "node_mirroring: rounds {rounds:.2?}, close {:.2?}, CPU {:.2?}; {} rounds, {} source \
             fetches, {} of {} partition answers read ahead, {} fetchers' answers fed while \
             other brokers' were read",
            elapsed - rounds,
            cpu_time() - cpu,
            stats.rounds,
            stats.source_fetches,
            stats.fetched_ahead,
            stats.partition_fetches,
            stats.fed_while_fetching
        );
    }
    fake.set_filled(false);
    elapsed
}

/// Whether criterion's samples have begun (the mirror run before them, which pays the warm
/// client's first allocations, is not profiled).
static SAMPLING: AtomicBool = AtomicBool::new(false);

/// With `NODE_MIRRORING_PERF=<control fifo>,<ack fifo>`, tells a `perf record -D -1
/// --control=fifo:<control fifo>,<ack fifo>` running this benchmark to start (`enable`) or
/// stop (`disable`) sampling, and waits for its acknowledgement: the profile then holds the
/// timed part of the mirror's and the raw copy's samples only, not their untimed setup
/// (creating 1,000 partitions), which takes most of the process's time.
fn perf_control(command: &str) {
    let Some(fifos) = std::env::var_os("NODE_MIRRORING_PERF") else {
        return;
    };
    if !SAMPLING.load(Ordering::Relaxed) {
        return;
    }
    let fifos = fifos.to_string_lossy();
    let (control, ack) = fifos
        .split_once(',')
        .expect("NODE_MIRRORING_PERF is <control fifo>,<ack fifo>");
    let mut control = fs::OpenOptions::new()
        .write(true)
        .open(control)
        .expect("perf's control fifo");
    writeln!(control, "{command}").expect("perf told");
    let mut acknowledged = [0u8; 5];
    fs::File::open(ack)
        .and_then(|mut f| f.read_exact(&mut acknowledged))
        .expect("perf's acknowledgement");
}

/// The CPU time (user and system) this process's threads have used so far: the mirror's, the
/// fake brokers' and the baselines' (not the kernel's writeback threads).
#[allow(unsafe_code)]
fn cpu_time() -> Duration {
    // SAFETY: `getrusage` writes one `rusage` into the zeroed local it is given.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    let micros = |t: libc::timeval| t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64;
    Duration::from_micros(micros(usage.ru_utime) + micros(usage.ru_stime))
}

/// One fetch round's writes: (partition index, byte position in its source, length).
type Round = Vec<(usize, usize, usize)>;

/// Every partition's source bytes and the byte ranges of the writes of each fetch round the
/// driver's fetches make (the same rounds, replayed through [`SourceCluster::fetch`]).
fn fetch_rounds(source: &WarmSource) -> (Vec<Round>, Duration) {
    let fake = source.fake;
    fake.set_filled(true);
    let mut cluster = source.take();
    cluster.metadata().expect("metadata");
    let keys: Vec<(TopicId, i32)> = (0..TOPICS)
        .flat_map(|t| (0..PER_TOPIC).map(move |p| (topic_id(t), p)))
        .collect();
    let mut offsets = vec![0i64; PARTITIONS];
    let mut positions = vec![0usize; PARTITIONS];
    let mut rounds = Vec::new();
    let start = Instant::now();
    loop {
        let requests: Vec<PartitionFetchRequest> = keys
            .iter()
            .zip(&offsets)
            .map(
                |(&(topic_id, partition), &fetch_offset)| PartitionFetchRequest {
                    topic_id,
                    partition,
                    fetch_offset,
                    last_fetched_epoch: None,
                    current_leader_epoch: CurrentLeaderEpoch::FromMetadata,
                    isolation: FetchIsolation::ReadCommitted,
                    max_batches: 100,
                },
            )
            .collect();
        let mut writes = Vec::new();
        for (i, result) in cluster.fetch(&requests).into_iter().enumerate() {
            let fetched = result.outcome.expect("fetched");
            let (_, batches) = fetched.response.into_parts();
            if let Some(last) = batches.last() {
                offsets[i] = last.header().last_offset + 1;
                let len: usize = batches.iter().map(|b| b.size_in_bytes()).sum();
                writes.push((i, positions[i], len));
                positions[i] += len;
            }
        }
        if writes.is_empty() {
            break;
        }
        rounds.push(writes);
    }
    let elapsed = start.elapsed();
    source.give_back(Some(cluster));
    fake.set_filled(false);
    assert!(offsets.iter().all(|o| *o == BATCHES * RECORDS));
    (rounds, elapsed)
}

/// The leader-epoch checkpoints [`raw_copy`] writes besides the bytes.
#[derive(Clone, Copy)]
enum FirstCheckpoints {
    /// None: the baseline.
    None,
    /// Each partition's first checkpoint written at close, after its data is fdatasynced, as
    /// a new destination's log writes it at its first flush.
    AtClose,
    /// Each partition's first checkpoint written while the data is written: handed to a pool
    /// of [`CLOSE_THREADS`] threads when the partition's first bytes are, waited for before
    /// the close.
    InBackground,
}

/// The baseline: the same writes into 1,000 fresh files (directories and empty files made
/// untimed), then every file fdatasynced and closed as the driver closes its logs; with
/// `checkpoints`, also each partition's first leader-epoch checkpoint (the source's epoch 0
/// from offset 0), written as the driver writes it ([`segment::write_atomically`]).
fn raw_copy(
    root: &Path,
    sources: &[Bytes],
    rounds: &[Round],
    checkpoints: FirstCheckpoints,
) -> Duration {
    let paths = segment_paths(root);
    let cpu = cpu_time();
    perf_control("enable");
    let start = Instant::now();
    let mut files: Vec<fs::File> = paths
        .iter()
        .map(|p| fs::OpenOptions::new().append(true).open(p).expect("open"))
        .collect();
    let background = matches!(checkpoints, FirstCheckpoints::InBackground);
    let (to_pool, jobs) = mpsc::channel::<&Path>();
    let jobs = Mutex::new(jobs);
    std::thread::scope(|scope| {
        let pool: Vec<_> = (0..if background { CLOSE_THREADS } else { 0 })
            .map(|_| {
                let jobs = &jobs;
                scope.spawn(move || loop {
                    // The lock is released before the write, so the pool writes in parallel.
                    let job = jobs.lock().expect("the job queue").recv();
                    match job {
                        Ok(dir) => write_first_checkpoint(dir),
                        Err(mpsc::RecvError) => break,
                    }
                })
            })
            .collect();
        let mut started = vec![false; files.len()];
        for round in rounds {
            for &(i, at, len) in round {
                files[i]
                    .write_all(&sources[i][at..at + len])
                    .expect("write");
                if background && !std::mem::replace(&mut started[i], true) {
                    to_pool.send(partition_dir(&paths[i])).expect("the pool");
                }
            }
        }
        drop(to_pool);
        for worker in pool {
            worker.join().expect("a checkpoint thread");
        }
    });
    let dirs = matches!(checkpoints, FirstCheckpoints::AtClose)
        .then(|| paths.iter().map(|p| partition_dir(p)).collect());
    let writes = start.elapsed();
    close_files(files, dirs);
    let elapsed = start.elapsed();
    perf_control("disable");
    if std::env::var_os("NODE_MIRRORING_SPLIT").is_some() {
        println!(
            "node_mirroring: raw copy: writes {writes:.2?}, close {:.2?}, CPU {:.2?}",
            elapsed - writes,
            cpu_time() - cpu
        );
    }
    elapsed
}

/// The partition directory of a segment file.
fn partition_dir(segment: &Path) -> &Path {
    segment.parent().expect("a partition directory")
}

/// Writes a partition's first `leader-epoch-checkpoint` (epoch 0 from offset 0) the way its
/// log does: atomically, the temporary file and the directory fsynced.
fn write_first_checkpoint(dir: &Path) {
    let mut cache = EpochCache::new();
    cache.assign(0, 0).expect("a valid entry");
    segment::write_atomically(
        dir,
        LEADER_EPOCH_FILE,
        checkpoint::encode(&cache).as_bytes(),
    )
    .expect("the checkpoint written");
}

/// Fdatasyncs and closes `files` as [`NodeDriver::close`] closes its partition logs: in order,
/// split into consecutive chunks of `files.len() / CLOSE_THREADS` (rounded up), one thread
/// each; with `dirs` (one per file), each file's partition then gets its first checkpoint.
fn close_files(files: Vec<fs::File>, dirs: Option<Vec<&Path>>) {
    let per_thread = files.len().div_ceil(CLOSE_THREADS).max(1);
    let mut dirs = dirs.map(Vec::into_iter);
    let mut chunks: Vec<Vec<(fs::File, Option<&Path>)>> = Vec::new();
    let mut rest = files.into_iter();
    loop {
        let chunk: Vec<_> = rest
            .by_ref()
            .take(per_thread)
            .map(|file| (file, dirs.as_mut().and_then(Iterator::next)))
            .collect();
        if chunk.is_empty() {
            break;
        }
        chunks.push(chunk);
    }
    let close = |chunk: Vec<(fs::File, Option<&Path>)>| {
        for (file, dir) in chunk {
            file.sync_data().expect("fdatasync");
            if let Some(dir) = dir {
                write_first_checkpoint(dir);
            }
        }
    };
    if chunks.len() <= 1 {
        chunks.into_iter().for_each(close);
    } else {
        std::thread::scope(|scope| {
            let handles: Vec<_> = chunks
                .into_iter()
                .map(|chunk| scope.spawn(move || close(chunk)))
                .collect();
            for h in handles {
                h.join().expect("a closing thread");
            }
        });
    }
}

/// The MM2-style baseline: fetched, decoded, re-encoded, written (files made untimed), then
/// every file fdatasynced and closed as the driver closes its logs.
fn mm2_style(source: &WarmSource, root: &Path) -> Duration {
    let fake = source.fake;
    let paths = segment_paths(root);
    fake.set_filled(true);
    let mut cluster = source.take();
    cluster.metadata().expect("metadata");
    let keys: Vec<(TopicId, i32)> = (0..TOPICS)
        .flat_map(|t| (0..PER_TOPIC).map(move |p| (topic_id(t), p)))
        .collect();
    let start = Instant::now();
    let mut files: Vec<fs::File> = paths
        .iter()
        .map(|p| fs::OpenOptions::new().append(true).open(p).expect("open"))
        .collect();
    let mut offsets = vec![0i64; PARTITIONS];
    let mut out = Vec::new();
    loop {
        let requests: Vec<PartitionFetchRequest> = keys
            .iter()
            .zip(&offsets)
            .map(
                |(&(topic_id, partition), &fetch_offset)| PartitionFetchRequest {
                    topic_id,
                    partition,
                    fetch_offset,
                    last_fetched_epoch: None,
                    current_leader_epoch: CurrentLeaderEpoch::FromMetadata,
                    isolation: FetchIsolation::ReadCommitted,
                    max_batches: 100,
                },
            )
            .collect();
        let mut wrote = false;
        for (i, result) in cluster.fetch(&requests).into_iter().enumerate() {
            let fetched = result.outcome.expect("fetched");
            let (_, batches) = fetched.response.into_parts();
            let Some(last) = batches.last() else { continue };
            offsets[i] = last.header().last_offset + 1;
            out.clear();
            for batch in &batches {
                let records = batch.records().expect("uncompressed records");
                let copy = RawBatch::encode(&batch.header(), batch.base_timestamp(), &records)
                    .expect("re-encoded");
                out.extend_from_slice(copy.bytes());
            }
            files[i].write_all(&out).expect("write");
            wrote = true;
        }
        if !wrote {
            break;
        }
    }
    close_files(files, None);
    let elapsed = start.elapsed();
    source.give_back(Some(cluster));
    fake.set_filled(false);
    elapsed
}

/// The 1,000 empty segment files of the baselines, in the destination's layout, made
/// durable (untimed).
fn segment_paths(root: &Path) -> Vec<PathBuf> {
    (0..PARTITIONS)
        .map(|i| {
            let dir = root.join("data").join(format!(
                "{}-{}",
                topic_name(i as u64 / PER_TOPIC as u64),
                i as i32 % PER_TOPIC
            ));
            fs::create_dir_all(&dir).expect("dir");
            let path = dir.join("00000000000000000000.log");
            fs::File::create(&path).expect("file");
            // Made durable, as the driver's untimed setup makes its partitions.
            fs::File::open(&dir)
                .and_then(|d| d.sync_all())
                .expect("fsync dir");
            path
        })
        .collect()
}

fn node_mirroring(c: &mut Criterion) {
    let topics = source_topics();
    let sources: Vec<Bytes> = topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(|p| p.bytes.clone()))
        .collect();
    let total: u64 = sources.iter().map(|b| b.len() as u64).sum();
    let fake = FakeSource::start(BROKERS, topics);
    let source = WarmSource::new(&fake, source_options());
    let small_answers = WarmSource::new(
        &fake,
        SourceClusterOptions {
            partition_max_bytes: SMALL_ANSWER_BYTES,
            ..source_options()
        },
    );
    let work = tempfile::tempdir().expect("a temp dir");
    let dest = work.path().join("dest");

    let (driver, setup) = mirroring_dest(&source, &dest, &options(FlushPolicy::Kafka));
    println!(
        "node_mirroring: {PARTITIONS} partitions to MIRRORING on real files (untimed setup of \
         each sample): {setup:.2?}; {total} bytes to mirror"
    );
    let elapsed = mirror(&source, driver, total);
    println!("node_mirroring: a first mirror took {elapsed:.2?}");
    fs::remove_dir_all(&dest).expect("dest removed");
    let (rounds, _) = fetch_rounds(&source);
    println!(
        "node_mirroring: {} fetch rounds with data, {} partition writes",
        rounds.len(),
        rounds.iter().map(Vec::len).sum::<usize>()
    );

    // From here on the mirrors and raw copies are criterion's samples (profiled, when asked).
    SAMPLING.store(true, Ordering::Relaxed);
    let mut group = c.benchmark_group("node_mirroring");
    group.throughput(Throughput::Bytes(total));
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(20));
    for (name, checkpoints) in [
        ("raw_copy_same_writes", FirstCheckpoints::None),
        ("raw_copy_with_first_checkpoints", FirstCheckpoints::AtClose),
        (
            "raw_copy_with_first_checkpoints_in_background",
            FirstCheckpoints::InBackground,
        ),
    ] {
        group.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let mut sum = Duration::ZERO;
                for _ in 0..iters {
                    sum += raw_copy(&dest, &sources, &rounds, checkpoints);
                    fs::remove_dir_all(&dest).expect("dest removed");
                }
                sum
            })
        });
    }
    group.bench_function("fetch_only", |b| {
        b.iter_custom(|iters| (0..iters).map(|_| fetch_rounds(&source).1).sum())
    });
    group.bench_function("mm2_style", |b| {
        b.iter_custom(|iters| {
            let mut sum = Duration::ZERO;
            for _ in 0..iters {
                sum += mm2_style(&source, &dest);
                fs::remove_dir_all(&dest).expect("dest removed");
            }
            sum
        })
    });
    for (name, options, replicas) in [
        ("node_mirror_kafka", options(FlushPolicy::Kafka), 1),
        (
            "node_mirror_kafka_3_replicas",
            options(FlushPolicy::Kafka),
            3,
        ),
        (
            "node_mirror_every_append",
            options(FlushPolicy::EveryAppend),
            1,
        ),
    ] {
        group.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let mut sum = Duration::ZERO;
                for _ in 0..iters {
                    let (driver, _) = mirroring_dest_replicated(&source, &dest, &options, replicas);
                    sum += mirror(&source, driver, total);
                    fs::remove_dir_all(&dest).expect("dest removed");
                }
                sum
            })
        });
    }
    let steady_total = total - first_batches_bytes();
    group.throughput(Throughput::Bytes(steady_total));
    for (name, source, options) in [
        (
            "node_mirror_kafka_steady",
            &source,
            options(FlushPolicy::Kafka),
        ),
        (
            "node_mirror_kafka_steady_serial",
            &source,
            serial_options(FlushPolicy::Kafka),
        ),
        (
            "node_mirror_kafka_steady_small_answers",
            &small_answers,
            options(FlushPolicy::Kafka),
        ),
        (
            "node_mirror_kafka_steady_small_answers_serial",
            &small_answers,
            serial_options(FlushPolicy::Kafka),
        ),
    ] {
        group.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let mut sum = Duration::ZERO;
                for _ in 0..iters {
                    let driver = steady_dest(source, &dest, &options);
                    sum += mirror(source, driver, steady_total);
                    fs::remove_dir_all(&dest).expect("dest removed");
                }
                sum
            })
        });
    }
    group.finish();
}

criterion_group!(benches, node_mirroring);

fn main() {
    bench_main::run("", benches);
}
