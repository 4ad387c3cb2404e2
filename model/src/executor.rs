//! The model's executor: kernel inputs in, kernel effects applied to the world.
//!
//! One `match` over [`Effect`] maps every effect to the model's world, so adding an effect to the
//! kernel fails to compile here until it is handled. The executor never decides anything about
//! mirroring; it routes, delivers and applies. While applying, it watches for the safety
//! violations that only the moment of an effect can show (see [`Violation`]).

use std::sync::Arc;

use kmirror_kernel::apply::apply_log_effect;
use kmirror_kernel::batch::BatchHeader;
use kmirror_kernel::effect::{Effect, LogEffect, RequestId};
use kmirror_kernel::fetch::serve_fetch;
use kmirror_kernel::input::{FetchOutcome, Input};
use kmirror_kernel::log::LogView;
use kmirror_kernel::partition::Activity;
use kmirror_kernel::state::MirrorState;
use kmirror_kernel::types::{BrokerId, EpochAndOffset, MirrorPartition};

use crate::config::ModelConfig;
use crate::journal::{self, Event, LogOp};
use crate::world::{Addr, ClusterId, Message, Replica, RequestBody, Violation, World, TOPIC_ID};

/// Most batches one fetch returns (small: every batch boundary is an interleaving point).
pub const MAX_FETCH_BATCHES: usize = 1;

impl World {
    /// The address of broker `b` of cluster `c` in its current incarnation.
    pub fn addr(&self, c: ClusterId, b: BrokerId) -> Addr {
        Addr {
            cluster: c,
            broker: b,
            incarnation: self.cluster(c).replicas[b as usize].incarnation,
        }
    }

    /// Hands `input` to the kernel of broker `b` of cluster `c` (if it runs) and applies the
    /// effects it returns; `batches` are the batches of a fetch response.
    pub fn feed(
        &mut self,
        config: &ModelConfig,
        c: ClusterId,
        b: BrokerId,
        input: Input,
        batches: &[BatchHeader],
    ) {
        let replica = &mut self.cluster_mut(c).replicas[b as usize];
        let Some(mut mirror) = replica.mirror.take() else {
            return;
        };
        let result = mirror.handle(&config.kernel, input.clone(), &*replica.log);
        replica.mirror = Some(mirror);
        journal::record(|| Event::Kernel {
            cluster: c,
            broker: b,
            input,
            effects: result.clone().unwrap_or_default(),
        });
        if let Ok(effects) = result {
            for effect in effects {
                self.execute(config, c, b, effect, batches);
            }
        }
    }

