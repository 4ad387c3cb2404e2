//! State changes at node scale, where an operator waits on them during an outage: a failover
//! of every topic of a node destination (`kmirror stop --topics '*'`), and a new destination
//! brought to MIRRORING, on real files. Each figure is printed with the durability calls it
//! made per partition (`fdatasync`, `fsync` and `syncfs`, counted by
//! `kmirror_harness::durability::syncs`), and sits beside a baseline measured in the same run.
//!
//! - `node_failover/stop/<N>`: a node destination of `N` partitions (1,000 and 10,000: 100 and
//!   1,000 topics of 10), each MIRRORING with one mirrored batch, held open by a started node
//!   (untimed, as a running `kmirror mirror` holds it), failed over whole: RemoveTopicsFromMirror
//!   of every topic, the node driven until every partition is STOPPED (STOPPING written, the
//!   LSO checked, the LME recorded, `MIRROR_PID_RESET` appended, STOPPED written: four
//!   `__mirror_state` records per partition, group-committed) and writable. Then closed,
//!   untimed. Each sample fails over a fresh copy of the destination (copied untimed; copies
//!   are deleted only at the end).
//! - `node_failover/stop_offline/<N>`: the same as `kmirror stop --topics '*'` runs it on a
//!   destination no process holds: opening it (every log recovered) and closing it (every log
//!   and checkpoint written, the deferred leader-epoch checkpoints among them) timed too.
//! - `node_failover/floor/<N>` (baseline, same run): the physical floor of what a failover
//!   must write: the same `N` partitions' `MIRROR_PID_RESET` batches appended to their active
//!   segments and made durable with one `syncfs`.
//! - `node_failover/new_destination/1000`: a destination created from nothing, 1,000
//!   partitions added to a mirror and driven against an empty source until every one is
//!   MIRRORING (before the first byte is copied): the partitions' directories and logs, the
//!   PREPARING and MIRRORING records, the LME query (one ListOffsets per source broker).
//! - `node_failover/layout_floor/1000` (baseline, same run): the layout alone: 1,000
//!   partition directories, each with an empty segment, its index and an empty leader-epoch
//!   checkpoint, made durable with one `syncfs`.
//!
//! Run: `cargo bench -p kmirror-benches --bench node_failover` (about ten minutes; the
//! 10,000-partition copies take some 2 GB of disk until the end of the run).

#[path = "support/bench_main.rs"]
mod bench_main;
#[path = "support/copy_dir.rs"]
mod copy_dir;
#[path = "support/fake_source.rs"]
mod fake_source;
// `mirroring_dest` and `mirror_backlog` are the mirroring benches'.
#[allow(dead_code)]
#[path = "support/node_setup.rs"]
mod node_setup;

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use bytes::Bytes;
use copy_dir::copy_dir;
use criterion::{criterion_group, Criterion};
use fake_source::{back_to_back, uniform_topics, FakeSource, FakeTopic};
use kmirror_harness::clock::ManualClock;
use kmirror_harness::durability::{self, FsBarrier};
use kmirror_harness::node::{
    NodeDest, NodeDriver, NodeDriverOptions, NodeMeta, NodeUntil, TopicsVerb,
};
use kmirror_harness::record_batch::RawBatch;
use kmirror_harness::wire::{SourceCluster, SourceClusterOptions, TopicSelection};
use kmirror_kernel::batch::{BatchHeader, ControlType, LeaderBatch};
use kmirror_kernel::state::MirrorState;
use kmirror_kernel::types::TopicId;

/// Partitions per topic.
const PER_TOPIC: i32 = 10;
/// Source brokers.
const BROKERS: i32 = 3;
/// The failover sizes.
const SIZES: [u64; 2] = [1_000, 10_000];
/// The new destination's size.
const NEW_PARTITIONS: u64 = 1_000;

fn topic_name(t: u64) -> String {
    format!("t{t:04}")
}

fn topic_id(t: u64) -> TopicId {
    TopicId::from_u64(0x6b6d_0000 + t)
}

/// `partitions / PER_TOPIC` topics, each partition one batch of 10 records at epoch 0 (`batches`
/// false: empty).
fn source_topics(partitions: u64) -> Vec<FakeTopic> {
    let header = BatchHeader::plain(0, 9, 0);
    let batch = RawBatch::synthesize(&header, 1_700_000_000_000).expect("batch");
    let (one, ends) = back_to_back(&[batch]);
    let one = Bytes::from(one);
    uniform_topics(
        partitions / PER_TOPIC as u64,
        PER_TOPIC,
        BROKERS,
        |t| (topic_name(t), topic_id(t)),
        &ends,
        || one.clone(),
    )
}

