//! `FileLog` against the kernel's log conformance suite, and crash recovery.
//!
//! The suite runs three ways: with Kafka's default segment size; with tiny segments (so most
//! cases roll segments) and manual flushing; and through a wrapper that closes and reopens the
//! log from disk after every operation and checks that nothing observable changed, so every case
//! of the suite is also a persistence test.
//!
//! The crash tests cut the last batch at every byte, flip every byte below the recovery point,
//! and damage each checkpoint file.

use std::fs;
use std::path::{Path, PathBuf};

use kmirror_harness::error::{BatchError, FileLogError};
use kmirror_harness::file_log::{
    FileLog, FileLogConfig, FlushPolicy, TopicPartition, Verify, HIGH_WATERMARK_FILE,
    LEADER_EPOCH_FILE, LOG_START_OFFSET_FILE, RECOVERY_POINT_FILE,
};
use kmirror_harness::record_batch::RawBatch;
use kmirror_harness::recovery::RecoveryReport;
use kmirror_harness::segment::{index_file_name, log_file_name};
use kmirror_harness::writeback;
use kmirror_kernel::batch::{BatchHeader, ControlType, LeaderBatch};
use kmirror_kernel::epoch_cache::{EpochCache, EpochEntry};
use kmirror_kernel::log::{LogView, PartitionLog};
use kmirror_kernel::producer_state::ProducerStateTable;
use kmirror_kernel::testkit::{self, LogSnapshot};
use kmirror_kernel::types::{LeaderEpoch, Offset};
use tempfile::TempDir;

fn tp() -> TopicPartition {
    TopicPartition::new("mirror-topic", 0).unwrap()
}

fn tiny() -> FileLogConfig {
    FileLogConfig {
        segment_bytes: 200,
        index_interval_bytes: 60,
        flush: FlushPolicy::Manual,
        append_timestamp_ms: 1_700_000_000_000,
        deferred_durability: false,
    }
}

fn open(root: &Path, config: FileLogConfig) -> (FileLog, RecoveryReport) {
    FileLog::open(root, tp(), config).unwrap_or_else(|e| panic!("open: {e}"))
}

fn reopen(root: &Path, config: FileLogConfig) -> Result<(FileLog, RecoveryReport), FileLogError> {
    FileLog::open(root, tp(), config)
}

/// Reopens verifying every batch (`kmirror verify`).
fn verify_all(
    root: &Path,
    config: FileLogConfig,
) -> Result<(FileLog, RecoveryReport), FileLogError> {
    FileLog::open_with(root, tp(), config, Verify::All)
}

fn every_append() -> FileLogConfig {
    FileLogConfig {
        flush: FlushPolicy::EveryAppend,
        ..FileLogConfig::default()
    }
}

/// A factory of fresh logs, each in its own directory under one temporary root.
fn factory(config: FileLogConfig) -> (TempDir, impl FnMut() -> FileLog) {
    let root = tempfile::tempdir().unwrap();
    let base = root.path().to_path_buf();
    let mut n = 0;
    let make = move || {
        n += 1;
        let dir = base.join(format!("log{n}"));
        let (log, report) = FileLog::open(&dir, tp(), config).unwrap();
        assert!(report.created && report.is_clean(), "{report:?}");
        log
    };
    (root, make)
}

#[test]
fn conformance_suite_with_default_config() {
    let (_root, make) = factory(FileLogConfig::default());
    testkit::run_all(make);
}

#[test]
fn conformance_suite_with_tiny_segments_and_manual_flush() {
    let (_root, make) = factory(tiny());
    testkit::run_all(make);
}

/// A `FileLog` that is dropped (without a flush: as in a crash after each operation returned)
/// and reopened from disk after every operation, checking the reopened log looks the same.
#[derive(Debug)]
struct Reopening {
    log: Option<FileLog>,
    config: FileLogConfig,
    root: PathBuf,
    reopens: usize,
}

impl Reopening {
    fn log(&self) -> &FileLog {
        self.log.as_ref().unwrap()
    }

    fn reopen(&mut self) {
        let before = LogSnapshot::of(self.log());
        let persisted_hw = self.log.take().map(|l| l.high_watermark());
        let (log, report) = reopen(&self.root, self.config).unwrap();
        assert!(
            report.is_clean(),
            "reopen after a clean operation: {report:?}"
        );
        assert_eq!(LogSnapshot::of(&log), before, "state changed across reopen");
        assert_eq!(Some(log.high_watermark()), persisted_hw);
        self.reopens += 1;
        self.log = Some(log);
    }

    fn then_reopen<T>(&mut self, f: impl FnOnce(&mut FileLog) -> T) -> T {
        let out = f(self.log.as_mut().unwrap());
        self.reopen();
        out
    }
}

impl LogView for Reopening {
    fn log_start_offset(&self) -> Offset {
        self.log().log_start_offset()
    }
    fn log_end_offset(&self) -> Offset {
        self.log().log_end_offset()
    }
    fn high_watermark(&self) -> Offset {
        self.log().high_watermark()
    }
    fn epoch_cache(&self) -> &EpochCache {
        self.log().epoch_cache()
    }
    fn producer_state(&self) -> &ProducerStateTable {
        self.log().producer_state()
    }
    fn last_batch(&self) -> Option<BatchHeader> {
        self.log().last_batch()
    }
}

impl PartitionLog for Reopening {
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
        self.then_reopen(|l| l.append_as_leader(leader_epoch, batch))
    }
    fn append_as_follower(&mut self, batches: &[RawBatch]) -> Result<(), FileLogError> {
        self.then_reopen(|l| l.append_as_follower(batches))
    }
    fn read(&self, from: Offset, below: Offset) -> Vec<RawBatch> {
        self.log().read(from, below)
    }
    fn truncate_to(&mut self, offset: Offset) -> Result<(), FileLogError> {
        self.then_reopen(|l| l.truncate_to(offset))
    }
    fn truncate_fully_and_start_at(&mut self, offset: Offset) -> Result<(), FileLogError> {
        self.then_reopen(|l| l.truncate_fully_and_start_at(offset))
    }
    fn advance_high_watermark(&mut self, offset: Offset) -> Result<(), FileLogError> {
        self.then_reopen(|l| l.advance_high_watermark(offset))
    }
    /// Not reopened after: a restart drops an epoch with no batch after it (in Kafka as in
    /// `FileLog`), so a reopen here would test the restart, not the assignment. The next
    /// operation reopens.
    fn assign_epoch_start_offset(
        &mut self,
        leader_epoch: LeaderEpoch,
        start_offset: Offset,
    ) -> Result<(), FileLogError> {
        self.log
            .as_mut()
            .expect("open between operations")
            .assign_epoch_start_offset(leader_epoch, start_offset)
    }
}

