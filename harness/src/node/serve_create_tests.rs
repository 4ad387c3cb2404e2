//! CreateTopics on a served node ([`crate::serve::create_topics`]), over the wire: Kafka's
//! checks with their codes and messages, a created topic written at once, what the node's
//! files hold once it is answered, and a running mirror keeping the names its selection takes.

use std::collections::{BTreeMap, BTreeSet};

use kafka_protocol::messages::create_topics_request::{
    CreatableReplicaAssignment, CreatableTopic, CreatableTopicConfig,
};
use kafka_protocol::messages::{BrokerId, CreateTopicsRequest, CreateTopicsResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use kmirror_kernel::desired::DesiredState;
use kmirror_kernel::log::LogView;
use kmirror_kernel::node::PartitionKey;
use kmirror_kernel::types::TopicId;

use super::fixture::options;
use super::follow::Follow;
use super::serve_tests::{client_batch, connect, init_producer, produce_to, stopped, Running};
use super::NodeDriver;
use crate::serve::configs::POLICY_VIOLATION;
use crate::serve::create_topics::{
    INVALID_CONFIG, INVALID_REPLICATION_FACTOR, INVALID_TOPIC_EXCEPTION, TOPIC_ALREADY_EXISTS,
};
use crate::serve::metadata::UNKNOWN_TOPIC_OR_PARTITION;
use crate::serve::topic_admin::{INVALID_PARTITIONS, INVALID_REPLICA_ASSIGNMENT, INVALID_REQUEST};
use crate::sync::local::MetadataDir;
use crate::wire::topic_selection::TopicSelection;
use crate::wire::Connection;

/// One topic of a CreateTopics: `name` with `partitions` and `replication` (-1: the
/// default) and `configs`.
fn topic(
    name: &str,
    partitions: i32,
    replication: i16,
    configs: &[(&str, &str)],
) -> CreatableTopic {
    CreatableTopic::default()
        .with_name(TopicName(StrBytes::from_string(name.to_owned())))
        .with_num_partitions(partitions)
        .with_replication_factor(replication)
        .with_configs(
            configs
                .iter()
                .map(|(k, v)| {
                    CreatableTopicConfig::default()
                        .with_name(StrBytes::from_string((*k).to_owned()))
                        .with_value(Some(StrBytes::from_string((*v).to_owned())))
                })
                .collect(),
        )
}

/// `name` placed by manual assignment: one broker list per partition, as `(index, brokers)`.
fn assigned(name: &str, assignments: &[(i32, &[i32])]) -> CreatableTopic {
    topic(name, -1, -1, &[]).with_assignments(
        assignments
            .iter()
            .map(|(p, ids)| {
                CreatableReplicaAssignment::default()
                    .with_partition_index(*p)
                    .with_broker_ids(ids.iter().map(|b| BrokerId(*b)).collect())
            })
            .collect(),
    )
}

/// CreateTopics v7.
fn create(
    conn: &mut Connection,
    topics: Vec<CreatableTopic>,
    validate_only: bool,
) -> CreateTopicsResponse {
    let request = CreateTopicsRequest::default()
        .with_topics(topics)
        .with_timeout_ms(5_000)
        .with_validate_only(validate_only);
    conn.send("CreateTopics", &request, 7).unwrap()
}

/// Each topic's error code and message.
fn codes(response: &CreateTopicsResponse) -> Vec<(i16, Option<String>)> {
    response
        .topics
        .iter()
        .map(|t| {
            (
                t.error_code,
                t.error_message.as_ref().map(|m| m.to_string()),
            )
        })
        .collect()
}

/// The partition count Metadata answers for `name`, or its error code.
fn partitions(conn: &mut Connection, name: &str) -> Result<usize, i16> {
    use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
    let request = kafka_protocol::messages::MetadataRequest::default()
        .with_topics(Some(vec![MetadataRequestTopic::default()
            .with_name(Some(TopicName(StrBytes::from_string(name.to_owned()))))]));
    let response = conn.send("Metadata", &request, 12).unwrap();
    let t = &response.topics[0];
    if t.error_code != 0 {
        return Err(t.error_code);
    }
    Ok(t.partitions.len())
}

fn refused(code: i16, message: &str) -> (i16, Option<String>) {
    (code, Some(message.to_owned()))
}

#[test]
fn a_client_creates_topics_with_kafkas_checks_and_writes_to_them_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let driver = stopped(dir.path());
    let broker = driver.dest().meta().broker;
    let running = Running::start(driver);
    let mut conn = connect(&running.address);

    let answer = create(
        &mut conn,
        vec![
            topic("events", 3, -1, &[("retention.ms", "60000")]),
            topic("orders", 1, 1, &[]),
            topic("__consumer_offsets", 1, 1, &[]),
            topic("bad name", 1, 1, &[]),
            topic("pay_eu", 1, 1, &[]),
            topic("x", 1, 3, &[]),
            topic("y", 0, 1, &[]),
            topic("z", 1, 1, &[("nope", "1")]),
            topic("w", 1, 1, &[("mirror.name", "east")]),
            topic("v", 1, 1, &[("retention.ms", "1d")]),
            topic("dup", 1, 1, &[]),
            topic("dup", 2, 1, &[]),
            assigned("gap", &[(0, &[broker]), (2, &[broker])]),
            assigned("twice", &[(0, &[broker, broker])]),
        ],
        false,
    );
    let got = codes(&answer);
    assert_eq!(got[0], (0, None));
    assert_eq!(
        got[1],
        refused(TOPIC_ALREADY_EXISTS, "Topic 'orders' already exists.")
    );
    assert_eq!(
        got[2],
        refused(
            INVALID_REQUEST,
            "Creation of internal topic __consumer_offsets is prohibited."
        )
    );
    assert_eq!(got[3].0, INVALID_TOPIC_EXCEPTION, "{:?}", got[3]);
    assert_eq!(
        got[4],
        refused(
            INVALID_TOPIC_EXCEPTION,
            "Topic 'pay_eu' collides with existing topic: pay.eu"
        )
    );
    assert_eq!(
        got[5],
        refused(
            INVALID_REPLICATION_FACTOR,
            "Unable to replicate the partition 3 time(s): The target replication factor of 3 \
             cannot be reached because only 1 broker(s) are registered."
        )
    );
    assert_eq!(
        got[6],
        refused(
            INVALID_PARTITIONS,
            "Number of partitions was set to an invalid non-positive value."
        )
    );
    assert_eq!(
        got[7],
        refused(INVALID_CONFIG, "Unknown topic config name: nope")
    );
    assert_eq!(got[8].0, INVALID_CONFIG, "{:?}", got[8]);
    assert_eq!(got[9].0, INVALID_CONFIG, "{:?}", got[9]);
    let duplicate = refused(INVALID_REQUEST, "Duplicate topic name.");
    assert_eq!(got[10..12], [duplicate.clone(), duplicate]);
    assert_eq!(
        got[12],
        refused(
            INVALID_REPLICA_ASSIGNMENT,
            "Partitions should be a consecutive 0-based integer sequence"
        )
    );
    assert_eq!(
        got[13],
        refused(
            INVALID_REPLICA_ASSIGNMENT,
            &format!(
                "The manual partition assignment includes the broker {broker} more than once."
            )
        )
    );
    // The created topic's answer: a fresh id, the count, one replica, the overrides; the
    // refused ones -1, as from Kafka.
    let events = &answer.topics[0];
    assert!(!events.topic_id.is_nil());
    assert_eq!((events.num_partitions, events.replication_factor), (3, 1));
    let configs = events.configs.as_ref().unwrap();
    assert_eq!(configs.len(), 1);
    assert_eq!(
        (configs[0].name.as_str(), configs[0].value.as_deref()),
        ("retention.ms", Some("60000"))
    );
    assert_eq!(
        (
            answer.topics[1].num_partitions,
            answer.topics[1].replication_factor
        ),
        (-1, -1)
    );

    // validate_only answers as a creation would and creates nothing.
    let checked = create(&mut conn, vec![topic("later", -1, -1, &[])], true);
    assert_eq!(codes(&checked), [(0, None)]);
    assert_eq!(checked.topics[0].num_partitions, 1, "-1 is the default, 1");
    assert_eq!(
        partitions(&mut conn, "later"),
        Err(UNKNOWN_TOPIC_OR_PARTITION)
    );

    // Created by manual assignment, and then written at once on the same connection.
    assert_eq!(
        codes(&create(
            &mut conn,
            vec![assigned("placed", &[(1, &[broker]), (0, &[broker])])],
            false
        )),
        [(0, None)]
    );
    assert_eq!(partitions(&mut conn, "events"), Ok(3));
    assert_eq!(partitions(&mut conn, "placed"), Ok(2));
    let pid = init_producer(&mut conn).producer_id.0;
    assert_eq!(
        produce_to(&mut conn, "events", 2, &client_batch(3, pid, 0)),
        (0, 0)
    );
    assert_eq!(
        produce_to(&mut conn, "placed", 1, &client_batch(2, -1, 0)),
        (0, 0)
    );

    let mut driver = running.stop();
    let events = driver.take_events();
    assert!(
        events
            .iter()
            .any(|e| e == "events: created with 3 partition(s) (CreateTopics)"),
        "{events:?}"
    );
    let meta = driver.dest().meta().clone();
    let id = TopicId(*answer.topics[0].topic_id.as_bytes());
    assert_eq!(meta.topics["events"].topic_id, id);
    assert_eq!(
        meta.topics["events"].desired("events").unwrap(),
        DesiredState::NotMirrored
    );
    assert!(!meta.topics.contains_key("later"));
    let overrides = MetadataDir::of(dir.path())
        .read_topic_config("events")
        .unwrap()
        .value;
    assert_eq!(
        overrides,
        BTreeMap::from([("retention.ms".to_owned(), "60000".to_owned())])
    );
    driver.close().unwrap();

    // Reopened: the records kept, every partition writable.
    let driver = NodeDriver::open(dir.path(), None, options()).unwrap();
    let key = PartitionKey::new(id, 2);
    assert_eq!(driver.log(&key).unwrap().mem_log().log_end_offset(), 3);
    for p in 0..3 {
        assert!(driver.writable(&PartitionKey::new(id, p)), "events-{p}");
    }
    driver.close().unwrap();
}

