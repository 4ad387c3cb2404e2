//! Kafka's replication inside one cluster, as pure rules: what a follower does with its
//! leader's fetch answer, what the leader learns from the fetch, the high watermark (HW) and the
//! ISR expansion condition. No I/O: every function takes values and returns values; the caller
//! applies the log operation and keeps the state.
//!
//! The rules are Apache Kafka 4.4.0's (`org.apache.kafka.server.replica.Replica` and
//! `ReplicaState`, `kafka.cluster.Partition`, `kafka.server.ReplicaManager`,
//! `org.apache.kafka.storage.internals.log.UnifiedLog`):
//!
//! - **The leader credits the fetch offset.** A follower fetches from its LEO; when the leader
//!   serves records (no error, no diverging epoch), `ReplicaManager.updateFollowerFetchState`
//!   calls `Partition.updateFollowerFetchState` with the *fetch offset* of the request, which
//!   `Replica.updateFetchStateOrThrow` stores as the follower's LEO. The records the follower is
//!   about to append count only when it reports its new LEO in its next fetch. A diverging-epoch
//!   or out-of-range answer changes nothing on the leader. [`FollowerState::update_fetch_state`]
//!   and [`FollowerFetch::report`].
//! - **Leader HW** (`Partition.maybeIncrementLeaderHW`): nothing moves while the partition is
//!   under min ISR (`isr.size < min(min.insync.replicas, replica count)`); otherwise the
//!   candidate is the leader's LEO, lowered to the LEO of every remote replica that is in the
//!   (maximal) ISR, or caught up and eligible to join it; the HW only moves forward
//!   (`UnifiedLog.maybeIncrementHighWatermark`). [`leader_high_watermark`].
//! - **Follower HW** (`UnifiedLog.maybeUpdateHighWatermark`): the leader HW from the fetch
//!   response, clamped into `[log start, LEO]` of the follower's log. [`follower_high_watermark`].
//! - **ISR expansion** (`Partition.isFollowerInSync`, checked by `maybeExpandIsr` right after the
//!   fetch state is updated, before the HW moves): a follower outside the ISR joins when the LEO
//!   the leader holds for it is at least the leader's HW and at least the start offset of the
//!   leader's current epoch. [`is_follower_in_sync`].
//!
//! Times are values the caller passes (a logical clock is fine); the kernel never reads a
//! clock.

use serde::{Deserialize, Serialize};

use crate::epoch_cache::EpochCache;
use crate::fetch::{
    divergence_truncation_offset, resolve_out_of_range, FetchResponse, OutOfRangeResolution,
};
use crate::log::LogView;
use crate::types::{Offset, UNDEFINED_OFFSET};

/// The time of these state machines, also reachable here for their callers.
pub use crate::types::TimestampMs;

/// The leader's record of one follower: Kafka's `ReplicaState`, kept by the leader for every
/// remote replica and updated from the follower's fetches.
///
/// Offsets Kafka does not know yet are [`UNDEFINED_OFFSET`] (`-1`), as in Kafka.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Serialize, Deserialize)]
pub struct FollowerState {
    /// The follower's log start offset, as its latest fetch reported it.
    pub log_start_offset: Offset,
    /// The follower's LEO as the leader knows it: the fetch offset of its latest fetch that was
    /// served records. This, not the follower's LEO after it appends, is what the HW counts.
    pub log_end_offset: Offset,
    /// The highest leader LEO seen at the follower's fetches (Kafka's
    /// `lastFetchLeaderLogEndOffset`, which never decreases between resets).
    pub last_fetch_leader_log_end_offset: Offset,
    /// When the follower last fetched.
    pub last_fetch_time_ms: TimestampMs,
    /// The latest time at which the follower was known to have reached the leader's LEO
    /// (Kafka's `lastCaughtUpTimeMs`).
    pub last_caught_up_time_ms: TimestampMs,
}

impl Default for FollowerState {
    fn default() -> Self {
        FollowerState::EMPTY
    }
}

impl FollowerState {
    /// The state of a follower the leader has not heard from (Kafka's `ReplicaState.EMPTY`).
    pub const EMPTY: FollowerState = FollowerState {
        log_start_offset: UNDEFINED_OFFSET,
        log_end_offset: UNDEFINED_OFFSET,
        last_fetch_leader_log_end_offset: 0,
        last_fetch_time_ms: 0,
        last_caught_up_time_ms: 0,
    };

