//! The node manager, one input at a time: each test asserts the exact tagged effects, the exact
//! coalesced fetches and the exact errors, through the public API only.

use std::collections::BTreeMap;

use im::OrdSet;
use kmirror_kernel::apply::apply_log_effect;
use kmirror_kernel::config::{FetchIsolation, MirrorConfig};
use kmirror_kernel::coordinator::Coordinator;
use kmirror_kernel::desired::DesiredState;
use kmirror_kernel::effect::{Effect, LogEffect, RequestId, TruncationCause};
use kmirror_kernel::input::{FetchOutcome, Input};
use kmirror_kernel::mem_log::MemLog;
use kmirror_kernel::node::{
    coordinator_moved_error, fetcher_id, CoalescedFetch, CoalescedFetchResponse, FetchRequest,
    FetchStatus, FetcherKey, InvalidNodeConfig, NodeConfig, NodeEffect, NodeError, NodeInput,
    NodeMirror, NodeOutput, PartitionFetchResponse, PartitionFetchResult, PartitionKey,
};
use kmirror_kernel::partition::{Activity, Ignored};
use kmirror_kernel::partitioner::mirror_state_partition;
use kmirror_kernel::records::MirrorPartitionStateValue;
use kmirror_kernel::state::MirrorState;
use kmirror_kernel::types::{MirrorName, MirrorPartition, TimestampMs, TopicId};

const ME: i32 = 1;
const A: TopicId = TopicId::from_u64(7);
const B: TopicId = TopicId::from_u64(8);
const A0: PartitionKey = PartitionKey::new(A, 0);
const A1: PartitionKey = PartitionKey::new(A, 1);
const B0: PartitionKey = PartitionKey::new(B, 0);

fn east() -> MirrorName {
    MirrorName::new("east").unwrap()
}

fn mirror_key(key: PartitionKey) -> MirrorPartition {
    key.in_mirror(east())
}

fn set(ids: &[i32]) -> OrdSet<i32> {
    ids.iter().copied().collect()
}

fn tagged(key: PartitionKey, effect: Effect) -> NodeEffect {
    NodeEffect::Partition { key, effect }
}

fn fetch_request(offset: i64, epoch: Option<i32>) -> FetchRequest {
    FetchRequest {
        request: RequestId::for_fetch(offset, epoch),
        fetch_offset: offset,
        last_fetched_epoch: epoch,
        isolation: FetchIsolation::ReadCommitted,
    }
}

fn no_data(fetch: &FetchRequest) -> PartitionFetchResult {
    PartitionFetchResult::Completed(FetchOutcome::Records {
        next_offset: fetch.fetch_offset,
        last_epoch: fetch.last_fetched_epoch,
    })
}

/// A node, its partitions' logs and one coordinator standing for every `__mirror_state`
/// partition.
struct Node {
    config: MirrorConfig,
    node: NodeMirror,
    logs: BTreeMap<PartitionKey, MemLog>,
    coordinator: Coordinator,
    now: TimestampMs,
}

impl Node {
    fn new(node_config: NodeConfig) -> Self {
        let config = MirrorConfig::default();
        let mut node = Node {
            coordinator: Coordinator::new(config.transitions.clone()),
            config,
            node: NodeMirror::new(node_config).unwrap(),
            logs: [A0, A1, B0]
                .into_iter()
                .map(|k| (k, MemLog::new()))
                .collect(),
            now: 0,
        };
        let mirror = DesiredState::Mirror(east());
        assert_eq!(node.topic(A, mirror.clone(), 2), NodeOutput::default());
        assert_eq!(node.topic(B, mirror, 1), NodeOutput::default());
        node
    }

    /// Handles `input`, applies the log effects to the logs, returns the output.
    fn step(&mut self, input: NodeInput) -> NodeOutput {
        let out = self.node.handle(&self.config, self.now, input, &self.logs);
        for e in &out.effects {
            if let NodeEffect::Partition {
                key,
                effect: Effect::Log(le),
            } = e
            {
                apply_log_effect(self.logs.get_mut(key).unwrap(), le, &[]).unwrap();
            }
        }
        out
    }

