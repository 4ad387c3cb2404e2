//! One log segment: a `<base offset>.log` file of record batches and its sparse offset index
//! `<base offset>.index`, as Kafka lays them out.
//!
//! - File names: the base offset (the first offset the segment may hold) as 20 decimal digits,
//!   zero-padded (`00000000000000000042.log`), as Kafka's `LogFileUtils.filenamePrefixFromOffset`.
//! - `.log`: record batches (magic 2) back to back, nothing else.
//! - `.index`: Kafka's `OffsetIndex`: 8-byte entries, `int32 relative offset` (offset minus the
//!   base offset) and `int32 position` (byte position in the `.log` file), both big-endian,
//!   strictly increasing. As in Kafka's `LogSegment.append`, an entry `(batch last offset, batch
//!   start position)` is added before appending a batch once more than `index_interval_bytes`
//!   were appended since the last entry; the first batch of a segment gets no entry. Unlike
//!   Kafka, the file is not preallocated: it holds exactly its entries (Kafka reads such a file
//!   fine). The index is derived data: it is written with the segment but only fsynced with it
//!   at a roll or flush; a missing entry merely makes it sparser.
//!
//! The segment keeps the headers and positions of its batches in memory (the harness serves
//! reads from them); the index exists so that Kafka's tools find what they expect.
//!
//! **One open file per segment.** The `.log` file stays open; the `.index` file is opened when
//! an entry is first written or cut, as Kafka holds no descriptor for its memory-mapped
//! indexes. A node of 10,000 small partitions (whose segments never reach the index interval)
//! thus holds 10,000 descriptors for its logs, not 20,000.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use kmirror_kernel::batch::BatchHeader;
use kmirror_kernel::types::Offset;

use crate::durability;
use crate::error::FileLogError;
use crate::fault;
use crate::read_buffer::ReadBuffer;
use crate::record_batch::RawBatch;
use crate::writeback;

/// Suffix of segment data files.
pub const LOG_SUFFIX: &str = ".log";
/// Suffix of offset index files.
pub const INDEX_SUFFIX: &str = ".index";
/// Suffix Kafka gives files scheduled for deletion (`<name>.deleted`).
pub const DELETED_SUFFIX: &str = ".deleted";
/// Size of one offset index entry.
pub const INDEX_ENTRY_SIZE: usize = 8;
/// The largest position a segment may hold (Kafka's index positions are `int32`).
pub const MAX_SEGMENT_POSITION: u64 = i32::MAX as u64;

/// `<20-digit base offset>.log`.
pub fn log_file_name(base_offset: Offset) -> String {
    format!("{base_offset:020}{LOG_SUFFIX}")
}

/// `<20-digit base offset>.index`.
pub fn index_file_name(base_offset: Offset) -> String {
    format!("{base_offset:020}{INDEX_SUFFIX}")
}

/// The base offset of a file named `<20 digits><suffix>`, if `name` is such a name.
pub fn parse_file_name(name: &str, suffix: &str) -> Option<Offset> {
    let digits = name.strip_suffix(suffix)?;
    if digits.len() != 20 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// One entry of the offset index.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct IndexEntry {
    /// Offset minus the segment's base offset (the last offset of the indexed batch).
    pub relative_offset: u32,
    /// Byte position of the batch in the `.log` file.
    pub position: u32,
}

impl IndexEntry {
    /// The 8 bytes of the entry.
    pub fn to_bytes(self) -> [u8; INDEX_ENTRY_SIZE] {
        let mut b = [0u8; INDEX_ENTRY_SIZE];
        b[..4].copy_from_slice(&self.relative_offset.to_be_bytes());
        b[4..].copy_from_slice(&self.position.to_be_bytes());
        b
    }

    /// Decodes an entry from 8 bytes.
    pub fn from_bytes(b: [u8; INDEX_ENTRY_SIZE]) -> Self {
        IndexEntry {
            relative_offset: u32::from_be_bytes([b[0], b[1], b[2], b[3]]),
            position: u32::from_be_bytes([b[4], b[5], b[6], b[7]]),
        }
    }
}

