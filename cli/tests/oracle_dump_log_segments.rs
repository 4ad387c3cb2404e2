//! Kafka reads what we write: every segment directory the harness's writing scenarios produce is
//! read back by Apache Kafka 4.4.0's own `DumpLogSegments` (run with
//! `cargo test --release -- --include-ignored oracle`).
//!
//! For each scenario (the `kmirror demo` binary: mirroring, failover with an open transaction,
//! `MIRROR_PID_RESET`, local producers, failback; the CLI's `produce`, `mirror`, `stop`, `start`
//! and `replay` of the saved model traces; and `FileLog` directly: leader and follower
//! appends over small rolling segments with offset-index entries, idempotent and transactional
//! producers, commit and abort markers, truncations, a log restarted at a later offset) every
//! `.log` and `.index` file under the scenario's root is given to one
//! `DumpLogSegments --deep-iteration` run and one `--index-sanity-check` run. Both must exit 0
//! and print exactly the lines we compute from our own reader of the same files (batch headers,
//! positions, CRCs, every record, control records, index entries), and nothing on stderr but
//! Kafka's "non-consecutive offsets" note for a segment whose first offset is not 0 (its checker
//! starts every file at offset -1). Our reader in turn must agree with what the scenario
//! appended. The `leader-epoch-checkpoint` and offset checkpoints of every partition directory
//! are read back with Kafka's `LeaderEpochCheckpointFile` and `OffsetCheckpointFile`.
//!
//! Kafka 4.4.0 knows no `MIRROR_PID_RESET` (control type 100, KIP-1279): `DumpLogSegments`
//! prints its record as `controlType: UNKNOWN(100)` and carries on, which the tests assert.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use kmirror_harness::file_log::{
    decode_offset_checkpoint, FileLog, FileLogConfig, FlushPolicy, TopicPartition,
    HIGH_WATERMARK_FILE, LEADER_EPOCH_FILE, LOG_START_OFFSET_FILE, RECOVERY_POINT_FILE,
};
use kmirror_harness::record_batch::{RawBatch, Record, TIMESTAMP_TYPE_MASK};
use kmirror_harness::segment::{
    index_file_name, log_file_name, parse_file_name, IndexEntry, INDEX_ENTRY_SIZE, INDEX_SUFFIX,
    LOG_SUFFIX,
};
use kmirror_kernel::batch::{BatchHeader, ControlType, LeaderBatch, ProducerBatchInfo};
use kmirror_kernel::checkpoint;
use kmirror_kernel::log::{LogView, PartitionLog};
use kmirror_kernel::types::Offset;
use kmirror_model::runner::{check, RunOptions};
use kmirror_model::ModelConfig;
use kmirror_testsupport::dir_tree;
use kmirror_testsupport::jvm::Oracle;
use kmirror_testsupport::oracle_support::{scratch_dir, LineOracle};

const DUMP_LOG_SEGMENTS: &str = "org.apache.kafka.tools.DumpLogSegments";

/// Attribute bit 6 of a batch: a delete horizon is set (Kafka's `DELETE_HORIZON_FLAG_MASK`).
const DELETE_HORIZON_FLAG_MASK: i16 = 0x40;

/// What our reader found in the files of one scenario.
#[derive(Default, Debug)]
struct Tally {
    partition_dirs: usize,
    segments: usize,
    batches: usize,
    records: usize,
    index_entries: usize,
    /// Control records by what Kafka prints for them (`endTxnMarker: COMMIT ...`,
    /// `controlType: UNKNOWN(100)`).
    controls: BTreeMap<String, usize>,
}

impl Tally {
    fn controls_like(&self, prefix: &str) -> usize {
        self.controls
            .iter()
            .filter(|(k, _)| k.starts_with(prefix))
            .map(|(_, n)| n)
            .sum()
    }
}

fn file_name(path: &Path) -> &str {
    path.file_name()
        .and_then(|n| n.to_str())
        .expect("a UTF-8 file name")
}

/// Every partition directory under `root` (a directory holding a `<20 digits>.log` file).
fn partition_dirs(root: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut pending = vec![root.to_path_buf()];
    while let Some(dir) = pending.pop() {
        let mut has_segment = false;
        for entry in fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                pending.push(path);
            } else if parse_file_name(file_name(&path), LOG_SUFFIX).is_some() {
                has_segment = true;
            }
        }
        if has_segment {
            found.push(dir);
        }
    }
    found.sort();
    found
}

