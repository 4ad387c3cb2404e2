//! The node served on Kafka's wire ([`crate::serve`]), asked by this crate's own Kafka client
//! as a consumer and by raw Produce requests as a producer: the mirrored bytes come back as
//! the source has them, the produce gate is the kernel's, and a stop reaches a connected
//! producer without a reconnect.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{InitProducerIdRequest, ProduceRequest, ProducerId, TopicName};
use kafka_protocol::protocol::StrBytes;
use kmirror_kernel::batch::BatchHeader;
use kmirror_kernel::log::{LogView, PartitionLog};
use kmirror_kernel::node::PartitionKey;

use super::fixture::{added, fake, ORDERS};
use super::*;
use crate::clock::Clock;
use crate::record_batch::RawBatch;
use crate::serve::produce::{FIRST_ID, READ_ONLY_TOPIC};
use crate::serve::ServeOptions;
use crate::wire::client::{FetchParams, KafkaClient, READ_UNCOMMITTED};
use crate::wire::Connection;

/// The wall clock (the served node answers real sockets).
pub(super) struct WallClock(pub(super) Instant);

impl Clock for WallClock {
    fn now_ms(&mut self) -> i64 {
        i64::try_from(self.0.elapsed().as_millis()).unwrap_or(i64::MAX)
    }
    fn sleep_until(&mut self, deadline_ms: i64) {
        let now = self.now_ms();
        if deadline_ms > now {
            std::thread::sleep(Duration::from_millis((deadline_ms - now).unsigned_abs()));
        }
    }
}

/// A node running on its own thread, serving clients, until [`Running::stop`].
pub(super) struct Running {
    pub(super) address: String,
    flag: Arc<AtomicBool>,
    thread: JoinHandle<NodeDriver>,
}

impl Running {
    pub(super) fn start(driver: NodeDriver) -> Running {
        Running::start_with(driver, &ServeOptions::new("127.0.0.1:0"))
    }

    fn start_with(mut driver: NodeDriver, options: &ServeOptions) -> Running {
        let address = driver.serve_clients(options).unwrap().to_string();
        driver.serve_control().unwrap();
        let flag = Arc::new(AtomicBool::new(false));
        driver.interrupt_on(flag.clone());
        let thread = std::thread::spawn(move || {
            let mut clock = WallClock(Instant::now());
            driver
                .run(
                    &mut clock,
                    NodeUntil::Forever { poll_ms: 5 },
                    &mut |_, _| {},
                )
                .unwrap();
            driver
        });
        Running {
            address,
            flag,
            thread,
        }
    }

    pub(super) fn stop(self) -> NodeDriver {
        self.flag.store(true, Ordering::Relaxed);
        self.thread.join().unwrap()
    }
}

/// The fake's topics mirrored into `root` until caught up.
pub(super) fn mirrored(root: &Path) -> (crate::wire::fake_broker::FakeCluster, NodeDriver) {
    let fake = fake();
    let mut driver = added(&fake, root);
    let mut clock = crate::clock::ManualClock::default();
    driver
        .run(&mut clock, NodeUntil::CaughtUp, &mut |_, _| {})
        .unwrap();
    (fake, driver)
}

/// A raw connection to the served node (a 30 s request timeout: long polls are asked).
pub(super) fn connect(address: &str) -> Connection {
    Connection::connect(address, Duration::from_secs(2), Duration::from_secs(30)).unwrap()
}

/// InitProducerId for an idempotent producer (no transactional id).
pub(super) fn init_producer(
    conn: &mut Connection,
) -> kafka_protocol::messages::InitProducerIdResponse {
    let request = InitProducerIdRequest::default()
        .with_transactional_id(None)
        .with_producer_id(ProducerId(-1))
        .with_producer_epoch(-1)
        .with_transaction_timeout_ms(60_000);
    conn.send("InitProducerId", &request, 4).unwrap()
}

fn client(address: &str) -> KafkaClient {
    KafkaClient::new(address, Duration::from_secs(2), Duration::from_secs(5))
}

/// A read-uncommitted Fetch of `orders-<partition>` from offset 0 (1 MiB, no wait).
fn fetch_from_start(c: &mut KafkaClient, partition: i32) -> crate::wire::PartitionFetch {
    c.fetch(&FetchParams {
        topic_id: ORDERS,
        partition,
        fetch_offset: 0,
        last_fetched_epoch: None,
        isolation_level: READ_UNCOMMITTED,
        max_wait_ms: 0,
        max_bytes: 1 << 20,
    })
    .unwrap()
}

