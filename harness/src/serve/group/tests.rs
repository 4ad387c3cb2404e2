//! The coordinator driven as Kafka's clients drive it, answers asserted exactly; every answer
//! is also encoded at its call's version (a field beyond the version would fail there).

use std::collections::{BTreeMap, HashMap};

use bytes::{Bytes, BytesMut};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::{
    OffsetFetchRequestGroup, OffsetFetchRequestTopic, OffsetFetchRequestTopics,
};
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kmirror_kernel::sync::group_offsets::TopicPartition;

use super::*;
use crate::sync::GroupRecord;

const GROUP: &str = "billing";
const SESSION: i32 = 10_000;
const REBALANCE: i32 = 30_000;

fn s(x: &str) -> StrBytes {
    StrBytes::from_string(x.to_owned())
}

/// `orders` has partitions 0-3; nothing else exists.
fn exists(topic: &str, partition: i32) -> bool {
    topic == "orders" && (0..4).contains(&partition)
}

/// A coordinator over a temporary metadata directory, remembering each call's version to
/// encode its answer at.
struct Node {
    dir: tempfile::TempDir,
    c: GroupCoordinator,
    versions: HashMap<CallId, i16>,
    next_call: CallId,
}

impl Node {
    fn new() -> Node {
        Self::with(GroupOptions::default())
    }

    fn with(options: GroupOptions) -> Node {
        let dir = tempfile::tempdir().unwrap();
        let c = GroupCoordinator::with_options(
            7,
            "node-7".into(),
            9092,
            MetadataDir::of(dir.path()),
            options,
        )
        .unwrap();
        Node {
            dir,
            c,
            versions: HashMap::new(),
            next_call: 0,
        }
    }

    fn store(&self) -> MetadataDir {
        MetadataDir::of(self.dir.path())
    }

    /// A new coordinator over the same directory.
    fn restart(&mut self) {
        self.c = GroupCoordinator::new(7, "node-7".into(), 9092, self.store()).unwrap();
    }

    /// Sends `request` at `version`; returns its call id and every answer, each checked to
    /// encode at its call's version.
    fn send(
        &mut self,
        now: i64,
        version: i16,
        request: GroupRequest,
    ) -> (CallId, Vec<GroupAnswer>) {
        self.next_call += 1;
        let call = self.next_call;
        self.versions.insert(call, version);
        let client = GroupClient {
            client_id: "app".into(),
            client_host: "/127.0.0.1".into(),
        };
        let answers = self
            .c
            .handle_from(now, call, version, &client, request, &exists)
            .unwrap();
        self.check(&answers);
        (call, answers)
    }

    fn poll(&mut self, now: i64) -> Vec<GroupAnswer> {
        let answers = self.c.poll(now).unwrap();
        self.check(&answers);
        answers
    }

    fn check(&self, answers: &[GroupAnswer]) {
        for a in answers {
            let v = self.versions[&a.call];
            a.response
                .encode(&mut BytesMut::new(), v)
                .unwrap_or_else(|e| panic!("{:?} at v{v}: {e}", a.response));
        }
    }

    /// Sends `request` and expects exactly its own answer.
    fn ask(&mut self, now: i64, version: i16, request: GroupRequest) -> ResponseKind {
        let (call, mut answers) = self.send(now, version, request);
        assert_eq!(answers.len(), 1, "{answers:?}");
        let a = answers.remove(0);
        assert_eq!(a.call, call);
        a.response
    }

    /// Joins as a new member at `version` (4+: MEMBER_ID_REQUIRED first): the member id.
    fn member_id(&mut self, now: i64, version: i16, protocols: &[(&str, &[u8])]) -> String {
        let r = join_of(self.ask(now, version, join(GROUP, "", protocols)));
        assert_eq!(r.error_code, ResponseError::MemberIdRequired.code());
        assert_eq!(r.generation_id, -1);
        assert!(r.member_id.starts_with("app-"), "{r:?}");
        r.member_id.to_string()
    }
}

fn join(group: &str, member: &str, protocols: &[(&str, &[u8])]) -> GroupRequest {
    let mut r = JoinGroupRequest::default();
    r.group_id = GroupId(s(group));
    r.member_id = s(member);
    r.session_timeout_ms = SESSION;
    r.rebalance_timeout_ms = REBALANCE;
    r.protocol_type = s("consumer");
    r.protocols = protocols
        .iter()
        .map(|(name, metadata)| {
            let mut p = JoinGroupRequestProtocol::default();
            p.name = s(name);
            p.metadata = Bytes::copy_from_slice(metadata);
            p
        })
        .collect();
    GroupRequest::JoinGroup(r)
}

fn sync(member: &str, generation: i32, assignments: &[(&str, &[u8])]) -> GroupRequest {
    let mut r = SyncGroupRequest::default();
    r.group_id = GroupId(s(GROUP));
    r.member_id = s(member);
    r.generation_id = generation;
    r.assignments = assignments
        .iter()
        .map(|(m, a)| {
            let mut x = SyncGroupRequestAssignment::default();
            x.member_id = s(m);
            x.assignment = Bytes::copy_from_slice(a);
            x
        })
        .collect();
    GroupRequest::SyncGroup(r)
}

fn heartbeat(member: &str, generation: i32) -> GroupRequest {
    let mut r = HeartbeatRequest::default();
    r.group_id = GroupId(s(GROUP));
    r.member_id = s(member);
    r.generation_id = generation;
    GroupRequest::Heartbeat(r)
}

fn commit(member: &str, generation: i32, offsets: &[(&str, i32, i64)]) -> GroupRequest {
    let mut r = OffsetCommitRequest::default();
    r.group_id = GroupId(s(GROUP));
    r.member_id = s(member);
    r.generation_id_or_member_epoch = generation;
    let mut topics: Vec<OffsetCommitRequestTopic> = Vec::new();
    for (topic, partition, offset) in offsets {
        let mut p = OffsetCommitRequestPartition::default();
        p.partition_index = *partition;
        p.committed_offset = *offset;
        match topics.iter_mut().find(|t| t.name.0.as_str() == *topic) {
            Some(t) => t.partitions.push(p),
            None => {
                let mut t = OffsetCommitRequestTopic::default();
                t.name = TopicName(s(topic));
                t.partitions.push(p);
                topics.push(t);
            }
        }
    }
    r.topics = topics;
    GroupRequest::OffsetCommit(r)
}

fn join_of(r: ResponseKind) -> JoinGroupResponse {
    match r {
        ResponseKind::JoinGroup(x) => x,
        other => panic!("not a JoinGroup response: {other:?}"),
    }
}

