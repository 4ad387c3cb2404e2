//! Crash safety of the node destination across whole operations, beyond one kill per run:
//!
//! - **Kill chains across a whole mirroring and a stop**: a node mirrors a source of several
//!   leader epochs of plain, idempotent and transactional batches (orders-0 ending in an open
//!   transaction) from an empty destination, and the node driver is halted after a seeded
//!   random 1 to 12 effects ([`NodeDriverOptions::halt_after_effects`], counted from each
//!   process's start; the span doubles after a kill that left what the kill before it left,
//!   as a restart of PREPARING partitions redoes some 30 effects before it gets further),
//!   dropped without closing, reopened, halted again, ... until a run catches up; then
//!   `kmirror stop --topics orders` the same way until a run settles. Each kill is a
//!   process death, a death inside the last `__mirror_state` write (its batch torn in half), or
//!   a machine crash (every partition log loses a seeded random tail past what was fsynced),
//!   seeded too, and the next process starts from what it left: a later kill lands on the
//!   recovery of an earlier one. After each kill the destination reopens with exactly the
//!   `__mirror_state` records the killed process acknowledged (less the torn one), every
//!   partition a byte prefix of its source (then the stop's own batches), nothing below the
//!   killed process's high watermark lost (below what it had fsynced, after a machine crash),
//!   every persisted state where the previous reopen left it or further along, and no
//!   partition writable before STOPPED. The chain's end is **byte for byte the end of an
//!   uncrashed run** (every leader and follower replica's batches, every `__mirror_state`
//!   record, the produce gates), and `kmirror verify` finds every log whole. Several seeds,
//!   with one replica and with two followers, both flush policies and both stop strategies.
//! - **A kill after every effect of a failback**: node A mirrored a Kafka cluster, failed over
//!   and took writes; node B mirrored A, failed over and took writes of its own; A fails back
//!   from B (served on Kafka's wire): PREPARING asks B for its LME (`ReadMirrorStates`),
//!   truncates exactly the records B never had, then A mirrors B. For every effect N of that
//!   failback, on a fresh copy of A, A is halted after effect N, then a machine-crashed copy
//!   and the killed directory itself (its last `__mirror_state` write torn when it made one)
//!   are each checked and restarted: nothing acknowledged is lost, the history A shares with
//!   B is never cut, A is its own log untouched or a prefix of B's (followers too), writable
//!   only while STOPPED; the restart converges to exactly the uncrashed failback's result,
//!   byte for byte B's log on every replica, and verifies clean.
//!
//! A chain finds what one kill from a clean state cannot: a crash during the recovery or the
//! first steps after an earlier crash, and a state record torn on top of a machine crash's
//! lost tail. The failback is the one operation that removes data the destination holds
//! below its log end on purpose; every kill point checks that it removes no more. Each test
//! reports its counts on stderr ([`kmirror_testsupport::crash_counts`]).

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use kmirror_kernel::batch::{ControlType, LeaderBatch, ProducerBatchInfo};
use kmirror_kernel::config::StopStrategy;
use kmirror_kernel::desired::DesiredState;
use kmirror_kernel::log::LogView;
use kmirror_kernel::node::PartitionKey;
use kmirror_kernel::state::MirrorState;
use kmirror_kernel::types::{MirrorName, Offset, TopicId};
use kmirror_testsupport::crash_counts;

use super::crash_tests::{
    acknowledged, batches, check_after_kill, check_converged, check_stopped_after_committed_reset,
    copy_dir, fsynced_floors, machine_crash, mirror_replicated, options, scratch, source_bytes,
    stop, tear_last_state_write, Allowance, Expected, History, Records, Rng, ORDERS,
    STATE_PARTITIONS, TOPICS,
};
use super::failback_tests::{fail_over, mirror_of_a, unserved};
use super::fixture;
use super::serve_tests::{client_batch, produce, Running, WallClock};
use super::verify::verify_node;
use super::*;
use crate::clock::ManualClock;
use crate::file_log::FlushPolicy;
use crate::record_batch::RawBatch;
use crate::serve::metadata::node_cluster_id;
use crate::wire::fake_broker::{FakeCluster, FakePartition, FakeTopic};
use crate::wire::{Connection, SourceCluster, SourceClusterOptions, TopicSelection};

