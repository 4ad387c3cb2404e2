//! [`Broker`]: the node-thread side of serving. It answers each [`ClientCall`] from a
//! [`ServedNode`] view of the node's logs and gates, parks the Fetches that wait for data,
//! and answers them when data comes or their wait ends ([`Broker::poll`]).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::mpsc::SyncSender;

use kafka_protocol::messages::{RequestKind, ResponseKind};
use kmirror_kernel::batch::{BatchHeader, ControlType};
use kmirror_kernel::coordinator::Coordinator;
use kmirror_kernel::log::LogView;
use kmirror_kernel::node::PartitionKey;
use kmirror_kernel::types::{
    LeaderEpoch, MirrorName, MirrorPartition, Offset, PartitionIndex, ProducerEpoch, ProducerId,
};

use crate::file_log::FileLog;
use crate::node::dest::NodeMeta;
use crate::record_batch::RawBatch;
use crate::sync::local::MetadataDir;

use super::fetch::{self, FetchAnswer};
use super::fetch_session::{FetchContext, FetchSessions};
use super::group::{
    GroupAnswer, GroupClient, GroupCoordinator, GroupOptions, GroupRequest, GROUP_API_VERSIONS,
};
use super::produce::ProducerIds;
use super::topic_admin::{self, TopicWork};
use super::txn::TxnCoordinator;
use super::{
    admin, configs, create_topics, metadata, offsets, produce, CallId, ClientCall, Reply,
    ServeError,
};

/// What the broker reads and writes of the node, lent by the node driver for one call.
pub trait ServedNode {
    /// The node's metadata (topics, partitions, leader epochs).
    fn meta(&self) -> &NodeMeta;
    /// The destination directory.
    fn root(&self) -> &Path;
    /// The log of `key`.
    fn log(&self, key: &PartitionKey) -> Option<&FileLog>;
    /// The `__mirror_state` coordinator holding `key`'s records (its partition of
    /// `__mirror_state`), if the node has it open.
    fn state_coordinator(&self, key: &MirrorPartition) -> Option<&Coordinator>;
    /// Whether clients may write to `key` (the kernel's produce gate).
    fn writable(&self, key: &PartitionKey) -> bool;
    /// Appends a client's batch to `key` as its leader at `leader_epoch`; the high watermark
    /// follows (one replica).
    fn append(
        &mut self,
        key: &PartitionKey,
        leader_epoch: LeaderEpoch,
        batch: &RawBatch,
    ) -> Result<BatchHeader, ServeError>;
    /// Appends a transaction marker (`control`: COMMIT or ABORT) of producer `producer_id` at
    /// `producer_epoch` to `key` as its leader at `leader_epoch`, as Kafka's partition leader
    /// writes the markers its transaction coordinator sends; the high watermark follows. The
    /// producer-state checks are the kernel's (the marker's epoch is not older than the
    /// producer's); the last stable offset moves past the transaction it closes.
    fn append_marker(
        &mut self,
        key: &PartitionKey,
        leader_epoch: LeaderEpoch,
        producer: (ProducerId, ProducerEpoch),
        control: ControlType,
    ) -> Result<BatchHeader, ServeError>;
    /// DeleteRecords on `key`: moves its log start offset forward to `offset` (at most the
    /// high watermark, never back), durably, deleting the segments wholly below it
    /// ([`FileLog::delete_records_before`]); returns the log start offset.
    fn delete_records(&mut self, key: &PartitionKey, offset: Offset) -> Result<Offset, ServeError>;
    /// The mirror whose running selection (`kmirror mirror --topics`) takes topic `name`, if
    /// this node follows a source: such a topic is the mirror's to create.
    fn mirror_selecting(&self, name: &str) -> Option<MirrorName>;
}

/// The partition `partition` of topic `name` on `node`, if the node has it.
pub fn partition_key(
    node: &dyn ServedNode,
    name: &str,
    partition: PartitionIndex,
) -> Option<PartitionKey> {
    let topic = node.meta().topics.get(name)?;
    (0..topic.partitions)
        .contains(&partition)
        .then(|| PartitionKey::new(topic.topic_id, partition))
}

