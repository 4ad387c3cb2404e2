//! [`LocalSource`]: a cluster directory on the local disk as a mirror's [`Source`].
//!
//! A local source is opened (and locked) lazily on the first request and kept open until
//! [`Source::release`], so that a producer writing to it can take its turn between polls.

use std::path::{Path, PathBuf};

use kmirror_kernel::config::FetchIsolation;
use kmirror_kernel::fetch::{serve_fetch, FetchResponse};
use kmirror_kernel::log::LogView;
use kmirror_kernel::types::{
    EpochAndOffset, LeaderEpoch, MirrorName, Offset, PartitionIndex, TopicId,
};

use super::cluster::{Cluster, ClusterConfig};
use super::DriverError;
use crate::record_batch::RawBatch;
use crate::source::{LmeAnswer, Source, SourceError, SourcePosition};

/// A cluster directory on the local disk, used as a source. See the [module
/// documentation](self).
#[derive(Debug)]
pub struct LocalSource {
    root: PathBuf,
    open: Option<Cluster>,
    position: Option<SourcePosition>,
}

impl LocalSource {
    /// A source in the cluster directory `root`, opened on first use.
    pub fn new(root: &Path) -> Self {
        LocalSource {
            root: root.to_path_buf(),
            open: None,
            position: None,
        }
    }

    /// Opens the source now, so that a missing or corrupt directory is reported before any
    /// mirroring starts.
    pub fn open(root: &Path) -> Result<Self, DriverError> {
        let cluster = Cluster::open_leader_only(root)?;
        let mut source = LocalSource::new(root);
        source.position = Some(position_of(&cluster));
        source.open = Some(cluster);
        Ok(source)
    }

    /// The source directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The source cluster's topic config.
    pub fn config(&mut self) -> Result<ClusterConfig, SourceError> {
        Ok(self.cluster()?.dir.config().clone())
    }

    fn cluster(&mut self) -> Result<&mut Cluster, SourceError> {
        if self.open.is_none() {
            let cluster = Cluster::open_leader_only(&self.root).map_err(|e| match e {
                DriverError::Busy { dir } => SourceError::Busy { dir },
                other => SourceError::Unavailable {
                    dir: self.root.clone(),
                    reason: other.to_string(),
                },
            })?;
            self.open = Some(cluster);
        }
        self.open.as_mut().ok_or_else(|| SourceError::Unavailable {
            dir: self.root.clone(),
            reason: "not open".into(),
        })
    }

    fn check_topic(&mut self, topic_id: TopicId) -> Result<(), SourceError> {
        let dir = self.root.clone();
        let hosted = self.cluster()?.dir.config().topic_id;
        if hosted != topic_id {
            return Err(SourceError::UnknownTopicId {
                dir,
                hosted: hosted.to_string(),
                asked: topic_id.to_string(),
            });
        }
        Ok(())
    }
}

fn position_of(cluster: &Cluster) -> SourcePosition {
    SourcePosition {
        log_start_offset: cluster.leader.log_start_offset(),
        high_watermark: cluster.leader.high_watermark(),
        last_stable_offset: cluster.leader.last_stable_offset(),
        log_end_offset: cluster.leader.log_end_offset(),
    }
}

impl Source for LocalSource {
    fn describe(&self) -> String {
        self.root.display().to_string()
    }

    fn cluster_name(&mut self) -> Result<MirrorName, SourceError> {
        Ok(self.cluster()?.dir.config().name.clone())
    }

    fn topic(&mut self) -> Result<(String, TopicId), SourceError> {
        let config = self.cluster()?.dir.config();
        Ok((config.topic.clone(), config.topic_id))
    }

    fn fetch(
        &mut self,
        topic_id: TopicId,
        fetch_offset: Offset,
        last_fetched_epoch: Option<LeaderEpoch>,
        isolation: FetchIsolation,
        max_batches: usize,
    ) -> Result<FetchResponse<RawBatch>, SourceError> {
        self.check_topic(topic_id)?;
        let cluster = self.cluster()?;
        // The view reads at most `max_batches` batches: one read of the fetch's bytes.
        let response = serve_fetch(
            &cluster.leader.fetch_view(max_batches),
            fetch_offset,
            last_fetched_epoch,
            isolation,
            max_batches,
        );
        // A read error marks the log failed (and returns what it could read): report it.
        if let Err(e) = cluster.leader.try_read(0, 0) {
            let reason = e.to_string();
            self.release();
            return Err(SourceError::Unavailable {
                dir: self.root.clone(),
                reason,
            });
        }
        let position = position_of(cluster);
        self.position = Some(position);
        Ok(response)
    }

    fn last_mirrored_epoch(
        &mut self,
        topic_id: TopicId,
        partition: PartitionIndex,
    ) -> Result<LmeAnswer, SourceError> {
        self.check_topic(topic_id)?;
        let cluster = self.cluster()?;
        let lme = cluster
            .state_log
            .latest_last_mirrored_epoch(topic_id, partition)
            .and_then(|(_, v)| {
                v.last_mirrored_epoch.map(|epoch| EpochAndOffset {
                    epoch,
                    end_offset: v.last_mirrored_offset,
                })
            });
        let answer = LmeAnswer {
            lme,
            log_start_offset: cluster.leader.log_start_offset(),
        };
        self.position = Some(position_of(cluster));
        Ok(answer)
    }

    fn position(&self) -> Option<SourcePosition> {
        self.position
    }

    fn release(&mut self) {
        if let Some(cluster) = self.open.take() {
            // Nothing was written; closing only persists what recovery found.
            let _ = cluster.close();
        }
    }
}
