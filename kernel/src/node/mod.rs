//! The node manager: every mirrored partition one broker leads, behind one value.
//!
//! KIP-1279's `MirrorMetadataManager` (reacts to `mirror.name` and leadership changes, talks to
//! the `__mirror_state` coordinators) and `MirrorFetcherManager` (the fetcher threads) as one
//! pure value, [`NodeMirror`].
//!
//! # The contract
//!
//! - **Routing and batching, never decisions.** Every per-partition decision is the
//!   [`PartitionMirror`]'s own: the manager hands each partition exactly the inputs it would get
//!   alone, and returns exactly its effects, tagged with its [`PartitionKey`]. The one
//!   exception is [`Effect::Fetch`](crate::effect::Effect::Fetch), which the manager keeps and
//!   sends coalesced ([`NodeMirror::poll_fetches`]); a partition's share of a coalesced
//!   response is fed to it as the [`Input::FetchCompleted`] (or [`Input::RequestFailed`]) a
//!   lone fetch would get. `kernel/tests/node_props.rs` checks exactly this on random runs, and
//!   the node model (`kmirror check --node`, `model/src/node/`) in every reachable state of a
//!   small world.
//! - **Pure and deterministic**, like the rest of the kernel: no I/O, no clock (`now` is an
//!   argument, in the caller's milliseconds), no randomness, no threads; canonical containers
//!   only, iterated in key order, so a [`NodeMirror`] can sit in a model checker's state.
//! - **Inputs in, effects out.** [`NodeMirror::handle`] takes one [`NodeInput`] and the local
//!   logs ([`NodeLogs`], read only) and returns a [`NodeOutput`]: the tagged effects in order,
//!   and a typed [`NodeError`] per input or partition that changed nothing (an unknown or stale
//!   key, a partition's [`Ignored`](crate::partition::Ignored)...), never a panic. Log effects
//!   are applied by the executor before the next input, as for a lone partition.
//! - **The node's view of the world is input, never decided**: topics and their `mirror.name`
//!   and partition count ([`NodeInput::Topic`]), the source leaders ([`NodeInput::SourceTopic`]),
//!   leadership ([`Input::BecameLeader`] / [`Input::BecameFollower`] in
//!   [`NodeInput::Partition`]), coordinator moves ([`NodeInput::CoordinatorMoved`]).
//!
//! # What it routes
//!
//! - **Leadership, per partition** (KIP-1279's remove-topic flow, steps 3 and 5: the partition
//!   leader's manager acts): `BecameLeader` creates the partition's [`PartitionMirror`] with its
//!   topic's desired state, `BecameFollower` is handed to it (it stops its fetcher and revokes
//!   writes) and then retired: kept inert (no leadership, nothing in flight, nothing routed to
//!   it) only so that its request numbering continues at the next leadership and late answers
//!   from this one stay stale, exactly as for a partition that was never dropped.
//! - **A deleted destination topic** has no input of its own: the executor hands each of its
//!   led partitions `BecameFollower` (the smallest input that makes the manager let a
//!   partition go: no fetch, no request, no gate of it acts again) and stops feeding the
//!   topic. Its topic entry and retired partitions stay, inert; a topic id is never reused, and
//!   should the same topic come back (re-created from its source) its partitions' request
//!   numbering simply continues, as after any leadership change.
//! - **`mirror.name`, per topic**: a changed desired state is fanned out to every partition of
//!   the topic this node leads, in partition order.
//! - **Fetches, coalesced** ([`fetcher`]): one [`CoalescedFetch`] per source leader and fetcher
//!   ([`fetcher_id`]: `abs(31 * murmur2(topic id) + partition) % num_fetchers`, Kafka's
//!   shape), covering every ready partition; a partition not ready is left out without
//!   delaying the others.
//! - **Source partition count**: a source topic with more partitions than the destination
//!   yields [`NodeEffect::CreatePartitions`] (Kafka Admin `createPartitions`), asked once per
//!   count by the node leading destination partition 0; fewer yields
//!   [`NodeError::SourcePartitionsShrank`] and no effect.
//! - **A deleted source topic** ([`NodeInput::SourceTopicDeleted`]) is fanned out to the
//!   topic's led partitions as [`Input::SourceTopicDeleted`], and again to each partition led
//!   later: the partitions decide (FAILED for good unless stopping).
//! - **`__mirror_state` placement**: each mirrored partition's state lives on `__mirror_state`
//!   partition [`mirror_state_partition`](crate::partitioner::mirror_state_partition) of its
//!   key. Coordinator answers ([`NodeInput::CoordinatorAnswer`]) are checked against it and
//!   routed (the executor may batch requests per coordinator partition with
//!   [`NodeMirror::coordinator_partition`]); a move of coordinator
//!   partition `k` fails the in-flight coordinator request of every partition whose state lives
//!   on `k` ([`Input::RequestFailed`] with [`coordinator_moved_error`]), which re-reads after its
//!   backoff: the partition's own reaction to a lost coordinator.
//!
//! # Example: two partitions, one coalesced fetch
//!
//! ```
//! use std::collections::BTreeMap;
//! use kmirror_kernel::config::MirrorConfig;
//! use kmirror_kernel::coordinator::Coordinator;
//! use kmirror_kernel::desired::DesiredState;
//! use kmirror_kernel::effect::Effect;
//! use kmirror_kernel::input::{FetchOutcome, Input};
//! use kmirror_kernel::mem_log::MemLog;
//! use kmirror_kernel::node::{
//!     CoalescedFetchResponse, NodeConfig, NodeEffect, NodeInput, NodeMirror, PartitionFetchResponse,
//!     PartitionFetchResult, PartitionKey,
//! };
//! use kmirror_kernel::types::{MirrorName, TopicId};
//!
//! let config = MirrorConfig::default();
//! let mut node = NodeMirror::new(NodeConfig::new(1)).unwrap();
//! let topic = TopicId::from_u64(7);
//! let keys = [PartitionKey::new(topic, 0), PartitionKey::new(topic, 1)];
//! let logs: BTreeMap<PartitionKey, MemLog> = keys.iter().map(|k| (*k, MemLog::new())).collect();
//! let mut coordinator = Coordinator::new(config.transitions.clone());
//!
//! // The destination topic (mirrored from "east") and its source leaders: broker 101 for both.
//! let desired = DesiredState::Mirror(MirrorName::new("east").unwrap());
//! node.handle(&config, 0, NodeInput::Topic { topic_id: topic, desired, partitions: 2 }, &logs);
//! node.handle(&config, 0, NodeInput::SourceTopic { topic_id: topic, leaders: vec![Some(101); 2] }, &logs);
//!
//! // Lead both; answer every request at once (the source has nothing to mirror yet).
//! let mut pending: Vec<NodeInput> = keys
//!     .iter()
//!     .map(|&key| NodeInput::Partition {
//!         key,
//!         input: Input::BecameLeader { leader_epoch: 1, replicas: im::ordset![1], isr: im::ordset![1] },
//!     })
//!     .collect();
//! while let Some(input) = pending.pop() {
//!     let output = node.handle(&config, 0, input, &logs);
//!     assert!(output.errors.is_empty());
//!     for effect in output.effects {
//!         let NodeEffect::Partition { key, effect } = effect else { continue };
//!         let input = match effect {
//!             Effect::ReadState { request, key } => {
//!                 Input::StateRead { request, value: coordinator.read_state(&key).cloned() }
//!             }
//!             Effect::WriteState { request, key, value, expected_state_epoch } => {
//!                 let value = coordinator.write_state(&key, value, expected_state_epoch).unwrap();
//!                 Input::StateWritten { request, value }
//!             }
//!             Effect::QueryLastMirroredEpoch { request, .. } => {
//!                 Input::LastMirroredEpochReceived { request, lme: None, source_log_start_offset: 0 }
//!             }
//!             _ => continue, // log effects (none here), StartFetcher
//!         };
//!         pending.push(NodeInput::Partition { key, input });
//!     }
//! }
//!
//! // Both partitions are MIRRORING; their fetches go out as one request to broker 101.
//! let fetches = node.poll_fetches(0);
//! assert_eq!(fetches.len(), 1);
//! assert_eq!(fetches[0].fetcher.source_broker, 101);
//! assert_eq!(fetches[0].partitions.len(), 2);
//! assert!(node.poll_fetches(0).is_empty(), "one request in flight per fetcher");
//!
//! // The response is split back: each partition gets its own FetchCompleted and asks again.
//! let response = CoalescedFetchResponse {
//!     fetcher: fetches[0].fetcher,
//!     partitions: fetches[0]
//!         .partitions
//!         .iter()
//!         .map(|(key, fetch)| PartitionFetchResponse {
//!             key: *key,
//!             request: fetch.request,
//!             result: PartitionFetchResult::Completed(FetchOutcome::Records {
//!                 next_offset: fetch.fetch_offset,
//!                 last_epoch: None,
//!             }),
//!         })
//!         .collect(),
//! };
//! let output = node.handle(&config, 0, NodeInput::FetchResponse(response), &logs);
//! assert!(output.errors.is_empty() && output.effects.is_empty());
//! assert_eq!(node.poll_fetches(0)[0].partitions.len(), 2);
//! ```

