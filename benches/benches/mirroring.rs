//! Mirroring throughput on real logs: bytes per second mirrored from a source cluster
//! directory to a fresh destination directory, page cache warm.
//!
//! The source (built once with the harness's producer, one replica, 1,600 batches of 5,000
//! small records each, 238 MB in one segment) stays in the page cache. Each variant
//! writes a fresh destination in the same temp dir (same file system) and is timed to its last
//! fsync; the destination is deleted untimed. Throughput is the source's segment bytes.
//!
//! - `mirror_kafka`: the harness [`Driver`] with its [`LocalSource`], from creating the driver
//!   to `close`: the kernel's decisions, reading and CRC-checking each fetch of 100 batches (one
//!   read into a reused buffer), appending it byte for byte to the destination's `FileLog` with
//!   one write, one destination replica, `--flush kafka` (the default): mirrored batches are
//!   fsynced once, at `close`, their writeback started at each append
//!   ([`kmirror_harness::writeback`]); the `__mirror_state` writes are fsynced as they happen.
//!   Each fetch is read while the last one is appended (the driver's fetch-ahead, its default).
//! - `mirror_kafka_serial`: the same with fetch-ahead off (`DriverOptions::fetch_ahead`):
//!   fetching and appending take turns, as before it; the difference is what reading ahead
//!   gains.
//! - `mirror_every_append`: the same with `--flush every-append`: the segment fsynced after
//!   every fetch's append and the high watermark checkpointed (written, fsynced, renamed) at
//!   every change.
//!
//! - `mirror_kafka_empty_source`: `mirror_kafka` from a source of the same topic holding no
//!   batch: what a new destination costs whatever the data (the destination opened, the source
//!   opened, the `__mirror_state` writes to MIRRORING fsynced as they happen, the LME
//!   truncation, `close`); `mirror_kafka` minus this is the data path alone.
//!
//! Baselines, same run:
//! - `raw_copy`: each `.log` segment file copied into a new file by `std::io::copy` between
//!   the two files, which on Linux is `copy_file_range` (the kernel copies page cache to page
//!   cache; no user-space buffer), fdatasynced once at the end as the mirror's `close`
//!   fdatasyncs its segment: the cost of moving these bytes with nothing decided, parsed or
//!   indexed. Of the two raw copies this is the faster on the project's machine, so it is the
//!   baseline of the claim.
//! - `raw_copy_buffered`: the same copy streamed through one reused user-space buffer of the
//!   size of the mirror's fetch read ([`DEFAULT_MAX_FETCH_BATCHES`] source batches; one `read`
//!   and one `write` per chunk), fdatasynced once: the same path as the mirror's reads and
//!   writes, measured beside `raw_copy`.
//! - `raw_copy_writeback`: `raw_copy` with the mirror's early writeback: copied a fetch's
//!   bytes at a time, each chunk's whole pages handed to the disk at once with the same calls,
//!   fdatasynced once. The raw copy given the mirror's one I/O advantage: the ratio against it
//!   says how much of the mirror's speed is that advantage.
//! - `mm2_style`: what a consumer-producer pair (MirrorMaker 2) does: each batch parsed with
//!   its CRC checked, every record decoded, a new batch encoded from the records with a
//!   recomputed CRC-32C ([`RawBatch::encode`]), written, fdatasynced once.

use std::fs;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use kmirror_harness::driver::LocalSource;
use kmirror_harness::driver::{
    Cluster, ClusterConfig, ClusterDir, Driver, DriverOptions, ManualClock, RunEnd, Until,
    DEFAULT_MAX_FETCH_BATCHES,
};
use kmirror_harness::file_log::FlushPolicy;
use kmirror_harness::producer::{produce, ProduceOp};
use kmirror_harness::record_batch::RawBatch;
use kmirror_harness::writeback;
use kmirror_kernel::log::LogView;
use kmirror_kernel::state::MirrorState;
use kmirror_kernel::types::{MirrorName, TopicId};

/// Batches in the source.
const BATCHES: usize = 1_600;
/// Records per source batch.
const RECORDS_PER_BATCH: u32 = 5_000;
/// The mirrored topic.
const TOPIC: &str = "orders";