    fn topic(&mut self, topic_id: TopicId, desired: DesiredState, partitions: i32) -> NodeOutput {
        self.step(NodeInput::Topic {
            topic_id,
            desired,
            partitions,
        })
    }

    fn partition(&mut self, key: PartitionKey, input: Input) -> NodeOutput {
        self.step(NodeInput::Partition { key, input })
    }

    fn lead(&mut self, key: PartitionKey, epoch: i32) -> NodeOutput {
        self.partition(
            key,
            Input::BecameLeader {
                leader_epoch: epoch,
                replicas: set(&[ME]),
                isr: set(&[ME]),
            },
        )
    }

    /// Answers every coordinator and LME request in `out` (and those they cause) at once,
    /// through `CoordinatorAnswer` for the coordinator's; returns the other effects.
    fn settle(&mut self, out: NodeOutput) -> Vec<NodeEffect> {
        assert_eq!(out.errors, vec![]);
        let mut rest = Vec::new();
        let mut pending = out.effects;
        while !pending.is_empty() {
            let mut next = Vec::new();
            for effect in pending {
                let NodeEffect::Partition { key, effect } = &effect else {
                    rest.push(effect);
                    continue;
                };
                let input = match effect.clone() {
                    Effect::ReadState { request, key: mk } => Some(NodeInput::CoordinatorAnswer {
                        coordinator_partition: self.node.coordinator_partition(key).unwrap(),
                        input: Input::StateRead {
                            request,
                            value: self.coordinator.read_state(&mk).cloned(),
                        },
                        key: mk,
                    }),
                    Effect::WriteState {
                        request,
                        key: mk,
                        value,
                        expected_state_epoch,
                    } => {
                        let value = self
                            .coordinator
                            .write_state(&mk, value, expected_state_epoch)
                            .unwrap();
                        Some(NodeInput::CoordinatorAnswer {
                            coordinator_partition: self.node.coordinator_partition(key).unwrap(),
                            input: Input::StateWritten { request, value },
                            key: mk,
                        })
                    }
                    Effect::QueryLastMirroredEpoch { request, .. } => Some(NodeInput::Partition {
                        key: *key,
                        input: Input::LastMirroredEpochReceived {
                            request,
                            lme: None,
                            source_log_start_offset: 0,
                        },
                    }),
                    _ => None,
                };
                match input {
                    Some(input) => {
                        let out = self.step(input);
                        assert_eq!(out.errors, vec![]);
                        next.extend(out.effects);
                    }
                    None => rest.push(NodeEffect::Partition {
                        key: *key,
                        effect: effect.clone(),
                    }),
                }
            }
            pending = next;
        }
        rest
    }

    /// Leads `key` at epoch 1 and answers until it is MIRRORING.
    fn mirroring(&mut self, key: PartitionKey) {
        let out = self.lead(key, 1);
        assert_eq!(
            self.settle(out),
            vec![
                tagged(key, Effect::SetWritable(false)),
                tagged(
                    key,
                    Effect::Log(LogEffect::TruncateFullyAndStartAt {
                        offset: 0,
                        cause: TruncationCause::NoLastMirroredEpoch,
                    })
                ),
                tagged(key, Effect::StartFetcher)
            ],
            "the fetch itself is kept by the node"
        );
        assert_eq!(
            self.node.partition(&key).unwrap().state(),
            MirrorState::Mirroring
        );
    }

    fn respond(
        &mut self,
        fetch: &CoalescedFetch,
        result: impl Fn(&PartitionKey, &FetchRequest) -> Option<PartitionFetchResult>,
    ) -> NodeOutput {
        let partitions = fetch
            .partitions
            .iter()
            .filter_map(|(key, f)| {
                result(key, f).map(|result| PartitionFetchResponse {
                    key: *key,
                    request: f.request,
                    result,
                })
            })
            .collect();
        self.step(NodeInput::FetchResponse(CoalescedFetchResponse {
            fetcher: fetch.fetcher,
            partitions,
        }))
    }
}

