//! Fetches kept in flight between calls: each fetch lane sends its next Fetch as soon as its
//! caller hands it one, whatever the other lanes are doing.
//!
//! [`SourceCluster::fetch_each`] is a round: every lane's Fetch goes out together and the call
//! returns once the last answer is in, so each round costs the slowest lane's round trip plus
//! the transfer of the whole round's answers. Over a long link that barrier is what a follower
//! lags by. Here each fetch is sent on its own thread through the lane its caller names
//! ([`SourceCluster::send_fetches`]), on that lane's own connection to the partition's leader
//! (the pipeline's lanes are not the round's: lane 0 of a broker's connection stays free for
//! Metadata and ListOffsets), and the answers are taken one lane at a time
//! ([`SourceCluster::poll_fetched`]), so the caller can hand that lane its next fetch while
//! the others are still on the wire: Kafka's fetcher threads, each with its own request in
//! flight.
//!
//! A lane carries one Fetch at a time: a fetch for a lane still in flight waits for it (the
//! caller names the lane by its fetcher, which has one request in flight at a time, so this
//! happens only when the caller and the metadata disagree on a leader). A partition stays on
//! its lane, so each lane's fetch sessions stay incremental.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::panic::AssertUnwindSafe;
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender};
use std::time::Duration;

use super::connection::FetchLane;
use super::fetch::{result_of, run_job, unfinished, BrokerJob, JobItem, JobOutput, Plan};
use super::{BrokerStats, PartitionFetchRequest, PartitionFetchResult, SourceCluster};

/// A lane of the pipeline: a source broker and the lane's number there.
type LaneKey = (i32, usize);

/// The pipeline's lanes and their fetches ([module documentation](self)).
#[derive(Debug)]
pub(super) struct Pipeline {
    /// The lanes not carrying a Fetch, with their connections.
    idle: BTreeMap<LaneKey, FetchLane>,
    /// The lanes carrying a Fetch, with what it asked (its caller's tag and indices).
    busy: BTreeMap<LaneKey, Sent>,
    /// The fetches waiting for their lane.
    waiting: BTreeMap<LaneKey, VecDeque<Waiting>>,
    /// The requests sent through the pipeline, per broker.
    pub(super) stats: BTreeMap<i32, BrokerStats>,
    /// The tag of the next fetch sent.
    next_tag: u64,
    done: Sender<Done>,
    answers: Receiver<Done>,
}

/// A fetch on the wire.
#[derive(Debug)]
struct Sent {
    tag: u64,
    asked: Vec<(usize, PartitionFetchRequest)>,
}

/// A fetch waiting for its lane.
struct Waiting {
    tag: u64,
    address: String,
    items: Vec<JobItem>,
}

impl std::fmt::Debug for Waiting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Waiting")
            .field("tag", &self.tag)
            .field("address", &self.address)
            .field("partitions", &self.items.len())
            .finish()
    }
}

/// A lane's thread's answer: `None` if the thread panicked.
struct Done {
    lane: LaneKey,
    output: Option<JobOutput>,
}

impl Pipeline {
    /// No lanes yet.
    pub(super) fn new() -> Self {
        let (done, answers) = channel();
        Pipeline {
            idle: BTreeMap::new(),
            busy: BTreeMap::new(),
            waiting: BTreeMap::new(),
            stats: BTreeMap::new(),
            next_tag: 0,
            done,
            answers,
        }
    }

    /// Closes the idle lanes' connections (the busy ones are replaced when they come back).
    pub(super) fn disconnect(&mut self) {
        self.idle.clear();
    }

    /// The most lanes the pipeline has to one broker (0 before any).
    pub(super) fn most_lanes(&self) -> usize {
        let mut lanes: BTreeMap<i32, BTreeSet<usize>> = BTreeMap::new();
        for (broker, lane) in self.idle.keys().chain(self.busy.keys()) {
            lanes.entry(*broker).or_default().insert(*lane);
        }
        lanes.values().map(BTreeSet::len).max().unwrap_or(0)
    }
}

