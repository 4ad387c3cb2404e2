//! [`Event`]: what happened while the driver executed effects (for reports and the demo).

use kmirror_kernel::types::{BrokerId, LeaderEpoch, Offset};
use serde::Serialize;

/// Something that happened while the driver executed effects (for reports and the demo).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    /// The coordinator stored a state.
    StateWritten {
        /// The state.
        state: String,
        /// Its leader epoch.
        leader_epoch: LeaderEpoch,
        /// The state epoch the coordinator assigned.
        state_epoch: i32,
        /// The error message of a FAILED state.
        error: Option<String>,
    },
    /// The coordinator refused a state or LME write.
    WriteFenced {
        /// The Kafka error.
        reason: String,
    },
    /// The leader's log was truncated.
    LeaderTruncated {
        /// LEO before.
        from: Offset,
        /// LEO after.
        to: Offset,
        /// Why (which kernel rule).
        cause: String,
    },
    /// The leader's log was emptied and restarted at `start`.
    LeaderTruncatedFully {
        /// LEO before.
        from: Offset,
        /// The new log start offset.
        start: Offset,
        /// Why.
        cause: String,
    },
    /// A follower truncated while replicating.
    FollowerTruncated {
        /// The follower.
        replica: BrokerId,
        /// LEO before.
        from: Offset,
        /// LEO after.
        to: Offset,
    },
    /// The controller bumped the leader epoch.
    EpochBumped {
        /// The new epoch.
        leader_epoch: LeaderEpoch,
    },
    /// The LME was recorded.
    LastMirroredEpochWritten {
        /// The epoch (`None`: -1).
        epoch: Option<LeaderEpoch>,
        /// The end offset of the mirrored copy.
        offset: Offset,
    },
    /// A `MIRROR_PID_RESET` batch was appended.
    PidResetAppended {
        /// Its offset.
        offset: Offset,
        /// Its leader epoch.
        leader_epoch: LeaderEpoch,
    },
    /// An ABORT marker was appended (stop strategy `AbortOpenTransactions`).
    AbortMarkerAppended {
        /// Its offset.
        offset: Offset,
        /// The producer.
        producer_id: i64,
    },
    /// Local producers were allowed or refused.
    WritableChanged {
        /// Whether they may write.
        writable: bool,
    },
    /// The mirror fetcher was created.
    FetcherStarted,
    /// The mirror fetcher was removed.
    FetcherStopped,
    /// A retry timer was set.
    RetryScheduled {
        /// The attempt.
        attempt: u32,
        /// Its delay, in milliseconds.
        delay_ms: i64,
    },
    /// A request to the source failed.
    RequestFailed {
        /// What went wrong.
        error: String,
    },
}