fn sync_of(r: ResponseKind) -> SyncGroupResponse {
    match r {
        ResponseKind::SyncGroup(x) => x,
        other => panic!("not a SyncGroup response: {other:?}"),
    }
}

fn heartbeat_code(r: ResponseKind) -> i16 {
    match r {
        ResponseKind::Heartbeat(x) => x.error_code,
        other => panic!("not a Heartbeat response: {other:?}"),
    }
}

/// (topic, partition, error code) of an OffsetCommit response.
fn commit_codes(r: ResponseKind) -> Vec<(String, i32, i16)> {
    let ResponseKind::OffsetCommit(x) = r else {
        panic!("not an OffsetCommit response: {r:?}");
    };
    x.topics
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(|p| (t.name.0.to_string(), p.partition_index, p.error_code))
        })
        .collect()
}

/// (topic, partition, offset) of a v1-7 OffsetFetch response, every error code 0.
fn fetched(r: ResponseKind) -> Vec<(String, i32, i64)> {
    let ResponseKind::OffsetFetch(x) = r else {
        panic!("not an OffsetFetch response: {r:?}");
    };
    assert_eq!(x.error_code, 0);
    x.topics
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(|p| {
                assert_eq!((p.error_code, p.committed_leader_epoch), (0, -1));
                (t.name.0.to_string(), p.partition_index, p.committed_offset)
            })
        })
        .collect()
}

fn fetch(version: i16, topics: Option<&[(&str, &[i32])]>) -> GroupRequest {
    let mut r = OffsetFetchRequest::default();
    r.group_id = GroupId(s(GROUP));
    r.topics = topics.map(|ts| {
        ts.iter()
            .map(|(name, parts)| {
                let mut t = OffsetFetchRequestTopic::default();
                t.name = TopicName(s(name));
                t.partition_indexes = parts.to_vec();
                t
            })
            .collect()
    });
    if version >= 8 {
        r.group_id = GroupId::default();
        r.topics = None;
    }
    GroupRequest::OffsetFetch(r)
}

fn strs(x: &[&str]) -> Vec<String> {
    x.iter().map(|x| x.to_string()).collect()
}

/// A lone consumer joins, leads generation 1 and syncs: the running example of the classic
/// protocol. Returns its member id.
fn lone_consumer(n: &mut Node, now: i64) -> String {
    let id = n.member_id(now, 9, &[("range", b"r1")]);
    let r = join_of(n.ask(now, 9, join(GROUP, &id, &[("range", b"r1")])));
    assert_eq!(
        (
            r.error_code,
            r.generation_id,
            r.leader.as_str(),
            r.member_id.as_str()
        ),
        (0, 1, id.as_str(), id.as_str())
    );
    assert_eq!(r.protocol_type.as_deref(), Some("consumer"));
    assert_eq!(r.protocol_name.as_deref(), Some("range"));
    assert_eq!(r.members.len(), 1);
    assert_eq!(
        (r.members[0].member_id.as_str(), &r.members[0].metadata[..]),
        (id.as_str(), &b"r1"[..])
    );
    let r = sync_of(n.ask(now, 5, sync(&id, 1, &[(&id, b"all of it")])));
    assert_eq!(r.error_code, 0);
    assert_eq!(&r.assignment[..], b"all of it");
    assert_eq!(r.protocol_name.as_deref(), Some("range"));
    id
}

/// A lone consumer `a` (generation 1, synced at 1_000), then `b` joins at 2_000: its join is
/// parked until `a` rejoins. Returns `(a, b, b's join call)`.
fn second_member(n: &mut Node) -> (String, String, CallId) {
    let a = lone_consumer(n, 1_000);
    let b = n.member_id(2_000, 9, &[("range", b"")]);
    let (b_join, answers) = n.send(2_000, 9, join(GROUP, &b, &[("range", b"")]));
    assert_eq!(answers, vec![]);
    (a, b, b_join)
}

/// [`second_member`], then `a` rejoins at 2_100: both are answered, generation 2 waits for
/// the leader's (a's) assignment.
fn generation_two(n: &mut Node) -> (String, String) {
    let (a, b, _) = second_member(n);
    let (_, answers) = n.send(2_100, 9, join(GROUP, &a, &[("range", b"")]));
    assert_eq!(answers.len(), 2, "{answers:?}");
    (a, b)
}

/// [`generation_two`], then `b` (2_200) and `a` (2_300) sync: a stable generation 2.
fn stable_pair(n: &mut Node) -> (String, String) {
    let (a, b) = generation_two(n);
    let (_, none) = n.send(2_200, 5, sync(&b, 2, &[]));
    assert_eq!(none, vec![]);
    let (_, answers) = n.send(2_300, 5, sync(&a, 2, &[]));
    assert_eq!(answers.len(), 2, "{answers:?}");
    (a, b)
}

#[test]
fn a_lone_consumer_gets_an_id_leads_generation_one_and_its_own_assignment() {
    let mut n = Node::new();
    let id = lone_consumer(&mut n, 1_000);
    assert_eq!(heartbeat_code(n.ask(1_500, 4, heartbeat(&id, 1))), 0);
    // Its id is listed in the group file as soon as it is a member.
    let groups = n.store().read_groups().unwrap().value;
    assert_eq!(groups[GROUP].members, vec![id.clone()]);
    // A join with an id the group never handed out.
    let r = join_of(n.ask(1_600, 9, join(GROUP, "app-stranger", &[("range", b"")])));
    assert_eq!(r.error_code, ResponseError::UnknownMemberId.code());
    let r = join_of(n.ask(1_600, 9, join("nobody", "app-stranger", &[("range", b"")])));
    assert_eq!(r.error_code, ResponseError::UnknownMemberId.code());
    // A rejoin of a follower-less leader rebalances into generation 2 at once.
    let r = join_of(n.ask(2_000, 9, join(GROUP, &id, &[("range", b"r1")])));
    assert_eq!((r.error_code, r.generation_id), (0, 2));
}

