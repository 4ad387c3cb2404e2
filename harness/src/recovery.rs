//! Opening a partition directory, after a clean shutdown or a crash.
//!
//! [`FileLog::open`](crate::file_log::FileLog::open) runs these steps and returns a
//! [`RecoveryReport`] of everything it changed:
//!
//! 1. Leftovers are removed: `*.tmp` (an interrupted checkpoint write), `*.deleted` (an
//!    interrupted segment deletion) and `.index` files without their `.log`.
//! 2. The checkpoints are read: log start offset, high watermark, recovery point, leader epochs.
//!    A file that does not parse, or names another partition, is a
//!    [`FileLogError::Checkpoint`] naming the file and line, with one exception: a leader-epoch
//!    checkpoint that does not parse while the recovery point is at the log start offset is a
//!    log's first checkpoint cut by a crash (the log writes that one in place and raises the
//!    recovery point only after syncing it): it is rebuilt from the batches like a missing one
//!    ([`RecoveryReport::torn_first_epoch_checkpoint`]). A missing one takes its default
//!    (log start: the first segment's base offset, or 0; high watermark and recovery point: the
//!    log start offset) and is rewritten.
//! 3. Every segment is scanned, oldest first, Kafka's way: batches **from the recovery point on**
//!    (data that may be torn or never flushed) are verified whole: length, magic, CRC-32C, the
//!    control record type, and that each base offset follows the previous batch's last offset
//!    (and each segment's base offset the previous segment's end). **Below the recovery point**
//!    (data known to have been fsynced) only the 61-byte batch headers are read (several per
//!    read when batches are small, one small read per large batch) and checked for structure:
//!    length, magic, offsets in order, counts not negative; control batches, a few bytes each,
//!    are verified whole since their type is in their record. That is enough to rebuild the
//!    in-memory index, epoch cache and producer state, and costs a fraction of the log's size:
//!    a flipped payload byte below the recovery point is found when the batch is read (every
//!    read checks the CRC again) or by [`Verify::All`] (`kmirror verify`), which verifies every
//!    batch whole. The first failure:
//!    - **below the recovery point** (data known to have been fsynced) is an error,
//!      [`FileLogError::CorruptSegment`] or [`FileLogError::OffsetOrder`], naming the file and
//!      the byte position; nothing is repaired;
//!    - **at or after the recovery point** is a torn or unflushed tail: the segment file is cut
//!      at the start of the bad batch, later segments are deleted, and the report's
//!      [`RecoveryReport::truncated_tail`] says what was cut and why.
//!
//!    Segments wholly below the log start offset (left by a crash during a DeleteRecords)
//!    are deleted ([`RecoveryReport::removed_files`]); a first segment that
//!    starts after the log start offset is [`FileLogError::Inconsistent`]. The log start may
//!    lie inside the first segment: its batches are read from the segment's start.
//! 4. Offset indexes are checked against the verified batches; entries past a cut are dropped and
//!    an invalid index is rebuilt ([`RecoveryReport::rebuilt_indexes`]).
//! 5. The in-memory log (the kernel's `MemLog`: epoch cache, producer state, batch headers) is
//!    rebuilt by replaying every batch header as a follower append; a batch the contract refuses
//!    (a negative epoch, a write outside an open transaction, ...) is [`FileLogError::Replay`].
//! 6. The high watermark and recovery point are clamped to the recovered log end offset (both
//!    reported when they move); the leader-epoch checkpoint is compared with the cache the batches
//!    give, and rewritten when it differs (reported: a crash between a checkpoint write and the
//!    segment change it accompanies leaves it ahead or behind).
//! 7. Segments holding data from the old recovery point on are fsynced; the recovery point is
//!    then the log end offset, and every checkpoint that changed is rewritten atomically.

use std::collections::BTreeSet;
use std::fs::{self, File};
use std::io::ErrorKind;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use kmirror_kernel::batch::BatchHeader;
use kmirror_kernel::epoch_cache::{EpochCache, EpochEntry};
use kmirror_kernel::log::{LogView, PartitionLog};
use kmirror_kernel::mem_log::MemLog;
use kmirror_kernel::types::Offset;

use crate::checkpoint_files::{
    decode_offset_checkpoint, encode_offset_checkpoint, Persisted, LEADER_EPOCH_FILE,
};
use crate::error::{BatchError, CheckpointError, FileLogError};
use crate::log_config::{FileLogConfig, Verify};
use crate::log_dir_checkpoints::{CheckpointKind, Checkpoints};
use crate::record_batch::{
    batch_size_from_prefix, decode_header, CONTROL_FLAG_MASK, LOG_OVERHEAD, MAGIC_V2,
    RECORD_BATCH_OVERHEAD, TRANSACTIONAL_FLAG_MASK,
};
use crate::segment::{
    self, index_file_name, log_file_name, parse_file_name, BatchEntry, Segment, DELETED_SUFFIX,
    INDEX_SUFFIX, LOG_SUFFIX,
};
use crate::topic_partition::TopicPartition;

