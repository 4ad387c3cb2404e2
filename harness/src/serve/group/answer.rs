//! Kafka response bodies of the membership APIs, each filled only with the fields its version
//! carries (the encoder refuses a field set beyond its version).

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::join_group_response::JoinGroupResponseMember;
use kafka_protocol::messages::{
    HeartbeatResponse, JoinGroupResponse, ResponseKind, SyncGroupResponse,
};
use kafka_protocol::protocol::StrBytes;

use super::member::Parked;
use super::{CallId, GroupAnswer};

/// A Kafka error code (0: none).
pub(super) fn code(error: Option<ResponseError>) -> i16 {
    error.map_or(0, |e| e.code())
}

/// A string field.
pub(super) fn s(text: &str) -> StrBytes {
    StrBytes::from_string(text.to_owned())
}

/// What a JoinGroup response says, whatever its version.
#[derive(Clone, Debug, Default)]
pub(super) struct JoinAnswer {
    pub error: Option<ResponseError>,
    pub generation: i32,
    pub protocol_type: Option<String>,
    pub protocol: Option<String>,
    pub leader: String,
    pub member_id: String,
    /// (member id, instance id, metadata): only the leader's answer lists the members.
    pub members: Vec<(String, Option<String>, Bytes)>,
}

impl JoinAnswer {
    /// An error answer: generation -1, no protocol, no leader (`member_id` is set by
    /// MEMBER_ID_REQUIRED).
    pub fn error(error: ResponseError, member_id: &str) -> JoinAnswer {
        JoinAnswer {
            error: Some(error),
            generation: -1,
            member_id: member_id.to_owned(),
            ..JoinAnswer::default()
        }
    }

    /// The response at `version`.
    pub fn at(&self, call: CallId, version: i16) -> GroupAnswer {
        let mut r = JoinGroupResponse::default();
        r.error_code = code(self.error);
        r.generation_id = self.generation;
        if version >= 7 {
            r.protocol_type = self.protocol_type.as_deref().map(s);
            r.protocol_name = self.protocol.as_deref().map(s);
        } else {
            // Not nullable before v7.
            r.protocol_name = Some(s(self.protocol.as_deref().unwrap_or("")));
        }
        r.leader = s(&self.leader);
        r.member_id = s(&self.member_id);
        r.members = self
            .members
            .iter()
            .map(|(id, instance, metadata)| {
                let mut m = JoinGroupResponseMember::default();
                m.member_id = s(id);
                if version >= 5 {
                    m.group_instance_id = instance.as_deref().map(s);
                }
                m.metadata = metadata.clone();
                m
            })
            .collect();
        GroupAnswer {
            call,
            response: ResponseKind::JoinGroup(r),
        }
    }

    /// The response to a parked call.
    pub fn to(&self, parked: Parked) -> GroupAnswer {
        self.at(parked.call, parked.version)
    }
}

/// A SyncGroup response: `error`, or the member's `assignment` with the group's protocol.
pub(super) fn sync(
    parked: Parked,
    error: Option<ResponseError>,
    protocol_type: Option<&str>,
    protocol: Option<&str>,
    assignment: Bytes,
) -> GroupAnswer {
    let mut r = SyncGroupResponse::default();
    r.error_code = code(error);
    if parked.version >= 5 {
        r.protocol_type = protocol_type.map(s);
        r.protocol_name = protocol.map(s);
    }
    r.assignment = assignment;
    GroupAnswer {
        call: parked.call,
        response: ResponseKind::SyncGroup(r),
    }
}

/// A SyncGroup error response.
pub(super) fn sync_error(parked: Parked, error: ResponseError) -> GroupAnswer {
    sync(parked, Some(error), None, None, Bytes::new())
}

/// A Heartbeat response.
pub(super) fn heartbeat(call: CallId, error: Option<ResponseError>) -> GroupAnswer {
    let mut r = HeartbeatResponse::default();
    r.error_code = code(error);
    GroupAnswer {
        call,
        response: ResponseKind::Heartbeat(r),
    }
}
