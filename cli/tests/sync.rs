//! The metadata sync on real cluster directories: a consumer group that commits on the source
//! resumes on the destination after a failover exactly at the synced position (no record
//! skipped, duplicates bounded by the sync interval); no sync write lands after a stop, even
//! from a round in flight across it; hostile source metadata is rejected item by item.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use kmirror_harness::driver::cluster::{ClusterConfig, ClusterDir};
use kmirror_harness::driver::consumer::{self, consume_as_group};
use kmirror_harness::driver::metadata_sync::{LocalMetadataSink, LocalMetadataSource};
use kmirror_harness::driver::LocalSource;
use kmirror_harness::driver::{Cluster, Driver, DriverOptions, ManualClock, RunEnd, Until};
use kmirror_harness::producer::{self, ProduceOp};
use kmirror_harness::sync::local::{AclsFile, MetadataDir};
use kmirror_harness::sync::report::Category;
use kmirror_harness::sync::{land, read_round, run_round, GroupRecord, RoundReport, SyncPolicy};
use kmirror_kernel::controller::MirrorRequest;
use kmirror_kernel::state::MirrorState;
use kmirror_kernel::sync::acl::RawAclBinding;
use kmirror_kernel::sync::gate::SyncRefused;
use kmirror_kernel::sync::group_offsets::TopicPartition;
use kmirror_kernel::sync::pattern::Glob;
use kmirror_kernel::types::{MirrorName, Offset, TopicId};

const TOPIC: &str = "orders";
const TOPIC_ID: TopicId = TopicId::from_u64(0x5ca1);
const GROUP: &str = "billing";

fn name(s: &str) -> MirrorName {
    MirrorName::new(s).unwrap()
}

fn ops(text: &str) -> Vec<ProduceOp> {
    text.split_whitespace()
        .map(|s| s.parse().unwrap())
        .collect()
}

fn produce(dir: &Path, text: &str) {
    let mut cluster = Cluster::open(dir).unwrap();
    producer::produce(&mut cluster, &ops(text), 1_000).unwrap();
    cluster.close().unwrap();
}

/// Source `east` (one replica) with `records` one-record batches; destination `west` (three
/// replicas) in mirror `east`.
fn clusters(root: &Path, records: usize) -> (PathBuf, PathBuf) {
    let east = root.join("east");
    let config = ClusterConfig::new(name("east"), TOPIC, TOPIC_ID);
    Cluster::open_dir(ClusterDir::create(&east, config, 1).unwrap(), true)
        .unwrap()
        .close()
        .unwrap();
    produce(&east, &vec!["plain:1"; records].join(" "));
    let west = root.join("west");
    let mut config = ClusterConfig::new(name("west"), TOPIC, TOPIC_ID);
    config.mirror_name = Some("east".into());
    config.mirrors.insert(name("east"));
    ClusterDir::create(&west, config, 3).unwrap();
    (east, west)
}

fn mirror(west: &Path, east: &Path) {
    let source =
        Box::new(LocalSource::open(east).unwrap()) as Box<dyn kmirror_harness::source::Source>;
    let mut d = Driver::open(west, Some(source), DriverOptions::default()).unwrap();
    let end = d
        .run(&mut ManualClock::default(), Until::Idle, &mut |_, _| {})
        .unwrap();
    assert_eq!(end, RunEnd::CaughtUp);
    d.close().unwrap();
}

fn request(west: &Path, request: MirrorRequest) -> MirrorState {
    let mut d = Driver::open(west, None, DriverOptions::default()).unwrap();
    d.start(0).unwrap();
    d.request(&request, 0).unwrap();
    d.run(&mut ManualClock::default(), Until::Idle, &mut |_, _| {})
        .unwrap();
    let state = d.state();
    d.close().unwrap();
    state
}

fn stop(west: &Path) {
    let state = request(
        west,
        MirrorRequest::RemoveTopics {
            mirror: "east".into(),
            topics: vec![TOPIC.into()],
        },
    );
    assert_eq!(state, MirrorState::Stopped);
}