#[test]
fn conformance_suite_reopening_from_disk_after_every_operation() {
    let root = tempfile::tempdir().unwrap();
    let base = root.path().to_path_buf();
    let config = FileLogConfig {
        flush: FlushPolicy::EveryAppend,
        ..tiny()
    };
    let mut n = 0;
    testkit::run_all(|| {
        n += 1;
        let dir = base.join(format!("log{n}"));
        let (log, _) = FileLog::open(&dir, tp(), config).unwrap();
        Reopening {
            log: Some(log),
            config,
            root: dir,
            reopens: 0,
        }
    });
    assert!(n > 20, "the suite made only {n} logs");
}

// ---------------------------------------------------------------------------------------------
// Crash recovery.

fn records(n: u32) -> LeaderBatch {
    testkit::records(n)
}

/// A log of several epochs, producers and segments (tiny segments), flushed, then one more
/// batch at a new epoch appended (and fsynced, but past the recovery point). Returns the root,
/// the snapshot before the last batch, and the last batch's header.
fn log_with_unflushed_last_batch(
    config: FileLogConfig,
    last: LeaderBatch,
) -> (TempDir, LogSnapshot, BatchHeader) {
    let root = tempfile::tempdir().unwrap();
    let (mut log, _) = open(root.path(), config);
    log.append_as_leader(0, records(3)).unwrap();
    log.append_as_leader(0, testkit::idempotent(2, 7, 0, 0))
        .unwrap();
    log.append_as_leader(1, testkit::transactional(2, 8, 0, 0))
        .unwrap();
    log.append_as_leader(1, testkit::marker(ControlType::Commit, 8, 0))
        .unwrap();
    log.append_as_leader(2, records(1)).unwrap();
    log.advance_high_watermark(log.log_end_offset()).unwrap();
    log.flush().unwrap();
    assert_eq!(log.recovery_point(), log.log_end_offset());
    let before = LogSnapshot::of(&log);
    let header = log.append_as_leader(5, last).unwrap();
    assert_eq!(log.recovery_point(), before.log_end_offset);
    assert!(log.segments().len() >= 2, "the test wants a roll");
    drop(log); // a crash: no flush, no close
    (root, before, header)
}

fn segment_of(root: &Path, base: Offset) -> PathBuf {
    root.join(tp().dir_name()).join(log_file_name(base))
}

/// Where the last batch of the newest segment starts, and the segment's path and size.
fn last_batch_span(root: &Path, header: &BatchHeader) -> (PathBuf, u64, u64) {
    let dir = root.join(tp().dir_name());
    let mut logs: Vec<PathBuf> = fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect();
    logs.sort();
    let path = logs.pop().unwrap();
    let bytes = fs::read(&path).unwrap();
    let batches = RawBatch::parse_many(&bytes).unwrap();
    let last = batches.last().unwrap();
    assert_eq!(last.header(), *header);
    let start = (bytes.len() - last.size_in_bytes()) as u64;
    (path, start, bytes.len() as u64)
}

fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for e in fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &to.join(e.file_name()));
        } else {
            fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}

fn check_torn_tail_at_every_byte(config: FileLogConfig, last: LeaderBatch) {
    let (root, before, header) = log_with_unflushed_last_batch(config, last);
    let (path, start, end) = last_batch_span(root.path(), &header);
    let name = path.file_name().unwrap().to_owned();
    for cut in start..end {
        let scratch = tempfile::tempdir().unwrap();
        copy_dir(root.path(), scratch.path());
        let file = scratch.path().join(tp().dir_name()).join(&name);
        fs::OpenOptions::new()
            .write(true)
            .open(&file)
            .unwrap()
            .set_len(cut)
            .unwrap();
        let (log, report) =
            reopen(scratch.path(), config).unwrap_or_else(|e| panic!("cut at byte {cut}: {e}"));
        assert_eq!(LogSnapshot::of(&log), before, "cut at byte {cut}");
        testkit::check_invariants(&log);
        // The checkpoint named the new epoch before the batch was written: repaired, reported.
        assert!(report.epoch_checkpoint_repaired.is_some(), "cut {cut}");
        assert_eq!(
            report.high_watermark_clamped, None,
            "nothing acknowledged is lost"
        );
        if cut == start {
            assert_eq!(report.truncated_tail, None, "cut {cut}");
        } else {
            let tail = report.truncated_tail.expect("a torn tail is reported");
            assert_eq!(tail.file, file);
            assert_eq!(tail.position, start);
            assert_eq!(tail.first_lost_offset, header.base_offset);
            assert_eq!(tail.bytes_removed, cut - start);
            assert!(tail.deleted_segments.is_empty());
        }
        assert_eq!(fs::metadata(&file).unwrap().len(), start);
        // The repaired log takes appends and survives a clean reopen.
        let mut log = log;
        log.append_as_leader(6, records(2)).unwrap();
        log.close().unwrap();
        let (log, report) = reopen(scratch.path(), config).unwrap();
        assert!(report.is_clean(), "{report:?}");
        assert_eq!(log.log_end_offset(), before.log_end_offset + 2);
    }
}

#[test]
fn torn_write_at_every_byte_of_the_last_batch_reopens_to_the_previous_batch() {
    check_torn_tail_at_every_byte(tiny(), records(3));
}

#[test]
fn torn_control_batch_in_a_fresh_segment_reopens_to_the_previous_batch() {
    // Segments of 1 byte: every batch rolls, so the torn batch is alone in its segment.
    let config = FileLogConfig {
        segment_bytes: 1,
        flush: FlushPolicy::EveryAppend,
        ..tiny()
    };
    check_torn_tail_at_every_byte(config, testkit::pid_reset());
}

