//! OffsetCommit and OffsetFetch over the group files of the node's metadata directory (the
//! files the metadata sync also writes), and keeping those files' member lists current.

use std::collections::BTreeMap;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic, OffsetFetchResponseTopics,
};
use kafka_protocol::messages::{
    OffsetCommitRequest, OffsetCommitResponse, OffsetFetchRequest, OffsetFetchResponse,
    ResponseKind, TopicName,
};
use kmirror_kernel::sync::group_offsets::TopicPartition;

use super::answer::{code, s};
use super::state::{Group, GroupState};
use super::{GroupAnswer, GroupCoordinator, GroupError};
use crate::sync::GroupRecord;

/// Requested partitions of one group: `None` for every partition it has offsets for.
type Wanted = Option<Vec<(String, Vec<i32>)>>;

/// Per topic in request order, each partition's error (`None`: committed).
type CommitErrors = Vec<(String, Vec<(i32, Option<ResponseError>)>)>;

impl GroupCoordinator {
    /// Re-reads the group files, so that offsets the metadata sync committed meanwhile are
    /// seen: a group without members takes the file's offsets, a group only in a file is
    /// added; a group with members keeps its own (the sync never writes those).
    pub(super) fn refresh_from_store(&mut self) {
        match self.store.read_groups() {
            Ok(read) => {
                for (id, record) in read.value {
                    match self.groups.get_mut(&id) {
                        Some(g) if g.members.is_empty() => {
                            g.offsets = record.offsets;
                            g.stored_members = record.members;
                        }
                        Some(_) => {}
                        None => {
                            self.groups
                                .insert(id, Group::new(record.offsets, record.members));
                        }
                    }
                }
            }
            Err(e) => self.failure = Some(GroupError::Store(e)),
        }
    }

    /// OffsetCommit (v2-9): partitions the node does not have are refused with
    /// UNKNOWN_TOPIC_OR_PARTITION, metadata over the limit with OFFSET_METADATA_TOO_LARGE;
    /// the rest are checked against the group as Kafka's `validateOffsetCommit` does (a group
    /// without members takes commits with generation -1; a member commits for its current
    /// generation) and written to the group's file before they are answered.
    pub(super) fn commit(
        &mut self,
        call: super::CallId,
        req: OffsetCommitRequest,
        partition_exists: &dyn Fn(&str, i32) -> bool,
        out: &mut Vec<GroupAnswer>,
    ) {
        let group_id = req.group_id.0.to_string();
        let member_id = req.member_id.to_string();
        let generation = req.generation_id_or_member_epoch;
        if self
            .groups
            .get(&group_id)
            .is_none_or(|g| g.members.is_empty())
        {
            self.refresh_from_store();
        }
        let group_error = match self.groups.get(&group_id) {
            None if generation >= 0 => Some(ResponseError::IllegalGeneration),
            None => None,
            Some(g) => validate_commit(g, &member_id, req.group_instance_id.is_some(), generation),
        };
        // (topic, [(partition, error)]) in request order; accepted offsets apart.
        let mut answers: CommitErrors = Vec::new();
        let mut accepted: BTreeMap<TopicPartition, i64> = BTreeMap::new();
        for t in &req.topics {
            let topic = t.name.0.to_string();
            let mut parts = Vec::new();
            for p in &t.partitions {
                let metadata_len = p.committed_metadata.as_ref().map_or(0, |m| m.len());
                let error = if !partition_exists(&topic, p.partition_index) {
                    Some(ResponseError::UnknownTopicOrPartition)
                } else if group_error.is_some() {
                    group_error
                } else if metadata_len > self.options.max_metadata_bytes {
                    Some(ResponseError::OffsetMetadataTooLarge)
                } else {
                    accepted.insert(
                        TopicPartition::new(topic.clone(), p.partition_index),
                        p.committed_offset,
                    );
                    None
                };
                parts.push((p.partition_index, error));
            }
            answers.push((topic, parts));
        }
        if !accepted.is_empty() {
            match self.write_offsets(&group_id, accepted) {
                Ok(()) => {}
                Err(e) => {
                    // Nothing changed: the client retries.
                    for (_, parts) in &mut answers {
                        for (_, error) in parts.iter_mut() {
                            if error.is_none() {
                                *error = Some(ResponseError::CoordinatorNotAvailable);
                            }
                        }
                    }
                    self.failure = Some(GroupError::Store(e));
                }
            }
        }
        let mut r = OffsetCommitResponse::default();
        r.topics = answers
            .into_iter()
            .map(|(topic, parts)| {
                let mut t = OffsetCommitResponseTopic::default();
                t.name = TopicName(s(&topic));
                t.partitions = parts
                    .into_iter()
                    .map(|(index, error)| {
                        let mut p = OffsetCommitResponsePartition::default();
                        p.partition_index = index;
                        p.error_code = code(error);
                        p
                    })
                    .collect();
                t
            })
            .collect();
        out.push(GroupAnswer {
            call,
            response: ResponseKind::OffsetCommit(r),
        });
    }