/// A batch as a client writes it: offsets from 0, no leader epoch, `records` records.
pub(super) fn client_batch(records: i64, producer_id: i64, base_sequence: i32) -> RawBatch {
    let header = BatchHeader {
        base_offset: 0,
        last_offset: records - 1,
        partition_leader_epoch: -1,
        producer_id,
        producer_epoch: if producer_id >= 0 { 0 } else { -1 },
        base_sequence: if producer_id >= 0 { base_sequence } else { -1 },
        is_transactional: false,
        control: None,
    };
    RawBatch::synthesize(&header, 1_700_000_000_000).unwrap()
}

/// Produces `batch` to `orders-<partition>` on `conn`: the partition's error code and base
/// offset.
pub(super) fn produce(conn: &mut Connection, partition: i32, batch: &RawBatch) -> (i16, i64) {
    produce_to(conn, "orders", partition, batch)
}

/// Produces `batch` to `<topic>-<partition>` on `conn`: the partition's error code and base
/// offset.
pub(super) fn produce_to(
    conn: &mut Connection,
    topic: &str,
    partition: i32,
    batch: &RawBatch,
) -> (i16, i64) {
    let request = ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(5_000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(TopicName(StrBytes::from_string(topic.to_owned())))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(partition)
                .with_records(Some(Bytes::copy_from_slice(batch.bytes())))])]);
    let response = conn.send("Produce", &request, 9).unwrap();
    let p = &response.responses[0].partition_responses[0];
    (p.error_code, p.base_offset)
}

/// DeleteRecords of `orders-<partition>` before `offset`: the error code and low watermark.
pub(super) fn delete_records(conn: &mut Connection, partition: i32, offset: i64) -> (i16, i64) {
    use kafka_protocol::messages::delete_records_request::{
        DeleteRecordsPartition, DeleteRecordsTopic,
    };
    use kafka_protocol::messages::DeleteRecordsRequest;
    let request = DeleteRecordsRequest::default().with_topics(vec![DeleteRecordsTopic::default()
        .with_name(TopicName(StrBytes::from_static_str("orders")))
        .with_partitions(vec![DeleteRecordsPartition::default()
            .with_partition_index(partition)
            .with_offset(offset)])]);
    let response = conn.send("DeleteRecords", &request, 2).unwrap();
    let p = &response.topics[0].partitions[0];
    (p.error_code, p.low_watermark)
}

/// The error codes of DeleteRecords (orders-0 before offset 1) and CreatePartitions of orders
/// to 6 partitions, validated only (nothing changes either way).
fn admin_codes(conn: &mut Connection) -> [i16; 2] {
    use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
    use kafka_protocol::messages::CreatePartitionsRequest;
    let (records, _) = delete_records(conn, 0, 1);
    let partitions = conn
        .send(
            "CreatePartitions",
            &CreatePartitionsRequest::default()
                .with_validate_only(true)
                .with_topics(vec![CreatePartitionsTopic::default()
                    .with_name(TopicName(StrBytes::from_static_str("orders")))
                    .with_count(6)
                    .with_assignments(None)]),
            3,
        )
        .unwrap();
    [records, partitions.results[0].error_code]
}

/// The error code of DeleteTopics of orders (v5, by name).
pub(super) fn delete_orders(conn: &mut Connection) -> i16 {
    let request = kafka_protocol::messages::DeleteTopicsRequest::default()
        .with_topic_names(vec![TopicName(StrBytes::from_static_str("orders"))]);
    let response = conn.send("DeleteTopics", &request, 5).unwrap();
    response.responses[0].error_code
}

