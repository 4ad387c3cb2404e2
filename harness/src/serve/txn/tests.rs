//! The coordinator's answers and what it writes, against a node of real logs: `orders` with
//! three partitions, not mirrored (writable unless a test closes a gate).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::txn_offset_commit_request::{
    TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
};
use kafka_protocol::messages::{
    AddOffsetsToTxnRequest, AddPartitionsToTxnRequest, EndTxnRequest, GroupId,
    InitProducerIdRequest, ProducerId, TopicName, TransactionalId, TxnOffsetCommitRequest,
};
use kafka_protocol::protocol::StrBytes;
use kmirror_kernel::batch::{BatchHeader, ControlType, LeaderBatch};
use kmirror_kernel::coordinator::Coordinator;
use kmirror_kernel::log::{LogView, PartitionLog};
use kmirror_kernel::node::PartitionKey;
use kmirror_kernel::sync::group_offsets::TopicPartition as GroupPartition;
use kmirror_kernel::types::{
    LeaderEpoch, MirrorPartition, Offset, ProducerEpoch, ProducerId as Pid, TopicId,
};

use super::super::group::GroupCoordinator;
use super::super::produce::{ProducerIds, FIRST_ID, READ_ONLY_TOPIC};
use super::super::{ServeError, ServedNode};
use super::*;
use crate::file_log::FileLog;
use crate::log_config::FileLogConfig;
use crate::node::dest::{NodeMeta, NodeTopic};
use crate::record_batch::RawBatch;
use crate::sync::local::MetadataDir;
use crate::topic_partition::TopicPartition;

const ORDERS: TopicId = TopicId::from_u64(7);
const TXN: &str = "payments";

const NONE: i16 = 0;
const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
const INVALID_REQUEST: i16 = 42;
const INVALID_PRODUCER_EPOCH: i16 = 47;
const INVALID_TXN_STATE: i16 = 48;
const INVALID_PRODUCER_ID_MAPPING: i16 = 49;
const INVALID_TRANSACTION_TIMEOUT: i16 = 50;
const CONCURRENT_TRANSACTIONS: i16 = 51;
const OPERATION_NOT_ATTEMPTED: i16 = 55;
const UNSTABLE_OFFSET_COMMIT: i16 = 88;
const PRODUCER_FENCED: i16 = 90;

/// A transactional batch as a client writes it: `records` records of `producer` from
/// `sequence`, offsets from 0, no leader epoch.
pub(crate) fn txn_batch(records: i64, producer: (Pid, ProducerEpoch), sequence: i32) -> RawBatch {
    let header = BatchHeader {
        base_offset: 0,
        last_offset: records - 1,
        partition_leader_epoch: -1,
        producer_id: producer.0,
        producer_epoch: producer.1,
        base_sequence: sequence,
        is_transactional: true,
        control: None,
    };
    RawBatch::synthesize(&header, 1_700_000_000_000).unwrap()
}

/// A node of `orders` (3 partitions), its logs under `root`, every gate open but `closed`.
struct TestNode {
    meta: NodeMeta,
    root: PathBuf,
    logs: BTreeMap<PartitionKey, FileLog>,
    closed: BTreeSet<PartitionKey>,
}

impl TestNode {
    fn open(root: &Path) -> TestNode {
        let mut meta = NodeMeta::new(None, 1);
        meta.topics.insert(
            "orders".into(),
            NodeTopic {
                topic_id: ORDERS,
                partitions: 3,
                mirror_name: None,
            },
        );
        let logs = (0..3)
            .map(|p| {
                let tp = TopicPartition {
                    topic: "orders".into(),
                    partition: p,
                };
                let (log, _) =
                    FileLog::open(&root.join("logs"), tp, FileLogConfig::default()).unwrap();
                (PartitionKey::new(ORDERS, p), log)
            })
            .collect();
        TestNode {
            meta,
            root: root.to_path_buf(),
            logs,
            closed: BTreeSet::new(),
        }
    }

    fn mem(&self, p: i32) -> &kmirror_kernel::mem_log::MemLog {
        self.logs[&PartitionKey::new(ORDERS, p)].mem_log()
    }

    /// The last batch of `orders-<p>`.
    fn last(&self, p: i32) -> BatchHeader {
        let mem = self.mem(p);
        *mem.read(mem.log_end_offset() - 1, mem.log_end_offset())
            .last()
            .unwrap()
    }

