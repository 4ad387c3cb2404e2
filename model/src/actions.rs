//! The nondeterministic actions of the world, each bounded by a [`Budget`](crate::world::Budget).

use kmirror_kernel::batch::{ControlType, LeaderBatch, ProducerBatchInfo};
use kmirror_kernel::controller::{apply_config_records, handle_mirror_request, MirrorRequest};
use kmirror_kernel::desired::DesiredState;
use kmirror_kernel::input::Input;
use kmirror_kernel::log::{LogView, PartitionLog};
use kmirror_kernel::state::MirrorState;
use kmirror_kernel::types::{BrokerId, MirrorPartition};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::config::ModelConfig;
use crate::journal::{self, Event, LogOp};
use crate::shared::Shared;
use crate::world::{
    Catalogue, ClusterId, Message, Violation, World, IDEMPOTENT_PRODUCER_ID, TOPIC,
    TRANSACTIONAL_PRODUCER_ID,
};

/// What a producer sends.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize)]
pub enum ProduceKind {
    /// A plain batch (no producer id).
    Plain,
    /// A batch of the idempotent producer.
    Idempotent,
    /// A transactional batch (opens the transaction if none is open).
    Transactional,
    /// The transaction coordinator's COMMIT marker.
    Commit,
    /// The transaction coordinator's ABORT marker.
    Abort,
}

/// An operator request, sent to a cluster's controller.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize)]
pub enum OperatorRequest {
    /// `AddTopicsToMirror`: start mirroring from the other cluster (failback when stopped).
    Mirror,
    /// `RemoveTopicsFromMirror`: fail over.
    Stop,
    /// `PauseMirrorTopics`.
    Pause,
    /// `ResumeMirrorTopics`.
    Resume,
}

/// One step of the world.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize)]
pub enum Action {
    /// Deliver a message.
    Deliver(Arc<Message>),
    /// Lose a message: the requester times out.
    Lose(Arc<Message>),
    /// Deliver a message twice.
    Duplicate(Arc<Message>),
    /// A local producer writes to a cluster's partition leader.
    Produce(ClusterId, ProduceKind),
    /// A follower fetches from its leader.
    FollowerFetch(ClusterId, BrokerId),
    /// A lagging follower drops out of the ISR.
    ShrinkIsr(ClusterId, BrokerId),
    /// The controller elects a leader (`true`: unclean, outside the ISR).
    Elect(ClusterId, BrokerId, bool),
    /// A broker crashes.
    Crash(ClusterId, BrokerId),
    /// A crashed broker restarts.
    Restart(ClusterId, BrokerId),
    /// A cluster's `__mirror_state` coordinator moves; its in-flight requests and the answers
    /// on their way back fail.
    MoveCoordinator(ClusterId),
    /// A retry timer fires.
    FireRetry(ClusterId, BrokerId),
    /// The operator sends a request to a cluster.
    Operator(ClusterId, OperatorRequest),
    /// A cluster's partition leader starts a metadata sync round (reads the source).
    SyncRead(ClusterId),
    /// The write of a cluster's metadata sync round lands (or is refused by the gate).
    SyncWrite(ClusterId),
}

impl Action {
    /// The number of action kinds ([`Action::kind`]).
    pub const KINDS: u32 = 14;

    /// This action's kind, `0..KINDS`: one per variant, for swarm simulation's per-walk mixes.
    pub fn kind(&self) -> u32 {
        match self {
            Action::Deliver(_) => 0,
            Action::Lose(_) => 1,
            Action::Duplicate(_) => 2,
            Action::Produce(..) => 3,
            Action::FollowerFetch(..) => 4,
            Action::ShrinkIsr(..) => 5,
            Action::Elect(..) => 6,
            Action::Crash(..) => 7,
            Action::Restart(..) => 8,
            Action::MoveCoordinator(_) => 9,
            Action::FireRetry(..) => 10,
            Action::Operator(..) => 11,
            Action::SyncRead(_) => 12,
            Action::SyncWrite(_) => 13,
        }
    }
}

