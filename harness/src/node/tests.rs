//! The node driver against the wire layer's fake multi-broker cluster: many partitions of two
//! topics mirrored byte for byte with one Fetch per source broker per round, a stop of one
//! topic, bad requests answered per topic, and the single-partition format refused.

use kafka_protocol::messages::ApiKey;
use kmirror_kernel::controller::{MirrorErrorCode, MirrorRequest};
use kmirror_kernel::epoch_cache::EpochCache;
use kmirror_kernel::log::LogView;
use kmirror_kernel::node::PartitionKey;
use kmirror_kernel::state::MirrorState;
use kmirror_kernel::types::{MirrorName, TopicId};

use super::fixture::{east, fake, source, ORDERS, PAY_EU};
use super::*;
use crate::clock::ManualClock;
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

/// [`mirrored`], closed, then opened again without a source, as `kmirror stop` opens it.
fn mirrored_and_reopened(fake: &FakeCluster, root: &std::path::Path) -> NodeDriver {
    let (driver, _) = mirrored(fake, root);
    driver.close().unwrap();
    NodeDriver::open(root, None, options()).unwrap()
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
        driver.status().render(0)
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
    // Each call to the source cluster's fetch (a round's own, or its fetch-ahead) sends at
    // most one Fetch per broker, whatever the partition count.
    let calls = driver.stats().source_fetches as usize;
    let state = fake.state();
    for broker in 1..=2 {
        let fetches = state.count(broker, ApiKey::Fetch);
        assert!(
            fetches > 0 && fetches <= calls,
            "broker {broker}: {fetches} Fetches in {calls} source fetches"
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
    assert!(status.render(0).contains("orders-2"));
}

/// A node destination at `root` with both topics added, fetching ahead or not (not run).
fn added_with(fake: &FakeCluster, root: &std::path::Path, fetch_ahead: bool) -> NodeDriver {
    let dest = NodeDest::create(root, NodeMeta::new(Some(fake.address(1)), 4)).unwrap();
    let options = NodeDriverOptions {
        fetch_ahead,
        ..options()
    };
    let mut driver =
        NodeDriver::from_dest(dest, Some(source(fake, &["orders", "pay.eu"])), options).unwrap();
    driver
        .add_topics(
            &east(),
            &[("orders".into(), ORDERS, 3), ("pay.eu".into(), PAY_EU, 2)],
            0,
        )
        .unwrap();
    driver
}

#[test]
fn fetch_ahead_answers_the_partitions_still_catching_up_and_changes_no_byte() {
    let fake = fake();
    let dir = tempfile::tempdir().unwrap();
    let mut stats = Vec::new();
    for fetch_ahead in [true, false] {
        let mut driver = added_with(
            &fake,
            &dir.path().join(format!("{fetch_ahead}")),
            fetch_ahead,
        );
        run_until_caught_up(&mut driver, &mut ManualClock::default());
        for p in 0..3 {
            assert_same_bytes(&fake, &driver, ORDERS, p);
        }
        for p in 0..2 {
            assert_same_bytes(&fake, &driver, PAY_EU, p);
        }
        stats.push(driver.stats());
    }
    let (ahead, serial) = (stats[0], stats[1]);
    // Two batches a fetch: every orders partition has more after its first answers, and the
    // kernel asks for what was guessed once its epoch is settled.
    assert!(ahead.fetched_ahead >= 3, "{ahead:?}");
    assert_eq!(serial.fetched_ahead, 0, "{serial:?}");
    assert_eq!(
        (ahead.batches, ahead.bytes),
        (serial.batches, serial.bytes),
        "the same batches appended"
    );
}

/// orders-0 led by broker 1 with six batches to mirror (two a fetch), orders-1 led by
/// `tail_leader` with none, on brokers that hold a Fetch with nothing new for its 100 ms wait,
/// as Kafka does.
fn long_polling_orders(tail_leader: i32) -> FakeCluster {
    let fake = FakeCluster::start(
        tail_leader.max(1),
        vec![crate::wire::fake_broker::FakeTopic {
            name: "orders".into(),
            id: ORDERS,
            partitions: vec![
                FakePartition::with_batches(1, 5, 6),
                FakePartition::with_batches(tail_leader, 5, 0),
            ],
        }],
    );
    fake.state().long_poll = true;
    fake
}

/// Mirrors orders from `fake` into a new node destination at `root` until caught up, with
/// fetch-ahead on or off; returns the driver's stats and how many Fetches the brokers held.
fn mirror_long_polled(
    fake: &FakeCluster,
    root: &std::path::Path,
    fetch_ahead: bool,
) -> (NodeStats, usize) {
    let dest = NodeDest::create(root, NodeMeta::new(Some(fake.address(1)), 4)).unwrap();
    let source = crate::wire::SourceCluster::new(
        &fake.address(1),
        crate::wire::TopicSelection::names(&["orders"]).unwrap(),
        // One Fetch in flight per broker, whatever the round trip a loaded machine measures:
        // the long polls are counted.
        crate::wire::SourceClusterOptions {
            fetch_max_wait_ms: 100,
            fetches_in_flight: std::num::NonZeroUsize::new(1),
            ..crate::wire::SourceClusterOptions::default()
        },
    );
    let options = NodeDriverOptions {
        fetch_ahead,
        ..options()
    };
    let mut driver = NodeDriver::from_dest(dest, Some(source), options).unwrap();
    driver
        .add_topics(&east(), &[("orders".into(), ORDERS, 2)], 0)
        .unwrap();
    let held_before = fake.state().long_polls;
    run_until_caught_up(&mut driver, &mut ManualClock::default());
    assert_same_bytes(fake, &driver, ORDERS, 0);
    (driver.stats(), fake.state().long_polls - held_before)
}

#[test]
fn a_brokers_answer_is_written_while_another_broker_long_polls() {
    // orders-1 on broker 2, which holds every Fetch of it with nothing new.
    let fake = long_polling_orders(2);
    let dir = tempfile::tempdir().unwrap();
    let (streaming, _) = mirror_long_polled(&fake, &dir.path().join("ahead"), true);
    let (serial, _) = mirror_long_polled(&fake, &dir.path().join("serial"), false);
    // Broker 1's answers (its fetcher first in the kernel's order) were fed while broker 2
    // still held its Fetch (in the first round at least: later, while orders-0 is read ahead,
    // orders-1 rides in the same Fetch ahead and no round asks it alone); taking turns, never.
    assert!(streaming.fed_while_fetching >= 1, "{streaming:?}");
    assert_eq!(serial.fed_while_fetching, 0, "{serial:?}");
    assert_eq!(
        (streaming.batches, streaming.bytes),
        (serial.batches, serial.bytes)
    );
}

#[test]
fn a_partition_at_the_tail_does_not_hold_a_backlog_in_a_long_poll() {
    // orders-1 on broker 1 too. While orders-0 is read ahead, orders-1 goes in the same Fetch
    // ahead and is left out of the round when it has nothing new, so no round asks it alone:
    // the only Fetch held is the one that finds both partitions caught up, as when fetching
    // and writing take turns.
    let fake = long_polling_orders(1);
    let dir = tempfile::tempdir().unwrap();
    let (ahead, held_ahead) = mirror_long_polled(&fake, &dir.path().join("ahead"), true);
    let (serial, held_serial) = mirror_long_polled(&fake, &dir.path().join("serial"), false);
    assert_eq!((held_ahead, held_serial), (1, 1), "{ahead:?} {serial:?}");
    assert!(ahead.fetched_ahead >= 2, "{ahead:?}");
    assert!(ahead.left_out_ahead >= 2, "{ahead:?}");
    assert_eq!((ahead.batches, ahead.bytes), (serial.batches, serial.bytes));
}

#[test]
fn answers_read_ahead_from_a_source_let_go_of_are_never_used() {
    let fake = fake();
    let dir = tempfile::tempdir().unwrap();
    let mut driver = added_with(&fake, &dir.path().join("west"), true);
    let mut clock = ManualClock::default();
    // Up to the first round answered from a fetch-ahead: orders-2 (6 batches, two a fetch)
    // still has more, so that round read ahead again.
    while driver.stats().fetched_ahead == 0 {
        clock.now_ms += 10;
        driver.run_once(clock.now_ms).unwrap();
        assert!(clock.now_ms < 100_000, "never fetched ahead");
    }
    let swapped = driver.set_source(Some(source(&fake, &["orders", "pay.eu"])));
    assert!(swapped.is_some());
    let before = driver.stats();
    while driver.stats().rounds == before.rounds {
        clock.now_ms += 10;
        driver.run_once(clock.now_ms).unwrap();
    }
    assert_eq!(
        driver.stats().fetched_ahead,
        before.fetched_ahead,
        "the round after the source was replaced fetched everything again"
    );
    run_until_caught_up(&mut driver, &mut clock);
    for p in 0..3 {
        assert_same_bytes(&fake, &driver, ORDERS, p);
    }
}

#[test]
fn stop_one_topic_fails_it_over_and_leaves_the_other_mirroring() {
    let fake = fake();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("west");
    // `kmirror stop`: no source needed.
    let mut driver = mirrored_and_reopened(&fake, &root);
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

/// A failover's group commit makes each log durable with the file-system barrier but defers
/// the leader-epoch checkpoint of the epoch its `MIRROR_PID_RESET` began: the recovery point
/// stays below that batch until a later flush writes the checkpoint. So a kill before then,
/// with the log dir's checkpoint files written, reopens with the epoch rebuilt from the batch;
/// a recovery point moved past it would be refused as an epoch mismatch.
#[test]
fn a_kill_after_a_failover_commit_reopens_with_the_new_epoch_rebuilt() {
    let fake = fake();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("west");
    let mut driver = mirrored_and_reopened(&fake, &root);
    let results = driver
        .request_topics(TopicsVerb::Stop, "orders", None, 0)
        .unwrap();
    assert!(results["orders"].is_ok(), "{results:?}");
    let mut clock = ManualClock::default();
    driver
        .run(&mut clock, NodeUntil::Settled, &mut |_, _| {})
        .unwrap();
    // One more round: the log dir's checkpoint files name the recovery points.
    driver.run_once(clock.now_ms + 1).unwrap();
    let barrier = crate::durability::FsBarrier::open(&root).unwrap().is_some();
    let mut epochs = Vec::new();
    for p in 0..3 {
        let key = PartitionKey::new(ORDERS, p);
        assert_eq!(driver.persisted_state(&key), MirrorState::Stopped);
        let log = driver.log(&key).unwrap();
        assert_eq!(log.durable_end(), log.log_end_offset(), "orders-{p}");
        if barrier {
            assert!(log.epoch_checkpoint_lags(), "orders-{p}");
            assert!(log.recovery_point() < log.log_end_offset(), "orders-{p}");
        }
        epochs.push(log.epoch_cache().clone());
    }
    drop(driver); // SIGKILL: no close

    let reopened = NodeDriver::open(&root, None, options()).unwrap();
    for (p, epochs) in (0..3).zip(epochs) {
        let key = PartitionKey::new(ORDERS, p);
        assert_eq!(reopened.persisted_state(&key), MirrorState::Stopped);
        assert_eq!(
            reopened.log(&key).unwrap().epoch_cache(),
            &epochs,
            "orders-{p}"
        );
    }
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
    let logs: Vec<(PartitionKey, i64, EpochCache)> = [(ORDERS, 3), (PAY_EU, 2)]
        .iter()
        .flat_map(|&(t, n)| (0..n).map(move |p| PartitionKey::new(t, p)))
        .map(|k| {
            let log = driver.log(&k).unwrap();
            (k, log.log_end_offset(), log.epoch_cache().clone())
        })
        .collect();
    // Five logs: more than one closing thread.
    assert!(logs.len() > 1 && logs.len() <= driver::CLOSE_THREADS);
    assert!(
        logs.iter().any(|(_, _, cache)| !cache.is_empty()),
        "the close has epoch checkpoints to write"
    );
    driver.close().unwrap();
    let leftovers: Vec<_> = walk(&root)
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "tmp"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    let reopened = NodeDriver::open(&root, None, options()).unwrap();
    for (key, end, cache) in logs {
        let log = reopened.log(&key).unwrap();
        assert_eq!(log.log_end_offset(), end, "{key}");
        assert_eq!(log.recovery_point(), end, "{key}: flushed at close");
        assert_eq!(
            log.epoch_cache(),
            &cache,
            "{key}: checkpoint written at close"
        );
    }
}

/// Every file under `dir`.
fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path);
        }
    }
    out
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