/// The segment base offsets of a partition directory, in order.
fn segment_bases(dir: &Path) -> Vec<Offset> {
    let mut bases: Vec<Offset> = fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| parse_file_name(file_name(&e.unwrap().path()), LOG_SUFFIX))
        .collect();
    bases.sort();
    bases
}

/// Kafka's name of a compression codec (`CompressionType.name`).
fn codec_name(codec: i16) -> &'static str {
    match codec {
        0 => "none",
        1 => "gzip",
        2 => "snappy",
        3 => "lz4",
        4 => "zstd",
        _ => panic!("compression codec {codec} is not Kafka's"),
    }
}

/// Kafka's `DefaultRecordBatch.incrementSequence`: sequences wrap to 0 after `i32::MAX`; no
/// sequence (-1) stays -1.
fn increment_sequence(sequence: i32, delta: i32) -> i32 {
    if sequence == -1 {
        -1
    } else if sequence > i32::MAX - delta {
        delta - (i32::MAX - sequence) - 1
    } else {
        sequence + delta
    }
}

/// What `DumpLogSegments` prints after a control record's metadata.
fn control_suffix(record: &Record) -> String {
    let key = record.key.as_deref().expect("a control record has a key");
    let value = record.value.as_deref().unwrap_or_default();
    match i16::from_be_bytes([key[2], key[3]]) {
        code @ (0 | 1) => {
            let marker = if code == 0 { "ABORT" } else { "COMMIT" };
            let coordinator_epoch = i32::from_be_bytes([value[2], value[3], value[4], value[5]]);
            format!(" endTxnMarker: {marker} coordinatorEpoch: {coordinator_epoch}")
        }
        code @ 2..=6 => panic!("kmirror never writes Kafka's KRaft control type {code}"),
        code => format!(" controlType: UNKNOWN({code})"),
    }
}

/// The record line `DumpLogSegments --deep-iteration` prints for `record` of `batch`.
fn record_line(batch: &RawBatch, record: &Record, tally: &mut Tally) -> String {
    let h = batch.header();
    let log_append_time = batch.attributes() & TIMESTAMP_TYPE_MASK != 0;
    let (timestamp_type, timestamp) = if log_append_time {
        ("LogAppendTime", batch.max_timestamp())
    } else {
        (
            "CreateTime",
            batch.base_timestamp() + record.timestamp_delta,
        )
    };
    let size = |b: &Option<Vec<u8>>| b.as_ref().map_or(-1, |b| b.len() as i64);
    let header_keys: Vec<&str> = record.headers.iter().map(|(k, _)| k.as_str()).collect();
    let mut line = format!(
        "| offset: {} {timestamp_type}: {timestamp} keySize: {} valueSize: {} sequence: {} \
         headerKeys: [{}]",
        h.base_offset + i64::from(record.offset_delta),
        size(&record.key),
        size(&record.value),
        increment_sequence(h.base_sequence, record.offset_delta),
        header_keys.join(","),
    );
    if h.is_control() {
        let suffix = control_suffix(record);
        *tally.controls.entry(suffix.trim().to_owned()).or_default() += 1;
        line += &suffix;
    }
    line
}

/// The batch line `DumpLogSegments` prints for `batch` at byte `position`.
fn batch_line(batch: &RawBatch, position: usize) -> String {
    let h = batch.header();
    let timestamp_type = if batch.attributes() & TIMESTAMP_TYPE_MASK != 0 {
        "LogAppendTime"
    } else {
        "CreateTime"
    };
    let delete_horizon = if batch.attributes() & DELETE_HORIZON_FLAG_MASK != 0 {
        format!("OptionalLong[{}]", batch.base_timestamp())
    } else {
        "OptionalLong.empty".to_owned()
    };
    format!(
        "baseOffset: {} lastOffset: {} count: {} baseSequence: {} lastSequence: {} \
         producerId: {} producerEpoch: {} partitionLeaderEpoch: {} isTransactional: {} \
         isControl: {} deleteHorizonMs: {delete_horizon} position: {position} \
         {timestamp_type}: {} size: {} magic: 2 compresscodec: {} crc: {} isvalid: true",
        h.base_offset,
        h.last_offset,
        batch.records_count(),
        h.base_sequence,
        h.last_sequence(),
        h.producer_id,
        h.producer_epoch,
        h.partition_leader_epoch,
        h.is_transactional,
        h.is_control(),
        batch.max_timestamp(),
        batch.size_in_bytes(),
        codec_name(batch.compression_codec()),
        batch.crc(),
    )
}

