//! Configuration of a partition's mirroring state machine: the design switches the KIP's
//! prototypes disagree on, so that each variant can be model-checked.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::mutant::Mutant;
use crate::state::{Design, TransitionTable};
use crate::types::{LeaderEpoch, TimestampMs};

/// How STOPPING removes half-finished transactions before the partition becomes writable.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize)]
pub enum StopStrategy {
    /// KIP-1279's text: truncate the log to its LSO (everything from the first open transaction on,
    /// and anything not yet replicated to the ISR, is removed).
    TruncateToLso,
    /// The KIP's later prototype: append an ABORT marker for every open transaction.
    AbortOpenTransactions,
}

/// One of STOPPING's steps 2 to 5 (`docs/design.md`, section 5.4). Step 1, removing the fetcher,
/// is not one: revoke early removes it as the STOPPING record is written, so it always runs first.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize)]
pub enum StopStep {
    /// Step 2: bump the leader epoch above every epoch in the log (skipped when the leader's
    /// epoch already is) and persist it by re-asserting STOPPING with `previous_state ==
    /// STOPPING`: that record's leader epoch is the stop epoch.
    Bump,
    /// Step 3: truncate to the LSO ([`StopStrategy::TruncateToLso`]) or append ABORT markers
    /// for the open transactions ([`StopStrategy::AbortOpenTransactions`]).
    Truncate,
    /// Step 4: record the LME (`WriteLastMirroredEpoch`).
    Lme,
    /// Step 5: append `MIRROR_PID_RESET`.
    Reset,
}

impl StopStep {
    /// The four steps, in the KIP's order.
    pub const ALL: [StopStep; 4] = [
        StopStep::Bump,
        StopStep::Truncate,
        StopStep::Lme,
        StopStep::Reset,
    ];

    /// The step's name in a [`StopOrder`] string: `bump`, `truncate`, `lme` or `reset`.
    pub const fn name(self) -> &'static str {
        match self {
            StopStep::Bump => "bump",
            StopStep::Truncate => "truncate",
            StopStep::Lme => "lme",
            StopStep::Reset => "reset",
        }
    }
}

impl fmt::Display for StopStep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for StopStep {
    type Err = StopOrderError;

    /// The step named `name` ([`StopStep::name`]).
    fn from_str(name: &str) -> Result<Self, Self::Err> {
        StopStep::ALL
            .into_iter()
            .find(|s| s.name() == name)
            .ok_or_else(|| StopOrderError::UnknownStep(name.to_owned()))
    }
}

/// The order in which STOPPING runs steps 2 to 5: a permutation of [`StopStep::ALL`].
///
/// Written and parsed as the four step names separated by commas, e.g. `bump,truncate,lme,reset`
/// (the KIP's order, [`StopOrder::KIP`], the default). The kernel runs the first step of the
/// order that is not done yet on every (re-)entry into STOPPING, so any order is re-entrant; an
/// order other than the KIP's exists to be model-checked (`model/FINDINGS.md`, design
/// question 2), not to be deployed.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct StopOrder([StopStep; 4]);

impl StopOrder {
    /// KIP-1279's order: bump, truncate, LME, reset.
    pub const KIP: StopOrder = StopOrder(StopStep::ALL);

    /// The prototype's order (`docs/prototype.md` section 3.8): record the LME first, then
    /// bump, then close open transactions, then reset producer ids.
    pub const PROTOTYPE: StopOrder = StopOrder([
        StopStep::Lme,
        StopStep::Bump,
        StopStep::Truncate,
        StopStep::Reset,
    ]);