fn sources(n: &mut Node) {
    let out = n.step(NodeInput::SourceTopic {
        topic_id: A,
        leaders: vec![Some(101), Some(101)],
    });
    assert_eq!(out, NodeOutput::default());
    let out = n.step(NodeInput::SourceTopic {
        topic_id: B,
        leaders: vec![Some(102)],
    });
    assert_eq!(out, NodeOutput::default());
}

fn fetcher(source_broker: i32) -> FetcherKey {
    FetcherKey {
        source_broker,
        fetcher_id: 0,
    }
}

#[test]
fn a_zero_fetcher_or_zero_partition_config_is_refused() {
    let mut config = NodeConfig::new(ME);
    config.num_fetchers = 0;
    assert_eq!(NodeMirror::new(config), Err(InvalidNodeConfig::NoFetchers));
    let mut config = NodeConfig::new(ME);
    config.mirror_state_partitions = 0;
    assert_eq!(
        NodeMirror::new(config),
        Err(InvalidNodeConfig::NoMirrorStatePartitions)
    );
}

#[test]
fn unknown_and_stale_keys_are_typed_errors() {
    let mut n = Node::new(NodeConfig::new(ME));
    let c = TopicId::from_u64(9);
    let out = n.lead(PartitionKey::new(c, 0), 1);
    assert_eq!(out.errors, vec![NodeError::UnknownTopic { topic_id: c }]);
    assert_eq!(out.effects, vec![]);

    let beyond = PartitionKey::new(A, 2);
    n.logs.insert(beyond, MemLog::new());
    let out = n.lead(beyond, 1);
    assert_eq!(
        out.errors,
        vec![NodeError::UnknownPartition { key: beyond }]
    );

    let out = n.partition(A0, Input::HighWatermarkAdvanced);
    assert_eq!(out.errors, vec![NodeError::UnknownPartition { key: A0 }]);
    let out = n.partition(A0, Input::BecameFollower);
    assert_eq!(out.errors, vec![NodeError::UnknownPartition { key: A0 }]);

    let log = n.logs.remove(&A1).unwrap();
    assert_eq!(
        n.lead(A1, 1).errors,
        vec![NodeError::NoLog { key: A1 }],
        "no partition is created without its log"
    );
    assert!(n.node.partition(&A1).is_none());
    n.logs.insert(A1, log);

    assert_eq!(
        n.lead(A0, 1).effects,
        vec![
            tagged(A0, Effect::SetWritable(false)),
            tagged(
                A0,
                Effect::ReadState {
                    request: RequestId(1),
                    key: mirror_key(A0)
                }
            )
        ],
        "the gate is closed before anything else"
    );
    let out = n.partition(
        A0,
        Input::StateRead {
            request: RequestId(5),
            value: None,
        },
    );
    assert_eq!(
        out,
        NodeOutput {
            effects: vec![],
            errors: vec![NodeError::Ignored {
                key: A0,
                reason: Ignored::StaleCompletion(RequestId(5))
            }]
        }
    );
    let out = n.partition(A0, Input::DesiredStateChanged(DesiredState::NotMirrored));
    assert_eq!(out.errors, vec![NodeError::TopicWideInput { key: A0 }]);
    assert_eq!(n.node.desired(&A), Some(&DesiredState::Mirror(east())));

    let out = n.step(NodeInput::SourceTopic {
        topic_id: c,
        leaders: vec![],
    });
    assert_eq!(out.errors, vec![NodeError::UnknownTopic { topic_id: c }]);
    let stray = FetcherKey {
        source_broker: 101,
        fetcher_id: 0,
    };
    let out = n.step(NodeInput::FetchFailed { fetcher: stray });
    assert_eq!(
        out.errors,
        vec![NodeError::NoFetchInFlight { fetcher: stray }]
    );
}

