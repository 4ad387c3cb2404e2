//! Allocations and memory, counted with dhat's heap profiler (exact counts, not timings: these
//! are deterministic, so this binary prints them instead of running criterion).
//!
//! - Allocations per kernel step: in the steady state (a MIRRORING partition taking fetch
//!   completions, caught up and with one new batch per fetch) and per input over a whole
//!   lifecycle (UNKNOWN to STOPPED and back through failback).
//! - Memory per idle mirrored partition: `size_of::<PartitionMirror>()` plus the heap bytes
//!   still held by 100,000 partitions left in MIRRORING (each waiting for a fetch), once the
//!   executor, the coordinator and the logs are dropped. Measured twice: with the replica and
//!   ISR sets built per partition (every `BecameLeader` carries its own `im::OrdSet`s), and with
//!   every partition given clones of one set (a broker that shares equal sets).
//!
//! - Memory per idle partition behind the node manager (`memory/node manager`): 10,000
//!   partitions (1,000 topics x 10) MIRRORING through one [`NodeMirror`] with their coalesced
//!   fetch in flight, the logs and the coordinator dropped: the node's heap over 10,000, beside
//!   10,000 lone partitions in a `Vec` driven the same way (baseline, same run). Replica sets
//!   are clones of one set in both.
//!
//! Baseline, same run: the allocations of building the one-effect `Vec` every `handle` call
//! returns (1 by construction), and `size_of::<PartitionMirror>()` (the inline part).

use kmirror_benches::node::NodeExecutor;
use kmirror_benches::{lifecycle, new_partition, Executor, SOURCE_EPOCH};
use kmirror_kernel::apply::apply_log_effect;
use kmirror_kernel::batch::BatchHeader;
use kmirror_kernel::effect::Effect;
use kmirror_kernel::input::{FetchOutcome, Input};
use kmirror_kernel::mem_log::MemLog;
use kmirror_kernel::node::NodeMirror;
use kmirror_kernel::partition::PartitionMirror;
use kmirror_kernel::state::MirrorState;

#[global_allocator]
static ALLOC: dhat::Alloc = dhat::Alloc;

/// Steps measured per steady-state figure.
const STEPS: u64 = 10_000;
/// Partitions held for the memory figure.
const PARTITIONS: usize = 100_000;

/// Allocations (blocks) and bytes allocated while `f` runs.
fn allocations<T>(f: impl FnOnce() -> T) -> (u64, u64, T) {
    let before = dhat::HeapStats::get();
    let out = f();
    let after = dhat::HeapStats::get();
    (
        after.total_blocks - before.total_blocks,
        after.total_bytes - before.total_bytes,
        out,
    )
}

/// Heap bytes and blocks currently live.
fn live() -> (usize, usize) {
    let stats = dhat::HeapStats::get();
    (stats.curr_bytes, stats.curr_blocks)
}

fn per_step() {
    // Caught up: the same completion again and again.
    let mut exec = Executor::new();
    let mut partition = new_partition(0);
    let mut log = MemLog::new();
    let (fetch, _) = exec
        .drive(kmirror_benches::became_leader(1), &mut partition, &mut log)
        .pop()
        .expect("MIRRORING fetches");
    let (blocks, bytes, ()) = allocations(|| {
        for _ in 0..STEPS {
            let effects = partition
                .handle(&exec.config, fetch.clone(), &log)
                .expect("the fetch in flight");
            assert_eq!(effects.len(), 1);
        }
    });
    report_step("steady state, caught up (handle)", blocks, bytes, STEPS);

    // One new batch per fetch, appended to the MemLog.
    let Input::FetchCompleted { mut request, .. } = fetch else {
        unreachable!("a fetch completion")
    };
    let mut offset = log_end(&log);
    let (blocks, bytes, ()) = allocations(|| {
        for _ in 0..STEPS {
            let batch = [BatchHeader::plain(offset, offset, SOURCE_EPOCH)];
            let input = Input::FetchCompleted {
                request,
                outcome: FetchOutcome::Records {
                    next_offset: offset + 1,
                    last_epoch: Some(SOURCE_EPOCH),
                },
            };
            for effect in partition.handle(&exec.config, input, &log).expect("fetch") {
                match effect {
                    Effect::Log(e) => apply_log_effect(&mut log, &e, &batch).expect("appends"),
                    Effect::Fetch {
                        request: r,
                        fetch_offset,
                        ..
                    } => (request, offset) = (r, fetch_offset),
                    other => panic!("unexpected effect {other:?}"),
                }
            }
        }
    });
    report_step(
        "steady state, one new batch (handle + MemLog append)",
        blocks,
        bytes,
        STEPS,
    );

    let (blocks, bytes, inputs) = allocations(|| lifecycle(10));
    report_step(
        "whole lifecycle, per input (kernel + in-memory executor)",
        blocks,
        bytes,
        inputs,
    );
    let (blocks, bytes, _) = allocations(|| vec![Effect::SetWritable(true)]);
    report_step("baseline: a one-effect Vec", blocks, bytes, 1);
}

fn log_end(log: &MemLog) -> i64 {
    kmirror_kernel::log::LogView::log_end_offset(log)
}

