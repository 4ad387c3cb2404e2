//! A sync round: read (gate open, source and destination metadata, the kernel's plans), then
//! land (gate admit before each write). See the [module documentation](super).

use std::collections::BTreeMap;

use kmirror_kernel::config::MirrorConfig;
use kmirror_kernel::sync::acl::{plan_acls, AclFilter, AclPlan, AclSyncPolicy, ResourceType};
use kmirror_kernel::sync::gate::{self, SyncFence, SyncRefused};
use kmirror_kernel::sync::group_offsets::{
    plan_group_offsets, DestinationGroup, GroupOffsetPlan, GroupSyncPolicy, PartitionBounds,
    TopicPartition,
};
use kmirror_kernel::sync::pattern::Glob;
use kmirror_kernel::sync::topic_config::{plan_topic_config, ConfigPlan, ConfigSyncPolicy};

use super::report::{Category, Rejection, RoundReport, WriteOutcome};
use super::{MetadataSink, MetadataSource, SyncError};

/// What the operator configures about a sync.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SyncPolicy {
    /// The kernel variant (its mutant, if any, reaches the gate).
    pub kernel: MirrorConfig,
    /// Topic config keys kept local.
    pub configs: ConfigSyncPolicy,
    /// Which groups are synced.
    pub groups: GroupSyncPolicy,
    /// The mirror's ACL filters and principal pattern.
    pub acls: AclSyncPolicy,
}

impl SyncPolicy {
    /// The defaults for mirrored topic `topic`: every config but the local ones, every group,
    /// the ACLs of the topic and of every group, any principal.
    pub fn for_topic(topic: &str) -> Self {
        SyncPolicy {
            kernel: MirrorConfig::default(),
            configs: ConfigSyncPolicy::default(),
            groups: GroupSyncPolicy::default(),
            acls: AclSyncPolicy {
                filters: vec![
                    AclFilter {
                        resource_type: Some(ResourceType::Topic),
                        resource_name: Glob::new(topic),
                    },
                    AclFilter {
                        resource_type: Some(ResourceType::Group),
                        resource_name: Glob::any(),
                    },
                ],
                principals: Glob::any(),
            },
        }
    }
}

/// A round that has read everything and planned its writes, which have not landed yet.
#[derive(Clone, Debug)]
pub struct PendingSync {
    /// What the round read of the destination's mirror state.
    pub fence: SyncFence,
    /// The config changes.
    pub configs: ConfigPlan,
    /// The offset commits.
    pub groups: GroupOffsetPlan,
    /// The ACL changes.
    pub acls: AclPlan,
    /// Items rejected while reading the source.
    pub read_rejections: Vec<Rejection>,
}