/// Builds the source cluster directory `root` (one replica) holding `batches` batches and
/// returns its segment files.
fn build_source(root: &Path, batches: usize) -> Vec<PathBuf> {
    let name = MirrorName::new("src").expect("valid");
    let config = ClusterConfig::new(name, TOPIC, TopicId::from_u64(0x6b6d));
    let dir = ClusterDir::create(root, config, 1).expect("source created");
    let mut cluster = Cluster::open_dir(dir, true).expect("source opens");
    let ops = vec![
        ProduceOp::Plain {
            records: RECORDS_PER_BATCH
        };
        batches
    ];
    produce(&mut cluster, &ops, 1_700_000_000_000).expect("produced");
    let leo = cluster.leader.log_end_offset();
    assert_eq!(leo, batches as i64 * i64::from(RECORDS_PER_BATCH));
    let segments = cluster
        .leader
        .segments()
        .iter()
        .map(|s| s.log_path().to_path_buf())
        .collect();
    cluster.close().expect("source closed");
    segments
}

/// Mirrors `source` into the new destination `dest` with the destination's logs fsyncing as
/// `flush` says (what `kmirror mirror --flush` sets), reading each fetch ahead while the last
/// one is appended when `fetch_ahead`; returns the time taken.
fn mirror(source: &Path, dest: &Path, flush: FlushPolicy, fetch_ahead: bool) -> Duration {
    let mirror = MirrorName::new("src").expect("valid");
    let mut config = ClusterConfig::new(
        MirrorName::new("dst").expect("valid"),
        TOPIC,
        TopicId::from_u64(0x6b6d),
    );
    config.mirror_name = Some(mirror.to_string());
    config.mirrors.insert(mirror);
    config.source_dir = Some(source.to_path_buf());
    let dir = ClusterDir::create(dest, config, 1).expect("destination created");
    let start = Instant::now();
    let mut cluster = Cluster::open_dir(dir, true).expect("destination opens");
    cluster.leader.set_flush_policy(flush);
    let source = LocalSource::open(source).expect("source opens");
    let options = DriverOptions {
        fetch_ahead,
        ..DriverOptions::default()
    };
    let mut driver =
        Driver::from_cluster(cluster, Some(Box::new(source)), options).expect("driver");
    let mut clock = ManualClock::default();
    let end = driver
        .run(&mut clock, Until::Idle, &mut |_, _| {})
        .expect("mirrors");
    assert_eq!(end, RunEnd::CaughtUp);
    assert_eq!(driver.state(), MirrorState::Mirroring);
    let stats = driver.stats();
    if fetch_ahead && stats.batches > 0 {
        // Every fetch was read ahead while the one before it was appended, but the first and
        // its repetition after the epoch bump it causes (the source's epoch 0 ties the
        // destination's).
        assert_eq!(stats.fetched_ahead + 2, stats.fetches, "{stats:?}");
    } else {
        assert_eq!(stats.fetched_ahead, 0, "{stats:?}");
    }
    driver.close().expect("closed");
    start.elapsed()
}

/// Copies each segment file into `dest` with `std::io::copy` (`copy_file_range` on Linux),
/// then fdatasyncs the copy. With `writeback_chunk`, the copy goes that many bytes at a time and
/// the whole pages of each chunk are handed to the disk at once with the same [`writeback`]
/// calls the mirror's appends make: the raw copy given the mirror's one I/O advantage, so that
/// the comparison does not rest on it.
fn raw_copy(segments: &[PathBuf], dest: &Path, writeback_chunk: Option<u64>) -> Duration {
    fs::create_dir_all(dest).expect("dest dir");
    let start = Instant::now();
    for segment in segments {
        let mut input = fs::File::open(segment).expect("open");
        let mut out =
            fs::File::create(dest.join(segment.file_name().expect("a file"))).expect("create");
        let copied = match writeback_chunk {
            None => std::io::copy(&mut input, &mut out).expect("copy"),
            Some(chunk) => {
                let (mut copied, mut started) = (0, 0);
                loop {
                    let n = std::io::copy(&mut (&mut input).take(chunk), &mut out).expect("copy");
                    if n == 0 {
                        break copied;
                    }
                    copied += n;
                    if let Some((from, len)) = writeback::range_to_start(started, copied) {
                        writeback::start(&out, from, len);
                        started = from + len;
                    }
                }
            }
        };
        assert_eq!(copied, fs::metadata(segment).expect("segment").len());
        out.sync_data().expect("fdatasync");
    }
    start.elapsed()
}

