//! The node model: several mirrored partitions of several topics sharing **one** kernel
//! [`NodeMirror`](kmirror_kernel::node::NodeMirror) and one `__mirror_state` coordinator
//! (`kmirror check --node`).
//!
//! The single-partition model ([`crate::model::MirrorModel`]) checks one `PartitionMirror` per
//! broker in depth: replicas, crashes, elections, failover and failback. This model checks what
//! only a node manager and its executor can get wrong: the routing and batching between
//! partitions, and the node's life across restarts, operator re-runs and a changing source:
//!
//! - `stop_leaves_other_topics_alone`: a stop of one topic changes nothing of another topic's
//!   partitions (state machine, fetch, log, epoch, writability) in the step that delivers it,
//!   and a partition of a topic still asked to mirror never begins a stop (writes STOPPING or
//!   STOPPED);
//! - `coalesced_fetch_part_as_lone_fetch`: each part of a coalesced fetch response does to its
//!   partition exactly what the same answer does to that partition's `PartitionMirror` alone
//!   (same effects, same state after, same next fetch), compared inside the step;
//! - `read_only_unless_stopped`: a partition's produce gate, as persisted, is open only while its
//!   stored state is STOPPED, across restarts;
//! - `no_failback_without_asking`: a STOPPED partition leaves STOPPED only after the operator
//!   failed its topic back since ([`history`]);
//! - `every_partition_progresses_once_faults_stop`: a partition whose fetch part failed or
//!   backed off never stalls another partition's progress once faults stop (bounded liveness,
//!   [`liveness`]);
//! - `every_selected_partition_mirrored_once_source_stops_changing`: once faults, restarts,
//!   operator requests and source changes stop, every partition the source has of every topic
//!   asked to mirror is MIRRORING with the source's batches (a topic the source deleted: FAILED
//!   for good).
//!
//! The world ([`world`]) is one destination node (broker [`NODE_BROKER`]) leading every
//! partition of the topics of [`NodeModelConfig::topics`] with one replica each, a source
//! broker ([`SOURCE_BROKER`]) leading every source partition (so every fetch goes through one
//! fetcher and coalesces), the destination's `__mirror_state` coordinator (a kernel
//! `Coordinator`) and controller catalogue (the kernel's `TopicCatalogue` and request
//! handling), and the messages in flight. Every decision is the kernel's: the node manager's
//! routing and coalescing, each partition's mirroring, the coordinator's fencing, the
//! controller's requests, discovery's choice of topics. The world only delivers messages,
//! serves fetches with the kernel's `serve_fetch`, applies log effects with the kernel's
//! `apply_log_effect`, and injects the bounded nondeterminism: fetch faults (one partition's
//! part of a coalesced response failed or retriable, or the whole coalesced request lost),
//! crashes of the node and its restart ([`restart`]), the operator's stops, re-runs of the
//! selection, failbacks and growth of a failed-over topic ([`operator`]), and the source's
//! changes: a partition added, a topic deleted ([`source`]).

pub mod actions;
pub mod config;
pub mod executor;
pub mod history;
pub mod liveness;
pub mod lone;
pub mod model;
pub mod operator;
pub mod properties;
pub mod restart;
pub mod runner;
pub mod source;
pub mod trace;
pub mod world;

pub use config::NodeModelConfig;
pub use model::NodeModel;
pub use world::{NODE_BROKER, SOURCE_BROKER};