fn sync(east: &Path, west: &Path, policy: &SyncPolicy) -> RoundReport {
    let mut sink = LocalMetadataSink::open(west).unwrap();
    let mut source = LocalMetadataSource::new(east);
    run_round(&mut source, &mut sink, policy).unwrap()
}

fn policy() -> SyncPolicy {
    SyncPolicy::for_topic(TOPIC)
}

fn values(consumed: &consumer::Consumed) -> Vec<String> {
    consumed
        .records
        .iter()
        .map(|r| String::from_utf8(r.value.clone().unwrap()).unwrap())
        .collect()
}

/// The scenario of the issue: the group consumes on the source and commits after every poll;
/// the sync runs after every `INTERVAL` records; the source fails, the destination fails over,
/// and the group resumes on the destination at the last synced offset.
#[test]
fn consumer_resumes_on_the_destination_at_the_synced_position() {
    const INTERVAL: usize = 4; // records the group consumes between two sync rounds
    const RECORDS: usize = 30;
    let tmp = tempfile::tempdir().unwrap();
    let (east, west) = clusters(tmp.path(), RECORDS);
    mirror(&west, &east);

    let mut consumed_on_source: Vec<Offset> = Vec::new();
    let mut last_synced = None;
    // Five sync intervals, then two more polls after the last sync: the failover comes between
    // two syncs.
    for step in 0..6 {
        for _ in 0..if step < 5 { INTERVAL } else { 2 } {
            let c = consume_as_group(&east, GROUP, 1, true).unwrap();
            consumed_on_source.extend(c.records.iter().map(|r| r.offset));
        }
        if step < 5 {
            let report = sync(&east, &west, &policy());
            assert!(report.rejected.is_empty(), "{}", report.render());
            last_synced = report.commits.last().map(|c| c.offset).or(last_synced);
        }
    }
    let committed_on_source = consumer::committed(&east, TOPIC, GROUP).unwrap().unwrap();
    let synced = last_synced.unwrap();
    assert_eq!(synced, 20, "five intervals of {INTERVAL} records");
    assert_eq!(committed_on_source, 22);
    assert_eq!(
        consumer::committed(&west, TOPIC, GROUP).unwrap(),
        Some(synced)
    );

    // The source is lost: fail over, then the group resumes on the destination.
    stop(&west);
    produce(&west, "plain:1 plain:1");
    let resumed = consume_as_group(&west, GROUP, 100, true).unwrap();
    assert_eq!(resumed.from, synced, "resumes exactly at the synced offset");
    let first = resumed.records.first().unwrap().offset;
    assert_eq!(first, synced, "no record skipped");
    let duplicates = committed_on_source - synced;
    println!(
        "consumer resumed at offset {synced}; the source group had committed \
         {committed_on_source}: {duplicates} duplicate(s), bound {INTERVAL} (records consumed \
         per sync interval)"
    );
    assert!(duplicates as usize <= INTERVAL);
    // Everything the source had is read exactly once more from the synced offset on, then the
    // records produced locally after the failover; nothing between is skipped.
    let offsets: Vec<Offset> = resumed.records.iter().map(|r| r.offset).collect();
    assert_eq!(
        offsets,
        (synced..RECORDS as Offset)
            .chain([31, 32])
            .collect::<Vec<_>>()
    );
    assert_eq!(values(&resumed)[0], format!("kmirror:{synced}"));
    assert!(consumed_on_source.iter().all(|o| *o < committed_on_source));

    // After the failover the destination owns its metadata: a sync is refused and writes
    // nothing, and the group's destination offset stays where the consumer committed it.
    let after = consumer::committed(&west, TOPIC, GROUP).unwrap();
    consume_as_group(&east, GROUP, 5, true).unwrap();
    let report = sync(&east, &west, &policy());
    assert_eq!(
        report.started,
        Err(SyncRefused::StopRequested {
            mirror: name("east")
        })
    );
    assert_eq!(consumer::committed(&west, TOPIC, GROUP).unwrap(), after);
}

