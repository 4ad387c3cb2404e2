//! An independent reader checks what `FileLog` writes: kafka-python 3.0.12's `MemoryRecords`
//! (via `tests/check_segments.py`) must read every segment as Kafka record batches with valid
//! CRCs, the expected offsets, epochs, producers and control records, and nothing else; the
//! offset indexes and the leader-epoch checkpoint must be in Kafka's formats.
//!
//! Needs `python3` with `kafka-python` (`pip install kafka-python==3.0.12`). When they are
//! missing the tests fail if the `CI` environment variable is set, and otherwise print a loud
//! SKIP and pass.

use std::fs;
use std::io::Write;
use std::path::Path;
use std::process::Command;

use kmirror_harness::file_log::{FileLog, FileLogConfig, FlushPolicy, TopicPartition};
use kmirror_harness::record_batch::RawBatch;
use kmirror_kernel::batch::{BatchHeader, ControlType, LeaderBatch, ProducerBatchInfo};
use kmirror_kernel::log::{LogView, PartitionLog};
use kmirror_kernel::types::Offset;
use serde_json::{json, Value};

const SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/check_segments.py");
const KAFKA_PYTHON_VERSION: &str = "3.0.12";

/// Whether python3 and kafka-python are there; panics under CI when they are not.
fn kafka_python_available() -> bool {
    let unavailable = |why: String| {
        if std::env::var_os("CI").is_some() {
            panic!(
                "kafka-python check cannot run under CI: {why}. Install it with \
                 `pip install kafka-python=={KAFKA_PYTHON_VERSION}`."
            );
        }
        // Straight to the process's stderr, past the test harness's output capture, so the
        // skip shows in a normal `cargo test` run.
        let _ = writeln!(
            std::io::stderr(),
            "\n**************************************************************************\n\
             SKIP kafka-python segment check: {why}.\n\
             Install it with `pip install kafka-python=={KAFKA_PYTHON_VERSION}`; under CI \
             (CI set) this is a failure.\n\
             **************************************************************************\n"
        );
        false
    };
    match Command::new("python3")
        .args(["-c", "import kafka; print(kafka.__version__)"])
        .output()
    {
        Err(e) => unavailable(format!("python3 cannot be run ({e})")),
        Ok(out) if !out.status.success() => unavailable(format!(
            "kafka-python is not importable ({})",
            String::from_utf8_lossy(&out.stderr).trim()
        )),
        Ok(out) => {
            let version = String::from_utf8_lossy(&out.stdout).trim().to_owned();
            if version != KAFKA_PYTHON_VERSION {
                let why = format!(
                    "kafka-python {version} is installed, the check is pinned to \
                     {KAFKA_PYTHON_VERSION}"
                );
                if std::env::var_os("CI").is_some() {
                    panic!("{why}");
                }
                eprintln!("WARNING: {why}; running it anyway");
            }
            true
        }
    }
}

