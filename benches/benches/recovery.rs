//! Recovery: time to reopen a partition log after a crash, against log size, with the recovery
//! point near the end (only the unflushed tail is verified) and at the start (everything is).
//!
//! Logs of 16, 64 and 256 MiB (batches of 5,000 small records, about 150 KB each, one 1 GiB
//! segment) are written once with `FlushPolicy::Manual`, page cache warm. Before each timed
//! `FileLog::open` the `recovery-point-offset-checkpoint` is rewritten (untimed) to the
//! crash's recovery point:
//! - `tail/{size}`: the last 8 batches (about 1.2 MB) were never flushed;
//! - `full/{size}`, the baseline in the same run: nothing was flushed (recovery point 0), so
//!   every batch's CRC-32C is checked.
//!
//! The claim is that `tail` stays flat as the log grows while `full` grows with it: opening
//! still reads every batch header (to rebuild the in-memory index, epoch cache and producer
//! state) but verifies only the tail's bytes.

use std::fs;
use std::path::Path;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use kmirror_harness::file_log::{
    encode_offset_checkpoint, FileLog, FileLogConfig, FlushPolicy, TopicPartition,
    RECOVERY_POINT_FILE,
};
use kmirror_kernel::batch::LeaderBatch;
use kmirror_kernel::log::LogView;
use kmirror_kernel::types::Offset;

/// Records per batch.
const RECORDS_PER_BATCH: u32 = 5_000;
/// Batches left unflushed by the crash in the `tail` variant.
const TAIL_BATCHES: i64 = 8;

fn config() -> FileLogConfig {
    FileLogConfig {
        flush: FlushPolicy::Manual,
        ..FileLogConfig::default()
    }
}

fn tp() -> TopicPartition {
    TopicPartition::new("orders", 0).expect("valid")
}

/// Writes a log of at least `bytes` bytes under `dir`; returns its end offset and size.
fn build_log(dir: &Path, bytes: u64) -> (Offset, u64) {
    let (mut log, _) = FileLog::open(dir, tp(), config()).expect("log opens");
    let mut size = 0;
    while size < bytes {
        log.append_as_leader_at(
            0,
            LeaderBatch::Records {
                record_count: RECORDS_PER_BATCH,
                producer: None,
                transactional: false,
            },
            1_700_000_000_000,
        )
        .expect("appends");
        size = log.segments().iter().map(|s| s.size()).sum();
    }
    let leo = log.log_end_offset();
    log.close().expect("closed");
    (leo, size)
}

fn recovery(c: &mut Criterion) {
    let work = tempfile::tempdir().expect("a temp dir");
    let mut group = c.benchmark_group("recovery");
    group.sample_size(20);
    for mib in [16u64, 64, 256] {
        let dir = work.path().join(format!("{mib}"));
        let (leo, size) = build_log(&dir, mib << 20);
        let checkpoint = dir.join(tp().dir_name()).join(RECOVERY_POINT_FILE);
        group.throughput(Throughput::Bytes(size));
        let tail_start = leo - TAIL_BATCHES * i64::from(RECORDS_PER_BATCH);
        for (variant, recovery_point) in [("tail", tail_start), ("full", 0)] {
            group.bench_function(format!("{variant}/{mib}MiB"), |b| {
                b.iter_custom(|iters| {
                    let mut total = Duration::ZERO;
                    for _ in 0..iters {
                        fs::write(&checkpoint, encode_offset_checkpoint(&tp(), recovery_point))
                            .expect("checkpoint rewritten");
                        let start = Instant::now();
                        let (log, report) = FileLog::open(&dir, tp(), config()).expect("opens");
                        total += start.elapsed();
                        assert_eq!(report.recovery_point, recovery_point);
                        assert_eq!(log.log_end_offset(), leo);
                        drop(log);
                    }
                    total
                })
            });
        }
        fs::remove_dir_all(&dir).expect("removed");
    }
    group.finish();
}

criterion_group!(benches, recovery);
criterion_main!(benches);