#[test]
fn a_serving_node_answers_a_consumer_with_the_mirrored_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let (fake, driver) = mirrored(dir.path());
    let running = Running::start(driver);
    let mut c = client(&running.address);

    let meta = c.metadata("orders").unwrap();
    assert_eq!(meta.topic_id, ORDERS);
    assert_eq!(meta.partitions.len(), 3);
    for p in 0..3 {
        let source = fake.state().topics[0].partitions[p as usize].clone();
        let expected: Vec<u8> = source
            .batches
            .iter()
            .flat_map(|b| b.bytes().to_vec())
            .collect();
        let end = source.batches.last().unwrap().header().last_offset + 1;
        let latest = c.list_offset("orders", p, -1, READ_UNCOMMITTED).unwrap();
        assert_eq!(latest.0, end, "orders-{p} latest offset");
        let fetched = fetch_from_start(&mut c, p);
        assert_eq!(fetched.error_code, 0);
        assert_eq!(fetched.high_watermark, end);
        assert_eq!(fetched.records.to_vec(), expected, "orders-{p} bytes");
    }
    // A Fetch for no partition (a consumer closing its fetch session) is answered at once,
    // not held for its max wait.
    let mut conn = connect(&running.address);
    let asked = Instant::now();
    let empty = conn
        .send(
            "Fetch",
            &kafka_protocol::messages::FetchRequest::default()
                .with_replica_id(kafka_protocol::messages::BrokerId(-1))
                .with_max_wait_ms(20_000)
                .with_min_bytes(1)
                .with_max_bytes(1 << 20),
            12,
        )
        .unwrap();
    assert_eq!(empty.error_code, 0);
    assert!(
        asked.elapsed() < Duration::from_secs(10),
        "{:?}",
        asked.elapsed()
    );
    // A fetch beyond the log end is OFFSET_OUT_OF_RANGE, as from Kafka.
    let beyond = c
        .fetch(&FetchParams {
            topic_id: ORDERS,
            partition: 0,
            fetch_offset: 1_000,
            last_fetched_epoch: None,
            isolation_level: READ_UNCOMMITTED,
            max_wait_ms: 0,
            max_bytes: 1 << 20,
        })
        .unwrap();
    assert_eq!(beyond.error_code, crate::serve::fetch::OFFSET_OUT_OF_RANGE);
    running.stop().close().unwrap();
}

#[test]
fn a_producer_is_refused_while_mirroring_and_accepted_after_a_stop_on_the_same_connection() {
    let dir = tempfile::tempdir().unwrap();
    let (_fake, driver) = mirrored(dir.path());
    let running = Running::start(driver);
    let mut conn = connect(&running.address);

    let init = init_producer(&mut conn);
    assert_eq!(init.error_code, 0);
    let pid = init.producer_id.0;
    assert!(
        pid >= FIRST_ID,
        "producer id {pid} is in the node's own range"
    );

    let refused = produce(&mut conn, 0, &client_batch(3, pid, 0));
    assert_eq!(refused, (READ_ONLY_TOPIC, -1), "MIRRORING refuses writes");
    assert_eq!(
        admin_codes(&mut conn),
        [READ_ONLY_TOPIC; 2],
        "a mirror's records and partitions are the source's"
    );
    assert_eq!(
        delete_orders(&mut conn),
        READ_ONLY_TOPIC,
        "a mirror's topic is the source's"
    );

    // `kmirror stop --topics orders` while the node runs: through the control channel.
    let request = ControlRequest::new(TopicsVerb::Stop, "orders", None);
    let control = ControlClient::submit(dir.path(), &request).unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let RequestStatus::Answered(_) = control.status().unwrap() {
            break;
        }
        assert!(Instant::now() < deadline, "the stop was never answered");
        std::thread::sleep(Duration::from_millis(10));
    }

    // The same connection, the same producer: accepted from the next request on.
    let (code, base) = produce(&mut conn, 0, &client_batch(3, pid, 0));
    assert_eq!(code, 0, "a STOPPED partition accepts writes");
    assert_eq!(
        admin_codes(&mut conn),
        [0, 0],
        "not a mirror any more: records are deleted, partitions may be added"
    );
    let driver = running.stop();
    let log = driver
        .log(&PartitionKey::new(ORDERS, 0))
        .unwrap()
        .mem_log()
        .clone();
    // The batch landed after the MIRROR_PID_RESET marker, at the new leader epoch.
    let written = log.read(base, base + 3);
    assert_eq!(written.len(), 1);
    assert_eq!(written[0].producer_id, pid);
    assert_eq!(written[0].last_offset, base + 2);
    let marker = log.read(base - 1, base);
    assert_eq!(
        marker[0].control,
        Some(kmirror_kernel::batch::ControlType::MirrorPidReset)
    );
    assert_eq!(log.log_end_offset(), base + 3);
    driver.close().unwrap();

    // The producer-id block is kept: a restarted node hands out a higher id.
    let driver = NodeDriver::open(dir.path(), None, super::fixture::options()).unwrap();
    let running = Running::start(driver);
    let mut conn = connect(&running.address);
    let again = init_producer(&mut conn);
    assert!(
        again.producer_id.0 > pid,
        "{} after {pid}",
        again.producer_id.0
    );
    running.stop().close().unwrap();
}

