//! One kmirror node mirroring many topics and partitions through the kernel's node manager
//! ([`NodeMirror`](kmirror_kernel::node::NodeMirror)).
//!
//! - [`dest`]: the node destination directory (its format is documented there, and only
//!   there): Kafka's data-dir layout, several `__mirror_state` partitions, `node.properties`.
//! - `commit`: a round's state changes made durable together (group commit), then answered.
//! - [`driver`]: [`NodeDriver`], executing the node manager's tagged effects on those logs,
//!   with a live [`SourceCluster`](crate::wire::SourceCluster) as the source (one Fetch per
//!   source broker per round); one file per job: the loop, the effect executor, the fetch
//!   round, the source's other answers, mirror requests, and the lifecycle with the flush
//!   rules.
//! - [`fetch_ahead`]: the driver reads the next round's fetches while it writes this one's.
//! - [`failback`]: what an explicit failback will truncate, said before it acts.
//! - [`lme_lookup`]: asking a serving kmirror source for its mirror of us and its LME.
//! - [`follow`]: what a running mirror looks at again on every refresh of the source's
//!   metadata (new topics, new partitions, deleted topics) and its periodic checkpoints.
//! - [`metadata_sync`]: [`NodeSync`], topic configs, group offsets and ACLs synced inside the
//!   mirroring process between fetch rounds, behind the kernel's gate.
//! - [`status`]: per-partition progress and the per-topic rollup.
//! - [`control`]: the control channel, `stop`, `pause` and `resume` handed to a running mirror.
//! - [`verify`]: the full CRC scan of every log (`kmirror verify DIR`).
//! - [`single_partition`] and [`convert`]: a single-partition cluster directory (the older
//!   format) read, and made a node destination (`kmirror convert`).
//! - [`error`]: what fails, as [`NodeError`].
//!
//! A single-partition cluster directory, the destination format before the node, is refused
//! by every command with a message naming `kmirror convert`; [`single_partition`] reads its
//! files and [`convert`] turns it into a node destination.

mod commit;
pub mod control;
pub mod convert;
pub mod dest;
pub mod driver;
pub mod error;
pub mod failback;
pub mod fetch_ahead;
pub mod follow;
pub mod lme_lookup;
pub mod metadata_sync;
pub mod single_partition;
pub mod status;
pub mod verify;

#[cfg(test)]
mod behaviour_tests;
#[cfg(test)]
mod crash_chain_tests;
#[cfg(test)]
mod crash_tests;
#[cfg(test)]
mod failback_tests;
#[cfg(test)]
mod fixture;
#[cfg(test)]
mod link_tests;
#[cfg(test)]
mod replica_tests;
#[cfg(test)]
mod serve_admin_tests;
#[cfg(test)]
mod serve_create_tests;
#[cfg(test)]
mod serve_tests;
#[cfg(test)]
mod serve_txn_tests;
#[cfg(test)]
mod sync_crash_tests;
#[cfg(test)]
mod sync_rules_tests;
#[cfg(test)]
mod sync_tests;
#[cfg(test)]
mod tests;

pub use control::{ControlClient, ControlRequest, ControlResponse, RequestStatus, TopicsVerb};
pub use dest::{NodeDest, NodeMeta, NodeTopic};
pub use driver::{
    NodeDriver, NodeDriverOptions, NodeIdle, NodeStats, NodeUntil, TopicChange, TopicResults,
};
pub use error::NodeError;
pub use metadata_sync::{NodeSync, NodeSyncPolicy, NodeSyncReport};
pub use status::{NodeStatus, PartitionStatus, SourceLink, TopicStatus};
