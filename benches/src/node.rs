//! [`NodeExecutor`]: the smallest complete executor of a [`NodeMirror`]'s tagged effects, the
//! node-manager twin of [`Executor`](crate::Executor): one in-memory [`Coordinator`] standing
//! for every `__mirror_state` partition, a [`MemLog`] per partition (one replica: the high
//! watermark follows the log end offset), epoch bumps and LME writes acknowledged at once, and
//! a source with nothing to mirror (every coalesced fetch answered "no new records"). It lets
//! a benchmark drive thousands of partitions through the node manager without I/O, so what is
//! timed is the node manager and the kernel.

use std::collections::{BTreeMap, VecDeque};

use kmirror_kernel::apply::apply_log_effect;
use kmirror_kernel::batch::ControlType;
use kmirror_kernel::config::MirrorConfig;
use kmirror_kernel::coordinator::Coordinator;
use kmirror_kernel::desired::DesiredState;
use kmirror_kernel::effect::Effect;
use kmirror_kernel::input::{FetchOutcome, Input};
use kmirror_kernel::log::{LogView, PartitionLog};
use kmirror_kernel::mem_log::MemLog;
use kmirror_kernel::node::{
    CoalescedFetch, CoalescedFetchResponse, NodeConfig, NodeEffect, NodeInput, NodeMirror,
    PartitionFetchResponse, PartitionFetchResult, PartitionKey,
};
use kmirror_kernel::types::{EpochAndOffset, TopicId};

use crate::mirror_name;

/// The source broker leading every source partition.
pub const SOURCE_BROKER: i32 = 101;

/// Topic `t` of a node benchmark.
pub fn topic(t: u64) -> TopicId {
    TopicId::from_u64(1_000 + t)
}

/// A node manager, its partitions' logs and one coordinator. See the
/// [module documentation](self).
#[derive(Debug)]
pub struct NodeExecutor {
    /// The kernel configuration.
    pub config: MirrorConfig,
    /// The node manager.
    pub node: NodeMirror,
    /// One log per partition.
    pub logs: BTreeMap<PartitionKey, MemLog>,
    /// Every `__mirror_state` partition's records.
    pub coordinator: Coordinator,
    /// Inputs handed to the node so far.
    pub inputs: u64,
}

impl NodeExecutor {
    /// A node (broker 1, Kafka's defaults) knowing `topics` topics of `partitions` partitions
    /// each, all mirrored, their source leader [`SOURCE_BROKER`], with an empty log per
    /// partition; nothing is led yet.
    pub fn new(topics: u64, partitions: i32) -> Self {
        let config = MirrorConfig::default();
        let mut exec = NodeExecutor {
            coordinator: Coordinator::new(config.transitions.clone()),
            node: NodeMirror::new(NodeConfig::new(1)).expect("a valid node config"),
            config,
            logs: BTreeMap::new(),
            inputs: 0,
        };
        for t in 0..topics {
            for p in 0..partitions {
                exec.logs
                    .insert(PartitionKey::new(topic(t), p), MemLog::new());
            }
            exec.run(NodeInput::Topic {
                topic_id: topic(t),
                desired: DesiredState::Mirror(mirror_name()),
                partitions,
            });
            exec.run(NodeInput::SourceTopic {
                topic_id: topic(t),
                leaders: vec![Some(SOURCE_BROKER); partitions as usize],
            });
        }
        exec
    }

    /// Leads every partition (UNKNOWN -> PREPARING -> MIRRORING), each `BecameLeader` carrying
    /// clones of one replica set (as a broker passing equal sets would).
    pub fn lead_all(&mut self) {
        let set = im::ordset![1];
        let keys: Vec<PartitionKey> = self.logs.keys().copied().collect();
        for key in keys {
            self.run(NodeInput::Partition {
                key,
                input: Input::BecameLeader {
                    leader_epoch: 1,
                    replicas: set.clone(),
                    isr: set.clone(),
                },
            });
        }
    }

    /// Sets every topic's `mirror.name` desired state to `desired` (a stop, a failback...).
    pub fn set_desired_all(&mut self, topics: u64, partitions: i32, desired: DesiredState) {
        for t in 0..topics {
            self.run(NodeInput::Topic {
                topic_id: topic(t),
                desired: desired.clone(),
                partitions,
            });
        }
    }

