//! Idle fetch requests per second per fetcher: how many Fetch requests a node
//! destination whose partitions are all caught up sends each source broker, measured on the
//! wire rather than argued.
//!
//! The source is the harness's fake multi-broker cluster (`kmirror_harness::wire::fake_broker`,
//! feature `testkit`) on loopback: 3 brokers, `TOPICS` x 10 empty partitions (leaders spread
//! over the brokers), fetch sessions on (KIP-227) and **long polling** on: like Kafka, a broker
//! holds a Fetch with nothing new up to its `max_wait_ms` (the client's default,
//! `SourceClusterOptions::fetch_max_wait_ms`, 100 ms). Untimed, a node destination on
//! `/dev/shm` when it exists (the state writes' fsyncs are not what is measured) brings every
//! partition to MIRRORING; then for `WINDOW` of wall time:
//!
//! - `node`: the [`NodeDriver`] follows the source as `kmirror mirror` does (its `run` loop
//!   with `NodeUntil::Forever`: a step, and the idle sleep of `--poll-ms` 500 only when nothing
//!   was sent), one fetcher (`num.replica.fetchers` 1, the default);
//! - `client` (baseline, same run, same partitions at the same offsets): a bare loop of
//!   [`SourceCluster::fetch`], the wire client alone, as a consumer polling in a loop would.
//!
//! For each: Fetch requests per second per broker (one fetcher: per fetcher), partition
//! entries per request (fetch sessions: an idle incremental Fetch carries none), and the same
//! counted by the fake brokers. Without coalescing (a request per partition) the node would
//! send the per-broker rate times the partitions each broker leads.
//!
//! `cargo bench -p kmirror-benches --bench node_idle` (about a minute; `NODE_IDLE_TOPICS` to
//! change the 500 topics, `NODE_IDLE_WINDOW_S` the 5-second windows). Each partition holds two open
//! files (its segment and index), so 10,000 partitions need `ulimit -n` above 20,000.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use kafka_protocol::messages::ApiKey;
use kmirror_harness::file_log::FlushPolicy;
use kmirror_harness::node::{NodeDest, NodeDriver, NodeDriverOptions, NodeIdle, NodeMeta};
use kmirror_harness::wire::fake_broker::{FakeCluster, FakePartition, FakeTopic};
use kmirror_harness::wire::source_cluster::{CurrentLeaderEpoch, PartitionFetchRequest};
use kmirror_harness::wire::{SourceCluster, SourceClusterOptions, TopicSelection};
use kmirror_kernel::config::FetchIsolation;
use kmirror_kernel::state::MirrorState;
use kmirror_kernel::types::{MirrorName, TopicId};

const PER_TOPIC: i32 = 10;
const BROKERS: i32 = 3;

fn topic_name(t: u64) -> String {
    format!("t{t:04}")
}

fn topic_id(t: u64) -> TopicId {
    TopicId::from_u64(0x6964_0000 + t)
}

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn fake(topics: u64) -> FakeCluster {
    let fake = FakeCluster::start(
        BROKERS,
        (0..topics)
            .map(|t| FakeTopic {
                name: topic_name(t),
                id: topic_id(t),
                partitions: (0..PER_TOPIC)
                    .map(|p| FakePartition::with_batches(1 + (t as i32 + p) % BROKERS, 1, 0))
                    .collect(),
            })
            .collect(),
    );
    fake.state().fetch_sessions = true;
    fake
}

fn source(fake: &FakeCluster, topics: u64, max_wait_ms: i32) -> SourceCluster {
    let names: Vec<String> = (0..topics).map(topic_name).collect();
    let options = SourceClusterOptions {
        fetch_max_wait_ms: max_wait_ms,
        ..SourceClusterOptions::default()
    };
    SourceCluster::new(
        &fake.address(1),
        TopicSelection::names(&names).expect("names"),
        options,
    )
}

/// A node destination in `root` with every partition MIRRORING and caught up.
fn mirroring(fake: &FakeCluster, topics: u64, root: &std::path::Path) -> NodeDriver {
    let dest = NodeDest::create(root, NodeMeta::new(Some(fake.address(1)), 8)).expect("dest");
    let options = NodeDriverOptions {
        flush: FlushPolicy::Kafka,
        ..NodeDriverOptions::default()
    };
    let mut driver =
        NodeDriver::from_dest(dest, Some(source(fake, topics, 0)), options).expect("driver");
    let wanted: Vec<(String, TopicId, i32)> = (0..topics)
        .map(|t| (topic_name(t), topic_id(t), PER_TOPIC))
        .collect();
    let added = driver
        .add_topics(&MirrorName::new("east").expect("name"), &wanted, 0)
        .expect("added");
    assert!(added.values().all(Result::is_ok), "{added:?}");
    let mut now = 0;
    while !driver.all_caught_up() {
        now += 1;
        driver.run_once(now).expect("runs");
    }
    assert!(driver
        .node()
        .partitions()
        .all(|(_, p)| p.state() == MirrorState::Mirroring));
    driver
}

/// What one window counted.
struct Figures {
    seconds: f64,
    /// Fetch requests the fake brokers received, per broker.
    per_broker: Vec<usize>,
    /// Partition entries in those requests.
    entries: usize,
    /// Those requests that carried no partition (incremental fetch-session requests with
    /// nothing changed).
    empty: usize,
}

impl Figures {
    fn rate(&self) -> f64 {
        self.per_broker.iter().sum::<usize>() as f64 / self.per_broker.len() as f64 / self.seconds
    }

