//! CreatePartitions and DeleteTopics on a served node ([`crate::serve::topic_admin`]), over the
//! wire: Kafka's error codes and messages first, then the effects on the node's files once
//! they are answered, and what a reopened node makes of them.

use std::collections::BTreeMap;
use std::path::Path;

use kafka_protocol::messages::create_partitions_request::{
    CreatePartitionsAssignment, CreatePartitionsTopic,
};
use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
use kafka_protocol::messages::{
    BrokerId, CreatePartitionsRequest, DeleteTopicsRequest, DeleteTopicsResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use kmirror_kernel::node::PartitionKey;
use kmirror_kernel::sync::group_offsets::TopicPartition as GroupPartition;
use uuid::Uuid;

use super::fixture::{options, ORDERS, PAY_EU};
use super::serve_tests::{client_batch, connect, init_producer, produce, stopped, Running};
use super::NodeDriver;
use crate::file_log::TopicPartition;
use crate::log_dir_checkpoints::{CheckpointKind, LogDirCheckpoints};
use crate::serve::metadata::{UNKNOWN_TOPIC_ID, UNKNOWN_TOPIC_OR_PARTITION};
use crate::serve::produce::READ_ONLY_TOPIC;
use crate::serve::topic_admin::{INVALID_PARTITIONS, INVALID_REPLICA_ASSIGNMENT, INVALID_REQUEST};
use crate::sync::local::MetadataDir;
use crate::sync::GroupRecord;
use crate::wire::Connection;

fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_owned()))
}

/// One topic of a CreatePartitions: `topic` to `count`, with `assignments` (broker ids per
/// new partition) if any.
fn grow(topic: &str, count: i32, assignments: Option<&[&[i32]]>) -> CreatePartitionsTopic {
    CreatePartitionsTopic::default()
        .with_name(name(topic))
        .with_count(count)
        .with_assignments(assignments.map(|a| {
            a.iter()
                .map(|ids| {
                    CreatePartitionsAssignment::default()
                        .with_broker_ids(ids.iter().map(|b| BrokerId(*b)).collect())
                })
                .collect()
        }))
}

/// CreatePartitions (v3): each topic's error code and message.
fn create_partitions(
    conn: &mut Connection,
    topics: Vec<CreatePartitionsTopic>,
    validate_only: bool,
) -> Vec<(i16, Option<String>)> {
    let request = CreatePartitionsRequest::default()
        .with_topics(topics)
        .with_timeout_ms(5_000)
        .with_validate_only(validate_only);
    let response = conn.send("CreatePartitions", &request, 3).unwrap();
    response
        .results
        .iter()
        .map(|r| {
            (
                r.error_code,
                r.error_message.as_ref().map(|m| m.to_string()),
            )
        })
        .collect()
}

/// DeleteTopics v6 of `topics` (each by name or by id).
fn delete_topics(
    conn: &mut Connection,
    topics: &[(Option<&str>, Option<Uuid>)],
) -> DeleteTopicsResponse {
    let request = DeleteTopicsRequest::default()
        .with_timeout_ms(5_000)
        .with_topics(
            topics
                .iter()
                .map(|(n, id)| {
                    DeleteTopicState::default()
                        .with_name(n.map(name))
                        .with_topic_id(id.unwrap_or(Uuid::nil()))
                })
                .collect(),
        );
    conn.send("DeleteTopics", &request, 6).unwrap()
}

/// The partition count Metadata answers for `topic`, or its error code.
fn partitions(conn: &mut Connection, topic: &str) -> Result<usize, i16> {
    use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
    let request = kafka_protocol::messages::MetadataRequest::default().with_topics(Some(vec![
        MetadataRequestTopic::default().with_name(Some(name(topic))),
    ]));
    let response = conn.send("Metadata", &request, 12).unwrap();
    let t = &response.topics[0];
    if t.error_code != 0 {
        return Err(t.error_code);
    }
    Ok(t.partitions.len())
}

fn message(s: &str) -> Option<String> {
    Some(s.to_owned())
}

