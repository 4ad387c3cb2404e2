//! The node metadata sync in the mirroring process: rounds interleaved with the driver's steps
//! converge configs, offsets and ACLs while the partitions catch up, and a round in flight
//! across a stop lands nothing of the stopped topic.

use std::collections::BTreeMap;

use kmirror_kernel::controller::MirrorRequest;
use kmirror_kernel::sync::gate::SyncRefused;
use kmirror_kernel::sync::group_offsets::TopicPartition;

use super::fixture::*;
use super::*;
use crate::clock::ManualClock;
use crate::sync::local::MetadataDir;
use crate::sync::report::Category;

fn config(root: &std::path::Path, topic: &str) -> BTreeMap<String, String> {
    MetadataDir::of(root)
        .read_topic_config(topic)
        .unwrap()
        .value
}

fn offsets(root: &std::path::Path, group: &str) -> BTreeMap<TopicPartition, i64> {
    MetadataDir::of(root)
        .read_groups()
        .unwrap()
        .value
        .remove(group)
        .unwrap_or_default()
        .offsets
}

fn source_metadata(src: &DirSource) {
    src.set_config(
        "orders",
        &[
            ("retention.ms", "86400000"),
            ("cleanup.policy", "compact"),
            ("min.insync.replicas", "2"),
        ],
    );
    src.set_config("pay.eu", &[("segment.ms", "3600000")]);
    src.set_group(
        "billing",
        &[("orders", 0, 7), ("orders", 2, 11), ("pay.eu", 1, 3)],
    );
    src.set_group("audit", &[("orders", 1, 10), ("pay.eu", 0, 99)]);
    src.set_acls(&[
        acl("TOPIC", "orders", "User:app", "READ"),
        acl("TOPIC", "pay.eu", "User:app", "WRITE"),
        acl("GROUP", "billing", "User:app", "READ"),
        acl("TOPIC", "other", "User:x", "READ"),
    ]);
}

/// Mirrors with a sync round every 50 ms (5 steps) until caught up, then rounds until one
/// writes nothing; returns every report.
fn mirror_with_sync(
    driver: &mut NodeDriver,
    sync: &mut NodeSync,
    src: &mut DirSource,
    clock: &mut ManualClock,
) -> Vec<NodeSyncReport> {
    let mut reports = Vec::new();
    for _ in 0..10_000 {
        clock.now_ms += 10;
        driver.run_once(clock.now_ms).unwrap();
        if let Some(r) = sync.round_if_due(driver, src, clock.now_ms) {
            reports.push(r.unwrap());
        }
        if driver.all_caught_up() {
            break;
        }
    }
    assert!(driver.all_caught_up(), "{}", driver.status().render(0));
    for _ in 0..3 {
        let r = sync.round(driver, src).unwrap();
        let quiet = r.written() == 0;
        reports.push(r);
        if quiet {
            return reports;
        }
    }
    panic!("the sync does not converge: {reports:#?}");
}

#[test]
fn mirror_and_sync_in_one_process_converge_configs_offsets_and_acls() {
    let fake = fake();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("west");
    let mut src = DirSource::new(&dir.path().join("east"), &fake);
    source_metadata(&src);
    let mut driver = added(&fake, &root);
    let mut sync = NodeSync::new(NodeSyncPolicy::default(), 50);
    let mut clock = ManualClock::default();
    let reports = mirror_with_sync(&mut driver, &mut sync, &mut src, &mut clock);

    // The first round ran before any partition was MIRRORING: nothing read, nothing written.
    assert!(reports[0].topics.is_empty(), "{:?}", reports[0]);
    assert!(reports[0]
        .left_out
        .iter()
        .any(|(t, r)| t == "orders" && *r == SyncRefused::NothingPersisted));
    assert_eq!(reports[0].written(), 0);
    // Rounds ran while partitions were still catching up: offsets capped at the destination's
    // LSO then, moved forward later (never back).
    assert!(
        reports
            .iter()
            .flat_map(|r| &r.commits)
            .any(|c| c.offset < c.source_offset),
        "no round saw a partition still catching up"
    );

    let expect = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    assert_eq!(
        config(&root, "orders"),
        expect(&[("cleanup.policy", "compact"), ("retention.ms", "86400000")]),
        "min.insync.replicas stays local"
    );
    assert_eq!(
        config(&root, "pay.eu"),
        expect(&[("segment.ms", "3600000")])
    );
    let tp = |t: &str, p| TopicPartition::new(t, p);
    assert_eq!(
        offsets(&root, "billing"),
        BTreeMap::from([
            (tp("orders", 0), 7),
            (tp("orders", 2), 11),
            (tp("pay.eu", 1), 3)
        ])
    );
    // pay.eu-0 at 99 is beyond the source's log end offset 4: rejected, every round.
    assert_eq!(
        offsets(&root, "audit"),
        BTreeMap::from([(tp("orders", 1), 10)])
    );
    let last = reports.last().unwrap();
    assert!(
        last.rejected
            .iter()
            .any(|r| r.category == Category::GroupOffsets && r.message.contains("99")),
        "{}",
        last.render()
    );
    let acls = MetadataDir::of(&root).read_acls().unwrap().unwrap();
    assert_eq!(acls.bindings.len(), 3, "{acls:?}");
    assert_eq!(acls.created_by_mirror.len(), 3);
    assert!(!acls.bindings.iter().any(|b| b.resource_name == "other"));
    assert!(last
        .render()
        .contains("sync of orders (3/3 partitions), pay.eu (2/2 partitions)"));
    driver.close().unwrap();
}