#[test]
fn a_second_consumer_rebalances_the_group_and_gets_the_leaders_assignment() {
    let mut n = Node::new();
    let a = lone_consumer(&mut n, 1_000);
    let b = n.member_id(2_000, 9, &[("roundrobin", b"b-rr"), ("range", b"b-r")]);
    // b's join is parked: the group waits for a to rejoin.
    let (b_join, answers) = n.send(
        2_000,
        9,
        join(GROUP, &b, &[("roundrobin", b"b-rr"), ("range", b"b-r")]),
    );
    assert_eq!(answers, vec![]);
    // a's session (from its sync at 1_000) keeps running while it has not rejoined.
    assert_eq!(n.c.next_deadline_ms(), Some(1_000 + i64::from(SESSION)));
    assert_eq!(
        heartbeat_code(n.ask(2_500, 4, heartbeat(&a, 1))),
        ResponseError::RebalanceInProgress.code()
    );
    // a rejoins: both joins are answered, a (the leader) with both members' metadata for the
    // only protocol both support.
    let (a_join, answers) = n.send(3_000, 9, join(GROUP, &a, &[("range", b"a-r")]));
    assert_eq!(answers.len(), 2, "{answers:?}");
    let by_call: BTreeMap<CallId, JoinGroupResponse> = answers
        .into_iter()
        .map(|x| (x.call, join_of(x.response)))
        .collect();
    let ra = &by_call[&a_join];
    let rb = &by_call[&b_join];
    assert_eq!(
        (ra.error_code, ra.generation_id, ra.leader.as_str()),
        (0, 2, a.as_str())
    );
    assert_eq!(ra.protocol_name.as_deref(), Some("range"));
    let mut members: Vec<(String, Vec<u8>)> = ra
        .members
        .iter()
        .map(|m| (m.member_id.to_string(), m.metadata.to_vec()))
        .collect();
    members.sort();
    let mut expected = vec![(a.clone(), b"a-r".to_vec()), (b.clone(), b"b-r".to_vec())];
    expected.sort();
    assert_eq!(members, expected);
    assert_eq!(
        (rb.error_code, rb.generation_id, rb.leader.as_str()),
        (0, 2, a.as_str())
    );
    assert_eq!(rb.member_id.as_str(), b);
    assert!(rb.members.is_empty());
    // The follower's sync waits for the leader's, which brings both assignments.
    let (b_sync, answers) = n.send(3_100, 3, sync(&b, 2, &[]));
    assert_eq!(answers, vec![]);
    let (a_sync, answers) = n.send(3_200, 5, sync(&a, 2, &[(&a, b"p0,p1"), (&b, b"p2,p3")]));
    let by_call: BTreeMap<CallId, SyncGroupResponse> = answers
        .into_iter()
        .map(|x| (x.call, sync_of(x.response)))
        .collect();
    assert_eq!(by_call.len(), 2);
    assert_eq!(
        (
            by_call[&a_sync].error_code,
            &by_call[&a_sync].assignment[..]
        ),
        (0, &b"p0,p1"[..])
    );
    assert_eq!(
        (
            by_call[&b_sync].error_code,
            &by_call[&b_sync].assignment[..]
        ),
        (0, &b"p2,p3"[..])
    );
    // v3 has no protocol fields; v5 has them.
    assert_eq!(by_call[&b_sync].protocol_name, None);
    assert_eq!(by_call[&a_sync].protocol_name.as_deref(), Some("range"));
    // Generation 1 is over.
    assert_eq!(
        heartbeat_code(n.ask(3_300, 4, heartbeat(&b, 1))),
        ResponseError::IllegalGeneration.code()
    );
    assert_eq!(heartbeat_code(n.ask(3_300, 4, heartbeat(&b, 2))), 0);
    let mut members = n.store().read_groups().unwrap().value[GROUP]
        .members
        .clone();
    members.sort();
    let mut expected = vec![a, b];
    expected.sort();
    assert_eq!(members, expected);
}

#[test]
fn a_silent_member_is_removed_after_its_session_and_the_group_rebalances() {
    let mut n = Node::new();
    let (a, b) = stable_pair(&mut n);
    // a heartbeats, b is silent: b's session (joined at 2_100, synced at 2_300) ends at 12_300.
    assert_eq!(heartbeat_code(n.ask(9_000, 4, heartbeat(&a, 2))), 0);
    assert_eq!(n.c.next_deadline_ms(), Some(2_300 + i64::from(SESSION)));
    assert_eq!(n.poll(12_299), vec![]);
    assert_eq!(n.poll(12_300), vec![]);
    assert_eq!(
        n.store().read_groups().unwrap().value[GROUP].members,
        vec![a.clone()]
    );
    assert_eq!(
        heartbeat_code(n.ask(12_400, 4, heartbeat(&a, 2))),
        ResponseError::RebalanceInProgress.code()
    );
    assert_eq!(
        heartbeat_code(n.ask(12_400, 4, heartbeat(&b, 2))),
        ResponseError::UnknownMemberId.code()
    );
    let r = join_of(n.ask(12_500, 9, join(GROUP, &a, &[("range", b"")])));
    assert_eq!((r.error_code, r.generation_id, r.members.len()), (0, 3, 1));
    // Then a goes silent too: the group is empty, and its file says so.
    let r = sync_of(n.ask(12_600, 5, sync(&a, 3, &[])));
    assert_eq!(r.error_code, 0);
    n.poll(12_600 + i64::from(SESSION));
    assert!(n.store().read_groups().unwrap().value[GROUP]
        .members
        .is_empty());
    assert_eq!(n.c.next_deadline_ms(), None);
}

#[test]
fn a_member_that_does_not_rejoin_is_dropped_at_the_rebalance_timeout() {
    let mut n = Node::new();
    let (a, b, b_join) = second_member(&mut n);
    // a keeps heartbeating but never rejoins.
    for now in [9_000, 18_000, 27_000] {
        assert_eq!(
            heartbeat_code(n.ask(now, 4, heartbeat(&a, 1))),
            ResponseError::RebalanceInProgress.code()
        );
    }
    assert_eq!(n.poll(31_999), vec![]);
    let answers = n.poll(2_000 + i64::from(REBALANCE));
    assert_eq!(answers.len(), 1);
    assert_eq!(answers[0].call, b_join);
    let r = join_of(answers[0].response.clone());
    assert_eq!(
        (r.error_code, r.generation_id, r.leader.as_str()),
        (0, 2, b.as_str())
    );
    assert_eq!(r.members.len(), 1);
    assert_eq!(
        heartbeat_code(n.ask(32_100, 4, heartbeat(&a, 1))),
        ResponseError::UnknownMemberId.code()
    );
}

