//! Several Fetches in flight per broker (fetch lanes): the same answers as one Fetch, each
//! lane's own Fetch and fetch session, and a default that follows the measured round trip.

use std::num::NonZeroUsize;
use std::time::Duration;

use kafka_protocol::messages::ApiKey;
use kmirror_kernel::config::FetchIsolation;
use kmirror_kernel::fetch::FetchResponse;
use kmirror_kernel::types::{Offset, TopicId};

use super::*;
use crate::wire::fake_broker::{FakeCluster, FakePartition, FakeTopic};
use crate::wire::fake_link::behind_links;

const ORDERS: TopicId = TopicId([1; 16]);

/// `orders` with 8 partitions, led alternately by brokers 1 and 2, 3 batches each.
pub(super) fn fake() -> FakeCluster {
    FakeCluster::start(
        2,
        vec![FakeTopic {
            name: "orders".into(),
            id: ORDERS,
            partitions: (0..8)
                .map(|i| FakePartition::with_batches(1 + i % 2, 5, 3))
                .collect(),
        }],
    )
}

pub(super) fn cluster(fake: &FakeCluster, fetches_in_flight: Option<usize>) -> SourceCluster {
    SourceCluster::new(
        &fake.address(1),
        TopicSelection::parse("orders").expect("selection"),
        SourceClusterOptions {
            connect_timeout: Duration::from_secs(2),
            request_timeout: Duration::from_secs(5),
            metadata_refresh_backoff: Duration::ZERO,
            fetches_in_flight: fetches_in_flight.and_then(NonZeroUsize::new),
            ..SourceClusterOptions::default()
        },
    )
}

pub(super) fn all(from: Offset) -> Vec<PartitionFetchRequest> {
    (0..8)
        .map(|partition| PartitionFetchRequest {
            topic_id: ORDERS,
            partition,
            fetch_offset: from,
            last_fetched_epoch: None,
            current_leader_epoch: CurrentLeaderEpoch::FromMetadata,
            isolation: FetchIsolation::ReadCommitted,
            max_batches: 100,
        })
        .collect()
}

/// Each partition's answer as (broker, next offset, batches), in the order asked.
pub(super) fn answers(results: &[PartitionFetchResult]) -> Vec<(Option<i32>, Offset, usize)> {
    results
        .iter()
        .map(|r| match &r.outcome {
            Ok(PartitionFetched {
                response: FetchResponse::Records(records),
                ..
            }) => (r.broker, records.next_offset, records.batches.len()),
            other => panic!("expected records, got {other:?}"),
        })
        .collect()
}

/// The partition counts of the Fetches broker `id` was sent, in order.
fn fetches(fake: &FakeCluster, id: i32) -> Vec<usize> {
    fake.state()
        .requests
        .iter()
        .filter(|(b, k, _)| *b == id && *k == ApiKey::Fetch as i16)
        .map(|(_, _, n)| *n)
        .collect()
}

#[test]
fn several_fetches_in_flight_share_a_brokers_partitions_and_answer_the_same() {
    let fake = fake();
    fake.state().fetch_sessions = true;
    let mut one = cluster(&fake, Some(1));
    let mut three = cluster(&fake, Some(3));
    for from in [0, 2, 6] {
        assert_eq!(
            answers(&one.fetch(&all(from))),
            answers(&three.fetch(&all(from)))
        );
    }
    // Broker 1 leads 4 partitions: one Fetch of 4 a round with one lane, three Fetches
    // (4 partitions in all, each partition in one) with three; then incremental rounds send
    // only the changed offsets, each in its own lane's session.
    let sent = fetches(&fake, 1);
    assert_eq!(sent.len(), 3 + 3 * 3, "{sent:?}");
    assert_eq!(three.request_stats()[&1].fetch_requests, 9);
    assert_eq!(three.request_stats()[&1].partitions_fetched, 12);
    assert_eq!(three.request_stats()[&1].incremental_fetch_requests, 6);
    assert_eq!(one.request_stats()[&1].fetch_requests, 3);
    assert_eq!(
        fake.state().sessions.len(),
        2 * (1 + 3),
        "one session per lane"
    );
    assert_eq!(three.fetches_in_flight(4), 3);
    assert_eq!(
        three.fetches_in_flight(2),
        2,
        "no more lanes than partitions"
    );
}

#[test]
fn the_default_number_in_flight_follows_the_round_trip_measured_behind_a_link() {
    let fake = fake();
    let _links = behind_links(&fake, Duration::from_millis(10));
    let mut source = cluster(&fake, None);
    assert_eq!(source.measured_round_trip(), None);
    source.metadata().expect("metadata");
    let measured = source
        .measured_round_trip()
        .expect("measured by the handshake");
    assert!(measured >= Duration::from_millis(20), "{measured:?}");
    // 1 GiB/s over at least 20 ms is more than two answers of 10 MiB.
    let lanes = source.fetches_in_flight(4);
    assert!(lanes >= 3, "{lanes} for {measured:?}");
    assert_eq!(
        lanes,
        fetch_lanes(None, Some(measured), 10 << 20, 4),
        "as derived"
    );
    let results = source.fetch(&all(0));
    assert!(answers(&results)
        .iter()
        .all(|(_, next, n)| (*next, *n) == (6, 3)));
    // Every broker got one Fetch per lane, each partition in exactly one.
    for broker in 1..=2 {
        let sent = fetches(&fake, broker);
        assert_eq!(sent.len(), lanes, "broker {broker}: {sent:?}");
        assert_eq!(sent.iter().sum::<usize>(), 4);
    }
    // Over a loopback without delay, as many as its own round trip asks for (one unless the
    // machine is loaded enough to stretch the handshake past 10 ms).
    let direct = self::fake();
    let mut local = cluster(&direct, None);
    local.metadata().expect("metadata");
    let local_lanes = local.fetches_in_flight(4);
    assert_eq!(
        local_lanes,
        fetch_lanes(None, local.measured_round_trip(), 10 << 20, 4)
    );
    local.fetch(&all(0));
    assert_eq!(fetches(&direct, 1).len(), local_lanes);
}