/// The tail recovery cut off: bytes at or after the recovery point that were not whole, valid
/// batches (a torn write, or data never flushed).
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct TruncatedTail {
    /// The segment file cut (or, when a whole segment was out of place, the first one deleted).
    pub file: PathBuf,
    /// The byte position of the cut in `file`.
    pub position: u64,
    /// The offset the first removed batch would have had: the new log end offset.
    pub first_lost_offset: Offset,
    /// Bytes removed, from `file` and from the deleted segments together.
    pub bytes_removed: u64,
    /// Segments after the cut, deleted (their `.log` paths).
    pub deleted_segments: Vec<PathBuf>,
    /// Why the bytes at the cut were not a valid batch.
    pub reason: String,
}

/// What [`FileLog::open`](crate::file_log::FileLog::open) found and changed.
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct RecoveryReport {
    /// The partition directory did not exist and was created.
    pub created: bool,
    /// The recovery point read from disk (or its default when the file was missing).
    pub recovery_point: Offset,
    /// The log start offset after recovery.
    pub log_start_offset: Offset,
    /// The log end offset after recovery.
    pub log_end_offset: Offset,
    /// The tail cut off, if any.
    pub truncated_tail: Option<TruncatedTail>,
    /// Leftover files removed (`*.tmp`, `*.deleted`, orphan `.index`, the segments of a
    /// DeleteRecords wholly below the log start).
    pub removed_files: Vec<PathBuf>,
    /// Offset indexes rebuilt because they did not match their segment.
    pub rebuilt_indexes: Vec<PathBuf>,
    /// Checkpoint files that were missing (their defaults were used and written).
    pub missing_checkpoints: Vec<&'static str>,
    /// `(checkpointed, recovered)` when the high watermark had to be clamped to the log.
    pub high_watermark_clamped: Option<(Offset, Offset)>,
    /// `(checkpointed, recovered log end)` when the recovery point lay past the log end.
    pub recovery_point_clamped: Option<(Offset, Offset)>,
    /// `(checkpointed, rebuilt from the batches)` when the leader-epoch checkpoint disagreed with
    /// the batches and was rewritten.
    pub epoch_checkpoint_repaired: Option<(Vec<EpochEntry>, Vec<EpochEntry>)>,
    /// Why the leader-epoch checkpoint did not parse, when it was a log's first checkpoint
    /// cut short by a crash (written in place, see [`FileLog`](crate::file_log::FileLog)) and
    /// so was rebuilt from the batches: no batch lay below the recovery point, so none was
    /// owed an entry.
    pub torn_first_epoch_checkpoint: Option<String>,
    /// The offset from which batches were verified whole (CRC included): the recovery point,
    /// or the log start offset with [`Verify::All`].
    pub verified_from: Offset,
    /// Bytes of segment files read (headers only below [`RecoveryReport::verified_from`]).
    pub scanned_bytes: u64,
    /// Bytes of batches whose CRC-32C was checked.
    pub verified_bytes: u64,
}

impl RecoveryReport {
    /// Whether opening changed nothing: no cut, no leftover, no rebuilt index, no missing
    /// checkpoint (on an existing directory), nothing clamped or repaired.
    pub fn is_clean(&self) -> bool {
        self.truncated_tail.is_none()
            && self.removed_files.is_empty()
            && self.rebuilt_indexes.is_empty()
            && (self.created || self.missing_checkpoints.is_empty())
            && self.high_watermark_clamped.is_none()
            && self.recovery_point_clamped.is_none()
            && self.epoch_checkpoint_repaired.is_none()
            && self.torn_first_epoch_checkpoint.is_none()
    }
}

/// What opening produced, handed to [`FileLog`](crate::file_log::FileLog).
pub(crate) struct Recovered {
    pub(crate) mem: MemLog,
    pub(crate) segments: Vec<Segment>,
    pub(crate) persisted: Persisted,
    pub(crate) report: RecoveryReport,
}

/// The first problem a segment scan found.
struct BadSpot {
    position: u64,
    expected: Offset,
    problem: Problem,
}

enum Problem {
    Batch(BatchError),
    Order { found: Offset },
}

impl BadSpot {
    /// The refusal for a problem below the recovery point in segment `file`: data that was
    /// flushed is never cut.
    fn below_recovery_point(self, file: PathBuf, recovery_point: Offset) -> FileLogError {
        match self.problem {
            Problem::Batch(source) => FileLogError::CorruptSegment {
                file,
                position: self.position,
                recovery_point,
                source,
            },
            Problem::Order { found } => FileLogError::OffsetOrder {
                file,
                position: self.position,
                expected: self.expected,
                found,
                below_recovery_point: true,
            },
        }
    }
}

impl Problem {
    fn describe(&self, expected: Offset) -> String {
        match self {
            Problem::Batch(e) => e.to_string(),
            Problem::Order { found } => {
                format!("batch at offset {found} does not follow offset {expected}")
            }
        }
    }
}

fn io_err<'a>(
    action: &'static str,
    path: &'a Path,
) -> impl FnOnce(std::io::Error) -> FileLogError + 'a {
    move |e| FileLogError::io(action, path, e)
}