#[test]
fn leaving_rebalances_the_others_and_a_batch_leave_answers_each_member() {
    let mut n = Node::new();
    let (a, b) = stable_pair(&mut n);
    // v0-2: one member, one error code.
    let mut leave = LeaveGroupRequest::default();
    leave.group_id = GroupId(s(GROUP));
    leave.member_id = s(&a);
    let ResponseKind::LeaveGroup(r) = n.ask(3_000, 2, GroupRequest::LeaveGroup(leave.clone()))
    else {
        panic!()
    };
    assert_eq!(r.error_code, 0);
    assert_eq!(
        n.store().read_groups().unwrap().value[GROUP].members,
        vec![b.clone()]
    );
    assert_eq!(
        heartbeat_code(n.ask(3_100, 4, heartbeat(&b, 2))),
        ResponseError::RebalanceInProgress.code()
    );
    let ResponseKind::LeaveGroup(r) = n.ask(3_200, 2, GroupRequest::LeaveGroup(leave)) else {
        panic!()
    };
    assert_eq!(r.error_code, ResponseError::UnknownMemberId.code());
    // b rejoins alone and becomes the leader of generation 3.
    let r = join_of(n.ask(3_300, 9, join(GROUP, &b, &[("range", b"")])));
    assert_eq!(
        (r.error_code, r.generation_id, r.leader.as_str()),
        (0, 3, b.as_str())
    );
    // v3+: a batch, each member answered.
    let mut leave = LeaveGroupRequest::default();
    leave.group_id = GroupId(s(GROUP));
    leave.members = [b.as_str(), "app-ghost"]
        .iter()
        .map(|id| {
            let mut m = MemberIdentity::default();
            m.member_id = s(id);
            m
        })
        .collect();
    let ResponseKind::LeaveGroup(r) = n.ask(3_400, 5, GroupRequest::LeaveGroup(leave)) else {
        panic!()
    };
    assert_eq!(r.error_code, 0);
    let each: Vec<(String, i16)> = r
        .members
        .iter()
        .map(|m| (m.member_id.to_string(), m.error_code))
        .collect();
    assert_eq!(
        each,
        vec![
            (b.clone(), 0),
            ("app-ghost".into(), ResponseError::UnknownMemberId.code())
        ]
    );
    assert!(n.store().read_groups().unwrap().value[GROUP]
        .members
        .is_empty());
    let ResponseKind::DescribeGroups(d) = n.ask(3_500, 5, {
        let mut r = DescribeGroupsRequest::default();
        r.groups = vec![GroupId(s(GROUP))];
        GroupRequest::DescribeGroups(r)
    }) else {
        panic!()
    };
    assert_eq!(d.groups[0].group_state.as_str(), "Empty");
}

#[test]
fn commits_are_persisted_and_fetched_by_a_new_coordinator() {
    let mut n = Node::new();
    // A consumer without group management: generation -1, no member id.
    let r = commit_codes(n.ask(
        1_000,
        2,
        commit("", -1, &[("orders", 0, 40), ("orders", 3, 7)]),
    ));
    assert_eq!(r, vec![("orders".into(), 0, 0), ("orders".into(), 3, 0)]);
    let id = lone_consumer(&mut n, 2_000);
    let r = commit_codes(n.ask(2_100, 9, commit(&id, 1, &[("orders", 0, 41)])));
    assert_eq!(r, vec![("orders".into(), 0, 0)]);
    let expected = vec![
        ("orders".to_string(), 0, 41),
        ("orders".to_string(), 1, -1),
        ("orders".to_string(), 3, 7),
    ];
    assert_eq!(
        fetched(n.ask(2_200, 7, fetch(7, Some(&[("orders", &[0, 1, 3])])))),
        expected
    );
    n.restart();
    assert_eq!(
        fetched(n.ask(3_000, 1, fetch(1, Some(&[("orders", &[0, 1, 3])])))),
        expected
    );
    // Every partition with an offset (topics null).
    assert_eq!(
        fetched(n.ask(3_000, 5, fetch(5, None))),
        vec![("orders".to_string(), 0, 41), ("orders".to_string(), 3, 7)]
    );
    // v8+: several groups, one of them unknown.
    let mut r = OffsetFetchRequest::default();
    r.groups = [GROUP, "nobody"]
        .iter()
        .map(|g| {
            let mut x = OffsetFetchRequestGroup::default();
            x.group_id = GroupId(s(g));
            x.topics = if *g == GROUP {
                None
            } else {
                let mut t = OffsetFetchRequestTopics::default();
                t.name = TopicName(s("orders"));
                t.partition_indexes = vec![2];
                Some(vec![t])
            };
            x
        })
        .collect();
    let ResponseKind::OffsetFetch(r) = n.ask(3_000, 9, GroupRequest::OffsetFetch(r)) else {
        panic!()
    };
    let got: Vec<(String, String, i32, i64)> = r
        .groups
        .iter()
        .flat_map(|g| {
            g.topics.iter().flat_map(move |t| {
                t.partitions.iter().map(move |p| {
                    (
                        g.group_id.0.to_string(),
                        t.name.0.to_string(),
                        p.partition_index,
                        p.committed_offset,
                    )
                })
            })
        })
        .collect();
    assert_eq!(
        got,
        vec![
            (GROUP.into(), "orders".into(), 0, 41),
            (GROUP.into(), "orders".into(), 3, 7),
            ("nobody".into(), "orders".into(), 2, -1),
        ]
    );
    // The file holds them, with no members (the restart dropped the old process's member).
    let record = &n.store().read_groups().unwrap().value[GROUP];
    assert_eq!(
        record,
        &GroupRecord {
            members: vec![],
            offsets: BTreeMap::from([
                (TopicPartition::new("orders", 0), 41),
                (TopicPartition::new("orders", 3), 7),
            ]),
        }
    );
    // The old member is unknown to the new coordinator.
    assert_eq!(
        heartbeat_code(n.ask(3_100, 4, heartbeat(&id, 1))),
        ResponseError::UnknownMemberId.code()
    );
}

#[test]
fn offsets_the_sync_writes_meanwhile_are_fetched() {
    let mut n = Node::new();
    n.ask(1_000, 2, commit("", -1, &[("orders", 0, 5)]));
    // The metadata sync commits into the file of the (memberless) group.
    let mut record = n.store().read_groups().unwrap().value[GROUP].clone();
    record.offsets.insert(TopicPartition::new("orders", 1), 99);
    n.store().write_group(GROUP, &record).unwrap();
    assert_eq!(
        fetched(n.ask(2_000, 6, fetch(6, None))),
        vec![("orders".to_string(), 0, 5), ("orders".to_string(), 1, 99)]
    );
}

