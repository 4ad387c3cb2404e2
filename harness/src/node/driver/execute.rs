//! The effect executor: one input fed to the node manager ([`NodeDriver::feed`]), then each
//! tagged effect it returns executed in order, in the one `match` over every [`Effect`]
//! ([`NodeDriver::execute`]); each completion is queued as a later input, never fed from
//! inside another feed.
//!
//! | effect | executed as |
//! |---|---|
//! | `ReadState` | read from the coordinator of `__mirror_state` partition `mirror_state_partition(key)`, answered as `CoordinatorAnswer` |
//! | `WriteState` / `WriteLastMirroredEpoch` | fenced by that coordinator and staged; at the end of the round, group-committed ([`crate::node::commit`], [`NodeDriver::commit`]): the partition logs the round's records name made durable, then each `__mirror_state-<k>` appended and fsynced once, then the answers fed (the flush rules in `lifecycle.rs`) |
//! | `QueryLastMirroredEpoch` | a stock Kafka source keeps no `__mirror_state`: "no LME" with the source's log start offset (ListOffsets earliest, every pending query of a round in one request per broker, `source.rs`), as [`KafkaSource`](crate::wire::KafkaSource) answers |
//! | `Log(_)` | `apply_log_effect` on the partition's [`FileLog`](crate::file_log::FileLog), with its share of the fetched batches byte for byte; then its followers replicate it and its high watermark moves (`followers.rs`; with one replica, to its log end offset), and the kernel hears what it waits for (`ReplicaFetched`, `HighWatermarkAdvanced`); a truncation that removed data, the `MIRROR_PID_RESET` and an ABORT marker are reported as event lines |
//! | `BumpLeaderEpoch` | the partition's leader epoch in `node.properties`: written once per round, in the group commit, before any answer |
//! | `SetWritable` | the partition's produce gate in `node.properties` |
//! | `ScheduleRetry` | a timer per partition, fired once the caller's clock passes it |
//! | `StartFetcher` / `StopFetcher` | nothing: the node manager keeps the fetch slots |
//! | `CreatePartitions` | the topic grows to the source's count: new partition directories, `node.properties`, then the new partitions are led (`requests.rs`) |
//!
//! Every executed effect (and every step of a group commit) counts towards
//! [`NodeDriverOptions::halt_after_effects`](super::NodeDriverOptions::halt_after_effects), the
//! crash tests' kill points.

use std::collections::BTreeSet;

use kmirror_kernel::apply::apply_log_effect;
use kmirror_kernel::effect::{Effect, LogEffect};
use kmirror_kernel::input::Input;
use kmirror_kernel::log::LogView;
use kmirror_kernel::node::{NodeEffect, NodeError as KernelNodeError, NodeInput, PartitionKey};
use kmirror_kernel::partition::Activity;
use kmirror_kernel::partitioner::mirror_state_partition;
use kmirror_kernel::types::{MirrorPartition, Offset};

use crate::mirror_state_log::MirrorStateLog;
use crate::node::commit::CommitParts;
use crate::node::NodeError;
use crate::record_batch::RawBatch;

use super::{NodeDriver, Queued};