/// Bytes read at once when only batch headers are needed (several small batches' headers, or
/// one large batch's).
const HEADER_WINDOW: usize = 8 << 10;
/// Bytes read at once when whole batches are verified.
const VERIFY_WINDOW: usize = 1 << 20;

/// Positional reads of a segment file through one reused buffer.
struct Window {
    file: File,
    len: u64,
    buf: Vec<u8>,
    start: u64,
    /// Bytes of `buf` read from `start` on.
    valid: usize,
}

impl Window {
    /// The `n` bytes at `pos` (which must lie within the file), reading `at_least` bytes (or up
    /// to the end of the file) when they are not in the buffer already.
    fn get(&mut self, pos: u64, n: usize, at_least: usize) -> std::io::Result<&[u8]> {
        let in_buf = pos >= self.start && pos + n as u64 <= self.start + self.valid as u64;
        if !in_buf {
            let want = (n.max(at_least) as u64).min(self.len - pos) as usize;
            if self.buf.len() < want {
                self.buf.resize(want, 0);
            }
            self.file.read_exact_at(&mut self.buf[..want], pos)?;
            self.start = pos;
            self.valid = want;
        }
        let from = (pos - self.start) as usize;
        Ok(&self.buf[from..from + n])
    }
}

/// Decodes the header of a batch without checking its CRC, from its first
/// [`RECORD_BATCH_OVERHEAD`] bytes (Kafka's `DefaultRecordBatch` layout), with the structural
/// checks of [`decode_header`] (magic, offsets and record count not negative). `None` for a
/// control batch, whose type is in its first record: the caller reads and verifies it whole.
fn decode_trusted_header(b: &[u8]) -> Result<Option<BatchHeader>, BatchError> {
    let i16_at = |p: usize| i16::from_be_bytes([b[p], b[p + 1]]);
    let i32_at = |p: usize| i32::from_be_bytes([b[p], b[p + 1], b[p + 2], b[p + 3]]);
    let i64_at = |p: usize| {
        let mut x = [0u8; 8];
        x.copy_from_slice(&b[p..p + 8]);
        i64::from_be_bytes(x)
    };
    let magic = b[16] as i8;
    if magic != MAGIC_V2 {
        return Err(BatchError::UnsupportedMagic {
            position: 16,
            magic,
        });
    }
    let attributes = i16_at(21);
    if attributes & CONTROL_FLAG_MASK != 0 {
        return Ok(None);
    }
    let field = |position: u64, field: &'static str, value: i64, reason: &'static str| {
        BatchError::InvalidField {
            position,
            field,
            value,
            reason,
        }
    };
    let base_offset = i64_at(0);
    if base_offset < 0 {
        return Err(field(
            0,
            "baseOffset",
            base_offset,
            "offsets are not negative",
        ));
    }
    let delta = i32_at(23);
    let last_offset = base_offset
        .checked_add(i64::from(delta))
        .filter(|_| delta >= 0)
        .ok_or_else(|| {
            field(
                23,
                "lastOffsetDelta",
                i64::from(delta),
                "a batch's last offset is not below its base offset and fits in int64",
            )
        })?;
    let records_count = i32_at(57);
    if records_count < 0 {
        return Err(field(
            57,
            "recordsCount",
            i64::from(records_count),
            "a record count is not negative",
        ));
    }
    Ok(Some(BatchHeader {
        base_offset,
        last_offset,
        partition_leader_epoch: i32_at(12),
        producer_id: i64_at(43),
        producer_epoch: i16_at(51),
        base_sequence: i32_at(53),
        is_transactional: attributes & TRANSACTIONAL_FLAG_MASK != 0,
        control: None,
    }))
}

/// What a segment scan found.
struct Scan {
    batches: Vec<BatchEntry>,
    len: u64,
    bad: Option<BadSpot>,
    /// Bytes whose CRC was checked.
    verified_bytes: u64,
}