#[test]
fn commits_with_a_stale_generation_or_from_strangers_are_refused() {
    let mut n = Node::new();
    let (a, b, _) = second_member(&mut n);
    // During the join phase a may still commit for generation 1.
    let r = commit_codes(n.ask(2_100, 8, commit(&a, 1, &[("orders", 0, 10)])));
    assert_eq!(r, vec![("orders".into(), 0, 0)]);
    n.send(2_200, 9, join(GROUP, &a, &[("range", b"")]));
    // Generation 2 is not synced yet.
    let r = commit_codes(n.ask(2_300, 8, commit(&a, 2, &[("orders", 0, 11)])));
    assert_eq!(
        r,
        vec![(
            "orders".into(),
            0,
            ResponseError::RebalanceInProgress.code()
        )]
    );
    n.send(2_400, 5, sync(&b, 2, &[]));
    n.send(2_500, 5, sync(&a, 2, &[]));
    let illegal = ResponseError::IllegalGeneration.code();
    let r = commit_codes(n.ask(
        2_600,
        8,
        commit(&a, 1, &[("orders", 0, 12), ("orders", 1, 3)]),
    ));
    assert_eq!(
        r,
        vec![("orders".into(), 0, illegal), ("orders".into(), 1, illegal)]
    );
    let unknown = ResponseError::UnknownMemberId.code();
    let r = commit_codes(n.ask(2_600, 8, commit("app-ghost", 2, &[("orders", 0, 12)])));
    assert_eq!(r, vec![("orders".into(), 0, unknown)]);
    // A simple commit into a group with members.
    let r = commit_codes(n.ask(2_600, 8, commit("", -1, &[("orders", 0, 12)])));
    assert_eq!(r, vec![("orders".into(), 0, unknown)]);
    // A generation for a group that does not exist.
    let mut c = commit("x", 3, &[("orders", 0, 1)]);
    if let GroupRequest::OffsetCommit(r) = &mut c {
        r.group_id = GroupId(s("nobody"));
    }
    assert_eq!(
        commit_codes(n.ask(2_600, 8, c)),
        vec![("orders".into(), 0, illegal)]
    );
    // Nothing refused was written.
    assert_eq!(
        fetched(n.ask(2_700, 7, fetch(7, None))),
        vec![("orders".to_string(), 0, 10)]
    );
    let r = commit_codes(n.ask(2_800, 8, commit(&b, 2, &[("orders", 0, 13)])));
    assert_eq!(r, vec![("orders".into(), 0, 0)]);
}

#[test]
fn commits_on_partitions_the_node_does_not_have_are_refused() {
    let mut n = Node::new();
    let unknown = ResponseError::UnknownTopicOrPartition.code();
    let r = commit_codes(n.ask(
        1_000,
        9,
        commit(
            "",
            -1,
            &[("orders", 0, 3), ("orders", 4, 3), ("payments", 0, 3)],
        ),
    ));
    assert_eq!(
        r,
        vec![
            ("orders".into(), 0, 0),
            ("orders".into(), 4, unknown),
            ("payments".into(), 0, unknown)
        ]
    );
    let offsets = &n.store().read_groups().unwrap().value[GROUP].offsets;
    assert_eq!(
        offsets,
        &BTreeMap::from([(TopicPartition::new("orders", 0), 3)])
    );
}

#[test]
fn members_listed_by_a_previous_process_are_cleared_at_start() {
    let n = Node::new();
    let record = GroupRecord {
        members: strs(&["app-old"]),
        offsets: BTreeMap::from([(TopicPartition::new("orders", 2), 8)]),
    };
    n.store().write_group(GROUP, &record).unwrap();
    let mut n = n;
    n.restart();
    let stored = &n.store().read_groups().unwrap().value[GROUP];
    assert!(stored.members.is_empty());
    assert_eq!(stored.offsets, record.offsets);
}

#[test]
fn the_initial_delay_waits_for_more_members_before_generation_one() {
    let mut n = Node::with(GroupOptions {
        initial_rebalance_delay_ms: 100,
        ..GroupOptions::default()
    });
    let a = n.member_id(1_000, 9, &[("range", b"")]);
    let (a_join, answers) = n.send(1_000, 9, join(GROUP, &a, &[("range", b"")]));
    assert_eq!(answers, vec![]);
    assert_eq!(n.c.next_deadline_ms(), Some(1_100));
    let b = n.member_id(1_050, 9, &[("range", b"")]);
    let (b_join, _) = n.send(1_050, 9, join(GROUP, &b, &[("range", b"")]));
    // b joined during the delay: it waits once more.
    assert_eq!(n.poll(1_100), vec![]);
    assert_eq!(n.c.next_deadline_ms(), Some(1_200));
    let answers = n.poll(1_200);
    let mut calls: Vec<CallId> = answers.iter().map(|a| a.call).collect();
    calls.sort();
    assert_eq!(calls, vec![a_join, b_join]);
    for x in answers {
        let r = join_of(x.response);
        assert_eq!(
            (r.error_code, r.generation_id, r.leader.as_str()),
            (0, 1, a.as_str())
        );
    }
}

#[test]
fn a_closed_connection_drops_its_parked_calls() {
    let mut n = Node::new();
    let (a, _, b_join) = second_member(&mut n);
    n.c.forget_calls(&[b_join]);
    // a's rejoin completes the join phase (b still counts as joined), with one answer.
    let (a_join, answers) = n.send(2_100, 9, join(GROUP, &a, &[("range", b"")]));
    assert_eq!(
        answers.iter().map(|x| x.call).collect::<Vec<_>>(),
        vec![a_join]
    );
    assert_eq!(join_of(answers[0].response.clone()).members.len(), 2);
}

#[test]
fn bad_joins_get_kafkas_errors() {
    let mut n = Node::new();
    let r = join_of(n.ask(1_000, 9, join("", "", &[("range", b"")])));
    assert_eq!(r.error_code, ResponseError::InvalidGroupId.code());
    let mut short = join(GROUP, "", &[("range", b"")]);
    if let GroupRequest::JoinGroup(r) = &mut short {
        r.session_timeout_ms = 10;
    }
    assert_eq!(
        join_of(n.ask(1_000, 9, short)).error_code,
        ResponseError::InvalidSessionTimeout.code()
    );
    assert_eq!(
        join_of(n.ask(1_000, 9, join(GROUP, "", &[]))).error_code,
        ResponseError::InconsistentGroupProtocol.code()
    );
    lone_consumer(&mut n, 2_000);
    // A protocol the members do not support is refused before any member id is handed out.
    let r = join_of(n.ask(3_000, 9, join(GROUP, "", &[("sticky", b"")])));
    assert_eq!(
        r.error_code,
        ResponseError::InconsistentGroupProtocol.code()
    );
    assert_eq!(r.member_id.as_str(), "");
}

