//! The source cluster's tests, against the fake multi-broker cluster.

use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::ApiKey;
use kmirror_kernel::config::FetchIsolation;
use kmirror_kernel::fetch::{FetchResponse, FetchedRecords};
use kmirror_kernel::types::{Offset, TopicId};

use super::super::fake_broker::{FakeCluster, FakePartition, FakeTopic};
use super::answer::{map_fetch_answer, FetchAnswer};
use super::*;
use crate::record_batch::RawBatch;
use crate::wire::client::PartitionFetch;
use crate::wire::topic_selection::SelectionMiss;

const ORDERS: TopicId = TopicId([1; 16]);
const PAY_EU: TopicId = TopicId([2; 16]);

#[test]
fn split_batches_slices_the_response_and_drops_a_partial_trailing_batch() {
    use kmirror_kernel::batch::BatchHeader;
    let one = RawBatch::synthesize(&BatchHeader::plain(0, 1, 0), 0).unwrap();
    let two = RawBatch::synthesize(&BatchHeader::plain(2, 4, 0), 0).unwrap();
    let mut buf = one.bytes().to_vec();
    buf.extend_from_slice(two.bytes());
    buf.extend_from_slice(&two.bytes()[..20]); // the response's max_bytes cut this one
    let records = Bytes::from(buf);
    let batches = split_batches(&records).unwrap();
    assert_eq!(batches, vec![one.clone(), two]);
    assert_eq!(
        batches[1].bytes().as_ptr(),
        records[one.size_in_bytes()..].as_ptr(),
        "a batch is a slice of the response, not a copy"
    );
}

/// One Fetch in flight per broker, whatever the round trip a loaded machine measures: these
/// tests count the Fetches (several in flight: `lane_tests.rs`).
fn options() -> SourceClusterOptions {
    SourceClusterOptions {
        connect_timeout: Duration::from_secs(1),
        request_timeout: Duration::from_secs(2),
        metadata_refresh_backoff: Duration::ZERO,
        fetches_in_flight: std::num::NonZeroUsize::new(1),
        ..SourceClusterOptions::default()
    }
}

/// Brokers 1 and 2; `orders` with 4 partitions led alternately by 1 and 2, `pay.eu` with
/// 2 partitions led by 2; 3 batches of 2 records in each partition.
fn fake() -> FakeCluster {
    FakeCluster::start(
        2,
        vec![
            FakeTopic {
                name: "orders".into(),
                id: ORDERS,
                partitions: (0..4)
                    .map(|i| FakePartition::with_batches(1 + i % 2, 5, 3))
                    .collect(),
            },
            FakeTopic {
                name: "pay.eu".into(),
                id: PAY_EU,
                partitions: (0..2)
                    .map(|_| FakePartition::with_batches(2, 7, 3))
                    .collect(),
            },
        ],
    )
}

fn cluster(fake: &FakeCluster, selection: &str) -> SourceCluster {
    SourceCluster::new(
        &fake.address(1),
        TopicSelection::parse(selection).expect("selection"),
        options(),
    )
}

fn request(topic_id: TopicId, partition: i32, fetch_offset: Offset) -> PartitionFetchRequest {
    PartitionFetchRequest {
        topic_id,
        partition,
        fetch_offset,
        last_fetched_epoch: None,
        current_leader_epoch: CurrentLeaderEpoch::FromMetadata,
        isolation: FetchIsolation::ReadCommitted,
        max_batches: 100,
    }
}

fn all(from: Offset) -> Vec<PartitionFetchRequest> {
    let mut r: Vec<_> = (0..4).map(|p| request(ORDERS, p, from)).collect();
    r.extend((0..2).map(|p| request(PAY_EU, p, from)));
    r
}

fn records(result: &PartitionFetchResult) -> &FetchedRecords<RawBatch> {
    match &result.outcome {
        Ok(PartitionFetched {
            response: FetchResponse::Records(r),
            ..
        }) => r,
        other => panic!("expected records, got {other:?}"),
    }
}