/// The lines `DumpLogSegments --deep-iteration` prints for the `.log` file `path`, computed
/// with our reader, and the "non-consecutive offsets" pairs Kafka's checker reports for it.
fn expected_log_dump(path: &Path, tally: &mut Tally) -> (Vec<String>, Vec<(i64, i64)>) {
    let base = parse_file_name(file_name(path), LOG_SUFFIX).expect("a segment name");
    let bytes = fs::read(path).unwrap();
    let batches = RawBatch::parse_many(&bytes)
        .unwrap_or_else(|e| panic!("our reader refuses {}: {e}", path.display()));
    let mut lines = vec![
        format!("Dumping {}", path.display()),
        format!("Log starting offset: {base}"),
    ];
    let mut gaps = Vec::new();
    let mut previous = -1;
    let mut position = 0;
    for batch in &batches {
        lines.push(batch_line(batch, position));
        let records = batch
            .records()
            .unwrap_or_else(|e| panic!("our reader refuses a batch of {}: {e}", path.display()));
        for record in &records {
            let offset = batch.header().base_offset + i64::from(record.offset_delta);
            if offset != previous + 1 {
                gaps.push((previous, offset));
            }
            previous = offset;
            lines.push(record_line(batch, record, tally));
            tally.records += 1;
        }
        position += batch.size_in_bytes();
        tally.batches += 1;
    }
    tally.segments += 1;
    (lines, gaps)
}

/// The entries of the offset index file `path`, read with our reader.
fn index_entries(path: &Path) -> Vec<IndexEntry> {
    let bytes = fs::read(path).unwrap();
    assert_eq!(bytes.len() % INDEX_ENTRY_SIZE, 0, "{}", path.display());
    bytes
        .chunks_exact(INDEX_ENTRY_SIZE)
        .map(|c| IndexEntry::from_bytes(c.try_into().expect("8 bytes")))
        .collect()
}

/// The lines `DumpLogSegments` prints for the index file `path`: its entries, or with
/// `--index-sanity-check` the verdict.
fn expected_index_dump(path: &Path, sanity_only: bool) -> Vec<String> {
    let base = parse_file_name(file_name(path), INDEX_SUFFIX).expect("an index name");
    let entries = index_entries(path);
    let mut lines = vec![format!("Dumping {}", path.display())];
    if entries.is_empty() {
        lines.push(format!("{} is empty.", path.display()));
    } else if sanity_only {
        lines.push(format!("{} passed sanity check.", path.display()));
    } else {
        for (i, e) in entries.iter().enumerate() {
            let offset = base + i64::from(e.relative_offset);
            // Kafka stops at a zero entry past the first (a preallocated file's unused tail).
            if offset == base && i > 0 {
                break;
            }
            lines.push(format!("offset: {offset} position: {}", e.position));
        }
    }
    lines
}

/// Runs `DumpLogSegments` with `flags` on `files`; returns its stdout and stderr lines. Fails
/// the test on a non-zero exit.
fn run_dump(oracle: &Oracle, flags: &[&str], files: &[PathBuf]) -> (Vec<String>, Vec<String>) {
    let list: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
    let output = oracle
        .command(DUMP_LOG_SEGMENTS)
        .args(flags)
        .arg("--files")
        .arg(list.join(","))
        .output()
        .expect("java starts");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(
        output.status.success(),
        "DumpLogSegments {flags:?} failed ({}):\n{stderr}\n{stdout}",
        output.status
    );
    let lines = |s: &str| s.lines().map(str::to_owned).collect::<Vec<_>>();
    (lines(&stdout), lines(&stderr))
}

/// Kafka's stderr parsed as "Non-consecutive offsets in <file>" blocks of `(previous, next)`
/// pairs. Any other line is a reported problem and fails the test.
fn non_consecutive_reports(stderr: &[String]) -> BTreeMap<String, Vec<(i64, i64)>> {
    let mut reports: BTreeMap<String, Vec<(i64, i64)>> = BTreeMap::new();
    let mut current: Option<String> = None;
    for line in stderr {
        if let Some(file) = line.strip_prefix("Non-consecutive offsets in ") {
            current = Some(file.to_owned());
            reports.entry(file.to_owned()).or_default();
            continue;
        }
        let pair = line.strip_prefix("  ").and_then(|rest| {
            let (a, b) = rest.split_once(" is followed by ")?;
            Some((a.parse().ok()?, b.parse().ok()?))
        });
        match (pair, &current) {
            (Some(pair), Some(file)) => reports.entry(file.clone()).or_default().push(pair),
            _ => panic!("DumpLogSegments reported a problem:\n{}", stderr.join("\n")),
        }
    }
    reports
}

