//! The leader-epoch cache: for each leader epoch, the first offset written in it.
//!
//! Semantics are those of Kafka's `LeaderEpochFileCache` (storage module), operation for
//! operation; the cache is a persistent [`im::Vector`] kept strictly increasing in both epoch and
//! start offset, so every lookup is a binary search and a clone is O(1).

use serde::{Deserialize, Serialize};

use crate::types::{EpochAndOffset, LeaderEpoch, Offset};

/// One cache entry: `epoch` started at `start_offset`.
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
#[derive(Clone, PartialEq, Eq, Hash, Debug, Default, Serialize, Deserialize)]
pub struct EpochCache {
    entries: im::Vector<EpochEntry>,
}

impl EpochCache {
    /// An empty cache.
    pub fn new() -> Self {
        Self::default()
    }

    /// A cache holding `entries`, which must be strictly increasing in epoch and start offset
    /// (as a checkpoint file written by Kafka is). Returns `None` otherwise.
    pub fn from_entries(entries: impl IntoIterator<Item = EpochEntry>) -> Option<Self> {
        let entries: im::Vector<EpochEntry> = entries.into_iter().collect();
        let monotonic = entries
            .iter()
            .zip(entries.iter().skip(1))
            .all(|(a, b)| a.epoch < b.epoch && a.start_offset < b.start_offset && a.epoch >= 0)
            && entries.iter().all(|e| e.epoch >= 0 && e.start_offset >= 0);
        monotonic.then_some(EpochCache { entries })
    }

    /// The entries, oldest first.
    pub fn entries(&self) -> impl DoubleEndedIterator<Item = EpochEntry> + ExactSizeIterator + '_ {
        self.entries.iter().copied()
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the cache has no entries.
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
    /// Ignored when `epoch` is the latest epoch and `start_offset` is not below its start.
    /// Otherwise every entry, newest first, whose epoch is `>= epoch` or whose start is
    /// `>= start_offset` is removed, and the new entry is appended. Returns whether the cache
    /// changed.
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
        // Entries are monotonic in both keys, so the entries to remove are a suffix.
        let keep = self
            .entries
            .iter()
            .rposition(|e| e.epoch < epoch && e.start_offset < start_offset)
            .map_or(0, |i| i + 1);
        self.entries.truncate(keep);
        self.entries.push_back(EpochEntry {
            epoch,
            start_offset,
        });
        Ok(true)
    }

    /// Kafka's `endOffsetFor(requestedEpoch, logEndOffset)`: the epoch at or below `requested`
    /// and the offset at which the next higher epoch starts.
    ///
    /// - `requested` undefined (negative): [`EpochAndOffset::UNDEFINED`];
    /// - `requested` is the latest epoch: `(requested, log_end_offset)`;
    /// - no entry above `requested`: [`EpochAndOffset::UNDEFINED`];
    /// - no entry at or below `requested`: `(requested, start of the first entry)`;
    /// - otherwise: `(floor entry's epoch, start of the next higher entry)`.
    pub fn end_offset_for(&self, requested: LeaderEpoch, log_end_offset: Offset) -> EpochAndOffset {
        if requested < 0 {
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
        let epoch = if higher == 0 {
            requested
        } else {
            self.entries[higher - 1].epoch
        };
        EpochAndOffset {
            epoch,
            end_offset: higher_entry.start_offset,
        }
    }

    /// Kafka's `truncateFromEnd(endOffset)`: removes every entry starting at or after
    /// `end_offset`. A negative offset is ignored. Returns whether the cache changed.
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
    /// epoch of the new log start stays known. A negative offset is ignored. Returns whether the
    /// cache changed.
    pub fn truncate_from_start(&mut self, start_offset: Offset) -> bool {
        if start_offset < 0 {
            return false;
        }
        let removed = &self.entries;
        let removed = partition_point(removed, |e| e.start_offset <= start_offset);
        if removed == 0 {
            return false;
        }
        let last_removed = self.entries[removed - 1];
        let rest = self.entries.split_off(removed);
        let changed = !(removed == 1 && last_removed.start_offset == start_offset);
        self.entries = rest;
        self.entries.push_front(EpochEntry {
            epoch: last_removed.epoch,
            start_offset,
        });
        changed
    }

    /// Kafka's `epochForOffset(offset)`: the epoch of the entry with the greatest start offset
    /// at or below `offset`, or `None` when `offset` is below every entry.
    pub fn epoch_for_offset(&self, offset: Offset) -> Option<LeaderEpoch> {
        let i = partition_point(&self.entries, |e| e.start_offset <= offset);
        (i > 0).then(|| self.entries[i - 1].epoch)
    }

    /// Kafka's `previousEpoch()`: the epoch before the latest one.
    pub fn previous_epoch(&self) -> Option<LeaderEpoch> {
        let n = self.entries.len();
        (n >= 2).then(|| self.entries[n - 2].epoch)
    }

    /// Kafka's `previousEpoch(epoch)`: the greatest epoch in the cache strictly below `epoch`.
    pub fn epoch_before(&self, epoch: LeaderEpoch) -> Option<LeaderEpoch> {
        let i = partition_point(&self.entries, |e| e.epoch < epoch);
        (i > 0).then(|| self.entries[i - 1].epoch)
    }

    /// Kafka's `nextEpoch(epoch)`: the smallest epoch in the cache strictly above `epoch`.
    pub fn epoch_after(&self, epoch: LeaderEpoch) -> Option<LeaderEpoch> {
        let i = partition_point(&self.entries, |e| e.epoch <= epoch);
        self.entries.get(i).map(|e| e.epoch)
    }

    /// Removes every entry (Kafka's `clearAndFlush`).
    pub fn clear(&mut self) {
        self.entries.clear();
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