    /// The follower's LEO as the leader knows it, `None` before its first credited fetch.
    pub fn known_log_end_offset(&self) -> Option<Offset> {
        (self.log_end_offset != UNDEFINED_OFFSET).then_some(self.log_end_offset)
    }

    /// Records a fetch the leader served records for (Kafka's
    /// `Replica.updateFetchStateOrThrow`, without the broker-epoch check): the follower fetched
    /// from `fetch_offset` with log start `follower_log_start_offset` at `fetch_time_ms`, when
    /// the leader's LEO was `leader_log_end_offset`.
    ///
    /// The follower counts as caught up at this fetch if it fetched from the leader's current
    /// LEO, or else at the previous fetch if it now fetched from the leader's LEO of then.
    pub fn update_fetch_state(
        &mut self,
        fetch_offset: Offset,
        follower_log_start_offset: Offset,
        fetch_time_ms: TimestampMs,
        leader_log_end_offset: Offset,
    ) {
        let last_caught_up_time_ms = if fetch_offset >= leader_log_end_offset {
            self.last_caught_up_time_ms.max(fetch_time_ms)
        } else if fetch_offset >= self.last_fetch_leader_log_end_offset {
            self.last_caught_up_time_ms.max(self.last_fetch_time_ms)
        } else {
            self.last_caught_up_time_ms
        };
        *self = FollowerState {
            log_start_offset: follower_log_start_offset,
            log_end_offset: fetch_offset,
            last_fetch_leader_log_end_offset: leader_log_end_offset
                .max(self.last_fetch_leader_log_end_offset),
            last_fetch_time_ms: fetch_time_ms,
            last_caught_up_time_ms,
        };
    }

    /// Resets the record when the local broker becomes (or stays) leader (Kafka's
    /// `Replica.resetReplicaState`): a new leader forgets the follower's offsets; either way the
    /// follower counts as caught up now if it is in the ISR.
    pub fn reset(
        &mut self,
        now_ms: TimestampMs,
        leader_log_end_offset: Offset,
        is_new_leader: bool,
        is_follower_in_sync: bool,
    ) {
        let last_caught_up_time_ms = if is_follower_in_sync { now_ms } else { 0 };
        *self = if is_new_leader {
            FollowerState {
                log_start_offset: UNDEFINED_OFFSET,
                log_end_offset: UNDEFINED_OFFSET,
                last_fetch_leader_log_end_offset: UNDEFINED_OFFSET,
                last_fetch_time_ms: 0,
                last_caught_up_time_ms,
            }
        } else {
            FollowerState {
                last_fetch_leader_log_end_offset: leader_log_end_offset,
                last_fetch_time_ms: if is_follower_in_sync { now_ms } else { 0 },
                last_caught_up_time_ms,
                ..*self
            }
        };
    }

    /// Whether the follower is caught up (Kafka's `ReplicaState.isCaughtUp`): its known LEO is
    /// the leader's, or it was caught up at most `replica_lag_time_max_ms` before `now_ms`.
    pub fn is_caught_up(
        &self,
        leader_log_end_offset: Offset,
        now_ms: TimestampMs,
        replica_lag_time_max_ms: i64,
    ) -> bool {
        leader_log_end_offset == self.log_end_offset
            || now_ms.saturating_sub(self.last_caught_up_time_ms) <= replica_lag_time_max_ms
    }
}

/// A log operation a follower applies to its own log after a fetch.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub enum FollowerLogOp<B> {
    /// Append the fetched batches as a follower (`UnifiedLog.appendAsFollower`).
    Append(Vec<B>),
    /// Truncate to this offset (`UnifiedLog.truncateTo`): a diverging epoch, or a leader whose
    /// log ends below the follower's.
    TruncateTo(Offset),
    /// Empty the log and start it at this offset (`UnifiedLog.truncateFullyAndStartAt`): the
    /// leader's log starts above the follower's LEO.
    TruncateFullyAndStartAt(Offset),
}

