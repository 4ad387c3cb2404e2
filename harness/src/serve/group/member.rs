//! One member of a classic group: who it is, what it supports, what it was assigned, and the
//! calls of its that wait for the rebalance.

use bytes::Bytes;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;

use super::CallId;

/// A call parked until the rebalance completes: its id and the version to answer it at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Parked {
    pub call: CallId,
    pub version: i16,
}

/// Who sent a request: the request header's client id and the connection's peer host, as
/// DescribeGroups reports them and as member ids start (`<client id>-<uuid>`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GroupClient {
    /// The request header's client id.
    pub client_id: String,
    /// The client's host, as Kafka prints it (`/127.0.0.1`).
    pub client_host: String,
}

/// A member of a group (dynamic membership: `group.instance.id` is kept for display only).
#[derive(Clone, Debug)]
pub(super) struct Member {
    pub id: String,
    pub instance_id: Option<String>,
    pub client: GroupClient,
    pub session_timeout_ms: i64,
    pub rebalance_timeout_ms: i64,
    /// The protocols it supports, in its order of preference, with their metadata.
    pub protocols: Vec<(String, Bytes)>,
    /// What the leader assigned it in the current generation.
    pub assignment: Bytes,
    /// It sent JoinGroup for the rebalance in progress (`join_call`: the call to answer; `None`
    /// when its connection closed, the member still counts as joined).
    pub awaiting_join: bool,
    pub join_call: Option<Parked>,
    /// It sent SyncGroup and waits for the leader's assignment.
    pub sync_call: Option<Parked>,
    /// When its session expires, unless it waits on the coordinator (join or sync parked).
    pub session_deadline: i64,
    /// Order of arrival: the leader is the earliest member.
    pub seq: u64,
}

impl Member {
    /// The protocols of a JoinGroup request, as stored.
    pub fn protocols_of(request: &[JoinGroupRequestProtocol]) -> Vec<(String, Bytes)> {
        request
            .iter()
            .map(|p| (p.name.to_string(), p.metadata.clone()))
            .collect()
    }

    /// Whether it supports `protocol`.
    pub fn supports(&self, protocol: &str) -> bool {
        self.protocols.iter().any(|(name, _)| name == protocol)
    }

    /// Its metadata for `protocol` (empty when it does not support it).
    pub fn metadata(&self, protocol: &str) -> Bytes {
        self.protocols
            .iter()
            .find(|(name, _)| name == protocol)
            .map(|(_, m)| m.clone())
            .unwrap_or_default()
    }

    /// Its vote: the first of its protocols that is among `candidates`.
    pub fn vote<'a>(&self, candidates: &[&'a str]) -> Option<&'a str> {
        self.protocols
            .iter()
            .find_map(|(name, _)| candidates.iter().find(|c| **c == name.as_str()).copied())
    }

    /// Whether a rejoin with `protocols` changes nothing (same names, same metadata, same
    /// order), so that a rejoin in a stable group needs no rebalance.
    pub fn same_protocols(&self, protocols: &[(String, Bytes)]) -> bool {
        self.protocols == protocols
    }

    /// Whether its session is running (it waits on nobody) and ended at `now_ms`.
    pub fn session_expired(&self, now_ms: i64) -> bool {
        !self.awaiting_join && self.sync_call.is_none() && self.session_deadline <= now_ms
    }
}