fn source(fake: &FakeSource, topics: u64) -> SourceCluster {
    let names: Vec<String> = (0..topics).map(topic_name).collect();
    let options = SourceClusterOptions {
        fetch_max_wait_ms: 0,
        ..SourceClusterOptions::default()
    };
    SourceCluster::new(
        &fake.bootstrap(),
        TopicSelection::names(&names).expect("valid names"),
        options,
    )
}

/// A new destination at `root`, its `partitions` partitions added to a mirror and driven
/// until every one is MIRRORING (`filled`: and caught up with the source); then closed.
fn mirror_into_new(fake: &FakeSource, root: &Path, partitions: u64) {
    let topics = partitions / PER_TOPIC as u64;
    let dest = NodeDest::create(root, NodeMeta::new(Some(fake.bootstrap()), 8)).expect("created");
    let mut driver = NodeDriver::from_dest(
        dest,
        Some(source(fake, topics)),
        NodeDriverOptions::default(),
    )
    .expect("driver");
    let wanted: Vec<(String, TopicId, i32)> = (0..topics)
        .map(|t| (topic_name(t), topic_id(t), PER_TOPIC))
        .collect();
    node_setup::add_until_mirroring(&mut driver, &wanted, 10);
    driver.close().expect("closed");
}

/// What of a failover is timed.
#[derive(Clone, Copy)]
enum Timed {
    /// From the request to every partition STOPPED (durable, writable), in a node that holds
    /// the destination open (a running `kmirror mirror` handed `kmirror stop`): opening and
    /// closing are not timed.
    ToStopped,
    /// `kmirror stop --topics '*'` on a destination no process holds: the logs opened
    /// (recovered), the failover, the close (every log and checkpoint written).
    Offline,
}

/// Fails every topic of the destination at `root` over; returns the time `timed` names.
fn fail_over(root: &Path, partitions: u64, timed: Timed) -> Duration {
    let start = Instant::now();
    let mut driver = NodeDriver::open(root, None, NodeDriverOptions::default()).expect("opened");
    driver.start(0).expect("started");
    let stop_start = Instant::now();
    let results = driver
        .request_topics(TopicsVerb::Stop, "*", None, 0)
        .expect("requested");
    assert!(results.values().all(Result::is_ok), "{results:?}");
    driver
        .run(
            &mut ManualClock::default(),
            NodeUntil::Settled,
            &mut |_, _| {},
        )
        .expect("settled");
    let to_stopped = stop_start.elapsed();
    let stopped = driver
        .node()
        .partitions()
        .filter(|(_, p)| p.state() == MirrorState::Stopped)
        .count();
    assert_eq!(stopped, partitions as usize);
    driver.close().expect("closed");
    match timed {
        Timed::ToStopped => to_stopped,
        Timed::Offline => start.elapsed(),
    }
}

/// The failover's floor: a `MIRROR_PID_RESET` batch appended to the active segment of every
/// partition of the destination at `root`, then one `syncfs`; returns its time.
fn floor(root: &Path) -> Duration {
    let start = Instant::now();
    let data = root.join("data");
    let barrier = FsBarrier::open(&data).expect("barrier").expect("syncfs");
    for entry in fs::read_dir(&data).expect("data") {
        let dir = entry.expect("entry").path();
        let name = dir.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if !dir.is_dir() || name.starts_with("__") {
            continue;
        }
        let mut segments: Vec<PathBuf> = fs::read_dir(&dir)
            .expect("partition dir")
            .map(|e| e.expect("entry").path())
            .filter(|p| p.extension().is_some_and(|e| e == "log"))
            .collect();
        segments.sort();
        let active = segments.pop().expect("a segment");
        let reset = LeaderBatch::Control {
            control: ControlType::MirrorPidReset,
            producer: None,
        };
        let batch = RawBatch::from_leader_batch(&reset, 10, 2, 1_700_000_000_000).expect("batch");
        let mut file = fs::OpenOptions::new()
            .append(true)
            .open(&active)
            .expect("segment");
        file.write_all(batch.bytes()).expect("append");
    }
    barrier.sync().expect("syncfs");
    start.elapsed()
}

