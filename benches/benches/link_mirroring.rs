//! Mirroring across a link with a round trip: bytes per second the [`NodeDriver`] mirrors from a
//! fake Kafka source (`support/fake_source.rs`) of 60 partitions (10 topics x 6; the group
//! `link_mirroring`) or 1,000 (100 topics x 10; `link_mirroring_1000`) behind a
//! simulated link (`kmirror_testsupport::link`: a loopback proxy delaying each direction by half
//! the round trip, no bandwidth cap), at round trips of 0, 10 and 50 ms, against the limit of
//! one Fetch in flight per broker: `fetch_max_bytes` (10 MiB) per round trip.
//!
//! Every broker advertises its link's address, so the client stays behind the link for every
//! request. Each partition holds 256 batches of 500 records (11,858 bytes each; 3.0 MB a
//! partition, 182 MB in all; at 1,000 partitions 16 batches each, 190 MB), every partition's leader broker 1 unless `LINK_MIRRORING_BROKERS`
//! says more (the limit is per broker, so one broker shows it at its worst). Each sample builds
//! a fresh destination untimed (on `/dev/shm` when there is one, so that the disk does not hide
//! the link) and brings its partitions to MIRRORING against the empty source; then the source
//! gets its data and the timed part runs: fetch rounds until every partition has everything
//! (the close is not timed: it is the disk's, not the link's). The source's client stays warm
//! across samples, as in a running process (its connections, and the round trip they measured).
//!
//! Variants, per round trip:
//! - `one_fetch_<rtt>ms`: one Fetch in flight per broker (`fetches_in_flight` 1): today's
//!   fetcher, bounded by `fetch_max_bytes` per round trip.
//! - `in_flight_<rtt>ms`: the default number in flight, derived from the measured round trip
//!   (one at 0 ms, two at 10 ms, six at 50 ms).
//!
//! And the group `link_mirroring_capped`, `capped_<cap>MiBps_50ms`: 60 partitions of 1,024
//! batches (four times the data, 694.6 MiB, so that a copy lasts seconds at the cap) with the
//! default number in flight over a 50 ms link whose bandwidth is capped (200 MiB/s unless
//! `LINK_MIRRORING_CAP_MIB` says otherwise; the cap is each broker link's, shared by its
//! connections), to compare with the cap: copying a backlog should fill it.
//!
//! And the group `link_mirroring_follow`, `follow_<rate>MiBps_capped_<cap>MiBps_50ms`: the same
//! 60 partitions over the same capped link, empty at first, while a producer thread makes them
//! grow at half the cap (one batch of every partition at a time, at the times that keep the
//! rate) for [`FOLLOW_PRODUCING`], and the driver follows until it has everything. The time is
//! the whole follow; every [`LAG_EVERY`] the producer thread samples the lag: the bytes the
//! source shows minus the bytes the driver appended (its `bytes` counter, published after every
//! step). Each follow prints the lag's median, 99th percentile and maximum, in bytes and in
//! round trips of data at the producer's rate, and the group their total over the follows with
//! a warm client, against the target of two round trips of data.
//!
//! ```sh
//! cargo bench -p kmirror-benches --bench link_mirroring
//! LINK_MIRRORING_BROKERS=3 cargo bench -p kmirror-benches --bench link_mirroring -- 50ms
//! cargo bench -p kmirror-benches --bench link_mirroring -- follow
//! ```
//!
//! Figures: BENCHMARKS.md, `link_mirroring`.

#[path = "support/bench_main.rs"]
mod bench_main;
// `FakeSource::start` (no link) is the other benches'.
#[allow(dead_code)]
#[path = "support/fake_source.rs"]
mod fake_source;
#[path = "support/node_setup.rs"]
mod node_setup;

