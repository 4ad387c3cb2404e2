//! The classic consumer-group coordinator of `kmirror serve`: JoinGroup, SyncGroup, Heartbeat,
//! LeaveGroup, OffsetCommit, OffsetFetch, FindCoordinator, DescribeGroups and ListGroups, as
//! Apache Kafka's group coordinator answers them for classic groups.
//!
//! # Contract
//!
//! [`GroupCoordinator`] is pure and single-threaded: no sockets, threads or clock. The server
//! hands it decoded requests with the time (`now_ms`) and gets back [`GroupAnswer`]s, each the
//! response body for one call ([`CallId`], the server's name for a request in flight). A
//! JoinGroup or SyncGroup may be *parked* until the rebalance completes; the answers a request
//! or a timeout completes (its own, and other parked calls) come back from
//! [`GroupCoordinator::handle`] and [`GroupCoordinator::poll`]. The server calls `poll` at
//! [`GroupCoordinator::next_deadline_ms`] and [`GroupCoordinator::forget_calls`] when a
//! connection closes. Kafka answers a connection's requests in order: a server that parks a
//! call must hold that connection's later answers behind it.
//!
//! This node coordinates every group. Committed offsets and the ids of each group's members
//! live in the node's metadata directory (`metadata/consumer-offsets/<group>.json`, see
//! [`crate::sync::local`]), the files the metadata sync commits the source's offsets into: a
//! group's file lists its members whenever they change, so that the sync never commits over a
//! group in use, and the coordinator re-reads the files before it answers OffsetFetch,
//! DescribeGroups and ListGroups and before a group without members commits or gets its first
//! member, so that offsets the sync committed meanwhile are seen. (Two writers, one file: a sync
//! that read a group as empty just before its first member joined may still commit over it
//! once.) A coordinator starts with no members: files listing members (a previous process's)
//! are rewritten without them, and those clients rejoin (UNKNOWN_MEMBER_ID).
//!
//! # Versions ([`GROUP_API_VERSIONS`])
//!
//! FindCoordinator 0-6, JoinGroup 0-9, SyncGroup 0-5, Heartbeat 0-4, LeaveGroup 0-5,
//! OffsetCommit 2-9, OffsetFetch 1-9, DescribeGroups 0-6, ListGroups 0-5: every version
//! kafka-protocol 0.18 decodes, except OffsetCommit and OffsetFetch v10, which name topics by
//! id (Kafka 4.4's Java consumer, kafka-python 2.x and librdkafka all fall back to v9).
//!
//! # What differs from Kafka
//!
//! - Static membership is not supported: `group.instance.id` is kept and reported (and a
//!   LeaveGroup naming only it finds the member), but the member is treated as dynamic (MEMBER_ID_REQUIRED, then an id of its own; a restart
//!   rejoins as a new member). No FENCED_INSTANCE_ID is ever answered.
//! - Only classic groups: a KIP-848 client must use `group.protocol=classic`.
//! - Committed metadata strings and leader epochs are not persisted: OffsetFetch answers ""
//!   and -1; retention times are ignored (offsets are kept until overwritten).
//! - The protocol chosen on a tie of members' votes is the first by name (Kafka leaves the
//!   order of a tie unspecified).
//! - A transactional id's FindCoordinator is COORDINATOR_NOT_AVAILABLE unless
//!   [`GroupOptions::transactions`] says this node coordinates transactions too.
//! - No `group.max.size`, no new-member join timeout, no DeleteGroups.
//! - The empty group id (which Kafka still takes commits for) commits in memory only: its
//!   file name, `.json`, is not read back by [`crate::sync::local::MetadataDir::read_groups`].
//! - Every group file is re-read before OffsetFetch, DescribeGroups, ListGroups and a
//!   memberless group's commit or first join: cheap for the groups one node serves, not for
//!   tens of thousands.

mod answer;
mod describe;
mod member;
mod offsets;
mod rebalance;
mod state;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;

use kafka_protocol::messages::{
    ApiKey, DescribeGroupsRequest, FindCoordinatorRequest, HeartbeatRequest, JoinGroupRequest,
    LeaveGroupRequest, ListGroupsRequest, OffsetCommitRequest, OffsetFetchRequest, RequestKind,
    ResponseKind, SyncGroupRequest,
};

