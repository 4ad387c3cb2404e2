//! The node manager only routes and batches: for random input sequences over three partitions
//! of two topics, each partition's effects through the node are exactly those its
//! `PartitionMirror` returns alone given the same inputs, its state is the lone partition's,
//! and the coalesced fetches carry exactly the lone partitions' outstanding fetches.

use std::collections::BTreeMap;

use im::OrdSet;
use kmirror_kernel::apply::apply_log_effect;
use kmirror_kernel::batch::BatchHeader;
use kmirror_kernel::config::MirrorConfig;
use kmirror_kernel::coordinator::Coordinator;
use kmirror_kernel::desired::DesiredState;
use kmirror_kernel::effect::{Effect, LogEffect, RequestId};
use kmirror_kernel::input::{FetchOutcome, Input};
use kmirror_kernel::log::{LogView, PartitionLog};
use kmirror_kernel::mem_log::MemLog;
use kmirror_kernel::node::{
    coordinator_moved_error, CoalescedFetch, CoalescedFetchResponse, FetchStatus, NodeConfig,
    NodeEffect, NodeError, NodeInput, NodeMirror, PartitionFetchResponse, PartitionFetchResult,
    PartitionKey,
};
use kmirror_kernel::partition::{Activity, Ignored, PartitionMirror};
use kmirror_kernel::partitioner::mirror_state_partition;
use kmirror_kernel::types::{EpochAndOffset, MirrorName, TimestampMs, TopicId};
use proptest::prelude::*;

const ME: i32 = 1;
const COORDINATOR_PARTITIONS: u32 = 3;
const TOPICS: [(TopicId, i32); 2] = [(TopicId::from_u64(7), 2), (TopicId::from_u64(8), 1)];
const KEYS: [PartitionKey; 3] = [
    PartitionKey::new(TopicId::from_u64(7), 0),
    PartitionKey::new(TopicId::from_u64(7), 1),
    PartitionKey::new(TopicId::from_u64(8), 0),
];

fn desired(choice: u8) -> DesiredState {
    let east = MirrorName::new("east").unwrap();
    match choice % 6 {
        0 | 1 => DesiredState::Mirror(east),
        2 => DesiredState::Pause(east),
        3 => DesiredState::Stop(east),
        4 => DesiredState::Mirror(MirrorName::new("west").unwrap()),
        _ => DesiredState::NotMirrored,
    }
}

#[derive(Clone, Debug)]
enum Op {
    Lead(usize, i32),
    Follow(usize),
    Desired(usize, u8),
    /// Answer the lone partition's outstanding request (or a high-watermark notice).
    Complete(usize, u8),
    Fail(usize),
    Stale(usize, u64),
    Poll(TimestampMs),
    /// Answer one in-flight coalesced fetch, one choice per partition.
    Respond(usize, Vec<u8>),
    FetchFailed(usize),
    CoordinatorMoved(u32),
    /// The source leader of one partition moves to broker 101 + n.
    SourceMoved(usize, i32),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        2 => (0..3usize, 1..4i32).prop_map(|(k, e)| Op::Lead(k, e)),
        1 => (0..3usize).prop_map(Op::Follow),
        1 => (0..2usize, any::<u8>()).prop_map(|(t, d)| Op::Desired(t, d)),
        12 => (0..3usize, any::<u8>()).prop_map(|(k, v)| Op::Complete(k, v)),
        1 => (0..3usize).prop_map(Op::Fail),
        1 => (0..3usize, 0..8u64).prop_map(|(k, r)| Op::Stale(k, r)),
        5 => (0..1_500 as TimestampMs).prop_map(Op::Poll),
        5 => (0..4usize, prop::collection::vec(any::<u8>(), 3)).prop_map(|(i, c)| Op::Respond(i, c)),
        1 => (0..4usize).prop_map(Op::FetchFailed),
        1 => (0..COORDINATOR_PARTITIONS).prop_map(Op::CoordinatorMoved),
        1 => (0..3usize, 0..2i32).prop_map(|(k, b)| Op::SourceMoved(k, b)),
    ]
}