/// Reads the batches of a segment file, stopping at the first bad one. Batches at or after
/// `verify_from` (an offset) are verified whole, CRC-32C included; batches before it only have
/// their header read and checked for structure (control batches, small, are verified whole).
fn scan_segment(
    path: &Path,
    mut expected: Offset,
    verify_from: Offset,
) -> Result<Scan, FileLogError> {
    let file = File::open(path).map_err(io_err("open", path))?;
    let len = file.metadata().map_err(io_err("stat", path))?.len();
    let mut window = Window {
        file,
        len,
        buf: Vec::new(),
        start: 0,
        valid: 0,
    };
    let mut batches = Vec::new();
    let mut verified_bytes = 0u64;
    let mut pos = 0u64;
    while pos < len {
        let remaining = len - pos;
        let bad = |problem| BadSpot {
            position: pos,
            expected,
            problem,
        };
        let done = |batches, bad, verified_bytes| {
            Ok(Scan {
                batches,
                len,
                bad: Some(bad),
                verified_bytes,
            })
        };
        if remaining < LOG_OVERHEAD as u64 {
            let e = BatchError::Truncated {
                position: pos,
                needed: LOG_OVERHEAD as u64,
                available: remaining,
            };
            return done(batches, bad(Problem::Batch(e)), verified_bytes);
        }
        let verify = expected >= verify_from;
        // Headers only: several small batches' headers per read, or just the header of a
        // large batch (batches are usually alike, so the last one's size predicts this one's).
        let at_least = match (verify, batches.last()) {
            (true, _) => VERIFY_WINDOW,
            (false, Some(last)) if last.size > HEADER_WINDOW as u64 => RECORD_BATCH_OVERHEAD,
            (false, _) => HEADER_WINDOW,
        };
        let prefix = window
            .get(pos, LOG_OVERHEAD, at_least)
            .map_err(io_err("read", path))?;
        let size = match batch_size_from_prefix(prefix) {
            Ok(size) => size as u64,
            Err(e) => return done(batches, bad(Problem::Batch(e.shifted(pos))), verified_bytes),
        };
        if size > remaining {
            let e = BatchError::Truncated {
                position: pos,
                needed: size,
                available: remaining,
            };
            return done(batches, bad(Problem::Batch(e)), verified_bytes);
        }
        let trusted = if verify {
            None
        } else {
            let head = window
                .get(pos, RECORD_BATCH_OVERHEAD, at_least)
                .map_err(io_err("read", path))?;
            match decode_trusted_header(head) {
                Ok(header) => header,
                Err(e) => {
                    return done(batches, bad(Problem::Batch(e.shifted(pos))), verified_bytes)
                }
            }
        };
        let header = match trusted {
            Some(header) => header,
            None => {
                let whole = window
                    .get(pos, size as usize, at_least)
                    .map_err(io_err("read", path))?;
                verified_bytes += size;
                match decode_header(whole) {
                    Ok((header, _)) => header,
                    Err(e) => {
                        return done(batches, bad(Problem::Batch(e.shifted(pos))), verified_bytes)
                    }
                }
            }
        };
        if header.base_offset != expected {
            let found = header.base_offset;
            return done(batches, bad(Problem::Order { found }), verified_bytes);
        }
        if trusted.is_some() && header.next_offset() > verify_from {
            // The recovery point is always at a batch boundary: a trusted header reaching past
            // it is damaged, and must not make the fsynced data after it look like a torn tail.
            let e = BatchError::InvalidField {
                position: pos + 23,
                field: "lastOffsetDelta",
                value: header.last_offset - header.base_offset,
                reason: "the batch would end past the recovery point, which lies between batches",
            };
            return done(batches, bad(Problem::Batch(e)), verified_bytes);
        }
        batches.push(BatchEntry {
            header,
            position: pos,
            size,
        });
        pos += size;
        expected = header.next_offset();
    }
    Ok(Scan {
        batches,
        len,
        bad: None,
        verified_bytes,
    })
}

fn read_checkpoint_text(dir: &Path, name: &str) -> Result<Option<String>, FileLogError> {
    let path = dir.join(name);
    match fs::read(&path) {
        Ok(bytes) => String::from_utf8(bytes).map(Some).map_err(|e| {
            FileLogError::Checkpoint(CheckpointError {
                file: path.clone(),
                line: 0,
                reason: format!("not UTF-8 text (byte {})", e.utf8_error().valid_up_to()),
            })
        }),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
        Err(e) => Err(FileLogError::io("read", path, e)),
    }
}

/// The partition's `kind` checkpoint: its log dir's entry (node layout) or, when it has none
/// (or in the single-partition layout), its own file.
fn read_offset_checkpoint(
    dir: &Path,
    kind: CheckpointKind,
    tp: &TopicPartition,
    checkpoints: &Checkpoints,
    report: &mut RecoveryReport,
) -> Result<Option<Offset>, FileLogError> {
    if let Checkpoints::LogDir(store) = checkpoints {
        if let Some(offset) = store.get(kind, tp) {
            return Ok(Some(offset));
        }
    }
    let name = kind.file_name();
    let Some(text) = read_checkpoint_text(dir, name)? else {
        report.missing_checkpoints.push(name);
        return Ok(None);
    };
    let path = dir.join(name);
    match decode_offset_checkpoint(&text, &path, tp)? {
        Some(offset) => Ok(Some(offset)),
        None => Err(FileLogError::Checkpoint(CheckpointError {
            file: path,
            line: 0,
            reason: format!("it holds no entry for {}", tp.dir_name()),
        })),
    }
}

fn read_epoch_checkpoint(
    dir: &Path,
    report: &mut RecoveryReport,
) -> Result<Option<EpochCache>, FileLogError> {
    let Some(text) = read_checkpoint_text(dir, LEADER_EPOCH_FILE)? else {
        report.missing_checkpoints.push(LEADER_EPOCH_FILE);
        return Ok(None);
    };
    kmirror_kernel::checkpoint::decode(&text)
        .map(Some)
        .map_err(|e| {
            use kmirror_kernel::checkpoint::CheckpointError as K;
            let line = match &e {
                K::BadVersion { line, .. }
                | K::UnparsableNumber { line, .. }
                | K::WrongFieldCount { line, .. }
                | K::CountMismatch { line, .. }
                | K::NegativeValue { line, .. }
                | K::NotIncreasing { line, .. } => *line,
            };
            FileLogError::Checkpoint(CheckpointError {
                file: dir.join(LEADER_EPOCH_FILE),
                line,
                reason: e.to_string(),
            })
        })
}