    /// The 24 orders, in lexicographic order of [`StopStep`] (the first is [`StopOrder::KIP`]).
    pub const ALL: [StopOrder; 24] = [
        StopOrder([
            StopStep::Bump,
            StopStep::Truncate,
            StopStep::Lme,
            StopStep::Reset,
        ]),
        StopOrder([
            StopStep::Bump,
            StopStep::Truncate,
            StopStep::Reset,
            StopStep::Lme,
        ]),
        StopOrder([
            StopStep::Bump,
            StopStep::Lme,
            StopStep::Truncate,
            StopStep::Reset,
        ]),
        StopOrder([
            StopStep::Bump,
            StopStep::Lme,
            StopStep::Reset,
            StopStep::Truncate,
        ]),
        StopOrder([
            StopStep::Bump,
            StopStep::Reset,
            StopStep::Truncate,
            StopStep::Lme,
        ]),
        StopOrder([
            StopStep::Bump,
            StopStep::Reset,
            StopStep::Lme,
            StopStep::Truncate,
        ]),
        StopOrder([
            StopStep::Truncate,
            StopStep::Bump,
            StopStep::Lme,
            StopStep::Reset,
        ]),
        StopOrder([
            StopStep::Truncate,
            StopStep::Bump,
            StopStep::Reset,
            StopStep::Lme,
        ]),
        StopOrder([
            StopStep::Truncate,
            StopStep::Lme,
            StopStep::Bump,
            StopStep::Reset,
        ]),
        StopOrder([
            StopStep::Truncate,
            StopStep::Lme,
            StopStep::Reset,
            StopStep::Bump,
        ]),
        StopOrder([
            StopStep::Truncate,
            StopStep::Reset,
            StopStep::Bump,
            StopStep::Lme,
        ]),
        StopOrder([
            StopStep::Truncate,
            StopStep::Reset,
            StopStep::Lme,
            StopStep::Bump,
        ]),
        StopOrder([
            StopStep::Lme,
            StopStep::Bump,
            StopStep::Truncate,
            StopStep::Reset,
        ]),
        StopOrder([
            StopStep::Lme,
            StopStep::Bump,
            StopStep::Reset,
            StopStep::Truncate,
        ]),
        StopOrder([
            StopStep::Lme,
            StopStep::Truncate,
            StopStep::Bump,
            StopStep::Reset,
        ]),
        StopOrder([
            StopStep::Lme,
            StopStep::Truncate,
            StopStep::Reset,
            StopStep::Bump,
        ]),
        StopOrder([
            StopStep::Lme,
            StopStep::Reset,
            StopStep::Bump,
            StopStep::Truncate,
        ]),
        StopOrder([
            StopStep::Lme,
            StopStep::Reset,
            StopStep::Truncate,
            StopStep::Bump,
        ]),
        StopOrder([
            StopStep::Reset,
            StopStep::Bump,
            StopStep::Truncate,
            StopStep::Lme,
        ]),
        StopOrder([
            StopStep::Reset,
            StopStep::Bump,
            StopStep::Lme,
            StopStep::Truncate,
        ]),
        StopOrder([
            StopStep::Reset,
            StopStep::Truncate,
            StopStep::Bump,
            StopStep::Lme,
        ]),
        StopOrder([
            StopStep::Reset,
            StopStep::Truncate,
            StopStep::Lme,
            StopStep::Bump,
        ]),
        StopOrder([
            StopStep::Reset,
            StopStep::Lme,
            StopStep::Bump,
            StopStep::Truncate,
        ]),
        StopOrder([
            StopStep::Reset,
            StopStep::Lme,
            StopStep::Truncate,
            StopStep::Bump,
        ]),
    ];

    /// The order `steps`, which must name each step exactly once.
    pub fn new(steps: [StopStep; 4]) -> Result<Self, StopOrderError> {
        for (i, step) in steps.iter().enumerate() {
            if steps[..i].contains(step) {
                return Err(StopOrderError::Repeated(*step));
            }
        }
        Ok(StopOrder(steps))
    }

    /// The steps, first to last.
    pub const fn steps(self) -> [StopStep; 4] {
        self.0
    }

    /// Where `step` runs (0 for the first).
    pub fn position(self, step: StopStep) -> usize {
        self.0.iter().position(|&s| s == step).unwrap_or(0)
    }

    /// Whether `first` runs before `second`.
    pub fn runs_before(self, first: StopStep, second: StopStep) -> bool {
        self.position(first) < self.position(second)
    }
}

impl Default for StopOrder {
    /// [`StopOrder::KIP`].
    fn default() -> Self {
        StopOrder::KIP
    }
}

impl fmt::Display for StopOrder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let [a, b, c, d] = self.0;
        write!(f, "{a},{b},{c},{d}")
    }
}