#[test]
fn garbage_after_the_last_batch_is_cut_and_reported() {
    let (root, before, header) = log_with_unflushed_last_batch(tiny(), records(1));
    let (path, _, end) = last_batch_span(root.path(), &header);
    let mut bytes = fs::read(&path).unwrap();
    bytes.extend_from_slice(&[0u8; 100]); // a preallocated, never-written tail
    fs::write(&path, &bytes).unwrap();
    let (log, report) = reopen(root.path(), tiny()).unwrap();
    assert_eq!(log.log_end_offset(), header.next_offset());
    assert_eq!(log.last_batch(), Some(header));
    assert!(log.log_end_offset() > before.log_end_offset);
    let tail = report.truncated_tail.unwrap();
    assert_eq!((tail.position, tail.bytes_removed), (end, 100));
    assert!(tail.reason.contains("batchLength 0"), "{}", tail.reason);
}

/// Flips each byte of the first segment (flushed, so below the recovery point) in turn: opening
/// with [`Verify::All`] must refuse every flip with an error naming the segment and the position
/// of the damaged batch. A plain open (Kafka's recovery) trusts the payload below the recovery
/// point: it either refuses the flip the same way (a damaged header) or opens, and then reading
/// the damaged batch fails its CRC check: corrupt bytes are never served.
#[test]
fn a_flipped_byte_below_the_recovery_point_is_an_error_naming_file_and_position() {
    let root = tempfile::tempdir().unwrap();
    let config = tiny();
    let (mut log, _) = open(root.path(), config);
    log.append_as_leader(0, records(2)).unwrap();
    log.append_as_leader(3, testkit::idempotent(1, 9, 0, 0))
        .unwrap();
    log.append_as_leader(4, records(2)).unwrap();
    log.append_as_leader(4, records(1)).unwrap();
    log.append_as_leader(5, records(1)).unwrap();
    log.close().unwrap();
    let seg = segment_of(root.path(), 0);
    let original = fs::read(&seg).unwrap();
    let batches = RawBatch::parse_many(&original).unwrap();
    assert!(
        batches.len() >= 2,
        "want several batches in the first segment"
    );
    let mut starts = vec![0u64];
    for b in &batches {
        starts.push(starts.last().unwrap() + b.size_in_bytes() as u64);
    }
    for pos in 0..original.len() {
        let mut bytes = original.clone();
        bytes[pos] ^= 0x40;
        fs::write(&seg, &bytes).unwrap();
        match reopen(root.path(), config) {
            Ok((log, report)) => {
                assert_eq!(report.verified_bytes, 0, "byte {pos}: {report:?}");
                match log.try_read(0, log.log_end_offset()) {
                    Err(FileLogError::CorruptRead { file, .. }) => assert_eq!(file, seg),
                    other => panic!("byte {pos}: a trusted damaged batch was read: {other:?}"),
                }
            }
            Err(e) => assert!(
                matches!(
                    e,
                    FileLogError::CorruptSegment { .. }
                        | FileLogError::OffsetOrder { .. }
                        | FileLogError::Replay { .. }
                        | FileLogError::EpochMismatch { .. }
                ),
                "byte {pos}: {e}"
            ),
        }
        assert_eq!(
            fs::read(&seg).unwrap(),
            bytes,
            "byte {pos}: plain open changed it"
        );
        let err = verify_all(root.path(), config)
            .map(|_| ())
            .expect_err(&format!("byte {pos} flipped below the recovery point"));
        let batch_start = *starts.iter().rev().find(|&&s| s <= pos as u64).unwrap();
        let (file, position) = match &err {
            FileLogError::CorruptSegment { file, position, .. }
            | FileLogError::OffsetOrder { file, position, .. }
            | FileLogError::Replay { file, position, .. }
            | FileLogError::EpochMismatch { file, position, .. } => (file.clone(), *position),
            other => panic!("byte {pos}: unexpected error {other}"),
        };
        assert_eq!(file, seg, "byte {pos}: {err}");
        // A damaged length field may make the next batch the first bad one.
        assert!(
            position == batch_start || (8..12).contains(&(pos as u64 - batch_start)),
            "byte {pos} (batch at {batch_start}) reported at {position}: {err}"
        );
        let message = err.to_string();
        assert!(message.contains(&log_file_name(0)), "{message}");
        assert!(message.contains(&format!("byte {position}")), "{message}");
        // Nothing was repaired: the damaged byte is still there.
        assert_eq!(
            fs::read(&seg).unwrap(),
            bytes,
            "byte {pos}: the file was changed"
        );
    }
    fs::write(&seg, &original).unwrap();
    let (log, report) = reopen(root.path(), config).unwrap();
    assert!(report.is_clean(), "{report:?}");
    assert_eq!(log.log_end_offset(), 7);
}

