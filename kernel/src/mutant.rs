//! Named deliberate bugs, so the model checker can prove that each property bites.
//!
//! A [`Mutant`] is carried in a configuration (`mutant: Option<Mutant>`) but only takes effect
//! when the crate is built with feature `mutants`; without it [`active`] is constant `false` and
//! the mutated branches compile away.
//!
//! Each mutant has a kebab-case [`name`](Mutant::name) (what `kmirror check --mutant NAME`
//! takes, parsed back with [`FromStr`] and printed with [`Display`](fmt::Display)) and a
//! one-line [`help`](Mutant::help); front ends list [`Mutant::ALL`], so a new mutant needs no
//! change outside this file.

use std::fmt;
use std::str::FromStr;

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
    /// The node manager (`kernel/src/node/`): the parts of a coalesced fetch response after a
    /// partition's failed or retriable part are dropped, neither routed nor fetched again, so
    /// one partition's fault stalls the partitions fetched with it.
    CoalescedFetchDropsAfterFailure,
    /// The node manager: a topic's change to `Stop` is fanned out to the led partitions of
    /// every topic, not only that topic's.
    StopRoutedToEveryTopic,
    /// The node manager: a partition's completed part of a coalesced fetch response is handed
    /// to the next partition of the request (in key order, cyclically).
    FetchPartToWrongPartition,
    /// The fetcher bumps the destination's epoch only when a fetched epoch is strictly above
    /// it: a mirrored batch at the destination's own epoch is appended (visible when the two
    /// clusters' epochs tie, `--epoch-lead a:0`).
    EpochTieNotBumped,
    /// After a failed state read or write the kernel keeps acting on the state it believed
    /// stored, although the write may have landed (a coordinator move between a write and its
    /// acknowledgement; the fix of FINDINGS.md's bug 3 undone).
    KeepStateAfterFailedWrite,
    /// The mirror fetcher sends no last fetched epoch (a consumer fetch before KIP-320), so the
    /// source never reports a divergence and the destination keeps what the source lost.
    FetchWithoutLastEpoch,
    /// A new leadership leaves the produce gate as the executor holds it (persisted by an
    /// earlier incarnation), so a partition STOPPED and writable before a restart stays
    /// writable through a failback's PREPARING and MIRRORING.
    KeepPersistedGate,
    /// Discovery (`crate::discovery`) adds a failed-over topic (`<mirror>.removed`) back to
    /// the mirror that matches it, without the operator's failback.
    ImplicitFailback,
    /// The node manager: a source topic's new partitions are never asked of the destination
    /// (no `CreatePartitions`), so they are never mirrored.
    SourceGrowthIgnored,
    /// A partition FAILED because its source topic is gone records no exit: a stop of its
    /// topic (also one accepted while that FAILED was written) is never carried out.
    DeletedSourceFailedForever,
    /// A diverging-epoch answer truncates to the fetcher's own log end, i.e. not at all: the
    /// next fetch asks the same and hears the same "diverging at (epoch, offset)" forever, the
    /// partition MIRRORING and holding a batch the source no longer has.
    DivergenceTruncatesToLogEnd,
    /// A diverging-epoch answer is taken at its word (KIP-101's rule, before KIP-279): the
    /// fetcher truncates to the source's end offset and fetches on at the source's epoch,
    /// without looking that epoch up in its own cache. Where the source's old leader holds a
    /// batch at a lower epoch at the offset where the destination copied one at a higher epoch
    /// from an intermediate leader, nothing is truncated and the source serves the next fetch.
    DivergenceTakenAtItsWord,
    /// The reverse-mirror check ([`crate::reverse_mirror`]) is skipped: a partition truncates
    /// by the source's LME and mirrors it although the source is itself mirroring the
    /// partition from this cluster (a mirror loop) or still stopping that mirror.
    ReverseMirrorIgnored,
    /// A partition with no saved state under a topic asking STOP (one added to a failed-over
    /// topic, which never mirrored) stays UNKNOWN, as in the prototype's table: its produce
    /// gate never opens and a failback of its topic is refused forever.
    GrownStoppedTopicStaysUnknown,
}

impl Mutant {
    /// Every mutant.
    pub const ALL: [Mutant; 30] = [
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
        Mutant::CoalescedFetchDropsAfterFailure,
        Mutant::StopRoutedToEveryTopic,
        Mutant::FetchPartToWrongPartition,
        Mutant::EpochTieNotBumped,
        Mutant::KeepStateAfterFailedWrite,
        Mutant::FetchWithoutLastEpoch,
        Mutant::KeepPersistedGate,
        Mutant::ImplicitFailback,
        Mutant::SourceGrowthIgnored,
        Mutant::DeletedSourceFailedForever,
        Mutant::DivergenceTruncatesToLogEnd,
        Mutant::DivergenceTakenAtItsWord,
        Mutant::ReverseMirrorIgnored,
        Mutant::GrownStoppedTopicStaysUnknown,
    ];

