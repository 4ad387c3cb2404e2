//! Periodic metadata sync (KIP-1279's `MirrorMetadataManager`, seed step 11): topic configs,
//! consumer group offsets and ACLs copied from the source cluster to the destination.
//!
//! # The contract
//!
//! Every function here is pure: the executor reads the source's and the destination's metadata,
//! hands them in as values, and gets back the exact list of changes to apply plus, per item, why
//! an item was skipped or rejected. Nothing is applied by the kernel.
//!
//! - [`topic_config::plan_topic_config`]: source values overwrite destination values, except
//!   the keys that stay local ([`topic_config::LOCAL_KEYS`], the tiered-storage prefixes and the
//!   operator's exclusions); source overrides that disappeared are deleted on the destination.
//! - [`group_offsets::plan_group_offsets`]: for each group with no active member on the
//!   destination and each mirrored partition, commit
//!   `max(dest log start, min(source committed, dest LSO))`, never moving an offset backwards.
//! - [`acl::plan_acls`]: the source bindings the mirror's filters select become creates on the
//!   destination; bindings the mirror created earlier and the source no longer has become
//!   deletes. A binding the mirror did not create is never touched.
//!
//! Each plan is **idempotent**: applying it and planning again yields no change. Invalid or
//! hostile source metadata is rejected **per item** ([`SyncItemError`]); the rest proceeds.
//!
//! # The gate: when a sync write may land
//!
//! Metadata is synced only while the partition's topic is MIRRORING or PAUSED; from the moment a
//! stop is requested the destination owns its metadata. [`gate`] decides it in two steps,
//! because a sync is computed at one time and written later:
//!
//! 1. [`gate::open`] when a round starts: the topic's `mirror.name` must name a mirror without
//!    `.removed` and the partition's persisted state must be MIRRORING or PAUSED. It returns a
//!    [`gate::SyncFence`]: the mirror, state, leader epoch and state epoch the round read.
//! 2. [`gate::admit`] immediately before (and atomically with) each write, against the
//!    *authoritative* `__mirror_state` record and `mirror.name`: the desired state must still
//!    name the fence's mirror without `.removed`, and the record must be the very one the fence
//!    read (same state epoch and leader epoch) in MIRRORING or PAUSED.
//!
//! Every accepted `__mirror_state` write increments the state epoch, and a stop is requested
//! (`mirror.name=<m>.removed`) before STOPPING can be written, so a sync computed while
//! MIRRORING that lands after a stop began is refused: **no sync write lands after STOPPING,
//! let alone STOPPED**, even when it was in flight across the stop. The model checks this with a
//! two-step sync action (`no_sync_write_after_stop`), and two mutants show the property bites:
//! [`Mutant::SyncAfterStop`](crate::mutant::Mutant::SyncAfterStop) (the gate lets writes through
//! once a stop was requested) and
//! [`Mutant::SyncWriteUnfenced`](crate::mutant::Mutant::SyncWriteUnfenced) (no check at write
//! time: a round read while MIRRORING lands after the stop).

pub mod acl;
pub mod error;
pub mod gate;
pub mod group_offsets;
pub mod pattern;
pub mod topic_config;

pub use error::SyncItemError;
