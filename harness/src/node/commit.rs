//! Group commit: the state changes of a round made durable together, then acknowledged.
//!
//! The kernel persists first and acts after: a `WriteState`, `WriteLastMirroredEpoch` or
//! `BumpLeaderEpoch` is answered only once what it wrote cannot be taken back, and each
//! `__mirror_state` record must find on disk the partition log it speaks of (the LME record's
//! offset, the `MIRROR_PID_RESET` below a STOPPED). Done one partition at a time that is a log
//! fsync and a record fsync per state change: a failover of 10,000 partitions, four state
//! changes each, is 80,000 fsyncs. The node driver instead **stages** the round's changes as
//! their effects execute ([`Staged`]: the partitions whose logs the records name, each
//! `__mirror_state` partition's records in [`MirrorStateLog`]'s own stage, whether the leader
//! epochs in `node.properties` changed, and the answers, withheld) and **commits** them when
//! the round's inputs are handled ([`Staged::commit`]), in this order:
//!
//! 1. **The partition logs** the staged records name: one `syncfs` of the log dir's file
//!    system ([`FsBarrier`]) makes every log's bytes durable at once, and each log records
//!    where its durable bytes end ([`FileLog::stage_flush`], [`FileLog::finish_flush`]). A
//!    log whose epoch cache changed (a `MIRROR_PID_RESET` at the bumped epoch) keeps its
//!    leader-epoch checkpoint as it is and its recovery point below the new epoch
//!    ([`EpochCheckpoint::Deferred`]): replacing thousands of checkpoint files atomically
//!    costs more than the data they describe, and recovery rebuilds an epoch above the
//!    recovery point from its batches. The node's periodic flush and its close write them.
//!    Without a barrier (no `syncfs` that reports errors), each log is flushed by itself.
//! 2. **`node.properties`**, once, if a leader epoch was bumped: before any answer, because a
//!    STOPPING record written at the new epoch, and the batches appended at it, must not outlive
//!    a crash that forgets the epoch.
//! 3. **Each `__mirror_state` partition** with staged records: one batch of all of them, one
//!    fsync ([`MirrorStateLog::commit`]).
//! 4. **The answers**, in the order their effects executed, queued for the kernel.
//!
//! So per round it costs one `syncfs`, one `node.properties` write and one fsync per
//! `__mirror_state` partition touched, whatever the number of partitions. **Persist first, act
//! after holds per round**: no answer is fed before step 3 ends, and a record never reaches the
//! disk before the logs it names (step 1 ends before step 3 begins). A crash anywhere in the
//! commit leaves states the kernel never acted on: records of a torn batch are cut by recovery
//! (none was acknowledged); records of a partition committed before the crash are on disk,
//! unacknowledged, which the restarted node reads as its own (it re-runs their side effects,
//! which are idempotent); the logs they name are durable, since step 1 ended first. Each step is
//! a kill point of the crash tests ([`NodeDriverOptions::halt_after_effects`] counts them with
//! the effects).
//!
//! Records are staged against what is stored *and staged*: a write's fences (leader epoch,
//! state epoch) see the records staged before it, so a fenced write is refused at once, as the
//! coordinator would refuse it at commit.
//!
//! [`NodeDriverOptions::halt_after_effects`]: super::NodeDriverOptions::halt_after_effects

use std::collections::{BTreeMap, BTreeSet};

use kmirror_kernel::node::{NodeInput, PartitionKey};

use crate::durability::FsBarrier;
use crate::file_log::{EpochCheckpoint, FileLog};

use super::dest::NodeDest;
use super::NodeError;
use crate::mirror_state_log::MirrorStateLog;

/// What a round staged for its group commit. See the [module documentation](self).
#[derive(Debug, Default)]
pub(super) struct Staged {
    /// Partitions whose logs staged records (or bumps) speak of.
    logs: BTreeSet<PartitionKey>,
    /// `node.properties` holds leader epochs not yet written.
    meta: bool,
    /// The answers withheld until the commit, in execution order.
    answers: Vec<NodeInput>,
}