fn remove_file(path: &Path, report: &mut RecoveryReport) -> Result<(), FileLogError> {
    match fs::remove_file(path) {
        Ok(()) => {
            report.removed_files.push(path.to_path_buf());
            Ok(())
        }
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(()),
        Err(e) => Err(FileLogError::io("delete", path, e)),
    }
}

/// Removes leftovers and returns the base offsets of the segment files, ascending.
fn list_segments(dir: &Path, report: &mut RecoveryReport) -> Result<Vec<Offset>, FileLogError> {
    let mut logs = BTreeSet::new();
    let mut indexes = BTreeSet::new();
    let mut leftovers = Vec::new();
    for entry in fs::read_dir(dir).map_err(io_err("list", dir))? {
        let entry = entry.map_err(io_err("list", dir))?;
        let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
            continue;
        };
        if name.ends_with(".tmp") || name.ends_with(DELETED_SUFFIX) {
            leftovers.push(entry.path());
        } else if let Some(base) = parse_file_name(&name, LOG_SUFFIX) {
            logs.insert(base);
        } else if let Some(base) = parse_file_name(&name, INDEX_SUFFIX) {
            indexes.insert(base);
        }
    }
    for base in indexes.difference(&logs) {
        leftovers.push(dir.join(index_file_name(*base)));
    }
    leftovers.sort();
    let removed_any = !leftovers.is_empty();
    for path in leftovers {
        remove_file(&path, report)?;
    }
    if removed_any {
        segment::sync_dir(dir)?;
    }
    Ok(logs.into_iter().collect())
}

/// Refuses a leader-epoch checkpoint that disagrees with the batches below `below` (the
/// recovery point, or the log end if lower): the log writes the checkpoint before appending a batch of a new epoch and
/// after cutting a tail, so crashes only leave it wrong at or past the recovery point. A
/// disagreement below is corruption, most likely of a batch's `partitionLeaderEpoch`, which no
/// CRC covers.
fn check_epochs_below(
    dir: &Path,
    segments: &[Segment],
    on_disk: &EpochCache,
    log_start: Offset,
    below: Offset,
) -> Result<(), FileLogError> {
    // Both from the log start: the checkpoint is truncated from it after the log start
    // checkpoint is written (a crash between the two leaves it untruncated), the batches may
    // begin below it (a DeleteRecords inside the first segment).
    let mut on_disk = on_disk.clone();
    on_disk.truncate_from_start(log_start);
    let a: Vec<EpochEntry> = on_disk
        .entries()
        .filter(|e| e.start_offset < below)
        .collect();
    // The cache the batches give: Kafka's `assign` of each batch in order (one entry per run of
    // equal epochs, at the run's first offset, while epochs do not go down), over every
    // verified batch, since a later batch at a lower epoch removes entries below `below`. A
    // batch with a negative epoch is left to the replay, which reports it. (A crash between the
    // checkpoint and the batch of an append below the latest epoch is reported as a mismatch:
    // Kafka accepts such appends, kmirror's kernel never asks for one.)
    let mut derived = EpochCache::new();
    for header in segments.iter().flat_map(|s| s.batches()).map(|e| e.header) {
        if derived
            .assign(header.partition_leader_epoch, header.base_offset)
            .is_err()
        {
            break;
        }
    }
    derived.truncate_from_start(log_start);
    let b: Vec<EpochEntry> = derived
        .entries()
        .filter(|e| e.start_offset < below)
        .collect();
    let Some(i) = (0..a.len().max(b.len())).find(|&i| a.get(i) != b.get(i)) else {
        return Ok(());
    };
    let (checkpoint, batches) = (a.get(i).copied(), b.get(i).copied());
    let offset = [checkpoint, batches]
        .iter()
        .flatten()
        .map(|e| e.start_offset)
        .min()
        .unwrap_or(below);
    // The batch holding `offset` (or the last one before it).
    let (file, position) = segments
        .iter()
        .flat_map(|s| s.batches().iter().map(move |b| (s, b)))
        .take_while(|(_, b)| b.header.base_offset <= offset)
        .last()
        .map_or((PathBuf::new(), 0), |(s, b)| {
            (s.log_path().to_path_buf(), b.position)
        });
    Err(FileLogError::EpochMismatch {
        checkpoint_file: dir.join(LEADER_EPOCH_FILE),
        file,
        position,
        offset,
        recovery_point: below,
        checkpoint,
        batches,
    })
}

/// What [`inspect`] reads of a partition directory, changing nothing.
pub(crate) struct Inspected {
    /// The log as recovery would rebuild it (batch headers replayed), up to the first bad batch
    /// at or after the recovery point, which recovery would cut.
    pub(crate) mem: MemLog,
    /// Every batch kept, with the segment file holding it.
    pub(crate) batches: Vec<(PathBuf, BatchEntry)>,
    /// The bytes of those batches.
    pub(crate) bytes: u64,
}