#[test]
fn a_stopped_topic_grows_with_kafkas_checks_and_its_new_partitions_are_writable_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let driver = stopped(dir.path());
    let broker = driver.dest().meta().broker;
    let running = Running::start(driver);
    let mut conn = connect(&running.address);

    let answers = create_partitions(
        &mut conn,
        vec![
            grow("orders", 2, None),
            grow("nope", 4, None),
            grow("pay.eu", 4, None),
        ],
        false,
    );
    assert_eq!(
        answers[0],
        (
            INVALID_PARTITIONS,
            message("The topic orders currently has 3 partition(s); 2 would not be an increase.")
        )
    );
    assert_eq!(answers[1], (UNKNOWN_TOPIC_OR_PARTITION, None));
    assert_eq!(answers[2].0, READ_ONLY_TOPIC, "pay.eu is still mirrored");
    assert_eq!(
        create_partitions(&mut conn, vec![grow("orders", 3, None)], false),
        [(
            INVALID_PARTITIONS,
            message("Topic already has 3 partition(s).")
        )]
    );
    assert_eq!(
        create_partitions(
            &mut conn,
            vec![grow("orders", 5, Some(&[&[broker]]))],
            false
        ),
        [(
            INVALID_REPLICA_ASSIGNMENT,
            message(
                "Attempted to add 2 additional partition(s), but only 1 assignment(s) were \
                 specified."
            )
        )]
    );
    let other = broker + 1;
    assert_eq!(
        create_partitions(&mut conn, vec![grow("orders", 4, Some(&[&[other]]))], false),
        [(
            INVALID_REPLICA_ASSIGNMENT,
            Some(format!(
                "The manual partition assignment includes broker {other}, but no such broker \
                 is registered."
            ))
        )]
    );
    let duplicate = (INVALID_REQUEST, message("Duplicate topic name."));
    assert_eq!(
        create_partitions(
            &mut conn,
            vec![grow("orders", 4, None), grow("orders", 5, None)],
            false
        ),
        [duplicate.clone(), duplicate]
    );
    assert_eq!(
        create_partitions(&mut conn, vec![grow("orders", 5, None)], true),
        [(0, None)]
    );
    assert_eq!(partitions(&mut conn, "orders"), Ok(3), "validate_only");

    // The growth, then a write to a new partition on the same connection.
    assert_eq!(
        create_partitions(
            &mut conn,
            vec![grow("orders", 5, Some(&[&[broker], &[broker]]))],
            false
        ),
        [(0, None)]
    );
    assert_eq!(partitions(&mut conn, "orders"), Ok(5));
    let pid = init_producer(&mut conn).producer_id.0;
    assert_eq!(produce(&mut conn, 4, &client_batch(3, pid, 0)), (0, 0));
    let mut driver = running.stop();
    let meta = driver.dest().meta().clone();
    assert_eq!(meta.topics["orders"].partitions, 5);
    assert_eq!(
        meta.topics["orders"].mirror_name.as_deref(),
        Some("fake-cluster.removed"),
        "a failed-over topic that grows stays failed over (discovery never puts it back)"
    );
    for p in 3..5 {
        assert_eq!(
            driver.persisted_state(&PartitionKey::new(ORDERS, p)),
            kmirror_kernel::state::MirrorState::Stopped,
            "orders-{p}, which never mirrored, is written STOPPED"
        );
    }
    let events = driver.take_events();
    assert!(
        events.iter().any(|e| e.contains("grown from 3 to 5")),
        "{events:?}"
    );
    driver.close().unwrap();

    // Reopened: five partitions, the new one with its records, every one writable, and the
    // topic may fail back (every partition STOPPED).
    let mut driver = NodeDriver::open(dir.path(), None, options()).unwrap();
    let mut clock = crate::clock::ManualClock::default();
    driver
        .run(&mut clock, super::NodeUntil::Settled, &mut |_, _| {})
        .unwrap();
    for p in 0..5 {
        assert!(driver.writable(&PartitionKey::new(ORDERS, p)), "orders-{p}");
    }
    let back = driver.request(
        &kmirror_kernel::controller::MirrorRequest::AddTopics {
            mirror: "fake-cluster".into(),
            topics: vec!["orders".into()],
        },
        0,
    );
    assert!(
        matches!(back.as_ref().map(|r| r.get("orders")), Ok(Some(Ok(_)))),
        "{back:?}"
    );
    let new = driver.log(&PartitionKey::new(ORDERS, 4)).unwrap();
    assert_eq!(
        kmirror_kernel::log::LogView::log_end_offset(new.mem_log()),
        3
    );
    driver.close().unwrap();
}

