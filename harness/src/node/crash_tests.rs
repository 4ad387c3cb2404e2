//! Crash safety of the node destination, many partitions at once: the node driver is halted
//! right after its N-th effect ([`NodeDriverOptions::halt_after_effects`]) and dropped without
//! closing (a SIGKILL: the page cache survives, nothing is flushed), for every N of a whole
//! mirroring from an empty destination and of a whole stop (failover) of one topic: from plain
//! batches, and from committed, aborted and open transactions and an idempotent producer (the
//! stop truncating the open transaction to the LSO, or with `abort-open-transactions` appending
//! its ABORT marker); the stop also on a node with two in-process followers, which must end
//! holding their leader's log. At each kill point three crashes are
//! tried:
//!
//! - **the kill itself**, and when the last effect appended a `__mirror_state` record, **a kill
//!   inside that write**: its batch torn in half (the record was never acknowledged, so nothing
//!   acted on it);
//! - **a machine crash** of a copy: every partition log loses a seeded random tail past what
//!   was made durable (where the killed driver knew its durable bytes to end, which the log
//!   dir's checkpoint files, written once per round, may lag: what [`FlushPolicy::Kafka`]
//!   leaves in the page cache), cut at a batch boundary or torn inside a batch, with the cut segment's
//!   offset index (never fsynced) cut at a random byte; `__mirror_state` is fsynced before
//!   every acknowledgement and loses nothing.
//!
//! **Torn writes** go further: the crate's write seam ([`crate::fault`], test build only) cuts
//! the N-th file write short and makes the process die there, for every N of a mirroring (a
//! few fetch rounds of vectored appends, offset index entries, segment rolls, `__mirror_state`
//! appends, leader-epoch and log-dir checkpoints, the close) and of a stop (`node.properties`
//! too), each on a fresh copy. Every test runs on a RAM disk when there is one: the machine
//! crash is simulated by cutting files past what was fsynced, and a process death needs no
//! disk.
//!
//! After each: the destination reopens; every partition is a byte prefix of its source
//! partition (plus, once stopped, the stop's own batches: the one `MIRROR_PID_RESET` right after
//! the batches below the source's last stable offset, or after every batch and an ABORT marker
//! per open transaction); the persisted states are ones
//! the operation passes through; a partition is writable only once STOPPED is persisted.
//! **Nothing acknowledged is lost**: every `__mirror_state` record the killed process had
//! acknowledged (state and LME, per partition: what its coordinators held) is what the
//! reopened node replays, exactly; when the kill tore that very write, its slot holds the
//! record before it (read from an uninterrupted reference run's `__mirror_state`); when a
//! write was in flight (torn writes), its slot may hold the record after it (the write landed
//! whole, unacknowledged), and no other slot may differ. A partition whose STOPPED was
//! acknowledged has its `MIRROR_PID_RESET` below the killed process's high watermark, and in
//! the reopened log. Then a restart (re-sending the request, as re-running the command does)
//! converges: every mirrored partition a byte copy of the source and MIRRORING, every stopped
//! one STOPPED and writable after exactly its mirrored bytes below the LSO and one reset, and every log,
//! `__mirror_state` included, passes a full CRC scan ([`Verify::All`]) with its offsets in the
//! log dir's checkpoint files (the recovery point at its log end after the close) and none in
//! its own directory. Each test reports its counts on stderr (shown in CI's log, summed by
//! `.ci/run`: [`kmirror_testsupport::crash_counts`]).

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use kmirror_kernel::batch::ControlType;
use kmirror_kernel::config::StopStrategy;
use kmirror_kernel::controller::MirrorRequest;
use kmirror_kernel::log::LogView;
use kmirror_kernel::node::PartitionKey;
use kmirror_kernel::partitioner::mirror_state_partition;
use kmirror_kernel::records::MirrorStateRecord;
use kmirror_kernel::state::MirrorState;
use kmirror_kernel::types::{MirrorName, MirrorPartition, Offset, TopicId};
use kmirror_testsupport::crash_counts;

use super::*;
use crate::clock::ManualClock;
use crate::fault::{self, TornWrite};
use crate::file_log::{FileLog, FileLogConfig, FlushPolicy, TopicPartition, Verify};
use crate::log_dir_checkpoints::{CheckpointKind, LogDirCheckpoints};
use crate::record_batch::batch_size_from_prefix;
use crate::wire::fake_broker::{FakeCluster, FakePartition, FakeTopic};
use crate::wire::{SourceCluster, SourceClusterOptions, TopicSelection};

pub(super) const ORDERS: TopicId = TopicId([1; 16]);
const PAY_EU: TopicId = TopicId([2; 16]);
pub(super) const TOPICS: [(&str, TopicId, i32); 2] = [("orders", ORDERS, 3), ("pay.eu", PAY_EU, 2)];
/// Partitions of `__mirror_state`.
pub(super) const STATE_PARTITIONS: u32 = 3;

/// xorshift64*: seeded cut points.
pub(super) struct Rng(pub(super) u64);

impl Rng {
    pub(super) fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % n.max(1) as u64) as usize
    }
}

/// Two brokers leading orders (3 partitions) and pay.eu (2), 4 to 7 batches each.
fn fake() -> FakeCluster {
    fake_with(|i| 4 + i64::from(i))
}