/// Applies the log effects of `effects` to `log` (batches from `fetched`), then commits
/// everything (a single replica).
fn apply(log: &mut MemLog, effects: &[Effect], fetched: &[BatchHeader]) {
    for e in effects {
        if let Effect::Log(le) = e {
            // Both sides apply the same effects to equal logs: any error is the same on both.
            let _ = apply_log_effect(log, le, fetched);
        }
    }
    if log.high_watermark() < log.log_end_offset() {
        let _ = log.advance_high_watermark(log.log_end_offset());
    }
}

/// The node and, beside it, each partition alone with its own log.
struct World {
    config: MirrorConfig,
    node: NodeMirror,
    node_logs: BTreeMap<PartitionKey, MemLog>,
    lone: BTreeMap<PartitionKey, PartitionMirror>,
    lone_logs: BTreeMap<PartitionKey, MemLog>,
    /// Every effect each lone partition returned, to look requests up by id.
    history: BTreeMap<PartitionKey, Vec<Effect>>,
    desired: BTreeMap<TopicId, DesiredState>,
    coordinator: Coordinator,
    in_flight: Vec<CoalescedFetch>,
    /// The source leader of each partition.
    source: BTreeMap<PartitionKey, i32>,
    now: TimestampMs,
    /// What this run reached, to show the property is not vacuous.
    reached: Reached,
}

/// What a run reached.
#[derive(Clone, Copy, Default, Debug)]
struct Reached {
    states: [bool; 7],
    multi_partition_fetches: usize,
    appended: usize,
    routed_fetch_answers: usize,
    answers_from_a_left_fetcher: usize,
}

/// What one op did: the lone partitions' results, and the node's output.
struct Step1 {
    lone: BTreeMap<PartitionKey, Result<Vec<Effect>, Ignored>>,
    node_effects: BTreeMap<PartitionKey, Vec<Effect>>,
    node_errors: Vec<NodeError>,
}

impl World {
    fn new() -> Self {
        let config = MirrorConfig::default();
        let mut node_config = NodeConfig::new(ME);
        node_config.num_fetchers = 2;
        node_config.mirror_state_partitions = COORDINATOR_PARTITIONS;
        let mut world = World {
            coordinator: Coordinator::new(config.transitions.clone()),
            config,
            node: NodeMirror::new(node_config).unwrap(),
            node_logs: KEYS.iter().map(|k| (*k, MemLog::new())).collect(),
            lone: KEYS
                .iter()
                .map(|k| {
                    let m = PartitionMirror::new(ME, k.topic_id, k.partition, desired(0));
                    (*k, m)
                })
                .collect(),
            lone_logs: KEYS.iter().map(|k| (*k, MemLog::new())).collect(),
            history: BTreeMap::new(),
            desired: TOPICS.iter().map(|(t, _)| (*t, desired(0))).collect(),
            in_flight: Vec::new(),
            source: KEYS.iter().map(|k| (*k, 101)).collect(),
            now: 0,
            reached: Reached::default(),
        };
        for (topic_id, partitions) in TOPICS {
            let out = world.node.handle(
                &world.config,
                0,
                NodeInput::Topic {
                    topic_id,
                    desired: desired(0),
                    partitions,
                },
                &world.node_logs,
            );
            assert!(out.effects.is_empty() && out.errors.is_empty());
            // One source broker: with two fetchers, A1 and B0 share one, A0 has the other.
            let leaders = vec![Some(101); partitions as usize];
            let out = world.node.handle(
                &world.config,
                0,
                NodeInput::SourceTopic { topic_id, leaders },
                &world.node_logs,
            );
            assert!(out.effects.is_empty() && out.errors.is_empty());
        }
        world
    }