/// Streams each segment file into `dest` through `buf` (one `read`, one `write` per chunk of
/// `buf.len()` bytes), then fdatasyncs the copy.
fn raw_copy_buffered(segments: &[PathBuf], dest: &Path, buf: &mut [u8]) -> Duration {
    fs::create_dir_all(dest).expect("dest dir");
    let start = Instant::now();
    for segment in segments {
        let mut input = fs::File::open(segment).expect("open");
        let mut out =
            fs::File::create(dest.join(segment.file_name().expect("a file"))).expect("create");
        loop {
            let n = input.read(buf).expect("read");
            if n == 0 {
                break;
            }
            out.write_all(&buf[..n]).expect("write");
        }
        out.sync_data().expect("fdatasync");
    }
    start.elapsed()
}

/// Decodes every record of every batch and re-encodes it into a new batch, fdatasyncing each
/// file.
fn mm2_style(segments: &[PathBuf], dest: &Path) -> Duration {
    fs::create_dir_all(dest).expect("dest dir");
    let start = Instant::now();
    for segment in segments {
        let bytes = fs::read(segment).expect("read");
        let mut out = std::io::BufWriter::new(
            fs::File::create(dest.join(segment.file_name().expect("a file"))).expect("create"),
        );
        for batch in RawBatch::parse_many(&bytes).expect("valid batches") {
            let records = batch.records().expect("uncompressed records");
            let copy = RawBatch::encode(&batch.header(), batch.base_timestamp(), &records)
                .expect("re-encoded");
            out.write_all(copy.bytes()).expect("write");
        }
        out.into_inner()
            .expect("flushed")
            .sync_data()
            .expect("fdatasync");
    }
    start.elapsed()
}

fn mirroring(c: &mut Criterion) {
    let work = tempfile::tempdir().expect("a temp dir");
    let source = work.path().join("source");
    let segments = build_source(&source, BATCHES);
    let empty = work.path().join("empty-source");
    build_source(&empty, 0);
    let bytes: u64 = segments
        .iter()
        .map(|s| fs::metadata(s).expect("segment").len())
        .sum();
    // Warm the page cache.
    for s in &segments {
        std::hint::black_box(fs::read(s).expect("read"));
    }
    let dest = work.path().join("dest");
    let mut group = c.benchmark_group("mirroring");
    group.throughput(Throughput::Bytes(bytes));
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(15));
    // The mirror reads a fetch of DEFAULT_MAX_FETCH_BATCHES batches (all the same size here)
    // with one read into a reused buffer; `raw_copy_buffered` streams through a buffer of that size,
    // allocated and touched once, outside the timed part.
    let fetch_bytes = bytes as usize / BATCHES * DEFAULT_MAX_FETCH_BATCHES;
    let mut buf = vec![1u8; fetch_bytes];
    println!("mirroring: {bytes} bytes in the source; the raw copy's buffer: {fetch_bytes} bytes");
    type Variant<'a> = Box<dyn FnMut(&Path, &[PathBuf], &Path) -> Duration + 'a>;
    let variants: [(&str, Variant); 8] = [
        (
            "mirror_kafka",
            Box::new(|source, _, dest| mirror(source, dest, FlushPolicy::Kafka, true)),
        ),
        (
            "mirror_kafka_serial",
            Box::new(|source, _, dest| mirror(source, dest, FlushPolicy::Kafka, false)),
        ),
        (
            "mirror_every_append",
            Box::new(|source, _, dest| mirror(source, dest, FlushPolicy::EveryAppend, true)),
        ),
        (
            "mirror_kafka_empty_source",
            Box::new(|_, _, dest| mirror(&empty, dest, FlushPolicy::Kafka, true)),
        ),
        (
            "raw_copy",
            Box::new(|_, segments, dest| raw_copy(segments, dest, None)),
        ),
        (
            "raw_copy_writeback",
            Box::new(|_, segments, dest| raw_copy(segments, dest, Some(fetch_bytes as u64))),
        ),
        (
            "raw_copy_buffered",
            Box::new(|_, segments, dest| raw_copy_buffered(segments, dest, &mut buf)),
        ),
        (
            "mm2_style",
            Box::new(|_, segments, dest| mm2_style(segments, dest)),
        ),
    ];
    for (name, mut run) in variants {
        group.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    total += run(&source, &segments, &dest);
                    fs::remove_dir_all(&dest).expect("dest removed");
                }
                total
            })
        });
    }
    group.finish();
}

criterion_group!(benches, mirroring);
criterion_main!(benches);