    /// Applies one effect of broker `b` of cluster `c`.
    fn execute(
        &mut self,
        config: &ModelConfig,
        c: ClusterId,
        b: BrokerId,
        effect: Effect,
        fetched: &[BatchHeader],
    ) {
        let from = self.addr(c, b);
        let request = |world: &mut World, to: ClusterId, request: RequestId, body| {
            world.send(Message::Request {
                from,
                to,
                request,
                body,
            })
        };
        match effect {
            Effect::ReadState { request: r, key } => {
                request(self, c, r, RequestBody::ReadState { key })
            }
            Effect::WriteState {
                request: r,
                key,
                value,
                expected_state_epoch,
            } => request(
                self,
                c,
                r,
                RequestBody::WriteState {
                    key,
                    value,
                    expected_state_epoch,
                },
            ),
            Effect::QueryLastMirroredEpoch { request: r, .. } => {
                self.expect_stored(c, &[MirrorState::Preparing]);
                request(self, c.other(), r, RequestBody::QueryLastMirroredEpoch)
            }
            Effect::Log(log_effect) => {
                let allowed: &[MirrorState] = match log_effect {
                    LogEffect::AppendFetched => {
                        if self.stored_state(c) != MirrorState::Mirroring {
                            self.violate(Violation::FetchedOutsideMirroring);
                        }
                        let epoch = self.cluster(c).leader_epoch;
                        if fetched.iter().any(|b| b.partition_leader_epoch >= epoch) {
                            self.ghosts.mirrored_epoch_not_below_leader = true;
                        }
                        &[MirrorState::Mirroring]
                    }
                    LogEffect::TruncateTo { .. } | LogEffect::TruncateFullyAndStartAt { .. } => &[
                        MirrorState::Preparing,
                        MirrorState::Mirroring,
                        MirrorState::Stopping,
                    ],
                    LogEffect::AbortTransaction { .. } | LogEffect::AppendPidReset { .. } => {
                        &[MirrorState::Stopping]
                    }
                };
                if log_effect != LogEffect::AppendFetched {
                    self.expect_stored(c, allowed);
                }
                if let LogEffect::AbortTransaction { leader_epoch, .. }
                | LogEffect::AppendPidReset { leader_epoch } = &log_effect
                {
                    // Kafka accepts the write and drops the newer (mirrored) epochs from its
                    // cache: the stop wrote below an epoch the log holds.
                    let log = &self.cluster(c).replicas[b as usize].log;
                    if log
                        .epoch_cache()
                        .latest_epoch()
                        .is_some_and(|latest| *leader_epoch < latest)
                    {
                        self.violate(Violation::LocalWriteBelowMirroredEpoch);
                    }
                }
                journal::record(|| Event::Log {
                    cluster: c,
                    broker: b,
                    op: LogOp::Effect {
                        effect: log_effect.clone(),
                        fetched: fetched.to_vec(),
                    },
                });
                let log = &mut self.cluster_mut(c).replicas[b as usize].log;
                if apply_log_effect(&mut **log, &log_effect, fetched).is_err() {
                    self.violate(Violation::LogEffectRefused);
                }
                self.update_high_watermarks(config, c);
            }
            Effect::StartFetcher => {
                self.expect_stored(c, &[MirrorState::Mirroring]);
                self.cluster_mut(c).replicas[b as usize].fetcher = true;
            }
            Effect::Fetch {
                request: r,
                fetch_offset,
                last_fetched_epoch,
                isolation,
            } => {
                self.expect_stored(c, &[MirrorState::Mirroring]);
                request(
                    self,
                    c.other(),
                    r,
                    RequestBody::Fetch {
                        fetch_offset,
                        last_fetched_epoch,
                        isolation,
                    },
                )
            }
            Effect::StopFetcher => self.cluster_mut(c).replicas[b as usize].fetcher = false,
            Effect::BumpLeaderEpoch {
                request: r,
                at_least,
            } => {
                self.expect_stored(
                    c,
                    &[
                        MirrorState::Mirroring,
                        MirrorState::EpochFencing,
                        MirrorState::Stopping,
                    ],
                );
                request(self, c, r, RequestBody::BumpLeaderEpoch { at_least })
            }
            Effect::WriteLastMirroredEpoch {
                request: r,
                key,
                value,
                expected_state_epoch,
            } => {
                self.expect_stored(c, &[MirrorState::Stopping]);
                request(
                    self,
                    c,
                    r,
                    RequestBody::WriteLastMirroredEpoch {
                        key,
                        value,
                        expected_state_epoch,
                    },
                )
            }
            Effect::SetWritable(writable) => {
                if writable {
                    self.expect_stored(c, &[MirrorState::Stopped]);
                }
                self.cluster_mut(c).replicas[b as usize].writable = writable;
            }
            Effect::ScheduleRetry { attempt, .. } => {
                self.cluster_mut(c).replicas[b as usize].retry_timer = Some(attempt)
            }
        }
    }

    /// Flags a side effect run while cluster `c`'s stored state is none of `allowed`.
    fn expect_stored(&mut self, c: ClusterId, allowed: &[MirrorState]) {
        if !allowed.contains(&self.stored_state(c)) {
            self.violate(Violation::ActedBeforePersisted);
        }
    }

