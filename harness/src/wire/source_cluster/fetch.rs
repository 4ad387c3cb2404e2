//! The coalesced fetch engine of a [`SourceCluster`]: the per-partition requests grouped by
//! their leader, one Fetch per broker (per isolation level), the brokers in parallel, each
//! partition's answer mapped as the kernel's and handed over as soon as its broker's is read.

use std::collections::{BTreeMap, HashSet};

use kmirror_kernel::config::FetchIsolation;
use kmirror_kernel::fetch::FetchResponse;
use kmirror_kernel::types::{LeaderEpoch, Offset, PartitionIndex, TopicId};

use super::super::client::{
    FetchManyParams, FetchPartitionParams, EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, READ_COMMITTED,
    READ_UNCOMMITTED,
};
use super::super::{codes, WireError};
use super::answer::{isolation_level, map_fetch_answer, FetchAnswer};
use super::connection::{BrokerConnection, FetchLane, LaneAssignment};
use super::partition_error::{list_offset_answer, PartitionAt};
use super::{BrokerStats, PartitionFetchError, SourceCluster, SourceClusterOptions};
use crate::record_batch::RawBatch;
use crate::wire::source_cluster::SourcePosition;

/// Which current leader epoch a partition's Fetch carries (KIP-320's fencing).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum CurrentLeaderEpoch {
    /// The leader epoch of the metadata, as Kafka's consumer sends it: a broker that is behind
    /// or ahead answers `UNKNOWN_LEADER_EPOCH` / `FENCED_LEADER_EPOCH` (retryable).
    #[default]
    FromMetadata,
    /// -1: no check.
    Unchecked,
    /// This epoch.
    Known(LeaderEpoch),
}

/// What the fetcher asks for one partition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PartitionFetchRequest {
    /// The topic id.
    pub topic_id: TopicId,
    /// The partition.
    pub partition: PartitionIndex,
    /// The offset to read from.
    pub fetch_offset: Offset,
    /// The epoch of the last batch the fetcher holds (KIP-320), if any.
    pub last_fetched_epoch: Option<LeaderEpoch>,
    /// The current leader epoch sent.
    pub current_leader_epoch: CurrentLeaderEpoch,
    /// The isolation the kernel asked for (`Follower` reads as read-uncommitted: up to the HW).
    pub isolation: FetchIsolation,
    /// At most this many whole batches are returned.
    pub max_batches: usize,
}

/// A partition's answer to a coalesced fetch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionFetched {
    /// The answer, as the kernel's `serve_fetch` gives it for a local source.
    pub response: FetchResponse<RawBatch>,
    /// Where the source's partition is (from the Fetch; `None` after `OFFSET_OUT_OF_RANGE`,
    /// whose answer carries no position).
    pub position: Option<SourcePosition>,
}

/// One partition's result of [`SourceCluster::fetch`].
#[derive(Debug, Clone)]
pub struct PartitionFetchResult {
    /// The topic id asked.
    pub topic_id: TopicId,
    /// The partition asked.
    pub partition: PartitionIndex,
    /// The broker the request went to (`None` when it was not sent).
    pub broker: Option<i32>,
    /// The answer.
    pub outcome: Result<PartitionFetched, PartitionFetchError>,
}

/// The partitions of one fetch lane of a broker in a round, and the lane, taken out of its
/// [`BrokerConnection`] while the lane's thread uses it.
pub(super) struct BrokerJob {
    pub(super) broker: i32,
    pub(super) lane_index: usize,
    pub(super) lane: FetchLane,
    pub(super) items: Vec<JobItem>,
}

/// One partition of a lane's Fetch.
pub(super) struct JobItem {
    /// Its index in the requests asked.
    pub(super) index: usize,
    topic: String,
    /// What is asked.
    pub(super) request: PartitionFetchRequest,
    current_leader_epoch: Option<LeaderEpoch>,
}

