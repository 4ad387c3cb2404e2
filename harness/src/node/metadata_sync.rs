//! Metadata sync on a node destination ([`NodeSync`]): topic configs per topic, group offsets
//! per partition and ACLs, planned by the kernel ([`kmirror_kernel::sync`]) and fenced by its
//! gate, run **inside the mirroring process** between fetch rounds (`kmirror mirror --topics
//! ... --sync-interval-ms MS`) or alone (`kmirror sync --dest NODE`).
//!
//! **Fences.** A round opens [`gate::open`] for every partition of every topic of the node,
//! from the topic's `mirror.name` (`node.properties`) and the partition's `__mirror_state`
//! record ([`NodeDriver::persisted_record`]). A topic with at least one fenced partition takes
//! part; the others are reported with the gate's reason. Before each write, [`gate::admit`]
//! checks the fences that write depends on against the state at that moment:
//!
//! | write | one per | admitted when |
//! |---|---|---|
//! | `metadata/topic-configs/<topic>.properties` | topic with changes | every fence of the topic admits |
//! | `metadata/consumer-offsets/<group>.json` | group with commits | per commit: the fence of its partition admits (the refused commits are dropped) |
//! | `metadata/acls.json` | round with ACL changes | every fence of the round admits |
//!
//! The ACL filters default to `TOPIC:<t>` for every topic taking part, and `GROUP:*`; only the
//! bindings the mirror created **and the round's filters select** may be deleted, so the ACLs
//! of a topic that failed over are the destination's from then on, like its configs and
//! offsets.
//!
//! **Atomicity.** The admit check and the write it admits must not be separated by a state
//! write of the same partition. In the mirroring process the sync runs between the driver's
//! steps on the driver's thread ([`NodeSync::land`] takes the driver by shared reference: it
//! cannot step it); a standalone `kmirror sync` holds the destination's lock (it opens a
//! [`NodeDriver`]), so no mirror, stop, pause or resume runs meanwhile. Every metadata file is
//! written atomically (temporary file, fsync, rename, directory fsync): a crash leaves each
//! file before or after a write, and a torn `*.tmp` is never read.

use std::collections::{BTreeMap, BTreeSet};

use kmirror_kernel::config::MirrorConfig;
use kmirror_kernel::desired::DesiredState;
use kmirror_kernel::log::LogView;
use kmirror_kernel::node::PartitionKey;
use kmirror_kernel::sync::acl::{
    apply_acl_plan, plan_acls, AclBinding, AclFilter, AclPlan, AclSyncPolicy, ResourceType,
};
use kmirror_kernel::sync::gate::{self, SyncFence, SyncRefused};
use kmirror_kernel::sync::group_offsets::{
    plan_group_offsets, DestinationGroup, GroupOffsetPlan, GroupSkip, GroupSyncPolicy,
    OffsetCommit, PartitionBounds, TopicPartition,
};
use kmirror_kernel::sync::pattern::Glob;
use kmirror_kernel::sync::topic_config::{
    apply_config_changes, plan_topic_config, ConfigChange, ConfigPlan, ConfigSyncPolicy,
};
use kmirror_kernel::types::{MirrorPartition, PartitionIndex, TopicId};

use super::NodeDriver;
use crate::sync::local::{AclsFile, MetadataDir, CONSUMER_OFFSETS_DIR};
use crate::sync::report::{Category, Rejection};
use crate::sync::{GroupRecord, MetadataSource, Read, SyncError};

/// What the operator configures about a node's metadata sync.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeSyncPolicy {
    /// The kernel variant (its mutant, if any, reaches the gate).
    pub kernel: MirrorConfig,
    /// Topic config keys kept local.
    pub configs: ConfigSyncPolicy,
    /// Which groups are synced.
    pub groups: GroupSyncPolicy,
    /// The ACL filters; `None`: `TOPIC:<t>` for every topic taking part in the round, and
    /// `GROUP:*`.
    pub acl_filters: Option<Vec<AclFilter>>,
    /// The principals the mirror may grant to.
    pub acl_principals: Glob,
}

impl Default for NodeSyncPolicy {
    /// Every config but the local ones, every group, the default ACL filters, any principal.
    fn default() -> Self {
        NodeSyncPolicy {
            kernel: MirrorConfig::default(),
            configs: ConfigSyncPolicy::default(),
            groups: GroupSyncPolicy::default(),
            acl_filters: None,
            acl_principals: Glob::any(),
        }
    }
}

