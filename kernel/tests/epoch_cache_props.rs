//! Property tests of the epoch cache and its checkpoint text.
//!
//! The oracle is [`Reference`]: Kafka's `LeaderEpochFileCache` written the obvious way, on a
//! `BTreeMap` from epoch to start offset with linear "remove while matching" loops (Kafka keeps a
//! `TreeMap` and does the same). The kernel's cache uses binary searches on a persistent vector
//! instead; random operation sequences must leave both in the same state and make both answer
//! every query alike.

use std::collections::BTreeMap;

use kmirror_kernel::checkpoint::{self, CheckpointError};
use kmirror_kernel::epoch_cache::{EpochCache, EpochEntry, NegativeEpochEntry};
use kmirror_kernel::types::{EpochAndOffset, LeaderEpoch, Offset};
use proptest::prelude::*;

/// The specification: a map from epoch to start offset, mutated by plain loops.
#[derive(Clone, Debug, Default)]
struct Reference {
    epochs: BTreeMap<LeaderEpoch, Offset>,
}

impl Reference {
    fn latest(&self) -> Option<(LeaderEpoch, Offset)> {
        self.epochs.iter().next_back().map(|(&e, &o)| (e, o))
    }

    fn assign(&mut self, epoch: LeaderEpoch, start: Offset) -> Result<bool, NegativeEpochEntry> {
        if epoch < 0 || start < 0 {
            return Err(NegativeEpochEntry {
                epoch,
                start_offset: start,
            });
        }
        if let Some((latest_epoch, latest_start)) = self.latest() {
            if latest_epoch == epoch && start >= latest_start {
                return Ok(false);
            }
        }
        // Newest first, remove while the entry conflicts with the new one.
        while let Some((e, o)) = self.latest() {
            if e >= epoch || o >= start {
                self.epochs.remove(&e);
            } else {
                break;
            }
        }
        self.epochs.insert(epoch, start);
        Ok(true)
    }

    fn truncate_from_end(&mut self, end: Offset) {
        if end < 0 {
            return;
        }
        while let Some((e, o)) = self.latest() {
            if o >= end {
                self.epochs.remove(&e);
            } else {
                break;
            }
        }
    }

    fn truncate_from_start(&mut self, start: Offset) {
        let mut last_removed = None;
        while let Some((&e, &o)) = self.epochs.iter().next() {
            if o <= start {
                self.epochs.remove(&e);
                last_removed = Some(e);
            } else {
                break;
            }
        }
        if let Some(e) = last_removed {
            self.epochs.insert(e, start);
        }
    }

    /// `endOffsetFor`, straight from its documentation.
    fn end_offset_for(&self, requested: LeaderEpoch, leo: Offset) -> EpochAndOffset {
        if requested == -1 {
            return EpochAndOffset::UNDEFINED;
        }
        if self.latest().map(|(e, _)| e) == Some(requested) {
            return EpochAndOffset {
                epoch: requested,
                end_offset: leo,
            };
        }
        let higher = self.epochs.iter().find(|(&e, _)| e > requested);
        let floor = self.epochs.iter().rev().find(|(&e, _)| e <= requested);
        match (floor, higher) {
            (_, None) => EpochAndOffset::UNDEFINED,
            (None, Some((_, &start))) => EpochAndOffset {
                epoch: requested,
                end_offset: start,
            },
            (Some((&floor, _)), Some((_, &start))) => EpochAndOffset {
                epoch: floor,
                end_offset: start,
            },
        }
    }

    fn epoch_for_offset(&self, offset: Offset) -> Option<LeaderEpoch> {
        self.epochs
            .iter()
            .rev()
            .find(|(_, &o)| o <= offset)
            .map(|(&e, _)| e)
    }

    fn pairs(&self) -> Vec<(LeaderEpoch, Offset)> {
        self.epochs.iter().map(|(&e, &o)| (e, o)).collect()
    }
}

#[derive(Clone, Debug)]
enum Op {
    Assign(LeaderEpoch, Offset),
    TruncateFromEnd(Offset),
    TruncateFromStart(Offset),
}

/// Small ranges so that epochs and offsets collide often; a few negative arguments.
fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (-1..12i32, -1..60i64).prop_map(|(e, o)| Op::Assign(e, o)),
        1 => (-2..64i64).prop_map(Op::TruncateFromEnd),
        1 => (-2..64i64).prop_map(Op::TruncateFromStart),
    ]
}

fn ops() -> impl Strategy<Value = Vec<Op>> {
    prop::collection::vec(op(), 0..40)
}

fn pairs(cache: &EpochCache) -> Vec<(LeaderEpoch, Offset)> {
    cache.entries().map(|e| (e.epoch, e.start_offset)).collect()
}

fn strictly_increasing(cache: &EpochCache) -> bool {
    let entries: Vec<EpochEntry> = cache.entries().collect();
    entries.iter().all(|e| e.epoch >= 0 && e.start_offset >= 0)
        && entries
            .windows(2)
            .all(|w| w[0].epoch < w[1].epoch && w[0].start_offset < w[1].start_offset)
}

