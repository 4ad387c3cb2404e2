//! The leader-epoch cache: for each leader epoch, the first offset written in it.
//!
//! Semantics are those of Kafka's `LeaderEpochFileCache`
//! (`storage/src/main/java/org/apache/kafka/storage/internals/epoch/LeaderEpochFileCache.java`),
//! operation for operation; the cache is a persistent [`im::Vector`] kept strictly increasing in
//! both epoch and start offset, so every lookup is a binary search and a clone is O(1).
//!
//! Kafka keeps the entries in a `TreeMap` keyed by epoch and mutates it from either end with
//! "remove while matching" loops. Because every operation preserves strict monotonicity in both
//! keys, each of those loops removes exactly a prefix or a suffix, which is what the binary
//! searches below compute. Reading and writing the on-disk form is [`crate::checkpoint`]'s job.

use serde::{Deserialize, Deserializer, Serialize};

use crate::types::{EpochAndOffset, LeaderEpoch, Offset, UNDEFINED_EPOCH};

/// One cache entry: `epoch` started at `start_offset` (Kafka's `EpochEntry`).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize)]
pub struct EpochEntry {
    /// The leader epoch.
    pub epoch: LeaderEpoch,
    /// The first offset written in that epoch.
    pub start_offset: Offset,
}

/// A negative epoch or offset given to [`EpochCache::assign`] (Kafka throws
/// `IllegalArgumentException`).
#[derive(Clone, Copy, PartialEq, Eq, Debug, thiserror::Error)]
#[error("cannot assign leader epoch {epoch} at start offset {start_offset}: both must be >= 0")]
pub struct NegativeEpochEntry {
    /// The epoch given.
    pub epoch: LeaderEpoch,
    /// The start offset given.
    pub start_offset: Offset,
}

/// Kafka's `LeaderEpochFileCache`, as a value.
///
/// Invariant: entries are non-negative and strictly increasing in both epoch and start offset.
/// Every constructor and operation keeps it, deserialization included (a serialized cache that
/// breaks it is refused, not repaired).
#[derive(Clone, PartialEq, Eq, Hash, Debug, Default, Serialize)]
pub struct EpochCache {
    entries: im::Vector<EpochEntry>,
}

impl<'de> Deserialize<'de> for EpochCache {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        /// The serialized shape, identical to what `#[derive(Serialize)]` writes.
        #[derive(Deserialize)]
        #[serde(rename = "EpochCache")]
        struct Raw {
            entries: im::Vector<EpochEntry>,
        }
        let raw = Raw::deserialize(deserializer)?;
        EpochCache::from_entries(raw.entries).ok_or_else(|| {
            serde::de::Error::custom(
                "epoch cache entries must be non-negative and strictly increasing in epoch and \
                 start offset",
            )
        })
    }
}

impl EpochCache {
    /// An empty cache.
    pub fn new() -> Self {
        Self::default()
    }

    /// A cache holding `entries`, which must be non-negative and strictly increasing in epoch
    /// and start offset (as a checkpoint file written by Kafka is). Returns `None` otherwise.
    ///
    /// Kafka itself loads a checkpoint by replaying its entries through `assign`, which would
    /// silently drop out-of-order entries; this constructor refuses them instead.
    pub fn from_entries(entries: impl IntoIterator<Item = EpochEntry>) -> Option<Self> {
        let entries: im::Vector<EpochEntry> = entries.into_iter().collect();
        let non_negative = entries.iter().all(|e| e.epoch >= 0 && e.start_offset >= 0);
        let increasing = entries
            .iter()
            .zip(entries.iter().skip(1))
            .all(|(a, b)| a.epoch < b.epoch && a.start_offset < b.start_offset);
        (non_negative && increasing).then_some(EpochCache { entries })
    }