/// One topic taking part in a round: the fences of its partitions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TopicFences {
    /// The topic.
    pub name: String,
    /// Its id.
    pub topic_id: TopicId,
    /// Its partition count.
    pub partitions: PartitionIndex,
    /// The fenced partitions (MIRRORING or PAUSED when the round started).
    pub fences: BTreeMap<PartitionIndex, SyncFence>,
}

/// A round that has read everything and planned its writes, which have not landed yet.
#[derive(Clone, Debug)]
pub struct NodePendingSync {
    /// The topics taking part.
    pub topics: Vec<TopicFences>,
    /// Topics and partitions the gate left out, with why (`orders` or `orders-3`).
    pub left_out: Vec<(String, SyncRefused)>,
    /// Per topic taking part, its config plan.
    pub configs: BTreeMap<String, ConfigPlan>,
    /// The offset commits.
    pub groups: GroupOffsetPlan,
    /// The ACL changes.
    pub acls: AclPlan,
    /// Items rejected while reading the source.
    pub read_rejections: Vec<Rejection>,
}

/// One write of a round, or the gate's refusal of it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeWrite {
    /// The category.
    pub category: Category,
    /// What is written: the topic, the group, or `acls`.
    pub target: String,
    /// `Ok(changes written)`, or why the gate refused (a group's refused commits are dropped,
    /// the others written: one entry each).
    pub result: Result<usize, SyncRefused>,
}

/// What one node round did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeSyncReport {
    /// The topics taking part, with fenced and total partitions.
    pub topics: Vec<(String, usize, PartitionIndex)>,
    /// Topics and partitions the gate left out.
    pub left_out: Vec<(String, SyncRefused)>,
    /// Config changes planned, per topic.
    pub config_changes: BTreeMap<String, Vec<ConfigChange>>,
    /// Offset commits planned.
    pub commits: Vec<OffsetCommit>,
    /// Groups left alone because members are active on the destination.
    pub active_groups: Vec<(String, u32)>,
    /// ACL bindings to create.
    pub acl_creates: Vec<AclBinding>,
    /// ACL bindings to delete (created by the mirror).
    pub acl_deletes: Vec<AclBinding>,
    /// Source items refused.
    pub rejected: Vec<Rejection>,
    /// The writes, in order.
    pub writes: Vec<NodeWrite>,
}

impl NodeSyncReport {
    /// Changes written.
    pub fn written(&self) -> usize {
        self.writes
            .iter()
            .filter_map(|w| w.result.as_ref().ok())
            .sum()
    }

    /// Writes the gate refused.
    pub fn refused(&self) -> usize {
        self.writes.iter().filter(|w| w.result.is_err()).count()
    }

    /// The round as lines (`kmirror sync`, and `kmirror mirror --sync-interval-ms` unless
    /// `--quiet`).
    pub fn render(&self) -> String {
        let mut out = String::new();
        let mut line = |s: String| {
            out.push_str(&s);
            out.push('\n');
        };
        let topics: Vec<String> = self
            .topics
            .iter()
            .map(|(t, fenced, total)| format!("{t} ({fenced}/{total} partitions)"))
            .collect();
        line(format!(
            "sync of {}",
            if topics.is_empty() {
                "no topic".to_owned()
            } else {
                topics.join(", ")
            }
        ));
        for (what, why) in &self.left_out {
            line(format!("  left out {what}: {why}"));
        }
        for (topic, changes) in &self.config_changes {
            for c in changes {
                match c {
                    ConfigChange::Set { key, value } => {
                        line(format!("  config   {topic} SET {key}={value}"))
                    }
                    ConfigChange::Delete { key } => {
                        line(format!("  config   {topic} DELETE {key}"))
                    }
                }
            }
        }
        for c in &self.commits {
            line(format!(
                "  offsets  {} {}: commit {} (source {}, was {})",
                c.group,
                c.partition,
                c.offset,
                c.source_offset,
                c.previous.map_or("none".into(), |p| p.to_string())
            ));
        }
        for (group, members) in &self.active_groups {
            line(format!(
                "  offsets  {group}: skipped, {members} active member(s) on the destination own \
                 its offsets"
            ));
        }
        for b in &self.acl_creates {
            line(format!("  acl      CREATE {b}"));
        }
        for b in &self.acl_deletes {
            line(format!("  acl      DELETE {b}"));
        }
        for r in &self.rejected {
            line(format!(
                "  {:<8} REJECTED: {}",
                r.category.to_string(),
                r.message
            ));
        }
        for w in &self.writes {
            if let Err(r) = &w.result {
                line(format!(
                    "  {:<8} NOT WRITTEN ({}): {r}",
                    w.category.to_string(),
                    w.target
                ));
            }
        }
        line(format!(
            "  {} change(s) written, {} item(s) rejected",
            self.written(),
            self.rejected.len()
        ));
        out
    }
}

