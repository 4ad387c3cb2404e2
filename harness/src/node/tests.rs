//! The node driver against the wire layer's fake multi-broker cluster: many partitions of two
//! topics mirrored byte for byte with one Fetch per source broker per round, a stop of one
//! topic, bad requests answered per topic, and the single-partition format refused.

use kafka_protocol::messages::ApiKey;
use kmirror_kernel::controller::{MirrorErrorCode, MirrorRequest};
use kmirror_kernel::log::LogView;
use kmirror_kernel::node::PartitionKey;
use kmirror_kernel::state::MirrorState;
use kmirror_kernel::types::{MirrorName, TopicId};

use super::fixture::{east, fake, source, ORDERS, PAY_EU};
use super::*;
use crate::driver::ManualClock;
use crate::wire::fake_broker::{FakeCluster, FakePartition};

fn options() -> NodeDriverOptions {
    NodeDriverOptions {
        max_fetch_batches: 2,
        ..NodeDriverOptions::default()
    }
}

/// A node destination mirroring orders (3 partitions) and pay.eu (2) from the fake, run until
/// caught up.
fn mirrored(fake: &FakeCluster, root: &std::path::Path) -> (NodeDriver, ManualClock) {
    let dest = NodeDest::create(root, NodeMeta::new(Some(fake.address(1)), 4)).unwrap();
    let mut driver =
        NodeDriver::from_dest(dest, Some(source(fake, &["orders", "pay.eu"])), options()).unwrap();
    let results = driver
        .add_topics(
            &east(),
            &[("orders".into(), ORDERS, 3), ("pay.eu".into(), PAY_EU, 2)],
            0,
        )
        .unwrap();
    assert!(results.values().all(Result::is_ok), "{results:?}");
    let mut clock = ManualClock::default();
    run_until_caught_up(&mut driver, &mut clock);
    (driver, clock)
}

/// Steps until caught up, at most 10,000 steps (a test never hangs): the clock moves 10 ms a
/// step, so backoffs and retries pass.
fn run_until_caught_up(driver: &mut NodeDriver, clock: &mut ManualClock) {
    for _ in 0..10_000 {
        clock.now_ms += 10;
        driver.run_once(clock.now_ms).unwrap();
        if driver.all_caught_up() {
            return;
        }
    }
    let steps: Vec<String> = driver
        .node()
        .partitions()
        .map(|(k, pm)| format!("{k}: {} {:?}", pm.state(), pm.activity()))
        .collect();
    panic!(
        "not caught up after 10,000 steps: {steps:#?}\nevents: {:#?}\nstatus: {}",
        driver.take_events(),
        driver.status().render()
    );
}

fn assert_same_bytes(fake: &FakeCluster, driver: &NodeDriver, topic: TopicId, partition: i32) {
    let expected: Vec<u8> = {
        let state = fake.state();
        let t = state.topics.iter().find(|t| t.id == topic).unwrap();
        t.partitions[partition as usize]
            .batches
            .iter()
            .flat_map(|b| b.bytes().to_vec())
            .collect()
    };
    let log = driver.log(&PartitionKey::new(topic, partition)).unwrap();
    let got: Vec<u8> = log
        .try_read(0, log.log_end_offset())
        .unwrap()
        .iter()
        .flat_map(|b| b.bytes().to_vec())
        .collect();
    // The stop appends the destination's own MIRROR_PID_RESET after the mirrored bytes.
    assert!(
        got.starts_with(&expected),
        "{topic:?}-{partition} differs from the source"
    );
}