use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use criterion::measurement::WallTime;
use criterion::{criterion_group, BenchmarkGroup, Criterion, SamplingMode, Throughput};
use fake_source::{FakePartition, FakeSource, FakeTopic};
use kmirror_harness::file_log::FlushPolicy;
use kmirror_harness::node::{NodeDriver, NodeDriverOptions};
use kmirror_harness::record_batch::RawBatch;
use kmirror_harness::wire::{SourceCluster, SourceClusterOptions, TopicSelection};
use kmirror_kernel::batch::BatchHeader;
use kmirror_kernel::types::TopicId;
use kmirror_testsupport::link::{Link, LinkOptions};

/// Records per batch.
const RECORDS: i64 = 500;

/// A source's shape: its topics, their partitions, each partition's batches.
struct Layout {
    /// The criterion group.
    group: &'static str,
    topics: u64,
    per_topic: i32,
    batches: i64,
}

impl Layout {
    fn partitions(&self) -> usize {
        self.topics as usize * self.per_topic as usize
    }

    fn names(&self) -> Vec<(String, TopicId, i32)> {
        (0..self.topics)
            .map(|t| (topic_name(t), topic_id(t), self.per_topic))
            .collect()
    }
}

/// 60 partitions (10 topics x 6) of 256 batches: 173.7 MiB.
const SIXTY: Layout = Layout {
    group: "link_mirroring",
    topics: 10,
    per_topic: 6,
    batches: 256,
};

/// 60 partitions (10 topics x 6) of 1,024 batches, for the capped link: 694.6 MiB.
const SIXTY_CAPPED: Layout = Layout {
    group: "link_mirroring_capped",
    topics: 10,
    per_topic: 6,
    batches: 1024,
};

/// The capped link's 60 partitions, grown by a producer at half the cap.
const SIXTY_FOLLOW: Layout = Layout {
    group: "link_mirroring_follow",
    ..SIXTY_CAPPED
};

/// How long the producer of `link_mirroring_follow` makes the source grow.
const FOLLOW_PRODUCING: Duration = Duration::from_secs(5);

/// How often the producer of `link_mirroring_follow` raises the source and samples the lag.
const LAG_EVERY: Duration = Duration::from_millis(2);

/// 1,000 partitions (100 topics x 10) of 16 batches: 180.9 MiB.
const THOUSAND: Layout = Layout {
    group: "link_mirroring_1000",
    topics: 100,
    per_topic: 10,
    batches: 16,
};
/// The round trips of the uncapped links, in milliseconds.
const ROUND_TRIPS_MS: [u64; 3] = [0, 10, 50];

/// The round trip of the capped link, in milliseconds.
const CAPPED_ROUND_TRIP_MS: u64 = 50;

/// The capped link's bandwidth in MiB/s: `LINK_MIRRORING_CAP_MIB`, 200 by default.
fn cap_mib() -> u64 {
    std::env::var("LINK_MIRRORING_CAP_MIB")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&v| v > 0)
        .unwrap_or(200)
}

/// How to reproduce, printed by `--help` before criterion's own help.
const HELP: &str = "link_mirroring: a 60- and a 1,000-partition mirror over links of 0, 10 and 50 \
ms of round trip, one Fetch in flight per broker against the default number (from the measured \
round trip), the default over a 50 ms link capped at 200 MiB/s, and the lag while following a \
producer at half that cap.
  cargo bench -p kmirror-benches --bench link_mirroring            # everything (about 11 minutes)
  cargo bench -p kmirror-benches --bench link_mirroring -- 'link_mirroring/'   # 60 partitions
  cargo bench -p kmirror-benches --bench link_mirroring -- 50ms    # one round trip
  cargo bench -p kmirror-benches --bench link_mirroring -- capped  # the capped link only (60 partitions, 694.6 MiB)
  cargo bench -p kmirror-benches --bench link_mirroring -- follow  # the lag behind a producer at half the cap (about 70 s)
  LINK_MIRRORING_BROKERS=3 ...                                     # leaders over 3 brokers (default 1)
  LINK_MIRRORING_CAP_MIB=100 ...                                   # the capped link's MiB/s (default 200; the producer's is half)
Figures and the machine: BENCHMARKS.md, section link_mirroring.
";