#[test]
fn leadership_creates_and_drops_the_partition_and_numbering_continues() {
    let mut n = Node::new(NodeConfig::new(ME));
    n.mirroring(A0);
    assert_eq!(
        n.partition(A0, Input::BecameFollower),
        NodeOutput {
            effects: vec![tagged(A0, Effect::StopFetcher)],
            errors: vec![]
        }
    );
    assert!(n.node.partition(&A0).is_none());
    assert!(n.node.fetch_slot(&A0).is_none());
    assert_eq!(n.node.partitions().count(), 0);
    assert!(n.node.poll_fetches(0).is_empty());

    // Requests 1 to 4 were used by the first leadership: the next read is 5, and a late answer
    // to request 1 is stale.
    assert_eq!(
        n.lead(A0, 2).effects,
        vec![
            tagged(A0, Effect::SetWritable(false)),
            tagged(
                A0,
                Effect::ReadState {
                    request: RequestId(5),
                    key: mirror_key(A0)
                }
            )
        ]
    );
    let out = n.partition(
        A0,
        Input::StateRead {
            request: RequestId(1),
            value: None,
        },
    );
    assert_eq!(
        out.errors,
        vec![NodeError::Ignored {
            key: A0,
            reason: Ignored::StaleCompletion(RequestId(1))
        }]
    );
    // A stale leadership is the partition's decision.
    let out = n.lead(A0, 1);
    assert_eq!(
        out.errors,
        vec![NodeError::Ignored {
            key: A0,
            reason: Ignored::StaleLeaderEpoch { current: 2, got: 1 }
        }]
    );
}

#[test]
fn a_mirror_name_change_fans_out_to_the_topics_led_partitions_only() {
    let mut n = Node::new(NodeConfig::new(ME));
    n.mirroring(A0);
    n.mirroring(A1);
    n.mirroring(B0);
    let stored = |n: &Node, key| n.coordinator.read_state(&mirror_key(key)).unwrap().clone();
    let stopping = |v: MirrorPartitionStateValue| MirrorPartitionStateValue {
        state: MirrorState::Stopping,
        previous_state: Some(MirrorState::Mirroring),
        ..v
    };
    let (a0, a1) = (stored(&n, A0), stored(&n, A1));
    let out = n.topic(A, DesiredState::Stop(east()), 2);
    assert_eq!(
        out,
        NodeOutput {
            effects: vec![
                tagged(A0, Effect::StopFetcher),
                tagged(
                    A0,
                    Effect::WriteState {
                        request: RequestId(5),
                        key: mirror_key(A0),
                        value: stopping(a0.clone()),
                        expected_state_epoch: Some(a0.state_epoch),
                    }
                ),
                tagged(A1, Effect::StopFetcher),
                tagged(
                    A1,
                    Effect::WriteState {
                        request: RequestId(5),
                        key: mirror_key(A1),
                        value: stopping(a1.clone()),
                        expected_state_epoch: Some(a1.state_epoch),
                    }
                ),
            ],
            errors: vec![]
        }
    );
    assert!(n.node.fetch_slot(&A0).is_none() && n.node.fetch_slot(&A1).is_none());
    assert!(n.node.fetch_slot(&B0).is_some(), "B is untouched");
    assert_eq!(
        n.topic(A, DesiredState::Stop(east()), 2),
        NodeOutput::default(),
        "an unchanged mirror.name is not sent again"
    );
}