/// The fake's topics mirrored into `root`, then STOPPED (writable), as `kmirror stop` leaves
/// them: no source (pay.eu would otherwise keep fetching).
pub(super) fn stopped(root: &Path) -> NodeDriver {
    let (_fake, mut driver) = mirrored(root);
    driver.set_source(None);
    driver
        .request_topics(TopicsVerb::Stop, "orders", None, 0)
        .unwrap();
    let mut clock = crate::clock::ManualClock::default();
    driver
        .run(&mut clock, NodeUntil::Settled, &mut |_, _| {})
        .unwrap();
    driver
}

/// The log end offset of `orders-<partition>`.
fn log_end(driver: &NodeDriver, partition: i32) -> i64 {
    driver
        .log(&PartitionKey::new(ORDERS, partition))
        .unwrap()
        .mem_log()
        .log_end_offset()
}

#[test]
fn a_fetch_with_nothing_new_waits_and_is_answered_when_a_producer_writes() {
    let dir = tempfile::tempdir().unwrap();
    let driver = stopped(dir.path());
    let end = log_end(&driver, 1);
    let running = Running::start(driver);

    // A consumer at the log end, willing to wait 20 s for one byte.
    let address = running.address.clone();
    let waiting = std::thread::spawn(move || {
        let started = Instant::now();
        let fetched = client(&address)
            .fetch(&FetchParams {
                topic_id: ORDERS,
                partition: 1,
                fetch_offset: end,
                last_fetched_epoch: None,
                isolation_level: READ_UNCOMMITTED,
                max_wait_ms: 20_000,
                max_bytes: 1 << 20,
            })
            .unwrap();
        (fetched, started.elapsed())
    });
    std::thread::sleep(Duration::from_millis(200));
    let mut conn = connect(&running.address);
    assert_eq!(produce(&mut conn, 1, &client_batch(2, -1, 0)), (0, end));
    let (fetched, waited) = waiting.join().unwrap();
    assert_eq!(fetched.error_code, 0);
    let batches = RawBatch::parse_many(&fetched.records).unwrap();
    assert_eq!(batches.len(), 1, "the produced batch, and only it");
    assert_eq!(batches[0].header().base_offset, end);
    assert!(
        waited < Duration::from_secs(15),
        "answered when the data came, not at the end of its wait ({waited:?})"
    );
    running.stop().close().unwrap();
}

/// DeleteRecords on a STOPPED partition: above the high watermark or negative (but -1) is
/// OFFSET_OUT_OF_RANGE; otherwise the log start moves there (-1: the high watermark), a fetch
/// below it is OFFSET_OUT_OF_RANGE, ListOffsets earliest answers it, and a restart keeps it.
#[test]
fn delete_records_on_a_stopped_partition_moves_its_log_start_durably() {
    use crate::serve::fetch::OFFSET_OUT_OF_RANGE;
    let dir = tempfile::tempdir().unwrap();
    let driver = stopped(dir.path());
    let key = PartitionKey::new(ORDERS, 0);
    let hw = driver.log(&key).unwrap().mem_log().high_watermark();
    assert!(hw > 3, "the test wants records: {hw}");
    let running = Running::start(driver);
    let mut conn = connect(&running.address);
    let mut c = client(&running.address);

    assert_eq!(
        delete_records(&mut conn, 0, hw + 1),
        (OFFSET_OUT_OF_RANGE, -1)
    );
    assert_eq!(delete_records(&mut conn, 0, -2), (OFFSET_OUT_OF_RANGE, -1));
    assert_eq!(delete_records(&mut conn, 0, 2), (0, 2));
    assert_eq!(delete_records(&mut conn, 0, 1), (0, 2), "never back");
    let earliest = c.list_offset("orders", 0, -2, READ_UNCOMMITTED).unwrap();
    assert_eq!(earliest.0, 2);
    let at = |c: &mut KafkaClient, fetch_offset| {
        c.fetch(&FetchParams {
            topic_id: ORDERS,
            partition: 0,
            fetch_offset,
            last_fetched_epoch: None,
            isolation_level: READ_UNCOMMITTED,
            max_wait_ms: 0,
            max_bytes: 1 << 20,
        })
        .unwrap()
    };
    assert_eq!(at(&mut c, 1).error_code, OFFSET_OUT_OF_RANGE);
    let from_start = at(&mut c, 2);
    assert_eq!((from_start.error_code, from_start.log_start_offset), (0, 2));
    assert_eq!(
        delete_records(&mut conn, 0, -1),
        (0, hw),
        "-1: the high watermark"
    );
    running.stop().close().unwrap();

    let driver = NodeDriver::open(dir.path(), None, super::fixture::options()).unwrap();
    assert_eq!(driver.log(&key).unwrap().mem_log().log_start_offset(), hw);
    driver.close().unwrap();
}