impl World {
    /// Every action enabled in this world.
    pub fn enabled_actions(&self, config: &ModelConfig, actions: &mut Vec<Action>) {
        for (message, _) in self.net.iter() {
            if self.deliverable(message) {
                actions.push(Action::Deliver(Arc::clone(message)));
            }
            if self.budget.network_faults > 0 {
                actions.push(Action::Lose(Arc::clone(message)));
                actions.push(Action::Duplicate(Arc::clone(message)));
            }
        }
        for c in ClusterId::BOTH {
            let cluster = self.cluster(c);
            if self.leader(c).is_some() {
                for kind in [
                    ProduceKind::Plain,
                    ProduceKind::Idempotent,
                    ProduceKind::Transactional,
                    ProduceKind::Commit,
                    ProduceKind::Abort,
                ] {
                    if self.produce_enabled(config, c, kind) {
                        actions.push(Action::Produce(c, kind));
                    }
                }
            }
            for (i, replica) in cluster.replicas.iter().enumerate() {
                let b = i as BrokerId;
                if !replica.alive {
                    actions.push(Action::Restart(c, b));
                    continue;
                }
                if self.follower_behind(c, b) {
                    actions.push(Action::FollowerFetch(c, b));
                }
                let leader_log_end = self.leader(c).map(|l| l.log.log_end_offset());
                if self.budget.isr_shrinks > 0
                    && cluster.leader != Some(b)
                    && cluster.isr.contains(&b)
                    && leader_log_end.is_some_and(|leo| replica.log.log_end_offset() < leo)
                {
                    actions.push(Action::ShrinkIsr(c, b));
                }
                let leader_alive = self.leader(c).is_some();
                let faults_here = !config.source_faults_only || !self.is_mirrored(c);
                if cluster.leader != Some(b) {
                    let clean = cluster.isr.contains(&b);
                    let unclean_here = if self.is_mirrored(c) {
                        config.unclean_elections
                    } else {
                        config.unclean_source
                    };
                    let budgeted = faults_here && self.budget.elections > 0;
                    let unclean_allowed = unclean_here && budgeted;
                    if clean && (!leader_alive || budgeted) {
                        actions.push(Action::Elect(c, b, false));
                    } else if !clean && unclean_allowed && !leader_alive {
                        actions.push(Action::Elect(c, b, true));
                    }
                }
                // Crashes hit brokers that run a mirror (a pure source's crash is only its
                // unavailability, which a lost message already covers), and a source's when it
                // may then elect uncleanly.
                if self.budget.crashes > 0
                    && faults_here
                    && (self.is_mirrored(c) || config.unclean_source)
                {
                    actions.push(Action::Crash(c, b));
                }
                if replica.retry_timer.is_some() && self.budget.retries > 0 {
                    actions.push(Action::FireRetry(c, b));
                }
            }
            if self.budget.coordinator_moves > 0
                && self.net.keys().any(|m| is_coordinator_exchange(m, c))
            {
                actions.push(Action::MoveCoordinator(c));
            }
            if self.budget.operator_steps > 0 {
                let requests: &[OperatorRequest] = if config.pause_resume {
                    &[
                        OperatorRequest::Mirror,
                        OperatorRequest::Stop,
                        OperatorRequest::Pause,
                        OperatorRequest::Resume,
                    ]
                } else {
                    &[OperatorRequest::Mirror, OperatorRequest::Stop]
                };
                for &request in requests {
                    if self.operator_enabled(config, c, request) {
                        actions.push(Action::Operator(c, request));
                    }
                }
            }
        }
        self.sync_actions(config, actions);
    }

    /// Whether `message` can be delivered now (a fetch waits for the source to have a leader).
    pub(crate) fn deliverable(&self, message: &Message) -> bool {
        match message {
            Message::Request {
                to,
                body: crate::world::RequestBody::Fetch { .. },
                ..
            } => self.leader(*to).is_some(),
            _ => true,
        }
    }

