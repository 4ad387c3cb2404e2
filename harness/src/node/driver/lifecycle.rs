//! The driver's files over its life: opening the destination, starting to lead, the periodic
//! tick, writing the produce gates, and closing; with the rules of what is on disk when.
//!
//! [`NodeDriver::open`] recovers every log and `__mirror_state` partition;
//! [`NodeDriver::start`] feeds the topics, the source's leaders and `BecameLeader` for every
//! partition; [`NodeDriver::tick`] runs every [`CHECKPOINT_INTERVAL_MS`];
//! [`NodeDriver::close`] commits what is staged, answers the control requests still waiting,
//! and makes everything durable.
//!
//! # What is on disk when: the flush rules
//!
//! A node holds many partitions, so what it fsyncs per partition decides its speed
//! (BENCHMARKS.md, `node_mirroring` and `node_failover`). State changes are group-committed
//! per round ([`crate::node::commit`]): where the log dir's file system has a `syncfs` that
//! reports errors ([`FsBarrier`]), one `syncfs` makes every log a round's records name
//! durable, whatever their number. The rules, from what a crash can take back and what the
//! source can serve again:
//!
//! | what | on disk (fsynced) | why that is enough |
//! |---|---|---|
//! | a `__mirror_state` record (state, LME) | before the completion is fed to the kernel: staged, then in the round's group commit one batch and one fsync per `__mirror_state` partition, then every answer of the round fed | persist first, act after, per round: the kernel acts on a completion only once nothing can take it back |
//! | a partition's log, up to its end | before the round's `__mirror_state` records that name it are written (group commit: one `syncfs`; the epoch checkpoint of an epoch begun since is deferred, the recovery point held below it; without a barrier, each log by itself: the `.log` fdatasynced, the epoch checkpoint written if it changed, see `crate::file_log`) | a record never acknowledges data a crash can lose: the LME record's offset, and STOPPED after the `MIRROR_PID_RESET`, name durable bytes |
//! | `MIRROR_PID_RESET`, ABORT markers (leader appends) | with a barrier: in the group commit of the round whose records name them (the append leaves the log's recovery point below them until then); without one, before the append returns | this cluster's own decision: no source holds it; STOPPED is staged only after it, and the commit that writes STOPPED makes the partition's log durable first |
//! | a new partition's directory and empty log, `node.properties` naming a new topic | one `syncfs` for all of a request's new partitions, then `node.properties` once | a topic is named only once its logs exist on disk |
//! | truncations (LME, LSO, divergence) | before the truncation returns; a lowered recovery point or high watermark, or a new log start, is written to the log dir's checkpoint files *before* the segment changes | the kernel names the new end in records it writes next; a recovery point left above a cut would make recovery trust later, unflushed bytes |
//! | mirrored batches (follower appends), one write per partition per fetch round | **no** (`--flush kafka`): at a segment roll, before a `__mirror_state` write of the partition, and at close; their writeback is started at each append ([`crate::writeback`]), so those fsyncs wait only for what was appended last | a machine crash loses at most the unflushed tail: recovery verifies from the recovery point on and cuts a torn tail, and the fetcher fetches it again from the recovered log end, byte for byte at the same offsets. A SIGKILL loses nothing (the page cache survives) |
//! | the offset index | never fsynced | derived data: recovery checks every index against its segment's batches and rebuilds one that does not match |
//! | the leader-epoch checkpoint | after an append that changed the epoch cache, at the next flush that writes it (a segment roll, the periodic flush of logs whose checkpoint lags, the close; not a group commit), before the recovery point passes the new entry (atomically; a log's first entry in place and fdatasynced, one file sync where the atomic write makes a new file and syncs it and the directory) | recovery rebuilds the cache from the batches and only checks the checkpoint below the recovery point, so it may lag what lies above the recovery point (an unflushed tail, or durable batches whose checkpoint a group commit deferred); it may not lag what lies below |
//! | recovery points, high watermarks, log start offsets | in the log dir's three checkpoint files, every partition's line in one atomic write per file: after opening the logs, at the start of every fetch round when one moved (group commit), at close; lowered or moved ones at once (above) | the log raises its recovery point in memory only after the fsync, so the file never names unflushed data; lagging only makes recovery verify more. The high watermark is re-derived on restart (one replica: the leader's HW moves to its LEO) |
//!
//! `--flush every-append` fsyncs every append before it returns as well (and records every
//! high-watermark change, written with the next round's checkpoint write); the rules above
//! still hold. So after any crash: recovery succeeds (or refuses with a typed error when
//! something below the recovery point is damaged), each log is a byte prefix of its source
//! (plus this node's own markers), nothing a `__mirror_state` record acknowledges is lost, and
//! a restart fetches the rest. `harness/src/node/crash_tests.rs` checks this after a kill at
//! every effect, a torn `__mirror_state` write and a machine crash that cuts every unflushed
//! tail and tears offset indexes, and after a process death inside every file write of a
//! mirroring and of a stop (each write cut short in turn by the test build's write seam).

