//! Recovery: time to reopen a partition log after a crash, against log size, with the same
//! unflushed tail: Kafka's recovery (CRC-check from the recovery point on, headers only below
//! it) against the full scan (`Verify::All`, what `kmirror verify` runs) in the same run.
//!
//! Logs of 64 and 640 MiB (batches of 5,000 small records, about 150 KB each, one 1 GiB
//! segment) are written once with `FlushPolicy::Manual`, page cache warm. Before each timed
//! open the `recovery-point-offset-checkpoint` is rewritten (untimed) so that the last 8 batches
//! (about 1.2 MB) were never flushed:
//! - `tail/{size}`: `FileLog::open` (Kafka's recovery);
//! - `verify_all/{size}`, the baseline in the same run: `FileLog::open_with(.., Verify::All)`,
//!   every batch's CRC-32C checked.
//!
//! The claim is that `tail` stays about flat as the log grows 10x while `verify_all` grows with
//! it: opening still reads every batch header (to rebuild the in-memory index, epoch cache and
//! producer state), one small read per 150 KB batch, but verifies only the tail's bytes.

use std::fs;
use std::path::Path;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use kmirror_harness::file_log::{
    encode_offset_checkpoint, FileLog, FileLogConfig, FlushPolicy, TopicPartition, Verify,
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
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(10));
    for mib in [64u64, 640] {
        let dir = work.path().join(format!("{mib}"));
        let (leo, size) = build_log(&dir, mib << 20);
        let checkpoint = dir.join(tp().dir_name()).join(RECOVERY_POINT_FILE);
        group.throughput(Throughput::Bytes(size));
        let recovery_point = leo - TAIL_BATCHES * i64::from(RECORDS_PER_BATCH);
        for (variant, verify) in [
            ("tail", Verify::FromRecoveryPoint),
            ("verify_all", Verify::All),
        ] {
            group.bench_function(format!("{variant}/{mib}MiB"), |b| {
                b.iter_custom(|iters| {
                    let mut total = Duration::ZERO;
                    for _ in 0..iters {
                        fs::write(&checkpoint, encode_offset_checkpoint(&tp(), recovery_point))
                            .expect("checkpoint rewritten");
                        let start = Instant::now();
                        let (log, report) =
                            FileLog::open_with(&dir, tp(), config(), verify).expect("opens");
                        total += start.elapsed();
                        assert_eq!(report.recovery_point, recovery_point);
                        assert_eq!(log.log_end_offset(), leo);
                        if verify == Verify::FromRecoveryPoint {
                            assert!(report.verified_bytes < 2 << 20, "{report:?}");
                        } else {
                            assert_eq!(report.verified_bytes, size);
                        }
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