    /// Writes 2 transactional records of `producer` to `orders-<p>`; their offset.
    fn produce(&mut self, p: i32, producer: (Pid, ProducerEpoch), sequence: i32) -> Offset {
        let batch = txn_batch(2, producer, sequence);
        self.append(&PartitionKey::new(ORDERS, p), 0, &batch)
            .unwrap()
            .base_offset
    }

    fn lso(&self, p: i32) -> Offset {
        self.mem(p).last_stable_offset()
    }
}

impl ServedNode for TestNode {
    fn meta(&self) -> &NodeMeta {
        &self.meta
    }
    fn root(&self) -> &Path {
        &self.root
    }
    fn log(&self, key: &PartitionKey) -> Option<&FileLog> {
        self.logs.get(key)
    }
    fn state_coordinator(&self, _: &MirrorPartition) -> Option<&Coordinator> {
        None
    }
    fn writable(&self, key: &PartitionKey) -> bool {
        !self.closed.contains(key)
    }
    fn append(
        &mut self,
        key: &PartitionKey,
        leader_epoch: LeaderEpoch,
        batch: &RawBatch,
    ) -> Result<BatchHeader, ServeError> {
        let log = self.logs.get_mut(key).unwrap();
        let h = log.append_client_batch(leader_epoch, batch).unwrap();
        log.advance_high_watermark(log.log_end_offset()).unwrap();
        Ok(h)
    }
    fn append_marker(
        &mut self,
        key: &PartitionKey,
        leader_epoch: LeaderEpoch,
        producer: (Pid, ProducerEpoch),
        control: ControlType,
    ) -> Result<BatchHeader, ServeError> {
        let log = self.logs.get_mut(key).unwrap();
        let batch = LeaderBatch::Control {
            control,
            producer: Some(producer),
        };
        let h = log.append_as_leader(leader_epoch, batch).unwrap();
        log.advance_high_watermark(log.log_end_offset()).unwrap();
        Ok(h)
    }
    fn delete_records(&mut self, key: &PartitionKey, _: Offset) -> Result<Offset, ServeError> {
        Err(ServeError::NoLog { partition: *key })
    }
    fn mirror_selecting(&self, _: &str) -> Option<kmirror_kernel::types::MirrorName> {
        None
    }
}

/// A node, its transaction and group coordinators and its producer ids, under one directory.
struct World {
    _dir: tempfile::TempDir,
    node: TestNode,
    txns: TxnCoordinator,
    groups: GroupCoordinator,
    ids: ProducerIds,
}

impl World {
    fn new() -> World {
        let dir = tempfile::tempdir().unwrap();
        let node = TestNode::open(dir.path());
        World {
            txns: TxnCoordinator::open(dir.path()).unwrap(),
            groups: GroupCoordinator::new(0, "h".into(), 1, MetadataDir::of(dir.path())).unwrap(),
            ids: ProducerIds::open(dir.path()).unwrap(),
            node,
            _dir: dir,
        }
    }

    /// The coordinator as a restarted node opens it.
    fn reopen(&mut self) {
        self.txns = TxnCoordinator::open(&self.node.root).unwrap();
    }

    /// InitProducerId at `version` naming `producer` (-1, -1: none): (error, id, epoch).
    fn init_as(&mut self, producer: (Pid, ProducerEpoch), version: i16) -> (i16, Pid, i16) {
        let request = InitProducerIdRequest::default()
            .with_transactional_id(Some(TransactionalId(StrBytes::from_static_str(TXN))))
            .with_transaction_timeout_ms(60_000)
            .with_producer_id(ProducerId(producer.0))
            .with_producer_epoch(producer.1);
        let r = self
            .txns
            .init_producer_id(
                &mut self.node,
                &mut self.groups,
                &mut self.ids,
                &request,
                version,
            )
            .unwrap();
        (r.error_code, r.producer_id.0, r.producer_epoch)
    }

    fn init(&mut self) -> (Pid, ProducerEpoch) {
        let (code, id, epoch) = self.init_as((-1, -1), 5);
        assert_eq!(code, NONE);
        (id, epoch)
    }