#[test]
fn ready_partitions_are_coalesced_per_source_leader() {
    let mut n = Node::new(NodeConfig::new(ME));
    n.mirroring(A0);
    n.mirroring(A1);
    n.mirroring(B0);
    assert!(
        n.node.poll_fetches(0).is_empty(),
        "no source leader known yet: nothing is sent"
    );
    sources(&mut n);
    let fetches = n.node.poll_fetches(0);
    assert_eq!(
        fetches,
        vec![
            CoalescedFetch {
                fetcher: fetcher(101),
                partitions: vec![(A0, fetch_request(0, None)), (A1, fetch_request(0, None))],
            },
            CoalescedFetch {
                fetcher: fetcher(102),
                partitions: vec![(B0, fetch_request(0, None))],
            },
        ]
    );
    assert_eq!(
        n.node.fetch_slot(&A0).unwrap().status,
        FetchStatus::InFlight(fetcher(101))
    );
    assert!(n.node.poll_fetches(0).is_empty(), "all in flight");

    // A0 gets two batches (the source epoch 0 is below our leader epoch 1), A1 nothing.
    let out = n.respond(&fetches[0], |key, f| {
        Some(if *key == A0 {
            PartitionFetchResult::Completed(FetchOutcome::Records {
                next_offset: 2,
                last_epoch: Some(0),
            })
        } else {
            no_data(f)
        })
    });
    assert_eq!(
        out,
        NodeOutput {
            effects: vec![tagged(A0, Effect::Log(LogEffect::AppendFetched))],
            errors: vec![]
        }
    );
    assert_eq!(
        n.node.poll_fetches(0),
        vec![CoalescedFetch {
            fetcher: fetcher(101),
            partitions: vec![
                (A0, fetch_request(2, Some(0))),
                (A1, fetch_request(0, None))
            ],
        }],
        "broker 102's fetcher still has B0 in flight"
    );
}

#[test]
fn partitions_are_spread_over_n_fetchers_by_a_stable_hash() {
    let mut config = NodeConfig::new(ME);
    config.num_fetchers = 4;
    let mut n = Node::new(config);
    n.mirroring(A0);
    n.mirroring(A1);
    n.mirroring(B0);
    n.step(NodeInput::SourceTopic {
        topic_id: B,
        leaders: vec![Some(101)],
    });
    n.step(NodeInput::SourceTopic {
        topic_id: A,
        leaders: vec![Some(101), Some(101)],
    });
    let mut expected: BTreeMap<FetcherKey, Vec<(PartitionKey, FetchRequest)>> = BTreeMap::new();
    for key in [A0, A1, B0] {
        let fetcher = FetcherKey {
            source_broker: 101,
            fetcher_id: fetcher_id(&key, 4),
        };
        assert_eq!(n.node.fetcher_of(&key), Some(fetcher));
        assert!(fetcher.fetcher_id < 4);
        expected
            .entry(fetcher)
            .or_default()
            .push((key, fetch_request(0, None)));
    }
    let expected: Vec<CoalescedFetch> = expected
        .into_iter()
        .map(|(fetcher, partitions)| CoalescedFetch {
            fetcher,
            partitions,
        })
        .collect();
    assert_eq!(expected.len(), 3, "one request per fetcher of broker 101");
    assert_eq!(n.node.poll_fetches(0), expected);
    // Pinned: abs(31 * murmur2(topic id) + partition) modulo 4; A's partitions on
    // consecutive fetchers.
    assert_eq!(
        [fetcher_id(&A0, 4), fetcher_id(&A1, 4), fetcher_id(&B0, 4)],
        [2, 1, 0]
    );
}

#[test]
fn resizing_the_fetchers_asks_every_fetch_in_flight_again_on_its_new_fetcher() {
    let mut n = Node::new(NodeConfig::new(ME));
    n.mirroring(A0);
    n.mirroring(A1);
    n.mirroring(B0);
    sources(&mut n);
    let first = n.node.poll_fetches(0);
    assert_eq!(first.len(), 2, "one fetcher per source broker");
    assert_eq!(n.node.poll_fetches(0), vec![], "all in flight");
    assert_eq!(
        n.node.set_num_fetchers(0),
        Err(InvalidNodeConfig::NoFetchers)
    );
    n.node.set_num_fetchers(1).unwrap();
    assert_eq!(
        n.node.poll_fetches(0),
        vec![],
        "the same number changes nothing"
    );

    n.node.set_num_fetchers(4).unwrap();
    assert_eq!(n.node.config().num_fetchers, 4);
    let again = n.node.poll_fetches(0);
    let asked: Vec<(FetcherKey, Vec<PartitionKey>)> = again
        .iter()
        .map(|f| (f.fetcher, f.partitions.iter().map(|(k, _)| *k).collect()))
        .collect();
    let on = |source_broker, key: &PartitionKey| FetcherKey {
        source_broker,
        fetcher_id: fetcher_id(key, 4),
    };
    assert_eq!(
        asked,
        vec![
            (on(101, &A1), vec![A1]),
            (on(101, &A0), vec![A0]),
            (on(102, &B0), vec![B0]),
        ],
        "each fetch in flight asked again on its new fetcher, with the same request"
    );
    assert!(again.iter().all(|f| f
        .partitions
        .iter()
        .all(|(_, r)| *r == fetch_request(0, None))));
    // An answer to a request of the old fetchers changes nothing.
    let out = n.respond(&first[0], |_, f| Some(no_data(f)));
    assert!(matches!(
        out.errors.as_slice(),
        [NodeError::NoFetchInFlight { .. }] | [NodeError::StaleFetch { .. }, ..]
    ));
    assert!(out.effects.is_empty());
}

