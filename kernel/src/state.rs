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
    /// The prototype design only ([`Design::Prototype`]): a fetched batch carries an epoch above
    /// the destination's leader epoch; the fetcher is removed and the leader epoch bumped
    /// before MIRRORING resumes.
    EpochFencing,
    /// The prototype design only: a fetch found the source's log diverging from the mirrored
    /// one (an unclean election on the source); after the divergence truncation the partition
    /// waits for its replicas to converge, then mirrors again.
    UleRecovery,
    /// The prototype design only: on the way to PAUSED; the fetcher is being removed.
    Pausing,
}

impl MirrorState {
    /// Every state: the seed design's seven in lifecycle order, then the three only the
    /// prototype design uses.
    pub const ALL: [MirrorState; 10] = [
        MirrorState::Unknown,
        MirrorState::Preparing,
        MirrorState::Mirroring,
        MirrorState::Paused,
        MirrorState::Stopping,
        MirrorState::Stopped,
        MirrorState::Failed,
        MirrorState::EpochFencing,
        MirrorState::UleRecovery,
        MirrorState::Pausing,
    ];

    /// The state's code in kmirror's `MirrorPartitionStateValue` (`kernel/src/records.rs`): the
    /// seed design's 0 to 6, and 7 to 9 for the prototype's extra states. The prototype's own
    /// wire values are [`MirrorState::prototype_code`].
    pub const fn code(self) -> i8 {
        match self {
            MirrorState::Unknown => 0,
            MirrorState::Preparing => 1,
            MirrorState::Mirroring => 2,
            MirrorState::Paused => 3,
            MirrorState::Stopping => 4,
            MirrorState::Stopped => 5,
            MirrorState::Failed => 6,
            MirrorState::EpochFencing => 7,
            MirrorState::UleRecovery => 8,
            MirrorState::Pausing => 9,
        }
    }

    /// The prototype's wire value of the state (its `MirrorPartitionState`, `docs/prototype.md`
    /// section 2.1): LOG_ALIGNMENT (kmirror's PREPARING) 0 up to FAILED 8, UNKNOWN -1.
    pub const fn prototype_code(self) -> i8 {
        match self {
            MirrorState::Preparing => 0,
            MirrorState::EpochFencing => 1,
            MirrorState::UleRecovery => 2,
            MirrorState::Mirroring => 3,
            MirrorState::Pausing => 4,
            MirrorState::Paused => 5,
            MirrorState::Stopping => 6,
            MirrorState::Stopped => 7,
            MirrorState::Failed => 8,
            MirrorState::Unknown => -1,
        }
    }

    /// The state with prototype wire value `code`, if any.
    pub fn from_prototype_code(code: i8) -> Option<MirrorState> {
        Self::ALL.into_iter().find(|s| s.prototype_code() == code)
    }

    /// The state's name in `design`: as [`fmt::Display`] prints it, except that the prototype
    /// calls PREPARING `LOG_ALIGNMENT`.
    pub const fn name_in(self, design: Design) -> &'static str {
        match (design, self) {
            (Design::Prototype, MirrorState::Preparing) => "LOG_ALIGNMENT",
            _ => self.name(),
        }
    }

    /// The state's name in the seed design (what [`fmt::Display`] prints).
    pub const fn name(self) -> &'static str {
        match self {
            MirrorState::Unknown => "UNKNOWN",
            MirrorState::Preparing => "PREPARING",
            MirrorState::Mirroring => "MIRRORING",
            MirrorState::Paused => "PAUSED",
            MirrorState::Stopping => "STOPPING",
            MirrorState::Stopped => "STOPPED",
            MirrorState::Failed => "FAILED",
            MirrorState::EpochFencing => "EPOCH_FENCING",
            MirrorState::UleRecovery => "ULE_RECOVERY",
            MirrorState::Pausing => "PAUSING",
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
        f.write_str(self.name())
    }
}