use std::collections::{BTreeMap, VecDeque};
use std::path::Path;
use std::sync::Arc;

use kmirror_kernel::input::Input;
use kmirror_kernel::node::{NodeConfig, NodeInput, NodeMirror, PartitionKey};
use kmirror_kernel::types::{PartitionIndex, TopicId};

use crate::durability::FsBarrier;
use crate::file_log::{EpochCheckpoint, FileLog, TopicPartition, Verify};
use crate::log_dir_checkpoints::LogDirCheckpoints;
use crate::mirror_state_log::MirrorStateLog;
use crate::node::commit::{make_durable, Staged};
use crate::node::dest::NodeDest;
use crate::node::fetch_ahead::FetchedAhead;
use crate::node::follow::CHECKPOINT_INTERVAL_MS;
use crate::node::NodeError;
use crate::wire::source_cluster::SourceCluster;

use super::fetch_round::SourceView;
use super::followers::NodeFollowers;
use super::{topic_admin, NodeDriver, NodeDriverOptions, NodeStats, Queued};

/// Most threads [`NodeDriver::close`] closes partition logs on. The work is fsyncs, which
/// wait on the disk rather than the CPU: the block layer merges the cache flushes of
/// concurrent fsyncs, so more threads than cores pay off (32 against 8 halved the close of
/// 1,000 partitions in the `node_mirroring` bench).
pub const CLOSE_THREADS: usize = 32;

impl NodeDriver {
    /// Opens the node destination at `root` (every log and `__mirror_state` partition is
    /// recovered and read) with the source cluster it mirrors from, if any.
    pub fn open(
        root: &Path,
        source: Option<SourceCluster>,
        options: NodeDriverOptions,
    ) -> Result<Self, NodeError> {
        Self::from_dest(NodeDest::open(root)?, source, options)
    }

    /// A driver over an opened destination.
    pub fn from_dest(
        dest: NodeDest,
        source: Option<SourceCluster>,
        mut options: NodeDriverOptions,
    ) -> Result<Self, NodeError> {
        // This process holds the destination (its lock) and its coordinators: no write of an
        // earlier process can land once it runs, so states read are acted on as they are.
        options.mirror.predecessors_may_write = false;
        let meta = dest.meta().clone();
        let mut node_config = NodeConfig::new(meta.broker);
        node_config.mirror_state_partitions = meta.mirror_state_partitions;
        node_config.fetch_backoff_ms = options.fetch_backoff_ms;
        let node = NodeMirror::new(node_config).map_err(|e| NodeError::Invalid {
            message: e.to_string(),
        })?;
        let log_dir = dest.log_dir();
        // Opened before anything is written, so that it reports every writeback error of what
        // this process writes.
        let barrier = FsBarrier::open(&log_dir).map_err(|source| NodeError::Log {
            dir: log_dir.clone(),
            source: Box::new(source),
        })?;
        let mut log_config = dest.file_log_config();
        log_config.flush = options.flush;
        log_config.deferred_durability = barrier.is_some();
        let checkpoints = open_checkpoints(&log_dir)?;
        // What a crash left of a topic deletion or creation: directories no topic names.
        let mut removed = topic_admin::remove_unnamed_partitions(&log_dir, &meta, &checkpoints)?;
        let (followers, removed_from_followers) =
            NodeFollowers::open(&dest, log_config, options.max_fetch_batches)?;
        removed.extend(removed_from_followers);
        let mut states = BTreeMap::new();
        for k in 0..meta.mirror_state_partitions {
            let table = options.mirror.transitions.clone();
            let store = Arc::clone(&checkpoints);
            states.insert(
                k,
                MirrorStateLog::open_in_log_dir(&log_dir, k, table, log_config, store)?,
            );
        }
        let mut driver = NodeDriver {
            dest,
            options,
            node,
            logs: BTreeMap::new(),
            followers,
            states,
            checkpoints,
            source,
            queue: VecDeque::new(),
            pending_lme: BTreeMap::new(),
            said_no_lme_lookup: false,
            timers: BTreeMap::new(),
            heard: SourceView::default(),
            fetched_ahead: FetchedAhead::default(),
            pipelined: Default::default(),
            leaders_fed: BTreeMap::new(),
            events: removed
                .iter()
                .map(|dir| {
                    format!(
                        "removed {dir}: node.properties names no such partition (a topic \
                         deletion or creation a crash interrupted)"
                    )
                })
                .collect(),
            stats: NodeStats::default(),
            now_ms: 0,
            started: false,
            effects: 0,
            last_state_write: None,
            control: None,
            following: None,
            next_tick_ms: i64::MIN,
            interrupt: None,
            staged: Staged::default(),
            barrier,
            gates: BTreeMap::new(),
            clients: None,
        };
        for (name, topic) in &meta.topics {
            driver.open_logs(name, topic.topic_id, 0..topic.partitions)?;
        }
        // Logs (and `__mirror_state` partitions) created empty just now, without syncs.
        driver.make_created_durable()?;
        // Every log's recovered offsets in the log dir's files, then (older layout) the
        // per-partition files they were read from go.
        driver.write_checkpoints()?;
        driver.dest.finish_migration()?;
        Ok(driver)
    }

