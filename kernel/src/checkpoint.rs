//! Kafka's `leader-epoch-checkpoint` text format, encoded and decoded in memory.
//!
//! The file Kafka writes next to a partition's segments holds its [`EpochCache`]:
//!
//! ```text
//! 0                 <- format version (always 0)
//! 2                 <- number of entries that follow
//! 0 0               <- `<epoch> <start offset>`, oldest first
//! 3 100
//! ```
//!
//! every line ending in `\n`. This module only turns text into a cache and back; writing the file
//! (temporary file, fsync, rename, directory fsync) is the harness's job, the kernel being pure.
//!
//! # What Kafka's reader tolerates, and what this decoder does
//!
//! Checked against Kafka's `CheckpointFile.CheckpointReadBuffer.read`
//! (`server-common/src/main/java/org/apache/kafka/server/common/CheckpointFile.java`) and
//! `LeaderEpochCheckpointFile.Formatter`
//! (`storage/src/main/java/org/apache/kafka/storage/internals/checkpoint/LeaderEpochCheckpointFile.java`),
//! which Kafka's `LeaderEpochFileCache` constructor reads and then replays through `assign`.
//! [`decode_entries`] matches the reader; [`decode`] adds the checks `assign` makes and one more:
//!
//! - Lines are what Java's `BufferedReader.readLine` yields: ended by `\n`, `\r\n` or a lone
//!   `\r`; the last line needs no terminator; a blank line is a line (so a trailing blank line is
//!   an entry line with the wrong number of fields, and is refused).
//! - Empty text, or a version line alone, reads as an empty cache (the reader returns no
//!   entries when the first or second line is missing).
//! - Version and count lines are parsed whole, as `Integer.parseInt` does: no surrounding
//!   whitespace; an optional `+` or `-` sign and leading zeros are accepted. A version other than
//!   0 is [`CheckpointError::BadVersion`]. A negative count is refused (Kafka fails allocating a
//!   list of negative capacity); a large count allocates nothing up front here.
//! - An entry line is split on runs of whitespace (Java's `\s+`: space, tab, vertical tab, form
//!   feed): several separators between the fields and trailing whitespace are accepted, but
//!   leading whitespace yields an empty first field, so three fields, and is refused. Exactly two
//!   fields are required: the epoch as a 32-bit and the start offset as a 64-bit signed integer.
//! - After all lines are read, the number of entries must equal the count line, both ways.
//!   Malformed lines are reported before a count mismatch, as Kafka reads every line first.
//! - A negative epoch or start offset is refused: Kafka's reader accepts it but `assign` then
//!   throws `IllegalArgumentException` when the cache is built.
//! - Entries that are not strictly increasing in both epoch and start offset are refused
//!   ([`CheckpointError::NotIncreasing`]). **Here [`decode`] is stricter than Kafka**, whose
//!   `assign` replay silently drops the entries such a line conflicts with. Kafka never writes
//!   such a file, so only a corrupted or hand-edited one is affected; a caller that wants Kafka's
//!   lenient load can replay [`decode_entries`] through [`EpochCache::assign`].
//! - Known difference: Java's `parseInt` also accepts non-ASCII Unicode decimal digits; this
//!   decoder accepts ASCII digits only. Kafka only ever writes ASCII.
//!
//! [`encode`] writes what Kafka's `CheckpointWriteBuffer` writes on Linux (`newLine` is `\n`
//! there): the version, the count, then `<epoch> <start offset>` per entry, single-spaced.

use std::fmt;
use std::fmt::Write as _;

use crate::epoch_cache::{EpochCache, EpochEntry};

/// The only checkpoint format version (Kafka's `LeaderEpochCheckpointFile.CURRENT_VERSION`).
pub const VERSION: i32 = 0;

/// The file name Kafka gives the checkpoint inside a partition directory.
pub const FILE_NAME: &str = "leader-epoch-checkpoint";

