//! What the kernel asks its executor to do.
//!
//! Effects are data, never calls. An executor applies them in order. [`Effect::Log`] effects are
//! applied to the partition's local log before the next input is handled (with
//! [`apply_log_effect`](crate::apply::apply_log_effect)); every other effect is a request whose
//! completion comes back as an [`Input`](crate::input::Input) carrying the same [`RequestId`].

use serde::{Deserialize, Serialize};

use crate::config::FetchIsolation;

use crate::records::{LastMirroredEpochsValue, MirrorPartitionStateValue};
use crate::types::{
    LeaderEpoch, MirrorPartition, Offset, ProducerEpoch, ProducerId, StateEpoch, TimestampMs,
};

/// Correlates a request effect with its completion; completions with an id the partition is
/// not waiting for are stale and ignored.
///
/// State, LME and epoch requests are numbered in order by the partition. A fetch is identified
/// by what it asks for instead ([`RequestId::for_fetch`]), as Kafka's fetcher accepts a response
/// only while its fetch offset is still current: a MIRRORING partition that keeps fetching
/// nothing new issues the same request again rather than a new one, so its state stays finite.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize)]
pub struct RequestId(pub u64);

impl RequestId {
    /// Bit set in every fetch id, so fetch ids never equal a numbered request's.
    const FETCH: u64 = 1 << 63;

    /// The id of a fetch from `fetch_offset` with `last_fetched_epoch`.
    pub fn for_fetch(fetch_offset: Offset, last_fetched_epoch: Option<LeaderEpoch>) -> Self {
        let epoch = last_fetched_epoch.map_or(0, |e| u64::from(e.unsigned_abs()) + 1) & 0xff_ffff;
        let offset = (fetch_offset as u64) & ((1 << 39) - 1);
        RequestId(Self::FETCH | (offset << 24) | epoch)
    }
}

/// Why the kernel truncates a log: the kernel labels each truncation, so an executor reporting
/// it never has to guess from the input that caused it.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize)]
pub enum TruncationCause {
    /// PREPARING: the source answered no LME (Kafka's -1), so the log starts again at the
    /// source's log start offset (`docs/design.md` 5.2).
    NoLastMirroredEpoch,
    /// PREPARING: LME truncation to the end of the last epoch both clusters share.
    LastMirroredEpoch,
    /// MIRRORING: the source answered a diverging epoch (KIP-320).
    DivergingEpoch,
    /// MIRRORING: the fetch offset is outside the source's log.
    OffsetOutOfRange,
    /// STOPPING: truncation to the last stable offset, so no half transaction survives.
    LastStableOffset,
}

impl std::fmt::Display for TruncationCause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            TruncationCause::NoLastMirroredEpoch => {
                "LME truncation (no LME: start at the source's log start offset)"
            }
            TruncationCause::LastMirroredEpoch => "LME truncation",
            TruncationCause::DivergingEpoch => "diverging epoch",
            TruncationCause::OffsetOutOfRange => "offset out of range",
            TruncationCause::LastStableOffset => "stop: truncation to LSO",
        })
    }
}

/// One mutation of the partition's local log.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize)]
pub enum LogEffect {
    /// Truncate the log to `offset` (LME truncation, fetch divergence, LSO truncation).
    TruncateTo {
        /// The new log end offset.
        offset: Offset,
        /// Why.
        cause: TruncationCause,
    },
    /// Empty the log and start it at `offset` (first-time mirroring, fetch out of range).
    TruncateFullyAndStartAt {
        /// The new log start offset.
        offset: Offset,
        /// Why.
        cause: TruncationCause,
    },
    /// Append the batches of the fetch response being handled, keeping their source epochs.
    AppendFetched,
    /// Append an ABORT marker closing `producer_id`'s open transaction (stop strategy `Abort`).
    AbortTransaction {
        /// The producer whose transaction is open.
        producer_id: ProducerId,
        /// Its epoch.
        producer_epoch: ProducerEpoch,
        /// The leader epoch the marker is written at.
        leader_epoch: LeaderEpoch,
    },
    /// Append the `MIRROR_PID_RESET` control batch, expiring all producer state.
    AppendPidReset {
        /// The leader epoch the batch is written at.
        leader_epoch: LeaderEpoch,
    },
}

/// Something the executor must do for the partition.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize)]
pub enum Effect {
    /// Read the persisted `MirrorPartitionState` from the coordinator
    /// (completion: [`Input::StateRead`](crate::input::Input::StateRead)).
    ReadState {
        /// Correlation id.
        request: RequestId,
        /// The `__mirror_state` key.
        key: MirrorPartition,
    },
    /// Persist `value` if the stored record's state epoch is still `expected_state_epoch`
    /// (`None`: no record stored). Completion: `StateWritten` or `WriteFenced`.
    WriteState {
        /// Correlation id.
        request: RequestId,
        /// The `__mirror_state` key.
        key: MirrorPartition,
        /// The record to store (its `state_epoch` is the one expected; the coordinator bumps it).
        value: MirrorPartitionStateValue,
        /// The state epoch the writer last read, `None` when nothing was stored.
        expected_state_epoch: Option<StateEpoch>,
    },
    /// Ask the source cluster for the LME of this partition
    /// (completion: `LastMirroredEpochReceived`).
    QueryLastMirroredEpoch {
        /// Correlation id.
        request: RequestId,
        /// The partition asked about (the source answers for its topic id and partition).
        key: MirrorPartition,
    },
    /// Mutate the local log now.
    Log(LogEffect),
    /// Create the mirror fetcher for this partition.
    StartFetcher,
    /// Send one consumer Fetch (read-committed) to the source (completion: `FetchCompleted`).
    Fetch {
        /// Correlation id.
        request: RequestId,
        /// The offset to fetch from (the local LEO).
        fetch_offset: Offset,
        /// The epoch of the last local batch, for the source's divergence check.
        last_fetched_epoch: Option<LeaderEpoch>,
        /// How far the source may read.
        isolation: FetchIsolation,
    },
    /// Remove the mirror fetcher; responses still in flight will be ignored.
    StopFetcher,
    /// Ask the controller for a leader epoch of at least `at_least`
    /// (completion: `LeaderEpochBumped`).
    BumpLeaderEpoch {
        /// Correlation id.
        request: RequestId,
        /// The smallest acceptable new leader epoch.
        at_least: LeaderEpoch,
    },
    /// Persist the LME record for a future failback (completion: `LastMirroredEpochWritten`, or
    /// `WriteFenced` if the key's state was written since this leader wrote it; see
    /// [`Coordinator::write_last_mirrored_epoch`](crate::coordinator::Coordinator::write_last_mirrored_epoch)).
    WriteLastMirroredEpoch {
        /// Correlation id.
        request: RequestId,
        /// The `__mirror_state` key.
        key: MirrorPartition,
        /// The record.
        value: LastMirroredEpochsValue,
        /// The state epoch of the STOPPING record this leader wrote: the fence (`None`: not
        /// fenced, the prototype's write).
        expected_state_epoch: Option<StateEpoch>,
    },
    /// Let local producers write (`true`) or refuse them with `READ_ONLY_TOPIC` (`false`).
    SetWritable(bool),
    /// Feed `Input::RetryDue` with `attempt` after `delay_ms` milliseconds.
    ScheduleRetry {
        /// The retry attempt this timer is for.
        attempt: u32,
        /// How long to wait (never negative).
        delay_ms: TimestampMs,
    },
}