fn topic_name(t: u64) -> String {
    format!("l{t:02}")
}

fn topic_id(t: u64) -> TopicId {
    TopicId::from_u64(0x6c6b_0000 + t)
}

/// Source brokers: `LINK_MIRRORING_BROKERS`, 1 by default.
fn brokers() -> i32 {
    match std::env::var("LINK_MIRRORING_BROKERS") {
        Err(_) => 1,
        Ok(v) => v
            .parse()
            .ok()
            .filter(|n| (1..=16).contains(n))
            .unwrap_or_else(|| panic!("LINK_MIRRORING_BROKERS={v:?}: expected 1 to 16")),
    }
}

/// One partition of `layout` (epoch 0): its bytes and, per batch, its last offset and the byte
/// position where it ends.
fn one_partition(layout: &Layout) -> (Bytes, Vec<(i64, usize)>) {
    let mut one = Vec::new();
    let mut ends = Vec::new();
    for b in 0..layout.batches {
        let header = BatchHeader::plain(b * RECORDS, (b + 1) * RECORDS - 1, 0);
        let batch = RawBatch::synthesize(&header, 1_700_000_000_000).expect("batch");
        one.extend_from_slice(batch.bytes());
        ends.push((header.last_offset, one.len()));
    }
    (Bytes::from(one), ends)
}

/// The source: every partition the same batches ([`one_partition`], one buffer shared), leaders
/// spread over `brokers`.
fn source_topics(layout: &Layout, brokers: i32) -> Vec<FakeTopic> {
    let (bytes, ends) = one_partition(layout);
    (0..layout.topics)
        .map(|t| FakeTopic {
            name: topic_name(t),
            id: topic_id(t),
            partitions: (0..layout.per_topic)
                .map(|p| FakePartition {
                    leader: 1 + (t as i32 * layout.per_topic + p) % brokers,
                    bytes: bytes.clone(),
                    batches: ends.clone(),
                })
                .collect(),
        })
        .collect()
}

/// The fake source behind one link per broker, each delaying a direction by half `rtt` and
/// capping it at `cap` bytes a second (all the link's connections together) if given.
struct LinkedSource<'a> {
    layout: &'a Layout,
    fake: FakeSource,
    _links: Vec<Link>,
}

impl<'a> LinkedSource<'a> {
    fn start(layout: &'a Layout, brokers: i32, rtt: Duration, cap: Option<u64>) -> Self {
        let mut links = Vec::new();
        let topics = source_topics(layout, brokers);
        let fake = FakeSource::start_advertising(brokers, topics, |_, address| {
            let link = Link::start(
                address,
                LinkOptions {
                    one_way_delay: rtt / 2,
                    bandwidth_bytes_per_sec: cap,
                },
            )
            .expect("link");
            let advertised = link.address().to_string();
            links.push(link);
            advertised
        });
        LinkedSource {
            layout,
            fake,
            _links: links,
        }
    }

    /// A client of the source with `fetches_in_flight` (`None`: from the round trip).
    fn client(&self, fetches_in_flight: Option<NonZeroUsize>) -> SourceCluster {
        let names: Vec<String> = (0..self.layout.topics).map(topic_name).collect();
        let selection = TopicSelection::names(&names).expect("valid names");
        SourceCluster::new(
            &self.fake.bootstrap(),
            selection,
            SourceClusterOptions {
                fetch_max_wait_ms: 0,
                fetches_in_flight,
                ..SourceClusterOptions::default()
            },
        )
    }
}

/// Where the destinations go: `/dev/shm` when there is one (memory: the link, not the disk,
/// is measured), the temporary directory otherwise.
fn work_dir() -> tempfile::TempDir {
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        if let Ok(dir) = tempfile::tempdir_in(shm) {
            return dir;
        }
    }
    tempfile::tempdir().expect("a temp dir")
}