fn report_step(what: &str, blocks: u64, bytes: u64, steps: u64) {
    println!(
        "allocations/{what}: {:.2} allocations and {:.1} bytes per step ({blocks} allocations, \
         {bytes} bytes over {steps} steps)",
        blocks as f64 / steps as f64,
        bytes as f64 / steps as f64,
    );
}

/// Drives `PARTITIONS` partitions to MIRRORING, drops everything but the partitions, and
/// returns them.
fn idle_partitions(shared_sets: bool) -> Vec<PartitionMirror> {
    let mut exec = Executor::new();
    let set = im::ordset![1];
    let mut partitions = Vec::with_capacity(PARTITIONS);
    for i in 0..PARTITIONS {
        let mut partition = new_partition(i as i32);
        let mut log = MemLog::new();
        let leader = if shared_sets {
            Input::BecameLeader {
                leader_epoch: 1,
                replicas: set.clone(),
                isr: set.clone(),
            }
        } else {
            kmirror_benches::became_leader(1)
        };
        exec.drive(leader, &mut partition, &mut log);
        assert_eq!(partition.state(), MirrorState::Mirroring);
        partitions.push(partition);
    }
    partitions
}

fn per_partition() {
    let inline = std::mem::size_of::<PartitionMirror>();
    println!("memory/size_of::<PartitionMirror>(): {inline} bytes");
    println!(
        "memory/size_of::<MemLog>(): {} bytes",
        std::mem::size_of::<MemLog>()
    );
    for shared in [false, true] {
        let (bytes0, blocks0) = live();
        let partitions = idle_partitions(shared);
        let (bytes1, blocks1) = live();
        let vec_bytes = partitions.capacity() * inline;
        let heap = (bytes1 - bytes0 - vec_bytes) as f64 / PARTITIONS as f64;
        let blocks = (blocks1 - blocks0 - 1) as f64 / PARTITIONS as f64;
        println!(
            "memory/idle MIRRORING partition ({} replica sets): {:.1} heap bytes in {blocks:.2} \
             allocations + {inline} inline = {:.1} bytes per partition",
            if shared { "shared" } else { "per-partition" },
            heap,
            heap + inline as f64,
        );
        drop(partitions);
    }
    // For scale: an empty log (after MIRRORING's first-time truncation) per partition.
    let (bytes0, _) = live();
    let logs: Vec<MemLog> = (0..PARTITIONS).map(|_| MemLog::new()).collect();
    let (bytes1, _) = live();
    println!(
        "memory/empty MemLog: {:.1} heap bytes + {} inline (not part of the partition's \
         state machine; the broker's log exists anyway)",
        (bytes1 - bytes0 - logs.capacity() * std::mem::size_of::<MemLog>()) as f64
            / PARTITIONS as f64,
        std::mem::size_of::<MemLog>()
    );
}

/// Idle partitions behind one node manager (1,000 topics x 10).
const NODE_PARTITIONS: usize = 10_000;

fn per_node_partition() {
    let before = live().0;
    let mut exec = NodeExecutor::new(1_000, 10);
    exec.lead_all();
    let NodeExecutor {
        mut node,
        logs,
        coordinator,
        ..
    } = exec;
    drop((logs, coordinator));
    let fetches = node.poll_fetches(0);
    assert_eq!(fetches.len(), 1);
    assert_eq!(fetches[0].partitions.len(), NODE_PARTITIONS);
    assert!(node
        .partitions()
        .all(|(_, p)| p.state() == MirrorState::Mirroring));
    drop(fetches);
    let node_bytes = live().0 - before + std::mem::size_of::<NodeMirror>();
    let per_node = node_bytes as f64 / NODE_PARTITIONS as f64;
    println!(
        "memory/node manager, {NODE_PARTITIONS} idle MIRRORING partitions (coalesced fetch in \
         flight): {node_bytes} bytes = {per_node:.1} bytes per partition"
    );
    drop(node);

    let before = live().0;
    let mut exec = Executor::new();
    let set = im::ordset![1];
    let mut lone = Vec::with_capacity(NODE_PARTITIONS);
    for i in 0..NODE_PARTITIONS {
        let mut partition = new_partition(i as i32);
        let mut log = MemLog::new();
        let leader = Input::BecameLeader {
            leader_epoch: 1,
            replicas: set.clone(),
            isr: set.clone(),
        };
        exec.drive(leader, &mut partition, &mut log);
        lone.push(partition);
    }
    drop(exec);
    let lone_bytes = live().0 - before;
    let per_lone = lone_bytes as f64 / NODE_PARTITIONS as f64;
    println!(
        "memory/node manager baseline, {NODE_PARTITIONS} lone MIRRORING partitions in a Vec: \
         {lone_bytes} bytes = {per_lone:.1} bytes per partition; node / lone = {:.2}",
        per_node / per_lone
    );
    drop(lone);
}

fn main() {
    // `cargo bench` passes `--bench`; a filter argument is accepted and ignored.
    let _profiler = dhat::Profiler::builder().testing().build();
    per_step();
    per_partition();
    per_node_partition();
}
