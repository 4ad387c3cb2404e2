//! Fetching ahead at node scale: the next round's fetches are read from the source cluster
//! while this round's answers are written.
//!
//! A node's fetch loop is serial: a round's coalesced fetches (one Fetch per source broker),
//! then its answers fed to the kernel, whose appends are the writes, then the next round from
//! the new log ends, so while one half runs the other waits. An answer also names the
//! kernel's next request for its partition: the offset after its last batch, with that
//! batch's leader epoch as the last fetched epoch (the same request again when it has none).
//! When the answer says the source has more (it stopped below the high watermark, or below
//! the last stable offset for read-committed: a partition still catching up, or one whose
//! share of the response's `max_bytes` went to others), [`NodeDriver`](super::NodeDriver)
//! sends that guessed request, all of a round's in one more coalesced fetch, on a second
//! thread while it feeds the round. A partition at the source's end is not guessed: at the
//! live tail its next fetch is small, and a Fetch of nothing new would only hold the thread
//! for the broker's `max_wait_ms`.
//!
//! **The kernel still decides every fetch.** A guessed answer is kept for one round only: the
//! next round the kernel asks for ([`NodeMirror::poll_fetches`]). A partition whose request in
//! that round is exactly the guessed one (every parameter equal) gets the kept answer instead
//! of asking the source again; every other partition of the round is fetched as usual, and
//! whatever is left unused is dropped with the round. So is everything kept when the source
//! cluster is replaced or names other leaders. Only answers with batches are kept: one without
//! (nothing new, as far as it knew: a partition must not count as caught up on an answer read
//! before the driver went idle), a diverging epoch, an offset out of range and an error are
//! asked again, fresh. So what the kernel receives is what the source answered to the very
//! request it made, read a little earlier: the same as a fetch response that spent that long
//! on the network, which Kafka's fetchers take as they come.
//!
//! [`NodeMirror::poll_fetches`]: kmirror_kernel::node::NodeMirror::poll_fetches

use std::collections::BTreeMap;

use kmirror_kernel::config::FetchIsolation;
use kmirror_kernel::fetch::FetchResponse;
use kmirror_kernel::node::PartitionKey;

use crate::record_batch::RawBatch;
use crate::wire::source_cluster::{PartitionFetchRequest, PartitionFetchResult, PartitionFetched};

/// The request the kernel is expected to send for a partition once it has fed `response`, the
/// answer to `asked`, when the source has more for it than that answer held: from the offset
/// after its batches (the same offset when it has none), with the last one's leader epoch as
/// the last fetched epoch (the kernel's rule after an append). `None` when the answer reached
/// what the fetch may read (the high watermark; the last stable offset for read-committed),
/// and for an answer without records (a diverging epoch, an offset out of range).
pub(crate) fn guess_next(
    asked: &PartitionFetchRequest,
    response: &FetchResponse<RawBatch>,
) -> Option<PartitionFetchRequest> {
    let FetchResponse::Records(records) = response else {
        return None;
    };
    let readable_to = match asked.isolation {
        FetchIsolation::ReadCommitted => records.last_stable_offset,
        FetchIsolation::ReadUncommitted | FetchIsolation::Follower => records.high_watermark,
    };
    (records.next_offset >= asked.fetch_offset && records.next_offset < readable_to).then(|| {
        PartitionFetchRequest {
            fetch_offset: records.next_offset,
            last_fetched_epoch: records.last_epoch.or(asked.last_fetched_epoch),
            ..*asked
        }
    })
}

fn has_batches(response: &FetchResponse<RawBatch>) -> bool {
    matches!(response, FetchResponse::Records(r) if !r.batches.is_empty())
}

/// The answers of one round's fetch-ahead, each kept with the request it answers, until the
/// next round takes them or drops them. See the [module documentation](self).
#[derive(Debug, Default)]
pub(crate) struct FetchedAhead {
    answers: BTreeMap<PartitionKey, (PartitionFetchRequest, PartitionFetched)>,
}

