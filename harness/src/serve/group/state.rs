//! One classic group and its state machine (Kafka's `ClassicGroup`): Empty, PreparingRebalance
//! (waiting for the members to rejoin), CompletingRebalance (waiting for the leader's
//! assignment), Stable. The transitions return the answers they complete into `out`.

use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kmirror_kernel::sync::group_offsets::TopicPartition;

use super::answer::{self, JoinAnswer};
use super::member::Member;
use super::GroupAnswer;

/// The state of a classic group, named as Kafka names it in DescribeGroups and ListGroups.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum GroupState {
    Empty,
    PreparingRebalance,
    CompletingRebalance,
    Stable,
}

impl GroupState {
    /// Kafka's name of the state.
    pub fn name(self) -> &'static str {
        match self {
            GroupState::Empty => "Empty",
            GroupState::PreparingRebalance => "PreparingRebalance",
            GroupState::CompletingRebalance => "CompletingRebalance",
            GroupState::Stable => "Stable",
        }
    }
}

/// The initial rebalance's delay (`group.initial.rebalance.delay.ms`): how long it waits
/// again when a member joined during the last wait, and what is left of the rebalance timeout.
#[derive(Clone, Copy, Debug)]
pub(super) struct InitialDelay {
    pub delay_ms: i64,
    pub remaining_ms: i64,
    pub new_member_added: bool,
}

/// A consumer group: membership, the current generation, committed offsets.
#[derive(Clone, Debug)]
pub(super) struct Group {
    pub state: GroupState,
    /// The state before the current one (a rebalance from Empty waits out the initial delay).
    pub previous: GroupState,
    pub generation: i32,
    pub protocol_type: Option<String>,
    pub protocol: Option<String>,
    pub leader: Option<String>,
    pub members: BTreeMap<String, Member>,
    /// Member ids handed out with MEMBER_ID_REQUIRED, not joined yet, with their expiry.
    pub pending: BTreeMap<String, i64>,
    /// When the join phase ends (the rebalance timeout or the initial delay).
    pub join_deadline: Option<i64>,
    pub initial_delay: Option<InitialDelay>,
    /// Members of the new generation that have not sent SyncGroup yet, and their deadline.
    pub pending_sync: BTreeSet<String>,
    pub sync_deadline: Option<i64>,
    pub offsets: BTreeMap<TopicPartition, i64>,
    /// The member ids the group file lists now.
    pub stored_members: Vec<String>,
}

impl Group {
    /// A group with no members and `offsets`, whose file lists `stored_members`.
    pub fn new(offsets: BTreeMap<TopicPartition, i64>, stored_members: Vec<String>) -> Group {
        Group {
            state: GroupState::Empty,
            previous: GroupState::Empty,
            generation: 0,
            protocol_type: None,
            protocol: None,
            leader: None,
            members: BTreeMap::new(),
            pending: BTreeMap::new(),
            join_deadline: None,
            initial_delay: None,
            pending_sync: BTreeSet::new(),
            sync_deadline: None,
            offsets,
            stored_members,
        }
    }

    /// The ids of its members, sorted (what the group file lists).
    pub fn member_ids(&self) -> Vec<String> {
        self.members.keys().cloned().collect()
    }

    /// Whether the group file's member list is not the members' ids.
    pub fn members_unstored(&self) -> bool {
        !self.members.keys().eq(self.stored_members.iter())
    }

    fn transition(&mut self, to: GroupState) {
        self.previous = self.state;
        self.state = to;
    }

    /// The longest rebalance timeout of its members.
    fn rebalance_timeout_ms(&self) -> i64 {
        self.members
            .values()
            .map(|m| m.rebalance_timeout_ms)
            .max()
            .unwrap_or(0)
    }

    /// The protocols every member supports (all of a joining member's when it is alone).
    fn candidates(&self) -> Vec<&str> {
        let mut members = self.members.values();
        let Some(first) = members.next() else {
            return Vec::new();
        };
        let rest: Vec<&Member> = members.collect();
        first
            .protocols
            .iter()
            .map(|(name, _)| name.as_str())
            .filter(|name| rest.iter().all(|m| m.supports(name)))
            .collect()
    }

    /// Whether a member with `protocol_type` and `protocols` may join (Kafka's
    /// `supportsProtocols`): any non-empty type and list in an empty group, else the group's
    /// type and at least one protocol every member supports.
    pub fn supports(&self, protocol_type: &str, protocols: &[(String, Bytes)]) -> bool {
        if self.members.is_empty() {
            return !protocol_type.is_empty() && !protocols.is_empty();
        }
        self.protocol_type.as_deref() == Some(protocol_type)
            && self
                .candidates()
                .iter()
                .any(|c| protocols.iter().any(|(name, _)| name == c))
    }