    /// Adds `offsets` to `group`'s committed offsets (its file written first; nothing changes
    /// when that fails).
    fn write_offsets(
        &mut self,
        group_id: &str,
        offsets: BTreeMap<TopicPartition, i64>,
    ) -> Result<(), crate::sync::SyncError> {
        let group = self
            .groups
            .entry(group_id.to_owned())
            .or_insert_with(|| Group::new(BTreeMap::new(), Vec::new()));
        let mut all = group.offsets.clone();
        all.extend(offsets);
        let record = GroupRecord {
            members: group.member_ids(),
            offsets: all,
        };
        self.store.write_group(group_id, &record)?;
        group.offsets = record.offsets;
        group.stored_members = record.members;
        Ok(())
    }

    /// Commits `offsets` for `group` as a committed transaction makes its TxnOffsetCommits
    /// visible: without the generation checks of OffsetCommit (the transaction coordinator
    /// checked its producer), durably before it returns.
    pub fn commit_offsets(
        &mut self,
        group: &str,
        offsets: BTreeMap<TopicPartition, i64>,
    ) -> Result<(), GroupError> {
        if self.groups.get(group).is_none_or(|g| g.members.is_empty()) {
            self.refresh_from_store();
            if let Some(e) = self.failure.take() {
                return Err(e);
            }
        }
        Ok(self.write_offsets(group, offsets)?)
    }

    /// OffsetFetch (v1-9; v8+ several groups): committed offsets, -1 for partitions without
    /// one; `topics` null (v2+) asks for every partition the group has an offset for.
    /// Committed metadata and leader epochs are not kept: metadata is "" and the epoch -1.
    pub(super) fn fetch(
        &mut self,
        call: super::CallId,
        version: i16,
        req: OffsetFetchRequest,
        out: &mut Vec<GroupAnswer>,
    ) {
        self.refresh_from_store();
        let mut r = OffsetFetchResponse::default();
        if version >= 8 {
            r.groups = req
                .groups
                .iter()
                .map(|g| {
                    let wanted: Wanted = g.topics.as_ref().map(|ts| {
                        ts.iter()
                            .map(|t| (t.name.0.to_string(), t.partition_indexes.clone()))
                            .collect()
                    });
                    let mut group = OffsetFetchResponseGroup::default();
                    group.group_id = g.group_id.clone();
                    group.topics = self
                        .committed(g.group_id.0.as_str(), wanted)
                        .into_iter()
                        .map(|(topic, parts)| {
                            let mut t = OffsetFetchResponseTopics::default();
                            t.name = TopicName(s(&topic));
                            t.partitions = parts
                                .into_iter()
                                .map(|(index, offset)| {
                                    let mut p = OffsetFetchResponsePartitions::default();
                                    p.partition_index = index;
                                    p.committed_offset = offset;
                                    p.metadata = Some(s(""));
                                    p
                                })
                                .collect();
                            t
                        })
                        .collect();
                    group
                })
                .collect();
        } else {
            let wanted: Wanted = req.topics.as_ref().map(|ts| {
                ts.iter()
                    .map(|t| (t.name.0.to_string(), t.partition_indexes.clone()))
                    .collect()
            });
            r.topics = self
                .committed(req.group_id.0.as_str(), wanted)
                .into_iter()
                .map(|(topic, parts)| {
                    let mut t = OffsetFetchResponseTopic::default();
                    t.name = TopicName(s(&topic));
                    t.partitions = parts
                        .into_iter()
                        .map(|(index, offset)| {
                            let mut p = OffsetFetchResponsePartition::default();
                            p.partition_index = index;
                            p.committed_offset = offset;
                            p.metadata = Some(s(""));
                            p
                        })
                        .collect();
                    t
                })
                .collect();
        }
        out.push(GroupAnswer {
            call,
            response: ResponseKind::OffsetFetch(r),
        });
    }