#[test]
fn mirrors_every_partition_byte_for_byte_one_fetch_per_broker_per_round() {
    let fake = fake();
    let dir = tempfile::tempdir().unwrap();
    let (driver, _) = mirrored(&fake, &dir.path().join("west"));
    for p in 0..3 {
        assert_same_bytes(&fake, &driver, ORDERS, p);
        let key = PartitionKey::new(ORDERS, p);
        assert_eq!(driver.persisted_state(&key), MirrorState::Mirroring);
    }
    for p in 0..2 {
        assert_same_bytes(&fake, &driver, PAY_EU, p);
    }
    let rounds = driver.stats().rounds as usize;
    let state = fake.state();
    for broker in 1..=2 {
        let fetches = state.count(broker, ApiKey::Fetch);
        assert!(
            fetches > 0 && fetches <= rounds,
            "broker {broker}: {fetches} Fetches in {rounds} rounds"
        );
    }
    drop(state);
    let status = driver.status();
    assert_eq!(status.partitions.len(), 5);
    assert!(
        status.partitions.iter().all(|p| p.lag == Some(0)),
        "{status:?}"
    );
    let orders = status.topics.iter().find(|t| t.topic == "orders").unwrap();
    assert_eq!(orders.states.get("MIRRORING"), Some(&3));
    assert!(status.render().contains("orders-2"));
}

#[test]
fn stop_one_topic_fails_it_over_and_leaves_the_other_mirroring() {
    let fake = fake();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("west");
    let (driver, _) = mirrored(&fake, &root);
    driver.close().unwrap();

    // `kmirror stop`: no source needed.
    let mut driver = NodeDriver::open(&root, None, options()).unwrap();
    let results = driver
        .request(
            &MirrorRequest::RemoveTopics {
                mirror: east().to_string(),
                topics: vec!["orders".into(), "nope".into()],
            },
            0,
        )
        .unwrap();
    assert!(results["orders"].is_ok());
    assert_eq!(
        results["nope"].as_ref().unwrap_err().code,
        MirrorErrorCode::UnknownTopicOrPartition
    );
    let mut clock = ManualClock::default();
    driver
        .run(&mut clock, NodeUntil::Settled, &mut |_, _| {})
        .unwrap();
    for p in 0..3 {
        let key = PartitionKey::new(ORDERS, p);
        assert_eq!(driver.persisted_state(&key), MirrorState::Stopped);
        assert!(driver.dest().meta().partitions[&("orders".to_owned(), p)].writable);
        assert_same_bytes(&fake, &driver, ORDERS, p);
    }
    for p in 0..2 {
        let key = PartitionKey::new(PAY_EU, p);
        assert_eq!(driver.persisted_state(&key), MirrorState::Mirroring);
        assert!(!driver.dest().meta().partitions[&("pay.eu".to_owned(), p)].writable);
    }
    // Stopping again: the topic is no longer MIRRORING; nothing changes.
    let again = driver
        .request(
            &MirrorRequest::RemoveTopics {
                mirror: east().to_string(),
                topics: vec!["orders".into()],
            },
            0,
        )
        .unwrap();
    assert!(
        again["orders"].is_ok(),
        "repeated after success: a no-op success"
    );
}

#[test]
fn bad_topics_are_refused_per_topic_and_change_nothing() {
    let fake = fake();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("west");
    let (mut driver, _) = mirrored(&fake, &root);
    let before = driver.dest().meta().clone();
    // Another mirror, a re-created topic (new id), a topic whose source shrank.
    let results = driver
        .add_topics(
            &MirrorName::new("other").unwrap(),
            &[("orders".into(), ORDERS, 3)],
            0,
        )
        .unwrap();
    assert_eq!(
        results["orders"].as_ref().unwrap_err().code,
        MirrorErrorCode::TopicAlreadyInClusterMirror
    );
    let results = driver
        .add_topics(
            &east(),
            &[
                ("orders".into(), TopicId([9; 16]), 3),
                ("pay.eu".into(), PAY_EU, 1),
            ],
            0,
        )
        .unwrap();
    assert!(results["orders"]
        .as_ref()
        .unwrap_err()
        .message
        .contains("re-created"));
    assert!(results["pay.eu"]
        .as_ref()
        .unwrap_err()
        .message
        .contains("cannot be removed"));
    assert_eq!(driver.dest().meta(), &before);
}

