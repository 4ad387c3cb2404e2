//! [`MetadataSource`] and [`MetadataSink`] on cluster directories: the metadata files of
//! [`local`], the partition's logs for offsets, `cluster.properties` and
//! `__mirror_state` for the gate.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use kmirror_kernel::desired::DesiredState;
use kmirror_kernel::log::LogView;
use kmirror_kernel::records::MirrorPartitionStateValue;
use kmirror_kernel::sync::acl::{apply_acl_plan, AclBinding, AclPlan, RawAclBinding};
use kmirror_kernel::sync::group_offsets::{OffsetCommit, TopicPartition};
use kmirror_kernel::sync::topic_config::{apply_config_changes, ConfigChange};
use kmirror_kernel::types::{MirrorName, MirrorPartition, Offset, PartitionIndex, TopicId};

use super::{Cluster, PARTITION};
use crate::sync::local::{self, AclsFile, MetadataDir};
use crate::sync::{GroupRecord, MetadataSink, MetadataSource, Read, SyncError};

/// A source cluster directory, opened (and locked) on first use and released after each round.
#[derive(Debug)]
pub struct LocalMetadataSource {
    root: PathBuf,
    open: Option<Cluster>,
}

impl LocalMetadataSource {
    /// The source in cluster directory `root`.
    pub fn new(root: &Path) -> Self {
        LocalMetadataSource {
            root: root.to_path_buf(),
            open: None,
        }
    }

    fn cluster(&mut self) -> Result<&Cluster, SyncError> {
        if self.open.is_none() {
            self.open = Some(Cluster::open_leader_only(&self.root)?);
        }
        self.open
            .as_ref()
            .ok_or_else(|| SyncError::SourceUnavailable {
                source_name: self.root.display().to_string(),
                reason: "not open".into(),
            })
    }

    fn meta(&self) -> MetadataDir {
        MetadataDir::of(&self.root)
    }
}

impl MetadataSource for LocalMetadataSource {
    fn describe(&self) -> String {
        self.root.display().to_string()
    }

    fn topic(&mut self) -> Result<(String, TopicId), SyncError> {
        let config = self.cluster()?.dir.config();
        Ok((config.topic.clone(), config.topic_id))
    }

    fn log_end_offset(&mut self, partition: &TopicPartition) -> Result<Offset, SyncError> {
        let cluster = self.cluster()?;
        if partition.topic != cluster.dir.config().topic || partition.partition != PARTITION {
            return Err(SyncError::SourceUnavailable {
                source_name: self.root.display().to_string(),
                reason: format!("it does not host {partition}"),
            });
        }
        Ok(cluster.leader.log_end_offset())
    }

    fn topic_config(&mut self, topic: &str) -> Result<Read<BTreeMap<String, String>>, SyncError> {
        self.cluster()?;
        self.meta().read_topic_config(topic)
    }

    fn groups(&mut self) -> Result<Read<BTreeMap<String, GroupRecord>>, SyncError> {
        self.cluster()?;
        self.meta().read_groups()
    }

    fn acls(&mut self) -> Result<Read<Vec<RawAclBinding>>, SyncError> {
        self.cluster()?;
        let meta = self.meta();
        Ok(match meta.read_acls()? {
            Ok(file) => Read {
                value: file.bindings,
                rejected: Vec::new(),
            },
            Err(reason) => Read {
                value: Vec::new(),
                rejected: vec![format!(
                    "{}: {reason}; no ACL is synced this round",
                    meta.acls_path().display()
                )],
            },
        })
    }

    fn release(&mut self) {
        // Read only: nothing to flush.
        self.open = None;
    }
}

/// A destination cluster directory, locked for the sink's whole life (so that the gate's
/// check and the write it admits are atomic with respect to `kmirror stop` and friends).
#[derive(Debug)]
pub struct LocalMetadataSink {
    cluster: Cluster,
    meta: MetadataDir,
}

impl LocalMetadataSink {
    /// Opens and locks the destination cluster directory `root`.
    pub fn open(root: &Path) -> Result<Self, SyncError> {
        Ok(LocalMetadataSink {
            cluster: Cluster::open_leader_only(root)?,
            meta: MetadataDir::of(root),
        })
    }