    /// Feeds `input` to the lone partition `key`.
    fn lone(&mut self, step: &mut Step1, key: PartitionKey, input: Input, fetched: &[BatchHeader]) {
        let input_kind = match &input {
            Input::FetchCompleted { .. } => InputKind::Fetch,
            _ => InputKind::Other,
        };
        let log = self.lone_logs.get_mut(&key).unwrap();
        let result = self
            .lone
            .get_mut(&key)
            .unwrap()
            .handle(&self.config, input, &*log);
        if let Ok(effects) = &result {
            if matches!(input_kind, InputKind::Fetch) {
                self.reached.routed_fetch_answers += 1;
            }
            if effects.contains(&Effect::Log(LogEffect::AppendFetched)) {
                self.reached.appended += 1;
            }
            apply(log, effects, fetched);
            self.history.entry(key).or_default().extend(effects.clone());
        }
        assert!(
            step.lone.insert(key, result).is_none(),
            "one input per partition per op"
        );
    }

    /// Feeds `input` to the node.
    fn node(
        &mut self,
        step: &mut Step1,
        input: NodeInput,
        fetched: &BTreeMap<PartitionKey, Vec<BatchHeader>>,
    ) {
        let out = self
            .node
            .handle(&self.config, self.now, input, &self.node_logs);
        let mut by_key: BTreeMap<PartitionKey, Vec<Effect>> = BTreeMap::new();
        for e in out.effects {
            match e {
                NodeEffect::Partition { key, effect } => {
                    by_key.entry(key).or_default().push(effect)
                }
                other => panic!("unexpected node effect {other:?}"),
            }
        }
        for (key, effects) in &by_key {
            let batches = fetched.get(key).map_or(&[][..], Vec::as_slice);
            apply(self.node_logs.get_mut(key).unwrap(), effects, batches);
        }
        for (key, effects) in by_key {
            step.node_effects.entry(key).or_default().extend(effects);
        }
        step.node_errors.extend(out.errors);
    }

    fn request_effect(&self, key: PartitionKey, request: RequestId) -> Option<Effect> {
        self.history.get(&key)?.iter().rev().find_map(|e| {
            let r = match e {
                Effect::WriteState { request, .. }
                | Effect::BumpLeaderEpoch { request, .. }
                | Effect::WriteLastMirroredEpoch { request, .. }
                | Effect::Fetch { request, .. } => *request,
                _ => return None,
            };
            (r == request).then(|| e.clone())
        })
    }

    fn placement(&self, key: PartitionKey) -> Option<u32> {
        let mk = self.lone[&key].key()?;
        mirror_state_partition(&mk, COORDINATOR_PARTITIONS).ok()
    }

