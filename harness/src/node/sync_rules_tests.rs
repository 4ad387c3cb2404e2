//! The rules of the node metadata sync that decide what a round may write, on a node mirroring
//! from the fake source: a consumer group resumes on the node after a failover exactly at the
//! synced offset (Kafka's OffsetFetch and Fetch on the served node); a round read before a
//! pause, or before a resume, is fenced when it lands and the next round syncs; invalid or
//! hostile source metadata is rejected item by item while the rest lands; a group with
//! members on the destination keeps its offsets until it is empty. These are the rules the
//! single-partition destination's sync tests checked, on the node destination that replaces
//! it.

use std::collections::BTreeMap;

use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::{GroupId, OffsetCommitRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use kmirror_kernel::state::MirrorState;
use kmirror_kernel::sync::gate::SyncRefused;
use kmirror_kernel::sync::group_offsets::TopicPartition;
use kmirror_kernel::sync::pattern::Glob;
use kmirror_kernel::types::Offset;

use super::control::TopicsVerb;
use super::fixture::*;
use super::serve_tests::{client_batch, connect, produce_to, Running};
use super::*;
use crate::clock::ManualClock;
use crate::record_batch::RawBatch;
use crate::sync::local::{AclsFile, MetadataDir};
use crate::sync::report::Category;
use crate::sync::GroupRecord;
use crate::wire::client::{FetchParams, KafkaClient, READ_UNCOMMITTED};
use crate::wire::fake_broker::{FakeCluster, FakePartition, FakeTopic};

fn tp(topic: &str, partition: i32) -> TopicPartition {
    TopicPartition::new(topic, partition)
}

fn pairs(items: &[(&str, &str)]) -> BTreeMap<String, String> {
    items
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// The destination's config of `topic`.
fn config(root: &std::path::Path, topic: &str) -> BTreeMap<String, String> {
    MetadataDir::of(root)
        .read_topic_config(topic)
        .unwrap()
        .value
}

/// The destination's record of `group` (`None`: no file).
fn group(root: &std::path::Path, group: &str) -> Option<GroupRecord> {
    MetadataDir::of(root)
        .read_groups()
        .unwrap()
        .value
        .remove(group)
}

/// The destination's offsets of `name` (empty: no file).
fn offsets(root: &std::path::Path, name: &str) -> BTreeMap<TopicPartition, Offset> {
    group(root, name).map(|g| g.offsets).unwrap_or_default()
}

/// Runs `driver` (the fake's topics added) until every partition is MIRRORING and caught up.
fn caught_up(driver: &mut NodeDriver, clock: &mut ManualClock) {
    for _ in 0..10_000 {
        clock.now_ms += 10;
        driver.run_once(clock.now_ms).unwrap();
        if driver.all_caught_up() {
            return;
        }
    }
    panic!("never caught up: {}", driver.status().render(0));
}

/// `kmirror pause|resume|stop --topics orders` on `driver`, run until settled without the
/// source (as those commands run); the source is given back afterwards.
fn request_orders(driver: &mut NodeDriver, verb: TopicsVerb, clock: &mut ManualClock) {
    let source = driver.set_source(None);
    let results = driver
        .request_topics(verb, "orders", None, clock.now_ms)
        .unwrap();
    assert!(results["orders"].is_ok(), "{verb:?}: {results:?}");
    driver
        .run(clock, NodeUntil::Settled, &mut |_, _| {})
        .unwrap();
    driver.set_source(source);
}

/// The persisted state of every partition of orders.
fn orders_states(driver: &NodeDriver) -> Vec<MirrorState> {
    (0..3)
        .map(|p| driver.persisted_state(&kmirror_kernel::node::PartitionKey::new(ORDERS, p)))
        .collect()
}

/// The fixture's two topics, orders-0 holding 15 batches of two records (LEO 30).
fn long_orders_0() -> FakeCluster {
    let partitions = |n: i32, batches: &dyn Fn(i32) -> i64| -> Vec<FakePartition> {
        (0..n)
            .map(|i| FakePartition::with_batches(1 + i % 2, 5, batches(i)))
            .collect()
    };
    FakeCluster::start(
        2,
        vec![
            FakeTopic {
                name: "orders".into(),
                id: ORDERS,
                partitions: partitions(3, &|i| if i == 0 { 15 } else { 4 + i64::from(i) }),
            },
            FakeTopic {
                name: "pay.eu".into(),
                id: PAY_EU,
                partitions: partitions(2, &|_| 2),
            },
        ],
    )
}

/// The offsets of the records (control batches skipped) `client` reads from `orders-0` from
/// `from` to its end, as a read-uncommitted consumer sees them.
fn consume_orders_0(client: &mut KafkaClient, from: Offset) -> Vec<Offset> {
    let mut read = Vec::new();
    let mut position = from;
    loop {
        let answer = client
            .fetch(&FetchParams {
                topic_id: ORDERS,
                partition: 0,
                fetch_offset: position,
                last_fetched_epoch: None,
                isolation_level: READ_UNCOMMITTED,
                max_wait_ms: 0,
                max_bytes: 1 << 20,
            })
            .unwrap();
        assert_eq!(answer.error_code, 0, "fetch at {position}");
        let batches = RawBatch::parse_many(&answer.records).unwrap();
        if batches.is_empty() {
            return read;
        }
        for b in &batches {
            let h = b.header();
            if h.control.is_none() {
                read.extend((h.base_offset..=h.last_offset).filter(|o| *o >= position));
            }
            position = position.max(h.last_offset + 1);
        }
        if position >= answer.high_watermark {
            return read;
        }
    }
}

/// OffsetCommit of `group` at `orders-0` = `offset` by a consumer outside any generation (as
/// `kafka-consumer-groups.sh --reset-offsets` or a standalone consumer commits).
fn commit_orders_0(address: &str, group: &str, offset: Offset) {
    let request = OffsetCommitRequest::default()
        .with_group_id(GroupId(StrBytes::from_string(group.to_owned())))
        .with_generation_id_or_member_epoch(-1)
        .with_member_id(StrBytes::from_static_str(""))
        .with_topics(vec![OffsetCommitRequestTopic::default()
            .with_name(TopicName(StrBytes::from_static_str("orders")))
            .with_partitions(vec![OffsetCommitRequestPartition::default()
                .with_partition_index(0)
                .with_committed_offset(offset)])]);
    let answer = connect(address).send("OffsetCommit", &request, 8).unwrap();
    assert_eq!(answer.topics[0].partitions[0].error_code, 0, "{answer:?}");
}

/// A group consumes orders-0 on the source and commits after every poll; a sync round runs
/// after every `INTERVAL` records; the source is lost between two rounds and orders fails over.
/// On the served node the group's OffsetFetch answers the last synced offset, and reading from
/// it skips nothing: the rest of the source's records, then those written after the failover
/// (the stop's `MIRROR_PID_RESET` control batch stepped over). The records read twice are at
/// most what the group consumed on the source since the last round. Then the node owns the
/// group: a round leaves orders out, and the offset the consumer committed on the node stays.
#[test]
fn a_group_resumes_on_the_node_after_a_failover_exactly_at_the_synced_offset() {
    const INTERVAL: Offset = 4; // records the group consumes between two rounds
    const RECORDS: Offset = 30; // orders-0's log end offset at the source
    let fake = long_orders_0();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("west");
    let mut src = DirSource::new(&dir.path().join("east"), &fake);
    let mut driver = added(&fake, &root);
    let mut clock = ManualClock::default();
    caught_up(&mut driver, &mut clock);
    let mut sync = NodeSync::new(NodeSyncPolicy::default(), 1);

    let mut committed_on_source = 0;
    let mut synced = None;
    for round in 0..5 {
        committed_on_source += INTERVAL;
        src.set_group("billing", &[("orders", 0, committed_on_source)]);
        let report = sync.round(&driver, &mut src).unwrap();
        assert!(report.rejected.is_empty(), "{}", report.render());
        let commit = &report.commits[..];
        assert_eq!(commit.len(), 1, "round {round}: {}", report.render());
        assert_eq!(
            (commit[0].offset, commit[0].previous),
            (committed_on_source, synced),
            "round {round}"
        );
        synced = Some(commit[0].offset);
    }
    // Two more polls on the source after the last round, then the source is lost.
    committed_on_source += 2;
    src.set_group("billing", &[("orders", 0, committed_on_source)]);
    let synced = synced.unwrap();
    assert_eq!((synced, committed_on_source), (20, 22));
    assert_eq!(
        offsets(&root, "billing"),
        BTreeMap::from([(tp("orders", 0), 20)])
    );

    // Fail over orders; clients write two records to it on the node.
    request_orders(&mut driver, TopicsVerb::Stop, &mut clock);
    assert_eq!(orders_states(&driver), [MirrorState::Stopped; 3]);
    let running = Running::start(driver);
    let mut conn = connect(&running.address);
    let (code, base) = produce_to(&mut conn, "orders", 0, &client_batch(2, -1, 0));
    assert_eq!(
        (code, base),
        (0, RECORDS + 1),
        "after the MIRROR_PID_RESET at 30"
    );

    // The group resumes on the node.
    let mut client = KafkaClient::new(
        &running.address,
        std::time::Duration::from_secs(2),
        std::time::Duration::from_secs(5),
    );
    let fetched = client.offset_fetch("billing").unwrap();
    let position: Vec<(String, i32, Offset)> = fetched
        .iter()
        .map(|c| (c.topic.clone(), c.partition, c.offset))
        .collect();
    assert_eq!(position, [("orders".to_owned(), 0, synced)]);
    let read = consume_orders_0(&mut client, synced);
    assert_eq!(
        read,
        (synced..RECORDS).chain([31, 32]).collect::<Vec<_>>(),
        "resumes exactly at the synced offset, nothing skipped"
    );
    let duplicates = committed_on_source - synced;
    assert!(duplicates <= INTERVAL, "{duplicates} records read twice");
    commit_orders_0(&running.address, "billing", 33);
    let driver = running.stop();

    // The node owns orders' metadata now: the group goes on consuming on the lost source, and
    // a round leaves orders out and keeps the consumer's offset.
    src.set_group("billing", &[("orders", 0, committed_on_source + 5)]);
    let report = sync.round(&driver, &mut src).unwrap();
    assert!(
        report
            .left_out
            .iter()
            .any(|(t, r)| t == "orders" && matches!(r, SyncRefused::StopRequested { .. })),
        "{}",
        report.render()
    );
    assert!(report.commits.is_empty(), "{}", report.render());
    assert_eq!(
        offsets(&root, "billing"),
        BTreeMap::from([(tp("orders", 0), 33)])
    );
    driver.close().unwrap();
}

/// A round read while orders is MIRRORING that lands after `kmirror pause`, and one read while
/// it is PAUSED that lands after `kmirror resume`, are each fenced for orders (the state, or
/// its epoch, changed): its config and its offsets are not written, while pay.eu's commit in
/// the same round lands. A round run while PAUSED syncs (a paused topic is still mirrored),
/// and the round after the resume syncs what the fenced one could not.
#[test]
fn a_round_across_a_pause_or_a_resume_is_fenced_for_that_topic_then_the_next_round_syncs() {
    let fake = fake();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("west");
    let mut src = DirSource::new(&dir.path().join("east"), &fake);
    let mut driver = added(&fake, &root);
    let mut clock = ManualClock::default();
    caught_up(&mut driver, &mut clock);
    let mut sync = NodeSync::new(NodeSyncPolicy::default(), 1);
    let fenced_writes = |report: &NodeSyncReport| -> Vec<(Category, String)> {
        report
            .writes
            .iter()
            .filter(|w| matches!(&w.result, Err(SyncRefused::Fenced { .. })))
            .map(|w| (w.category, w.target.clone()))
            .collect()
    };

    // Read while MIRRORING, landed after the pause.
    src.set_config("orders", &[("retention.ms", "1000")]);
    src.set_group("billing", &[("orders", 0, 2), ("pay.eu", 1, 1)]);
    let before_pause = sync.read(&driver, &mut src).unwrap();
    request_orders(&mut driver, TopicsVerb::Pause, &mut clock);
    assert_eq!(orders_states(&driver), [MirrorState::Paused; 3]);
    let report = sync.land(&driver, before_pause).unwrap();
    assert_eq!(
        fenced_writes(&report),
        [
            (Category::TopicConfig, "orders".to_owned()),
            (Category::GroupOffsets, "billing orders-0".to_owned()),
        ],
        "{}",
        report.render()
    );
    let Err(SyncRefused::Fenced {
        read_state,
        now_state,
        ..
    }) = &report.writes[0].result
    else {
        panic!("{}", report.render());
    };
    assert_eq!(
        (*read_state, *now_state),
        (MirrorState::Mirroring, MirrorState::Paused)
    );
    assert!(report
        .render()
        .contains("NOT WRITTEN (orders): the partition's mirror state changed"));
    assert_eq!(config(&root, "orders"), BTreeMap::new());
    assert_eq!(
        offsets(&root, "billing"),
        BTreeMap::from([(tp("pay.eu", 1), 1)])
    );

    // PAUSED: a fresh round syncs orders.
    let paused = sync.round(&driver, &mut src).unwrap();
    assert_eq!(paused.refused(), 0, "{}", paused.render());
    assert!(paused
        .render()
        .contains("sync of orders (3/3 partitions), pay.eu (2/2 partitions)"));
    assert_eq!(config(&root, "orders"), pairs(&[("retention.ms", "1000")]));
    assert_eq!(
        offsets(&root, "billing"),
        BTreeMap::from([(tp("orders", 0), 2), (tp("pay.eu", 1), 1)])
    );

    // Read while PAUSED, landed after the resume (MIRRORING again, at a newer state epoch).
    src.set_config("orders", &[("retention.ms", "2000")]);
    src.set_group("billing", &[("orders", 0, 4), ("pay.eu", 1, 3)]);
    let before_resume = sync.read(&driver, &mut src).unwrap();
    request_orders(&mut driver, TopicsVerb::Resume, &mut clock);
    assert_eq!(orders_states(&driver), [MirrorState::Mirroring; 3]);
    let report = sync.land(&driver, before_resume).unwrap();
    assert_eq!(
        fenced_writes(&report),
        [
            (Category::TopicConfig, "orders".to_owned()),
            (Category::GroupOffsets, "billing orders-0".to_owned()),
        ],
        "{}",
        report.render()
    );
    let Err(SyncRefused::Fenced {
        read_state,
        read_epoch,
        now_state,
        now_epoch,
    }) = &report.writes[0].result
    else {
        panic!("{}", report.render());
    };
    assert_eq!(
        (*read_state, *now_state),
        (MirrorState::Paused, MirrorState::Mirroring)
    );
    assert!(now_epoch > read_epoch, "{read_epoch:?} -> {now_epoch:?}");
    assert_eq!(config(&root, "orders"), pairs(&[("retention.ms", "1000")]));
    assert_eq!(
        offsets(&root, "billing"),
        BTreeMap::from([(tp("orders", 0), 2), (tp("pay.eu", 1), 3)])
    );

    // The next round syncs orders again.
    let next = sync.round(&driver, &mut src).unwrap();
    assert_eq!(next.refused(), 0, "{}", next.render());
    assert_eq!(config(&root, "orders"), pairs(&[("retention.ms", "2000")]));
    assert_eq!(
        offsets(&root, "billing"),
        BTreeMap::from([(tp("orders", 0), 4), (tp("pay.eu", 1), 3)])
    );
    assert_eq!(sync.round(&driver, &mut src).unwrap().written(), 0);
    driver.close().unwrap();
}

/// Invalid or hostile source metadata is rejected item by item and the rest lands: a config
/// line that is not `key=value` and a value that does not parse (the destination's value
/// kept), local keys never taken from the source (`mirror.name`, `min.insync.replicas`), a
/// group file that does not parse, an offset beyond the source's log end, a binding for a
/// principal the mirror may not grant to, an unknown operation. The operator's own binding on
/// the node is never touched, a second round writes nothing and rejects the same items, and
/// when the source drops its binding the mirror deletes its own copy only.
#[test]
fn hostile_source_metadata_is_rejected_per_item_and_the_rest_lands() {
    let fake = fake();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("west");
    let mut src = DirSource::new(&dir.path().join("east"), &fake);
    let mut driver = added(&fake, &root);
    let mut clock = ManualClock::default();
    caught_up(&mut driver, &mut clock);

    let config_path = src.meta.topic_config_path("orders");
    std::fs::create_dir_all(config_path.parent().unwrap()).unwrap();
    std::fs::write(
        &config_path,
        "retention.ms=a week\ncleanup.policy=compact\nnot a line\nmin.insync.replicas=1\n\
         mirror.name=evil\nsegment.ms=60000\n",
    )
    .unwrap();
    let good = GroupRecord {
        members: vec!["c-1".into()],
        offsets: BTreeMap::from([(tp("orders", 0), 7)]),
    };
    src.meta.write_group("good", &good).unwrap();
    src.set_group("forged", &[("orders", 0, 1_000)]);
    std::fs::write(
        src.meta.group_path("broken"),
        "{\"version\": 0, \"group\": ",
    )
    .unwrap();
    src.set_acls(&[
        acl("TOPIC", "orders", "User:app-1", "READ"),
        acl("TOPIC", "orders", "User:admin", "ALL"),
        acl("TOPIC", "orders", "User:app-2", "OWN"),
        acl("TOPIC", "payments", "User:app-1", "READ"),
    ]);
    // The node's own settings and an operator's binding.
    let dst = MetadataDir::of(&root);
    dst.write_topic_config(
        "orders",
        &pairs(&[
            ("min.insync.replicas", "2"),
            ("retention.ms", "604800000"),
            ("segment.ms", "1"),
        ]),
    )
    .unwrap();
    let operator = acl("TOPIC", "orders", "User:app-ops", "ALTER");
    dst.write_acls(&AclsFile {
        version: 0,
        bindings: vec![operator.clone()],
        created_by_mirror: vec![],
    })
    .unwrap();

    let policy = NodeSyncPolicy {
        acl_principals: Glob::new("User:app-*"),
        ..NodeSyncPolicy::default()
    };
    let mut sync = NodeSync::new(policy, 1);
    let report = sync.round(&driver, &mut src).unwrap();
    let rejected = |c: Category| -> Vec<String> {
        report
            .rejected
            .iter()
            .filter(|r| r.category == c)
            .map(|r| r.message.clone())
            .collect()
    };
    let configs = rejected(Category::TopicConfig);
    assert_eq!(configs.len(), 2, "{configs:?}");
    assert!(configs.iter().any(|m| m.contains("line 3")), "{configs:?}");
    assert!(
        configs
            .iter()
            .any(|m| m.contains("retention.ms=\"a week\"")),
        "{configs:?}"
    );
    let groups = rejected(Category::GroupOffsets);
    assert_eq!(groups.len(), 2, "{groups:?}");
    assert!(
        groups
            .iter()
            .any(|m| m.contains("broken.json") && m.contains("group not synced")),
        "{groups:?}"
    );
    assert!(
        groups
            .iter()
            .any(|m| m.contains("1000") && m.contains("beyond the source's log end offset 8")),
        "{groups:?}"
    );
    let acls = rejected(Category::Acls);
    assert_eq!(acls.len(), 2, "{acls:?}");
    assert!(acls.iter().any(|m| m.contains("User:admin")), "{acls:?}");
    assert!(acls.iter().any(|m| m.contains("\"OWN\"")), "{acls:?}");
    assert_eq!(report.refused(), 0, "{}", report.render());

    // The rest landed: the valid configs (local keys and the unparsable value's destination
    // value kept), the good group, the app-1 binding next to the operator's.
    assert_eq!(
        config(&root, "orders"),
        pairs(&[
            ("cleanup.policy", "compact"),
            ("min.insync.replicas", "2"),
            ("retention.ms", "604800000"),
            ("segment.ms", "60000"),
        ])
    );
    assert_eq!(
        offsets(&root, "good"),
        BTreeMap::from([(tp("orders", 0), 7)])
    );
    assert_eq!(group(&root, "forged"), None);
    assert_eq!(group(&root, "broken"), None);
    let on_node = dst.read_acls().unwrap().unwrap();
    assert_eq!(
        on_node.bindings,
        vec![
            acl("TOPIC", "orders", "User:app-1", "READ"),
            operator.clone()
        ]
    );
    assert_eq!(
        on_node.created_by_mirror,
        vec![acl("TOPIC", "orders", "User:app-1", "READ")]
    );

    // Idempotent: nothing written, the same items rejected.
    let again = sync.round(&driver, &mut src).unwrap();
    assert_eq!(again.written(), 0, "{}", again.render());
    assert_eq!(again.rejected, report.rejected);

    // The source drops its bindings: the mirror deletes its own, never the operator's.
    src.set_acls(&[]);
    let dropped = sync.round(&driver, &mut src).unwrap();
    assert_eq!(dropped.acl_deletes.len(), 1, "{}", dropped.render());
    let on_node = dst.read_acls().unwrap().unwrap();
    assert_eq!(on_node.bindings, vec![operator]);
    assert!(on_node.created_by_mirror.is_empty());
    driver.close().unwrap();
}

/// A group with members on the node (its coordinator lists them in the group's file) owns its
/// offsets: a round commits nothing for it, says why, and keeps its members and offsets, while
/// a group without members is synced in the same round. Once its members are gone, the next
/// round syncs it.
#[test]
fn a_group_with_members_on_the_node_is_left_alone_until_it_is_empty() {
    let fake = fake();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("west");
    let mut src = DirSource::new(&dir.path().join("east"), &fake);
    let mut driver = added(&fake, &root);
    let mut clock = ManualClock::default();
    caught_up(&mut driver, &mut clock);
    src.set_group("billing", &[("orders", 0, 8), ("orders", 1, 5)]);
    src.set_group("audit", &[("orders", 0, 6)]);
    let dst = MetadataDir::of(&root);
    let in_use = GroupRecord {
        members: vec!["local-consumer".into()],
        offsets: BTreeMap::from([(tp("orders", 0), 3)]),
    };
    dst.write_group("billing", &in_use).unwrap();

    let mut sync = NodeSync::new(NodeSyncPolicy::default(), 1);
    let report = sync.round(&driver, &mut src).unwrap();
    assert_eq!(report.active_groups, [("billing".to_owned(), 1)]);
    let committed: Vec<(&str, &TopicPartition, Offset)> = report
        .commits
        .iter()
        .map(|c| (c.group.as_str(), &c.partition, c.offset))
        .collect();
    assert_eq!(committed, [("audit", &tp("orders", 0), 6)]);
    assert!(
        report.render().contains(
            "offsets  billing: skipped, 1 active member(s) on the destination own its offsets"
        ),
        "{}",
        report.render()
    );
    assert_eq!(group(&root, "billing"), Some(in_use.clone()));
    assert_eq!(
        offsets(&root, "audit"),
        BTreeMap::from([(tp("orders", 0), 6)])
    );

    // The consumer leaves: the group is the sync's again.
    let left = GroupRecord {
        members: Vec::new(),
        ..in_use
    };
    dst.write_group("billing", &left).unwrap();
    let report = sync.round(&driver, &mut src).unwrap();
    assert!(report.active_groups.is_empty(), "{}", report.render());
    assert_eq!(
        offsets(&root, "billing"),
        BTreeMap::from([(tp("orders", 0), 8), (tp("orders", 1), 5)])
    );
    driver.close().unwrap();
}