/// A node destination at `root` with every partition MIRRORING against the empty source.
fn mirroring_dest(linked: &LinkedSource, source: SourceCluster, root: &Path) -> NodeDriver {
    let fake = &linked.fake;
    fake.set_filled(false);
    let options = NodeDriverOptions {
        flush: FlushPolicy::Kafka,
        ..NodeDriverOptions::default()
    };
    let topics = linked.layout.names();
    node_setup::mirroring_dest(root, &fake.bootstrap(), &topics, source, options, 1)
}

/// One sample: a fresh destination brought to MIRRORING (untimed), the backlog mirrored
/// (timed), the driver closed and the destination deleted (untimed). Returns the time and
/// the client, to keep warm.
fn sample(
    linked: &LinkedSource,
    source: SourceCluster,
    root: &Path,
    total: u64,
) -> (Duration, SourceCluster) {
    let fake = &linked.fake;
    let mut driver = mirroring_dest(linked, source, root);
    fake.set_filled(true);
    let start = Instant::now();
    node_setup::mirror_backlog(&mut driver, total);
    let elapsed = start.elapsed();
    (elapsed, finish(linked, driver, root))
}

/// Closes `driver` (untimed), deletes its destination at `root` and empties the source.
/// Returns the source's client, to keep warm.
fn finish(linked: &LinkedSource, mut driver: NodeDriver, root: &Path) -> SourceCluster {
    let source = driver.set_source(None).expect("the source");
    driver.close().expect("closed");
    std::fs::remove_dir_all(root).expect("dest removed");
    linked.fake.set_filled(false);
    source
}

/// A criterion group of `name`: `bytes` a sample, 10 flat samples over `measurement`.
fn bytes_group<'c>(
    c: &'c mut Criterion,
    name: &str,
    bytes: u64,
    measurement: Duration,
) -> BenchmarkGroup<'c, WallTime> {
    let mut group = c.benchmark_group(name);
    group.throughput(Throughput::Bytes(bytes));
    group.sample_size(10);
    group.sampling_mode(SamplingMode::Flat);
    group.measurement_time(measurement);
    group
}

/// The most one Fetch in flight per broker moves over `rtt`: `fetch_max` bytes per round trip
/// and broker.
fn one_fetch_limit(fetch_max: i32, brokers: i32, rtt: Duration) -> String {
    if rtt.is_zero() {
        return "none".to_owned();
    }
    let bytes = f64::from(fetch_max) * f64::from(brokers) / rtt.as_secs_f64();
    format!("{:.0} MiB/s", bytes / f64::from(1 << 20))
}

/// The variants of `layout` over each of `links` (round trip in milliseconds, bandwidth cap in
/// MiB/s): uncapped, one Fetch in flight and the default; capped, the default.
fn over_links(c: &mut Criterion, layout: &Layout, links: &[(u64, Option<u64>)]) {
    let brokers = brokers();
    let total = one_partition(layout).0.len() as u64 * layout.partitions() as u64;
    let fetch_max = SourceClusterOptions::default().fetch_max_bytes;
    let work = work_dir();
    let root: PathBuf = work.path().join("dest");
    let mut group = bytes_group(c, layout.group, total, Duration::from_secs(10));
    let per_broker = layout.partitions().div_ceil(brokers as usize);
    for &(rtt_ms, cap_mib) in links {
        let rtt = Duration::from_millis(rtt_ms);
        let linked = LinkedSource::start(layout, brokers, rtt, cap_mib.map(|mib| mib << 20));
        let variants = match cap_mib {
            None => vec![
                (format!("one_fetch_{rtt_ms}ms"), NonZeroUsize::new(1)),
                (format!("in_flight_{rtt_ms}ms"), None),
            ],
            Some(mib) => vec![(format!("capped_{mib}MiBps_{rtt_ms}ms"), None)],
        };
        for (name, in_flight) in variants {
            // The client stays warm across samples (criterion's warm-up runs the first ones):
            // its connections open and its round trip measured, as in a running process.
            let mut warm: Option<SourceCluster> = None;
            let mut told = false;
            group.bench_function(&name, |b| {
                b.iter_custom(|iters| {
                    let mut sum = Duration::ZERO;
                    for _ in 0..iters {
                        let source = warm.take().unwrap_or_else(|| linked.client(in_flight));
                        let (elapsed, source) = sample(&linked, source, &root, total);
                        sum += elapsed;
                        if !told {
                            told = true;
                            println!(
                                "{} {name}: {} partitions, {brokers} broker(s), {} Fetch(es) in \
                                 flight per broker, round trip measured {:?}; the one-Fetch limit \
                                 {}",
                                layout.group,
                                layout.partitions(),
                                source.fetches_in_flight(per_broker),
                                source.measured_round_trip(),
                                one_fetch_limit(fetch_max, brokers, rtt)
                            );
                        }
                        warm = Some(source);
                    }
                    sum
                })
            });
        }
    }
    group.finish();
}

