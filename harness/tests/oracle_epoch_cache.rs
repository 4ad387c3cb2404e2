//! Differential test of the kernel's [`EpochCache`] against Apache Kafka 4.4.0's own
//! `LeaderEpochFileCache` (run with `cargo test --release -- --include-ignored oracle`).
//!
//! Thousands of random operation sequences (fixed seeds, bounded sizes) run through the kernel
//! and through `dev.kmirror.oracle.EpochCacheOracle`, which drives Kafka's class. Every
//! operation's answer is compared: mutations answer the entries they leave, queries their result,
//! and `FILE` the checkpoint file Kafka wrote (which must equal the kernel's `checkpoint::encode`).
//! On the first difference the sequence is shrunk by greedy delta debugging and printed with both
//! answers.

use std::fmt;
use std::time::Instant;

use kmirror_kernel::checkpoint;
use kmirror_kernel::epoch_cache::{EpochCache, EpochEntry};
use kmirror_kernel::types::{LeaderEpoch, Offset};
use kmirror_testsupport::jvm::Oracle;
use kmirror_testsupport::oracle_support::{scratch_dir, shrink, LineOracle, SplitMix64};

/// One operation of `LeaderEpochFileCache`, named after Kafka's method.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Assign(LeaderEpoch, Offset),
    TruncateFromEnd(Offset),
    TruncateFromStart(Offset),
    Clear,
    EndOffsetFor(LeaderEpoch, Offset),
    EpochForOffset(Offset),
    PreviousEpoch,
    PreviousEpochOf(LeaderEpoch),
    PreviousEntry(LeaderEpoch),
    NextEpoch(LeaderEpoch),
    EpochEntry(LeaderEpoch),
    Latest,
    Earliest,
    /// The checkpoint file Kafka keeps in step with the cache.
    File,
}

impl fmt::Display for Op {
    /// The oracle's request line.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Op::Assign(e, o) => write!(f, "ASSIGN {e} {o}"),
            Op::TruncateFromEnd(o) => write!(f, "TRUNCATE_END {o}"),
            Op::TruncateFromStart(o) => write!(f, "TRUNCATE_START {o}"),
            Op::Clear => write!(f, "CLEAR"),
            Op::EndOffsetFor(e, leo) => write!(f, "END_OFFSET_FOR {e} {leo}"),
            Op::EpochForOffset(o) => write!(f, "EPOCH_FOR_OFFSET {o}"),
            Op::PreviousEpoch => write!(f, "PREVIOUS_EPOCH"),
            Op::PreviousEpochOf(e) => write!(f, "PREVIOUS_EPOCH_OF {e}"),
            Op::PreviousEntry(e) => write!(f, "PREVIOUS_ENTRY {e}"),
            Op::NextEpoch(e) => write!(f, "NEXT_EPOCH {e}"),
            Op::EpochEntry(e) => write!(f, "ENTRY {e}"),
            Op::Latest => write!(f, "LATEST"),
            Op::Earliest => write!(f, "EARLIEST"),
            Op::File => write!(f, "FILE"),
        }
    }
}

/// How one side answers an operation, in the oracle's answer format.
type Answerer = fn(&mut EpochCache, Op) -> String;

fn entries_answer(cache: &EpochCache) -> String {
    cache
        .entries()
        .map(|e| format!(" {}@{}", e.epoch, e.start_offset))
        .fold("ok".to_owned(), |acc, e| acc + &e)
}

fn entry_answer(entry: Option<EpochEntry>) -> String {
    entry.map_or("none".into(), |e| format!("{}@{}", e.epoch, e.start_offset))
}

fn epoch_answer(epoch: Option<LeaderEpoch>) -> String {
    epoch.map_or("none".into(), |e| e.to_string())
}

/// The kernel's answer to `op`, applied to `cache`.
fn kernel_answer(cache: &mut EpochCache, op: Op) -> String {
    match op {
        Op::Assign(e, o) => match cache.assign(e, o) {
            Ok(_) => entries_answer(cache),
            Err(_) => "err IllegalArgumentException".into(),
        },
        Op::TruncateFromEnd(o) => {
            cache.truncate_from_end(o);
            entries_answer(cache)
        }
        Op::TruncateFromStart(o) => {
            cache.truncate_from_start(o);
            entries_answer(cache)
        }
        Op::Clear => {
            cache.clear();
            entries_answer(cache)
        }
        Op::EndOffsetFor(e, leo) => {
            let r = cache.end_offset_for(e, leo);
            format!("{} {}", r.epoch, r.end_offset)
        }
        Op::EpochForOffset(o) => epoch_answer(cache.epoch_for_offset(o)),
        Op::PreviousEpoch => epoch_answer(cache.previous_epoch()),
        Op::PreviousEpochOf(e) => epoch_answer(cache.epoch_before(e)),
        Op::PreviousEntry(e) => entry_answer(cache.previous_entry(e)),
        Op::NextEpoch(e) => epoch_answer(cache.epoch_after(e)),
        Op::EpochEntry(e) => entry_answer(cache.entry(e)),
        Op::Latest => entry_answer(cache.latest()),
        Op::Earliest => entry_answer(cache.earliest()),
        Op::File => checkpoint::encode(cache).replace('\n', "|"),
    }
}

