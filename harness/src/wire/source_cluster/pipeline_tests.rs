//! The pipeline ([`SourceCluster::send_fetches`], [`SourceCluster::poll_fetched`]): the same
//! answers as a round, and lanes that do not wait for each other.

use std::time::{Duration, Instant};

use super::lane_tests::{all, answers, cluster, fake};
use super::*;

/// Polls until `pending` is 0 or 5 s passed; each lane's answer as (tag, results).
fn poll_all(cluster: &mut SourceCluster) -> Vec<(u64, Vec<(usize, PartitionFetchResult)>)> {
    let mut got = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(5);
    while cluster.fetches_pending() > 0 && Instant::now() < deadline {
        got.extend(cluster.poll_fetched(Duration::from_millis(100)));
    }
    got
}

#[test]
fn pipelined_fetches_answer_as_a_round_does() {
    let fake = fake();
    let mut round = cluster(&fake, None);
    let expected = answers(&round.fetch(&all(0)));
    let mut pipelined = cluster(&fake, None);
    let (tag, early) = pipelined.send_fetches(0, &all(0));
    assert!(early.is_empty());
    let got = poll_all(&mut pipelined);
    assert_eq!(got.len(), 2, "one Fetch per leader (brokers 1 and 2)");
    let mut results: Vec<(usize, PartitionFetchResult)> = Vec::new();
    for (answered_tag, answered) in got {
        assert_eq!(answered_tag, tag);
        results.extend(answered);
    }
    results.sort_by_key(|(index, _)| *index);
    let indices: Vec<usize> = results.iter().map(|(i, _)| *i).collect();
    assert_eq!(
        indices,
        (0..8).collect::<Vec<_>>(),
        "each request answered once"
    );
    let results: Vec<PartitionFetchResult> = results.into_iter().map(|(_, r)| r).collect();
    assert_eq!(answers(&results), expected);
    assert_eq!(pipelined.most_fetches_in_flight(), 1);
}

#[test]
fn a_lane_answered_at_once_does_not_wait_for_a_lane_long_polling() {
    let fake = fake();
    fake.state().long_poll = true;
    let mut cluster = cluster(&fake, None);
    // Lane 0 asks orders-0 (broker 1, 3 batches of 2 records) at its end: the broker holds it
    // up to 500 ms.
    let end = all(6).remove(0);
    let from_start = all(0).remove(2);
    let (long_poll, early) = cluster.send_fetches(0, &[end]);
    assert!(early.is_empty());
    let (at_once, early) = cluster.send_fetches(1, &[from_start]);
    assert!(early.is_empty());
    assert_ne!(long_poll, at_once, "each fetch its own tag");
    assert_eq!(cluster.fetches_pending(), 2);
    let started = Instant::now();
    let (tag, results) = cluster
        .poll_fetched(Duration::from_secs(2))
        .expect("an answer");
    assert_eq!(tag, at_once, "lane 1's answer first");
    assert!(
        started.elapsed() < Duration::from_millis(400),
        "lane 1 did not wait for lane 0: {:?}",
        started.elapsed()
    );
    assert_eq!(answers(&[results[0].1.clone()]), vec![(Some(1), 6, 3)]);
    assert_eq!(cluster.fetches_pending(), 1, "lane 0 still long-polls");
    assert_eq!(cluster.most_fetches_in_flight(), 2, "two lanes to broker 1");
    // Lane 1 is free again: its next fetch goes out while lane 0 still waits.
    let (again, early) = cluster.send_fetches(1, &[all(6).remove(2)]);
    assert!(early.is_empty());
    let tags: Vec<u64> = poll_all(&mut cluster).into_iter().map(|(t, _)| t).collect();
    assert_eq!(tags.len(), 2);
    assert!(
        tags.contains(&long_poll) && tags.contains(&again),
        "{tags:?}"
    );
}

#[test]
fn a_partition_asked_twice_or_unknown_is_answered_without_asking() {
    let fake = fake();
    let mut cluster = cluster(&fake, None);
    let mut requests = all(0);
    requests.truncate(2);
    requests.push(requests[0]);
    let mut unknown = requests[1];
    unknown.topic_id = TopicId([9; 16]);
    requests.push(unknown);
    let (_, early) = cluster.send_fetches(0, &requests);
    let indices: Vec<usize> = early.iter().map(|(i, _)| *i).collect();
    assert_eq!(indices, vec![2, 3]);
    assert!(matches!(
        early[0].1.outcome,
        Err(PartitionFetchError::Duplicate { .. })
    ));
    assert!(early[1].1.outcome.is_err());
    let answered: usize = poll_all(&mut cluster).iter().map(|(_, r)| r.len()).sum();
    assert_eq!(answered, 2, "the two others asked");
}