    /// The mutants only the node model (`kmirror check --node`, `model/src/node/`) can show:
    /// those of the node manager (`kernel/src/node/`), which only it runs, and those of a
    /// node's lifecycle (restarts, discovery, a changing source, a failed-over topic grown);
    /// every other mutant shows in the single-partition model.
    pub const NODE: [Mutant; 8] = [
        Mutant::CoalescedFetchDropsAfterFailure,
        Mutant::StopRoutedToEveryTopic,
        Mutant::FetchPartToWrongPartition,
        Mutant::KeepPersistedGate,
        Mutant::ImplicitFailback,
        Mutant::SourceGrowthIgnored,
        Mutant::DeletedSourceFailedForever,
        Mutant::GrownStoppedTopicStaysUnknown,
    ];

    /// Whether this is one of [`Mutant::NODE`].
    pub fn is_node(self) -> bool {
        Mutant::NODE.contains(&self)
    }

    /// The kebab-case name (`SkipPidReset` is `skip-pid-reset`), unique among [`Mutant::ALL`].
    pub const fn name(self) -> &'static str {
        match self {
            Mutant::SkipIsrWait => "skip-isr-wait",
            Mutant::ActBeforePersist => "act-before-persist",
            Mutant::SkipEpochBump => "skip-epoch-bump",
            Mutant::SkipLsoTruncation => "skip-lso-truncation",
            Mutant::SkipPidReset => "skip-pid-reset",
            Mutant::WritableBeforeStopped => "writable-before-stopped",
            Mutant::LmeOffByOne => "lme-off-by-one",
            Mutant::AcceptFencedWrite => "accept-fenced-write",
            Mutant::FetcherRunsInStopping => "fetcher-runs-in-stopping",
            Mutant::FailbackWithoutPreparing => "failback-without-preparing",
            Mutant::NeverRetry => "never-retry",
            Mutant::IgnoreReplicaReports => "ignore-replica-reports",
            Mutant::StallAfterLmeWrite => "stall-after-lme-write",
            Mutant::SyncAfterStop => "sync-after-stop",
            Mutant::SyncWriteUnfenced => "sync-write-unfenced",
            Mutant::LsoReleasedAtMarker => "lso-released-at-marker",
            Mutant::CoalescedFetchDropsAfterFailure => "coalesced-fetch-drops-after-failure",
            Mutant::StopRoutedToEveryTopic => "stop-routed-to-every-topic",
            Mutant::FetchPartToWrongPartition => "fetch-part-to-wrong-partition",
            Mutant::EpochTieNotBumped => "epoch-tie-not-bumped",
            Mutant::KeepStateAfterFailedWrite => "keep-state-after-failed-write",
            Mutant::FetchWithoutLastEpoch => "fetch-without-last-epoch",
            Mutant::KeepPersistedGate => "keep-persisted-gate",
            Mutant::ImplicitFailback => "implicit-failback",
            Mutant::SourceGrowthIgnored => "source-growth-ignored",
            Mutant::DeletedSourceFailedForever => "deleted-source-failed-forever",
            Mutant::DivergenceTruncatesToLogEnd => "divergence-truncates-to-log-end",
            Mutant::DivergenceTakenAtItsWord => "divergence-taken-at-its-word",
            Mutant::ReverseMirrorIgnored => "reverse-mirror-ignored",
            Mutant::GrownStoppedTopicStaysUnknown => "grown-stopped-topic-stays-unknown",
        }
    }

    /// What the mutant breaks, in one line (with the model knobs it needs to show).
    pub const fn help(self) -> &'static str {
        match self {
            Mutant::SkipIsrWait => "PREPARING does not wait for the replicas to truncate",
            Mutant::ActBeforePersist => {
                "STOPPED is made writable before the coordinator acknowledged it"
            }
            Mutant::SkipEpochBump => "STOPPING does not bump the leader epoch",
            Mutant::SkipLsoTruncation => {
                "STOPPING neither truncates to the LSO nor aborts open transactions"
            }
            Mutant::SkipPidReset => "STOPPING does not append MIRROR_PID_RESET",
            Mutant::WritableBeforeStopped => "Writable as soon as STOPPING starts",
            Mutant::LmeOffByOne => "LME truncation keeps one offset too many",
            Mutant::AcceptFencedWrite => "The coordinator accepts stale leader or state epochs",
            Mutant::FetcherRunsInStopping => {
                "The fetcher keeps running (and appending) in STOPPING"
            }
            Mutant::FailbackWithoutPreparing => "Failback goes from STOPPED straight to MIRRORING",
            Mutant::NeverRetry => "FAILED never schedules a retry",
            Mutant::IgnoreReplicaReports => "Followers' truncation reports are ignored",
            Mutant::StallAfterLmeWrite => "The LME write's completion is dropped",
            Mutant::SyncAfterStop => {
                "The metadata-sync gate lets writes through after a stop (needs --sync-steps)"
            }
            Mutant::SyncWriteUnfenced => {
                "The metadata-sync gate does not re-check at write time (needs --sync-steps)"
            }
            Mutant::LsoReleasedAtMarker => {
                "STOPPING's LSO ignores closed transactions whose marker is not replicated \
                 (needs --replicas 2)"
            }
            Mutant::CoalescedFetchDropsAfterFailure => {
                "The node drops the parts of a coalesced fetch after a failed one (needs --node)"
            }
            Mutant::StopRoutedToEveryTopic => {
                "The node fans a topic's stop out to every topic (needs --node)"
            }
            Mutant::FetchPartToWrongPartition => {
                "The node hands a fetch part to the next partition of the request (needs --node)"
            }
            Mutant::EpochTieNotBumped => {
                "A mirrored batch at the destination's own epoch is appended without a bump \
                 (needs --epoch-lead a:0)"
            }
            Mutant::KeepStateAfterFailedWrite => {
                "A failed state write leaves the kernel trusting the state it knew (needs \
                 --coordinator-moves 1)"
            }
            Mutant::FetchWithoutLastEpoch => {
                "The mirror fetcher sends no last fetched epoch (needs --unclean-source)"
            }
            Mutant::KeepPersistedGate => {
                "A new leadership keeps the produce gate an earlier one opened (needs --node)"
            }
            Mutant::ImplicitFailback => {
                "Discovery re-adds a failed-over topic without a failback (needs --node)"
            }
            Mutant::SourceGrowthIgnored => {
                "The node never creates the partitions a source topic gained (needs --node)"
            }
            Mutant::DeletedSourceFailedForever => {
                "A deleted source's FAILED has no exit: a stop is never done (needs --node)"
            }
            Mutant::DivergenceTruncatesToLogEnd => {
                "A diverging epoch truncates nothing, so it repeats forever (needs \
                 --unclean-source)"
            }
            Mutant::DivergenceTakenAtItsWord => {
                "A diverging epoch's offset and epoch are used without the local epoch lookup \
                 (needs --unclean-source, two crashes)"
            }
            Mutant::ReverseMirrorIgnored => {
                "A failback starts although the source mirrors the partition from here (needs \
                 --mirror-cycles)"
            }
            Mutant::GrownStoppedTopicStaysUnknown => {
                "A partition added to a failed-over topic stays UNKNOWN, never writable \
                 (needs --node)"
            }
        }
    }
}