/// A deliberately wrong kernel: `truncateFromStart` forgets to re-insert the epoch of the new
/// log start. Used to prove the comparison and the shrinker bite.
fn broken_answer(cache: &mut EpochCache, op: Op) -> String {
    if let Op::TruncateFromStart(o) = op {
        let kept: Vec<EpochEntry> = cache.entries().filter(|e| e.start_offset > o).collect();
        *cache = EpochCache::from_entries(kept).expect("a suffix stays increasing");
        return entries_answer(cache);
    }
    kernel_answer(cache, op)
}

/// An epoch worth asking about given `cache`: its epochs and their neighbours, -1, -2, and
/// random small ones.
fn interesting_epoch(rng: &mut SplitMix64, cache: &EpochCache) -> LeaderEpoch {
    let epochs: Vec<LeaderEpoch> = cache.entries().map(|e| e.epoch).collect();
    match rng.below(10) {
        0..=3 if !epochs.is_empty() => *rng.pick(&epochs) + rng.range(-1, 1) as LeaderEpoch,
        4 => -1,
        5 if rng.chance(30) => -2,
        _ => rng.range(0, 14) as LeaderEpoch,
    }
}

/// An offset worth asking about given `cache`: its start offsets and their neighbours, -1, and
/// random small ones.
fn interesting_offset(rng: &mut SplitMix64, cache: &EpochCache) -> Offset {
    let starts: Vec<Offset> = cache.entries().map(|e| e.start_offset).collect();
    match rng.below(10) {
        0..=4 if !starts.is_empty() => *rng.pick(&starts) + rng.range(-1, 1),
        5 if rng.chance(40) => -1,
        _ => rng.range(0, 60),
    }
}

/// A random sequence of up to `max_len` operations. Assignments mostly move forward, as a
/// leader's do, with some lower epochs and lower offsets mixed in.
fn random_sequence(rng: &mut SplitMix64, max_len: u64) -> Vec<Op> {
    let len = 1 + rng.below(max_len);
    let mut cache = EpochCache::new();
    let mut ops = Vec::new();
    for _ in 0..len {
        let latest = cache.latest();
        let op = match rng.below(100) {
            0..=29 => {
                let (e, o) = latest.map_or((0, 0), |l| (l.epoch, l.start_offset));
                Op::Assign(e + rng.range(0, 3) as LeaderEpoch, o + rng.range(0, 8))
            }
            30..=39 => Op::Assign(
                interesting_epoch(rng, &cache),
                interesting_offset(rng, &cache),
            ),
            40..=46 => Op::TruncateFromEnd(interesting_offset(rng, &cache)),
            47..=53 => Op::TruncateFromStart(interesting_offset(rng, &cache)),
            54 => Op::Clear,
            55..=67 => {
                let leo = latest.map_or(0, |l| l.start_offset) + rng.range(0, 5);
                Op::EndOffsetFor(interesting_epoch(rng, &cache), leo)
            }
            68..=74 => Op::EpochForOffset(interesting_offset(rng, &cache)),
            75..=77 => Op::PreviousEpoch,
            78..=80 => Op::PreviousEpochOf(interesting_epoch(rng, &cache)),
            81..=83 => Op::PreviousEntry(interesting_epoch(rng, &cache)),
            84..=86 => Op::NextEpoch(interesting_epoch(rng, &cache)),
            87..=89 => Op::EpochEntry(interesting_epoch(rng, &cache)),
            90..=92 => Op::Latest,
            93..=95 => Op::Earliest,
            _ => Op::File,
        };
        kernel_answer(&mut cache, op);
        ops.push(op);
    }
    ops
}

/// Runs `ops` from an empty cache through `ours` and through Kafka; the index of the first
/// operation they answer differently.
fn first_difference(kafka: &mut LineOracle, ours: Answerer, ops: &[Op]) -> Option<usize> {
    assert_eq!(kafka.ask("RESET"), "ok");
    let mut cache = EpochCache::new();
    ops.iter()
        .position(|&op| ours(&mut cache, op) != kafka.ask(&op.to_string()))
}

