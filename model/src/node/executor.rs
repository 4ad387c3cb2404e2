//! The node model's executor: node inputs in, the node's effects applied to the world, fetches
//! polled from the node and served by the source.

use std::collections::BTreeMap;

use kmirror_kernel::apply::apply_log_effect;
use kmirror_kernel::batch::BatchHeader;
use kmirror_kernel::effect::Effect;
use kmirror_kernel::fetch::serve_fetch;
use kmirror_kernel::input::Input;
use kmirror_kernel::log::{LogView, PartitionLog};
use kmirror_kernel::node::{
    CoalescedFetch, CoalescedFetchResponse, NodeEffect, NodeInput, PartitionFetchResponse,
    PartitionFetchResult, PartitionKey,
};
use kmirror_kernel::partitioner::mirror_state_partition;
use kmirror_kernel::types::MirrorPartition;

use super::config::NodeModelConfig;
use super::world::{
    CoordinatorRequest, NodeMessage, NodeWorld, MAX_FETCH_BATCHES, MIRROR_STATE_PARTITIONS,
};

/// Each partition's fetched batches of one response.
pub type Fetched = BTreeMap<PartitionKey, Vec<BatchHeader>>;

/// What the source answers for a partition of a topic it deleted (Kafka's non-retriable
/// `UNKNOWN_TOPIC_ID`: no topic with the fetch's topic id).
pub const UNKNOWN_TOPIC_ID: &str = "UNKNOWN_TOPIC_ID";

impl NodeWorld {
    /// Hands `input` to the node and applies the effects it returns (`batches`: the fetched
    /// batches of a fetch response); a coalesced response is first checked part by part
    /// against each partition alone (see [`Self::check_parts`]). A node that is down hears
    /// nothing.
    pub fn run(&mut self, config: &NodeModelConfig, input: NodeInput, batches: &Fetched) {
        let lone = match &input {
            NodeInput::FetchResponse(response) => Some(self.lone_parts(config, response)),
            _ => None,
        };
        let Some(node) = self.node.as_mut() else {
            return;
        };
        let out = node.handle(&config.kernel, self.now, input, &self.dest_logs);
        if let Some(lone) = lone {
            self.check_parts(&out.effects, lone);
        }
        for effect in out.effects {
            self.execute(config, effect, batches);
        }
    }

    /// Sends every coalesced fetch the node has ready (none while it is down).
    pub fn poll(&mut self) {
        let fetches = self
            .node
            .as_mut()
            .map_or_else(Vec::new, |n| n.poll_fetches(self.now));
        for fetch in fetches {
            self.send(NodeMessage::Fetch(fetch));
        }
    }

    /// Applies one effect of the node.
    fn execute(&mut self, config: &NodeModelConfig, effect: NodeEffect, fetched: &Fetched) {
        let (key, effect) = match effect {
            NodeEffect::Partition { key, effect } => (key, effect),
            NodeEffect::CreatePartitions { topic_id, total } => {
                return self.create_partitions(config, topic_id, total)
            }
        };
        let coordinator =
            |key: MirrorPartition, request, body| NodeMessage::Coordinator { key, request, body };
        match effect {
            Effect::ReadState { request, key } => {
                self.send(coordinator(key, request, CoordinatorRequest::Read))
            }
            Effect::WriteState {
                request,
                key,
                value,
                expected_state_epoch,
            } => self.send(coordinator(
                key,
                request,
                CoordinatorRequest::Write {
                    value,
                    expected_state_epoch,
                },
            )),
            Effect::WriteLastMirroredEpoch {
                request,
                key,
                value,
                expected_state_epoch,
            } => self.send(coordinator(
                key,
                request,
                CoordinatorRequest::WriteLastMirroredEpoch {
                    value,
                    expected_state_epoch,
                },
            )),
            Effect::QueryLastMirroredEpoch { request, .. } => {
                self.send(NodeMessage::QueryLastMirroredEpoch { key, request })
            }
            Effect::BumpLeaderEpoch { request, at_least } => {
                self.send(NodeMessage::BumpLeaderEpoch {
                    key,
                    request,
                    at_least,
                })
            }
            Effect::Log(log_effect) => {
                let Some(log) = self.dest_logs.get_mut(&key) else {
                    return;
                };
                let batches = fetched.get(&key).map_or(&[][..], Vec::as_slice);
                // A refused effect leaves the log as it was; the mirror is then not the
                // source's prefix, which the liveness property sees.
                let _ = apply_log_effect(log, &log_effect, batches);
                // One replica: the high watermark follows the log end.
                let end = log.log_end_offset();
                if end > log.high_watermark() && log.advance_high_watermark(end).is_ok() {
                    let input = NodeInput::Partition {
                        key,
                        input: Input::HighWatermarkAdvanced,
                    };
                    self.run(config, input, &Fetched::new());
                }
            }
            // The node keeps every fetch and sends it coalesced: one let out is a node bug.
            Effect::Fetch { .. } => self.violate(super::world::NodeViolation::CoalescedPartDiffers),
            Effect::StartFetcher | Effect::StopFetcher => {}
            Effect::SetWritable(writable) => {
                if let Some(p) = self.dest.get_mut(&key) {
                    p.writable = writable;
                }
            }
            Effect::ScheduleRetry { attempt, .. } => {
                if let Some(p) = self.dest.get_mut(&key) {
                    p.retry_timer = Some(attempt);
                }
            }
        }
    }

