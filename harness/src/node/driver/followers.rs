//! The node's in-process follower replicas (`replicas=N` in `node.properties`): for every
//! partition, `N - 1` follower logs, one per follower broker, each broker a Kafka log dir of
//! its own under `replicas/broker-<id>/` with its own checkpoint files
//! ([`NodeDest::replica_log_dir`]).
//!
//! **When followers replicate.** Right after the leader's log changed (a kernel input's log
//! effects, a client's write), and when the kernel leads a partition: the followers fetch from
//! the leader until they hold its log ([`replicas::replicate_until_in_sync`], Kafka's follower
//! rules: appends, KIP-320 divergence truncation, out-of-range restarts), and the leader's high
//! watermark is the smallest LEO it credited an ISR member with. The ISR is every replica:
//! in-process followers never fall out of it. So a round ends with every replica holding the
//! leader's log and the HW at the LEO, as with one replica, and the kernel hears what it waits
//! for: `ReplicaFetched` from each follower while it waits for the replicas to truncate to the
//! LME, `HighWatermarkAdvanced` while it waits for its `MIRROR_PID_RESET` to be committed.
//!
//! **The copy of a fetch round.** When the leader appends a round's fetched batches, a follower
//! that held exactly the leader's log appends the same bytes at once
//! ([`NodeFollowers::append_copied`]): its fetch would return them, so it need not read them
//! back from the leader's segments; its next fetch (finding nothing new) credits it, and the HW
//! moves.
//!
//! **What a restart keeps.** Followers hold nothing the kernel decided: a follower's log is
//! recovered on open like any log, and whatever it lost or kept past its leader's log is
//! fetched again or truncated by its first round (divergence). The leader's record of each
//! follower starts empty, so the HW waits for the first round.
//!
//! **Durability.** Follower logs flush as the leader's do (the node's flush policy); their
//! directories are created with syncs (not deferred to the node's barrier); their checkpoint
//! files are written when the leader's log dir's are.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use kmirror_kernel::batch::BatchHeader;
use kmirror_kernel::log::{LogView, PartitionLog};
use kmirror_kernel::node::PartitionKey;
use kmirror_kernel::types::{BrokerId, Offset};

use crate::file_log::{FileLog, FileLogConfig, TopicPartition, Verify};
use crate::log_dir_checkpoints::LogDirCheckpoints;
use crate::record_batch::RawBatch;
use crate::replicas::{self, Follower, ReplicaLogError, RoundReport};

use super::super::dest::NodeDest;
use super::super::NodeError;
use super::lifecycle::open_checkpoints;
use super::topic_admin::remove_unnamed_partitions;

/// Most replication rounds one call runs: enough to copy `MAX_ROUNDS * max_batches` batches,
/// more than one fetch round or one client write appends; a follower further behind (after a
/// restart that lost its tail) catches up over the next calls.
const MAX_ROUNDS: usize = 64;

/// One follower broker: its log dir and that dir's checkpoint files.
#[derive(Debug)]
struct FollowerBroker {
    id: BrokerId,
    log_dir: PathBuf,
    checkpoints: Arc<LogDirCheckpoints>,
}

/// Every partition's followers on this node. See the [module documentation](self).
#[derive(Debug)]
pub(super) struct NodeFollowers {
    brokers: Vec<FollowerBroker>,
    config: FileLogConfig,
    max_batches: usize,
    partitions: BTreeMap<PartitionKey, Vec<Follower>>,
}

impl NodeFollowers {
    /// Opens the follower brokers' log dirs of `dest` (created if missing) and removes the
    /// partition directories `node.properties` does not name (what a crash left of a topic
    /// deletion). Returns the followers with no partition open, and the directories removed.
    pub(super) fn open(
        dest: &NodeDest,
        mut config: FileLogConfig,
        max_batches: usize,
    ) -> Result<(Self, Vec<String>), NodeError> {
        config.deferred_durability = false;
        let mut brokers = Vec::new();
        let mut removed = Vec::new();
        for id in dest.meta().follower_ids() {
            let log_dir = dest.replica_log_dir(id);
            std::fs::create_dir_all(&log_dir).map_err(|source| NodeError::Io {
                action: "create",
                path: log_dir.clone(),
                source,
            })?;
            let checkpoints = open_checkpoints(&log_dir)?;
            for dir in remove_unnamed_partitions(&log_dir, dest.meta(), &checkpoints)? {
                removed.push(format!("broker-{id}/{dir}"));
            }
            brokers.push(FollowerBroker {
                id,
                log_dir,
                checkpoints,
            });
        }
        let followers = NodeFollowers {
            brokers,
            config,
            max_batches,
            partitions: BTreeMap::new(),
        };
        Ok((followers, removed))
    }