/// Why a string is not a [`StopOrder`].
#[derive(Clone, PartialEq, Eq, Debug, thiserror::Error)]
pub enum StopOrderError {
    /// A name that is not `bump`, `truncate`, `lme` or `reset`.
    #[error("unknown stop step `{0}` (expected bump, truncate, lme, reset)")]
    UnknownStep(String),
    /// Not exactly four names.
    #[error("a stop order names 4 steps separated by commas, not {0}")]
    WrongLength(usize),
    /// A step named twice.
    #[error("stop step `{0}` named twice")]
    Repeated(StopStep),
}

impl FromStr for StopOrder {
    type Err = StopOrderError;

    /// Four step names separated by commas, each once (spaces around names are ignored).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let names: Vec<&str> = s.split(',').map(str::trim).collect();
        let [a, b, c, d] = names[..] else {
            return Err(StopOrderError::WrongLength(names.len()));
        };
        StopOrder::new([a.parse()?, b.parse()?, c.parse()?, d.parse()?])
    }
}

impl TryFrom<String> for StopOrder {
    type Error = StopOrderError;

    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

impl From<StopOrder> for String {
    fn from(order: StopOrder) -> String {
        order.to_string()
    }
}

/// How far a Fetch may read: Kafka's consumer isolation levels, plus the follower bound.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize)]
pub enum FetchIsolation {
    /// A consumer with `isolation.level=read_committed`: whole batches below the LSO
    /// (`docs/design.md`, section 5.3).
    ReadCommitted,
    /// A consumer with `isolation.level=read_uncommitted`: whole batches below the HW (what the
    /// KIP's "truncate to LSO at stop" implies the mirror fetcher reads).
    ReadUncommitted,
    /// A follower replica of the same cluster: everything up to the LEO.
    Follower,
}

/// Which replicas must finish LME truncation before PREPARING moves to MIRRORING.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize)]
pub enum TruncationQuorum {
    /// Every member of the ISR (the default).
    Isr,
    /// Every assigned replica (`mirror.support.unclean.leader.election=true`).
    AllReplicas,
}

impl TruncationQuorum {
    /// The quorum implied by `mirror.support.unclean.leader.election`.
    pub fn for_unclean_leader_election(supported: bool) -> Self {
        if supported {
            TruncationQuorum::AllReplicas
        } else {
            TruncationQuorum::Isr
        }
    }
}

/// Exponential backoff of FAILED retries. Time is never read: the kernel asks for a timer with
/// [`Effect::ScheduleRetry`](crate::effect::Effect::ScheduleRetry).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize)]
pub struct RetryPolicy {
    /// Delay before the first retry.
    pub initial_delay_ms: TimestampMs,
    /// Upper bound of the delay.
    pub max_delay_ms: TimestampMs,
    /// After this many attempts the partition stays FAILED until an operator acts
    /// (`None`: retry forever).
    pub max_attempts: Option<u32>,
}

impl RetryPolicy {
    /// The delay before retry number `attempt` (1-based): `initial * 2^(attempt-1)`, capped,
    /// and never negative (a negative setting means no delay).
    pub fn delay_ms(&self, attempt: u32) -> TimestampMs {
        let shift = attempt.saturating_sub(1).min(63);
        self.initial_delay_ms
            .checked_shl(shift)
            // Shifting back loses nothing (sign included) exactly when the doubling did not overflow.
            .filter(|d| d >> shift == self.initial_delay_ms)
            .unwrap_or(TimestampMs::MAX)
            .min(self.max_delay_ms)
            .max(0)
    }

