//! The connections of a [`SourceCluster`](super::SourceCluster) to one source broker, and how
//! many Fetches it keeps in flight there.
//!
//! A fetcher with one Fetch in flight moves at most one answer per round trip: `fetch_max_bytes`
//! (10 MiB by default) per 50 ms is 200 MiB/s, whatever the link carries. So a broker's
//! partitions are shared among several **fetch lanes**, each its own connection (and its own
//! fetch session) carrying one Fetch of its partitions, all the lanes' Fetches in flight at once,
//! as Kafka's `num.replica.fetchers` threads share a broker's partitions. A partition is always
//! in the same lane ([`LaneAssignment`]) while the leaders and the number of lanes stay, so each
//! lane's fetch session stays incremental; a round's answers per partition are still one per
//! round, so the kernel sees the same inputs in the same order, only more bytes per round trip.
//! (The pipeline, `pipeline.rs`, has lanes of its own, named by its caller.)
//!
//! How many lanes ([`fetch_lanes`]): as many as the bandwidth-delay product needs, the round trip
//! measured by the connections' handshakes ([`KafkaClient::round_trip`]) times
//! [`AUTO_LINK_BYTES_PER_SEC`], over `fetch_max_bytes`; one on a local network, six at 50 ms;
//! or the number set ([`SourceClusterOptions::fetches_in_flight`]). Never more lanes than the
//! broker leads partitions.

use std::collections::HashMap;
use std::num::NonZeroUsize;
use std::sync::Arc;
use std::time::Duration;

use kmirror_kernel::types::{PartitionIndex, TopicId};

use super::super::client::KafkaClient;
use super::super::fetch_session::FetchSession;
use super::super::security::SecurityConfig;
use super::{BrokerStats, SourceClusterOptions, SourceMetadata};

/// The bandwidth the default number of Fetches in flight is sized for: 1 GiB/s, about what one
/// node writes (BENCHMARKS.md, `node_mirroring`) and what a 10 Gbit/s link carries.
pub const AUTO_LINK_BYTES_PER_SEC: u64 = 1 << 30;

/// The most Fetches in flight per broker the default picks (a longer round trip gets no more:
/// each lane is a connection and a thread).
pub const MAX_AUTO_FETCHES_IN_FLIGHT: usize = 16;

/// One connection carrying Fetches to a broker, with its fetch sessions.
#[derive(Debug)]
pub(super) struct FetchLane {
    /// The connection.
    pub(super) client: KafkaClient,
    /// How far the order of the lane's partitions is rotated next round.
    pub(super) rotation: usize,
    /// The fetch sessions, by isolation level (read-uncommitted, read-committed).
    pub(super) sessions: [FetchSession; 2],
}

impl FetchLane {
    /// A lane to `address`, not connected yet.
    pub(super) fn new(
        address: &str,
        options: &SourceClusterOptions,
        security: &Arc<SecurityConfig>,
    ) -> Self {
        FetchLane {
            client: KafkaClient::new(address, options.connect_timeout, options.request_timeout)
                .with_security(security.clone()),
            rotation: 0,
            sessions: Default::default(),
        }
    }
}

/// The connections to one broker: lane 0 also carries every other request (Metadata,
/// ListOffsets, the callers' own), the others only Fetches (and their ListOffsets after
/// `OFFSET_OUT_OF_RANGE`).
#[derive(Debug)]
pub(super) struct BrokerConnection {
    /// The fetch lanes, never empty.
    pub(super) lanes: Vec<FetchLane>,
    /// The requests sent to the broker, on every lane.
    pub(super) stats: BrokerStats,
}

impl BrokerConnection {
    /// One lane to `address`, not connected yet, counting on from `stats`.
    pub(super) fn new(
        address: &str,
        options: &SourceClusterOptions,
        security: &Arc<SecurityConfig>,
        stats: BrokerStats,
    ) -> Self {
        BrokerConnection {
            lanes: vec![FetchLane::new(address, options, security)],
            stats,
        }
    }