    /// AddPartitionsToTxn of `orders` `partitions` at `version`: each partition's error.
    fn add(
        &mut self,
        now_ms: i64,
        producer: (Pid, ProducerEpoch),
        partitions: &[i32],
        version: i16,
    ) -> Vec<i16> {
        let mut request = AddPartitionsToTxnRequest::default();
        request.v3_and_below_transactional_id = TransactionalId(StrBytes::from_static_str(TXN));
        request.v3_and_below_producer_id = ProducerId(producer.0);
        request.v3_and_below_producer_epoch = producer.1;
        request.v3_and_below_topics = vec![AddPartitionsToTxnTopic::default()
            .with_name(TopicName(StrBytes::from_static_str("orders")))
            .with_partitions(partitions.to_vec())];
        let r = self
            .txns
            .add_partitions(now_ms, &self.node, &request, version)
            .unwrap();
        r.results_by_topic_v3_and_below[0]
            .results_by_partition
            .iter()
            .map(|p| p.partition_error_code)
            .collect()
    }

    fn end(&mut self, producer: (Pid, ProducerEpoch), commit: bool, version: i16) -> i16 {
        let request = EndTxnRequest::default()
            .with_transactional_id(TransactionalId(StrBytes::from_static_str(TXN)))
            .with_producer_id(ProducerId(producer.0))
            .with_producer_epoch(producer.1)
            .with_committed(commit);
        self.txns
            .end_txn(&mut self.node, &mut self.groups, &request, version)
            .unwrap()
            .error_code
    }

    fn add_offsets(&mut self, producer: (Pid, ProducerEpoch), group: &str) -> i16 {
        let request = AddOffsetsToTxnRequest::default()
            .with_transactional_id(TransactionalId(StrBytes::from_static_str(TXN)))
            .with_producer_id(ProducerId(producer.0))
            .with_producer_epoch(producer.1)
            .with_group_id(GroupId(StrBytes::from_string(group.into())));
        self.txns.add_offsets(0, &request, 4).unwrap().error_code
    }

    /// TxnOffsetCommit of `orders-<partition>` at `offset` for `group`: the error.
    fn commit_offset(
        &mut self,
        producer: (Pid, ProducerEpoch),
        group: &str,
        partition: i32,
        offset: i64,
    ) -> i16 {
        let request = TxnOffsetCommitRequest::default()
            .with_transactional_id(TransactionalId(StrBytes::from_static_str(TXN)))
            .with_group_id(GroupId(StrBytes::from_string(group.into())))
            .with_producer_id(ProducerId(producer.0))
            .with_producer_epoch(producer.1)
            .with_topics(vec![TxnOffsetCommitRequestTopic::default()
                .with_name(TopicName(StrBytes::from_static_str("orders")))
                .with_partitions(vec![TxnOffsetCommitRequestPartition::default()
                    .with_partition_index(partition)
                    .with_committed_offset(offset)])]);
        let r = self
            .txns
            .txn_offset_commit(&self.node, &request, 4)
            .unwrap();
        r.topics[0].partitions[0].error_code
    }

    /// The committed offsets of `group` in its file.
    fn committed(&self, group: &str) -> BTreeMap<GroupPartition, i64> {
        MetadataDir::of(&self.node.root)
            .read_groups()
            .unwrap()
            .value
            .get(group)
            .map(|g| g.offsets.clone())
            .unwrap_or_default()
    }

    fn state(&self) -> TxnState {
        self.txns.get(TXN).unwrap().state
    }
}

#[test]
fn init_gives_a_new_id_at_epoch_0_then_the_next_epoch_and_fences_other_producers() {
    let mut w = World::new();
    let (pid, epoch) = w.init();
    assert!(pid >= FIRST_ID, "{pid}");
    assert_eq!(epoch, 0);
    assert_eq!(w.init_as((-1, -1), 5), (NONE, pid, 1), "a new instance");
    assert_eq!(w.init_as((pid, 1), 5), (NONE, pid, 2), "KIP-360: a bump");
    assert_eq!(w.init_as((pid, 1), 5), (NONE, pid, 2), "a retry of it");
    assert_eq!(w.init_as((pid, 0), 5).0, PRODUCER_FENCED, "an older epoch");
    assert_eq!(w.init_as((pid, 7), 3).0, INVALID_PRODUCER_EPOCH, "below v4");
    assert_eq!(w.init_as((pid + 1, 2), 5).0, PRODUCER_FENCED, "another id");

    let bad = |w: &mut World, id: &'static str, timeout: i32| {
        let request = InitProducerIdRequest::default()
            .with_transactional_id(Some(TransactionalId(StrBytes::from_static_str(id))))
            .with_transaction_timeout_ms(timeout)
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1);
        w.txns
            .init_producer_id(&mut w.node, &mut w.groups, &mut w.ids, &request, 5)
            .unwrap()
            .error_code
    };
    assert_eq!(bad(&mut w, "", 60_000), INVALID_REQUEST);
    assert_eq!(bad(&mut w, "t", 0), INVALID_TRANSACTION_TIMEOUT);
    assert_eq!(
        bad(&mut w, "t", MAX_TIMEOUT_MS + 1),
        INVALID_TRANSACTION_TIMEOUT
    );

    // Kept across a restart.
    w.reopen();
    assert_eq!(w.init_as((pid, 2), 5), (NONE, pid, 3));
}