    /// The entries, oldest first (Kafka's `epochEntries`).
    pub fn entries(&self) -> impl DoubleEndedIterator<Item = EpochEntry> + ExactSizeIterator + '_ {
        self.entries.iter().copied()
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the cache has no entries (the negation of Kafka's `nonEmpty`).
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The newest entry (Kafka's `latestEntry`).
    pub fn latest(&self) -> Option<EpochEntry> {
        self.entries.last().copied()
    }

    /// The oldest entry (Kafka's `earliestEntry`).
    pub fn earliest(&self) -> Option<EpochEntry> {
        self.entries.front().copied()
    }

    /// The newest epoch (Kafka's `latestEpoch`).
    pub fn latest_epoch(&self) -> Option<LeaderEpoch> {
        self.latest().map(|e| e.epoch)
    }

    /// Records that `epoch` starts at `start_offset` (Kafka's `assign`).
    ///
    /// Ignored when `epoch` is the latest epoch and `start_offset` is not below its start (Kafka's
    /// `isUpdateNeeded`). Otherwise every entry, newest first, whose epoch is `>= epoch` or whose
    /// start is `>= start_offset` is removed (Kafka's `maybeTruncateNonMonotonicEntries`), and the
    /// new entry is appended. So a lower epoch assigned later, or the same epoch at an earlier
    /// offset, replaces the entries it conflicts with. Returns whether the cache changed.
    ///
    /// A negative epoch or offset is refused and leaves the cache unchanged.
    pub fn assign(
        &mut self,
        epoch: LeaderEpoch,
        start_offset: Offset,
    ) -> Result<bool, NegativeEpochEntry> {
        if epoch < 0 || start_offset < 0 {
            return Err(NegativeEpochEntry {
                epoch,
                start_offset,
            });
        }
        if let Some(latest) = self.latest() {
            if latest.epoch == epoch && start_offset >= latest.start_offset {
                return Ok(false);
            }
        }
        // Both keys increase, so "epoch >= new or start >= new" holds exactly on a suffix:
        // keep the prefix where both are below the new entry.
        let keep = partition_point(&self.entries, |e| {
            e.epoch < epoch && e.start_offset < start_offset
        });
        self.entries.truncate(keep);
        self.entries.push_back(EpochEntry {
            epoch,
            start_offset,
        });
        Ok(true)
    }

    /// Kafka's `endOffsetFor(requestedEpoch, logEndOffset)`: the greatest epoch at or below
    /// `requested` and the offset at which the next higher epoch starts.
    ///
    /// - `requested` is [`UNDEFINED_EPOCH`] (-1): [`EpochAndOffset::UNDEFINED`];
    /// - `requested` is the latest epoch: `(requested, log_end_offset)`;
    /// - no entry above `requested` (empty cache included): [`EpochAndOffset::UNDEFINED`];
    /// - no entry at or below `requested`: `(requested, start of the first entry)`;
    /// - otherwise: `(floor entry's epoch, start of the next higher entry)`.
    ///
    /// As in Kafka only -1 is special: any other negative `requested` is below every entry and
    /// takes the fourth case.
    pub fn end_offset_for(&self, requested: LeaderEpoch, log_end_offset: Offset) -> EpochAndOffset {
        if requested == UNDEFINED_EPOCH {
            return EpochAndOffset::UNDEFINED;
        }
        if self.latest_epoch() == Some(requested) {
            return EpochAndOffset {
                epoch: requested,
                end_offset: log_end_offset,
            };
        }
        let higher = partition_point(&self.entries, |e| e.epoch <= requested);
        let Some(higher_entry) = self.entries.get(higher) else {
            return EpochAndOffset::UNDEFINED;
        };
        let epoch = self.floor_at(higher).map_or(requested, |floor| floor.epoch);
        EpochAndOffset {
            epoch,
            end_offset: higher_entry.start_offset,
        }
    }

    /// Kafka's `truncateFromEnd(endOffset)`: removes every entry starting at or after
    /// `end_offset`. A negative offset (Kafka's `UNDEFINED_EPOCH_OFFSET`) is ignored. Returns
    /// whether the cache changed.
    pub fn truncate_from_end(&mut self, end_offset: Offset) -> bool {
        if end_offset < 0 {
            return false;
        }
        let keep = partition_point(&self.entries, |e| e.start_offset < end_offset);
        let changed = keep < self.entries.len();
        self.entries.truncate(keep);
        changed
    }

    /// Kafka's `truncateFromStart(startOffset)`: removes every entry starting at or before
    /// `start_offset`, then re-inserts the last removed epoch starting at `start_offset`, so the
    /// epoch of the new log start stays known. When no entry starts at or before `start_offset`
    /// (a negative offset included) nothing happens.
    ///
    /// Returns whether the cache's contents changed. Kafka schedules a checkpoint flush whenever
    /// it removed anything, even when the re-inserted entry is the one it removed (truncating at
    /// exactly the first entry's start); that case returns `false` here.
    pub fn truncate_from_start(&mut self, start_offset: Offset) -> bool {
        let removed = partition_point(&self.entries, |e| e.start_offset <= start_offset);
        let Some(last_removed) = self.floor_at(removed) else {
            return false;
        };
        let changed = !(removed == 1 && last_removed.start_offset == start_offset);
        // Removing `removed` entries and pushing the new first one equals dropping all but the
        // last removed and overwriting it in place (no re-balancing of the tree's front).
        if removed > 1 {
            self.entries = self.entries.skip(removed - 1);
        }
        self.entries.set(
            0,
            EpochEntry {
                epoch: last_removed.epoch,
                start_offset,
            },
        );
        changed
    }

    /// Kafka's `epochForOffset(offset)`: the epoch of the entry with the greatest start offset
    /// at or below `offset`, or `None` when `offset` is below every entry.
    pub fn epoch_for_offset(&self, offset: Offset) -> Option<LeaderEpoch> {
        let i = partition_point(&self.entries, |e| e.start_offset <= offset);
        self.floor_at(i).map(|e| e.epoch)
    }

    /// Kafka's `epochEntry(epoch)`: the entry of exactly `epoch`, if the cache holds one.
    pub fn entry(&self, epoch: LeaderEpoch) -> Option<EpochEntry> {
        let i = partition_point(&self.entries, |e| e.epoch < epoch);
        self.entries.get(i).filter(|e| e.epoch == epoch).copied()
    }

    /// Kafka's `previousEpoch()`: the epoch of the entry before the latest one.
    pub fn previous_epoch(&self) -> Option<LeaderEpoch> {
        self.latest_epoch()
            .and_then(|latest| self.epoch_before(latest))
    }

    /// Kafka's `previousEpoch(epoch)`: the greatest epoch in the cache strictly below `epoch`.
    pub fn epoch_before(&self, epoch: LeaderEpoch) -> Option<LeaderEpoch> {
        self.previous_entry(epoch).map(|e| e.epoch)
    }

    /// Kafka's `previousEntry(epoch)`: the entry with the greatest epoch strictly below `epoch`.
    pub fn previous_entry(&self, epoch: LeaderEpoch) -> Option<EpochEntry> {
        let i = partition_point(&self.entries, |e| e.epoch < epoch);
        self.floor_at(i)
    }

    /// Kafka's `nextEpoch(epoch)`: the smallest epoch in the cache strictly above `epoch`.
    pub fn epoch_after(&self, epoch: LeaderEpoch) -> Option<LeaderEpoch> {
        let i = partition_point(&self.entries, |e| e.epoch <= epoch);
        self.entries.get(i).map(|e| e.epoch)
    }

    /// Removes every entry (Kafka's `clear` / `clearAndFlush`).
    pub fn clear(&mut self) {
        self.entries.clear();
    }

    /// The entry just before index `i` (the last one of the prefix `..i`), if any.
    fn floor_at(&self, i: usize) -> Option<EpochEntry> {
        i.checked_sub(1).and_then(|j| self.entries.get(j)).copied()
    }
}

/// The index of the first entry for which `pred` is false, `pred` being true on a prefix
/// (`slice::partition_point` for an [`im::Vector`]): a binary search.
fn partition_point(entries: &im::Vector<EpochEntry>, pred: impl Fn(&EpochEntry) -> bool) -> usize {
    entries
        .binary_search_by(|e| {
            if pred(e) {
                std::cmp::Ordering::Less
            } else {
                std::cmp::Ordering::Greater
            }
        })
        .unwrap_or_else(|i| i)
}

#[cfg(test)]
mod tests {
    //! Each test names the behaviour it pins; where Apache Kafka has the same test, the comment
    //! names it (all in `storage/src/test/java/org/apache/kafka/storage/internals/epoch/
    //! LeaderEpochFileCacheTest.java`).

    use super::*;
    use crate::types::UNDEFINED_OFFSET;

    /// A cache built by assigning `pairs` in order, as Kafka's tests do.
    fn assigned(pairs: &[(LeaderEpoch, Offset)]) -> EpochCache {
        let mut cache = EpochCache::new();
        for &(epoch, start) in pairs {
            cache.assign(epoch, start).expect("non-negative test input");
        }
        cache
    }

    fn pairs(cache: &EpochCache) -> Vec<(LeaderEpoch, Offset)> {
        cache.entries().map(|e| (e.epoch, e.start_offset)).collect()
    }

    fn eo(epoch: LeaderEpoch, end_offset: Offset) -> EpochAndOffset {
        EpochAndOffset { epoch, end_offset }
    }

    /// The cache Kafka's truncation tests start from.
    fn six_eight_eleven() -> EpochCache {
        assigned(&[(2, 6), (3, 8), (4, 11)])
    }

    // ---- assign ----

    #[test]
    fn assign_to_empty_cache_adds_the_entry() {
        // Kafka: shouldAddEpochAndMessageOffsetToCache
        let mut cache = EpochCache::new();
        assert_eq!(cache.assign(2, 10), Ok(true));
        assert_eq!(cache.latest_epoch(), Some(2));
        assert_eq!(pairs(&cache), vec![(2, 10)]);
        assert_eq!(cache.end_offset_for(2, 11), eo(2, 11));
    }

    #[test]
    fn assign_same_epoch_at_later_offset_is_ignored() {
        // Kafka: shouldNotOverwriteOffsetForALeaderEpochOnceItHasBeenAssigned,
        // shouldNotOverwriteLogEndOffsetForALeaderEpochOnceItHasBeenAssigned,
        // shouldNotUpdateEpochAndStartOffsetIfItDidNotChange
        let mut cache = assigned(&[(2, 6)]);
        assert_eq!(cache.assign(2, 10), Ok(false));
        assert_eq!(cache.assign(2, 7), Ok(false));
        assert_eq!(pairs(&cache), vec![(2, 6)]);
    }

    #[test]
    fn assign_same_epoch_at_same_offset_is_ignored() {
        let mut cache = assigned(&[(1, 0), (2, 6)]);
        assert_eq!(cache.assign(2, 6), Ok(false));
        assert_eq!(pairs(&cache), vec![(1, 0), (2, 6)]);
    }

    #[test]
    fn assign_same_epoch_at_earlier_offset_moves_its_start_and_drops_conflicts() {
        // Kafka: shouldTruncateIfMatchingEpochButEarlierStartingOffset
        let mut cache = assigned(&[(5, 11), (6, 12), (7, 13)]);
        assert_eq!(cache.assign(7, 12), Ok(true));
        assert_eq!(pairs(&cache), vec![(5, 11), (7, 12)]);
        assert_eq!(cache.end_offset_for(5, 0), eo(5, 12));
        assert_eq!(cache.end_offset_for(6, 0), eo(5, 12));
    }

    #[test]
    fn assign_higher_epoch_at_same_offset_replaces_the_previous_entry() {
        // Kafka: shouldEnforceMonotonicallyIncreasingStartOffsets
        let mut cache = assigned(&[(2, 9)]);
        assert_eq!(cache.assign(3, 9), Ok(true));
        assert_eq!(pairs(&cache), vec![(3, 9)]);
    }

    #[test]
    fn assign_higher_epoch_at_lower_offset_drops_entries_starting_later() {
        // Kafka: shouldEnforceOffsetsIncreaseMonotonically
        let mut cache = assigned(&[(2, 6)]);
        assert_eq!(cache.assign(3, 5), Ok(true));
        assert_eq!(pairs(&cache), vec![(3, 5)]);
    }

    #[test]
    fn assign_lower_epoch_later_drops_every_higher_epoch() {
        // Kafka: shouldEnforceMonotonicallyIncreasingEpochs
        let mut cache = assigned(&[(1, 5), (2, 6)]);
        assert_eq!(cache.assign(1, 7), Ok(true));
        assert_eq!(cache.latest_epoch(), Some(1));
        assert_eq!(pairs(&cache), vec![(1, 7)]);
        assert_eq!(cache.end_offset_for(1, 8), eo(1, 8));
        assert_eq!(cache.end_offset_for(2, 8), EpochAndOffset::UNDEFINED);
    }

    #[test]
    fn assign_lower_epoch_keeps_the_prefix_below_it_in_both_keys() {
        let mut cache = assigned(&[(1, 0), (3, 10), (5, 20), (7, 30)]);
        assert_eq!(cache.assign(4, 40), Ok(true));
        assert_eq!(pairs(&cache), vec![(1, 0), (3, 10), (4, 40)]);
        assert_eq!(cache.assign(2, 5), Ok(true));
        assert_eq!(pairs(&cache), vec![(1, 0), (2, 5)]);
    }

    #[test]
    fn assign_epoch_zero_at_offset_zero_is_allowed() {
        let mut cache = EpochCache::new();
        assert_eq!(cache.assign(0, 0), Ok(true));
        assert_eq!(pairs(&cache), vec![(0, 0)]);
    }

    #[test]
    fn assign_refuses_negative_epoch_or_offset_and_leaves_the_cache_alone() {
        // Kafka: assign throws IllegalArgumentException ("Received invalid partition leader
        // epoch entry"); LeaderEpochFileCacheTest has no dedicated test.
        let mut cache = assigned(&[(1, 5)]);
        let err = NegativeEpochEntry {
            epoch: -1,
            start_offset: 7,
        };
        assert_eq!(cache.assign(-1, 7), Err(err));
        assert_eq!(
            cache.assign(2, -1),
            Err(NegativeEpochEntry {
                epoch: 2,
                start_offset: -1
            })
        );
        assert_eq!(
            cache.assign(i32::MIN, i64::MIN),
            Err(NegativeEpochEntry {
                epoch: i32::MIN,
                start_offset: i64::MIN
            })
        );
        assert_eq!(pairs(&cache), vec![(1, 5)]);
    }

    #[test]
    fn assign_tracks_epochs_as_leaders_change_many_times() {
        // Kafka: shouldIncreaseAndTrackEpochsAsLeadersChangeManyTimes
        let mut cache = assigned(&[(0, 0), (1, 0)]);
        assert_eq!(cache.latest_epoch(), Some(1));
        assert_eq!(cache.end_offset_for(1, 0), eo(1, 0));
        assert_eq!(cache.end_offset_for(0, 0), eo(0, 0));
        assert_eq!(cache.end_offset_for(1, 5), eo(1, 5));
        assert_eq!(cache.end_offset_for(0, 5), eo(0, 0));
        cache.assign(2, 5).expect("valid");
        assert_eq!(cache.end_offset_for(2, 10), eo(2, 10));
        assert_eq!(cache.end_offset_for(1, 10), eo(1, 5));
        assert_eq!(cache.end_offset_for(0, 10), eo(0, 0));
    }

    #[test]
    fn assign_tracks_epochs_as_a_follower_appends_many_batches() {
        // Kafka: shouldIncreaseAndTrackEpochsAsFollowerReceivesManyMessages
        let cache = assigned(&[(0, 0), (0, 1), (0, 2), (1, 3), (1, 4), (1, 5)]);
        assert_eq!(cache.latest_epoch(), Some(1));
        assert_eq!(cache.end_offset_for(1, 6), eo(1, 6));
        let cache = {
            let mut c = cache;
            for o in 6..9 {
                c.assign(2, o).expect("valid");
            }
            c
        };
        assert_eq!(pairs(&cache), vec![(0, 0), (1, 3), (2, 6)]);
        assert_eq!(cache.end_offset_for(2, 9), eo(2, 9));
        assert_eq!(cache.end_offset_for(0, 9), eo(0, 3));
        assert_eq!(cache.end_offset_for(1, 9), eo(1, 6));
    }

    // ---- end_offset_for ----

    #[test]
    fn end_offset_for_undefined_epoch_is_undefined() {
        // Kafka: shouldReturnUndefinedOffsetIfUndefinedEpochRequested,
        // shouldReturnUnsupportedIfNoEpochRecordedAndUndefinedEpochRequested
        let cache = assigned(&[(2, 11), (3, 12)]);
        assert_eq!(
            cache.end_offset_for(UNDEFINED_EPOCH, 0),
            EpochAndOffset::UNDEFINED
        );
        assert_eq!(
            EpochCache::new().end_offset_for(UNDEFINED_EPOCH, 73),
            EpochAndOffset::UNDEFINED
        );
    }

    #[test]
    fn end_offset_for_on_empty_cache_is_undefined() {
        // Kafka: shouldReturnUnsupportedIfNoEpochRecorded, shouldFetchEndOffsetOfEmptyCache
        assert_eq!(
            EpochCache::new().end_offset_for(0, 0),
            EpochAndOffset::UNDEFINED
        );
        assert_eq!(
            EpochCache::new().end_offset_for(7, 0),
            EpochAndOffset::UNDEFINED
        );
    }

    #[test]
    fn end_offset_for_latest_epoch_is_the_log_end_offset() {
        // Kafka: shouldReturnLogEndOffsetIfLatestEpochRequested, shouldSupportEpochsThatDoNotStartFromZero
        let cache = assigned(&[(2, 11), (2, 12)]);
        assert_eq!(cache.end_offset_for(2, 14), eo(2, 14));
        let cache = assigned(&[(2, 6)]);
        assert_eq!(cache.end_offset_for(2, 7), eo(2, 7));
        assert_eq!(pairs(&cache), vec![(2, 6)]);
    }

    #[test]
    fn end_offset_for_epoch_below_the_earliest_is_the_first_start() {
        // Kafka: shouldReturnFirstEpochIfRequestedEpochLessThanFirstEpoch
        let cache = assigned(&[(5, 11), (6, 12), (7, 13)]);
        assert_eq!(cache.end_offset_for(4, 0), eo(4, 11));
        assert_eq!(cache.end_offset_for(0, 0), eo(0, 11));
    }

    #[test]
    fn end_offset_for_negative_epoch_other_than_undefined_is_below_the_earliest() {
        // Kafka compares with UNDEFINED_EPOCH only; -2 falls through to the floor/higher
        // lookup like any epoch below the first entry.
        let cache = assigned(&[(5, 11), (6, 12)]);
        assert_eq!(cache.end_offset_for(-2, 0), eo(-2, 11));
        assert_eq!(cache.end_offset_for(i32::MIN, 0), eo(i32::MIN, 11));
        assert_eq!(
            EpochCache::new().end_offset_for(-2, 0),
            EpochAndOffset::UNDEFINED
        );
    }

    #[test]
    fn end_offset_for_epoch_above_the_latest_is_undefined() {
        // Kafka: shouldReturnInvalidOffsetIfEpochIsRequestedWhichIsNotCurrentlyTracked
        let cache = assigned(&[(2, 100)]);
        assert_eq!(cache.end_offset_for(3, 100), EpochAndOffset::UNDEFINED);
        assert_eq!(
            cache.end_offset_for(i32::MAX, 100),
            EpochAndOffset::UNDEFINED
        );
    }

    #[test]
    fn end_offset_for_epoch_in_a_gap_answers_the_floor_epoch() {
        // Kafka: shouldReturnNextAvailableEpochIfThereIsNoExactEpochForTheOneRequested
        let cache = assigned(&[(0, 10), (2, 13), (4, 17)]);
        assert_eq!(cache.end_offset_for(1, 0), eo(0, 13));
        assert_eq!(cache.end_offset_for(2, 0), eo(2, 17));
        assert_eq!(cache.end_offset_for(3, 0), eo(2, 17));
    }

    #[test]
    fn end_offset_for_an_earlier_epoch_is_the_start_of_the_next_one() {
        // Kafka: shouldGetFirstOffsetOfSubsequentEpochWhenOffsetRequestedForPreviousEpoch
        let cache = assigned(&[(1, 11), (1, 12), (2, 13), (2, 14), (3, 15), (3, 16)]);
        assert_eq!(cache.end_offset_for(2, 17), eo(2, 15));
        assert_eq!(cache.end_offset_for(1, 17), eo(1, 13));
    }

    // ---- truncate_from_end ----

    #[test]
    fn truncate_from_end_at_an_entry_start_drops_that_entry_and_later() {
        // Kafka: shouldDropEntriesOnEpochBoundaryWhenRemovingLatestEntries
        let mut cache = six_eight_eleven();
        assert!(cache.truncate_from_end(8));
        assert_eq!(pairs(&cache), vec![(2, 6)]);
    }

    #[test]
    fn truncate_from_end_between_entries_keeps_the_entry_it_falls_in() {
        // Kafka: shouldDropEntriesBetweenEpochBoundaryWhenRemovingNewest
        let mut cache = six_eight_eleven();
        assert!(cache.truncate_from_end(9));
        assert_eq!(cache.latest_epoch(), Some(3));
        assert_eq!(pairs(&cache), vec![(2, 6), (3, 8)]);
    }

    #[test]
    fn truncate_from_end_beyond_every_entry_changes_nothing() {
        let mut cache = six_eight_eleven();
        assert!(!cache.truncate_from_end(12));
        assert_eq!(pairs(&cache), vec![(2, 6), (3, 8), (4, 11)]);
    }

    #[test]
    fn truncate_from_end_at_or_below_the_first_start_empties_the_cache() {
        let mut cache = six_eight_eleven();
        assert!(cache.truncate_from_end(6));
        assert!(cache.is_empty());
        let mut cache = six_eight_eleven();
        assert!(cache.truncate_from_end(0));
        assert!(cache.is_empty());
    }

    #[test]
    fn truncate_from_end_ignores_a_negative_offset() {
        // Kafka: shouldNotResetEpochHistoryTailIfUndefinedPassed
        let mut cache = six_eight_eleven();
        assert!(!cache.truncate_from_end(UNDEFINED_OFFSET));
        assert!(!cache.truncate_from_end(i64::MIN));
        assert_eq!(cache.len(), 3);
    }

    #[test]
    fn truncate_from_end_on_empty_cache_is_a_no_op() {
        // Kafka: shouldClearLatestOnEmptyCache
        let mut cache = EpochCache::new();
        assert!(!cache.truncate_from_end(7));
        assert!(cache.is_empty());
    }

    // ---- truncate_from_start ----

    #[test]
    fn truncate_from_start_at_an_entry_start_keeps_that_entry() {
        // Kafka: shouldPreserveResetOffsetOnClearEarliestIfOneExists
        let mut cache = six_eight_eleven();
        assert!(cache.truncate_from_start(8));
        assert_eq!(pairs(&cache), vec![(3, 8), (4, 11)]);
    }

    #[test]
    fn truncate_from_start_below_the_first_start_changes_nothing() {
        // Kafka: shouldNotClearAnythingIfOffsetTooEarly
        let mut cache = six_eight_eleven();
        assert!(!cache.truncate_from_start(1));
        assert_eq!(pairs(&cache), vec![(2, 6), (3, 8), (4, 11)]);
    }

    #[test]
    fn truncate_from_start_at_the_first_start_changes_nothing() {
        // Kafka: shouldNotClearAnythingIfOffsetIsFirstOffset
        let mut cache = six_eight_eleven();
        assert!(!cache.truncate_from_start(6));
        assert_eq!(pairs(&cache), vec![(2, 6), (3, 8), (4, 11)]);
    }

    #[test]
    fn truncate_from_start_at_the_latest_start_keeps_only_the_latest() {
        // Kafka: shouldRetainLatestEpochOnClearAllEarliest
        let mut cache = six_eight_eleven();
        assert!(cache.truncate_from_start(11));
        assert_eq!(pairs(&cache), vec![(4, 11)]);
    }

    #[test]
    fn truncate_from_start_between_entries_moves_the_covering_epoch_to_the_offset() {
        // Kafka: shouldUpdateOffsetBetweenEpochBoundariesOnClearEarliest
        let mut cache = six_eight_eleven();
        assert!(cache.truncate_from_start(9));
        assert_eq!(pairs(&cache), vec![(3, 9), (4, 11)]);
    }

    #[test]
    fn truncate_from_start_between_the_first_two_entries_moves_the_first() {
        // Kafka: shouldUpdateOffsetBetweenFirstTwoEpochBoundariesOnClearEarliest
        let mut cache = assigned(&[(0, 0), (1, 7), (2, 10)]);
        assert!(cache.truncate_from_start(5));
        assert_eq!(pairs(&cache), vec![(0, 5), (1, 7), (2, 10)]);
    }

    #[test]
    fn truncate_from_start_beyond_every_entry_keeps_the_latest_epoch_at_the_offset() {
        // Kafka: shouldRetainLatestEpochOnClearAllEarliestAndUpdateItsOffset
        let mut cache = six_eight_eleven();
        assert!(cache.truncate_from_start(15));
        assert_eq!(pairs(&cache), vec![(4, 15)]);
    }

    #[test]
    fn truncate_from_start_ignores_a_negative_offset() {
        // Kafka: shouldNotResetEpochHistoryHeadIfUndefinedPassed
        let mut cache = six_eight_eleven();
        assert!(!cache.truncate_from_start(UNDEFINED_OFFSET));
        assert!(!cache.truncate_from_start(i64::MIN));
        assert_eq!(cache.len(), 3);
    }

    #[test]
    fn truncate_from_start_on_empty_cache_is_a_no_op() {
        // Kafka: shouldClearEarliestOnEmptyCache
        let mut cache = EpochCache::new();
        assert!(!cache.truncate_from_start(7));
        assert!(cache.is_empty());
    }

    #[test]
    fn truncating_from_both_ends_leaves_the_middle_epoch() {
        // Kafka: shouldWriteCheckpointOnTruncation
        let mut cache = six_eight_eleven();
        assert!(cache.truncate_from_end(11));
        assert!(cache.truncate_from_start(8));
        assert_eq!(pairs(&cache), vec![(3, 8)]);
    }

    // ---- lookups ----

    #[test]
    fn epoch_for_offset_is_the_epoch_covering_the_offset() {
        // Kafka: shouldFetchEpochForGivenOffset
        let cache = assigned(&[(0, 10), (1, 20), (5, 30)]);
        assert_eq!(cache.epoch_for_offset(25), Some(1));
        assert_eq!(cache.epoch_for_offset(20), Some(1));
        assert_eq!(cache.epoch_for_offset(30), Some(5));
        assert_eq!(cache.epoch_for_offset(50), Some(5));
        assert_eq!(cache.epoch_for_offset(10), Some(0));
        assert_eq!(cache.epoch_for_offset(5), None);
        assert_eq!(cache.epoch_for_offset(-1), None);
        assert_eq!(EpochCache::new().epoch_for_offset(0), None);
    }

    #[test]
    fn previous_epoch_is_the_epoch_before_the_latest() {
        // Kafka: testPreviousEpoch
        let mut cache = EpochCache::new();
        assert_eq!(cache.previous_epoch(), None);
        cache.assign(2, 10).expect("valid");
        assert_eq!(cache.previous_epoch(), None);
        cache.assign(4, 15).expect("valid");
        assert_eq!(cache.previous_epoch(), Some(2));
        cache.assign(10, 20).expect("valid");
        assert_eq!(cache.previous_epoch(), Some(4));
        cache.truncate_from_end(18);
        assert_eq!(cache.previous_epoch(), Some(2));
    }

    #[test]
    fn epoch_before_is_the_greatest_cached_epoch_strictly_below() {
        // Kafka: testFindPreviousEpoch
        let mut cache = EpochCache::new();
        assert_eq!(cache.epoch_before(2), None);
        cache.assign(2, 10).expect("valid");
        assert_eq!(cache.epoch_before(2), None);
        cache.assign(4, 15).expect("valid");
        assert_eq!(cache.epoch_before(4), Some(2));
        cache.assign(10, 20).expect("valid");
        assert_eq!(cache.epoch_before(10), Some(4));
        assert_eq!(cache.epoch_before(7), Some(4));
        assert_eq!(cache.epoch_before(i32::MAX), Some(10));
        cache.truncate_from_end(18);
        assert_eq!(cache.epoch_before(4), Some(2));
    }

    #[test]
    fn previous_entry_is_the_entry_strictly_below_an_epoch() {
        // Kafka: testFindPreviousEntry
        let mut cache = EpochCache::new();
        assert_eq!(cache.previous_entry(2), None);
        cache.assign(2, 10).expect("valid");
        assert_eq!(cache.previous_entry(2), None);
        cache.assign(4, 15).expect("valid");
        let two = EpochEntry {
            epoch: 2,
            start_offset: 10,
        };
        assert_eq!(cache.previous_entry(4), Some(two));
        cache.assign(10, 20).expect("valid");
        assert_eq!(
            cache.previous_entry(10),
            Some(EpochEntry {
                epoch: 4,
                start_offset: 15
            })
        );
        cache.truncate_from_end(18);
        assert_eq!(cache.previous_entry(4), Some(two));
    }

    #[test]
    fn epoch_after_is_the_smallest_cached_epoch_strictly_above() {
        // Kafka: testFindNextEpoch
        let cache = assigned(&[(0, 0), (1, 100), (2, 200)]);
        assert_eq!(cache.epoch_after(-1), Some(0));
        assert_eq!(cache.epoch_after(0), Some(1));
        assert_eq!(cache.epoch_after(1), Some(2));
        assert_eq!(cache.epoch_after(2), None);
        assert_eq!(cache.epoch_after(100), None);
    }

    #[test]
    fn entry_finds_exactly_the_requested_epoch() {
        // Kafka: testGetEpochEntry
        let cache = assigned(&[(2, 100), (3, 500), (5, 1000)]);
        for (epoch, start_offset) in [(2, 100), (3, 500), (5, 1000)] {
            assert_eq!(
                cache.entry(epoch),
                Some(EpochEntry {
                    epoch,
                    start_offset
                })
            );
        }
        assert_eq!(cache.entry(4), None);
        assert_eq!(cache.entry(1), None);
        assert_eq!(cache.entry(6), None);
        assert_eq!(cache.entry(-1), None);
    }

    #[test]
    fn latest_and_earliest_of_empty_cache_are_none() {
        // Kafka: shouldFetchLatestEpochOfEmptyCache
        let cache = EpochCache::new();
        assert_eq!(cache.latest_epoch(), None);
        assert_eq!(cache.latest(), None);
        assert_eq!(cache.earliest(), None);
        assert!(cache.is_empty());
    }

    #[test]
    fn latest_and_earliest_are_the_last_and_first_entries() {
        let cache = six_eight_eleven();
        assert_eq!(
            cache.latest(),
            Some(EpochEntry {
                epoch: 4,
                start_offset: 11
            })
        );
        assert_eq!(
            cache.earliest(),
            Some(EpochEntry {
                epoch: 2,
                start_offset: 6
            })
        );
        assert_eq!(cache.len(), 3);
    }

    #[test]
    fn clear_removes_every_entry() {
        // Kafka: shouldClearAllEntries
        let mut cache = six_eight_eleven();
        cache.clear();
        assert!(cache.is_empty());
    }

    // ---- from_entries ----

    #[test]
    fn from_entries_accepts_strictly_increasing_entries() {
        let entries = [(0, 0), (3, 7), (9, 8)].map(|(epoch, start_offset)| EpochEntry {
            epoch,
            start_offset,
        });
        let cache = EpochCache::from_entries(entries).expect("monotonic");
        assert_eq!(pairs(&cache), vec![(0, 0), (3, 7), (9, 8)]);
        assert_eq!(EpochCache::from_entries([]), Some(EpochCache::new()));
    }

    #[test]
    fn from_entries_refuses_non_increasing_or_negative_entries() {
        let build = |ps: &[(LeaderEpoch, Offset)]| {
            EpochCache::from_entries(ps.iter().map(|&(epoch, start_offset)| EpochEntry {
                epoch,
                start_offset,
            }))
        };
        assert_eq!(build(&[(1, 5), (1, 6)]), None, "equal epochs");
        assert_eq!(build(&[(1, 5), (2, 5)]), None, "equal offsets");
        assert_eq!(build(&[(2, 5), (1, 6)]), None, "decreasing epoch");
        assert_eq!(build(&[(1, 6), (2, 5)]), None, "decreasing offset");
        assert_eq!(build(&[(-1, 5)]), None, "negative epoch");
        assert_eq!(build(&[(1, -5)]), None, "negative offset");
    }
}