/// One partition's outcome.
pub(super) type Outcome = Result<PartitionFetched, PartitionFetchError>;

/// What one lane's share of a round gives back: the lane, the requests it sent and the answers.
pub(super) struct JobOutput {
    pub(super) broker: i32,
    pub(super) lane_index: usize,
    pub(super) lane: FetchLane,
    pub(super) stats: BrokerStats,
    pub(super) results: Vec<(usize, Outcome)>,
    pub(super) refresh: bool,
}

/// Requests grouped by leader ([`SourceCluster::plan`]).
#[derive(Default)]
pub(super) struct Plan {
    /// The results known without asking, with their index.
    pub(super) early: Vec<(usize, Option<i32>, Outcome)>,
    /// The partitions each broker leads.
    pub(super) jobs: BTreeMap<i32, Vec<JobItem>>,
    /// Each broker's address.
    pub(super) addresses: BTreeMap<i32, String>,
    /// Whether the metadata should be asked again.
    pub(super) refresh: bool,
}

/// A broker's connection during a round: its lanes out with their threads, back in their slots.
struct RoundConnection {
    connection: BrokerConnection,
    address: String,
    lanes: Vec<Option<FetchLane>>,
}

impl SourceCluster {
    /// Fetches every partition of `requests`: one Fetch per leader broker and fetch lane (per
    /// isolation level), the brokers and lanes in parallel; one result per request, in the
    /// order asked. See the [module documentation](super).
    pub fn fetch(&mut self, requests: &[PartitionFetchRequest]) -> Vec<PartitionFetchResult> {
        let mut results: Vec<Option<PartitionFetchResult>> =
            (0..requests.len()).map(|_| None).collect();
        self.fetch_each(requests, |answered| {
            for (index, result) in answered {
                results[index] = Some(result);
            }
        });
        requests
            .iter()
            .zip(results)
            .map(|(request, result)| result.unwrap_or_else(|| unfinished(request)))
            .collect()
    }

    /// As [`SourceCluster::fetch`], but hands the results to `on_answered` as they come, on the
    /// calling thread: once the Fetches are sent, those known without asking (possibly none),
    /// then each lane's as soon as its Fetch is read, while the other lanes' and brokers' are
    /// still being read (each lane's Fetch runs on a thread of its own, even when there is one).
    /// Each result comes with its index in `requests`; every request gets exactly one.
    pub fn fetch_each(
        &mut self,
        requests: &[PartitionFetchRequest],
        mut on_answered: impl FnMut(Vec<(usize, PartitionFetchResult)>),
    ) {
        let mut answered = vec![false; requests.len()];
        let mut deliver = |answered: &mut Vec<bool>,
                           results: Vec<(usize, Option<i32>, Outcome)>| {
            let results = results
                .into_iter()
                .map(|(index, broker, outcome)| {
                    answered[index] = true;
                    (index, result_of(&requests[index], broker, outcome))
                })
                .collect();
            on_answered(results);
        };
        let Plan {
            early,
            jobs,
            addresses,
            mut refresh,
        } = self.plan(requests);
        let (mut connections, lane_jobs) = self.lane_jobs(jobs, &addresses);
        let options = self.options;
        let (done, outputs) = std::sync::mpsc::channel();
        std::thread::scope(|scope| {
            let handles: Vec<_> = lane_jobs
                .into_iter()
                .map(|job| {
                    let done = done.clone();
                    let options = &options;
                    scope.spawn(move || {
                        let _ = done.send(run_job(job, options));
                    })
                })
                .collect();
            drop(done);
            // The Fetches are under way: the caller may work on what it already has.
            deliver(&mut answered, early);
            // Until every thread has sent its output or died (a panicked one sends none).
            for output in outputs {
                refresh |= output.refresh;
                let broker = output.broker;
                if let Some(round) = connections.get_mut(&broker) {
                    round.connection.stats += output.stats;
                    round.lanes[output.lane_index] = Some(output.lane);
                }
                let results = output
                    .results
                    .into_iter()
                    .map(|(index, outcome)| (index, Some(broker), outcome))
                    .collect();
                deliver(&mut answered, results);
            }
            for handle in handles {
                let _ = handle.join();
            }
        });
        self.put_back(connections);
        if refresh {
            self.stale = true;
        }
        let missing: Vec<(usize, Option<i32>, Outcome)> = answered
            .iter()
            .enumerate()
            .filter(|(_, done)| !**done)
            .map(|(index, _)| (index, None, unfinished(&requests[index]).outcome))
            .collect();
        if !missing.is_empty() {
            deliver(&mut answered, missing);
        }
    }

