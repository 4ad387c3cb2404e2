//! Differential tests of the `leader-epoch-checkpoint` format against Apache Kafka 4.4.0's own
//! `LeaderEpochCheckpointFile` (run with `cargo test --release -- --include-ignored oracle`):
//! Kafka reads what we write, we read what Kafka writes, and on damaged or unusual text our
//! reader accepts and refuses exactly what Kafka's does.

use std::collections::BTreeMap;
use std::fs;

use kmirror_harness::segment::write_atomically;
use kmirror_kernel::checkpoint::{self, CheckpointError};
use kmirror_kernel::epoch_cache::{EpochCache, EpochEntry};
use kmirror_testsupport::jvm::Oracle;
use kmirror_testsupport::oracle_support::{scratch_dir, LineOracle, SplitMix64};

/// The oracle's `ok e@o e@o ...` answer for `entries`.
fn ok_entries(entries: impl IntoIterator<Item = EpochEntry>) -> String {
    entries
        .into_iter()
        .map(|e| format!(" {}@{}", e.epoch, e.start_offset))
        .fold("ok".to_owned(), |acc, e| acc + &e)
}

/// A random valid cache: up to 12 entries strictly increasing in epoch and start offset, with
/// gaps from 1 up to near `i32::MAX` / `i64::MAX`.
fn random_cache(rng: &mut SplitMix64) -> EpochCache {
    let mut entries = Vec::new();
    let mut epoch = rng.range(0, 3) as i32;
    let mut offset = rng.range(0, 3);
    for _ in 0..rng.below(13) {
        entries.push(EpochEntry {
            epoch,
            start_offset: offset,
        });
        let huge = rng.chance(5);
        epoch = epoch.saturating_add(if huge {
            1 << 29
        } else {
            rng.range(1, 4) as i32
        });
        offset = offset.saturating_add(if huge { 1 << 61 } else { rng.range(1, 500) });
        if epoch == i32::MAX || offset == i64::MAX {
            break;
        }
    }
    EpochCache::from_entries(entries).expect("generated increasing")
}

/// Random entries for Kafka to write, valid or not: negative, repeated and decreasing values.
fn random_raw_entries(rng: &mut SplitMix64) -> Vec<EpochEntry> {
    (0..rng.below(8))
        .map(|_| EpochEntry {
            epoch: if rng.chance(90) {
                rng.range(-2, 20) as i32
            } else {
                *rng.pick(&[i32::MIN, i32::MAX])
            },
            start_offset: if rng.chance(90) {
                rng.range(-2, 1000)
            } else {
                *rng.pick(&[i64::MIN, i64::MAX])
            },
        })
        .collect()
}

/// A checkpoint text damaged in one to three places: characters inserted (whitespace Java's
/// `\s` knows and some it does not, signs, digits, letters, line ends), deleted, lines
/// duplicated, swapped or dropped.
fn damaged_text(rng: &mut SplitMix64) -> String {
    let mut text = checkpoint::encode(&random_cache(rng));
    const INSERTS: &[char] = &[
        ' ', ' ', '\t', '\r', '\n', '\n', '+', '-', '0', '7', 'x', '.', '\u{0B}', '\u{0C}',
        '\u{A0}', '\u{2003}', '\u{1C}',
    ];
    for _ in 0..1 + rng.below(3) {
        let chars: Vec<char> = text.chars().collect();
        let at = rng.below(chars.len() as u64 + 1) as usize;
        let mut lines: Vec<String> = text.split('\n').map(str::to_owned).collect();
        text = match rng.below(6) {
            0 | 1 => {
                let mut c = chars.clone();
                c.insert(at, *rng.pick(INSERTS));
                c.into_iter().collect()
            }
            2 if !chars.is_empty() => {
                let mut c = chars.clone();
                c.remove(at.min(chars.len() - 1));
                c.into_iter().collect()
            }
            3 => {
                let i = rng.below(lines.len() as u64) as usize;
                let line = lines[i].clone();
                lines.insert(i, line);
                lines.join("\n")
            }
            4 if lines.len() > 1 => {
                let i = rng.below(lines.len() as u64) as usize;
                let j = rng.below(lines.len() as u64) as usize;
                lines.swap(i, j);
                lines.join("\n")
            }
            _ => {
                lines.remove(rng.below(lines.len() as u64) as usize);
                lines.join("\n")
            }
        };
    }
    text
}

/// Whether a count line could make Kafka pre-allocate a huge list (it sizes its list by the
/// count before reading the entries): such texts are left out.
fn has_huge_count(text: &str) -> bool {
    text.split(['\n', '\r'])
        .nth(1)
        .is_some_and(|count| count.chars().filter(char::is_ascii_digit).count() > 4)
}