#[test]
fn a_commit_writes_commit_markers_where_the_producer_wrote_and_moves_the_lso() {
    let mut w = World::new();
    let producer = w.init();
    assert_eq!(w.add(5, producer, &[0, 1], 3), vec![NONE, NONE]);
    assert_eq!(w.state(), TxnState::Ongoing);
    let base = w.node.produce(0, producer, 0);
    assert_eq!(w.node.lso(0), base, "the open transaction holds the LSO");

    assert_eq!(w.end(producer, true, 4), NONE);
    let marker = w.node.last(0);
    assert_eq!(marker.control, Some(ControlType::Commit));
    assert_eq!(
        (marker.producer_id, marker.producer_epoch),
        (producer.0, producer.1)
    );
    assert_eq!(w.node.lso(0), marker.base_offset + 1);
    assert_eq!(w.node.mem(1).log_end_offset(), 0, "nothing written there");
    assert_eq!(w.state(), TxnState::CompleteCommit);
    assert!(w.txns.get(TXN).unwrap().partitions.is_empty());

    assert_eq!(w.end(producer, true, 4), NONE, "a retried commit");
    assert_eq!(w.node.mem(0).log_end_offset(), marker.base_offset + 1);
    assert_eq!(w.end(producer, false, 4), INVALID_TXN_STATE);

    // The next transaction of the same producer aborts.
    assert_eq!(w.add(6, producer, &[0], 3), vec![NONE]);
    w.node.produce(0, producer, 2);
    assert_eq!(w.end(producer, false, 4), NONE);
    assert_eq!(w.node.last(0).control, Some(ControlType::Abort));
    assert_eq!(w.node.lso(0), w.node.mem(0).log_end_offset());
    assert_eq!(w.state(), TxnState::CompleteAbort);
}

#[test]
fn requests_of_a_wrong_producer_or_state_get_kafkas_codes() {
    let mut w = World::new();
    let (pid, epoch) = w.init();
    assert_eq!(w.end((pid, epoch), true, 4), INVALID_TXN_STATE, "none open");
    assert_eq!(
        w.add(0, (pid + 1, epoch), &[0], 3),
        vec![INVALID_PRODUCER_ID_MAPPING]
    );
    assert_eq!(
        w.add(0, (pid, epoch + 1), &[0, 1], 3),
        vec![PRODUCER_FENCED; 2]
    );
    assert_eq!(
        w.add(0, (pid, epoch + 1), &[0], 1),
        vec![INVALID_PRODUCER_EPOCH]
    );
    assert_eq!(
        w.add(0, (pid, epoch), &[0, 9], 3),
        vec![OPERATION_NOT_ATTEMPTED, UNKNOWN_TOPIC_OR_PARTITION]
    );
    w.node.closed.insert(PartitionKey::new(ORDERS, 2));
    assert_eq!(
        w.add(0, (pid, epoch), &[2, 0], 3),
        vec![READ_ONLY_TOPIC, OPERATION_NOT_ATTEMPTED]
    );
    assert_eq!(w.state(), TxnState::Empty, "nothing added");
    assert_eq!(w.end((pid, epoch + 1), true, 4), PRODUCER_FENCED);
    assert_eq!(w.end((pid, epoch + 1), true, 1), INVALID_PRODUCER_EPOCH);
    assert_eq!(w.add_offsets((pid, epoch + 1), "g"), PRODUCER_FENCED);

    // Markers being written (a node that failed between them) answer CONCURRENT_TRANSACTIONS.
    assert_eq!(w.add(0, (pid, epoch), &[0], 3), vec![NONE]);
    let mut txn = w.txns.get(TXN).unwrap().clone();
    txn.state = TxnState::PrepareCommit;
    w.txns.put(TXN, txn).unwrap();
    assert_eq!(
        w.add(0, (pid, epoch), &[1], 3),
        vec![CONCURRENT_TRANSACTIONS]
    );
    assert_eq!(w.end((pid, epoch), true, 4), CONCURRENT_TRANSACTIONS);
    assert_eq!(w.init_as((-1, -1), 5).0, CONCURRENT_TRANSACTIONS);
}

