//! The node driver fetching over a link with a round trip (the fake cluster behind delaying
//! proxies), in both of its ways: in rounds with fetch-ahead (one Fetch in flight per broker)
//! and pipelined (two fetchers per broker, each with its Fetch on the wire while the other's
//! answer is fed). What becomes of the answers in flight (read ahead, or on the wire) when a
//! partition's state changes:
//!
//! - **A leader change**: the answers read ahead from the old leader are dropped as soon as the
//!   driver feeds the new leaders, so none is fed to a partition the kernel moved to its new
//!   leader's fetcher; an answer of the old fetcher fed late is refused by the kernel (stale).
//! - **A pause**: the partition's fetcher stops; nothing read before is appended after.
//! - **A stop**: the same, and the partition ends with the mirrored prefix and the stop's own
//!   control records only.
//!
//! Each test shows it, in both ways, with data that would differ if an old answer were
//! applied.

use std::num::NonZeroUsize;
use std::time::Duration;

use kmirror_kernel::batch::BatchHeader;
use kmirror_kernel::log::LogView;
use kmirror_kernel::node::{FetchStatus, PartitionKey};
use kmirror_kernel::state::MirrorState;

use super::control::TopicsVerb;
use super::fixture::{added_from, fake, BOTH, ORDERS};
use super::*;
use crate::clock::ManualClock;
use crate::record_batch::RawBatch;
use crate::wire::fake_broker::FakeCluster;
use crate::wire::fake_link::behind_links;
use crate::wire::{SourceCluster, SourceClusterOptions, TopicSelection};

/// How the driver fetches in a test.
#[derive(Clone, Copy, Debug)]
enum Way {
    /// In rounds, one Fetch in flight per broker, the next round read ahead.
    Rounds,
    /// Pipelined: two fetchers per broker, each Fetch sent as soon as the kernel asks it.
    Pipelined,
}

const WAYS: [Way; 2] = [Way::Rounds, Way::Pipelined];

/// A node destination at `root` mirroring both topics of `fake` (behind its links), one batch
/// a fetch so that catching up takes rounds, fetching `way`, fetch-ahead on, the source's
/// metadata asked again before every round (so a leader change is seen at the next round).
fn mirroring(fake: &FakeCluster, root: &std::path::Path, way: Way) -> NodeDriver {
    let source = SourceCluster::new(
        &fake.address(1),
        TopicSelection::names(BOTH).unwrap(),
        SourceClusterOptions {
            connect_timeout: Duration::from_secs(2),
            request_timeout: Duration::from_secs(5),
            fetch_max_wait_ms: 0,
            metadata_max_age: Duration::ZERO,
            metadata_refresh_backoff: Duration::ZERO,
            fetches_in_flight: NonZeroUsize::new(match way {
                Way::Rounds => 1,
                Way::Pipelined => 2,
            }),
            ..SourceClusterOptions::default()
        },
    );
    added_from(fake, root, source, options())
}

/// One batch a fetch, fetch-ahead on.
fn options() -> NodeDriverOptions {
    NodeDriverOptions {
        max_fetch_batches: 1,
        fetch_ahead: true,
        ..NodeDriverOptions::default()
    }
}

/// The fake behind 5 ms links, mirrored into a destination until answers are in flight for
/// orders-2 ([`MidWay::start`]).
struct MidWay {
    fake: FakeCluster,
    _links: Vec<kmirror_testsupport::link::Link>,
    _dir: tempfile::TempDir,
    driver: NodeDriver,
    clock: ManualClock,
    /// orders-2's log end offset when answers were in flight.
    at: i64,
}

