//! The membership requests of the classic protocol: JoinGroup, SyncGroup, Heartbeat and
//! LeaveGroup, checked and answered as Kafka's group coordinator does.

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::leave_group_response::MemberResponse;
use kafka_protocol::messages::{
    HeartbeatRequest, JoinGroupRequest, LeaveGroupRequest, LeaveGroupResponse, ResponseKind,
    SyncGroupRequest,
};

use super::answer::{self, code, s, JoinAnswer};
use super::member::{GroupClient, Member, Parked};
use super::state::{Group, GroupState};
use super::{CallId, GroupAnswer, GroupCoordinator};

impl GroupCoordinator {
    /// JoinGroup: a new member gets an id (v4+: answered MEMBER_ID_REQUIRED first, joining
    /// with it on its next request), a known member rejoins; the answer waits for the join
    /// phase to complete unless the member's rejoin changes nothing in a settled group.
    pub(super) fn join(
        &mut self,
        now_ms: i64,
        parked: Parked,
        client: &GroupClient,
        req: JoinGroupRequest,
        out: &mut Vec<GroupAnswer>,
    ) {
        let group_id = req.group_id.0.to_string();
        let member_id = req.member_id.to_string();
        let refuse = |e: ResponseError, out: &mut Vec<GroupAnswer>| {
            out.push(JoinAnswer::error(e, &member_id).to(parked));
        };
        if group_id.is_empty() {
            return refuse(ResponseError::InvalidGroupId, out);
        }
        let o = &self.options;
        if req.session_timeout_ms < o.min_session_timeout_ms
            || req.session_timeout_ms > o.max_session_timeout_ms
        {
            return refuse(ResponseError::InvalidSessionTimeout, out);
        }
        if !self.groups.contains_key(&group_id) && !member_id.is_empty() {
            return refuse(ResponseError::UnknownMemberId, out);
        }
        if self
            .groups
            .get(&group_id)
            .is_none_or(|g| g.members.is_empty())
        {
            // Its first member: offsets the sync committed meanwhile are the group's.
            self.refresh_from_store();
        }
        let created = !self.groups.contains_key(&group_id);
        let protocols = Member::protocols_of(&req.protocols);
        let protocol_type = req.protocol_type.to_string();
        let delay = self.options.initial_rebalance_delay_ms;
        let group = self
            .groups
            .entry(group_id.clone())
            .or_insert_with(|| Group::new(Default::default(), Vec::new()));
        if !group.supports(&protocol_type, &protocols) {
            if created {
                self.groups.remove(&group_id);
            }
            return refuse(ResponseError::InconsistentGroupProtocol, out);
        }
        let session = i64::from(req.session_timeout_ms);
        // v0 has no rebalance timeout: the session timeout stands for it.
        let rebalance = if parked.version == 0 {
            session
        } else {
            i64::from(req.rebalance_timeout_ms.max(0))
        };
        let mut member = Member {
            id: member_id.clone(),
            instance_id: req.group_instance_id.as_ref().map(|i| i.to_string()),
            client: client.clone(),
            session_timeout_ms: session,
            rebalance_timeout_ms: rebalance,
            protocols,
            assignment: Bytes::new(),
            awaiting_join: true,
            join_call: Some(parked),
            sync_call: None,
            session_deadline: now_ms.saturating_add(session),
            seq: 0,
        };
        if member_id.is_empty() {
            self.next_member = self.next_member.wrapping_add(1);
            let uuid = uuid::Uuid::from_u64_pair(
                self.options.member_id_nonce ^ (now_ms as u64),
                self.next_member,
            );
            member.id = format!("{}-{uuid}", client.client_id);
            if parked.version >= 4 {
                group
                    .pending
                    .insert(member.id.clone(), now_ms.saturating_add(session));
                return refuse_with_id(out, parked, &member.id);
            }
        } else if group.pending.remove(&member_id).is_none() {
            // A known member rejoins.
            let Some(current) = group.members.get_mut(&member_id) else {
                return refuse(ResponseError::UnknownMemberId, out);
            };
            let unchanged = current.same_protocols(&member.protocols);
            let is_leader = group.leader.as_deref() == Some(member_id.as_str());
            let settled = match group.state {
                GroupState::Empty => return refuse(ResponseError::UnknownMemberId, out),
                GroupState::PreparingRebalance => false,
                GroupState::CompletingRebalance => unchanged,
                GroupState::Stable => unchanged && !is_leader,
            };
            if settled {
                // It missed its answer, or rejoins for nothing: the current generation.
                out.push(group.join_answer(&member_id).to(parked));
                return;
            }
            if let Some(old) = current.join_call.replace(parked) {
                out.push(JoinAnswer::error(ResponseError::RebalanceInProgress, &member_id).to(old));
            }
            current.protocols = member.protocols;
            current.session_timeout_ms = session;
            current.rebalance_timeout_ms = rebalance;
            current.client = member.client;
            current.instance_id = member.instance_id;
            current.awaiting_join = true;
            group.rebalance(now_ms, delay, out);
            return;
        }
        // A new member joins (Kafka's `addMemberThenRebalanceOrCompleteJoin`).
        self.next_seq += 1;
        member.seq = self.next_seq;
        if group.members.is_empty() {
            group.protocol_type = Some(protocol_type);
        }
        if group.leader.is_none() {
            group.leader = Some(member.id.clone());
        }
        if group.state == GroupState::PreparingRebalance && group.generation == 0 {
            if let Some(d) = group.initial_delay.as_mut() {
                d.new_member_added = true;
            }
        }
        group.members.insert(member.id.clone(), member);
        group.rebalance(now_ms, delay, out);
    }