/// A batch of a segment: its header and where its bytes are.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct BatchEntry {
    /// The batch's header.
    pub header: BatchHeader,
    /// Byte position in the `.log` file.
    pub position: u64,
    /// Size in bytes.
    pub size: u64,
}

impl BatchEntry {
    /// The position after the batch.
    pub fn end(&self) -> u64 {
        self.position + self.size
    }
}

/// An open segment.
#[derive(Debug)]
pub struct Segment {
    base_offset: Offset,
    log_path: PathBuf,
    index_path: PathBuf,
    /// Shared with the file regions a Fetch answer sends ([`crate::file_region`]).
    log: Arc<File>,
    /// The `.index` file once opened ([`index_file`]); `None` until this segment writes it.
    index: Option<File>,
    batches: Vec<BatchEntry>,
    index_entries: Vec<IndexEntry>,
    index_interval_bytes: u64,
    /// Where the `.log` file's last early writeback ended ([`Segment::start_writeback`]).
    writeback_from: u64,
}

/// The segment's `.index` file (at `path`), opened into `slot` on first use.
fn index_file<'a>(slot: &'a mut Option<File>, path: &Path) -> Result<&'a File, FileLogError> {
    if slot.is_none() {
        *slot = Some(open_rw(path, false)?);
    }
    Ok(slot.as_ref().expect("just opened"))
}

fn open_rw(path: &Path, create_new: bool) -> Result<File, FileLogError> {
    let action = if create_new { "create" } else { "open" };
    if create_new {
        fault::gate(path).map_err(|e| FileLogError::io(action, path, e))?;
    }
    OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(create_new)
        .open(path)
        .map_err(|e| FileLogError::io(action, path, e))
}

impl Segment {
    /// Creates an empty segment at `base_offset` in `dir`; fails if its files exist.
    pub fn create(
        dir: &Path,
        base_offset: Offset,
        index_interval_bytes: u64,
    ) -> Result<Segment, FileLogError> {
        let log_path = dir.join(log_file_name(base_offset));
        let index_path = dir.join(index_file_name(base_offset));
        let log = open_rw(&log_path, true)?;
        // Created now (Kafka's tools expect it), opened again when first written.
        if let Err(e) = open_rw(&index_path, true) {
            let _ = fs::remove_file(&log_path);
            return Err(e);
        }
        Ok(Segment {
            base_offset,
            log_path,
            index_path,
            log: Arc::new(log),
            index: None,
            batches: Vec::new(),
            index_entries: Vec::new(),
            index_interval_bytes,
            writeback_from: 0,
        })
    }

    /// Opens the existing segment at `base_offset` in `dir` whose batches were verified by
    /// recovery, with its `.log` file already cut to the end of `batches`. The `.index` file is
    /// created if missing, then checked against `batches`: entries past the last batch are
    /// dropped; an index that is not a valid sparse index of these batches is rebuilt. Returns
    /// the segment and whether the index was rebuilt.
    pub fn open_verified(
        dir: &Path,
        base_offset: Offset,
        batches: Vec<BatchEntry>,
        index_interval_bytes: u64,
    ) -> Result<(Segment, bool), FileLogError> {
        let log_path = dir.join(log_file_name(base_offset));
        let index_path = dir.join(index_file_name(base_offset));
        let log = open_rw(&log_path, false)?;
        OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .open(&index_path)
            .map_err(|e| FileLogError::io("open", &index_path, e))?;
        let raw = fs::read(&index_path).map_err(|e| FileLogError::io("read", &index_path, e))?;
        let mut segment = Segment {
            base_offset,
            log_path,
            index_path,
            log: Arc::new(log),
            index: None,
            batches,
            index_entries: Vec::new(),
            index_interval_bytes,
            writeback_from: 0,
        };
        segment.writeback_from = segment.size() - segment.size() % writeback::PAGE_BYTES;
        let rebuilt = match segment.check_index(&raw) {
            Some(entries) => {
                let keep = entries.len() * INDEX_ENTRY_SIZE;
                segment.index_entries = entries;
                if keep != raw.len() {
                    segment.set_index_len()?;
                }
                false
            }
            None => {
                segment.rebuild_index()?;
                true
            }
        };
        Ok((segment, rebuilt))
    }