mod error;
pub mod fetcher;
mod io;
mod route;
mod topic;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::config::MirrorConfig;
use crate::desired::DesiredState;
use crate::effect::RequestId;
use crate::input::Input;
use crate::partition::{Activity, PartitionMirror};
use crate::types::{BrokerId, MirrorName, MirrorPartition, PartitionIndex, TimestampMs, TopicId};

pub use error::{InvalidNodeConfig, NodeError};
pub use fetcher::{
    fetcher_id, CoalescedFetch, CoalescedFetchResponse, FetchRequest, FetchSlot, FetchStatus,
    FetcherKey, PartitionFetchResponse, PartitionFetchResult,
};
pub use io::{coordinator_moved_error, NodeEffect, NodeInput, NodeLogs, NodeOutput};

/// One partition of one topic, as the node addresses it (the source and the destination share
/// topic ids).
#[derive(
    Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Default, Serialize, Deserialize,
)]
pub struct PartitionKey {
    /// The topic.
    pub topic_id: TopicId,
    /// The partition index.
    pub partition: PartitionIndex,
}

impl PartitionKey {
    /// Partition `partition` of `topic_id`.
    pub const fn new(topic_id: TopicId, partition: PartitionIndex) -> Self {
        PartitionKey {
            topic_id,
            partition,
        }
    }

