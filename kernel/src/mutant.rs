//! Named deliberate bugs, so the model checker can prove that each property bites.
//!
//! A [`Mutant`] is carried in a configuration (`mutant: Option<Mutant>`) but only takes effect
//! when the crate is built with feature `mutants`; without it [`active`] is constant `false` and
//! the mutated branches compile away.

use serde::{Deserialize, Serialize};

/// A deliberately broken kernel behaviour.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize)]
pub enum Mutant {
    /// PREPARING moves to MIRRORING without waiting for the replicas to truncate.
    SkipIsrWait,
    /// A state's side effect runs before the coordinator acknowledged the state.
    ActBeforePersist,
    /// The leader epoch is never bumped above mirrored epochs (neither while mirroring nor at
    /// stop).
    SkipEpochBump,
    /// STOPPING neither truncates to the LSO nor aborts open transactions.
    SkipLsoTruncation,
    /// STOPPING does not append `MIRROR_PID_RESET`.
    SkipPidReset,
    /// The partition is made writable when STOPPING starts, not when STOPPED is persisted.
    WritableBeforeStopped,
    /// LME truncation keeps one offset more than the rule allows.
    LmeOffByOne,
    /// The coordinator accepts a write with a stale leader or state epoch.
    AcceptFencedWrite,
    /// The fetcher is left running (and its responses appended) in STOPPING.
    FetcherRunsInStopping,
    /// Failback goes from STOPPED straight to MIRRORING, skipping PREPARING (no LME truncation).
    FailbackWithoutPreparing,
    /// A FAILED partition never schedules its retry.
    NeverRetry,
    /// The leader ignores followers' truncation reports, so PREPARING waits forever with
    /// more than one replica.
    IgnoreReplicaReports,
    /// The completion of the LME write is dropped, so STOPPING stalls.
    StallAfterLmeWrite,
    /// The metadata-sync gate lets writes through once a stop was requested and in STOPPING
    /// and STOPPED (see [`crate::sync::gate`]).
    SyncAfterStop,
    /// The metadata-sync gate checks only when a round starts: a write computed while
    /// MIRRORING lands whatever happened since (no fence at write time).
    SyncWriteUnfenced,
    /// STOPPING truncates to an LSO that a closed transaction stops holding as soon as its
    /// marker is appended, not once the HW passes the marker (the kernel's LSO before the Kafka
    /// oracle showed the difference): an unreplicated ABORT is cut, its data kept.
    LsoReleasedAtMarker,
}

impl Mutant {
    /// Every mutant.
    pub const ALL: [Mutant; 16] = [
        Mutant::SkipIsrWait,
        Mutant::ActBeforePersist,
        Mutant::SkipEpochBump,
        Mutant::SkipLsoTruncation,
        Mutant::SkipPidReset,
        Mutant::WritableBeforeStopped,
        Mutant::LmeOffByOne,
        Mutant::AcceptFencedWrite,
        Mutant::FetcherRunsInStopping,
        Mutant::FailbackWithoutPreparing,
        Mutant::NeverRetry,
        Mutant::IgnoreReplicaReports,
        Mutant::StallAfterLmeWrite,
        Mutant::SyncAfterStop,
        Mutant::SyncWriteUnfenced,
        Mutant::LsoReleasedAtMarker,
    ];
}

/// Whether `mutant` is the one configured (always `false` without feature `mutants`).
#[inline(always)]
pub fn active(configured: Option<Mutant>, mutant: Mutant) -> bool {
    cfg!(feature = "mutants") && configured == Some(mutant)
}
