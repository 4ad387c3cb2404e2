//! A failback of 1,000 partitions against a full copy of the same data, in the same run: node A,
//! the old primary, fails back from node B over Kafka's wire (`kmirror mirror --failback --yes
//! --until-caught-up`), and moves only the suffix B never had; a new destination mirroring the
//! same topics from B (the baseline) moves everything.
//!
//! Set up once, untimed, by the loop of `docs/failback.md` itself, on real files:
//!
//! 1. A fake Kafka source (`support/fake_source.rs`, one broker) holds 100 topics `fb.000` to
//!    `fb.099` of 10 partitions, each partition the same [`BATCHES`] batches of [`RECORDS`]
//!    records with [`VALUE_BYTES`]-byte values (about 1 MiB a partition, 1 GiB in all). A
//!    `NodeDriver` mirrors it into node A (`support/node_setup.rs`), then `kmirror stop --dest A
//!    --topics 'fb.*'` fails A over.
//! 2. A is served on loopback (`support/served.rs`, as `kmirror serve` runs it) and `kmirror
//!    mirror --source-bootstrap A --topics 'fb.*' --dest B --until-caught-up` copies it into
//!    node B, in the mirror named after A's cluster id (`support/kmirror_cli.rs`).
//! 3. A's divergent suffix: one Produce to the serving A appends [`SUFFIX`] records to every
//!    partition, after B's last fetch. A is closed: it is the template of every failback.
//! 4. `kmirror stop --dest B --topics 'fb.*'` fails B over (B records its LME of A), and B is
//!    served on loopback for the rest of the run.
//!
//! Timed, each sample on its own destination, after one `syncfs` (untimed) has put every
//! earlier write on disk, so that a sample pays for no other's writeback:
//!
//! - `failback/failback/1000`: a fresh copy of A (copied untimed, under a directory of A's own
//!   name, since a node's cluster id, by which it asks B for B's mirror of it, is its
//!   directory's name) opened, its topics added to the mirror named after B's cluster id, and
//!   run until caught up, then closed: what `kmirror mirror --source-bootstrap B --topics
//!   'fb.*' --dest A --failback --yes --until-caught-up` runs after its preview. Each partition
//!   asks B for the LME (`ReadMirrorStates`), truncates the suffix and copies what B has beyond
//!   it (B's `MIRROR_PID_RESET`).
//! - `failback/full_copy/1000` (baseline): a new destination created, the same topics added to
//!   the same mirror, run until caught up, closed.
//!
//! Printed per mode, from its first sample's counters: the offsets and record
//! bytes fetched from B (the node's own counters of what it appended from the source), the
//! offsets and log bytes truncated (the log ends and the partitions' segment sizes on disk before
//! and after, less what was fetched), the bytes the destination's logs hold after, and the
//! durability calls. The bench asserts that every failback truncates exactly the [`SUFFIX`]
//! records of each partition and a full copy none, so it cannot time a failback that copies
//! everything again.
//!
//! Reproduce: `cargo bench -p kmirror-benches --bench failback` (about ten minutes, the setup
//! and the untimed copies included; some 3 GiB of disk at a time). `kmirror stop` prints a
//! status line per partition during the setup.

#[path = "support/bench_main.rs"]
mod bench_main;
#[path = "support/copy_dir.rs"]
mod copy_dir;
#[path = "support/fake_source.rs"]
mod fake_source;
#[path = "support/kmirror_cli.rs"]
mod kmirror_cli;
// `mirroring_dest` and `mirror_backlog` are the mirroring benches'.
#[allow(dead_code)]
#[path = "support/node_setup.rs"]
mod node_setup;
#[path = "support/served.rs"]
mod served;

use std::fs;
use std::path::Path;
use std::time::{Duration, Instant};

