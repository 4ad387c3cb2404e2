//! The mirroring behaviours of one partition, on the node destination: the fake Kafka cluster
//! of the wire layer as the source, with a partition whose log mixes plain batches, an
//! idempotent producer, committed, aborted and open transactions across three source leader
//! epochs, and a node with in-process follower replicas where a behaviour involves them.
//!
//! These are the behaviours the single-partition cluster directory's tests checked, kept on the
//! format that remains: byte-for-byte mirroring of every kind of batch to every replica, with
//! the source's leader epochs and the destination's own LSO; a stop with an open transaction
//! (truncation to the LSO, the LME, one `MIRROR_PID_RESET` above every mirrored epoch, the
//! producer state reset) and with `abort-open-transactions`; a fetch error the source will not
//! clear by itself (FAILED, the retry after its backoff, the give-up after `max_attempts`);
//! pause and resume across restarts (no fetch while paused, the log and the fetch position
//! kept); and a node killed again and again while it mirrors, which resumes from the states it
//! persisted without writing them again. Every test runs on a [`ManualClock`]'s time, moved by
//! the test: backoffs are exact.

use std::path::Path;

use kafka_protocol::messages::ApiKey;
use kmirror_kernel::batch::{ControlType, LeaderBatch, ProducerBatchInfo};
use kmirror_kernel::config::{RetryPolicy, StopStrategy};
use kmirror_kernel::log::LogView;
use kmirror_kernel::node::PartitionKey;
use kmirror_kernel::partition::Activity;
use kmirror_kernel::records::{LastMirroredEpochsValue, MirrorPartitionStateValue};
use kmirror_kernel::state::MirrorState;
use kmirror_kernel::types::{MirrorPartition, Offset};

use super::fixture::{east, source, ORDERS};
use super::*;
use crate::clock::ManualClock;
use crate::file_log::FileLog;
use crate::record_batch::RawBatch;
use crate::wire::fake_broker::{FakeCluster, FakePartition, FakeTopic};

/// orders-0, with its mixed log.
const MIXED: PartitionKey = PartitionKey::new(ORDERS, 0);
/// orders-1, plain batches on the other broker.
const PLAIN: PartitionKey = PartitionKey::new(ORDERS, 1);
/// orders-0's log end offset as [`mixed_fake`] writes it.
const MIXED_LEO: Offset = 21;
/// The first offset of producer 9's transaction, left open on orders-0: the LSO.
const OPEN_TXN: Offset = 18;
/// orders-1's log end offset: 4 batches of 2 records.
const PLAIN_LEO: Offset = 8;
/// `TOPIC_AUTHORIZATION_FAILED`: a fetch error that is not retried by the fetcher (the source
/// took the mirror's read permission away), so the partition goes FAILED.
const TOPIC_AUTHORIZATION_FAILED: i16 = 29;

fn records(count: u32) -> LeaderBatch {
    LeaderBatch::Records {
        record_count: count,
        producer: None,
        transactional: false,
    }
}

fn produced(pid: i64, seq: i32, count: u32, transactional: bool) -> LeaderBatch {
    LeaderBatch::Records {
        record_count: count,
        producer: Some(ProducerBatchInfo {
            producer_id: pid,
            producer_epoch: 0,
            base_sequence: seq,
        }),
        transactional,
    }
}

fn marker(pid: i64, control: ControlType) -> LeaderBatch {
    LeaderBatch::Control {
        control,
        producer: Some((pid, 0)),
    }
}

/// What the leader of `p` appends for `batch` at its log end and current leader epoch.
fn append(p: &mut FakePartition, batch: &LeaderBatch) {
    let next = p
        .batches
        .last()
        .map_or(p.log_start, |b| b.header().last_offset + 1);
    let raw = RawBatch::from_leader_batch(batch, next, p.epoch, 1_000 + next).unwrap();
    p.batches.push(raw);
}

