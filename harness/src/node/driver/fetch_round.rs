//! One fetch round ([`NodeDriver::fetch_round`]): the node manager's fetches asked of the
//! source, each fetcher's answer fed as soon as it is complete, and the next round read ahead.
//! This is how the driver fetches with one Fetch in flight per source broker; with more (a long
//! round trip), it fetches pipelined instead ([`fetch_pipeline`](super::fetch_pipeline)).
//!
//! **Fetches** are the node manager's: [`NodeMirror::poll_fetches`] gives one coalesced fetch
//! per source leader (and fetcher); all of a round go to [`SourceCluster::fetch`] in one call,
//! which sends one Fetch per source broker (one per fetch lane over a long round trip, each
//! with a share of the broker's partitions, all in flight at once); the answers are split back per fetcher
//! ([`NodeInput::FetchResponse`]): records and diverging epochs as `Completed`, retryable
//! errors (leadership moved, broker unreachable) as `Retriable` (the partition waits the fetch
//! backoff, the metadata is refreshed), others as `Failed` (the partition goes FAILED and
//! retries with its backoff).
//! Each fetcher's answer is fed as soon as all its partitions are answered, in the kernel's
//! fetcher order, while the other brokers' Fetches are still being read
//! ([`SourceCluster::fetch_each`]): the first broker's records are written while the last
//! one's are on the wire, and a fetcher answered wholly from the fetch-ahead is fed while the
//! round's Fetches run. The order of the inputs, hence of the effects, is the order without
//! it: only when they run changes. The answers complete last are fed after the round's
//! Fetches, while, if any answer says the source has more, every partition answered with
//! records is fetched again on a second thread, from where the kernel will ask next; the next
//! round takes such an answer only for a request exactly equal to the one guessed (leaving out
//! a partition it found with nothing new, as an incremental fetch session does) and fetches
//! the rest as usual ([`fetch_ahead`](crate::node::fetch_ahead)): while the source has more, a
//! round asks the source only for partitions the last round did not (newly ready ones).
//! [`NodeDriverOptions::fetch_ahead`](super::NodeDriverOptions::fetch_ahead) turns both off:
//! fetching and feeding then take turns.
//!
//! Turning answers into inputs ([`RoundStream`]) needs no driver: what a partition's answer
//! tells of the source (its position, whether it is caught up, its last error) goes to the
//! driver's [`SourceView`], and the inputs made are handed back to the driver to feed.
//!
//! [`NodeMirror::poll_fetches`]: kmirror_kernel::node::NodeMirror::poll_fetches
//! [`SourceCluster::fetch`]: crate::wire::source_cluster::SourceCluster::fetch
//! [`SourceCluster::fetch_each`]: crate::wire::source_cluster::SourceCluster::fetch_each

use std::collections::{BTreeMap, BTreeSet};

use kmirror_kernel::effect::RequestId;
use kmirror_kernel::input::FetchOutcome;
use kmirror_kernel::node::{
    CoalescedFetch, CoalescedFetchResponse, FetchRequest, NodeInput, PartitionFetchResponse,
    PartitionFetchResult, PartitionKey,
};

use crate::node::fetch_ahead::{guess_next, source_has_more, AheadAnswer};
use crate::node::NodeError;
use crate::record_batch::RawBatch;
use crate::wire::source_cluster::SourcePosition;
use crate::wire::source_cluster::{
    CurrentLeaderEpoch, PartitionFetchError, PartitionFetchRequest, PartitionFetched,
};

use super::{NodeDriver, Queued};

/// What the driver last heard from the source of each partition: its fetch answers, its LME
/// answers and the periodic offsets of the partitions not fetching.
#[derive(Debug, Default)]
pub(super) struct SourceView {
    /// The source's position of each partition (its last stable offset), as last answered.
    pub(super) positions: BTreeMap<PartitionKey, SourcePosition>,
    /// The last fetch or LME error of each partition, until an answer without one.
    pub(super) last_errors: BTreeMap<PartitionKey, String>,
    /// The partitions whose last fetch found nothing new at the source.
    pub(super) caught_up: BTreeSet<PartitionKey>,
}