    /// The answer "nothing new" to every partition of `fetch`.
    pub fn empty_response(fetch: &CoalescedFetch) -> CoalescedFetchResponse {
        CoalescedFetchResponse {
            fetcher: fetch.fetcher,
            partitions: fetch
                .partitions
                .iter()
                .map(|(key, f)| PartitionFetchResponse {
                    key: *key,
                    request: f.request,
                    result: PartitionFetchResult::Completed(FetchOutcome::Records {
                        next_offset: f.fetch_offset,
                        last_epoch: f.last_fetched_epoch,
                    }),
                })
                .collect(),
        }
    }

    /// Handles `input` and every completion it causes (fetches stay with the node manager).
    pub fn run(&mut self, input: NodeInput) {
        let mut pending = VecDeque::from([input]);
        while let Some(input) = pending.pop_front() {
            self.inputs += 1;
            let output = self.node.handle(&self.config, 0, input, &self.logs);
            assert!(
                output.errors.is_empty(),
                "the executor sends expected inputs: {:?}",
                output.errors
            );
            for effect in output.effects {
                let NodeEffect::Partition { key, effect } = effect else {
                    panic!("no partition count changes in the benchmarks");
                };
                if let Some(input) = self.execute(key, effect) {
                    pending.push_back(input);
                }
            }
        }
    }

    fn execute(&mut self, key: PartitionKey, effect: Effect) -> Option<NodeInput> {
        let answer = |node: &NodeMirror, mk, input| {
            Some(NodeInput::CoordinatorAnswer {
                coordinator_partition: node.coordinator_partition(&key).expect("in a mirror"),
                key: mk,
                input,
            })
        };
        match effect {
            Effect::Log(e) => {
                let log = self.logs.get_mut(&key).expect("a log per partition");
                apply_log_effect(log, &e, &[]).expect("log effect applies");
                if log.high_watermark() < log.log_end_offset() {
                    log.advance_high_watermark(log.log_end_offset())
                        .expect("HW within the log");
                    if log
                        .last_batch()
                        .is_some_and(|b| b.control == Some(ControlType::MirrorPidReset))
                    {
                        return Some(NodeInput::Partition {
                            key,
                            input: Input::HighWatermarkAdvanced,
                        });
                    }
                }
                None
            }
            Effect::ReadState { request, key: mk } => {
                let value = self.coordinator.read_state(&mk).cloned();
                answer(&self.node, mk, Input::StateRead { request, value })
            }
            Effect::WriteState {
                request,
                key: mk,
                value,
                expected_state_epoch,
            } => {
                let value = self
                    .coordinator
                    .write_state(&mk, value, expected_state_epoch)
                    .expect("write accepted");
                answer(&self.node, mk, Input::StateWritten { request, value })
            }
            Effect::QueryLastMirroredEpoch { request, key: mk } => {
                let stored = self.coordinator.read_last_mirrored_epoch(&mk);
                let lme = stored.and_then(|v| {
                    v.last_mirrored_epoch.map(|epoch| EpochAndOffset {
                        epoch,
                        end_offset: v.last_mirrored_offset,
                    })
                });
                let input = Input::LastMirroredEpochReceived {
                    request,
                    lme,
                    source_log_start_offset: 0,
                };
                Some(NodeInput::Partition { key, input })
            }
            Effect::WriteLastMirroredEpoch {
                request,
                key: mk,
                value,
                expected_state_epoch,
            } => {
                self.coordinator
                    .write_last_mirrored_epoch(&mk, value, expected_state_epoch)
                    .expect("LME write accepted");
                answer(&self.node, mk, Input::LastMirroredEpochWritten { request })
            }
            Effect::BumpLeaderEpoch { request, at_least } => Some(NodeInput::Partition {
                key,
                input: Input::LeaderEpochBumped {
                    request,
                    leader_epoch: at_least,
                },
            }),
            Effect::StartFetcher | Effect::StopFetcher | Effect::SetWritable(_) => None,
            Effect::Fetch { .. } => panic!("the node manager keeps fetches"),
            Effect::ScheduleRetry { .. } => panic!("nothing fails in the benchmarks"),
        }
    }
}