/// The uncapped links.
fn uncapped() -> Vec<(u64, Option<u64>)> {
    ROUND_TRIPS_MS
        .iter()
        .map(|&rtt_ms| (rtt_ms, None))
        .collect()
}

fn link_mirroring(c: &mut Criterion) {
    over_links(c, &SIXTY, &uncapped());
}

fn link_mirroring_1000(c: &mut Criterion) {
    over_links(c, &THOUSAND, &uncapped());
}

fn link_mirroring_capped(c: &mut Criterion) {
    over_links(c, &SIXTY_CAPPED, &[(CAPPED_ROUND_TRIP_MS, Some(cap_mib()))]);
}

/// One follow of `link_mirroring_follow`.
struct Follow {
    /// The whole follow: from the producer's start until the destination has everything.
    elapsed: Duration,
    /// From the producer's end until the destination has everything.
    catch_up: Duration,
    /// The lag in bytes every [`LAG_EVERY`] while the producer runs.
    lags: Vec<u64>,
    /// The driver's fetch rounds over the whole follow.
    rounds: u64,
}

/// One follow: a fresh destination brought to MIRRORING against the empty source (untimed);
/// then, timed, a producer thread shows one more batch of every partition each time the
/// source's bytes fall behind `rate` bytes a second, for [`FOLLOW_PRODUCING`], sampling the lag
/// as it goes, while the driver runs on the wall clock until it has everything; then the
/// driver closed and the destination deleted (untimed). Returns the client, to keep warm.
fn follow_sample(
    linked: &LinkedSource,
    source: SourceCluster,
    root: &Path,
    rate: f64,
) -> (Follow, SourceCluster) {
    let ends = one_partition(linked.layout).1;
    let partitions = linked.layout.partitions() as u64;
    // The bytes the source shows with its first `n` batches of every partition.
    let shown = |n: usize| {
        n.checked_sub(1)
            .map_or(0, |i| ends[i].1 as u64 * partitions)
    };
    let step = shown(ends.len()) as f64 / ends.len() as f64;
    let last = (FOLLOW_PRODUCING.as_secs_f64() * rate / step) as usize;
    assert!(last <= ends.len(), "the layout holds too few batches");
    let mut driver = mirroring_dest(linked, source, root);
    let before = driver.stats();
    let appended = AtomicU64::new(0);
    let fake = &linked.fake;
    let start = Instant::now();
    let (lags, produced) = std::thread::scope(|s| {
        let producer = s.spawn(|| {
            let mut lags = Vec::new();
            loop {
                let n = ((start.elapsed().as_secs_f64() * rate / step) as usize).min(last);
                fake.set_visible_batches(n);
                if n == last {
                    return (lags, start.elapsed());
                }
                lags.push(shown(n) - appended.load(Ordering::SeqCst));
                std::thread::sleep(LAG_EVERY);
            }
        });
        loop {
            let now = 1_000_000 + i64::try_from(start.elapsed().as_millis()).expect("ms");
            driver.run_once(now).expect("runs");
            let bytes = driver.stats().bytes - before.bytes;
            appended.store(bytes, Ordering::SeqCst);
            if bytes >= shown(last) && driver.all_caught_up() {
                break;
            }
        }
        producer.join().expect("the producer")
    });
    let elapsed = start.elapsed();
    let follow = Follow {
        elapsed,
        catch_up: elapsed.saturating_sub(produced),
        lags,
        rounds: driver.stats().rounds - before.rounds,
    };
    (follow, finish(linked, driver, root))
}