    /// Whether a producer of kind `kind` may try to write to cluster `c` now.
    fn produce_enabled(&self, config: &ModelConfig, c: ClusterId, kind: ProduceKind) -> bool {
        let producers = &self.cluster(c).producers;
        match kind {
            ProduceKind::Plain => self.budget.records > 0,
            ProduceKind::Idempotent => self.budget.records > 0 && !config.plain_records,
            ProduceKind::Transactional => {
                self.budget.records > 0
                    && (producers.in_transaction || self.budget.transactions > 0)
            }
            ProduceKind::Commit | ProduceKind::Abort => producers.in_transaction,
        }
    }

    /// Whether the operator sends `request` to cluster `c` in the scenario: a failback (mirror
    /// request) only once the other side is writable and not asked to mirror itself, i.e. after
    /// it failed over; with [`ModelConfig::mirror_cycles`], whenever `c` is not already asked
    /// to mirror. Nothing in KIP-1279's controllers stops two clusters mirroring each other
    /// (each validates only its own topics); such a cycle destroyed data on both sides before
    /// the kernel's reverse-mirror check (see FINDINGS.md), which the cycles now exercise.
    fn operator_enabled(
        &self,
        config: &ModelConfig,
        c: ClusterId,
        request: OperatorRequest,
    ) -> bool {
        match request {
            OperatorRequest::Mirror if config.mirror_cycles => {
                !matches!(self.desired_ref(c), DesiredState::Mirror(_))
            }
            OperatorRequest::Mirror => {
                let other = c.other();
                let other_writable = match self.desired_ref(other) {
                    DesiredState::NotMirrored => true,
                    DesiredState::Stop(_) => self.stored_state(other) == MirrorState::Stopped,
                    DesiredState::Mirror(_) | DesiredState::Pause(_) => false,
                };
                other_writable && !matches!(self.desired_ref(c), DesiredState::Mirror(_))
            }
            _ => self.is_mirrored(c),
        }
    }

    /// Applies `action`; `None` when it changes nothing.
    pub fn apply(&self, config: &ModelConfig, action: Action) -> Option<World> {
        let mut w = self.clone();
        w.perform(config, action).then_some(w)
    }

    /// Applies `action` to this world in place; false (and the world unchanged) when it
    /// changes nothing.
    pub fn perform(&mut self, config: &ModelConfig, action: Action) -> bool {
        match action {
            Action::Deliver(message) => self.deliver(config, message),
            Action::Lose(message) => {
                self.budget.network_faults -= 1;
                self.take(&message);
                self.time_out(&message);
            }
            Action::Duplicate(message) => {
                self.budget.network_faults -= 1;
                self.send_shared(message);
            }
            Action::Produce(c, kind) => return self.produce(config, c, kind),
            Action::FollowerFetch(c, b) => self.follower_fetch(config, c, b),
            Action::ShrinkIsr(c, b) => {
                self.budget.isr_shrinks -= 1;
                self.shrink_isr(config, c, b);
            }
            Action::Elect(c, b, unclean) => {
                if unclean || self.leader(c).is_some() {
                    self.budget.elections -= 1;
                }
                if unclean && !self.is_mirrored(c) {
                    self.ghosts.source_losses = self.ghosts.source_losses.saturating_add(1);
                }
                self.elect(config, c, b, unclean);
            }
            Action::Crash(c, b) => {
                self.budget.crashes -= 1;
                self.crash(config, c, b);
            }
            Action::Restart(c, b) => self.restart(c, b),
            Action::MoveCoordinator(c) => {
                self.budget.coordinator_moves -= 1;
                let moved: Vec<Arc<Message>> = self
                    .net
                    .keys()
                    .filter(|m| is_coordinator_exchange(m, c))
                    .cloned()
                    .collect();
                for m in moved {
                    while self.take(&m) {
                        self.time_out(&m);
                    }
                }
            }
            Action::FireRetry(c, b) => {
                let replica = &mut self.cluster_mut(c).replicas[b as usize];
                let Some(attempt) = replica.retry_timer.take() else {
                    return false;
                };
                if config.mirror_cycles {
                    self.budget.retries = self.budget.retries.saturating_sub(1);
                }
                self.feed(config, c, b, Input::RetryDue { attempt }, &[]);
            }
            Action::Operator(c, request) => return self.operator(config, c, request),
            Action::SyncRead(c) => return self.sync_read(config, c).is_some(),
            Action::SyncWrite(c) => return self.sync_write(config, c).is_some(),
        }
        true
    }