#[test]
fn paused_and_backing_off_partitions_are_left_out_without_delaying_the_others() {
    let mut n = Node::new(NodeConfig::new(ME));
    n.mirroring(A0);
    n.mirroring(A1);
    n.mirroring(B0);
    sources(&mut n);

    // B pauses: its fetch is withdrawn before it is ever sent.
    let out = n.topic(B, DesiredState::Pause(east()), 1);
    let effects = n.settle(out);
    assert_eq!(effects, vec![tagged(B0, Effect::StopFetcher)]);
    assert_eq!(n.node.partition(&B0).unwrap().state(), MirrorState::Paused);
    assert!(n.node.fetch_slot(&B0).is_none());

    let fetches = n.node.poll_fetches(0);
    assert_eq!(
        fetches,
        vec![CoalescedFetch {
            fetcher: fetcher(101),
            partitions: vec![(A0, fetch_request(0, None)), (A1, fetch_request(0, None))],
        }]
    );

    // A0: a retriable error (backoff 1000 ms, the partition is not told); A1: nothing new.
    n.now = 10;
    let out = n.respond(&fetches[0], |key, f| {
        Some(if *key == A0 {
            PartitionFetchResult::Retriable("NOT_LEADER_OR_FOLLOWER".into())
        } else {
            no_data(f)
        })
    });
    assert_eq!(out, NodeOutput::default());
    assert_eq!(
        n.node.fetch_slot(&A0).unwrap().status,
        FetchStatus::Ready {
            not_before: Some(1_010)
        }
    );
    assert_eq!(n.node.next_fetch_due(), Some(1_010));
    let fetches = n.node.poll_fetches(10);
    assert_eq!(
        fetches,
        vec![CoalescedFetch {
            fetcher: fetcher(101),
            partitions: vec![(A1, fetch_request(0, None))],
        }]
    );
    // A partition left out of the response is fetched again, untold (incremental fetch).
    assert_eq!(n.respond(&fetches[0], |_, _| None), NodeOutput::default());
    assert_eq!(
        n.node.poll_fetches(1_010),
        vec![CoalescedFetch {
            fetcher: fetcher(101),
            partitions: vec![(A0, fetch_request(0, None)), (A1, fetch_request(0, None))],
        }]
    );

    // A whole request lost: every partition backs off, none is told.
    n.now = 2_000;
    let out = n.step(NodeInput::FetchFailed {
        fetcher: fetcher(101),
    });
    assert_eq!(out, NodeOutput::default());
    assert!(n.node.poll_fetches(2_999).is_empty());
    let fetches = n.node.poll_fetches(3_000);
    assert_eq!(fetches[0].partitions.len(), 2);

    // A0 fails for good: the partition persists FAILED and backs off with its own timer; A1 is
    // fetched on.
    let out = n.respond(&fetches[0], |key, f| {
        Some(if *key == A0 {
            PartitionFetchResult::Failed("TOPIC_AUTHORIZATION_FAILED".into())
        } else {
            no_data(f)
        })
    });
    let stored = n.coordinator.read_state(&mirror_key(A0)).unwrap().clone();
    assert_eq!(
        out.effects,
        vec![
            tagged(A0, Effect::StopFetcher),
            tagged(
                A0,
                Effect::WriteState {
                    request: RequestId(5),
                    key: mirror_key(A0),
                    value: MirrorPartitionStateValue {
                        state: MirrorState::Failed,
                        error_message: Some("TOPIC_AUTHORIZATION_FAILED".into()),
                        retry_attempt: 1,
                        previous_state: Some(MirrorState::Mirroring),
                        ..stored.clone()
                    },
                    expected_state_epoch: Some(stored.state_epoch),
                }
            )
        ]
    );
    let effects = n.settle(out);
    assert_eq!(
        effects,
        vec![
            tagged(A0, Effect::StopFetcher),
            tagged(
                A0,
                Effect::ScheduleRetry {
                    attempt: 1,
                    delay_ms: 100
                }
            )
        ]
    );
    assert!(n.node.fetch_slot(&A0).is_none());
    assert_eq!(
        n.node.poll_fetches(3_000),
        vec![CoalescedFetch {
            fetcher: fetcher(101),
            partitions: vec![(A1, fetch_request(0, None))],
        }]
    );
}

