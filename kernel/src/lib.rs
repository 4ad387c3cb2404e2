//! kmirror-kernel: the pure per-partition state machine of Kafka cluster mirroring (KIP-1279).
//!
//! # The contract
//!
//! - **Pure and deterministic.** No files, sockets, clocks, threads or randomness: the same
//!   inputs against the same log give the same effects, always. Time never enters the kernel; a
//!   delay is an effect ([`effect::Effect::ScheduleRetry`]) and its expiry an input.
//! - **Inputs in, effects out.** [`partition::PartitionMirror::handle`] takes one
//!   [`input::Input`] (leadership, a `mirror.name` change, a coordinator or source answer, a
//!   fetch response, a timer) and a read-only view of the partition's log
//!   ([`log::LogView`]), and returns the [`effect::Effect`]s to execute, in order.
//! - **Log effects are applied at once**, with [`apply::apply_log_effect`] on any
//!   [`log::PartitionLog`]; every other effect is a request whose completion comes back as an
//!   input carrying the same [`effect::RequestId`]. A completion the partition is not waiting
//!   for is reported as [`partition::Ignored`] and changes nothing.
//! - **Persist first, act after; revoke early.** A state's side effect runs only once the
//!   `__mirror_state` coordinator ([`coordinator::Coordinator`]) acknowledged it; permissions
//!   (writes by local producers, the fetcher) are taken away before the write that leaves a
//!   state. Nothing that matters is held only in memory: a new leader re-reads the state,
//!   re-asserts it and re-runs its side effect, which is idempotent.
//! - **Who owns what after a restart.** The `__mirror_state` records are the truth: every
//!   [`input::Input::BecameLeader`] reads them again. A record an earlier leadership wrote is
//!   written again before it is acted on, unless the executor guarantees no earlier leadership
//!   can write any more ([`config::MirrorConfig::predecessors_may_write`] off: a node
//!   reopened under its lock), and one written at this leadership's own epoch never is. The
//!   **produce gate** is the kernel's alone: every `BecameLeader` closes it
//!   ([`effect::Effect::SetWritable`]`(false)`) before any other effect, whatever the executor
//!   persisted, and it is opened only once STOPPED is read or written in this leadership. An
//!   executor may persist the gate to show it; it never reads it back as a permission.
//!
//! # Where things live
//!
//! - [`partition`]: the per-partition state machine, [`partition::PartitionMirror`], contract
//!   first and split by concern (leadership, decisions, state writes, PREPARING, MIRRORING,
//!   STOPPING, failure). The KIP's design (the seed) and the KIP authors' prototype
//!   ([`config::MirrorConfig::prototype`]) are one machine that differs by data.
//! - [`node`]: the node manager, [`node::NodeMirror`]: every partition one broker leads, behind
//!   one value. It routes inputs and batches requests (coalesced fetches, `__mirror_state`
//!   placement), never decides; `kmirror mirror --topics` runs it.
//! - [`sync`]: the metadata-sync rules (topic configs, consumer group offsets, ACLs) as pure
//!   plans the executor applies, and the gate that lets a sync write land only while the
//!   partition is MIRRORING or PAUSED, checked again at write time.
//! - [`mutant`]: the named deliberate bugs the model checks its properties with (`kmirror check
//!   --mutant NAME`, a build with feature `mutants`); each is a one-line switch at the point it
//!   perverts, compiled away otherwise.
//! - The log operations are Kafka's, as value types on persistent [`im`] collections:
//!   [`epoch_cache::EpochCache`] (`LeaderEpochFileCache`),
//!   [`producer_state::ProducerStateTable`], [`mem_log::MemLog`], the KIP-320 fetch rules in
//!   [`fetch`], the `leader-epoch-checkpoint` format in [`checkpoint`]; Kafka's replication
//!   inside a cluster (fetch crediting, HW, ISR expansion) is [`replication`].
//! - Around the state machine: the desired state from `mirror.name` ([`desired`]), the
//!   controller's requests and produce gate ([`controller`]), which topics a mirror's
//!   selection takes on each refresh of the source, never a failed-over one ([`discovery`]),
//!   the LME truncation rule ([`lme`]) and the reverse-mirror check before it
//!   ([`reverse_mirror`]), the `__mirror_state` records, partitioner and
//!   coordinator ([`records`], [`partitioner`], [`coordinator`]); the KIP authors' prototype's
//!   message formats, encoded as Kafka's message generator does ([`proto_wire`]).
//!
//! # States
//!
//! Generated from [`state::TransitionTable::default`] by [`diagram::mermaid`] (`kmirror diagram`;
//! a test fails when this copy is stale). Self-transitions re-assert a state; FAILED retries the
//! state recorded with it. The full design, with the KIP-1279 sections it follows, is
//! `docs/design.md` in the repository.
//!
//! ```mermaid
//! stateDiagram-v2
//!     [*] --> UNKNOWN
//!     UNKNOWN --> PREPARING
//!     UNKNOWN --> STOPPED
//!     PREPARING --> MIRRORING
//!     PREPARING --> STOPPING
//!     MIRRORING --> PAUSED
//!     MIRRORING --> STOPPING
//!     PAUSED --> MIRRORING
//!     PAUSED --> STOPPING
//!     STOPPING --> STOPPED
//!     STOPPED --> PREPARING
//!     UNKNOWN --> FAILED: step failed
//!     PREPARING --> FAILED: step failed
//!     MIRRORING --> FAILED: step failed
//!     PAUSED --> FAILED: step failed
//!     STOPPING --> FAILED: step failed
//!     STOPPED --> FAILED: step failed
//!     FAILED --> PREPARING: retry
//!     FAILED --> MIRRORING: retry
//!     FAILED --> PAUSED: retry
//!     FAILED --> STOPPING: retry
//!     FAILED --> STOPPED: retry
//! ```
//!
//! # Effects and their completions
//!
//! | effect | completion input |
//! |---|---|
//! | [`effect::Effect::ReadState`] | [`input::Input::StateRead`] |
//! | [`effect::Effect::WriteState`] | [`input::Input::StateWritten`] or [`input::Input::WriteFenced`] |
//! | [`effect::Effect::QueryLastMirroredEpoch`] | [`input::Input::LastMirroredEpochReceived`] |
//! | [`effect::Effect::Fetch`] | [`input::Input::FetchCompleted`] |
//! | [`effect::Effect::BumpLeaderEpoch`] | [`input::Input::LeaderEpochBumped`] |
//! | [`effect::Effect::WriteLastMirroredEpoch`] | [`input::Input::LastMirroredEpochWritten`] or [`input::Input::WriteFenced`] |
//! | [`effect::Effect::ScheduleRetry`] | [`input::Input::RetryDue`] (the timer fired) |
//! | [`effect::Effect::Log`], [`effect::Effect::StartFetcher`], [`effect::Effect::StopFetcher`], [`effect::Effect::SetWritable`] | none: executed at once |
//!
//! Any request may instead complete with [`input::Input::RequestFailed`]. The other inputs are
//! events: [`input::Input::BecameLeader`], [`input::Input::BecameFollower`],
//! [`input::Input::IsrChanged`], [`input::Input::DesiredStateChanged`],
//! [`input::Input::ReplicaFetched`], [`input::Input::HighWatermarkAdvanced`].
//!
//! # Example: one partition from UNKNOWN to STOPPED
//!
//! The executor below is the smallest possible: the coordinator is local, the source has
//! nothing to mirror, and every request is answered at once.
//!
//! ```
//! use kmirror_kernel::apply::apply_log_effect;
//! use kmirror_kernel::config::MirrorConfig;
//! use kmirror_kernel::coordinator::Coordinator;
//! use kmirror_kernel::desired::DesiredState;
//! use kmirror_kernel::effect::Effect;
//! use kmirror_kernel::input::{FetchOutcome, Input};
//! use kmirror_kernel::log::{LogView, PartitionLog};
//! use kmirror_kernel::mem_log::MemLog;
//! use kmirror_kernel::partition::PartitionMirror;
//! use kmirror_kernel::state::MirrorState;
//! use kmirror_kernel::types::{MirrorName, TopicId};
//!
//! let config = MirrorConfig::default();
//! let mirror = MirrorName::new("east").unwrap();
//! let mut partition =
//!     PartitionMirror::new(1, TopicId::from_u64(7), 0, DesiredState::Mirror(mirror.clone()));
//! let mut log = MemLog::new();
//! let mut coordinator = Coordinator::new(config.transitions.clone());
//!
//! // The executor: apply log effects, answer requests, return the completions.
//! let mut execute = |effects: Vec<Effect>, log: &mut MemLog| -> Vec<Input> {
//!     let mut completions = Vec::new();
//!     for effect in effects {
//!         match effect {
//!             Effect::Log(e) => {
//!                 apply_log_effect(log, &e, &[]).unwrap();
//!                 // A single replica: everything appended is committed at once.
//!                 if log.high_watermark() < log.log_end_offset() {
//!                     log.advance_high_watermark(log.log_end_offset()).unwrap();
//!                     completions.push(Input::HighWatermarkAdvanced);
//!                 }
//!             }
//!             Effect::ReadState { request, key } => completions.push(Input::StateRead {
//!                 request,
//!                 value: coordinator.read_state(&key).cloned(),
//!             }),
//!             Effect::WriteState { request, key, value, expected_state_epoch } => {
//!                 let value = coordinator.write_state(&key, value, expected_state_epoch).unwrap();
//!                 completions.push(Input::StateWritten { request, value });
//!             }
//!             Effect::QueryLastMirroredEpoch { request, .. } => {
//!                 completions.push(Input::LastMirroredEpochReceived {
//!                     request,
//!                     lme: None, // first-time mirroring: Kafka's -1
//!                     source_log_start_offset: 0,
//!                 })
//!             }
//!             Effect::Fetch { request, fetch_offset, .. } => {
//!                 let outcome = FetchOutcome::Records { next_offset: fetch_offset, last_epoch: None };
//!                 completions.push(Input::FetchCompleted { request, outcome })
//!             }
//!             Effect::BumpLeaderEpoch { request, at_least } => {
//!                 completions.push(Input::LeaderEpochBumped { request, leader_epoch: at_least })
//!             }
//!             Effect::WriteLastMirroredEpoch { request, key, value, expected_state_epoch } => {
//!                 coordinator.write_last_mirrored_epoch(&key, value, expected_state_epoch).unwrap();
//!                 completions.push(Input::LastMirroredEpochWritten { request });
//!             }
//!             Effect::StartFetcher | Effect::StopFetcher | Effect::SetWritable(_) => {}
//!             Effect::ScheduleRetry { .. } => unreachable!("nothing fails here"),
//!         }
//!     }
//!     completions
//! };
//!
//! // Drives `input` and every completion it causes, except fetches (the fetcher loops).
//! let mut drive = |input: Input, partition: &mut PartitionMirror, log: &mut MemLog| {
//!     let mut pending = vec![input];
//!     while let Some(input) = pending.pop() {
//!         if matches!(input, Input::FetchCompleted { .. }) {
//!             continue;
//!         }
//!         let effects = partition.handle(&config, input, &*log).unwrap();
//!         pending.extend(execute(effects, log));
//!     }
//! };
//!
//! let leader = Input::BecameLeader {
//!     leader_epoch: 1,
//!     replicas: im::ordset![1],
//!     isr: im::ordset![1],
//! };
//! drive(leader, &mut partition, &mut log);
//! assert_eq!(partition.state(), MirrorState::Mirroring);
//!
//! drive(Input::DesiredStateChanged(DesiredState::Stop(mirror)), &mut partition, &mut log);
//! assert_eq!(partition.state(), MirrorState::Stopped);
//! assert!(partition.is_writable());
//! assert_eq!(log.log_end_offset(), 1, "the MIRROR_PID_RESET batch");
//! ```
#![forbid(unsafe_code)]

pub mod apply;
pub mod batch;
pub mod checkpoint;
pub mod config;
pub mod controller;
pub mod coordinator;
pub mod desired;
pub mod diagram;
pub mod discovery;
pub mod effect;
pub mod epoch_cache;
pub mod fetch;
pub mod input;
pub mod lme;
pub mod log;
pub mod mem_log;
pub mod mutant;
pub mod node;
pub mod partition;
pub mod partitioner;
pub mod producer_state;
pub mod proto_wire;
pub mod records;
pub mod replication;
pub mod reverse_mirror;
pub mod state;
pub mod state_fencing;
pub mod sync;
#[cfg(any(test, feature = "testkit"))]
pub mod testkit;
pub mod types;
