//! kmirror-harness: executes kernel effects on real Kafka logs.
//!
//! The on-disk side: [`record_batch`] (Kafka record batch v2 codec), [`read_buffer`] (the
//! shared buffer fetched batches are slices of), [`segment`] (segment files and their offset
//! index), [`writeback`] (starting the disk's writes of appended bytes early), [`file_log`] (a
//! partition log on disk implementing the kernel's log contract), [`file_region`] (a byte range
//! of a segment file a Fetch answer sends without reading it), [`log_config`] (how a log
//! lays out, flushes and verifies its data), [`topic_partition`] (a partition's name on disk,
//! the topic names a destination may hold, topic ids), [`checkpoint_files`] (a log's checkpoint
//! files and Kafka's offset checkpoint format), [`log_dir_checkpoints`] (Kafka's log-dir-level
//! offset checkpoints, the node layout's), [`recovery`] (what opening a log after a crash
//! repaired), [`durability`] (every fsync and the file-system barrier, counted), [`dir_lock`]
//! (the lock a process holds on a destination directory), [`error`];
//! every write of those files goes through one seam (`fault`, crate-private), where the test
//! build injects torn writes. [`file_log`] uses [`recovery`] and [`log_dir_checkpoints`],
//! which use only the lower modules.
//!
//! Running the kernel on those logs, on the caller's [`clock`]: [`node`] (a node destination:
//! every partition of many topics, driven by the kernel's node manager), [`replicas`] (its
//! in-process follower replicas and Kafka's replication round), [`mirror_state_log`] (a
//! `__mirror_state` partition and the coordinator rebuilt from it), [`wire`] (a Kafka
//! wire-protocol client: a live cluster as the source), [`sync`] (what the metadata sync reads
//! and where it keeps it) and [`serve`] (the node on Kafka's wire, for Kafka's own clients).
//! The `kmirror` binary lives in the `kmirror` crate (`cli/`).

pub mod checkpoint_files;
pub mod clock;
pub mod dir_lock;
pub mod durability;
pub mod error;
mod fault;
pub mod file_log;
pub mod file_region;
pub mod log_config;
pub mod log_dir_checkpoints;
pub mod read_buffer;
pub mod record_batch;
pub mod recovery;
pub mod replicas;
pub mod segment;
pub mod topic_partition;
pub mod writeback;

pub mod mirror_state_log;
pub mod sync;

pub mod wire;

pub mod node;
pub mod serve;