    /// SyncGroup: the leader's assignment completes the rebalance and reaches every member
    /// waiting for it; a follower waits for the leader; in a stable group the member gets its
    /// assignment at once.
    pub(super) fn sync(
        &mut self,
        now_ms: i64,
        parked: Parked,
        req: SyncGroupRequest,
        out: &mut Vec<GroupAnswer>,
    ) {
        let group_id = req.group_id.0.to_string();
        let member_id = req.member_id.to_string();
        if group_id.is_empty() {
            return out.push(answer::sync_error(parked, ResponseError::InvalidGroupId));
        }
        let Some(group) = self.groups.get_mut(&group_id) else {
            return out.push(answer::sync_error(parked, ResponseError::UnknownMemberId));
        };
        if !group.members.contains_key(&member_id) {
            return out.push(answer::sync_error(parked, ResponseError::UnknownMemberId));
        }
        if req.generation_id != group.generation {
            return out.push(answer::sync_error(parked, ResponseError::IllegalGeneration));
        }
        let type_differs = req
            .protocol_type
            .as_ref()
            .is_some_and(|t| group.protocol_type.as_deref() != Some(t.as_str()));
        let name_differs = req
            .protocol_name
            .as_ref()
            .is_some_and(|n| group.protocol.as_deref() != Some(n.as_str()));
        if type_differs || name_differs {
            return out.push(answer::sync_error(
                parked,
                ResponseError::InconsistentGroupProtocol,
            ));
        }
        match group.state {
            GroupState::Empty => {
                out.push(answer::sync_error(parked, ResponseError::UnknownMemberId))
            }
            GroupState::PreparingRebalance => out.push(answer::sync_error(
                parked,
                ResponseError::RebalanceInProgress,
            )),
            GroupState::Stable => {
                group.pending_sync.remove(&member_id);
                let m = group.members.get_mut(&member_id).expect("member checked");
                m.session_deadline = now_ms.saturating_add(m.session_timeout_ms);
                out.push(answer::sync(
                    parked,
                    None,
                    group.protocol_type.as_deref(),
                    group.protocol.as_deref(),
                    m.assignment.clone(),
                ));
            }
            GroupState::CompletingRebalance => {
                group.pending_sync.remove(&member_id);
                let m = group.members.get_mut(&member_id).expect("member checked");
                m.session_deadline = now_ms.saturating_add(m.session_timeout_ms);
                if let Some(old) = m.sync_call.replace(parked) {
                    out.push(answer::sync_error(old, ResponseError::RebalanceInProgress));
                }
                if group.leader.as_deref() != Some(member_id.as_str()) {
                    return;
                }
                for m in group.members.values_mut() {
                    m.assignment = req
                        .assignments
                        .iter()
                        .find(|a| a.member_id.as_str() == m.id)
                        .map(|a| a.assignment.clone())
                        .unwrap_or_default();
                }
                group.state = GroupState::Stable;
                group.previous = GroupState::CompletingRebalance;
                for m in group.members.values_mut() {
                    if let Some(p) = m.sync_call.take() {
                        m.session_deadline = now_ms.saturating_add(m.session_timeout_ms);
                        out.push(answer::sync(
                            p,
                            None,
                            group.protocol_type.as_deref(),
                            group.protocol.as_deref(),
                            m.assignment.clone(),
                        ));
                    }
                }
            }
        }
    }