#[test]
fn a_round_in_flight_across_a_stop_lands_nothing_of_the_stopped_topic() {
    let fake = fake();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("west");
    let mut src = DirSource::new(&dir.path().join("east"), &fake);
    source_metadata(&src);
    let mut driver = added(&fake, &root);
    let mut sync = NodeSync::new(NodeSyncPolicy::default(), 50);
    let mut clock = ManualClock::default();
    mirror_with_sync(&mut driver, &mut sync, &mut src, &mut clock);
    let orders_config = config(&root, "orders");

    // The source changes; a round reads it; then orders fails over; then the round lands.
    src.set_config("orders", &[("retention.ms", "1000")]);
    src.set_config("pay.eu", &[("segment.ms", "7200000")]);
    src.set_group("billing", &[("orders", 0, 8), ("pay.eu", 1, 4)]);
    src.set_acls(&[
        acl("TOPIC", "pay.eu", "User:app", "WRITE"),
        acl("TOPIC", "pay.eu", "User:app2", "READ"),
        acl("GROUP", "billing", "User:app", "READ"),
    ]);
    let pending = sync.read(&driver, &mut src).unwrap();
    let source = driver.set_source(None);
    let results = driver
        .request(
            &MirrorRequest::RemoveTopics {
                mirror: east().to_string(),
                topics: vec!["orders".into()],
            },
            clock.now_ms,
        )
        .unwrap();
    assert!(results["orders"].is_ok());
    driver
        .run(&mut clock, NodeUntil::Settled, &mut |_, _| {})
        .unwrap();
    let report = sync.land(&driver, pending).unwrap();
    let refused: Vec<(Category, &str)> = report
        .writes
        .iter()
        .filter(|w| w.result.is_err())
        .map(|w| (w.category, w.target.as_str()))
        .collect();
    assert_eq!(
        refused,
        [
            (Category::TopicConfig, "orders"),
            (Category::GroupOffsets, "billing orders-0"),
            (Category::Acls, "acls"),
        ],
        "{}",
        report.render()
    );
    assert!(report
        .render()
        .contains("NOT WRITTEN (orders): mirror.name is"));
    assert_eq!(config(&root, "orders"), orders_config);
    assert_eq!(config(&root, "pay.eu")["segment.ms"], "7200000");
    let billing = offsets(&root, "billing");
    assert_eq!(billing[&TopicPartition::new("orders", 0)], 7, "not 8");
    assert_eq!(billing[&TopicPartition::new("pay.eu", 1)], 4);

    // The next rounds leave orders out; its ACL, gone from the source, is the destination's.
    driver.set_source(source);
    let next = sync.round(&driver, &mut src).unwrap();
    assert!(next
        .left_out
        .iter()
        .any(|(t, r)| t == "orders" && matches!(r, SyncRefused::StopRequested { .. })));
    assert_eq!(next.acl_deletes, []);
    assert_eq!(next.acl_creates.len(), 1, "{}", next.render());
    let acls = MetadataDir::of(&root).read_acls().unwrap().unwrap();
    assert!(acls.bindings.iter().any(|b| b.resource_name == "orders"));
    assert_eq!(sync.round(&driver, &mut src).unwrap().written(), 0);
    assert_eq!(config(&root, "orders"), orders_config);
    driver.close().unwrap();
}