/// The chains' source: orders (3 partitions) and pay.eu (2) led by two brokers, every
/// partition `epochs` leader epochs (3, 4, ...) long, each epoch two plain batches, an
/// idempotent producer's batch, a committed transaction of two batches, an aborted one and a
/// plain batch (9 batches); orders-0 ends with a transaction its producer never ends (the stop
/// truncates it to the LSO, or aborts it).
fn chain_fake(epochs: i32) -> FakeCluster {
    let partition = |topic: i64, index: i32| -> FakePartition {
        let pid = |base: i64| base + 10 * topic + i64::from(index);
        let mut sequences: BTreeMap<i64, i32> = BTreeMap::new();
        let mut records = |pid: Option<i64>, count: u32, transactional: bool| {
            let producer = pid.map(|producer_id| {
                let next = sequences.entry(producer_id).or_default();
                let base_sequence = *next;
                *next += count as i32;
                ProducerBatchInfo {
                    producer_id,
                    producer_epoch: 0,
                    base_sequence,
                }
            });
            LeaderBatch::Records {
                record_count: count,
                producer,
                transactional,
            }
        };
        let marker = |pid: i64, control| LeaderBatch::Control {
            control,
            producer: Some((pid, 0)),
        };
        let mut script = Vec::new();
        for e in 0..epochs {
            let epoch = 3 + e;
            let (idem, commit, abort) = (pid(100), pid(200), pid(300));
            script.extend([
                (epoch, records(None, 2, false)),
                (epoch, records(None, 1, false)),
                (epoch, records(Some(idem), 2, false)),
                (epoch, records(Some(commit), 2, true)),
                (epoch, records(Some(commit), 1, true)),
                (epoch, marker(commit, ControlType::Commit)),
                (epoch, records(Some(abort), 1, true)),
                (epoch, marker(abort, ControlType::Abort)),
                (epoch, records(None, 1, false)),
            ]);
        }
        if topic == 0 && index == 0 {
            let open = pid(400);
            script.push((2 + epochs, records(Some(open), 2, true)));
        }
        let mut next = 0;
        let batches = script
            .iter()
            .map(|(epoch, batch)| {
                let raw = RawBatch::from_leader_batch(batch, next, *epoch, 1_000 + next).unwrap();
                next = raw.header().last_offset + 1;
                raw
            })
            .collect();
        FakePartition {
            leader: 1 + index % 2,
            epoch: 2 + epochs,
            log_start: 0,
            batches,
            fetch_error: None,
            diverging: None,
        }
    };
    let topic = |t: i64| {
        let (name, id, count) = TOPICS[t as usize];
        FakeTopic {
            name: name.into(),
            id,
            partitions: (0..count).map(|i| partition(t, i)).collect(),
        }
    };
    FakeCluster::start(2, vec![topic(0), topic(1)])
}

/// What a node destination holds once closed, as the next process reads it.
#[derive(PartialEq, Debug)]
struct Snapshot {
    /// Per partition (`<topic>-<p>`): the leader's batches, then each follower's, byte for
    /// byte.
    logs: BTreeMap<String, Vec<Vec<Vec<u8>>>>,
    /// Per partition: the leader's high watermark.
    high_watermarks: BTreeMap<String, Offset>,
    /// Per partition: whether local producers may write to it.
    writable: BTreeMap<String, bool>,
    /// Every `__mirror_state` record, the latest per key.
    records: Records,
}

impl Snapshot {
    /// The closed node destination at `root`, its partitions of `topics`.
    fn of(root: &Path, topics: &[(&str, TopicId, i32)]) -> Snapshot {
        let driver = NodeDriver::open(root, None, options(None)).unwrap();
        let mut snapshot = Snapshot {
            logs: BTreeMap::new(),
            high_watermarks: BTreeMap::new(),
            writable: BTreeMap::new(),
            records: acknowledged(&driver),
        };
        for &(name, id, count) in topics {
            for p in 0..count {
                let key = PartitionKey::new(id, p);
                let name = format!("{name}-{p}");
                let mut replicas = vec![leader_bytes(&driver, &key)];
                for f in driver.followers(&key) {
                    replicas.push(bytes_of(&f.log));
                }
                snapshot.logs.insert(name.clone(), replicas);
                let hw = driver.log(&key).unwrap().high_watermark();
                snapshot.high_watermarks.insert(name.clone(), hw);
                snapshot.writable.insert(name, driver.writable(&key));
            }
        }
        driver.close().unwrap();
        snapshot
    }