    /// Writes the log dir's checkpoint files whose entries changed (one atomic write per file
    /// for every partition): see the [module documentation](self).
    pub(super) fn write_checkpoints(&self) -> Result<(), NodeError> {
        self.checkpoints.write().map_err(|source| NodeError::Log {
            dir: self.checkpoints.dir().to_path_buf(),
            source: Box::new(source),
        })?;
        self.followers.write_checkpoints()
    }

    /// Opens (recovers) the logs of `partitions` of topic `name` not open yet; each one's
    /// directory must exist.
    pub(super) fn open_logs(
        &mut self,
        name: &str,
        topic_id: TopicId,
        partitions: std::ops::Range<PartitionIndex>,
    ) -> Result<(), NodeError> {
        let mut config = self.dest.file_log_config();
        config.flush = self.options.flush;
        config.deferred_durability = self.barrier.is_some();
        for p in partitions {
            let key = PartitionKey::new(topic_id, p);
            if self.logs.contains_key(&key) {
                continue;
            }
            let tp = TopicPartition::new(name, p).map_err(|e| NodeError::Invalid {
                message: e.to_string(),
            })?;
            let dir = self.dest.log_dir().join(tp.dir_name());
            if !dir.is_dir() {
                return Err(NodeError::Invalid {
                    message: format!(
                        "{} is missing: partition {p} of {name} has lost its log directory \
                         (restore it from a backup)",
                        dir.display()
                    ),
                });
            }
            let (log, _report) = FileLog::open_in_log_dir(
                &self.dest.log_dir(),
                tp.clone(),
                config,
                Verify::FromRecoveryPoint,
                Arc::clone(&self.checkpoints),
            )
            .map_err(|source| NodeError::Log {
                dir,
                source: Box::new(source),
            })?;
            self.logs.insert(key, log);
            self.followers.open_partition(key, &tp)?;
        }
        Ok(())
    }

    /// Makes the files created without syncs (new partitions' directories, segments and
    /// checkpoints: [`FileLogConfig::deferred_durability`](crate::file_log::FileLogConfig))
    /// durable with one `syncfs`, before anything names them. Without a barrier they were
    /// synced as they were created.
    pub(super) fn make_created_durable(&self) -> Result<(), NodeError> {
        match &self.barrier {
            Some(barrier) => barrier.sync().map_err(|source| NodeError::Log {
                dir: barrier.dir().to_path_buf(),
                source: Box::new(source),
            }),
            None => {
                crate::segment::sync_dir(&self.dest.log_dir()).map_err(|source| NodeError::Log {
                    dir: self.dest.log_dir(),
                    source: Box::new(source),
                })
            }
        }
    }