/// What the leader records from a fetch it served records for: the arguments of Kafka's
/// `Partition.updateFollowerFetchState`.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Serialize, Deserialize)]
pub struct FetchReport {
    /// The fetch offset: the follower's LEO when it sent the fetch.
    pub fetch_offset: Offset,
    /// The follower's log start offset when it sent the fetch.
    pub follower_log_start_offset: Offset,
    /// The leader's LEO when it read the records.
    pub leader_log_end_offset: Offset,
}

/// One follower fetch, decided: what the follower does to its log, what the leader records,
/// and the leader HW the follower learns.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct FollowerFetch<B> {
    /// The operation on the follower's log, if any (an empty records answer, or an out-of-range
    /// answer the follower's log already satisfies, needs none).
    pub log_op: Option<FollowerLogOp<B>>,
    /// What the leader records ([`FollowerState::update_fetch_state`]); `None` for a diverging
    /// epoch or an out-of-range answer, which Kafka's leader does not record.
    pub report: Option<FetchReport>,
    /// The leader HW carried by a records answer (read before the leader recorded this fetch);
    /// the follower applies it with [`follower_high_watermark`] after appending.
    pub leader_high_watermark: Option<Offset>,
}

/// The follower's log as a fetch decision reads it: where it starts, where it ends (its LEO)
/// and its epoch cache. Kafka's fetcher reads each of them from the log itself, not from the
/// fetch it sent.
#[derive(Clone, Copy, Debug)]
pub struct FollowerLog<'a> {
    /// The follower's log start offset.
    pub log_start_offset: Offset,
    /// The follower's LEO.
    pub log_end_offset: Offset,
    /// The follower's leader-epoch cache.
    pub epochs: &'a EpochCache,
}

impl<'a> FollowerLog<'a> {
    /// The follower log `log` as it is now.
    pub fn of(log: &'a impl LogView) -> Self {
        FollowerLog {
            log_start_offset: log.log_start_offset(),
            log_end_offset: log.log_end_offset(),
            epochs: log.epoch_cache(),
        }
    }
}

/// Decides a follower fetch: the follower whose log is `follower` fetched from `fetch_offset`
/// and the leader answered `response` (from [`crate::fetch::serve_fetch`] with
/// `FetchIsolation::Follower`).
///
/// Records are appended; a diverging epoch truncates by the KIP-320 rule
/// ([`divergence_truncation_offset`], on the follower's LEO and epoch cache, as Kafka's
/// `AbstractFetcherThread.getOffsetTruncationState` reads them); an out-of-range answer
/// truncates or restarts the log by [`resolve_out_of_range`] on the follower's LEO (Kafka's
/// `fetchOffsetAndTruncate`). Only a records answer reports, with the fetch offset, to the
/// leader. A follower fetches from its LEO, so the two offsets agree unless the caller's log
/// moved since it sent the fetch.
pub fn follower_fetch<B>(
    response: FetchResponse<B>,
    fetch_offset: Offset,
    follower: FollowerLog<'_>,
) -> FollowerFetch<B> {
    match response {
        FetchResponse::Records(records) => FollowerFetch {
            report: Some(FetchReport {
                fetch_offset,
                follower_log_start_offset: follower.log_start_offset,
                leader_log_end_offset: records.log_end_offset,
            }),
            leader_high_watermark: Some(records.high_watermark),
            log_op: (!records.batches.is_empty()).then_some(FollowerLogOp::Append(records.batches)),
        },
        FetchResponse::Diverging(diverging) => FollowerFetch {
            log_op: Some(FollowerLogOp::TruncateTo(divergence_truncation_offset(
                follower.epochs,
                follower.log_end_offset,
                diverging,
            ))),
            report: None,
            leader_high_watermark: None,
        },
        FetchResponse::OffsetOutOfRange {
            log_start_offset,
            log_end_offset,
        } => FollowerFetch {
            log_op: match resolve_out_of_range(
                follower.log_end_offset,
                log_start_offset,
                log_end_offset,
            ) {
                OutOfRangeResolution::TruncateTo(offset) => Some(FollowerLogOp::TruncateTo(offset)),
                OutOfRangeResolution::TruncateFullyAndStartAt(offset) => {
                    Some(FollowerLogOp::TruncateFullyAndStartAt(offset))
                }
                OutOfRangeResolution::FetchFrom(_) => None,
            },
            report: None,
            leader_high_watermark: None,
        },
    }
}