/// Two brokers; orders-0 on broker 1 holds, at leader epoch 5: 3 plain records (offsets 0..=2),
/// two batches of idempotent producer 1 (3..=6); at epoch 6: producer 7's transaction (7..=8)
/// with a plain record inside it (9) and its last batch (10), its COMMIT (11), producer 8's
/// transaction (12..=13) and its ABORT (14); at epoch 7: producer 1 again (15), 2 plain records
/// (16..=17), then producer 9's transaction, open (18..=19), and a plain record (20). orders-1 on
/// broker 2: four plain batches at epoch 5.
fn mixed_fake() -> FakeCluster {
    let mut p = FakePartition::with_batches(1, 5, 0);
    for b in [
        records(3),
        produced(1, 0, 2, false),
        produced(1, 2, 2, false),
    ] {
        append(&mut p, &b);
    }
    p.epoch = 6;
    for b in [
        produced(7, 0, 2, true),
        records(1),
        produced(7, 2, 1, true),
        marker(7, ControlType::Commit),
        produced(8, 0, 2, true),
        marker(8, ControlType::Abort),
    ] {
        append(&mut p, &b);
    }
    p.epoch = 7;
    for b in [
        produced(1, 4, 1, false),
        records(2),
        produced(9, 0, 2, true),
        records(1),
    ] {
        append(&mut p, &b);
    }
    assert_eq!(
        p.batches.last().unwrap().header().last_offset + 1,
        MIXED_LEO
    );
    assert_eq!(p.batches[11].header().base_offset, OPEN_TXN);
    FakeCluster::start(
        2,
        vec![FakeTopic {
            name: "orders".into(),
            id: ORDERS,
            partitions: vec![p, FakePartition::with_batches(2, 5, 4)],
        }],
    )
}

/// The source's leader of orders-`partition` appends `batches`.
fn source_appends(fake: &FakeCluster, partition: usize, batches: &[LeaderBatch]) {
    let mut state = fake.state();
    let p = &mut state.topics[0].partitions[partition];
    for b in batches {
        append(p, b);
    }
}

/// The batches of the source's orders-`partition`.
fn source_batches(fake: &FakeCluster, partition: usize) -> Vec<RawBatch> {
    fake.state().topics[0].partitions[partition].batches.clone()
}

/// One batch a fetch.
fn options() -> NodeDriverOptions {
    NodeDriverOptions {
        max_fetch_batches: 1,
        ..NodeDriverOptions::default()
    }
}

/// A node at `root` with `replicas` replicas of every partition and orders (2 partitions)
/// added to the mirror (not started).
fn node(fake: &FakeCluster, root: &Path, replicas: u32, options: NodeDriverOptions) -> NodeDriver {
    let mut meta = NodeMeta::new(Some(fake.address(1)), 4);
    meta.replicas = replicas;
    let dest = NodeDest::create(root, meta).unwrap();
    let mut driver = NodeDriver::from_dest(dest, Some(source(fake, &["orders"])), options).unwrap();
    let results = driver
        .add_topics(&east(), &[("orders".into(), ORDERS, 2)], 0)
        .unwrap();
    assert!(results.values().all(Result::is_ok), "{results:?}");
    driver
}

/// Steps `driver` until `done`, the clock moving 10 ms a step (so fetch backoffs pass), at
/// most 10,000 steps.
fn run_until(driver: &mut NodeDriver, clock: &mut ManualClock, done: impl Fn(&NodeDriver) -> bool) {
    for _ in 0..10_000 {
        clock.now_ms += 10;
        driver.run_once(clock.now_ms).unwrap();
        if done(driver) {
            return;
        }
    }
    panic!(
        "not done after 10,000 steps: {:#?}\n{}",
        driver.take_events(),
        driver.status().render(0)
    );
}

fn caught_up(driver: &mut NodeDriver, clock: &mut ManualClock) {
    run_until(driver, clock, NodeDriver::all_caught_up);
}

/// Steps `driver` with the clock standing at `now_ms` until `done`, at most 2,000 steps.
fn run_at(driver: &mut NodeDriver, now_ms: i64, done: impl Fn(&NodeDriver) -> bool) {
    for _ in 0..2_000 {
        driver.run_once(now_ms).unwrap();
        if done(driver) {
            return;
        }
    }
    panic!(
        "not done at {now_ms} ms: {:#?}\n{}",
        driver.take_events(),
        driver.status().render(0)
    );
}

/// The stop of orders with no source, as `kmirror stop` runs it, until settled.
fn stop_orders(driver: &mut NodeDriver) {
    driver.set_source(None);
    let results = driver
        .request_topics(TopicsVerb::Stop, "orders", None, 0)
        .unwrap();
    assert!(results["orders"].is_ok(), "{results:?}");
    driver
        .run(
            &mut ManualClock::default(),
            NodeUntil::Settled,
            &mut |_, _| {},
        )
        .unwrap();
}

fn mirror_key(key: &PartitionKey) -> MirrorPartition {
    MirrorPartition {
        mirror: east(),
        topic_id: key.topic_id,
        partition: key.partition,
    }
}