#[test]
fn old_join_versions_join_without_member_id_required() {
    for v in [0, 3] {
        let mut n2 = Node::new();
        let r = join_of(n2.ask(1_000, v, join(GROUP, "", &[("range", b"m")])));
        assert_eq!((r.error_code, r.generation_id), (0, 1), "v{v}");
        assert_eq!(r.protocol_name.as_deref(), Some("range"));
        assert_eq!(r.leader, r.member_id);
    }
    // Every version's answers encode (MEMBER_ID_REQUIRED from v4).
    for v in 4..=9 {
        let mut n = Node::new();
        let id = n.member_id(1_000 + i64::from(v), v, &[("range", b"")]);
        let r = join_of(n.ask(1_000 + i64::from(v), v, join(GROUP, &id, &[("range", b"")])));
        assert_eq!(r.error_code, 0, "v{v}");
    }
}

#[test]
fn find_coordinator_names_this_node_for_groups() {
    let mut n = Node::new();
    for v in 0..=3 {
        let mut r = FindCoordinatorRequest::default();
        r.key = s(GROUP);
        let ResponseKind::FindCoordinator(x) = n.ask(0, v, GroupRequest::FindCoordinator(r)) else {
            panic!()
        };
        assert_eq!(
            (x.error_code, x.node_id.0, x.host.as_str(), x.port),
            (0, 7, "node-7", 9092)
        );
    }
    for v in 4..=6 {
        let mut r = FindCoordinatorRequest::default();
        r.coordinator_keys = vec![s("a"), s("b")];
        let ResponseKind::FindCoordinator(x) = n.ask(0, v, GroupRequest::FindCoordinator(r)) else {
            panic!()
        };
        let got: Vec<(String, i32, i16)> = x
            .coordinators
            .iter()
            .map(|c| (c.key.to_string(), c.node_id.0, c.error_code))
            .collect();
        assert_eq!(got, vec![("a".into(), 7, 0), ("b".into(), 7, 0)]);
    }
    let mut r = FindCoordinatorRequest::default();
    r.key = s("tx-1");
    r.key_type = 1;
    let ResponseKind::FindCoordinator(x) = n.ask(0, 3, GroupRequest::FindCoordinator(r)) else {
        panic!()
    };
    assert_eq!(x.error_code, ResponseError::CoordinatorNotAvailable.code());
}

#[test]
fn describe_and_list_report_state_protocol_and_members() {
    let mut n = Node::new();
    let id = lone_consumer(&mut n, 1_000);
    n.ask(1_100, 2, {
        let mut c = commit("", -1, &[("orders", 0, 1)]);
        if let GroupRequest::OffsetCommit(r) = &mut c {
            r.group_id = GroupId(s("simple"));
        }
        c
    });
    for v in 0..=6 {
        let mut r = DescribeGroupsRequest::default();
        r.groups = vec![GroupId(s(GROUP)), GroupId(s("nobody"))];
        let ResponseKind::DescribeGroups(d) = n.ask(1_200, v, GroupRequest::DescribeGroups(r))
        else {
            panic!()
        };
        let g = &d.groups[0];
        assert_eq!(
            (
                g.error_code,
                g.group_state.as_str(),
                g.protocol_type.as_str(),
                g.protocol_data.as_str()
            ),
            (0, "Stable", "consumer", "range")
        );
        assert_eq!(g.members.len(), 1);
        let m = &g.members[0];
        assert_eq!(
            (
                m.member_id.as_str(),
                m.client_id.as_str(),
                m.client_host.as_str()
            ),
            (id.as_str(), "app", "/127.0.0.1")
        );
        assert_eq!(
            (&m.member_metadata[..], &m.member_assignment[..]),
            (&b"r1"[..], &b"all of it"[..])
        );
        let missing = &d.groups[1];
        assert_eq!(missing.group_state.as_str(), "Dead");
        let code = if v >= 6 {
            ResponseError::GroupIdNotFound.code()
        } else {
            0
        };
        assert_eq!(missing.error_code, code, "v{v}");
    }
    for v in 0..=5 {
        let ResponseKind::ListGroups(l) = n.ask(
            1_300,
            v,
            GroupRequest::ListGroups(ListGroupsRequest::default()),
        ) else {
            panic!()
        };
        let got: Vec<(String, String)> = l
            .groups
            .iter()
            .map(|g| (g.group_id.0.to_string(), g.protocol_type.to_string()))
            .collect();
        assert_eq!(
            got,
            vec![
                (GROUP.into(), "consumer".into()),
                ("simple".into(), "".into())
            ]
        );
    }
    let mut r = ListGroupsRequest::default();
    r.states_filter = vec![s("empty")];
    let ResponseKind::ListGroups(l) = n.ask(1_400, 5, GroupRequest::ListGroups(r)) else {
        panic!()
    };
    let got: Vec<(&str, &str, &str)> = l
        .groups
        .iter()
        .map(|g| {
            (
                g.group_id.0.as_str(),
                g.group_state.as_str(),
                g.group_type.as_str(),
            )
        })
        .collect();
    assert_eq!(got, vec![("simple", "Empty", "classic")]);
}

#[test]
fn every_offset_version_encodes() {
    let mut n = Node::new();
    for v in 2..=9 {
        let r = commit_codes(n.ask(1_000, v, commit("", -1, &[("orders", 1, i64::from(v))])));
        assert_eq!(r, vec![("orders".into(), 1, 0)], "v{v}");
    }
    for v in 1..=7 {
        let topics: Option<&[(&str, &[i32])]> = if v >= 2 {
            None
        } else {
            Some(&[("orders", &[1])])
        };
        assert_eq!(
            fetched(n.ask(1_000, v, fetch(v, topics))),
            vec![("orders".to_string(), 1, 9)]
        );
    }
    for v in 0..=4 {
        assert_eq!(
            heartbeat_code(n.ask(1_000, v, heartbeat("x", 1))),
            ResponseError::UnknownMemberId.code()
        );
    }
}