#[test]
fn deleting_a_stopped_topic_removes_its_logs_configs_and_group_offsets() {
    let dir = tempfile::tempdir().unwrap();
    let driver = stopped(dir.path());
    let store = MetadataDir::of(dir.path());
    let offsets: BTreeMap<GroupPartition, i64> = [
        (GroupPartition::new("orders", 0), 5),
        (GroupPartition::new("pay.eu", 1), 2),
    ]
    .into_iter()
    .collect();
    store
        .write_group(
            "billing",
            &GroupRecord {
                members: Vec::new(),
                offsets,
            },
        )
        .unwrap();
    let config = [("retention.ms".to_owned(), "1000".to_owned())].into();
    store.write_topic_config("orders", &config).unwrap();
    let running = Running::start(driver);
    let mut conn = connect(&running.address);

    let orders_id = Uuid::from_bytes(ORDERS.0);
    let unknown = Uuid::from_bytes([9; 16]);
    let refused = delete_topics(
        &mut conn,
        &[
            (None, Some(unknown)),
            (Some("nope"), None),
            (Some("orders"), Some(orders_id)),
            (Some("pay.eu"), None),
        ],
    );
    let codes: Vec<i16> = refused.responses.iter().map(|r| r.error_code).collect();
    assert_eq!(
        codes,
        [
            UNKNOWN_TOPIC_ID,
            UNKNOWN_TOPIC_OR_PARTITION,
            INVALID_REQUEST,
            READ_ONLY_TOPIC
        ]
    );
    assert_eq!(
        partitions(&mut conn, "orders"),
        Ok(3),
        "nothing deleted yet"
    );

    let deleted = delete_topics(&mut conn, &[(None, Some(orders_id))]);
    let result = &deleted.responses[0];
    assert_eq!(result.error_code, 0, "{result:?}");
    assert_eq!(
        result.name.as_ref().map(|n| n.0.to_string()),
        Some("orders".into())
    );
    assert_eq!(result.topic_id, orders_id);
    assert_eq!(
        partitions(&mut conn, "orders"),
        Err(UNKNOWN_TOPIC_OR_PARTITION)
    );
    assert_eq!(partitions(&mut conn, "pay.eu"), Ok(2));

    let mut driver = running.stop();
    assert!(!driver.dest().meta().topics.contains_key("orders"));
    assert!(driver
        .dest()
        .meta()
        .partitions
        .keys()
        .all(|(t, _)| t != "orders"));
    assert!(driver.log(&PartitionKey::new(ORDERS, 0)).is_none());
    let log_dir = driver.dest().log_dir();
    for p in 0..3 {
        assert!(!log_dir.join(format!("orders-{p}")).exists(), "orders-{p}");
    }
    assert!(log_dir.join("pay.eu-0").is_dir());
    assert!(!store.topic_config_path("orders").exists());
    let groups = store.read_groups().unwrap().value;
    let kept: Vec<&GroupPartition> = groups["billing"].offsets.keys().collect();
    assert_eq!(kept, [&GroupPartition::new("pay.eu", 1)]);
    let events = driver.take_events();
    assert!(
        events.iter().any(|e| e.contains("orders: deleted")),
        "{events:?}"
    );
    driver.close().unwrap();
    assert_no_checkpoint_of(&log_dir, "orders");

    // Reopened, the node has no trace of it; pay.eu is intact.
    let driver = NodeDriver::open(dir.path(), None, options()).unwrap();
    assert!(driver.log(&PartitionKey::new(ORDERS, 0)).is_none());
    assert!(driver.log(&PartitionKey::new(PAY_EU, 1)).is_some());
    driver.close().unwrap();
}