/// Runs `ops` on a fresh cache and a fresh reference, checking after every step.
fn run(ops: &[Op]) -> Result<(EpochCache, Reference), TestCaseError> {
    let mut cache = EpochCache::new();
    let mut reference = Reference::default();
    for op in ops {
        let before = cache.clone();
        match *op {
            Op::Assign(e, o) => {
                let got = cache.assign(e, o);
                prop_assert_eq!(got, reference.assign(e, o), "assign({}, {})", e, o);
                prop_assert_eq!(got.unwrap_or(false), cache != before);
            }
            Op::TruncateFromEnd(o) => {
                let changed = cache.truncate_from_end(o);
                reference.truncate_from_end(o);
                prop_assert_eq!(changed, cache != before);
            }
            Op::TruncateFromStart(o) => {
                let changed = cache.truncate_from_start(o);
                reference.truncate_from_start(o);
                prop_assert_eq!(changed, cache != before);
            }
        }
        prop_assert!(strictly_increasing(&cache), "after {:?}: {:?}", op, cache);
        prop_assert_eq!(pairs(&cache), reference.pairs(), "after {:?}", op);
    }
    Ok((cache, reference))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn operations_keep_the_cache_strictly_increasing_and_match_the_reference(ops in ops()) {
        run(&ops)?;
    }

    #[test]
    fn end_offset_for_agrees_with_the_reference(
        ops in ops(),
        requested in -3..16i32,
        leo_past_latest in 0..20i64,
    ) {
        let (cache, reference) = run(&ops)?;
        let leo = cache.latest().map_or(0, |e| e.start_offset) + leo_past_latest;
        prop_assert_eq!(
            cache.end_offset_for(requested, leo),
            reference.end_offset_for(requested, leo)
        );
    }

    #[test]
    fn lookups_agree_with_the_reference(ops in ops(), epoch in -3..16i32, offset in -3..64i64) {
        let (cache, reference) = run(&ops)?;
        prop_assert_eq!(cache.epoch_for_offset(offset), reference.epoch_for_offset(offset));
        let below = reference.epochs.range(..epoch).next_back().map(|(&e, &o)| (e, o));
        let above = reference.epochs.range(epoch + 1..).next().map(|(&e, _)| e);
        prop_assert_eq!(cache.epoch_before(epoch), below.map(|(e, _)| e));
        prop_assert_eq!(cache.previous_entry(epoch).map(|e| (e.epoch, e.start_offset)), below);
        prop_assert_eq!(cache.epoch_after(epoch), above);
        prop_assert_eq!(
            cache.entry(epoch).map(|e| e.start_offset),
            reference.epochs.get(&epoch).copied()
        );
        let latest = reference.latest();
        prop_assert_eq!(cache.latest().map(|e| (e.epoch, e.start_offset)), latest);
        prop_assert_eq!(
            cache.previous_epoch(),
            latest.and_then(|(l, _)| reference.epochs.range(..l).next_back().map(|(&e, _)| e))
        );
    }

    #[test]
    fn checkpoint_round_trips(ops in ops()) {
        let (cache, _) = run(&ops)?;
        let text = checkpoint::encode(&cache);
        prop_assert_eq!(checkpoint::decode(&text), Ok(cache.clone()));
        prop_assert_eq!(
            checkpoint::decode_entries(&text),
            Ok(cache.entries().collect::<Vec<_>>())
        );
    }

    #[test]
    fn checkpoint_round_trips_any_increasing_entries(
        steps in prop::collection::vec((1..1_000_000i32, 1..i64::MAX / 64), 0..30),
        first in (0..1000i32, 0..1000i64),
    ) {
        let mut entries = vec![EpochEntry { epoch: first.0, start_offset: first.1 }];
        for (de, doff) in steps {
            let last = entries[entries.len() - 1];
            let (Some(epoch), Some(start_offset)) =
                (last.epoch.checked_add(de), last.start_offset.checked_add(doff))
            else {
                break;
            };
            entries.push(EpochEntry { epoch, start_offset });
        }
        let cache = EpochCache::from_entries(entries).expect("strictly increasing by construction");
        prop_assert_eq!(checkpoint::decode(&checkpoint::encode(&cache)), Ok(cache));
    }

    #[test]
    fn decode_never_panics_and_what_it_accepts_re_encodes_to_an_equal_cache(
        text in "[0-9 +\\-\t\r\n]{0,40}",
    ) {
        check_decode(&text)?;
    }

    #[test]
    fn decode_never_panics_on_arbitrary_text(text in "\\PC{0,60}") {
        check_decode(&text)?;
    }

    #[test]
    fn decode_never_panics_on_corrupted_checkpoints(
        ops in ops(),
        position in any::<prop::sample::Index>(),
        byte in prop::sample::select(vec!['0', '9', '-', ' ', '\n', '\r', 'x', '\t']),
        replace in any::<bool>(),
    ) {
        let (cache, _) = run(&ops)?;
        let mut text: Vec<char> = checkpoint::encode(&cache).chars().collect();
        let i = position.index(text.len());
        if replace {
            text[i] = byte;
        } else {
            text.insert(i, byte);
        }
        let text: String = text.into_iter().collect();
        check_decode(&text)?;
    }
}

/// Decoding never panics; an accepted text decodes to a valid cache that survives a round trip,
/// and a refused one names a line that exists (or line 1 or 2 of the header).
fn check_decode(text: &str) -> Result<(), TestCaseError> {
    match checkpoint::decode(text) {
        Ok(cache) => {
            prop_assert!(strictly_increasing(&cache));
            prop_assert_eq!(checkpoint::decode(&checkpoint::encode(&cache)), Ok(cache));
        }
        Err(err) => {
            let line = match err {
                CheckpointError::BadVersion { line, .. }
                | CheckpointError::UnparsableNumber { line, .. }
                | CheckpointError::WrongFieldCount { line, .. }
                | CheckpointError::CountMismatch { line, .. }
                | CheckpointError::NegativeValue { line, .. }
                | CheckpointError::NotIncreasing { line, .. } => line,
            };
            let lines = text.split(['\n', '\r']).count();
            prop_assert!(line >= 1 && line <= lines.max(2), "{err} in {text:?}");
        }
    }
    Ok(())
}
