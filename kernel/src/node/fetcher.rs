//! Fetch coalescing, as Kafka's fetcher threads do it: one request per source leader and
//! fetcher, covering every partition ready to fetch.
//!
//! A partition's [`Effect::Fetch`](crate::effect::Effect::Fetch) is not handed to the executor:
//! the manager keeps it in the partition's **fetch slot** until [`NodeMirror::poll_fetches`]
//! puts it in a [`CoalescedFetch`]. A slot is
//!
//! - **ready** once the partition asked for the fetch, or at `not_before` after a retriable
//!   error;
//! - **in flight** once polled, until its fetcher's response (or failure) comes back.
//!
//! A partition is assigned to fetcher [`fetcher_id`] of its source leader. Each fetcher has at
//! most one request in flight (a Kafka fetcher thread waits for its response), so a partition
//! that becomes ready meanwhile goes in that fetcher's next request. A partition with no slot
//! (backing off in FAILED, truncating in PREPARING, PAUSED, STOPPING...), with a slot not ready,
//! or with no known source leader is simply not in any request; the others are not delayed.

use serde::{Deserialize, Serialize};

use crate::config::FetchIsolation;
use crate::effect::RequestId;
use crate::input::FetchOutcome;
use crate::mutant::{self, Mutant};
use crate::partitioner::murmur2;
use crate::types::{BrokerId, LeaderEpoch, Offset, TimestampMs, TopicId};

use std::collections::BTreeMap;

use crate::config::MirrorConfig;
use crate::input::Input;

use super::{InvalidNodeConfig, NodeError, NodeLogs, NodeMirror, NodeOutput, PartitionKey};

/// The fetcher of partition `key` among `num_fetchers` (Kafka's `num.replica.fetchers`):
/// `abs(31 * murmur2(topic id bytes) + partition) % num_fetchers`, with Java's wrapping `int`
/// arithmetic and Kafka's `Utils.abs` (`i32::MIN` is 0).
///
/// Kafka's `AbstractFetcherManager.getFetcherId` is `abs(31 * topic.hashCode() + partition) %
/// numFetchersPerBroker`: a topic's consecutive partitions go to consecutive fetchers, so each
/// fetcher gets an even share of every topic. The topic's hash here is murmur2 of its id,
/// because the kernel knows no names. `num_fetchers == 0` is treated as 1.
pub fn fetcher_id(key: &PartitionKey, num_fetchers: u32) -> u32 {
    if num_fetchers <= 1 {
        return 0; // Kafka's default of one fetcher: no hash needed.
    }
    let hash = 31i32
        .wrapping_mul(murmur2(&key.topic_id.0))
        .wrapping_add(key.partition);
    // Kafka's `Utils.abs`: `Integer.MIN_VALUE` maps to 0.
    let positive = if hash == i32::MIN {
        0
    } else {
        hash.unsigned_abs()
    };
    positive % num_fetchers
}

/// One fetcher: a source broker and a fetcher number on it (Kafka's `BrokerIdAndFetcherId`).
#[derive(
    Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Default, Serialize, Deserialize,
)]
pub struct FetcherKey {
    /// The source broker leading the partitions fetched.
    pub source_broker: BrokerId,
    /// The fetcher's number, below `num_fetchers`.
    pub fetcher_id: u32,
}

/// One partition's part of a fetch: the fields of the partition's own
/// [`Effect::Fetch`](crate::effect::Effect::Fetch), unchanged.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize)]
pub struct FetchRequest {
    /// The partition's correlation id: echo it in the answer.
    pub request: RequestId,
    /// The offset to fetch from.
    pub fetch_offset: Offset,
    /// The epoch of the last local batch, for the source's divergence check.
    pub last_fetched_epoch: Option<LeaderEpoch>,
    /// How far the source may read.
    pub isolation: FetchIsolation,
}

/// One request to send: every ready partition of one fetcher.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize)]
pub struct CoalescedFetch {
    /// The source broker and fetcher it goes through.
    pub fetcher: FetcherKey,
    /// The partitions, in key order, each with its own fetch.
    pub partitions: Vec<(PartitionKey, FetchRequest)>,
}

/// What the source answered for one partition of a coalesced fetch.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize)]
pub enum PartitionFetchResult {
    /// An answer the partition acts on: fed as
    /// [`Input::FetchCompleted`].
    Completed(FetchOutcome),
    /// A non-retriable error (authorization, unknown topic...): fed as
    /// [`Input::RequestFailed`], as for a lone fetch.
    Failed(String),
    /// A retriable error (`NOT_LEADER_OR_FOLLOWER`, `UNKNOWN_LEADER_EPOCH`, a timeout...): the
    /// partition is not told; its fetch is sent again after the node's fetch backoff, as a
    /// Kafka fetcher thread delays a partition with an error.
    Retriable(String),
}