#[test]
fn metadata_selects_names_and_globs_and_reports_misses() {
    let fake = fake();
    let mut source = cluster(&fake, "orders,pay.*,audit,x*");
    let metadata = source.metadata().expect("metadata");
    assert_eq!(metadata.cluster_id.as_deref(), Some("fake-cluster"));
    assert_eq!(
        metadata.topics.keys().collect::<Vec<_>>(),
        vec!["orders", "pay.eu"]
    );
    assert_eq!(metadata.partition_count(), 6);
    assert_eq!(metadata.leader_of(ORDERS, 1), Some(2));
    assert_eq!(metadata.topics["pay.eu"].partitions[0].leader_epoch, 7);
    assert_eq!(metadata.brokers.len(), 2);
    let errors: Vec<String> = metadata.errors.iter().map(ToString::to_string).collect();
    assert_eq!(errors.len(), 2, "{errors:?}");
    assert!(
        errors[0].contains("topic audit does not exist"),
        "{errors:?}"
    );
    assert!(errors[1].contains("glob x* matches no topic"), "{errors:?}");
    assert!(errors[0].contains(&fake.address(1)), "{errors:?}");
    // Names only: Metadata asks for just them; an unknown one is its own error.
    let mut named = cluster(&fake, "orders,audit");
    let metadata = named.metadata().expect("metadata");
    assert_eq!(metadata.topics.len(), 1);
    assert!(matches!(
        &metadata.errors[..],
        [TopicError::Selection {
            miss: SelectionMiss::UnknownTopic { .. },
            ..
        }]
    ));
}

#[test]
fn one_fetch_per_broker_covers_all_its_partitions() {
    let fake = fake();
    let mut source = cluster(&fake, "orders,pay.*");
    for round in 0..3 {
        let results = source.fetch(&all(2 * round));
        assert_eq!(results.len(), 6);
        for (r, asked) in results.iter().zip(all(2 * round)) {
            assert_eq!((r.topic_id, r.partition), (asked.topic_id, asked.partition));
            let got = records(r);
            assert_eq!(got.batches.len() as i64, 3 - round, "{r:?}");
            assert_eq!(got.next_offset, 6);
            assert_eq!(got.high_watermark, 6);
        }
        assert_eq!(results[1].broker, Some(2));
        assert_eq!(results[2].broker, Some(1));
    }
    let state = fake.state();
    assert_eq!(state.count(1, ApiKey::Fetch), 3);
    assert_eq!(state.count(2, ApiKey::Fetch), 3);
    // Broker 1 leads orders-0 and orders-2; broker 2 the other four partitions.
    assert!(state
        .requests
        .iter()
        .filter(|(_, k, _)| *k == ApiKey::Fetch as i16)
        .all(|(b, _, n)| *n == if *b == 1 { 2 } else { 4 }));
    drop(state);
    let stats = source.request_stats();
    assert_eq!(stats[&1].fetch_requests, 3);
    assert_eq!(stats[&2].fetch_requests, 3);
    assert_eq!(stats[&2].partitions_fetched, 12);
    assert_eq!(source.bootstrap_metadata_requests(), 1);
}

#[test]
fn fetch_each_hands_over_each_brokers_answers_as_one_batch_and_answers_everything_once() {
    let fake = fake();
    let mut source = cluster(&fake, "orders,pay.*");
    let mut asked = all(0);
    // A duplicate is answered without asking anyone, before the brokers' answers.
    asked.push(asked[0]);
    let mut calls: Vec<Vec<(usize, Option<i32>)>> = Vec::new();
    source.fetch_each(&asked, |answered| {
        calls.push(answered.iter().map(|(i, r)| (*i, r.broker)).collect());
    });
    // Once the Fetches are sent (the duplicate), then once per broker.
    assert_eq!(calls.len(), 3, "{calls:?}");
    assert_eq!(calls[0], vec![(6, None)]);
    let mut brokers: Vec<i32> = calls[1..]
        .iter()
        .map(|call| {
            let broker = call[0].1.expect("a broker's answer");
            assert!(call.iter().all(|(_, b)| *b == Some(broker)), "{call:?}");
            broker
        })
        .collect();
    brokers.sort();
    assert_eq!(brokers, vec![1, 2]);
    let mut indices: Vec<usize> = calls.iter().flatten().map(|(i, _)| *i).collect();
    indices.sort();
    assert_eq!(indices, (0..asked.len()).collect::<Vec<_>>());
}