/// One remote replica as the leader HW rule sees it.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Serialize, Deserialize)]
pub struct HwReplica {
    /// Its LEO as the leader knows it ([`FollowerState::log_end_offset`], `-1` if unknown).
    pub log_end_offset: Offset,
    /// Whether it is in the ISR (Kafka: the maximal ISR, which includes a pending expansion).
    pub in_isr: bool,
    /// Whether, outside the ISR, it is caught up ([`FollowerState::is_caught_up`]) and eligible
    /// to join (Kafka's `isReplicaIsrEligible`: alive, not fenced, not shutting down, and heard
    /// from since the local broker became leader, i.e. its broker epoch is known — in kernel
    /// terms [`FollowerState::known_log_end_offset`] is `Some`): the HW waits for it too, so
    /// that it can join without the HW having passed it.
    pub caught_up_and_eligible: bool,
}

/// Whether the partition is under min ISR (Kafka's `Partition.isUnderMinIsr`): fewer ISR
/// members than `min.insync.replicas`, capped by the number of assigned replicas.
pub fn is_under_min_isr(isr_size: usize, min_insync_replicas: usize, replica_count: usize) -> bool {
    isr_size < min_insync_replicas.min(replica_count)
}

/// The leader's new HW, or `None` if it does not move (Kafka's
/// `Partition.maybeIncrementLeaderHW` and `UnifiedLog.maybeIncrementHighWatermark`).
///
/// Under min ISR nothing moves. Otherwise the candidate starts at the leader's LEO and drops to
/// the known LEO of each remote replica that is in the ISR or caught up and eligible to join it;
/// the HW moves only forward, to the candidate.
pub fn leader_high_watermark(
    current_high_watermark: Offset,
    leader_log_end_offset: Offset,
    remote_replicas: impl IntoIterator<Item = HwReplica>,
    under_min_isr: bool,
) -> Option<Offset> {
    if under_min_isr {
        return None;
    }
    let candidate = remote_replicas
        .into_iter()
        .filter(|r| r.in_isr || r.caught_up_and_eligible)
        .map(|r| r.log_end_offset)
        .fold(leader_log_end_offset, Offset::min);
    (candidate > current_high_watermark).then_some(candidate)
}

/// A follower's HW after it learnt the leader HW `leader_high_watermark` (Kafka's
/// `UnifiedLog.maybeUpdateHighWatermark`): that HW clamped into the follower's
/// `[log start, LEO]`. (Kafka sets it even when it is lower than before.)
pub fn follower_high_watermark(
    leader_high_watermark: Offset,
    follower_log_start_offset: Offset,
    follower_log_end_offset: Offset,
) -> Offset {
    if leader_high_watermark < follower_log_start_offset {
        follower_log_start_offset
    } else {
        leader_high_watermark.min(follower_log_end_offset)
    }
}