/// The leader epoch clients see for `key`: the node's (`node.properties`), or the log's
/// latest when that is larger (a mirrored epoch beyond the node's own).
pub fn leader_epoch(node: &dyn ServedNode, name: &str, key: &PartitionKey) -> LeaderEpoch {
    let own = node
        .meta()
        .partitions
        .get(&(name.to_owned(), key.partition))
        .map_or(0, |p| p.leader_epoch);
    let logged = node
        .log(key)
        .and_then(|l| l.mem_log().epoch_cache().latest_epoch())
        .unwrap_or(0);
    own.max(logged)
}

/// A Fetch waiting for data.
struct Parked {
    call: ClientCall,
    /// Its session step, taken when it came.
    context: FetchContext,
    deadline_ms: i64,
}

/// Serving state on the node's thread. See the [module documentation](self).
pub struct Broker {
    host: String,
    port: i32,
    parked: Vec<Parked>,
    sessions: FetchSessions,
    producer_ids: ProducerIds,
    groups: GroupCoordinator,
    txns: TxnCoordinator,
    /// JoinGroup and SyncGroup calls the coordinator holds until their rebalance completes.
    group_calls: BTreeMap<CallId, SyncSender<Reply>>,
}

impl std::fmt::Debug for Broker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Broker")
            .field("advertised", &format!("{}:{}", self.host, self.port))
            .field("parked", &self.parked.len())
            .field("fetch_sessions", &self.sessions.open_sessions())
            .finish_non_exhaustive()
    }
}

impl Broker {
    /// Broker `broker_id`, advertising `advertised` (`host:port`), for the node at `root`
    /// (every group's coordinator, its offsets in `root/metadata/consumer-offsets/`; every
    /// transactional id's, its state in `root/metadata/transactions/`).
    pub fn new(broker_id: i32, advertised: &str, root: &Path) -> Result<Self, ServeError> {
        let (host, port) = advertised
            .rsplit_once(':')
            .and_then(|(h, p)| Some((h.to_owned(), p.parse::<i32>().ok()?)))
            .ok_or_else(|| ServeError::BadAdvertised(advertised.to_owned()))?;
        let options = GroupOptions {
            transactions: true,
            ..GroupOptions::default()
        };
        let groups = GroupCoordinator::with_options(
            broker_id,
            host.clone(),
            port,
            MetadataDir::of(root),
            options,
        )?;
        Ok(Broker {
            host,
            port,
            parked: Vec::new(),
            sessions: FetchSessions::default(),
            producer_ids: ProducerIds::open(root)?,
            groups,
            txns: TxnCoordinator::open(root)?,
            group_calls: BTreeMap::new(),
        })
    }

    /// The advertised host and port.
    pub fn advertised(&self) -> (&str, i32) {
        (&self.host, self.port)
    }

    /// Fetches waiting for data.
    pub fn parked(&self) -> usize {
        self.parked.len()
    }