/// One partition's answer in a [`CoalescedFetchResponse`].
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize)]
pub struct PartitionFetchResponse {
    /// The partition.
    pub key: PartitionKey,
    /// The request answered (from the [`FetchRequest`]).
    pub request: RequestId,
    /// The answer.
    pub result: PartitionFetchResult,
}

/// The source's answer to a [`CoalescedFetch`]. A partition of the request left out of the
/// response (as Kafka's incremental fetch sessions leave out partitions with nothing new) is
/// fetched again in the fetcher's next request, and its partition is not told.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize)]
pub struct CoalescedFetchResponse {
    /// The fetcher the request went through.
    pub fetcher: FetcherKey,
    /// The answers, one per partition at most.
    pub partitions: Vec<PartitionFetchResponse>,
}

/// Where a partition's fetch is.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize)]
pub enum FetchStatus {
    /// To be sent by the next poll at or after `not_before` (`None`: at once).
    Ready {
        /// The earliest poll time (after a retriable error), in the caller's milliseconds.
        not_before: Option<TimestampMs>,
    },
    /// Sent through this fetcher; waiting for its response.
    InFlight(FetcherKey),
}

/// A partition's fetch and where it is.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize)]
pub struct FetchSlot {
    /// The partition's fetch.
    pub request: FetchRequest,
    /// Where it is.
    pub status: FetchStatus,
}

impl FetchSlot {
    /// Whether a poll at `now` may send it.
    pub(super) fn ready_at(&self, now: TimestampMs) -> bool {
        matches!(self.status, FetchStatus::Ready { not_before } if not_before.is_none_or(|t| t <= now))
    }
}

impl NodeMirror {
    /// Takes every ready fetch whose fetcher has no request in flight, marks it in flight, and
    /// returns one [`CoalescedFetch`] per fetcher, in fetcher order.
    pub fn poll_fetches(&mut self, now: TimestampMs) -> Vec<CoalescedFetch> {
        let mut groups: BTreeMap<FetcherKey, Vec<(PartitionKey, FetchRequest)>> = BTreeMap::new();
        // Led partitions come in key order, so a topic's come together: look it up once.
        let mut topic: Option<(TopicId, Option<&Vec<Option<BrokerId>>>)> = None;
        for (key, led) in self.led.iter_mut() {
            let Some(slot) = led.fetch.as_mut() else {
                continue;
            };
            if !slot.ready_at(now) {
                continue;
            }
            let leaders = match topic {
                Some((id, leaders)) if id == key.topic_id => leaders,
                _ => {
                    let leaders = self
                        .topics
                        .get(&key.topic_id)
                        .and_then(|t| t.source_leaders.as_ref());
                    topic = Some((key.topic_id, leaders));
                    leaders
                }
            };
            let leader = leaders.and_then(|l| {
                l.get(usize::try_from(key.partition).ok()?)
                    .copied()
                    .flatten()
            });
            let Some(source_broker) = leader else {
                continue;
            };
            let fetcher = FetcherKey {
                source_broker,
                fetcher_id: fetcher_id(key, self.config.num_fetchers),
            };
            if self.in_flight.contains_key(&fetcher) {
                continue;
            }
            slot.status = FetchStatus::InFlight(fetcher);
            groups
                .entry(fetcher)
                .or_default()
                .push((*key, slot.request));
        }
        groups
            .into_iter()
            .map(|(fetcher, partitions)| {
                self.in_flight.insert(
                    fetcher,
                    partitions.iter().map(|(k, f)| (*k, f.request)).collect(),
                );
                CoalescedFetch {
                    fetcher,
                    partitions,
                }
            })
            .collect()
    }

    /// Sets the number of fetchers per source broker (Kafka's `num.replica.fetchers`, which a
    /// broker resizes at runtime: `AbstractFetcherManager.resizeThreadPool`). As Kafka's resize
    /// does, every partition's fetch is taken off its old fetcher: the fetches in flight are
    /// ready again (at once), and an answer to one of the old requests that still comes back is
    /// stale ([`NodeError::StaleFetch`]) or finds no request in flight
    /// ([`NodeError::NoFetchInFlight`]), and changes nothing. A caller that resizes only while
    /// nothing is in flight never sees either. The same number changes nothing.
    pub fn set_num_fetchers(&mut self, num_fetchers: u32) -> Result<(), InvalidNodeConfig> {
        if num_fetchers == 0 {
            return Err(InvalidNodeConfig::NoFetchers);
        }
        if num_fetchers == self.config.num_fetchers {
            return Ok(());
        }
        self.config.num_fetchers = num_fetchers;
        for led in self.led.values_mut() {
            if let Some(slot) = led.fetch.as_mut() {
                if matches!(slot.status, FetchStatus::InFlight(_)) {
                    slot.status = FetchStatus::Ready { not_before: None };
                }
            }
        }
        self.in_flight.clear();
        Ok(())
    }