/// Step 1 of a round: the gate's fence, then both sides' metadata and the kernel's plans.
/// `Ok(Err(_))` when the gate lets no round start.
pub fn read_round(
    source: &mut dyn MetadataSource,
    sink: &mut dyn MetadataSink,
    policy: &SyncPolicy,
) -> Result<Result<PendingSync, SyncRefused>, SyncError> {
    let desired = sink.desired_state()?;
    let stored = match desired.mirror() {
        Some(m) => sink.stored_state(m)?,
        None => None,
    };
    let fence = match gate::open(&policy.kernel, &desired, stored.as_ref()) {
        Ok(f) => f,
        Err(r) => return Ok(Err(r)),
    };
    let (topic, topic_id) = sink.topic();
    let (source_topic, source_id) = source.topic()?;
    if source_topic != topic || source_id != topic_id {
        return Err(SyncError::TopicMismatch {
            source_topic: format!("{}: {source_topic} (id {})", source.describe(), source_id),
            dest_topic: format!("{}: {topic} (id {topic_id})", sink.describe()),
        });
    }
    let tp = TopicPartition::new(topic.clone(), sink.partition());
    let source_config = source.topic_config(&topic);
    let source_groups = source.groups();
    let source_acls = source.acls();
    let source_leo = source.log_end_offset(&tp);
    source.release();
    let (source_config, source_groups, source_acls, source_leo) =
        (source_config?, source_groups?, source_acls?, source_leo?);

    let mut read_rejections = Vec::new();
    let mut reject = |category, messages: Vec<String>| {
        read_rejections.extend(
            messages
                .into_iter()
                .map(|message| Rejection { category, message }),
        )
    };
    reject(Category::TopicConfig, source_config.rejected);
    reject(Category::GroupOffsets, source_groups.rejected);
    reject(Category::Acls, source_acls.rejected);

    let configs = plan_topic_config(&source_config.value, &sink.topic_config()?, &policy.configs);
    let (log_start, lso) = sink.log_bounds()?;
    let bounds = BTreeMap::from([(
        tp,
        PartitionBounds {
            source_log_end_offset: source_leo,
            dest_log_start_offset: log_start,
            dest_last_stable_offset: lso,
        },
    )]);
    let source_offsets = source_groups
        .value
        .into_iter()
        .map(|(g, r)| (g, r.offsets))
        .collect();
    let dest_groups = sink
        .groups()?
        .into_iter()
        .map(|(g, r)| {
            (
                g,
                DestinationGroup {
                    active_members: u32::try_from(r.members.len()).unwrap_or(u32::MAX),
                    offsets: r.offsets,
                },
            )
        })
        .collect();
    let groups = plan_group_offsets(&source_offsets, &dest_groups, &bounds, &policy.groups);
    let (dest_acls, created) = sink.acls()?;
    let acls = plan_acls(&source_acls.value, &dest_acls, &created, &policy.acls);
    Ok(Ok(PendingSync {
        fence,
        configs,
        groups,
        acls,
        read_rejections,
    }))
}

/// Step 2 of a round: each category's writes, each behind the gate's admit check against the
/// destination's state at that moment.
pub fn land(
    pending: PendingSync,
    sink: &mut dyn MetadataSink,
    policy: &SyncPolicy,
) -> Result<RoundReport, SyncError> {
    let PendingSync {
        fence,
        configs,
        groups,
        acls,
        read_rejections,
    } = pending;
    let mut rejected = read_rejections;
    let mut add = |category, errors: &[kmirror_kernel::sync::SyncItemError]| {
        rejected.extend(errors.iter().map(|e| Rejection {
            category,
            message: e.to_string(),
        }))
    };
    add(Category::TopicConfig, &configs.rejected);
    add(Category::GroupOffsets, &groups.rejected);
    add(Category::Acls, &acls.rejected);

    let mut writes = Vec::new();
    let counts = [
        (Category::TopicConfig, configs.changes.len()),
        (Category::GroupOffsets, groups.commits.len()),
        (Category::Acls, acls.creates.len() + acls.deletes.len()),
    ];
    for (category, count) in counts {
        if count == 0 {
            continue;
        }
        let desired = sink.desired_state()?;
        let stored = sink.stored_state(&fence.mirror)?;
        let result = match gate::admit(&policy.kernel, &fence, &desired, stored.as_ref()) {
            Ok(()) => {
                match category {
                    Category::TopicConfig => sink.apply_config(&configs.changes)?,
                    Category::GroupOffsets => sink.commit_offsets(&groups.commits)?,
                    Category::Acls => sink.apply_acls(&acls)?,
                }
                Ok(count)
            }
            Err(r) => Err(r),
        };
        writes.push(WriteOutcome { category, result });
    }
    Ok(RoundReport {
        started: Ok(fence),
        config_changes: configs.changes,
        kept_local: configs.kept_local,
        commits: groups.commits,
        group_skips: groups.skipped,
        acl_creates: acls.creates,
        acl_deletes: acls.deletes,
        acl_not_owned: acls.not_owned,
        acl_unselected: acls.unselected,
        rejected,
        writes,
    })
}

/// A whole round: [`read_round`], then [`land`].
pub fn run_round(
    source: &mut dyn MetadataSource,
    sink: &mut dyn MetadataSink,
    policy: &SyncPolicy,
) -> Result<RoundReport, SyncError> {
    match read_round(source, sink, policy)? {
        Ok(pending) => land(pending, sink, policy),
        Err(refused) => Ok(RoundReport::refused(refused)),
    }
}
