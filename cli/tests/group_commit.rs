//! The node destination's state changes are group-committed: bringing 200 partitions to
//! MIRRORING, copying them, and failing every one over (four `__mirror_state` records each)
//! costs a bounded number of durability calls per round, not per partition. Counted with
//! `kmirror_harness::durability::syncs`, a process-wide counter, so this binary holds this one
//! test (no other test's fsyncs are counted with it).
//!
//! The bounds are far below one call per partition and far above what the group commit makes,
//! so that they hold on any disk and fail only when durability goes back to per-partition
//! calls. Where `syncfs` does not report writeback errors (Linux before 5.8) the node falls back
//! to one flush per log and the test checks that fallback's bound instead.

use std::path::Path;

use kmirror_harness::clock::ManualClock;
use kmirror_harness::durability::{self, FsBarrier};
use kmirror_harness::node::{
    NodeDest, NodeDriver, NodeDriverOptions, NodeMeta, NodeUntil, TopicsVerb,
};
use kmirror_harness::wire::fake_broker::{FakeCluster, FakePartition, FakeTopic};
use kmirror_harness::wire::{SourceCluster, SourceClusterOptions, TopicSelection};
use kmirror_kernel::state::MirrorState;
use kmirror_kernel::types::{MirrorName, TopicId};

const TOPICS: u64 = 20;
const PER_TOPIC: i32 = 10;
const PARTITIONS: u64 = TOPICS * PER_TOPIC as u64;

fn name(t: u64) -> String {
    format!("t{t:02}")
}

fn id(t: u64) -> TopicId {
    TopicId::from_u64(0x6763_0000 + t)
}

/// 20 topics of 10 partitions, each 3 batches of 2 records at epoch 4, led by brokers 1-3.
fn fake() -> FakeCluster {
    FakeCluster::start(
        3,
        (0..TOPICS)
            .map(|t| FakeTopic {
                name: name(t),
                id: id(t),
                partitions: (0..PER_TOPIC)
                    .map(|p| FakePartition::with_batches(1 + (t as i32 + p) % 3, 4, 3))
                    .collect(),
            })
            .collect(),
    )
}

fn states(driver: &NodeDriver, state: MirrorState) -> usize {
    driver
        .node()
        .partitions()
        .filter(|(_, p)| p.state() == state)
        .count()
}

/// Durability calls made by `f`, per partition.
fn per_partition(f: impl FnOnce()) -> f64 {
    let before = durability::syncs();
    f();
    (durability::syncs() - before) as f64 / PARTITIONS as f64
}

#[test]
fn mirroring_and_failing_over_200_partitions_costs_a_few_syncs_per_round() {
    let fake = fake();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("dest");
    let names: Vec<String> = (0..TOPICS).map(name).collect();
    let options = SourceClusterOptions {
        fetch_max_wait_ms: 0,
        ..SourceClusterOptions::default()
    };
    let source = SourceCluster::new(
        &fake.address(1),
        TopicSelection::names(&names).unwrap(),
        options,
    );

    let mirrored = per_partition(|| {
        let dest = NodeDest::create(&root, NodeMeta::new(Some(fake.address(1)), 8)).unwrap();
        let mut driver =
            NodeDriver::from_dest(dest, Some(source), NodeDriverOptions::default()).unwrap();
        let wanted: Vec<(String, TopicId, i32)> =
            (0..TOPICS).map(|t| (name(t), id(t), PER_TOPIC)).collect();
        let mirror = MirrorName::new("fake-cluster").unwrap();
        let results = driver.add_topics(&mirror, &wanted, 0).unwrap();
        assert!(results.values().all(Result::is_ok), "{results:?}");
        // The clock moves 10 ms a round, so backoffs pass; a test never hangs.
        let mut now = 0;
        while !driver.all_caught_up() {
            now += 10;
            if now > 100_000 {
                let states: Vec<String> = driver
                    .node()
                    .partitions()
                    .map(|(k, p)| format!("{k}: {} {:?}", p.state(), p.activity()))
                    .take(5)
                    .collect();
                panic!("not caught up after 10,000 rounds: {states:#?}");
            }
            driver.run_once(now).unwrap();
        }
        assert_eq!(states(&driver, MirrorState::Mirroring), PARTITIONS as usize);
        driver.close().unwrap();
    });

    let failed_over = per_partition(|| {
        let mut driver = NodeDriver::open(&root, None, NodeDriverOptions::default()).unwrap();
        let results = driver
            .request_topics(TopicsVerb::Stop, "*", None, 0)
            .unwrap();
        assert!(results.values().all(Result::is_ok), "{results:?}");
        driver.start(0).unwrap();
        driver
            .run(
                &mut ManualClock::default(),
                NodeUntil::Settled,
                &mut |_, _| {},
            )
            .unwrap();
        assert_eq!(states(&driver, MirrorState::Stopped), PARTITIONS as usize);
        driver.close().unwrap();
    });

    eprintln!(
        "group commit: {mirrored:.3} durability calls per partition to mirror, \
         {failed_over:.3} to fail over"
    );
    let barrier = FsBarrier::open(Path::new(&root)).unwrap().is_some();
    // With the barrier: a few calls per round (measured 0.05 per partition at 1,000
    // partitions); flushing each log by itself made 16 (mirror) and 12 (failover).
    let bound = if barrier { 0.5 } else { 20.0 };
    assert!(mirrored <= bound, "{mirrored} per partition to mirror");
    assert!(
        failed_over <= bound,
        "{failed_over} per partition to fail over"
    );
}
