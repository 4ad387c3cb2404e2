//! Crash safety of the node destination, many partitions at once: the node driver is halted
//! right after its N-th effect ([`NodeDriverOptions::halt_after_effects`]) and dropped without
//! closing (a SIGKILL: the page cache survives, nothing is flushed), for every N of a whole
//! mirroring from an empty destination and of a whole stop (failover) of one topic. At each
//! kill point three crashes are tried:
//!
//! - **the kill itself**, and when the last effect appended a `__mirror_state` record, **a kill
//!   inside that write**: its batch torn in half (the record was never acknowledged, so nothing
//!   acted on it);
//! - **a machine crash** of a copy: every partition log loses a seeded random tail past what
//!   was fsynced (the recovery point the killed driver held in memory, which the log dir's
//!   checkpoint files, written once per round, may lag: what [`FlushPolicy::Kafka`] leaves in
//!   the page cache), cut at a batch boundary or torn inside a batch, with the cut segment's
//!   offset index (never fsynced) cut at a random byte; `__mirror_state` is fsynced before
//!   every acknowledgement and loses nothing.
//!
//! After each: the destination reopens; every partition is a byte prefix of its source
//! partition (plus, once stopped, the one `MIRROR_PID_RESET`); the persisted states are ones
//! the operation passes through; a partition is writable only once STOPPED is persisted. Then a
//! restart (re-sending the request, as re-running the command does) converges: every mirrored
//! partition a byte copy of the source and MIRRORING, every stopped one STOPPED and writable
//! after exactly its mirrored bytes and one reset, and every log, `__mirror_state` included,
//! passes a full CRC scan ([`Verify::All`]) with its offsets in the log dir's checkpoint files
//! (the recovery point at its log end after the close) and none in its own directory.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use kmirror_kernel::batch::ControlType;
use kmirror_kernel::controller::MirrorRequest;
use kmirror_kernel::log::LogView;
use kmirror_kernel::node::PartitionKey;
use kmirror_kernel::state::MirrorState;
use kmirror_kernel::types::{MirrorName, Offset, TopicId};

use super::*;
use crate::driver::ManualClock;
use crate::file_log::{FileLog, FileLogConfig, FlushPolicy, TopicPartition, Verify};
use crate::log_dir_checkpoints::{CheckpointKind, LogDirCheckpoints};
use crate::record_batch::batch_size_from_prefix;
use crate::wire::fake_broker::{FakeCluster, FakePartition, FakeTopic};
use crate::wire::{SourceCluster, SourceClusterOptions, TopicSelection};

const ORDERS: TopicId = TopicId([1; 16]);
const PAY_EU: TopicId = TopicId([2; 16]);
const TOPICS: [(&str, TopicId, i32); 2] = [("orders", ORDERS, 3), ("pay.eu", PAY_EU, 2)];

/// xorshift64*: seeded cut points.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % n.max(1) as u64) as usize
    }
}

/// Two brokers leading orders (3 partitions) and pay.eu (2), 4 to 7 batches each.
fn fake() -> FakeCluster {
    let topic = |name: &str, id, n: i32| FakeTopic {
        name: name.into(),
        id,
        partitions: (0..n)
            .map(|i| FakePartition::with_batches(1 + i % 2, 3, 4 + i64::from(i)))
            .collect(),
    };
    FakeCluster::start(
        2,
        vec![topic("orders", ORDERS, 3), topic("pay.eu", PAY_EU, 2)],
    )
}

fn source(fake: &FakeCluster) -> SourceCluster {
    let options = SourceClusterOptions {
        connect_timeout: Duration::from_secs(1),
        request_timeout: Duration::from_secs(2),
        fetch_max_wait_ms: 0,
        ..SourceClusterOptions::default()
    };
    SourceCluster::new(
        &fake.address(1),
        TopicSelection::names(&["orders", "pay.eu"]).unwrap(),
        options,
    )
}

fn east() -> MirrorName {
    MirrorName::new("fake-cluster").unwrap()
}

fn options(halt: Option<u64>) -> NodeDriverOptions {
    options_with(halt, FlushPolicy::Kafka)
}

fn options_with(halt: Option<u64>, flush: FlushPolicy) -> NodeDriverOptions {
    NodeDriverOptions {
        max_fetch_batches: 2,
        flush,
        halt_after_effects: halt,
        ..NodeDriverOptions::default()
    }
}