    /// Asserts `self` (a crashed run's end) is `reference` (the uncrashed run's).
    fn assert_is(&self, reference: &Snapshot, what: &str) {
        for (name, replicas) in &reference.logs {
            let got = &self.logs[name];
            assert_eq!(got.len(), replicas.len(), "{what}: {name}: replicas");
            for (r, (got, want)) in got.iter().zip(replicas).enumerate() {
                assert!(
                    got == want,
                    "{what}: {name}, replica {r}: {} batches, the uncrashed run's {}; first \
                     difference at batch {}",
                    got.len(),
                    want.len(),
                    got.iter().zip(want).take_while(|(a, b)| a == b).count()
                );
            }
        }
        assert_eq!(
            self.high_watermarks, reference.high_watermarks,
            "{what}: high watermarks"
        );
        assert_eq!(self.writable, reference.writable, "{what}: produce gates");
        assert_eq!(
            self.records, reference.records,
            "{what}: __mirror_state differs from the uncrashed run's"
        );
    }
}

/// Every batch of `log`, byte for byte.
fn bytes_of(log: &crate::file_log::FileLog) -> Vec<Vec<u8>> {
    log.try_read(log.log_start_offset(), log.log_end_offset())
        .unwrap()
        .iter()
        .map(|b| b.bytes().to_vec())
        .collect()
}

fn leader_bytes(driver: &NodeDriver, key: &PartitionKey) -> Vec<Vec<u8>> {
    batches(driver, key).into_iter().map(|(b, _)| b).collect()
}

/// `kmirror verify DIR`: every log of `root`, followers' too, passes the full CRC scan.
fn verify_clean(root: &Path, what: &str) {
    let verdicts = verify_node(root).unwrap();
    assert!(!verdicts.is_empty(), "{what}: nothing verified");
    for v in verdicts {
        if let Err(e) = &v.result {
            panic!("{what}: {} fails verify: {e}", v.dir.display());
        }
    }
}

/// The `__mirror_state` history of `root` as its records stand now (read from a copy, so that
/// `root` stays as the crash left it): what a torn write's slots held before it.
fn history_of(root: &Path) -> History {
    let copy = root.with_file_name("history");
    copy_dir(root, &copy);
    let history = History::of(&copy);
    fs::remove_dir_all(&copy).unwrap();
    history
}

/// A chain's process is halted after 1 to this many effects (twice as many after a kill that
/// left what the kill before it left).
const KILL_SPAN: usize = 12;

/// How a kill of a chain ends the process.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Crash {
    /// The process dies after the effect (the page cache survives).
    Kill,
    /// The process dies inside the effect's `__mirror_state` write, torn in half.
    TornStateWrite,
    /// The machine crashes: every partition log loses a random tail past what was fsynced.
    Machine,
}

/// Leader epochs of each chain's source.
const CHAIN_EPOCHS: i32 = 5;

/// One kill chain.
struct Chain {
    /// The replicas of every partition.
    replicas: u32,
    flush: FlushPolicy,
    strategy: StopStrategy,
    /// Leader epochs of the source ([`chain_fake`]).
    epochs: i32,
    seed: u64,
}

/// Counts of the chains.
#[derive(Default, Debug)]
struct ChainTally {
    kills: usize,
    /// Of them, while stopping.
    stop_kills: usize,
    torn_state_writes: usize,
    machine_crashes: usize,
    tails_cut: usize,
    /// Effects of the uncrashed runs, summed.
    uncrashed_effects: u64,
    /// Kills of each chain.
    per_chain: Vec<usize>,
}

/// Which operation a chain is in.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Phase {
    Mirror,
    Stop,
}