#[test]
fn init_during_a_transaction_aborts_it_at_a_fencing_epoch() {
    let mut w = World::new();
    let (pid, epoch) = w.init();
    w.add(0, (pid, epoch), &[0], 3);
    w.node.produce(0, (pid, epoch), 0);
    assert_eq!(w.init_as((-1, -1), 5), (NONE, pid, epoch + 2));
    let marker = w.node.last(0);
    assert_eq!(marker.control, Some(ControlType::Abort));
    assert_eq!(marker.producer_epoch, epoch + 1, "the fencing epoch");
    assert_eq!(w.node.lso(0), w.node.mem(0).log_end_offset());
    assert_eq!(w.end((pid, epoch), true, 4), PRODUCER_FENCED, "the zombie");
}

#[test]
fn a_transaction_past_its_timeout_is_aborted_by_poll_and_its_producer_fenced() {
    let mut w = World::new();
    let (pid, epoch) = w.init();
    w.add(1_000, (pid, epoch), &[0], 3);
    w.node.produce(0, (pid, epoch), 0);
    assert_eq!(w.txns.next_deadline_ms(), Some(61_000));
    w.txns.poll(60_999, &mut w.node, &mut w.groups).unwrap();
    assert_eq!(w.state(), TxnState::Ongoing);
    w.txns.poll(61_000, &mut w.node, &mut w.groups).unwrap();
    assert_eq!(w.state(), TxnState::CompleteAbort);
    assert_eq!(w.node.last(0).control, Some(ControlType::Abort));
    assert_eq!(w.txns.get(TXN).unwrap().producer_epoch, epoch + 1);
    assert_eq!(w.txns.next_deadline_ms(), None);
    assert_eq!(w.add(61_001, (pid, epoch), &[0], 3), vec![PRODUCER_FENCED]);
}

#[test]
fn a_partition_mirrored_again_aborts_the_transaction_and_waits_for_its_truncation() {
    let mut w = World::new();
    let producer = w.init();
    w.add(0, producer, &[0, 1], 3);
    w.node.produce(0, producer, 0);
    let stuck = w.node.produce(1, producer, 0);
    let mirrored = PartitionKey::new(ORDERS, 1);
    w.node.closed.insert(mirrored);
    assert_eq!(
        w.init_as((-1, -1), 5).0,
        CONCURRENT_TRANSACTIONS,
        "a new instance waits for the abort"
    );
    assert_eq!(w.txns.get(TXN).unwrap().producer_epoch, producer.1 + 1);
    w.txns.poll(1, &mut w.node, &mut w.groups).unwrap();
    assert_eq!(w.node.last(0).control, Some(ControlType::Abort));
    assert_eq!(
        w.node.last(1).control,
        None,
        "no marker on a mirrored partition"
    );
    assert_eq!(w.node.lso(1), stuck, "left to the mirror");
    assert_eq!(
        w.state(),
        TxnState::PrepareAbort,
        "until the mirror truncates"
    );
    assert_eq!(w.end(producer, true, 4), PRODUCER_FENCED);
    assert_eq!(w.init_as((-1, -1), 5).0, CONCURRENT_TRANSACTIONS);
    w.txns.poll(2, &mut w.node, &mut w.groups).unwrap();
    assert_eq!(w.state(), TxnState::PrepareAbort);

    // The failback truncates the partition to its last mirrored offset.
    w.node
        .logs
        .get_mut(&mirrored)
        .unwrap()
        .truncate_to(stuck)
        .unwrap();
    w.txns.poll(3, &mut w.node, &mut w.groups).unwrap();
    assert_eq!(w.state(), TxnState::CompleteAbort);
    assert_eq!(w.node.mem(1).log_end_offset(), stuck, "no marker written");
    assert_eq!(w.init_as((-1, -1), 5), (NONE, producer.0, producer.1 + 2));
}