    /// The entries of `raw` if it is a valid sparse index of this segment's batches (entries
    /// strictly increasing, each naming the start position and last offset of one batch),
    /// ignoring entries at or past the end of the last batch (left by a cut tail).
    fn check_index(&self, raw: &[u8]) -> Option<Vec<IndexEntry>> {
        if !raw.chunks_exact(INDEX_ENTRY_SIZE).remainder().is_empty() {
            return None;
        }
        let end = self.size();
        let mut entries = Vec::with_capacity(raw.len() / INDEX_ENTRY_SIZE);
        for chunk in raw.chunks_exact(INDEX_ENTRY_SIZE) {
            let mut b = [0u8; INDEX_ENTRY_SIZE];
            b.copy_from_slice(chunk);
            let entry = IndexEntry::from_bytes(b);
            if u64::from(entry.position) >= end {
                break;
            }
            if let Some(prev) = entries.last() {
                let prev: &IndexEntry = prev;
                if entry.relative_offset <= prev.relative_offset || entry.position <= prev.position
                {
                    return None;
                }
            }
            let i = self
                .batches
                .binary_search_by_key(&u64::from(entry.position), |b| b.position)
                .ok()?;
            let batch = &self.batches[i];
            if batch.header.last_offset - self.base_offset != i64::from(entry.relative_offset) {
                return None;
            }
            entries.push(entry);
        }
        Some(entries)
    }

    /// Rewrites the index from the batches with the interval rule.
    fn rebuild_index(&mut self) -> Result<(), FileLogError> {
        self.index_entries.clear();
        let mut since = 0u64;
        for batch in &self.batches {
            if since > self.index_interval_bytes {
                self.index_entries.push(IndexEntry {
                    relative_offset: (batch.header.last_offset - self.base_offset) as u32,
                    position: batch.position as u32,
                });
                since = 0;
            }
            since += batch.size;
        }
        let bytes: Vec<u8> = self
            .index_entries
            .iter()
            .flat_map(|e| e.to_bytes())
            .collect();
        let index = index_file(&mut self.index, &self.index_path)?;
        fault::gate(&self.index_path)
            .and_then(|()| index.set_len(0))
            .and_then(|()| fault::write_at(index, &self.index_path, &bytes, 0))
            .map_err(|e| FileLogError::io("rewrite", &self.index_path, e))
    }

    fn set_index_len(&mut self) -> Result<(), FileLogError> {
        let len = (self.index_entries.len() * INDEX_ENTRY_SIZE) as u64;
        let index = index_file(&mut self.index, &self.index_path)?;
        fault::gate(&self.index_path)
            .and_then(|()| index.set_len(len))
            .map_err(|e| FileLogError::io("truncate", &self.index_path, e))
    }

    /// The first offset the segment may hold.
    pub fn base_offset(&self) -> Offset {
        self.base_offset
    }

    /// The `.log` file.
    pub fn log_path(&self) -> &Path {
        &self.log_path
    }

    /// The `.index` file.
    pub fn index_path(&self) -> &Path {
        &self.index_path
    }

    /// The `.log` file, shared: a file region sent after this segment is truncated or deleted
    /// still reads the same file.
    pub fn shared_file(&self) -> Arc<File> {
        Arc::clone(&self.log)
    }

    /// The batches, oldest first.
    pub fn batches(&self) -> &[BatchEntry] {
        &self.batches
    }

    /// The index entries, as written to the `.index` file.
    pub fn index_entries(&self) -> &[IndexEntry] {
        &self.index_entries
    }

    /// Size of the `.log` file in bytes.
    pub fn size(&self) -> u64 {
        self.batches.last().map_or(0, BatchEntry::end)
    }

    /// Whether the segment holds no batch.
    pub fn is_empty(&self) -> bool {
        self.batches.is_empty()
    }

    /// The offset after the last batch, or the base offset if the segment is empty.
    pub fn next_offset(&self) -> Offset {
        self.batches
            .last()
            .map_or(self.base_offset, |b| b.header.next_offset())
    }