impl NodeDriver {
    /// Feeds one input to the node and executes its effects, in order.
    pub(super) fn feed(&mut self, queued: Queued) -> Result<(), NodeError> {
        let Queued { input, batches } = queued;
        let mut touched = BTreeSet::new();
        if let NodeInput::Partition { key, .. } = &input {
            // What it waits for may be the replicas (PREPARING's wait after the LME
            // truncation), with nothing written.
            touched.insert(*key);
        }
        if let NodeInput::FetchResponse(r) = &input {
            self.stats.partition_fetches += r.partitions.len() as u64;
        }
        let config = self.options.mirror.clone();
        let output = self.node.handle(&config, self.now_ms, input, &self.logs);
        for error in &output.errors {
            match error {
                KernelNodeError::Ignored { .. } | KernelNodeError::StaleFetch { .. } => {
                    self.stats.refused += 1
                }
                other => self.events.push(format!("node: {other}")),
            }
        }
        for effect in output.effects {
            self.last_state_write = None;
            match effect {
                NodeEffect::Partition { key, effect } => {
                    if matches!(effect, Effect::Log(_)) {
                        touched.insert(key);
                    }
                    let fetched = batches.get(&key).map_or(&[][..], Vec::as_slice);
                    self.execute(key, effect, fetched)?;
                }
                NodeEffect::CreatePartitions { topic_id, total } => {
                    self.grow_topic(topic_id, total)?
                }
            }
            self.effects += 1;
            if self.options.halt_after_effects == Some(self.effects) {
                return Err(NodeError::Halted {
                    effects: self.effects,
                });
            }
        }
        for key in touched {
            self.replicate(key)?;
        }
        Ok(())
    }