#[test]
fn a_diverging_epoch_after_an_unclean_source_election_truncates_and_converges() {
    let fake = fake();
    let dir = tempfile::tempdir().unwrap();
    let (mut driver, mut clock) = mirrored(&fake, &dir.path().join("west"));
    let key = PartitionKey::new(ORDERS, 0);
    assert_eq!(driver.log(&key).unwrap().log_end_offset(), 8);
    // An unclean election on the source: the destination's epoch-5 batches at 4..=7 exist
    // nowhere any more.
    super::fixture::unclean_election_on_orders_0(&fake);
    run_until_caught_up(&mut driver, &mut clock);
    // Truncated to the diverging epoch's end (4), then the new leader's batches fetched: the
    // log is the source's byte for byte, epoch 5 up to offset 4 and epoch 6 after.
    let log = driver.log(&key).unwrap();
    assert_eq!(log.log_end_offset(), 10);
    let expected: Vec<u8> = fake.state().topics[0].partitions[0]
        .batches
        .iter()
        .flat_map(|b| b.bytes().to_vec())
        .collect();
    let got: Vec<u8> = log
        .try_read(0, 10)
        .unwrap()
        .iter()
        .flat_map(|b| b.bytes().to_vec())
        .collect();
    assert_eq!(got, expected, "orders-0 converged to the source");
    let epochs: Vec<(i32, i64)> = log
        .epoch_cache()
        .entries()
        .map(|e| (e.epoch, e.start_offset))
        .collect();
    assert_eq!(epochs, vec![(5, 0), (6, 4)]);
    assert_eq!(driver.persisted_state(&key), MirrorState::Mirroring);
    // The other partitions were not touched by it.
    for p in 1..3 {
        assert_same_bytes(&fake, &driver, ORDERS, p);
    }
}

