//! [`FileLog`]: a partition log on disk in Kafka's layout, implementing the kernel's
//! [`LogView`] / [`PartitionLog`] contract with [`RawBatch`] batches.
//!
//! # On disk
//!
//! A directory `<log dir>/<topic>-<partition>/` holding:
//!
//! | file | contents |
//! |------|----------|
//! | `<20-digit base offset>.log` | record batches v2, back to back (see [`segment`]) |
//! | `<20-digit base offset>.index` | Kafka's sparse offset index of that segment |
//! | `leader-epoch-checkpoint` | the epoch cache, Kafka's text format ([`kmirror_kernel::checkpoint`]) |
//! | `replication-offset-checkpoint` | the high watermark |
//! | `log-start-offset-checkpoint` | the log start offset |
//! | `recovery-point-offset-checkpoint` | the recovery point |
//!
//! The last three use Kafka's `OffsetCheckpointFile` text format, the one Kafka keeps at the
//! log-directory level under the same names, here per partition with the one entry:
//!
//! ```text
//! 0                  <- version
//! 1                  <- number of entries
//! <topic> <partition> <offset>
//! ```
//!
//! A log opened with [`FileLog::open_in_log_dir`] (the node destination's layout) keeps those
//! three offsets in its log dir's files instead, one line per partition of the log dir, as
//! Kafka does ([`crate::log_dir_checkpoints`]); it also leaves the epoch checkpoint of an
//! unsynced append to the next flush and never fsyncs the offset index (see that function).
//!
//! Every checkpoint is written to `<name>.tmp`, fsynced, renamed over `<name>`, and the directory
//! fsynced. Files ending in `.tmp` or `.deleted` are leftovers of an interrupted write or
//! deletion, removed (and reported) when the log is opened.
//!
//! # Semantics
//!
//! The log's decisions (offsets, epoch cache, producer state, what an operation refuses) are the
//! kernel's [`MemLog`]'s: `FileLog` runs every operation on a clone of its `MemLog`, performs the
//! disk changes, and keeps the clone only when both succeeded. So the conformance suite's
//! expectations hold for both by construction, and the in-memory view is exactly the replay of
//! the batch headers on disk (which is how [`FileLog::open`] rebuilds it).
//!
//! - **Appends** write the batch bytes at the end of the active segment (rolling to a new segment
//!   at LEO when the next batch would take the segment past [`FileLogConfig::segment_bytes`]).
//!   The batches of one call (a fetch round) going into one segment are written with one
//!   vectored write, their index entries with one more. Whether the append is fsynced is the
//!   [`FlushPolicy`]'s (below).
//! - **The recovery point** is the offset below which every batch is known to be on disk. It is
//!   persisted when a segment rolls (after fsyncing it), on [`FileLog::flush`] and
//!   [`FileLog::close`], and lowered (first) by a truncation. On open, batches from the recovery
//!   point on are verified whole and allowed to be torn (a bad tail is cut); below it only the
//!   batch headers are read ([`Verify`]).
//! - **The high watermark** is checkpointed on every change with [`FlushPolicy::EveryAppend`],
//!   and otherwise on flush, close and when a truncation lowers it (Kafka checkpoints it
//!   periodically likewise). It is written after the data it covers is fsynced, so the
//!   checkpoint never names data that may be lost; recovery clamps it to what survived anyway.
//! - **The epoch cache and log start offset** are persisted whenever they change, before the
//!   append that changes them (as Kafka's `LeaderEpochFileCache.assign`); recovery repairs a
//!   checkpoint that ran ahead of the batches that survived.
//! - **Truncation** cuts the segment holding the new end first, then deletes later segments
//!   newest first, so a crash part-way leaves a gap that recovery (which sees the lowered recovery
//!   point) completes. **Full truncation** renames every segment to `*.deleted` newest first,
//!   writes the new checkpoints, creates the new segment, then deletes the renamed files; a crash
//!   part-way leaves either a prefix of the old log or the new empty log. Truncations are
//!   fsynced under every policy.
//! - **DeleteRecords** ([`FileLog::delete_records_before`]) moves the log start offset forward,
//!   possibly into a segment (the batch holding it stays whole): the data is fsynced, the log
//!   start checkpoint written, the epoch checkpoint truncated from the start, then the segments
//!   wholly below it deleted. Recovery reads a log from its first segment and deletes the
//!   segments wholly below the log start that a crash left.
//! - **I/O errors** during a mutation leave disk and memory possibly apart: the log then refuses
//!   every further operation with [`FileLogError::Failed`] until it is reopened (Kafka takes the
//!   log directory offline likewise). [`PartitionLog::read`] cannot return an error: it returns
//!   the batches read before the failure and marks the log failed; use [`FileLog::try_read`] to
//!   see the error.
//!
//! # Durability: Kafka's flush policy, and what a mirror can fetch again
//!
//! Kafka does not fsync appends: `log.flush.interval.messages` and `log.flush.interval.ms`
//! default to never, and durability comes from replication plus the recovery point (after a
//! crash, everything from the recovery point on is verified and a torn tail is cut). A mirror's
//! destination has one more source of durability: **anything it fetched and has not yet
//! acknowledged downstream can be fetched again from the source**, byte for byte at the same
//! offsets. [`FlushPolicy::Kafka`] (the default) follows from that:
//!
//! | written | fsynced | why |
//! |---|---|---|
//! | mirrored (follower) batches, a fetch round per write | no; at a roll, flush, close (their writeback is started at each append, [`crate::writeback`], so that those fsyncs wait only for the last bytes) | a lost tail is cut by recovery and fetched again: the fetcher restarts at the recovered LEO |
//! | offset index entries | with their segment at a roll, flush, close | derived data: recovery checks it against the batches and rebuilds it |
//! | high watermark, recovery point | checkpointed at a roll (recovery point), flush, close | only ever name fsynced data; recovery clamps the HW to the recovered LEO |
//! | leader-epoch checkpoint | when the cache changes (a new source epoch: rare), atomically; a log's first entry (the cache was empty and the recovery point is at the log start) written in place and fdatasynced | may run ahead of a lost tail: recovery rebuilds the cache from the batches that survived and rewrites it. The in-place first write is one file sync where the atomic one makes a new file and syncs it and the directory (which a new destination of many partitions pays once per partition); a crash may cut it, and recovery can tell: a checkpoint that does not parse while no batch lies below the recovery point was owed by no flushed batch, and is rebuilt |
//! | leader batches (`MIRROR_PID_RESET`, ABORT markers, local produces) | yes, before the append returns | this cluster's own decision: no source holds it |
//! | truncations (LME, LSO, divergence) | yes | the kernel names the new end in records it writes next |
//! | `__mirror_state` records (state, LME) | yes, before the write is acknowledged ([`crate::mirror_state_log`]) | persist first, act after |
//!
//! The driver adds the last rule for the data the records name: it flushes the mirrored log
//! before every `__mirror_state` write, so the LME record's offset and the STOPPED state (after
//! the `MIRROR_PID_RESET`) never name data a crash can take back. Everything the kernel was told
//! is durable therefore is; what is not yet durable is what the source still holds. A
//! destination consumer may have read some of it below the in-memory high watermark; after a
//! machine crash it is fetched again and reads the same bytes at the same offsets (unless the
//! source deleted them meanwhile, as for any mirror lagging behind the source's retention, in
//! which case the fetcher's out-of-range handling applies). A crash of the process alone
//! (SIGKILL) loses nothing,
//! since the page cache survives it; a crash of the machine loses at most the unflushed tail of
//! mirrored batches. [`FlushPolicy::EveryAppend`] fsyncs every append and checkpoints every
//! high-watermark change, for those who want the destination's own disk to hold every fetched
//! batch.
//!
//! One `FileLog` owns its directory: opening the same directory twice at once is not detected
//! and corrupts it.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use kmirror_kernel::batch::{BatchHeader, LeaderBatch, ProducerBatchInfo};
use kmirror_kernel::epoch_cache::EpochCache;
use kmirror_kernel::log::{LogError, LogView, PartitionLog};
use kmirror_kernel::mem_log::MemLog;
use kmirror_kernel::producer_state::ProducerStateTable;
use kmirror_kernel::types::{LeaderEpoch, Offset};