impl SourceCluster {
    /// Sends `requests` through lane `lane` of each partition's leader in the metadata, each
    /// lane's share as one Fetch on a thread of its own (after the lane's Fetch in flight, if
    /// it has one), and returns at once with the fetch's tag and the results known without
    /// asking (a partition asked twice, one with no known leader), each with its index in
    /// `requests`. The others come from [`SourceCluster::poll_fetched`] with the tag, which no
    /// other fetch of this cluster has (so a caller that takes over a cluster with fetches in
    /// flight tells their answers from its own).
    pub fn send_fetches(
        &mut self,
        lane: usize,
        requests: &[PartitionFetchRequest],
    ) -> (u64, Vec<(usize, PartitionFetchResult)>) {
        let tag = self.pipeline.next_tag;
        self.pipeline.next_tag += 1;
        let Plan {
            early,
            jobs,
            addresses,
            refresh,
        } = self.plan(requests);
        if refresh {
            self.stale = true;
        }
        for (broker, items) in jobs {
            let address = addresses[&broker].clone();
            self.pipeline
                .waiting
                .entry((broker, lane))
                .or_default()
                .push_back(Waiting {
                    tag,
                    address,
                    items,
                });
            self.start_waiting((broker, lane));
        }
        let early = early
            .into_iter()
            .map(|(index, broker, outcome)| (index, result_of(&requests[index], broker, outcome)))
            .collect();
        (tag, early)
    }

    /// The answers of the next lane whose Fetch is read, waiting at most `timeout` for one:
    /// the tag its fetch was sent with and each partition's result with its index in that
    /// call's requests. `None` when no answer came in time, or none is awaited. The lane's
    /// next waiting fetch, if any, is sent before this returns.
    pub fn poll_fetched(
        &mut self,
        timeout: Duration,
    ) -> Option<(u64, Vec<(usize, PartitionFetchResult)>)> {
        if self.pipeline.busy.is_empty() {
            return None;
        }
        let done = match self.pipeline.answers.recv_timeout(timeout) {
            Ok(done) => done,
            Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => return None,
        };
        let lane = done.lane;
        let sent = self.pipeline.busy.remove(&lane)?;
        let asked: BTreeMap<usize, PartitionFetchRequest> = sent.asked.into_iter().collect();
        let results = match done.output {
            Some(output) => {
                *self.pipeline.stats.entry(lane.0).or_default() += output.stats;
                if output.refresh {
                    self.stale = true;
                }
                self.note_round_trip(output.lane.client.round_trip());
                self.pipeline.idle.insert(lane, output.lane);
                output
                    .results
                    .into_iter()
                    .filter_map(|(index, outcome)| {
                        let request = asked.get(&index)?;
                        Some((index, result_of(request, Some(lane.0), outcome)))
                    })
                    .collect()
            }
            // The lane's thread panicked: its connection is gone; its partitions unanswered.
            None => asked
                .iter()
                .map(|(&index, request)| (index, unfinished(request)))
                .collect(),
        };
        self.start_waiting(lane);
        Some((sent.tag, results))
    }

    /// Fetches sent through the pipeline and not answered yet, and those waiting for a lane.
    pub fn fetches_pending(&self) -> usize {
        self.pipeline.busy.len()
            + self
                .pipeline
                .waiting
                .values()
                .map(VecDeque::len)
                .sum::<usize>()
    }

    /// Sends the first fetch waiting for `lane` if the lane is free, on a thread of its own.
    fn start_waiting(&mut self, lane: LaneKey) {
        if self.pipeline.busy.contains_key(&lane) {
            return;
        }
        let Some(waiting) = self
            .pipeline
            .waiting
            .get_mut(&lane)
            .and_then(VecDeque::pop_front)
        else {
            return;
        };
        let connection = match self.pipeline.idle.remove(&lane) {
            Some(connection) if connection.client.address() == waiting.address => connection,
            _ => FetchLane::new(&waiting.address, &self.options, &self.security),
        };
        let asked = waiting
            .items
            .iter()
            .map(|item| (item.index, item.request))
            .collect();
        self.pipeline.busy.insert(
            lane,
            Sent {
                tag: waiting.tag,
                asked,
            },
        );
        let job = BrokerJob {
            broker: lane.0,
            lane_index: lane.1,
            lane: connection,
            items: waiting.items,
        };
        let options = self.options;
        let done = self.pipeline.done.clone();
        std::thread::spawn(move || {
            let output = std::panic::catch_unwind(AssertUnwindSafe(|| run_job(job, &options))).ok();
            let _ = done.send(Done { lane, output });
        });
    }
}
