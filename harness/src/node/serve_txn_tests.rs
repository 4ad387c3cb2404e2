//! A transactional producer against a served node, on the wire: FindCoordinator names the node
//! for a transactional id, an aborted transaction is in a read-committed Fetch's aborted list,
//! and a node reopened with a transaction in PrepareCommit (its markers not written) completes
//! it before read-committed consumers read on.

use std::time::{Duration, Instant};

use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::{
    AddPartitionsToTxnRequest, EndTxnRequest, FindCoordinatorRequest, InitProducerIdRequest,
    ProducerId, TopicName, TransactionalId,
};
use kafka_protocol::protocol::StrBytes;
use kmirror_kernel::batch::ControlType;
use kmirror_kernel::log::PartitionLog;
use kmirror_kernel::node::PartitionKey;

use super::fixture::ORDERS;
use super::serve_tests::{connect, produce, stopped, Running};
use super::*;
use crate::serve::txn::tests::txn_batch;
use crate::serve::txn::{TxnState, TxnStore};
use crate::wire::client::{FetchParams, KafkaClient, PartitionFetch, READ_COMMITTED};
use crate::wire::Connection;

const TXN: &str = "payments";

fn txn_id() -> TransactionalId {
    TransactionalId(StrBytes::from_static_str(TXN))
}

/// AddPartitionsToTxn v3 of `orders-0`: its error code.
fn add_orders_0(conn: &mut Connection, producer: (i64, i16)) -> i16 {
    let mut request = AddPartitionsToTxnRequest::default();
    request.v3_and_below_transactional_id = txn_id();
    request.v3_and_below_producer_id = ProducerId(producer.0);
    request.v3_and_below_producer_epoch = producer.1;
    request.v3_and_below_topics = vec![AddPartitionsToTxnTopic::default()
        .with_name(TopicName(StrBytes::from_static_str("orders")))
        .with_partitions(vec![0])];
    let response = conn.send("AddPartitionsToTxn", &request, 3).unwrap();
    response.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code
}

/// EndTxn v4: its error code.
fn end(conn: &mut Connection, producer: (i64, i16), commit: bool) -> i16 {
    let request = EndTxnRequest::default()
        .with_transactional_id(txn_id())
        .with_producer_id(ProducerId(producer.0))
        .with_producer_epoch(producer.1)
        .with_committed(commit);
    conn.send("EndTxn", &request, 4).unwrap().error_code
}

/// A read-committed Fetch of `orders-0` from `offset`.
fn read_committed(address: &str, offset: i64) -> PartitionFetch {
    KafkaClient::new(address, Duration::from_secs(2), Duration::from_secs(5))
        .fetch(&FetchParams {
            topic_id: ORDERS,
            partition: 0,
            fetch_offset: offset,
            last_fetched_epoch: None,
            isolation_level: READ_COMMITTED,
            max_wait_ms: 0,
            max_bytes: 1 << 20,
        })
        .unwrap()
}

#[test]
fn a_transaction_aborts_on_the_wire_and_one_prepared_before_a_restart_commits_on_open() {
    let dir = tempfile::tempdir().unwrap();
    let running = Running::start(stopped(dir.path()));
    let mut conn = connect(&running.address);

    let found = conn
        .send(
            "FindCoordinator",
            &FindCoordinatorRequest::default()
                .with_key_type(1)
                .with_coordinator_keys(vec![StrBytes::from_static_str(TXN)]),
            4,
        )
        .unwrap();
    assert_eq!(found.coordinators[0].error_code, 0);
    assert_eq!(
        format!("127.0.0.1:{}", found.coordinators[0].port),
        running.address
    );

    let init = conn
        .send(
            "InitProducerId",
            &InitProducerIdRequest::default()
                .with_transactional_id(Some(txn_id()))
                .with_transaction_timeout_ms(60_000)
                .with_producer_id(ProducerId(-1))
                .with_producer_epoch(-1),
            4,
        )
        .unwrap();
    assert_eq!(init.error_code, 0);
    let producer = (init.producer_id.0, init.producer_epoch);

    // One transaction aborted on the wire.
    assert_eq!(add_orders_0(&mut conn, producer), 0);
    let (code, aborted_base) = produce(&mut conn, 0, &txn_batch(3, producer, 0));
    assert_eq!(code, 0);
    assert_eq!(end(&mut conn, producer, false), 0);
    // The next one written, then the node stops before its EndTxn.
    assert_eq!(add_orders_0(&mut conn, producer), 0);
    let (code, committed_base) = produce(&mut conn, 0, &txn_batch(2, producer, 3));
    assert_eq!(code, 0);
    let open = read_committed(&running.address, aborted_base);
    assert_eq!(
        open.last_stable_offset, committed_base,
        "held by the open one"
    );
    running.stop().close().unwrap();

    // As if the node had written PrepareCommit and stopped before the markers.
    let store = TxnStore::of(dir.path());
    let mut all = store.load().unwrap();
    all.get_mut(TXN).unwrap().state = TxnState::PrepareCommit;
    store.save(&all).unwrap();

    let driver = NodeDriver::open(dir.path(), None, super::fixture::options()).unwrap();
    let running = Running::start(driver);
    let end_offset = committed_base + 3; // 2 records and the COMMIT marker
    let deadline = Instant::now() + Duration::from_secs(20);
    let read = loop {
        let read = read_committed(&running.address, aborted_base);
        if read.last_stable_offset == end_offset {
            break read;
        }
        assert!(Instant::now() < deadline, "never completed: {read:?}");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(read.high_watermark, end_offset);
    assert_eq!(
        read.aborted_transactions,
        vec![(producer.0, aborted_base)],
        "the aborted transaction, for the consumer to skip"
    );
    let mut conn = connect(&running.address);
    assert_eq!(end(&mut conn, producer, true), 0, "a retried commit");
    assert_eq!(end(&mut conn, producer, false), 48, "INVALID_TXN_STATE");
    let driver = running.stop();
    let log = driver.log(&PartitionKey::new(ORDERS, 0)).unwrap().mem_log();
    let marker = log.read(end_offset - 1, end_offset);
    assert_eq!(marker[0].control, Some(ControlType::Commit));
    let abort = log.read(aborted_base + 3, aborted_base + 4);
    assert_eq!(abort[0].control, Some(ControlType::Abort));
    driver.close().unwrap();
}