pub use member::GroupClient;

use member::Parked;
use state::Group;

use crate::sync::local::MetadataDir;
use crate::sync::SyncError;

/// The server's name for one request in flight (the serve module's).
pub use super::CallId;

/// The group APIs the coordinator answers, as ApiVersions lists them: (api, min, max).
pub const GROUP_API_VERSIONS: &[(ApiKey, i16, i16)] = &[
    (ApiKey::OffsetCommit, 2, 9),
    (ApiKey::OffsetFetch, 1, 9),
    (ApiKey::FindCoordinator, 0, 6),
    (ApiKey::JoinGroup, 0, 9),
    (ApiKey::Heartbeat, 0, 4),
    (ApiKey::LeaveGroup, 0, 5),
    (ApiKey::SyncGroup, 0, 5),
    (ApiKey::DescribeGroups, 0, 6),
    (ApiKey::ListGroups, 0, 5),
];

/// One answer ready to be sent: the call it answers and Kafka's response body.
#[derive(Clone, Debug, PartialEq)]
pub struct GroupAnswer {
    /// The call it answers.
    pub call: CallId,
    /// The response body, to encode at the call's request version.
    pub response: ResponseKind,
}

/// A request the coordinator answers.
#[derive(Clone, Debug)]
pub enum GroupRequest {
    /// Which node coordinates a group (or a transactional id).
    FindCoordinator(FindCoordinatorRequest),
    /// A member (re)joins its group.
    JoinGroup(JoinGroupRequest),
    /// A member of a new generation asks for its assignment (the leader brings everyone's).
    SyncGroup(SyncGroupRequest),
    /// A member keeps its session.
    Heartbeat(HeartbeatRequest),
    /// Members leave their group.
    LeaveGroup(LeaveGroupRequest),
    /// Offsets committed for a group.
    OffsetCommit(OffsetCommitRequest),
    /// A group's committed offsets asked for.
    OffsetFetch(OffsetFetchRequest),
    /// Groups described.
    DescribeGroups(DescribeGroupsRequest),
    /// Every group listed.
    ListGroups(ListGroupsRequest),
}

impl GroupRequest {
    /// The group request in `kind`, or `kind` back (boxed: it is large) when the coordinator
    /// does not answer it.
    pub fn from_kind(kind: RequestKind) -> Result<GroupRequest, Box<RequestKind>> {
        Ok(match kind {
            RequestKind::FindCoordinator(r) => GroupRequest::FindCoordinator(r),
            RequestKind::JoinGroup(r) => GroupRequest::JoinGroup(r),
            RequestKind::SyncGroup(r) => GroupRequest::SyncGroup(r),
            RequestKind::Heartbeat(r) => GroupRequest::Heartbeat(r),
            RequestKind::LeaveGroup(r) => GroupRequest::LeaveGroup(r),
            RequestKind::OffsetCommit(r) => GroupRequest::OffsetCommit(r),
            RequestKind::OffsetFetch(r) => GroupRequest::OffsetFetch(r),
            RequestKind::DescribeGroups(r) => GroupRequest::DescribeGroups(r),
            RequestKind::ListGroups(r) => GroupRequest::ListGroups(r),
            other => return Err(Box::new(other)),
        })
    }

    /// Its API.
    pub fn api_key(&self) -> ApiKey {
        match self {
            GroupRequest::FindCoordinator(_) => ApiKey::FindCoordinator,
            GroupRequest::JoinGroup(_) => ApiKey::JoinGroup,
            GroupRequest::SyncGroup(_) => ApiKey::SyncGroup,
            GroupRequest::Heartbeat(_) => ApiKey::Heartbeat,
            GroupRequest::LeaveGroup(_) => ApiKey::LeaveGroup,
            GroupRequest::OffsetCommit(_) => ApiKey::OffsetCommit,
            GroupRequest::OffsetFetch(_) => ApiKey::OffsetFetch,
            GroupRequest::DescribeGroups(_) => ApiKey::DescribeGroups,
            GroupRequest::ListGroups(_) => ApiKey::ListGroups,
        }
    }
}

