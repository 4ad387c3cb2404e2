//! Group offset sync: exact commits, the KIP's clamp, no backwards move, per-item rejection,
//! and idempotence as a property.

use std::collections::BTreeMap;

use kmirror_kernel::sync::group_offsets::{
    apply_offset_commits, plan_group_offsets, DestinationGroup, GroupSkip, GroupSyncPolicy,
    OffsetCommit, PartitionBounds, TopicPartition,
};
use kmirror_kernel::sync::pattern::{Glob, NameFilter};
use kmirror_kernel::sync::SyncItemError;
use proptest::prelude::*;

fn tp() -> TopicPartition {
    TopicPartition::new("orders", 0)
}

fn bounds() -> BTreeMap<TopicPartition, PartitionBounds> {
    BTreeMap::from([(
        tp(),
        PartitionBounds {
            source_log_end_offset: 120,
            dest_log_start_offset: 10,
            dest_last_stable_offset: 100,
        },
    )])
}

fn source(groups: &[(&str, i64)]) -> BTreeMap<String, BTreeMap<TopicPartition, i64>> {
    groups
        .iter()
        .map(|(g, o)| (g.to_string(), BTreeMap::from([(tp(), *o)])))
        .collect()
}

fn commit(group: &str, offset: i64, previous: Option<i64>, source_offset: i64) -> OffsetCommit {
    OffsetCommit {
        group: group.into(),
        partition: tp(),
        offset,
        previous,
        source_offset,
    }
}

#[test]
fn commits_follow_the_kip_formula() {
    let src = source(&[("billing", 40), ("lagging", 3), ("ahead-of-dest", 110)]);
    let dest = BTreeMap::new();
    let plan = plan_group_offsets(&src, &dest, &bounds(), &GroupSyncPolicy::default());
    assert_eq!(
        plan.commits,
        vec![
            commit("ahead-of-dest", 100, None, 110),
            commit("billing", 40, None, 40),
            commit("lagging", 10, None, 3),
        ]
    );
    assert!(plan.rejected.is_empty() && plan.skipped.is_empty());
}

#[test]
fn active_groups_excluded_groups_and_offsets_ahead_are_left_alone() {
    let src = source(&[
        ("live", 40),
        ("test-1", 40),
        ("moved-on", 40),
        ("same", 40),
        ("behind", 40),
    ]);
    let dest = BTreeMap::from([
        (
            "live".to_string(),
            DestinationGroup {
                active_members: 2,
                offsets: BTreeMap::new(),
            },
        ),
        (
            "moved-on".to_string(),
            DestinationGroup {
                active_members: 0,
                offsets: BTreeMap::from([(tp(), 55)]),
            },
        ),
        (
            "same".to_string(),
            DestinationGroup {
                active_members: 0,
                offsets: BTreeMap::from([(tp(), 40)]),
            },
        ),
        (
            "behind".to_string(),
            DestinationGroup {
                active_members: 0,
                offsets: BTreeMap::from([(tp(), 20)]),
            },
        ),
    ]);
    let policy = GroupSyncPolicy {
        groups: NameFilter {
            include: vec![Glob::any()],
            exclude: vec![Glob::new("test-*")],
        },
    };
    let plan = plan_group_offsets(&src, &dest, &bounds(), &policy);
    assert_eq!(plan.commits, vec![commit("behind", 40, Some(20), 40)]);
    assert_eq!(
        plan.skipped,
        vec![
            ("live".into(), GroupSkip::ActiveOnDestination { members: 2 }),
            (
                "moved-on".into(),
                GroupSkip::DestinationAhead {
                    partition: tp(),
                    dest: 55,
                    synced: 40
                }
            ),
            ("same".into(), GroupSkip::UpToDate(tp())),
            ("test-1".into(), GroupSkip::Excluded),
        ]
    );
}

#[test]
fn hostile_offsets_are_rejected_per_item() {
    let mut src = source(&[("forged", 121), ("negative", -1), ("fine", 50)]);
    src.insert(String::new(), BTreeMap::from([(tp(), 1)]));
    src.get_mut("fine")
        .unwrap()
        .insert(TopicPartition::new("payments", 0), 7);
    let plan = plan_group_offsets(
        &src,
        &BTreeMap::new(),
        &bounds(),
        &GroupSyncPolicy::default(),
    );
    assert_eq!(plan.commits, vec![commit("fine", 50, None, 50)]);
    assert_eq!(
        plan.skipped,
        vec![(
            "fine".into(),
            GroupSkip::NotMirrored(TopicPartition::new("payments", 0))
        )]
    );
    assert_eq!(
        plan.rejected,
        vec![
            SyncItemError::EmptyGroupId,
            SyncItemError::OffsetBeyondSourceEnd {
                group: "forged".into(),
                topic: "orders".into(),
                partition: 0,
                offset: 121,
                source_log_end_offset: 120,
            },
            SyncItemError::NegativeOffset {
                group: "negative".into(),
                topic: "orders".into(),
                partition: 0,
                offset: -1,
            },
        ]
    );
    assert!(plan.rejected[1]
        .to_string()
        .contains("beyond the source's log end offset 120"));
}

proptest! {
    /// Planning after applying commits nothing more, and no destination offset ever moves
    /// backwards.
    #[test]
    fn group_sync_is_idempotent_and_monotone(
        src in prop::collection::btree_map("[a-c]", -2i64..130, 0..4),
        dest_offsets in prop::collection::btree_map("[a-c]", (0i64..130, 0u32..2), 0..4),
        log_start in 0i64..20,
        lso in 20i64..110,
    ) {
        let b = BTreeMap::from([(tp(), PartitionBounds {
            source_log_end_offset: 120,
            dest_log_start_offset: log_start,
            dest_last_stable_offset: lso,
        })]);
        let source: BTreeMap<String, BTreeMap<TopicPartition, i64>> = src
            .iter()
            .map(|(g, o)| (g.clone(), BTreeMap::from([(tp(), *o)])))
            .collect();
        let dest: BTreeMap<String, DestinationGroup> = dest_offsets
            .iter()
            .map(|(g, (o, m))| (g.clone(), DestinationGroup {
                active_members: *m,
                offsets: BTreeMap::from([(tp(), *o)]),
            }))
            .collect();
        let policy = GroupSyncPolicy::default();
        let plan = plan_group_offsets(&source, &dest, &b, &policy);
        for c in &plan.commits {
            prop_assert!(c.offset >= log_start && c.offset <= lso.max(log_start));
            if let Some(prev) = c.previous {
                prop_assert!(c.offset > prev, "moved backwards: {:?}", c);
            }
            prop_assert_eq!(dest.get(&c.group).map_or(0, |g| g.active_members), 0);
        }
        let after = apply_offset_commits(&dest, &plan.commits);
        prop_assert_eq!(&apply_offset_commits(&after, &plan.commits), &after);
        let again = plan_group_offsets(&source, &after, &b, &policy);
        prop_assert!(again.commits.is_empty(), "{:?}", again.commits);
    }
}