    /// `requests` grouped by their leader in the metadata (refreshed first if due), and the
    /// results known without asking: a partition asked twice, one with no known leader.
    pub(super) fn plan(&mut self, requests: &[PartitionFetchRequest]) -> Plan {
        let mut plan = Plan::default();
        self.refresh_if_due();
        let mut seen = HashSet::new();
        for (index, request) in requests.iter().enumerate() {
            let hex = || request.topic_id.to_string();
            if !seen.insert((request.topic_id, request.partition)) {
                plan.early.push((
                    index,
                    None,
                    Err(PartitionFetchError::Duplicate {
                        topic_id: hex(),
                        partition: request.partition,
                    }),
                ));
                continue;
            }
            match self.resolve(request.topic_id, request.partition) {
                Err(error) => {
                    plan.refresh |= !matches!(error, PartitionFetchError::NoMetadata { .. });
                    plan.early.push((index, None, Err(error)));
                }
                Ok(leader) => {
                    plan.addresses.insert(leader.broker, leader.address);
                    plan.jobs.entry(leader.broker).or_default().push(JobItem {
                        index,
                        topic: leader.topic,
                        request: *request,
                        current_leader_epoch: match request.current_leader_epoch {
                            CurrentLeaderEpoch::FromMetadata => Some(leader.leader_epoch),
                            CurrentLeaderEpoch::Unchecked => None,
                            CurrentLeaderEpoch::Known(e) => Some(e),
                        },
                    });
                }
            }
        }
        plan
    }

    /// Each broker's share of a round split into its lanes' jobs (each lane taken out of its
    /// connection for its thread), and the connections waiting for their lanes.
    fn lane_jobs(
        &mut self,
        jobs: BTreeMap<i32, Vec<JobItem>>,
        addresses: &BTreeMap<i32, String>,
    ) -> (BTreeMap<i32, RoundConnection>, Vec<BrokerJob>) {
        let mut connections: BTreeMap<i32, RoundConnection> = BTreeMap::new();
        let mut lane_jobs: Vec<BrokerJob> = Vec::new();
        let assignment = self
            .metadata
            .as_ref()
            .map(LaneAssignment::of)
            .unwrap_or_default();
        for (broker, items) in jobs {
            let mut connection = self.take_connection(broker, &addresses[&broker]);
            let lanes = self.fetches_in_flight(assignment.led_by(broker).max(items.len()));
            if connection.lanes.len() != lanes {
                connection.set_lanes(lanes, &self.options, &self.security);
            }
            let mut shares: Vec<Vec<JobItem>> = (0..lanes).map(|_| Vec::new()).collect();
            for item in items {
                shares[assignment.lane(item.request.topic_id, item.request.partition, lanes)]
                    .push(item);
            }
            let mut slots: Vec<Option<FetchLane>> = connection.lanes.drain(..).map(Some).collect();
            for (lane_index, items) in shares.into_iter().enumerate() {
                if items.is_empty() {
                    continue;
                }
                if let Some(lane) = slots[lane_index].take() {
                    lane_jobs.push(BrokerJob {
                        broker,
                        lane_index,
                        lane,
                        items,
                    });
                }
            }
            connections.insert(
                broker,
                RoundConnection {
                    connection,
                    address: addresses[&broker].clone(),
                    lanes: slots,
                },
            );
        }
        (connections, lane_jobs)
    }