/// Which design of KIP-1279's state machine the kernel runs (`docs/design.md`, section 10).
///
/// Both share the log operations, the coordinator and the stop steps; the prototype's table,
/// states and decisions are switched on by [`MirrorConfig::prototype`](crate::config::MirrorConfig::prototype).
#[derive(
    Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize,
)]
pub enum Design {
    /// The KIP's text (the "seed"): seven states, `docs/design.md`.
    #[default]
    Seed,
    /// The KIP authors' prototype (GitHub `showuon/kafka`): ten states, `docs/prototype.md`.
    Prototype,
}

impl Design {
    /// Both designs.
    pub const ALL: [Design; 2] = [Design::Seed, Design::Prototype];

    /// The design's name on the command line: `seed` or `prototype`.
    pub const fn name(self) -> &'static str {
        match self {
            Design::Seed => "seed",
            Design::Prototype => "prototype",
        }
    }
}

impl fmt::Display for Design {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Design {
    type Err = String;

    /// `seed` or `prototype`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Design::ALL
            .into_iter()
            .find(|d| d.name() == s)
            .ok_or_else(|| format!("unknown design `{s}` (expected seed or prototype)"))
    }
}

/// Where FAILED may go.
#[derive(
    Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize,
)]
pub enum FailedExits {
    /// Only to the retry target recorded with the FAILED record (the seed design).
    #[default]
    RetryTarget,
    /// To the targets listed as `(Failed, to)` edges of the table, whatever was recorded (the
    /// prototype's `isValidStateTransition`: LOG_ALIGNMENT, MIRRORING, STOPPING).
    Edges,
}

/// The set of legal `(from, to)` transitions.
///
/// Self-transitions are always legal (they re-assert a state and re-run its side effect) and any
/// state may move to FAILED; those two rules are structural and not stored in the table. Where
/// FAILED may go is [`FailedExits`]: in the seed's table only to the retry target recorded with
/// it (structural too), in the prototype's to its listed edges. [`TransitionTable::is_legal`]
/// applies all of them.
#[derive(Clone, PartialEq, Eq, Hash, Debug, Serialize, Deserialize)]
pub struct TransitionTable {
    edges: BTreeSet<(MirrorState, MirrorState)>,
    #[serde(default)]
    failed_exits: FailedExits,
}