/// Each source partition's batches, byte for byte.
fn source_bytes(fake: &FakeCluster) -> BTreeMap<PartitionKey, Vec<Vec<u8>>> {
    let state = fake.state();
    let mut out = BTreeMap::new();
    for t in &state.topics {
        for (p, part) in t.partitions.iter().enumerate() {
            let key = PartitionKey::new(t.id, p as i32);
            out.insert(
                key,
                part.batches.iter().map(|b| b.bytes().to_vec()).collect(),
            );
        }
    }
    out
}

/// Runs `driver` until `until`; true when it halted (the fault injection fired).
fn run(driver: &mut NodeDriver, clock: &mut ManualClock, until: NodeUntil) -> bool {
    match driver.run(clock, until, &mut |_, _| {}) {
        Ok(_) => false,
        Err(NodeError::Halted { .. }) => true,
        Err(e) => panic!("the node driver failed: {e}"),
    }
}

/// `kmirror mirror --topics` on `root`: (re)creates the node, adds the topics, runs until
/// caught up or halted. Returns the driver and whether it halted.
fn mirror(
    fake: &FakeCluster,
    root: &Path,
    halt: Option<u64>,
    flush: FlushPolicy,
) -> (NodeDriver, bool) {
    let dest = if NodeDest::is_node_dest(root) {
        NodeDest::open(root).unwrap()
    } else {
        NodeDest::create(root, NodeMeta::new(Some(fake.address(1)), 3)).unwrap()
    };
    let mut driver =
        NodeDriver::from_dest(dest, Some(source(fake)), options_with(halt, flush)).unwrap();
    let topics: Vec<(String, TopicId, i32)> = TOPICS
        .iter()
        .map(|(n, id, c)| ((*n).to_owned(), *id, *c))
        .collect();
    let results = driver.add_topics(&east(), &topics, 0).unwrap();
    assert!(results.values().all(Result::is_ok), "{results:?}");
    let halted = run(
        &mut driver,
        &mut ManualClock::default(),
        NodeUntil::CaughtUp,
    );
    (driver, halted)
}

/// `kmirror stop --topics orders` on `root` (no source): runs until settled or halted.
fn stop(root: &Path, halt: Option<u64>) -> (NodeDriver, bool) {
    let mut driver = NodeDriver::open(root, None, options(halt)).unwrap();
    let request = MirrorRequest::RemoveTopics {
        mirror: east().to_string(),
        topics: vec!["orders".into()],
    };
    let results = driver.request(&request, 0).unwrap();
    assert!(results["orders"].is_ok(), "{results:?}");
    let halted = run(&mut driver, &mut ManualClock::default(), NodeUntil::Settled);
    (driver, halted)
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

/// The `.log` segments of `dir`, oldest first.
fn segments(dir: &Path) -> Vec<(Offset, PathBuf)> {
    let mut segments: Vec<(Offset, PathBuf)> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "log"))
        .map(|p| {
            let base = p.file_stem().unwrap().to_str().unwrap().parse().unwrap();
            (base, p)
        })
        .collect();
    segments.sort();
    segments
}

/// Each whole batch of `bytes`: (position, size, base offset).
fn batches_of(bytes: &[u8]) -> Vec<(usize, usize, Offset)> {
    let mut out = Vec::new();
    let mut pos = 0;
    while let Ok(size) = batch_size_from_prefix(&bytes[pos..]) {
        if pos + size > bytes.len() {
            break;
        }
        let base = Offset::from_be_bytes(bytes[pos..pos + 8].try_into().unwrap());
        out.push((pos, size, base));
        pos += size;
    }
    out
}

/// A kill inside the last `__mirror_state` write of partition `k`: its batch torn in half.
fn tear_last_state_write(root: &Path, k: u32) {
    let dir = root.join("data").join(format!("__mirror_state-{k}"));
    let (_, path) = segments(&dir).pop().unwrap();
    let bytes = fs::read(&path).unwrap();
    let (pos, size, _) = *batches_of(&bytes).last().unwrap();
    let file = fs::OpenOptions::new().write(true).open(&path).unwrap();
    file.set_len((pos + size / 2) as u64).unwrap();
}

/// Each partition log's recovery point in the driver's memory when it was killed: every batch
/// below it was fsynced (the log moves it only after an fsync), though the log dir's
/// checkpoint files, written once per round, may still name less.
fn fsynced_floors(driver: &NodeDriver) -> BTreeMap<String, Offset> {
    let mut out = BTreeMap::new();
    for (name, id, count) in TOPICS {
        for p in 0..count {
            if let Some(log) = driver.log(&PartitionKey::new(id, p)) {
                out.insert(format!("{name}-{p}"), log.recovery_point());
            }
        }
    }
    out
}