    /// Puts the round's connections back, each lane in its slot (one whose thread died replaced
    /// by a new, unconnected one), and takes in the round trips they measured.
    fn put_back(&mut self, connections: BTreeMap<i32, RoundConnection>) {
        for (broker, round) in connections {
            let (mut connection, address) = (round.connection, round.address);
            connection.lanes = round
                .lanes
                .into_iter()
                .map(|lane| {
                    lane.unwrap_or_else(|| FetchLane::new(&address, &self.options, &self.security))
                })
                .collect();
            self.note_round_trip(connection.round_trip());
            self.brokers.insert(broker, connection);
        }
    }
}

/// `request`'s result: `outcome`, from `broker` (`None`: not sent).
pub(super) fn result_of(
    request: &PartitionFetchRequest,
    broker: Option<i32>,
    outcome: Outcome,
) -> PartitionFetchResult {
    PartitionFetchResult {
        topic_id: request.topic_id,
        partition: request.partition,
        broker,
        outcome,
    }
}

/// The result of a partition whose broker's fetch did not finish (only a panicked fetch
/// thread leaves one).
pub(super) fn unfinished(request: &PartitionFetchRequest) -> PartitionFetchResult {
    PartitionFetchResult {
        topic_id: request.topic_id,
        partition: request.partition,
        broker: None,
        outcome: Err(PartitionFetchError::Failed {
            topic: request.topic_id.to_string(),
            partition: request.partition,
            source: Box::new(WireError::Malformed {
                address: String::new(),
                api: "Fetch",
                version: -1,
                reason: "the fetch of this partition's broker did not finish".into(),
            }),
        }),
    }
}