/// Runs `chain`, adding its counts to `tally`.
fn run_chain(chain: &Chain, tally: &mut ChainTally) {
    let fake = chain_fake(chain.epochs);
    let mut sources = source_bytes(&fake);
    sources.strategy = chain.strategy;
    let tmp = scratch();
    let label = format!(
        "chain (seed {:#x}, {} replica(s), --flush {}, --stop-strategy {:?})",
        chain.seed, chain.replicas, chain.flush, chain.strategy
    );

    // The uncrashed run: the whole mirroring, then the stop.
    let reference = tmp.path().join("reference");
    let (driver, halted) = mirror_replicated(&fake, &reference, None, chain.flush, chain.replicas);
    assert!(!halted);
    tally.uncrashed_effects += driver.effects();
    driver.close().unwrap();
    let (driver, halted) = stop(&reference, None, chain.strategy);
    assert!(!halted);
    tally.uncrashed_effects += driver.effects();
    check_converged(driver, &reference, &sources, &[ORDERS], &label);
    verify_clean(&reference, &label);
    let uncrashed_history = History::of(&reference);
    let uncrashed = Snapshot::of(&reference, &TOPICS);

    let root = tmp.path().join("chain");
    let mut rng = Rng(chain.seed);
    let mut phase = Phase::Mirror;
    let mut span = KILL_SPAN;
    // What the last killed process left: its acknowledged records and log end offsets.
    let mut last_left = None;
    let mut states: BTreeMap<PartitionKey, MirrorState> = BTreeMap::new();
    let mut kills = 0;
    let last = loop {
        assert!(kills < 1_000, "{label}: the chain makes no progress");
        let n = 1 + rng.below(span) as u64;
        let (driver, halted) = match phase {
            Phase::Mirror => mirror_replicated(&fake, &root, Some(n), chain.flush, chain.replicas),
            Phase::Stop => stop(&root, Some(n), chain.strategy),
        };
        if !halted {
            match phase {
                Phase::Mirror => {
                    driver.close().unwrap();
                    phase = Phase::Stop;
                    span = KILL_SPAN;
                    continue;
                }
                Phase::Stop => break driver,
            }
        }
        kills += 1;
        let stopping: &[TopicId] = match phase {
            Phase::Mirror => &[],
            Phase::Stop => &[ORDERS],
        };
        let crash = match rng.below(4) {
            0 => Crash::Machine,
            _ if driver.last_state_write().is_some() => Crash::TornStateWrite,
            _ => Crash::Kill,
        };
        let what = format!("{label}: kill {kills}, after effect {n} of a {phase:?} run, {crash:?}");
        let acked = acknowledged(&driver);
        check_stopped_after_committed_reset(&driver, &acked, &what);
        let floors = fsynced_floors(&driver);
        let mut kept: BTreeMap<String, Offset> = BTreeMap::new();
        let mut leos: BTreeMap<String, Offset> = BTreeMap::new();
        for (name, id, count) in TOPICS {
            for p in 0..count {
                if let Some(log) = driver.log(&PartitionKey::new(id, p)) {
                    kept.insert(format!("{name}-{p}"), log.high_watermark());
                    leos.insert(format!("{name}-{p}"), log.log_end_offset());
                }
            }
        }
        let torn = driver.last_state_write();
        drop(driver); // SIGKILL
        tally.kills += 1;
        tally.stop_kills += usize::from(phase == Phase::Stop);
        // A process killed before it got past what its start redoes (the restart's recovery,
        // PREPARING's steps for every partition) left what the one before left: the next one
        // may run twice as long.
        let left = Some((acked.clone(), leos));
        span = if left == last_left {
            span * 2
        } else {
            KILL_SPAN
        };
        last_left = left;

        let mut torn_history = None;
        let allowance = match crash {
            Crash::Kill => Allowance::Exact,
            Crash::TornStateWrite => {
                let k = torn.unwrap();
                torn_history = Some(history_of(&root));
                tear_last_state_write(&root, k);
                tally.torn_state_writes += 1;
                Allowance::LastTorn(k)
            }
            Crash::Machine => {
                tally.tails_cut += machine_crash(&root, &floors, &mut rng);
                tally.machine_crashes += 1;
                // What is below the fsynced bytes survives, not more.
                kept = floors.clone();
                Allowance::Exact
            }
        };
        // An exact allowance reads no history: nothing may differ.
        let history = torn_history.as_ref().unwrap_or(&uncrashed_history);
        let expected = Expected {
            acked: &acked,
            history,
            allowance,
        };
        check_after_kill(&root, &sources, stopping, &expected, &what);
        check_chain_progress(&root, &kept, &mut states, &what);
    };
    let what = format!("{label}, after {kills} kills");
    check_converged(last, &root, &sources, &[ORDERS], &what);
    verify_clean(&root, &what);
    Snapshot::of(&root, &TOPICS).assert_is(&uncrashed, &what);
    assert!(kills >= 15, "{what}: only {kills} kills");
    tally.per_chain.push(kills);
}

/// After a chain's kill, on the reopened destination: no partition lost anything below `kept`
/// (the killed process's high watermark, or what it had fsynced when the machine crashed), and
/// every persisted state is where the previous reopen left it or further along the operation
/// (`states`, updated).
fn check_chain_progress(
    root: &Path,
    kept: &BTreeMap<String, Offset>,
    states: &mut BTreeMap<PartitionKey, MirrorState>,
    what: &str,
) {
    let driver = NodeDriver::open(root, None, options(None))
        .unwrap_or_else(|e| panic!("{what}: the destination does not reopen: {e}"));
    for (name, id, count) in TOPICS {
        for p in 0..count {
            let key = PartitionKey::new(id, p);
            let Some(log) = driver.log(&key) else {
                continue;
            };
            let floor = kept.get(&format!("{name}-{p}")).copied().unwrap_or(0);
            assert!(
                log.log_end_offset() >= floor,
                "{what}: {name}-{p} reopened at LEO {}, below {floor}, which the crash kept",
                log.log_end_offset()
            );
            let state = driver.persisted_state(&key);
            let before = states.insert(key, state).unwrap_or(MirrorState::Unknown);
            assert!(
                state >= before,
                "{what}: {name}-{p} went back from {before} to {state}"
            );
        }
    }
    drop(driver);
}

