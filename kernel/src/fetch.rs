//! The mirror fetch, both ends, as pure functions over the log contract.
//!
//! **Source side**: [`serve_fetch`] answers a Fetch carrying the fetcher's last fetched epoch
//! (KIP-320), as Kafka's `Partition.readRecords` + `UnifiedLog.read` do, reading up to the bound
//! of its [`FetchIsolation`] (LSO for `READ_COMMITTED`, HW for `READ_UNCOMMITTED`, LEO for a
//! follower):
//!
//! 1. with a last fetched epoch `e`, the source looks up `end_offset_for(e)` in its epoch cache:
//!    - an undefined answer (epoch or offset `-1`: `e` is newer than every source epoch, or the
//!      source has no epochs) is `OFFSET_OUT_OF_RANGE`;
//!    - a fetch offset below the source's log start offset is `OFFSET_OUT_OF_RANGE`, whether or
//!      not the epochs diverge;
//!    - an answer with an epoch below `e`, or an end offset below the fetch offset, is a
//!      **diverging epoch**: the answer itself, no records;
//! 2. a fetch offset outside `[log start, LEO]` is `OFFSET_OUT_OF_RANGE`;
//! 3. otherwise whole batches from the one holding the fetch offset, up to `max_batches`, each
//!    ending below the isolation bound (a batch straddling the bound is not returned).
//!
//! **Destination side**: [`divergence_truncation_offset`] is the KIP-320 follower rule of
//! Kafka's `AbstractFetcherThread.getOffsetTruncationState`, and
//! [`resolve_out_of_range`] is its `fetchOffsetAndTruncate` for an out-of-range answer.

use serde::{Deserialize, Serialize};

use crate::config::FetchIsolation;
use crate::epoch_cache::EpochCache;
use crate::input::FetchOutcome;
use crate::log::PartitionLog;
use crate::types::{EpochAndOffset, LeaderEpoch, Offset, UNDEFINED_EPOCH, UNDEFINED_OFFSET};

/// Batches returned by a successful fetch, with the source's offsets at the time of the read.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct FetchedRecords<B> {
    /// Whole batches, oldest first, each ending below `last_stable_offset`.
    pub batches: Vec<B>,
    /// The offset after the last batch (the fetch offset if there is none): the next fetch
    /// offset.
    pub next_offset: Offset,
    /// The leader epoch of the last batch, if any: the next last fetched epoch.
    pub last_epoch: Option<LeaderEpoch>,
    /// The source's log start offset.
    pub log_start_offset: Offset,
    /// The source's high watermark.
    pub high_watermark: Offset,
    /// The source's last stable offset (the read bound).
    pub last_stable_offset: Offset,
    /// The source's log end offset.
    pub log_end_offset: Offset,
}

/// The source's answer to a read-committed consumer Fetch.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub enum FetchResponse<B> {
    /// Records (possibly none).
    Records(FetchedRecords<B>),
    /// The fetcher's log diverges: the source's `end_offset_for(last_fetched_epoch)`.
    Diverging(EpochAndOffset),
    /// The fetch offset (or the last fetched epoch) cannot be served.
    OffsetOutOfRange {
        /// The source's log start offset.
        log_start_offset: Offset,
        /// The source's log end offset.
        log_end_offset: Offset,
    },
}

impl<B> FetchResponse<B> {
    /// The answer as the kernel sees it (the batches stay with the executor).
    pub fn outcome(&self) -> FetchOutcome {
        match self {
            FetchResponse::Records(r) => FetchOutcome::Records {
                next_offset: r.next_offset,
                last_epoch: r.last_epoch,
            },
            FetchResponse::Diverging(d) => FetchOutcome::Diverging(*d),
            FetchResponse::OffsetOutOfRange {
                log_start_offset,
                log_end_offset,
            } => FetchOutcome::OffsetOutOfRange {
                log_start_offset: *log_start_offset,
                log_end_offset: *log_end_offset,
            },
        }
    }

    /// The kernel's outcome and the batches to append (empty unless records were returned).
    pub fn into_parts(self) -> (FetchOutcome, Vec<B>) {
        let outcome = self.outcome();
        match self {
            FetchResponse::Records(r) => (outcome, r.batches),
            _ => (outcome, Vec::new()),
        }
    }
}