/// One partition of a fetch round.
pub(super) struct RoundItem {
    pub(super) key: PartitionKey,
    /// The kernel's request id.
    pub(super) request: RequestId,
    pub(super) asked: PartitionFetchRequest,
    pub(super) answer: RoundAnswer,
}

/// Where a partition's answer in a fetch round is.
pub(super) enum RoundAnswer {
    /// Asked of the source in this round's Fetches; not read yet.
    Waiting,
    /// The source's answer, or the one read ahead.
    Answered(Result<PartitionFetched, PartitionFetchError>),
    /// Read ahead with nothing new: left out of the fetcher's answer, asked again next round.
    LeftOut,
}

/// A fetch round's answers turned into the kernel's inputs, one coalesced response per fetcher
/// in the kernel's order, each as soon as all its partitions are answered.
struct RoundStream {
    /// Where each fetcher's partitions are in the round (consecutive, in fetcher order).
    ranges: Vec<std::ops::Range<usize>>,
    /// The next fetcher to turn into an input.
    next: usize,
    /// How many of the round's partitions still wait for the source's answer.
    unanswered: usize,
    /// The inputs made and not fed, in order.
    unfed: Vec<Queued>,
    /// What the next round is expected to ask.
    next_round: NextRound,
}

/// The next fetch round as a round's answers predict it
/// ([`fetch_ahead`](crate::node::fetch_ahead)).
#[derive(Default)]
pub(super) struct NextRound {
    /// The guessed next request of each partition answered with records, or left out.
    guesses: Vec<(PartitionKey, PartitionFetchRequest)>,
    /// Whether an answer said the source has more: only then is the next round read ahead.
    source_has_more: bool,
}

impl RoundStream {
    /// The stream of `round`, whose items are `fetches`' partitions, fetcher after fetcher.
    fn new(fetches: &[CoalescedFetch], round: &[RoundItem]) -> Self {
        let mut start = 0;
        let ranges = fetches
            .iter()
            .map(|f| {
                let range = start..start + f.partitions.len();
                start = range.end;
                range
            })
            .collect();
        RoundStream {
            ranges,
            next: 0,
            unanswered: round
                .iter()
                .filter(|item| matches!(item.answer, RoundAnswer::Waiting))
                .count(),
            unfed: Vec::new(),
            next_round: NextRound::default(),
        }
    }

    /// The next fetcher's input, if all its partitions are answered; what each answer tells
    /// of the source is recorded in `heard`.
    fn next_complete(
        &mut self,
        heard: &mut SourceView,
        fetches: &[CoalescedFetch],
        round: &mut [RoundItem],
    ) -> Option<Queued> {
        let fetch = fetches.get(self.next)?;
        let range = self.ranges[self.next].clone();
        if round[range.clone()]
            .iter()
            .any(|item| matches!(item.answer, RoundAnswer::Waiting))
        {
            return None;
        }
        self.next += 1;
        let mut batches = BTreeMap::new();
        let mut partitions = Vec::with_capacity(range.len());
        for item in &mut round[range] {
            if matches!(item.answer, RoundAnswer::LeftOut) {
                self.next_round.guesses.push((item.key, item.asked));
                continue;
            }
            partitions.push(PartitionFetchResponse {
                key: item.key,
                request: item.request,
                result: heard.hear(item, &mut batches, &mut self.next_round),
            });
        }
        Some(Queued {
            input: NodeInput::FetchResponse(CoalescedFetchResponse {
                fetcher: fetch.fetcher,
                partitions,
            }),
            batches,
        })
    }
}