    /// Delivers `message` (one copy is taken from the network).
    pub fn deliver(&mut self, config: &ModelConfig, message: Arc<Message>) {
        if !self.take(&message) {
            return;
        }
        // The message is shared with the world before the step: copy only what the step
        // consumes (not a fetch response's batches).
        match &*message {
            Message::Reply {
                to,
                input,
                batches,
                source_losses,
            } => {
                let replica = &self.cluster(to.cluster).replicas[to.broker as usize];
                if replica.alive && replica.incarnation == to.incarnation {
                    let checked = *source_losses == self.ghosts.source_losses
                        && awaited_records(replica, input);
                    self.feed(config, to.cluster, to.broker, input.clone(), batches);
                    // The source served this answer after its latest unclean election and the
                    // destination acted on it: whatever it did, its log is now a prefix of the
                    // source's, or a divergence was missed.
                    if checked && !self.mirror_is_prefix_of_source(to.cluster) {
                        self.violate(Violation::DivergentAfterFetch);
                    }
                }
            }
            Message::Request {
                from,
                to,
                request,
                body,
            } => {
                if let Some((input, batches)) =
                    self.serve(config, *from, *to, *request, body.clone())
                {
                    let source_losses = if matches!(input, Input::FetchCompleted { .. }) {
                        self.ghosts.source_losses
                    } else {
                        0
                    };
                    self.send(Message::Reply {
                        to: *from,
                        input,
                        batches,
                        source_losses,
                    });
                }
            }
        }
    }

    /// Serves a request at cluster `to`: the answer, or `None` if it is dropped.
    fn serve(
        &mut self,
        config: &ModelConfig,
        from: Addr,
        to: ClusterId,
        request: RequestId,
        body: RequestBody,
    ) -> Option<(Input, Vec<BatchHeader>)> {
        let answer = match body {
            RequestBody::ReadState { key } => Input::StateRead {
                request,
                value: self.cluster(to).coordinator.read_state(&key).cloned(),
            },
            RequestBody::WriteState {
                key,
                value,
                expected_state_epoch,
            } => self.serve_write(config, to, request, key, value, expected_state_epoch),
            RequestBody::WriteLastMirroredEpoch {
                key,
                value,
                expected_state_epoch,
            } => match self.cluster_mut(to).coordinator.write_last_mirrored_epoch(
                &key,
                value,
                expected_state_epoch,
            ) {
                Ok(_) => Input::LastMirroredEpochWritten { request },
                Err(refused) => Input::WriteFenced {
                    request,
                    reason: refused.reason(),
                },
            },
            RequestBody::QueryLastMirroredEpoch => {
                let lme = self
                    .cluster(to)
                    .coordinator
                    .last_mirrored_epochs()
                    .find(|(k, _)| k.topic_id == TOPIC_ID)
                    .and_then(|(_, v)| {
                        v.last_mirrored_epoch.map(|epoch| EpochAndOffset {
                            epoch,
                            end_offset: v.last_mirrored_offset,
                        })
                    });
                let source_log_start_offset =
                    self.leader(to).map_or(0, |l| l.log.log_start_offset());
                // Both clusters keep `__mirror_state`, so the source answers as a serving
                // kmirror node does: with its own mirror's state of the partition, which (two
                // clusters) can only be a mirror from the requester: the reverse mirror.
                Input::SourceMirrorStateReceived {
                    request,
                    reverse: self.stored_state(to),
                    lme,
                    source_log_start_offset,
                }
            }
            RequestBody::Fetch {
                fetch_offset,
                last_fetched_epoch,
                isolation,
            } => {
                let leader = self.leader(to)?;
                let response = serve_fetch(
                    &*leader.log,
                    fetch_offset,
                    last_fetched_epoch,
                    isolation,
                    MAX_FETCH_BATCHES,
                );
                let outcome = response.outcome();
                let (_, batches) = response.into_parts();
                // KIP-320: a source that answers with records (even none) tells the fetcher
                // its log is a prefix of the source's; if it is not, the divergence went
                // unreported and the destination keeps what the source lost. Only a fetch
                // its requester still waits for counts (a stale answer is ignored).
                let requester = &self.cluster(from.cluster).replicas[from.broker as usize];
                let awaited = requester.incarnation == from.incarnation
                    && requester
                        .mirror
                        .as_ref()
                        .is_some_and(|m| *m.activity() == Activity::Fetching(request));
                let diverged = !is_prefix(requester.log.batches(), leader.log.batches());
                if matches!(outcome, FetchOutcome::Records { .. }) && awaited && diverged {
                    self.ghosts.divergence_unreported = true;
                }
                return Some((Input::FetchCompleted { request, outcome }, batches));
            }
            RequestBody::BumpLeaderEpoch { at_least } => {
                let cluster = self.cluster_mut(to);
                let still_leader = cluster.leader == Some(from.broker)
                    && cluster.replicas[from.broker as usize].incarnation == from.incarnation;
                if still_leader {
                    cluster.leader_epoch = (cluster.leader_epoch + 1).max(at_least);
                    Input::LeaderEpochBumped {
                        request,
                        leader_epoch: cluster.leader_epoch,
                    }
                } else {
                    Input::RequestFailed {
                        request,
                        error: "NOT_LEADER_OR_FOLLOWER".into(),
                    }
                }
            }
        };
        Some((answer, Vec::new()))
    }