    /// The requester of a lost `message` sees its request fail (a client timeout).
    fn time_out(&mut self, message: &Message) {
        let (to, request) = match message {
            Message::Request { from, request, .. } => (*from, *request),
            Message::Reply { to, input, .. } => match request_of(input) {
                Some(r) => (*to, r),
                None => return,
            },
        };
        self.send(Message::Reply {
            to,
            input: Input::RequestFailed {
                request,
                error: "request timed out".into(),
            },
            batches: Vec::new(),
            source_losses: 0,
        });
    }

    /// A local producer writes to cluster `c`, through the broker's read-only gate; false when
    /// nothing changes.
    fn produce(&mut self, config: &ModelConfig, c: ClusterId, kind: ProduceKind) -> bool {
        let cluster = self.cluster(c);
        let Some(leader) = cluster.leader else {
            return false;
        };
        let leader = leader as usize;
        let mirrored = self.is_mirrored(c);
        if mirrored && !cluster.replicas[leader].writable {
            // READ_ONLY_TOPIC: nothing is appended.
            if self.ghosts.refused_produce {
                return false;
            }
            self.ghosts.refused_produce = true;
            return true;
        }
        let producers = cluster.producers.clone();
        let batch = match kind {
            ProduceKind::Plain => LeaderBatch::Records {
                record_count: 1,
                producer: None,
                transactional: false,
            },
            ProduceKind::Idempotent => LeaderBatch::Records {
                record_count: 1,
                producer: Some(ProducerBatchInfo {
                    producer_id: IDEMPOTENT_PRODUCER_ID,
                    producer_epoch: 0,
                    base_sequence: producers.idempotent_sequence,
                }),
                transactional: false,
            },
            ProduceKind::Transactional => LeaderBatch::Records {
                record_count: 1,
                producer: Some(ProducerBatchInfo {
                    producer_id: TRANSACTIONAL_PRODUCER_ID,
                    producer_epoch: 0,
                    base_sequence: producers.transactional_sequence,
                }),
                transactional: true,
            },
            ProduceKind::Commit | ProduceKind::Abort => LeaderBatch::Control {
                control: if kind == ProduceKind::Commit {
                    ControlType::Commit
                } else {
                    ControlType::Abort
                },
                producer: Some((TRANSACTIONAL_PRODUCER_ID, 0)),
            },
        };
        let epoch = cluster.leader_epoch;
        let log_end = cluster.replicas[leader].log.log_end_offset();
        // Kafka appends a write below the log's latest epoch and drops the newer epochs from
        // its cache (`LeaderEpochFileCache.assign`): the mirrored epoch history is lost.
        let below_latest = cluster.replicas[leader]
            .log
            .epoch_cache()
            .latest_epoch()
            .is_some_and(|latest| epoch < latest);
        journal::record(|| Event::Log {
            cluster: c,
            broker: leader as BrokerId,
            op: LogOp::AppendAsLeader { epoch, batch },
        });
        let result = self.cluster_mut(c).replicas[leader]
            .log
            .append_as_leader(epoch, batch);
        match result {
            // A fresh producer's batch taken for a retry of an older one: silently dropped.
            Ok(header) if header.base_offset < log_end => {
                self.violate(Violation::ProducerIdCollision);
                return true;
            }
            Ok(_) if below_latest => {
                self.violate(Violation::LocalWriteBelowMirroredEpoch);
                return true;
            }
            Ok(_) => {}
            Err(_) => {
                self.violate(Violation::ProducerIdCollision);
                return true;
            }
        }
        let producers = &mut self.cluster_mut(c).producers;
        match kind {
            ProduceKind::Plain => self.budget.records -= 1,
            ProduceKind::Idempotent => {
                producers.idempotent_sequence += 1;
                self.budget.records -= 1;
            }
            ProduceKind::Transactional => {
                producers.transactional_sequence += 1;
                if !producers.in_transaction {
                    producers.in_transaction = true;
                    self.budget.transactions -= 1;
                }
                self.budget.records -= 1;
            }
            ProduceKind::Commit | ProduceKind::Abort => producers.in_transaction = false,
        }
        self.update_high_watermarks(config, c);
        true
    }