/// Runs `cases` random sequences per seed through `ours` and Kafka; on the first difference,
/// returns the shrunk sequence and a report of both sides' answers.
fn compare_many(
    kafka: &mut LineOracle,
    ours: Answerer,
    seeds: &[u64],
    cases: usize,
    max_len: u64,
) -> Result<usize, (Vec<Op>, String)> {
    let mut operations = 0;
    for &seed in seeds {
        let mut rng = SplitMix64::new(seed);
        for case in 0..cases {
            let ops = random_sequence(&mut rng, max_len);
            operations += ops.len();
            if first_difference(kafka, ours, &ops).is_none() {
                continue;
            }
            let shrunk = shrink(&ops, |ops| first_difference(kafka, ours, ops));
            return Err((
                shrunk.clone(),
                report(kafka, ours, seed, case, &ops, &shrunk),
            ));
        }
    }
    Ok(operations)
}

/// Both sides' answers to every operation of `shrunk`, for the failure message.
fn report(
    kafka: &mut LineOracle,
    ours: Answerer,
    seed: u64,
    case: usize,
    original: &[Op],
    shrunk: &[Op],
) -> String {
    let mut out = format!(
        "seed {seed}, case {case}: the kernel and Kafka's LeaderEpochFileCache differ.\n\
         Original sequence: {} operations; shrunk to {}:\n",
        original.len(),
        shrunk.len()
    );
    assert_eq!(kafka.ask("RESET"), "ok");
    let mut cache = EpochCache::new();
    for (i, &op) in shrunk.iter().enumerate() {
        let mine = ours(&mut cache, op);
        let theirs = kafka.ask(&op.to_string());
        let mark = if mine == theirs { "  " } else { "!!" };
        out += &format!(
            "{mark} {i:>2}. {:<24} kernel: {mine:<28} kafka: {theirs}\n",
            op.to_string()
        );
    }
    out
}

/// The kernel's leader-epoch cache answers every operation exactly as Kafka 4.4.0's
/// `LeaderEpochFileCache` does — assign (lower epochs, lower offsets, same epoch earlier or
/// later, negative values), endOffsetFor (undefined epoch, empty cache, below the first epoch,
/// between, latest, above), truncateFromEnd/Start at and around boundaries, epochForOffset,
/// previous/next epoch and entry lookups — and keeps the same checkpoint file contents.
#[test]
#[ignore = "needs Java 17 and Maven; run with `-- --include-ignored oracle`"]
fn oracle_epoch_cache_matches_kafka() {
    let Some(oracle) = Oracle::for_tests("oracle_epoch_cache_matches_kafka") else {
        return;
    };
    let dir = scratch_dir();
    let mut kafka = LineOracle::start(
        &oracle,
        "dev.kmirror.oracle.EpochCacheOracle",
        &[dir.path()],
    );
    let started = Instant::now();
    let seeds = [1, 2, 3, 0x5EED, 0xC0FFEE];
    match compare_many(&mut kafka, kernel_answer, &seeds, 1000, 40) {
        Ok(operations) => eprintln!(
            "{} sequences, {operations} operations agree with Kafka in {:.1?}",
            seeds.len() * 1000,
            started.elapsed()
        ),
        Err((_, report)) => panic!("{report}"),
    }
}

/// The comparison is not vacuous: a kernel whose `truncateFromStart` drops the epoch of the new
/// log start is caught, and the difference shrinks to a sequence of at most three operations.
#[test]
#[ignore = "needs Java 17 and Maven; run with `-- --include-ignored oracle`"]
fn oracle_epoch_cache_catches_and_shrinks_a_planted_bug() {
    let Some(oracle) = Oracle::for_tests("oracle_epoch_cache_catches_and_shrinks_a_planted_bug")
    else {
        return;
    };
    let dir = scratch_dir();
    let mut kafka = LineOracle::start(
        &oracle,
        "dev.kmirror.oracle.EpochCacheOracle",
        &[dir.path()],
    );
    let Err((shrunk, report)) = compare_many(&mut kafka, broken_answer, &[7], 500, 40) else {
        panic!("the planted truncateFromStart bug went unnoticed");
    };
    eprintln!("{report}");
    assert!(
        shrunk.len() <= 3,
        "shrinking left {} operations:\n{report}",
        shrunk.len()
    );
    assert!(matches!(
        shrunk.last(),
        Some(Op::TruncateFromStart(_)) | Some(Op::File)
    ));
}