/// Kill chains across a whole mirroring and a stop of one topic (see the
/// [module documentation](self)), one per seed.
#[test]
fn kill_chains_across_a_whole_mirroring_and_a_stop() {
    let started = Instant::now();
    let mut chains = Vec::new();
    let mut seed = 0x5eed_0300;
    for replicas in [1, 3] {
        for flush in [FlushPolicy::Kafka, FlushPolicy::EveryAppend] {
            for strategy in [
                StopStrategy::TruncateToLso,
                StopStrategy::AbortOpenTransactions,
            ] {
                chains.push(Chain {
                    replicas,
                    flush,
                    strategy,
                    epochs: CHAIN_EPOCHS,
                    seed,
                });
                seed += 1;
            }
        }
    }
    let mut tally = ChainTally::default();
    for chain in &chains {
        run_chain(chain, &mut tally);
    }
    crash_counts::report(
        "node crash chains, mirroring and stop",
        tally.kills as u64,
        tally.torn_state_writes as u64,
        &format!(
            "{} chains ({} effects uncrashed; kills per chain {:?}), {} kills while stopping, \
             {} machine crashes ({} partition tails cut or torn); every chain ended byte for \
             byte as the uncrashed run, in {:.1} s",
            chains.len(),
            tally.uncrashed_effects,
            tally.per_chain,
            tally.stop_kills,
            tally.machine_crashes,
            tally.tails_cut,
            started.elapsed().as_secs_f64()
        ),
    );
    assert!(tally.kills >= 200, "{tally:?}");
    assert!(tally.stop_kills >= 30, "{tally:?}");
    assert!(tally.torn_state_writes >= 3, "{tally:?}");
    assert!(tally.machine_crashes >= 40, "{tally:?}");
    assert!(tally.tails_cut >= 20, "{tally:?}");
}

/// The failback sweep's world: node A's directory, failed over and written to, and node B,
/// failed over, written to and serving, which A fails back from.
struct Failback {
    /// B serving its copy of orders (taken down at the end).
    b: Option<Running>,
    /// A before the failback: a closed node destination (its directory named `a`: a node's
    /// cluster id, which B's mirror of A is named after, is its directory's name).
    a_base: PathBuf,
    /// The mirror A fails back in: B's cluster id.
    a_mirror: MirrorName,
    /// A's orders-p before the failback, batch by batch.
    before: Vec<Vec<Vec<u8>>>,
    /// B's orders-p: what A must end with.
    after: Vec<Vec<Vec<u8>>>,
    /// The leading batches A and B share: what the failback keeps.
    common: Vec<usize>,
    replicas: u32,
}

/// A's orders partitions, 0 to 2.
const ORDERS_PARTITIONS: i32 = 3;

fn orders_bytes(driver: &NodeDriver) -> Vec<Vec<Vec<u8>>> {
    (0..ORDERS_PARTITIONS)
        .map(|p| leader_bytes(driver, &PartitionKey::new(ORDERS, p)))
        .collect()
}

/// Produces one plain batch of each of `records` to `orders-<partition>` of the node serving at
/// `address`.
fn write(address: &str, partition: i32, records: &[i64]) {
    let mut conn =
        Connection::connect(address, Duration::from_secs(2), Duration::from_secs(5)).unwrap();
    for &n in records {
        let (code, _) = produce(&mut conn, partition, &client_batch(n, -1, 0));
        assert_eq!(code, 0, "orders-{partition}");
    }
}