    fn run(&mut self, op: Op) -> Result<(), TestCaseError> {
        let mut step = Step1 {
            lone: BTreeMap::new(),
            node_effects: BTreeMap::new(),
            node_errors: Vec::new(),
        };
        let none = BTreeMap::new();
        match op {
            Op::Lead(k, epoch) => {
                let input = Input::BecameLeader {
                    leader_epoch: epoch,
                    replicas: OrdSet::unit(ME),
                    isr: OrdSet::unit(ME),
                };
                self.lone(&mut step, KEYS[k], input.clone(), &[]);
                let key = KEYS[k];
                self.node(&mut step, NodeInput::Partition { key, input }, &none);
            }
            Op::Follow(k) => {
                self.lone(&mut step, KEYS[k], Input::BecameFollower, &[]);
                let (key, input) = (KEYS[k], Input::BecameFollower);
                self.node(&mut step, NodeInput::Partition { key, input }, &none);
            }
            Op::Desired(t, d) => {
                let (topic_id, partitions) = TOPICS[t];
                let d = desired(d);
                if self.desired[&topic_id] != d {
                    self.desired.insert(topic_id, d.clone());
                    for key in KEYS.into_iter().filter(|k| k.topic_id == topic_id) {
                        self.lone(&mut step, key, Input::DesiredStateChanged(d.clone()), &[]);
                    }
                }
                let input = NodeInput::Topic {
                    topic_id,
                    desired: d,
                    partitions,
                };
                self.node(&mut step, input, &none);
            }
            Op::Complete(k, v) => {
                let key = KEYS[k];
                let mk = self.lone[&key].key();
                let coordinator_partition = self.placement(key);
                let (input, via_coordinator) = match self.lone[&key].activity().clone() {
                    Activity::Reading(request) => {
                        let value = mk.as_ref().and_then(|mk| self.coordinator.read_state(mk));
                        let value = value.cloned();
                        (Input::StateRead { request, value }, true)
                    }
                    Activity::Writing { request, .. } => {
                        let Some(Effect::WriteState {
                            key: mk,
                            value,
                            expected_state_epoch,
                            ..
                        }) = self.request_effect(key, request)
                        else {
                            return Err(TestCaseError::fail("a write in flight has its effect"));
                        };
                        match self
                            .coordinator
                            .write_state(&mk, value, expected_state_epoch)
                        {
                            Ok(value) => (Input::StateWritten { request, value }, true),
                            Err(refused) => (
                                Input::WriteFenced {
                                    request,
                                    reason: refused.reason(),
                                },
                                true,
                            ),
                        }
                    }
                    Activity::AwaitingLme(request) => {
                        let lme = (v % 2 == 1).then_some(EpochAndOffset {
                            epoch: i32::from(v % 3),
                            end_offset: i64::from(v % 4),
                        });
                        let input = Input::LastMirroredEpochReceived {
                            request,
                            lme,
                            source_log_start_offset: 0,
                        };
                        (input, false)
                    }
                    Activity::AwaitingEpochBump(request)
                    | Activity::AwaitingFetchEpochBump(request) => {
                        let Some(Effect::BumpLeaderEpoch { at_least, .. }) =
                            self.request_effect(key, request)
                        else {
                            return Err(TestCaseError::fail("a bump in flight has its effect"));
                        };
                        let input = Input::LeaderEpochBumped {
                            request,
                            leader_epoch: at_least,
                        };
                        (input, false)
                    }
                    Activity::AwaitingLmeWrite(request) => {
                        let Some(Effect::WriteLastMirroredEpoch {
                            key: mk,
                            value,
                            expected_state_epoch,
                            ..
                        }) = self.request_effect(key, request)
                        else {
                            return Err(TestCaseError::fail(
                                "an LME write in flight has its effect",
                            ));
                        };
                        let input = match self.coordinator.write_last_mirrored_epoch(
                            &mk,
                            value,
                            expected_state_epoch,
                        ) {
                            Ok(_) => Input::LastMirroredEpochWritten { request },
                            Err(refused) => Input::WriteFenced {
                                request,
                                reason: refused.reason(),
                            },
                        };
                        (input, true)
                    }
                    Activity::AwaitingRetry { attempt } => (Input::RetryDue { attempt }, false),
                    _ => (Input::HighWatermarkAdvanced, false),
                };
                self.lone(&mut step, key, input.clone(), &[]);
                let input = match (via_coordinator, mk, coordinator_partition) {
                    (true, Some(mk), Some(coordinator_partition)) => NodeInput::CoordinatorAnswer {
                        coordinator_partition,
                        key: mk,
                        input,
                    },
                    _ => NodeInput::Partition { key, input },
                };
                self.node(&mut step, input, &none);
            }
            Op::Fail(k) => {
                let key = KEYS[k];
                let request = match self.lone[&key].activity() {
                    Activity::Reading(r)
                    | Activity::Writing { request: r, .. }
                    | Activity::AwaitingLme(r)
                    | Activity::AwaitingEpochBump(r)
                    | Activity::AwaitingFetchEpochBump(r)
                    | Activity::AwaitingLmeWrite(r) => *r,
                    _ => RequestId(99),
                };
                let input = Input::RequestFailed {
                    request,
                    error: "boom".into(),
                };
                self.lone(&mut step, key, input.clone(), &[]);
                self.node(&mut step, NodeInput::Partition { key, input }, &none);
            }
            Op::Stale(k, request) => {
                let input = Input::StateRead {
                    request: RequestId(request),
                    value: None,
                };
                self.lone(&mut step, KEYS[k], input.clone(), &[]);
                let key = KEYS[k];
                self.node(&mut step, NodeInput::Partition { key, input }, &none);
            }
            Op::Poll(dt) => {
                self.now += dt;
                let busy: Vec<_> = self.in_flight.iter().map(|f| f.fetcher).collect();
                let ready: Vec<PartitionKey> = KEYS
                    .into_iter()
                    .filter(|k| {
                        self.node.fetch_slot(k).is_some_and(|s| match s.status {
                            FetchStatus::Ready { not_before } => {
                                not_before.is_none_or(|t| t <= self.now)
                            }
                            FetchStatus::InFlight(_) => false,
                        }) && !busy.contains(&self.node.fetcher_of(k).unwrap())
                    })
                    .collect();
                let fetches = self.node.poll_fetches(self.now);
                let mut polled = Vec::new();
                for fetch in &fetches {
                    prop_assert!(!busy.contains(&fetch.fetcher), "one request per fetcher");
                    for (key, f) in &fetch.partitions {
                        polled.push(*key);
                        prop_assert_eq!(self.node.fetcher_of(key), Some(fetch.fetcher));
                        // Exactly the lone partition's outstanding fetch.
                        prop_assert_eq!(self.lone[key].activity(), &Activity::Fetching(f.request));
                        prop_assert_eq!(
                            self.request_effect(*key, f.request),
                            Some(Effect::Fetch {
                                request: f.request,
                                fetch_offset: f.fetch_offset,
                                last_fetched_epoch: f.last_fetched_epoch,
                                isolation: f.isolation,
                            })
                        );
                    }
                }
                polled.sort();
                prop_assert_eq!(polled, ready, "every ready partition whose fetcher is free");
                self.reached.multi_partition_fetches +=
                    fetches.iter().filter(|f| f.partitions.len() > 1).count();
                self.in_flight.extend(fetches);
            }
            Op::Respond(i, choices) => {
                if self.in_flight.is_empty() {
                    return Ok(());
                }
                let fetch = self.in_flight.remove(i % self.in_flight.len());
                let mut partitions = Vec::new();
                let mut fetched = BTreeMap::new();
                for ((key, f), c) in fetch.partitions.iter().zip(choices) {
                    let from = f.fetch_offset;
                    let epoch = f.last_fetched_epoch.unwrap_or(0);
                    let result = match c % 7 {
                        0 => continue,
                        1 => PartitionFetchResult::Retriable("NOT_LEADER_OR_FOLLOWER".into()),
                        2 => PartitionFetchResult::Failed("TOPIC_AUTHORIZATION_FAILED".into()),
                        3 => PartitionFetchResult::Completed(FetchOutcome::Records {
                            next_offset: from,
                            last_epoch: f.last_fetched_epoch,
                        }),
                        4 | 5 => {
                            let n = 1 + i64::from(c / 7 % 3);
                            let e = epoch + i32::from(c / 21 % 2);
                            fetched.insert(*key, vec![BatchHeader::plain(from, from + n - 1, e)]);
                            PartitionFetchResult::Completed(FetchOutcome::Records {
                                next_offset: from + n,
                                last_epoch: Some(e),
                            })
                        }
                        _ if c / 7 % 2 == 0 => PartitionFetchResult::Completed(
                            FetchOutcome::Diverging(EpochAndOffset {
                                epoch: epoch.saturating_sub(1).max(0),
                                end_offset: from / 2,
                            }),
                        ),
                        _ => PartitionFetchResult::Completed(FetchOutcome::OffsetOutOfRange {
                            log_start_offset: from + 1,
                            log_end_offset: from + 3,
                        }),
                    };
                    let lone_input = match &result {
                        PartitionFetchResult::Completed(outcome) => Some(Input::FetchCompleted {
                            request: f.request,
                            outcome: *outcome,
                        }),
                        PartitionFetchResult::Failed(error) => Some(Input::RequestFailed {
                            request: f.request,
                            error: error.clone(),
                        }),
                        PartitionFetchResult::Retriable(_) => None,
                    };
                    // Only the partition's current fetcher is heard (Kafka drops the answers of
                    // a fetcher the partition has left): the node's routing rule.
                    let current = self.node.fetcher_of(key) == Some(fetch.fetcher);
                    self.reached.answers_from_a_left_fetcher += usize::from(!current);
                    if let Some(input) = lone_input.filter(|_| current) {
                        let batches = fetched.get(key).cloned().unwrap_or_default();
                        self.lone(&mut step, *key, input, &batches);
                    }
                    partitions.push(PartitionFetchResponse {
                        key: *key,
                        request: f.request,
                        result,
                    });
                }
                let response = CoalescedFetchResponse {
                    fetcher: fetch.fetcher,
                    partitions,
                };
                self.node(&mut step, NodeInput::FetchResponse(response), &fetched);
            }
            Op::FetchFailed(i) => {
                if self.in_flight.is_empty() {
                    return Ok(());
                }
                let fetch = self.in_flight.remove(i % self.in_flight.len());
                let input = NodeInput::FetchFailed {
                    fetcher: fetch.fetcher,
                };
                self.node(&mut step, input, &none);
            }
            Op::CoordinatorMoved(c) => {
                for key in KEYS {
                    if self.lone[&key].leadership().is_none() || self.placement(key) != Some(c) {
                        continue;
                    }
                    let request = match self.lone[&key].activity() {
                        Activity::Reading(r)
                        | Activity::Writing { request: r, .. }
                        | Activity::AwaitingLmeWrite(r) => *r,
                        _ => continue,
                    };
                    let error = coordinator_moved_error(c);
                    self.lone(&mut step, key, Input::RequestFailed { request, error }, &[]);
                }
                let input = NodeInput::CoordinatorMoved {
                    coordinator_partition: c,
                };
                self.node(&mut step, input, &none);
            }
            Op::SourceMoved(k, b) => {
                let key = KEYS[k];
                self.source.insert(key, 101 + b);
                let (topic_id, partitions) = TOPICS[key.topic_id.0[15] as usize - 7];
                let leaders = (0..partitions)
                    .map(|p| Some(self.source[&PartitionKey::new(topic_id, p)]))
                    .collect();
                let input = NodeInput::SourceTopic { topic_id, leaders };
                self.node(&mut step, input, &none);
                for key in KEYS {
                    prop_assert_eq!(self.node.source_leader(&key), Some(self.source[&key]));
                }
            }
        }
        self.check(step)
    }