    /// The protocol of the next generation: among those every member supports, the one most
    /// members prefer (each votes for its first supported one); ties go to the first in name
    /// order.
    fn select_protocol(&self) -> Option<String> {
        let candidates = self.candidates();
        let mut votes: BTreeMap<&str, usize> = BTreeMap::new();
        for m in self.members.values() {
            if let Some(v) = m.vote(&candidates) {
                *votes.entry(v).or_default() += 1;
            }
        }
        let best = votes.values().copied().max()?;
        votes
            .into_iter()
            .find(|(_, n)| *n == best)
            .map(|(name, _)| name.to_owned())
    }

    /// Whether every member has rejoined and no member id handed out is still unused.
    fn all_joined(&self) -> bool {
        self.members.values().all(|m| m.awaiting_join) && self.pending.is_empty()
    }

    /// The answer for `member_id` about the current generation (the leader's lists the
    /// members with their metadata for the chosen protocol).
    pub fn join_answer(&self, member_id: &str) -> JoinAnswer {
        let protocol = self.protocol.clone().unwrap_or_default();
        let is_leader = self.leader.as_deref() == Some(member_id);
        JoinAnswer {
            error: None,
            generation: self.generation,
            protocol_type: self.protocol_type.clone(),
            protocol: self.protocol.clone(),
            leader: self.leader.clone().unwrap_or_default(),
            member_id: member_id.to_owned(),
            members: if is_leader {
                self.members
                    .values()
                    .map(|m| (m.id.clone(), m.instance_id.clone(), m.metadata(&protocol)))
                    .collect()
            } else {
                Vec::new()
            },
        }
    }

    /// Starts a rebalance if none is in progress (Kafka's `maybePrepareRebalance`), else
    /// checks whether the one in progress can complete.
    pub fn rebalance(&mut self, now_ms: i64, initial_delay_ms: i64, out: &mut Vec<GroupAnswer>) {
        if self.state == GroupState::PreparingRebalance {
            self.try_complete_join(now_ms, out);
        } else {
            self.prepare_rebalance(now_ms, initial_delay_ms, out);
        }
    }

    /// Kafka's `prepareRebalance`: assignments of a generation not yet synced are void (the
    /// members waiting in SyncGroup get REBALANCE_IN_PROGRESS), and the join phase starts;
    /// from Empty it waits the initial delay first.
    fn prepare_rebalance(
        &mut self,
        now_ms: i64,
        initial_delay_ms: i64,
        out: &mut Vec<GroupAnswer>,
    ) {
        if self.state == GroupState::CompletingRebalance {
            for m in self.members.values_mut() {
                m.assignment = Bytes::new();
                if let Some(parked) = m.sync_call.take() {
                    out.push(answer::sync_error(
                        parked,
                        ResponseError::RebalanceInProgress,
                    ));
                }
            }
        }
        self.pending_sync.clear();
        self.sync_deadline = None;
        let timeout = self.rebalance_timeout_ms();
        if self.state == GroupState::Empty {
            let delay_ms = initial_delay_ms.min(timeout).max(0);
            self.initial_delay = Some(InitialDelay {
                delay_ms,
                remaining_ms: (timeout - delay_ms).max(0),
                new_member_added: false,
            });
            self.join_deadline = Some(now_ms.saturating_add(delay_ms));
        } else {
            self.initial_delay = None;
            self.join_deadline = Some(now_ms.saturating_add(timeout));
        }
        self.transition(GroupState::PreparingRebalance);
        self.try_complete_join(now_ms, out);
    }

    /// Completes the join phase when every member has rejoined, unless it is the initial
    /// rebalance (that one waits for its delay).
    pub fn try_complete_join(&mut self, now_ms: i64, out: &mut Vec<GroupAnswer>) {
        if self.state == GroupState::PreparingRebalance
            && self.previous != GroupState::Empty
            && self.all_joined()
        {
            self.complete_join(now_ms, out);
        }
    }

    /// The join deadline passed: the initial delay waits again if members joined meanwhile
    /// (while the rebalance timeout lasts), else the join phase completes.
    pub fn join_deadline_passed(&mut self, now_ms: i64, out: &mut Vec<GroupAnswer>) {
        if let Some(d) = self.initial_delay.as_mut() {
            if d.new_member_added && d.remaining_ms > 0 {
                let delay = d.delay_ms.min(d.remaining_ms);
                d.remaining_ms = (d.remaining_ms - d.delay_ms).max(0);
                d.new_member_added = false;
                self.join_deadline = Some(now_ms.saturating_add(delay));
                return;
            }
        }
        self.complete_join(now_ms, out);
    }