/// Serves a read-committed consumer Fetch at `fetch_offset` from `log` (see the module
/// documentation for Kafka's rules), returning at most `max_batches` whole batches.
pub fn serve_fetch<L: PartitionLog>(
    log: &L,
    fetch_offset: Offset,
    last_fetched_epoch: Option<LeaderEpoch>,
    isolation: FetchIsolation,
    max_batches: usize,
) -> FetchResponse<L::Batch> {
    let log_start_offset = log.log_start_offset();
    let log_end_offset = log.log_end_offset();
    let out_of_range = FetchResponse::OffsetOutOfRange {
        log_start_offset,
        log_end_offset,
    };
    if let Some(epoch) = last_fetched_epoch {
        let end = log.epoch_cache().end_offset_for(epoch, log_end_offset);
        if end.end_offset == UNDEFINED_OFFSET || end.epoch == UNDEFINED_EPOCH {
            return out_of_range;
        }
        if fetch_offset < log_start_offset {
            return out_of_range;
        }
        if end.epoch < epoch || end.end_offset < fetch_offset {
            return FetchResponse::Diverging(end);
        }
    }
    if fetch_offset < log_start_offset || fetch_offset > log_end_offset {
        return out_of_range;
    }
    let last_stable_offset = log.last_stable_offset();
    let bound = match isolation {
        FetchIsolation::ReadCommitted => last_stable_offset,
        FetchIsolation::ReadUncommitted => log.high_watermark(),
        FetchIsolation::Follower => log_end_offset,
    };
    let batches: Vec<L::Batch> = log
        .read(fetch_offset, bound)
        .into_iter()
        .take_while(|b| L::header(b).last_offset < bound)
        .take(max_batches)
        .collect();
    let last = batches.last().map(L::header);
    FetchResponse::Records(FetchedRecords {
        next_offset: last.map_or(fetch_offset, |h| h.last_offset.saturating_add(1)),
        last_epoch: last.map(|h| h.partition_leader_epoch),
        batches,
        log_start_offset,
        high_watermark: log.high_watermark(),
        last_stable_offset,
        log_end_offset,
    })
}

/// The KIP-320 follower truncation for a diverging-epoch answer (Kafka's
/// `AbstractFetcherThread.getOffsetTruncationState`): the new LEO of the local log whose epoch
/// cache is `cache` and whose LEO is `log_end_offset`. Never above `log_end_offset`.
///
/// - diverging end offset undefined: no truncation (Kafka truncates to the fetch offset, which
///   under truncation-on-fetch is the LEO);
/// - diverging epoch undefined: `min(diverging end offset, LEO)`;
/// - otherwise look up the diverging epoch locally, `(epoch', end') =
///   cache.end_offset_for(diverging epoch, LEO)`:
///   - undefined (the diverging epoch is above every local epoch): `min(diverging end, LEO)`;
///   - `epoch'` differs from the diverging epoch (unknown locally; `epoch'` is the floor):
///     `min(end', LEO)`. Kafka marks this truncation incomplete; the next fetch carries the new
///     last epoch and the source answers again;
///   - `epoch'` is the diverging epoch: `min(diverging end, end', LEO)`.
pub fn divergence_truncation_offset(
    cache: &EpochCache,
    log_end_offset: Offset,
    diverging: EpochAndOffset,
) -> Offset {
    if diverging.end_offset == UNDEFINED_OFFSET {
        return log_end_offset;
    }
    if diverging.epoch == UNDEFINED_EPOCH {
        return diverging.end_offset.min(log_end_offset);
    }
    let local = cache.end_offset_for(diverging.epoch, log_end_offset);
    if local.end_offset == UNDEFINED_OFFSET || local.epoch == UNDEFINED_EPOCH {
        diverging.end_offset.min(log_end_offset)
    } else if local.epoch != diverging.epoch {
        local.end_offset.min(log_end_offset)
    } else {
        diverging
            .end_offset
            .min(local.end_offset)
            .min(log_end_offset)
    }
}