/// A machine crash: every partition log of `root` (not `__mirror_state`, fsynced before each
/// acknowledgement) loses a seeded random tail past what was fsynced (`floors`, and the
/// recovery point and high watermark in the log dir's files), at a batch boundary or inside a
/// batch, later segments gone; the offset index of the cut segment (never fsynced) is cut at
/// a random byte too. Returns how many tails were cut.
fn machine_crash(root: &Path, floors: &BTreeMap<String, Offset>, rng: &mut Rng) -> usize {
    let mut cut = 0;
    let store = LogDirCheckpoints::open(&root.join("data")).unwrap();
    for e in fs::read_dir(root.join("data")).unwrap() {
        let dir = e.unwrap().path();
        let name = dir.file_name().unwrap().to_str().unwrap().to_owned();
        if name.starts_with("__mirror_state") || !dir.is_dir() {
            continue;
        }
        let tp = TopicPartition::from_dir_name(&name).unwrap();
        let checkpoint = |kind| store.on_disk(kind, &tp).unwrap_or(0);
        let floor = checkpoint(CheckpointKind::RecoveryPoint)
            .max(checkpoint(CheckpointKind::HighWatermark))
            .max(floors.get(&name).copied().unwrap_or(0));
        let segments = segments(&dir);
        let mut cuts = Vec::new();
        for (i, (_, path)) in segments.iter().enumerate() {
            for (pos, size, base) in batches_of(&fs::read(path).unwrap()) {
                if base >= floor {
                    cuts.push((i, pos));
                    cuts.push((i, pos + size / 2));
                }
            }
        }
        // One more choice: the crash lost nothing of this log.
        let pick = rng.below(cuts.len() + 1);
        let Some(&(i, pos)) = cuts.get(pick) else {
            continue;
        };
        let file = fs::OpenOptions::new()
            .write(true)
            .open(&segments[i].1)
            .unwrap();
        file.set_len(pos as u64).unwrap();
        let index = dir.join(format!("{:020}.index", segments[i].0));
        if let Ok(len) = fs::metadata(&index).map(|m| m.len()) {
            let index_len = rng.below(len as usize + 1) as u64;
            fs::OpenOptions::new()
                .write(true)
                .open(&index)
                .unwrap()
                .set_len(index_len)
                .unwrap();
        }
        for (base, path) in &segments[i + 1..] {
            fs::remove_file(path).unwrap();
            let _ = fs::remove_file(dir.join(format!("{base:020}.index")));
        }
        cut += 1;
    }
    cut
}

/// A partition's batches as the next process reads them: (bytes, control type).
fn batches(driver: &NodeDriver, key: &PartitionKey) -> Vec<(Vec<u8>, Option<ControlType>)> {
    let log = driver.log(key).unwrap();
    log.try_read(log.log_start_offset(), log.log_end_offset())
        .unwrap()
        .iter()
        .map(|b| (b.bytes().to_vec(), b.header().control))
        .collect()
}

fn writable(driver: &NodeDriver, name: &str, p: i32) -> bool {
    driver
        .dest()
        .meta()
        .partitions
        .get(&(name.to_owned(), p))
        .is_some_and(|s| s.writable)
}