mod control {
    use super::*;
    use crate::node::control::{ControlClient, ControlRequest, RequestStatus, TopicsVerb};

    /// Steps `driver` (10 ms a step) until `client` is answered, at most 2,000 steps.
    fn answered(
        driver: &mut NodeDriver,
        clock: &mut ManualClock,
        client: &ControlClient,
    ) -> crate::node::ControlResponse {
        for _ in 0..2_000 {
            clock.now_ms += 10;
            driver.run_once(clock.now_ms).unwrap();
            if let RequestStatus::Answered(r) = client.status().unwrap() {
                return r;
            }
        }
        panic!("no answer: {:#?}", driver.take_events());
    }

    #[test]
    fn a_following_driver_applies_a_handed_over_stop_and_answers_once_settled() {
        let fake = fake();
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("west");
        let (mut driver, mut clock) = mirrored(&fake, &root);
        driver.serve_control().unwrap();
        let request = ControlRequest::new(TopicsVerb::Stop, "orders,nope,zz*", None);
        let client = ControlClient::submit(&root, &request).unwrap();
        assert_eq!(client.status().unwrap(), RequestStatus::Waiting);
        let response = answered(&mut driver, &mut clock, &client);
        assert_eq!(response.id, request.id);
        assert_eq!(response.error, None);
        assert!(response.results["orders"].is_ok());
        for entry in ["nope", "zz*"] {
            let e = response.results[entry].as_ref().unwrap_err();
            assert_eq!(e.code, MirrorErrorCode::UnknownTopicOrPartition);
        }
        let states: Vec<(String, i32, String, bool)> = response
            .partitions
            .iter()
            .map(|p| (p.topic.clone(), p.partition, p.state.clone(), p.writable))
            .collect();
        let stopped = |p: i32| ("orders".to_owned(), p, "STOPPED".to_owned(), true);
        assert_eq!(states, vec![stopped(0), stopped(1), stopped(2)]);
        // The answer is consumed, nothing is left in control/.
        assert_eq!(
            std::fs::read_dir(root.join("control")).unwrap().count(),
            0,
            "control/ is empty"
        );
        // pay.eu keeps mirroring: a new batch at the source arrives.
        {
            let mut state = fake.state();
            let p = &mut state.topics[1].partitions[0];
            let header = kmirror_kernel::batch::BatchHeader::plain(4, 5, 3);
            p.batches
                .push(crate::record_batch::RawBatch::synthesize(&header, 4_000).unwrap());
        }
        let pay0 = PartitionKey::new(PAY_EU, 0);
        for _ in 0..1_000 {
            if driver.log(&pay0).unwrap().log_end_offset() == 6 {
                break;
            }
            clock.now_ms += 10;
            driver.run_once(clock.now_ms).unwrap();
        }
        assert_eq!(driver.log(&pay0).unwrap().log_end_offset(), 6);
        assert_same_bytes(&fake, &driver, PAY_EU, 0);
        for p in 0..3 {
            let key = PartitionKey::new(ORDERS, p);
            assert_eq!(driver.persisted_state(&key), MirrorState::Stopped);
        }
    }