    /// When the first parked Fetch's wait ends, or the group or transaction coordinator has
    /// a timeout due.
    pub fn next_deadline_ms(&self) -> Option<i64> {
        let fetches = self.parked.iter().map(|p| p.deadline_ms).min();
        [
            fetches,
            self.groups.next_deadline_ms(),
            self.txns.next_deadline_ms(),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// Answers `call` (or parks it, a Fetch waiting for data). A failed disk write is an
    /// error for the node; the client is answered first. A CreateTopics, CreatePartitions or
    /// DeleteTopics that changes topics is not answered here: its [`TopicWork`] is returned,
    /// for the caller to carry out and then answer.
    pub fn handle(
        &mut self,
        now_ms: i64,
        call: ClientCall,
        node: &mut dyn ServedNode,
    ) -> Result<Option<TopicWork>, ServeError> {
        let version = call.header.request_api_version;
        let key = call.header.request_api_key;
        if GROUP_API_VERSIONS.iter().any(|(k, _, _)| *k as i16 == key) {
            return self.handle_group(now_ms, call, node).map(|()| None);
        }
        if is_transactional(&call.request) {
            // A transaction a partition of which was mirrored again, or past its timeout, is
            // aborted first: its producer, fenced, is answered PRODUCER_FENCED.
            self.txns.poll(now_ms, node, &mut self.groups)?;
        }
        let response = match &call.request {
            RequestKind::Metadata(r) => {
                ResponseKind::Metadata(metadata::answer(node, &self.host, self.port, r, version))
            }
            RequestKind::ListOffsets(r) => ResponseKind::ListOffsets(offsets::list(node, r)),
            RequestKind::OffsetForLeaderEpoch(r) => {
                ResponseKind::OffsetForLeaderEpoch(offsets::for_leader_epoch(node, r))
            }
            RequestKind::Fetch(r) => {
                let context = self.sessions.context(now_ms, r, version);
                match self.fetch(now_ms, context, r, version, node, false) {
                    Some(reply) => {
                        let _ = call.reply.send(reply);
                        return Ok(None);
                    }
                    None => {
                        let deadline_ms = now_ms.saturating_add(i64::from(r.max_wait_ms.max(0)));
                        self.parked.push(Parked {
                            call,
                            context,
                            deadline_ms,
                        });
                        return Ok(None);
                    }
                }
            }
            RequestKind::DescribeConfigs(r) => {
                ResponseKind::DescribeConfigs(configs::describe_configs(node, r))
            }
            RequestKind::DescribeAcls(_) => ResponseKind::DescribeAcls(configs::describe_acls()),
            RequestKind::DeleteRecords(r) => {
                let (response, failure) = admin::delete_records(node, r);
                let _ = call
                    .reply
                    .send(ResponseKind::DeleteRecords(response).into());
                return failure.map_or(Ok(None), Err);
            }
            RequestKind::CreateTopics(r) => {
                let (response, edits) = create_topics::create_topics(node, r);
                let answer = ResponseKind::CreateTopics(response);
                return Ok(TopicWork::of(edits, answer, call.reply));
            }
            RequestKind::CreatePartitions(r) => {
                let (response, edits) = topic_admin::create_partitions(node, r);
                let answer = ResponseKind::CreatePartitions(response);
                return Ok(TopicWork::of(edits, answer, call.reply));
            }
            RequestKind::DeleteTopics(r) => {
                let (response, edits) = topic_admin::delete_topics(node, r);
                let answer = ResponseKind::DeleteTopics(response);
                return Ok(TopicWork::of(edits, answer, call.reply));
            }
            RequestKind::InitProducerId(r) if r.transactional_id.is_none() => {
                ResponseKind::InitProducerId(self.producer_ids.answer(node, r)?)
            }
            RequestKind::InitProducerId(r) => {
                ResponseKind::InitProducerId(self.txns.init_producer_id(
                    node,
                    &mut self.groups,
                    &mut self.producer_ids,
                    r,
                    version,
                )?)
            }
            RequestKind::AddPartitionsToTxn(r) => ResponseKind::AddPartitionsToTxn(
                self.txns.add_partitions(now_ms, node, r, version)?,
            ),
            RequestKind::AddOffsetsToTxn(r) => {
                ResponseKind::AddOffsetsToTxn(self.txns.add_offsets(now_ms, r, version)?)
            }
            RequestKind::TxnOffsetCommit(r) => {
                ResponseKind::TxnOffsetCommit(self.txns.txn_offset_commit(node, r, version)?)
            }
            RequestKind::EndTxn(r) => {
                ResponseKind::EndTxn(self.txns.end_txn(node, &mut self.groups, r, version)?)
            }
            RequestKind::Produce(r) => {
                // acks=0: the connection thread writes no response (Kafka sends none).
                let (response, failure) = produce::answer(node, r, version);
                let _ = call.reply.send(ResponseKind::Produce(response).into());
                return failure.map_or(Ok(None), Err);
            }
            other => {
                // The listener passes only what `versions` lists; dropping the call closes the
                // connection with a line that names it.
                eprintln!(
                    "serve: no handler for {:?}; closing the connection",
                    api_name(other)
                );
                return Ok(None);
            }
        };
        let _ = call.reply.send(response.into());
        Ok(None)
    }

    /// Topic `name` was deleted: every group's committed offsets of it go (from the group
    /// files too), as Kafka's coordinator drops the offsets of deleted partitions.
    pub fn forget_topic(&mut self, name: &str) -> Result<(), ServeError> {
        Ok(self.groups.forget_topic(name)?)
    }

    /// Hands a group request to the coordinator; sends every answer it makes ready (this
    /// call's, or parked calls' it completes) and keeps this call if it is parked.
    fn handle_group(
        &mut self,
        now_ms: i64,
        call: ClientCall,
        node: &dyn ServedNode,
    ) -> Result<(), ServeError> {
        let ClientCall {
            id,
            header,
            request,
            reply,
            client_host,
        } = call;
        let Ok(request) = GroupRequest::from_kind(request) else {
            return Ok(());
        };
        // A read-committed consumer's OffsetFetch: pending transactional offsets are unstable.
        let stable_for = match &request {
            GroupRequest::OffsetFetch(r) if r.require_stable => Some(r.group_id.0.to_string()),
            _ => None,
        };
        let client = GroupClient {
            client_id: header
                .client_id
                .as_ref()
                .map_or_else(String::new, |c| c.to_string()),
            client_host,
        };
        let exists = |topic: &str, p: i32| partition_key(node, topic, p).is_some();
        let answers = self.groups.handle_from(
            now_ms,
            id,
            header.request_api_version,
            &client,
            request,
            &exists,
        );
        // The reply is kept first: a store failure holds the answer for a later call.
        self.group_calls.insert(id, reply);
        let mut answers = answers?;
        if let Some(group) = stable_for {
            for answer in &mut answers {
                if let (true, ResponseKind::OffsetFetch(r)) =
                    (answer.call == id, &mut answer.response)
                {
                    self.txns.mark_unstable(r, &group);
                }
            }
        }
        self.send_group_answers(answers);
        Ok(())
    }

    fn send_group_answers(&mut self, answers: Vec<GroupAnswer>) {
        for answer in answers {
            if let Some(reply) = self.group_calls.remove(&answer.call) {
                let _ = reply.send(answer.response.into());
            }
        }
    }

    /// Completes or aborts the transactions due ([`TxnCoordinator::poll`]) and answers the
    /// parked Fetches that now have data or whose wait ended. `moved`: the logs
    /// may have changed since the last call (the caller knows what it wrote); otherwise only
    /// the expired Fetches are looked at.
    pub fn poll(
        &mut self,
        now_ms: i64,
        moved: bool,
        node: &mut dyn ServedNode,
    ) -> Result<(), ServeError> {
        self.txns.poll(now_ms, node, &mut self.groups)?;
        if self
            .groups
            .next_deadline_ms()
            .is_some_and(|due| due <= now_ms)
        {
            let answers = self.groups.poll(now_ms)?;
            self.send_group_answers(answers);
        }
        if self.parked.is_empty() {
            return Ok(());
        }
        let mut still = Vec::new();
        for parked in std::mem::take(&mut self.parked) {
            let expired = now_ms >= parked.deadline_ms;
            if !moved && !expired {
                still.push(parked);
                continue;
            }
            let RequestKind::Fetch(r) = &parked.call.request else {
                continue;
            };
            let version = parked.call.header.request_api_version;
            match self.fetch(now_ms, parked.context, r, version, node, expired) {
                Some(reply) => {
                    let _ = parked.call.reply.send(reply);
                }
                None => still.push(parked),
            }
        }
        self.parked = still;
        Ok(())
    }

    /// Reads the partitions of a Fetch under its session step `context` and answers it, or
    /// `None`: it waits for data.
    fn fetch(
        &mut self,
        now_ms: i64,
        context: FetchContext,
        request: &kafka_protocol::messages::FetchRequest,
        version: i16,
        node: &dyn ServedNode,
        expired: bool,
    ) -> Option<Reply> {
        let wanted = self.sessions.wanted(context, request, version);
        match fetch::answer(node, request, wanted, expired) {
            FetchAnswer::Ready(read) => {
                let (response, regions) = self.sessions.respond(now_ms, context, version, read);
                Some(Reply {
                    response: ResponseKind::Fetch(response),
                    regions,
                })
            }
            FetchAnswer::Wait => None,
        }
    }
}

/// Whether `request` is the transaction coordinator's.
fn is_transactional(request: &RequestKind) -> bool {
    match request {
        RequestKind::InitProducerId(r) => r.transactional_id.is_some(),
        RequestKind::AddPartitionsToTxn(_)
        | RequestKind::AddOffsetsToTxn(_)
        | RequestKind::TxnOffsetCommit(_)
        | RequestKind::EndTxn(_) => true,
        _ => false,
    }
}

/// The name of a request's API, for log lines.
fn api_name(request: &RequestKind) -> String {
    let debug = format!("{request:?}");
    debug.split('(').next().unwrap_or("?").to_owned()
}
