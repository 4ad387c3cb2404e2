//! A live Apache Kafka 4.4.0 broker as the source of a mirror (`-- --include-ignored oracle`).
//!
//! One single-node KRaft broker started from the oracle's jars serves every step (to keep the
//! run short): Kafka's own Java producer writes plain, idempotent, committed and aborted
//! transactional batches and leaves one transaction open; `kmirror mirror --source-bootstrap`
//! copies the partition; `kmirror stop` fails over. Then the faults: the broker killed in the
//! middle of a held Fetch, a mirror whose broker is gone, the broker's return, a wrong topic id.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use kmirror_testsupport::oracle_support::run;

use kmirror::log_cli::SystemClock;
use kmirror_harness::driver::{Clock, Cluster, Driver, DriverOptions, Event, Idle, Until};
use kmirror_harness::record_batch::RawBatch;
use kmirror_harness::source::{Source, SourceError};
use kmirror_harness::wire::{KafkaSource, KafkaSourceOptions, WireError};
use kmirror_kernel::batch::ControlType;
use kmirror_kernel::config::FetchIsolation;
use kmirror_kernel::fetch::FetchResponse;
use kmirror_kernel::log::LogView;
use kmirror_kernel::state::MirrorState;
use kmirror_kernel::types::{EpochAndOffset, Offset, TopicId};
use kmirror_testsupport::jvm::Oracle;
use kmirror_testsupport::kafka_broker::KafkaBroker;
use serde_json::Value;

mod serving;

use serving::{kmirror, kmirror_ok};

/// Kafka's Java producer (`LiveProducer`): the JSON line of each step.
fn produce(oracle: &Oracle, bootstrap: &str, topic: &str, steps: &[&str]) -> Vec<Value> {
    let mut command = oracle.command("dev.kmirror.oracle.LiveProducer");
    command.arg(bootstrap).arg(topic).args(steps);
    let output = run(command, Duration::from_secs(120));
    assert!(
        output.status.success(),
        "LiveProducer {steps:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l:?}: {e}")))
        .collect()
}

fn step_offset(step: &Value, field: &str) -> Offset {
    step[field]
        .as_i64()
        .unwrap_or_else(|| panic!("{field} in {step}"))
}

/// The `.log` segment files of a partition directory, oldest first.
fn segments(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect();
    files.sort();
    files
}

/// Every batch of a partition directory, read from its segment files as they are on disk.
fn batches_on_disk(dir: &Path) -> Vec<RawBatch> {
    segments(dir)
        .iter()
        .flat_map(|f| {
            let bytes = std::fs::read(f).expect("segment");
            RawBatch::parse_many(&bytes).unwrap_or_else(|e| panic!("{}: {e}", f.display()))
        })
        .collect()
}

fn below(batches: &[RawBatch], bound: Offset) -> Vec<RawBatch> {
    batches
        .iter()
        .filter(|b| b.header().last_offset < bound)
        .cloned()
        .collect()
}

fn bytes(batches: &[RawBatch]) -> Vec<Vec<u8>> {
    batches.iter().map(|b| b.bytes().to_vec()).collect()
}

/// The leader's partition directory of a destination.
fn dest_partition_dir(dest: &Path) -> PathBuf {
    let cluster = Cluster::open(dest).expect("destination opens");
    let dir = cluster.leader.dir().to_path_buf();
    drop(cluster);
    dir
}

/// `DumpLogSegments --deep-iteration` of a partition's segments: its batch lines (`baseOffset:
/// ... lastOffset: N ...`) with `lastOffset` below `bound`.
fn dumped_batches(oracle: &Oracle, dir: &Path, bound: Offset) -> Vec<String> {
    let files: Vec<String> = segments(dir)
        .iter()
        .map(|p| p.display().to_string())
        .collect();
    let mut command = oracle.command("org.apache.kafka.tools.DumpLogSegments");
    command
        .arg("--deep-iteration")
        .arg("--files")
        .arg(files.join(","));
    let output = run(command, Duration::from_secs(120));
    assert!(output.status.success(), "DumpLogSegments: {output:?}");
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter(|l| l.starts_with("baseOffset:"))
        .filter(|l| {
            let last: Offset = l
                .split_whitespace()
                .skip_while(|w| *w != "lastOffset:")
                .nth(1)
                .and_then(|n| n.parse().ok())
                .unwrap_or_else(|| panic!("no lastOffset in {l}"));
            last < bound
        })
        .map(str::to_owned)
        .collect()
}