    #[test]
    fn a_withdrawn_request_is_never_applied_and_a_claimed_one_survives_its_mirror() {
        let fake = fake();
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("west");
        let (mut driver, mut clock) = mirrored(&fake, &root);
        driver.serve_control().unwrap();
        // Withdrawn before the driver looked: nothing happens.
        let client = ControlClient::submit(
            &root,
            &ControlRequest::new(TopicsVerb::Pause, "orders", None),
        )
        .unwrap();
        assert!(client.withdraw().unwrap());
        for _ in 0..50 {
            clock.now_ms += 10;
            driver.run_once(clock.now_ms).unwrap();
        }
        assert_eq!(
            driver.persisted_state(&PartitionKey::new(ORDERS, 0)),
            MirrorState::Mirroring
        );
        // A request claimed by a mirror that then died (`.taken` left behind) is served by
        // the next driver on the directory.
        driver.close().unwrap();
        let request = ControlRequest::new(TopicsVerb::Pause, "pay.eu", None);
        let client = ControlClient::submit(&root, &request).unwrap();
        let control = root.join("control");
        std::fs::rename(
            control.join(format!("{}.request", request.id)),
            control.join(format!("{}.taken", request.id)),
        )
        .unwrap();
        assert!(!client.withdraw().unwrap(), "claimed: too late to withdraw");
        assert_eq!(client.status().unwrap(), RequestStatus::Claimed);
        let mut driver =
            NodeDriver::open(&root, Some(source(&fake, &["orders", "pay.eu"])), options()).unwrap();
        driver.serve_control().unwrap();
        let response = answered(&mut driver, &mut clock, &client);
        assert!(response.results["pay.eu"].is_ok(), "{response:?}");
        assert!(response.partitions.iter().all(|p| p.state == "PAUSED"));
        assert!(!client.withdraw().unwrap());
    }