    /// Whether `batch` may still go into this segment without exceeding `max_bytes` (an empty
    /// segment takes any batch) or the 32-bit relative offsets and positions of the index.
    pub fn fits(&self, batch: &RawBatch, max_bytes: u64) -> bool {
        let size = batch.size_in_bytes() as u64;
        let relative_ok = batch.header().last_offset - self.base_offset <= i32::MAX as i64;
        if self.is_empty() {
            return relative_ok;
        }
        relative_ok && self.size() + size <= max_bytes && self.size() + size <= MAX_SEGMENT_POSITION
    }

    /// Appends `batch`'s bytes at the end of the `.log` file (and an index entry when due).
    /// Not fsynced: see [`Segment::sync`].
    pub fn append(&mut self, batch: &RawBatch) -> Result<BatchEntry, FileLogError> {
        let header = batch.header();
        let position = self.size();
        let since = position
            - self
                .index_entries
                .last()
                .map_or(0, |e| u64::from(e.position));
        let entry = BatchEntry {
            header,
            position,
            size: batch.size_in_bytes() as u64,
        };
        fault::write_at(&self.log, &self.log_path, batch.bytes(), position)
            .map_err(|e| FileLogError::io("append to", &self.log_path, e))?;
        if since > self.index_interval_bytes && !self.batches.is_empty() {
            let ie = IndexEntry {
                relative_offset: (header.last_offset - self.base_offset) as u32,
                position: position as u32,
            };
            let at = (self.index_entries.len() * INDEX_ENTRY_SIZE) as u64;
            let index = index_file(&mut self.index, &self.index_path)?;
            fault::write_at(index, &self.index_path, &ie.to_bytes(), at)
                .map_err(|e| FileLogError::io("append to", &self.index_path, e))?;
            self.index_entries.push(ie);
        }
        self.batches.push(entry);
        Ok(entry)
    }

    /// How many of `batches` (consecutive, in order) fit into this segment one after another
    /// without exceeding `max_bytes` (see [`Segment::fits`]): an empty segment takes at least the
    /// first one when its relative offsets fit.
    pub fn fitting_prefix(&self, batches: &[RawBatch], max_bytes: u64) -> usize {
        let mut size = self.size();
        let mut empty = self.is_empty();
        for (i, batch) in batches.iter().enumerate() {
            let len = batch.size_in_bytes() as u64;
            let relative_ok = batch.header().last_offset - self.base_offset <= i32::MAX as i64;
            let fits = relative_ok
                && (empty || (size + len <= max_bytes && size + len <= MAX_SEGMENT_POSITION));
            if !fits {
                return i;
            }
            size += len;
            empty = false;
        }
        batches.len()
    }

    /// Appends `batches` (which must all fit, see [`Segment::fitting_prefix`]) at the end of the
    /// `.log` file with one vectored write, and their due index entries with one write: a fetch
    /// round's batches cost one system call, not one per batch. Not fsynced: see
    /// [`Segment::sync`]. On an error nothing is recorded in memory (the bytes written so far
    /// are a torn tail that recovery cuts).
    pub fn append_all(&mut self, batches: &[RawBatch]) -> Result<(), FileLogError> {
        let start = self.size();
        let mut position = start;
        let mut last_indexed = self
            .index_entries
            .last()
            .map_or(0, |e| u64::from(e.position));
        let mut has_batches = !self.batches.is_empty();
        let mut entries = Vec::with_capacity(batches.len());
        let mut index_entries = Vec::new();
        for batch in batches {
            let header = batch.header();
            let size = batch.size_in_bytes() as u64;
            if position - last_indexed > self.index_interval_bytes && has_batches {
                index_entries.push(IndexEntry {
                    relative_offset: (header.last_offset - self.base_offset) as u32,
                    position: position as u32,
                });
                last_indexed = position;
            }
            entries.push(BatchEntry {
                header,
                position,
                size,
            });
            position += size;
            has_batches = true;
        }
        let parts: Vec<&[u8]> = batches.iter().map(RawBatch::bytes).collect();
        fault::write_vectored_at(&self.log, &self.log_path, &parts, start)
            .map_err(|e| FileLogError::io("append to", &self.log_path, e))?;
        if !index_entries.is_empty() {
            let bytes: Vec<u8> = index_entries.iter().flat_map(|e| e.to_bytes()).collect();
            let at = (self.index_entries.len() * INDEX_ENTRY_SIZE) as u64;
            let index = index_file(&mut self.index, &self.index_path)?;
            fault::write_at(index, &self.index_path, &bytes, at)
                .map_err(|e| FileLogError::io("append to", &self.index_path, e))?;
        }
        self.batches.extend(entries);
        self.index_entries.extend(index_entries);
        Ok(())
    }