    /// The committed offsets of `group` for `wanted` (-1: none), by topic in request order
    /// (every partition with an offset, in name order, when `wanted` is `None`).
    fn committed(&self, group: &str, wanted: Wanted) -> Vec<(String, Vec<(i32, i64)>)> {
        let offsets = self.groups.get(group).map(|g| &g.offsets);
        match wanted {
            Some(topics) => topics
                .into_iter()
                .map(|(topic, parts)| {
                    let found = parts
                        .into_iter()
                        .map(|p| {
                            let tp = TopicPartition::new(topic.clone(), p);
                            (p, offsets.and_then(|o| o.get(&tp)).copied().unwrap_or(-1))
                        })
                        .collect();
                    (topic, found)
                })
                .collect(),
            None => {
                let mut all: Vec<(String, Vec<(i32, i64)>)> = Vec::new();
                for (tp, offset) in offsets.into_iter().flatten() {
                    match all.last_mut() {
                        Some((topic, parts)) if *topic == tp.topic => {
                            parts.push((tp.partition, *offset))
                        }
                        _ => all.push((tp.topic.clone(), vec![(tp.partition, *offset)])),
                    }
                }
                all
            }
        }
    }

    /// Drops every group's committed offsets of `topic` (a deleted topic), in memory and in
    /// the group files, re-read first so that offsets the metadata sync committed go too.
    pub fn forget_topic(&mut self, topic: &str) -> Result<(), GroupError> {
        self.refresh_from_store();
        if let Some(e) = self.failure.take() {
            return Err(e);
        }
        for (id, group) in &mut self.groups {
            if !group.offsets.keys().any(|tp| tp.topic == topic) {
                continue;
            }
            let mut offsets = group.offsets.clone();
            offsets.retain(|tp, _| tp.topic != topic);
            let record = GroupRecord {
                members: group.member_ids(),
                offsets,
            };
            self.store
                .write_group(id, &record)
                .map_err(GroupError::Store)?;
            group.offsets = record.offsets;
            group.stored_members = record.members;
        }
        Ok(())
    }

    /// Writes the group files whose member list changed, so that the metadata sync never
    /// commits over a group in use (a failure is kept for the caller; the write is retried
    /// on the next call).
    pub(super) fn store_members(&mut self) {
        for (id, group) in &mut self.groups {
            if !group.members_unstored() {
                continue;
            }
            let record = GroupRecord {
                members: group.member_ids(),
                offsets: group.offsets.clone(),
            };
            match self.store.write_group(id, &record) {
                Ok(()) => group.stored_members = record.members,
                Err(e) => {
                    self.failure = Some(GroupError::Store(e));
                    return;
                }
            }
        }
    }
}

/// Kafka's `ClassicGroup.validateOffsetCommit`.
fn validate_commit(
    g: &Group,
    member_id: &str,
    has_instance_id: bool,
    generation: i32,
) -> Option<ResponseError> {
    if generation < 0 && g.state == GroupState::Empty {
        // A consumer without group management, or an admin client.
        return None;
    }
    if generation >= 0 || !member_id.is_empty() || has_instance_id {
        if !g.members.contains_key(member_id) {
            return Some(ResponseError::UnknownMemberId);
        }
        if generation != g.generation {
            return Some(ResponseError::IllegalGeneration);
        }
    } else if g.state != GroupState::Empty {
        return Some(ResponseError::UnknownMemberId);
    }
    if g.state == GroupState::CompletingRebalance {
        return Some(ResponseError::RebalanceInProgress);
    }
    None
}
