//! How long [`Driver::run`](super::Driver::run) runs ([`Until`]), why it pauses ([`Idle`]), how it
//! ended ([`RunEnd`]) and what it did ([`Stats`], [`Progress`]).

use kmirror_kernel::types::Offset;
use serde::Serialize;

/// Why [`Driver::run_once`](super::Driver::run_once) has nothing to do right now.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Idle {
    /// The fetcher is waiting for new data at the source (the fetch is held), followers in sync.
    CaughtUp,
    /// The partition needs nothing more (PAUSED, STOPPED, not mirrored, FAILED for good...).
    Settled,
    /// Waiting for a retry timer.
    WaitingForRetry {
        /// When it fires.
        due_ms: i64,
    },
    /// The source is held by another process.
    SourceBusy,
    /// The kernel needs the source but the driver has none.
    NeedsSource,
    /// The kernel waits for followers (their truncation, or the high watermark) that make no
    /// progress.
    WaitingForReplicas,
}

/// How long [`Driver::run`](super::Driver::run) runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Until {
    /// Until the first idle point that is not a wait (caught up, settled).
    Idle,
    /// Until `n` fetch responses have been handled (or an idle point).
    Fetches(u64),
    /// Forever, polling the source and the config every `poll_ms` when idle.
    Forever {
        /// The poll interval.
        poll_ms: i64,
    },
}

/// How [`Driver::run`](super::Driver::run) ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum RunEnd {
    /// Caught up with the source.
    CaughtUp,
    /// Settled in a state that needs nothing more.
    Settled,
    /// The requested number of fetches was handled.
    FetchesDone,
    /// The kernel needs a source and none was given.
    NeedsSource,
}

/// Counters of the driver's work.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Stats {
    /// Fetch responses handed to the kernel.
    pub fetches: u64,
    /// Of those, answers read ahead while the previous fetch's batches were appended.
    pub fetched_ahead: u64,
    /// Batches appended from the source.
    pub batches: u64,
    /// Bytes appended from the source.
    pub bytes: u64,
    /// Inputs the kernel ignored as stale or not applicable.
    pub ignored: u64,
}

/// A snapshot for progress lines.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Progress {
    /// The persisted state.
    pub state: String,
    /// The leader's log end offset.
    pub log_end_offset: Offset,
    /// The leader's high watermark.
    pub high_watermark: Offset,
    /// The leader's last stable offset.
    pub last_stable_offset: Offset,
    /// The source's position, when known.
    pub source_last_stable_offset: Option<Offset>,
    /// Work counters.
    pub stats: Stats,
}