impl TransitionTable {
    /// KIP-1279's table (`docs/design.md`, section 2), with stopping a PAUSED partition allowed or
    /// not.
    pub fn kip1279(allow_stop_from_paused: bool) -> Self {
        use MirrorState::*;
        let mut edges: BTreeSet<_> = [
            (Unknown, Preparing),
            (Unknown, Stopped),
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
        TransitionTable {
            edges,
            failed_exits: FailedExits::RetryTarget,
        }
    }

    /// The prototype's table (`isValidStateTransition`, `docs/prototype.md` section 2.2), with
    /// stopping a PAUSED partition allowed (the broker's and the table's reading) or not (the
    /// controller's, disagreement D16). FAILED leaves only to LOG_ALIGNMENT, MIRRORING or
    /// STOPPING, whatever state failed.
    pub fn prototype(allow_stop_from_paused: bool) -> Self {
        use MirrorState::*;
        let mut edges: BTreeSet<_> = [
            (Unknown, Preparing),
            (Stopped, Preparing),
            (Failed, Preparing),
            (Preparing, Mirroring),
            (EpochFencing, Mirroring),
            (UleRecovery, Mirroring),
            (Paused, Mirroring),
            (Failed, Mirroring),
            (Mirroring, EpochFencing),
            (Mirroring, UleRecovery),
            (Mirroring, Pausing),
            (Pausing, Paused),
            (Preparing, Stopping),
            (EpochFencing, Stopping),
            (UleRecovery, Stopping),
            (Mirroring, Stopping),
            (Pausing, Stopping),
            (Failed, Stopping),
            (Stopping, Stopped),
        ]
        .into_iter()
        .collect();
        if allow_stop_from_paused {
            edges.insert((Paused, Stopping));
        }
        TransitionTable {
            edges,
            failed_exits: FailedExits::Edges,
        }
    }

    /// A table with exactly `edges` (plus the structural rules; FAILED goes to its retry target).
    pub fn from_edges(edges: impl IntoIterator<Item = (MirrorState, MirrorState)>) -> Self {
        TransitionTable {
            edges: edges.into_iter().collect(),
            failed_exits: FailedExits::RetryTarget,
        }
    }

    /// Where FAILED may go in this table.
    pub fn failed_exits(&self) -> FailedExits {
        self.failed_exits
    }

    /// The states this table knows: UNKNOWN, FAILED and every state an edge names, in
    /// [`MirrorState::ALL`]'s order.
    pub fn states(&self) -> Vec<MirrorState> {
        MirrorState::ALL
            .into_iter()
            .filter(|&s| {
                matches!(s, MirrorState::Unknown | MirrorState::Failed)
                    || self.edges.iter().any(|&(a, b)| a == s || b == s)
            })
            .collect()
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
        if from == MirrorState::Failed && self.failed_exits == FailedExits::RetryTarget {
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
        assert_eq!(MirrorState::from_code(10), None);
        assert_eq!(MirrorState::from_code(-1), None);
        let prototype: Vec<i8> = MirrorState::ALL.map(MirrorState::prototype_code).to_vec();
        for s in MirrorState::ALL {
            assert_eq!(
                MirrorState::from_prototype_code(s.prototype_code()),
                Some(s)
            );
        }
        let mut sorted = prototype.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted, (-1..=8).filter(|&c| c != 9).collect::<Vec<i8>>());
        assert_eq!(Preparing.name_in(Design::Prototype), "LOG_ALIGNMENT");
        assert_eq!(Preparing.name_in(Design::Seed), "PREPARING");
        assert_eq!(EpochFencing.to_string(), "EPOCH_FENCING");
    }

    #[test]
    fn designs_parse_by_name() {
        for d in Design::ALL {
            assert_eq!(d.to_string().parse::<Design>(), Ok(d));
        }
        assert!("kip"
            .parse::<Design>()
            .unwrap_err()
            .contains("seed or prototype"));
        assert_eq!(Design::default(), Design::Seed);
    }

    #[test]
    fn the_seed_table_knows_seven_states_and_the_prototype_ten() {
        assert_eq!(
            TransitionTable::default().states(),
            MirrorState::ALL[..7].to_vec()
        );
        assert_eq!(
            TransitionTable::prototype(true).states(),
            MirrorState::ALL.to_vec()
        );
    }

    /// The prototype's matrix, row by row (`docs/prototype.md` section 2.2): the states each
    /// state may move to, self-transitions and FAILED aside.
    #[test]
    fn prototype_table_is_the_prototypes_matrix() {
        let t = TransitionTable::prototype(true);
        let row = |from: MirrorState| -> Vec<MirrorState> {
            MirrorState::ALL
                .into_iter()
                .filter(|&to| to != from && to != Failed && t.is_legal(from, to, None))
                .collect()
        };
        assert_eq!(row(Unknown), vec![Preparing]);
        assert_eq!(row(Preparing), vec![Mirroring, Stopping]);
        assert_eq!(row(EpochFencing), vec![Mirroring, Stopping]);
        assert_eq!(row(UleRecovery), vec![Mirroring, Stopping]);
        assert_eq!(
            row(Mirroring),
            vec![Stopping, EpochFencing, UleRecovery, Pausing]
        );
        assert_eq!(row(Pausing), vec![Paused, Stopping]);
        assert_eq!(row(Paused), vec![Mirroring, Stopping]);
        assert_eq!(row(Stopping), vec![Stopped]);
        assert_eq!(row(Stopped), vec![Preparing]);
        // FAILED: the three exits whatever state failed, never back to the others.
        assert_eq!(row(Failed), vec![Preparing, Mirroring, Stopping]);
        assert!(t.is_legal(Failed, Preparing, Some(EpochFencing)));
        assert!(!t.is_legal(Failed, EpochFencing, Some(EpochFencing)));
        assert!(!t.is_legal(Failed, Paused, Some(Paused)));
        assert!(!TransitionTable::prototype(false).is_legal(Paused, Stopping, None));
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
            (Unknown, Stopped),
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