#[test]
fn fetch_sessions_send_only_changes_and_answer_idle_partitions_from_the_session() {
    let fake = fake();
    fake.state().fetch_sessions = true;
    let mut source = cluster(&fake, "orders,pay.*");
    // Round 1 is full and opens a session per broker; everything is read.
    for r in source.fetch(&all(0)) {
        assert_eq!(records(&r).next_offset, 6, "{r:?}");
    }
    // Rounds 2 and 3, caught up: round 2 sends the new offsets, round 3 nothing; the
    // broker answers nothing new and every partition is answered from the session.
    for _ in 0..2 {
        for r in source.fetch(&all(6)) {
            let got = records(&r);
            assert!(got.batches.is_empty(), "{r:?}");
            assert_eq!((got.next_offset, got.high_watermark), (6, 6), "{r:?}");
            assert_eq!(got.log_start_offset, 0);
        }
    }
    // A new batch on orders-1 (broker 2) is the only news.
    {
        let mut state = fake.state();
        let batch =
            RawBatch::synthesize(&kmirror_kernel::batch::BatchHeader::plain(6, 7, 5), 1_000)
                .expect("batch");
        state.topics[0].partitions[1].batches.push(batch);
    }
    let results = source.fetch(&all(6));
    for r in &results {
        let got = records(r);
        if (r.topic_id, r.partition) == (ORDERS, 1) {
            assert_eq!((got.batches.len(), got.next_offset), (1, 8), "{r:?}");
            assert_eq!(got.high_watermark, 8);
        } else {
            assert!(got.batches.is_empty(), "{r:?}");
        }
    }
    // The broker forgets the sessions (a restart): the next round reopens them at once.
    fake.state().sessions.clear();
    let mut asked = all(6);
    asked[1].fetch_offset = 8;
    for r in source.fetch(&asked) {
        assert!(records(&r).batches.is_empty(), "{r:?}");
    }
    let state = fake.state();
    let broker2: Vec<usize> = state
        .requests
        .iter()
        .filter(|(b, k, _)| *b == 2 && *k == ApiKey::Fetch as i16)
        .map(|(_, _, n)| *n)
        .collect();
    // Full (4), the new offsets (4), nothing (0), nothing (0), the rejected incremental
    // carrying orders-1's new offset (1), full again (4).
    assert_eq!(broker2, vec![4, 4, 0, 0, 1, 4]);
    drop(state);
    let stats = source.request_stats()[&2];
    assert_eq!(stats.fetch_requests, 5);
    assert_eq!(stats.incremental_fetch_requests, 3);
    assert_eq!(stats.partitions_fetched, 20);
    assert_eq!(stats.partitions_sent, 13);
}

#[test]
fn without_fetch_sessions_every_request_is_full() {
    let fake = fake();
    fake.state().fetch_sessions = true;
    let mut source = SourceCluster::new(
        &fake.address(1),
        TopicSelection::parse("orders").expect("selection"),
        SourceClusterOptions {
            fetch_sessions: false,
            ..options()
        },
    );
    for from in [0, 6, 6] {
        for r in source.fetch(&(0..4).map(|p| request(ORDERS, p, from)).collect::<Vec<_>>()) {
            assert_eq!(records(&r).next_offset, 6);
        }
    }
    assert!(fake.state().sessions.is_empty());
    assert_eq!(source.request_stats()[&1].incremental_fetch_requests, 0);
}