    /// The coordinator of `to` handles a state write; the executor checks the coordinator's
    /// answer against the fencing and transition rules.
    fn serve_write(
        &mut self,
        config: &ModelConfig,
        to: ClusterId,
        request: RequestId,
        key: MirrorPartition,
        value: kmirror_kernel::records::MirrorPartitionStateValue,
        expected_state_epoch: Option<i32>,
    ) -> Input {
        let coordinator = &self.cluster(to).coordinator;
        let before = coordinator.read_state(&key).cloned();
        let from = before.as_ref().map_or(MirrorState::Unknown, |b| b.state);
        let retry = before.as_ref().and_then(|b| b.previous_state);
        let stale = coordinator
            .fencing()
            .check(before.as_ref(), value.leader_epoch, expected_state_epoch)
            .is_some();
        let legal = |to| config.kernel.transitions.is_legal(from, to, retry);
        if !stale && !legal(value.state) {
            // A writer that knows the stored record asked for a transition the table refuses.
            self.violate(Violation::IllegalTransitionPersisted);
        }
        let result =
            self.cluster_mut(to)
                .coordinator
                .write_state(&key, value.clone(), expected_state_epoch);
        match result {
            Ok(stored) => {
                if stale {
                    self.violate(Violation::FencedWriteAccepted);
                }
                if !legal(stored.state) {
                    self.violate(Violation::IllegalTransitionPersisted);
                }
                if from == MirrorState::Preparing
                    && stored.state == MirrorState::Mirroring
                    && !self.mirror_is_prefix_of_source(to)
                {
                    self.violate(Violation::DivergentAfterPreparing);
                }
                Input::StateWritten {
                    request,
                    value: stored,
                }
            }
            Err(refused) => Input::WriteFenced {
                request,
                reason: refused.reason(),
            },
        }
    }

    /// Whether cluster `dest`'s leader holds exactly the batches of the other cluster's leader
    /// that its fetches may read: those below the source's LSO (read-committed) or HW
    /// (read-uncommitted). False when either has no leader.
    pub fn mirror_caught_up(&self, dest: ClusterId, model: &crate::model::MirrorModel) -> bool {
        let (Some(d), Some(s)) = (self.leader(dest), self.leader(dest.other())) else {
            return false;
        };
        let bound = match model.config.kernel.fetch_isolation {
            kmirror_kernel::config::FetchIsolation::ReadCommitted => s.log.last_stable_offset(),
            kmirror_kernel::config::FetchIsolation::ReadUncommitted
            | kmirror_kernel::config::FetchIsolation::Follower => s.log.high_watermark(),
        };
        let readable = s.log.batches().iter().take_while(|b| b.last_offset < bound);
        d.log.batches().iter().eq(readable)
    }

    /// Whether cluster `dest`'s leader log is a prefix of the other cluster's leader log (same
    /// batches at the same offsets). True when either has no leader.
    pub fn mirror_is_prefix_of_source(&self, dest: ClusterId) -> bool {
        let (Some(d), Some(s)) = (self.leader(dest), self.leader(dest.other())) else {
            return true;
        };
        is_prefix(d.log.batches(), s.log.batches())
    }
}

/// Whether `input` is a records answer (even none) to the fetch `replica`'s kernel waits for.
fn awaited_records(replica: &Replica, input: &Input) -> bool {
    let Input::FetchCompleted {
        request,
        outcome: FetchOutcome::Records { .. },
    } = input
    else {
        return false;
    };
    replica
        .mirror
        .as_ref()
        .is_some_and(|m| *m.activity() == Activity::Fetching(*request))
}

/// Whether batches `d` are the first batches of `s`.
fn is_prefix(d: &im::Vector<BatchHeader>, s: &im::Vector<BatchHeader>) -> bool {
    d.len() <= s.len() && d.iter().zip(s.iter()).all(|(a, b)| a == b)
}