/// The persisted `__mirror_state` record of `key`.
fn record(driver: &NodeDriver, key: &PartitionKey) -> MirrorPartitionStateValue {
    driver.persisted_record(&mirror_key(key)).unwrap().clone()
}

/// The persisted LME record of `key`.
fn lme(driver: &NodeDriver, key: &PartitionKey) -> Option<LastMirroredEpochsValue> {
    let key = mirror_key(key);
    driver
        .mirror_state()
        .find_map(|(_, c)| c.read_last_mirrored_epoch(&key).cloned())
}

fn bytes(batches: &[RawBatch]) -> Vec<Vec<u8>> {
    batches.iter().map(|b| b.bytes().to_vec()).collect()
}

fn log_batches(log: &FileLog) -> Vec<RawBatch> {
    log.try_read(log.log_start_offset(), log.log_end_offset())
        .unwrap()
}

fn leader_batches(driver: &NodeDriver, key: &PartitionKey) -> Vec<RawBatch> {
    log_batches(driver.log(key).unwrap())
}

/// Every replica of `key` (the leader's log, then each follower's) holds `expected`, byte for
/// byte, with the leader's log end offset and high watermark.
fn assert_replicas_hold(driver: &NodeDriver, key: &PartitionKey, expected: &[RawBatch]) {
    let leader = driver.log(key).unwrap();
    assert_eq!(
        bytes(&log_batches(leader)),
        bytes(expected),
        "{key}: leader"
    );
    for f in driver.followers(key) {
        assert_eq!(
            bytes(&log_batches(&f.log)),
            bytes(expected),
            "{key}: follower {}",
            f.id
        );
        assert_eq!(
            (f.log.log_end_offset(), f.log.high_watermark()),
            (leader.log_end_offset(), leader.high_watermark()),
            "{key}: follower {}",
            f.id
        );
    }
}

/// (LEO, HW, LSO) of `key`'s leader.
fn offsets(driver: &NodeDriver, key: &PartitionKey) -> (Offset, Offset, Offset) {
    let log = driver.log(key).unwrap();
    (
        log.log_end_offset(),
        log.high_watermark(),
        log.last_stable_offset(),
    )
}

/// The leader-epoch cache of `batches`: each epoch with its first offset.
fn epochs_of(batches: &[RawBatch]) -> Vec<(i32, Offset)> {
    let mut out: Vec<(i32, Offset)> = Vec::new();
    for b in batches {
        let h = b.header();
        if out
            .last()
            .is_none_or(|(e, _)| *e != h.partition_leader_epoch)
        {
            out.push((h.partition_leader_epoch, h.base_offset));
        }
    }
    out
}

fn epochs(log: &FileLog) -> Vec<(i32, Offset)> {
    log.epoch_cache()
        .entries()
        .map(|e| (e.epoch, e.start_offset))
        .collect()
}

/// The node's leader epoch of orders-`partition`.
fn leader_epoch(driver: &NodeDriver, partition: i32) -> i32 {
    driver.dest().meta().partitions[&("orders".to_owned(), partition)].leader_epoch
}

/// The events about orders-0.
fn mixed_events(events: &[String]) -> Vec<&str> {
    events
        .iter()
        .filter(|e| e.starts_with("orders-0: "))
        .map(String::as_str)
        .collect()
}