/// The segments to read of a log starting at `log_start` (from its checkpoint, or its first
/// segment): all but those wholly below the log start, which a DeleteRecords deletes after
/// writing the checkpoint (a crash can leave them: the next segment starts at or below the log
/// start). The first kept segment must start at or below the log start: a later one means the
/// checkpoint is stale, [`FileLogError::Inconsistent`].
fn segments_from_log_start(
    dir: &Path,
    bases: &[Offset],
    log_start: Offset,
) -> Result<(Vec<Offset>, Vec<Offset>), FileLogError> {
    let below = bases.windows(2).take_while(|w| w[1] <= log_start).count();
    let (gone, kept) = bases.split_at(below);
    if let Some(&first) = kept.first() {
        if first > log_start {
            return Err(FileLogError::Inconsistent {
                dir: dir.to_path_buf(),
                reason: format!(
                    "the first segment {} starts at offset {first} but {} says the log starts \
                     at {log_start}; if the checkpoint is stale, delete it (or, in a node \
                     destination, its line for this partition) to start the log at the first \
                     segment",
                    log_file_name(first),
                    CheckpointKind::LogStartOffset.file_name()
                ),
            });
        }
    }
    Ok((gone.to_vec(), kept.to_vec()))
}

/// Replays `batches` (headers and their file) from `replay_start` into a log whose high
/// watermark is its checkpoint's (`ckpt_hw`, clamped into the log) and whose start is moved
/// up to `log_start` (a DeleteRecords inside the first segment).
fn replay<'a>(
    dir: &Path,
    replay_start: Offset,
    log_start: Offset,
    ckpt_hw: Option<Offset>,
    batches: impl Iterator<Item = (&'a Path, &'a BatchEntry)>,
) -> Result<(MemLog, Offset), FileLogError> {
    let mut mem = MemLog::starting_at(replay_start).ok_or_else(|| FileLogError::Inconsistent {
        dir: dir.to_path_buf(),
        reason: format!("log start offset {replay_start} is negative"),
    })?;
    for (file, entry) in batches {
        mem.append_as_follower(std::slice::from_ref(&entry.header))
            .map_err(|source| FileLogError::Replay {
                file: file.to_path_buf(),
                position: entry.position,
                offset: entry.header.base_offset,
                source,
            })?;
    }
    let leo = mem.log_end_offset();
    if log_start > leo {
        return Err(FileLogError::Inconsistent {
            dir: dir.to_path_buf(),
            reason: format!(
                "{} says the log starts at {log_start}, beyond its last batch (log end {leo})",
                CheckpointKind::LogStartOffset.file_name()
            ),
        });
    }
    let hw = ckpt_hw.unwrap_or(log_start).clamp(log_start, leo);
    mem.advance_high_watermark(hw)?;
    mem.increment_log_start_offset(log_start)?;
    Ok((mem, hw))
}

/// Reads `dir` as the log of `tp` the way [`recover`] does (the same checks, the same
/// refusals below the recovery point) **without changing anything**: no leftover removed, no
/// tail cut (the scan stops where recovery would cut), no index rebuilt, no checkpoint written,
/// no fsync. A missing directory is [`FileLogError::Inconsistent`].
pub(crate) fn inspect(
    dir: &Path,
    tp: &TopicPartition,
    checkpoints: &Checkpoints,
) -> Result<Inspected, FileLogError> {
    if !dir.is_dir() {
        return Err(FileLogError::Inconsistent {
            dir: dir.to_path_buf(),
            reason: "the partition directory is missing".into(),
        });
    }
    let mut bases = BTreeSet::new();
    for entry in fs::read_dir(dir).map_err(io_err("list", dir))? {
        let entry = entry.map_err(io_err("list", dir))?;
        if let Some(base) = entry
            .file_name()
            .to_str()
            .and_then(|n| parse_file_name(n, LOG_SUFFIX))
        {
            bases.insert(base);
        }
    }
    let mut report = RecoveryReport::default();
    let mut read = |kind| read_offset_checkpoint(dir, kind, tp, checkpoints, &mut report);
    let ckpt_log_start = read(CheckpointKind::LogStartOffset)?;
    let ckpt_hw = read(CheckpointKind::HighWatermark)?;
    let ckpt_rp = read(CheckpointKind::RecoveryPoint)?;
    let log_start = ckpt_log_start.or(bases.first().copied()).unwrap_or(0);
    let bases: Vec<Offset> = bases.into_iter().collect();
    let (_, bases) = segments_from_log_start(dir, &bases, log_start)?;
    let replay_start = bases.first().copied().unwrap_or(log_start);
    let recovery_point = ckpt_rp.unwrap_or(log_start).max(log_start);
    let mut batches = Vec::new();
    let mut expected = replay_start;
    for &base in &bases {
        let path = dir.join(log_file_name(base));
        if base != expected {
            if expected < recovery_point {
                return Err(FileLogError::OffsetOrder {
                    file: path,
                    position: 0,
                    expected,
                    found: base,
                    below_recovery_point: true,
                });
            }
            break;
        }
        let scan = scan_segment(&path, expected, recovery_point)?;
        for entry in &scan.batches {
            batches.push((path.clone(), *entry));
        }
        if let Some(bad) = scan.bad {
            if bad.expected < recovery_point {
                return Err(bad.below_recovery_point(path, recovery_point));
            }
            break;
        }
        expected = scan.batches.last().map_or(base, |b| b.header.next_offset());
    }
    let entries = batches.iter().map(|(file, entry)| (file.as_path(), entry));
    let (mem, _) = replay(dir, replay_start, log_start, ckpt_hw, entries)?;
    let bytes = batches.iter().map(|(_, e)| e.size).sum();
    Ok(Inspected {
        mem,
        batches,
        bytes,
    })
}