/// The median, 99th percentile and maximum of `lags`, in MiB and in round trips of data
/// (`round_trip` bytes each).
fn lag_figures(lags: &[u64], round_trip: f64) -> String {
    let mut sorted = lags.to_vec();
    sorted.sort_unstable();
    let at = |q: f64| sorted[((sorted.len() - 1) as f64 * q).round() as usize] as f64;
    let mib = f64::from(1 << 20);
    [("median", 0.5), ("p99", 0.99), ("max", 1.0)]
        .iter()
        .map(|&(name, q)| {
            format!(
                "{name} {:.2} MiB ({:.2} round trips)",
                at(q) / mib,
                at(q) / round_trip
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// A producer at half the capped link's bandwidth, followed across it.
fn link_mirroring_follow(c: &mut Criterion) {
    let layout = &SIXTY_FOLLOW;
    let cap = cap_mib();
    let rate = (cap << 20) as f64 / 2.0;
    let rtt = Duration::from_millis(CAPPED_ROUND_TRIP_MS);
    let round_trip = rate * rtt.as_secs_f64();
    let produced = (FOLLOW_PRODUCING.as_secs_f64() * rate) as u64;
    let work = work_dir();
    let root: PathBuf = work.path().join("dest");
    let linked = LinkedSource::start(layout, brokers(), rtt, Some(cap << 20));
    let mut group = bytes_group(c, layout.group, produced, Duration::from_secs(40));
    group.warm_up_time(Duration::from_secs(1));
    let name = format!(
        "follow_{}MiBps_capped_{cap}MiBps_{}ms",
        cap / 2,
        CAPPED_ROUND_TRIP_MS
    );
    let mut warm: Option<SourceCluster> = None;
    let mut warm_lags = Vec::new();
    let mut catch_ups = Vec::new();
    group.bench_function(&name, |b| {
        b.iter_custom(|iters| {
            let mut sum = Duration::ZERO;
            for _ in 0..iters {
                let was_warm = warm.is_some();
                let source = warm.take().unwrap_or_else(|| linked.client(None));
                let (follow, source) = follow_sample(&linked, source, &root, rate);
                println!(
                    "{} {name}{}: lag over {} samples: {}; caught up {:?} after the producer \
                     stopped ({:?} in all, {} fetch rounds, {:.1} ms each)",
                    layout.group,
                    if was_warm { "" } else { " (cold client)" },
                    follow.lags.len(),
                    lag_figures(&follow.lags, round_trip),
                    follow.catch_up,
                    follow.elapsed,
                    follow.rounds,
                    follow.elapsed.as_secs_f64() * 1e3 / follow.rounds as f64
                );
                if was_warm {
                    warm_lags.extend_from_slice(&follow.lags);
                    catch_ups.push(follow.catch_up);
                }
                sum += follow.elapsed;
                warm = Some(source);
            }
            sum
        })
    });
    group.finish();
    if let Some(slowest) = catch_ups.iter().max() {
        let max = warm_lags.iter().max().copied().unwrap_or(0) as f64;
        println!(
            "{} {name}: {} follows with a warm client, lag over {} samples: {}; the most after \
             the producer stopped {slowest:?}; within two round trips of data ({:.2} MiB): {}",
            layout.group,
            catch_ups.len(),
            warm_lags.len(),
            lag_figures(&warm_lags, round_trip),
            2.0 * round_trip / f64::from(1 << 20),
            if max <= 2.0 * round_trip { "yes" } else { "no" }
        );
    }
}

criterion_group!(
    benches,
    link_mirroring,
    link_mirroring_1000,
    link_mirroring_capped,
    link_mirroring_follow
);

fn main() {
    bench_main::run(HELP, benches);
}