    /// The client of lane 0, for every request but the lanes' Fetches.
    pub(super) fn client(&self) -> &KafkaClient {
        &self.lanes[0].client
    }

    /// The client of lane 0, to send with.
    pub(super) fn client_mut(&mut self) -> &mut KafkaClient {
        &mut self.lanes[0].client
    }

    /// Closes every lane's connection.
    pub(super) fn disconnect(&mut self) {
        for lane in &mut self.lanes {
            lane.client.disconnect();
        }
    }

    /// Makes it `count` lanes (at least one): new ones are not connected yet, extra ones are
    /// closed with their fetch sessions.
    pub(super) fn set_lanes(
        &mut self,
        count: usize,
        options: &SourceClusterOptions,
        security: &Arc<SecurityConfig>,
    ) {
        let count = count.max(1);
        let address = self.client().address().to_owned();
        self.lanes.truncate(count);
        while self.lanes.len() < count {
            self.lanes.push(FetchLane::new(&address, options, security));
        }
    }

    /// The shortest round trip the open lanes' handshakes measured.
    pub(super) fn round_trip(&self) -> Option<Duration> {
        self.lanes
            .iter()
            .filter_map(|l| l.client.round_trip())
            .min()
    }
}

/// How many Fetches to keep in flight per broker for `partitions` partitions: `set`, or else
/// enough for [`AUTO_LINK_BYTES_PER_SEC`] over `round_trip` in answers of `fetch_max_bytes`
/// (one while no round trip is measured), at most [`MAX_AUTO_FETCHES_IN_FLIGHT`]; never more
/// than `partitions`, never less than one.
pub fn fetch_lanes(
    set: Option<NonZeroUsize>,
    round_trip: Option<Duration>,
    fetch_max_bytes: i32,
    partitions: usize,
) -> usize {
    let wanted = match set {
        Some(n) => n.get(),
        None => {
            let per_fetch = u128::from(u32::try_from(fetch_max_bytes).unwrap_or(1).max(1));
            let in_flight = round_trip.map_or(0, |rtt| {
                rtt.as_nanos() * u128::from(AUTO_LINK_BYTES_PER_SEC) / 1_000_000_000
            });
            let lanes = in_flight.div_ceil(per_fetch);
            usize::try_from(lanes)
                .unwrap_or(MAX_AUTO_FETCHES_IN_FLIGHT)
                .min(MAX_AUTO_FETCHES_IN_FLIGHT)
        }
    };
    wanted.min(partitions).max(1)
}

/// Which lane each partition goes in: its rank among the partitions its leader leads in the
/// metadata (by topic name, then index) modulo the broker's lane count. The lanes get even
/// shares, and a partition stays in its lane while the leaders and the lane count do.
#[derive(Debug, Default)]
pub(super) struct LaneAssignment {
    rank: HashMap<(TopicId, PartitionIndex), usize>,
    led: HashMap<i32, usize>,
}

impl LaneAssignment {
    /// The assignment of `metadata`'s partitions.
    pub(super) fn of(metadata: &SourceMetadata) -> Self {
        let mut assignment = LaneAssignment::default();
        for (topic, partition) in metadata.partitions() {
            let Some(leader) = partition.leader else {
                continue;
            };
            let led = assignment.led.entry(leader).or_default();
            assignment
                .rank
                .insert((topic.topic_id, partition.index), *led);
            *led += 1;
        }
        assignment
    }

    /// How many partitions broker `id` leads.
    pub(super) fn led_by(&self, id: i32) -> usize {
        self.led.get(&id).copied().unwrap_or(0)
    }