/// Fails with the first differing line and its neighbourhood unless `kafka == ours`.
fn assert_same_lines(what: &str, kafka: &[String], ours: &[String]) {
    if kafka == ours {
        return;
    }
    let at = kafka
        .iter()
        .zip(ours)
        .position(|(a, b)| a != b)
        .unwrap_or(kafka.len().min(ours.len()));
    let around = |lines: &[String]| {
        lines[at.saturating_sub(2).min(lines.len())..(at + 3).min(lines.len())].join("\n")
    };
    panic!(
        "{what}: DumpLogSegments prints something other than what we wrote, at line {at} \
         ({} lines from Kafka, {} expected)\n--- Kafka:\n{}\n--- expected from our reader:\n{}",
        kafka.len(),
        ours.len(),
        around(kafka),
        around(ours)
    );
}

/// Reads every checkpoint of the partition directory `dir` with Kafka's readers and compares
/// with ours.
fn check_checkpoints(kafka: &mut LineOracle, dir: &Path) {
    let leader_epochs = dir.join(LEADER_EPOCH_FILE);
    if leader_epochs.exists() {
        let text = fs::read_to_string(&leader_epochs).unwrap();
        let ours = checkpoint::decode(&text).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        let expected = ours
            .entries()
            .map(|e| format!(" {}@{}", e.epoch, e.start_offset))
            .fold("ok".to_owned(), |acc, e| acc + &e);
        for request in ["CHECKPOINT_READ", "CHECKPOINT_LOAD"] {
            let answer = kafka.ask(&format!("{request} {}", leader_epochs.display()));
            assert_eq!(answer, expected, "{request} {}", leader_epochs.display());
        }
    }
    let tp = TopicPartition::from_dir_name(file_name(dir)).unwrap();
    for name in [
        HIGH_WATERMARK_FILE,
        LOG_START_OFFSET_FILE,
        RECOVERY_POINT_FILE,
    ] {
        let path = dir.join(name);
        if !path.exists() {
            continue;
        }
        let text = fs::read_to_string(&path).unwrap();
        let ours = decode_offset_checkpoint(&text, &path, &tp)
            .unwrap_or_else(|e| panic!("{}: {e:?}", path.display()));
        let expected = match ours {
            Some(offset) => format!("ok {}-{}={offset}", tp.topic, tp.partition),
            None => "ok".to_owned(),
        };
        let answer = kafka.ask(&format!("OFFSET_CHECKPOINT_READ {}", path.display()));
        assert_eq!(answer, expected, "{}", path.display());
    }
}

/// Dumps every segment and index file under `root` with Kafka and compares with our reader;
/// reads every checkpoint with Kafka. Returns what was checked.
fn kafka_reads_everything_under(oracle: &Oracle, root: &Path) -> Tally {
    let root = root.canonicalize().unwrap();
    let dirs = partition_dirs(&root);
    assert!(
        !dirs.is_empty(),
        "no partition directory under {}",
        root.display()
    );
    let mut tally = Tally {
        partition_dirs: dirs.len(),
        ..Tally::default()
    };
    let (mut files, mut index_files) = (Vec::new(), Vec::new());
    let (mut deep_expected, mut sanity_expected) = (Vec::new(), Vec::new());
    let mut gaps_expected = BTreeMap::new();
    for dir in &dirs {
        for base in segment_bases(dir) {
            let log = dir.join(log_file_name(base));
            let (lines, gaps) = expected_log_dump(&log, &mut tally);
            deep_expected.extend(lines);
            if !gaps.is_empty() {
                // Kafka's checker starts every file at -1, so a segment based above 0 is
                // "non-consecutive" at its first offset; any other gap would be ours.
                assert_eq!(
                    gaps,
                    vec![(-1, base)],
                    "{} has an offset gap",
                    log.display()
                );
                gaps_expected.insert(log.display().to_string(), gaps);
            }
            files.push(log);
            let index = dir.join(index_file_name(base));
            if index.exists() {
                tally.index_entries += index_entries(&index).len();
                deep_expected.extend(expected_index_dump(&index, false));
                sanity_expected.extend(expected_index_dump(&index, true));
                files.push(index.clone());
                index_files.push(index);
            }
        }
    }

    let (stdout, stderr) = run_dump(oracle, &["--deep-iteration"], &files);
    assert_same_lines("--deep-iteration", &stdout, &deep_expected);
    assert_eq!(non_consecutive_reports(&stderr), gaps_expected);

    let (stdout, stderr) = run_dump(oracle, &["--index-sanity-check"], &index_files);
    assert_same_lines("--index-sanity-check", &stdout, &sanity_expected);
    assert!(
        stderr.is_empty(),
        "--index-sanity-check:\n{}",
        stderr.join("\n")
    );

    let scratch = scratch_dir();
    let mut kafka = LineOracle::start(
        oracle,
        "dev.kmirror.oracle.EpochCacheOracle",
        &[scratch.path()],
    );
    for dir in &dirs {
        check_checkpoints(&mut kafka, dir);
    }
    eprintln!("{}: {tally:?}", root.display());
    tally
}