#[test]
fn recovery_waits_for_the_gates_of_a_node_just_opened() {
    let mut w = World::new();
    let producer = w.init();
    w.add(0, producer, &[0], 3);
    w.node.produce(0, producer, 0);
    let mut txn = w.txns.get(TXN).unwrap().clone();
    txn.state = TxnState::PrepareCommit;
    w.txns.put(TXN, txn).unwrap();
    w.reopen();
    let key = PartitionKey::new(ORDERS, 0);
    w.node.closed.insert(key);
    w.txns.poll(0, &mut w.node, &mut w.groups).unwrap();
    assert_eq!(
        w.state(),
        TxnState::PrepareCommit,
        "the gate is not open yet"
    );
    w.node.closed.remove(&key);
    w.txns.poll(1, &mut w.node, &mut w.groups).unwrap();
    assert_eq!(w.state(), TxnState::CompleteCommit);
    assert_eq!(w.node.last(0).control, Some(ControlType::Commit));
}

/// An OffsetFetch answer of `group` for `orders` 0 and 1 (offset 4 each), in the v7 and the
/// v8 form, after [`TxnCoordinator::mark_unstable`]: each partition's error and offset (the
/// two forms must agree).
fn unstable(w: &World, group: &str) -> Vec<(i16, i64)> {
    use kafka_protocol::messages::offset_fetch_response::*;
    use kafka_protocol::messages::OffsetFetchResponse;
    let name = TopicName(StrBytes::from_static_str("orders"));
    let mut old =
        OffsetFetchResponse::default().with_topics(vec![OffsetFetchResponseTopic::default()
            .with_name(name.clone())
            .with_partitions(
                (0..2)
                    .map(|p| {
                        OffsetFetchResponsePartition::default()
                            .with_partition_index(p)
                            .with_committed_offset(4)
                    })
                    .collect(),
            )]);
    let mut new =
        OffsetFetchResponse::default().with_groups(vec![OffsetFetchResponseGroup::default()
            .with_group_id(GroupId(StrBytes::from_string(group.into())))
            .with_topics(vec![OffsetFetchResponseTopics::default()
                .with_name(name)
                .with_partitions(
                    (0..2)
                        .map(|p| {
                            OffsetFetchResponsePartitions::default()
                                .with_partition_index(p)
                                .with_committed_offset(4)
                        })
                        .collect(),
                )])]);
    w.txns.mark_unstable(&mut old, group);
    w.txns.mark_unstable(&mut new, "ignored from v8");
    let v7: Vec<(i16, i64)> = old.topics[0]
        .partitions
        .iter()
        .map(|p| (p.error_code, p.committed_offset))
        .collect();
    let v8: Vec<(i16, i64)> = new.groups[0].topics[0]
        .partitions
        .iter()
        .map(|p| (p.error_code, p.committed_offset))
        .collect();
    assert_eq!(v7, v8);
    v7
}

#[test]
fn transactional_offsets_are_visible_on_commit_and_dropped_on_abort() {
    let mut w = World::new();
    let producer = w.init();
    assert_eq!(
        w.commit_offset(producer, "g", 0, 5),
        INVALID_TXN_STATE,
        "no AddOffsetsToTxn"
    );
    assert_eq!(w.add_offsets(producer, "g"), NONE);
    assert_eq!(w.state(), TxnState::Ongoing);
    assert_eq!(
        w.commit_offset(producer, "g", 9, 5),
        UNKNOWN_TOPIC_OR_PARTITION
    );
    assert_eq!(w.commit_offset((producer.0, 9), "g", 0, 5), PRODUCER_FENCED);
    assert_eq!(w.commit_offset(producer, "g", 0, 5), NONE);
    assert_eq!(w.commit_offset(producer, "g", 0, 7), NONE);
    assert!(w.committed("g").is_empty(), "pending until the commit");
    assert_eq!(unstable(&w, "g"), [(UNSTABLE_OFFSET_COMMIT, -1), (NONE, 4)]);
    assert_eq!(unstable(&w, "other"), [(NONE, 4), (NONE, 4)]);
    assert_eq!(w.end(producer, true, 4), NONE);
    assert_eq!(
        unstable(&w, "g"),
        [(NONE, 4), (NONE, 4)],
        "stable once committed"
    );
    let tp = GroupPartition::new("orders".to_owned(), 0);
    assert_eq!(w.committed("g").get(&tp), Some(&7));

    assert_eq!(w.add_offsets(producer, "g"), NONE);
    assert_eq!(w.commit_offset(producer, "g", 0, 9), NONE);
    assert_eq!(w.end(producer, false, 4), NONE);
    assert_eq!(w.committed("g").get(&tp), Some(&7), "the abort dropped 9");
}