/// A node's metadata sync: its policy, its schedule and its write counter. See the [module
/// documentation](self).
#[derive(Clone, Debug)]
pub struct NodeSync {
    policy: NodeSyncPolicy,
    interval_ms: i64,
    next_due_ms: Option<i64>,
    writes: u64,
    halt_after_writes: Option<u64>,
}

impl NodeSync {
    /// A sync with `policy`, a round every `interval_ms` milliseconds (the first at once).
    pub fn new(policy: NodeSyncPolicy, interval_ms: u64) -> Self {
        NodeSync {
            policy,
            interval_ms: i64::try_from(interval_ms).unwrap_or(i64::MAX).max(1),
            next_due_ms: None,
            writes: 0,
            halt_after_writes: None,
        }
    }

    /// Fault injection: [`Self::land`] fails with [`SyncError::Halted`] right after the N-th
    /// write since the sync was created, as a crash there would (crash tests drop the driver).
    pub fn halt_after_writes(mut self, writes: u64) -> Self {
        self.halt_after_writes = Some(writes);
        self
    }

    /// Metadata files written since the sync was created.
    pub fn writes(&self) -> u64 {
        self.writes
    }

    /// The policy.
    pub fn policy(&self) -> &NodeSyncPolicy {
        &self.policy
    }

    /// Whether a round is due at `now_ms`.
    pub fn is_due(&self, now_ms: i64) -> bool {
        self.next_due_ms.is_none_or(|due| now_ms >= due)
    }

    /// A round if one is due at `now_ms` (the next is then due an interval later, whatever the
    /// outcome: a source that is down is asked again at the next interval).
    pub fn round_if_due(
        &mut self,
        driver: &NodeDriver,
        source: &mut dyn MetadataSource,
        now_ms: i64,
    ) -> Option<Result<NodeSyncReport, SyncError>> {
        if !self.is_due(now_ms) {
            return None;
        }
        self.next_due_ms = Some(now_ms.saturating_add(self.interval_ms));
        Some(self.round(driver, source))
    }

    /// A whole round: [`Self::read`], then [`Self::land`].
    pub fn round(
        &mut self,
        driver: &NodeDriver,
        source: &mut dyn MetadataSource,
    ) -> Result<NodeSyncReport, SyncError> {
        let pending = self.read(driver, source)?;
        self.land(driver, pending)
    }