    fn check(&mut self, step: Step1) -> Result<(), TestCaseError> {
        // Routing only: each partition's effects are the lone partition's, less its fetch.
        for key in KEYS {
            let lone: Vec<Effect> = match step.lone.get(&key) {
                Some(Ok(effects)) => effects
                    .iter()
                    .filter(|e| !matches!(e, Effect::Fetch { .. }))
                    .cloned()
                    .collect(),
                _ => Vec::new(),
            };
            let node = step.node_effects.get(&key).cloned().unwrap_or_default();
            prop_assert_eq!(&node, &lone, "effects of {}", key);
        }
        for error in &step.node_errors {
            if let NodeError::Ignored { key, reason } = error {
                prop_assert_eq!(step.lone.get(key), Some(&Err(reason.clone())));
            }
        }
        let mut reached = self.reached;
        for key in KEYS {
            let lone = &self.lone[&key];
            reached.states[lone.state() as usize] = true;
            // The node holds exactly the partitions the lone ones say are led, in the same state.
            if lone.leadership().is_some() {
                prop_assert_eq!(self.node.partition(&key), Some(lone));
            } else {
                prop_assert!(self.node.partition(&key).is_none());
            }
            // It holds exactly the fetch the lone partition waits on.
            match (lone.activity(), self.node.fetch_slot(&key)) {
                (Activity::Fetching(r), Some(slot)) => {
                    prop_assert_eq!(slot.request.request, *r);
                    prop_assert_eq!(
                        self.request_effect(key, *r),
                        Some(Effect::Fetch {
                            request: *r,
                            fetch_offset: slot.request.fetch_offset,
                            last_fetched_epoch: slot.request.last_fetched_epoch,
                            isolation: slot.request.isolation,
                        })
                    );
                }
                (Activity::Fetching(_), None) if lone.leadership().is_none() => {}
                (step, slot) => {
                    prop_assert!(
                        !matches!(step, Activity::Fetching(_)) && slot.is_none(),
                        "{}: step {:?} slot {:?}",
                        key,
                        step,
                        slot
                    );
                }
            }
            // A fetch in flight is in a request the executor holds: none is stuck.
            if let Some(FetchStatus::InFlight(fetcher)) =
                self.node.fetch_slot(&key).map(|s| s.status)
            {
                let held = self
                    .in_flight
                    .iter()
                    .any(|f| f.fetcher == fetcher && f.partitions.iter().any(|(k, _)| *k == key));
                prop_assert!(held, "{} is in flight in no request", key);
            }
            prop_assert_eq!(
                self.node.coordinator_partition(&key),
                lone.leadership().and(self.placement(key))
            );
            // Same inputs, same effects, same logs.
            prop_assert_eq!(
                self.node_logs[&key].log_end_offset(),
                self.lone_logs[&key].log_end_offset()
            );
        }
        self.reached = reached;
        Ok(())
    }
}