#[test]
fn a_crc_error_below_the_recovery_point_names_the_crc() {
    let root = tempfile::tempdir().unwrap();
    let (mut log, _) = open(root.path(), FileLogConfig::default());
    log.append_as_leader(0, records(2)).unwrap();
    let second = log.append_as_leader(0, records(2)).unwrap();
    log.close().unwrap();
    let seg = segment_of(root.path(), 0);
    let mut bytes = fs::read(&seg).unwrap();
    let first_size = RawBatch::parse_many(&bytes).unwrap()[0].size_in_bytes();
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    fs::write(&seg, &bytes).unwrap();
    // Kafka's recovery trusts it (only headers are read below the recovery point)...
    let (log, report) = reopen(root.path(), FileLogConfig::default()).unwrap();
    assert_eq!(report.verified_bytes, 0);
    assert!(matches!(
        log.try_read(2, 4),
        Err(FileLogError::CorruptRead { position, .. }) if position == first_size as u64
    ));
    drop(log);
    // ...and `kmirror verify` refuses it.
    match verify_all(root.path(), FileLogConfig::default()) {
        Err(FileLogError::CorruptSegment {
            file,
            position,
            recovery_point,
            source: BatchError::CrcMismatch { position: p, .. },
        }) => {
            assert_eq!(file, seg);
            assert_eq!(position, first_size as u64);
            assert_eq!(p, first_size as u64 + 17);
            assert_eq!(recovery_point, second.next_offset());
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn the_same_damage_past_the_recovery_point_is_cut_instead() {
    let root = tempfile::tempdir().unwrap();
    let config = FileLogConfig::default();
    let (mut log, _) = open(root.path(), config);
    log.append_as_leader(0, records(2)).unwrap();
    log.flush().unwrap();
    log.append_as_leader(0, records(2)).unwrap();
    log.append_as_leader(0, records(2)).unwrap();
    drop(log);
    let seg = segment_of(root.path(), 0);
    let mut bytes = fs::read(&seg).unwrap();
    let sizes: Vec<usize> = RawBatch::parse_many(&bytes)
        .unwrap()
        .iter()
        .map(RawBatch::size_in_bytes)
        .collect();
    let at = sizes[0] + 30; // inside the second batch, the first one past the recovery point
    bytes[at] ^= 1;
    fs::write(&seg, &bytes).unwrap();
    let (log, report) = reopen(root.path(), config).unwrap();
    assert_eq!(log.log_end_offset(), 2);
    let tail = report.truncated_tail.unwrap();
    assert_eq!(tail.position, sizes[0] as u64);
    assert_eq!(tail.bytes_removed, (sizes[1] + sizes[2]) as u64);
    assert!(tail.reason.contains("CRC"), "{}", tail.reason);
    assert_eq!(report.recovery_point, 2);
}

#[test]
fn a_corrupt_middle_segment_past_the_recovery_point_deletes_later_segments() {
    let root = tempfile::tempdir().unwrap();
    let config = FileLogConfig {
        segment_bytes: 1,
        flush: FlushPolicy::Manual,
        ..tiny()
    };
    let (mut log, _) = open(root.path(), config);
    for _ in 0..4 {
        log.append_as_leader(0, records(1)).unwrap();
    }
    // Rolls advanced the recovery point to the last segment's base offset: lower it by hand
    // to the second segment, as if the later rolls' checkpoints had not been written.
    drop(log);
    let dir = root.path().join(tp().dir_name());
    fs::write(dir.join(RECOVERY_POINT_FILE), "0\n1\nmirror-topic 0 1\n").unwrap();
    let seg1 = segment_of(root.path(), 1);
    let mut bytes = fs::read(&seg1).unwrap();
    bytes[40] ^= 1;
    fs::write(&seg1, &bytes).unwrap();
    let (log, report) = reopen(root.path(), config).unwrap();
    assert_eq!(log.log_end_offset(), 1);
    let tail = report.truncated_tail.unwrap();
    assert_eq!(tail.file, seg1);
    assert_eq!(
        tail.deleted_segments,
        vec![segment_of(root.path(), 2), segment_of(root.path(), 3)]
    );
    assert!(!segment_of(root.path(), 2).exists());
    assert!(!dir.join(index_file_name(3)).exists());
    assert_eq!(log.segments().len(), 2);
}

#[test]
fn bad_checkpoint_files_are_typed_errors_naming_the_file() {
    let root = tempfile::tempdir().unwrap();
    let config = FileLogConfig::default();
    let (mut log, _) = open(root.path(), config);
    log.append_as_leader(0, records(2)).unwrap();
    log.close().unwrap();
    let dir = root.path().join(tp().dir_name());
    let cases: &[(&str, &str, usize)] = &[
        (LEADER_EPOCH_FILE, "0\n2\n0 0\n", 2),
        (LEADER_EPOCH_FILE, "0\n1\n0 zero\n", 3),
        (LEADER_EPOCH_FILE, "9\n0\n", 1),
        (HIGH_WATERMARK_FILE, "0\n1\nmirror-topic 0\n", 3),
        (HIGH_WATERMARK_FILE, "0\n1\nother-topic 0 5\n", 0),
        (LOG_START_OFFSET_FILE, "zero\n", 1),
        (LOG_START_OFFSET_FILE, "0\n1\nmirror-topic 0 -4\n", 3),
        (RECOVERY_POINT_FILE, "", 0),
        (RECOVERY_POINT_FILE, "\u{ff}\u{fe}", 1),
    ];
    for &(name, text, line) in cases {
        let path = dir.join(name);
        let good = fs::read(&path).unwrap();
        fs::write(&path, text).unwrap();
        match reopen(root.path(), config) {
            Err(FileLogError::Checkpoint(e)) => {
                assert_eq!(e.file, path, "{name} {text:?}");
                if !text.starts_with('\u{ff}') {
                    assert_eq!(e.line, line, "{name} {text:?}: {e}");
                }
                assert!(e.to_string().contains(name), "{e}");
            }
            other => panic!("{name} {text:?}: {other:?}"),
        }
        fs::write(&path, good).unwrap();
    }
    // Invalid UTF-8 too.
    let path = dir.join(RECOVERY_POINT_FILE);
    fs::write(&path, [0x30, 0x0a, 0xff]).unwrap();
    assert!(matches!(
        reopen(root.path(), config),
        Err(FileLogError::Checkpoint(_))
    ));
    fs::remove_file(&path).unwrap();
    // A missing checkpoint takes its default, is reported and rewritten.
    let (log, report) = reopen(root.path(), config).unwrap();
    assert_eq!(report.missing_checkpoints, vec![RECOVERY_POINT_FILE]);
    assert_eq!(log.log_end_offset(), 2);
    assert!(path.exists());
}

/// A log's first leader-epoch checkpoint is written in place; a crash can cut it. While the
/// recovery point is still at the log start (it moves only after that write is synced), no
/// flushed batch is owed an entry, so recovery rebuilds the file from the batches instead of
/// refusing it (a bad checkpoint above the log start is refused, in the test above).
#[test]
fn a_first_epoch_checkpoint_cut_by_a_crash_is_rebuilt_from_the_batches() {
    let root = tempfile::tempdir().unwrap();
    let config = FileLogConfig::default();
    let (mut log, _) = open(root.path(), config);
    log.append_as_leader(3, records(2)).unwrap();
    drop(log);
    let dir = root.path().join(tp().dir_name());
    for cut in ["0\n1\n", "0\n1\n3", "0\n1\n3 ", "\0\0\0\0\0\0\0\0"] {
        fs::write(dir.join(RECOVERY_POINT_FILE), "0\n1\nmirror-topic 0 0\n").unwrap();
        fs::write(dir.join(LEADER_EPOCH_FILE), cut).unwrap();
        let (log, report) = reopen(root.path(), config).expect(cut);
        assert!(report.torn_first_epoch_checkpoint.is_some(), "{cut:?}");
        assert!(!report.is_clean());
        assert_eq!(
            log.epoch_cache().entries().collect::<Vec<_>>(),
            vec![EpochEntry {
                epoch: 3,
                start_offset: 0
            }]
        );
        assert_eq!(
            fs::read_to_string(dir.join(LEADER_EPOCH_FILE)).unwrap(),
            "0\n1\n3 0\n"
        );
        assert_eq!(log.log_end_offset(), 2);
        drop(log);
    }
}

/// A log start checkpoint past the log end, or before the first segment, is stale: the log
/// does not open. (Inside the first segment it is a DeleteRecords', below.)
#[test]
fn a_log_start_checkpoint_past_the_log_end_or_before_the_first_segment_is_inconsistent() {
    let root = tempfile::tempdir().unwrap();
    let config = FileLogConfig::default();
    let (mut log, _) = open(root.path(), config);
    log.truncate_fully_and_start_at(5).unwrap();
    log.append_as_leader(0, records(2)).unwrap();
    log.close().unwrap();
    let dir = root.path().join(tp().dir_name());
    for stale in [8, 4] {
        let text = format!("0\n1\nmirror-topic 0 {stale}\n");
        fs::write(dir.join(LOG_START_OFFSET_FILE), text).unwrap();
        let err = reopen(root.path(), config).unwrap_err();
        assert!(matches!(err, FileLogError::Inconsistent { .. }), "{err}");
        assert!(err.to_string().contains(LOG_START_OFFSET_FILE), "{err}");
    }
}

/// DeleteRecords: the log start moves to an offset inside a segment, at most the high
/// watermark and never back; the segments wholly below it are deleted; a reopen keeps it; and
/// the segments a crash left between the checkpoint and their deletion are deleted by
/// recovery.
#[test]
fn delete_records_moves_the_log_start_and_deletes_the_segments_wholly_below() {
    let root = tempfile::tempdir().unwrap();
    let config = tiny();
    let (mut log, _) = open(root.path(), config);
    for _ in 0..12 {
        log.append_as_leader(0, records(2)).unwrap();
    }
    log.advance_high_watermark(20).unwrap();
    let bases: Vec<Offset> = log.segments().iter().map(|s| s.base_offset()).collect();
    assert!(bases.len() >= 4, "the test wants segments: {bases:?}");
    assert!(matches!(
        log.delete_records_before(21),
        Err(FileLogError::Log(
            kmirror_kernel::log::LogError::OffsetOutOfRange { .. }
        ))
    ));
    let start = bases[1] + 1;
    assert_eq!(log.delete_records_before(start).unwrap(), start);
    assert_eq!(log.log_start_offset(), start);
    assert!(!segment_of(root.path(), bases[0]).exists());
    assert!(segment_of(root.path(), bases[1]).exists());
    let first = log.read(start, 20)[0].header().base_offset;
    assert_eq!(
        first, bases[1],
        "the batch holding the log start is read whole"
    );
    assert_eq!(log.delete_records_before(1).unwrap(), start, "never back");
    log.close().unwrap();

    let (log, report) = reopen(root.path(), config).unwrap();
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (start, 24));
    assert_eq!(log.high_watermark(), 20);
    assert!(report.is_clean(), "{report:?}");
    drop(log);

    // A crash after the checkpoint, before the deletion: the segments wholly below are back.
    let later = bases[3] + 1;
    let dir = root.path().join(tp().dir_name());
    let text = format!("0\n1\nmirror-topic 0 {later}\n");
    fs::write(dir.join(LOG_START_OFFSET_FILE), text).unwrap();
    let (log, report) = reopen(root.path(), config).unwrap();
    assert_eq!(log.log_start_offset(), later);
    assert_eq!(log.segments()[0].base_offset(), bases[3]);
    for gone in &bases[1..3] {
        assert!(report
            .removed_files
            .contains(&segment_of(root.path(), *gone)));
        assert!(!segment_of(root.path(), *gone).exists());
    }
}

#[test]
fn state_survives_close_and_reopen_with_kafka_named_files() {
    let root = tempfile::tempdir().unwrap();
    let config = tiny();
    let (mut log, _) = open(root.path(), config);
    log.append_as_leader(0, records(4)).unwrap();
    log.append_as_leader(2, testkit::transactional(1, 3, 0, 0))
        .unwrap();
    log.advance_high_watermark(4).unwrap();
    let before = LogSnapshot::of(&log);
    assert_eq!(before.last_stable_offset, 4);
    log.close().unwrap();
    let dir = root.path().join(tp().dir_name());
    assert_eq!(
        fs::read_to_string(dir.join(LEADER_EPOCH_FILE)).unwrap(),
        "0\n2\n0 0\n2 4\n"
    );
    assert_eq!(
        fs::read_to_string(dir.join(HIGH_WATERMARK_FILE)).unwrap(),
        "0\n1\nmirror-topic 0 4\n"
    );
    assert_eq!(
        fs::read_to_string(dir.join(RECOVERY_POINT_FILE)).unwrap(),
        "0\n1\nmirror-topic 0 5\n"
    );
    assert_eq!(
        fs::read_to_string(dir.join(LOG_START_OFFSET_FILE)).unwrap(),
        "0\n1\nmirror-topic 0 0\n"
    );
    let (log, report) = reopen(root.path(), config).unwrap();
    assert!(report.is_clean(), "{report:?}");
    assert_eq!(LogSnapshot::of(&log), before);
    assert!(log.producer_state().get(3).is_some());
}

#[test]
fn manual_flush_persists_the_high_watermark_only_on_flush() {
    let root = tempfile::tempdir().unwrap();
    let config = FileLogConfig {
        flush: FlushPolicy::Manual,
        ..FileLogConfig::default()
    };
    let (mut log, _) = open(root.path(), config);
    log.append_as_leader(0, records(4)).unwrap();
    log.advance_high_watermark(2).unwrap();
    log.flush().unwrap();
    log.advance_high_watermark(4).unwrap();
    drop(log);
    let (log, _) = reopen(root.path(), config).unwrap();
    assert_eq!(log.high_watermark(), 2);
    // Kafka's policy (the default) checkpoints it on flush too.
    let (mut log, _) = reopen(root.path(), FileLogConfig::default()).unwrap();
    log.advance_high_watermark(3).unwrap();
    drop(log);
    let (mut log, _) = reopen(root.path(), FileLogConfig::default()).unwrap();
    assert_eq!(log.high_watermark(), 2);
    log.advance_high_watermark(3).unwrap();
    log.flush().unwrap();
    drop(log);
    // With EveryAppend the change is persisted at once.
    let (mut log, _) = reopen(root.path(), every_append()).unwrap();
    assert_eq!(log.high_watermark(), 3);
    log.advance_high_watermark(4).unwrap();
    drop(log);
    let (log, _) = reopen(root.path(), every_append()).unwrap();
    assert_eq!(log.high_watermark(), 4);
}

#[test]
fn leftovers_of_interrupted_writes_and_deletions_are_removed_and_reported() {
    let root = tempfile::tempdir().unwrap();
    let config = FileLogConfig::default();
    let (mut log, _) = open(root.path(), config);
    log.append_as_leader(0, records(2)).unwrap();
    log.close().unwrap();
    let dir = root.path().join(tp().dir_name());
    let leftovers = [
        dir.join("leader-epoch-checkpoint.tmp"),
        dir.join(format!("{}.deleted", log_file_name(500))),
        dir.join(index_file_name(900)),
    ];
    for f in &leftovers {
        fs::write(f, b"junk").unwrap();
    }
    fs::write(dir.join("partition.metadata"), b"kept").unwrap();
    let (log, report) = reopen(root.path(), config).unwrap();
    let mut removed = report.removed_files.clone();
    removed.sort();
    let mut expected = leftovers.to_vec();
    expected.sort();
    assert_eq!(removed, expected);
    assert!(leftovers.iter().all(|f| !f.exists()));
    assert!(
        dir.join("partition.metadata").exists(),
        "unknown files are left alone"
    );
    assert_eq!(log.log_end_offset(), 2);
}

#[test]
fn an_interrupted_full_truncation_reopens_to_the_old_prefix_or_the_new_log() {
    let root = tempfile::tempdir().unwrap();
    let config = FileLogConfig {
        segment_bytes: 1,
        ..tiny()
    };
    let (mut log, _) = open(root.path(), config);
    for _ in 0..3 {
        log.append_as_leader(0, records(1)).unwrap();
    }
    log.close().unwrap();
    let dir = root.path().join(tp().dir_name());
    // Crash after renaming the newest segment only (renames go newest first).
    for name in [log_file_name(2), index_file_name(2)] {
        fs::rename(dir.join(&name), dir.join(format!("{name}.deleted"))).unwrap();
    }
    let (mut log, report) = reopen(root.path(), config).unwrap();
    assert_eq!(log.log_end_offset(), 2, "a prefix of the old log");
    assert_eq!(report.recovery_point_clamped, Some((3, 2)));
    assert_eq!(report.removed_files.len(), 2);
    // A completed full truncation.
    log.truncate_fully_and_start_at(100).unwrap();
    drop(log);
    let (log, report) = reopen(root.path(), config).unwrap();
    assert!(report.is_clean(), "{report:?}");
    assert_eq!(
        (
            log.log_start_offset(),
            log.log_end_offset(),
            log.high_watermark()
        ),
        (100, 100, 100)
    );
    assert!(log.epoch_cache().is_empty());
    let names: Vec<String> = fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".log") || n.ends_with(".index"))
        .collect();
    assert_eq!(names.len(), 2, "{names:?}");
    assert!(names.contains(&log_file_name(100)));
}