/// Two brokers leading orders (3 partitions) and pay.eu (2), partition `i` with `batches(i)`
/// batches of two records (about 100 bytes each).
fn fake_with(batches: impl Fn(i32) -> i64) -> FakeCluster {
    let topic = |name: &str, id, n: i32| FakeTopic {
        name: name.into(),
        id,
        partitions: (0..n)
            .map(|i| FakePartition::with_batches(1 + i % 2, 3, batches(i)))
            .collect(),
    };
    FakeCluster::start(
        2,
        vec![topic("orders", ORDERS, 3), topic("pay.eu", PAY_EU, 2)],
    )
}

/// [`fake`] with transactions after the plain batches: on orders-0 a committed transaction,
/// then an open one (its producer never ends it: a stop truncates it to the LSO); on orders-1 an
/// aborted transaction; on orders-2 an idempotent producer's batches. pay.eu stays plain.
fn transactional_fake() -> FakeCluster {
    use kmirror_kernel::batch::{LeaderBatch, ProducerBatchInfo};
    let fake = fake();
    {
        let mut state = fake.state();
        let orders = &mut state.topics[0];
        let records = |pid: i64, seq: i32, transactional: bool| LeaderBatch::Records {
            record_count: 2,
            producer: Some(ProducerBatchInfo {
                producer_id: pid,
                producer_epoch: 0,
                base_sequence: seq,
            }),
            transactional,
        };
        let marker = |pid: i64, control| LeaderBatch::Control {
            control,
            producer: Some((pid, 0)),
        };
        let scripts = [
            vec![
                records(7, 0, true),
                records(7, 2, true),
                marker(7, ControlType::Commit),
                records(8, 0, true),
            ],
            vec![records(9, 0, true), marker(9, ControlType::Abort)],
            vec![records(10, 0, false), records(10, 2, false)],
        ];
        for (p, script) in orders.partitions.iter_mut().zip(scripts) {
            let mut next = p.batches.last().map_or(0, |b| b.header().last_offset + 1);
            for batch in script {
                let raw =
                    crate::record_batch::RawBatch::from_leader_batch(&batch, next, p.epoch, 2_000)
                        .unwrap();
                next = raw.header().last_offset + 1;
                p.batches.push(raw);
            }
        }
    }
    fake
}

/// The number of leading batches of each source partition below its last stable offset (all
/// of them, but for a partition whose producer left a transaction open, those before its first
/// batch: what a stop's truncation to the LSO keeps), and the number of open transactions.
type StableAndOpen = (BTreeMap<PartitionKey, usize>, BTreeMap<PartitionKey, usize>);

fn stable_batches(fake: &FakeCluster) -> StableAndOpen {
    let state = fake.state();
    let mut out = BTreeMap::new();
    let mut open_count = BTreeMap::new();
    for t in &state.topics {
        for (p, part) in t.partitions.iter().enumerate() {
            // Each producer's open transaction, by the index of its first batch.
            let mut open: BTreeMap<i64, usize> = BTreeMap::new();
            for (i, b) in part.batches.iter().enumerate() {
                let h = b.header();
                if h.is_control() {
                    open.remove(&h.producer_id);
                } else if h.is_transactional {
                    open.entry(h.producer_id).or_insert(i);
                }
            }
            let stable = open.values().min().copied().unwrap_or(part.batches.len());
            out.insert(PartitionKey::new(t.id, p as i32), stable);
            open_count.insert(PartitionKey::new(t.id, p as i32), open.len());
        }
    }
    (out, open_count)
}