    /// Step 1 of a round: the fences, both sides' metadata and the kernel's plans. Nothing is
    /// read from the source when no topic takes part.
    pub fn read(
        &self,
        driver: &NodeDriver,
        source: &mut dyn MetadataSource,
    ) -> Result<NodePendingSync, SyncError> {
        let policy = &self.policy;
        let meta = driver.dest().meta();
        let dest_meta = MetadataDir::of(driver.dest().root());
        let mut topics = Vec::new();
        let mut left_out = Vec::new();
        for (name, topic) in &meta.topics {
            let desired = topic.desired(name)?;
            let mut fences = BTreeMap::new();
            let mut refusals = Vec::new();
            for p in 0..topic.partitions {
                let stored = desired.mirror().and_then(|m| {
                    driver.persisted_record(&MirrorPartition {
                        mirror: m.clone(),
                        topic_id: topic.topic_id,
                        partition: p,
                    })
                });
                match gate::open(&policy.kernel, &desired, stored) {
                    Ok(f) => {
                        fences.insert(p, f);
                    }
                    Err(r) => refusals.push((p, r)),
                }
            }
            if fences.is_empty() {
                if let Some((_, r)) = refusals.into_iter().next() {
                    left_out.push((name.clone(), r));
                }
                continue;
            }
            left_out.extend(
                refusals
                    .into_iter()
                    .map(|(p, r)| (format!("{name}-{p}"), r)),
            );
            topics.push(TopicFences {
                name: name.clone(),
                topic_id: topic.topic_id,
                partitions: topic.partitions,
                fences,
            });
        }
        let mut pending = NodePendingSync {
            topics,
            left_out,
            configs: BTreeMap::new(),
            groups: GroupOffsetPlan::default(),
            acls: AclPlan::default(),
            read_rejections: Vec::new(),
        };
        if pending.topics.is_empty() {
            return Ok(pending);
        }

        // The source, all of it before any plan (and released before any write).
        let source_read = read_source(source, &pending.topics);
        source.release();
        let (source_configs, source_groups, source_acls, source_leos) = source_read?;

        let mut reject = |category, messages: Vec<String>| {
            pending.read_rejections.extend(
                messages
                    .into_iter()
                    .map(|message| Rejection { category, message }),
            )
        };
        let mut bounds = BTreeMap::new();
        for t in &pending.topics {
            let read = &source_configs[&t.name];
            reject(Category::TopicConfig, read.rejected.clone());
            let dest = first_rejection(
                dest_meta.read_topic_config(&t.name)?,
                &dest_meta.topic_config_path(&t.name),
            )?;
            pending.configs.insert(
                t.name.clone(),
                plan_topic_config(&read.value, &dest, &policy.configs),
            );
            for &p in t.fences.keys() {
                let tp = TopicPartition::new(t.name.clone(), p);
                let Some(log) = driver.log(&PartitionKey::new(t.topic_id, p)) else {
                    continue;
                };
                bounds.insert(
                    tp.clone(),
                    PartitionBounds {
                        source_log_end_offset: source_leos[&tp],
                        dest_log_start_offset: log.log_start_offset(),
                        dest_last_stable_offset: log.last_stable_offset(),
                    },
                );
            }
        }
        reject(Category::GroupOffsets, source_groups.rejected);
        reject(Category::Acls, source_acls.rejected);

        let source_offsets = source_groups
            .value
            .into_iter()
            .map(|(g, r)| (g, r.offsets))
            .collect();
        let dest_groups = first_rejection(
            dest_meta.read_groups()?,
            &dest_meta.root().join(CONSUMER_OFFSETS_DIR),
        )?
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
        pending.groups = plan_group_offsets(&source_offsets, &dest_groups, &bounds, &policy.groups);

        let acl_policy = AclSyncPolicy {
            filters: self.acl_filters(&pending.topics),
            principals: policy.acl_principals.clone(),
        };
        let (dest_acls, created) = read_dest_acls(&dest_meta)?;
        // Only what this round selects may be deleted: a failed-over topic's bindings stay.
        let created: BTreeSet<AclBinding> = created
            .into_iter()
            .filter(|b| acl_policy.filters.iter().any(|f| f.selects(b)))
            .collect();
        pending.acls = plan_acls(&source_acls.value, &dest_acls, &created, &acl_policy);
        Ok(pending)
    }

    fn acl_filters(&self, topics: &[TopicFences]) -> Vec<AclFilter> {
        if let Some(f) = &self.policy.acl_filters {
            return f.clone();
        }
        let mut filters: Vec<AclFilter> = topics
            .iter()
            .map(|t| AclFilter {
                resource_type: Some(ResourceType::Topic),
                resource_name: Glob::new(&t.name),
            })
            .collect();
        filters.push(AclFilter {
            resource_type: Some(ResourceType::Group),
            resource_name: Glob::any(),
        });
        filters
    }