use crate::checkpoint_files::Persisted;
use crate::error::FileLogError;
use crate::file_region::{FileRegion, Truncations};
use crate::log_dir_checkpoints::{CheckpointKind, Checkpoints, LogDirCheckpoints};
use crate::read_buffer::ReadBuffer;
use crate::record_batch::RawBatch;
use crate::recovery::{self, RecoveryReport};
use crate::segment::{self, Segment};

pub use crate::checkpoint_files::{
    decode_offset_checkpoint, decode_offset_checkpoint_entries, encode_offset_checkpoint,
    CheckpointEntry, HIGH_WATERMARK_FILE, LEADER_EPOCH_FILE, LOG_START_OFFSET_FILE,
    RECOVERY_POINT_FILE,
};
pub use crate::log_config::{
    FileLogConfig, FlushPolicy, UnknownFlushPolicy, Verify, DEFAULT_INDEX_INTERVAL_BYTES,
    DEFAULT_SEGMENT_BYTES,
};
pub use crate::topic_partition::TopicPartition;

/// Most bytes [`FileLog::try_read`] reads with one system call.
pub const READ_CHUNK_BYTES: u64 = 16 << 20;

/// A partition log on disk. See the [module documentation](self).
#[derive(Debug)]
pub struct FileLog {
    dir: PathBuf,
    tp: TopicPartition,
    config: FileLogConfig,
    mem: MemLog,
    segments: Vec<Segment>,
    persisted: Persisted,
    /// Every batch below it is on disk: the recovery point, or above it where a flush made the
    /// bytes durable but deferred the epoch checkpoint ([`EpochCheckpoint::Deferred`]).
    durable_end: Offset,
    checkpoints: Checkpoints,
    timestamp_ms: i64,
    failed: Mutex<Option<String>>,
    /// The buffer reads go through: the batches read are slices of it, and its allocation is
    /// reused once they are dropped, so a fetch costs no copy per batch and no fresh allocation.
    read_buf: Mutex<ReadBuffer>,
    /// Counts the truncations, for the file regions taken of this log ([`FileLog::region`]).
    truncations: Truncations,
}

impl FileLog {
    /// Opens (creating if needed) the log of `tp` under `log_dir`, in
    /// `log_dir/<topic>-<partition>/`, recovering it after a crash: see
    /// [`recovery`] for what is checked, repaired and refused. Batches below the recovery point
    /// are trusted ([`Verify::FromRecoveryPoint`], Kafka's recovery); use
    /// [`FileLog::open_with`] and [`Verify::All`] to CRC-check everything. The report says what
    /// recovery changed.
    pub fn open(
        log_dir: &Path,
        tp: TopicPartition,
        config: FileLogConfig,
    ) -> Result<(FileLog, RecoveryReport), FileLogError> {
        FileLog::open_with(log_dir, tp, config, Verify::FromRecoveryPoint)
    }

    /// [`FileLog::open`], verifying as much as `verify` says.
    pub fn open_with(
        log_dir: &Path,
        tp: TopicPartition,
        config: FileLogConfig,
        verify: Verify,
    ) -> Result<(FileLog, RecoveryReport), FileLogError> {
        FileLog::open_inner(log_dir, tp, config, verify, Checkpoints::PerPartition)
    }

    /// [`FileLog::open_with`] for a log whose recovery point, high watermark and log start
    /// offset live in its log dir's `checkpoints` (the node layout, see
    /// [`crate::log_dir_checkpoints`]) rather than in per-partition files. A partition that
    /// has no entry there yet is read from per-partition files if it has them (a destination
    /// written in the older layout). Recovery's repairs that lower an offset are written to
    /// `checkpoints` at once; others wait for the owner's next [`LogDirCheckpoints::write`].
    ///
    /// In this layout the log also defers what only recovery reads: a follower append that is
    /// not fsynced does not rewrite the leader-epoch checkpoint (the flush that moves the
    /// recovery point past the batch does, before moving it; recovery rebuilds the cache from
    /// the batches and only checks the checkpoint below the recovery point), and the offset
    /// index is never fsynced (recovery checks every index against its segment's batches and
    /// rebuilds one that does not match).
    pub fn open_in_log_dir(
        log_dir: &Path,
        tp: TopicPartition,
        config: FileLogConfig,
        verify: Verify,
        checkpoints: Arc<LogDirCheckpoints>,
    ) -> Result<(FileLog, RecoveryReport), FileLogError> {
        FileLog::open_inner(
            log_dir,
            tp,
            config,
            verify,
            Checkpoints::LogDir(checkpoints),
        )
    }

    fn open_inner(
        log_dir: &Path,
        tp: TopicPartition,
        config: FileLogConfig,
        verify: Verify,
        checkpoints: Checkpoints,
    ) -> Result<(FileLog, RecoveryReport), FileLogError> {
        let dir = log_dir.join(tp.dir_name());
        let recovered = recovery::recover(&dir, &tp, &config, verify, &checkpoints)?;
        let log = FileLog {
            dir,
            tp,
            config,
            mem: recovered.mem,
            segments: recovered.segments,
            durable_end: recovered.persisted.recovery_point,
            persisted: recovered.persisted,
            checkpoints,
            timestamp_ms: config.append_timestamp_ms,
            failed: Mutex::new(None),
            read_buf: Mutex::new(ReadBuffer::default()),
            truncations: Truncations::default(),
        };
        Ok((log, recovered.report))
    }