/// The 1-based line number of the first entry (after the version and count lines).
const FIRST_ENTRY_LINE: usize = 3;

/// Which number on a checkpoint line an error is about.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum Field {
    /// The format version (line 1).
    Version,
    /// The entry count (line 2).
    Count,
    /// An entry's leader epoch (first field of an entry line).
    Epoch,
    /// An entry's start offset (second field of an entry line).
    StartOffset,
}

impl fmt::Display for Field {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Field::Version => "version",
            Field::Count => "entry count",
            Field::Epoch => "leader epoch",
            Field::StartOffset => "start offset",
        })
    }
}

/// Why a text is not a valid `leader-epoch-checkpoint`. Every variant names the 1-based line.
#[derive(Clone, PartialEq, Eq, Debug, thiserror::Error)]
pub enum CheckpointError {
    /// The version line holds a number other than [`VERSION`].
    #[error("line {line}: unsupported checkpoint version {found}, expected {VERSION}")]
    BadVersion {
        /// The line number (always 1).
        line: usize,
        /// The version found.
        found: i32,
    },
    /// A number does not parse (not an integer, surrounding whitespace, or out of range).
    #[error("line {line}: {field} {text:?} is not a valid integer")]
    UnparsableNumber {
        /// The line number.
        line: usize,
        /// Which number.
        field: Field,
        /// The text that failed to parse.
        text: String,
    },
    /// An entry line does not hold exactly two whitespace-separated fields.
    #[error("line {line}: expected 2 fields `<epoch> <start offset>`, found {found}")]
    WrongFieldCount {
        /// The line number.
        line: usize,
        /// How many fields Kafka's whitespace split finds (a leading blank counts as one).
        found: usize,
    },
    /// The number of entry lines differs from the count on line 2.
    #[error("line {line}: the checkpoint announces {expected} entries but holds {found}")]
    CountMismatch {
        /// The line number of the count (always 2).
        line: usize,
        /// The count announced.
        expected: i32,
        /// The number of entry lines found.
        found: usize,
    },
    /// A negative count, epoch or start offset.
    #[error("line {line}: {field} {value} is negative")]
    NegativeValue {
        /// The line number.
        line: usize,
        /// Which number.
        field: Field,
        /// The value found.
        value: i64,
    },
    /// An entry whose epoch or start offset is not greater than the previous entry's.
    #[error(
        "line {line}: entry (epoch {}, start offset {}) does not strictly follow \
         (epoch {}, start offset {})",
        entry.epoch, entry.start_offset, previous.epoch, previous.start_offset
    )]
    NotIncreasing {
        /// The line number of the offending entry.
        line: usize,
        /// The entry on the line before.
        previous: EpochEntry,
        /// The offending entry.
        entry: EpochEntry,
    },
}

/// The checkpoint text of `cache`: `0\n<count>\n` then `<epoch> <start offset>\n` per entry,
/// oldest first. [`decode`] reads it back to an equal cache.
pub fn encode(cache: &EpochCache) -> String {
    let mut out = String::with_capacity(8 + cache.len() * 16);
    // Writing to a String cannot fail.
    let _ = write!(out, "{VERSION}\n{}\n", cache.len());
    for e in cache.entries() {
        let _ = writeln!(out, "{} {}", e.epoch, e.start_offset);
    }
    out
}