    /// Step 2 of a round: each write behind the gate's admit check against the node's state at
    /// that moment (see the [module documentation](self) for which fences each write needs).
    pub fn land(
        &mut self,
        driver: &NodeDriver,
        pending: NodePendingSync,
    ) -> Result<NodeSyncReport, SyncError> {
        let NodePendingSync {
            topics,
            left_out,
            configs,
            groups,
            acls,
            read_rejections,
        } = pending;
        let dest_meta = MetadataDir::of(driver.dest().root());
        let mut report = NodeSyncReport {
            topics: topics
                .iter()
                .map(|t| (t.name.clone(), t.fences.len(), t.partitions))
                .collect(),
            left_out,
            rejected: read_rejections,
            ..NodeSyncReport::default()
        };
        let mut add = |category, errors: &[kmirror_kernel::sync::SyncItemError]| {
            report.rejected.extend(errors.iter().map(|e| Rejection {
                category,
                message: e.to_string(),
            }))
        };
        for plan in configs.values() {
            add(Category::TopicConfig, &plan.rejected);
        }
        add(Category::GroupOffsets, &groups.rejected);
        add(Category::Acls, &acls.rejected);
        report.active_groups = groups
            .skipped
            .iter()
            .filter_map(|(g, s)| match s {
                GroupSkip::ActiveOnDestination { members } => Some((g.clone(), *members)),
                _ => None,
            })
            .collect();

        // Topic configs: one file per topic, every fence of the topic.
        for t in &topics {
            let Some(plan) = configs.get(&t.name) else {
                continue;
            };
            if plan.changes.is_empty() {
                continue;
            }
            report
                .config_changes
                .insert(t.name.clone(), plan.changes.clone());
            let result = match self.admit_all(driver, std::slice::from_ref(t)) {
                Ok(()) => {
                    let current = first_rejection(
                        dest_meta.read_topic_config(&t.name)?,
                        &dest_meta.topic_config_path(&t.name),
                    )?;
                    let next = apply_config_changes(&current, &plan.changes);
                    dest_meta.write_topic_config(&t.name, &next)?;
                    self.wrote()?;
                    Ok(plan.changes.len())
                }
                Err(r) => Err(r),
            };
            report.writes.push(NodeWrite {
                category: Category::TopicConfig,
                target: t.name.clone(),
                result,
            });
        }

        // Group offsets: one file per group, each commit behind its partition's fence.
        let mut by_group: BTreeMap<&str, Vec<&OffsetCommit>> = BTreeMap::new();
        for c in &groups.commits {
            by_group.entry(c.group.as_str()).or_default().push(c);
        }
        report.commits = groups.commits.clone();
        for (group, commits) in by_group {
            let mut admitted = Vec::new();
            for c in commits {
                match self.admit_partition(driver, &topics, &c.partition) {
                    Ok(()) => admitted.push(c),
                    Err(r) => report.writes.push(NodeWrite {
                        category: Category::GroupOffsets,
                        target: format!("{group} {}", c.partition),
                        result: Err(r),
                    }),
                }
            }
            if admitted.is_empty() {
                continue;
            }
            let mut record = first_rejection(
                dest_meta.read_groups()?,
                &dest_meta.root().join(CONSUMER_OFFSETS_DIR),
            )?
            .remove(group)
            .unwrap_or_default();
            for c in &admitted {
                record.offsets.insert(c.partition.clone(), c.offset);
            }
            dest_meta.write_group(group, &record)?;
            self.wrote()?;
            report.writes.push(NodeWrite {
                category: Category::GroupOffsets,
                target: group.to_owned(),
                result: Ok(admitted.len()),
            });
        }

        // ACLs: one file, every fence of the round.
        let count = acls.creates.len() + acls.deletes.len();
        report.acl_creates = acls.creates.clone();
        report.acl_deletes = acls.deletes.clone();
        if count > 0 {
            let result = match self.admit_all(driver, &topics) {
                Ok(()) => {
                    let (dest, created) = read_dest_acls(&dest_meta)?;
                    let (dest, created) = apply_acl_plan(&dest, &created, &acls);
                    dest_meta.write_acls(&AclsFile {
                        version: 0,
                        bindings: dest.iter().map(AclBinding::to_raw).collect(),
                        created_by_mirror: created.iter().map(AclBinding::to_raw).collect(),
                    })?;
                    self.wrote()?;
                    Ok(count)
                }
                Err(r) => Err(r),
            };
            report.writes.push(NodeWrite {
                category: Category::Acls,
                target: "acls".to_owned(),
                result,
            });
        }
        Ok(report)
    }

    /// Counts a write; the fault injection's halt.
    fn wrote(&mut self) -> Result<(), SyncError> {
        self.writes += 1;
        if self.halt_after_writes == Some(self.writes) {
            return Err(SyncError::Halted {
                writes: self.writes,
            });
        }
        Ok(())
    }