/// A Fetch v13 of `orders` in session `id` at `epoch`: `partitions` (index, fetch offset)
/// added or updated, `forget` dropped, waiting up to `max_wait_ms` for a byte.
fn session_fetch(
    id: i32,
    epoch: i32,
    partitions: &[(i32, i64)],
    forget: &[i32],
    max_wait_ms: i32,
) -> kafka_protocol::messages::FetchRequest {
    let orders = uuid::Uuid::from_bytes(ORDERS.0);
    crate::serve::fetch_session::tests::request_of(orders, id, epoch, partitions, forget)
        .with_replica_id(kafka_protocol::messages::BrokerId(-1))
        .with_max_wait_ms(max_wait_ms)
        .with_min_bytes(1)
        .with_max_bytes(1 << 20)
}

/// KIP-227 over the wire: a full Fetch opens a session; an incremental one with nothing new
/// lists no partition, waits for data on the session's partitions (not a forgotten one), and
/// is answered with only the partition written to; the session outlives its connection; a
/// wrong epoch, an unknown id and a closed session are refused.
#[test]
fn an_incremental_fetch_session_answers_only_what_changed() {
    use crate::serve::fetch_session::tests::answered;
    use crate::serve::fetch_session::{FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH};
    let dir = tempfile::tempdir().unwrap();
    let driver = stopped(dir.path());
    let ends: Vec<i64> = (0..3).map(|p| log_end(&driver, p)).collect();
    let running = Running::start(driver);
    let mut conn = connect(&running.address);

    let at_ends: Vec<(i32, i64)> = (0..3).map(|p| (p, ends[p as usize])).collect();
    let full = conn
        .send("Fetch", &session_fetch(0, 0, &at_ends, &[], 0), 13)
        .unwrap();
    assert_eq!(full.error_code, 0);
    assert_eq!(answered(&full), [0, 1, 2], "a full Fetch answers all");
    let id = full.session_id;
    assert_ne!(id, 0, "a session was opened");

    let idle = conn
        .send("Fetch", &session_fetch(id, 1, &[], &[], 0), 13)
        .unwrap();
    assert_eq!((idle.error_code, idle.session_id), (0, id));
    assert!(answered(&idle).is_empty(), "nothing new: no partition");
    let replayed = conn
        .send("Fetch", &session_fetch(id, 1, &[], &[], 0), 13)
        .unwrap();
    assert_eq!(replayed.error_code, INVALID_FETCH_SESSION_EPOCH);
    let unknown = conn
        .send("Fetch", &session_fetch(id ^ 1, 2, &[], &[], 0), 13)
        .unwrap();
    assert_eq!(unknown.error_code, FETCH_SESSION_ID_NOT_FOUND);

    // On a new connection, forgetting orders-2: a write to it does not answer the wait, a
    // write to orders-1 does, with orders-1 alone.
    let address = running.address.clone();
    let waiting = std::thread::spawn(move || {
        let started = Instant::now();
        let answer = connect(&address)
            .send("Fetch", &session_fetch(id, 2, &[], &[2], 20_000), 13)
            .unwrap();
        (answer, started.elapsed())
    });
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(produce(&mut conn, 2, &client_batch(2, -1, 0)), (0, ends[2]));
    std::thread::sleep(Duration::from_millis(200));
    assert!(
        !waiting.is_finished(),
        "a forgotten partition's data does not answer"
    );
    assert_eq!(produce(&mut conn, 1, &client_batch(2, -1, 0)), (0, ends[1]));
    let (woken, waited) = waiting.join().unwrap();
    assert_eq!((woken.error_code, woken.session_id), (0, id));
    assert_eq!(answered(&woken), [1], "only the partition written to");
    let records = woken.responses[0].partitions[0].records.clone().unwrap();
    let batches = RawBatch::parse_many(&records).unwrap();
    assert_eq!(batches[0].header().base_offset, ends[1]);
    assert!(waited < Duration::from_secs(15), "{waited:?}");

    let moved_on = conn
        .send(
            "Fetch",
            &session_fetch(id, 3, &[(1, ends[1] + 2)], &[], 0),
            13,
        )
        .unwrap();
    assert!(answered(&moved_on).is_empty(), "caught up again");
    let closed = conn
        .send("Fetch", &session_fetch(id, -1, &[], &[], 0), 13)
        .unwrap();
    assert_eq!((closed.error_code, closed.session_id), (0, 0));
    let after = conn
        .send("Fetch", &session_fetch(id, 4, &[], &[], 0), 13)
        .unwrap();
    assert_eq!(after.error_code, FETCH_SESSION_ID_NOT_FOUND);
    running.stop().close().unwrap();
}