#[test]
fn a_running_mirror_keeps_the_names_its_selection_takes() {
    let dir = tempfile::tempdir().unwrap();
    let mut driver = stopped(dir.path());
    driver.follow(
        Follow {
            mirror: kmirror_kernel::types::MirrorName::new("fake-cluster").unwrap(),
            include: TopicSelection::parse("orders,audit.*").unwrap(),
            exclude: None,
            metadata_refresh_ms: 30_000,
        },
        BTreeSet::new(),
    );
    let running = Running::start(driver);
    let mut conn = connect(&running.address);
    let got = codes(&create(
        &mut conn,
        vec![topic("audit.eu", 1, 1, &[]), topic("billing", 1, 1, &[])],
        false,
    ));
    assert_eq!(
        got[0],
        refused(
            POLICY_VIOLATION,
            "audit.eu is in the selection of mirror fake-cluster, which this node runs: the \
             mirror creates it, with the source's topic id, when the source has it"
        )
    );
    assert_eq!(got[1], (0, None));
    assert_eq!(partitions(&mut conn, "billing"), Ok(1));
    running.stop().close().unwrap();
}

/// On a node with `--replicas 3` every partition lives on the node and its two followers:
/// CreateTopics takes a replication factor of -1 or 3 (and answers 3), refuses 2 and 4 with
/// Kafka's code, takes a manual assignment of exactly those replicas; Metadata lists them as
/// the partition's replicas and ISR; a write to a created topic reaches the followers.
#[test]
fn a_node_with_followers_creates_topics_on_all_its_replicas() {
    use super::dest::{NodeDest, NodeMeta};
    use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
    let dir = tempfile::tempdir().unwrap();
    let mut meta = NodeMeta::new(None, 2);
    meta.replicas = 3;
    let dest = NodeDest::create(&dir.path().join("n"), meta).unwrap();
    let driver = NodeDriver::from_dest(dest, None, options()).unwrap();
    let running = Running::start(driver);
    let mut conn = connect(&running.address);

    let response = create(
        &mut conn,
        vec![
            topic("a", 2, -1, &[]),
            topic("b", 1, 3, &[]),
            topic("c", 1, 2, &[]),
            topic("d", 1, 4, &[]),
            assigned("e", &[(0, &[0, 1, 2])]),
            assigned("f", &[(0, &[0])]),
            assigned("g", &[(0, &[2, 0, 3])]),
        ],
        false,
    );
    assert_eq!(
        codes(&response),
        vec![
            (0, None),
            (0, None),
            refused(
                INVALID_REPLICATION_FACTOR,
                "Unable to replicate the partition 2 time(s): this node keeps every partition \
                 on its 3 replicas (--replicas); ask 3 or -1."
            ),
            refused(
                INVALID_REPLICATION_FACTOR,
                "Unable to replicate the partition 4 time(s): The target replication factor of \
                 4 cannot be reached because only 3 broker(s) are registered."
            ),
            (0, None),
            refused(
                INVALID_REPLICA_ASSIGNMENT,
                "The manual partition assignment lists 1 of this node's 3 replicas [0, 1, 2]: \
                 it keeps every partition on all of them (--replicas)."
            ),
            refused(
                INVALID_REPLICA_ASSIGNMENT,
                "The manual partition assignment includes broker 3, but no such broker is \
                 registered."
            ),
        ]
    );
    assert_eq!(response.topics[0].replication_factor, 3);

    let request = kafka_protocol::messages::MetadataRequest::default()
        .with_topics(Some(vec![MetadataRequestTopic::default()
            .with_name(Some(TopicName(StrBytes::from_static_str("a"))))]));
    let metadata = conn.send("Metadata", &request, 12).unwrap();
    for p in &metadata.topics[0].partitions {
        let ids = |nodes: &[BrokerId]| nodes.iter().map(|b| b.0).collect::<Vec<i32>>();
        assert_eq!(ids(&p.replica_nodes), vec![0, 1, 2]);
        assert_eq!(ids(&p.isr_nodes), vec![0, 1, 2]);
        assert_eq!(p.leader_id.0, 0);
    }

    assert_eq!(
        produce_to(&mut conn, "a", 1, &client_batch(3, -1, 0)),
        (0, 0)
    );
    let driver = running.stop();
    let key = driver.key_of("a", 1).unwrap();
    let leader = driver.log(&key).unwrap();
    assert_eq!(leader.high_watermark(), 3);
    let followers = driver.followers(&key);
    assert_eq!(followers.len(), 2);
    for f in followers {
        assert_eq!(
            f.log.try_read(0, 3).unwrap()[0].bytes(),
            leader.try_read(0, 3).unwrap()[0].bytes(),
            "follower {}",
            f.id
        );
    }
    driver.close().unwrap();
}