impl MidWay {
    /// Steps until answers are in flight for orders-2 (6 batches) while it has mirrored some
    /// but not all of them: in rounds, a step read the next round ahead (a round and its
    /// fetch-ahead: two calls to the source); pipelined, its Fetch is on the wire.
    fn start(way: Way) -> MidWay {
        let fake = fake();
        let links = behind_links(&fake, Duration::from_millis(5));
        let dir = tempfile::tempdir().unwrap();
        let driver = mirroring(&fake, &dir.path().join("west"), way);
        let mut mid = MidWay {
            fake,
            _links: links,
            _dir: dir,
            driver,
            clock: ManualClock::default(),
            at: 0,
        };
        for _ in 0..2_000 {
            let before = mid.driver.stats().source_fetches;
            mid.step(1);
            let in_flight = match way {
                Way::Rounds => mid.driver.stats().source_fetches >= before + 2,
                Way::Pipelined => mid
                    .driver
                    .node()
                    .fetch_slot(&PartitionKey::new(ORDERS, 2))
                    .is_some_and(|slot| matches!(slot.status, FetchStatus::InFlight(_))),
            };
            mid.at = mid.leo(2);
            if in_flight && (2..=6).contains(&mid.at) {
                return mid;
            }
        }
        panic!("orders-2 never had answers in flight mid-way ({way:?})");
    }

    /// Steps `n` times, 10 ms apart.
    fn step(&mut self, n: usize) {
        for _ in 0..n {
            self.clock.now_ms += 10;
            self.driver.run_once(self.clock.now_ms).unwrap();
        }
    }

    /// Steps until every partition is caught up and orders-2 has its 12 offsets; false if that
    /// does not happen within 2,000 steps.
    fn catch_up(&mut self) -> bool {
        for _ in 0..2_000 {
            self.step(1);
            if self.driver.all_caught_up() && self.leo(2) == 12 {
                return true;
            }
        }
        false
    }

    fn leo(&self, partition: i32) -> i64 {
        self.driver
            .log(&PartitionKey::new(ORDERS, partition))
            .unwrap()
            .log_end_offset()
    }

    /// The source's batches of orders-`partition`, and the destination's.
    fn batches(&self, partition: i32) -> (Vec<RawBatch>, Vec<RawBatch>) {
        let source = self.fake.state().topics[0].partitions[partition as usize]
            .batches
            .clone();
        let log = self
            .driver
            .log(&PartitionKey::new(ORDERS, partition))
            .unwrap();
        let dest = log.try_read(0, log.log_end_offset()).unwrap();
        (source, dest)
    }

    /// Sends `verb` for the topic orders.
    fn request(&mut self, verb: TopicsVerb) {
        let results = self
            .driver
            .request_topics(verb, "orders", None, self.clock.now_ms)
            .unwrap();
        assert!(results["orders"].is_ok(), "{results:?}");
    }
}

fn epochs(batches: &[RawBatch]) -> Vec<i32> {
    batches
        .iter()
        .map(|b| b.header().partition_leader_epoch)
        .collect()
}

#[test]
fn answers_from_an_old_leader_are_never_fed_after_the_leader_change() {
    for way in WAYS {
        let mut mid = MidWay::start(way);
        let at = mid.at;
        // An unclean election: orders-2 moves from broker 1 to broker 2 at epoch 6, which lacks
        // the records from `at` on and wrote others there (larger, so that the bytes differ). The
        // batch at `at` read ahead from broker 1 is epoch 5's. The fake does not apply KIP-320's
        // check: an old batch fed now would stay, differing from the source.
        {
            let mut state = mid.fake.state();
            let p = &mut state.topics[0].partitions[2];
            p.leader = 2;
            p.epoch = 6;
            p.batches.truncate(usize::try_from(at / 2).unwrap());
            for b in (at / 2)..6 {
                let header = BatchHeader::plain(2 * b, 2 * b + 1, 6);
                p.batches
                    .push(RawBatch::synthesize(&header, 3_000).unwrap());
            }
        }
        assert!(mid.catch_up(), "{}", mid.driver.status().render(0));
        let (source, dest) = mid.batches(2);
        assert!(
            dest == source,
            "orders-2 is not the new leader's log: epochs {:?} at the destination, {:?} at the \
             source (read ahead from {at})",
            epochs(&dest),
            epochs(&source)
        );
        assert!(epochs(&dest)[usize::try_from(at / 2).unwrap()..]
            .iter()
            .all(|e| *e == 6));
        // The other partitions are unaffected.
        for p in 0..2 {
            let (source, dest) = mid.batches(p);
            assert_eq!(dest, source, "orders-{p}");
        }
    }
}