/// A producer whose id, epoch and sequence equal a mirrored producer's first batch is a new
/// producer after the failover: its batch is written after the `MIRROR_PID_RESET` marker, not
/// answered as a retry of the mirrored batch (the collision that drops a failed-over
/// cluster's first writes when the destination keeps the source's producer state).
#[test]
fn a_producer_with_a_mirrored_producers_id_is_not_taken_for_it_after_a_failover() {
    use crate::wire::fake_broker::{FakeCluster, FakePartition, FakeTopic};
    let mirrored_pid = 7;
    let batches = (0..3)
        .map(|b| {
            RawBatch::synthesize(
                &BatchHeader {
                    base_offset: 2 * b,
                    last_offset: 2 * b + 1,
                    partition_leader_epoch: 5,
                    producer_id: mirrored_pid,
                    producer_epoch: 0,
                    base_sequence: i32::try_from(2 * b).unwrap(),
                    is_transactional: false,
                    control: None,
                },
                1_000,
            )
            .unwrap()
        })
        .collect();
    let fake = FakeCluster::start(
        1,
        vec![FakeTopic {
            name: "orders".into(),
            id: ORDERS,
            partitions: vec![FakePartition {
                batches,
                ..FakePartition::with_batches(1, 5, 0)
            }],
        }],
    );
    let dir = tempfile::tempdir().unwrap();
    let dest = NodeDest::create(dir.path(), NodeMeta::new(Some(fake.address(1)), 4)).unwrap();
    let mut driver = NodeDriver::from_dest(
        dest,
        Some(super::fixture::source(&fake, &["orders"])),
        super::fixture::options(),
    )
    .unwrap();
    let added = driver
        .add_topics(&super::fixture::east(), &[("orders".into(), ORDERS, 1)], 0)
        .unwrap();
    assert!(added.values().all(Result::is_ok));
    let mut clock = crate::clock::ManualClock::default();
    driver
        .run(&mut clock, NodeUntil::CaughtUp, &mut |_, _| {})
        .unwrap();
    super::fixture::fail_over_orders(&mut driver, &mut clock);
    let key = PartitionKey::new(ORDERS, 0);
    let end = driver.log(&key).unwrap().mem_log().log_end_offset();
    assert_eq!(
        end, 7,
        "six mirrored records and the MIRROR_PID_RESET marker"
    );
    let running = Running::start(driver);
    let mut conn = connect(&running.address);
    assert_eq!(
        produce(&mut conn, 0, &client_batch(2, mirrored_pid, 0)),
        (0, end),
        "written after the marker, not answered with the mirrored batch at offset 0"
    );
    running.stop().close().unwrap();
}

/// Writes one raw frame (a 4-byte size, then `body`) and reads the answer's frame, if any.
fn raw_exchange(address: &str, size: i32, body: &[u8]) -> std::io::Result<Vec<u8>> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(address)?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    s.write_all(&size.to_be_bytes())?;
    s.write_all(body)?;
    let mut len = [0u8; 4];
    s.read_exact(&mut len)?;
    let mut answer = vec![0u8; usize::try_from(i32::from_be_bytes(len)).unwrap_or(0)];
    s.read_exact(&mut answer)?;
    Ok(answer)
}