    /// Starts the writeback of the `.log` file's whole pages appended since the last start, once
    /// there are enough of them ([`writeback`]); a promise of nothing, so that a later
    /// [`Segment::sync_log`] waits less.
    pub fn start_writeback(&mut self) {
        if let Some((from, len)) = writeback::range_to_start(self.writeback_from, self.size()) {
            writeback::start(&self.log, from, len);
            self.writeback_from = from + len;
        }
    }

    /// Where the last early writeback of the `.log` file ended (a page boundary).
    pub fn writeback_started_to(&self) -> u64 {
        self.writeback_from
    }

    /// Flushes the `.log` file's data to disk (`fdatasync`).
    pub fn sync_log(&self) -> Result<(), FileLogError> {
        durability::sync_data(&self.log, &self.log_path)
    }

    /// Flushes both files to disk (the `.index` file if this segment opened it: one it never
    /// wrote holds nothing of this process's).
    pub fn sync(&self) -> Result<(), FileLogError> {
        self.sync_log()?;
        match &self.index {
            Some(index) => durability::sync_data(index, &self.index_path),
            None => Ok(()),
        }
    }

    /// Keeps the first `keep` batches: cuts the `.log` file after them and drops index entries
    /// of removed batches, then fsyncs both files.
    pub fn truncate_batches(&mut self, keep: usize) -> Result<(), FileLogError> {
        if keep >= self.batches.len() {
            return Ok(());
        }
        fault::gate(&self.log_path).map_err(|e| FileLogError::io("truncate", &self.log_path, e))?;
        self.batches.truncate(keep);
        let end = self.size();
        self.log
            .set_len(end)
            .map_err(|e| FileLogError::io("truncate", &self.log_path, e))?;
        self.index_entries.retain(|e| u64::from(e.position) < end);
        self.writeback_from = self.writeback_from.min(end - end % writeback::PAGE_BYTES);
        self.set_index_len()?;
        self.sync()
    }

    /// Reads the bytes of `entry` (one of this segment's batches) and parses them, checking
    /// the CRC again. A parse failure is reported as corruption of this file at that position.
    pub fn read_batch(&self, entry: &BatchEntry) -> Result<RawBatch, FileLogError> {
        let mut buf = vec![0u8; entry.size as usize];
        self.log
            .read_exact_at(&mut buf, entry.position)
            .map_err(|e| FileLogError::io("read", &self.log_path, e))?;
        self.check_read(entry, buf.into())
    }

    /// Reads the bytes of `entries` (consecutive batches of this segment) with one read into
    /// `buf` and parses each batch, checking its CRC again; like [`Segment::read_batch`]
    /// otherwise. The batches are slices of the read (see [`ReadBuffer`]): a fetch costs one
    /// `pread` and no copy or allocation per batch.
    pub fn read_batches(
        &self,
        entries: &[BatchEntry],
        buf: &mut ReadBuffer,
        out: &mut Vec<RawBatch>,
    ) -> Result<(), FileLogError> {
        let (Some(first), Some(last)) = (entries.first(), entries.last()) else {
            return Ok(());
        };
        let start = first.position;
        let len = (last.end() - start) as usize;
        let bytes = buf
            .read(len, |dest| self.log.read_exact_at(dest, start))
            .map_err(|e| FileLogError::io("read", &self.log_path, e))?;
        for entry in entries {
            let from = (entry.position - start) as usize;
            out.push(self.check_read(entry, bytes.slice(from..from + entry.size as usize))?);
        }
        Ok(())
    }