/// What `stopped` (the topics being or having been stopped) allows after a kill: each
/// partition is a byte prefix of the source, or (stopped) all of it plus one reset; the
/// persisted states are ones the operation passes through.
fn check_after_kill(
    root: &Path,
    sources: &BTreeMap<PartitionKey, Vec<Vec<u8>>>,
    stopping: &[TopicId],
    what: &str,
) {
    let driver = NodeDriver::open(root, None, options(None))
        .unwrap_or_else(|e| panic!("{what}: the destination does not reopen: {e}"));
    for (name, id, count) in TOPICS {
        for p in 0..count {
            let key = PartitionKey::new(id, p);
            if driver.log(&key).is_none() {
                continue; // killed before the topic was created
            }
            let got = batches(&driver, &key);
            let source = &sources[&key];
            let mirrored = got
                .iter()
                .zip(source)
                .take_while(|((a, _), b)| a == *b)
                .count();
            let rest = &got[mirrored..];
            let state = driver.persisted_state(&key);
            let stopping = stopping.contains(&id);
            if stopping {
                assert!(
                    rest.is_empty()
                        || (rest.len() == 1 && rest[0].1 == Some(ControlType::MirrorPidReset)),
                    "{what}: {name}-{p} has {} batches that are not the source's",
                    rest.len()
                );
                assert!(
                    rest.is_empty() || mirrored == source.len(),
                    "{what}: {name}-{p}: the reset is not after every mirrored batch"
                );
                assert!(
                    matches!(
                        state,
                        MirrorState::Mirroring | MirrorState::Stopping | MirrorState::Stopped
                    ),
                    "{what}: {name}-{p} {state}"
                );
                assert!(
                    !writable(&driver, name, p) || state == MirrorState::Stopped,
                    "{what}: {name}-{p} writable before STOPPED"
                );
            } else {
                assert!(
                    rest.is_empty(),
                    "{what}: {name}-{p} not a prefix of the source"
                );
                assert!(
                    matches!(
                        state,
                        MirrorState::Unknown | MirrorState::Preparing | MirrorState::Mirroring
                    ),
                    "{what}: {name}-{p} {state}"
                );
                assert!(!writable(&driver, name, p), "{what}: {name}-{p} writable");
            }
        }
    }
    drop(driver); // as a crash: the restart recovers again
}

/// After the restart: mirrored topics are byte copies and MIRRORING; stopped ones STOPPED,
/// writable, their mirrored bytes then exactly one reset; every log passes a full CRC scan;
/// `__mirror_state` replays to the same states after a clean reopen.
fn check_converged(
    driver: NodeDriver,
    root: &Path,
    sources: &BTreeMap<PartitionKey, Vec<Vec<u8>>>,
    stopped: &[TopicId],
    what: &str,
) {
    let mut states = BTreeMap::new();
    for (name, id, count) in TOPICS {
        for p in 0..count {
            let key = PartitionKey::new(id, p);
            let got = batches(&driver, &key);
            let source = &sources[&key];
            let state = driver.persisted_state(&key);
            states.insert(key, state);
            let bytes: Vec<&Vec<u8>> = got.iter().map(|(b, _)| b).collect();
            if stopped.contains(&id) {
                assert_eq!(state, MirrorState::Stopped, "{what}: {name}-{p}");
                assert!(
                    writable(&driver, name, p),
                    "{what}: {name}-{p} not writable"
                );
                assert_eq!(got.len(), source.len() + 1, "{what}: {name}-{p}");
                assert_eq!(
                    got.last().unwrap().1,
                    Some(ControlType::MirrorPidReset),
                    "{what}: {name}-{p}"
                );
                assert!(
                    bytes[..source.len()]
                        .iter()
                        .zip(source)
                        .all(|(a, b)| *a == b),
                    "{what}: {name}-{p} lost mirrored bytes"
                );
            } else {
                assert_eq!(state, MirrorState::Mirroring, "{what}: {name}-{p}");
                assert!(
                    bytes.len() == source.len() && bytes.iter().zip(source).all(|(a, b)| *a == b),
                    "{what}: {name}-{p} differs from the source"
                );
            }
        }
    }
    driver.close().unwrap();
    let config = FileLogConfig::default();
    let data = root.join("data");
    let store = std::sync::Arc::new(LogDirCheckpoints::open(&data).unwrap());
    assert!(!store.is_dirty());
    for e in fs::read_dir(&data).unwrap() {
        let dir = e.unwrap().path();
        if dir.is_dir() {
            let tp =
                TopicPartition::from_dir_name(dir.file_name().unwrap().to_str().unwrap()).unwrap();
            for kind in CheckpointKind::ALL {
                assert!(
                    !dir.join(kind.file_name()).exists(),
                    "{what}: {} has a per-partition {}",
                    dir.display(),
                    kind.file_name()
                );
            }
            let (log, report) =
                FileLog::open_in_log_dir(&data, tp, config, Verify::All, store.clone())
                    .unwrap_or_else(|e| {
                        panic!("{what}: {} fails the full scan: {e}", dir.display())
                    });
            assert!(report.is_clean(), "{what}: {}: {report:?}", dir.display());
            assert_eq!(
                store.on_disk(CheckpointKind::RecoveryPoint, log.topic_partition()),
                Some(log.log_end_offset()),
                "{what}: {}: close checkpoints the recovery point",
                dir.display()
            );
        }
    }
    let reopened = NodeDriver::open(root, None, options(None)).unwrap();
    for (key, state) in states {
        assert_eq!(reopened.persisted_state(&key), state, "{what}: {key}");
    }
}