impl SourceView {
    /// A partition's answer as the kernel hears it: records what it tells of the source (the
    /// source position, caught up, the last error) and the guess of its next request.
    pub(super) fn hear(
        &mut self,
        item: &mut RoundItem,
        batches: &mut BTreeMap<PartitionKey, Vec<RawBatch>>,
        next_round: &mut NextRound,
    ) -> PartitionFetchResult {
        let key = item.key;
        match std::mem::replace(&mut item.answer, RoundAnswer::LeftOut) {
            RoundAnswer::Answered(Ok(PartitionFetched { response, position })) => {
                if let Some(p) = position {
                    self.positions.insert(key, p);
                }
                let more = source_has_more(&item.asked, &response);
                next_round.source_has_more |= more;
                if let Some(next) = guess_next(&item.asked, &response) {
                    next_round.guesses.push((key, next));
                }
                let (outcome, fetched) = response.into_parts();
                // Caught up: nothing new, and not because the response's bytes went to others.
                let nothing_new =
                    fetched.is_empty() && !more && matches!(outcome, FetchOutcome::Records { .. });
                if nothing_new {
                    self.caught_up.insert(key);
                } else {
                    self.caught_up.remove(&key);
                }
                self.last_errors.remove(&key);
                if !fetched.is_empty() {
                    batches.insert(key, fetched);
                }
                PartitionFetchResult::Completed(outcome)
            }
            RoundAnswer::Answered(Err(e)) => {
                self.caught_up.remove(&key);
                let error = e.to_string();
                self.last_errors.insert(key, error.clone());
                if e.is_retryable() {
                    PartitionFetchResult::Retriable(error)
                } else {
                    PartitionFetchResult::Failed(error)
                }
            }
            RoundAnswer::Waiting | RoundAnswer::LeftOut => {
                // The source cluster answers every request it is given.
                self.caught_up.remove(&key);
                PartitionFetchResult::Retriable(format!(
                    "no answer to the fetch of partition {key}"
                ))
            }
        }
    }
}

impl NodeDriver {
    /// The source's leaders fed to the kernel before fetches are asked: the metadata asked
    /// again first when stale (on the first fetch, when old, after leadership errors; a
    /// failure leaves the old leaders, and the partitions' errors say what failed). True when
    /// that queued inputs, to be fed first.
    pub(super) fn refresh_leaders(&mut self) -> bool {
        if let Some(source) = self.source.as_mut() {
            if source.metadata_is_stale() {
                let _ = source.metadata();
            }
        }
        self.sync_source_leaders(false);
        !self.queue.is_empty()
    }
}

/// What the source is asked for `key`'s fetch `req` of the kernel.
pub(super) fn fetch_request(
    key: &PartitionKey,
    req: &FetchRequest,
    max_batches: usize,
) -> PartitionFetchRequest {
    PartitionFetchRequest {
        topic_id: key.topic_id,
        partition: key.partition,
        fetch_offset: req.fetch_offset,
        last_fetched_epoch: req.last_fetched_epoch,
        current_leader_epoch: CurrentLeaderEpoch::FromMetadata,
        isolation: req.isolation,
        max_batches,
    }
}