/// Parses checkpoint `text` into an [`EpochCache`].
///
/// Accepts exactly what [`decode_entries`] accepts, then refuses negative epochs or offsets
/// (as Kafka's `assign` does) and entries not strictly increasing in both epoch and start offset
/// (where Kafka would silently drop entries; see the module documentation).
pub fn decode(text: &str) -> Result<EpochCache, CheckpointError> {
    let mut cache = EpochCache::new();
    for (i, entry) in decode_entries(text)?.into_iter().enumerate() {
        let line = i + FIRST_ENTRY_LINE;
        let negative = |field, value| CheckpointError::NegativeValue { line, field, value };
        if entry.epoch < 0 {
            return Err(negative(Field::Epoch, entry.epoch.into()));
        }
        if entry.start_offset < 0 {
            return Err(negative(Field::StartOffset, entry.start_offset));
        }
        if let Some(previous) = cache.latest() {
            if entry.epoch <= previous.epoch || entry.start_offset <= previous.start_offset {
                return Err(CheckpointError::NotIncreasing {
                    line,
                    previous,
                    entry,
                });
            }
        }
        // Non-negative and above the latest entry in both keys: `assign` appends it.
        cache
            .assign(entry.epoch, entry.start_offset)
            .map_err(|e| negative(Field::Epoch, e.epoch.into()))?;
    }
    Ok(cache)
}

/// Parses checkpoint `text` into its entries, in file order, accepting exactly what Kafka's
/// checkpoint reader accepts (see the module documentation): no check of sign or order of the
/// entries, which Kafka leaves to `LeaderEpochFileCache.assign`.
pub fn decode_entries(text: &str) -> Result<Vec<EpochEntry>, CheckpointError> {
    let mut lines = JavaLines { rest: text };
    let Some(version_line) = lines.next() else {
        return Ok(Vec::new());
    };
    let version: i32 = parse(version_line, 1, Field::Version)?;
    if version != VERSION {
        return Err(CheckpointError::BadVersion {
            line: 1,
            found: version,
        });
    }
    let Some(count_line) = lines.next() else {
        return Ok(Vec::new());
    };
    let count: i32 = parse(count_line, 2, Field::Count)?;
    if count < 0 {
        return Err(CheckpointError::NegativeValue {
            line: 2,
            field: Field::Count,
            value: count.into(),
        });
    }
    // No capacity from `count`: it is untrusted input.
    let mut entries = Vec::new();
    for (i, text) in lines.enumerate() {
        let line = i + FIRST_ENTRY_LINE;
        let fields = split_whitespace_like_java(text);
        let [epoch, start_offset] = fields[..] else {
            return Err(CheckpointError::WrongFieldCount {
                line,
                found: fields.len(),
            });
        };
        entries.push(EpochEntry {
            epoch: parse(epoch, line, Field::Epoch)?,
            start_offset: parse(start_offset, line, Field::StartOffset)?,
        });
    }
    if usize::try_from(count).ok() != Some(entries.len()) {
        return Err(CheckpointError::CountMismatch {
            line: 2,
            expected: count,
            found: entries.len(),
        });
    }
    Ok(entries)
}

/// Parses a whole token as a decimal integer (Java's `Integer.parseInt` / `Long.parseLong` on
/// ASCII input: optional sign, no whitespace).
fn parse<T: std::str::FromStr>(
    text: &str,
    line: usize,
    field: Field,
) -> Result<T, CheckpointError> {
    text.parse().map_err(|_| CheckpointError::UnparsableNumber {
        line,
        field,
        text: text.to_owned(),
    })
}

/// Java's `\s` within a line (the line terminators `\n` and `\r` never occur inside one).
fn is_java_inline_whitespace(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\u{0B}' | '\u{0C}')
}

/// Java's `Pattern.compile("\\s+").split(line)`: a leading separator yields an empty first
/// field, trailing empty fields are dropped, and a line with no separator is one field (even
/// when empty).
fn split_whitespace_like_java(line: &str) -> Vec<&str> {
    if !line.contains(is_java_inline_whitespace) {
        return vec![line];
    }
    let mut fields: Vec<&str> = line.split(is_java_inline_whitespace).collect();
    // Consecutive separators form one `\s+` match: drop the empty pieces between them, keeping
    // a leading empty field, which Java keeps for a match at the very start.
    let mut i = 1;
    while i < fields.len() {
        if fields[i].is_empty() {
            fields.remove(i);
        } else {
            i += 1;
        }
    }
    // Java drops trailing empty strings, which can leave nothing at all.
    while fields.last().is_some_and(|f| f.is_empty()) {
        fields.pop();
    }
    fields
}