#[test]
fn a_failing_store_refuses_the_commit_and_holds_the_answer_until_it_recovers() {
    let mut n = Node::new();
    let blocker = n
        .store()
        .root()
        .join(crate::sync::local::CONSUMER_OFFSETS_DIR);
    std::fs::create_dir_all(n.store().root()).unwrap();
    std::fs::write(&blocker, "not a directory").unwrap();
    n.versions.insert(50, 8);
    let err =
        n.c.handle(1_000, 50, 8, commit("", -1, &[("orders", 0, 5)]), &exists)
            .unwrap_err();
    assert!(matches!(err, GroupError::Store(_)), "{err}");
    assert_eq!(n.c.next_deadline_ms(), Some(2_000));
    std::fs::remove_file(&blocker).unwrap();
    let answers = n.poll(2_000);
    assert_eq!(answers.len(), 1);
    assert_eq!(answers[0].call, 50);
    assert_eq!(
        commit_codes(answers[0].response.clone()),
        vec![(
            "orders".into(),
            0,
            ResponseError::CoordinatorNotAvailable.code()
        )]
    );
    assert_eq!(n.c.next_deadline_ms(), None);
    // Nothing was committed; the retry is.
    assert_eq!(fetched(n.ask(2_100, 7, fetch(7, None))), vec![]);
    n.ask(2_200, 8, commit("", -1, &[("orders", 0, 5)]));
    assert_eq!(
        fetched(n.ask(2_300, 7, fetch(7, None))),
        vec![("orders".to_string(), 0, 5)]
    );
}

#[test]
fn members_that_never_sync_are_removed_at_the_rebalance_timeout() {
    let mut n = Node::new();
    let (a, b) = generation_two(&mut n);
    // The leader syncs; b never does but keeps heartbeating.
    let r = sync_of(n.ask(2_200, 5, sync(&a, 2, &[(&a, b"x"), (&b, b"y")])));
    assert_eq!((r.error_code, &r.assignment[..]), (0, &b"x"[..]));
    for now in [9_000, 16_000, 23_000, 30_000] {
        assert_eq!(heartbeat_code(n.ask(now, 4, heartbeat(&a, 2))), 0);
        assert_eq!(heartbeat_code(n.ask(now, 4, heartbeat(&b, 2))), 0);
    }
    assert_eq!(n.poll(2_100 + i64::from(REBALANCE) - 1), vec![]);
    n.poll(2_100 + i64::from(REBALANCE));
    assert_eq!(
        heartbeat_code(n.ask(32_200, 4, heartbeat(&b, 2))),
        ResponseError::UnknownMemberId.code()
    );
    assert_eq!(
        heartbeat_code(n.ask(32_200, 4, heartbeat(&a, 2))),
        ResponseError::RebalanceInProgress.code()
    );
}

#[test]
fn the_protocol_is_the_members_vote_among_those_all_support() {
    let mut n = Node::new();
    let p1: &[(&str, &[u8])] = &[("sticky", b"a-s"), ("range", b"a-r"), ("rr", b"a-rr")];
    let p2: &[(&str, &[u8])] = &[("range", b"b-r"), ("rr", b"b-rr")];
    let p3: &[(&str, &[u8])] = &[("rr", b"c-rr"), ("range", b"c-r"), ("sticky", b"c-s")];
    let a = n.member_id(1_000, 9, p1);
    let r = join_of(n.ask(1_000, 9, join(GROUP, &a, p1)));
    assert_eq!(r.protocol_name.as_deref(), Some("sticky"));
    let b = n.member_id(1_100, 9, p2);
    let (_, none) = n.send(1_100, 9, join(GROUP, &b, p2));
    assert_eq!(none, vec![]);
    let c = n.member_id(1_100, 9, p3);
    let (_, none) = n.send(1_100, 9, join(GROUP, &c, p3));
    assert_eq!(none, vec![]);
    let (a_call, answers) = n.send(1_200, 9, join(GROUP, &a, p1));
    assert_eq!(answers.len(), 3);
    let leader = answers.iter().find(|x| x.call == a_call).unwrap();
    let r = join_of(leader.response.clone());
    // sticky is not b's; of range and rr, a and b vote range, c votes rr.
    assert_eq!(r.protocol_name.as_deref(), Some("range"));
    let mut metadata: Vec<Vec<u8>> = r.members.iter().map(|m| m.metadata.to_vec()).collect();
    metadata.sort();
    assert_eq!(
        metadata,
        vec![b"a-r".to_vec(), b"b-r".to_vec(), b"c-r".to_vec()]
    );
}

#[test]
fn a_rejoin_without_change_before_the_sync_gets_the_current_generation() {
    let mut n = Node::new();
    let a = n.member_id(1_000, 9, &[("range", b"m")]);
    let first = join_of(n.ask(1_000, 9, join(GROUP, &a, &[("range", b"m")])));
    // The answer was lost; the same join again is answered at once, unchanged.
    let again = join_of(n.ask(1_100, 9, join(GROUP, &a, &[("range", b"m")])));
    assert_eq!(first, again);
    assert_eq!(again.generation_id, 1);
}

#[test]
fn a_refused_first_join_leaves_no_group_behind() {
    let mut n = Node::new();
    let r = join_of(n.ask(1_000, 9, join(GROUP, "", &[])));
    assert_eq!(
        r.error_code,
        ResponseError::InconsistentGroupProtocol.code()
    );
    let ResponseKind::ListGroups(l) = n.ask(1_000, 5, GroupRequest::ListGroups(Default::default()))
    else {
        panic!()
    };
    assert!(l.groups.is_empty(), "{l:?}");
}

#[test]
fn a_new_member_voids_a_generation_not_yet_synced() {
    let mut n = Node::new();
    let (a, b) = generation_two(&mut n);
    // b waits for the leader's assignment of generation 2 ...
    let (b_sync, none) = n.send(2_200, 5, sync(&b, 2, &[]));
    assert_eq!(none, vec![]);
    // ... when c joins: generation 2 is void, b is told to rejoin.
    let c = n.member_id(2_300, 9, &[("range", b"")]);
    let (_, answers) = n.send(2_300, 9, join(GROUP, &c, &[("range", b"")]));
    assert_eq!(answers.len(), 1, "{answers:?}");
    assert_eq!(answers[0].call, b_sync);
    let r = sync_of(answers[0].response.clone());
    assert_eq!(
        (r.error_code, r.assignment.len()),
        (ResponseError::RebalanceInProgress.code(), 0)
    );
    // The leader's late sync for generation 2 is refused too.
    let r = sync_of(n.ask(2_400, 5, sync(&a, 2, &[(&a, b"x")])));
    assert_eq!(r.error_code, ResponseError::RebalanceInProgress.code());
}