    /// Whether retry number `attempt` (1-based) may still run.
    pub fn allows(&self, attempt: u32) -> bool {
        self.max_attempts.is_none_or(|max| attempt <= max)
    }
}

impl Default for RetryPolicy {
    /// 100 ms doubling up to 30 s, forever.
    fn default() -> Self {
        RetryPolicy {
            initial_delay_ms: 100,
            max_delay_ms: 30_000,
            max_attempts: None,
        }
    }
}

/// When a fetched batch's leader epoch makes the destination bump its own leader epoch
/// (KIP-1279's invariant: the destination's epoch stays above every mirrored epoch).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize)]
pub struct EpochBumpRule {
    /// Whether a batch at exactly the destination's leader epoch already triggers the reactive
    /// bump (the seed: at or above) or is appended (the prototype: strictly above,
    /// `docs/prototype.md` section 3.4).
    pub reactive_at_equal: bool,
    /// The prototype's proactive bump: after appending batches whose epoch `b` is above
    /// `leader epoch - threshold`, bump without leaving MIRRORING (`None`: never).
    pub proactive_threshold: Option<u16>,
    /// A bump asks the controller for at least the source epoch plus this (the seed 1, the
    /// prototype 10; 0 is the prototype's javadoc, "bump to match").
    pub increment: u16,
}

impl EpochBumpRule {
    /// The seed's rule: bump before appending a batch at or above the leader epoch, to one
    /// above the batch's epoch; no proactive bump.
    pub const SEED: EpochBumpRule = EpochBumpRule {
        reactive_at_equal: true,
        proactive_threshold: None,
        increment: 1,
    };

    /// The prototype's rule as coded: EPOCH_FENCING for a batch strictly above the leader
    /// epoch, a proactive bump within 3 epochs, to the source's epoch + 10.
    pub const PROTOTYPE: EpochBumpRule = EpochBumpRule {
        reactive_at_equal: false,
        proactive_threshold: Some(3),
        increment: 10,
    };

    /// Whether a batch at `batch_epoch` must wait for a bump of `leader_epoch` before it is
    /// appended.
    pub fn reactive(&self, batch_epoch: LeaderEpoch, leader_epoch: LeaderEpoch) -> bool {
        batch_epoch > leader_epoch || (self.reactive_at_equal && batch_epoch == leader_epoch)
    }

    /// Whether appended batches up to `batch_epoch` call for a proactive bump of
    /// `leader_epoch`.
    pub fn proactive(&self, batch_epoch: LeaderEpoch, leader_epoch: LeaderEpoch) -> bool {
        self.proactive_threshold
            .is_some_and(|t| batch_epoch > leader_epoch.saturating_sub(i32::from(t)))
    }

    /// The smallest leader epoch to ask the controller for, the source being at `source_epoch`.
    pub fn target(&self, source_epoch: LeaderEpoch) -> LeaderEpoch {
        source_epoch.saturating_add(i32::from(self.increment))
    }
}

impl Default for EpochBumpRule {
    /// [`EpochBumpRule::SEED`].
    fn default() -> Self {
        EpochBumpRule::SEED
    }
}

/// What STOPPING records as the last mirrored epoch and offset.
#[derive(
    Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize,
)]
pub enum LmeCapture {
    /// The end of the mirrored data: where the first batch at the stop epoch (the stop's own
    /// writes) begins, or the log end (the seed, `docs/design.md` section 5.4).
    #[default]
    BeforeStopWrites,
    /// The log's latest epoch and end offset whenever the step runs (the prototype: a stop
    /// re-run after its own markers or reset records them as mirrored).
    LogEnd,
}

/// Which state a FAILED partition's retry writes.
#[derive(
    Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize,
)]
pub enum FailedRetry {
    /// The state recorded with the failure (the seed; the prototype's code, which falls back
    /// to LOG_ALIGNMENT when none is recorded).
    #[default]
    PreviousState,
    /// Always LOG_ALIGNMENT / PREPARING (the prototype's javadoc, disagreement D1).
    LogAlignment,
}