/// One lane's share of a round: its Fetch (one per isolation level), then ListOffsets for the
/// partitions out of range.
pub(super) fn run_job(mut job: BrokerJob, options: &SourceClusterOptions) -> JobOutput {
    let broker = job.broker;
    let mut results = Vec::with_capacity(job.items.len());
    let mut refresh = false;
    let mut stats = BrokerStats::default();
    let connection = &mut job.lane;
    let address = connection.client.address().to_owned();
    let mut out_of_range: Vec<&JobItem> = Vec::new();
    for level in [READ_COMMITTED, READ_UNCOMMITTED] {
        let mut items: Vec<&JobItem> = job
            .items
            .iter()
            .filter(|i| isolation_level(i.request.isolation) == level)
            .collect();
        if items.is_empty() {
            continue;
        }
        let len = items.len();
        items.rotate_left(connection.rotation % len);
        connection.rotation = connection.rotation.wrapping_add(1);
        let params = FetchManyParams {
            isolation_level: level,
            max_wait_ms: options.fetch_max_wait_ms,
            max_bytes: options.fetch_max_bytes,
            partitions: items
                .iter()
                .map(|i| FetchPartitionParams {
                    topic_id: i.request.topic_id,
                    partition: i.request.partition,
                    fetch_offset: i.request.fetch_offset,
                    last_fetched_epoch: i.request.last_fetched_epoch,
                    current_leader_epoch: i.current_leader_epoch,
                    partition_max_bytes: options.partition_max_bytes,
                })
                .collect(),
        };
        stats.fetch_requests += 1;
        stats.partitions_fetched += len as u64;
        let answer = if options.fetch_sessions {
            let session = &mut connection.sessions[usize::from(level == READ_COMMITTED)];
            let (incremental, sent) = (session.incremental_requests, session.partitions_sent);
            let answer = connection.client.fetch_many_in_session(session, &params);
            stats.incremental_fetch_requests += session.incremental_requests - incremental;
            stats.partitions_sent += session.partitions_sent - sent;
            answer
        } else {
            stats.partitions_sent += len as u64;
            connection.client.fetch_many(&params)
        };
        let answers = match answer {
            Ok(answers) => answers,
            Err(e) => {
                stats.failed_requests += 1;
                refresh = true;
                for item in items {
                    let at = PartitionAt::of(item, broker, &address);
                    results.push((item.index, Err(at.request_failed(e.clone()))));
                }
                continue;
            }
        };
        for (item, answer) in items.into_iter().zip(answers) {
            let r = &item.request;
            let outcome = match answer {
                Err(e) => Err(PartitionFetchError::Failed {
                    topic: item.topic.clone(),
                    partition: r.partition,
                    source: Box::new(e),
                }),
                Ok(answer) => {
                    match map_fetch_answer(&answer, r.fetch_offset, r.isolation, r.max_batches) {
                        Ok(FetchAnswer::Answer(response, position)) => Ok(PartitionFetched {
                            response,
                            position: Some(position),
                        }),
                        Ok(FetchAnswer::OutOfRange) => {
                            out_of_range.push(item);
                            continue;
                        }
                        Ok(FetchAnswer::Error(code)) => {
                            if codes::is_leadership(code) || code == codes::UNKNOWN_TOPIC_ID {
                                refresh = true;
                            }
                            let principal = connection.client.security().principal();
                            Err(PartitionAt::of(item, broker, &address)
                                .error("Fetch", code, principal))
                        }
                        Err((pos, e)) => Err(PartitionFetchError::Failed {
                            topic: item.topic.clone(),
                            partition: r.partition,
                            source: Box::new(WireError::Malformed {
                                address: address.clone(),
                                api: "Fetch",
                                version: -1,
                                reason: format!(
                                    "the record batch at byte {pos} of {}-{} does not parse: {e}",
                                    item.topic, r.partition
                                ),
                            }),
                        }),
                    }
                }
            };
            results.push((item.index, outcome));
        }
    }
    if !out_of_range.is_empty() {
        let asked: Vec<(String, i32)> = out_of_range
            .iter()
            .map(|i| (i.topic.clone(), i.request.partition))
            .collect();
        let mut answers = Vec::new();
        for timestamp in [EARLIEST_TIMESTAMP, LATEST_TIMESTAMP] {
            stats.list_offsets_requests += 1;
            let answer = connection
                .client
                .list_offsets(&asked, timestamp, READ_UNCOMMITTED);
            if answer.is_err() {
                stats.failed_requests += 1;
                refresh = true;
            }
            answers.push(answer);
        }
        for (k, item) in out_of_range.into_iter().enumerate() {
            let at = PartitionAt::of(item, broker, &address);
            let offset = |answer: &Result<
                Vec<super::super::client::ListOffsetAnswer>,
                WireError,
            >| match answer {
                Err(e) => Err(at.request_failed(e.clone())),
                Ok(all) => list_offset_answer(&at, all.get(k)),
            };
            let outcome = offset(&answers[0]).and_then(|log_start_offset| {
                offset(&answers[1]).map(|high_watermark| PartitionFetched {
                    response: FetchResponse::OffsetOutOfRange {
                        log_start_offset,
                        log_end_offset: high_watermark,
                    },
                    position: None,
                })
            });
            if matches!(outcome, Err(PartitionFetchError::Leadership { .. })) {
                refresh = true;
            }
            results.push((item.index, outcome));
        }
    }
    JobOutput {
        broker,
        lane_index: job.lane_index,
        lane: job.lane,
        stats,
        results,
        refresh,
    }
}

impl PartitionAt<'_> {
    /// The partition of `item` at `broker` (`address`).
    fn of<'a>(item: &'a JobItem, broker: i32, address: &'a str) -> PartitionAt<'a> {
        PartitionAt {
            topic: &item.topic,
            topic_id: item.request.topic_id,
            partition: item.request.partition,
            broker,
            address,
        }
    }
}
