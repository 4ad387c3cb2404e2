//! Pipelined fetching ([`NodeDriver::fetch_pipelined`]): over a round trip long enough for
//! several Fetches in flight per source broker, each fetcher's request goes out as soon as the
//! kernel asks it, while the other fetchers' are still on the wire.
//!
//! A fetch round ([`fetch_round`](super::fetch_round)) sends every ready fetch together and
//! ends when the last answer is in: each round costs the slowest Fetch's round trip plus the
//! transfer of all the round's answers, and a follower lags by that. Here the node manager runs
//! as many fetchers per source broker as the link needs Fetches in flight
//! ([`SourceCluster::fetches_in_flight`], Kafka's `num.replica.fetchers`, resized as a broker
//! resizes its fetcher pool when the measured round trip changes it), each fetcher's request
//! goes out on the fetch lane of the same number ([`SourceCluster::send_fetches`]), and each
//! step of the driver takes the next lane's answer ([`SourceCluster::poll_fetched`]) and feeds
//! it: the kernel then asks that fetcher's next fetch, sent at the driver's next step. The
//! kernel hears the same inputs as in rounds, one coalesced response per fetcher, each
//! partition's answers in the order asked; only the fetchers no longer wait for each other.
//!
//! **Spacing.** A broker's Fetches go out at least a round trip over the fetcher count apart
//! ([`NodeDriver::fetch_spacing`]): a request asked sooner is held until then. Fetchers that
//! start together (the first requests, or long polls that a producer's write ends at once) would
//! otherwise stay together, every cycle a burst of answers and then a round trip of nothing,
//! and a follower's lag would swing by a whole round trip of data; spaced, their answers come
//! evenly through the round trip. Fetchers already apart are never held.
//!
//! A step waits at most [`ANSWER_WAIT`] for an answer (less when a held request falls due), so
//! that the control channel, the clients and the timers are looked at while the Fetches
//! long-poll an idle source.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use kmirror_kernel::node::{
    CoalescedFetch, CoalescedFetchResponse, FetcherKey, NodeInput, PartitionFetchResponse,
};
use kmirror_kernel::types::BrokerId;

use crate::node::NodeError;
use crate::wire::source_cluster::PartitionFetchRequest;

use super::fetch_round::{fetch_request, NextRound, RoundAnswer, RoundItem};
use super::{NodeDriver, Queued};

/// How long one driver step waits for a lane's answer before it looks at its other work.
pub(super) const ANSWER_WAIT: Duration = Duration::from_millis(20);

/// The fetchers' requests on the wire ([module documentation](self)).
#[derive(Default)]
pub(super) struct Pipelined {
    /// Each fetcher's request in flight, by the tag the source cluster gave it.
    jobs: BTreeMap<u64, InFlight>,
    /// Answers fed since the log dir's checkpoints were last written.
    fed_since_checkpoint: u32,
    /// The requests asked and held until their time, with it ([module documentation](self)).
    held: Vec<(Instant, CoalescedFetch)>,
    /// Per source broker, the earliest time its next Fetch may go out.
    next_send: BTreeMap<BrokerId, Instant>,
}

/// One fetcher's request in flight.
struct InFlight {
    fetcher: FetcherKey,
    /// Its partitions, in the kernel's order, with their answers as they come.
    items: Vec<RoundItem>,
    unanswered: usize,
}

impl NodeDriver {
    /// The fetchers per source broker the node manager should run: as many as the source
    /// cluster wants Fetches in flight per broker for this node's partitions, or one without a
    /// source or without fetch-ahead (fetching and feeding then take turns, in rounds).
    pub(super) fn wanted_fetchers(&self) -> u32 {
        match &self.source {
            Some(source) if self.options.fetch_ahead => {
                u32::try_from(source.fetches_in_flight(self.logs.len().max(1)))
                    .unwrap_or(1)
                    .max(1)
            }
            _ => 1,
        }
    }

    /// Runs `wanted` fetchers per source broker from now on: the kernel takes every fetch off
    /// its old fetcher (each asked again), and the pipelined requests' answers still to come
    /// are dropped when they come, as are the answers read ahead.
    pub(super) fn resize_fetchers(&mut self, wanted: u32) -> Result<(), NodeError> {
        self.node
            .set_num_fetchers(wanted)
            .map_err(|e| NodeError::Invalid {
                message: e.to_string(),
            })?;
        self.pipelined = Pipelined::default();
        self.fetched_ahead.clear();
        Ok(())
    }

    /// Gives up the pipelined requests (the source they were sent to is replaced): each
    /// fetcher gets an empty answer, queued, so that its partitions are asked again.
    pub(super) fn abandon_pipelined(&mut self) {
        let pipelined = std::mem::take(&mut self.pipelined);
        let fetchers = pipelined.jobs.into_values().map(|job| job.fetcher);
        let held = pipelined.held.into_iter().map(|(_, fetch)| fetch.fetcher);
        for fetcher in fetchers.chain(held) {
            self.queue.push_back(Queued::plain(NodeInput::FetchResponse(
                CoalescedFetchResponse {
                    fetcher,
                    partitions: Vec::new(),
                },
            )));
        }
    }

    /// How far apart a source broker's Fetches go out: the measured round trip over the
    /// fetchers per broker (none before a round trip is measured). On the wall clock, as the
    /// round trip is: this is the network's time, not the caller's.
    pub(super) fn fetch_spacing(&self) -> Duration {
        let round_trip = self
            .source
            .as_ref()
            .and_then(|s| s.measured_round_trip())
            .unwrap_or_default();
        round_trip / self.node.config().num_fetchers.max(1)
    }