    /// Heartbeat: keeps the member's session; REBALANCE_IN_PROGRESS tells it to rejoin.
    pub(super) fn heartbeat(
        &mut self,
        now_ms: i64,
        call: CallId,
        req: HeartbeatRequest,
        out: &mut Vec<GroupAnswer>,
    ) {
        let group_id = req.group_id.0.to_string();
        let member_id = req.member_id.to_string();
        let error = if group_id.is_empty() {
            Some(ResponseError::InvalidGroupId)
        } else {
            match self.groups.get_mut(&group_id) {
                None => Some(ResponseError::UnknownMemberId),
                Some(group) => match group.members.get_mut(&member_id) {
                    None => Some(ResponseError::UnknownMemberId),
                    Some(_) if req.generation_id != group.generation => {
                        Some(ResponseError::IllegalGeneration)
                    }
                    Some(m) => {
                        m.session_deadline = now_ms.saturating_add(m.session_timeout_ms);
                        match group.state {
                            GroupState::Empty => Some(ResponseError::UnknownMemberId),
                            GroupState::PreparingRebalance => {
                                Some(ResponseError::RebalanceInProgress)
                            }
                            GroupState::CompletingRebalance | GroupState::Stable => None,
                        }
                    }
                },
            }
        };
        out.push(answer::heartbeat(call, error));
    }

    /// LeaveGroup: v0-2 one member (`member_id`), v3+ a batch (`members`, each answered; a
    /// member named by its `group.instance.id` alone is found by it); the group rebalances
    /// without them.
    pub(super) fn leave(
        &mut self,
        now_ms: i64,
        parked: Parked,
        req: LeaveGroupRequest,
        out: &mut Vec<GroupAnswer>,
    ) {
        let group_id = req.group_id.0.to_string();
        let leaving: Vec<(String, Option<String>)> = if parked.version >= 3 {
            req.members
                .iter()
                .map(|m| {
                    (
                        m.member_id.to_string(),
                        m.group_instance_id.as_ref().map(|i| i.to_string()),
                    )
                })
                .collect()
        } else {
            vec![(req.member_id.to_string(), None)]
        };
        let delay = self.options.initial_rebalance_delay_ms;
        let mut top = None;
        let mut each = Vec::new();
        match self.groups.get_mut(&group_id) {
            _ if group_id.is_empty() => top = Some(ResponseError::InvalidGroupId),
            None => top = Some(ResponseError::UnknownMemberId),
            Some(group) => {
                for (id, instance) in leaving {
                    // An admin client removes a member by its group.instance.id alone.
                    let found = match &instance {
                        Some(i) if id.is_empty() => group
                            .members
                            .values()
                            .find(|m| m.instance_id.as_ref() == Some(i))
                            .map(|m| m.id.clone())
                            .unwrap_or_default(),
                        _ => id.clone(),
                    };
                    let error = if group.pending.remove(&found).is_some() {
                        group.try_complete_join(now_ms, out);
                        None
                    } else if group.members.contains_key(&found) {
                        group.remove_member(&found, now_ms, delay, out);
                        None
                    } else {
                        Some(ResponseError::UnknownMemberId)
                    };
                    each.push((id, instance, error));
                }
            }
        }
        let mut r = LeaveGroupResponse::default();
        if parked.version >= 3 {
            r.error_code = code(top);
            r.members = each
                .into_iter()
                .map(|(id, instance, error)| {
                    let mut m = MemberResponse::default();
                    m.member_id = s(&id);
                    m.group_instance_id = instance.as_deref().map(s);
                    m.error_code = code(error);
                    m
                })
                .collect();
        } else {
            r.error_code = code(top.or(each.first().and_then(|e| e.2)));
        }
        out.push(GroupAnswer {
            call: parked.call,
            response: ResponseKind::LeaveGroup(r),
        });
    }
}

/// MEMBER_ID_REQUIRED, carrying the id to join with.
fn refuse_with_id(out: &mut Vec<GroupAnswer>, parked: Parked, member_id: &str) {
    out.push(JoinAnswer::error(ResponseError::MemberIdRequired, member_id).to(parked));
}