#[test]
fn mirrors_plain_idempotent_and_transactional_batches_byte_for_byte_to_every_replica() {
    let fake = mixed_fake();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("west");
    let three = NodeDriverOptions {
        max_fetch_batches: 3,
        ..NodeDriverOptions::default()
    };
    let mut driver = node(&fake, &root, 3, three.clone());
    let mut clock = ManualClock::default();
    caught_up(&mut driver, &mut clock);

    // Every batch, the open transaction's too (the source's answer bounds the fetch), on the
    // leader and both followers.
    let expected = source_batches(&fake, 0);
    assert_replicas_hold(&driver, &MIXED, &expected);
    assert_replicas_hold(&driver, &PLAIN, &source_batches(&fake, 1));
    // The destination's own LSO stops at the open transaction; the HW at the LEO, every replica
    // holding it.
    assert_eq!(offsets(&driver, &MIXED), (MIXED_LEO, MIXED_LEO, OPEN_TXN));
    assert_eq!(offsets(&driver, &PLAIN), (PLAIN_LEO, PLAIN_LEO, PLAIN_LEO));
    // The mirrored epochs are the source's, on every replica; the node's own leader epoch is
    // above all of them.
    let source_epochs = vec![(5, 0), (6, 7), (7, 15)];
    assert_eq!(epochs_of(&expected), source_epochs);
    assert_eq!(epochs(driver.log(&MIXED).unwrap()), source_epochs);
    for f in driver.followers(&MIXED) {
        assert_eq!(epochs(&f.log), source_epochs, "follower {}", f.id);
    }
    assert!(leader_epoch(&driver, 0) > 7, "{}", leader_epoch(&driver, 0));
    // The mirrored producers are the source's: producer 1 at its last sequence (4, offset 15),
    // producer 9's transaction open from offset 18.
    let producers = driver.log(&MIXED).unwrap().producer_state();
    let one = producers.get(1).unwrap();
    assert_eq!((one.last_seq(), one.last_data_offset()), (4, Some(15)));
    assert_eq!(
        producers.get(9).unwrap().current_txn_first_offset,
        Some(OPEN_TXN)
    );
    assert_eq!(producers.first_unstable_offset(), Some(OPEN_TXN));
    for key in [MIXED, PLAIN] {
        assert_eq!(record(&driver, &key).state, MirrorState::Mirroring, "{key}");
        assert!(!driver.writable(&key), "{key}: read-only while mirroring");
    }
    driver.close().unwrap();

    // The source commits producer 9's transaction and takes more; the next run goes on from
    // where the last one stopped, cutting nothing.
    source_appends(&fake, 0, &[marker(9, ControlType::Commit), records(4)]);
    let mut driver = NodeDriver::open(&root, Some(source(&fake, &["orders"])), three).unwrap();
    caught_up(&mut driver, &mut clock);
    let events = driver.take_events();
    assert!(
        !events
            .iter()
            .any(|e| e.contains("truncated") || e.contains("emptied")),
        "{events:#?}"
    );
    assert_replicas_hold(&driver, &MIXED, &source_batches(&fake, 0));
    assert_eq!(
        offsets(&driver, &MIXED),
        (26, 26, 26),
        "the transaction committed"
    );
    assert_eq!(
        driver
            .log(&MIXED)
            .unwrap()
            .producer_state()
            .first_unstable_offset(),
        None
    );
    driver.close().unwrap();
}