/// The layout floor: `partitions` partition directories under `root/data`, each with an empty
/// segment, its index and an empty leader-epoch checkpoint, then one `syncfs`.
fn layout_floor(root: &Path, partitions: u64) {
    let data = root.join("data");
    fs::create_dir_all(&data).expect("data");
    let barrier = FsBarrier::open(&data).expect("barrier").expect("syncfs");
    for i in 0..partitions {
        let dir = data.join(format!(
            "{}-{}",
            topic_name(i / PER_TOPIC as u64),
            i % PER_TOPIC as u64
        ));
        fs::create_dir(&dir).expect("partition dir");
        for name in [
            "00000000000000000000.log",
            "00000000000000000000.index",
            "leader-epoch-checkpoint",
        ] {
            fs::File::create(dir.join(name)).expect("file");
        }
    }
    barrier.sync().expect("syncfs");
}

/// Runs `f` on a fresh copy of `template` per iteration (copied untimed, kept under `work`
/// until the end), summing the times it returns, printing the durability calls per partition
/// of the first.
fn on_copies(
    name: &str,
    template: &Path,
    work: &Path,
    partitions: u64,
    f: impl Fn(&Path) -> Duration,
) -> impl FnMut(u64) -> Duration {
    let mut n = 0;
    let name = name.to_owned();
    let template = template.to_path_buf();
    let work = work.to_path_buf();
    move |iters| {
        let mut sum = Duration::ZERO;
        for _ in 0..iters {
            n += 1;
            let copy = work.join(format!("{name}-{n}"));
            copy_dir(&template, &copy);
            let syncs = durability::syncs();
            sum += f(&copy);
            if n == 1 {
                let made = durability::syncs() - syncs;
                println!(
                    "node_failover: {name}: {made} durability calls for {partitions} partitions \
                     ({:.4} per partition)",
                    made as f64 / partitions as f64
                );
            }
        }
        sum
    }
}

fn node_failover(c: &mut Criterion) {
    let work = tempfile::tempdir_in(std::env::temp_dir()).expect("a temp dir");
    let mut group = c.benchmark_group("node_failover");
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(10));
    for partitions in SIZES {
        let fake = FakeSource::start(BROKERS, source_topics(partitions));
        fake.set_filled(true);
        let template = work.path().join(format!("template-{partitions}"));
        let start = Instant::now();
        mirror_into_new(&fake, &template, partitions);
        println!(
            "node_failover: {partitions} partitions mirrored into a template (untimed): {:.2?}",
            start.elapsed()
        );
        for (name, timed) in [("stop", Timed::ToStopped), ("stop_offline", Timed::Offline)] {
            let mut run = on_copies(
                &format!("{name}-{partitions}"),
                &template,
                work.path(),
                partitions,
                move |copy| fail_over(copy, partitions, timed),
            );
            group.bench_function(format!("{name}/{partitions}"), |b| b.iter_custom(&mut run));
        }
        let mut floor = on_copies(
            &format!("floor-{partitions}"),
            &template,
            work.path(),
            partitions,
            floor,
        );
        group.bench_function(format!("floor/{partitions}"), |b| b.iter_custom(&mut floor));
    }
    let fake = FakeSource::start(BROKERS, source_topics(NEW_PARTITIONS));
    fake.set_filled(false);
    let mut n = 0;
    group.bench_function(format!("new_destination/{NEW_PARTITIONS}"), |b| {
        b.iter_custom(|iters| {
            let mut sum = Duration::ZERO;
            for _ in 0..iters {
                n += 1;
                let root = work.path().join(format!("new-{n}"));
                let syncs = durability::syncs();
                let start = Instant::now();
                mirror_into_new(&fake, &root, NEW_PARTITIONS);
                sum += start.elapsed();
                if n == 1 {
                    let made = durability::syncs() - syncs;
                    println!(
                        "node_failover: new_destination: {made} durability calls for \
                         {NEW_PARTITIONS} partitions ({:.4} per partition)",
                        made as f64 / NEW_PARTITIONS as f64
                    );
                }
            }
            sum
        })
    });
    let mut n = 0;
    group.bench_function(format!("layout_floor/{NEW_PARTITIONS}"), |b| {
        b.iter_custom(|iters| {
            let mut sum = Duration::ZERO;
            for _ in 0..iters {
                n += 1;
                let root = work.path().join(format!("layout-{n}"));
                let start = Instant::now();
                layout_floor(&root, NEW_PARTITIONS);
                sum += start.elapsed();
            }
            sum
        })
    });
    group.finish();
}

criterion_group!(benches, node_failover);

fn main() {
    bench_main::run("", benches);
}