/// Checks with our reader that `log`'s segment files hold exactly the batches the log reports
/// and that each index file holds the segment's index entries.
fn assert_files_hold_the_log(log: &FileLog) {
    let mut on_disk = Vec::new();
    for segment in log.segments() {
        let bytes = fs::read(segment.log_path()).unwrap();
        on_disk.extend(
            RawBatch::parse_many(&bytes)
                .unwrap()
                .iter()
                .map(RawBatch::header),
        );
        assert_eq!(index_entries(segment.index_path()), segment.index_entries());
    }
    let appended: Vec<BatchHeader> = log
        .read(log.log_start_offset(), Offset::MAX)
        .iter()
        .map(RawBatch::header)
        .collect();
    assert_eq!(
        on_disk, appended,
        "the segment files hold exactly the log's batches"
    );
}

fn producer(producer_id: i64, base_sequence: i32) -> Option<ProducerBatchInfo> {
    Some(ProducerBatchInfo {
        producer_id,
        producer_epoch: 0,
        base_sequence,
    })
}

fn records(record_count: u32, producer: Option<ProducerBatchInfo>, txn: bool) -> LeaderBatch {
    LeaderBatch::Records {
        record_count,
        producer,
        transactional: txn,
    }
}

fn control(control: ControlType, producer: Option<(i64, i16)>) -> LeaderBatch {
    LeaderBatch::Control { control, producer }
}

fn small_segments() -> FileLogConfig {
    FileLogConfig {
        segment_bytes: 400,
        index_interval_bytes: 100,
        flush: FlushPolicy::EveryAppend,
        append_timestamp_ms: 0,
        deferred_durability: false,
    }
}

/// A leader's log with every kind of batch over several epochs and small segments.
fn write_source(root: &Path) -> FileLog {
    let tp = TopicPartition::new("orders", 3).unwrap();
    let (mut log, _) = FileLog::open(root, tp, small_segments()).unwrap();
    let batches = [
        (0, records(3, None, false)),
        (0, records(2, producer(7, 0), false)),
        (0, records(4, producer(7, 2), false)),
        (1, records(2, producer(8, 0), true)),
        (1, records(1, None, false)),
        (1, control(ControlType::Commit, Some((8, 0)))),
        (2, records(3, producer(9, 0), true)),
        (2, control(ControlType::Abort, Some((9, 0)))),
        (4, control(ControlType::MirrorPidReset, None)),
        (4, records(5, None, false)),
        (6, records(3, producer(10, i32::MAX - 1), false)),
        (6, records(7, producer(11, 0), true)),
        (6, records(2, None, false)),
    ];
    for (i, (epoch, batch)) in batches.into_iter().enumerate() {
        let timestamp = 1_700_000_000_000 + 1000 * i as i64;
        log.append_as_leader_at(epoch, batch, timestamp).unwrap();
    }
    log.advance_high_watermark(log.log_end_offset()).unwrap();
    log
}