#[test]
fn stale_fetch_answers_are_refused_and_a_moved_source_leader_gets_the_fetch() {
    let mut n = Node::new(NodeConfig::new(ME));
    n.mirroring(A0);
    n.mirroring(A1);
    sources(&mut n);
    let fetches = n.node.poll_fetches(0);
    assert_eq!(fetches.len(), 1);

    // A0's source leader moves to 103: sent again there at once.
    let out = n.step(NodeInput::SourceTopic {
        topic_id: A,
        leaders: vec![Some(103), Some(101)],
    });
    assert_eq!(out, NodeOutput::default());
    assert_eq!(
        n.node.poll_fetches(0),
        vec![CoalescedFetch {
            fetcher: fetcher(103),
            partitions: vec![(A0, fetch_request(0, None))],
        }]
    );
    // The old leader's answer for A0 is stale; A1's is routed. A second answer for A1 and an
    // answer for a partition not asked are stale too.
    let a0 = fetch_request(0, None);
    let out = n.step(NodeInput::FetchResponse(CoalescedFetchResponse {
        fetcher: fetcher(101),
        partitions: vec![
            PartitionFetchResponse {
                key: A0,
                request: a0.request,
                result: no_data(&a0),
            },
            PartitionFetchResponse {
                key: A1,
                request: a0.request,
                result: no_data(&a0),
            },
            PartitionFetchResponse {
                key: A1,
                request: a0.request,
                result: no_data(&a0),
            },
            PartitionFetchResponse {
                key: B0,
                request: a0.request,
                result: no_data(&a0),
            },
        ],
    }));
    let stale = |key| NodeError::StaleFetch {
        key,
        request: a0.request,
        fetcher: fetcher(101),
    };
    assert_eq!(
        out,
        NodeOutput {
            effects: vec![],
            errors: vec![stale(A0), stale(A1), stale(B0)]
        }
    );
    assert_eq!(
        n.node.fetch_slot(&A1).unwrap().status,
        FetchStatus::Ready { not_before: None }
    );
    assert_eq!(
        n.node.fetch_slot(&A0).unwrap().status,
        FetchStatus::InFlight(fetcher(103))
    );
}