#[test]
fn an_unrelated_epoch_checkpoint_below_the_recovery_point_is_refused() {
    let root = tempfile::tempdir().unwrap();
    let config = FileLogConfig::default();
    let (mut log, _) = open(root.path(), config);
    log.append_as_leader(0, records(2)).unwrap();
    log.append_as_leader(1, records(2)).unwrap();
    log.close().unwrap();
    let dir = root.path().join(tp().dir_name());
    fs::write(dir.join(LEADER_EPOCH_FILE), "0\n2\n0 0\n1 1\n").unwrap();
    match reopen(root.path(), config) {
        Err(FileLogError::EpochMismatch { offset, file, .. }) => {
            assert_eq!(offset, 1);
            assert_eq!(file, segment_of(root.path(), 0));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn segments_roll_by_size_and_reads_span_them() {
    let root = tempfile::tempdir().unwrap();
    let config = tiny();
    let (mut log, _) = open(root.path(), config);
    let mut headers = Vec::new();
    for i in 0..12 {
        headers.push(log.append_as_leader(i / 4, records(2)).unwrap());
    }
    assert!(log.segments().len() > 3);
    for seg in log.segments() {
        let size = fs::metadata(seg.log_path()).unwrap().len();
        assert!(size <= 200 || seg.batches().len() == 1, "{size}");
        assert_eq!(size, seg.size());
        let first = seg.batches().first().unwrap();
        assert_eq!(first.header.base_offset, seg.base_offset());
    }
    let read: Vec<BatchHeader> = log.read(5, 17).iter().map(RawBatch::header).collect();
    assert_eq!(read, headers[2..9].to_vec());
    // Truncation removes whole segments and cuts the one holding the new end.
    let before = log.segments().len();
    log.truncate_to(9).unwrap();
    assert_eq!(log.log_end_offset(), 8);
    assert!(log.segments().len() < before);
    let last = log.segments().last().unwrap();
    assert_eq!(fs::metadata(last.log_path()).unwrap().len(), last.size());
    assert_eq!(last.next_offset(), 8);
    let on_disk: usize = fs::read_dir(root.path().join(tp().dir_name()))
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "log")
        })
        .count();
    assert_eq!(on_disk, log.segments().len());
}