/// `kmirror demo` (two nodes: east written over Kafka's wire, west mirroring it, failover with
/// a half-mirrored transaction and `MIRROR_PID_RESET`, idempotent and transactional producers
/// on west, failback): DumpLogSegments reads every segment of both nodes' partitions and of
/// `__mirror_state` exactly as we wrote them, and prints the reset as `UNKNOWN(100)`.
#[test]
#[ignore = "needs Java 17 and Maven; run with `-- --include-ignored oracle`"]
fn oracle_dump_log_segments_reads_the_demo_clusters() {
    let Some(oracle) = Oracle::for_tests("oracle_dump_log_segments_reads_the_demo_clusters") else {
        return;
    };
    let root = tempfile::tempdir().unwrap();
    let demo = root.path().join("demo");
    let output = Command::new(env!("CARGO_BIN_EXE_kmirror"))
        .arg("demo")
        .arg("--dir")
        .arg(&demo)
        .output()
        .expect("kmirror runs");
    assert!(output.status.success(), "kmirror demo: {output:?}");
    let tally = kafka_reads_everything_under(&oracle, &demo);
    assert!(tally.partition_dirs >= 6, "{tally:?}");
    assert!(
        tally.controls_like("controlType: UNKNOWN(100)") > 0,
        "{tally:?}"
    );
    assert!(tally.controls_like("endTxnMarker: COMMIT") > 0, "{tally:?}");
    assert!(tally.controls_like("endTxnMarker: ABORT") > 0, "{tally:?}");
}

