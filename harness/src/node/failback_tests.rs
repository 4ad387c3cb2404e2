//! Two nodes on Kafka's wire, failing over and back: node A mirrors a (fake) Kafka cluster and
//! fails over; node B mirrors A over the wire and fails over; A fails back from B. A asks B for
//! the LME with `ReadMirrorStates` (B serves it from its `__mirror_state`), refuses while B
//! still mirrors from A (mirror loop), and once B is STOPPED cuts exactly the suffix B never
//! had, then ends byte for byte equal to B.

use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kmirror_kernel::log::LogView;
use kmirror_kernel::node::PartitionKey;
use kmirror_kernel::state::MirrorState;
use kmirror_kernel::types::{MirrorName, MirrorPartition, PartitionIndex};

use super::failback::{previews, SourceAnswer};
use super::fixture::{east, fake, options, source, ORDERS};
use super::lme_lookup::{read_reverse_mirrors, ReverseAnswer};
use super::serve_tests::{client_batch, produce, Running, WallClock};
use super::*;
use crate::clock::Clock;
use crate::serve::metadata::node_cluster_id;
use crate::wire::source_cluster::SourceClusterOptions;
use crate::wire::{Connection, SourceCluster, TopicSelection};

/// A source cluster reading `orders` from the node serving at `address`.
fn source_at(address: &str) -> SourceCluster {
    let options = SourceClusterOptions {
        connect_timeout: Duration::from_secs(2),
        request_timeout: Duration::from_secs(5),
        fetch_max_wait_ms: 0,
        ..SourceClusterOptions::default()
    };
    SourceCluster::new(
        address,
        TopicSelection::names(&["orders"]).unwrap(),
        options,
    )
}

/// Stops `orders` on `driver` (failover) and runs until the partitions settle, with no
/// source, as `kmirror stop` runs it.
pub(super) fn fail_over(driver: &mut NodeDriver, clock: &mut WallClock) {
    driver.set_source(None);
    let results = driver
        .request_topics(TopicsVerb::Stop, "orders", None, clock.now_ms())
        .unwrap();
    assert!(results.values().all(Result::is_ok), "{results:?}");
    driver
        .run(clock, NodeUntil::Settled, &mut |_, _| {})
        .unwrap();
}

/// The persisted state of `orders-<partition>` in `mirror` on `driver`, with its error.
fn state_of(
    driver: &NodeDriver,
    mirror: &MirrorName,
    partition: PartitionIndex,
) -> (MirrorState, Option<String>) {
    let key = MirrorPartition {
        mirror: mirror.clone(),
        topic_id: ORDERS,
        partition,
    };
    driver
        .persisted_record(&key)
        .map_or((MirrorState::Unknown, None), |v| {
            (v.state, v.error_message.clone())
        })
}

/// The driver of `running`, no longer serving, runnable again (its interrupt flag cleared).
pub(super) fn unserved(running: Running) -> NodeDriver {
    let mut driver = running.stop();
    driver.interrupt_on(Arc::new(AtomicBool::new(false)));
    driver
}

fn bytes_of(driver: &NodeDriver, partition: PartitionIndex) -> Vec<u8> {
    let log = driver.log(&PartitionKey::new(ORDERS, partition)).unwrap();
    log.try_read(0, log.log_end_offset())
        .unwrap()
        .iter()
        .flat_map(|b| b.bytes().to_vec())
        .collect()
}

fn leo(driver: &NodeDriver, partition: PartitionIndex) -> i64 {
    driver
        .log(&PartitionKey::new(ORDERS, partition))
        .unwrap()
        .log_end_offset()
}

/// Node B at `root`, mirroring `orders` from the node serving at `address` in the mirror
/// named after that node's cluster id (`a_root`'s).
pub(super) fn mirror_of_a(root: &Path, address: &str, a_root: &Path) -> (NodeDriver, MirrorName) {
    let dest = NodeDest::create(root, NodeMeta::new(Some(address.to_owned()), 4)).unwrap();
    let mut b = NodeDriver::from_dest(dest, Some(source_at(address)), options()).unwrap();
    let mirror = MirrorName::new(node_cluster_id(a_root, 0)).unwrap();
    let results = b
        .add_topics(&mirror, &[("orders".into(), ORDERS, 3)], 0)
        .unwrap();
    assert!(results.values().all(Result::is_ok), "{results:?}");
    (b, mirror)
}

#[test]
fn a_failback_from_a_serving_node_refuses_a_loop_then_cuts_only_what_it_never_had() {
    failback_from_a_serving_node(1);
}

/// The same with two followers on A: PREPARING's truncation waits for them, and they end
/// holding A's log.
#[test]
fn a_failback_into_a_node_with_followers_cuts_them_too() {
    failback_from_a_serving_node(3);
}