/// The lines of a text as Java's `BufferedReader.readLine` returns them.
struct JavaLines<'a> {
    rest: &'a str,
}

impl<'a> Iterator for JavaLines<'a> {
    type Item = &'a str;

    fn next(&mut self) -> Option<&'a str> {
        if self.rest.is_empty() {
            return None;
        }
        match self.rest.find(['\n', '\r']) {
            Some(end) => {
                let line = &self.rest[..end];
                let after = &self.rest[end..];
                let terminator = if after.starts_with("\r\n") { 2 } else { 1 };
                self.rest = &after[terminator..];
                Some(line)
            }
            None => Some(std::mem::take(&mut self.rest)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cache(pairs: &[(i32, i64)]) -> EpochCache {
        let mut cache = EpochCache::new();
        for &(epoch, start) in pairs {
            cache.assign(epoch, start).expect("valid test entry");
        }
        cache
    }

    fn entry(epoch: i32, start_offset: i64) -> EpochEntry {
        EpochEntry {
            epoch,
            start_offset,
        }
    }

    const GOLDEN: &str = "0\n3\n0 0\n3 100\n7 12345\n";

    #[test]
    fn encode_matches_the_golden_text() {
        assert_eq!(encode(&cache(&[(0, 0), (3, 100), (7, 12345)])), GOLDEN);
    }

    #[test]
    fn encode_of_an_empty_cache_is_version_and_zero_count() {
        assert_eq!(encode(&EpochCache::new()), "0\n0\n");
    }

    #[test]
    fn encode_writes_extreme_values_in_full() {
        let c = cache(&[(i32::MAX, i64::MAX)]);
        assert_eq!(encode(&c), "0\n1\n2147483647 9223372036854775807\n");
        assert_eq!(decode(&encode(&c)), Ok(c));
    }

    #[test]
    fn decode_reads_the_golden_text() {
        assert_eq!(decode(GOLDEN), Ok(cache(&[(0, 0), (3, 100), (7, 12345)])));
        assert_eq!(
            decode_entries(GOLDEN),
            Ok(vec![entry(0, 0), entry(3, 100), entry(7, 12345)])
        );
    }

    #[test]
    fn decode_reads_an_empty_checkpoint() {
        assert_eq!(decode("0\n0\n"), Ok(EpochCache::new()));
    }

    #[test]
    fn decode_of_empty_text_or_version_alone_is_an_empty_cache() {
        // Kafka's reader returns no entries when line 1 or line 2 is missing.
        assert_eq!(decode(""), Ok(EpochCache::new()));
        assert_eq!(decode("0\n"), Ok(EpochCache::new()));
        assert_eq!(decode("0"), Ok(EpochCache::new()));
    }

    #[test]
    fn decode_accepts_crlf_lone_cr_and_a_missing_final_newline() {
        let expected = Ok(cache(&[(1, 5), (2, 9)]));
        assert_eq!(decode("0\r\n2\r\n1 5\r\n2 9\r\n"), expected);
        assert_eq!(decode("0\r2\r1 5\r2 9\r"), expected);
        assert_eq!(decode("0\n2\n1 5\n2 9"), expected);
    }

    #[test]
    fn decode_accepts_runs_of_whitespace_between_and_after_fields() {
        let expected = Ok(cache(&[(1, 5), (2, 9)]));
        assert_eq!(decode("0\n2\n1   5\n2\t\x0B\x0C9 \t\n"), expected);
    }

    #[test]
    fn decode_accepts_a_sign_and_leading_zeros_like_java_parse_int() {
        assert_eq!(decode("+0\n0001\n+1 -0\n"), Ok(cache(&[(1, 0)])));
    }

    #[test]
    fn decode_refuses_leading_whitespace_on_an_entry_line() {
        assert_eq!(
            decode("0\n1\n 1 5\n"),
            Err(CheckpointError::WrongFieldCount { line: 3, found: 3 })
        );
    }

    #[test]
    fn decode_refuses_a_trailing_blank_line() {
        assert_eq!(
            decode("0\n1\n1 5\n\n"),
            Err(CheckpointError::WrongFieldCount { line: 4, found: 1 })
        );
        assert_eq!(
            decode("0\n1\n1 5\n  \n"),
            Err(CheckpointError::WrongFieldCount { line: 4, found: 0 })
        );
    }

    #[test]
    fn decode_refuses_whitespace_around_version_or_count() {
        assert_eq!(
            decode(" 0\n0\n"),
            Err(CheckpointError::UnparsableNumber {
                line: 1,
                field: Field::Version,
                text: " 0".into()
            })
        );
        assert_eq!(
            decode("0\n0 \n"),
            Err(CheckpointError::UnparsableNumber {
                line: 2,
                field: Field::Count,
                text: "0 ".into()
            })
        );
    }

    #[test]
    fn decode_refuses_an_unknown_version() {
        assert_eq!(
            decode("1\n0\n"),
            Err(CheckpointError::BadVersion { line: 1, found: 1 })
        );
        assert_eq!(
            decode("-1\n"),
            Err(CheckpointError::BadVersion { line: 1, found: -1 })
        );
    }

    #[test]
    fn decode_refuses_a_count_that_differs_from_the_entries() {
        assert_eq!(
            decode("0\n2\n1 5\n"),
            Err(CheckpointError::CountMismatch {
                line: 2,
                expected: 2,
                found: 1
            })
        );
        assert_eq!(
            decode("0\n0\n1 5\n"),
            Err(CheckpointError::CountMismatch {
                line: 2,
                expected: 0,
                found: 1
            })
        );
        assert_eq!(
            decode("0\n2147483647\n"),
            Err(CheckpointError::CountMismatch {
                line: 2,
                expected: i32::MAX,
                found: 0
            })
        );
    }

    #[test]
    fn decode_refuses_a_negative_count() {
        assert_eq!(
            decode("0\n-1\n"),
            Err(CheckpointError::NegativeValue {
                line: 2,
                field: Field::Count,
                value: -1
            })
        );
    }

    #[test]
    fn decode_refuses_unparsable_or_out_of_range_numbers() {
        let unparsable = |line, field, text: &str| {
            Err(CheckpointError::UnparsableNumber {
                line,
                field,
                text: text.into(),
            })
        };
        assert_eq!(decode("zero\n"), unparsable(1, Field::Version, "zero"));
        assert_eq!(decode("0\n\n"), unparsable(2, Field::Count, ""));
        assert_eq!(decode("0\n1\nx 5\n"), unparsable(3, Field::Epoch, "x"));
        assert_eq!(
            decode("0\n1\n2147483648 5\n"),
            unparsable(3, Field::Epoch, "2147483648")
        );
        assert_eq!(
            decode("0\n2\n1 5\n2 9223372036854775808\n"),
            unparsable(4, Field::StartOffset, "9223372036854775808")
        );
        assert_eq!(
            decode("0\n1\n1 5.0\n"),
            unparsable(3, Field::StartOffset, "5.0")
        );
        assert_eq!(
            decode("0\n1\n1 \u{663}\n"),
            unparsable(3, Field::StartOffset, "\u{663}")
        );
    }

    #[test]
    fn decode_refuses_lines_without_exactly_two_fields() {
        assert_eq!(
            decode("0\n1\n1 5 7\n"),
            Err(CheckpointError::WrongFieldCount { line: 3, found: 3 })
        );
        assert_eq!(
            decode("0\n1\n15\n"),
            Err(CheckpointError::WrongFieldCount { line: 3, found: 1 })
        );
    }

    #[test]
    fn decode_refuses_negative_epochs_and_offsets() {
        assert_eq!(
            decode("0\n2\n1 5\n-1 9\n"),
            Err(CheckpointError::NegativeValue {
                line: 4,
                field: Field::Epoch,
                value: -1
            })
        );
        assert_eq!(
            decode("0\n1\n1 -5\n"),
            Err(CheckpointError::NegativeValue {
                line: 3,
                field: Field::StartOffset,
                value: -5
            })
        );
        // Kafka's reader itself accepts them; only building the cache refuses them.
        assert_eq!(decode_entries("0\n1\n-1 -5\n"), Ok(vec![entry(-1, -5)]));
    }

    #[test]
    fn decode_refuses_entries_not_strictly_increasing() {
        let not_increasing = |line, previous, entry| {
            Err(CheckpointError::NotIncreasing {
                line,
                previous,
                entry,
            })
        };
        assert_eq!(
            decode("0\n2\n1 5\n1 9\n"),
            not_increasing(4, entry(1, 5), entry(1, 9))
        );
        assert_eq!(
            decode("0\n2\n1 5\n2 5\n"),
            not_increasing(4, entry(1, 5), entry(2, 5))
        );
        assert_eq!(
            decode("0\n3\n1 5\n3 9\n2 12\n"),
            not_increasing(5, entry(3, 9), entry(2, 12))
        );
        assert_eq!(
            decode("0\n2\n1 5\n2 4\n"),
            not_increasing(4, entry(1, 5), entry(2, 4))
        );
        // The raw reader keeps them, in file order.
        assert_eq!(
            decode_entries("0\n2\n2 5\n1 9\n"),
            Ok(vec![entry(2, 5), entry(1, 9)])
        );
    }

    #[test]
    fn decode_reports_malformed_lines_before_a_count_mismatch_and_that_before_order() {
        // Kafka's reader parses every line before comparing the count; `assign` runs after.
        assert_eq!(
            decode("0\n1\n1 5\nbad\n"),
            Err(CheckpointError::WrongFieldCount { line: 4, found: 1 })
        );
        assert_eq!(
            decode("0\n3\n2 5\n1 9\n"),
            Err(CheckpointError::CountMismatch {
                line: 2,
                expected: 3,
                found: 2
            })
        );
    }

    #[test]
    fn errors_name_the_line_and_the_problem() {
        let message = |text| decode(text).expect_err("invalid").to_string();
        assert_eq!(
            message("7\n0\n"),
            "line 1: unsupported checkpoint version 7, expected 0"
        );
        assert_eq!(
            message("0\n1\n1 x\n"),
            "line 3: start offset \"x\" is not a valid integer"
        );
        assert_eq!(
            message("0\n2\n3 5\n2 9\n"),
            "line 4: entry (epoch 2, start offset 9) does not strictly follow (epoch 3, start offset 5)"
        );
    }

    #[test]
    fn java_whitespace_split_matches_pattern_split() {
        assert_eq!(split_whitespace_like_java(""), vec![""]);
        assert_eq!(split_whitespace_like_java("a"), vec!["a"]);
        assert_eq!(split_whitespace_like_java("a b"), vec!["a", "b"]);
        assert_eq!(split_whitespace_like_java("a \t b  "), vec!["a", "b"]);
        assert_eq!(split_whitespace_like_java("  a b"), vec!["", "a", "b"]);
        assert_eq!(split_whitespace_like_java("   "), Vec::<&str>::new());
    }

    #[test]
    fn java_lines_match_buffered_reader() {
        let lines = |text| JavaLines { rest: text }.collect::<Vec<_>>();
        assert_eq!(lines(""), Vec::<&str>::new());
        assert_eq!(lines("a"), vec!["a"]);
        assert_eq!(lines("a\n"), vec!["a"]);
        assert_eq!(lines("a\n\n"), vec!["a", ""]);
        assert_eq!(lines("a\r\nb\rc\n"), vec!["a", "b", "c"]);
        assert_eq!(lines("\r\n\n"), vec!["", ""]);
    }
}