#[test]
fn stop_with_an_open_transaction_truncates_to_the_lso_and_resets_producers() {
    let fake = mixed_fake();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("west");
    let mut driver = node(&fake, &root, 3, options());
    caught_up(&mut driver, &mut ManualClock::default());
    assert_eq!(offsets(&driver, &MIXED), (MIXED_LEO, MIXED_LEO, OPEN_TXN));
    let mirrored_epoch = leader_epoch(&driver, 0);
    driver.close().unwrap();

    // `kmirror stop`: no source.
    let mut driver = NodeDriver::open(&root, None, options()).unwrap();
    stop_orders(&mut driver);
    let events = driver.take_events();
    let events = mixed_events(&events);
    // The open transaction is cut on the leader, then on each follower; one MIRROR_PID_RESET
    // is written at the LSO, at a leader epoch above the mirrored ones.
    let reset_epoch = leader_epoch(&driver, 0);
    assert!(
        reset_epoch > 7,
        "{reset_epoch}: not above the mirrored epochs"
    );
    assert!(
        reset_epoch >= mirrored_epoch,
        "the leader epoch went back from {mirrored_epoch} to {reset_epoch}"
    );
    let truncated =
        format!("orders-0: truncated from LEO {MIXED_LEO} to {OPEN_TXN} (stop: truncation to LSO)");
    let reset = format!(
        "orders-0: MIRROR_PID_RESET appended at offset {OPEN_TXN} (leader epoch {reset_epoch}): \
         mirrored producer state expired"
    );
    for line in [
        truncated.as_str(),
        &format!("orders-0: follower 1 truncated from LEO {MIXED_LEO} to {OPEN_TXN}"),
        &format!("orders-0: follower 2 truncated from LEO {MIXED_LEO} to {OPEN_TXN}"),
        reset.as_str(),
    ] {
        assert_eq!(
            events.iter().filter(|e| **e == line).count(),
            1,
            "{line:?} not once in {events:#?}"
        );
    }
    let at = |line: &str| events.iter().position(|e| *e == line).unwrap();
    assert!(at(&truncated) < at(&reset), "{events:#?}");

    let kept: Vec<RawBatch> = source_batches(&fake, 0)
        .iter()
        .filter(|b| b.header().last_offset < OPEN_TXN)
        .cloned()
        .collect();
    let leader = leader_batches(&driver, &MIXED);
    assert_eq!(bytes(&leader[..leader.len() - 1]), bytes(&kept));
    let last = leader.last().unwrap().header();
    assert_eq!(last.control, Some(ControlType::MirrorPidReset));
    assert_eq!(
        (last.base_offset, last.partition_leader_epoch),
        (OPEN_TXN, reset_epoch)
    );
    assert_replicas_hold(&driver, &MIXED, &leader);
    assert_eq!(
        offsets(&driver, &MIXED),
        (OPEN_TXN + 1, OPEN_TXN + 1, OPEN_TXN + 1)
    );
    // The LME: the last epoch mirrored (7) and where the log that stopped ends it.
    assert_eq!(
        lme(&driver, &MIXED),
        Some(LastMirroredEpochsValue {
            last_mirrored_epoch: Some(7),
            last_mirrored_offset: OPEN_TXN,
        })
    );
    // No transaction left open, no mirrored producer left: a new producer starts afresh.
    assert!(driver.log(&MIXED).unwrap().producer_state().is_empty());
    // orders-1 had nothing open: every mirrored batch is kept, the reset after them.
    let plain = leader_batches(&driver, &PLAIN);
    assert_eq!(
        bytes(&plain[..plain.len() - 1]),
        bytes(&source_batches(&fake, 1))
    );
    assert_eq!(
        plain.last().unwrap().header().control,
        Some(ControlType::MirrorPidReset)
    );
    for key in [MIXED, PLAIN] {
        assert_eq!(record(&driver, &key).state, MirrorState::Stopped, "{key}");
        assert!(driver.writable(&key), "{key}: writable once STOPPED");
    }

    // A repeated stop is a success that changes nothing.
    let before = (leader_batches(&driver, &MIXED), record(&driver, &MIXED));
    stop_orders(&mut driver);
    assert!(driver.take_events().is_empty());
    assert_eq!(bytes(&leader_batches(&driver, &MIXED)), bytes(&before.0));
    assert_eq!(record(&driver, &MIXED), before.1);
    driver.close().unwrap();
}

#[test]
fn the_abort_strategy_closes_open_transactions_with_markers() {
    let fake = mixed_fake();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("west");
    let mut driver = node(&fake, &root, 1, options());
    caught_up(&mut driver, &mut ManualClock::default());
    driver.close().unwrap();

    let mut aborting = options();
    aborting.mirror.stop_strategy = StopStrategy::AbortOpenTransactions;
    let mut driver = NodeDriver::open(&root, None, aborting).unwrap();
    stop_orders(&mut driver);
    let events = driver.take_events();
    let events = mixed_events(&events);
    let reset_epoch = leader_epoch(&driver, 0);
    assert!(
        reset_epoch > 7,
        "{reset_epoch}: not above the mirrored epochs"
    );
    assert_eq!(
        events
            .iter()
            .filter(|e| !e.contains(": state "))
            .copied()
            .collect::<Vec<_>>(),
        vec![
            format!(
                "orders-0: ABORT marker appended at offset {MIXED_LEO} for producer 9's open \
                 transaction"
            ),
            format!(
                "orders-0: MIRROR_PID_RESET appended at offset {} (leader epoch {reset_epoch}): \
                 mirrored producer state expired",
                MIXED_LEO + 1
            ),
        ],
        "nothing truncated"
    );
    // Every mirrored batch kept, then producer 9's ABORT, then the reset.
    let leader = leader_batches(&driver, &MIXED);
    let n = leader.len();
    assert_eq!(bytes(&leader[..n - 2]), bytes(&source_batches(&fake, 0)));
    let abort = leader[n - 2].header();
    assert_eq!(
        (abort.control, abort.producer_id, abort.base_offset),
        (Some(ControlType::Abort), 9, MIXED_LEO)
    );
    assert_eq!(
        leader[n - 1].header().control,
        Some(ControlType::MirrorPidReset)
    );
    // Nothing open: the LSO is the LEO.
    let end = MIXED_LEO + 2;
    assert_eq!(offsets(&driver, &MIXED), (end, end, end));
    assert_eq!(record(&driver, &MIXED).state, MirrorState::Stopped);
    assert!(driver.writable(&MIXED));
    driver.close().unwrap();
}