    fn topic_name(&self) -> String {
        self.cluster.dir.config().topic.clone()
    }

    fn read_acl_file(&self) -> Result<AclsFile, SyncError> {
        self.meta
            .read_acls()?
            .map_err(|reason| SyncError::BadDestinationFile {
                path: self.meta.acls_path(),
                reason,
            })
    }
}

fn parse_all(raw: &[RawAclBinding], path: &Path) -> Result<BTreeSet<AclBinding>, SyncError> {
    raw.iter()
        .map(|r| {
            AclBinding::from_raw(r).map_err(|e| SyncError::BadDestinationFile {
                path: path.to_path_buf(),
                reason: e.to_string(),
            })
        })
        .collect()
}

fn first_rejection<T>(read: Read<T>, path: &Path) -> Result<T, SyncError> {
    match read.rejected.into_iter().next() {
        None => Ok(read.value),
        Some(reason) => Err(SyncError::BadDestinationFile {
            path: path.to_path_buf(),
            reason,
        }),
    }
}

impl MetadataSink for LocalMetadataSink {
    fn describe(&self) -> String {
        self.cluster.dir.root().display().to_string()
    }

    fn topic(&self) -> (String, TopicId) {
        let c = self.cluster.dir.config();
        (c.topic.clone(), c.topic_id)
    }

    fn partition(&self) -> PartitionIndex {
        PARTITION
    }

    fn desired_state(&mut self) -> Result<DesiredState, SyncError> {
        Ok(self.cluster.dir.desired_state()?)
    }

    fn stored_state(
        &mut self,
        mirror: &MirrorName,
    ) -> Result<Option<MirrorPartitionStateValue>, SyncError> {
        let key = MirrorPartition {
            mirror: mirror.clone(),
            topic_id: self.cluster.dir.config().topic_id,
            partition: PARTITION,
        };
        Ok(self
            .cluster
            .state_log
            .coordinator()
            .read_state(&key)
            .cloned())
    }

    fn log_bounds(&mut self) -> Result<(Offset, Offset), SyncError> {
        let log = &self.cluster.leader;
        Ok((log.log_start_offset(), log.last_stable_offset()))
    }

    fn topic_config(&mut self) -> Result<BTreeMap<String, String>, SyncError> {
        let topic = self.topic_name();
        let read = self.meta.read_topic_config(&topic)?;
        first_rejection(read, &self.meta.topic_config_path(&topic))
    }

    fn groups(&mut self) -> Result<BTreeMap<String, GroupRecord>, SyncError> {
        let read = self.meta.read_groups()?;
        first_rejection(read, &self.meta.root().join(local::CONSUMER_OFFSETS_DIR))
    }

    fn acls(&mut self) -> Result<(BTreeSet<AclBinding>, BTreeSet<AclBinding>), SyncError> {
        let file = self.read_acl_file()?;
        let path = self.meta.acls_path();
        Ok((
            parse_all(&file.bindings, &path)?,
            parse_all(&file.created_by_mirror, &path)?,
        ))
    }

    fn apply_config(&mut self, changes: &[ConfigChange]) -> Result<(), SyncError> {
        let current = self.topic_config()?;
        let next = apply_config_changes(&current, changes);
        self.meta.write_topic_config(&self.topic_name(), &next)
    }

    fn commit_offsets(&mut self, commits: &[OffsetCommit]) -> Result<(), SyncError> {
        let mut groups = self.groups()?;
        let mut touched = BTreeSet::new();
        for c in commits {
            groups
                .entry(c.group.clone())
                .or_default()
                .offsets
                .insert(c.partition.clone(), c.offset);
            touched.insert(c.group.clone());
        }
        for g in touched {
            if let Some(record) = groups.get(&g) {
                self.meta.write_group(&g, record)?;
            }
        }
        Ok(())
    }

    fn apply_acls(&mut self, plan: &AclPlan) -> Result<(), SyncError> {
        let (dest, created) = self.acls()?;
        let (dest, created) = apply_acl_plan(&dest, &created, plan);
        self.meta.write_acls(&AclsFile {
            version: 0,
            bindings: dest.iter().map(AclBinding::to_raw).collect(),
            created_by_mirror: created.iter().map(AclBinding::to_raw).collect(),
        })
    }
}