/// What the coordinator cannot answer for: the metadata directory failed. Client input never
/// makes an error; it gets Kafka's error codes in the response.
#[derive(Debug, thiserror::Error)]
pub enum GroupError {
    /// Reading or writing a group file failed. The answers of that call are held and returned
    /// by the next call that succeeds (`poll` retries a second later, see
    /// [`GroupCoordinator::next_deadline_ms`]); a refused commit changed nothing (it is
    /// answered COORDINATOR_NOT_AVAILABLE, so the client retries), a member list is written
    /// again.
    #[error("consumer group store: {0}")]
    Store(#[from] SyncError),
}

/// Settings of the coordinator (Kafka's broker configs of the same names).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupOptions {
    /// `group.initial.rebalance.delay.ms`: how long the first rebalance of an empty group waits
    /// for more members (Kafka's default is 3000; 0 answers a lone consumer at once).
    pub initial_rebalance_delay_ms: i64,
    /// `group.min.session.timeout.ms` (6000).
    pub min_session_timeout_ms: i32,
    /// `group.max.session.timeout.ms` (1800000).
    pub max_session_timeout_ms: i32,
    /// `offset.metadata.max.bytes` (4096).
    pub max_metadata_bytes: usize,
    /// Whether FindCoordinator names this node for transactional ids (false:
    /// COORDINATOR_NOT_AVAILABLE).
    pub transactions: bool,
    /// Mixed into member ids with the join time, so that ids differ between processes.
    pub member_id_nonce: u64,
}

impl Default for GroupOptions {
    fn default() -> Self {
        GroupOptions {
            initial_rebalance_delay_ms: 0,
            min_session_timeout_ms: 6_000,
            max_session_timeout_ms: 1_800_000,
            max_metadata_bytes: 4096,
            transactions: false,
            member_id_nonce: 0,
        }
    }
}

/// The classic group coordinator of one node (see the module documentation).
#[derive(Debug)]
pub struct GroupCoordinator {
    node_id: i32,
    host: String,
    port: i32,
    store: MetadataDir,
    options: GroupOptions,
    groups: BTreeMap<String, Group>,
    /// Members created so far (orders them; part of new member ids).
    next_seq: u64,
    next_member: u64,
    /// Answers held back by a store failure, returned by the next call that succeeds.
    held: Vec<GroupAnswer>,
    /// The store failure of the call in progress.
    failure: Option<GroupError>,
    /// When a failed store write is retried (with the held answers), if one failed.
    store_retry_ms: Option<i64>,
}

/// How long after a failed store write `poll` retries it.
const STORE_RETRY_MS: i64 = 1_000;

impl GroupCoordinator {
    /// `node_id`, `host`, `port`: what FindCoordinator answers (this node is every group's
    /// coordinator). `store`: where offsets and members persist; committed offsets are loaded
    /// from it, and member lists left by a previous process are cleared.
    pub fn new(
        node_id: i32,
        host: String,
        port: i32,
        store: MetadataDir,
    ) -> Result<Self, GroupError> {
        Self::with_options(node_id, host, port, store, GroupOptions::default())
    }

    /// [`Self::new`] with `options`.
    pub fn with_options(
        node_id: i32,
        host: String,
        port: i32,
        store: MetadataDir,
        options: GroupOptions,
    ) -> Result<Self, GroupError> {
        let mut c = GroupCoordinator {
            node_id,
            host,
            port,
            store,
            options,
            groups: BTreeMap::new(),
            next_seq: 0,
            next_member: 0,
            held: Vec::new(),
            failure: None,
            store_retry_ms: None,
        };
        c.refresh_from_store();
        c.store_members();
        match c.failure.take() {
            Some(e) => Err(e),
            None => Ok(c),
        }
    }

    /// Handles one request (`api_version`: the request header's version) from an unnamed
    /// client (see [`Self::handle_from`]). Returns every answer now ready: usually this call's;
    /// a JoinGroup or SyncGroup may be parked until the rebalance completes, and a request may
    /// complete other parked calls. `partition_exists(topic, partition)` says whether the node
    /// has that partition (OffsetCommit answers UNKNOWN_TOPIC_OR_PARTITION otherwise).
    pub fn handle(
        &mut self,
        now_ms: i64,
        call: CallId,
        api_version: i16,
        request: GroupRequest,
        partition_exists: &dyn Fn(&str, i32) -> bool,
    ) -> Result<Vec<GroupAnswer>, GroupError> {
        self.handle_from(
            now_ms,
            call,
            api_version,
            &GroupClient::default(),
            request,
            partition_exists,
        )
    }