    pub(super) fn on_fetch_response(
        &mut self,
        config: &MirrorConfig,
        now: TimestampMs,
        response: CoalescedFetchResponse,
        logs: &impl NodeLogs,
        out: &mut NodeOutput,
    ) {
        let fetcher = response.fetcher;
        let Some(sent) = self.in_flight.remove(&fetcher) else {
            out.errors.push(NodeError::NoFetchInFlight { fetcher });
            return;
        };
        // Which entries of `sent` were answered (by position).
        let mut answered = vec![false; sent.len()];
        let mut next = 0;
        // Mutant `CoalescedFetchDropsAfterFailure`: the first partition whose part failed.
        let mut failed_at: Option<PartitionKey> = None;
        let dropped = |failed_at: Option<PartitionKey>, key: &PartitionKey| {
            mutant::active(config.mutant, Mutant::CoalescedFetchDropsAfterFailure)
                && failed_at.is_some_and(|f| *key > f)
        };
        for PartitionFetchResponse {
            key,
            request,
            result,
        } in response.partitions
        {
            if dropped(failed_at, &key) {
                continue;
            }
            // `sent` is in key order, one entry per key (built by `poll_fetches`); a response
            // usually answers in that order, so the entry after the last one is tried first.
            let at = match sent.get(next) {
                Some((k, _)) if *k == key => Some(next),
                _ => sent.binary_search_by(|(k, _)| k.cmp(&key)).ok(),
            };
            if let Some(at) = at {
                next = at + 1;
            }
            let asked = at.filter(|&at| sent[at].1 == request);
            let first_answer = asked.is_some_and(|at| !std::mem::replace(&mut answered[at], true));
            if !first_answer || self.fetcher_of(&key) != Some(fetcher) {
                out.errors.push(NodeError::StaleFetch {
                    key,
                    request,
                    fetcher,
                });
                continue;
            }
            if !matches!(result, PartitionFetchResult::Completed(_)) {
                failed_at.get_or_insert(key);
            }
            match result {
                PartitionFetchResult::Completed(outcome) => {
                    let input = Input::FetchCompleted { request, outcome };
                    let to = if mutant::active(config.mutant, Mutant::FetchPartToWrongPartition) {
                        let at = sent.iter().position(|(k, _)| *k == key).unwrap_or(0);
                        sent[(at + 1) % sent.len()].0
                    } else {
                        key
                    };
                    self.route(config, to, input, logs, out)
                }
                PartitionFetchResult::Failed(error) => {
                    let input = Input::RequestFailed { request, error };
                    self.route(config, key, input, logs, out)
                }
                PartitionFetchResult::Retriable(_) => {
                    let not_before = Some(now.saturating_add(self.config.fetch_backoff_ms));
                    if !self.requeue(&key, request, fetcher, not_before) {
                        out.errors.push(NodeError::StaleFetch {
                            key,
                            request,
                            fetcher,
                        });
                    }
                }
            }
        }
        for ((key, request), answered) in sent.into_iter().zip(answered) {
            if !answered && !dropped(failed_at, &key) {
                self.requeue(&key, request, fetcher, None);
            }
        }
    }

    /// Makes `key`'s fetch `request`, in flight through `fetcher`, ready again at `not_before`;
    /// false if that is not the partition's fetch in flight there.
    pub(super) fn requeue(
        &mut self,
        key: &PartitionKey,
        request: RequestId,
        fetcher: FetcherKey,
        not_before: Option<TimestampMs>,
    ) -> bool {
        match self.led.get_mut(key).and_then(|l| l.fetch.as_mut()) {
            Some(slot)
                if slot.request.request == request
                    && slot.status == FetchStatus::InFlight(fetcher) =>
            {
                slot.status = FetchStatus::Ready { not_before };
                true
            }
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::TopicId;

    #[test]
    fn fetcher_ids_are_stable_and_in_range() {
        let key = PartitionKey::new(TopicId::from_u64(7), 3);
        assert_eq!(fetcher_id(&key, 1), 0);
        assert_eq!(fetcher_id(&key, 0), 0, "0 fetchers is treated as 1");
        for n in 1..20 {
            assert!(fetcher_id(&key, n) < n);
            assert_eq!(fetcher_id(&key, n), fetcher_id(&key, n));
        }
    }

    #[test]
    fn a_topics_partitions_are_shared_evenly_by_the_fetchers() {
        for topic in 0..50 {
            let id = TopicId::from_u64(topic);
            // Unless `31 * hash + partition` crosses zero (Java's `abs` then turns back).
            let hash = 31i32.wrapping_mul(murmur2(&id.0));
            if (0..12).any(|p| hash.wrapping_add(p).signum() != hash.signum()) {
                continue;
            }
            let mut shares = [0; 6];
            for p in 0..12 {
                shares[fetcher_id(&PartitionKey::new(id, p), 6) as usize] += 1;
            }
            assert_eq!(shares, [2; 6], "topic {topic}");
        }
    }
}
