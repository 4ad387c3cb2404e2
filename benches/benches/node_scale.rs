//! The node manager at scale ([`NodeMirror`](kmirror_kernel::node::NodeMirror)),
//! each figure beside a baseline of lone [`PartitionMirror`]s measured in the same run:
//!
//! - `node_scale/lifecycle/*`: 1,000 partitions (100 topics x 10) UNKNOWN -> PREPARING ->
//!   MIRRORING, then a stop of every topic (STOPPING: LSO truncation, LME record,
//!   `MIRROR_PID_RESET`) to STOPPED: four state transitions per partition, as transitions/s.
//!   `node_1000` drives them through one node manager ([`NodeExecutor`]); `lone_x1000`
//!   (baseline) drives 1,000 lone partitions with the same in-memory executor
//!   ([`Executor`]). The ratio is what routing, fetch slots and `__mirror_state` placement add.
//! - `node_scale/idle_poll/*`: 10,000 idle MIRRORING partitions whose coalesced fetch is in
//!   flight (a long poll waiting at the source): one [`NodeMirror::poll_fetches`] finding
//!   nothing to send. Baseline `lone_scan_x10000`: reading the activity of 10,000 lone
//!   partitions in a `Vec`, the least any executor polling them touches.
//! - `node_scale/idle_round/*`: one whole idle fetch round of those 10,000 partitions: the poll
//!   (one coalesced fetch carrying all of them), the source's "nothing new" for each, and the
//!   response split back into 10,000 `FetchCompleted` (each partition asks again). Baseline
//!   `lone_x10000`: 10,000 lone partitions in a `Vec`, each on its own log, each handling its
//!   own `FetchCompleted`, which a broker without coalescing would get from 10,000 Fetch
//!   requests.
//!
//! Memory per idle partition of the node manager is counted exactly (dhat) by the
//! `allocations` bench (`memory/node manager` lines).

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{criterion_group, Criterion, Throughput};
use kmirror_benches::node::NodeExecutor;
use kmirror_benches::{mirror_name, new_partition, Executor};
use kmirror_kernel::desired::DesiredState;
use kmirror_kernel::input::Input;
use kmirror_kernel::mem_log::MemLog;
use kmirror_kernel::node::{CoalescedFetch, NodeInput};
use kmirror_kernel::partition::{Activity, PartitionMirror};
use kmirror_kernel::state::MirrorState;

/// Topics x partitions of the lifecycle figure.
const TOPICS: u64 = 100;
const PER_TOPIC: i32 = 10;
/// State transitions per partition: UNKNOWN -> PREPARING -> MIRRORING -> STOPPING -> STOPPED.
const TRANSITIONS: u64 = 4;
/// Idle partitions: 1,000 topics x 10.
const IDLE_TOPICS: u64 = 1_000;
const IDLE: usize = IDLE_TOPICS as usize * PER_TOPIC as usize;

fn stop() -> DesiredState {
    DesiredState::Stop(mirror_name())
}

/// The lifecycle through one node manager: lead all, stop all.
fn node_lifecycle(exec: &mut NodeExecutor) {
    exec.lead_all();
    exec.set_desired_all(TOPICS, PER_TOPIC, stop());
}

/// The same lifecycle for lone partitions, each on its own log.
fn lone_lifecycle(exec: &mut Executor, logs: &mut [MemLog]) -> Vec<PartitionMirror> {
    let set = im::ordset![1];
    let mut partitions = Vec::with_capacity(logs.len());
    for (i, log) in logs.iter_mut().enumerate() {
        let mut partition = new_partition(i as i32);
        let leader = Input::BecameLeader {
            leader_epoch: 1,
            replicas: set.clone(),
            isr: set.clone(),
        };
        exec.drive(leader, &mut partition, log);
        exec.drive(Input::DesiredStateChanged(stop()), &mut partition, log);
        partitions.push(partition);
    }
    partitions
}

/// A lone partition MIRRORING, its own log and the completion of its fetch in flight.
type Lone = (PartitionMirror, MemLog, Input);

/// `n` lone partitions MIRRORING, each on its own log waiting for its fetch.
fn lone_mirroring(n: usize) -> (Executor, Vec<Lone>) {
    let mut exec = Executor::new();
    let set = im::ordset![1];
    let mut partitions = Vec::with_capacity(n);
    for i in 0..n {
        let mut partition = new_partition(i as i32);
        let mut log = MemLog::new();
        let leader = Input::BecameLeader {
            leader_epoch: 1,
            replicas: set.clone(),
            isr: set.clone(),
        };
        let (fetch, _) = exec
            .drive(leader, &mut partition, &mut log)
            .pop()
            .expect("MIRRORING fetches");
        partitions.push((partition, log, fetch));
    }
    (exec, partitions)
}