use bytes::Bytes;
use copy_dir::copy_dir;
use criterion::{criterion_group, Criterion, SamplingMode};
use fake_source::{back_to_back, uniform_topics, FakeSource, FakeTopic};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{ProduceRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use kmirror::log_cli::SystemClock;
use kmirror_cli::{kmirror, kmirror_mirror};
use kmirror_harness::clock::Clock;
use kmirror_harness::durability::{self, FsBarrier};
use kmirror_harness::node::{
    NodeDest, NodeDriver, NodeDriverOptions, NodeIdle, NodeMeta, NodeUntil,
};
use kmirror_harness::record_batch::{RawBatch, Record};
use kmirror_harness::wire::{Connection, SourceCluster, SourceClusterOptions, TopicSelection};
use kmirror_kernel::batch::BatchHeader;
use kmirror_kernel::log::LogView;
use kmirror_kernel::node::{PartitionKey, DEFAULT_MIRROR_STATE_PARTITIONS};
use kmirror_kernel::types::{MirrorName, TopicId};
use served::Served;

/// Topics.
const TOPICS: u64 = 100;
/// Partitions per topic.
const PER_TOPIC: i32 = 10;
/// The partitions.
const PARTITIONS: i64 = TOPICS as i64 * PER_TOPIC as i64;
/// Batches per partition of the common prefix.
const BATCHES: i64 = 16;
/// Records per batch.
const RECORDS: i64 = 600;
/// The records' value size.
const VALUE_BYTES: usize = 100;
/// Records A's producers write to each partition after B's last fetch: A's divergent suffix.
const SUFFIX: i64 = 3;
/// The topics, as `--topics` selects them.
const SELECTION: &str = "fb.*";

/// Topic `t`'s name and id.
fn topic(t: u64) -> (String, TopicId) {
    (format!("fb.{t:03}"), TopicId::from_u64(0x6662_0000 + t))
}

/// The source: every partition a handle on the same [`BATCHES`] batches (epoch 0).
fn source_topics() -> Vec<FakeTopic> {
    let batches: Vec<RawBatch> = (0..BATCHES)
        .map(|b| {
            let header = BatchHeader::plain(b * RECORDS, (b + 1) * RECORDS - 1, 0);
            let records: Vec<Record> = (0..RECORDS as i32)
                .map(|delta| Record {
                    attributes: 0,
                    timestamp_delta: 0,
                    offset_delta: delta,
                    key: Some(
                        (header.base_offset + i64::from(delta))
                            .to_string()
                            .into_bytes(),
                    ),
                    value: Some(vec![b'v'; VALUE_BYTES]),
                    headers: Vec::new(),
                })
                .collect();
            RawBatch::encode(&header, 1_700_000_000_000, &records).expect("batch")
        })
        .collect();
    let (one, ends) = back_to_back(&batches);
    let one = Bytes::from(one);
    uniform_topics(TOPICS, PER_TOPIC, 1, topic, &ends, || one.clone())
}

/// The topics as a mirror adds them: name, id, partitions.
fn wanted() -> Vec<(String, TopicId, i32)> {
    (0..TOPICS)
        .map(|t| {
            let (name, id) = topic(t);
            (name, id, PER_TOPIC)
        })
        .collect()
}

/// Appends [`SUFFIX`] records to every partition of the node serving at `address`, in one
/// Produce (as a client writes them: offsets from 0, no leader epoch, no producer id).
fn produce_suffix(address: &str) {
    let header = BatchHeader {
        base_offset: 0,
        last_offset: SUFFIX - 1,
        partition_leader_epoch: -1,
        producer_id: -1,
        producer_epoch: -1,
        base_sequence: -1,
        is_transactional: false,
        control: None,
    };
    let batch = RawBatch::synthesize(&header, 1_700_000_000_000).expect("batch");
    let records = Bytes::copy_from_slice(batch.bytes());
    let request = ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(30_000)
        .with_topic_data(
            (0..TOPICS)
                .map(|t| {
                    TopicProduceData::default()
                        .with_name(TopicName(StrBytes::from_string(topic(t).0)))
                        .with_partition_data(
                            (0..PER_TOPIC)
                                .map(|p| {
                                    PartitionProduceData::default()
                                        .with_index(p)
                                        .with_records(Some(records.clone()))
                                })
                                .collect(),
                        )
                })
                .collect(),
        );
    let mut conn = Connection::connect(address, Duration::from_secs(5), Duration::from_secs(60))
        .expect("connected to A");
    let response = conn.send("Produce", &request, 9).expect("produced");
    let codes: Vec<i16> = response
        .responses
        .iter()
        .flat_map(|t| t.partition_responses.iter().map(|p| p.error_code))
        .collect();
    assert_eq!(codes.len(), PARTITIONS as usize);
    assert!(codes.iter().all(|c| *c == 0), "{codes:?}");
}

/// Bytes of the topic partitions' segments (`*.log`) under `root/data`; 0 without a `data`.
fn log_bytes(root: &Path) -> u64 {
    let Ok(dirs) = fs::read_dir(root.join("data")) else {
        return 0;
    };
    dirs.map(|e| e.expect("entry").path())
        .filter(|dir| {
            dir.is_dir()
                && !dir
                    .file_name()
                    .and_then(|n| n.to_str())
                    .unwrap_or("")
                    .starts_with("__")
        })
        .flat_map(|dir| fs::read_dir(dir).expect("partition dir"))
        .map(|e| e.expect("entry").path())
        .filter(|f| f.extension().is_some_and(|e| e == "log"))
        .map(|f| f.metadata().expect("size").len())
        .sum()
}

/// The sum of the log end offsets of the topics' partitions.
fn log_ends(driver: &NodeDriver) -> i64 {
    (0..TOPICS)
        .flat_map(|t| (0..PER_TOPIC).map(move |p| PartitionKey::new(topic(t).1, p)))
        .map(|key| driver.log(&key).map_or(0, LogView::log_end_offset))
        .sum()
}

/// Node B, serving, with the name of the mirror A (or a new destination) copies it in.
struct NodeB {
    /// B, served on loopback.
    served: Served,
    /// The mirror named after B's cluster id.
    mirror: MirrorName,
}

/// How a destination mirrors from B.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// The old primary A fails back: opened, its failed-over topics added to B's mirror.
    Failback,
    /// A new destination copies everything.
    FullCopy,
}