    /// The `__mirror_state` key of this partition in `mirror`.
    pub fn in_mirror(&self, mirror: MirrorName) -> MirrorPartition {
        MirrorPartition {
            mirror,
            topic_id: self.topic_id,
            partition: self.partition,
        }
    }

    /// Every key of `topic_id`, for range queries.
    fn topic_range(topic_id: TopicId) -> std::ops::RangeInclusive<PartitionKey> {
        PartitionKey::new(topic_id, PartitionIndex::MIN)
            ..=PartitionKey::new(topic_id, PartitionIndex::MAX)
    }
}

impl fmt::Display for PartitionKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}-{}", self.topic_id, self.partition)
    }
}

/// The partition count of `__mirror_state` a node gets unless told otherwise: 8.
///
/// Kafka's prototype sizes `__mirror_state` like `__consumer_offsets`, 50 partitions by
/// default; kmirror takes 8 so that a small node does not create 50 partition directories.
/// This is the one default: [`NodeConfig::new`] uses it, and so does a new node destination in
/// the harness, which records the count it was created with (an existing destination keeps
/// its own).
pub const DEFAULT_MIRROR_STATE_PARTITIONS: u32 = 8;

/// How the node runs its partitions.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize)]
pub struct NodeConfig {
    /// This broker's id (the partitions' own replica id).
    pub broker: BrokerId,
    /// Fetchers per source broker (Kafka's `num.replica.fetchers`, default 1).
    pub num_fetchers: u32,
    /// How long a partition waits after a retriable fetch error (Kafka's
    /// `replica.fetch.backoff.ms`, default 1000), in the unit of `now`.
    pub fetch_backoff_ms: TimestampMs,
    /// The partition count of `__mirror_state` (default [`DEFAULT_MIRROR_STATE_PARTITIONS`]).
    pub mirror_state_partitions: u32,
}