/// 10,000 partitions MIRRORING through one node manager, their fetch not yet polled.
fn node_mirroring() -> NodeExecutor {
    let mut exec = NodeExecutor::new(IDLE_TOPICS, PER_TOPIC);
    exec.lead_all();
    exec
}

fn check() {
    let mut exec = NodeExecutor::new(TOPICS, PER_TOPIC);
    node_lifecycle(&mut exec);
    assert_eq!(exec.node.partitions().count(), 1_000);
    assert!(exec
        .node
        .partitions()
        .all(|(_, p)| p.state() == MirrorState::Stopped));
    let mut logs: Vec<MemLog> = (0..1_000).map(|_| MemLog::new()).collect();
    let lone = lone_lifecycle(&mut Executor::new(), &mut logs);
    assert!(lone.iter().all(|p| p.state() == MirrorState::Stopped));
    println!(
        "node_scale/lifecycle: {} node inputs for 1,000 partitions ({:.1} per partition)",
        exec.inputs,
        exec.inputs as f64 / 1_000.0
    );
}

fn lifecycle(c: &mut Criterion) {
    let mut group = c.benchmark_group("node_scale/lifecycle");
    group.sample_size(20);
    group.measurement_time(Duration::from_secs(10));
    group.throughput(Throughput::Elements(1_000 * TRANSITIONS));
    group.bench_function("lone_x1000", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let mut exec = Executor::new();
                let mut logs: Vec<MemLog> = (0..1_000).map(|_| MemLog::new()).collect();
                let start = Instant::now();
                let partitions = lone_lifecycle(&mut exec, &mut logs);
                total += start.elapsed();
                drop(black_box((exec, logs, partitions)));
            }
            total
        })
    });
    group.bench_function("node_1000", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let mut exec = NodeExecutor::new(TOPICS, PER_TOPIC);
                let start = Instant::now();
                node_lifecycle(&mut exec);
                total += start.elapsed();
                drop(black_box(exec));
            }
            total
        })
    });
    group.finish();
}

fn idle(c: &mut Criterion) {
    let mut exec = node_mirroring();
    let (lone_exec, mut lone_partitions) = lone_mirroring(IDLE);

    let mut group = c.benchmark_group("node_scale/idle_poll");
    group.sample_size(50);
    group.throughput(Throughput::Elements(IDLE as u64));
    group.bench_function("lone_scan_x10000", |b| {
        b.iter(|| {
            lone_partitions
                .iter()
                .filter(|(p, _, _)| matches!(black_box(p).activity(), Activity::Fetching(_)))
                .count()
        })
    });
    // Every partition's fetch in flight: the poll finds nothing to send.
    let in_flight: Vec<CoalescedFetch> = exec.node.poll_fetches(0);
    assert_eq!(in_flight.len(), 1);
    group.bench_function("node_10000", |b| {
        b.iter(|| {
            let fetches = exec.node.poll_fetches(black_box(0));
            assert!(fetches.is_empty());
        })
    });
    group.finish();

    let mut group = c.benchmark_group("node_scale/idle_round");
    group.sample_size(30);
    group.throughput(Throughput::Elements(IDLE as u64));
    group.bench_function("lone_x10000", |b| {
        b.iter(|| {
            for (partition, log, fetch) in lone_partitions.iter_mut() {
                let effects = partition
                    .handle(&lone_exec.config, fetch.clone(), &*log)
                    .expect("the fetch in flight");
                debug_assert_eq!(effects.len(), 1);
                black_box(effects);
            }
        })
    });
    // The response to the fetch in flight, then round after round.
    let mut response = NodeExecutor::empty_response(&in_flight[0]);
    group.bench_function("node_10000", |b| {
        b.iter(|| {
            exec.run(NodeInput::FetchResponse(response.clone()));
            let fetches = exec.node.poll_fetches(0);
            debug_assert_eq!(fetches.len(), 1);
            response = NodeExecutor::empty_response(&fetches[0]);
        })
    });
    group.finish();
    println!(
        "node_scale/idle_round: Fetch requests per idle round: node manager 1 (one per source \
         broker and fetcher), lone partitions {IDLE}"
    );
}

criterion_group!(benches, lifecycle, idle);

fn main() {
    check();
    benches();
    Criterion::default().configure_from_args().final_summary();
}