/// Runs the `kmirror` binary with `args` in `dir`; fails the test unless it exits 0.
fn kmirror(dir: &Path, args: &[&str]) {
    let output = Command::new(env!("CARGO_BIN_EXE_kmirror"))
        .current_dir(dir)
        .args(args)
        .output()
        .expect("kmirror runs");
    assert!(
        output.status.success(),
        "kmirror {args:?}: {}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The examples (`sometimes` properties) of the tiny configuration's exhaustive check whose
/// traces the test saves and replays with `kmirror replay`: generated by the current model at
/// test time, so no saved trace can go stale when the kernel's messages change.
const REPLAYED_EXAMPLES: [&str; 4] = [
    "failback_completes",
    "divergence_truncation",
    "failover_with_open_transaction",
    "refused_produce",
];

/// What the binaries wrote: the single-partition destination the retired format's binary made
/// (`tests/fixtures/single-partition`: plain, idempotent, committed and aborted transactional
/// batches mirrored on two replicas, a stop's `MIRROR_PID_RESET`, local writes) and the node
/// destination `kmirror convert` makes of it, plus `kmirror replay` of the model traces of
/// [`REPLAYED_EXAMPLES`]: DumpLogSegments reads every segment of every log exactly as we
/// wrote it.
#[test]
#[ignore = "needs Java 17 and Maven; run with `-- --include-ignored oracle`"]
fn oracle_dump_log_segments_reads_converted_clusters_and_replays() {
    let Some(oracle) =
        Oracle::for_tests("oracle_dump_log_segments_reads_converted_clusters_and_replays")
    else {
        return;
    };
    let root = tempfile::tempdir().unwrap();
    let dir = root.path();
    dir_tree::copy(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/single-partition/west"),
        &dir.join("west"),
    );
    kmirror(dir, &["convert", "--from", "west", "--dest", "node"]);

    let report = check(&ModelConfig::tiny(), &RunOptions::default());
    let mut replayed = 0;
    for name in REPLAYED_EXAMPLES {
        let trace = report
            .properties
            .iter()
            .find(|p| p.name == name)
            .and_then(|p| p.trace.as_ref())
            .unwrap_or_else(|| panic!("{name} has an example in the tiny configuration"));
        let path = dir.join(format!("{name}.json"));
        fs::write(&path, serde_json::to_vec_pretty(trace).unwrap()).unwrap();
        replayed += 1;
        let out = format!("replay-{replayed}");
        kmirror(dir, &["replay", &path.display().to_string(), "--dir", &out]);
    }
    let tally = kafka_reads_everything_under(&oracle, dir);
    eprintln!("{replayed} model traces replayed");
    assert!(tally.partition_dirs >= 6, "{tally:?}");
    assert!(
        tally.controls_like("controlType: UNKNOWN(100)") >= 2,
        "{tally:?}"
    );
    assert!(tally.controls_like("endTxnMarker: COMMIT") > 0, "{tally:?}");
    assert!(tally.controls_like("endTxnMarker: ABORT") > 0, "{tally:?}");
}

/// `FileLog` as leader and as follower, with segment rolls and index entries: a source with
/// every kind of batch (plain, idempotent with a sequence wrapping past `i32::MAX`,
/// transactional, COMMIT, ABORT, MIRROR_PID_RESET) over several epochs; a mirror that copies it
/// byte for byte in fetch-sized chunks, is truncated into the middle and writes a PID reset, a
/// transaction and its commit as leader; and a log fully truncated to restart at offset 40.
/// DumpLogSegments reads every file as we meant to write it.
#[test]
#[ignore = "needs Java 17 and Maven; run with `-- --include-ignored oracle`"]
fn oracle_dump_log_segments_reads_file_log_scenarios() {
    let Some(oracle) = Oracle::for_tests("oracle_dump_log_segments_reads_file_log_scenarios")
    else {
        return;
    };
    let root = tempfile::tempdir().unwrap();

    let source = write_source(&root.path().join("source"));
    assert!(
        source.segments().len() >= 3,
        "the scenario wants segment rolls"
    );
    assert_files_hold_the_log(&source);
    let fetched = source.read(0, Offset::MAX);

    let tp = TopicPartition::new("orders", 3).unwrap();
    let (mut mirror, _) =
        FileLog::open(&root.path().join("mirror"), tp.clone(), small_segments()).unwrap();
    for chunk in fetched.chunks(3) {
        mirror.append_as_follower(chunk).unwrap();
    }
    mirror.truncate_to(20).unwrap();
    let pid_reset = control(ControlType::MirrorPidReset, None);
    mirror.append_as_leader_at(9, pid_reset, 5).unwrap();
    mirror
        .append_as_leader_at(9, records(6, producer(100, 0), false), 6)
        .unwrap();
    mirror
        .append_as_leader_at(9, records(2, producer(101, 0), true), 7)
        .unwrap();
    mirror
        .append_as_leader_at(9, control(ControlType::Commit, Some((101, 0))), 8)
        .unwrap();
    mirror
        .advance_high_watermark(mirror.log_end_offset())
        .unwrap();
    assert_files_hold_the_log(&mirror);

    let (mut restarted, _) =
        FileLog::open(&root.path().join("restarted"), tp, small_segments()).unwrap();
    restarted
        .append_as_leader_at(1, records(4, None, false), 1)
        .unwrap();
    restarted.truncate_fully_and_start_at(40).unwrap();
    for i in 0..6 {
        let batch = records(3, producer(5, i * 3), false);
        restarted
            .append_as_leader_at(2, batch, 10 + i64::from(i))
            .unwrap();
    }
    assert!(
        restarted.segments().len() >= 2,
        "the scenario wants segment rolls"
    );
    assert_files_hold_the_log(&restarted);

    for log in [source, mirror, restarted] {
        log.close().unwrap();
    }
    let tally = kafka_reads_everything_under(&oracle, root.path());
    assert_eq!(tally.partition_dirs, 3);
    assert!(
        tally.index_entries > 0,
        "the scenario wants index entries: {tally:?}"
    );
    assert!(
        tally.controls_like("controlType: UNKNOWN(100)") >= 2,
        "{tally:?}"
    );
}

/// The check is not vacuous: after a segment loses its last three bytes, Kafka reports the
/// invalid tail and its dump no longer equals what our reader expected of the intact file.
#[test]
#[ignore = "needs Java 17 and Maven; run with `-- --include-ignored oracle`"]
fn oracle_dump_log_segments_catches_a_torn_segment() {
    let Some(oracle) = Oracle::for_tests("oracle_dump_log_segments_catches_a_torn_segment") else {
        return;
    };
    let root = tempfile::tempdir().unwrap();
    let source = write_source(root.path());
    let segment = source.segments()[0].log_path().canonicalize().unwrap();
    source.close().unwrap();
    let (intact, _) = expected_log_dump(&segment, &mut Tally::default());

    let bytes = fs::read(&segment).unwrap();
    fs::write(&segment, &bytes[..bytes.len() - 3]).unwrap();
    let (stdout, _) = run_dump(
        &oracle,
        &["--deep-iteration"],
        std::slice::from_ref(&segment),
    );
    assert_ne!(stdout, intact);
    let complaint = stdout.last().expect("Kafka prints something");
    assert!(
        complaint.starts_with("Found ") && complaint.ends_with(file_name(&segment)),
        "{}",
        stdout.join("\n")
    );
}