#[test]
fn a_topic_in_no_mirror_grows_and_is_deleted_and_the_mirrored_one_beside_it_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    stopped(dir.path()).close().unwrap();
    let mut dest = super::NodeDest::open(dir.path()).unwrap();
    let local = kmirror_kernel::types::TopicId([7; 16]);
    dest.add_topic("local", local, 1, None).unwrap();
    let driver = NodeDriver::from_dest(dest, None, options()).unwrap();
    let running = Running::start(driver);
    let mut conn = connect(&running.address);

    assert_eq!(
        create_partitions(
            &mut conn,
            vec![grow("local", 2, None), grow("pay.eu", 3, None)],
            false
        )
        .iter()
        .map(|(code, _)| *code)
        .collect::<Vec<_>>(),
        [0, READ_ONLY_TOPIC]
    );
    let pid = init_producer(&mut conn).producer_id.0;
    let request = kafka_protocol::messages::ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(5_000)
        .with_topic_data(vec![
            kafka_protocol::messages::produce_request::TopicProduceData::default()
                .with_name(name("local"))
                .with_partition_data(vec![
                    kafka_protocol::messages::produce_request::PartitionProduceData::default()
                        .with_index(1)
                        .with_records(Some(bytes::Bytes::copy_from_slice(
                            client_batch(2, pid, 0).bytes(),
                        ))),
                ]),
        ]);
    let produced = conn.send("Produce", &request, 9).unwrap();
    assert_eq!(produced.responses[0].partition_responses[0].error_code, 0);
    let deleted = delete_topics(&mut conn, &[(Some("local"), None), (Some("pay.eu"), None)]);
    let codes: Vec<i16> = deleted.responses.iter().map(|r| r.error_code).collect();
    assert_eq!(codes, [0, READ_ONLY_TOPIC]);
    assert_eq!(
        deleted.responses[0].topic_id,
        Uuid::from_bytes(local.0),
        "Kafka answers the id of a topic deleted by name"
    );
    let driver = running.stop();
    assert!(!driver.dest().meta().topics.contains_key("local"));
    assert!(!driver.dest().log_dir().join("local-1").exists());
    driver.close().unwrap();
}

/// Whether the log dir's checkpoint files have no line of `topic`.
fn assert_no_checkpoint_of(log_dir: &Path, topic: &str) {
    let checkpoints = LogDirCheckpoints::open_read_only(log_dir).unwrap();
    assert!(
        checkpoints.partitions().iter().all(|(t, _)| t != topic),
        "{:?}",
        checkpoints.partitions()
    );
}

#[test]
fn open_removes_the_partition_directories_a_crash_left_unnamed() {
    let dir = tempfile::tempdir().unwrap();
    let driver = stopped(dir.path());
    let log_dir = driver.dest().log_dir();
    driver.close().unwrap();
    // As a crash between a deletion's node.properties write and its directories leaves it.
    let ghost = log_dir.join("ghost-0");
    std::fs::create_dir(&ghost).unwrap();
    std::fs::write(ghost.join("00000000000000000000.log"), b"old").unwrap();
    let checkpoints = LogDirCheckpoints::open(&log_dir).unwrap();
    let tp = TopicPartition::new("ghost", 0).unwrap();
    checkpoints.set(CheckpointKind::LogStartOffset, &tp, 7);
    checkpoints.write().unwrap();
    drop(checkpoints);

    let mut driver = NodeDriver::open(dir.path(), None, options()).unwrap();
    assert!(!ghost.exists());
    assert!(log_dir.join("orders-0").is_dir() && log_dir.join("__mirror_state-0").is_dir());
    let events = driver.take_events();
    assert!(
        events.iter().any(|e| e.starts_with("removed ghost-0")),
        "{events:?}"
    );
    driver.close().unwrap();
    assert_no_checkpoint_of(&log_dir, "ghost");
}
