//! Configuration of a partition's mirroring state machine: the design switches the KIP's
//! prototypes disagree on, so that each variant can be model-checked.

use serde::{Deserialize, Serialize};

use crate::mutant::Mutant;
use crate::state::TransitionTable;

/// How STOPPING removes half-finished transactions before the partition becomes writable.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize)]
pub enum StopStrategy {
    /// KIP-1279's text: truncate the log to its LSO (everything from the first open transaction on,
    /// and anything not yet replicated to the ISR, is removed).
    TruncateToLso,
    /// The KIP's later prototype: append an ABORT marker for every open transaction.
    AbortOpenTransactions,
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
    pub initial_delay_ms: u64,
    /// Upper bound of the delay.
    pub max_delay_ms: u64,
    /// After this many attempts the partition stays FAILED until an operator acts
    /// (`None`: retry forever).
    pub max_attempts: Option<u32>,
}

impl RetryPolicy {
    /// The delay before retry number `attempt` (1-based): `initial * 2^(attempt-1)`, capped.
    pub fn delay_ms(&self, attempt: u32) -> u64 {
        let shift = attempt.saturating_sub(1).min(63);
        self.initial_delay_ms
            .checked_shl(shift)
            .filter(|d| d >> shift == self.initial_delay_ms)
            .unwrap_or(u64::MAX)
            .min(self.max_delay_ms)
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

/// Everything that parameterises a [`PartitionMirror`](crate::partition::PartitionMirror).
#[derive(Clone, PartialEq, Eq, Hash, Debug, Serialize, Deserialize)]
pub struct MirrorConfig {
    /// How STOPPING closes open transactions.
    pub stop_strategy: StopStrategy,
    /// Who must truncate before MIRRORING.
    pub truncation_quorum: TruncationQuorum,
    /// The isolation level of the mirror fetcher's consumer Fetch requests.
    pub fetch_isolation: FetchIsolation,
    /// The legal transitions (the kernel never asks the coordinator for an illegal one).
    pub transitions: TransitionTable,
    /// FAILED retry backoff.
    pub retry: RetryPolicy,
    /// A deliberate bug, effective only with feature `mutants`.
    pub mutant: Option<Mutant>,
}

impl Default for MirrorConfig {
    /// The KIP text's choices (`docs/design.md`, section 10): truncate to LSO, wait for the ISR,
    /// read-committed fetches, the default table, default backoff.
    fn default() -> Self {
        MirrorConfig {
            stop_strategy: StopStrategy::TruncateToLso,
            truncation_quorum: TruncationQuorum::Isr,
            fetch_isolation: FetchIsolation::ReadCommitted,
            transitions: TransitionTable::default(),
            retry: RetryPolicy::default(),
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
        assert!(p.allows(3));
        assert!(!p.allows(4));
        assert!(RetryPolicy::default().allows(u32::MAX));
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
}