    /// Kafka's `completeClassicGroupJoin`: members that did not rejoin are removed, the next
    /// generation starts (Empty when nobody is left), and every joined member gets its answer.
    fn complete_join(&mut self, now_ms: i64, out: &mut Vec<GroupAnswer>) {
        self.join_deadline = None;
        self.initial_delay = None;
        let gone: Vec<String> = self
            .members
            .values()
            .filter(|m| !m.awaiting_join)
            .map(|m| m.id.clone())
            .collect();
        for id in gone {
            self.drop_member(&id, out);
        }
        self.generation = self.generation.saturating_add(1);
        if self.members.is_empty() {
            self.protocol = None;
            self.leader = None;
            self.transition(GroupState::Empty);
            return;
        }
        self.protocol = self.select_protocol();
        if self
            .leader
            .as_ref()
            .is_none_or(|l| !self.members.contains_key(l))
        {
            self.leader = self.first_member();
        }
        self.transition(GroupState::CompletingRebalance);
        let timeout = self.rebalance_timeout_ms();
        let ids = self.member_ids();
        for id in &ids {
            let join = self.join_answer(id);
            let m = self.members.get_mut(id).expect("member listed");
            m.awaiting_join = false;
            m.session_deadline = now_ms.saturating_add(m.session_timeout_ms);
            if let Some(parked) = m.join_call.take() {
                out.push(join.to(parked));
            }
        }
        self.pending_sync = ids.into_iter().collect();
        self.sync_deadline = Some(now_ms.saturating_add(timeout));
    }

    /// The earliest member still in the group.
    fn first_member(&self) -> Option<String> {
        self.members
            .values()
            .min_by_key(|m| m.seq)
            .map(|m| m.id.clone())
    }

    /// Removes member `id` without rebalancing: its parked calls get UNKNOWN_MEMBER_ID, and
    /// the leader passes to the earliest remaining member.
    fn drop_member(&mut self, id: &str, out: &mut Vec<GroupAnswer>) {
        let Some(mut m) = self.members.remove(id) else {
            return;
        };
        if let Some(parked) = m.join_call.take() {
            out.push(JoinAnswer::error(ResponseError::UnknownMemberId, id).to(parked));
        }
        if let Some(parked) = m.sync_call.take() {
            out.push(answer::sync_error(parked, ResponseError::UnknownMemberId));
        }
        self.pending_sync.remove(id);
        if self.leader.as_deref() == Some(id) {
            self.leader = self.first_member();
        }
    }

    /// Removes member `id` (it left, or its session expired) and rebalances the others
    /// (Kafka's `removeMemberAndUpdateGroup`).
    pub fn remove_member(
        &mut self,
        id: &str,
        now_ms: i64,
        initial_delay_ms: i64,
        out: &mut Vec<GroupAnswer>,
    ) {
        self.drop_member(id, out);
        match self.state {
            GroupState::Empty => {}
            GroupState::PreparingRebalance => self.try_complete_join(now_ms, out),
            GroupState::CompletingRebalance | GroupState::Stable => {
                self.prepare_rebalance(now_ms, initial_delay_ms, out)
            }
        }
    }

    /// Every timeout due at `now_ms`: pending member ids unused for a session, expired
    /// sessions, the join phase's deadline, members that never sent SyncGroup.
    pub fn expire(&mut self, now_ms: i64, initial_delay_ms: i64, out: &mut Vec<GroupAnswer>) {
        let unused: Vec<String> = self
            .pending
            .iter()
            .filter(|(_, deadline)| **deadline <= now_ms)
            .map(|(id, _)| id.clone())
            .collect();
        for id in unused {
            self.pending.remove(&id);
            self.try_complete_join(now_ms, out);
        }
        let expired: Vec<String> = self
            .members
            .values()
            .filter(|m| m.session_expired(now_ms))
            .map(|m| m.id.clone())
            .collect();
        for id in expired {
            self.remove_member(&id, now_ms, initial_delay_ms, out);
        }
        if self.join_deadline.is_some_and(|d| d <= now_ms) {
            self.join_deadline_passed(now_ms, out);
        }
        if self.sync_deadline.is_some_and(|d| d <= now_ms) {
            self.sync_deadline = None;
            let late: Vec<String> = std::mem::take(&mut self.pending_sync).into_iter().collect();
            if !late.is_empty() {
                for id in &late {
                    self.drop_member(id, out);
                }
                self.rebalance(now_ms, initial_delay_ms, out);
            }
        }
    }

    /// When [`Self::expire`] next has work.
    pub fn next_deadline(&self) -> Option<i64> {
        let sessions = self
            .members
            .values()
            .filter(|m| !m.awaiting_join && m.sync_call.is_none())
            .map(|m| m.session_deadline);
        self.pending
            .values()
            .copied()
            .chain(sessions)
            .chain(self.join_deadline)
            .chain(self.sync_deadline)
            .min()
    }
}
