//! The mirror states of a partition and the table of legal transitions between them.
//!
//! The table is data ([`TransitionTable`]), not code, so that a variant (for example "a PAUSED
//! partition may not be stopped") can be built and model-checked without touching the kernel.

use std::collections::BTreeSet;
use std::fmt;

use serde::{Deserialize, Serialize};

/// Where a mirrored partition is in its lifecycle (persisted in `__mirror_state`).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize)]
pub enum MirrorState {
    /// Nothing persisted yet.
    Unknown,
    /// LME truncation, then waiting for the replicas to finish truncating.
    Preparing,
    /// The mirror fetcher copies batches from the source.
    Mirroring,
    /// The fetcher is removed; resuming goes straight back to MIRRORING.
    Paused,
    /// The failover sequence is in progress.
    Stopping,
    /// Failover finished: the partition is writable by local producers.
    Stopped,
    /// A step failed; the state to retry is recorded beside it.
    Failed,
}

impl MirrorState {
    /// Every state, in lifecycle order.
    pub const ALL: [MirrorState; 7] = [
        MirrorState::Unknown,
        MirrorState::Preparing,
        MirrorState::Mirroring,
        MirrorState::Paused,
        MirrorState::Stopping,
        MirrorState::Stopped,
        MirrorState::Failed,
    ];

    /// Kafka's wire code of the state in `MirrorPartitionStateValue`.
    pub const fn code(self) -> i8 {
        match self {
            MirrorState::Unknown => 0,
            MirrorState::Preparing => 1,
            MirrorState::Mirroring => 2,
            MirrorState::Paused => 3,
            MirrorState::Stopping => 4,
            MirrorState::Stopped => 5,
            MirrorState::Failed => 6,
        }
    }

    /// The state with wire code `code`, if any.
    pub fn from_code(code: i8) -> Option<MirrorState> {
        Self::ALL.into_iter().find(|s| s.code() == code)
    }

    /// Whether local clients may produce to a partition in this state (only STOPPED).
    pub const fn is_writable(self) -> bool {
        matches!(self, MirrorState::Stopped)
    }

    /// Whether the mirror fetcher may run in this state (only MIRRORING).
    pub const fn runs_fetcher(self) -> bool {
        matches!(self, MirrorState::Mirroring)
    }
}

impl fmt::Display for MirrorState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            MirrorState::Unknown => "UNKNOWN",
            MirrorState::Preparing => "PREPARING",
            MirrorState::Mirroring => "MIRRORING",
            MirrorState::Paused => "PAUSED",
            MirrorState::Stopping => "STOPPING",
            MirrorState::Stopped => "STOPPED",
            MirrorState::Failed => "FAILED",
        })
    }
}

/// The set of legal `(from, to)` transitions.
///
/// Self-transitions are always legal (they re-assert a state and re-run its side effect), any
/// state may move to FAILED, and FAILED may move only to the retry target recorded with it; those
/// three rules are structural and not stored in the table. [`TransitionTable::is_legal`] applies
/// all of them.
#[derive(Clone, PartialEq, Eq, Hash, Debug, Serialize, Deserialize)]
pub struct TransitionTable {
    edges: BTreeSet<(MirrorState, MirrorState)>,
}

impl TransitionTable {
    /// KIP-1279's table (`docs/design.md`, section 2), with stopping a PAUSED partition allowed or
    /// not.
    pub fn kip1279(allow_stop_from_paused: bool) -> Self {
        use MirrorState::*;
        let mut edges: BTreeSet<_> = [
            (Unknown, Preparing),
            (Stopped, Preparing),
            (Preparing, Mirroring),
            (Mirroring, Paused),
            (Paused, Mirroring),
            (Preparing, Stopping),
            (Mirroring, Stopping),
            (Stopping, Stopped),
        ]
        .into_iter()
        .collect();
        if allow_stop_from_paused {
            edges.insert((Paused, Stopping));
        }
        TransitionTable { edges }
    }

    /// A table with exactly `edges` (plus the structural rules).
    pub fn from_edges(edges: impl IntoIterator<Item = (MirrorState, MirrorState)>) -> Self {
        TransitionTable {
            edges: edges.into_iter().collect(),
        }
    }

    /// Whether `from -> to` is legal; `retry_target` is the state recorded with a FAILED `from`.
    pub fn is_legal(
        &self,
        from: MirrorState,
        to: MirrorState,
        retry_target: Option<MirrorState>,
    ) -> bool {
        if from == to || to == MirrorState::Failed {
            return true;
        }
        if from == MirrorState::Failed {
            return retry_target == Some(to);
        }
        self.edges.contains(&(from, to))
    }

    /// The explicit edges of the table.
    pub fn edges(&self) -> impl Iterator<Item = (MirrorState, MirrorState)> + '_ {
        self.edges.iter().copied()
    }
}

impl Default for TransitionTable {
    /// KIP-1279's table (`docs/design.md`, section 2), stopping a PAUSED partition allowed.
    fn default() -> Self {
        TransitionTable::kip1279(true)
    }
}

#[cfg(test)]
mod tests {
    use super::MirrorState::*;
    use super::*;

    #[test]
    fn codes_round_trip_and_are_distinct() {
        for s in MirrorState::ALL {
            assert_eq!(MirrorState::from_code(s.code()), Some(s));
        }
        assert_eq!(MirrorState::from_code(7), None);
        assert_eq!(MirrorState::from_code(-1), None);
    }

    #[test]
    fn only_stopped_is_writable_and_only_mirroring_fetches() {
        let writable: Vec<_> = MirrorState::ALL
            .into_iter()
            .filter(|s| s.is_writable())
            .collect();
        assert_eq!(writable, vec![Stopped]);
        let fetching: Vec<_> = MirrorState::ALL
            .into_iter()
            .filter(|s| s.runs_fetcher())
            .collect();
        assert_eq!(fetching, vec![Mirroring]);
    }

    #[test]
    fn default_table_is_the_spec_table() {
        let t = TransitionTable::default();
        let legal: BTreeSet<_> = MirrorState::ALL
            .into_iter()
            .flat_map(|a| MirrorState::ALL.into_iter().map(move |b| (a, b)))
            .filter(|&(a, b)| a != b && b != Failed && a != Failed && t.is_legal(a, b, None))
            .collect();
        let expected: BTreeSet<_> = [
            (Unknown, Preparing),
            (Stopped, Preparing),
            (Preparing, Mirroring),
            (Mirroring, Paused),
            (Paused, Mirroring),
            (Preparing, Stopping),
            (Mirroring, Stopping),
            (Paused, Stopping),
            (Stopping, Stopped),
        ]
        .into_iter()
        .collect();
        assert_eq!(legal, expected);
    }

    #[test]
    fn structural_rules() {
        let t = TransitionTable::kip1279(false);
        assert!(!t.is_legal(Paused, Stopping, None));
        assert!(t.is_legal(Mirroring, Mirroring, None));
        assert!(t.is_legal(Stopped, Failed, None));
        assert!(t.is_legal(Failed, Preparing, Some(Preparing)));
        assert!(!t.is_legal(Failed, Mirroring, Some(Preparing)));
        assert!(!t.is_legal(Failed, Mirroring, None));
        assert!(!t.is_legal(Unknown, Mirroring, None));
        assert!(!t.is_legal(Stopped, Mirroring, None));
    }
}
