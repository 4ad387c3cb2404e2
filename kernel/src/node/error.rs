//! Why the node manager refused a configuration or an input.

use crate::effect::RequestId;
use crate::partition::Ignored;
use crate::types::{PartitionIndex, TopicId};

use super::fetcher::FetcherKey;
use super::PartitionKey;

/// A [`NodeConfig`](super::NodeConfig) the manager cannot run with.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, thiserror::Error)]
pub enum InvalidNodeConfig {
    /// `num_fetchers` is 0: no fetcher could serve a partition.
    #[error("num_fetchers is 0; Kafka's num.replica.fetchers must be at least 1")]
    NoFetchers,
    /// `mirror_state_partitions` is 0: no coordinator partition could hold a state.
    #[error("mirror_state_partitions is 0; __mirror_state must have at least 1 partition")]
    NoMirrorStatePartitions,
}

/// Why one input (or one partition of a fanned-out input) changed nothing. Like the
/// partition's [`Ignored`], these are expected in a distributed system: reported, never a panic,
/// and nothing changes.
#[derive(Clone, PartialEq, Eq, Debug, thiserror::Error)]
pub enum NodeError {
    /// The topic is not in this node's metadata yet: feed
    /// [`NodeInput::Topic`](super::NodeInput::Topic) first.
    #[error("topic {topic_id:?} is unknown to this node; its metadata (NodeInput::Topic) must come first")]
    UnknownTopic {
        /// The topic.
        topic_id: TopicId,
    },
    /// This node does not lead the partition (never did, or lost the leadership), or the
    /// partition is beyond the topic's partition count.
    #[error("partition {key} is not led by this node")]
    UnknownPartition {
        /// The partition.
        key: PartitionKey,
    },
    /// The executor has no log for a partition this node leads.
    #[error("no local log was supplied for partition {key}; the executor must pass every led partition's log")]
    NoLog {
        /// The partition.
        key: PartitionKey,
    },
    /// The partition's own state machine ignored the input.
    #[error("partition {key}: {reason}")]
    Ignored {
        /// The partition.
        key: PartitionKey,
        /// The partition's reason.
        reason: Ignored,
    },
    /// `mirror.name` is a topic config: a desired-state change for one partition is refused.
    #[error(
        "partition {key}: mirror.name is a topic config; send NodeInput::Topic for the whole topic"
    )]
    TopicWideInput {
        /// The partition the input was addressed to.
        key: PartitionKey,
    },
    /// The destination topic's partition count went down, which Kafka never does: the metadata
    /// is stale or the topic was re-created under the same id.
    #[error("topic {topic_id:?}: partition count went down from {current} to {got}; the update is refused")]
    DestinationPartitionsShrank {
        /// The topic.
        topic_id: TopicId,
        /// The partition count this node knows.
        current: PartitionIndex,
        /// The partition count in the input.
        got: PartitionIndex,
    },
    /// The source topic has fewer partitions than the destination: partitions cannot be
    /// removed, so nothing is created or deleted; the source metadata is refused.
    #[error("topic {topic_id:?}: the source has {source_partitions} partitions but the destination has {destination_partitions}; partitions cannot be removed, the source metadata is refused")]
    SourcePartitionsShrank {
        /// The topic.
        topic_id: TopicId,
        /// The source's partition count.
        source_partitions: PartitionIndex,
        /// The destination's partition count.
        destination_partitions: PartitionIndex,
    },
    /// A fetch response from a fetcher with no request in flight.
    #[error("no fetch is in flight for fetcher {} of source broker {}", fetcher.fetcher_id, fetcher.source_broker)]
    NoFetchInFlight {
        /// The fetcher named by the response.
        fetcher: FetcherKey,
    },
    /// A partition's answer in a fetch response that is not for the partition's current fetch
    /// through this fetcher (not asked, answered twice, or the source leader moved since).
    #[error("partition {key}: stale fetch answer for request {request:?} from fetcher {} of source broker {}", fetcher.fetcher_id, fetcher.source_broker)]
    StaleFetch {
        /// The partition.
        key: PartitionKey,
        /// The request answered.
        request: RequestId,
        /// The fetcher that answered.
        fetcher: FetcherKey,
    },
    /// A coordinator answer from a `__mirror_state` partition that does not hold the
    /// partition's current key.
    #[error("partition {key}: answer from __mirror_state partition {got}, but its state lives on {expected:?}")]
    WrongCoordinator {
        /// The partition.
        key: PartitionKey,
        /// Where its current key lives (`None`: not in a mirror).
        expected: Option<u32>,
        /// Where the answer came from.
        got: u32,
    },
}
