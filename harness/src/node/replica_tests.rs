//! The node's in-process follower replicas (`replicas=N`): every partition's followers hold
//! the leader's log byte for byte once a step ends, the kernel's waits for them are answered
//! (PREPARING's truncation quorum, the stop's committed `MIRROR_PID_RESET`), a diverging source
//! truncates the followers after the leader, a restart or a lost follower directory is
//! recovered from the leader, and clients' writes, DeleteRecords and DeleteTopics reach the
//! followers.

use std::path::Path;

use kmirror_kernel::log::LogView;
use kmirror_kernel::node::PartitionKey;
use kmirror_kernel::state::MirrorState;

use super::fixture::{
    added_replicated, fail_over_orders, fake, options, source, unclean_election_on_orders_0, BOTH,
    ORDERS, PAY_EU,
};
use super::serve_tests::{client_batch, connect, delete_orders, delete_records, produce, Running};
use super::*;
use crate::clock::ManualClock;
use crate::file_log::FileLog;
use crate::wire::fake_broker::FakeCluster;

/// Every partition of the fake's two topics.
fn keys() -> Vec<PartitionKey> {
    let orders = (0..3).map(|p| PartitionKey::new(ORDERS, p));
    orders
        .chain((0..2).map(|p| PartitionKey::new(PAY_EU, p)))
        .collect()
}

fn bytes(log: &FileLog) -> Vec<u8> {
    log.try_read(log.log_start_offset(), log.log_end_offset())
        .unwrap()
        .iter()
        .flat_map(|b| b.bytes().to_vec())
        .collect()
}

/// Every partition has `followers` followers, each holding the leader's log byte for byte
/// with its log start, LEO and HW, and the leader's HW is its LEO.
fn assert_in_sync(driver: &NodeDriver, followers: usize) {
    for key in keys() {
        let leader = driver.log(&key).unwrap();
        assert_eq!(
            leader.high_watermark(),
            leader.log_end_offset(),
            "{key}: the leader's HW"
        );
        let replicas = driver.followers(&key);
        assert_eq!(replicas.len(), followers, "{key}: followers");
        for f in replicas {
            let at = format!("{key}, follower {}", f.id);
            assert_eq!(bytes(&f.log), bytes(leader), "{at}: bytes");
            assert_eq!(
                (
                    f.log.log_start_offset(),
                    f.log.log_end_offset(),
                    f.log.high_watermark()
                ),
                (
                    leader.log_start_offset(),
                    leader.log_end_offset(),
                    leader.high_watermark()
                ),
                "{at}: log start, LEO, HW"
            );
            assert_eq!(f.log.epoch_cache(), leader.epoch_cache(), "{at}: epochs");
        }
    }
}

/// The fake's two topics mirrored into a node of `replicas` replicas at `root`, until caught
/// up (at most 10,000 steps of 10 ms).
fn mirrored(fake: &FakeCluster, root: &Path, replicas: u32) -> (NodeDriver, ManualClock) {
    let mut driver = added_replicated(fake, root, source(fake, BOTH), options(), replicas);
    let mut clock = ManualClock::default();
    run_until(&mut driver, &mut clock, |d| d.all_caught_up());
    (driver, clock)
}

fn run_until(driver: &mut NodeDriver, clock: &mut ManualClock, done: impl Fn(&NodeDriver) -> bool) {
    for _ in 0..10_000 {
        clock.now_ms += 10;
        driver.run_once(clock.now_ms).unwrap();
        if done(driver) {
            return;
        }
    }
    panic!("not done after 10,000 steps: {:#?}", driver.take_events());
}

#[test]
fn followers_hold_every_mirrored_partition_and_a_stop_commits_on_all_of_them() {
    let fake = fake();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("west");
    // PREPARING waits for every replica to truncate to the LME: without the followers'
    // ReplicaFetched no partition would ever mirror.
    let (mut driver, mut clock) = mirrored(&fake, &root, 3);
    for key in keys() {
        assert_eq!(
            driver.persisted_state(&key),
            MirrorState::Mirroring,
            "{key}"
        );
    }
    assert_in_sync(&driver, 2);
    assert!(root.join("replicas/broker-1/orders-2").is_dir());
    assert!(root.join("replicas/broker-2/pay.eu-1").is_dir());
    let props = std::fs::read_to_string(root.join("node.properties")).unwrap();
    assert!(props.contains("\nreplicas=3\n"), "{props}");

    // A stop waits for its MIRROR_PID_RESET to be committed: on every replica.
    fail_over_orders(&mut driver, &mut clock);
    for p in 0..3 {
        let key = PartitionKey::new(ORDERS, p);
        assert_eq!(driver.persisted_state(&key), MirrorState::Stopped);
    }
    assert_in_sync(&driver, 2);
    let leader = driver.log(&PartitionKey::new(ORDERS, 0)).unwrap();
    assert!(
        leader.last_batch().unwrap().is_control(),
        "the MIRROR_PID_RESET is the last batch"
    );
    driver.close().unwrap();

    // Reopened: every follower recovered, still the leader's copy.
    let driver = NodeDriver::open(&root, None, options()).unwrap();
    assert_in_sync(&driver, 2);
    driver.close().unwrap();
}