    /// One pipelined step: the fetches the kernel asks now are sent, each on its fetcher's
    /// lane; then the next lane's answer, if one comes within [`ANSWER_WAIT`], is fed once its
    /// fetcher's request is wholly answered. False when nothing was asked and nothing is in
    /// flight.
    pub(super) fn fetch_pipelined(&mut self) -> Result<bool, NodeError> {
        if self.source.is_none() {
            return Ok(false);
        }
        if self.refresh_leaders() {
            return Ok(true);
        }
        let fetches = self.node.poll_fetches(self.now_ms);
        let asked = !fetches.is_empty();
        if asked {
            self.stats.rounds += 1;
        }
        let spacing = self.fetch_spacing();
        let now = Instant::now();
        for fetch in fetches {
            let next = self
                .pipelined
                .next_send
                .entry(fetch.fetcher.source_broker)
                .or_insert(now);
            let due = (*next).max(now);
            *next = due + spacing;
            self.pipelined.held.push((due, fetch));
        }
        let (due, held): (Vec<_>, Vec<_>) = std::mem::take(&mut self.pipelined.held)
            .into_iter()
            .partition(|(at, _)| *at <= now);
        self.pipelined.held = held;
        for (_, fetch) in due {
            self.send_pipelined(fetch);
        }
        if !self.queue.is_empty() {
            return Ok(true);
        }
        // Wait for an answer, but not past the first held request's time.
        let wait = self
            .pipelined
            .held
            .iter()
            .map(|(at, _)| at.saturating_duration_since(now))
            .min()
            .map_or(ANSWER_WAIT, |until| ANSWER_WAIT.min(until));
        let holding = !self.pipelined.held.is_empty();
        let Some(source) = self.source.as_mut() else {
            return Ok(asked || holding);
        };
        if source.fetches_pending() == 0 {
            if holding {
                std::thread::sleep(wait);
            }
            return Ok(asked || holding);
        }
        let Some((tag, results)) = source.poll_fetched(wait) else {
            return Ok(true);
        };
        self.stats.source_fetches += 1;
        // An answer to a request given up (its fetcher resized, or sent by the driver that had
        // this source before) is dropped.
        let Some(job) = self.pipelined.jobs.get_mut(&tag) else {
            return Ok(true);
        };
        for (index, result) in results {
            if let Some(item) = job.items.get_mut(index) {
                if matches!(item.answer, RoundAnswer::Waiting) {
                    item.answer = RoundAnswer::Answered(result.outcome);
                    job.unanswered -= 1;
                }
            }
        }
        if job.unanswered > 0 {
            return Ok(true);
        }
        let Some(job) = self.pipelined.jobs.remove(&tag) else {
            return Ok(true);
        };
        // The offsets the last answers' flushes moved, once per fetcher's turn: one write per
        // checkpoint file, as a round writes them.
        self.pipelined.fed_since_checkpoint += 1;
        if self.pipelined.fed_since_checkpoint >= self.node.config().num_fetchers {
            self.pipelined.fed_since_checkpoint = 0;
            self.write_checkpoints()?;
        }
        let queued = self.pipelined_answer(job);
        self.feed(queued)?;
        Ok(true)
    }

    /// Sends one fetcher's request on the lane of its number; a request answered without
    /// asking (no known leader) is queued at once.
    fn send_pipelined(&mut self, fetch: CoalescedFetch) {
        let Some(source) = self.source.as_mut() else {
            return;
        };
        let max_batches = self.options.max_fetch_batches.max(1);
        let mut items: Vec<RoundItem> = fetch
            .partitions
            .iter()
            .map(|(key, req)| RoundItem {
                key: *key,
                request: req.request,
                asked: fetch_request(key, req, max_batches),
                answer: RoundAnswer::Waiting,
            })
            .collect();
        let requests: Vec<PartitionFetchRequest> = items.iter().map(|i| i.asked).collect();
        let lane = usize::try_from(fetch.fetcher.fetcher_id).unwrap_or(0);
        let mut unanswered = items.len();
        let (tag, early) = source.send_fetches(lane, &requests);
        for (index, result) in early {
            if let Some(item) = items.get_mut(index) {
                item.answer = RoundAnswer::Answered(result.outcome);
                unanswered -= 1;
            }
        }
        let job = InFlight {
            fetcher: fetch.fetcher,
            items,
            unanswered,
        };
        if unanswered == 0 {
            let queued = self.pipelined_answer(job);
            self.queue.push_back(queued);
        } else {
            self.pipelined.jobs.insert(tag, job);
        }
    }

    /// A fetcher's wholly answered request as the kernel's input; what each answer tells of
    /// the source is recorded as in a round.
    fn pipelined_answer(&mut self, mut job: InFlight) -> Queued {
        let mut batches = BTreeMap::new();
        let mut next_round = NextRound::default();
        let partitions = job
            .items
            .iter_mut()
            .map(|item| PartitionFetchResponse {
                key: item.key,
                request: item.request,
                result: self.heard.hear(item, &mut batches, &mut next_round),
            })
            .collect();
        Queued {
            input: NodeInput::FetchResponse(CoalescedFetchResponse {
                fetcher: job.fetcher,
                partitions,
            }),
            batches,
        }
    }
}
