//! Shared by the node benches: a node destination's topics added to a mirror and driven against
//! a fake source until every partition is MIRRORING, and a backlog mirrored.

use std::path::Path;

use kmirror_harness::node::{NodeDest, NodeDriver, NodeDriverOptions, NodeMeta};
use kmirror_harness::wire::SourceCluster;
use kmirror_kernel::state::MirrorState;
use kmirror_kernel::types::{MirrorName, TopicId};

/// Adds `topics` (name, id, partitions) to the mirror `fake-source` and runs `driver` until
/// every partition is caught up, the clock moving `step_ms` a step (so that backoffs pass);
/// checks that every partition of the topics is MIRRORING.
pub fn add_until_mirroring(
    driver: &mut NodeDriver,
    topics: &[(String, TopicId, i32)],
    step_ms: i64,
) {
    let mirror = MirrorName::new("fake-source").expect("valid");
    let results = driver.add_topics(&mirror, topics, 0).expect("added");
    assert!(results.values().all(Result::is_ok), "{results:?}");
    let mut now = 0;
    while !driver.all_caught_up() {
        now += step_ms;
        driver.run_once(now).expect("runs");
    }
    let partitions: i32 = topics.iter().map(|(_, _, n)| n).sum();
    assert_eq!(
        driver.node().partitions().count(),
        usize::try_from(partitions).expect("a count")
    );
    assert!(driver
        .node()
        .partitions()
        .all(|(_, p)| p.state() == MirrorState::Mirroring));
}

/// A new node destination at `root` (its source `bootstrap`, `replicas` replicas of every
/// partition) with `topics` created, each partition's leader epoch 1 (above the source
/// batches' epoch 0, so no epoch bump comes with the data), driven through `source` with
/// `options` until every partition is MIRRORING against the (empty) source.
pub fn mirroring_dest(
    root: &Path,
    bootstrap: &str,
    topics: &[(String, TopicId, i32)],
    source: SourceCluster,
    options: NodeDriverOptions,
    replicas: u32,
) -> NodeDriver {
    let mut meta = NodeMeta::new(Some(bootstrap.to_owned()), 8);
    meta.replicas = replicas;
    let mut dest = NodeDest::create(root, meta).expect("created");
    for (name, id, partitions) in topics {
        dest.add_topic(name, *id, *partitions, None).expect("topic");
    }
    let mut meta = dest.meta().clone();
    for partition in meta.partitions.values_mut() {
        partition.leader_epoch = 1;
    }
    dest.set_meta(meta).expect("epochs");
    let mut driver = NodeDriver::from_dest(dest, Some(source), options).expect("driver");
    add_until_mirroring(&mut driver, topics, 1);
    driver
}

/// Runs `driver` until it appended `total` more bytes and every partition is caught up (the
/// clock moving 1 ms a step).
pub fn mirror_backlog(driver: &mut NodeDriver, total: u64) {
    let before = driver.stats().bytes;
    let mut now = 1_000_000;
    loop {
        now += 1;
        driver.run_once(now).expect("runs");
        if driver.stats().bytes - before >= total && driver.all_caught_up() {
            break;
        }
    }
}