impl Failback {
    /// A (`replicas` replicas) mirrors orders of a fake Kafka cluster and fails over; B
    /// mirrors A over the wire; A takes writes B never copies (orders-0: two batches, orders-2:
    /// one); B fails over and takes writes of its own (three batches a partition); B serves.
    fn new(dir: &Path, replicas: u32) -> Failback {
        let (a_root, b_root) = (dir.join("base").join("a"), dir.join("base").join("b"));
        let fake = fixture::fake();
        let mut clock = WallClock(Instant::now());
        let mut meta = NodeMeta::new(Some(fake.address(1)), STATE_PARTITIONS);
        meta.replicas = replicas;
        let dest = NodeDest::create(&a_root, meta).unwrap();
        let source = fixture::source(&fake, &["orders"]);
        let mut a = NodeDriver::from_dest(dest, Some(source), fixture::options()).unwrap();
        let results = a
            .add_topics(
                &fixture::east(),
                &[("orders".into(), ORDERS, ORDERS_PARTITIONS)],
                0,
            )
            .unwrap();
        assert!(results.values().all(Result::is_ok), "{results:?}");
        a.run(&mut clock, NodeUntil::CaughtUp, &mut |_, _| {})
            .unwrap();
        fail_over(&mut a, &mut clock);
        let a_served = Running::start(a);

        let (mut b, _) = mirror_of_a(&b_root, &a_served.address, &a_root);
        b.run(&mut clock, NodeUntil::CaughtUp, &mut |_, _| {})
            .unwrap();
        write(&a_served.address, 0, &[3, 2]);
        write(&a_served.address, 2, &[4]);
        let a = unserved(a_served);
        let before = orders_bytes(&a);
        a.close().unwrap();

        fail_over(&mut b, &mut clock);
        let b_served = Running::start(b);
        for p in 0..ORDERS_PARTITIONS {
            write(&b_served.address, p, &[2, 1, 3]);
        }
        let b = unserved(b_served);
        let after = orders_bytes(&b);
        let common: Vec<usize> = before
            .iter()
            .zip(&after)
            .map(|(a, b)| a.iter().zip(b).take_while(|(x, y)| x == y).count())
            .collect();
        // What the failback cuts: A's writes; what it copies: B's reset and B's writes.
        let cut: Vec<usize> = before
            .iter()
            .zip(&common)
            .map(|(a, c)| a.len() - c)
            .collect();
        let copied: Vec<usize> = after
            .iter()
            .zip(&common)
            .map(|(b, c)| b.len() - c)
            .collect();
        assert_eq!((cut, copied), (vec![2, 0, 1], vec![4, 4, 4]));
        Failback {
            b: Some(Running::start(b)),
            a_base: a_root,
            a_mirror: MirrorName::new(node_cluster_id(&b_root, 0)).unwrap(),
            before,
            after,
            common,
            replicas,
        }
    }

    fn b_address(&self) -> &str {
        &self.b.as_ref().unwrap().address
    }

    /// A fresh copy of A's directory under `dir/label/a`.
    fn copy_of_a(&self, dir: &Path, label: &str) -> PathBuf {
        let root = dir.join(label).join("a");
        copy_dir(&self.a_base, &root);
        root
    }

    /// `kmirror mirror --failback --yes --topics orders` from B on the copy of A at `root`,
    /// until caught up or halted after effect `halt`. Returns the driver and whether it halted.
    fn fail_back(&self, root: &Path, halt: Option<u64>, flush: FlushPolicy) -> (NodeDriver, bool) {
        let options = NodeDriverOptions {
            max_fetch_batches: 1,
            flush,
            halt_after_effects: halt,
            ..NodeDriverOptions::default()
        };
        let source = b_source(self.b_address());
        let mut driver = NodeDriver::open(root, Some(source), options).unwrap();
        let orders = [("orders".to_owned(), ORDERS, ORDERS_PARTITIONS)];
        let results = driver.add_topics(&self.a_mirror, &orders, 0).unwrap();
        assert!(results.values().all(Result::is_ok), "{results:?}");
        let halted = match driver.run(
            &mut ManualClock::default(),
            NodeUntil::CaughtUp,
            &mut |_, _| {},
        ) {
            Ok(_) => false,
            Err(NodeError::Halted { .. }) => true,
            Err(e) => panic!("the failback failed: {e}"),
        };
        (driver, halted)
    }