/// What one mirror from B did.
struct Moved {
    /// From opening (or creating) the destination to its close.
    time: Duration,
    /// Offsets appended from B.
    fetched_offsets: u64,
    /// Record bytes appended from B.
    fetched_bytes: u64,
    /// Offsets the destination's logs lost.
    truncated_offsets: i64,
    /// Segment bytes the destination's logs lost.
    truncated_bytes: i64,
    /// Segment bytes the logs hold at the end.
    log_bytes: u64,
    /// Durability calls.
    syncs: u64,
}

/// Mirrors the topics from `b` into the destination at `root` (A's copy, or nothing yet) as
/// `mode` says, until caught up; the time from opening to the close, and what moved.
fn mirror_from_b(b: &NodeB, root: &Path, mode: Mode) -> Moved {
    let bytes_before = log_bytes(root);
    let syncs = durability::syncs();
    let start = Instant::now();
    let options = NodeDriverOptions::default();
    let mut driver = match mode {
        Mode::Failback => NodeDriver::open(root, None, options).expect("opened"),
        Mode::FullCopy => {
            let meta = NodeMeta::new(
                Some(b.served.address.clone()),
                DEFAULT_MIRROR_STATE_PARTITIONS,
            );
            let dest = NodeDest::create(root, meta).expect("created");
            NodeDriver::from_dest(dest, None, options).expect("a driver")
        }
    };
    let ends_before = log_ends(&driver);
    let selection = TopicSelection::parse(SELECTION).expect("a selection");
    driver.set_source(Some(SourceCluster::new(
        &b.served.address,
        selection,
        SourceClusterOptions::default(),
    )));
    let mut clock = SystemClock;
    let added = driver
        .add_topics(&b.mirror, &wanted(), clock.now_ms())
        .expect("added");
    assert!(added.values().all(Result::is_ok), "{added:?}");
    let end = driver
        .run(&mut clock, NodeUntil::CaughtUp, &mut |_, _| {})
        .expect("runs");
    assert_eq!(end, NodeIdle::CaughtUp);
    let ends_after = log_ends(&driver);
    let stats = driver.stats();
    driver.close().expect("closed");
    let time = start.elapsed();
    let syncs = durability::syncs() - syncs;
    let bytes_after = log_bytes(root);
    Moved {
        time,
        fetched_offsets: stats.offsets,
        fetched_bytes: stats.bytes,
        truncated_offsets: ends_before - (ends_after - stats.offsets as i64),
        truncated_bytes: bytes_before as i64 - (bytes_after as i64 - stats.bytes as i64),
        log_bytes: bytes_after,
        syncs,
    }
}