fn source(fake: &FakeCluster) -> SourceCluster {
    let options = SourceClusterOptions {
        connect_timeout: Duration::from_secs(1),
        request_timeout: Duration::from_secs(2),
        fetch_max_wait_ms: 0,
        fetches_in_flight: std::num::NonZeroUsize::new(1),
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

pub(super) fn options(halt: Option<u64>) -> NodeDriverOptions {
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

/// Each source partition's batches, byte for byte, how many of them are below its last stable
/// offset and how many transactions its producers left open, and how the stops of a sweep end
/// those.
pub(super) struct Sources {
    batches: BTreeMap<PartitionKey, Vec<Vec<u8>>>,
    stable: BTreeMap<PartitionKey, usize>,
    open: BTreeMap<PartitionKey, usize>,
    pub(super) strategy: StopStrategy,
}

impl std::ops::Index<&PartitionKey> for Sources {
    type Output = Vec<Vec<u8>>;

    fn index(&self, key: &PartitionKey) -> &Vec<Vec<u8>> {
        &self.batches[key]
    }
}

impl Sources {
    /// What a stop leaves of `key`: how many of the source's batches it keeps (those below the
    /// LSO when it truncates, every one when it aborts), and the control batches it appends
    /// after them (an ABORT per open transaction when it aborts, then its `MIRROR_PID_RESET`).
    fn after_stop(&self, key: &PartitionKey) -> (usize, Vec<ControlType>) {
        let reset = ControlType::MirrorPidReset;
        match self.strategy {
            StopStrategy::TruncateToLso => (self.stable[key], vec![reset]),
            StopStrategy::AbortOpenTransactions => {
                let mut tail = vec![ControlType::Abort; self.open[key]];
                tail.push(reset);
                (self.batches[key].len(), tail)
            }
        }
    }
}

pub(super) fn source_bytes(fake: &FakeCluster) -> Sources {
    let mut batches = BTreeMap::new();
    {
        let state = fake.state();
        for t in &state.topics {
            for (p, part) in t.partitions.iter().enumerate() {
                let key = PartitionKey::new(t.id, p as i32);
                batches.insert(
                    key,
                    part.batches.iter().map(|b| b.bytes().to_vec()).collect(),
                );
            }
        }
    }
    let (stable, open) = stable_batches(fake);
    Sources {
        batches,
        stable,
        open,
        strategy: StopStrategy::TruncateToLso,
    }
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
    mirror_replicated(fake, root, halt, flush, 1)
}

/// [`mirror`] into a node of `replicas` replicas of every partition (when it creates it).
pub(super) fn mirror_replicated(
    fake: &FakeCluster,
    root: &Path,
    halt: Option<u64>,
    flush: FlushPolicy,
    replicas: u32,
) -> (NodeDriver, bool) {
    let dest = if NodeDest::is_node_dest(root) {
        NodeDest::open(root).unwrap()
    } else {
        let mut meta = NodeMeta::new(Some(fake.address(1)), STATE_PARTITIONS);
        meta.replicas = replicas;
        NodeDest::create(root, meta).unwrap()
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
pub(super) fn stop(root: &Path, halt: Option<u64>, strategy: StopStrategy) -> (NodeDriver, bool) {
    let mut options = options(halt);
    options.mirror.stop_strategy = strategy;
    let mut driver = NodeDriver::open(root, None, options).unwrap();
    let request = MirrorRequest::RemoveTopics {
        mirror: east().to_string(),
        topics: vec!["orders".into()],
    };
    let results = driver.request(&request, 0).unwrap();
    assert!(results["orders"].is_ok(), "{results:?}");
    let halted = run(&mut driver, &mut ManualClock::default(), NodeUntil::Settled);
    (driver, halted)
}

pub(super) fn copy_dir(from: &Path, to: &Path) {
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
pub(super) fn tear_last_state_write(root: &Path, k: u32) {
    let dir = root.join("data").join(format!("__mirror_state-{k}"));
    let (_, path) = segments(&dir).pop().unwrap();
    let bytes = fs::read(&path).unwrap();
    let (pos, size, _) = *batches_of(&bytes).last().unwrap();
    let file = fs::OpenOptions::new().write(true).open(&path).unwrap();
    file.set_len((pos + size / 2) as u64).unwrap();
}

/// Where each partition log's durable bytes ended in the driver's memory when it was killed
/// ([`FileLog::durable_end`](crate::file_log::FileLog::durable_end): the recovery point, or
/// above it where a group commit made the bytes durable and deferred the epoch checkpoint);
/// the log dir's checkpoint files, written once per round, may still name less.
pub(super) fn fsynced_floors(driver: &NodeDriver) -> BTreeMap<String, Offset> {
    let mut out = BTreeMap::new();
    for (name, id, count) in TOPICS {
        for p in 0..count {
            if let Some(log) = driver.log(&PartitionKey::new(id, p)) {
                out.insert(format!("{name}-{p}"), log.durable_end());
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
pub(super) fn machine_crash(
    root: &Path,
    floors: &BTreeMap<String, Offset>,
    rng: &mut Rng,
) -> usize {
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
pub(super) fn batches(
    driver: &NodeDriver,
    key: &PartitionKey,
) -> Vec<(Vec<u8>, Option<ControlType>)> {
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

/// A `__mirror_state` key: a partition's state record or its LME record.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Debug)]
pub(super) enum Slot {
    State(MirrorPartition),
    Lme(MirrorPartition),
}

impl Slot {
    fn of(record: &MirrorStateRecord) -> Slot {
        match record {
            MirrorStateRecord::PartitionState { partition, .. }
            | MirrorStateRecord::PartitionStateTombstone(partition) => {
                Slot::State(partition.clone())
            }
            MirrorStateRecord::LastMirroredEpochs { partition, .. }
            | MirrorStateRecord::LastMirroredEpochsTombstone(partition) => {
                Slot::Lme(partition.clone())
            }
        }
    }

    /// The `__mirror_state` partition its records go to.
    fn state_partition(&self) -> u32 {
        let (Slot::State(p) | Slot::Lme(p)) = self;
        mirror_state_partition(p, STATE_PARTITIONS).unwrap()
    }
}

/// The latest record of every slot.
pub(super) type Records = BTreeMap<Slot, MirrorStateRecord>;

/// What the driver's coordinators hold: every `__mirror_state` record it acknowledged (a
/// record reaches a coordinator only once it is appended and fsynced), the latest per slot.
pub(super) fn acknowledged(driver: &NodeDriver) -> Records {
    driver
        .mirror_state()
        .flat_map(|(_, c)| c.records())
        .map(|r| (Slot::of(&r), r))
        .collect()
}

/// Every value each slot took in an uninterrupted run, in order, starting from "absent"
/// (`None`; a tombstone is `None` too): read from its `__mirror_state` partitions.
pub(super) struct History(BTreeMap<Slot, Vec<Option<MirrorStateRecord>>>);

impl History {
    /// The history of the closed node destination at `root`.
    pub(super) fn of(root: &Path) -> History {
        let data = root.join("data");
        let store = Arc::new(LogDirCheckpoints::open(&data).unwrap());
        let mut slots: BTreeMap<Slot, Vec<Option<MirrorStateRecord>>> = BTreeMap::new();
        for k in 0..STATE_PARTITIONS {
            let tp = TopicPartition::new("__mirror_state", k as i32).unwrap();
            let config = FileLogConfig::default();
            let (log, _) =
                FileLog::open_in_log_dir(&data, tp, config, Verify::All, store.clone()).unwrap();
            for (_, record) in crate::mirror_state_log::read_records(&log).unwrap() {
                let value = match record {
                    MirrorStateRecord::PartitionStateTombstone(_)
                    | MirrorStateRecord::LastMirroredEpochsTombstone(_) => None,
                    _ => Some(record.clone()),
                };
                slots
                    .entry(Slot::of(&record))
                    .or_insert_with(|| vec![None])
                    .push(value);
            }
        }
        History(slots)
    }

    /// The values `slot` took right before (`step` -1) or right after (`step` 1) `value`.
    fn next_to(
        &self,
        slot: &Slot,
        value: Option<&MirrorStateRecord>,
        step: isize,
    ) -> Vec<Option<&MirrorStateRecord>> {
        let seq = self.0.get(slot).map_or(&[][..], Vec::as_slice);
        (0..seq.len())
            .filter(|&i| seq[i].as_ref() == value)
            .filter_map(|i| i.checked_add_signed(step))
            .filter_map(|j| seq.get(j).map(Option::as_ref))
            .collect()
    }
}

/// What a reopened node may hold besides exactly the acknowledged records.
#[derive(Clone, Copy, Debug)]
pub(super) enum Allowance {
    /// Nothing else: every acknowledged record, nothing more.
    Exact,
    /// The last acknowledged write, to `__mirror_state` partition `k`, was torn away (a kill
    /// inside it): each slot of its batch may hold the record before it.
    LastTorn(u32),
    /// A write was in flight when the process died: each slot of its batch (one
    /// `__mirror_state` partition's) may hold the record after the acknowledged one (it
    /// landed whole, unacknowledged).
    InFlight,
}

/// What the killed process acknowledged, and what a reopen may show instead.
pub(super) struct Expected<'a> {
    pub(super) acked: &'a Records,
    pub(super) history: &'a History,
    pub(super) allowance: Allowance,
}

impl Expected<'_> {
    /// Nothing acknowledged is lost: `persisted` is `acked`, or differs from it in one slot
    /// as the allowance says.
    pub(super) fn check(&self, persisted: &Records, what: &str) {
        let slots: BTreeSet<&Slot> = self.acked.keys().chain(persisted.keys()).collect();
        let differ: Vec<(
            &Slot,
            Option<&MirrorStateRecord>,
            Option<&MirrorStateRecord>,
        )> = slots
            .into_iter()
            .map(|s| (s, self.acked.get(s), persisted.get(s)))
            .filter(|(_, a, p)| a != p)
            .collect();
        let (step, partition) = match self.allowance {
            Allowance::Exact => {
                assert!(
                    differ.is_empty(),
                    "{what}: the reopened __mirror_state is not what was acknowledged \
                     (slot, acknowledged, reopened): {differ:#?}"
                );
                return;
            }
            Allowance::LastTorn(k) => (-1, Some(k)),
            Allowance::InFlight => (1, None),
        };
        // A group commit writes a round's records of one `__mirror_state` partition as one
        // batch: a torn or unacknowledged write is that batch, every slot of it.
        let partitions: BTreeSet<u32> =
            differ.iter().map(|(s, _, _)| s.state_partition()).collect();
        assert!(
            partitions.len() <= 1,
            "{what}: slots of more than one __mirror_state partition differ from what was \
             acknowledged: {differ:#?}"
        );
        for (slot, acked, reopened) in differ {
            if let Some(k) = partition {
                assert_eq!(slot.state_partition(), k, "{what}: {slot:?} was not torn");
            }
            assert!(
                self.history.next_to(slot, acked, step).contains(&reopened),
                "{what}: {slot:?} holds {reopened:#?}, neither the acknowledged {acked:#?} nor \
                 the record {} it",
                if step < 0 { "before" } else { "after" }
            );
        }
    }
}

/// The offset of `key`'s `MIRROR_PID_RESET` batch, if its log holds one; `Err` when the log
/// failed (a write to it died), so that its process can no longer read it.
fn reset_offset(driver: &NodeDriver, key: &PartitionKey) -> Result<Option<Offset>, String> {
    let Some(log) = driver.log(key) else {
        return Ok(None);
    };
    let batches = log
        .try_read(log.log_start_offset(), log.log_end_offset())
        .map_err(|e| e.to_string())?;
    Ok(batches
        .iter()
        .map(|b| b.header())
        .find(|h| h.control == Some(ControlType::MirrorPidReset))
        .map(|h| h.base_offset))
}

/// In the killed process: every partition whose STOPPED it acknowledged has its
/// `MIRROR_PID_RESET` below its high watermark (committed before STOPPED was written).
pub(super) fn check_stopped_after_committed_reset(
    driver: &NodeDriver,
    acked: &Records,
    what: &str,
) {
    for record in acked.values() {
        let MirrorStateRecord::PartitionState { partition, value } = record else {
            continue;
        };
        if value.state != MirrorState::Stopped {
            continue;
        }
        let key = PartitionKey::new(partition.topic_id, partition.partition);
        // A log that failed after the commit (a later write died) is checked on reopening.
        let Ok(reset) = reset_offset(driver, &key) else {
            continue;
        };
        let reset =
            reset.unwrap_or_else(|| panic!("{what}: {key} STOPPED without a MIRROR_PID_RESET"));
        let hw = driver.log(&key).unwrap().high_watermark();
        assert!(
            reset < hw,
            "{what}: {key} STOPPED with its reset at {reset}, not below the high watermark {hw}"
        );
    }
}

/// What `stopped` (the topics being or having been stopped) allows after a kill: each
/// partition is a byte prefix of the source, or (stopped) all of it plus one reset; the
/// persisted states are ones the operation passes through; `expected` says which
/// `__mirror_state` records the reopened node must replay; a persisted STOPPED has its reset
/// in the recovered log.
pub(super) fn check_after_kill(
    root: &Path,
    sources: &Sources,
    stopping: &[TopicId],
    expected: &Expected,
    what: &str,
) {
    let driver = NodeDriver::open(root, None, options(None))
        .unwrap_or_else(|e| panic!("{what}: the destination does not reopen: {e}"));
    expected.check(&acknowledged(&driver), what);
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
                let (keep, tail) = sources.after_stop(&key);
                assert!(
                    rest.len() <= tail.len()
                        && rest.iter().zip(&tail).all(|((_, c), t)| *c == Some(*t)),
                    "{what}: {name}-{p} has {} batches that are neither the source's nor the \
                     stop's",
                    rest.len()
                );
                assert!(
                    rest.is_empty() || mirrored == keep,
                    "{what}: {name}-{p}: the stop's batches are not right after the {keep} it keeps"
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
                assert!(
                    state != MirrorState::Stopped || reset_offset(&driver, &key).unwrap().is_some(),
                    "{what}: {name}-{p} STOPPED, its MIRROR_PID_RESET lost"
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
pub(super) fn check_converged(
    driver: NodeDriver,
    root: &Path,
    sources: &Sources,
    stopped: &[TopicId],
    what: &str,
) {
    let mut states = BTreeMap::new();
    for (name, id, count) in TOPICS {
        for p in 0..count {
            let key = PartitionKey::new(id, p);
            let got = batches(&driver, &key);
            let leader = driver.log(&key).unwrap();
            for f in driver.followers(&key) {
                let copy = f.log.try_read(0, f.log.log_end_offset()).unwrap();
                let held = leader.try_read(0, leader.log_end_offset()).unwrap();
                let bytes = |batches: Vec<crate::record_batch::RawBatch>| -> Vec<Vec<u8>> {
                    batches.iter().map(|b| b.bytes().to_vec()).collect()
                };
                assert_eq!(
                    bytes(copy),
                    bytes(held),
                    "{what}: {name}-{p}, follower {}",
                    f.id
                );
            }
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
                let (keep, tail) = sources.after_stop(&key);
                assert_eq!(got.len(), keep + tail.len(), "{what}: {name}-{p}");
                let appended: Vec<ControlType> =
                    got[keep..].iter().filter_map(|(_, c)| *c).collect();
                assert_eq!(appended, tail, "{what}: {name}-{p}");
                assert!(
                    bytes[..keep]
                        .iter()
                        .zip(&source[..keep])
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

impl Tally {
    fn report(&self, test: &str) {
        crash_counts::report(
            test,
            self.kills as u64,
            self.torn_state_writes as u64,
            &format!(
                "{} machine crashes ({} partition tails cut or torn)",
                self.machine_crashes, self.tails_cut
            ),
        );
    }
}

/// A kill at `root`: the acknowledged records checked against the reopened node, a machine
/// crash of a copy, then (tearing the last `__mirror_state` write when the halted effect made
/// one) the kill itself; each restarted with `restart` and checked to converge.
#[allow(clippy::too_many_arguments)]
fn check_kill(
    driver: NodeDriver,
    root: &Path,
    sources: &Sources,
    stopping: &[TopicId],
    history: &History,
    restart: &dyn Fn(&Path) -> NodeDriver,
    rng: &mut Rng,
    tally: &mut Tally,
    what: &str,
) {
    let torn = driver.last_state_write();
    let floors = fsynced_floors(&driver);
    let acked = acknowledged(&driver);
    check_stopped_after_committed_reset(&driver, &acked, what);
    drop(driver); // SIGKILL
    tally.kills += 1;

    let copy = root.with_file_name("machine-crash");
    copy_dir(root, &copy);
    tally.tails_cut += machine_crash(&copy, &floors, rng);
    tally.machine_crashes += 1;
    let crashed = format!("{what}, machine crash");
    let exact = Expected {
        acked: &acked,
        history,
        allowance: Allowance::Exact,
    };
    check_after_kill(&copy, sources, stopping, &exact, &crashed);
    check_converged(restart(&copy), &copy, sources, stopping, &crashed);
    fs::remove_dir_all(&copy).unwrap();

    let allowance = match torn {
        Some(k) => {
            tear_last_state_write(root, k);
            tally.torn_state_writes += 1;
            Allowance::LastTorn(k)
        }
        None => Allowance::Exact,
    };
    let expected = Expected {
        acked: &acked,
        history,
        allowance,
    };
    check_after_kill(root, sources, stopping, &expected, what);
    check_converged(restart(root), root, sources, stopping, what);
    fs::remove_dir_all(root).unwrap();
}

#[test]
fn a_kill_after_every_effect_of_mirroring_many_partitions() {
    let flushes = [FlushPolicy::Kafka, FlushPolicy::EveryAppend];
    let tally = mirror_sweep(&fake(), &flushes, 0x5eed_0100);
    tally.report("node crash test, mirroring");
    assert!(tally.kills >= 90, "{tally:?}");
    assert!(tally.torn_state_writes >= 10, "{tally:?}");
    assert!(tally.tails_cut >= 10, "{tally:?}");
}

/// The mirroring sweep over a source with committed, aborted and open transactions and an
/// idempotent producer ([`transactional_fake`]): every batch is copied byte for byte, the
/// open transaction's too (a mirror copies up to the source's high watermark).
#[test]
fn a_kill_after_every_effect_of_mirroring_transactions() {
    let tally = mirror_sweep(&transactional_fake(), &[FlushPolicy::Kafka], 0x5eed_0103);
    tally.report("node crash test, mirroring transactions");
    assert!(tally.kills >= 45, "{tally:?}");
    assert!(tally.torn_state_writes >= 5, "{tally:?}");
}

/// A kill after every effect of mirroring `fake`'s two topics from an empty node, with each of
/// `flushes` (see the [module documentation](self)), cut points seeded with `seed`.
fn mirror_sweep(fake: &FakeCluster, flushes: &[FlushPolicy], seed: u64) -> Tally {
    let sources = source_bytes(fake);
    let tmp = scratch();
    let mut rng = Rng(seed);
    let mut tally = Tally::default();
    for &flush in flushes {
        // The reference: an uninterrupted run, the records each __mirror_state slot takes.
        let reference = tmp.path().join(format!("reference-{flush}"));
        let (driver, halted) = mirror(fake, &reference, None, flush);
        assert!(!halted);
        check_converged(driver, &reference, &sources, &[], "no kill");
        let history = History::of(&reference);
        let restart = |root: &Path| mirror(fake, root, None, flush).0;
        for n in 1.. {
            let root = tmp.path().join(format!("kill-{n}-{flush}"));
            let (driver, halted) = mirror(fake, &root, Some(n), flush);
            if !halted {
                break;
            }
            let what = format!("mirroring (--flush {flush}), kill after effect {n}");
            check_kill(
                driver,
                &root,
                &sources,
                &[],
                &history,
                &restart,
                &mut rng,
                &mut tally,
                &what,
            );
        }
    }
    tally
}

#[test]
fn a_kill_after_every_effect_of_stopping_one_topic() {
    let tally = stop_sweep(&fake(), 1, StopStrategy::TruncateToLso, 0x5eed_0101);
    tally.report("node crash test, stop");
    assert!(tally.kills >= 10, "{tally:?}");
    assert!(tally.torn_state_writes >= 3, "{tally:?}");
}

/// The stop's sweep on a node with two in-process followers per partition: the stop waits for
/// its `MIRROR_PID_RESET` on every replica, and after every kill the reopened node converges
/// with every follower holding its leader's log (`check_converged`).
#[test]
fn a_kill_after_every_effect_of_stopping_one_topic_with_followers() {
    let tally = stop_sweep(&fake(), 3, StopStrategy::TruncateToLso, 0x5eed_0102);
    tally.report("node crash test, stop with followers");
    assert!(tally.kills >= 10, "{tally:?}");
    assert!(tally.torn_state_writes >= 3, "{tally:?}");
}

/// The stop's sweep when orders-0 ends in an open transaction ([`transactional_fake`]): the
/// stop truncates it to the LSO before its `MIRROR_PID_RESET`, on a node with one replica and on
/// one with two followers, whose copies are truncated after their leader.
#[test]
fn a_kill_after_every_effect_of_stopping_one_topic_with_an_open_transaction() {
    for (replicas, seed) in [(1, 0x5eed_0104), (3, 0x5eed_0105)] {
        let strategy = StopStrategy::TruncateToLso;
        let tally = stop_sweep(&transactional_fake(), replicas, strategy, seed);
        tally.report(&format!(
            "node crash test, stop with an open transaction, {replicas} replica(s)"
        ));
        assert!(tally.kills >= 10, "{tally:?}");
        assert!(tally.torn_state_writes >= 3, "{tally:?}");
    }
}

/// The same with `--stop-strategy abort-open-transactions`: the stop keeps every mirrored
/// batch and appends an ABORT marker for the open transaction before its `MIRROR_PID_RESET`.
#[test]
fn a_kill_after_every_effect_of_stopping_one_topic_aborting_its_open_transaction() {
    let strategy = StopStrategy::AbortOpenTransactions;
    let tally = stop_sweep(&transactional_fake(), 1, strategy, 0x5eed_0106);
    tally.report("node crash test, stop aborting an open transaction");
    assert!(tally.kills >= 10, "{tally:?}");
    assert!(tally.torn_state_writes >= 3, "{tally:?}");
}

/// A kill after every effect of `kmirror stop --topics orders` on a node of `replicas`
/// replicas mirroring `fake` (see the [module documentation](self)), cut points seeded with
/// `seed`.
fn stop_sweep(fake: &FakeCluster, replicas: u32, strategy: StopStrategy, seed: u64) -> Tally {
    let mut sources = source_bytes(fake);
    sources.strategy = strategy;
    let tmp = scratch();
    let base = tmp.path().join("base");
    let (driver, halted) = mirror_replicated(fake, &base, None, FlushPolicy::Kafka, replicas);
    assert!(!halted);
    driver.close().unwrap();
    let reference = tmp.path().join("reference");
    copy_dir(&base, &reference);
    let (driver, halted) = stop(&reference, None, strategy);
    assert!(!halted);
    check_converged(driver, &reference, &sources, &[ORDERS], "no kill");
    let history = History::of(&reference);
    let restart = |root: &Path| stop(root, None, strategy).0;
    let mut rng = Rng(seed);
    let mut tally = Tally::default();
    for n in 1.. {
        let root = tmp.path().join(format!("kill-{n}"));
        copy_dir(&base, &root);
        let (driver, halted) = stop(&root, Some(n), strategy);
        if !halted {
            fs::remove_dir_all(&root).unwrap();
            break;
        }
        let what = format!("stop ({replicas} replicas), kill after effect {n}");
        check_kill(
            driver,
            &root,
            &sources,
            &[ORDERS],
            &history,
            &restart,
            &mut rng,
            &mut tally,
            &what,
        );
    }
    tally
}

/// A scratch directory on a RAM disk when there is one: a machine crash is simulated
/// explicitly (files cut past what was fsynced) and a process death needs no disk, so nothing
/// here needs a real one, and the fsyncs cost nothing there.
pub(super) fn scratch() -> tempfile::TempDir {
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        tempfile::tempdir_in(shm).unwrap()
    } else {
        tempfile::tempdir().unwrap()
    }
}

/// The torn-write sweeps' source: partitions of 60 to 62 batches (about 6 KB), fetched 16
/// batches a round (4 rounds, each partition's share one vectored write, two where the segment
/// rolls) into segments of 5,000 bytes, so that each partition rolls once and writes offset
/// index entries (one per 4,096 bytes).
fn torn_fake() -> FakeCluster {
    fake_with(|i| 60 + i64::from(i))
}

fn torn_options() -> NodeDriverOptions {
    NodeDriverOptions {
        max_fetch_batches: 16,
        ..options(None)
    }
}

/// What an armed run left.
struct TornRun {
    /// The `__mirror_state` records the process acknowledged before it died (or finished).
    acked: Records,
    /// The torn write (`None`: the run finished first).
    torn: Option<TornWrite>,
    /// Writes counted.
    writes: u64,
}

/// Runs `work` on `driver` with the fault injection armed on `root` (`tear_at`: the write cut
/// short), then closes the driver (armed too) or, when the process died, drops it.
fn armed_run(
    mut driver: NodeDriver,
    root: &Path,
    tear_at: Option<u64>,
    work: impl FnOnce(&mut NodeDriver) -> Result<(), NodeError>,
    what: &str,
) -> TornRun {
    let armed = fault::arm(root, tear_at, 0x5eed_0200);
    let mut result = work(&mut driver);
    let acked = acknowledged(&driver);
    check_stopped_after_committed_reset(&driver, &acked, what);
    match result {
        Ok(()) => result = driver.close(),
        Err(_) => drop(driver), // the process died
    }
    let torn = armed.torn();
    match &result {
        Err(e) => assert!(fault::is_halted(e), "{what}: not the injected fault: {e}"),
        Ok(()) => assert!(torn.is_none(), "{what}: {torn:?} torn, yet the run went on"),
    }
    assert_eq!(torn.is_some(), tear_at.is_some_and(|n| n <= armed.writes()));
    TornRun {
        acked,
        torn,
        writes: armed.writes(),
    }
}

/// A fresh node destination at `root` mirroring both topics of `fake`, the topics added (not
/// armed), then run until caught up and closed, armed.
fn mirror_torn(fake: &FakeCluster, root: &Path, tear_at: Option<u64>, what: &str) -> TornRun {
    let mut meta = NodeMeta::new(Some(fake.address(1)), STATE_PARTITIONS);
    meta.segment_bytes = Some(5_000);
    let dest = NodeDest::create(root, meta).unwrap();
    let mut driver = NodeDriver::from_dest(dest, Some(source(fake)), torn_options()).unwrap();
    let topics: Vec<(String, TopicId, i32)> = TOPICS
        .iter()
        .map(|(n, id, c)| ((*n).to_owned(), *id, *c))
        .collect();
    let results = driver.add_topics(&east(), &topics, 0).unwrap();
    assert!(results.values().all(Result::is_ok), "{results:?}");
    armed_run(
        driver,
        root,
        tear_at,
        |d| {
            d.run(
                &mut ManualClock::default(),
                NodeUntil::CaughtUp,
                &mut |_, _| {},
            )
            .map(|_| ())
        },
        what,
    )
}

/// `kmirror stop --topics orders` on `root`, opened (not armed), then the request, the run
/// until settled and the close, armed.
fn stop_torn(root: &Path, tear_at: Option<u64>, what: &str) -> TornRun {
    let driver = NodeDriver::open(root, None, torn_options()).unwrap();
    let request = MirrorRequest::RemoveTopics {
        mirror: east().to_string(),
        topics: vec!["orders".into()],
    };
    armed_run(
        driver,
        root,
        tear_at,
        |d| {
            let results = d.request(&request, 0)?;
            assert!(results["orders"].is_ok(), "{results:?}");
            d.run(
                &mut ManualClock::default(),
                NodeUntil::Settled,
                &mut |_, _| {},
            )
            .map(|_| ())
        },
        what,
    )
}

/// Torn writes of one sweep, by the kind of file written.
#[derive(Default, Debug)]
struct TornTally {
    by_kind: BTreeMap<&'static str, u64>,
    /// Vectored appends of more than one batch (a fetch round's share) torn.
    vectored: u64,
    /// Torn writes that kept nothing / part of the bytes.
    kept_nothing: u64,
}

impl TornTally {
    fn add(&mut self, torn: &TornWrite) {
        let name = torn.file.file_name().unwrap().to_str().unwrap();
        let dir = torn
            .file
            .parent()
            .unwrap()
            .file_name()
            .unwrap()
            .to_str()
            .unwrap();
        let kind = if name.ends_with(".log") && dir.starts_with("__mirror_state") {
            "__mirror_state append"
        } else if name.ends_with(".log") {
            "segment append"
        } else if name.ends_with(".index") {
            "offset index"
        } else if name == "leader-epoch-checkpoint.tmp" {
            "leader-epoch checkpoint"
        } else if name == "leader-epoch-checkpoint" {
            "first leader-epoch checkpoint (in place)"
        } else if name == "node.properties.tmp" {
            "node.properties"
        } else {
            "log-dir checkpoint"
        };
        *self.by_kind.entry(kind).or_default() += 1;
        self.vectored += u64::from(torn.parts > 1);
        self.kept_nothing += u64::from(torn.kept == 0);
    }

    fn total(&self) -> u64 {
        self.by_kind.values().sum()
    }

    fn report(&self, test: &str, elapsed: Duration) {
        let kinds: Vec<String> = self
            .by_kind
            .iter()
            .map(|(k, n)| format!("{n} {k}"))
            .collect();
        crash_counts::report(
            test,
            self.total(),
            self.total(),
            &format!(
                "{} ({} of them vectored appends of a fetch round, {} cut before their first \
                 byte); every reopen recovered and every restart converged, in {:.1} s",
                kinds.join(", "),
                self.vectored,
                self.kept_nothing,
                elapsed.as_secs_f64()
            ),
        );
    }
}

/// Every write of a mirroring of 5 partitions (4 fetch rounds, the close included) cut
/// short in turn, the process dying there.
#[test]
fn a_torn_write_at_every_write_of_mirroring_many_partitions() {
    let started = std::time::Instant::now();
    let fake = torn_fake();
    let sources = source_bytes(&fake);
    let tmp = scratch();
    let reference = tmp.path().join("reference");
    let run = mirror_torn(&fake, &reference, None, "reference");
    let history = History::of(&reference);
    let writes = run.writes;
    let mut tally = TornTally::default();
    for n in 1..=writes {
        let root = tmp.path().join(format!("torn-{n}"));
        let what = format!("mirroring, write {n} of {writes} torn");
        let run = mirror_torn(&fake, &root, Some(n), &what);
        let torn = run
            .torn
            .unwrap_or_else(|| panic!("{what}: the run ended after {} writes", run.writes));
        tally.add(&torn);
        let what = format!(
            "{what} ({} of {} bytes of {})",
            torn.kept,
            torn.len,
            torn.file.display()
        );
        let expected = Expected {
            acked: &run.acked,
            history: &history,
            allowance: Allowance::InFlight,
        };
        check_after_kill(&root, &sources, &[], &expected, &what);
        let (driver, _) = mirror(&fake, &root, None, FlushPolicy::Kafka);
        check_converged(driver, &root, &sources, &[], &what);
        fs::remove_dir_all(&root).unwrap();
    }
    tally.report("node torn writes, mirroring", started.elapsed());
    for kind in [
        "segment append",
        "offset index",
        "__mirror_state append",
        "first leader-epoch checkpoint (in place)",
        "log-dir checkpoint",
    ] {
        assert!(
            tally.by_kind.contains_key(kind),
            "no {kind} torn: {tally:?}"
        );
    }
    assert!(tally.vectored >= 10, "{tally:?}");
    assert!(writes >= 50, "only {writes} writes");
}

/// Every write of a stop of one topic (3 of the 5 partitions; its request's `node.properties`
/// and the close included) cut short in turn, the process dying there.
#[test]
fn a_torn_write_at_every_write_of_stopping_one_topic() {
    let started = std::time::Instant::now();
    let fake = torn_fake();
    let sources = source_bytes(&fake);
    let tmp = scratch();
    let base = tmp.path().join("base");
    mirror_torn(&fake, &base, None, "base");
    let reference = tmp.path().join("reference");
    copy_dir(&base, &reference);
    let run = stop_torn(&reference, None, "reference");
    let history = History::of(&reference);
    let writes = run.writes;
    let mut tally = TornTally::default();
    for n in 1..=writes {
        let root = tmp.path().join(format!("torn-{n}"));
        copy_dir(&base, &root);
        let what = format!("stop, write {n} of {writes} torn");
        let run = stop_torn(&root, Some(n), &what);
        let torn = run
            .torn
            .unwrap_or_else(|| panic!("{what}: the run ended after {} writes", run.writes));
        tally.add(&torn);
        let what = format!(
            "{what} ({} of {} bytes of {})",
            torn.kept,
            torn.len,
            torn.file.display()
        );
        let expected = Expected {
            acked: &run.acked,
            history: &history,
            allowance: Allowance::InFlight,
        };
        check_after_kill(&root, &sources, &[ORDERS], &expected, &what);
        let (driver, _) = stop(&root, None, StopStrategy::TruncateToLso);
        check_converged(driver, &root, &sources, &[ORDERS], &what);
        fs::remove_dir_all(&root).unwrap();
    }
    tally.report("node torn writes, stop", started.elapsed());
    for kind in [
        "node.properties",
        "__mirror_state append",
        "segment append",
        "log-dir checkpoint",
    ] {
        assert!(
            tally.by_kind.contains_key(kind),
            "no {kind} torn: {tally:?}"
        );
    }
    assert!(writes >= 20, "only {writes} writes");
}