    /// The followers of `key` (none when the node has one replica per partition).
    pub(super) fn of(&self, key: &PartitionKey) -> &[Follower] {
        self.partitions.get(key).map_or(&[], Vec::as_slice)
    }

    /// The followers of `key`, to change with their leader.
    pub(super) fn of_mut(&mut self, key: &PartitionKey) -> &mut [Follower] {
        self.partitions
            .get_mut(key)
            .map_or(&mut [][..], Vec::as_mut_slice)
    }

    /// Opens (recovers, or creates empty) the follower logs of partition `key`, named `tp`.
    pub(super) fn open_partition(
        &mut self,
        key: PartitionKey,
        tp: &TopicPartition,
    ) -> Result<(), NodeError> {
        if self.brokers.is_empty() || self.partitions.contains_key(&key) {
            return Ok(());
        }
        let mut followers = Vec::with_capacity(self.brokers.len());
        for b in &self.brokers {
            let (log, _report) = FileLog::open_in_log_dir(
                &b.log_dir,
                tp.clone(),
                self.config,
                Verify::FromRecoveryPoint,
                Arc::clone(&b.checkpoints),
            )
            .map_err(|source| NodeError::Log {
                dir: b.log_dir.join(tp.dir_name()),
                source: Box::new(source),
            })?;
            followers.push(Follower::new(b.id, log));
        }
        self.partitions.insert(key, followers);
        Ok(())
    }

    /// Drops the follower logs of `key` (a deleted topic's partition) and forgets their
    /// checkpoint lines; returns their directories, for the caller to delete once
    /// `node.properties` no longer names the partition.
    pub(super) fn forget_partition(&mut self, key: &PartitionKey) -> Vec<PathBuf> {
        let Some(followers) = self.partitions.remove(key) else {
            return Vec::new();
        };
        let mut dirs = Vec::new();
        for (f, b) in followers.into_iter().zip(&self.brokers) {
            b.checkpoints.forget(f.log.topic_partition());
            dirs.push(f.log.dir().to_path_buf());
        }
        dirs
    }

    /// The leader of `key`, whose log ended at `end` with the batch `last`, appended the
    /// fetched `batches` (a fetch round's share, byte for byte): each follower that held
    /// exactly that log appends them too, as its fetch from `end` would (Kafka's follower
    /// rules give the same batches from a leader whose log it holds); the next round's fetch
    /// credits it. A follower behind or past it is left to its rounds.
    pub(super) fn append_copied(
        &mut self,
        key: &PartitionKey,
        end: Offset,
        last: Option<BatchHeader>,
        batches: &[RawBatch],
    ) -> Result<(), ReplicaLogError> {
        let Some(followers) = self.partitions.get_mut(key) else {
            return Ok(());
        };
        for f in followers {
            if f.log.log_end_offset() == end && f.log.last_batch() == last {
                f.log
                    .append_as_follower(batches)
                    .map_err(ReplicaLogError::of(&f.log))?;
            }
        }
        Ok(())
    }

    /// The leader's log of `key` was truncated: the HW waits for the followers' next fetch.
    pub(super) fn leader_truncated(&mut self, key: &PartitionKey) {
        if let Some(followers) = self.partitions.get_mut(key) {
            replicas::leader_truncated(followers);
        }
    }

    /// Replicates `key` from its `leader` log until every follower holds it (at most
    /// [`MAX_ROUNDS`] rounds), moving the high watermarks. With no followers the leader's HW
    /// moves to its LEO.
    pub(super) fn replicate(
        &mut self,
        key: &PartitionKey,
        leader: &mut FileLog,
    ) -> Result<RoundReport, ReplicaLogError> {
        let followers = self
            .partitions
            .get_mut(key)
            .map_or(&mut [][..], Vec::as_mut_slice);
        let everyone = |_: BrokerId| true;
        let replica_count = 1 + followers.len();
        let rounds = if followers.is_empty() { 1 } else { MAX_ROUNDS };
        replicas::replicate_until_in_sync(
            leader,
            followers,
            &everyone,
            replica_count,
            self.max_batches,
            rounds,
        )
    }

    /// Writes every follower broker's checkpoint files that changed.
    pub(super) fn write_checkpoints(&self) -> Result<(), NodeError> {
        for b in &self.brokers {
            b.checkpoints.write().map_err(|source| NodeError::Log {
                dir: b.log_dir.clone(),
                source: Box::new(source),
            })?;
        }
        Ok(())
    }

    /// Every follower log, for closing.
    pub(super) fn take_logs(&mut self) -> Vec<FileLog> {
        std::mem::take(&mut self.partitions)
            .into_values()
            .flatten()
            .map(|f| f.log)
            .collect()
    }
}