    /// Reads the log of `tp` under `log_dir` (the node layout, offsets in `checkpoints`) as
    /// [`FileLog::open_in_log_dir`] would recover it, **changing nothing**: the same checks and
    /// refusals, but no leftover removed, no torn tail cut (the result stops where recovery
    /// would cut), no index rebuilt, nothing written or fsynced. For readers such as `kmirror
    /// status`.
    pub fn inspect_in_log_dir(
        log_dir: &Path,
        tp: TopicPartition,
        checkpoints: Arc<LogDirCheckpoints>,
    ) -> Result<LogInspection, FileLogError> {
        let dir = log_dir.join(tp.dir_name());
        let inspected = recovery::inspect(&dir, &tp, &Checkpoints::LogDir(checkpoints))?;
        Ok(LogInspection {
            mem: inspected.mem,
            batches: inspected.batches,
            bytes: inspected.bytes,
        })
    }

    /// Opens the partition directory `dir` itself (named `<topic>-<partition>`).
    pub fn open_dir(
        dir: &Path,
        config: FileLogConfig,
    ) -> Result<(FileLog, RecoveryReport), FileLogError> {
        FileLog::open_dir_with(dir, config, Verify::FromRecoveryPoint)
    }

    /// [`FileLog::open_dir`], verifying as much as `verify` says.
    pub fn open_dir_with(
        dir: &Path,
        config: FileLogConfig,
        verify: Verify,
    ) -> Result<(FileLog, RecoveryReport), FileLogError> {
        let inconsistent = |reason: &str| FileLogError::Inconsistent {
            dir: dir.to_path_buf(),
            reason: reason.to_owned(),
        };
        let name = dir
            .file_name()
            .and_then(|n| n.to_str())
            .ok_or_else(|| inconsistent("the directory has no UTF-8 name"))?;
        let tp = TopicPartition::from_dir_name(name).map_err(|e| inconsistent(&e.to_string()))?;
        let parent = dir.parent().unwrap_or(Path::new("."));
        FileLog::open_with(parent, tp, config, verify)
    }

    /// The partition directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The topic partition.
    pub fn topic_partition(&self) -> &TopicPartition {
        &self.tp
    }

    /// The configuration.
    pub fn config(&self) -> &FileLogConfig {
        &self.config
    }

    /// The in-memory view: the kernel's log of the batch headers on disk.
    pub fn mem_log(&self) -> &MemLog {
        &self.mem
    }

    /// The segments, oldest first.
    pub fn segments(&self) -> &[Segment] {
        &self.segments
    }

    /// The recovery point as last persisted: every batch below it is known to be on disk.
    pub fn recovery_point(&self) -> Offset {
        self.persisted.recovery_point
    }

    /// Where what is known to be on disk ends: the recovery point, or above it after a flush
    /// that deferred the epoch checkpoint ([`EpochCheckpoint::Deferred`]: the bytes are
    /// durable, the recovery point waits for the checkpoint).
    pub fn durable_end(&self) -> Offset {
        self.durable_end.max(self.persisted.recovery_point)
    }

    /// Changes when later appends are fsynced ([`FlushPolicy`]): `kmirror mirror --flush` sets
    /// it on an opened cluster's logs. What was appended before stays as durable as it was until
    /// the next flush (or, with [`FlushPolicy::EveryAppend`], the next append).
    pub fn set_flush_policy(&mut self, flush: FlushPolicy) {
        self.config.flush = flush;
    }

    /// Sets the timestamp (ms) later leader appends stamp on their records.
    pub fn set_append_timestamp(&mut self, timestamp_ms: i64) {
        self.timestamp_ms = timestamp_ms;
    }

    /// Appends `batch` as the leader of `leader_epoch`, its records stamped `timestamp_ms`.
    /// Same contract as [`PartitionLog::append_as_leader`].
    pub fn append_as_leader_at(
        &mut self,
        leader_epoch: LeaderEpoch,
        batch: LeaderBatch,
        timestamp_ms: i64,
    ) -> Result<BatchHeader, FileLogError> {
        self.check_not_failed()?;
        let mut next = self.mem.clone();
        let header = next.append_as_leader(leader_epoch, batch)?;
        if next.log_end_offset() == self.mem.log_end_offset() {
            // A retried duplicate: answered with the batch already in the log.
            return Ok(header);
        }
        let raw = RawBatch::synthesize(&header, timestamp_ms).map_err(FileLogError::Encode)?;
        let sync = match self.config.flush {
            FlushPolicy::EveryAppend => true,
            FlushPolicy::Kafka => !self.config.deferred_durability,
            FlushPolicy::Manual => false,
        };
        self.write_appended(next, &[raw], sync)?;
        Ok(header)
    }

    /// Appends one batch a Kafka client produced, as the leader at `leader_epoch`: the log
    /// assigns its offsets and stamps the epoch (the batch's base offset and partition leader
    /// epoch fields, which its CRC does not cover, are rewritten; its records are kept as the
    /// client wrote them, compressed or not), after the producer-state checks of
    /// [`PartitionLog::append_as_leader`] (sequence, producer epoch, transactions). A retried
    /// duplicate of an idempotent batch is answered with the batch already in the log.
    pub fn append_client_batch(
        &mut self,
        leader_epoch: LeaderEpoch,
        client: &RawBatch,
    ) -> Result<BatchHeader, FileLogError> {
        self.check_not_failed()?;
        let h = client.header();
        if h.control.is_some() {
            return Err(FileLogError::Log(LogError::InvalidTransaction(
                "a client may not produce a control batch".to_owned(),
            )));
        }
        let record_count = u32::try_from(h.last_offset - h.base_offset + 1)
            .ok()
            .filter(|n| *n > 0)
            .ok_or(FileLogError::Log(LogError::EmptyBatch {
                base_offset: h.base_offset,
                last_offset: h.last_offset,
            }))?;
        let producer = (h.producer_id >= 0).then_some(ProducerBatchInfo {
            producer_id: h.producer_id,
            producer_epoch: h.producer_epoch,
            base_sequence: h.base_sequence,
        });
        let batch = LeaderBatch::Records {
            record_count,
            producer,
            transactional: h.is_transactional,
        };
        let mut next = self.mem.clone();
        let header = next.append_as_leader(leader_epoch, batch)?;
        if next.log_end_offset() == self.mem.log_end_offset() {
            return Ok(header);
        }
        let mut bytes = client.bytes().to_vec();
        bytes[0..8].copy_from_slice(&header.base_offset.to_be_bytes());
        bytes[12..16].copy_from_slice(&header.partition_leader_epoch.to_be_bytes());
        let raw = RawBatch::parse(bytes).map_err(FileLogError::InvalidBatches)?;
        let sync = match self.config.flush {
            FlushPolicy::EveryAppend => true,
            FlushPolicy::Kafka => !self.config.deferred_durability,
            FlushPolicy::Manual => false,
        };
        self.write_appended(next, &[raw], sync)?;
        Ok(header)
    }