#[test]
fn a_node_reopened_between_prepare_and_markers_completes_the_transaction() {
    let mut w = World::new();
    let producer = w.init();
    w.add(0, producer, &[0, 1], 3);
    w.add_offsets(producer, "g");
    w.commit_offset(producer, "g", 1, 3);
    let base = w.node.produce(0, producer, 0);
    w.node.produce(1, producer, 0);
    // The node wrote PrepareCommit and stopped before any marker.
    let mut txn = w.txns.get(TXN).unwrap().clone();
    txn.state = TxnState::PrepareCommit;
    w.txns.put(TXN, txn).unwrap();
    // And another transactional id was Ongoing.
    let other = TxnMetadata {
        state: TxnState::Ongoing,
        partitions: [TxnPartition {
            topic: "orders".into(),
            partition: 2,
        }]
        .into(),
        ..TxnMetadata::new(producer.0 + 1, 60_000)
    };
    w.txns.put("other", other).unwrap();
    w.node.produce(2, (producer.0 + 1, 0), 0);

    w.reopen();
    w.txns.poll(0, &mut w.node, &mut w.groups).unwrap();
    for p in [0, 1] {
        assert_eq!(
            w.node.last(p).control,
            Some(ControlType::Commit),
            "orders-{p}"
        );
        assert_eq!(w.node.lso(p), w.node.mem(p).log_end_offset());
    }
    assert!(w.node.lso(0) > base);
    assert_eq!(w.state(), TxnState::CompleteCommit);
    let tp = GroupPartition::new("orders".to_owned(), 1);
    assert_eq!(w.committed("g").get(&tp), Some(&3));
    let aborted = w.node.last(2);
    assert_eq!(aborted.control, Some(ControlType::Abort));
    assert_eq!(aborted.producer_epoch, 1, "aborted at a fencing epoch");
    assert_eq!(w.txns.get("other").unwrap().state, TxnState::CompleteAbort);

    // Markers already there are not written twice.
    let ends: Vec<Offset> = (0..3).map(|p| w.node.mem(p).log_end_offset()).collect();
    let mut txn = w.txns.get(TXN).unwrap().clone();
    txn.state = TxnState::PrepareCommit;
    txn.partitions = [0, 1]
        .map(|partition| TxnPartition {
            topic: "orders".into(),
            partition,
        })
        .into();
    w.txns.put(TXN, txn).unwrap();
    w.reopen();
    w.txns.poll(0, &mut w.node, &mut w.groups).unwrap();
    let again: Vec<Offset> = (0..3).map(|p| w.node.mem(p).log_end_offset()).collect();
    assert_eq!(ends, again);
    assert_eq!(w.state(), TxnState::CompleteCommit);
}

/// A node that mirrored another kmirror node holds producer ids from that node's range
/// (at or above `FIRST_ID`); after the failover's `MIRROR_PID_RESET` expired them, its own
/// first id is still above every id in its logs, so a log never shows two producers under
/// one id.
#[test]
fn a_new_producer_id_is_above_every_logged_one_even_after_a_pid_reset() {
    let dir = tempfile::tempdir().unwrap();
    let mut node = TestNode::open(dir.path());
    let mirrored = (FIRST_ID + 7, 0);
    node.produce(1, mirrored, 0);
    let key = PartitionKey::new(ORDERS, 1);
    let reset = LeaderBatch::Control {
        control: ControlType::MirrorPidReset,
        producer: None,
    };
    let log = node.logs.get_mut(&key).unwrap();
    log.append_as_leader(1, reset).unwrap();
    log.advance_high_watermark(log.log_end_offset()).unwrap();
    assert_eq!(
        node.mem(1).producer_state().producers().count(),
        0,
        "the reset expired the mirrored producer"
    );
    let first = ProducerIds::open(dir.path()).unwrap().next(&node).unwrap();
    assert!(first > mirrored.0, "{first} after {}", mirrored.0);
}