    /// The lane of `partition` of `topic_id` among `lanes` (lane 0 for one the metadata does
    /// not name).
    pub(super) fn lane(&self, topic_id: TopicId, partition: PartitionIndex, lanes: usize) -> usize {
        self.rank
            .get(&(topic_id, partition))
            .map_or(0, |rank| rank % lanes.max(1))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::super::{SourcePartition, SourceTopic};
    use super::*;

    const MIB: i32 = 1 << 20;

    #[test]
    fn the_default_fills_the_bandwidth_delay_product_and_a_set_count_wins() {
        let ms = Duration::from_millis;
        // No round trip measured yet, or a local one: one Fetch.
        assert_eq!(fetch_lanes(None, None, 10 * MIB, 60), 1);
        assert_eq!(
            fetch_lanes(None, Some(Duration::from_micros(200)), 10 * MIB, 60),
            1
        );
        // 1 GiB/s over 10 ms is 10.24 MiB: two answers of 10 MiB; over 50 ms, six.
        assert_eq!(fetch_lanes(None, Some(ms(10)), 10 * MIB, 60), 2);
        assert_eq!(fetch_lanes(None, Some(ms(50)), 10 * MIB, 60), 6);
        // Smaller answers need more of them, up to the bound.
        assert_eq!(fetch_lanes(None, Some(ms(50)), MIB, 60), 16);
        // Never more lanes than partitions.
        assert_eq!(fetch_lanes(None, Some(ms(50)), 10 * MIB, 4), 4);
        assert_eq!(fetch_lanes(None, Some(ms(50)), 10 * MIB, 0), 1);
        // A set count is taken as it is (within the partitions).
        let three = NonZeroUsize::new(3);
        assert_eq!(fetch_lanes(three, None, 10 * MIB, 60), 3);
        assert_eq!(fetch_lanes(three, Some(ms(50)), 10 * MIB, 60), 3);
        assert_eq!(fetch_lanes(three, Some(ms(50)), 10 * MIB, 2), 2);
    }

    #[test]
    fn each_brokers_partitions_share_its_lanes_evenly_and_stay_in_theirs() {
        let topic = |name: &str, id: u8, leaders: Vec<i32>| SourceTopic {
            name: name.into(),
            topic_id: TopicId([id; 16]),
            partitions: leaders
                .into_iter()
                .enumerate()
                .map(|(i, leader)| SourcePartition {
                    index: i32::try_from(i).unwrap(),
                    leader: (leader > 0).then_some(leader),
                    leader_epoch: 0,
                    error_code: 0,
                })
                .collect(),
        };
        // Three brokers leading partitions round robin, as Kafka assigns them, and a
        // partition without a leader.
        let mut leaders: Vec<i32> = (0..60).map(|p| 1 + p % 3).collect();
        leaders[59] = -1;
        let metadata = SourceMetadata {
            cluster_id: None,
            brokers: BTreeMap::new(),
            topics: [
                ("a".to_owned(), topic("a", 1, leaders)),
                ("b".to_owned(), topic("b", 2, vec![1, 1])),
            ]
            .into(),
            errors: Vec::new(),
            answered_by: String::new(),
        };
        let lanes = LaneAssignment::of(&metadata);
        assert_eq!(
            (lanes.led_by(1), lanes.led_by(2), lanes.led_by(3)),
            (22, 20, 19)
        );
        assert_eq!(lanes.led_by(4), 0);
        for (broker, of_a) in [(1, 20), (2, 20), (3, 19)] {
            let mut counts = [0usize; 4];
            for p in (0..of_a * 3).filter(|p| 1 + p % 3 == broker) {
                counts[lanes.lane(TopicId([1; 16]), p, 4)] += 1;
            }
            if broker == 1 {
                for p in 0..2 {
                    counts[lanes.lane(TopicId([2; 16]), p, 4)] += 1;
                }
            }
            let (min, max) = (counts.iter().min().unwrap(), counts.iter().max().unwrap());
            assert!(max - min <= 1, "broker {broker}: {counts:?}");
        }
        // Unknown partitions go in lane 0; one lane takes everything.
        assert_eq!(lanes.lane(TopicId([9; 16]), 0, 4), 0);
        assert!((0..60).all(|p| lanes.lane(TopicId([1; 16]), p, 1) == 0));
    }
}