/// Builds A's template at `a` and B at `b_root` by the loop (see the module documentation);
/// returns B, serving.
fn set_up(a: &Path, b_root: &Path) -> NodeB {
    let fake = FakeSource::start(1, source_topics());
    fake.set_filled(true);
    let dest = NodeDest::create(a, NodeMeta::new(Some(fake.bootstrap()), 8)).expect("created");
    let source = SourceCluster::new(
        &fake.bootstrap(),
        TopicSelection::parse(SELECTION).expect("a selection"),
        SourceClusterOptions {
            fetch_max_wait_ms: 0,
            ..SourceClusterOptions::default()
        },
    );
    let mut driver =
        NodeDriver::from_dest(dest, Some(source), NodeDriverOptions::default()).expect("driver");
    node_setup::add_until_mirroring(&mut driver, &wanted(), 10);
    driver.close().expect("closed");
    let path = |p: &Path| p.to_str().expect("a UTF-8 path").to_owned();
    kmirror(&["stop", "--dest", &path(a), "--topics", SELECTION, "--quiet"]);
    let served_a = Served::start(a);
    kmirror_mirror(&served_a.address, SELECTION, b_root);
    produce_suffix(&served_a.address);
    drop(served_a);
    kmirror(&[
        "stop",
        "--dest",
        &path(b_root),
        "--topics",
        SELECTION,
        "--quiet",
    ]);
    let served = Served::start(b_root);
    let mut asking = SourceCluster::new(
        &served.address,
        TopicSelection::parse(SELECTION).expect("a selection"),
        SourceClusterOptions::default(),
    );
    let cluster_id = asking
        .metadata()
        .expect("B's metadata")
        .cluster_id
        .clone()
        .expect("a cluster id");
    NodeB {
        served,
        mirror: MirrorName::new(cluster_id.as_str()).expect("a mirror name"),
    }
}

/// `n` bytes in MiB.
fn mib(n: impl Into<f64>) -> f64 {
    n.into() / f64::from(1 << 20)
}

/// Sets the nodes up, then times each mode (see the module documentation).
fn failback(c: &mut Criterion) {
    let work = tempfile::tempdir_in(std::env::temp_dir()).expect("a temp dir");
    let a = work.path().join("a");
    let started = Instant::now();
    let b = set_up(&a, &work.path().join("b"));
    println!(
        "failback: A ({:.1} MiB of logs, {SUFFIX} records of its own per partition) and B set \
         up (untimed) in {:.1?}",
        mib(log_bytes(&a) as f64),
        started.elapsed()
    );
    let barrier = FsBarrier::open(work.path())
        .expect("barrier")
        .expect("syncfs");
    let mut group = c.benchmark_group("failback");
    group.sampling_mode(SamplingMode::Flat);
    group.sample_size(10);
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(30));
    for (name, mode) in [("failback", Mode::Failback), ("full_copy", Mode::FullCopy)] {
        let mut n = 0;
        group.bench_function(format!("{name}/{PARTITIONS}"), |bench| {
            bench.iter_custom(|iters| {
                let mut sum = Duration::ZERO;
                for _ in 0..iters {
                    n += 1;
                    let sample = work.path().join(format!("{name}-{n}"));
                    // A's copy keeps A's directory name, so its cluster id.
                    let root = sample.join("a");
                    if mode == Mode::Failback {
                        copy_dir(&a, &root);
                    }
                    // The copy, and the last sample's writes and removal, on disk before the
                    // clock starts: A's logs were written long before its failback.
                    barrier.sync().expect("syncfs");
                    let moved = mirror_from_b(&b, &root, mode);
                    let expected = if mode == Mode::Failback {
                        SUFFIX * PARTITIONS
                    } else {
                        0
                    };
                    assert_eq!(moved.truncated_offsets, expected, "offsets truncated");
                    if n == 1 {
                        println!(
                            "failback: {name}: {} offsets ({} bytes of records, {:.3} MiB) \
                             fetched, {} offsets ({} bytes) truncated, {:.1} MiB of logs \
                             after, {} durability calls",
                            moved.fetched_offsets,
                            moved.fetched_bytes,
                            mib(moved.fetched_bytes as f64),
                            moved.truncated_offsets,
                            moved.truncated_bytes,
                            mib(moved.log_bytes as f64),
                            moved.syncs
                        );
                    }
                    sum += moved.time;
                    fs::remove_dir_all(&sample).expect("removed");
                }
                sum
            })
        });
    }
    group.finish();
    drop(b);
}

criterion_group!(benches, failback);

/// The benches, under `cargo bench` only.
fn main() {
    bench_main::run("", benches);
}