    /// The operator's request to cluster `c`'s controller, through the kernel's controller;
    /// false when the controller refuses it (nothing changes).
    fn operator(&mut self, config: &ModelConfig, c: ClusterId, request: OperatorRequest) -> bool {
        let mirror = c.other().mirror_name().to_string();
        let topics = vec![TOPIC.to_string()];
        let request = match request {
            OperatorRequest::Mirror => MirrorRequest::AddTopics { mirror, topics },
            OperatorRequest::Stop => MirrorRequest::RemoveTopics { mirror, topics },
            OperatorRequest::Pause => MirrorRequest::PauseTopics { mirror, topics },
            OperatorRequest::Resume => MirrorRequest::ResumeTopics { mirror, topics },
        };
        let cluster = self.cluster(c);
        let coordinator = &cluster.coordinator;
        let lookup = |p: &MirrorPartition| coordinator.read_state(p).map(|v| v.state);
        let controller = kmirror_kernel::controller::ControllerConfig::for_kernel(&config.kernel);
        let outcome =
            handle_mirror_request(cluster.catalogue.topics(), &lookup, &controller, &request);
        if outcome.records.is_empty() {
            return false;
        }
        let catalogue = apply_config_records(cluster.catalogue.topics(), &outcome.records);
        self.budget.operator_steps -= 1;
        if matches!(request, MirrorRequest::RemoveTopics { .. }) {
            // Writers after a failover are new producer sessions: sequence 0, and the same
            // producer ids the source's producers used (the collision MIRROR_PID_RESET prevents).
            self.cluster_mut(c).producers = Default::default();
        }
        self.cluster_mut(c).catalogue = Shared::new(Catalogue::new(catalogue));
        let desired = self.desired(c);
        for b in 0..self.cluster(c).replicas.len() as BrokerId {
            self.feed(
                config,
                c,
                b,
                Input::DesiredStateChanged(desired.clone()),
                &[],
            );
        }
        true
    }
}

/// Whether `message` is a request to cluster `c`'s `__mirror_state` coordinator or its answer
/// on the way back: a coordinator move fails both (the requester sees a timeout), so a write
/// the old coordinator applied can still be unacknowledged (a move between a state write and
/// its acknowledgement).
fn is_coordinator_exchange(message: &Message, c: ClusterId) -> bool {
    match message {
        Message::Request { to, body, .. } => *to == c && body.is_coordinator_request(),
        Message::Reply { to, input, .. } => {
            to.cluster == c
                && matches!(
                    input,
                    Input::StateRead { .. }
                        | Input::StateWritten { .. }
                        | Input::LastMirroredEpochWritten { .. }
                        | Input::WriteFenced { .. }
                )
        }
    }
}

/// The request a completion answers.
pub fn request_of(input: &Input) -> Option<kmirror_kernel::effect::RequestId> {
    match input {
        Input::StateRead { request, .. }
        | Input::StateWritten { request, .. }
        | Input::WriteFenced { request, .. }
        | Input::LastMirroredEpochReceived { request, .. }
        | Input::SourceMirrorStateReceived { request, .. }
        | Input::FetchCompleted { request, .. }
        | Input::LeaderEpochBumped { request, .. }
        | Input::LastMirroredEpochWritten { request }
        | Input::RequestFailed { request, .. } => Some(*request),
        _ => None,
    }
}