    /// Starts leading every partition: the topics' metadata, the source's leaders (when known)
    /// and `BecameLeader` for each partition with its persisted leader epoch.
    pub fn start(&mut self, now_ms: i64) -> Result<(), NodeError> {
        self.now_ms = now_ms;
        self.started = true;
        // The first periodic flush one interval from now: at start nothing lags yet, and a
        // failover's deferred epoch checkpoints are written after it, not in its midst.
        self.next_tick_ms = now_ms.saturating_add(CHECKPOINT_INTERVAL_MS);
        if let Some(source) = self.source.as_mut() {
            // Unreachable now: the first fetch round asks again.
            let _ = source.metadata();
        }
        let meta = self.dest.meta().clone();
        for (name, topic) in &meta.topics {
            let desired = topic.desired(name)?;
            self.feed(Queued::plain(NodeInput::Topic {
                topic_id: topic.topic_id,
                desired,
                partitions: topic.partitions,
            }))?;
        }
        self.sync_source_leaders(true);
        while let Some(q) = self.queue.pop_front() {
            self.feed(q)?;
        }
        for (name, topic) in &meta.topics {
            self.lead(name, topic.topic_id, 0..topic.partitions)?;
        }
        Ok(())
    }

    /// Queues `BecameLeader` for `partitions` of topic `name` with each one's persisted leader
    /// epoch, its high watermark moved to its log end first.
    pub(super) fn lead(
        &mut self,
        name: &str,
        topic_id: TopicId,
        partitions: std::ops::Range<PartitionIndex>,
    ) -> Result<(), NodeError> {
        let replicas: im::OrdSet<i32> = self.dest.meta().replica_set().into_iter().collect();
        for p in partitions {
            // Kafka's makeLeader: the leader's HW moves to the smallest LEO of its ISR
            // (maybeIncrementLeaderHW), here once the followers caught up, at its LEO. The
            // checkpointed HW lags the log after a restart; left there, the LSO (capped by the
            // HW) would lag too, and a stop would truncate mirrored, committed batches.
            self.replicate(PartitionKey::new(topic_id, p))?;
            let epoch = self
                .dest
                .meta()
                .partitions
                .get(&(name.to_owned(), p))
                .map_or(0, |s| s.leader_epoch);
            self.queue.push_back(Queued::plain(NodeInput::Partition {
                key: PartitionKey::new(topic_id, p),
                input: Input::BecameLeader {
                    leader_epoch: epoch,
                    replicas: replicas.clone(),
                    isr: replicas.clone(),
                },
            }));
        }
        Ok(())
    }

    /// The periodic work of a running node (every [`CHECKPOINT_INTERVAL_MS`]): a flush of each
    /// log whose epoch cache changed since its last one, the high watermarks to the log dir's
    /// checkpoint file, as Kafka's `replica.high.watermark.checkpoint.interval.ms` does (a high
    /// watermark above what a crash keeps is clamped to the log end by recovery), and the
    /// source's last stable offset of every mirrored partition that is not fetching
    /// ([`NodeDriver::measure_idle_offsets`]).
    pub(super) fn tick(&mut self) -> Result<(), NodeError> {
        // A log whose epoch began since its last flush is flushed, all of them together: its
        // leader-epoch checkpoint follows within the interval (epochs begin rarely: a source
        // leader change, a bump), not only at the next segment roll or state write.
        let mut lagging: Vec<&mut FileLog> = Vec::new();
        for log in self.logs.values_mut() {
            if log.epoch_checkpoint_lags() {
                lagging.push(log);
            } else {
                log.checkpoint_high_watermark()
                    .map_err(|source| NodeError::Log {
                        dir: log.dir().to_path_buf(),
                        source: Box::new(source),
                    })?;
            }
        }
        if !lagging.is_empty() {
            make_durable(
                &mut lagging,
                self.barrier.as_ref(),
                EpochCheckpoint::Written,
            )?;
        }
        self.write_checkpoints()?;
        self.measure_idle_offsets();
        Ok(())
    }