/// Counts of one sweep.
#[derive(Default, Debug)]
struct Tally {
    kills: usize,
    torn_state_writes: usize,
    machine_crashes: usize,
    tails_cut: usize,
}

#[test]
fn a_kill_after_every_effect_of_mirroring_many_partitions() {
    let fake = fake();
    let sources = source_bytes(&fake);
    let tmp = tempfile::tempdir().unwrap();
    let mut rng = Rng(0x5eed_0100);
    let mut tally = Tally::default();
    for (n, flush) in (1..).flat_map(|n| [(n, FlushPolicy::Kafka), (n, FlushPolicy::EveryAppend)]) {
        let root = tmp.path().join(format!("kill-{n}-{flush}"));
        let (driver, halted) = mirror(&fake, &root, Some(n), flush);
        if !halted {
            check_converged(driver, &root, &sources, &[], "no kill");
            if flush == FlushPolicy::EveryAppend {
                break;
            }
            fs::remove_dir_all(&root).unwrap();
            continue;
        }
        let torn = driver.last_state_write();
        let floors = fsynced_floors(&driver);
        drop(driver); // SIGKILL
        tally.kills += 1;
        let what = format!("mirroring (--flush {flush}), kill after effect {n}");

        let copy = tmp.path().join("machine-crash");
        copy_dir(&root, &copy);
        tally.tails_cut += machine_crash(&copy, &floors, &mut rng);
        tally.machine_crashes += 1;
        let crashed = format!("{what}, machine crash");
        check_after_kill(&copy, &sources, &[], &crashed);
        let (driver, _) = mirror(&fake, &copy, None, flush);
        check_converged(driver, &copy, &sources, &[], &crashed);
        fs::remove_dir_all(&copy).unwrap();

        if let Some(k) = torn {
            tear_last_state_write(&root, k);
            tally.torn_state_writes += 1;
        }
        check_after_kill(&root, &sources, &[], &what);
        let (driver, _) = mirror(&fake, &root, None, flush);
        check_converged(driver, &root, &sources, &[], &what);
        fs::remove_dir_all(&root).unwrap();
    }
    eprintln!("node crash test, mirroring: {tally:?}");
    assert!(tally.kills >= 90, "{tally:?}");
    assert!(tally.torn_state_writes >= 10, "{tally:?}");
    assert!(tally.tails_cut >= 10, "{tally:?}");
}

#[test]
fn a_kill_after_every_effect_of_stopping_one_topic() {
    let fake = fake();
    let sources = source_bytes(&fake);
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().join("base");
    let (driver, halted) = mirror(&fake, &base, None, FlushPolicy::Kafka);
    assert!(!halted);
    driver.close().unwrap();
    let mut rng = Rng(0x5eed_0101);
    let mut tally = Tally::default();
    for n in 1.. {
        let root = tmp.path().join(format!("kill-{n}"));
        copy_dir(&base, &root);
        let (driver, halted) = stop(&root, Some(n));
        if !halted {
            check_converged(driver, &root, &sources, &[ORDERS], "no kill");
            break;
        }
        let torn = driver.last_state_write();
        let floors = fsynced_floors(&driver);
        drop(driver); // SIGKILL
        tally.kills += 1;
        let what = format!("stop, kill after effect {n}");

        let copy = tmp.path().join("machine-crash");
        copy_dir(&root, &copy);
        tally.tails_cut += machine_crash(&copy, &floors, &mut rng);
        tally.machine_crashes += 1;
        let crashed = format!("{what}, machine crash");
        check_after_kill(&copy, &sources, &[ORDERS], &crashed);
        let (driver, _) = stop(&copy, None);
        check_converged(driver, &copy, &sources, &[ORDERS], &crashed);
        fs::remove_dir_all(&copy).unwrap();

        if let Some(k) = torn {
            tear_last_state_write(&root, k);
            tally.torn_state_writes += 1;
        }
        check_after_kill(&root, &sources, &[ORDERS], &what);
        let (driver, _) = stop(&root, None);
        check_converged(driver, &root, &sources, &[ORDERS], &what);
        fs::remove_dir_all(&root).unwrap();
    }
    eprintln!("node crash test, stop: {tally:?}");
    assert!(tally.kills >= 10, "{tally:?}");
    assert!(tally.torn_state_writes >= 3, "{tally:?}");
}