    /// [`Self::handle`] for a request from `client` (its client id starts new member ids;
    /// DescribeGroups reports it).
    pub fn handle_from(
        &mut self,
        now_ms: i64,
        call: CallId,
        api_version: i16,
        client: &GroupClient,
        request: GroupRequest,
        partition_exists: &dyn Fn(&str, i32) -> bool,
    ) -> Result<Vec<GroupAnswer>, GroupError> {
        let mut out = Vec::new();
        let parked = Parked {
            call,
            version: api_version,
        };
        // Timeouts due before this request are handled first, as a server polling on time
        // would have.
        self.expire(now_ms, &mut out);
        match request {
            GroupRequest::FindCoordinator(r) => {
                self.find_coordinator(call, api_version, r, &mut out)
            }
            GroupRequest::JoinGroup(r) => self.join(now_ms, parked, client, r, &mut out),
            GroupRequest::SyncGroup(r) => self.sync(now_ms, parked, r, &mut out),
            GroupRequest::Heartbeat(r) => self.heartbeat(now_ms, call, r, &mut out),
            GroupRequest::LeaveGroup(r) => self.leave(now_ms, parked, r, &mut out),
            GroupRequest::OffsetCommit(r) => self.commit(call, r, partition_exists, &mut out),
            GroupRequest::OffsetFetch(r) => self.fetch(call, api_version, r, &mut out),
            GroupRequest::DescribeGroups(r) => self.describe(call, api_version, r, &mut out),
            GroupRequest::ListGroups(r) => self.list(call, api_version, r, &mut out),
        }
        // A deadline of now (an initial delay of 0) completes within the call.
        self.expire(now_ms, &mut out);
        self.finish(now_ms, out)
    }

    /// Timeouts due at `now_ms`: session expiry of members (heartbeats), JoinGroup's rebalance
    /// timeout, the initial-rebalance delay, members that never sent SyncGroup; returns the
    /// parked answers they complete.
    pub fn poll(&mut self, now_ms: i64) -> Result<Vec<GroupAnswer>, GroupError> {
        let mut out = Vec::new();
        self.expire(now_ms, &mut out);
        self.finish(now_ms, out)
    }

    /// When `poll` next has work (None: nothing pending).
    pub fn next_deadline_ms(&self) -> Option<i64> {
        self.groups
            .values()
            .filter_map(Group::next_deadline)
            .chain(self.store_retry_ms)
            .min()
    }

    /// A connection closed: its parked calls are dropped (their ids). Their members stay
    /// until their sessions or the rebalance timeout remove them, as in Kafka.
    pub fn forget_calls(&mut self, calls: &[CallId]) {
        let gone = |p: &Option<Parked>| p.is_some_and(|p| calls.contains(&p.call));
        for g in self.groups.values_mut() {
            for m in g.members.values_mut() {
                if gone(&m.join_call) {
                    m.join_call = None;
                }
                if gone(&m.sync_call) {
                    m.sync_call = None;
                }
            }
        }
        self.held.retain(|a| !calls.contains(&a.call));
    }

    fn expire(&mut self, now_ms: i64, out: &mut Vec<GroupAnswer>) {
        let delay = self.options.initial_rebalance_delay_ms;
        for g in self.groups.values_mut() {
            if g.next_deadline().is_some_and(|d| d <= now_ms) {
                g.expire(now_ms, delay, out);
            }
        }
    }

    /// Writes changed member lists, then returns the answers (with any held ones), or holds
    /// them and returns the store's failure.
    fn finish(
        &mut self,
        now_ms: i64,
        out: Vec<GroupAnswer>,
    ) -> Result<Vec<GroupAnswer>, GroupError> {
        self.store_members();
        let mut answers = std::mem::take(&mut self.held);
        answers.extend(out);
        match self.failure.take() {
            Some(e) => {
                self.held = answers;
                self.store_retry_ms = Some(now_ms.saturating_add(STORE_RETRY_MS));
                Err(e)
            }
            None => {
                self.store_retry_ms = None;
                Ok(answers)
            }
        }
    }
}