impl NodeDriver {
    /// One fetch round: every ready coalesced fetch, sent as one call to the source cluster
    /// (one Fetch per source broker), except the partitions whose request the last round's
    /// fetch-ahead answered or found with nothing new (those are left out of the answers).
    /// With fetch-ahead, while an answer says the source has more, the round's answers are
    /// fed while the next round's guessed fetches are read on a second thread
    /// ([`fetch_ahead`](crate::node::fetch_ahead)); otherwise they are queued. False when the
    /// kernel asked no fetch.
    pub(super) fn fetch_round(&mut self) -> Result<bool, NodeError> {
        if self.source.is_none() {
            return Ok(false);
        }
        let wanted = self.wanted_fetchers();
        if wanted != self.node.config().num_fetchers {
            self.resize_fetchers(wanted)?;
        }
        if wanted > 1 {
            return self.fetch_pipelined();
        }
        // Group commit of the offsets the last round's flushes moved: one write per file.
        self.write_checkpoints()?;
        if self.refresh_leaders() {
            return Ok(true);
        }
        let fetches = self.node.poll_fetches(self.now_ms);
        // What was read ahead serves this round or nothing.
        let mut ahead = std::mem::take(&mut self.fetched_ahead);
        if fetches.is_empty() {
            return Ok(false);
        }
        let max_batches = self.options.max_fetch_batches.max(1);
        // Every partition of the round in the kernel's order, fetcher after fetcher: its key,
        // request id, what is asked, and the answer once there is one.
        let mut round: Vec<RoundItem> = Vec::new();
        let mut requests = Vec::new();
        for f in &fetches {
            for (key, req) in &f.partitions {
                let asked = fetch_request(key, req, max_batches);
                let answer = match ahead.take(key, &asked) {
                    Some(AheadAnswer::Fetched(fetched)) => {
                        self.stats.fetched_ahead += 1;
                        RoundAnswer::Answered(Ok(fetched))
                    }
                    Some(AheadAnswer::NothingNew) => {
                        self.stats.left_out_ahead += 1;
                        RoundAnswer::LeftOut
                    }
                    None => {
                        requests.push(asked);
                        RoundAnswer::Waiting
                    }
                };
                round.push(RoundItem {
                    key: *key,
                    request: req.request,
                    asked,
                    answer,
                });
            }
        }
        drop(ahead);
        self.stats.rounds += 1;
        let mut stream = RoundStream::new(&fetches, &round);
        let mut fed = Ok(());
        if !requests.is_empty() {
            // Out of `self` while it is read: the answers are fed as they come.
            let Some(mut source) = self.source.take() else {
                return Ok(false);
            };
            let waiting: Vec<usize> = (0..round.len())
                .filter(|&i| matches!(round[i].answer, RoundAnswer::Waiting))
                .collect();
            let streaming = self.options.fetch_ahead;
            source.fetch_each(&requests, |answered| {
                for (k, result) in answered {
                    round[waiting[k]].answer = RoundAnswer::Answered(result.outcome);
                    stream.unanswered -= 1;
                }
                // Each fetcher's answer is fed once complete, in the kernel's order, while
                // other brokers' answers are still read; the last is left to the fetch-ahead.
                if streaming && stream.unanswered > 0 {
                    while let Some(queued) =
                        stream.next_complete(&mut self.heard, &fetches, &mut round)
                    {
                        if fed.is_ok() {
                            self.stats.fed_while_fetching += 1;
                            fed = self.feed(queued);
                        } else {
                            stream.unfed.push(queued);
                        }
                    }
                }
            });
            self.source = Some(source);
            self.stats.source_fetches += 1;
        }
        while let Some(queued) = stream.next_complete(&mut self.heard, &fetches, &mut round) {
            stream.unfed.push(queued);
        }
        // The round's unfed answers go before whatever the fed ones queued, as if every
        // answer had been queued before any was fed.
        let count = stream.unfed.len();
        for queued in stream.unfed.into_iter().rev() {
            self.queue.push_front(queued);
        }
        if let Err(e) = fed {
            self.sync_source_leaders(false);
            return Err(e);
        }
        let next_round = stream.next_round;
        if !self.options.fetch_ahead || !next_round.source_has_more {
            self.sync_source_leaders(false);
            return Ok(true);
        }
        let fed = self.feed_while_fetching_ahead(count, &next_round.guesses);
        self.sync_source_leaders(false);
        fed.map(|()| true)
    }

    /// Feeds the first `count` queued inputs (a round's answers) while `guesses` are fetched
    /// from the source on a second thread; their answers are kept for the next round unless a
    /// feed fails (the rest of the round then stays queued).
    fn feed_while_fetching_ahead(
        &mut self,
        count: usize,
        guesses: &[(PartitionKey, PartitionFetchRequest)],
    ) -> Result<(), NodeError> {
        // Out of `self` while the second thread reads from it.
        let Some(mut source) = self.source.take() else {
            return Ok(());
        };
        let requests: Vec<PartitionFetchRequest> = guesses.iter().map(|(_, r)| *r).collect();
        let (fed, results) = std::thread::scope(|scope| {
            let reading = scope.spawn(|| source.fetch(&requests));
            let mut fed = Ok(());
            for _ in 0..count {
                let Some(queued) = self.queue.pop_front() else {
                    break;
                };
                fed = self.feed(queued);
                if fed.is_err() {
                    break;
                }
            }
            match reading.join() {
                Ok(results) => (fed, results),
                Err(panic) => std::panic::resume_unwind(panic),
            }
        });
        self.source = Some(source);
        self.stats.source_fetches += 1;
        if fed.is_ok() {
            self.fetched_ahead.keep(guesses, results);
        }
        fed
    }
}