/// Whether a follower outside the ISR may join it (Kafka's `Partition.isFollowerInSync`): the
/// LEO the leader holds for it is at least the leader's HW and at least the start offset of the
/// leader's current epoch (`None`: the local broker is not leader, never in sync).
pub fn is_follower_in_sync(
    follower_log_end_offset: Offset,
    leader_high_watermark: Offset,
    leader_epoch_start_offset: Option<Offset>,
) -> bool {
    follower_log_end_offset >= leader_high_watermark
        && leader_epoch_start_offset.is_some_and(|start| follower_log_end_offset >= start)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fetch::FetchedRecords;
    use crate::types::EpochAndOffset;

    fn records(batches: Vec<u8>, log_end_offset: Offset, hw: Offset) -> FetchResponse<u8> {
        FetchResponse::Records(FetchedRecords {
            batches,
            next_offset: 0,
            last_epoch: None,
            log_start_offset: 0,
            high_watermark: hw,
            last_stable_offset: hw,
            log_end_offset,
        })
    }

    /// A follower log starting at `log_start_offset` and ending at `log_end_offset`, no epochs.
    fn follower(log_start_offset: Offset, log_end_offset: Offset) -> FollowerLog<'static> {
        static EMPTY: std::sync::OnceLock<EpochCache> = std::sync::OnceLock::new();
        FollowerLog {
            log_start_offset,
            log_end_offset,
            epochs: EMPTY.get_or_init(EpochCache::new),
        }
    }

    #[test]
    fn records_report_the_fetch_offset_not_the_appended_end() {
        let fetch = follower_fetch(records(vec![1, 2], 9, 4), 5, follower(0, 5));
        assert_eq!(fetch.log_op, Some(FollowerLogOp::Append(vec![1, 2])));
        assert_eq!(
            fetch.report,
            Some(FetchReport {
                fetch_offset: 5,
                follower_log_start_offset: 0,
                leader_log_end_offset: 9
            })
        );
        assert_eq!(fetch.leader_high_watermark, Some(4));
        let empty = follower_fetch(records(vec![], 9, 9), 9, follower(2, 9));
        assert_eq!(empty.log_op, None);
        assert_eq!(empty.report.map(|r| r.fetch_offset), Some(9));
    }

    #[test]
    fn divergence_and_out_of_range_truncate_and_report_nothing() {
        let diverging = FetchResponse::<u8>::Diverging(EpochAndOffset {
            epoch: -1,
            end_offset: 3,
        });
        let fetch = follower_fetch(diverging, 7, follower(0, 7));
        assert_eq!(fetch.log_op, Some(FollowerLogOp::TruncateTo(3)));
        assert_eq!(fetch.report, None);
        let behind = FetchResponse::<u8>::OffsetOutOfRange {
            log_start_offset: 10,
            log_end_offset: 12,
        };
        let fetch = follower_fetch(behind, 4, follower(0, 4));
        assert_eq!(
            fetch.log_op,
            Some(FollowerLogOp::TruncateFullyAndStartAt(10))
        );
        assert_eq!(fetch.report, None);
        let ahead = FetchResponse::<u8>::OffsetOutOfRange {
            log_start_offset: 0,
            log_end_offset: 2,
        };
        let fetch = follower_fetch(ahead, 4, follower(0, 4));
        assert_eq!(fetch.log_op, Some(FollowerLogOp::TruncateTo(2)));
        let neither = FetchResponse::<u8>::OffsetOutOfRange {
            log_start_offset: 0,
            log_end_offset: 6,
        };
        assert_eq!(follower_fetch(neither, 4, follower(0, 4)).log_op, None);
    }

    #[test]
    fn truncation_reads_the_followers_log_end_not_the_fetch_offset() {
        // The source ends at 6, the follower's log at 8; the fetch was sent from 4 (its log grew
        // since): the follower truncates to the source's end, as Kafka's
        // `fetchOffsetAndTruncate` compares the source's end with the local LEO.
        let ahead = FetchResponse::<u8>::OffsetOutOfRange {
            log_start_offset: 0,
            log_end_offset: 6,
        };
        assert_eq!(
            follower_fetch(ahead, 4, follower(0, 8)).log_op,
            Some(FollowerLogOp::TruncateTo(6))
        );
        // A diverging epoch above every local epoch: truncate to the diverging end offset,
        // capped by the LEO (9), not by the fetch offset (5).
        let epochs = EpochCache::from_entries([
            crate::epoch_cache::EpochEntry {
                epoch: 1,
                start_offset: 0,
            },
            crate::epoch_cache::EpochEntry {
                epoch: 3,
                start_offset: 5,
            },
        ])
        .expect("increasing entries");
        let diverging = FetchResponse::<u8>::Diverging(EpochAndOffset {
            epoch: 4,
            end_offset: 8,
        });
        let log = FollowerLog {
            log_start_offset: 0,
            log_end_offset: 9,
            epochs: &epochs,
        };
        assert_eq!(
            follower_fetch(diverging, 5, log).log_op,
            Some(FollowerLogOp::TruncateTo(8))
        );
    }

    #[test]
    fn fetch_state_follows_kafkas_caught_up_rule() {
        let mut s = FollowerState::EMPTY;
        assert_eq!(s.known_log_end_offset(), None);
        // Behind at time 10 (leader LEO 8, previous leader LEO 0): caught up at the previous
        // fetch time 0.
        s.update_fetch_state(3, 0, 10, 8);
        assert_eq!(
            s,
            FollowerState {
                log_start_offset: 0,
                log_end_offset: 3,
                last_fetch_leader_log_end_offset: 8,
                last_fetch_time_ms: 10,
                last_caught_up_time_ms: 0,
            }
        );
        // Reaches the leader's LEO of the previous fetch (8) while the leader is at 12.
        s.update_fetch_state(8, 0, 20, 12);
        assert_eq!(s.last_caught_up_time_ms, 10);
        assert_eq!(s.last_fetch_leader_log_end_offset, 12);
        // Below both: unchanged.
        s.update_fetch_state(9, 1, 30, 15);
        assert_eq!(s.last_caught_up_time_ms, 10);
        // At the leader's LEO.
        s.update_fetch_state(15, 1, 40, 15);
        assert_eq!(s.last_caught_up_time_ms, 40);
        // A lower leader LEO does not lower the remembered one.
        s.update_fetch_state(15, 1, 50, 11);
        assert_eq!(s.last_fetch_leader_log_end_offset, 15);
        assert!(s.is_caught_up(15, 1_000, 0));
        assert!(s.is_caught_up(16, 80, 30));
        assert!(!s.is_caught_up(16, 81, 30));
    }

    #[test]
    fn reset_forgets_offsets_only_for_a_new_leader() {
        let mut s = FollowerState::EMPTY;
        s.update_fetch_state(5, 2, 10, 5);
        let mut same = s;
        same.reset(100, 7, false, true);
        assert_eq!(
            same,
            FollowerState {
                log_start_offset: 2,
                log_end_offset: 5,
                last_fetch_leader_log_end_offset: 7,
                last_fetch_time_ms: 100,
                last_caught_up_time_ms: 100,
            }
        );
        s.reset(100, 7, true, false);
        assert_eq!(
            s,
            FollowerState {
                last_fetch_leader_log_end_offset: -1,
                ..FollowerState::EMPTY
            }
        );
    }

    fn isr(log_end_offset: Offset) -> HwReplica {
        HwReplica {
            log_end_offset,
            in_isr: true,
            caught_up_and_eligible: false,
        }
    }

    #[test]
    fn leader_hw_is_the_smallest_isr_leo_and_only_moves_forward() {
        assert_eq!(
            leader_high_watermark(0, 10, [isr(4), isr(7)], false),
            Some(4)
        );
        assert_eq!(leader_high_watermark(4, 10, [isr(4), isr(7)], false), None);
        assert_eq!(leader_high_watermark(6, 10, [isr(4)], false), None);
        assert_eq!(leader_high_watermark(0, 10, [], false), Some(10));
        // An unknown LEO (-1) holds the HW.
        assert_eq!(leader_high_watermark(0, 10, [isr(-1)], false), None);
        // Out of the ISR: ignored, unless caught up and eligible to join.
        let outside = HwReplica {
            log_end_offset: 2,
            in_isr: false,
            caught_up_and_eligible: false,
        };
        assert_eq!(
            leader_high_watermark(0, 10, [outside, isr(7)], false),
            Some(7)
        );
        let joining = HwReplica {
            caught_up_and_eligible: true,
            ..outside
        };
        assert_eq!(
            leader_high_watermark(0, 10, [joining, isr(7)], false),
            Some(2)
        );
        // Under min ISR nothing moves.
        assert_eq!(leader_high_watermark(0, 10, [isr(7)], true), None);
        assert!(is_under_min_isr(1, 2, 3));
        assert!(!is_under_min_isr(1, 2, 1));
        assert!(!is_under_min_isr(2, 2, 3));
    }

    #[test]
    fn follower_hw_is_clamped_into_its_log() {
        assert_eq!(follower_high_watermark(8, 0, 5), 5);
        assert_eq!(follower_high_watermark(3, 0, 5), 3);
        assert_eq!(follower_high_watermark(3, 4, 5), 4);
    }

    #[test]
    fn isr_expansion_needs_the_hw_and_the_epoch_start() {
        assert!(is_follower_in_sync(5, 5, Some(5)));
        assert!(!is_follower_in_sync(4, 3, Some(5)));
        assert!(!is_follower_in_sync(4, 5, Some(2)));
        assert!(is_follower_in_sync(9, 5, Some(2)));
        assert!(!is_follower_in_sync(9, 5, None));
    }
}