    fn check_read(&self, entry: &BatchEntry, bytes: Bytes) -> Result<RawBatch, FileLogError> {
        let batch = RawBatch::parse(bytes).map_err(|source| FileLogError::CorruptRead {
            file: self.log_path.clone(),
            position: entry.position,
            detail: format!(
                "{} (opening a log checks CRCs only from its recovery point on; `kmirror verify` \
                 checks every batch)",
                source.shifted(entry.position)
            ),
        })?;
        if batch.header() != entry.header {
            return Err(FileLogError::CorruptRead {
                file: self.log_path.clone(),
                position: entry.position,
                detail: format!("expected {:?}, found {:?}", entry.header, batch.header()),
            });
        }
        Ok(batch)
    }

    /// Kafka's `OffsetIndex.lookup`: the greatest entry whose offset is at or below `offset`,
    /// as `(offset, position)`, or `(base offset, 0)` when there is none.
    pub fn index_lookup(&self, offset: Offset) -> (Offset, u64) {
        let i = self
            .index_entries
            .partition_point(|e| self.base_offset + i64::from(e.relative_offset) <= offset);
        match i.checked_sub(1).map(|i| self.index_entries[i]) {
            Some(e) => (
                self.base_offset + i64::from(e.relative_offset),
                u64::from(e.position),
            ),
            None => (self.base_offset, 0),
        }
    }

    /// Renames both files to `<name>.deleted` (Kafka's marker of files being deleted), so a
    /// crash part-way through removing segments leaves files recovery knows to delete.
    pub fn mark_deleted(&self) -> Result<(), FileLogError> {
        for path in [&self.log_path, &self.index_path] {
            let mut target = path.clone().into_os_string();
            target.push(DELETED_SUFFIX);
            fault::gate(path).map_err(|e| FileLogError::io("rename", path, e))?;
            match fs::rename(path, &target) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound && path == &self.index_path => {}
                Err(e) => return Err(FileLogError::io("rename", path, e)),
            }
        }
        Ok(())
    }

    /// Deletes both files of the segment.
    pub fn delete(self) -> Result<(), FileLogError> {
        for path in [&self.log_path, &self.index_path] {
            fault::gate(path).map_err(|e| FileLogError::io("delete", path, e))?;
            match fs::remove_file(path) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(FileLogError::io("delete", path, e)),
            }
        }
        Ok(())
    }
}

/// Writes `contents` to `dir/name` atomically: to `dir/name.tmp`, fsynced, renamed over
/// `dir/name`, then the directory fsynced (Kafka's `CheckpointFile.write`).
pub fn write_atomically(dir: &Path, name: &str, contents: &[u8]) -> Result<(), FileLogError> {
    let file = write_tmp(dir, name, contents)?;
    durability::sync_all(&file, &tmp_path(dir, name))?;
    drop(file);
    rename_tmp(dir, name)?;
    sync_dir(dir)
}

/// The first step of [`write_atomically`], for a caller that makes many files durable at once
/// with a barrier: `contents` written to `dir/name.tmp` (created or emptied first), not
/// fsynced.
pub fn write_tmp(dir: &Path, name: &str, contents: &[u8]) -> Result<File, FileLogError> {
    let tmp = tmp_path(dir, name);
    fault::gate(&tmp).map_err(|e| FileLogError::io("create", &tmp, e))?;
    let mut file = File::create(&tmp).map_err(|e| FileLogError::io("create", &tmp, e))?;
    fault::write_all(&mut file, &tmp, contents).map_err(|e| FileLogError::io("write", &tmp, e))?;
    Ok(file)
}

/// The rename of [`write_atomically`]: `dir/name.tmp` over `dir/name`, not made durable (that
/// is the directory's fsync, [`sync_dir`], or a file-system barrier). Only once the `.tmp`
/// file's bytes are durable, or a crash may leave `name` torn.
pub fn rename_tmp(dir: &Path, name: &str) -> Result<(), FileLogError> {
    let tmp = tmp_path(dir, name);
    fault::gate(&tmp).map_err(|e| FileLogError::io("rename", &tmp, e))?;
    fs::rename(&tmp, dir.join(name)).map_err(|e| FileLogError::io("rename", &tmp, e))
}