/// Everything that parameterises a [`PartitionMirror`](crate::partition::PartitionMirror).
#[derive(Clone, PartialEq, Eq, Hash, Debug, Serialize, Deserialize)]
pub struct MirrorConfig {
    /// How STOPPING closes open transactions.
    pub stop_strategy: StopStrategy,
    /// The order of STOPPING's steps 2 to 5 (default: the KIP's).
    #[serde(default)]
    pub stop_order: StopOrder,
    /// Who must truncate before MIRRORING.
    pub truncation_quorum: TruncationQuorum,
    /// The isolation level of the mirror fetcher's consumer Fetch requests.
    pub fetch_isolation: FetchIsolation,
    /// The legal transitions (the kernel never asks the coordinator for an illegal one).
    pub transitions: TransitionTable,
    /// FAILED retry backoff.
    pub retry: RetryPolicy,
    /// The state machine's design: the seed's, or the prototype's states and decisions
    /// (`docs/design.md`, section 10).
    #[serde(default)]
    pub design: Design,
    /// When fetched epochs make the destination bump its leader epoch.
    #[serde(default)]
    pub epoch_bump: EpochBumpRule,
    /// Whether the LME record is written only if the key's state epoch is still the STOPPING
    /// record's (model finding 8; the prototype writes it unfenced).
    #[serde(default = "fenced")]
    pub lme_write_fenced: bool,
    /// Which state a FAILED retry writes.
    #[serde(default)]
    pub failed_retry: FailedRetry,
    /// What the stop records as the LME.
    #[serde(default)]
    pub lme_capture: LmeCapture,
    /// Whether a `__mirror_state` write of an earlier leadership of a partition may still land
    /// after a new leadership read the state: true in a cluster, where a deposed leader's
    /// request can be in flight, so a new leader writes the record it read again before acting
    /// on it. False only where the executor guarantees the earlier leadership can write no more
    /// once the new one starts: one process holds the partition and its coordinator, and a
    /// restart begins only after the earlier process ended (a node destination and its lock).
    /// A reopened node then acts on the states it persisted without writing them again.
    #[serde(default = "fenced")]
    pub predecessors_may_write: bool,
    /// A deliberate bug, effective only with feature `mutants`.
    pub mutant: Option<Mutant>,
}

/// The default of [`MirrorConfig::lme_write_fenced`] and
/// [`MirrorConfig::predecessors_may_write`] in configurations written before them.
fn fenced() -> bool {
    true
}

impl MirrorConfig {
    /// The KIP authors' prototype as read (`docs/prototype.md`): its ten states and table,
    /// decisions taken on triggers only, READ_UNCOMMITTED fetches, a stop that records the
    /// LME first (unfenced), bumps, aborts open transactions and resets producer ids, the
    /// prototype's epoch-bump rule, and retries of FAILED to the recorded state, at most 10.
    pub fn prototype() -> Self {
        MirrorConfig {
            design: Design::Prototype,
            stop_strategy: StopStrategy::AbortOpenTransactions,
            stop_order: StopOrder::PROTOTYPE,
            truncation_quorum: TruncationQuorum::Isr,
            fetch_isolation: FetchIsolation::ReadUncommitted,
            transitions: TransitionTable::prototype(true),
            retry: RetryPolicy {
                initial_delay_ms: 1_000,
                max_delay_ms: 300_000,
                max_attempts: Some(10),
            },
            epoch_bump: EpochBumpRule::PROTOTYPE,
            lme_write_fenced: false,
            failed_retry: FailedRetry::PreviousState,
            lme_capture: LmeCapture::LogEnd,
            predecessors_may_write: true,
            mutant: None,
        }
    }

    /// The configuration of `design`: [`MirrorConfig::default`] or [`MirrorConfig::prototype`].
    pub fn for_design(design: Design) -> Self {
        match design {
            Design::Seed => MirrorConfig::default(),
            Design::Prototype => MirrorConfig::prototype(),
        }
    }
}