    fn print(&self, name: &str) {
        let requests: usize = self.per_broker.iter().sum();
        println!(
            "node_idle/{name}: {:.2} Fetch requests/s per broker (per fetcher) over {:.1} s; per \
             broker {:?}; {} of {requests} requests carried no partition ({} partition entries \
             in all)",
            self.rate(),
            self.seconds,
            self.per_broker,
            self.empty,
            self.entries
        );
    }
}

/// Counts the Fetch requests the fake receives while `step` runs for `window`.
fn count(fake: &FakeCluster, window: Duration, mut step: impl FnMut()) -> Figures {
    let before: Vec<usize> = {
        let state = fake.state();
        (1..=BROKERS)
            .map(|b| state.count(b, ApiKey::Fetch))
            .collect()
    };
    let entries_before = entries(fake);
    let seen_before = fake.state().requests.len();
    let start = Instant::now();
    while start.elapsed() < window {
        step();
    }
    let seconds = start.elapsed().as_secs_f64();
    let state = fake.state();
    let per_broker = (1..=BROKERS)
        .zip(&before)
        .map(|(b, n)| state.count(b, ApiKey::Fetch) - n)
        .collect();
    drop(state);
    let empty = fake.state().requests[seen_before..]
        .iter()
        .filter(|(_, k, n)| *k == ApiKey::Fetch as i16 && *n == 0)
        .count();
    Figures {
        seconds,
        per_broker,
        entries: entries(fake) - entries_before,
        empty,
    }
}

fn entries(fake: &FakeCluster) -> usize {
    fake.state()
        .requests
        .iter()
        .filter(|(_, k, _)| *k == ApiKey::Fetch as i16)
        .map(|(_, _, n)| n)
        .sum()
}

fn measure(topics: u64, window: Duration, parent: &std::path::Path) {
    let partitions = topics * PER_TOPIC as u64;
    let fake = fake(topics);
    let root = parent.join(format!("idle-{topics}"));
    let setup = Instant::now();
    let mut driver = mirroring(&fake, topics, &root);
    println!(
        "node_idle: {partitions} partitions ({topics} topics x {PER_TOPIC}, {BROKERS} brokers) \
         MIRRORING and caught up in {:.1?} (untimed)",
        setup.elapsed()
    );
    fake.state().long_poll = true;

    // The node, following as `kmirror mirror` does (NodeDriver::run with NodeUntil::Forever).
    driver.set_source(Some(source(
        &fake,
        topics,
        SourceClusterOptions::default().fetch_max_wait_ms,
    )));
    let clock = Instant::now();
    let poll_ms = 500;
    let node = count(&fake, window, || {
        let now = 10_000_000 + clock.elapsed().as_millis() as i64;
        match driver.run_once(now).expect("runs") {
            None => {}
            Some(NodeIdle::WaitingForRetry { due_ms }) => std::thread::sleep(
                Duration::from_millis((due_ms.min(now + poll_ms) - now).max(1) as u64),
            ),
            Some(_) => std::thread::sleep(Duration::from_millis(poll_ms as u64)),
        }
    });
    node.print(&format!("node_{partitions}"));
    // Still idle: every partition MIRRORING, nothing fetched, no error.
    assert_eq!(driver.stats().bytes, 0, "nothing to mirror");
    assert!(driver
        .status()
        .partitions
        .iter()
        .all(|p| p.state == "MIRRORING" && p.error.is_none()));

    // Baseline: the wire client alone over the same partitions, at the same (empty) offsets.
    let mut client = source(
        &fake,
        topics,
        SourceClusterOptions::default().fetch_max_wait_ms,
    );
    client.metadata().expect("metadata");
    let requests: Vec<PartitionFetchRequest> = (0..topics)
        .flat_map(|t| {
            (0..PER_TOPIC).map(move |p| PartitionFetchRequest {
                topic_id: topic_id(t),
                partition: p,
                fetch_offset: 0,
                last_fetched_epoch: None,
                current_leader_epoch: CurrentLeaderEpoch::FromMetadata,
                isolation: FetchIsolation::ReadCommitted,
                max_batches: 100,
            })
        })
        .collect();
    let baseline = count(&fake, window, || {
        for r in client.fetch(&requests) {
            r.outcome.expect("fetched");
        }
    });
    baseline.print(&format!("client_{partitions}"));
    println!(
        "node_idle/{partitions}: node / client = {:.2}; without coalescing the node would send \
         about {:.0} requests/s per broker ({} partitions a broker)",
        node.rate() / baseline.rate(),
        node.rate() * partitions as f64 / BROKERS as f64,
        partitions / BROKERS as u64
    );
    driver.close().expect("closed");
    let _ = std::fs::remove_dir_all(&root);
}

fn main() {
    // `cargo bench` passes `--bench`; a `cargo test` of the benches passes nothing: run small.
    let benching = std::env::args().any(|a| a == "--bench");
    let window = Duration::from_secs(env_or("NODE_IDLE_WINDOW_S", if benching { 5 } else { 1 }));
    let shm = PathBuf::from("/dev/shm");
    let parent = if shm.is_dir() {
        tempfile::tempdir_in(&shm)
    } else {
        tempfile::tempdir()
    }
    .expect("temp dir");
    let sizes: Vec<u64> = if benching {
        vec![10, env_or("NODE_IDLE_TOPICS", 500)]
    } else {
        vec![2]
    };
    for topics in sizes {
        measure(topics, window, parent.path());
    }
}