/// Mirrors orders from `fake` into a node at `root` with `retry`, until caught up, then makes
/// the source refuse orders-0's fetches and steps with the clock standing at `at_ms` until
/// orders-0 is FAILED and its retry is scheduled.
fn failing(fake: &FakeCluster, root: &Path, retry: RetryPolicy, at_ms: i64) -> NodeDriver {
    let mut options = options();
    options.mirror.retry = retry;
    let mut driver = node(fake, root, 1, options);
    let mut clock = ManualClock::default();
    caught_up(&mut driver, &mut clock);
    assert!(clock.now_ms < at_ms);
    driver.take_events();
    fake.state().topics[0].partitions[0].fetch_error = Some(TOPIC_AUTHORIZATION_FAILED);
    // Refused at its next fetch: FAILED, and the retry timer set (from `at_ms`).
    run_at(&mut driver, at_ms, |d| awaiting_retry(d) == Some(1));
    driver
}

/// The retry orders-0 waits for, if it waits for one.
fn awaiting_retry(driver: &NodeDriver) -> Option<u32> {
    match driver.node().partition(&MIXED)?.activity() {
        Activity::AwaitingRetry { attempt } => Some(*attempt),
        _ => None,
    }
}

/// The states orders-0 persisted, as the events say, in order.
fn persisted_states(events: &[String]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| e.strip_prefix("orders-0: state "))
        .map(|e| e.split(' ').next().unwrap().to_owned())
        .collect()
}

#[test]
fn a_fetch_error_makes_the_partition_failed_then_retried_after_its_backoff() {
    let fake = mixed_fake();
    let dir = tempfile::tempdir().unwrap();
    let at = 1_000_000;
    let mut driver = failing(&fake, &dir.path().join("west"), RetryPolicy::default(), at);
    let failed = record(&driver, &MIXED);
    assert_eq!(failed.state, MirrorState::Failed);
    assert_eq!(failed.previous_state, Some(MirrorState::Mirroring));
    assert_eq!(failed.retry_attempt, 1);
    let error = failed.error_message.unwrap();
    assert!(error.contains("TOPIC_AUTHORIZATION_FAILED"), "{error}");
    assert_eq!(persisted_states(&driver.take_events()), vec!["FAILED"]);
    // orders-1 is not touched by it.
    assert_eq!(record(&driver, &PLAIN).state, MirrorState::Mirroring);

    // The source serves orders-0 again. Until the first retry is due (100 ms, the default
    // policy) nothing happens to it: the fetcher is stopped, the log kept.
    fake.state().topics[0].partitions[0].fetch_error = None;
    source_appends(&fake, 0, &[marker(9, ControlType::Commit)]);
    for _ in 0..200 {
        driver.run_once(at + 99).unwrap();
    }
    assert_eq!(record(&driver, &MIXED).state, MirrorState::Failed);
    assert!(driver.take_events().is_empty());
    assert_eq!(driver.log(&MIXED).unwrap().log_end_offset(), MIXED_LEO);

    // Due: the retry writes the state it failed in, MIRRORING, and fetches on from the LEO.
    run_at(&mut driver, at + 100, |d| {
        d.persisted_state(&MIXED) == MirrorState::Mirroring
    });
    let mut clock = ManualClock { now_ms: at + 100 };
    caught_up(&mut driver, &mut clock);
    let events = driver.take_events();
    assert_eq!(persisted_states(&events), vec!["MIRRORING"], "{events:#?}");
    assert!(
        !events.iter().any(|e| e.contains("truncated")),
        "{events:#?}"
    );
    let retried = record(&driver, &MIXED);
    assert_eq!(
        (retried.state, retried.error_message),
        (MirrorState::Mirroring, None)
    );
    assert_eq!(driver.log(&MIXED).unwrap().log_end_offset(), MIXED_LEO + 1);
    assert_replicas_hold(&driver, &MIXED, &source_batches(&fake, 0));
    driver.close().unwrap();
}