fn records(response: FetchResponse<RawBatch>) -> kmirror_kernel::fetch::FetchedRecords<RawBatch> {
    match response {
        FetchResponse::Records(r) => r,
        other => panic!("expected records, got {other:?}"),
    }
}

/// Steps `driver` on the real clock until `done` holds (checked after every step), sleeping
/// through retry timers and caught-up polls; panics after `timeout`.
fn step_until(
    driver: &mut Driver,
    timeout: Duration,
    events: &mut Vec<Event>,
    mut done: impl FnMut(&Driver, Option<Idle>, &[Event]) -> bool,
) {
    let mut clock = SystemClock;
    let deadline = Instant::now() + timeout;
    loop {
        let now = clock.now_ms();
        let idle = driver.run_once(now).expect("driver step");
        events.extend(driver.take_events());
        if done(driver, idle, events) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "not done within {timeout:?}; state {}, events {events:?}",
            driver.state()
        );
        match idle {
            Some(Idle::WaitingForRetry { due_ms }) => clock.sleep_until(due_ms.min(now + 250)),
            Some(_) => {
                driver.release_source();
                clock.sleep_until(now + 100);
            }
            None => {}
        }
    }
}

/// A child process killed when dropped (a panicking test leaves none behind).
struct ChildGuard(std::process::Child);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Waits until the status snapshot a following `kmirror mirror` keeps in `dest` satisfies
/// `done`; panics with the last snapshot and the follower's output after `timeout`.
fn wait_snapshot(dest: &Path, log: &Path, timeout: Duration, done: impl Fn(&Value) -> bool) {
    let deadline = Instant::now() + timeout;
    let mut last = Value::Null;
    while Instant::now() < deadline {
        if let Some(status) = std::fs::read_to_string(dest.join("status.json"))
            .ok()
            .and_then(|t| serde_json::from_str::<Value>(&t).ok())
        {
            if done(&status) {
                return;
            }
            last = status;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    panic!(
        "the follower did not get there within {timeout:?}; last snapshot {last}; its output:\n{}",
        std::fs::read_to_string(log).unwrap_or_default()
    );
}

fn snapshot_leo(status: &Value) -> i64 {
    status["replicas"][0]["log_end_offset"]
        .as_i64()
        .unwrap_or(-1)
}

#[test]
#[ignore = "needs Java 17 and Maven; run with `-- --include-ignored oracle`"]
fn oracle_live_broker_mirror_failover_and_faults() {
    let Some(oracle) = Oracle::for_tests("oracle_live_broker_mirror_failover_and_faults") else {
        return;
    };
    let started = Instant::now();
    let tmp = tempfile::tempdir().expect("tempdir");
    let mut broker = KafkaBroker::start(&oracle, &tmp.path().join("broker"), &[])
        .unwrap_or_else(|e| panic!("{e}"));
    let bootstrap = broker.bootstrap();
    eprintln!("broker up at {bootstrap} after {:?}", started.elapsed());

    // 1. Kafka's producer: plain, idempotent, committed, aborted, one transaction left open,
    //    and plain records after it (above the LSO).
    let steps = produce(
        &oracle,
        &bootstrap,
        "orders",
        &[
            "create",
            "plain:2:3",
            "idem:2:2",
            "commit:tx-commit:3",
            "abort:tx-abort:2",
            "plain:1:1",
            "open:tx-open:2",
        ],
    );
    let after = produce(&oracle, &bootstrap, "orders", &["plain:1:2"]);
    let open = steps
        .iter()
        .find(|s| s["step"] == "open")
        .expect("open step");
    let open_first = step_offset(open, "first_offset");
    let log_end = step_offset(&after[0], "last_offset") + 1;
    let source_dir = broker.partition_dir("orders", 0);
    let source_batches = batches_on_disk(&source_dir);
    assert_eq!(
        source_batches.last().map(|b| b.header().last_offset + 1),
        Some(log_end)
    );
    let open_pid = source_batches
        .iter()
        .find(|b| b.header().base_offset == open_first)
        .map(|b| b.header().producer_id)
        .expect("the open transaction's batch");
    // Aborted data and both markers are in the source log, below the open transaction.
    let markers: Vec<ControlType> = source_batches
        .iter()
        .filter_map(|b| b.header().control)
        .collect();
    assert_eq!(markers, vec![ControlType::Commit, ControlType::Abort]);

    // 2. The wire source: the LSO stops at the open transaction; KIP-320 as serve_fetch.
    let mut source = KafkaSource::new(&bootstrap, "orders", 0, KafkaSourceOptions::default());
    let (topic, topic_id) = source.topic().expect("metadata");
    assert_eq!(topic, "orders");
    let first = records(
        source
            .fetch(topic_id, 0, None, FetchIsolation::ReadCommitted, 1000)
            .expect("fetch"),
    );
    assert_eq!(first.last_stable_offset, open_first, "LSO at the open txn");
    assert_eq!(first.high_watermark, log_end);
    assert_eq!(
        bytes(&first.batches),
        bytes(&below(&source_batches, open_first)),
        "a read-committed fetch returns every batch below the LSO, aborted ones included"
    );
    assert_eq!(first.next_offset, open_first);
    // At the LSO: nothing (the fetch is held by the driver).
    let at_lso = records(
        source
            .fetch(
                topic_id,
                open_first,
                Some(0),
                FetchIsolation::ReadCommitted,
                10,
            )
            .expect("fetch"),
    );
    assert!(at_lso.batches.is_empty());
    // Past the end with epoch 0: the broker answers a diverging epoch (0, LEO).
    assert_eq!(
        source
            .fetch(
                topic_id,
                log_end + 5,
                Some(0),
                FetchIsolation::ReadCommitted,
                10
            )
            .expect("fetch"),
        FetchResponse::Diverging(EpochAndOffset {
            epoch: 0,
            end_offset: log_end
        })
    );
    // An epoch the source never had: OFFSET_OUT_OF_RANGE (end offset undefined).
    assert_eq!(
        source
            .fetch(topic_id, 3, Some(7), FetchIsolation::ReadCommitted, 10)
            .expect("fetch"),
        FetchResponse::OffsetOutOfRange {
            log_start_offset: 0,
            log_end_offset: log_end
        }
    );
    assert_eq!(
        source
            .end_offset_for_epoch(0)
            .expect("OffsetForLeaderEpoch"),
        EpochAndOffset {
            epoch: 0,
            end_offset: log_end
        }
    );
    let lme = source.last_mirrored_epoch(topic_id, 0).expect("LME query");
    assert_eq!((lme.lme, lme.log_start_offset), (None, 0));
    // A wrong topic id: UNKNOWN_TOPIC_ID, naming the broker, the topic and both ids.
    let mut wrong = topic_id;
    wrong.0[15] ^= 0xff;
    let error = source
        .fetch(wrong, 0, None, FetchIsolation::ReadCommitted, 10)
        .expect_err("wrong topic id");
    assert!(
        matches!(error, SourceError::UnknownTopicId { .. }),
        "{error}"
    );
    let message = error.to_string();
    for part in [bootstrap.as_str(), "orders", "UNKNOWN_TOPIC_ID"] {
        assert!(message.contains(part), "{message}");
    }

    // 3. kmirror mirror --source-bootstrap: exactly the batches below the LSO, byte for byte.
    let dest = tmp.path().join("west");
    let dest_arg = dest.to_str().expect("utf-8 path");
    kmirror_ok(&[
        "mirror",
        "--source-bootstrap",
        &bootstrap,
        "--topic",
        "orders",
        "--dest",
        dest_arg,
        "--until-caught-up",
        "--quiet",
    ]);
    let dest_dir = dest_partition_dir(&dest);
    let mirrored = batches_on_disk(&dest_dir);
    assert_eq!(bytes(&mirrored), bytes(&below(&source_batches, open_first)));
    let dumped = dumped_batches(&oracle, &source_dir, open_first);
    assert_eq!(dumped.len(), below(&source_batches, open_first).len());
    assert_eq!(
        dumped_batches(&oracle, &dest_dir, open_first),
        dumped,
        "DumpLogSegments sees the same batches (offsets, epochs, producers, CRCs, positions)"
    );

    // 4. Fail over: the open transaction is gone, MIRROR_PID_RESET follows, epoch above LME.
    kmirror_ok(&["stop", "--dest", dest_arg, "--quiet"]);
    let after_stop = batches_on_disk(&dest_dir);
    let (reset, kept) = after_stop.split_last().expect("batches");
    assert_eq!(bytes(kept), bytes(&below(&source_batches, open_first)));
    let reset = reset.header();
    assert_eq!(reset.control, Some(ControlType::MirrorPidReset));
    assert_eq!(reset.base_offset, open_first);
    assert!(after_stop
        .iter()
        .all(|b| b.header().producer_id != open_pid));
    let status: Value =
        serde_json::from_str(&kmirror_ok(&["status", "--dest", dest_arg, "--json"]))
            .expect("status JSON");
    assert_eq!(status["state"], "STOPPED");
    let lme = &status["last_mirrored_epochs"][0];
    assert_eq!(lme["last_mirrored_epoch"], 0);
    assert_eq!(lme["last_mirrored_offset"], open_first);
    let epoch = status["leader_epoch"].as_i64().expect("epoch");
    assert!(epoch > 0, "leader epoch {epoch} above the LME 0");
    assert_eq!(i64::from(reset.partition_leader_epoch), epoch);
    for replica in status["replicas"].as_array().expect("replicas") {
        assert_eq!(replica["open_transactions"], Value::Array(vec![]));
        assert_eq!(replica["log_end_offset"], open_first + 1);
    }
    assert_eq!(
        dumped_batches(&oracle, &dest_dir, open_first),
        dumped,
        "after the stop, below the LSO"
    );
    eprintln!("mirror and failover checked after {:?}", started.elapsed());

    // 5. Faults on a second topic: many small batches.
    produce(&oracle, &bootstrap, "faults", &["create", "plain:40:1"]);
    let faults_dest = tmp.path().join("faults-west");
    let faults_arg = faults_dest.to_str().expect("utf-8 path");
    kmirror_ok(&[
        "mirror",
        "--source-bootstrap",
        &bootstrap,
        "--topic",
        "faults",
        "--dest",
        faults_arg,
        "--replicas",
        "1",
        "--max-fetches",
        "2",
        "--max-batches",
        "5",
        "--quiet",
    ]);
    let partial = batches_on_disk(&dest_partition_dir(&faults_dest)).len();
    assert!(
        (1..40).contains(&partial),
        "{partial} batches after two fetches"
    );

    // A following `kmirror mirror` on a third destination, through the faults below.
    let follow_dest = tmp.path().join("faults-follow");
    let follow_log = tmp.path().join("follower.log");
    let log_file = std::fs::File::create(&follow_log).expect("follower log");
    let follower = ChildGuard(
        Command::new(env!("CARGO_BIN_EXE_kmirror"))
            .args([
                "mirror",
                "--source-bootstrap",
                &bootstrap,
                "--topic",
                "faults",
            ])
            .arg("--dest")
            .arg(&follow_dest)
            .args(["--replicas", "1", "--poll-ms", "200"])
            .stdin(Stdio::null())
            .stdout(log_file.try_clone().expect("log"))
            .stderr(log_file)
            .spawn()
            .expect("kmirror mirror starts"),
    );
    wait_snapshot(&follow_dest, &follow_log, Duration::from_secs(60), |s| {
        s["state"] == "MIRRORING" && snapshot_leo(s) == 40
    });

    // A destination of another topic: a clear refusal naming the broker.
    let output = kmirror(&[
        "mirror",
        "--source-bootstrap",
        &bootstrap,
        "--topic",
        "faults",
        "--dest",
        dest_arg,
        "--until-caught-up",
    ]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(&bootstrap) && stderr.contains("faults") && stderr.contains("orders"),
        "{stderr}"
    );

    // The broker dies in the middle of a held Fetch (at the end of the log, max wait 20 s).
    let mut waiting = KafkaSource::new(
        &bootstrap,
        "faults",
        0,
        KafkaSourceOptions {
            fetch_max_wait_ms: 20_000,
            ..KafkaSourceOptions::default()
        },
    );
    let (_, faults_id) = waiting.topic().expect("metadata");
    let pid = broker.pid().expect("broker runs");
    let killer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(1500));
        Command::new("kill")
            .arg("-KILL")
            .arg(pid.to_string())
            .status()
            .expect("kill");
    });
    let fetch_started = Instant::now();
    let error = waiting
        .fetch(faults_id, 40, Some(0), FetchIsolation::ReadCommitted, 10)
        .expect_err("the broker died mid-fetch");
    killer.join().expect("killer");
    broker.kill();
    assert!(fetch_started.elapsed() < Duration::from_secs(15));
    assert!(
        matches!(
            &error,
            SourceError::Kafka(WireError::Io { api: "Fetch", .. })
        ),
        "{error}"
    );
    assert!(error.to_string().contains(&bootstrap), "{error}");

    // With the broker gone: a new mirror fails with a clear error...
    let output = kmirror(&[
        "mirror",
        "--source-bootstrap",
        &bootstrap,
        "--topic",
        "faults",
        "--dest",
        tmp.path().join("nowhere").to_str().expect("utf-8"),
        "--until-caught-up",
    ]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!("cannot connect to Kafka broker {bootstrap}")),
        "{stderr}"
    );
    // ...and a running one reports the failure and retries.
    let mut driver = Driver::open(
        &faults_dest,
        Some(Box::new(KafkaSource::new(
            &bootstrap,
            "faults",
            0,
            KafkaSourceOptions::default(),
        ))),
        DriverOptions {
            max_fetch_batches: 5,
            ..DriverOptions::default()
        },
    )
    .expect("driver");
    let mut events = Vec::new();
    step_until(
        &mut driver,
        Duration::from_secs(30),
        &mut events,
        |_, _, ev| ev.iter().any(|e| matches!(e, Event::RetryScheduled { .. })),
    );
    let failure = events
        .iter()
        .find_map(|e| match e {
            Event::RequestFailed { error } => Some(error.clone()),
            _ => None,
        })
        .expect("a failed request");
    assert!(
        failure.contains(&format!("cannot connect to Kafka broker {bootstrap}")),
        "{failure}"
    );

    // The follower saw it too and retries with the kernel's back-off. (Its snapshot is
    // written at most once a second, at whatever step it is at: usually the retried state
    // just before the next failure, so look at the retry count, and at the error when the
    // snapshot caught FAILED.)
    wait_snapshot(&follow_dest, &follow_log, Duration::from_secs(30), |s| {
        let record = &s["state_record"];
        record["retry_attempt"].as_u64().is_some_and(|a| a >= 1)
            && (s["state"] != "FAILED"
                || record["error_message"]
                    .as_str()
                    .is_some_and(|m| m.contains(&bootstrap)))
    });

    // The broker returns: the same driver resumes and catches up, byte for byte.
    broker.restart().unwrap_or_else(|e| panic!("{e}"));
    eprintln!("broker back after {:?}", started.elapsed());
    step_until(
        &mut driver,
        Duration::from_secs(120),
        &mut events,
        |d, idle, _| {
            idle == Some(Idle::CaughtUp)
                && d.state() == MirrorState::Mirroring
                && d.cluster().leader.log_end_offset() == 40
        },
    );
    driver.close().expect("close");
    let faults_source = batches_on_disk(&broker.partition_dir("faults", 0));
    assert_eq!(
        bytes(&batches_on_disk(&dest_partition_dir(&faults_dest))),
        bytes(&below(&faults_source, 40))
    );
    // The broker still refuses the wrong topic id after its restart.
    let mut again = KafkaSource::new(&bootstrap, "faults", 0, KafkaSourceOptions::default());
    let error = again
        .fetch(
            TopicId::from_u64(7),
            0,
            None,
            FetchIsolation::ReadCommitted,
            10,
        )
        .expect_err("wrong topic id");
    assert!(
        matches!(error, SourceError::UnknownTopicId { .. }),
        "{error}"
    );

    // A fresh mirror run picks up what was produced after the restart.
    let mut driver = Driver::open(
        &faults_dest,
        Some(Box::new(KafkaSource::new(
            &bootstrap,
            "faults",
            0,
            KafkaSourceOptions::default(),
        ))),
        DriverOptions::default(),
    )
    .expect("driver");
    produce(&oracle, &bootstrap, "faults", &["plain:3:1"]);
    driver
        .run(&mut SystemClock, Until::Idle, &mut |_, _| {})
        .expect("caught up");
    assert_eq!(driver.cluster().leader.log_end_offset(), 43);
    driver.close().expect("close");
    // The follower resumed on its own and copied the new batches too.
    wait_snapshot(&follow_dest, &follow_log, Duration::from_secs(120), |s| {
        s["state"] == "MIRRORING" && snapshot_leo(s) == 43
    });
    drop(follower);
    let faults_source = batches_on_disk(&broker.partition_dir("faults", 0));
    assert_eq!(
        bytes(&batches_on_disk(&dest_partition_dir(&follow_dest))),
        bytes(&below(&faults_source, 43))
    );

    broker.stop().unwrap_or_else(|e| panic!("{e}"));
    let elapsed = started.elapsed();
    eprintln!("live broker test done in {elapsed:?}");
    assert!(elapsed < Duration::from_secs(300), "took {elapsed:?}");
}