/// Opens `dir` as the log of `tp`: see the [module documentation](self).
pub(crate) fn recover(
    dir: &Path,
    tp: &TopicPartition,
    config: &FileLogConfig,
    verify: Verify,
    checkpoints: &Checkpoints,
) -> Result<Recovered, FileLogError> {
    let mut report = RecoveryReport::default();
    if !dir.exists() {
        fs::create_dir_all(dir).map_err(io_err("create directory", dir))?;
        if let Some(parent) = dir.parent() {
            segment::sync_dir(parent)?;
        }
        report.created = true;
    }
    let bases = list_segments(dir, &mut report)?;

    let mut read = |kind| read_offset_checkpoint(dir, kind, tp, checkpoints, &mut report);
    let ckpt_log_start = read(CheckpointKind::LogStartOffset)?;
    let ckpt_hw = read(CheckpointKind::HighWatermark)?;
    let ckpt_rp = read(CheckpointKind::RecoveryPoint)?;
    let ckpt_epochs = read_epoch_checkpoint(dir, &mut report);
    if report.created {
        report.missing_checkpoints.clear();
    }

    let log_start = ckpt_log_start.or(bases.first().copied()).unwrap_or(0);
    let (gone, bases) = segments_from_log_start(dir, &bases, log_start)?;
    for base in gone {
        for path in [
            dir.join(log_file_name(base)),
            dir.join(index_file_name(base)),
        ] {
            match fs::remove_file(&path) {
                Ok(()) => report.removed_files.push(path),
                Err(e) if e.kind() == ErrorKind::NotFound => {}
                Err(e) => return Err(FileLogError::io("delete", path, e)),
            }
        }
    }
    let replay_start = bases.first().copied().unwrap_or(log_start);
    let recovery_point = ckpt_rp.unwrap_or(log_start).max(log_start);
    report.recovery_point = recovery_point;
    // A checkpoint that does not parse is damage, unless no batch lies below the recovery
    // point: then it can only be a first checkpoint written in place and cut by a crash (the
    // log raises its recovery point only after that write is synced), and the batches say
    // everything it would.
    let ckpt_epochs = match ckpt_epochs {
        Err(FileLogError::Checkpoint(e)) if recovery_point <= log_start => {
            report.torn_first_epoch_checkpoint = Some(e.reason);
            None
        }
        other => other?,
    };

    // Verify every segment, cutting a bad tail at or after the recovery point.
    let verify_from = match verify {
        Verify::FromRecoveryPoint => recovery_point,
        Verify::All => replay_start,
    };
    report.verified_from = verify_from;
    let mut verified: Vec<(Offset, Vec<BatchEntry>)> = Vec::new();
    let mut expected = replay_start;
    for (i, &base) in bases.iter().enumerate() {
        let path = dir.join(log_file_name(base));
        let in_place = base == expected;
        let (batches, len, bad) = if in_place {
            let scan = scan_segment(&path, expected, verify_from)?;
            report.verified_bytes += scan.verified_bytes;
            report.scanned_bytes += scan.len;
            (scan.batches, scan.len, scan.bad)
        } else {
            let bad = BadSpot {
                position: 0,
                expected,
                problem: Problem::Order { found: base },
            };
            (Vec::new(), 0, Some(bad))
        };
        if let Some(bad) = bad {
            if bad.expected < recovery_point {
                return Err(bad.below_recovery_point(path, recovery_point));
            }
            let mut tail = TruncatedTail {
                file: path.clone(),
                position: bad.position,
                first_lost_offset: bad.expected,
                bytes_removed: len - bad.position,
                deleted_segments: Vec::new(),
                reason: bad.problem.describe(bad.expected),
            };
            // An out-of-place segment goes with the later ones; a bad batch cuts its file.
            let first_deleted = if in_place { i + 1 } else { i };
            for &later in bases[first_deleted..].iter().rev() {
                let later_path = dir.join(log_file_name(later));
                tail.bytes_removed += fs::metadata(&later_path)
                    .map_err(io_err("stat", &later_path))?
                    .len();
                fs::remove_file(&later_path).map_err(io_err("delete", &later_path))?;
                let index = dir.join(index_file_name(later));
                match fs::remove_file(&index) {
                    Ok(()) => {}
                    Err(e) if e.kind() == ErrorKind::NotFound => {}
                    Err(e) => return Err(FileLogError::io("delete", index, e)),
                }
                tail.deleted_segments.insert(0, later_path);
            }
            if in_place {
                let file = fs::OpenOptions::new()
                    .write(true)
                    .open(&path)
                    .map_err(io_err("open", &path))?;
                file.set_len(bad.position)
                    .map_err(io_err("truncate", &path))?;
                crate::durability::sync_all(&file, &path)?;
                verified.push((base, batches));
            }
            segment::sync_dir(dir)?;
            report.truncated_tail = Some(tail);
            break;
        }
        expected = batches.last().map_or(base, |b| b.header.next_offset());
        verified.push((base, batches));
    }

    // Open the segments, checking their indexes; an empty directory gets its first segment.
    let mut segments = Vec::with_capacity(verified.len().max(1));
    for (base, batches) in verified {
        let (seg, rebuilt) =
            Segment::open_verified(dir, base, batches, config.index_interval_bytes)?;
        if rebuilt {
            report.rebuilt_indexes.push(seg.index_path().to_path_buf());
        }
        segments.push(seg);
    }
    // A log created here, empty, is made durable by the caller's barrier when it defers
    // durability (a node creating many partitions at once): nothing in it can be lost but the
    // files themselves, which the next open creates again.
    let created_empty = segments.is_empty();
    let defer = created_empty && config.deferred_durability;
    if created_empty {
        segments.push(Segment::create(
            dir,
            log_start,
            config.index_interval_bytes,
        )?);
        if !defer {
            segment::sync_dir(dir)?;
        }
    }

    // Check the epoch checkpoint against the batches before replaying them, so that a damaged
    // epoch is reported at its own batch rather than where the replay trips over it.
    if let Some(on_disk) = &ckpt_epochs {
        let end = segments.last().map_or(log_start, Segment::next_offset);
        check_epochs_below(dir, &segments, on_disk, log_start, recovery_point.min(end))?;
    }

    // Rebuild the in-memory log by replay.
    let entries = segments
        .iter()
        .flat_map(|seg| seg.batches().iter().map(move |e| (seg.log_path(), e)));
    let (mem, hw) = replay(dir, replay_start, log_start, ckpt_hw, entries)?;
    let leo = mem.log_end_offset();
    let hw_wanted = ckpt_hw.unwrap_or(log_start);
    if hw != hw_wanted && ckpt_hw.is_some() {
        report.high_watermark_clamped = Some((hw_wanted, hw));
    }
    if recovery_point > leo {
        report.recovery_point_clamped = Some((recovery_point, leo));
    }
    if let Some(on_disk) = &ckpt_epochs {
        if on_disk != mem.epoch_cache() {
            report.epoch_checkpoint_repaired = Some((
                on_disk.entries().collect(),
                mem.epoch_cache().entries().collect(),
            ));
        }
    }

    // Everything verified is made durable; the recovery point moves to the log end.
    for seg in &segments {
        if !defer && (seg.next_offset() > recovery_point || seg.is_empty()) {
            seg.sync()?;
        }
    }
    let persisted = Persisted {
        log_start_offset: log_start,
        high_watermark: hw,
        recovery_point: leo,
        epoch_cache: mem.epoch_cache().clone(),
    };
    // In the node layout a repair that lowers (or moves) an offset on disk is written at once;
    // a raise waits for the log dir's next write, as the log's own raises do.
    let write_offset = |kind: CheckpointKind, offset: Offset| match checkpoints {
        Checkpoints::PerPartition => segment::write_atomically(
            dir,
            kind.file_name(),
            encode_offset_checkpoint(tp, offset).as_bytes(),
        ),
        Checkpoints::LogDir(store) => {
            let on_disk = store.on_disk(kind, tp);
            let lowered = on_disk.is_some_and(|o| o > offset);
            if lowered || kind == CheckpointKind::LogStartOffset && on_disk.is_some() {
                store.set_now(kind, tp, offset)
            } else {
                store.set(kind, tp, offset);
                Ok(())
            }
        }
    };
    for (kind, read, offset) in [
        (CheckpointKind::LogStartOffset, ckpt_log_start, log_start),
        (CheckpointKind::HighWatermark, ckpt_hw, hw),
        (CheckpointKind::RecoveryPoint, ckpt_rp, leo),
    ] {
        // A partition read from per-partition files (the older node layout) gets its entries
        // in the log dir's files even when they do not change.
        let recorded = match checkpoints {
            Checkpoints::PerPartition => read,
            Checkpoints::LogDir(store) => store.get(kind, tp),
        };
        if recorded != Some(offset) {
            write_offset(kind, offset)?;
        }
    }
    if ckpt_epochs.as_ref() != Some(mem.epoch_cache()) {
        let contents = kmirror_kernel::checkpoint::encode(mem.epoch_cache());
        if defer {
            // Empty: a torn copy is told from a damaged one (nothing lies below the recovery
            // point) and rebuilt.
            segment::write_tmp(dir, LEADER_EPOCH_FILE, contents.as_bytes())?;
            segment::rename_tmp(dir, LEADER_EPOCH_FILE)?;
        } else {
            segment::write_atomically(dir, LEADER_EPOCH_FILE, contents.as_bytes())?;
        }
    }
    report.log_start_offset = log_start;
    report.log_end_offset = leo;
    Ok(Recovered {
        mem,
        segments,
        persisted,
        report,
    })
}