    /// After a kill: `expected` says which `__mirror_state` records the reopened A replays;
    /// each orders partition keeps the history it shares with B and is its log before the
    /// failback or a prefix of B's, every follower a prefix of one of those; a log the
    /// failback changed is PREPARING or MIRRORING in B's mirror; nothing is writable but a
    /// STOPPED partition.
    fn check_after_kill(&self, root: &Path, expected: &Expected, what: &str) -> Window {
        let mut window = Window::default();
        let driver = NodeDriver::open(root, None, options(None))
            .unwrap_or_else(|e| panic!("{what}: A does not reopen: {e}"));
        expected.check(&acknowledged(&driver), what);
        let desired = driver.dest().meta().topics["orders"]
            .desired("orders")
            .unwrap();
        for p in 0..ORDERS_PARTITIONS {
            let key = PartitionKey::new(ORDERS, p);
            let (before, after, common) = (
                &self.before[p as usize],
                &self.after[p as usize],
                self.common[p as usize],
            );
            let got = leader_bytes(&driver, &key);
            assert!(
                got.len() >= common && got[..common] == after[..common],
                "{what}: orders-{p} lost history it shares with B"
            );
            let untouched = got == *before;
            assert!(
                untouched || after.starts_with(&got),
                "{what}: orders-{p} is neither A's log before the failback nor a prefix of B's"
            );
            if !untouched && got.len() == common && common < before.len() {
                window.cut_not_copied = true;
            } else if !untouched && got.len() > common && got.len() < after.len() {
                window.partly_copied = true;
            }
            for f in driver.followers(&key) {
                let copy = bytes_of(&f.log);
                assert!(
                    before.starts_with(&copy) || after.starts_with(&copy),
                    "{what}: orders-{p}, follower {}: neither a prefix of A's log before nor \
                     of B's",
                    f.id
                );
            }
            let state = driver.persisted_state(&key);
            match &desired {
                DesiredState::Stop(_) => {
                    assert!(untouched, "{what}: orders-{p} changed before the failback");
                    assert_eq!(state, MirrorState::Stopped, "{what}: orders-{p}");
                }
                DesiredState::Mirror(m) if *m == self.a_mirror => {
                    assert!(
                        matches!(
                            state,
                            MirrorState::Unknown | MirrorState::Preparing | MirrorState::Mirroring
                        ),
                        "{what}: orders-{p} {state}"
                    );
                    assert!(
                        untouched || state != MirrorState::Unknown,
                        "{what}: orders-{p} truncated before PREPARING was persisted"
                    );
                }
                other => panic!("{what}: orders is {other:?}"),
            }
            assert!(
                !driver.writable(&key) || state == MirrorState::Stopped,
                "{what}: orders-{p} writable in {state}"
            );
        }
        drop(driver); // as a crash: the restart recovers again
        window
    }

    /// After the restart: every orders partition MIRRORING in B's mirror, read-only, byte for
    /// byte B's log on every replica; A closes, verifies clean, and is exactly the uncrashed
    /// failback's result.
    fn check_converged(&self, driver: NodeDriver, root: &Path, uncrashed: &Snapshot, what: &str) {
        for p in 0..ORDERS_PARTITIONS {
            let key = PartitionKey::new(ORDERS, p);
            assert!(
                leader_bytes(&driver, &key) == self.after[p as usize],
                "{what}: orders-{p} is not B's log"
            );
            let followers = driver.followers(&key);
            assert_eq!(followers.len(), self.replicas as usize - 1, "{what}");
            for f in followers {
                assert!(
                    bytes_of(&f.log) == self.after[p as usize],
                    "{what}: orders-{p}, follower {} is not B's log",
                    f.id
                );
            }
            let record = driver
                .persisted_record(&key.in_mirror(self.a_mirror.clone()))
                .unwrap_or_else(|| panic!("{what}: orders-{p} has no state in B's mirror"));
            assert_eq!(record.state, MirrorState::Mirroring, "{what}: orders-{p}");
            assert!(!driver.writable(&key), "{what}: orders-{p} writable");
        }
        driver.close().unwrap();
        verify_clean(root, what);
        Snapshot::of(root, &[("orders", ORDERS, ORDERS_PARTITIONS)]).assert_is(uncrashed, what);
    }
}

/// Where a failback's kill left A's orders partitions.
#[derive(Clone, Copy, Default, Debug)]
struct Window {
    /// A partition cut to what it shares with B, nothing of B's copied yet.
    cut_not_copied: bool,
    /// A partition holding part of what B has after the shared history.
    partly_copied: bool,
}

/// A source reading orders from the node serving at `address`, one Fetch in flight, not
/// waiting for data: every run of the same failback fetches the same way.
fn b_source(address: &str) -> SourceCluster {
    let options = SourceClusterOptions {
        connect_timeout: Duration::from_secs(2),
        request_timeout: Duration::from_secs(5),
        fetch_max_wait_ms: 0,
        fetches_in_flight: std::num::NonZeroUsize::new(1),
        ..SourceClusterOptions::default()
    };
    SourceCluster::new(
        address,
        TopicSelection::names(&["orders"]).unwrap(),
        options,
    )
}

/// Counts of the failback sweeps.
#[derive(Default, Debug)]
struct SweepTally {
    kills: usize,
    torn_state_writes: usize,
    machine_crashes: usize,
    tails_cut: usize,
    /// Kills that left a partition cut and nothing copied yet.
    cut_not_copied: usize,
    /// Kills that left a partition partly copied.
    partly_copied: usize,
}

impl SweepTally {
    fn add(&mut self, window: Window) {
        self.cut_not_copied += usize::from(window.cut_not_copied);
        self.partly_copied += usize::from(window.partly_copied);
    }
}

