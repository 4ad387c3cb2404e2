//! Fetching ahead at node scale: the next round's fetches are read from the source cluster
//! while this round's answers are written.
//!
//! A node's fetch loop is serial: a round's coalesced fetches (one Fetch per source broker),
//! then its answers fed to the kernel, whose appends are the writes, then the next round from
//! the new log ends, so while one half runs the other waits. An answer also names the
//! kernel's next request for its partition (`guess_next`): the offset after its last batch,
//! with that batch's leader epoch as the last fetched epoch (the same request again when it
//! has none). When some answer of the round says the source has more (`source_has_more`: it
//! stopped below the high watermark, or below the last stable offset for read-committed: a
//! partition still catching up, or one whose share of the response's `max_bytes` went to
//! others), [`NodeDriver`](super::NodeDriver) sends the guessed request of **every**
//! partition answered with records, all of a round's in one more coalesced fetch, on a second
//! thread while it feeds the round. The partitions at the source's end go too: their
//! requests ride in a Fetch that has data to return at once, so it is not held for the
//! broker's `max_wait_ms`. When no answer says more, nothing is read ahead: the next round
//! asks the source, fresh, and may wait there as Kafka's long poll does.
//!
//! **The kernel still decides every fetch.** A guessed answer is kept for one round only: the
//! next round the kernel asks for ([`NodeMirror::poll_fetches`]). A partition whose request in
//! that round is exactly the guessed one (every parameter equal) gets the kept answer instead
//! of asking the source again; every other partition of the round is fetched as usual, and
//! whatever is left unused is dropped with the round. So is everything kept when the source
//! cluster is replaced or names other leaders. What is kept (`AheadAnswer`):
//!
//! - an answer with batches, or without batches but saying the source has more (the
//!   response's `max_bytes` went to the partitions before it): fed as the round's answer;
//! - an answer with nothing new: the partition is **left out** of its fetcher's answer, as a
//!   Kafka broker's incremental fetch session leaves out a partition with nothing new; the
//!   kernel asks it again in the fetcher's next request, which is read ahead with the others
//!   while any partition has more. It is not fed as an answer because a partition must not
//!   count as caught up on an answer read before the driver went idle;
//! - a diverging epoch, an offset out of range and an error are not kept: asked again, fresh.
//!
//! So once a round's answers are in, while the source has more, each round is written while
//! the next is read, and no round asks the source anything of its own: neither the
//! partitions whose share of the last response went to others, nor the ones at the tail,
//! which alone in a Fetch would hold it for the broker's `max_wait_ms` while the backlog
//! waits. What the kernel receives is what the source answered to the very request it made,
//! read a little earlier: the same as a fetch response that spent that long on the network,
//! which Kafka's fetchers take as they come.
//!
//! [`NodeMirror::poll_fetches`]: kmirror_kernel::node::NodeMirror::poll_fetches

use std::collections::BTreeMap;

use kmirror_kernel::config::FetchIsolation;
use kmirror_kernel::fetch::FetchResponse;
use kmirror_kernel::node::PartitionKey;

use crate::record_batch::RawBatch;
use crate::wire::source_cluster::{PartitionFetchRequest, PartitionFetchResult, PartitionFetched};

/// The request the kernel is expected to send for a partition once it has fed `response`, the
/// answer to `asked`: from the offset after its batches (the same request again when it has
/// none), with the last one's leader epoch as the last fetched epoch (the kernel's rule after
/// an append). `None` for an answer without records (a diverging epoch, an offset out of
/// range): what the kernel asks next depends on what it makes of it.
pub(crate) fn guess_next(
    asked: &PartitionFetchRequest,
    response: &FetchResponse<RawBatch>,
) -> Option<PartitionFetchRequest> {
    let FetchResponse::Records(records) = response else {
        return None;
    };
    (records.next_offset >= asked.fetch_offset).then(|| PartitionFetchRequest {
        fetch_offset: records.next_offset,
        last_fetched_epoch: records.last_epoch.or(asked.last_fetched_epoch),
        ..*asked
    })
}

/// Whether `response`, the answer to `asked`, stopped below what the fetch may read (the high
/// watermark; the last stable offset for read-committed): the partition is still catching up,
/// or its share of the response's `max_bytes` went to others.
pub(crate) fn source_has_more(
    asked: &PartitionFetchRequest,
    response: &FetchResponse<RawBatch>,
) -> bool {
    let FetchResponse::Records(records) = response else {
        return false;
    };
    let readable_to = match asked.isolation {
        FetchIsolation::ReadCommitted => records.last_stable_offset,
        FetchIsolation::ReadUncommitted | FetchIsolation::Follower => records.high_watermark,
    };
    records.next_offset >= asked.fetch_offset && records.next_offset < readable_to
}