impl NodeConfig {
    /// The defaults for broker `broker`: Kafka's 1 fetcher and 1000 ms backoff, and
    /// [`DEFAULT_MIRROR_STATE_PARTITIONS`] `__mirror_state` partitions.
    pub fn new(broker: BrokerId) -> Self {
        NodeConfig {
            broker,
            num_fetchers: 1,
            fetch_backoff_ms: 1_000,
            mirror_state_partitions: DEFAULT_MIRROR_STATE_PARTITIONS,
        }
    }
}

/// The destination topic as this node knows it.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize)]
struct Topic {
    desired: DesiredState,
    partitions: PartitionIndex,
    /// The source leaders, once known (length: the source partition count).
    source_leaders: Option<Vec<Option<BrokerId>>>,
    /// The largest count `createPartitions` was asked for.
    requested_partitions: Option<PartitionIndex>,
    /// The source no longer has the topic ([`NodeInput::SourceTopicDeleted`]).
    source_deleted: bool,
}

/// A partition this node leads.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize)]
struct Led {
    mirror: PartitionMirror,
    fetch: Option<FetchSlot>,
    /// The `__mirror_state` partition of its current key.
    coordinator: Option<u32>,
}

/// Every mirrored partition one broker leads: routing and batching around their
/// [`PartitionMirror`]s (see the [module documentation](self)).
#[derive(Clone, PartialEq, Eq, Hash, Debug, Serialize, Deserialize)]
pub struct NodeMirror {
    config: NodeConfig,
    topics: BTreeMap<TopicId, Topic>,
    led: BTreeMap<PartitionKey, Led>,
    /// Partitions this node led before, inert (after `BecameFollower`), kept for their request
    /// numbering at the next leadership.
    retired: BTreeMap<PartitionKey, PartitionMirror>,
    /// Which led partitions keep their state on each `__mirror_state` partition.
    by_coordinator: BTreeMap<u32, BTreeSet<PartitionKey>>,
    /// The request in flight of each fetcher: the partitions and requests it carried, in key
    /// order.
    in_flight: BTreeMap<FetcherKey, Vec<(PartitionKey, RequestId)>>,
}

impl NodeMirror {
    /// A node leading nothing yet.
    pub fn new(config: NodeConfig) -> Result<Self, InvalidNodeConfig> {
        if config.num_fetchers == 0 {
            return Err(InvalidNodeConfig::NoFetchers);
        }
        if config.mirror_state_partitions == 0 {
            return Err(InvalidNodeConfig::NoMirrorStatePartitions);
        }
        Ok(NodeMirror {
            config,
            topics: BTreeMap::new(),
            led: BTreeMap::new(),
            retired: BTreeMap::new(),
            by_coordinator: BTreeMap::new(),
            in_flight: BTreeMap::new(),
        })
    }

    /// The node's configuration.
    pub fn config(&self) -> &NodeConfig {
        &self.config
    }

    /// The state machine of `key`, if this node leads it.
    pub fn partition(&self, key: &PartitionKey) -> Option<&PartitionMirror> {
        self.led.get(key).map(|l| &l.mirror)
    }

    /// Every partition this node leads, in key order.
    pub fn partitions(&self) -> impl Iterator<Item = (&PartitionKey, &PartitionMirror)> {
        self.led.iter().map(|(k, l)| (k, &l.mirror))
    }

    /// The desired state of `topic_id`, if known.
    pub fn desired(&self, topic_id: &TopicId) -> Option<&DesiredState> {
        self.topics.get(topic_id).map(|t| &t.desired)
    }

    /// The fetch `key`'s partition asked for and where it is, if any.
    pub fn fetch_slot(&self, key: &PartitionKey) -> Option<&FetchSlot> {
        self.led.get(key).and_then(|l| l.fetch.as_ref())
    }

    /// The source leader of `key`, if known.
    pub fn source_leader(&self, key: &PartitionKey) -> Option<BrokerId> {
        let leaders = self.topics.get(&key.topic_id)?.source_leaders.as_ref()?;
        *leaders.get(usize::try_from(key.partition).ok()?)?
    }