#[test]
fn each_partition_gets_its_own_outcome_in_one_request() {
    let fake = fake();
    let mut source = cluster(&fake, "orders");
    source.metadata().expect("metadata");
    {
        let mut state = fake.state();
        let orders = &mut state.topics[0].partitions;
        // orders-0 (broker 1): diverging after an unclean election on the source.
        orders[0].diverging = Some((4, 3));
        // orders-2 (broker 1): its leader moved to broker 2 (the cached metadata is old).
        orders[2].leader = 2;
        orders[2].epoch = 6;
        // orders-1 (broker 2): the log start moved past the fetch offset.
        orders[1].log_start = 4;
        orders[1].batches.drain(..2);
        // orders-3 (broker 2): some other error.
        orders[3].fetch_error = Some(87);
    }
    let mut asked: Vec<_> = (0..4).map(|p| request(ORDERS, p, 2)).collect();
    asked[0].last_fetched_epoch = Some(5);
    let results = source.fetch(&asked);
    match &results[0].outcome {
        Ok(PartitionFetched {
            response: FetchResponse::Diverging(d),
            position: Some(_),
        }) => assert_eq!((d.epoch, d.end_offset), (4, 3)),
        other => panic!("expected diverging, got {other:?}"),
    }
    match &results[1].outcome {
        Ok(PartitionFetched {
            response:
                FetchResponse::OffsetOutOfRange {
                    log_start_offset,
                    log_end_offset,
                },
            position: None,
        }) => assert_eq!((*log_start_offset, *log_end_offset), (4, 6)),
        other => panic!("expected out of range, got {other:?}"),
    }
    let error = results[2].outcome.as_ref().expect_err("not the leader");
    assert!(
        matches!(
            error,
            PartitionFetchError::Leadership {
                code: 6,
                broker: 1,
                ..
            }
        ),
        "{error}"
    );
    assert!(error.is_retryable());
    let message = error.to_string();
    for part in [
        "orders",
        "partition 2",
        "NOT_LEADER_OR_FOLLOWER",
        &fake.address(1),
    ] {
        assert!(message.contains(part), "{message}");
    }
    let error = results[3].outcome.as_ref().expect_err("other error");
    assert!(
        matches!(error, PartitionFetchError::Failed { .. }),
        "{error}"
    );
    assert!(!error.is_retryable());
    // One Fetch per broker, one ListOffsets pair for the partition out of range.
    assert_eq!(fake.state().count(1, ApiKey::Fetch), 1);
    assert_eq!(fake.state().count(2, ApiKey::Fetch), 1);
    assert_eq!(fake.state().count(2, ApiKey::ListOffsets), 2);

    // The leadership error refreshed the metadata: orders-2 now goes to broker 2, at the
    // same offset.
    assert!(source.metadata_is_stale());
    let results = source.fetch(&[request(ORDERS, 2, 2)]);
    assert_eq!(results[0].broker, Some(2));
    assert_eq!(records(&results[0]).next_offset, 6);
}

#[test]
fn an_unreachable_broker_fails_only_its_partitions() {
    let fake = fake();
    let mut source = cluster(&fake, "orders,pay.*");
    source.metadata().expect("metadata");
    fake.state().down.insert(2);
    let results = source.fetch(&all(0));
    for r in &results {
        if r.broker == Some(2) {
            let error = r.outcome.as_ref().expect_err("broker 2 is down");
            assert!(
                matches!(error, PartitionFetchError::Unreachable { broker: 2, .. }),
                "{error}"
            );
            assert!(error.is_retryable());
            assert!(error.to_string().contains(&fake.address(2)), "{error}");
        } else {
            assert_eq!(records(r).batches.len(), 3);
        }
    }
    assert_eq!(results.iter().filter(|r| r.outcome.is_ok()).count(), 2);
    // The leaders move to broker 1; the next round follows them.
    {
        let mut state = fake.state();
        for t in &mut state.topics {
            for p in &mut t.partitions {
                p.leader = 1;
                p.epoch += 1;
            }
        }
    }
    let results = source.fetch(&all(0));
    assert!(results.iter().all(|r| r.broker == Some(1)), "{results:?}");
    assert!(results.iter().all(|r| records(r).batches.len() == 3));
    assert_eq!(source.request_stats()[&2].failed_requests, 1);
}

#[test]
fn refreshes_after_errors_wait_for_the_backoff() {
    let fake = fake();
    let mut source = SourceCluster::new(
        &fake.address(1),
        TopicSelection::parse("orders").expect("selection"),
        SourceClusterOptions {
            metadata_refresh_backoff: Duration::from_secs(3600),
            ..options()
        },
    );
    source.metadata().expect("metadata");
    fake.state().topics[0].partitions[0].leader = 2;
    let metadata_requests = |fake: &FakeCluster| {
        let state = fake.state();
        state.count(1, ApiKey::Metadata) + state.count(2, ApiKey::Metadata)
    };
    assert_eq!(metadata_requests(&fake), 1);
    for _ in 0..3 {
        let results = source.fetch(&[request(ORDERS, 0, 0)]);
        assert!(matches!(
            results[0].outcome,
            Err(PartitionFetchError::Leadership { code: 6, .. })
        ));
    }
    assert_eq!(metadata_requests(&fake), 1, "no refresh within the backoff");
    assert!(source.metadata_is_stale());
    // Asked for explicitly, it refreshes at once.
    source.refresh_metadata().expect("metadata");
    assert_eq!(
        records(&source.fetch(&[request(ORDERS, 0, 0)])[0])
            .batches
            .len(),
        3
    );
}