#[test]
fn source_growth_asks_for_partitions_once_and_a_shrink_is_refused() {
    let mut n = Node::new(NodeConfig::new(ME));
    // Not leading partition 0: another node asks.
    n.mirroring(A1);
    let grow = NodeInput::SourceTopic {
        topic_id: A,
        leaders: vec![Some(101), Some(101), Some(102)],
    };
    assert_eq!(n.step(grow.clone()), NodeOutput::default());
    // Leading partition 0: asked at once, and only once per count.
    let out = n.lead(A0, 1);
    assert_eq!(
        out.effects,
        vec![
            tagged(A0, Effect::SetWritable(false)),
            tagged(
                A0,
                Effect::ReadState {
                    request: RequestId(1),
                    key: mirror_key(A0)
                }
            ),
            NodeEffect::CreatePartitions {
                topic_id: A,
                total: 3
            }
        ]
    );
    assert_eq!(n.step(grow), NodeOutput::default());
    // The destination grew: nothing more to ask.
    assert_eq!(
        n.topic(A, DesiredState::Mirror(east()), 3),
        NodeOutput::default()
    );
    let out = n.step(NodeInput::SourceTopic {
        topic_id: A,
        leaders: vec![Some(101); 4],
    });
    assert_eq!(
        out.effects,
        vec![NodeEffect::CreatePartitions {
            topic_id: A,
            total: 4
        }]
    );

    // Fewer source partitions than the destination: an error, no effect, nothing changes.
    let out = n.step(NodeInput::SourceTopic {
        topic_id: A,
        leaders: vec![Some(105)],
    });
    assert_eq!(
        out,
        NodeOutput {
            effects: vec![],
            errors: vec![NodeError::SourcePartitionsShrank {
                topic_id: A,
                source_partitions: 1,
                destination_partitions: 3
            }]
        }
    );
    assert_eq!(n.node.source_leader(&A0), Some(101));
    let out = n.topic(A, DesiredState::Mirror(east()), 2);
    assert_eq!(
        out.errors,
        vec![NodeError::DestinationPartitionsShrank {
            topic_id: A,
            current: 3,
            got: 2
        }]
    );
}

#[test]
fn coordinator_answers_and_moves_follow_the_mirror_state_partition() {
    let mut config = NodeConfig::new(ME);
    config.mirror_state_partitions = 50;
    let mut n = Node::new(config);
    let place = |key| mirror_state_partition(&mirror_key(key), 50).unwrap();
    let (a0, a1) = (place(A0), place(A1));
    assert_ne!(a0, a1, "the test needs two coordinator partitions");

    n.lead(A0, 1);
    n.lead(A1, 1);
    assert_eq!(n.node.coordinator_partition(&A0), Some(a0));
    assert_eq!(
        n.node.partitions_on_coordinator(a0).collect::<Vec<_>>(),
        vec![&A0]
    );

    // An answer from the wrong coordinator partition is refused.
    let wrong = NodeInput::CoordinatorAnswer {
        coordinator_partition: a1,
        key: mirror_key(A0),
        input: Input::StateRead {
            request: RequestId(1),
            value: None,
        },
    };
    assert_eq!(
        n.step(wrong).errors,
        vec![NodeError::WrongCoordinator {
            key: A0,
            expected: Some(a0),
            got: a1
        }]
    );

    // Coordinator partition a0 moves: A0's read in flight fails, A1's is untouched.
    let out = n.step(NodeInput::CoordinatorMoved {
        coordinator_partition: a0,
    });
    assert_eq!(
        out,
        NodeOutput {
            effects: vec![tagged(
                A0,
                Effect::ScheduleRetry {
                    attempt: 1,
                    delay_ms: 100
                }
            )],
            errors: vec![]
        }
    );
    assert_eq!(
        n.node.partition(&A0).unwrap().activity(),
        &Activity::AwaitingRetry { attempt: 1 }
    );
    assert_eq!(
        n.node.partition(&A1).unwrap().activity(),
        &Activity::Reading(RequestId(1))
    );
    let _ = coordinator_moved_error(a0);

    // The right partition routes; a new mirror name moves the key to another partition.
    let out = n.step(NodeInput::CoordinatorAnswer {
        coordinator_partition: a1,
        key: mirror_key(A1),
        input: Input::StateRead {
            request: RequestId(1),
            value: None,
        },
    });
    assert_eq!(out.errors, vec![]);
    let west = MirrorName::new("west").unwrap();
    n.topic(A, DesiredState::Mirror(west.clone()), 2);
    let moved = mirror_state_partition(&A1.in_mirror(west), 50).unwrap();
    assert_eq!(n.node.coordinator_partition(&A1), Some(moved));
    assert!(n.node.partitions_on_coordinator(moved).any(|k| *k == A1));
    if moved != a1 {
        assert!(!n.node.partitions_on_coordinator(a1).any(|k| *k == A1));
    }
}