/// The story of [`a_failback_from_a_serving_node_refuses_a_loop_then_cuts_only_what_it_never_had`]
/// with `replicas` replicas of every partition on A.
fn failback_from_a_serving_node(replicas: u32) {
    let dir = tempfile::tempdir().unwrap();
    let (a_root, b_root) = (dir.path().join("a"), dir.path().join("b"));
    let fake = fake();
    // The wall clock: a node that served clients waits on their calls in real time.
    let mut clock = WallClock(Instant::now());

    // A mirrors the Kafka cluster and fails over.
    let mut meta = NodeMeta::new(Some(fake.address(1)), 4);
    meta.replicas = replicas;
    let dest = NodeDest::create(&a_root, meta).unwrap();
    let mut a = NodeDriver::from_dest(dest, Some(source(&fake, &["orders"])), options()).unwrap();
    let results = a
        .add_topics(&east(), &[("orders".into(), ORDERS, 3)], 0)
        .unwrap();
    assert!(results.values().all(Result::is_ok), "{results:?}");
    a.run(&mut clock, NodeUntil::CaughtUp, &mut |_, _| {})
        .unwrap();
    fail_over(&mut a, &mut clock);
    let a_served = Running::start(a);

    // B mirrors A over the wire, in the mirror named after A's cluster id.
    let (mut b, b_mirror) = mirror_of_a(&b_root, &a_served.address, &a_root);
    b.run(&mut clock, NodeUntil::CaughtUp, &mut |_, _| {})
        .unwrap();
    let copied: Vec<i64> = (0..3).map(|p| leo(&b, p)).collect();

    // Producers write 3 records to A's orders-0 that B never copies.
    let mut conn = Connection::connect(
        &a_served.address,
        Duration::from_secs(2),
        Duration::from_secs(5),
    )
    .unwrap();
    let (code, base) = produce(&mut conn, 0, &client_batch(3, -1, 0));
    assert_eq!((code, base), (0, copied[0]));
    drop(conn);
    let mut a = unserved(a_served);
    b.set_source(None);
    let b_served = Running::start(b);

    // The lookup on the wire: B's mirror of A is MIRRORING, with no LME yet.
    let mut asking_b = source_at(&b_served.address);
    let us = node_cluster_id(&a_root, 0);
    assert_eq!(
        read_reverse_mirrors(&mut asking_b, &us, &[(ORDERS, 0)]),
        vec![ReverseAnswer::Found {
            reverse: MirrorState::Mirroring,
            lme: None
        }]
    );
    // A stock Kafka cluster (the fake) does not serve it.
    let mut asking_kafka = source_at(&fake.address(1));
    assert_eq!(
        read_reverse_mirrors(&mut asking_kafka, &us, &[(ORDERS, 0)]),
        vec![ReverseAnswer::Unsupported]
    );

    // A fails back from B while B still mirrors from A: a mirror loop, nothing cut.
    let a_mirror = MirrorName::new(node_cluster_id(&b_root, 0)).unwrap();
    a.set_source(Some(source_at(&b_served.address)));
    let results = a
        .add_topics(&a_mirror, &[("orders".into(), ORDERS, 3)], clock.now_ms())
        .unwrap();
    assert!(results.values().all(Result::is_ok), "{results:?}");
    let deadline = Instant::now() + Duration::from_secs(30);
    while state_of(&a, &a_mirror, 0).0 != MirrorState::Failed {
        assert!(
            Instant::now() < deadline,
            "{:?}",
            state_of(&a, &a_mirror, 0)
        );
        a.run_once(clock.now_ms()).unwrap();
    }
    let (_, error) = state_of(&a, &a_mirror, 0);
    assert!(
        error.as_deref().unwrap_or("").starts_with("mirror loop"),
        "{error:?}"
    );
    assert_eq!(leo(&a, 0), copied[0] + 3, "a loop cuts nothing");

    // B fails over; A's retry finds B's mirror STOPPED, with its LME.
    let mut b = unserved(b_served);
    fail_over(&mut b, &mut clock);
    assert_eq!(state_of(&b, &b_mirror, 0).0, MirrorState::Stopped);
    let b_served = Running::start(b);
    let lme = read_reverse_mirrors(&mut source_at(&b_served.address), &us, &[(ORDERS, 0)]);
    let [ReverseAnswer::Found {
        reverse: MirrorState::Stopped,
        lme: Some(lme),
    }] = lme.as_slice()
    else {
        panic!("{lme:?}");
    };
    assert_eq!(
        lme.end_offset, copied[0],
        "B's copy of A's epoch ended where it stopped"
    );

    // What the failback cuts, as `kmirror mirror --failback` previews it: exactly the 3
    // records B never had, not the log.
    let answers = [(
        PartitionKey::new(ORDERS, 0),
        SourceAnswer {
            lme: Some(*lme),
            log_start_offset: 0,
        },
    )]
    .into();
    let preview = &previews(&a, &["orders".to_owned()], &answers)[0];
    assert_eq!(
        (preview.truncated, preview.whole_log),
        (3, false),
        "{preview:?}"
    );
    assert_eq!(preview.truncate_to, copied[0]);

    a.set_source(Some(source_at(&b_served.address)));
    let mut lowest = i64::MAX;
    let mut events = Vec::new();
    a.run(&mut clock, NodeUntil::CaughtUp, &mut |d, _| {
        lowest = lowest.min(leo(d, 0));
        events.extend(d.take_events());
    })
    .unwrap();
    assert_eq!(lowest, copied[0], "A cut the 3 records B never had");
    let cut = format!("LEO {} to {}", copied[0] + 3, copied[0]);
    for follower in 1..replicas as i32 {
        let line = format!("orders-0: follower {follower} truncated from {cut}");
        assert!(events.contains(&line), "{line:?} not in {events:#?}");
    }
    let b = unserved(b_served);
    for p in 0..3 {
        assert_eq!(state_of(&a, &a_mirror, p).0, MirrorState::Mirroring);
        assert_eq!(bytes_of(&a, p), bytes_of(&b, p), "orders-{p} byte for byte");
        let followers = a.followers(&PartitionKey::new(ORDERS, p));
        assert_eq!(followers.len(), replicas as usize - 1);
        for f in followers {
            let log = &f.log;
            let copy: Vec<u8> = log
                .try_read(0, log.log_end_offset())
                .unwrap()
                .iter()
                .flat_map(|b| b.bytes().to_vec())
                .collect();
            assert_eq!(copy, bytes_of(&b, p), "orders-{p}, follower {}", f.id);
        }
    }
    a.close().unwrap();
    b.close().unwrap();
}