#[test]
fn follower_appends_keep_source_bytes_exactly() {
    let root = tempfile::tempdir().unwrap();
    let (mut src, _) = FileLog::open(&root.path().join("src"), tp(), tiny()).unwrap();
    src.append_as_leader(3, records(2)).unwrap();
    src.append_as_leader(4, testkit::pid_reset()).unwrap();
    let fetched = src.read(0, Offset::MAX);
    let (mut dst, _) = FileLog::open(&root.path().join("dst"), tp(), tiny()).unwrap();
    let mut bytes = Vec::new();
    for b in &fetched {
        bytes.extend_from_slice(b.bytes());
    }
    dst.append_bytes_as_follower(&bytes).unwrap();
    dst.close().unwrap();
    let read = |p: &Path| {
        let mut out = Vec::new();
        let mut segs: Vec<_> = fs::read_dir(p.join(tp().dir_name()))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "log"))
            .collect();
        segs.sort();
        for s in segs {
            out.extend(fs::read(s).unwrap());
        }
        out
    };
    assert_eq!(read(&root.path().join("dst")), bytes);
    assert_eq!(read(&root.path().join("src")), bytes);
    // Damaged bytes are refused before anything is written.
    let (mut dst, _) = FileLog::open(&root.path().join("dst"), tp(), tiny()).unwrap();
    let mut bad = bytes.clone();
    bad[30] ^= 1;
    assert!(matches!(
        dst.append_bytes_as_follower(&bad),
        Err(FileLogError::InvalidBatches(BatchError::CrcMismatch { .. }))
    ));
}