    /// The fetcher `key` is fetched through: its source leader and [`fetcher_id`].
    pub fn fetcher_of(&self, key: &PartitionKey) -> Option<FetcherKey> {
        self.source_leader(key).map(|source_broker| FetcherKey {
            source_broker,
            fetcher_id: fetcher_id(key, self.config.num_fetchers),
        })
    }

    /// The `__mirror_state` partition holding the state of led partition `key` under its
    /// current mirror (`None`: not led, or not in a mirror).
    pub fn coordinator_partition(&self, key: &PartitionKey) -> Option<u32> {
        self.led.get(key).and_then(|l| l.coordinator)
    }

    /// The led partitions whose state lives on `__mirror_state` partition
    /// `coordinator_partition`, in key order.
    pub fn partitions_on_coordinator(
        &self,
        coordinator_partition: u32,
    ) -> impl Iterator<Item = &PartitionKey> {
        self.by_coordinator
            .get(&coordinator_partition)
            .into_iter()
            .flatten()
    }

    /// The earliest `now` at which a fetch held back by a retriable error becomes ready, if any.
    pub fn next_fetch_due(&self) -> Option<TimestampMs> {
        self.led
            .values()
            .filter_map(|l| match l.fetch?.status {
                FetchStatus::Ready { not_before } => not_before,
                FetchStatus::InFlight(_) => None,
            })
            .min()
    }

    /// Handles one input and returns its effects and errors.
    pub fn handle(
        &mut self,
        config: &MirrorConfig,
        now: TimestampMs,
        input: NodeInput,
        logs: &impl NodeLogs,
    ) -> NodeOutput {
        let mut out = NodeOutput::default();
        match input {
            NodeInput::Topic {
                topic_id,
                desired,
                partitions,
            } => self.on_topic(config, topic_id, desired, partitions, logs, &mut out),
            NodeInput::SourceTopic { topic_id, leaders } => {
                self.on_source_topic(config, topic_id, leaders, &mut out)
            }
            NodeInput::SourceTopicDeleted { topic_id } => {
                self.on_source_topic_deleted(config, topic_id, logs, &mut out)
            }
            NodeInput::Partition { key, input } => self.route(config, key, input, logs, &mut out),
            NodeInput::CoordinatorAnswer {
                coordinator_partition,
                key,
                input,
            } => {
                let pk = PartitionKey::new(key.topic_id, key.partition);
                match self.led.get(&pk) {
                    None => out.errors.push(NodeError::UnknownPartition { key: pk }),
                    // The led partition at `pk` has `pk`'s topic and partition: its key is
                    // `key` exactly when its mirror is `key`'s (compared without a clone).
                    Some(led)
                        if led.coordinator != Some(coordinator_partition)
                            || led.mirror.desired().mirror() != Some(&key.mirror) =>
                    {
                        out.errors.push(NodeError::WrongCoordinator {
                            key: pk,
                            expected: led.coordinator,
                            got: coordinator_partition,
                        })
                    }
                    Some(_) => self.route(config, pk, input, logs, &mut out),
                }
            }
            NodeInput::CoordinatorMoved {
                coordinator_partition,
            } => {
                let keys: Vec<PartitionKey> = self
                    .partitions_on_coordinator(coordinator_partition)
                    .copied()
                    .collect();
                for key in keys {
                    let request = match self.led.get(&key).map(|l| l.mirror.activity()) {
                        Some(
                            Activity::Reading(r)
                            | Activity::Writing { request: r, .. }
                            | Activity::AwaitingLmeWrite(r),
                        ) => *r,
                        _ => continue,
                    };
                    let error = coordinator_moved_error(coordinator_partition);
                    self.route(
                        config,
                        key,
                        Input::RequestFailed { request, error },
                        logs,
                        &mut out,
                    );
                }
            }
            NodeInput::FetchResponse(response) => {
                self.on_fetch_response(config, now, response, logs, &mut out)
            }
            NodeInput::FetchFailed { fetcher } => {
                let Some(sent) = self.in_flight.remove(&fetcher) else {
                    out.errors.push(NodeError::NoFetchInFlight { fetcher });
                    return out;
                };
                let not_before = Some(now.saturating_add(self.config.fetch_backoff_ms));
                for (key, request) in sent {
                    self.requeue(&key, request, fetcher, not_before);
                }
            }
        }
        out
    }
}