    /// Parses `bytes` (whole batches back to back, as in a fetch response) and appends them as
    /// a follower ([`PartitionLog::append_as_follower`]).
    pub fn append_bytes_as_follower(&mut self, bytes: &[u8]) -> Result<(), FileLogError> {
        let batches = RawBatch::parse_many(bytes).map_err(FileLogError::InvalidBatches)?;
        self.append_as_follower(&batches)
    }

    /// Whole batches with `last_offset >= from` and `base_offset < below`, oldest first, read
    /// from disk (and CRC-checked again): one read per segment (at most [`READ_CHUNK_BYTES`]
    /// at a time) into a [`ReadBuffer`], whose slices the batches are.
    pub fn try_read(&self, from: Offset, below: Offset) -> Result<Vec<RawBatch>, FileLogError> {
        self.try_read_at_most(from, below, usize::MAX)
    }

    /// The batches from `from` below `below` of the one segment holding `from`, whole, at most
    /// `limit` bytes (at least one batch when `at_least_one`: Kafka returns a first batch
    /// larger than the limit, so a consumer can make progress), as a byte range of that
    /// segment's file ([`FileRegion`]): what a Fetch answer sends without reading it. `None`
    /// when there is no such batch. One segment, as Kafka's fetch reads one; the client asks
    /// again from the next.
    pub fn region(
        &self,
        from: Offset,
        below: Offset,
        limit: u64,
        at_least_one: bool,
    ) -> Result<Option<FileRegion>, FileLogError> {
        self.check_not_failed()?;
        let at = self.segments.partition_point(|s| s.next_offset() <= from);
        let Some(seg) = self.segments.get(at) else {
            return Ok(None);
        };
        let batches = seg.batches();
        let first = batches.partition_point(|b| b.header.last_offset < from);
        let mut end = first;
        let mut size = 0u64;
        while let Some(b) = batches.get(end) {
            let room = size + b.size <= limit || (end == first && at_least_one);
            if b.header.base_offset >= below || !room {
                break;
            }
            size += b.size;
            end += 1;
        }
        let (Some(head), Some(last)) = (batches.get(first), batches[..end].last()) else {
            return Ok(None);
        };
        if end == first {
            return Ok(None);
        }
        Ok(Some(FileRegion::new(
            seg.shared_file(),
            seg.log_path(),
            head.position,
            size,
            last.header.last_offset,
            &self.truncations,
        )))
    }

    /// [`FileLog::try_read`], stopping after `max_batches` batches.
    pub fn try_read_at_most(
        &self,
        from: Offset,
        below: Offset,
        max_batches: usize,
    ) -> Result<Vec<RawBatch>, FileLogError> {
        self.check_not_failed()?;
        let mut out = Vec::new();
        let mut buf = self.read_buf.lock().unwrap_or_else(|p| p.into_inner());
        let start = self
            .segments
            .partition_point(|s| s.next_offset() <= from)
            .min(self.segments.len());
        for seg in &self.segments[start..] {
            if seg.base_offset() >= below {
                break;
            }
            let batches = seg.batches();
            let first = batches.partition_point(|b| b.header.last_offset < from);
            let end = batches
                .partition_point(|b| b.header.base_offset < below)
                .min(first.saturating_add(max_batches - out.len()));
            let mut rest = batches.get(first..end).unwrap_or(&[]);
            while let Some(head) = rest.first() {
                // A chunk of at most READ_CHUNK_BYTES (or one batch larger than that).
                let n = rest
                    .iter()
                    .position(|b| b.end() - head.position > READ_CHUNK_BYTES)
                    .unwrap_or(rest.len())
                    .max(1);
                seg.read_batches(&rest[..n], &mut buf, &mut out)?;
                rest = &rest[n..];
            }
            if end < batches.len() || out.len() >= max_batches {
                break;
            }
        }
        if buf.retained() > 2 * READ_CHUNK_BYTES as usize {
            *buf = ReadBuffer::default();
        }
        Ok(out)
    }

    /// [`PartitionLog::read`], stopping after `max_batches` batches: on a read error, the
    /// whole batches before the failure, and the log is marked failed.
    pub fn read_at_most(&self, from: Offset, below: Offset, max_batches: usize) -> Vec<RawBatch> {
        match self.try_read_at_most(from, below, max_batches) {
            Ok(batches) => batches,
            Err(e) => {
                let _ = self.fail_on_error::<()>(Err(e));
                // Serve the whole batches that can still be read, stopping at the failure.
                let mut out = Vec::new();
                for seg in &self.segments {
                    for entry in seg.batches() {
                        if entry.header.last_offset < from {
                            continue;
                        }
                        if entry.header.base_offset >= below || out.len() >= max_batches {
                            return out;
                        }
                        match seg.read_batch(entry) {
                            Ok(b) => out.push(b),
                            Err(_) => return out,
                        }
                    }
                }
                out
            }
        }
    }