    /// [`gate::admit`] for every fence of `topics`, now.
    fn admit_all(&self, driver: &NodeDriver, topics: &[TopicFences]) -> Result<(), SyncRefused> {
        for t in topics {
            let desired = current_desired(driver, &t.name)?;
            for (&p, fence) in &t.fences {
                self.admit(driver, t, p, fence, &desired)?;
            }
        }
        Ok(())
    }

    /// [`gate::admit`] for the fence of `tp`, now (a partition without a fence is refused).
    fn admit_partition(
        &self,
        driver: &NodeDriver,
        topics: &[TopicFences],
        tp: &TopicPartition,
    ) -> Result<(), SyncRefused> {
        let (t, fence) = topics
            .iter()
            .find(|t| t.name == tp.topic)
            .and_then(|t| Some((t, t.fences.get(&tp.partition)?)))
            .ok_or(SyncRefused::NothingPersisted)?;
        let desired = current_desired(driver, &t.name)?;
        self.admit(driver, t, tp.partition, fence, &desired)
    }

    fn admit(
        &self,
        driver: &NodeDriver,
        t: &TopicFences,
        partition: PartitionIndex,
        fence: &SyncFence,
        desired: &DesiredState,
    ) -> Result<(), SyncRefused> {
        let stored = driver.persisted_record(&MirrorPartition {
            mirror: fence.mirror.clone(),
            topic_id: t.topic_id,
            partition,
        });
        gate::admit(&self.policy.kernel, fence, desired, stored)
    }
}

/// The topic's `mirror.name` now (a topic gone from `node.properties` is not mirrored).
fn current_desired(driver: &NodeDriver, topic: &str) -> Result<DesiredState, SyncRefused> {
    driver
        .dest()
        .meta()
        .topics
        .get(topic)
        .and_then(|t| t.desired(topic).ok())
        .ok_or(SyncRefused::NotMirrored)
}

type SourceRead = (
    BTreeMap<String, Read<BTreeMap<String, String>>>,
    Read<BTreeMap<String, GroupRecord>>,
    Read<Vec<kmirror_kernel::sync::acl::RawAclBinding>>,
    BTreeMap<TopicPartition, kmirror_kernel::types::Offset>,
);

/// Everything a round reads of the source: each topic's configs, the groups, the ACLs and the
/// log end offset of every fenced partition.
fn read_source(
    source: &mut dyn MetadataSource,
    topics: &[TopicFences],
) -> Result<SourceRead, SyncError> {
    let mut configs = BTreeMap::new();
    let mut leos = BTreeMap::new();
    for t in topics {
        configs.insert(t.name.clone(), source.topic_config(&t.name)?);
        for &p in t.fences.keys() {
            let tp = TopicPartition::new(t.name.clone(), p);
            let leo = source.log_end_offset(&tp)?;
            leos.insert(tp, leo);
        }
    }
    Ok((configs, source.groups()?, source.acls()?, leos))
}

fn read_dest_acls(
    meta: &MetadataDir,
) -> Result<(BTreeSet<AclBinding>, BTreeSet<AclBinding>), SyncError> {
    let path = meta.acls_path();
    let file = meta
        .read_acls()?
        .map_err(|reason| SyncError::BadDestinationFile {
            path: path.clone(),
            reason,
        })?;
    let parse = |raw: &[kmirror_kernel::sync::acl::RawAclBinding]| {
        raw.iter()
            .map(|r| {
                AclBinding::from_raw(r).map_err(|e| SyncError::BadDestinationFile {
                    path: path.clone(),
                    reason: e.to_string(),
                })
            })
            .collect::<Result<BTreeSet<_>, _>>()
    };
    Ok((parse(&file.bindings)?, parse(&file.created_by_mirror)?))
}

/// A destination file that does not parse stops the round: the sync never overwrites what it
/// cannot read.
fn first_rejection<T>(read: Read<T>, path: &std::path::Path) -> Result<T, SyncError> {
    match read.rejected.into_iter().next() {
        None => Ok(read.value),
        Some(reason) => Err(SyncError::BadDestinationFile {
            path: path.to_path_buf(),
            reason,
        }),
    }
}