/// A round read while MIRRORING whose writes land after `kmirror stop`: the gate refuses every
/// write (the model's two-step sync action, on real directories).
#[test]
fn a_round_in_flight_across_a_stop_writes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let (east, west) = clusters(tmp.path(), 5);
    mirror(&west, &east);
    let meta = MetadataDir::of(&east);
    meta.write_topic_config(
        TOPIC,
        &BTreeMap::from([("retention.ms".into(), "1000".into())]),
    )
    .unwrap();
    consumer::commit(&Cluster::open_leader_only(&east).unwrap(), GROUP, 3, &[]).unwrap();

    let pending = {
        let mut sink = LocalMetadataSink::open(&west).unwrap();
        let mut source = LocalMetadataSource::new(&east);
        read_round(&mut source, &mut sink, &policy())
            .unwrap()
            .unwrap()
    };
    assert_eq!(pending.fence.state, MirrorState::Mirroring);
    assert_eq!(pending.groups.commits.len(), 1);

    stop(&west);
    let mut sink = LocalMetadataSink::open(&west).unwrap();
    let report = land(pending, &mut sink, &policy()).unwrap();
    drop(sink);
    assert_eq!(report.written(), 0);
    assert_eq!(report.writes.len(), 2);
    for w in &report.writes {
        assert_eq!(
            w.result,
            Err(SyncRefused::StopRequested {
                mirror: name("east")
            }),
            "{:?}",
            w.category
        );
    }
    assert!(report.render().contains("NOT WRITTEN"));
    assert_eq!(consumer::committed(&west, TOPIC, GROUP).unwrap(), None);
    assert!(!MetadataDir::of(&west).topic_config_path(TOPIC).exists());
}

/// A round read while MIRRORING that lands after a pause and a resume (same state, newer state
/// epoch) is fenced too; the next round syncs.
#[test]
fn a_round_across_a_pause_and_resume_is_fenced_then_retried() {
    let tmp = tempfile::tempdir().unwrap();
    let (east, west) = clusters(tmp.path(), 5);
    mirror(&west, &east);
    consumer::commit(&Cluster::open_leader_only(&east).unwrap(), GROUP, 2, &[]).unwrap();
    let pending = {
        let mut sink = LocalMetadataSink::open(&west).unwrap();
        read_round(&mut LocalMetadataSource::new(&east), &mut sink, &policy())
            .unwrap()
            .unwrap()
    };
    let pause = |r| request(&west, r);
    assert_eq!(
        pause(MirrorRequest::PauseTopics {
            mirror: "east".into(),
            topics: vec![TOPIC.into()]
        }),
        MirrorState::Paused
    );
    // Paused: a fresh round syncs.
    let paused = sync(&east, &west, &policy());
    assert_eq!(paused.written(), 1, "{}", paused.render());
    consumer::commit(&Cluster::open_leader_only(&east).unwrap(), GROUP, 4, &[]).unwrap();
    assert_eq!(
        pause(MirrorRequest::ResumeTopics {
            mirror: "east".into(),
            topics: vec![TOPIC.into()]
        }),
        MirrorState::Mirroring
    );
    let mut sink = LocalMetadataSink::open(&west).unwrap();
    let report = land(pending, &mut sink, &policy()).unwrap();
    drop(sink);
    assert!(matches!(
        report.writes[0].result,
        Err(SyncRefused::Fenced { .. })
    ));
    assert_eq!(consumer::committed(&west, TOPIC, GROUP).unwrap(), Some(2));
    let next = sync(&east, &west, &policy());
    assert_eq!(next.commits.len(), 1);
    assert_eq!(consumer::committed(&west, TOPIC, GROUP).unwrap(), Some(4));
}

fn acl(resource: &str, principal: &str, op: &str) -> RawAclBinding {
    let (t, n) = resource.split_once(':').unwrap();
    RawAclBinding {
        resource_type: t.into(),
        resource_name: n.into(),
        pattern_type: "LITERAL".into(),
        principal: principal.into(),
        host: "*".into(),
        operation: op.into(),
        permission_type: "ALLOW".into(),
    }
}