/// Runs the script on `expectations`; returns (success, stdout, stderr).
fn run_script(dir: &Path, expectations: &Value) -> (bool, String, String) {
    let path = dir.join("expectations.json");
    fs::write(&path, serde_json::to_vec_pretty(expectations).unwrap()).unwrap();
    let out = Command::new("python3")
        .arg(SCRIPT)
        .arg(&path)
        .output()
        .expect("python3 runs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn batch_json(h: &BatchHeader, synthetic: bool) -> Value {
    json!({
        "base_offset": h.base_offset,
        "last_offset": h.last_offset,
        "leader_epoch": h.partition_leader_epoch,
        "producer_id": h.producer_id,
        "producer_epoch": h.producer_epoch,
        "base_sequence": h.base_sequence,
        "transactional": h.is_transactional,
        "control": h.control.map(ControlType::code),
        "synthetic": synthetic,
    })
}

/// The expectations for `log`: every segment with its batches (all synthetic), the epoch
/// checkpoint. Also checks that the segment files on disk are exactly `log`'s segments and
/// together hold exactly the batches `log` reports.
fn expectations(log: &FileLog) -> Value {
    let mut on_disk: Vec<String> = fs::read_dir(log.dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".log"))
        .collect();
    on_disk.sort();
    let mut segments = Vec::new();
    let mut all = Vec::new();
    let mut names = Vec::new();
    for seg in log.segments() {
        names.push(
            seg.log_path()
                .file_name()
                .unwrap()
                .to_str()
                .unwrap()
                .to_owned(),
        );
        let batches: Vec<Value> = seg
            .batches()
            .iter()
            .map(|b| {
                all.push(b.header);
                batch_json(&b.header, true)
            })
            .collect();
        segments.push(json!({
            "path": seg.log_path(),
            "index": seg.index_path(),
            "batches": batches,
        }));
    }
    assert_eq!(names, on_disk, "segment files on disk");
    let read: Vec<BatchHeader> = log
        .read(log.log_start_offset(), Offset::MAX)
        .iter()
        .map(RawBatch::header)
        .collect();
    assert_eq!(all, read, "segments hold exactly the log's batches");
    let entries: Vec<Value> = log
        .epoch_cache()
        .entries()
        .map(|e| json!([e.epoch, e.start_offset]))
        .collect();
    json!({
        "segments": segments,
        "leader_epoch_checkpoint": {
            "path": log.dir().join("leader-epoch-checkpoint"),
            "entries": entries,
        },
    })
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

/// A source log with every kind of batch over several epochs and segments, written as leader.
fn write_source(root: &Path, config: FileLogConfig) -> FileLog {
    let tp = TopicPartition::new("orders", 3).unwrap();
    let (mut log, _) = FileLog::open(root, tp, config).unwrap();
    let mut ts = 1_700_000_000_000;
    let mut append = |log: &mut FileLog, epoch, batch| {
        ts += 1000;
        log.append_as_leader_at(epoch, batch, ts).unwrap()
    };
    append(&mut log, 0, records(3, None, false));
    append(&mut log, 0, records(2, producer(7, 0), false));
    append(&mut log, 0, records(4, producer(7, 2), false));
    append(&mut log, 1, records(2, producer(8, 0), true));
    append(&mut log, 1, records(1, None, false));
    append(&mut log, 1, control(ControlType::Commit, Some((8, 0))));
    append(&mut log, 2, records(3, producer(9, 0), true));
    append(&mut log, 2, control(ControlType::Abort, Some((9, 0))));
    append(&mut log, 4, control(ControlType::MirrorPidReset, None));
    append(&mut log, 4, records(5, None, false));
    append(&mut log, 6, records(1, producer(10, 0), false));
    log.advance_high_watermark(log.log_end_offset()).unwrap();
    log
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

#[test]
fn kafka_python_reads_leader_written_segments() {
    if !kafka_python_available() {
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let log = write_source(root.path(), small_segments());
    assert!(log.segments().len() >= 3, "the test wants segment rolls");
    assert!(
        log.segments().iter().any(|s| !s.index_entries().is_empty()),
        "the test wants index entries"
    );
    assert_eq!(log.epoch_cache().len(), 5);
    let expect = expectations(&log);
    log.close().unwrap();
    let (ok, stdout, stderr) = run_script(root.path(), &expect);
    assert!(ok, "kafka-python check failed:\n{stdout}\n{stderr}");
    assert!(stdout.contains("all as expected"), "{stdout}");
    eprintln!("{stdout}");
}

#[test]
fn kafka_python_reads_mirrored_then_failed_over_segments() {
    if !kafka_python_available() {
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let source = write_source(&root.path().join("source"), FileLogConfig::default());
    let fetched = source.read(0, Offset::MAX);

    // The mirror copies the source byte for byte in a few fetches, then fails over: it is
    // truncated into the middle, bumps its epoch and writes the PID reset and new data itself.
    let tp = TopicPartition::new("orders", 3).unwrap();
    let (mut mirror, _) = FileLog::open(&root.path().join("mirror"), tp, small_segments()).unwrap();
    for chunk in fetched.chunks(4) {
        mirror.append_as_follower(chunk).unwrap();
    }
    let mirrored: Vec<u8> = fetched.iter().flat_map(|b| b.bytes().to_vec()).collect();
    let on_disk: Vec<u8> = mirror
        .segments()
        .iter()
        .flat_map(|s| fs::read(s.log_path()).unwrap())
        .collect();
    assert_eq!(on_disk, mirrored, "mirrored bytes are kept exactly");
    mirror.truncate_to(20).unwrap();
    let end = mirror.log_end_offset();
    assert!(end < 20 && end > 0);
    mirror
        .append_as_leader_at(9, control(ControlType::MirrorPidReset, None), 5)
        .unwrap();
    mirror
        .append_as_leader_at(9, records(6, producer(100, 0), false), 6)
        .unwrap();
    let expect = expectations(&mirror);
    mirror.close().unwrap();
    let (ok, stdout, stderr) = run_script(root.path(), &expect);
    assert!(ok, "kafka-python check failed:\n{stdout}\n{stderr}");
}

/// The check is not vacuous: a flipped byte, a torn tail and a wrong expectation all fail it.
#[test]
fn kafka_python_check_catches_damage() {
    if !kafka_python_available() {
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let log = write_source(root.path(), small_segments());
    let expect = expectations(&log);
    let seg = log.segments()[0].log_path().to_path_buf();
    log.close().unwrap();
    let original = fs::read(&seg).unwrap();

    let mut flipped = original.clone();
    flipped[70] ^= 1;
    fs::write(&seg, &flipped).unwrap();
    let (ok, _, stderr) = run_script(root.path(), &expect);
    assert!(!ok && stderr.contains("CRC-32C check failed"), "{stderr}");

    fs::write(&seg, &original[..original.len() - 3]).unwrap();
    let (ok, _, stderr) = run_script(root.path(), &expect);
    assert!(!ok && stderr.contains("valid_bytes()"), "{stderr}");

    fs::write(&seg, &original).unwrap();
    let mut wrong = expect.clone();
    wrong["segments"][0]["batches"][0]["leader_epoch"] = json!(1);
    let (ok, _, stderr) = run_script(root.path(), &wrong);
    assert!(!ok && stderr.contains("leader_epoch"), "{stderr}");

    let (ok, stdout, stderr) = run_script(root.path(), &expect);
    assert!(ok, "{stdout}\n{stderr}");
}