    /// A read-only view of this log whose [`PartitionLog::read`] returns at most `max_batches`
    /// batches: what to hand the kernel's
    /// [`serve_fetch`](kmirror_kernel::fetch::serve_fetch), which reads every batch up to its
    /// bound and keeps the first `max_batches` (so each fetch from the start of a large log
    /// would read the rest of the log).
    pub fn fetch_view(&self, max_batches: usize) -> FetchView<'_> {
        FetchView {
            log: self,
            max_batches,
        }
    }

    /// Fsyncs what was appended: the active segment's `.log` file (earlier segments were
    /// fsynced when they rolled). Does not move the recovery point; see [`FileLog::flush`].
    pub fn sync_data(&mut self) -> Result<(), FileLogError> {
        self.check_not_failed()?;
        let result = match self.segments.last() {
            Some(active) => active.sync_log(),
            None => Ok(()),
        };
        self.fail_on_error(result)
    }

    /// Fsyncs the active segment, then persists the recovery point (= LEO) and the high
    /// watermark.
    pub fn flush(&mut self) -> Result<(), FileLogError> {
        self.check_not_failed()?;
        let result = self.flush_inner();
        self.fail_on_error(result)
    }

    /// The first half of a flush whose durability the caller provides for many logs at once
    /// with one barrier ([`FsBarrier`](crate::durability::FsBarrier)): nothing fsynced. With
    /// [`EpochCheckpoint::Written`], writes the leader-epoch checkpoint's `.tmp` file if the
    /// cache changed; after the caller's barrier made the log's bytes and that file durable,
    /// [`FileLog::finish_flush`] renames it into place and records the recovery point at the
    /// log end; the caller makes the renames durable (a second barrier) before it writes the
    /// log dir's checkpoint files. With [`EpochCheckpoint::Deferred`] the checkpoint is left as
    /// it is and the recovery point stops at the first epoch it lacks: the bytes above are as
    /// durable after the barrier, and recovery, which verifies from the recovery point on,
    /// rebuilds those epochs from their batches; a later flush writes the checkpoint.
    pub fn stage_flush(
        &mut self,
        checkpoint: EpochCheckpoint,
    ) -> Result<StagedFlush, FileLogError> {
        self.check_not_failed()?;
        let cache = self.mem.epoch_cache().clone();
        let log_end_offset = self.mem.log_end_offset();
        let mut recovery_point = log_end_offset;
        let deferred_to = match checkpoint {
            EpochCheckpoint::Deferred => first_epoch_missing(&cache, &self.persisted.epoch_cache),
            EpochCheckpoint::Written => None,
        };
        let epoch_cache = if self.persisted.epoch_cache == cache {
            None
        } else if let Some(first_missing) = deferred_to {
            // Only raised, and never past the first epoch the checkpoint on disk lacks.
            recovery_point = first_missing
                .min(log_end_offset)
                .max(self.persisted.recovery_point);
            None
        } else {
            let contents = kmirror_kernel::checkpoint::encode(&cache);
            let result = segment::write_tmp(&self.dir, LEADER_EPOCH_FILE, contents.as_bytes());
            self.fail_on_error(result.map(drop))?;
            Some(cache)
        };
        Ok(StagedFlush {
            epoch_cache,
            log_end_offset,
            recovery_point,
            high_watermark: self.mem.high_watermark(),
        })
    }

    /// Ends a flush begun with [`FileLog::stage_flush`], once the caller's barrier made what it
    /// staged durable: the epoch checkpoint's `.tmp` file renamed into place (not durable until
    /// the caller's next barrier), the recovery point and the high watermark recorded (in the
    /// log dir's checkpoint store: written by the caller). Returns whether it renamed a file.
    pub fn finish_flush(&mut self, staged: StagedFlush) -> Result<bool, FileLogError> {
        self.check_not_failed()?;
        let result = (|| {
            let renamed = match staged.epoch_cache {
                Some(cache) => {
                    segment::rename_tmp(&self.dir, LEADER_EPOCH_FILE)?;
                    self.persisted.epoch_cache = cache;
                    true
                }
                None => false,
            };
            self.persist_recovery_point(staged.recovery_point, false)?;
            self.durable_end = self.durable_end.max(staged.log_end_offset);
            self.persist_high_watermark(staged.high_watermark, false)?;
            Ok(renamed)
        })();
        self.fail_on_error(result)
    }

    /// Whether the leader-epoch checkpoint on disk lags the log's epoch cache (an epoch began
    /// since the last flush).
    pub fn epoch_checkpoint_lags(&self) -> bool {
        self.persisted.epoch_cache != *self.mem.epoch_cache()
    }

    /// Records the high watermark for the next write of its checkpoint (the log dir's file in
    /// a node destination), without flushing anything: Kafka writes its high watermarks every
    /// `replica.high.watermark.checkpoint.interval.ms` whatever was flushed, and recovery
    /// clamps one above the recovered log end.
    pub fn checkpoint_high_watermark(&mut self) -> Result<(), FileLogError> {
        self.check_not_failed()?;
        let result = self.persist_high_watermark(self.mem.high_watermark(), false);
        self.fail_on_error(result)
    }

    /// Flushes and closes the log. Dropping a `FileLog` without closing it is like a crash:
    /// the next [`FileLog::open`] verifies everything from the recovery point on.
    pub fn close(mut self) -> Result<(), FileLogError> {
        self.flush()
    }

    fn flush_inner(&mut self) -> Result<(), FileLogError> {
        if let Some(active) = self.segments.last() {
            self.sync_segment(active)?;
        }
        let cache = self.mem.epoch_cache().clone();
        self.persist_epoch_cache(&cache)?;
        self.persist_recovery_point(self.mem.log_end_offset(), false)?;
        self.persist_high_watermark(self.mem.high_watermark(), false)
    }

    /// DeleteRecords (Kafka's `UnifiedLog.deleteRecords`): moves the log start offset forward
    /// to `offset` ([`MemLog::increment_log_start_offset`]: at most the high watermark, never
    /// back), durably (the data below it fsynced, then the log start checkpoint), then deletes
    /// the segments wholly below it. Returns the log start offset. Recovery deletes the
    /// segments a crash left behind.
    pub fn delete_records_before(&mut self, offset: Offset) -> Result<Offset, FileLogError> {
        self.check_not_failed()?;
        let mut next = self.mem.clone();
        if next.increment_log_start_offset(offset)? {
            let result = self.delete_records_inner(&next);
            self.fail_on_error(result)?;
            self.mem = next;
        }
        Ok(self.mem.log_start_offset())
    }

    /// Fsyncs `segment`'s `.log` file, and its index unless the log is in the node layout
    /// (where recovery checks every index: see [`FileLog::open_in_log_dir`]).
    fn sync_segment(&self, segment: &Segment) -> Result<(), FileLogError> {
        match self.checkpoints {
            Checkpoints::PerPartition => segment.sync(),
            Checkpoints::LogDir(_) => segment.sync_log(),
        }
    }

    fn check_not_failed(&self) -> Result<(), FileLogError> {
        match &*self.failed.lock().unwrap_or_else(|p| p.into_inner()) {
            Some(reason) => Err(FileLogError::Failed {
                dir: self.dir.clone(),
                reason: reason.clone(),
            }),
            None => Ok(()),
        }
    }

    /// Marks the log failed when `result` is an error other than a refusal by the contract.
    fn fail_on_error<T>(&self, result: Result<T, FileLogError>) -> Result<T, FileLogError> {
        if let Err(e) = &result {
            if !matches!(e, FileLogError::Log(_) | FileLogError::Failed { .. }) {
                let mut failed = self.failed.lock().unwrap_or_else(|p| p.into_inner());
                failed.get_or_insert_with(|| e.to_string());
            }
        }
        result
    }

    /// Writes `batches`, whose headers `next` (a clone of the in-memory log with them
    /// appended) accepted, fsyncing them when `sync`, then adopts `next`.
    fn write_appended(
        &mut self,
        next: MemLog,
        batches: &[RawBatch],
        sync: bool,
    ) -> Result<(), FileLogError> {
        let result = self.write_appended_inner(&next, batches, sync);
        self.fail_on_error(result)?;
        self.mem = next;
        Ok(())
    }

    fn write_appended_inner(
        &mut self,
        next: &MemLog,
        batches: &[RawBatch],
        sync: bool,
    ) -> Result<(), FileLogError> {
        // Kafka assigns the epoch (and writes the checkpoint) before appending the batch; a
        // crash in between leaves an entry at or past LEO, which recovery drops. The cache
        // changes only when a batch of a new epoch arrives, so in steady state this writes
        // nothing. In the node layout an unsynced append leaves it to the next flush, which
        // writes it before the recovery point passes the batch.
        if sync || matches!(self.checkpoints, Checkpoints::PerPartition) {
            self.persist_epoch_cache(next.epoch_cache())?;
        }
        // Group commit: the batches going into one segment are written with one write.
        let mut rest = batches;
        while let Some(first) = rest.first() {
            let n = self
                .segments
                .last()
                .map_or(0, |s| s.fitting_prefix(rest, self.config.segment_bytes));
            if n == 0 {
                let rolled_to = first.header().base_offset;
                if self
                    .segments
                    .last()
                    .is_some_and(|s| s.is_empty() && s.base_offset() == rolled_to)
                {
                    return Err(FileLogError::Inconsistent {
                        dir: self.dir.clone(),
                        reason: format!(
                            "the batch at offset {rolled_to} spans more offsets than a segment \
                             can index"
                        ),
                    });
                }
                self.roll(rolled_to, next.epoch_cache())?;
                continue;
            }
            let Some(active) = self.segments.last_mut() else {
                return Err(FileLogError::Inconsistent {
                    dir: self.dir.clone(),
                    reason: "no active segment".into(),
                });
            };
            active.append_all(&rest[..n])?;
            rest = &rest[n..];
        }
        if let Some(active) = self.segments.last_mut() {
            if sync {
                active.sync_log()?;
            } else {
                // Left to a later flush: start the disk on it now (`crate::writeback`).
                active.start_writeback();
            }
        }
        Ok(())
    }

    /// Starts a new active segment at `base_offset` (the LEO), after fsyncing the current one;
    /// everything below `base_offset` is then on disk, which the recovery point records (after
    /// the epoch checkpoint, so that the checkpoint is never behind the recovery point).
    fn roll(&mut self, base_offset: Offset, cache: &EpochCache) -> Result<(), FileLogError> {
        if let Some(active) = self.segments.last() {
            if active.is_empty() && active.base_offset() == base_offset {
                return Ok(());
            }
            self.sync_segment(active)?;
        }
        let seg = Segment::create(&self.dir, base_offset, self.config.index_interval_bytes)?;
        segment::sync_dir(&self.dir)?;
        self.segments.push(seg);
        self.persist_epoch_cache(cache)?;
        self.persist_recovery_point(base_offset, false)
    }

    /// Records `offset` as the partition's `kind` checkpoint: its own file, written now; or
    /// its log dir's entry, written now when `urgent` (a truncation lowering it, a new log
    /// start) and otherwise with the log dir's next write (a raise: a lagging value only makes
    /// recovery verify more).
    fn persist_offset(
        &self,
        kind: CheckpointKind,
        offset: Offset,
        urgent: bool,
    ) -> Result<(), FileLogError> {
        match &self.checkpoints {
            Checkpoints::PerPartition => segment::write_atomically(
                &self.dir,
                kind.file_name(),
                encode_offset_checkpoint(&self.tp, offset).as_bytes(),
            ),
            Checkpoints::LogDir(store) if urgent => store.set_now(kind, &self.tp, offset),
            Checkpoints::LogDir(store) => {
                store.set(kind, &self.tp, offset);
                Ok(())
            }
        }
    }

    fn persist_recovery_point(&mut self, offset: Offset, urgent: bool) -> Result<(), FileLogError> {
        if self.persisted.recovery_point != offset {
            self.persist_offset(CheckpointKind::RecoveryPoint, offset, urgent)?;
            self.persisted.recovery_point = offset;
        }
        Ok(())
    }

    fn persist_high_watermark(&mut self, offset: Offset, urgent: bool) -> Result<(), FileLogError> {
        if self.persisted.high_watermark != offset {
            self.persist_offset(CheckpointKind::HighWatermark, offset, urgent)?;
            self.persisted.high_watermark = offset;
        }
        Ok(())
    }

    fn persist_log_start_offset(&mut self, offset: Offset) -> Result<(), FileLogError> {
        if self.persisted.log_start_offset != offset {
            self.persist_offset(CheckpointKind::LogStartOffset, offset, true)?;
            self.persisted.log_start_offset = offset;
        }
        Ok(())
    }

    fn persist_epoch_cache(&mut self, cache: &EpochCache) -> Result<(), FileLogError> {
        if self.persisted.epoch_cache != *cache {
            let text = kmirror_kernel::checkpoint::encode(cache);
            // A first entry is written in place (one sync, no new file): a crash that cuts
            // it leaves a file recovery rebuilds, since no batch below the recovery point is
            // owed an entry (the recovery point moves only after this write). Any other
            // change is atomic, as Kafka writes it.
            let first = self.persisted.epoch_cache.is_empty()
                && self.persisted.recovery_point <= self.persisted.log_start_offset;
            let in_place = first
                && segment::overwrite_in_place(&self.dir, LEADER_EPOCH_FILE, text.as_bytes())?;
            if !in_place {
                segment::write_atomically(&self.dir, LEADER_EPOCH_FILE, text.as_bytes())?;
            }
            self.persisted.epoch_cache = cache.clone();
        }
        Ok(())
    }

    fn truncate_inner(&mut self, next: &MemLog) -> Result<(), FileLogError> {
        // Counted before any file changes: a region taken before is no longer known intact.
        self.truncations.begin();
        let new_end = next.log_end_offset();
        self.durable_end = self.durable_end.min(new_end);
        if self.persisted.recovery_point > new_end {
            self.persist_recovery_point(new_end, true)?;
        }
        // The segment holding `new_end` is the last one whose base is at or below it.
        let keep = self
            .segments
            .partition_point(|s| s.base_offset() <= new_end)
            .max(1);
        if let Some(seg) = self.segments.get_mut(keep - 1) {
            let batches = seg
                .batches()
                .partition_point(|b| b.header.base_offset < new_end);
            seg.truncate_batches(batches)?;
        }
        let removed = self.segments.split_off(keep.min(self.segments.len()));
        for seg in removed.into_iter().rev() {
            seg.delete()?;
        }
        segment::sync_dir(&self.dir)?;
        self.persist_epoch_cache(next.epoch_cache())?;
        if self.config.flush == FlushPolicy::EveryAppend
            || next.high_watermark() < self.persisted.high_watermark
        {
            self.persist_high_watermark(next.high_watermark(), true)?;
        }
        Ok(())
    }

    fn delete_records_inner(&mut self, next: &MemLog) -> Result<(), FileLogError> {
        // The data below the new start is on disk before the start names it.
        self.flush_inner()?;
        let start = next.log_start_offset();
        self.persist_log_start_offset(start)?;
        self.persist_epoch_cache(next.epoch_cache())?;
        // A segment is wholly below the start when the next one starts at or below it.
        let below = self
            .segments
            .windows(2)
            .take_while(|w| w[1].base_offset() <= start)
            .count();
        for seg in self.segments.drain(..below).collect::<Vec<_>>() {
            seg.delete()?;
        }
        segment::sync_dir(&self.dir)
    }

    fn truncate_fully_inner(&mut self, offset: Offset) -> Result<(), FileLogError> {
        self.truncations.begin();
        self.durable_end = offset;
        for seg in self.segments.iter().rev() {
            seg.mark_deleted()?;
        }
        segment::sync_dir(&self.dir)?;
        let old = std::mem::take(&mut self.segments);
        // The epoch checkpoint first: recovery refuses one with entries below the log start.
        self.persist_epoch_cache(&EpochCache::new())?;
        self.persist_high_watermark(offset, true)?;
        self.persist_recovery_point(offset, true)?;
        self.persist_log_start_offset(offset)?;
        self.segments.push(Segment::create(
            &self.dir,
            offset,
            self.config.index_interval_bytes,
        )?);
        segment::sync_dir(&self.dir)?;
        for seg in old {
            for path in [seg.log_path(), seg.index_path()] {
                let mut deleted = path.as_os_str().to_owned();
                deleted.push(segment::DELETED_SUFFIX);
                crate::fault::gate(Path::new(&deleted))
                    .map_err(|e| FileLogError::io("delete", PathBuf::from(&deleted), e))?;
                match fs::remove_file(&deleted) {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => return Err(FileLogError::io("delete", PathBuf::from(deleted), e)),
                }
            }
        }
        segment::sync_dir(&self.dir)
    }
}

