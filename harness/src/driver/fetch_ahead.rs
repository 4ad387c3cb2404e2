//! Fetching ahead: the next fetch is read from the source while this one's batches are written.
//!
//! A mirror's fetch loop is serial: fetch, append, fetch from the new log end. On one partition
//! the two halves cost about the same (reading and CRC-checking the source's bytes; writing them
//! into the destination's segment), so running them one after the other leaves one of them idle
//! at any time. A fetch response with records almost always names the kernel's next request: the
//! offset after its last batch, that batch's leader epoch as the last fetched epoch, the same
//! isolation and size. The driver sends that guessed fetch on a second thread while it feeds
//! the response to the kernel (whose append is the write).
//!
//! **The kernel still decides every fetch.** The answer is kept for one request only: the
//! first fetch the kernel asks for after that feed, and only when it asks exactly the guessed
//! fetch (every parameter equal); then the driver hands the kernel that answer instead of asking
//! the source again. Any other request (the kernel truncated, bumped an epoch, stopped, failed
//! over) drops it, and so does letting go of the source ([`Driver::release_source`], after
//! which others may write to it). An answer without records (nothing new, a diverging epoch)
//! or an error is never kept: those are asked again, fresh. So what the kernel receives is what
//! the source answered to the very request it made, read a little earlier: the same as a fetch
//! response that spent that long on the network, which Kafka's fetchers take as they come.
//!
//! [`Driver::release_source`]: super::Driver::release_source

use kmirror_kernel::config::FetchIsolation;
use kmirror_kernel::effect::RequestId;
use kmirror_kernel::fetch::FetchResponse;
use kmirror_kernel::input::FetchOutcome;
use kmirror_kernel::types::{LeaderEpoch, Offset, TopicId};

use crate::record_batch::RawBatch;
use crate::source::{Source, SourceError};

/// Everything a mirror fetch asks the source: two fetches with equal parameters get the same
/// answer from the same source log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct FetchParams {
    /// The mirrored topic.
    pub topic_id: TopicId,
    /// The first offset asked for.
    pub fetch_offset: Offset,
    /// The leader epoch of the last batch the fetcher has (Kafka's `LastFetchedEpoch`).
    pub last_fetched_epoch: Option<LeaderEpoch>,
    /// How far the source reads.
    pub isolation: FetchIsolation,
    /// Most batches returned.
    pub max_batches: usize,
}

impl FetchParams {
    /// The fetch the kernel is expected to ask once it has appended the records of `outcome`,
    /// this fetch's answer: from the offset after them, with the last one's leader epoch (the
    /// kernel's rule after an append). `None` for an answer without records.
    pub(crate) fn after(&self, outcome: &FetchOutcome) -> Option<FetchParams> {
        match *outcome {
            FetchOutcome::Records {
                next_offset,
                last_epoch,
            } if next_offset > self.fetch_offset => Some(FetchParams {
                fetch_offset: next_offset,
                last_fetched_epoch: last_epoch.or(self.last_fetched_epoch),
                ..*self
            }),
            _ => None,
        }
    }

    /// Sends this fetch to `source`.
    pub(crate) fn send(
        &self,
        source: &mut dyn Source,
    ) -> Result<FetchResponse<RawBatch>, SourceError> {
        source.fetch(
            self.topic_id,
            self.fetch_offset,
            self.last_fetched_epoch,
            self.isolation,
            self.max_batches,
        )
    }
}

/// An answer fetched ahead, kept for one kernel request.
#[derive(Debug)]
pub(crate) struct FetchedAhead {
    /// The kernel's fetch request it answers (which asked exactly what was fetched).
    pub request: RequestId,
    /// The source's answer, with records.
    pub response: FetchResponse<RawBatch>,
}

impl FetchedAhead {
    /// Keeps `answer` to the guessed fetch `guess` for the kernel's `request` when that request
    /// asks exactly `asked == guess` and the answer carries records; `None` otherwise (the
    /// fetch is asked again).
    pub(crate) fn keep(
        request: RequestId,
        asked: FetchParams,
        guess: FetchParams,
        answer: Result<FetchResponse<RawBatch>, SourceError>,
    ) -> Option<FetchedAhead> {
        match answer {
            Ok(FetchResponse::Records(r)) if asked == guess && !r.batches.is_empty() => {
                Some(FetchedAhead {
                    request,
                    response: FetchResponse::Records(r),
                })
            }
            _ => None,
        }
    }

    /// The answer, when it was kept for the kernel's `request`.
    pub(crate) fn answer(self, request: RequestId) -> Option<FetchResponse<RawBatch>> {
        (self.request == request).then_some(self.response)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kmirror_kernel::batch::BatchHeader;
    use kmirror_kernel::fetch::FetchedRecords;

    fn params(fetch_offset: Offset) -> FetchParams {
        FetchParams {
            topic_id: TopicId::from_u64(7),
            fetch_offset,
            last_fetched_epoch: Some(1),
            isolation: FetchIsolation::ReadCommitted,
            max_batches: 10,
        }
    }

    fn records(batches: Vec<RawBatch>) -> FetchResponse<RawBatch> {
        let next_offset = batches.last().map_or(10, |b| b.header().last_offset + 1);
        FetchResponse::Records(FetchedRecords {
            batches,
            next_offset,
            last_epoch: Some(2),
            log_start_offset: 0,
            high_watermark: 20,
            last_stable_offset: 20,
            log_end_offset: 20,
        })
    }

    fn batch() -> RawBatch {
        RawBatch::synthesize(&BatchHeader::plain(10, 14, 2), 0).unwrap()
    }

    #[test]
    fn the_guess_is_the_kernels_next_fetch_after_an_append() {
        let asked = params(10);
        let outcome = records(vec![batch()]).outcome();
        let next = asked.after(&outcome).unwrap();
        assert_eq!((next.fetch_offset, next.last_fetched_epoch), (15, Some(2)));
        assert_eq!((next.topic_id, next.max_batches), (asked.topic_id, 10));
        assert_eq!(asked.after(&records(vec![]).outcome()), None, "nothing new");
    }

    #[test]
    fn an_answer_is_kept_for_exactly_the_request_it_guessed() {
        let (guess, request) = (params(15), RequestId(4));
        let kept = |asked, answer| FetchedAhead::keep(request, asked, guess, answer);
        assert!(kept(params(15), Ok(records(vec![batch()]))).is_some());
        assert!(
            kept(params(10), Ok(records(vec![batch()]))).is_none(),
            "other offset"
        );
        assert!(
            kept(params(15), Ok(records(vec![]))).is_none(),
            "nothing new"
        );
        let gone = Err(SourceError::Busy { dir: "east".into() });
        assert!(kept(params(15), gone).is_none(), "an error is asked again");

        let mut other = guess;
        other.isolation = FetchIsolation::ReadUncommitted;
        assert!(
            kept(other, Ok(records(vec![batch()]))).is_none(),
            "other isolation"
        );

        let ahead = || kept(params(15), Ok(records(vec![batch()]))).unwrap();
        assert!(ahead().answer(request).is_some());
        assert!(ahead().answer(RequestId(5)).is_none(), "a later request");
    }
}