    /// Delivers `message` (one copy is taken from the network).
    pub fn deliver(&mut self, config: &NodeModelConfig, message: &NodeMessage) {
        if !self.take(message) {
            return;
        }
        let answer = match message.clone() {
            NodeMessage::Answer { input, batches } => {
                self.run(config, input, &batches);
                return;
            }
            NodeMessage::Coordinator { key, request, body } => {
                let input = self.serve_coordinator(&key, request, body);
                let coordinator_partition =
                    mirror_state_partition(&key, MIRROR_STATE_PARTITIONS).unwrap_or(0);
                NodeInput::CoordinatorAnswer {
                    coordinator_partition,
                    key,
                    input,
                }
            }
            NodeMessage::QueryLastMirroredEpoch { key, request } => {
                let input = match self.source_logs.get(&key) {
                    Some(log) => Input::LastMirroredEpochReceived {
                        request,
                        lme: None,
                        source_log_start_offset: log.log_start_offset(),
                    },
                    None => Input::RequestFailed {
                        request,
                        error: UNKNOWN_TOPIC_ID.into(),
                    },
                };
                NodeInput::Partition { key, input }
            }
            NodeMessage::BumpLeaderEpoch {
                key,
                request,
                at_least,
            } => {
                let Some(p) = self.dest.get_mut(&key) else {
                    return;
                };
                p.leader_epoch = (p.leader_epoch + 1).max(at_least);
                NodeInput::Partition {
                    key,
                    input: Input::LeaderEpochBumped {
                        request,
                        leader_epoch: p.leader_epoch,
                    },
                }
            }
            NodeMessage::Fetch(fetch) => {
                let (response, batches) = self.serve_fetch(&fetch, None);
                self.send(NodeMessage::Answer {
                    input: NodeInput::FetchResponse(response),
                    batches,
                });
                return;
            }
        };
        self.send(NodeMessage::Answer {
            input: answer,
            batches: Fetched::new(),
        });
    }

    /// The source's answer to `fetch`, every part served from the source log with the kernel's
    /// `serve_fetch`, except `fault`'s partition, which gets the fault's result instead, and a
    /// partition of a topic the source deleted, which gets [`UNKNOWN_TOPIC_ID`].
    pub fn serve_fetch(
        &self,
        fetch: &CoalescedFetch,
        fault: Option<(PartitionKey, PartitionFetchResult)>,
    ) -> (CoalescedFetchResponse, Fetched) {
        let mut batches = Fetched::new();
        let mut partitions = Vec::new();
        for (key, part) in &fetch.partitions {
            let result = match &fault {
                Some((faulty, result)) if faulty == key => result.clone(),
                _ => {
                    let Some(log) = self.source_logs.get(key) else {
                        partitions.push(PartitionFetchResponse {
                            key: *key,
                            request: part.request,
                            result: PartitionFetchResult::Failed(UNKNOWN_TOPIC_ID.into()),
                        });
                        continue;
                    };
                    let served = serve_fetch(
                        log,
                        part.fetch_offset,
                        part.last_fetched_epoch,
                        part.isolation,
                        MAX_FETCH_BATCHES,
                    );
                    let outcome = served.outcome();
                    let (_, fetched) = served.into_parts();
                    if !fetched.is_empty() {
                        batches.insert(*key, fetched);
                    }
                    PartitionFetchResult::Completed(outcome)
                }
            };
            partitions.push(PartitionFetchResponse {
                key: *key,
                request: part.request,
                result,
            });
        }
        let response = CoalescedFetchResponse {
            fetcher: fetch.fetcher,
            partitions,
        };
        (response, batches)
    }

    /// The coordinator serves one request.
    fn serve_coordinator(
        &mut self,
        key: &MirrorPartition,
        request: kmirror_kernel::effect::RequestId,
        body: CoordinatorRequest,
    ) -> Input {
        match body {
            CoordinatorRequest::Read => Input::StateRead {
                request,
                value: self.coordinator.read_state(key).cloned(),
            },
            CoordinatorRequest::Write {
                value,
                expected_state_epoch,
            } => {
                let before = self.coordinator.read_state(key).cloned();
                match self
                    .coordinator
                    .write_state(key, value, expected_state_epoch)
                {
                    Ok(value) => {
                        self.observe_write(key, before.as_ref(), &value);
                        Input::StateWritten { request, value }
                    }
                    Err(refused) => Input::WriteFenced {
                        request,
                        reason: refused.reason(),
                    },
                }
            }
            CoordinatorRequest::WriteLastMirroredEpoch {
                value,
                expected_state_epoch,
            } => match self
                .coordinator
                .write_last_mirrored_epoch(key, value, expected_state_epoch)
            {
                Ok(_) => Input::LastMirroredEpochWritten { request },
                Err(refused) => Input::WriteFenced {
                    request,
                    reason: refused.reason(),
                },
            },
        }
    }
}