impl LogView for FileLog {
    fn log_start_offset(&self) -> Offset {
        self.mem.log_start_offset()
    }

    fn log_end_offset(&self) -> Offset {
        self.mem.log_end_offset()
    }

    fn high_watermark(&self) -> Offset {
        self.mem.high_watermark()
    }

    fn epoch_cache(&self) -> &EpochCache {
        self.mem.epoch_cache()
    }

    fn producer_state(&self) -> &ProducerStateTable {
        self.mem.producer_state()
    }

    fn last_batch(&self) -> Option<BatchHeader> {
        self.mem.last_batch()
    }
}

impl PartitionLog for FileLog {
    type Batch = RawBatch;
    type Error = FileLogError;

    fn header(batch: &RawBatch) -> BatchHeader {
        batch.header()
    }

    fn append_as_leader(
        &mut self,
        leader_epoch: LeaderEpoch,
        batch: LeaderBatch,
    ) -> Result<BatchHeader, FileLogError> {
        self.append_as_leader_at(leader_epoch, batch, self.timestamp_ms)
    }

    fn append_as_follower(&mut self, batches: &[RawBatch]) -> Result<(), FileLogError> {
        self.check_not_failed()?;
        let headers: Vec<BatchHeader> = batches.iter().map(RawBatch::header).collect();
        let mut next = self.mem.clone();
        next.append_as_follower(&headers)?;
        if batches.is_empty() {
            return Ok(());
        }
        let sync = self.config.flush == FlushPolicy::EveryAppend;
        self.write_appended(next, batches, sync)
    }