/// A kill after every effect of A's failback from B, with `replicas` replicas on A and
/// `flush`; cut points seeded with `seed`.
fn failback_sweep(replicas: u32, flush: FlushPolicy, seed: u64, tally: &mut SweepTally) {
    let tmp = scratch();
    let world = Failback::new(tmp.path(), replicas);
    let label = format!("failback ({replicas} replica(s), --flush {flush})");

    let reference = world.copy_of_a(tmp.path(), "reference");
    let (driver, halted) = world.fail_back(&reference, None, flush);
    assert!(!halted);
    let effects = driver.effects();
    driver.close().unwrap();
    let uncrashed = Snapshot::of(&reference, &[("orders", ORDERS, ORDERS_PARTITIONS)]);
    let (driver, _) = world.fail_back(&reference, None, flush); // a repeat changes nothing
    world.check_converged(driver, &reference, &uncrashed, &label);

    let mut rng = Rng(seed);
    let mut kills = 0;
    for n in 1.. {
        let root = world.copy_of_a(tmp.path(), &format!("kill-{n}"));
        let (driver, halted) = world.fail_back(&root, Some(n), flush);
        if !halted {
            assert_eq!(
                n,
                effects + 1,
                "{label}: the uncrashed failback ran {effects} effects"
            );
            drop(driver);
            fs::remove_dir_all(root.parent().unwrap()).unwrap();
            break;
        }
        kills += 1;
        let what = format!("{label}, kill after effect {n}");
        let torn = driver.last_state_write();
        let floors = fsynced_floors(&driver);
        let acked = acknowledged(&driver);
        check_stopped_after_committed_reset(&driver, &acked, &what);
        drop(driver); // SIGKILL
        let history = history_of(&root);

        // A machine crash, on a copy (named `a` too: the cluster id B knows A by).
        let copy = tmp.path().join("machine-crash").join("a");
        copy_dir(&root, &copy);
        tally.tails_cut += machine_crash(&copy, &floors, &mut rng);
        tally.machine_crashes += 1;
        let crashed = format!("{what}, machine crash");
        let exact = Expected {
            acked: &acked,
            history: &history,
            allowance: Allowance::Exact,
        };
        tally.add(world.check_after_kill(&copy, &exact, &crashed));
        let (driver, _) = world.fail_back(&copy, None, flush);
        world.check_converged(driver, &copy, &uncrashed, &crashed);
        fs::remove_dir_all(copy.parent().unwrap()).unwrap();

        // The kill itself, inside its last __mirror_state write when it made one.
        let allowance = match torn {
            Some(k) => {
                tear_last_state_write(&root, k);
                tally.torn_state_writes += 1;
                Allowance::LastTorn(k)
            }
            None => Allowance::Exact,
        };
        let expected = Expected {
            acked: &acked,
            history: &history,
            allowance,
        };
        tally.add(world.check_after_kill(&root, &expected, &what));
        let (driver, _) = world.fail_back(&root, None, flush);
        world.check_converged(driver, &root, &uncrashed, &what);
        fs::remove_dir_all(root.parent().unwrap()).unwrap();
    }
    assert!(kills >= 20, "{label}: only {kills} kill points");
    tally.kills += kills;
    let b = world.b.unwrap().stop();
    b.close().unwrap();
}

/// A kill after every effect of a failback (see the [module documentation](self)): into a node
/// with one replica, into one with two followers (the truncation waits for them), and with
/// `--flush every-append`.
#[test]
fn a_kill_after_every_effect_of_a_failback() {
    let started = Instant::now();
    let mut tally = SweepTally::default();
    failback_sweep(1, FlushPolicy::Kafka, 0x5eed_0310, &mut tally);
    failback_sweep(3, FlushPolicy::Kafka, 0x5eed_0311, &mut tally);
    failback_sweep(1, FlushPolicy::EveryAppend, 0x5eed_0312, &mut tally);
    crash_counts::report(
        "node crash test, failback",
        tally.kills as u64,
        tally.torn_state_writes as u64,
        &format!(
            "{} machine crashes ({} partition tails cut or torn); {} reopened with a partition cut \
             and nothing copied, {} partly copied; every restart converged to the uncrashed \
             failback, in {:.1} s",
            tally.machine_crashes,
            tally.tails_cut,
            tally.cut_not_copied,
            tally.partly_copied,
            started.elapsed().as_secs_f64()
        ),
    );
    assert!(tally.kills >= 100, "{tally:?}");
    assert!(tally.torn_state_writes >= 8, "{tally:?}");
    assert!(tally.tails_cut >= 30, "{tally:?}");
    assert!(tally.cut_not_copied >= 3, "{tally:?}");
    assert!(tally.partly_copied >= 10, "{tally:?}");
}