    /// Writes the produce gates the kernel set to `node.properties` (one atomic write), if any
    /// differs from what it says. The file's gate is what a process that does not hold the
    /// destination shows (`kmirror status`); it is never read back as a permission: every
    /// leadership starts with the gate closed until the kernel opens it, so a gate closed and
    /// reopened while the queue drained (a STOPPED partition reopened) writes nothing, and a
    /// crash before this write loses nothing the next process does not decide again.
    pub(super) fn persist_gates(&mut self) -> Result<(), NodeError> {
        let meta = self.dest.meta();
        let names: BTreeMap<TopicId, &str> = meta
            .topics
            .iter()
            .map(|(name, t)| (t.topic_id, name.as_str()))
            .collect();
        let changed: Vec<((String, PartitionIndex), bool)> = self
            .gates
            .iter()
            .filter_map(|(key, &writable)| {
                let name = (*names.get(&key.topic_id)?).to_owned();
                let at = (name, key.partition);
                let now = meta.partitions.get(&at).is_some_and(|p| p.writable);
                (now != writable).then_some((at, writable))
            })
            .collect();
        if changed.is_empty() {
            return Ok(());
        }
        let mut meta = meta.clone();
        for (at, writable) in changed {
            meta.partitions.entry(at).or_default().writable = writable;
        }
        self.dest.set_meta(meta)
    }

    /// Commits what is staged, then makes every log and `__mirror_state` partition durable
    /// and writes the log dir's checkpoint files: with the file-system barrier, two `syncfs`
    /// for all of them (the second for the renamed leader-epoch checkpoints); without, each log closed by itself on a pool of threads. The first
    /// error is returned.
    pub fn close(mut self) -> Result<(), NodeError> {
        // Staged changes are committed first: their answers are then simply never fed.
        self.commit()?;
        // Requests still waiting for their partitions are answered with what they are now.
        self.answer_control(self.now_ms, true)?;
        self.persist_gates()?;
        let logs: Vec<FileLog> = std::mem::take(&mut self.logs).into_values().collect();
        // The followers hold nothing the kernel decided: closed (flushed) on the pool.
        close_on_pool(self.followers.take_logs())?;
        match self.barrier.as_ref() {
            // Every log and `__mirror_state` partition made durable with two `syncfs`
            // ([`make_durable`]), then the log dir's checkpoint files move the recovery points.
            Some(barrier) => {
                let mut logs = logs;
                let mut all: Vec<&mut FileLog> = logs.iter_mut().collect();
                all.extend(self.states.values_mut().map(MirrorStateLog::log_mut));
                make_durable(&mut all, Some(barrier), EpochCheckpoint::Written)?;
            }
            None => {
                close_on_pool(logs)?;
                for (_, state) in std::mem::take(&mut self.states) {
                    state.close()?;
                }
            }
        }
        self.write_checkpoints()
    }
}

/// The checkpoint files of the log dir `log_dir`, read.
pub(super) fn open_checkpoints(log_dir: &Path) -> Result<Arc<LogDirCheckpoints>, NodeError> {
    LogDirCheckpoints::open(log_dir)
        .map(Arc::new)
        .map_err(|source| NodeError::Log {
            dir: log_dir.to_path_buf(),
            source: Box::new(source),
        })
}

/// Closes `logs` file by file on up to [`CLOSE_THREADS`] threads, as Kafka's `LogManager`
/// closes a log dir's logs on a pool: each log's fsyncs keep their order, different logs'
/// overlap. The first error in `logs`' order is returned.
fn close_on_pool(logs: Vec<FileLog>) -> Result<(), NodeError> {
    let per_thread = logs.len().div_ceil(CLOSE_THREADS).max(1);
    let mut chunks: Vec<Vec<FileLog>> = Vec::new();
    let mut rest = logs.into_iter();
    loop {
        let chunk: Vec<FileLog> = rest.by_ref().take(per_thread).collect();
        if chunk.is_empty() {
            break;
        }
        chunks.push(chunk);
    }
    let results: Vec<Result<(), NodeError>> = if chunks.len() <= 1 {
        chunks.into_iter().map(close_logs).collect()
    } else {
        std::thread::scope(|scope| {
            let handles: Vec<_> = chunks
                .into_iter()
                .map(|chunk| scope.spawn(move || close_logs(chunk)))
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join().unwrap_or_else(|_| {
                        Err(NodeError::Invalid {
                            message: "a thread closing partition logs panicked".into(),
                        })
                    })
                })
                .collect()
        })
    };
    results.into_iter().collect()
}

/// Closes `logs` in order, stopping at the first error.
fn close_logs(logs: Vec<FileLog>) -> Result<(), NodeError> {
    for log in logs {
        let dir = log.dir().to_path_buf();
        log.close().map_err(|source| NodeError::Log {
            dir,
            source: Box::new(source),
        })?;
    }
    Ok(())
}