    /// The followers of `key` replicate its log and its high watermark moves
    /// (`followers.rs`; with one replica, to the log end offset); the kernel hears what it
    /// waits for: each follower's `ReplicaFetched` while it waits for the replicas to
    /// truncate, `HighWatermarkAdvanced` while it waits for its `MIRROR_PID_RESET` to be
    /// committed.
    pub(super) fn replicate(&mut self, key: PartitionKey) -> Result<(), NodeError> {
        let Some(log) = self.logs.get_mut(&key) else {
            return Ok(());
        };
        let report = self.followers.replicate(&key, log)?;
        for &(replica, from, to) in &report.truncations {
            if to < from {
                let tp = log.topic_partition();
                self.events.push(format!(
                    "{}-{}: follower {replica} truncated from LEO {from} to {to}",
                    tp.topic, tp.partition
                ));
            }
        }
        let activity = self.node.partition(&key).map(|pm| pm.activity().clone());
        match activity {
            Some(Activity::AwaitingPidResetCommit) if report.high_watermark_advanced => {
                self.queue.push_back(Queued::plain(NodeInput::Partition {
                    key,
                    input: Input::HighWatermarkAdvanced,
                }));
            }
            Some(Activity::AwaitingReplicas { .. }) => {
                for (replica, log_end_offset) in report.fetched {
                    self.queue.push_back(Queued::plain(NodeInput::Partition {
                        key,
                        input: Input::ReplicaFetched {
                            replica,
                            log_end_offset,
                        },
                    }));
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// The `__mirror_state` partition that holds `key`'s record, with its number.
    fn state_partition(
        &mut self,
        key: &MirrorPartition,
    ) -> Result<(u32, &mut MirrorStateLog), NodeError> {
        let n = self.dest.meta().mirror_state_partitions;
        let k = mirror_state_partition(key, n).map_err(|e| NodeError::Invalid {
            message: e.to_string(),
        })?;
        let state = self.states.get_mut(&k).ok_or_else(|| NodeError::Invalid {
            message: format!("__mirror_state partition {k} is not open"),
        })?;
        Ok((k, state))
    }

    /// Executes one effect of partition `key`: the single `match` over every [`Effect`].
    fn execute(
        &mut self,
        key: PartitionKey,
        effect: Effect,
        fetched: &[RawBatch],
    ) -> Result<(), NodeError> {
        let now = self.now_ms;
        match effect {
            Effect::ReadState { request, key: mk } => {
                let (k, state) = self.state_partition(&mk)?;
                let value = state.coordinator().read_state(&mk).cloned();
                self.coordinator_answer(k, mk, Input::StateRead { request, value });
            }
            Effect::WriteState {
                request,
                key: mk,
                value,
                expected_state_epoch,
            } => {
                let name = self.topic_name(&key);
                let (k, state) = self.state_partition(&mk)?;
                let staged = state.stage_state(&mk, value, expected_state_epoch);
                let written = staged.is_ok();
                let input = match staged {
                    Ok(stored) => {
                        let line = format!(
                            "{name}-{}: state {} persisted (leader epoch {}, state epoch {}){}",
                            key.partition,
                            stored.state,
                            stored.leader_epoch,
                            stored.state_epoch,
                            stored
                                .error_message
                                .as_deref()
                                .map(|e| format!(": {e}"))
                                .unwrap_or_default()
                        );
                        self.events.push(line);
                        Input::StateWritten {
                            request,
                            value: stored,
                        }
                    }
                    Err(refused) => Input::WriteFenced {
                        request,
                        reason: refused.reason(),
                    },
                };
                self.stage_answer(key, k, mk, input, written);
            }
            Effect::WriteLastMirroredEpoch {
                request,
                key: mk,
                value,
                expected_state_epoch,
            } => {
                let (k, state) = self.state_partition(&mk)?;
                let staged = state.stage_last_mirrored_epoch(&mk, value, expected_state_epoch);
                let input = match staged {
                    Ok(()) => Input::LastMirroredEpochWritten { request },
                    Err(ref refused) => Input::WriteFenced {
                        request,
                        reason: refused.reason(),
                    },
                };
                self.stage_answer(key, k, mk, input, staged.is_ok());
            }
            Effect::QueryLastMirroredEpoch { request, .. } => {
                self.pending_lme.insert(key, request);
            }
            Effect::Log(log_effect) => self.apply_log(key, &log_effect, fetched)?,
            Effect::StartFetcher | Effect::StopFetcher | Effect::Fetch { .. } => {
                self.heard.caught_up.remove(&key);
            }
            Effect::BumpLeaderEpoch { request, at_least } => {
                let name = self.topic_name(&key);
                // Written with the round's group commit, before the bump is answered.
                let leader_epoch = self.dest.stage_leader_epoch(&name, key.partition, at_least);
                self.events.push(format!(
                    "{name}-{}: leader epoch bumped to {leader_epoch}",
                    key.partition
                ));
                self.staged.bump(NodeInput::Partition {
                    key,
                    input: Input::LeaderEpochBumped {
                        request,
                        leader_epoch,
                    },
                });
            }
            Effect::SetWritable(writable) => {
                self.gates.insert(key, writable);
            }
            Effect::ScheduleRetry { attempt, delay_ms } => {
                self.timers
                    .insert(key, (attempt, now.saturating_add(delay_ms)));
            }
        }
        Ok(())
    }

    /// Withholds a coordinator's answer about `key` (`__mirror_state` partition `k`) until the
    /// round's group commit: a `written` one names `key`'s log, made durable first.
    fn stage_answer(
        &mut self,
        key: PartitionKey,
        k: u32,
        mk: MirrorPartition,
        input: Input,
        written: bool,
    ) {
        let answer = NodeInput::CoordinatorAnswer {
            coordinator_partition: k,
            key: mk,
            input,
        };
        if written {
            self.staged.write(key, answer);
        } else {
            self.staged.answer(answer);
        }
    }

    /// The round's group commit ([`crate::node::commit`]): every staged state change made
    /// durable, then its answer queued. Nothing staged: nothing done.
    pub(super) fn commit(&mut self) -> Result<(), NodeError> {
        if self.staged.is_empty() {
            return Ok(());
        }
        let staged = std::mem::take(&mut self.staged);
        let parts = CommitParts {
            logs: &mut self.logs,
            states: &mut self.states,
            dest: &self.dest,
            barrier: self.barrier.as_ref(),
            now_ms: self.now_ms,
        };
        let (effects, halt_after) = (&mut self.effects, self.options.halt_after_effects);
        let last_state_write = &mut self.last_state_write;
        let mut halt = |state: Option<u32>| {
            *effects += 1;
            *last_state_write = state;
            match halt_after {
                Some(n) if n == *effects => Err(NodeError::Halted { effects: n }),
                _ => Ok(()),
            }
        };
        let answers = staged.commit(parts, &mut halt)?;
        self.last_state_write = None;
        self.queue.extend(answers.into_iter().map(Queued::plain));
        Ok(())
    }

    /// Queues a coordinator's answer about `key` (`__mirror_state` partition
    /// `coordinator_partition`) that needs no commit.
    fn coordinator_answer(
        &mut self,
        coordinator_partition: u32,
        key: MirrorPartition,
        input: Input,
    ) {
        self.queue
            .push_back(Queued::plain(NodeInput::CoordinatorAnswer {
                coordinator_partition,
                key,
                input,
            }));
    }

    /// The name of `key`'s topic, for events: its log's (a lookup by key), else from the
    /// metadata (`?` when the destination has no such topic).
    fn topic_name(&self, key: &PartitionKey) -> String {
        match self.logs.get(key) {
            Some(log) => log.topic_partition().topic.clone(),
            None => self
                .dest
                .meta()
                .topic_name(key.topic_id)
                .unwrap_or("?")
                .to_owned(),
        }
    }

    /// Applies a log effect to `key`'s log, appending `fetched` for an `AppendFetched`.
    fn apply_log(
        &mut self,
        key: PartitionKey,
        effect: &LogEffect,
        fetched: &[RawBatch],
    ) -> Result<(), NodeError> {
        let now = self.now_ms;
        let log = self.logs.get_mut(&key).ok_or_else(|| NodeError::Invalid {
            message: format!("no log for partition {key}"),
        })?;
        log.set_append_timestamp(now);
        let before = log.log_end_offset();
        let last_before = log.last_batch();
        if matches!(
            effect,
            LogEffect::TruncateTo { .. } | LogEffect::TruncateFullyAndStartAt { .. }
        ) {
            self.followers.leader_truncated(&key);
        }
        apply_log_effect(log, effect, fetched).map_err(|source| NodeError::LogEffect {
            dir: log.dir().to_path_buf(),
            effect: format!("{effect:?}"),
            source: Box::new(source),
        })?;
        if let Some(line) = log_event(effect, before) {
            let tp = log.topic_partition();
            let line = format!("{}-{}: {line}", tp.topic, tp.partition);
            self.events.push(line);
        }
        if matches!(effect, LogEffect::AppendFetched) {
            // The followers holding the leader's log copy the same bytes without reading them
            // back (`followers.rs`).
            self.followers
                .append_copied(&key, before, last_before, fetched)?;
            self.stats.batches += fetched.len() as u64;
            self.stats.bytes += fetched
                .iter()
                .map(|b| b.size_in_bytes() as u64)
                .sum::<u64>();
            self.stats.offsets += fetched
                .iter()
                .map(|b| {
                    let h = b.header();
                    u64::try_from(h.last_offset - h.base_offset + 1).unwrap_or(0)
                })
                .sum::<u64>();
        }
        Ok(())
    }
}

/// What an operator reads of a log effect that removes data or writes a marker of the node's
/// own (the log's end offset was `before`); `None` for appends of fetched batches and for
/// truncations that removed nothing.
fn log_event(effect: &LogEffect, before: Offset) -> Option<String> {
    match effect {
        LogEffect::TruncateTo { offset, cause } if *offset < before => {
            Some(format!("truncated from LEO {before} to {offset} ({cause})"))
        }
        LogEffect::TruncateFullyAndStartAt { offset, cause } if before > 0 || *offset > 0 => Some(
            format!("emptied (LEO {before}), starts at {offset} ({cause})"),
        ),
        LogEffect::AppendPidReset { leader_epoch } => Some(format!(
            "MIRROR_PID_RESET appended at offset {before} (leader epoch {leader_epoch}): \
             mirrored producer state expired"
        )),
        LogEffect::AbortTransaction { producer_id, .. } => Some(format!(
            "ABORT marker appended at offset {before} for producer {producer_id}'s open \
             transaction"
        )),
        _ => None,
    }
}