#[test]
fn an_io_failure_makes_the_log_refuse_mutations_until_reopened() {
    let root = tempfile::tempdir().unwrap();
    let config = every_append();
    let (mut log, _) = open(root.path(), config);
    log.append_as_leader(0, records(1)).unwrap();
    // Make the next checkpoint write fail: a directory where the temporary file goes.
    let dir = root.path().join(tp().dir_name());
    fs::create_dir(dir.join(format!("{HIGH_WATERMARK_FILE}.tmp"))).unwrap();
    let err = log.advance_high_watermark(1).unwrap_err();
    assert!(matches!(err, FileLogError::Io { .. }), "{err}");
    assert_eq!(log.high_watermark(), 0, "memory unchanged");
    assert!(matches!(
        log.append_as_leader(0, records(1)),
        Err(FileLogError::Failed { .. })
    ));
    // Refusals by the contract do not poison a healthy log.
    fs::remove_dir(dir.join(format!("{HIGH_WATERMARK_FILE}.tmp"))).unwrap();
    let (mut log, _) = reopen(root.path(), config).unwrap();
    assert!(matches!(
        log.advance_high_watermark(5),
        Err(FileLogError::Log(_))
    ));
    log.append_as_leader(0, records(1)).unwrap();
    assert_eq!(log.log_end_offset(), 2);
}

/// Follower appends in ten batches and in one call leave the same files (segments, rolls,
/// index entries): group commit changes how many writes, not what is written.
#[test]
fn a_fetch_round_appended_at_once_writes_what_batch_by_batch_appends_write() {
    let root = tempfile::tempdir().unwrap();
    let (mut src, _) = FileLog::open(&root.path().join("src"), tp(), tiny()).unwrap();
    for i in 0..10 {
        src.append_as_leader(i / 3, records(1 + i as u32 % 4))
            .unwrap();
    }
    let batches = src.read(0, Offset::MAX);
    let files = |dir: &Path| {
        let mut out: Vec<(String, Vec<u8>)> = fs::read_dir(dir.join(tp().dir_name()))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "log" || x == "index"))
            .map(|p| {
                let name = p.file_name().unwrap().to_string_lossy().into_owned();
                (name, fs::read(&p).unwrap())
            })
            .collect();
        out.sort();
        out
    };
    for policy in [FlushPolicy::Kafka, FlushPolicy::EveryAppend] {
        let config = FileLogConfig {
            flush: policy,
            ..tiny()
        };
        let (one, all) = (
            root.path().join(format!("one-{policy}")),
            root.path().join(format!("all-{policy}")),
        );
        let (mut a, _) = FileLog::open(&one, tp(), config).unwrap();
        for b in &batches {
            a.append_as_follower(std::slice::from_ref(b)).unwrap();
        }
        let (mut b, _) = FileLog::open(&all, tp(), config).unwrap();
        b.append_as_follower(&batches).unwrap();
        assert!(b.segments().len() >= 3, "the test wants rolls");
        assert_eq!(LogSnapshot::of(&a), LogSnapshot::of(&b));
        a.close().unwrap();
        b.close().unwrap();
        assert_eq!(files(&one), files(&all), "{policy}");
        assert_eq!(files(&all), files(&root.path().join("src")), "{policy}");
    }
}