#[test]
fn bad_frames_close_the_connection_and_an_unknown_api_versions_version_gets_the_list() {
    let dir = tempfile::tempdir().unwrap();
    let (_fake, driver) = mirrored(dir.path());
    let running = Running::start(driver);

    // ApiVersions v99: answered in v0 with UNSUPPORTED_VERSION (35) and the list, as Kafka
    // does, so the client can retry at a version both know.
    let mut request = Vec::new();
    request.extend_from_slice(&18i16.to_be_bytes()); // ApiVersions
    request.extend_from_slice(&99i16.to_be_bytes());
    request.extend_from_slice(&7i32.to_be_bytes()); // correlation id
    request.extend_from_slice(&(-1i16).to_be_bytes()); // null client id
    let answer = raw_exchange(&running.address, request.len() as i32, &request).unwrap();
    assert_eq!(&answer[0..4], &7i32.to_be_bytes(), "the correlation id");
    assert_eq!(&answer[4..6], &35i16.to_be_bytes(), "UNSUPPORTED_VERSION");
    assert!(answer.len() > 6 + 4 + 6 * 5, "the versions are listed");

    // A frame larger than --max-request-bytes (100 MiB) and a negative size: closed, no
    // answer, and the node goes on serving.
    assert!(raw_exchange(&running.address, 200 << 20, b"").is_err());
    assert!(raw_exchange(&running.address, -5, b"").is_err());
    // An unknown API key: closed.
    let unknown = [0x7f, 0x00, 0, 0, 0, 0, 0, 1, 0xff, 0xff];
    assert!(raw_exchange(&running.address, unknown.len() as i32, &unknown).is_err());
    let meta = client(&running.address).metadata("orders").unwrap();
    assert_eq!(meta.partitions.len(), 3, "still serving");
    running.stop().close().unwrap();
}

#[test]
fn a_tls_listener_serves_a_client_that_trusts_its_certificate_and_refuses_plaintext() {
    let dir = tempfile::tempdir().unwrap();
    let (fake, driver) = mirrored(dir.path());
    // A CA and a certificate for localhost, the key beside it in one PEM keystore.
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = rcgen::CertificateParams::new(vec!["localhost".to_owned()])
        .unwrap()
        .signed_by(&key, &ca_cert, &ca_key)
        .unwrap();
    let keys = tempfile::tempdir().unwrap();
    let keystore = keys.path().join("keystore.pem");
    std::fs::write(&keystore, format!("{}{}", cert.pem(), key.serialize_pem())).unwrap();
    let listener_config = keys.path().join("listener.properties");
    std::fs::write(
        &listener_config,
        format!(
            "security.protocol=SSL\nssl.keystore.type=PEM\nssl.keystore.location={}\n",
            keystore.display()
        ),
    )
    .unwrap();
    let mut options = ServeOptions::new("127.0.0.1:0");
    options.security = crate::serve::security::from_file(&listener_config).unwrap();
    assert_eq!(options.security.protocol(), "SSL");
    let running = Running::start_with(driver, &options);
    let port = running.address.rsplit(':').next().unwrap().to_owned();

    let ca_file = keys.path().join("ca.pem");
    std::fs::write(&ca_file, ca_cert.pem()).unwrap();
    let security = crate::wire::SecurityConfig::parse(
        &format!(
            "security.protocol=SSL\nssl.truststore.type=PEM\nssl.truststore.location={}\n",
            ca_file.display()
        ),
        "client.properties",
    )
    .unwrap();
    let mut tls = client(&format!("localhost:{port}")).with_security(Arc::new(security));
    let meta = tls.metadata("orders").unwrap();
    assert_eq!(meta.partitions.len(), 3, "served over TLS");
    // Records over TLS are read from the segment file (not sent with sendfile): the same bytes.
    let expected: Vec<u8> = fake.state().topics[0].partitions[0]
        .batches
        .iter()
        .flat_map(|b| b.bytes().to_vec())
        .collect();
    let fetched = fetch_from_start(&mut tls, 0);
    assert_eq!(fetched.records.to_vec(), expected, "orders-0 over TLS");
    assert!(
        client(&running.address).metadata("orders").is_err(),
        "a PLAINTEXT client is not served by a TLS listener"
    );
    running.stop().close().unwrap();

    // A listener config asking for what is not served is refused, saying so.
    std::fs::write(
        &listener_config,
        "security.protocol=SASL_PLAINTEXT\nsasl.enabled.mechanisms=PLAIN,GSSAPI\n",
    )
    .unwrap();
    let e = crate::serve::security::from_file(&listener_config).unwrap_err();
    assert!(e.to_string().contains("GSSAPI is not served"), "{e}");
}