/// What the fetch-ahead read for a partition, as the next round uses it.
#[derive(Debug, PartialEq)]
pub(crate) enum AheadAnswer {
    /// The answer, fed as the round's: it has batches, or says the source has more.
    Fetched(PartitionFetched),
    /// Nothing new as far as the source knew then: the partition is left out of the round's
    /// answer (as an incremental fetch session leaves out a partition with nothing new), and
    /// the kernel asks it again in the fetcher's next request.
    NothingNew,
}

/// The answers of one round's fetch-ahead, each kept with the request it answers, until the
/// next round takes them or drops them. See the [module documentation](self).
#[derive(Debug, Default)]
pub(crate) struct FetchedAhead {
    answers: BTreeMap<PartitionKey, (PartitionFetchRequest, AheadAnswer)>,
}

impl FetchedAhead {
    /// Keeps the answers to `guesses` (in `results`, in the same order) that carry records: as
    /// [`AheadAnswer::Fetched`] when they have batches or say the source has more, as
    /// [`AheadAnswer::NothingNew`] otherwise. Any other answer (a diverging epoch, an offset
    /// out of range) and an error are dropped: the next round asks them again. Replaces what
    /// was kept.
    pub(crate) fn keep(
        &mut self,
        guesses: &[(PartitionKey, PartitionFetchRequest)],
        results: Vec<PartitionFetchResult>,
    ) {
        self.answers = guesses
            .iter()
            .zip(results)
            .filter_map(|(&(key, asked), result)| {
                let fetched = result.outcome.ok()?;
                let FetchResponse::Records(records) = &fetched.response else {
                    return None;
                };
                let answer =
                    if !records.batches.is_empty() || source_has_more(&asked, &fetched.response) {
                        AheadAnswer::Fetched(fetched)
                    } else {
                        AheadAnswer::NothingNew
                    };
                Some((key, (asked, answer)))
            })
            .collect();
    }

    /// The kept answer of partition `key` if it answers exactly `wanted`; either way the
    /// partition's kept answer is gone.
    pub(crate) fn take(
        &mut self,
        key: &PartitionKey,
        wanted: &PartitionFetchRequest,
    ) -> Option<AheadAnswer> {
        let (asked, answer) = self.answers.remove(key)?;
        (asked == *wanted).then_some(answer)
    }

    /// Drops every kept answer.
    pub(crate) fn clear(&mut self) {
        self.answers.clear();
    }
}

#[cfg(test)]
mod tests {
    use kmirror_kernel::batch::BatchHeader;
    use kmirror_kernel::fetch::FetchedRecords;
    use kmirror_kernel::types::{EpochAndOffset, TopicId};

    use super::*;
    use crate::wire::source_cluster::{CurrentLeaderEpoch, PartitionFetchError};

    const TOPIC: TopicId = TopicId([3; 16]);

    fn asked(fetch_offset: i64, last_fetched_epoch: Option<i32>) -> PartitionFetchRequest {
        PartitionFetchRequest {
            topic_id: TOPIC,
            partition: 0,
            fetch_offset,
            last_fetched_epoch,
            current_leader_epoch: CurrentLeaderEpoch::FromMetadata,
            isolation: FetchIsolation::ReadCommitted,
            max_batches: 100,
        }
    }

    /// Records from `from` to `next_offset` (one batch of epoch 2, none when equal), the
    /// source's high watermark at `high_watermark` and its last stable offset at `lso`.
    fn records(
        from: i64,
        next_offset: i64,
        high_watermark: i64,
        lso: i64,
    ) -> FetchResponse<RawBatch> {
        let batches = (next_offset > from)
            .then(|| RawBatch::synthesize(&BatchHeader::plain(from, next_offset - 1, 2), 100))
            .transpose()
            .unwrap()
            .into_iter()
            .collect();
        FetchResponse::Records(FetchedRecords {
            next_offset,
            last_epoch: (next_offset > from).then_some(2),
            batches,
            log_start_offset: 0,
            high_watermark,
            last_stable_offset: lso,
            log_end_offset: high_watermark,
        })
    }

    fn result(response: FetchResponse<RawBatch>) -> PartitionFetchResult {
        PartitionFetchResult {
            topic_id: TOPIC,
            partition: 0,
            broker: Some(1),
            outcome: Ok(PartitionFetched {
                response,
                position: None,
            }),
        }
    }