    fn read(&self, from: Offset, below: Offset) -> Vec<RawBatch> {
        self.read_at_most(from, below, usize::MAX)
    }

    fn truncate_to(&mut self, offset: Offset) -> Result<(), FileLogError> {
        self.check_not_failed()?;
        let mut next = self.mem.clone();
        next.truncate_to(offset)?;
        if next.log_start_offset() != self.mem.log_start_offset() {
            // Below the log start: the kernel truncated fully.
            let result = self.truncate_fully_inner(next.log_start_offset());
            self.fail_on_error(result)?;
        } else if next.log_end_offset() != self.mem.log_end_offset() {
            let result = self.truncate_inner(&next);
            self.fail_on_error(result)?;
        }
        self.mem = next;
        Ok(())
    }

    fn truncate_fully_and_start_at(&mut self, offset: Offset) -> Result<(), FileLogError> {
        self.check_not_failed()?;
        let mut next = self.mem.clone();
        next.truncate_fully_and_start_at(offset)?;
        if self.mem.log_start_offset() == offset
            && self.mem.log_end_offset() == offset
            && next == self.mem
        {
            // Already an empty log starting there (a new partition's first LME truncation):
            // nothing to cut, nothing to write.
            return Ok(());
        }
        let result = self.truncate_fully_inner(offset);
        self.fail_on_error(result)?;
        self.mem = next;
        Ok(())
    }

    fn advance_high_watermark(&mut self, offset: Offset) -> Result<(), FileLogError> {
        self.check_not_failed()?;
        let mut next = self.mem.clone();
        next.advance_high_watermark(offset)?;
        if self.config.flush == FlushPolicy::EveryAppend {
            let result = self.persist_high_watermark(offset, false);
            self.fail_on_error(result)?;
        }
        self.mem = next;
        Ok(())
    }

    fn assign_epoch_start_offset(
        &mut self,
        leader_epoch: LeaderEpoch,
        start_offset: Offset,
    ) -> Result<(), FileLogError> {
        self.check_not_failed()?;
        let mut next = self.mem.clone();
        next.assign_epoch_start_offset(leader_epoch, start_offset)?;
        // Kafka writes the checkpoint with the assignment; recovery drops the entry again while
        // no batch follows it, as Kafka's log loading does.
        let result = self.persist_epoch_cache(next.epoch_cache());
        self.fail_on_error(result)?;
        self.mem = next;
        Ok(())
    }
}

/// What [`FileLog::stage_flush`] staged, for [`FileLog::finish_flush`].
#[derive(Debug)]
pub struct StagedFlush {
    /// The epoch cache written to the checkpoint's `.tmp` file, when it changed.
    epoch_cache: Option<EpochCache>,
    /// The log end offset the barrier makes durable.
    log_end_offset: Offset,
    /// The recovery point the flush vouches for: the log end, or, with the epoch checkpoint
    /// deferred, the first offset of the first epoch the checkpoint on disk lacks.
    recovery_point: Offset,
    /// The high watermark then.
    high_watermark: Offset,
}

/// The start offset of the first entry of `ours` that `disk` does not hold as its entry at the
/// same place (where `disk` is a prefix of `ours`: where `ours` grew). `None` when `ours` is a
/// prefix of `disk` (only a truncation makes that, and it writes the checkpoint at once).
fn first_epoch_missing(ours: &EpochCache, disk: &EpochCache) -> Option<Offset> {
    let mut disk_entries = disk.entries();
    ours.entries().find_map(|entry| match disk_entries.next() {
        Some(d) if d == entry => None,
        Some(d) => Some(d.start_offset.min(entry.start_offset)),
        None => Some(entry.start_offset),
    })
}