/// Kafka reads back every checkpoint the harness writes (`write_atomically` of
/// `checkpoint::encode`), both with its raw reader and by building a `LeaderEpochFileCache`
/// from it: the same entries, in the same order.
#[test]
#[ignore = "needs Java 17 and Maven; run with `-- --include-ignored oracle`"]
fn oracle_checkpoint_kafka_reads_what_we_write() {
    let Some(oracle) = Oracle::for_tests("oracle_checkpoint_kafka_reads_what_we_write") else {
        return;
    };
    let dir = scratch_dir();
    let mut kafka = LineOracle::start(
        &oracle,
        "dev.kmirror.oracle.EpochCacheOracle",
        &[dir.path()],
    );
    let mut rng = SplitMix64::new(0x00C4_EC4B);
    for case in 0..2000 {
        let cache = random_cache(&mut rng);
        let name = format!("case-{case}");
        write_atomically(dir.path(), &name, checkpoint::encode(&cache).as_bytes()).unwrap();
        let path = dir.path().join(&name);
        let expected = ok_entries(cache.entries());
        for request in ["CHECKPOINT_READ", "CHECKPOINT_LOAD"] {
            let answer = kafka.ask(&format!("{request} {}", path.display()));
            assert_eq!(
                answer,
                expected,
                "{request} of {:?}",
                checkpoint::encode(&cache)
            );
        }
        fs::remove_file(path).unwrap();
    }
}

/// We read back every checkpoint Kafka writes: `decode_entries` gives Kafka's entries (valid
/// or not), and for a valid cache the file is byte for byte `checkpoint::encode` and `decode`
/// gives the cache.
#[test]
#[ignore = "needs Java 17 and Maven; run with `-- --include-ignored oracle`"]
fn oracle_checkpoint_we_read_what_kafka_writes() {
    let Some(oracle) = Oracle::for_tests("oracle_checkpoint_we_read_what_kafka_writes") else {
        return;
    };
    let dir = scratch_dir();
    let mut kafka = LineOracle::start(
        &oracle,
        "dev.kmirror.oracle.EpochCacheOracle",
        &[dir.path()],
    );
    let mut rng = SplitMix64::new(0x0057_17E5);
    let path = dir.path().join("written-by-kafka");
    for case in 0..2000 {
        let entries = if case % 2 == 0 {
            random_cache(&mut rng).entries().collect()
        } else {
            random_raw_entries(&mut rng)
        };
        let list: String = entries
            .iter()
            .map(|e| format!(" {}@{}", e.epoch, e.start_offset))
            .collect();
        assert_eq!(
            kafka.ask(&format!("CHECKPOINT_WRITE {}{list}", path.display())),
            "ok"
        );
        let text = fs::read_to_string(&path).unwrap();
        assert_eq!(
            checkpoint::decode_entries(&text),
            Ok(entries.clone()),
            "{text:?}"
        );
        if let Some(cache) = EpochCache::from_entries(entries.iter().copied()) {
            assert_eq!(text, checkpoint::encode(&cache));
            assert_eq!(checkpoint::decode(&text), Ok(cache));
        } else {
            assert!(checkpoint::decode(&text).is_err(), "{text:?}");
        }
    }
}

/// On thousands of damaged or unusual checkpoint texts, `decode_entries` accepts exactly what
/// Kafka's reader accepts, with the same entries; `decode` accepts only texts from which Kafka
/// builds a cache, and then the same cache. Where Kafka builds a cache but `decode` refuses,
/// the reason is the one documented difference: entries not strictly increasing, which Kafka's
/// `assign` replay silently drops.
#[test]
#[ignore = "needs Java 17 and Maven; run with `-- --include-ignored oracle`"]
fn oracle_checkpoint_reader_accepts_and_refuses_what_kafka_does() {
    let Some(oracle) =
        Oracle::for_tests("oracle_checkpoint_reader_accepts_and_refuses_what_kafka_does")
    else {
        return;
    };
    let dir = scratch_dir();
    let mut kafka = LineOracle::start(
        &oracle,
        "dev.kmirror.oracle.EpochCacheOracle",
        &[dir.path()],
    );
    let mut rng = SplitMix64::new(0x0DA3_A6ED);
    let path = dir.path().join("damaged");
    let mut outcomes: BTreeMap<&str, usize> = BTreeMap::new();
    for _ in 0..4000 {
        let text = damaged_text(&mut rng);
        if has_huge_count(&text) {
            continue;
        }
        fs::write(&path, &text).unwrap();
        let read = kafka.ask(&format!("CHECKPOINT_READ {}", path.display()));
        let loaded = kafka.ask(&format!("CHECKPOINT_LOAD {}", path.display()));
        let ours_read = checkpoint::decode_entries(&text);
        let ours_loaded = checkpoint::decode(&text);
        match &ours_read {
            Ok(entries) => assert_eq!(read, ok_entries(entries.iter().copied()), "{text:?}"),
            Err(e) => assert!(
                read.starts_with("err"),
                "{text:?}: we refuse ({e}), Kafka reads {read}"
            ),
        }
        let outcome = match (&ours_loaded, loaded.starts_with("ok")) {
            (Ok(cache), _) => {
                assert_eq!(loaded, ok_entries(cache.entries()), "{text:?}");
                "both load"
            }
            (Err(CheckpointError::NotIncreasing { .. }), true) => "Kafka drops entries, we refuse",
            (Err(e), true) => panic!("{text:?}: we refuse ({e}), Kafka loads {loaded}"),
            (Err(_), false) => "both refuse",
        };
        *outcomes.entry(outcome).or_default() += 1;
    }
    eprintln!("checkpoint texts: {outcomes:?}");
    assert!(
        outcomes.len() == 3,
        "every outcome is exercised: {outcomes:?}"
    );
}