/// What a fetcher does after `OFFSET_OUT_OF_RANGE` (Kafka's
/// `AbstractFetcherThread.fetchOffsetAndTruncate`).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize)]
pub enum OutOfRangeResolution {
    /// The source ends below the local LEO (unclean election at the source): truncate to the
    /// source's LEO and fetch from there.
    TruncateTo(Offset),
    /// The source starts above the local LEO (retention deleted what we miss): empty the log,
    /// start it at the source's log start offset and fetch from there.
    TruncateFullyAndStartAt(Offset),
    /// Neither: keep the log and fetch again from the local LEO.
    FetchFrom(Offset),
}

/// Kafka's rule for an out-of-range fetch, given the local LEO and the source's log start and
/// end offsets.
pub fn resolve_out_of_range(
    local_log_end_offset: Offset,
    source_log_start_offset: Offset,
    source_log_end_offset: Offset,
) -> OutOfRangeResolution {
    if source_log_end_offset < local_log_end_offset {
        OutOfRangeResolution::TruncateTo(source_log_end_offset)
    } else if source_log_start_offset > local_log_end_offset {
        OutOfRangeResolution::TruncateFullyAndStartAt(source_log_start_offset)
    } else {
        OutOfRangeResolution::FetchFrom(local_log_end_offset)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::{BatchHeader, ControlType, LeaderBatch, ProducerBatchInfo};
    use crate::epoch_cache::EpochEntry;
    use crate::log::LogView;
    use crate::mem_log::MemLog;

    fn records(n: u32) -> LeaderBatch {
        LeaderBatch::Records {
            record_count: n,
            producer: None,
            transactional: false,
        }
    }

    /// Epoch 1: [0,3) [3,5); epoch 3: [5,8); epoch 4: [8,10). HW = LEO = 10.
    fn source() -> MemLog {
        let mut log = MemLog::new();
        for (epoch, n) in [(1, 3), (1, 2), (3, 3), (4, 2)] {
            log.append_as_leader(epoch, records(n)).expect("append");
        }
        log.advance_high_watermark(10).expect("hw");
        log
    }

    fn cache(entries: &[(LeaderEpoch, Offset)]) -> EpochCache {
        EpochCache::from_entries(entries.iter().map(|&(epoch, start_offset)| EpochEntry {
            epoch,
            start_offset,
        }))
        .expect("monotonic entries")
    }

    fn records_of(r: FetchResponse<BatchHeader>) -> FetchedRecords<BatchHeader> {
        match r {
            FetchResponse::Records(r) => r,
            other => panic!("expected records, got {other:?}"),
        }
    }

    #[test]
    fn fetch_without_epoch_returns_whole_batches_from_the_offset() {
        let log = source();
        let r = records_of(serve_fetch(
            &log,
            0,
            None,
            FetchIsolation::ReadCommitted,
            10,
        ));
        assert_eq!(r.batches.len(), 4);
        assert_eq!((r.next_offset, r.last_epoch), (10, Some(4)));
        // From inside a batch: the whole batch holding the offset.
        let r = records_of(serve_fetch(&log, 4, None, FetchIsolation::ReadCommitted, 2));
        assert_eq!(
            r.batches.iter().map(|b| b.base_offset).collect::<Vec<_>>(),
            vec![3, 5]
        );
        assert_eq!((r.next_offset, r.last_epoch), (8, Some(3)));
        // At LEO: nothing, next offset unchanged.
        let r = records_of(serve_fetch(
            &log,
            10,
            Some(4),
            FetchIsolation::ReadCommitted,
            5,
        ));
        assert!(r.batches.is_empty());
        assert_eq!((r.next_offset, r.last_epoch), (10, None));
        assert_eq!(
            serve_fetch(&log, 10, Some(4), FetchIsolation::ReadCommitted, 5).outcome(),
            FetchOutcome::Records {
                next_offset: 10,
                last_epoch: None
            }
        );
        // max_batches = 0 returns nothing.
        assert!(
            records_of(serve_fetch(&log, 0, None, FetchIsolation::ReadCommitted, 0))
                .batches
                .is_empty()
        );
    }

    #[test]
    fn fetch_stops_below_the_last_stable_offset() {
        let mut log = source();
        let pid = ProducerBatchInfo {
            producer_id: 7,
            producer_epoch: 0,
            base_sequence: 0,
        };
        log.append_as_leader(
            4,
            LeaderBatch::Records {
                record_count: 2,
                producer: Some(pid),
                transactional: true,
            },
        )
        .expect("txn");
        log.append_as_leader(4, records(1)).expect("plain");
        log.advance_high_watermark(13).expect("hw");
        assert_eq!(log.last_stable_offset(), 10);
        let r = records_of(serve_fetch(
            &log,
            8,
            Some(4),
            FetchIsolation::ReadCommitted,
            10,
        ));
        assert_eq!(r.batches.len(), 1);
        assert_eq!(
            (r.next_offset, r.last_stable_offset, r.high_watermark),
            (10, 10, 13)
        );
        log.append_as_leader(
            4,
            LeaderBatch::Control {
                control: ControlType::Commit,
                producer: Some((7, 0)),
            },
        )
        .expect("commit");
        // HW 13 is below LEO 14: the marker is not yet replicated, so the transaction still
        // holds the LSO at its first offset (Kafka's `unreplicatedTxns`) and nothing is served.
        let r = records_of(serve_fetch(
            &log,
            10,
            Some(4),
            FetchIsolation::ReadCommitted,
            10,
        ));
        assert_eq!(
            (r.batches.len(), r.next_offset, r.last_stable_offset),
            (0, 10, 10)
        );
        log.advance_high_watermark(14).expect("hw");
        let r = records_of(serve_fetch(
            &log,
            10,
            Some(4),
            FetchIsolation::ReadCommitted,
            10,
        ));
        assert_eq!((r.batches.len(), r.next_offset), (3, 14));
    }

    #[test]
    fn straddling_batches_are_not_served_past_the_hw() {
        let mut log = source();
        log.append_as_leader(4, records(4)).expect("append");
        log.advance_high_watermark(12).expect("hw inside the batch");
        let r = records_of(serve_fetch(
            &log,
            10,
            Some(4),
            FetchIsolation::ReadCommitted,
            10,
        ));
        assert!(r.batches.is_empty());
        assert_eq!(r.next_offset, 10);
    }

    #[test]
    fn divergence_follows_kafka() {
        let log = source();
        // Fetcher wrote epoch 2 (unknown at the source) up to 6: source says (1, 5).
        assert_eq!(
            serve_fetch(&log, 6, Some(2), FetchIsolation::ReadCommitted, 10),
            FetchResponse::Diverging(EpochAndOffset {
                epoch: 1,
                end_offset: 5
            })
        );
        // Fetcher has epoch 3 up to 9, but the source's epoch 3 ends at 8.
        assert_eq!(
            serve_fetch(&log, 9, Some(3), FetchIsolation::ReadCommitted, 10).outcome(),
            FetchOutcome::Diverging(EpochAndOffset {
                epoch: 3,
                end_offset: 8
            })
        );
        // Same epoch, fetch offset at the epoch's end: no divergence.
        assert!(matches!(
            serve_fetch(&log, 8, Some(3), FetchIsolation::ReadCommitted, 10),
            FetchResponse::Records(_)
        ));
        // Latest epoch: ends at LEO, so a fetch offset above LEO diverges.
        assert_eq!(
            serve_fetch(&log, 12, Some(4), FetchIsolation::ReadCommitted, 10).outcome(),
            FetchOutcome::Diverging(EpochAndOffset {
                epoch: 4,
                end_offset: 10
            })
        );
        // An epoch newer than every source epoch cannot be answered.
        assert_eq!(
            serve_fetch(&log, 10, Some(5), FetchIsolation::ReadCommitted, 10).outcome(),
            FetchOutcome::OffsetOutOfRange {
                log_start_offset: 0,
                log_end_offset: 10
            }
        );
    }

    #[test]
    fn out_of_range_offsets() {
        let mut log = MemLog::starting_at(5).expect("start");
        log.append_as_leader(2, records(5)).expect("append");
        let oor = FetchOutcome::OffsetOutOfRange {
            log_start_offset: 5,
            log_end_offset: 10,
        };
        assert_eq!(
            serve_fetch(&log, 4, None, FetchIsolation::ReadCommitted, 1).outcome(),
            oor
        );
        assert_eq!(
            serve_fetch(&log, 11, None, FetchIsolation::ReadCommitted, 1).outcome(),
            oor
        );
        // Below the log start even with a matching epoch.
        assert_eq!(
            serve_fetch(&log, 4, Some(2), FetchIsolation::ReadCommitted, 1).outcome(),
            oor
        );
        // An epoch below the first entry: (requested, first start) = (1, 5), not diverging at 5.
        assert!(matches!(
            serve_fetch(&log, 5, Some(1), FetchIsolation::ReadCommitted, 1),
            FetchResponse::Records(_)
        ));
        assert_eq!(
            serve_fetch(&log, 7, Some(1), FetchIsolation::ReadCommitted, 1).outcome(),
            FetchOutcome::Diverging(EpochAndOffset {
                epoch: 1,
                end_offset: 5
            })
        );
        let (outcome, batches) =
            serve_fetch(&log, 11, None, FetchIsolation::ReadCommitted, 1).into_parts();
        assert_eq!((outcome, batches.len()), (oor, 0));
        // An empty source with an epoch asked: out of range.
        let empty = MemLog::new();
        assert!(matches!(
            serve_fetch(&empty, 0, Some(0), FetchIsolation::ReadCommitted, 1),
            FetchResponse::OffsetOutOfRange { .. }
        ));
        let r = records_of(serve_fetch(
            &empty,
            0,
            None,
            FetchIsolation::ReadCommitted,
            1,
        ));
        assert_eq!((r.batches.len(), r.next_offset), (0, 0));
    }

    #[test]
    fn truncation_rule_known_epoch_takes_the_minimum() {
        let local = cache(&[(1, 0), (3, 5), (5, 9)]);
        // Local epoch 3 ends at 9; source says epoch 3 ends at 7.
        let d = EpochAndOffset {
            epoch: 3,
            end_offset: 7,
        };
        assert_eq!(divergence_truncation_offset(&local, 12, d), 7);
        // Source says epoch 3 ends at 11 (later than ours): local end 9.
        let d = EpochAndOffset {
            epoch: 3,
            end_offset: 11,
        };
        assert_eq!(divergence_truncation_offset(&local, 12, d), 9);
        // Latest local epoch: its end is LEO.
        let d = EpochAndOffset {
            epoch: 5,
            end_offset: 20,
        };
        assert_eq!(divergence_truncation_offset(&local, 12, d), 12);
    }

    #[test]
    fn truncation_rule_unknown_epoch_uses_the_local_floor() {
        let local = cache(&[(1, 0), (3, 5), (5, 9)]);
        // Source epoch 4 is unknown locally: floor is 3, ending at 9.
        let d = EpochAndOffset {
            epoch: 4,
            end_offset: 7,
        };
        assert_eq!(divergence_truncation_offset(&local, 12, d), 9);
        // Source epoch 0 is below every local epoch: (0, 0) answers, same epoch, min wins.
        let d = EpochAndOffset {
            epoch: 0,
            end_offset: 3,
        };
        assert_eq!(divergence_truncation_offset(&local, 12, d), 0);
        // Source epoch above every local epoch: local answer undefined, use the source's end.
        let d = EpochAndOffset {
            epoch: 7,
            end_offset: 10,
        };
        assert_eq!(divergence_truncation_offset(&local, 12, d), 10);
        let d = EpochAndOffset {
            epoch: 7,
            end_offset: 30,
        };
        assert_eq!(divergence_truncation_offset(&local, 12, d), 12);
        // Empty local cache.
        assert_eq!(divergence_truncation_offset(&EpochCache::new(), 4, d), 4);
    }

    #[test]
    fn truncation_rule_undefined_answers() {
        let local = cache(&[(1, 0), (3, 5)]);
        assert_eq!(
            divergence_truncation_offset(&local, 8, EpochAndOffset::UNDEFINED),
            8
        );
        let d = EpochAndOffset {
            epoch: UNDEFINED_EPOCH,
            end_offset: 6,
        };
        assert_eq!(divergence_truncation_offset(&local, 8, d), 6);
        let d = EpochAndOffset {
            epoch: 3,
            end_offset: UNDEFINED_OFFSET,
        };
        assert_eq!(divergence_truncation_offset(&local, 8, d), 8);
    }

    #[test]
    fn diverged_logs_converge_after_truncation_and_refetch() {
        // Source: epoch 1 [0,5), epoch 3 [5,8). Destination mirrored epoch 1 [0,5) and then
        // got epoch 2 [5,9) from a source leader that lost its data (unclean election).
        let mut src = MemLog::new();
        src.append_as_leader(1, records(5)).expect("append");
        src.append_as_leader(3, records(3)).expect("append");
        src.advance_high_watermark(8).expect("hw");
        let mut old = MemLog::new();
        old.append_as_leader(1, records(5)).expect("append");
        old.append_as_leader(2, records(4)).expect("append");
        let mut dst = MemLog::new();
        dst.append_as_follower(&old.read(0, 9)).expect("mirror");
        let last_epoch = dst.last_batch().map(|b| b.partition_leader_epoch);
        let resp = serve_fetch(
            &src,
            dst.log_end_offset(),
            last_epoch,
            FetchIsolation::ReadCommitted,
            10,
        );
        let FetchOutcome::Diverging(d) = resp.outcome() else {
            panic!("expected divergence, got {resp:?}");
        };
        assert_eq!(
            d,
            EpochAndOffset {
                epoch: 1,
                end_offset: 5
            }
        );
        let to = divergence_truncation_offset(dst.epoch_cache(), dst.log_end_offset(), d);
        assert_eq!(to, 5);
        dst.truncate_to(to).expect("truncate");
        let last_epoch = dst.last_batch().map(|b| b.partition_leader_epoch);
        let (outcome, batches) = serve_fetch(
            &src,
            dst.log_end_offset(),
            last_epoch,
            FetchIsolation::ReadCommitted,
            10,
        )
        .into_parts();
        assert_eq!(
            outcome,
            FetchOutcome::Records {
                next_offset: 8,
                last_epoch: Some(3)
            }
        );
        dst.append_as_follower(&batches).expect("append");
        assert_eq!(dst.batches(), src.batches());
        assert_eq!(dst.epoch_cache(), src.epoch_cache());
    }

    #[test]
    fn out_of_range_resolution_follows_kafka() {
        assert_eq!(
            resolve_out_of_range(10, 0, 7),
            OutOfRangeResolution::TruncateTo(7)
        );
        assert_eq!(
            resolve_out_of_range(10, 15, 20),
            OutOfRangeResolution::TruncateFullyAndStartAt(15)
        );
        assert_eq!(
            resolve_out_of_range(10, 5, 20),
            OutOfRangeResolution::FetchFrom(10)
        );
    }

    #[test]
    fn each_isolation_level_reads_up_to_its_bound() {
        // Offsets 0..3 committed and replicated, 3..5 an open transaction, HW at 4, LEO 5.
        let mut log = MemLog::new();
        log.append_as_leader(1, records(3)).expect("plain");
        let txn = LeaderBatch::Records {
            record_count: 1,
            producer: Some(ProducerBatchInfo {
                producer_id: 7,
                producer_epoch: 0,
                base_sequence: 0,
            }),
            transactional: true,
        };
        log.append_as_leader(1, txn).expect("txn");
        let txn2 = LeaderBatch::Records {
            record_count: 1,
            producer: Some(ProducerBatchInfo {
                producer_id: 7,
                producer_epoch: 0,
                base_sequence: 1,
            }),
            transactional: true,
        };
        log.append_as_leader(1, txn2).expect("txn");
        log.advance_high_watermark(4).expect("hw");
        let next = |isolation| records_of(serve_fetch(&log, 0, None, isolation, 10)).next_offset;
        assert_eq!(
            next(FetchIsolation::ReadCommitted),
            3,
            "LSO: the open transaction"
        );
        assert_eq!(next(FetchIsolation::ReadUncommitted), 4, "HW");
        assert_eq!(next(FetchIsolation::Follower), 5, "LEO");
    }
}