#[test]
fn retries_give_up_after_max_attempts() {
    let fake = mixed_fake();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("west");
    let retry = RetryPolicy {
        initial_delay_ms: 10,
        max_delay_ms: 100,
        max_attempts: Some(2),
    };
    let at = 1_000_000;
    let mut driver = failing(&fake, &root, retry, at);
    assert_eq!(record(&driver, &MIXED).retry_attempt, 1);
    // Retry 1 is due after 10 ms, not before; it fails again (attempt 2).
    for _ in 0..100 {
        driver.run_once(at + 9).unwrap();
    }
    assert_eq!(awaiting_retry(&driver), Some(1));
    run_at(&mut driver, at + 10, |d| awaiting_retry(d) == Some(2));
    assert_eq!(record(&driver, &MIXED).retry_attempt, 2);
    // Retry 2 after 20 ms more (the delay doubles); it fails again, and no third is scheduled:
    // the partition is FAILED for good, so the node counts as caught up.
    for _ in 0..100 {
        driver.run_once(at + 29).unwrap();
    }
    assert_eq!(awaiting_retry(&driver), Some(2));
    run_at(&mut driver, at + 30, NodeDriver::all_caught_up);
    assert_eq!(
        persisted_states(&driver.take_events()),
        vec!["FAILED", "MIRRORING", "FAILED", "MIRRORING", "FAILED"]
    );
    // Given up: FAILED, whatever the time, and after a restart too.
    for _ in 0..100 {
        driver.run_once(at + 1_000_000).unwrap();
    }
    let given_up = record(&driver, &MIXED);
    assert_eq!(
        (
            given_up.state,
            given_up.retry_attempt,
            given_up.previous_state
        ),
        (MirrorState::Failed, 3, Some(MirrorState::Mirroring))
    );
    assert!(driver.all_caught_up());
    assert!(driver.take_events().is_empty());
    assert_eq!(record(&driver, &PLAIN).state, MirrorState::Mirroring);
    driver.close().unwrap();
    fake.state().topics[0].partitions[0].fetch_error = None;
    let mut retry_options = options();
    retry_options.mirror.retry = retry;
    let mut driver =
        NodeDriver::open(&root, Some(source(&fake, &["orders"])), retry_options).unwrap();
    let mut clock = ManualClock { now_ms: at };
    caught_up(&mut driver, &mut clock);
    assert_eq!(record(&driver, &MIXED), given_up);
    assert!(persisted_states(&driver.take_events()).is_empty());
    driver.close().unwrap();
}

#[test]
fn pause_and_resume_keep_the_log_and_the_fetch_position() {
    let fake = mixed_fake();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("west");
    let mut driver = node(&fake, &root, 2, options());
    let mut clock = ManualClock::default();
    caught_up(&mut driver, &mut clock);
    driver.close().unwrap();

    // `kmirror pause`: no source.
    let mut driver = NodeDriver::open(&root, None, options()).unwrap();
    let results = driver
        .request_topics(TopicsVerb::Pause, "orders", None, clock.now_ms)
        .unwrap();
    assert!(results["orders"].is_ok(), "{results:?}");
    driver
        .run(&mut clock, NodeUntil::Settled, &mut |_, _| {})
        .unwrap();
    for key in [MIXED, PLAIN] {
        assert_eq!(record(&driver, &key).state, MirrorState::Paused, "{key}");
        assert!(!driver.writable(&key), "{key}: read-only while paused");
    }
    driver.close().unwrap();

    // The source takes more; a run with the source does not fetch a paused topic.
    source_appends(&fake, 0, &[marker(9, ControlType::Commit), records(3)]);
    source_appends(&fake, 1, &[records(2)]);
    let fetches = |fake: &FakeCluster| {
        let state = fake.state();
        state.count(1, ApiKey::Fetch) + state.count(2, ApiKey::Fetch)
    };
    let before = fetches(&fake);
    let mut driver = NodeDriver::open(&root, Some(source(&fake, &["orders"])), options()).unwrap();
    for _ in 0..50 {
        clock.now_ms += 10;
        driver.run_once(clock.now_ms).unwrap();
    }
    assert_eq!(fetches(&fake), before, "a paused partition is not fetched");
    for key in [MIXED, PLAIN] {
        assert_eq!(record(&driver, &key).state, MirrorState::Paused, "{key}");
    }
    assert_eq!(offsets(&driver, &MIXED), (MIXED_LEO, MIXED_LEO, OPEN_TXN));
    assert_eq!(offsets(&driver, &PLAIN).0, PLAIN_LEO);
    driver.take_events();

    // `kmirror resume`: PAUSED to MIRRORING, the first fetch at the LEO with its last epoch.
    let results = driver
        .request_topics(TopicsVerb::Resume, "orders", None, clock.now_ms)
        .unwrap();
    assert!(results["orders"].is_ok(), "{results:?}");
    run_until(&mut driver, &mut clock, |d| {
        d.node().fetch_slot(&MIXED).is_some()
    });
    let asked = driver.node().fetch_slot(&MIXED).unwrap().request;
    assert_eq!(
        (asked.fetch_offset, asked.last_fetched_epoch),
        (MIXED_LEO, Some(7))
    );
    caught_up(&mut driver, &mut clock);
    let events = driver.take_events();
    assert!(
        !events
            .iter()
            .any(|e| e.contains("truncated") || e.contains("emptied")),
        "{events:#?}"
    );
    assert_eq!(persisted_states(&events), vec!["MIRRORING"], "{events:#?}");
    assert_replicas_hold(&driver, &MIXED, &source_batches(&fake, 0));
    assert_replicas_hold(&driver, &PLAIN, &source_batches(&fake, 1));
    assert_eq!(offsets(&driver, &MIXED), (25, 25, 25));
    driver.close().unwrap();
}

