//! What happens to a partition: the events the kernel handles.
//!
//! Completions of request effects carry the [`RequestId`] of the request; a completion the
//! partition is not waiting for (late, duplicated, or from before a leader change) is stale and
//! changes nothing.

use im::OrdSet;
use serde::{Deserialize, Serialize};

use crate::desired::DesiredState;
use crate::effect::RequestId;
use crate::records::MirrorPartitionStateValue;
use crate::state::MirrorState;
use crate::types::{BrokerId, EpochAndOffset, LeaderEpoch, Offset};

/// Why the coordinator refused a state write (Kafka's error names).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize)]
pub enum FenceReason {
    /// `FENCED_LEADER_EPOCH`: a newer leader has written this key.
    FencedLeaderEpoch,
    /// `FENCED_STATE_EPOCH`: the record changed since the writer read it.
    FencedStateEpoch,
    /// `INVALID_CLUSTER_MIRROR_STATE`: the transition is not in the table.
    IllegalTransition,
}

/// What a consumer Fetch to the source returned.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize)]
pub enum FetchOutcome {
    /// Zero or more whole batches below the source LSO, held by the executor; `next_offset` is
    /// the offset after the last one (the fetch offset if none) and `last_epoch` its epoch.
    Records {
        /// Offset after the last batch returned.
        next_offset: Offset,
        /// Leader epoch of the last batch returned, if any.
        last_epoch: Option<LeaderEpoch>,
    },
    /// The source's log diverges from ours: its `end_offset_for(last_fetched_epoch)` answer.
    Diverging(EpochAndOffset),
    /// The fetch offset is outside the source log `[log_start_offset, log_end_offset]`.
    OffsetOutOfRange {
        /// The source's log start offset.
        log_start_offset: Offset,
        /// The source's log end offset.
        log_end_offset: Offset,
    },
}

/// An event for one partition.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize)]
pub enum Input {
    /// This broker became (or stayed, with a new epoch) the partition leader.
    BecameLeader {
        /// The leader epoch.
        leader_epoch: LeaderEpoch,
        /// All assigned replicas, this broker included.
        replicas: OrdSet<BrokerId>,
        /// The in-sync replicas, this broker included.
        isr: OrdSet<BrokerId>,
    },
    /// This broker is no longer the leader: everything held in memory is dropped.
    BecameFollower,
    /// The ISR (or the replica set) of the partition changed.
    IsrChanged {
        /// All assigned replicas.
        replicas: OrdSet<BrokerId>,
        /// The in-sync replicas.
        isr: OrdSet<BrokerId>,
    },
    /// The topic's `mirror.name` changed.
    DesiredStateChanged(DesiredState),
    /// Completion of `ReadState`: the stored record, if any.
    StateRead {
        /// The request completed.
        request: RequestId,
        /// The stored record.
        value: Option<MirrorPartitionStateValue>,
    },
    /// Completion of `WriteState`: the record as stored (with its new state epoch).
    StateWritten {
        /// The request completed.
        request: RequestId,
        /// The stored record.
        value: MirrorPartitionStateValue,
    },
    /// Completion of `WriteState` or `WriteLastMirroredEpoch`: refused.
    WriteFenced {
        /// The request completed.
        request: RequestId,
        /// Why.
        reason: FenceReason,
    },
    /// Completion of `QueryLastMirroredEpoch`.
    LastMirroredEpochReceived {
        /// The request completed.
        request: RequestId,
        /// The LME the source recorded when it stopped mirroring from us, with the offset at
        /// which its mirrored copy of that epoch ended; `None` for Kafka's -1 (first-time
        /// mirroring).
        lme: Option<EpochAndOffset>,
        /// The source's log start offset.
        source_log_start_offset: Offset,
    },
    /// Completion of `QueryLastMirroredEpoch` from a source that keeps `__mirror_state` (a
    /// serving kmirror node): the state of its own mirror of this partition from this cluster
    /// (the reverse mirror; `Unknown` when it has none) beside that mirror's LME. The kernel
    /// checks the reverse mirror ([`crate::reverse_mirror`]) before it truncates.
    SourceMirrorStateReceived {
        /// The request completed.
        request: RequestId,
        /// The state of the source's mirror of this partition from this cluster.
        reverse: MirrorState,
        /// The LME that mirror recorded when it stopped (`None`: Kafka's -1).
        lme: Option<EpochAndOffset>,
        /// The source's log start offset.
        source_log_start_offset: Offset,
    },
    /// A follower fetched from this leader at `log_end_offset` (its LEO).
    ReplicaFetched {
        /// The follower.
        replica: BrokerId,
        /// The follower's log end offset.
        log_end_offset: Offset,
    },
    /// Completion of `Fetch`.
    FetchCompleted {
        /// The request completed.
        request: RequestId,
        /// What the source answered.
        outcome: FetchOutcome,
    },
    /// Completion of `BumpLeaderEpoch`.
    LeaderEpochBumped {
        /// The request completed.
        request: RequestId,
        /// The new leader epoch.
        leader_epoch: LeaderEpoch,
    },
    /// The leader's high watermark moved forward (followers copied more, or the ISR shrank).
    HighWatermarkAdvanced,
    /// Completion of `WriteLastMirroredEpoch`.
    LastMirroredEpochWritten {
        /// The request completed.
        request: RequestId,
    },
    /// A request failed (network, coordinator or source unavailable, storage error).
    RequestFailed {
        /// The request that failed.
        request: RequestId,
        /// What went wrong, for the operator.
        error: String,
    },
    /// The retry timer of `ScheduleRetry` fired.
    RetryDue {
        /// The attempt the timer was set for.
        attempt: u32,
    },
    /// The source cluster no longer has the partition's topic: its metadata lists no topic with
    /// this topic id (deleted, or re-created under another id). A partition still asked to
    /// mirror goes FAILED, not retryable; a stop goes on (it needs nothing of the source).
    SourceTopicDeleted,
}