    #[test]
    fn the_next_request_starts_after_the_answer_and_more_is_said_below_what_may_be_read() {
        let read_committed = asked(10, Some(1));
        assert_eq!(
            guess_next(&read_committed, &records(10, 25, 40, 40)),
            Some(asked(25, Some(2)))
        );
        assert!(source_has_more(&read_committed, &records(10, 25, 40, 40)));
        // No records, but the source has more (the response's bytes went to other
        // partitions): the same request again, its last fetched epoch kept.
        assert_eq!(
            guess_next(&read_committed, &records(10, 10, 40, 40)),
            Some(read_committed)
        );
        assert!(source_has_more(&read_committed, &records(10, 10, 40, 40)));
        // At what the fetch may read: the next request is still known, but there is no more.
        // Read-committed reads to the LSO...
        assert_eq!(
            guess_next(&read_committed, &records(10, 25, 25, 25)),
            Some(asked(25, Some(2)))
        );
        assert!(!source_has_more(&read_committed, &records(10, 25, 25, 25)));
        assert!(!source_has_more(&read_committed, &records(10, 25, 40, 25)));
        assert!(!source_has_more(&read_committed, &records(10, 10, 10, 10)));
        // ...the others to the high watermark.
        let uncommitted = PartitionFetchRequest {
            isolation: FetchIsolation::ReadUncommitted,
            ..read_committed
        };
        assert!(source_has_more(&uncommitted, &records(10, 25, 40, 25)));
        let diverging = FetchResponse::Diverging(EpochAndOffset {
            epoch: 1,
            end_offset: 5,
        });
        assert_eq!(guess_next(&read_committed, &diverging), None);
        assert!(!source_has_more(&read_committed, &diverging));
        let out_of_range = FetchResponse::OffsetOutOfRange {
            log_start_offset: 20,
            log_end_offset: 30,
        };
        assert_eq!(guess_next(&read_committed, &out_of_range), None);
        assert!(!source_has_more(&read_committed, &out_of_range));
    }

    #[test]
    fn a_kept_answer_answers_only_the_very_request_guessed_and_only_once() {
        let key = PartitionKey::new(TOPIC, 0);
        let other = PartitionKey::new(TOPIC, 1);
        let third = PartitionKey::new(TOPIC, 2);
        let fourth = PartitionKey::new(TOPIC, 3);
        let fifth = PartitionKey::new(TOPIC, 4);
        let guessed = asked(25, Some(2));
        let with_batches = || result(records(25, 40, 60, 60));
        let error = PartitionFetchResult {
            outcome: Err(PartitionFetchError::Duplicate {
                topic_id: "t".into(),
                partition: 1,
            }),
            ..with_batches()
        };
        let diverging = result(FetchResponse::Diverging(EpochAndOffset {
            epoch: 1,
            end_offset: 5,
        }));
        let mut ahead = FetchedAhead::default();
        ahead.keep(
            &[
                (key, guessed),
                (other, guessed),
                (third, guessed),
                (fourth, guessed),
                (fifth, guessed),
            ],
            vec![
                with_batches(),
                error,
                result(records(25, 25, 60, 60)),
                result(records(25, 25, 25, 25)),
                diverging,
            ],
        );
        assert_eq!(ahead.take(&other, &guessed), None, "an error is never kept");
        assert_eq!(ahead.take(&fifth, &guessed), None, "nor a diverging epoch");
        assert_eq!(
            ahead.take(&third, &guessed),
            Some(AheadAnswer::Fetched(
                result(records(25, 25, 60, 60)).outcome.unwrap()
            )),
            "no batches, but more at the source: fed as it is"
        );
        assert_eq!(
            ahead.take(&fourth, &guessed),
            Some(AheadAnswer::NothingNew),
            "nothing new: left out"
        );

        // Another epoch, offset or isolation than guessed: not that answer, and it is gone.
        assert_eq!(ahead.take(&key, &asked(25, Some(3))), None);
        assert_eq!(ahead.take(&key, &guessed), None, "dropped");

        ahead.keep(&[(key, guessed)], vec![with_batches()]);
        let uncommitted = PartitionFetchRequest {
            isolation: FetchIsolation::ReadUncommitted,
            ..guessed
        };
        assert_eq!(ahead.take(&key, &uncommitted), None);

        ahead.keep(&[(key, guessed)], vec![with_batches()]);
        let Some(AheadAnswer::Fetched(taken)) = ahead.take(&key, &guessed) else {
            panic!("the guessed request's answer")
        };
        assert_eq!(taken.response, records(25, 40, 60, 60));
        assert_eq!(ahead.take(&key, &guessed), None, "used once");

        ahead.keep(&[(key, guessed)], vec![with_batches()]);
        ahead.clear();
        assert_eq!(ahead.take(&key, &guessed), None);
    }
}