impl Default for MirrorConfig {
    /// The KIP text's choices (`docs/design.md`, section 10): truncate to LSO, the KIP's stop
    /// order, wait for the ISR, read-committed fetches, the default table, default backoff.
    fn default() -> Self {
        MirrorConfig {
            stop_strategy: StopStrategy::TruncateToLso,
            stop_order: StopOrder::KIP,
            truncation_quorum: TruncationQuorum::Isr,
            fetch_isolation: FetchIsolation::ReadCommitted,
            transitions: TransitionTable::default(),
            retry: RetryPolicy::default(),
            design: Design::Seed,
            epoch_bump: EpochBumpRule::SEED,
            lme_write_fenced: true,
            failed_retry: FailedRetry::PreviousState,
            lme_capture: LmeCapture::BeforeStopWrites,
            predecessors_may_write: true,
            mutant: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_and_caps() {
        let p = RetryPolicy {
            initial_delay_ms: 100,
            max_delay_ms: 1_000,
            max_attempts: Some(3),
        };
        assert_eq!(
            (1..=5).map(|a| p.delay_ms(a)).collect::<Vec<_>>(),
            vec![100, 200, 400, 800, 1_000]
        );
        assert_eq!(p.delay_ms(200), 1_000);
        let negative = RetryPolicy {
            initial_delay_ms: -100,
            ..p
        };
        assert_eq!(negative.delay_ms(1), 0, "a negative delay is no delay");
        assert!(p.allows(3));
        assert!(!p.allows(4));
        assert!(RetryPolicy::default().allows(u32::MAX));
    }

    #[test]
    fn epoch_bump_rules() {
        let seed = EpochBumpRule::SEED;
        assert!(seed.reactive(5, 5) && seed.reactive(6, 5) && !seed.reactive(4, 5));
        assert!(!seed.proactive(5, 5));
        assert_eq!(seed.target(5), 6);
        let proto = EpochBumpRule::PROTOTYPE;
        assert!(!proto.reactive(5, 5) && proto.reactive(6, 5));
        assert!(proto.proactive(3, 5) && !proto.proactive(2, 5));
        assert_eq!(proto.target(5), 15);
        assert_eq!(proto.target(i32::MAX), i32::MAX);
    }

    #[test]
    fn the_prototype_preset_differs_where_the_prototype_does() {
        let p = MirrorConfig::prototype();
        assert_eq!(MirrorConfig::for_design(Design::Prototype), p);
        assert_eq!(
            MirrorConfig::for_design(Design::Seed),
            MirrorConfig::default()
        );
        assert_eq!(p.stop_order.to_string(), "lme,bump,truncate,reset");
        assert_eq!(p.fetch_isolation, FetchIsolation::ReadUncommitted);
        assert!(!p.lme_write_fenced && MirrorConfig::default().lme_write_fenced);
    }

    #[test]
    fn unclean_election_widens_the_quorum() {
        assert_eq!(
            TruncationQuorum::for_unclean_leader_election(true),
            TruncationQuorum::AllReplicas
        );
        assert_eq!(
            TruncationQuorum::for_unclean_leader_election(false),
            TruncationQuorum::Isr
        );
    }

    #[test]
    fn the_24_stop_orders_are_the_permutations_and_parse_back() {
        assert_eq!(StopOrder::ALL[0], StopOrder::KIP);
        assert_eq!(StopOrder::default(), StopOrder::KIP);
        assert_eq!(StopOrder::KIP.to_string(), "bump,truncate,lme,reset");
        let mut seen = std::collections::BTreeSet::new();
        for order in StopOrder::ALL {
            assert!(seen.insert(order), "{order} twice");
            assert_eq!(StopOrder::new(order.steps()), Ok(order));
            assert_eq!(order.to_string().parse(), Ok(order));
            assert_eq!(String::from(order), order.to_string());
        }
        assert_eq!(seen.len(), 24);
        assert!(StopOrder::ALL.windows(2).all(|w| w[0] < w[1]), "sorted");
    }

    #[test]
    fn bad_stop_orders_are_refused() {
        assert_eq!(
            " lme , bump,reset,truncate".parse(),
            StopOrder::new([
                StopStep::Lme,
                StopStep::Bump,
                StopStep::Reset,
                StopStep::Truncate
            ])
        );
        assert_eq!(
            "bump,truncate,lme".parse::<StopOrder>(),
            Err(StopOrderError::WrongLength(3))
        );
        assert_eq!(
            "bump,truncate,lme,bump".parse::<StopOrder>(),
            Err(StopOrderError::Repeated(StopStep::Bump))
        );
        assert_eq!(
            "bump,truncate,lme,abort".parse::<StopOrder>(),
            Err(StopOrderError::UnknownStep("abort".into()))
        );
        assert_eq!(
            StopOrder::try_from(String::new()),
            Err(StopOrderError::WrongLength(1))
        );
        assert!(StopOrder::KIP.runs_before(StopStep::Bump, StopStep::Reset));
        assert_eq!(StopOrder::KIP.position(StopStep::Lme), 2);
    }
}