/// Invalid or hostile source metadata is rejected item by item; the rest lands; a second round
/// changes nothing.
#[test]
fn hostile_source_metadata_is_rejected_per_item() {
    let tmp = tempfile::tempdir().unwrap();
    let (east, west) = clusters(tmp.path(), 10);
    mirror(&west, &east);
    let src = MetadataDir::of(&east);
    std::fs::create_dir_all(src.topic_config_path(TOPIC).parent().unwrap()).unwrap();
    std::fs::write(
        src.topic_config_path(TOPIC),
        "retention.ms=a week\ncleanup.policy=compact\nnot a line\nmin.insync.replicas=1\n\
         mirror.name=evil\nsegment.ms=60000\n",
    )
    .unwrap();
    let good = GroupRecord {
        members: vec!["c-1".into()],
        offsets: BTreeMap::from([(TopicPartition::new(TOPIC, 0), 7)]),
    };
    src.write_group("good", &good).unwrap();
    let forged = GroupRecord {
        members: vec![],
        offsets: BTreeMap::from([(TopicPartition::new(TOPIC, 0), 1_000)]),
    };
    src.write_group("forged", &forged).unwrap();
    std::fs::write(src.group_path("broken"), "{\"version\": 0, \"group\": ").unwrap();
    src.write_acls(&AclsFile {
        version: 0,
        bindings: vec![
            acl("TOPIC:orders", "User:app-1", "READ"),
            acl("TOPIC:orders", "User:admin", "ALL"),
            acl("TOPIC:orders", "User:app-2", "OWN"),
            acl("TOPIC:payments", "User:app-1", "READ"),
        ],
        created_by_mirror: vec![],
    })
    .unwrap();
    // The destination has its own settings and an operator's ACL.
    let dst = MetadataDir::of(&west);
    dst.write_topic_config(
        TOPIC,
        &BTreeMap::from([
            ("min.insync.replicas".into(), "2".into()),
            ("retention.ms".into(), "604800000".into()),
            ("segment.ms".into(), "1".into()),
        ]),
    )
    .unwrap();
    let operator = acl("TOPIC:orders", "User:app-ops", "ALTER");
    dst.write_acls(&AclsFile {
        version: 0,
        bindings: vec![operator.clone()],
        created_by_mirror: vec![],
    })
    .unwrap();

    let mut p = policy();
    p.acls.principals = Glob::new("User:app-*");
    let report = sync(&east, &west, &p);
    let text = report.render();
    println!("{text}");
    let rejected = |c: Category| {
        report
            .rejected
            .iter()
            .filter(|r| r.category == c)
            .map(|r| r.message.clone())
            .collect::<Vec<_>>()
    };
    let config_rejections = rejected(Category::TopicConfig);
    assert_eq!(config_rejections.len(), 2, "{config_rejections:?}");
    assert!(config_rejections.iter().any(|m| m.contains("line 3")));
    assert!(config_rejections
        .iter()
        .any(|m| m.contains("retention.ms=\"a week\"")));
    let offset_rejections = rejected(Category::GroupOffsets);
    assert_eq!(offset_rejections.len(), 2, "{offset_rejections:?}");
    assert!(offset_rejections
        .iter()
        .any(|m| m.contains("broken.json") && m.contains("group not synced")));
    assert!(offset_rejections
        .iter()
        .any(|m| m.contains("1000") && m.contains("beyond the source's log end offset 10")));
    let acl_rejections = rejected(Category::Acls);
    assert_eq!(acl_rejections.len(), 2, "{acl_rejections:?}");
    assert!(acl_rejections.iter().any(|m| m.contains("User:admin")));
    assert!(acl_rejections.iter().any(|m| m.contains("\"OWN\"")));

    // The rest landed: configs (local keys kept, invalid values not applied), the good group,
    // the app-1 binding; the operator's binding untouched.
    let config = dst.read_topic_config(TOPIC).unwrap().value;
    assert_eq!(
        config,
        BTreeMap::from([
            ("cleanup.policy".into(), "compact".into()),
            ("min.insync.replicas".into(), "2".into()),
            ("retention.ms".into(), "604800000".into()),
            ("segment.ms".into(), "60000".into()),
        ])
    );
    assert_eq!(consumer::committed(&west, TOPIC, "good").unwrap(), Some(7));
    assert_eq!(consumer::committed(&west, TOPIC, "forged").unwrap(), None);
    let acls = dst.read_acls().unwrap().unwrap();
    assert_eq!(acls.bindings.len(), 2);
    assert!(acls.bindings.contains(&operator));
    assert_eq!(
        acls.created_by_mirror,
        vec![acl("TOPIC:orders", "User:app-1", "READ")]
    );

    // Idempotent: the next round writes nothing and rejects the same items.
    let again = sync(&east, &west, &p);
    assert_eq!(again.written(), 0, "{}", again.render());
    assert_eq!(again.rejected, report.rejected);
    // The source drops the binding: the mirror deletes its own, never the operator's.
    src.write_acls(&AclsFile::default()).unwrap();
    let dropped = sync(&east, &west, &p);
    assert_eq!(dropped.acl_deletes.len(), 1);
    let acls = dst.read_acls().unwrap().unwrap();
    assert_eq!(acls.bindings, vec![operator]);
    assert!(acls.created_by_mirror.is_empty());
}