fn tmp_path(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!("{name}.tmp"))
}

/// Writes `contents` over the start of the existing file `dir/name`, cuts what follows, and
/// fdatasyncs it: one file sync, where [`write_atomically`] makes a new file and syncs it and
/// the directory.
/// **Not atomic**: a crash may leave the old bytes, the new ones, a prefix of them, or a mix;
/// callers use it only where recovery can tell such a file from a damaged one and rebuild it
/// (see `FileLog`'s first leader-epoch checkpoint). Returns `Ok(false)`, writing nothing, when the
/// file does not exist.
pub fn overwrite_in_place(dir: &Path, name: &str, contents: &[u8]) -> Result<bool, FileLogError> {
    let path = dir.join(name);
    let file = match OpenOptions::new().write(true).open(&path) {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(FileLogError::io("open", &path, e)),
    };
    fault::write_at(&file, &path, contents, 0).map_err(|e| FileLogError::io("write", &path, e))?;
    fault::gate(&path).map_err(|e| FileLogError::io("truncate", &path, e))?;
    file.set_len(contents.len() as u64)
        .map_err(|e| FileLogError::io("truncate", &path, e))?;
    durability::sync_data(&file, &path)?;
    Ok(true)
}

/// Fsyncs a directory, making renames, creations and deletions in it durable.
pub fn sync_dir(dir: &Path) -> Result<(), FileLogError> {
    durability::sync_dir(dir)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kmirror_kernel::batch::LeaderBatch;

    fn batch(base: Offset, n: u32) -> RawBatch {
        RawBatch::from_leader_batch(
            &LeaderBatch::Records {
                record_count: n,
                producer: None,
                transactional: false,
            },
            base,
            0,
            0,
        )
        .unwrap()
    }

    #[test]
    fn file_names_are_twenty_digits() {
        assert_eq!(log_file_name(42), "00000000000000000042.log");
        assert_eq!(index_file_name(0), "00000000000000000000.index");
        assert_eq!(
            parse_file_name("00000000000000000042.log", ".log"),
            Some(42)
        );
        assert_eq!(parse_file_name("0042.log", ".log"), None);
        assert_eq!(parse_file_name("0000000000000000004x.log", ".log"), None);
        assert_eq!(parse_file_name("00000000000000000042.index", ".log"), None);
    }

    #[test]
    fn early_writeback_follows_appends_in_whole_pages_and_truncations() {
        let dir = tempfile::tempdir().unwrap();
        let mut seg = Segment::create(dir.path(), 0, 4096).unwrap();
        seg.append(&batch(0, 10)).unwrap();
        seg.start_writeback();
        assert_eq!(seg.writeback_started_to(), 0, "too little to start");
        let mut offset = 10;
        while seg.size() < writeback::MIN_BYTES + 1000 {
            seg.append(&batch(offset, 1000)).unwrap();
            offset += 1000;
        }
        seg.start_writeback();
        let started = seg.writeback_started_to();
        let size = seg.size();
        assert_eq!(
            started,
            size - size % writeback::PAGE_BYTES,
            "every whole page"
        );
        assert!(started >= writeback::MIN_BYTES);
        seg.append(&batch(offset, 10)).unwrap();
        seg.start_writeback();
        assert_eq!(seg.writeback_started_to(), started, "a small append waits");
        seg.truncate_batches(1).unwrap();
        assert_eq!(seg.writeback_started_to(), 0, "lowered to the cut");
    }

    #[test]
    fn index_is_sparse_kafka_style_and_survives_truncation() {
        let dir = tempfile::tempdir().unwrap();
        let mut seg = Segment::create(dir.path(), 100, 100).unwrap();
        let mut offset = 100;
        for _ in 0..10 {
            let b = batch(offset, 2);
            seg.append(&b).unwrap();
            offset += 2;
        }
        let size = seg.batches()[0].size;
        // An entry is due once more than 100 bytes were appended since the last one.
        let per_entry = 100 / size + 1;
        assert!(!seg.index_entries().is_empty());
        for e in seg.index_entries() {
            let b = seg
                .batches()
                .iter()
                .find(|b| b.position == u64::from(e.position))
                .unwrap();
            assert_eq!(b.header.last_offset - 100, i64::from(e.relative_offset));
        }
        assert_eq!(seg.index_entries()[0].position as u64, per_entry * size);
        let on_disk = fs::read(seg.index_path()).unwrap();
        assert_eq!(on_disk.len(), seg.index_entries().len() * INDEX_ENTRY_SIZE);

        // Lookup returns the greatest indexed offset at or below the target.
        let e0 = seg.index_entries()[0];
        assert_eq!(seg.index_lookup(100), (100, 0));
        assert_eq!(
            seg.index_lookup(100 + i64::from(e0.relative_offset)),
            (100 + i64::from(e0.relative_offset), u64::from(e0.position))
        );

        seg.truncate_batches(3).unwrap();
        assert_eq!(seg.next_offset(), 106);
        assert_eq!(fs::metadata(seg.log_path()).unwrap().len(), seg.size());
        assert!(seg
            .index_entries()
            .iter()
            .all(|e| u64::from(e.position) < seg.size()));
        let on_disk = fs::read(seg.index_path()).unwrap();
        assert_eq!(on_disk.len(), seg.index_entries().len() * INDEX_ENTRY_SIZE);
        let read = seg.read_batch(&seg.batches()[2]).unwrap();
        assert_eq!(read.header().base_offset, 104);
    }

    #[test]
    fn a_bad_index_is_rebuilt_and_a_good_one_kept() {
        let dir = tempfile::tempdir().unwrap();
        let mut seg = Segment::create(dir.path(), 0, 50).unwrap();
        for i in 0..6 {
            seg.append(&batch(i, 1)).unwrap();
        }
        let batches = seg.batches().to_vec();
        let entries = seg.index_entries().to_vec();
        assert!(entries.len() >= 2);
        drop(seg);
        let (seg, rebuilt) = Segment::open_verified(dir.path(), 0, batches.clone(), 50).unwrap();
        assert!(!rebuilt);
        assert_eq!(seg.index_entries(), &entries[..]);
        drop(seg);
        // An entry pointing into the middle of a batch is not a valid index.
        let path = dir.path().join(index_file_name(0));
        let mut raw = fs::read(&path).unwrap();
        raw[7] ^= 1;
        fs::write(&path, &raw).unwrap();
        let (seg, rebuilt) = Segment::open_verified(dir.path(), 0, batches.clone(), 50).unwrap();
        assert!(rebuilt);
        assert_eq!(seg.index_entries(), &entries[..]);
        assert_eq!(fs::read(&path).unwrap().len(), entries.len() * 8);
        drop(seg);
        // A ragged file is rebuilt too.
        fs::write(&path, [0u8; 5]).unwrap();
        let (seg, rebuilt) = Segment::open_verified(dir.path(), 0, batches, 50).unwrap();
        assert!(rebuilt);
        assert_eq!(seg.index_entries(), &entries[..]);
    }

    #[test]
    fn an_in_place_overwrite_replaces_the_whole_file_and_creates_none() {
        let dir = tempfile::tempdir().unwrap();
        assert!(!overwrite_in_place(dir.path(), "x", b"new").unwrap());
        assert!(!dir.path().join("x").exists());
        fs::write(dir.path().join("x"), b"older and longer").unwrap();
        assert!(overwrite_in_place(dir.path(), "x", b"new").unwrap());
        assert_eq!(fs::read(dir.path().join("x")).unwrap(), b"new");
    }

    #[test]
    fn atomic_write_leaves_no_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        write_atomically(dir.path(), "x", b"one").unwrap();
        write_atomically(dir.path(), "x", b"two").unwrap();
        assert_eq!(fs::read(dir.path().join("x")).unwrap(), b"two");
        assert!(!dir.path().join("x.tmp").exists());
    }
}