enum InputKind {
    Fetch,
    Other,
}

/// The random runs reach every state, coalesce several partitions into one request, and
/// append fetched data: the property above is not vacuous.
#[test]
fn random_runs_reach_every_state_and_coalesce() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::{Config, TestRunner};
    let mut runner = TestRunner::new_with_rng(
        Config::default(),
        proptest::test_runner::TestRng::deterministic_rng(
            proptest::test_runner::RngAlgorithm::ChaCha,
        ),
    );
    let strategy = prop::collection::vec(op(), 1..120);
    let mut total = Reached::default();
    for _ in 0..1_000 {
        let ops = strategy.new_tree(&mut runner).unwrap().current();
        let mut world = World::new();
        for op in ops {
            world.run(op).unwrap();
        }
        for (t, r) in total.states.iter_mut().zip(world.reached.states) {
            *t |= r;
        }
        total.multi_partition_fetches += world.reached.multi_partition_fetches;
        total.appended += world.reached.appended;
        total.routed_fetch_answers += world.reached.routed_fetch_answers;
        total.answers_from_a_left_fetcher += world.reached.answers_from_a_left_fetcher;
    }
    eprintln!("{total:?}");
    assert!(total.states.iter().all(|r| *r), "{total:?}");
    assert!(
        total.multi_partition_fetches > 0 && total.appended > 0,
        "{total:?}"
    );
    assert!(total.answers_from_a_left_fetcher > 0, "{total:?}");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1_000))]

    #[test]
    fn the_node_routes_and_batches_but_never_decides(ops in prop::collection::vec(op(), 1..120)) {
        let mut world = World::new();
        for op in ops {
            world.run(op)?;
        }
    }
}