#[test]
fn the_source_growing_grows_the_destination() {
    let fake = fake();
    let dir = tempfile::tempdir().unwrap();
    let (mut driver, mut clock) = mirrored(&fake, &dir.path().join("west"));
    fake.state().topics[1]
        .partitions
        .push(FakePartition::with_batches(1, 3, 3));
    driver.set_source(Some(source(&fake, &["orders", "pay.eu"])));
    run_until_caught_up(&mut driver, &mut clock);
    assert_eq!(driver.dest().meta().topics["pay.eu"].partitions, 3);
    assert_same_bytes(&fake, &driver, PAY_EU, 2);
}

#[test]
fn a_source_leader_change_is_followed() {
    let fake = fake();
    let dir = tempfile::tempdir().unwrap();
    let (mut driver, mut clock) = mirrored(&fake, &dir.path().join("west"));
    // orders-0 moves from broker 1 to broker 2 (epoch 6), which gets one more batch.
    {
        let mut state = fake.state();
        let p = &mut state.topics[0].partitions[0];
        p.leader = 2;
        p.epoch = 6;
        let base = p.batches.last().unwrap().header().last_offset + 1;
        let header = kmirror_kernel::batch::BatchHeader::plain(base, base + 1, 6);
        p.batches
            .push(crate::record_batch::RawBatch::synthesize(&header, 2_000).unwrap());
    }
    let before = fake.state().count(2, ApiKey::Fetch);
    // The next round finds broker 1 no longer leading: retryable, the metadata is refreshed.
    for _ in 0..5 {
        clock.now_ms += 10;
        driver.run_once(clock.now_ms).unwrap();
    }
    run_until_caught_up(&mut driver, &mut clock);
    let key = PartitionKey::new(ORDERS, 0);
    assert_eq!(driver.node().source_leader(&key), Some(2));
    assert_same_bytes(&fake, &driver, ORDERS, 0);
    assert!(fake.state().count(2, ApiKey::Fetch) > before);
    assert_eq!(driver.persisted_state(&key), MirrorState::Mirroring);
}

#[test]
fn a_stop_after_a_restart_keeps_batches_above_the_checkpointed_high_watermark() {
    let fake = fake();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("west");
    let (driver, _) = mirrored(&fake, &root);
    let leo = driver
        .log(&PartitionKey::new(ORDERS, 0))
        .unwrap()
        .log_end_offset();
    assert!(leo > 0);
    driver.close().unwrap();
    // The HW checkpoint lags the log, as after a crash between checkpoints.
    let tp = crate::file_log::TopicPartition::new("orders", 0).unwrap();
    crate::log_dir_checkpoints::LogDirCheckpoints::open(&root.join("data"))
        .unwrap()
        .set_now(
            crate::log_dir_checkpoints::CheckpointKind::HighWatermark,
            &tp,
            0,
        )
        .unwrap();

    let mut driver = NodeDriver::open(&root, None, options()).unwrap();
    let results = driver
        .request(
            &MirrorRequest::RemoveTopics {
                mirror: east().to_string(),
                topics: vec!["orders".into()],
            },
            0,
        )
        .unwrap();
    assert!(results["orders"].is_ok());
    let mut clock = ManualClock::default();
    driver
        .run(&mut clock, NodeUntil::Settled, &mut |_, _| {})
        .unwrap();
    let key = PartitionKey::new(ORDERS, 0);
    assert_eq!(driver.persisted_state(&key), MirrorState::Stopped);
    // Leading with ISR {self} moved the HW to the LEO before the stop computed its LSO: the
    // mirrored batches are kept and the MIRROR_PID_RESET follows them.
    assert_eq!(driver.log(&key).unwrap().log_end_offset(), leo + 1);
    assert_same_bytes(&fake, &driver, ORDERS, 0);
}