impl fmt::Display for Mutant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A name that is not one of [`Mutant::ALL`]'s.
#[derive(Clone, PartialEq, Eq, Debug, thiserror::Error)]
#[error("unknown mutant `{0}`")]
pub struct UnknownMutant(pub String);

impl FromStr for Mutant {
    type Err = UnknownMutant;

    /// The mutant named `name` ([`Mutant::name`]).
    fn from_str(name: &str) -> Result<Self, Self::Err> {
        Mutant::ALL
            .into_iter()
            .find(|m| m.name() == name)
            .ok_or_else(|| UnknownMutant(name.to_owned()))
    }
}

/// Whether `mutant` is the one configured (always `false` without feature `mutants`).
#[inline(always)]
pub fn active(configured: Option<Mutant>, mutant: Mutant) -> bool {
    cfg!(feature = "mutants") && configured == Some(mutant)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_kebab_case_and_parse_back() {
        let mut seen = std::collections::BTreeSet::new();
        for m in Mutant::ALL {
            let name = m.name();
            assert!(seen.insert(name), "{name} twice");
            assert!(
                name.chars().all(|c| c.is_ascii_lowercase() || c == '-'),
                "{name} is not kebab-case"
            );
            // The kebab-case of the variant's Debug name.
            let mut kebab = String::new();
            for (i, c) in format!("{m:?}").chars().enumerate() {
                if c.is_ascii_uppercase() && i > 0 {
                    kebab.push('-');
                }
                kebab.push(c.to_ascii_lowercase());
            }
            assert_eq!(name, kebab);
            assert_eq!(name.parse::<Mutant>(), Ok(m));
            assert_eq!(m.to_string(), name);
            assert!(!m.help().is_empty());
        }
        assert_eq!(
            "no-such-mutant".parse::<Mutant>(),
            Err(UnknownMutant("no-such-mutant".into()))
        );
    }
}