    #[test]
    fn a_request_for_another_stop_strategy_is_refused_whole() {
        let fake = fake();
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("west");
        let (mut driver, mut clock) = mirrored(&fake, &root);
        driver.serve_control().unwrap();
        let mut request = ControlRequest::new(TopicsVerb::Stop, "orders", None);
        request.stop_strategy = Some(kmirror_kernel::config::StopStrategy::AbortOpenTransactions);
        let client = ControlClient::submit(&root, &request).unwrap();
        let response = answered(&mut driver, &mut clock, &client);
        let error = response.error.unwrap();
        assert!(error.contains("stop that mirror first"), "{error}");
        assert!(response.results.is_empty());
        assert_eq!(
            driver.persisted_state(&PartitionKey::new(ORDERS, 0)),
            MirrorState::Mirroring
        );
    }
}

/// Every file under `root` with its bytes (directories as empty entries ending in `/`).
fn snapshot(root: &std::path::Path) -> std::collections::BTreeMap<String, Vec<u8>> {
    let mut out = std::collections::BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                out.insert(format!("{}/", path.display()), Vec::new());
                stack.push(path);
            } else {
                out.insert(path.display().to_string(), std::fs::read(&path).unwrap());
            }
        }
    }
    out
}

#[test]
fn the_read_only_status_is_what_opening_would_show_and_changes_nothing() {
    let fake = fake();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("west");
    let (mut driver, _) = mirrored(&fake, &root);
    // One topic STOPPED, the other MIRRORING.
    let results = driver
        .request(
            &MirrorRequest::RemoveTopics {
                mirror: east().to_string(),
                topics: vec!["pay.eu".into()],
            },
            0,
        )
        .unwrap();
    assert!(results["pay.eu"].is_ok());
    driver.set_source(None);
    let mut clock = ManualClock::default();
    driver
        .run(&mut clock, NodeUntil::Settled, &mut |_, _| {})
        .unwrap();
    driver.close().unwrap();
    // What a crash leaves: a torn batch at the end of orders-1 (past its recovery point: opening
    // cuts it) and the temporary file of an interrupted checkpoint write (opening deletes it).
    let segment = root.join("data/orders-1/00000000000000000000.log");
    let mut bytes = std::fs::read(&segment).unwrap();
    bytes.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 10, 0, 0, 0, 80, 0, 0]);
    std::fs::write(&segment, bytes).unwrap();
    std::fs::write(
        root.join("data/recovery-point-offset-checkpoint.tmp"),
        b"0\n",
    )
    .unwrap();
    let before = snapshot(&root);

    let inspected = NodeStatus::inspect(&root).unwrap();
    assert_eq!(snapshot(&root), before, "inspecting changed nothing");
    let states: Vec<(&str, &str)> = inspected
        .partitions
        .iter()
        .map(|p| (p.topic.as_str(), p.state.as_str()))
        .collect();
    assert_eq!(
        states,
        vec![
            ("orders", "MIRRORING"),
            ("orders", "MIRRORING"),
            ("orders", "MIRRORING"),
            ("pay.eu", "STOPPED"),
            ("pay.eu", "STOPPED")
        ]
    );
    // Opening recovers (cuts the torn batch, deletes the .tmp) and shows the same.
    let opened = NodeDriver::open(&root, None, options()).unwrap();
    assert_ne!(snapshot(&root), before, "opening repaired the destination");
    assert_eq!(inspected, opened.status());
    assert_eq!(
        inspected.partitions[1].log_end_offset, 10,
        "orders-1 up to its last whole batch"
    );
}