#[test]
fn an_unused_member_id_holds_the_rebalance_until_its_session_ends() {
    let mut n = Node::new();
    let a = lone_consumer(&mut n, 1_000);
    // b is handed an id but never joins with it.
    n.member_id(2_000, 9, &[("range", b"")]);
    // The leader's rejoin starts a rebalance that waits for b.
    let (a_join, none) = n.send(2_100, 9, join(GROUP, &a, &[("range", b"")]));
    assert_eq!(none, vec![]);
    assert_eq!(n.c.next_deadline_ms(), Some(2_000 + i64::from(SESSION)));
    let answers = n.poll(2_000 + i64::from(SESSION));
    assert_eq!(answers.len(), 1);
    assert_eq!(answers[0].call, a_join);
    let r = join_of(answers[0].response.clone());
    assert_eq!((r.error_code, r.generation_id, r.members.len()), (0, 2, 1));
}

#[test]
fn sessions_restart_when_the_join_phase_completes() {
    let mut n = Node::new();
    let a = lone_consumer(&mut n, 1_000);
    // a's session, last kept by its sync at 1_000, would end at 11_000; it rejoins at 10_900.
    let r = join_of(n.ask(10_900, 9, join(GROUP, &a, &[("range", b"r1")])));
    assert_eq!((r.error_code, r.generation_id), (0, 2));
    assert_eq!(n.c.next_deadline_ms(), Some(10_900 + i64::from(SESSION)));
    let r = sync_of(n.ask(10_950, 5, sync(&a, 2, &[(&a, b"x")])));
    assert_eq!(r.error_code, 0);
    assert_eq!(n.c.next_deadline_ms(), Some(10_950 + i64::from(SESSION)));
    assert_eq!(heartbeat_code(n.ask(11_500, 4, heartbeat(&a, 2))), 0);
}

#[test]
fn a_member_leaves_by_its_instance_id() {
    let mut n = Node::new();
    let mut j = join(GROUP, "", &[("range", b"")]);
    if let GroupRequest::JoinGroup(r) = &mut j {
        r.group_instance_id = Some(s("pod-1"));
    }
    // Static membership is treated as dynamic: an id is required first.
    let r = join_of(n.ask(1_000, 9, j.clone()));
    assert_eq!(r.error_code, ResponseError::MemberIdRequired.code());
    if let GroupRequest::JoinGroup(x) = &mut j {
        x.member_id = r.member_id.clone();
    }
    let r = join_of(n.ask(1_000, 9, j));
    assert_eq!(r.error_code, 0);
    assert_eq!(r.members[0].group_instance_id.as_deref(), Some("pod-1"));
    let mut leave = LeaveGroupRequest::default();
    leave.group_id = GroupId(s(GROUP));
    let mut m = MemberIdentity::default();
    m.group_instance_id = Some(s("pod-1"));
    leave.members = vec![m];
    let ResponseKind::LeaveGroup(l) = n.ask(1_100, 5, GroupRequest::LeaveGroup(leave)) else {
        panic!()
    };
    assert_eq!(l.members[0].error_code, 0);
    assert!(n.store().read_groups().unwrap().value[GROUP]
        .members
        .is_empty());
}

#[test]
fn a_group_joining_after_a_restart_sees_the_offsets_the_sync_committed_meanwhile() {
    let mut n = Node::new();
    n.ask(1_000, 2, commit("", -1, &[("orders", 0, 5)]));
    n.restart();
    // While nobody consumes on this node, the sync commits the source's progress.
    let mut record = n.store().read_groups().unwrap().value[GROUP].clone();
    record.offsets.insert(TopicPartition::new("orders", 0), 70);
    n.store().write_group(GROUP, &record).unwrap();
    // The consumers fail over to this node: they join, then fetch their offsets.
    let a = lone_consumer(&mut n, 2_000);
    assert_eq!(
        fetched(n.ask(2_100, 7, fetch(7, None))),
        vec![("orders".to_string(), 0, 70)]
    );
    // The member's commit goes over the synced offset.
    let r = commit_codes(n.ask(2_200, 8, commit(&a, 1, &[("orders", 0, 71)])));
    assert_eq!(r, vec![("orders".into(), 0, 0)]);
    assert_eq!(
        n.store().read_groups().unwrap().value[GROUP].offsets,
        BTreeMap::from([(TopicPartition::new("orders", 0), 71)])
    );
}

#[test]
fn requests_convert_from_kafka_protocols_enum_and_every_api_is_listed() {
    let r = GroupRequest::from_kind(RequestKind::Heartbeat(HeartbeatRequest::default())).unwrap();
    assert_eq!(r.api_key(), ApiKey::Heartbeat);
    assert!(GroupRequest::from_kind(RequestKind::Fetch(FetchRequest::default())).is_err());
    for (api, min, max) in GROUP_API_VERSIONS {
        let range = api.valid_versions();
        assert!(range.min <= *min && *max <= range.max, "{api:?}");
    }
    assert_eq!(GROUP_API_VERSIONS.len(), 9);
}

#[test]
fn every_membership_version_encodes_its_answers() {
    let mut n = Node::new();
    let a = lone_consumer(&mut n, 1_000);
    for v in 0..=5 {
        let r = sync_of(n.ask(1_100, v, sync(&a, 1, &[])));
        assert_eq!(
            (r.error_code, &r.assignment[..]),
            (0, &b"all of it"[..]),
            "v{v}"
        );
        let r = sync_of(n.ask(1_100, v, sync("app-ghost", 1, &[])));
        assert_eq!(r.error_code, ResponseError::UnknownMemberId.code(), "v{v}");
    }
    for v in 0..=5 {
        let mut leave = LeaveGroupRequest::default();
        leave.group_id = GroupId(s(GROUP));
        leave.member_id = s("app-ghost");
        let mut m = MemberIdentity::default();
        m.member_id = s("app-ghost");
        if v >= 3 {
            leave.member_id = StrBytes::default();
            leave.members = vec![m];
        }
        let ResponseKind::LeaveGroup(l) = n.ask(1_200, v, GroupRequest::LeaveGroup(leave)) else {
            panic!()
        };
        let code = if v >= 3 {
            l.members[0].error_code
        } else {
            l.error_code
        };
        assert_eq!(code, ResponseError::UnknownMemberId.code(), "v{v}");
    }
    // A transactional id (key type 1) and an unknown key type, batched.
    for (key_type, error) in [
        (1, ResponseError::CoordinatorNotAvailable),
        (9, ResponseError::InvalidRequest),
    ] {
        let mut r = FindCoordinatorRequest::default();
        r.key_type = key_type;
        r.coordinator_keys = vec![s("k")];
        let ResponseKind::FindCoordinator(x) = n.ask(1_300, 6, GroupRequest::FindCoordinator(r))
        else {
            panic!()
        };
        assert_eq!(
            (x.coordinators[0].error_code, x.coordinators[0].node_id.0),
            (error.code(), -1)
        );
    }
}