#[test]
fn fenced_and_unknown_leader_epochs_are_retryable() {
    let fake = fake();
    let mut source = cluster(&fake, "orders");
    let mut asked = vec![request(ORDERS, 0, 0), request(ORDERS, 2, 0)];
    asked[0].current_leader_epoch = CurrentLeaderEpoch::Known(4);
    asked[1].current_leader_epoch = CurrentLeaderEpoch::Known(9);
    let results = source.fetch(&asked);
    let codes: Vec<i16> = results
        .iter()
        .map(|r| match r.outcome.as_ref().expect_err("fenced") {
            PartitionFetchError::Leadership { code, .. } => *code,
            other => panic!("{other}"),
        })
        .collect();
    assert_eq!(codes, vec![74, 75]);
    // Unchecked: the broker does not compare.
    asked[0].current_leader_epoch = CurrentLeaderEpoch::Unchecked;
    assert_eq!(records(&source.fetch(&asked[..1])[0]).batches.len(), 3);
}

#[test]
fn unknown_topic_ids_duplicates_and_no_metadata_are_per_partition() {
    let fake = fake();
    let mut source = cluster(&fake, "orders");
    let results = source.fetch(&[
        request(ORDERS, 0, 0),
        request(ORDERS, 0, 0),
        request(TopicId([9; 16]), 0, 0),
        request(ORDERS, 7, 0),
    ]);
    assert_eq!(records(&results[0]).batches.len(), 3);
    assert!(matches!(
        results[1].outcome,
        Err(PartitionFetchError::Duplicate { .. })
    ));
    let error = results[2].outcome.as_ref().expect_err("unknown id");
    assert!(matches!(error, PartitionFetchError::UnknownTopicId { .. }));
    assert!(error.to_string().contains("UNKNOWN_TOPIC_ID"), "{error}");
    let error = results[3].outcome.as_ref().expect_err("no partition 7");
    assert!(error.to_string().contains("4 partitions"), "{error}");

    // Nothing listens: every partition says so, naming the address.
    let mut nowhere = SourceCluster::new(
        "127.0.0.1:1",
        TopicSelection::parse("orders").expect("selection"),
        options(),
    );
    let error = nowhere.metadata().expect_err("nothing listens");
    assert!(error.to_string().contains("127.0.0.1:1"), "{error}");
    let results = nowhere.fetch(&[request(ORDERS, 0, 0)]);
    let error = results[0].outcome.as_ref().expect_err("no metadata");
    assert!(
        matches!(error, PartitionFetchError::NoMetadata { .. }),
        "{error}"
    );
    assert!(error.to_string().contains("127.0.0.1:1"), "{error}");
}

#[test]
fn a_partial_trailing_batch_and_max_batches_trim_like_kafka_source() {
    let answer = |records: Vec<u8>| PartitionFetch {
        error_code: 0,
        high_watermark: 10,
        last_stable_offset: 4,
        log_start_offset: 0,
        diverging_epoch: None,
        aborted_transactions: vec![],
        records: records.into(),
    };
    let batch = |b, l| {
        RawBatch::synthesize(&kmirror_kernel::batch::BatchHeader::plain(b, l, 0), 1).expect("batch")
    };
    let mut bytes = Vec::new();
    for (b, l) in [(0, 1), (2, 3), (4, 5)] {
        bytes.extend_from_slice(batch(b, l).bytes());
    }
    bytes.truncate(bytes.len() - 3);
    let map = |iso, max| match map_fetch_answer(&answer(bytes.clone()), 2, iso, max) {
        Ok(FetchAnswer::Answer(FetchResponse::Records(r), _)) => r,
        other => panic!("{other:?}"),
    };
    // From offset 2, below the LSO 4: only [2, 3].
    let r = map(FetchIsolation::ReadCommitted, 10);
    assert_eq!(r.batches, vec![batch(2, 3)]);
    assert_eq!((r.next_offset, r.last_epoch), (4, Some(0)));
    // Read-uncommitted reads to the HW, but [4, 5] is cut: still only [2, 3].
    assert_eq!(map(FetchIsolation::ReadUncommitted, 10).batches.len(), 1);
    assert!(map(FetchIsolation::ReadCommitted, 0).batches.is_empty());
    assert_eq!(map(FetchIsolation::ReadCommitted, 0).next_offset, 2);
}