/// Whether a flush begun with [`FileLog::stage_flush`] writes the leader-epoch checkpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EpochCheckpoint {
    /// Written if the epoch cache changed; the recovery point moves to the log end.
    Written,
    /// Left for a later flush; the recovery point stops below the first epoch it lacks (a
    /// round's group commit, where thousands of atomic file replacements would cost more than
    /// the data they vouch for).
    Deferred,
}

/// What [`FileLog::inspect_in_log_dir`] read of a partition: the in-memory log recovery would
/// rebuild, and where its batches are.
#[derive(Debug)]
pub struct LogInspection {
    mem: MemLog,
    batches: Vec<(PathBuf, crate::segment::BatchEntry)>,
    bytes: u64,
}

impl LogInspection {
    /// The log's offsets, epoch cache and producer state.
    pub fn mem_log(&self) -> &MemLog {
        &self.mem
    }

    /// The bytes of its batches.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Reads every batch from its segment file (CRC-checked).
    pub fn read_batches(&self) -> Result<Vec<RawBatch>, FileLogError> {
        use std::os::unix::fs::FileExt;
        let mut out = Vec::with_capacity(self.batches.len());
        let mut open: Option<(&Path, std::fs::File)> = None;
        for (path, entry) in &self.batches {
            if open.as_ref().is_none_or(|(p, _)| *p != path.as_path()) {
                let file = std::fs::File::open(path)
                    .map_err(|e| FileLogError::io("open", path.clone(), e))?;
                open = Some((path.as_path(), file));
            }
            let Some((_, file)) = open.as_ref() else {
                continue;
            };
            let size = usize::try_from(entry.size).map_err(|_| FileLogError::Inconsistent {
                dir: path.clone(),
                reason: format!("a batch of {} bytes", entry.size),
            })?;
            let mut buf = vec![0u8; size];
            file.read_exact_at(&mut buf, entry.position)
                .map_err(|e| FileLogError::io("read", path.clone(), e))?;
            out.push(
                RawBatch::parse(buf).map_err(|source| FileLogError::CorruptSegment {
                    file: path.clone(),
                    position: entry.position,
                    recovery_point: self.mem.log_end_offset(),
                    source: source.shifted(entry.position),
                })?,
            );
        }
        Ok(out)
    }
}

/// A read-only view of a [`FileLog`] that reads at most a fetch's worth of batches: see
/// [`FileLog::fetch_view`]. Its mutations refuse with [`FileLogError::Inconsistent`].
#[derive(Clone, Copy, Debug)]
pub struct FetchView<'a> {
    log: &'a FileLog,
    max_batches: usize,
}

impl FetchView<'_> {
    fn read_only(&self) -> FileLogError {
        FileLogError::Inconsistent {
            dir: self.log.dir.clone(),
            reason: "a fetch view of the log is read-only".into(),
        }
    }
}

impl LogView for FetchView<'_> {
    fn log_start_offset(&self) -> Offset {
        self.log.log_start_offset()
    }

    fn log_end_offset(&self) -> Offset {
        self.log.log_end_offset()
    }

    fn high_watermark(&self) -> Offset {
        self.log.high_watermark()
    }

    fn epoch_cache(&self) -> &EpochCache {
        self.log.epoch_cache()
    }

    fn producer_state(&self) -> &ProducerStateTable {
        self.log.producer_state()
    }

    fn last_batch(&self) -> Option<BatchHeader> {
        self.log.last_batch()
    }
}

impl PartitionLog for FetchView<'_> {
    type Batch = RawBatch;
    type Error = FileLogError;

    fn header(batch: &RawBatch) -> BatchHeader {
        batch.header()
    }

    fn append_as_leader(
        &mut self,
        _leader_epoch: LeaderEpoch,
        _batch: LeaderBatch,
    ) -> Result<BatchHeader, FileLogError> {
        Err(self.read_only())
    }

    fn append_as_follower(&mut self, _batches: &[RawBatch]) -> Result<(), FileLogError> {
        Err(self.read_only())
    }

    fn read(&self, from: Offset, below: Offset) -> Vec<RawBatch> {
        self.log.read_at_most(from, below, self.max_batches)
    }

    fn truncate_to(&mut self, _offset: Offset) -> Result<(), FileLogError> {
        Err(self.read_only())
    }

    fn truncate_fully_and_start_at(&mut self, _offset: Offset) -> Result<(), FileLogError> {
        Err(self.read_only())
    }

    fn advance_high_watermark(&mut self, _offset: Offset) -> Result<(), FileLogError> {
        Err(self.read_only())
    }

    fn assign_epoch_start_offset(
        &mut self,
        _leader_epoch: LeaderEpoch,
        _start_offset: Offset,
    ) -> Result<(), FileLogError> {
        Err(self.read_only())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A log in the node layout raises its recovery point only in memory (the owner's next
    /// `write` persists it) and writes a lowered one before truncating; its unsynced follower
    /// appends leave the epoch checkpoint to the flush.
    #[test]
    fn a_log_defers_raises_and_writes_a_truncation_s_lowered_recovery_point_first() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(LogDirCheckpoints::open(dir.path()).unwrap());
        let tp = TopicPartition::new("orders", 0).unwrap();
        let open = |store: &Arc<LogDirCheckpoints>| {
            FileLog::open_in_log_dir(
                dir.path(),
                tp.clone(),
                FileLogConfig::default(),
                Verify::FromRecoveryPoint,
                Arc::clone(store),
            )
            .unwrap()
            .0
        };
        let mut log = open(&store);
        store.write().unwrap();
        let records = LeaderBatch::Records {
            record_count: 5,
            producer: None,
            transactional: false,
        };
        let batches: Vec<RawBatch> = (0..4)
            .map(|i| RawBatch::from_leader_batch(&records, i * 5, 3, 0).unwrap())
            .collect();
        log.append_as_follower(&batches).unwrap();
        let epochs = || fs::read_to_string(dir.path().join("orders-0").join(LEADER_EPOCH_FILE));
        assert_eq!(
            epochs().unwrap(),
            "0\n0\n",
            "not rewritten by the unsynced append"
        );
        log.flush().unwrap();
        assert_eq!(epochs().unwrap(), "0\n1\n3 0\n", "written by the flush");
        let rp = CheckpointKind::RecoveryPoint;
        assert_eq!(store.get(rp, &tp), Some(20));
        assert_eq!(
            store.on_disk(rp, &tp),
            Some(0),
            "a raise waits for the write"
        );
        store.write().unwrap();
        assert_eq!(store.on_disk(rp, &tp), Some(20));
        log.truncate_to(10).unwrap();
        assert_eq!(
            store.on_disk(rp, &tp),
            Some(10),
            "a lowered one is written at once"
        );
        assert!(!dir.path().join("orders-0").join(rp.file_name()).exists());
        drop(log);
        let store = Arc::new(LogDirCheckpoints::open(dir.path()).unwrap());
        let log = open(&store);
        assert_eq!(log.log_end_offset(), 10);
    }
}
