//! Kernel steps: inputs handled per second by [`PartitionMirror::handle`].
//!
//! - `steady_state/caught_up`: a MIRRORING partition taking the completion of a fetch that
//!   returned nothing new (the fetch request id is derived from the fetch position, so the same
//!   completion is valid again after each step): one `handle`, one `Fetch` effect.
//! - `steady_state/new_batch`: the same with one new batch per fetch, the `AppendFetched`
//!   effect applied to the [`MemLog`] (epoch cache and producer state updated): `handle` plus
//!   the log append.
//! - `lifecycle`: a fresh partition from UNKNOWN through MIRRORING (10 fetches), a stop to
//!   STOPPED and a failback to MIRRORING (10 more fetches), with the in-memory executor of
//!   `kmirror_benches` (coordinator, log and source in memory); throughput in inputs.
//!
//! Baseline, same run: `baseline/vec_of_one_effect`, building and dropping a `Vec` holding one
//! `Effect::Fetch`, the least a call that returns its effects in a new `Vec` costs.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use kmirror_benches::{became_leader, lifecycle, new_partition, Executor, SOURCE_EPOCH};
use kmirror_kernel::apply::apply_log_effect;
use kmirror_kernel::batch::BatchHeader;
use kmirror_kernel::config::FetchIsolation;
use kmirror_kernel::effect::{Effect, RequestId};
use kmirror_kernel::input::{FetchOutcome, Input};
use kmirror_kernel::mem_log::MemLog;
use kmirror_kernel::partition::PartitionMirror;
use kmirror_kernel::state::MirrorState;

/// Fetches per MIRRORING phase of the lifecycle benchmark.
const LIFECYCLE_FETCHES: usize = 10;

/// A partition driven to MIRRORING against a caught-up source, its log, the executor, and the
/// completion of the fetch in flight.
fn mirroring() -> (Executor, PartitionMirror, MemLog, Input) {
    let mut exec = Executor::new();
    let mut partition = new_partition(0);
    let mut log = MemLog::new();
    let (fetch, _) = exec
        .drive(became_leader(1), &mut partition, &mut log)
        .pop()
        .expect("MIRRORING fetches");
    assert_eq!(partition.state(), MirrorState::Mirroring);
    (exec, partition, log, fetch)
}

fn steady_state(c: &mut Criterion) {
    let mut group = c.benchmark_group("steady_state");
    group.throughput(Throughput::Elements(1));

    group.bench_function("baseline/vec_of_one_effect", |b| {
        b.iter(|| {
            let effects = vec![Effect::Fetch {
                request: RequestId(black_box(7)),
                fetch_offset: black_box(0),
                last_fetched_epoch: None,
                isolation: FetchIsolation::ReadCommitted,
            }];
            black_box(effects)
        })
    });

    let (exec, mut partition, log, fetch) = mirroring();
    group.bench_function("caught_up", |b| {
        b.iter(|| {
            let effects = partition
                .handle(&exec.config, black_box(fetch.clone()), &log)
                .expect("the fetch in flight");
            black_box(effects)
        })
    });

    let (exec, mut partition, mut log, _) = mirroring();
    let mut offset = 0;
    let mut input = data_fetched(RequestId::for_fetch(0, None), offset);
    group.bench_function("new_batch", |b| {
        b.iter(|| {
            let batch = [BatchHeader::plain(offset, offset, SOURCE_EPOCH)];
            let effects = partition
                .handle(&exec.config, black_box(input.clone()), &log)
                .expect("the fetch in flight");
            for effect in effects {
                match effect {
                    Effect::Log(e) => apply_log_effect(&mut log, &e, &batch).expect("appends"),
                    Effect::Fetch {
                        request,
                        fetch_offset,
                        ..
                    } => {
                        offset = fetch_offset;
                        input = data_fetched(request, offset);
                    }
                    other => panic!("unexpected effect {other:?}"),
                }
            }
        })
    });
    group.finish();
}

/// The completion of fetch `request` at `offset` that returned one single-record batch.
fn data_fetched(request: RequestId, offset: i64) -> Input {
    Input::FetchCompleted {
        request,
        outcome: FetchOutcome::Records {
            next_offset: offset + 1,
            last_epoch: Some(SOURCE_EPOCH),
        },
    }
}

fn whole_lifecycle(c: &mut Criterion) {
    let mut group = c.benchmark_group("lifecycle");
    let inputs = lifecycle(LIFECYCLE_FETCHES);
    group.throughput(Throughput::Elements(inputs));
    group.bench_function("unknown_to_stopped_and_failback", |b| {
        b.iter_batched(
            || (),
            |()| black_box(lifecycle(LIFECYCLE_FETCHES)),
            BatchSize::SmallInput,
        )
    });
    group.finish();
}

criterion_group!(benches, steady_state, whole_lifecycle);
criterion_main!(benches);