/// A group with active members on the destination owns its offsets.
#[test]
fn an_active_destination_group_is_left_alone() {
    let tmp = tempfile::tempdir().unwrap();
    let (east, west) = clusters(tmp.path(), 10);
    mirror(&west, &east);
    consumer::commit(&Cluster::open_leader_only(&east).unwrap(), GROUP, 8, &[]).unwrap();
    consumer::commit(
        &Cluster::open_leader_only(&west).unwrap(),
        GROUP,
        3,
        &["local-consumer".into()],
    )
    .unwrap();
    let report = sync(&east, &west, &policy());
    assert!(report.commits.is_empty());
    assert!(report
        .render()
        .contains("1 active member(s) on the destination"));
    assert_eq!(consumer::committed(&west, TOPIC, GROUP).unwrap(), Some(3));
}

fn kmirror(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_kmirror"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The commands: `group commit`, `sync --once`, periodic `sync --interval-ms` that ends by
/// itself once the topic failed over, and `sync --once` refused after the failover (exit 1).
#[test]
fn sync_and_group_commands() {
    let tmp = tempfile::tempdir().unwrap();
    let (east, west) = clusters(tmp.path(), 6);
    mirror(&west, &east);
    let (e, w) = (east.to_str().unwrap(), west.to_str().unwrap());
    let (code, out, err) = kmirror(&[
        "group", "commit", "--dir", e, "--group", GROUP, "--offset", "4",
    ]);
    assert_eq!(code, 0, "{out}{err}");
    let (code, out, err) = kmirror(&["sync", "--source", e, "--dest", w, "--once"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("offsets  billing orders-0: commit 4 (source 4, was none)"),
        "{out}"
    );
    let (code, out, _) = kmirror(&[
        "sync",
        "--source",
        e,
        "--dest",
        w,
        "--interval-ms",
        "10",
        "--max-rounds",
        "2",
    ]);
    assert_eq!(code, 0);
    assert!(
        out.contains("round 2:") && out.contains("re-reads at most"),
        "{out}"
    );
    stop(&west);
    let (code, out, _) = kmirror(&["sync", "--source", e, "--dest", w, "--interval-ms", "10"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("sync ends"), "{out}");
    let (code, out, _) = kmirror(&["sync", "--source", e, "--dest", w, "--once"]);
    assert_eq!(code, 1);
    assert!(
        out.contains("sync refused: mirror.name is east.removed"),
        "{out}"
    );
    let (code, out, err) = kmirror(&[
        "group", "consume", "--dir", w, "--group", GROUP, "--max", "2",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("4\tkmirror:4\n5\tkmirror:5\n"), "{out}");
    let (code, _, err) = kmirror(&["sync", "--source", e, "--dest", w]);
    assert_eq!(code, 2, "--once or --interval-ms is required: {err}");
}