/// What a kill must not lose: each partition's persisted record and log end offset.
fn progress(driver: &NodeDriver) -> Vec<(Option<MirrorPartitionStateValue>, Offset)> {
    [MIXED, PLAIN]
        .iter()
        .map(|k| {
            let record = driver.persisted_record(&mirror_key(k)).cloned();
            (record, driver.log(k).unwrap().log_end_offset())
        })
        .collect()
}

#[test]
fn a_node_killed_while_mirroring_resumes_from_its_persisted_states_without_writing_them_again() {
    let fake = mixed_fake();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("west");
    let options = NodeDriverOptions {
        max_fetch_batches: 2,
        ..NodeDriverOptions::default()
    };
    let mut driver = node(&fake, &root, 2, options.clone());
    let mut clock = ManualClock::default();
    let (mut kills, mut kills_while_mirroring) = (0, 0);
    loop {
        // Mirror until a partition's persisted state or log end offset moves, then kill the
        // node (no close: nothing flushed, nothing checkpointed).
        let before = progress(&driver);
        run_until(&mut driver, &mut clock, |d| {
            progress(d) != before || d.all_caught_up()
        });
        let done = driver.all_caught_up();
        let (records, leos): (Vec<_>, Vec<_>) = progress(&driver).into_iter().unzip();
        drop(driver);
        kills += 1;

        driver =
            NodeDriver::open(&root, Some(source(&fake, &["orders"])), options.clone()).unwrap();
        // Nothing acknowledged is lost: the states and the logs are where the killed node left
        // them.
        for (i, key) in [MIXED, PLAIN].iter().enumerate() {
            assert_eq!(
                driver.persisted_record(&mirror_key(key)),
                records[i].as_ref(),
                "{key}"
            );
            assert_eq!(driver.log(key).unwrap().log_end_offset(), leos[i], "{key}");
        }
        // A partition that was MIRRORING fetches again without writing its record again: it is
        // this leadership's own (one process holds the node).
        let mirroring: Vec<PartitionKey> = [MIXED, PLAIN]
            .into_iter()
            .zip(&records)
            .filter(|(_, r)| {
                r.as_ref()
                    .is_some_and(|r| r.state == MirrorState::Mirroring)
            })
            .map(|(k, _)| k)
            .collect();
        kills_while_mirroring += usize::from(!mirroring.is_empty());
        run_until(&mut driver, &mut clock, |d| {
            mirroring.iter().all(|k| {
                d.node()
                    .partition(k)
                    .is_some_and(|pm| matches!(pm.activity(), Activity::Fetching(_)))
            })
        });
        let events = driver.take_events();
        for (i, key) in [MIXED, PLAIN].iter().enumerate() {
            if mirroring.contains(key) {
                assert_eq!(
                    driver.persisted_record(&mirror_key(key)),
                    records[i].as_ref(),
                    "{key}: {events:#?}"
                );
                let name = format!("orders-{}: state ", key.partition);
                assert!(!events.iter().any(|e| e.starts_with(&name)), "{events:#?}");
            }
        }
        if done {
            break;
        }
        assert!(kills < 100, "not caught up after {kills} kills");
    }
    // Killed in PREPARING and after each fetch round that appended while MIRRORING.
    assert!(
        kills >= 8 && kills_while_mirroring >= 6,
        "{kills} kills, {kills_while_mirroring} while mirroring"
    );
    caught_up(&mut driver, &mut clock);
    assert_replicas_hold(&driver, &MIXED, &source_batches(&fake, 0));
    assert_replicas_hold(&driver, &PLAIN, &source_batches(&fake, 1));
    driver.close().unwrap();
}