impl FetchedAhead {
    /// Keeps the answers to `guesses` (in `results`, in the same order) that carry batches;
    /// an answer without (nothing new, as far as it knew), any other answer and an error are
    /// dropped. Replaces what was kept.
    pub(crate) fn keep(
        &mut self,
        guesses: &[(PartitionKey, PartitionFetchRequest)],
        results: Vec<PartitionFetchResult>,
    ) {
        self.answers = guesses
            .iter()
            .zip(results)
            .filter_map(|(&(key, asked), result)| match result.outcome {
                Ok(fetched) if has_batches(&fetched.response) => Some((key, (asked, fetched))),
                _ => None,
            })
            .collect();
    }

    /// The kept answer of partition `key` if it answers exactly `wanted`; either way the
    /// partition's kept answer is gone.
    pub(crate) fn take(
        &mut self,
        key: &PartitionKey,
        wanted: &PartitionFetchRequest,
    ) -> Option<PartitionFetched> {
        let (asked, fetched) = self.answers.remove(key)?;
        (asked == *wanted).then_some(fetched)
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
    fn a_partition_with_more_at_the_source_is_guessed_from_the_offset_after_its_records() {
        let read_committed = asked(10, Some(1));
        assert_eq!(
            guess_next(&read_committed, &records(10, 25, 40, 40)),
            Some(asked(25, Some(2)))
        );
        // No records, but the source has more (the response's bytes went to other
        // partitions): the same request again, its last fetched epoch kept.
        assert_eq!(
            guess_next(&read_committed, &records(10, 10, 40, 40)),
            Some(read_committed)
        );
        // At what the fetch may read: nothing to guess. Read-committed reads to the LSO...
        assert_eq!(guess_next(&read_committed, &records(10, 25, 25, 25)), None);
        assert_eq!(guess_next(&read_committed, &records(10, 25, 40, 25)), None);
        // ...the others to the high watermark.
        let uncommitted = PartitionFetchRequest {
            isolation: FetchIsolation::ReadUncommitted,
            ..read_committed
        };
        assert_eq!(
            guess_next(&uncommitted, &records(10, 25, 40, 25)).map(|g| g.fetch_offset),
            Some(25)
        );
        let diverging = FetchResponse::Diverging(EpochAndOffset {
            epoch: 1,
            end_offset: 5,
        });
        assert_eq!(guess_next(&read_committed, &diverging), None);
        let out_of_range = FetchResponse::OffsetOutOfRange {
            log_start_offset: 20,
            log_end_offset: 30,
        };
        assert_eq!(guess_next(&read_committed, &out_of_range), None);
    }

    #[test]
    fn a_kept_answer_answers_only_the_very_request_guessed_and_only_once() {
        let key = PartitionKey::new(TOPIC, 0);
        let other = PartitionKey::new(TOPIC, 1);
        let third = PartitionKey::new(TOPIC, 2);
        let guessed = asked(25, Some(2));
        let with_batches = || result(records(25, 40, 60, 60));
        let error = PartitionFetchResult {
            outcome: Err(PartitionFetchError::Duplicate {
                topic_id: "t".into(),
                partition: 1,
            }),
            ..with_batches()
        };
        let mut ahead = FetchedAhead::default();
        ahead.keep(
            &[(key, guessed), (other, guessed), (third, guessed)],
            vec![with_batches(), error, result(records(25, 25, 60, 60))],
        );
        assert_eq!(ahead.take(&other, &guessed), None, "an error is never kept");
        assert_eq!(
            ahead.take(&third, &guessed),
            None,
            "nor an answer without batches"
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
        let taken = ahead.take(&key, &guessed).expect("the guessed request");
        assert_eq!(taken.response, records(25, 40, 60, 60));
        assert_eq!(ahead.take(&key, &guessed), None, "used once");

        ahead.keep(&[(key, guessed)], vec![with_batches()]);
        ahead.clear();
        assert_eq!(ahead.take(&key, &guessed), None);
    }
}
