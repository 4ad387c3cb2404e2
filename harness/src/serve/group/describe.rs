//! FindCoordinator (this node coordinates every group), DescribeGroups and ListGroups.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_groups_response::{DescribedGroup, DescribedGroupMember};
use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::list_groups_response::ListedGroup;
use kafka_protocol::messages::{
    BrokerId, DescribeGroupsRequest, DescribeGroupsResponse, FindCoordinatorRequest,
    FindCoordinatorResponse, ListGroupsRequest, ListGroupsResponse, ResponseKind,
};
use kafka_protocol::protocol::StrBytes;

use super::answer::{code, s};
use super::state::GroupState;
use super::{CallId, GroupAnswer, GroupCoordinator};

/// FindCoordinator's key type of a consumer group.
const KEY_GROUP: i8 = 0;
/// FindCoordinator's key type of a transactional id.
const KEY_TRANSACTION: i8 = 1;

impl GroupCoordinator {
    /// FindCoordinator: v0-3 one key, v4+ a batch (`coordinator_keys`). A group key is this
    /// node; a transactional id is this node only with [`super::GroupOptions::transactions`],
    /// else COORDINATOR_NOT_AVAILABLE; other key types are INVALID_REQUEST.
    pub(super) fn find_coordinator(
        &self,
        call: CallId,
        version: i16,
        req: FindCoordinatorRequest,
        out: &mut Vec<GroupAnswer>,
    ) {
        let error = match req.key_type {
            KEY_GROUP => None,
            KEY_TRANSACTION if self.options.transactions => None,
            KEY_TRANSACTION => Some(ResponseError::CoordinatorNotAvailable),
            _ => Some(ResponseError::InvalidRequest),
        };
        let (node, host, port) = match error {
            None => (self.node_id, self.host.as_str(), self.port),
            Some(_) => (-1, "", -1),
        };
        let message = |e: Option<ResponseError>| e.map(|e| s(&e.to_string()));
        let mut r = FindCoordinatorResponse::default();
        if version >= 4 {
            r.coordinators = req
                .coordinator_keys
                .iter()
                .map(|key| {
                    let mut c = Coordinator::default();
                    c.key = key.clone();
                    c.node_id = BrokerId(node);
                    c.host = s(host);
                    c.port = port;
                    c.error_code = code(error);
                    c.error_message = message(error);
                    c
                })
                .collect();
        } else {
            r.error_code = code(error);
            r.error_message = if version >= 1 { message(error) } else { None };
            r.node_id = BrokerId(node);
            r.host = s(host);
            r.port = port;
        }
        out.push(GroupAnswer {
            call,
            response: ResponseKind::FindCoordinator(r),
        });
    }

    /// DescribeGroups: state, protocol and members of each group (member metadata and
    /// assignments only when Stable, as Kafka); a group that does not exist is "Dead" (v6+:
    /// with GROUP_ID_NOT_FOUND). Authorized operations are not computed (i32::MIN).
    pub(super) fn describe(
        &mut self,
        call: CallId,
        version: i16,
        req: DescribeGroupsRequest,
        out: &mut Vec<GroupAnswer>,
    ) {
        self.refresh_from_store();
        let mut r = DescribeGroupsResponse::default();
        r.groups = req
            .groups
            .iter()
            .map(|id| {
                let mut d = DescribedGroup::default();
                d.group_id = id.clone();
                let Some(g) = self.groups.get(id.0.as_str()) else {
                    d.group_state = StrBytes::from_static_str("Dead");
                    if version >= 6 {
                        d.error_code = ResponseError::GroupIdNotFound.code();
                        d.error_message = Some(s(&format!("Group {} not found.", id.0)));
                    }
                    return d;
                };
                let stable = g.state == GroupState::Stable;
                d.group_state = s(g.state.name());
                d.protocol_type = s(g.protocol_type.as_deref().unwrap_or(""));
                d.protocol_data = s(if stable {
                    g.protocol.as_deref().unwrap_or("")
                } else {
                    ""
                });
                d.members = g
                    .members
                    .values()
                    .map(|m| {
                        let mut dm = DescribedGroupMember::default();
                        dm.member_id = s(&m.id);
                        if version >= 4 {
                            dm.group_instance_id = m.instance_id.as_deref().map(s);
                        }
                        dm.client_id = s(&m.client.client_id);
                        dm.client_host = s(&m.client.client_host);
                        if stable {
                            dm.member_metadata =
                                m.metadata(g.protocol.as_deref().unwrap_or_default());
                            dm.member_assignment = m.assignment.clone();
                        }
                        dm
                    })
                    .collect();
                d
            })
            .collect();
        out.push(GroupAnswer {
            call,
            response: ResponseKind::DescribeGroups(r),
        });
    }

    /// ListGroups: every group (v4+ filtered by state, v5+ by type: all of them are
    /// "classic"; filters match case-insensitively).
    pub(super) fn list(
        &mut self,
        call: CallId,
        version: i16,
        req: ListGroupsRequest,
        out: &mut Vec<GroupAnswer>,
    ) {
        self.refresh_from_store();
        let states: Vec<String> = req
            .states_filter
            .iter()
            .map(|x| x.to_ascii_lowercase())
            .collect();
        let types: Vec<String> = req
            .types_filter
            .iter()
            .map(|x| x.to_ascii_lowercase())
            .collect();
        let mut r = ListGroupsResponse::default();
        if !types.is_empty() && !types.iter().any(|t| t == "classic") {
            out.push(GroupAnswer {
                call,
                response: ResponseKind::ListGroups(r),
            });
            return;
        }
        r.groups = self
            .groups
            .iter()
            .filter(|(_, g)| {
                states.is_empty() || states.contains(&g.state.name().to_ascii_lowercase())
            })
            .map(|(id, g)| {
                let mut l = ListedGroup::default();
                l.group_id = kafka_protocol::messages::GroupId(s(id));
                l.protocol_type = s(g.protocol_type.as_deref().unwrap_or(""));
                if version >= 4 {
                    l.group_state = s(g.state.name());
                }
                if version >= 5 {
                    l.group_type = StrBytes::from_static_str("classic");
                }
                l
            })
            .collect();
        out.push(GroupAnswer {
            call,
            response: ResponseKind::ListGroups(r),
        });
    }
}
