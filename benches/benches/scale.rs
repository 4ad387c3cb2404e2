//! Scale: time to drive N partitions from UNKNOWN to MIRRORING (`BecameLeader`, the state read,
//! PREPARING written, the LME answered, MIRRORING written: five inputs each), with one shared
//! in-memory coordinator holding every partition's record, as inputs per second.
//!
//! N = 1,000,000 is the figure asked for; N = 1,000, same code in the same run, is the baseline:
//! the ratio of the two rates shows what a million partitions cost beyond a thousand (cache
//! misses, a deeper coordinator map). Memory per partition is measured by the `allocations`
//! bench (dhat).
//!
//! Every partition gets its own replica and ISR sets (`im::ordset![1]`), as a broker that
//! builds them per partition would; all share one empty log (the only log effect on the way,
//! `TruncateFullyAndStartAt(0)`, leaves an empty log as it is).

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use kmirror_benches::{became_leader, new_partition, Executor};
use kmirror_kernel::mem_log::MemLog;
use kmirror_kernel::partition::PartitionMirror;
use kmirror_kernel::state::MirrorState;

/// Inputs that take one partition from UNKNOWN to MIRRORING.
const INPUTS_PER_PARTITION: u64 = 5;

/// Drives `n` new partitions to MIRRORING; returns them (to be dropped outside the timing).
fn drive(n: usize) -> (Executor, Vec<PartitionMirror>) {
    let mut exec = Executor::new();
    let mut log = MemLog::new();
    let mut partitions = Vec::with_capacity(n);
    for i in 0..n {
        let mut partition = new_partition(i as i32);
        exec.drive(became_leader(1), &mut partition, &mut log);
        partitions.push(partition);
    }
    (exec, partitions)
}

fn scale(c: &mut Criterion) {
    let (exec, partitions) = drive(10);
    assert_eq!(exec.inputs, 10 * INPUTS_PER_PARTITION);
    assert!(partitions
        .iter()
        .all(|p| p.state() == MirrorState::Mirroring));

    let mut group = c.benchmark_group("scale");
    group.sample_size(10);
    for n in [1_000usize, 1_000_000] {
        group.throughput(Throughput::Elements(n as u64 * INPUTS_PER_PARTITION));
        group.measurement_time(Duration::from_secs(if n > 1_000 { 30 } else { 3 }));
        group.bench_function(format!("unknown_to_mirroring/{n}"), |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let start = Instant::now();
                    let driven = drive(n);
                    total += start.elapsed();
                    drop(black_box(driven));
                }
                total
            })
        });
    }
    group.finish();
}

criterion_group!(benches, scale);
criterion_main!(benches);
