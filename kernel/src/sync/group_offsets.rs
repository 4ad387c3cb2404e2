//! Consumer group offset sync: the offsets to commit on the destination so that a consumer
//! failing over resumes where its group stood on the source.
//!
//! Source and destination hold the same records at the same offsets (no translation). For a
//! group selected by the include/exclude patterns, with **no active member on the destination**
//! (a live group there owns its offsets), and for each mirrored partition, the offset committed
//! is
//!
//! ```text
//! max(dest log start offset, min(source committed offset, dest last stable offset))
//! ```
//!
//! The KIP-1279 discussion (VK12) settles on `max(destLogStart, min(sourceCommitted, destLEO))`:
//! never beyond what the destination holds (a consumer would hit OFFSET_OUT_OF_RANGE and reset,
//! possibly skipping records), never below its log start. The kernel bounds by the destination's
//! **LSO** instead of its LEO because a stop truncates the destination to its LSO: an offset
//! synced between the LSO and the LEO could end up beyond the log end after failover, and the
//! consumer would then skip the records produced locally into that gap. (LSO <= HW <= LEO, so
//! the KIP's bound holds too.)
//!
//! An offset never moves backwards because of a sync: when the destination's committed offset
//! is at or beyond the synced one, nothing is committed. A source offset that is negative or
//! beyond the source's log end offset cannot come from a real consumer and is rejected.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::pattern::NameFilter;
use super::SyncItemError;
use crate::types::{Offset, PartitionIndex};

/// A partition of a topic, by name (how groups commit offsets).
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize)]
pub struct TopicPartition {
    /// The topic.
    pub topic: String,
    /// The partition.
    pub partition: PartitionIndex,
}

impl TopicPartition {
    /// `topic`-`partition`.
    pub fn new(topic: impl Into<String>, partition: PartitionIndex) -> Self {
        TopicPartition {
            topic: topic.into(),
            partition,
        }
    }
}

impl std::fmt::Display for TopicPartition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}-{}", self.topic, self.partition)
    }
}

/// Where a mirrored partition's logs stand on both sides, read when the round starts.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Serialize, Deserialize)]
pub struct PartitionBounds {
    /// The source partition's log end offset (no real commit lies beyond it).
    pub source_log_end_offset: Offset,
    /// The destination partition's log start offset.
    pub dest_log_start_offset: Offset,
    /// The destination partition's last stable offset.
    pub dest_last_stable_offset: Offset,
}

/// A consumer group as the destination holds it.
#[derive(Clone, PartialEq, Eq, Hash, Debug, Default, Serialize, Deserialize)]
pub struct DestinationGroup {
    /// Members currently in the group on the destination (`DescribeGroups`).
    pub active_members: u32,
    /// Committed offsets.
    pub offsets: BTreeMap<TopicPartition, Offset>,
}

/// What the operator configures about the group offset sync.
#[derive(Clone, PartialEq, Eq, Hash, Debug, Serialize, Deserialize)]
pub struct GroupSyncPolicy {
    /// Which groups are synced.
    pub groups: NameFilter,
}

impl Default for GroupSyncPolicy {
    /// Every group.
    fn default() -> Self {
        GroupSyncPolicy {
            groups: NameFilter::all(),
        }
    }
}

/// One `OffsetCommit` on the destination.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize)]
pub struct OffsetCommit {
    /// The group.
    pub group: String,
    /// The partition.
    pub partition: TopicPartition,
    /// The offset to commit.
    pub offset: Offset,
    /// The destination's committed offset before (`None`: none).
    pub previous: Option<Offset>,
    /// The source's committed offset it derives from.
    pub source_offset: Offset,
}

/// Why a group, or one of its partitions, is not committed to.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize)]
pub enum GroupSkip {
    /// The group patterns leave it out.
    Excluded,
    /// The group has members on the destination: they own its offsets.
    ActiveOnDestination {
        /// How many.
        members: u32,
    },
    /// The partition is not mirrored by this sync.
    NotMirrored(TopicPartition),
    /// The destination's offset is already the synced one.
    UpToDate(TopicPartition),
    /// The destination's offset is ahead of the synced one: a sync never moves it back.
    DestinationAhead {
        /// The partition.
        partition: TopicPartition,
        /// The destination's committed offset.
        dest: Offset,
        /// The offset the sync computed.
        synced: Offset,
    },
}