#[test]
fn answers_in_flight_at_a_pause_are_never_appended() {
    for way in WAYS {
        let mut mid = MidWay::start(way);
        // The status says how the source is fetched: the round trip behind the links, two Fetches.
        let link = mid.driver.status().source_link.expect("measured");
        assert!(link.round_trip_us >= 10_000, "{link:?}");
        let lanes = match way {
            Way::Rounds => 1,
            Way::Pipelined => 2,
        };
        assert_eq!(link.fetches_in_flight, lanes, "{way:?}");
        // Pipelined, the kernel runs one fetcher per Fetch in flight; in rounds, one.
        assert_eq!(mid.driver.node().config().num_fetchers, lanes as u32);
        let shown = mid.driver.status().render(0);
        assert!(shown.contains(&format!("up to {lanes} Fetch")), "{shown}");
        mid.request(TopicsVerb::Pause);
        let paused: Vec<i64> = (0..3).map(|p| mid.leo(p)).collect();
        mid.step(300);
        for p in 0..3 {
            let key = PartitionKey::new(ORDERS, p);
            assert_eq!(mid.driver.persisted_state(&key), MirrorState::Paused);
            assert_eq!(mid.leo(p), paused[p as usize], "orders-{p} after the pause");
        }
        assert!(
            paused.iter().zip([8, 10, 12]).any(|(at, end)| *at < end),
            "something was left to mirror: {paused:?}"
        );
        // Resumed, it mirrors on from where it paused: the same bytes as the source.
        mid.request(TopicsVerb::Resume);
        assert!(mid.catch_up(), "{}", mid.driver.status().render(0));
        for p in 0..3 {
            let (source, dest) = mid.batches(p);
            assert_eq!(dest, source, "orders-{p}");
        }
    }
}

#[test]
fn answers_in_flight_at_a_stop_are_never_appended() {
    for way in WAYS {
        let mut mid = MidWay::start(way);
        // The stop appends its own control records: the mirrored prefix is what was there before.
        let stopped: Vec<i64> = (0..3).map(|p| mid.leo(p)).collect();
        mid.request(TopicsVerb::Stop);
        mid.step(300);
        for p in 0..3 {
            let key = PartitionKey::new(ORDERS, p);
            assert_eq!(mid.driver.persisted_state(&key), MirrorState::Stopped);
            // The mirrored prefix, then only the stop's own control records.
            let (source, dest) = mid.batches(p);
            let mirrored: Vec<&RawBatch> = dest
                .iter()
                .filter(|b| b.header().last_offset < stopped[p as usize])
                .collect();
            assert_eq!(
                mirrored,
                source.iter().take(mirrored.len()).collect::<Vec<_>>(),
                "orders-{p}"
            );
            assert!(
                dest[mirrored.len()..]
                    .iter()
                    .all(|b| b.header().is_control()),
                "orders-{p}: only control records after the stop: {:?}",
                dest[mirrored.len()..]
                    .iter()
                    .map(RawBatch::header)
                    .collect::<Vec<_>>()
            );
        }
    }
}

#[test]
fn a_source_taken_over_with_fetches_on_the_wire_feeds_its_new_driver_only_its_own_answers() {
    let mut mid = MidWay::start(Way::Pipelined);
    let source = mid.driver.set_source(None).expect("the source");
    assert!(source.fetches_pending() > 0, "fetches on the wire");
    let dir = tempfile::tempdir().unwrap();
    let mut driver = added_from(&mid.fake, &dir.path().join("east"), source, options());
    let key = |p| PartitionKey::new(ORDERS, p);
    let mut clock = ManualClock::default();
    let caught_up = (0..2_000).any(|_| {
        clock.now_ms += 10;
        driver.run_once(clock.now_ms).unwrap();
        driver.all_caught_up() && driver.log(&key(2)).unwrap().log_end_offset() == 12
    });
    assert!(caught_up, "{}", driver.status().render(0));
    // Every partition is the source's, byte for byte: no answer of the old driver's fetches
    // was taken for one of the new driver's.
    for p in 0..3 {
        let source = mid.fake.state().topics[0].partitions[p as usize]
            .batches
            .clone();
        let log = driver.log(&key(p)).unwrap();
        assert_eq!(
            log.try_read(0, log.log_end_offset()).unwrap(),
            source,
            "orders-{p}"
        );
    }
}