#[test]
fn a_diverging_source_truncates_the_leader_then_its_followers() {
    let fake = fake();
    let dir = tempfile::tempdir().unwrap();
    let (mut driver, mut clock) = mirrored(&fake, &dir.path().join("west"), 2);
    driver.take_events();
    // An unclean election on the source: its new leader of orders-0 kept offsets 0..=3 of
    // epoch 5 and appended three batches of epoch 6 from offset 4.
    unclean_election_on_orders_0(&fake);
    run_until(&mut driver, &mut clock, |d| d.all_caught_up());
    let events = driver.take_events();
    assert!(
        events
            .iter()
            .any(|e| e == "orders-0: follower 1 truncated from LEO 8 to 4"),
        "{events:#?}"
    );
    assert_eq!(
        driver
            .log(&PartitionKey::new(ORDERS, 0))
            .unwrap()
            .log_end_offset(),
        10
    );
    assert_in_sync(&driver, 1);
}

#[test]
fn a_killed_node_and_a_lost_follower_directory_are_replicated_again_on_open() {
    let fake = fake();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("west");
    let (driver, _) = mirrored(&fake, &root, 3);
    // Killed: nothing closed, nothing flushed past what the round wrote.
    drop(driver);
    std::fs::remove_dir_all(root.join("replicas/broker-2/orders-1")).unwrap();
    let mut driver = NodeDriver::open(&root, None, options()).unwrap();
    let mut clock = ManualClock::default();
    driver
        .run(&mut clock, NodeUntil::Settled, &mut |_, _| {})
        .unwrap();
    assert_in_sync(&driver, 2);
    driver.close().unwrap();
    // `kmirror verify` scans the followers' logs too: 5 partitions and 4 `__mirror_state`
    // partitions on the leader, 5 partitions on each follower.
    let verdicts = super::verify::verify_node(&root).unwrap();
    assert_eq!(verdicts.len(), 9 + 2 * 5, "{verdicts:#?}");
    assert!(verdicts.iter().all(|v| v.result.is_ok()), "{verdicts:#?}");
    assert!(verdicts
        .iter()
        .any(|v| v.dir.ends_with("replicas/broker-2/orders-1")));
}

#[test]
fn clients_writes_deleted_records_and_a_deleted_topic_reach_the_followers() {
    let fake = fake();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("west");
    let (mut driver, mut clock) = mirrored(&fake, &root, 2);
    fail_over_orders(&mut driver, &mut clock);
    let end = driver
        .log(&PartitionKey::new(ORDERS, 1))
        .unwrap()
        .log_end_offset();
    let running = Running::start(driver);
    let mut conn = connect(&running.address);
    assert_eq!(produce(&mut conn, 1, &client_batch(3, -1, 0)), (0, end));
    assert_eq!(delete_records(&mut conn, 1, 2), (0, 2));
    let driver = running.stop();
    assert_in_sync(&driver, 1);
    let follower = &driver.followers(&PartitionKey::new(ORDERS, 1))[0].log;
    assert_eq!(
        (follower.log_start_offset(), follower.log_end_offset()),
        (2, end + 3)
    );

    let running = Running::start(driver);
    let mut conn = connect(&running.address);
    assert_eq!(delete_orders(&mut conn), 0);
    let driver = running.stop();
    assert!(driver.followers(&PartitionKey::new(ORDERS, 0)).is_empty());
    for p in 0..3 {
        let gone = root.join(format!("replicas/broker-1/orders-{p}"));
        assert!(!gone.exists(), "{} is left", gone.display());
    }
    assert!(root.join("replicas/broker-1/pay.eu-0").is_dir());
    driver.close().unwrap();
}

#[test]
fn the_replica_count_is_read_checked_and_fixed_at_creation() {
    let file = Path::new("node.properties");
    let base = "format=kmirror-node-2\nbroker.id=5\nmirror_state.partitions=2\nmirrors=\n";
    let meta = NodeMeta::decode(base, file).unwrap();
    assert_eq!((meta.replicas, meta.follower_ids()), (1, vec![]));
    let meta = NodeMeta::decode(&format!("{base}replicas=3\n"), file).unwrap();
    assert_eq!((meta.replicas, meta.follower_ids()), (3, vec![6, 7]));
    assert_eq!(NodeMeta::decode(&meta.encode(), file).unwrap(), meta);
    for bad in ["0", "17", "two"] {
        let err = NodeMeta::decode(&format!("{base}replicas={bad}\n"), file).unwrap_err();
        assert!(
            err.to_string().contains("a replica count in 1..=16"),
            "{bad}: {err}"
        );
    }
    let dir = tempfile::tempdir().unwrap();
    let mut meta = NodeMeta::new(None, 2);
    meta.replicas = 0;
    let err = NodeDest::create(&dir.path().join("n"), meta).unwrap_err();
    assert!(err.to_string().contains("1 to 16 replicas"), "{err}");
}