/// The outcome of planning the group offset sync.
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct GroupOffsetPlan {
    /// The commits, sorted by group then partition.
    pub commits: Vec<OffsetCommit>,
    /// Groups or partitions left alone, with why.
    pub skipped: Vec<(String, GroupSkip)>,
    /// Source offsets refused.
    pub rejected: Vec<SyncItemError>,
}

/// The offset to commit on the destination for source committed offset `source`:
/// `max(dest log start, min(source, dest LSO))`.
pub fn synced_offset(source: Offset, bounds: &PartitionBounds) -> Offset {
    source
        .min(bounds.dest_last_stable_offset)
        .max(bounds.dest_log_start_offset)
}

/// The commits for `source` groups (group -> committed offsets) given the destination's
/// `dest` groups and the `mirrored` partitions' bounds (see the module documentation).
pub fn plan_group_offsets(
    source: &BTreeMap<String, BTreeMap<TopicPartition, Offset>>,
    dest: &BTreeMap<String, DestinationGroup>,
    mirrored: &BTreeMap<TopicPartition, PartitionBounds>,
    policy: &GroupSyncPolicy,
) -> GroupOffsetPlan {
    let mut plan = GroupOffsetPlan::default();
    let empty = DestinationGroup::default();
    for (group, offsets) in source {
        if group.is_empty() {
            plan.rejected.push(SyncItemError::EmptyGroupId);
            continue;
        }
        if !policy.groups.selects(group) {
            plan.skipped.push((group.clone(), GroupSkip::Excluded));
            continue;
        }
        let on_dest = dest.get(group).unwrap_or(&empty);
        if on_dest.active_members > 0 {
            plan.skipped.push((
                group.clone(),
                GroupSkip::ActiveOnDestination {
                    members: on_dest.active_members,
                },
            ));
            continue;
        }
        for (tp, &committed) in offsets {
            let Some(bounds) = mirrored.get(tp) else {
                plan.skipped
                    .push((group.clone(), GroupSkip::NotMirrored(tp.clone())));
                continue;
            };
            if committed < 0 {
                plan.rejected.push(SyncItemError::NegativeOffset {
                    group: group.clone(),
                    topic: tp.topic.clone(),
                    partition: tp.partition,
                    offset: committed,
                });
                continue;
            }
            if committed > bounds.source_log_end_offset {
                plan.rejected.push(SyncItemError::OffsetBeyondSourceEnd {
                    group: group.clone(),
                    topic: tp.topic.clone(),
                    partition: tp.partition,
                    offset: committed,
                    source_log_end_offset: bounds.source_log_end_offset,
                });
                continue;
            }
            let synced = synced_offset(committed, bounds);
            let previous = on_dest.offsets.get(tp).copied();
            match previous {
                Some(d) if d == synced => plan
                    .skipped
                    .push((group.clone(), GroupSkip::UpToDate(tp.clone()))),
                Some(d) if d > synced => plan.skipped.push((
                    group.clone(),
                    GroupSkip::DestinationAhead {
                        partition: tp.clone(),
                        dest: d,
                        synced,
                    },
                )),
                _ => plan.commits.push(OffsetCommit {
                    group: group.clone(),
                    partition: tp.clone(),
                    offset: synced,
                    previous,
                    source_offset: committed,
                }),
            }
        }
    }
    plan
}

/// `dest` with `commits` applied.
pub fn apply_offset_commits(
    dest: &BTreeMap<String, DestinationGroup>,
    commits: &[OffsetCommit],
) -> BTreeMap<String, DestinationGroup> {
    let mut out = dest.clone();
    for c in commits {
        out.entry(c.group.clone())
            .or_default()
            .offsets
            .insert(c.partition.clone(), c.offset);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_synced_offset_is_clamped_to_the_destination() {
        let b = PartitionBounds {
            source_log_end_offset: 100,
            dest_log_start_offset: 10,
            dest_last_stable_offset: 50,
        };
        assert_eq!(synced_offset(30, &b), 30);
        assert_eq!(
            synced_offset(80, &b),
            50,
            "not beyond the destination's LSO"
        );
        assert_eq!(synced_offset(5, &b), 10, "not below its log start");
        assert_eq!(synced_offset(0, &b), 10);
    }
}