impl Staged {
    /// Whether nothing waits for a commit.
    pub(super) fn is_empty(&self) -> bool {
        self.answers.is_empty()
    }

    /// A staged write of partition `key`'s state, answered with `answer` once committed.
    pub(super) fn write(&mut self, key: PartitionKey, answer: NodeInput) {
        self.logs.insert(key);
        self.answers.push(answer);
    }

    /// A staged leader-epoch bump (in `node.properties` in memory), answered with `answer`
    /// once committed.
    pub(super) fn bump(&mut self, answer: NodeInput) {
        self.meta = true;
        self.answers.push(answer);
    }

    /// An answer that needs nothing written (a refused write), fed with the others, in order.
    pub(super) fn answer(&mut self, answer: NodeInput) {
        self.answers.push(answer);
    }

    /// Commits: see the [module documentation](self). `halt` is called after each step (a kill
    /// point); it fails to stop the commit there. Returns the answers to feed, in order.
    pub(super) fn commit(
        self,
        parts: CommitParts<'_>,
        halt: &mut dyn FnMut(Option<u32>) -> Result<(), NodeError>,
    ) -> Result<Vec<NodeInput>, NodeError> {
        let CommitParts {
            logs,
            states,
            dest,
            barrier,
            now_ms,
        } = parts;
        let mut touched: Vec<&mut FileLog> = logs
            .iter_mut()
            .filter(|(k, _)| self.logs.contains(k))
            .map(|(_, log)| log)
            .collect();
        if !touched.is_empty() {
            make_durable(&mut touched, barrier, EpochCheckpoint::Deferred)?;
            halt(None)?;
        }
        if self.meta {
            dest.save()?;
            halt(None)?;
        }
        for (k, state) in states.iter_mut() {
            if state.has_staged() {
                state.commit(now_ms)?;
                halt(Some(*k))?;
            }
        }
        Ok(self.answers)
    }
}

/// What a commit writes to, borrowed from the driver.
pub(super) struct CommitParts<'a> {
    /// Every partition log.
    pub(super) logs: &'a mut BTreeMap<PartitionKey, FileLog>,
    /// Every `__mirror_state` partition.
    pub(super) states: &'a mut BTreeMap<u32, MirrorStateLog>,
    /// The destination (`node.properties`).
    pub(super) dest: &'a NodeDest,
    /// The log dir's file-system barrier, when `syncfs` reports errors.
    pub(super) barrier: Option<&'a FsBarrier>,
    /// The records' timestamp.
    pub(super) now_ms: i64,
}

/// Makes `logs` durable up to their ends: with `barrier`, one `syncfs` for all of them, and a
/// second for the renames of new epoch checkpoints (`checkpoint` [`EpochCheckpoint::Written`]:
/// the node's close and its periodic flush of logs whose checkpoint lags; a group commit
/// defers them, see [`FileLog::stage_flush`]); without a barrier, a flush of each.
pub(super) fn make_durable(
    logs: &mut [&mut FileLog],
    barrier: Option<&FsBarrier>,
    checkpoint: EpochCheckpoint,
) -> Result<(), NodeError> {
    let log_error = |log: &FileLog, source| NodeError::Log {
        dir: log.dir().to_path_buf(),
        source: Box::new(source),
    };
    let Some(barrier) = barrier else {
        for log in logs.iter_mut() {
            log.flush().map_err(|e| log_error(log, e))?;
        }
        return Ok(());
    };
    let mut staged = Vec::with_capacity(logs.len());
    for log in logs.iter_mut() {
        staged.push(log.stage_flush(checkpoint).map_err(|e| log_error(log, e))?);
    }
    barrier.sync().map_err(|source| NodeError::Log {
        dir: barrier.dir().to_path_buf(),
        source: Box::new(source),
    })?;
    let mut renamed = false;
    for (log, staged) in logs.iter_mut().zip(staged) {
        renamed |= log.finish_flush(staged).map_err(|e| log_error(log, e))?;
    }
    if renamed {
        barrier.sync().map_err(|source| NodeError::Log {
            dir: barrier.dir().to_path_buf(),
            source: Box::new(source),
        })?;
    }
    Ok(())
}