/// Kafka's policy on a machine crash: follower appends past the recovery point were never
/// fsynced, and the crash takes any suffix of them. Every such loss reopens to a prefix of the
/// log at or above the recovery point, the epoch checkpoint and high watermark repaired against
/// what survived, and appending the lost batches again (the fetcher re-fetching them) gives
/// back the same log.
#[test]
fn kafka_policy_a_lost_unflushed_tail_reopens_and_is_fetched_again() {
    let root = tempfile::tempdir().unwrap();
    let (mut src, _) = FileLog::open(&root.path().join("src"), tp(), tiny()).unwrap();
    for i in 0..12 {
        src.append_as_leader(i / 4, records(1 + i as u32 % 3))
            .unwrap();
    }
    let batches = src.read(0, Offset::MAX);
    let config = FileLogConfig {
        flush: FlushPolicy::Kafka,
        segment_bytes: 4096,
        ..tiny()
    };
    let dst = root.path().join("dst");
    let (mut log, _) = FileLog::open(&dst, tp(), config).unwrap();
    log.append_as_follower(&batches[..3]).unwrap();
    log.advance_high_watermark(log.log_end_offset()).unwrap();
    log.flush().unwrap();
    let flushed = log.log_end_offset();
    let flushed_hw = log.high_watermark();
    log.append_as_follower(&batches[3..]).unwrap();
    log.advance_high_watermark(log.log_end_offset()).unwrap();
    let full = LogSnapshot::of(&log);
    let recovery_point = log.recovery_point();
    assert!(recovery_point >= flushed);
    drop(log); // no flush
    let checkpoint = |name: &str| fs::read_to_string(dst.join(tp().dir_name()).join(name)).unwrap();
    assert!(
        checkpoint(HIGH_WATERMARK_FILE).ends_with(&format!(" {flushed_hw}\n")),
        "the high watermark is checkpointed on flush, not on every change"
    );
    let pristine = root.path().join("pristine");
    copy_dir(&dst, &pristine);
    // The crash keeps the segment files up to any batch boundary at or past the recovery point.
    let dir = dst.join(tp().dir_name());
    let mut cuts = Vec::new();
    {
        let (log, _) = FileLog::open(&pristine, tp(), config).unwrap();
        for seg in log.segments() {
            for b in seg.batches() {
                if b.header.base_offset >= recovery_point {
                    cuts.push((seg.base_offset(), b.position, b.header.base_offset));
                }
            }
        }
    }
    assert!(
        cuts.len() >= 3,
        "the test wants an unflushed tail: {cuts:?}"
    );
    for (base, position, first_lost) in cuts {
        fs::remove_dir_all(&dst).unwrap();
        copy_dir(&pristine, &dst);
        // The cut segment loses its tail; later segments were never written.
        for e in fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            let seg_base: Option<Offset> = name
                .strip_suffix(".log")
                .or_else(|| name.strip_suffix(".index"))
                .and_then(|d| d.parse().ok());
            match seg_base {
                Some(b) if b > base => fs::remove_file(&p).unwrap(),
                Some(b) if b == base && name.ends_with(".log") => {
                    fs::OpenOptions::new()
                        .write(true)
                        .open(&p)
                        .unwrap()
                        .set_len(position)
                        .unwrap();
                }
                _ => {}
            }
        }
        let (mut log, report) = reopen(&dst, config).unwrap();
        assert_eq!(log.log_end_offset(), first_lost, "{report:?}");
        assert!(log.high_watermark() <= first_lost);
        assert!(log.epoch_cache().latest_epoch().is_some());
        // The checkpoint on disk now agrees with the batches that survived.
        let on_disk = kmirror_kernel::checkpoint::decode(&checkpoint(LEADER_EPOCH_FILE)).unwrap();
        assert_eq!(&on_disk, log.epoch_cache(), "cut at {first_lost}");
        let next = batches
            .iter()
            .position(|b| b.header().base_offset == first_lost)
            .unwrap();
        log.append_as_follower(&batches[next..]).unwrap();
        log.advance_high_watermark(log.log_end_offset()).unwrap();
        assert_eq!(LogSnapshot::of(&log), full, "cut at {first_lost}");
        log.close().unwrap();
    }
}

/// A clean reopen reads only headers; [`Verify::All`] checks every byte, and both agree.
#[test]
fn recovery_checks_crcs_only_from_the_recovery_point_unless_told_to_verify_all() {
    let root = tempfile::tempdir().unwrap();
    let (mut log, _) = open(root.path(), tiny());
    for i in 0..8 {
        log.append_as_leader(i / 3, records(2)).unwrap();
    }
    log.append_as_leader(3, testkit::pid_reset()).unwrap();
    log.flush().unwrap();
    log.append_as_leader(3, records(2)).unwrap();
    let total: u64 = log.segments().iter().map(|s| s.size()).sum();
    let tail = log
        .segments()
        .last()
        .unwrap()
        .batches()
        .last()
        .unwrap()
        .size;
    let snapshot = LogSnapshot::of(&log);
    drop(log);
    let copy = tempfile::tempdir().unwrap();
    copy_dir(root.path(), copy.path());
    let (log, report) = reopen(root.path(), tiny()).unwrap();
    assert_eq!(LogSnapshot::of(&log), snapshot);
    assert_eq!(report.scanned_bytes, total);
    // The tail, plus the control batch (verified whole wherever it is).
    assert!(report.verified_bytes < total / 2, "{report:?}");
    assert!(report.verified_bytes >= tail, "{report:?}");
    let (log, report) = verify_all(copy.path(), tiny()).unwrap();
    assert_eq!(LogSnapshot::of(&log), snapshot);
    assert_eq!(report.verified_bytes, total);
    assert_eq!(report.verified_from, 0);
}

/// `--flush kafka` follower appends start the writeback of the whole pages they complete
/// (`kmirror_harness::writeback`), so a later flush waits only for the last ones;
/// `every-append` fsyncs each append instead and starts nothing.
#[test]
fn kafka_policy_follower_appends_start_their_writeback() {
    let root = tempfile::tempdir().unwrap();
    let config = FileLogConfig::default();
    let (mut src, _) = FileLog::open(&root.path().join("src"), tp(), config).unwrap();
    while src.segments().iter().map(|s| s.size()).sum::<u64>() < 2 * writeback::MIN_BYTES {
        src.append_as_leader(0, records(1_000)).unwrap();
    }
    let batches = src.read(0, Offset::MAX);
    for (policy, starts) in [
        (FlushPolicy::Kafka, true),
        (FlushPolicy::EveryAppend, false),
    ] {
        let dir = root.path().join(format!("{policy}"));
        let (mut log, _) = FileLog::open(
            &dir,
            tp(),
            FileLogConfig {
                flush: policy,
                ..config
            },
        )
        .unwrap();
        log.append_as_follower(&batches).unwrap();
        let active = log.segments().last().unwrap();
        let whole_pages = active.size() - active.size() % writeback::PAGE_BYTES;
        let expected = if starts { whole_pages } else { 0 };
        assert_eq!(active.writeback_started_to(), expected, "{policy}");
    }
}