#[test]
fn a_sasl_listener_serves_its_users_with_plain_and_scram_and_closes_on_anyone_else() {
    let dir = tempfile::tempdir().unwrap();
    let (_fake, driver) = mirrored(dir.path());
    let conf = tempfile::tempdir().unwrap();
    let listener_config = conf.path().join("listener.properties");
    std::fs::write(
        &listener_config,
        "security.protocol=SASL_PLAINTEXT\nsasl.enabled.mechanisms=PLAIN,SCRAM-SHA-512\n\
         sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required \
         user_alice=\"alice-secret\" user_bob=\"bob-secret\";\n",
    )
    .unwrap();
    let mut options = ServeOptions::new("127.0.0.1:0");
    options.security = crate::serve::security::from_file(&listener_config).unwrap();
    assert_eq!(options.security.protocol(), "SASL_PLAINTEXT");
    let running = Running::start_with(driver, &options);
    let login_with = |mechanism: &str, user: &str, password: &str| {
        let module = if mechanism == "PLAIN" {
            "org.apache.kafka.common.security.plain.PlainLoginModule"
        } else {
            "org.apache.kafka.common.security.scram.ScramLoginModule"
        };
        let config = format!(
            "security.protocol=SASL_PLAINTEXT\nsasl.mechanism={mechanism}\n\
             sasl.jaas.config={module} required username=\"{user}\" password=\"{password}\";\n"
        );
        let security = crate::wire::SecurityConfig::parse(&config, "client.properties").unwrap();
        client(&running.address)
            .with_security(Arc::new(security))
            .metadata("orders")
    };
    let login = |user: &str, password: &str| login_with("PLAIN", user, password);
    assert_eq!(login("alice", "alice-secret").unwrap().partitions.len(), 3);
    // SCRAM: kmirror's client checks the node's signature, the node the client's proof.
    let scram = login_with("SCRAM-SHA-512", "bob", "bob-secret");
    assert_eq!(scram.unwrap().partitions.len(), 3, "SCRAM-SHA-512");
    assert!(login_with("SCRAM-SHA-512", "bob", "wrong").is_err());
    assert!(
        login_with("SCRAM-SHA-256", "bob", "bob-secret").is_err(),
        "a mechanism the listener does not enable"
    );
    assert_eq!(
        login("bob", "bob-secret").unwrap().partitions.len(),
        3,
        "a second user"
    );
    let refused = login("alice", "wrong").unwrap_err().to_string();
    assert!(
        refused.contains("58") || refused.contains("uthentication"),
        "{refused}"
    );
    assert!(login("mallory", "alice-secret").is_err());
    assert!(
        client(&running.address).metadata("orders").is_err(),
        "no request is served before a login"
    );
    let mut raw = connect(&running.address);
    let lookup = raw.send_raw("ReadMirrorStates", 0, |id| {
        let request = kmirror_kernel::proto_wire::state_rpcs::ReadMirrorStatesRequest {
            mirror_name: "east".into(),
            topics: Vec::new(),
        };
        crate::serve::lme::encode_request(id, "kmirror", &request)
    });
    assert!(lookup.is_err(), "nor the LME lookup: {lookup:?}");
    running.stop().close().unwrap();
}

/// A node that mirrors this one syncs its metadata from it: the topic's config overrides
/// (DescribeConfigs), no ACLs (DescribeAcls is SECURITY_DISABLED, as from a broker without an
/// authorizer) and the groups' committed offsets (the group coordinator's ListGroups,
/// DescribeGroups and OffsetFetch).
#[test]
fn a_serving_node_is_a_metadata_source_for_a_node_that_mirrors_it() {
    use crate::sync::local::MetadataDir;
    use crate::sync::{GroupRecord, MetadataSource};
    use crate::wire::{KafkaMetadataSource, MetadataSourceOptions};
    use kmirror_kernel::sync::group_offsets::TopicPartition;
    let dir = tempfile::tempdir().unwrap();
    let (_fake, driver) = mirrored(dir.path());
    let metadata = MetadataDir::of(dir.path());
    metadata
        .write_topic_config(
            "orders",
            &[("retention.ms".to_owned(), "86400000".to_owned())]
                .into_iter()
                .collect(),
        )
        .unwrap();
    let committed = GroupRecord {
        members: Vec::new(),
        offsets: [(TopicPartition::new("orders", 1), 5)]
            .into_iter()
            .collect(),
    };
    metadata.write_group("billing", &committed).unwrap();
    let running = Running::start(driver);

    let mut source =
        KafkaMetadataSource::new(&running.address, "orders", MetadataSourceOptions::default());
    let configs = source.topic_config("orders").unwrap();
    assert_eq!(
        configs.value.get("retention.ms").map(String::as_str),
        Some("86400000")
    );
    assert!(source.acls().unwrap().value.is_empty());
    let groups = source.groups().unwrap();
    assert!(groups.rejected.is_empty(), "{:?}", groups.rejected);
    assert_eq!(groups.value.get("billing"), Some(&committed));
    running.stop().close().unwrap();
}