#[test]
fn close_flushes_every_partition_log_on_its_threads() {
    let fake = fake();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("west");
    let (driver, _) = mirrored(&fake, &root);
    let ends: Vec<(PartitionKey, i64)> = [(ORDERS, 3), (PAY_EU, 2)]
        .iter()
        .flat_map(|&(t, n)| (0..n).map(move |p| PartitionKey::new(t, p)))
        .map(|k| (k, driver.log(&k).unwrap().log_end_offset()))
        .collect();
    // Five logs: more than one closing thread.
    assert!(ends.len() > 1 && ends.len() <= driver::CLOSE_THREADS);
    driver.close().unwrap();
    let reopened = NodeDriver::open(&root, None, options()).unwrap();
    for (key, end) in ends {
        let log = reopened.log(&key).unwrap();
        assert_eq!(log.log_end_offset(), end, "{key}");
        assert_eq!(log.recovery_point(), end, "{key}: flushed at close");
    }
}

#[test]
fn a_destination_in_the_older_per_partition_checkpoint_layout_is_migrated_on_open() {
    use crate::file_log::{encode_offset_checkpoint, TopicPartition};
    use crate::log_dir_checkpoints::{CheckpointKind, LogDirCheckpoints};
    let fake = fake();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("west");
    let (driver, _) = mirrored(&fake, &root);
    let keys: Vec<PartitionKey> = [(ORDERS, 3), (PAY_EU, 2)]
        .iter()
        .flat_map(|&(t, n)| (0..n).map(move |p| PartitionKey::new(t, p)))
        .collect();
    let ends: Vec<i64> = keys
        .iter()
        .map(|k| driver.log(k).unwrap().log_end_offset())
        .collect();
    driver.close().unwrap();

    // Rewrite it as kmirror-node-1 wrote it: each partition directory with its own three
    // offset files, none in the log dir.
    let data = root.join("data");
    let store = LogDirCheckpoints::open(&data).unwrap();
    let mut dirs = 0;
    for e in std::fs::read_dir(&data).unwrap() {
        let path = e.unwrap().path();
        if !path.is_dir() {
            continue;
        }
        let tp =
            TopicPartition::from_dir_name(path.file_name().unwrap().to_str().unwrap()).unwrap();
        for kind in CheckpointKind::ALL {
            let offset = store.get(kind, &tp).unwrap();
            std::fs::write(
                path.join(kind.file_name()),
                encode_offset_checkpoint(&tp, offset),
            )
            .unwrap();
        }
        dirs += 1;
    }
    assert_eq!(
        dirs,
        5 + 4,
        "five partitions and four __mirror_state partitions"
    );
    for kind in CheckpointKind::ALL {
        std::fs::remove_file(data.join(kind.file_name())).unwrap();
    }
    let props = root.join(super::dest::NODE_FILE);
    let text = std::fs::read_to_string(&props).unwrap();
    std::fs::write(
        &props,
        text.replace("format=kmirror-node-2", "format=kmirror-node-1"),
    )
    .unwrap();

    let driver = NodeDriver::open(&root, None, options()).unwrap();
    for (key, end) in keys.iter().zip(&ends) {
        assert_eq!(driver.log(key).unwrap().log_end_offset(), *end, "{key}");
        assert_eq!(driver.persisted_state(key), MirrorState::Mirroring, "{key}");
    }
    assert!(std::fs::read_to_string(&props)
        .unwrap()
        .contains("format=kmirror-node-2\n"));
    let store = LogDirCheckpoints::open(&data).unwrap();
    for e in std::fs::read_dir(&data).unwrap() {
        let path = e.unwrap().path();
        if !path.is_dir() {
            continue;
        }
        let tp =
            TopicPartition::from_dir_name(path.file_name().unwrap().to_str().unwrap()).unwrap();
        for kind in CheckpointKind::ALL {
            assert!(!path.join(kind.file_name()).exists(), "{}", path.display());
            assert!(store.get(kind, &tp).is_some(), "{tp:?} {kind:?}");
        }
    }
    let tp = TopicPartition::new("orders", 0).unwrap();
    assert_eq!(
        store.get(CheckpointKind::RecoveryPoint, &tp),
        Some(ends[0]),
        "the recovery point read from the partition's own file"
    );
}
