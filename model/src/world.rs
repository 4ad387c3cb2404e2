//! The world the checker explores: two clusters, A and B, each with one partition of topic
//! [`TOPIC`] on a few replicas, their `__mirror_state` coordinators, their controllers' topic
//! catalogues, producers, and the messages in flight between them.
//!
//! Every decision about mirroring is the kernel's: each live broker holds a kernel
//! [`PartitionMirror`], each replica a kernel [`MemLog`], each cluster a kernel [`Coordinator`]
//! and [`TopicCatalogue`]. The world only routes inputs to them and applies their effects
//! (see [`crate::executor`]).

use std::fmt;
use std::hash::{Hash, Hasher};
use std::ops::{Deref, DerefMut};
use std::sync::{Arc, OnceLock};

use im::OrdSet;
use kmirror_kernel::batch::BatchHeader;
use kmirror_kernel::config::FetchIsolation;
use kmirror_kernel::controller::{TopicCatalogue, TopicInfo};
use kmirror_kernel::coordinator::Coordinator;
use kmirror_kernel::desired::DesiredState;
use kmirror_kernel::effect::RequestId;
use kmirror_kernel::input::Input;
use kmirror_kernel::mem_log::MemLog;
use kmirror_kernel::partition::{hash_broker_set, PartitionMirror};
use kmirror_kernel::records::{LastMirroredEpochsValue, MirrorPartitionStateValue};
use kmirror_kernel::state::MirrorState;
use kmirror_kernel::sync::gate::SyncFence;
use kmirror_kernel::types::{
    BrokerId, LeaderEpoch, MirrorName, MirrorPartition, Offset, PartitionIndex, StateEpoch, TopicId,
};
use serde::{Deserialize, Serialize};

use crate::config::ModelConfig;
use crate::properties::ClusterCheck;
use crate::shared::Shared;

/// The mirrored topic.
pub const TOPIC: &str = "orders";
/// Its topic id, the same on both clusters (mirroring keeps topic ids).
pub const TOPIC_ID: TopicId = TopicId::from_u64(0x6f72_6465_7273);
/// The partition modelled.
pub const PARTITION: PartitionIndex = 0;

/// One of the two clusters.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize)]
pub enum ClusterId {
    /// The original source.
    A,
    /// The original destination.
    B,
}

impl ClusterId {
    /// Both clusters.
    pub const BOTH: [ClusterId; 2] = [ClusterId::A, ClusterId::B];

    /// The other cluster.
    pub fn other(self) -> ClusterId {
        match self {
            ClusterId::A => ClusterId::B,
            ClusterId::B => ClusterId::A,
        }
    }

    /// Index into [`World::clusters`].
    pub fn index(self) -> usize {
        self as usize
    }

    /// The name of the mirror through which *another* cluster mirrors from this one.
    pub fn mirror_name(self) -> MirrorName {
        let name = match self {
            ClusterId::A => "from-a",
            ClusterId::B => "from-b",
        };
        MirrorName::new(name).expect("a valid constant mirror name")
    }
}

impl fmt::Display for ClusterId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ClusterId::A => "A",
            ClusterId::B => "B",
        })
    }
}

/// A broker incarnation: replies to an earlier incarnation (before a crash) are lost.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize)]
pub struct Addr {
    /// The cluster.
    pub cluster: ClusterId,
    /// The broker (replica index).
    pub broker: BrokerId,
    /// How many times the broker crashed before sending.
    pub incarnation: u8,
}

/// A request in flight, addressed to a cluster (its coordinator, controller or partition leader).
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize)]
pub enum RequestBody {
    /// `ReadMirrorStates` to the coordinator.
    ReadState {
        /// The key.
        key: MirrorPartition,
    },
    /// `WriteMirrorStates` to the coordinator.
    WriteState {
        /// The key.
        key: MirrorPartition,
        /// The record.
        value: MirrorPartitionStateValue,
        /// The state epoch the writer read.
        expected_state_epoch: Option<StateEpoch>,
    },
    /// The LME record, to the coordinator.
    WriteLastMirroredEpoch {
        /// The key.
        key: MirrorPartition,
        /// The record.
        value: LastMirroredEpochsValue,
        /// The state epoch of the STOPPING record the writer wrote (the fence).
        expected_state_epoch: Option<StateEpoch>,
    },
    /// LME query, to the source cluster.
    QueryLastMirroredEpoch,
    /// Consumer Fetch, to the source cluster's partition leader.
    Fetch {
        /// Fetch offset.
        fetch_offset: Offset,
        /// Last fetched epoch.
        last_fetched_epoch: Option<LeaderEpoch>,
        /// Isolation level.
        isolation: FetchIsolation,
    },
    /// Leader-epoch bump, to the requester's own controller.
    BumpLeaderEpoch {
        /// The smallest acceptable epoch.
        at_least: LeaderEpoch,
    },
}

impl RequestBody {
    /// Whether the request is served by the cluster's `__mirror_state` coordinator.
    pub fn is_coordinator_request(&self) -> bool {
        matches!(
            self,
            RequestBody::ReadState { .. }
                | RequestBody::WriteState { .. }
                | RequestBody::WriteLastMirroredEpoch { .. }
        )
    }
}

/// A message in flight.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize)]
pub enum Message {
    /// A request from a broker's kernel.
    Request {
        /// The sender.
        from: Addr,
        /// The cluster serving it.
        to: ClusterId,
        /// The kernel's correlation id.
        request: RequestId,
        /// What is asked.
        body: RequestBody,
    },
    /// A completion for a broker's kernel, with the batches of a fetch response.
    Reply {
        /// The receiver.
        to: Addr,
        /// The kernel input it becomes.
        input: Input,
        /// Fetched batches (empty unless a fetch response with records).
        batches: Vec<BatchHeader>,
        /// For a fetch answer: how many unclean elections the sources had made when it was
        /// served ([`Ghosts::source_losses`]); an answer served before the latest one may name
        /// data the source lost since. 0 for every other reply.
        #[serde(default)]
        source_losses: u8,
    },
}

/// One replica of a cluster's partition on one broker.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct Replica {
    /// The log (durable: survives crashes; shared until written, with its hash cached: most
    /// steps change a replica's kernel state, not its log).
    pub log: Shared<MemLog>,
    /// Whether the broker runs.
    pub alive: bool,
    /// How many times the broker crashed.
    pub incarnation: u8,
    /// The kernel state machine (in memory: lost on a crash).
    pub mirror: Option<PartitionMirror>,
    /// The broker's read-only flag as the kernel last set it (in memory).
    pub writable: bool,
    /// Whether the mirror fetcher exists (in memory).
    pub fetcher: bool,
    /// The attempt of a pending retry timer (in memory).
    pub retry_timer: Option<u32>,
    /// The leader's record of this follower's LEO: the fetch offset of its last fetch, credited
    /// before the answer is appended (Kafka's `Replica` state on the leader), so an HW advance
    /// waits for the next fetch. The HW counts this, not the follower's current LEO, so data a
    /// follower holds past a divergence never counts as replicated.
    pub fetched_up_to: Offset,
}

/// A cluster's in-sync replicas: an `im` set hashed with the kernel's
/// [`hash_broker_set`] (iterating an `im` set to hash it allocates).
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct Isr(pub OrdSet<BrokerId>);

impl Hash for Isr {
    fn hash<H: Hasher>(&self, state: &mut H) {
        hash_broker_set(&self.0, state);
    }
}

impl Deref for Isr {
    type Target = OrdSet<BrokerId>;

    fn deref(&self) -> &OrdSet<BrokerId> {
        &self.0
    }
}

impl DerefMut for Isr {
    fn deref_mut(&mut self) -> &mut OrdSet<BrokerId> {
        &mut self.0
    }
}

impl FromIterator<BrokerId> for Isr {
    fn from_iter<I: IntoIterator<Item = BrokerId>>(iter: I) -> Self {
        Isr(iter.into_iter().collect())
    }
}

/// The producers writing to one cluster (one idempotent producer, one transactional one).
#[derive(Clone, PartialEq, Eq, Hash, Debug, Default)]
pub struct Producers {
    /// Next sequence of the idempotent producer.
    pub idempotent_sequence: i32,
    /// Next sequence of the transactional producer.
    pub transactional_sequence: i32,
    /// Whether the transactional producer has a transaction open.
    pub in_transaction: bool,
}

/// Retry timers the search fires with [`ModelConfig::mirror_cycles`] (see [`Budget::retries`]):
/// enough for a refused failback to retry once the other side stopped.
pub const MIRROR_CYCLE_RETRIES: u8 = 2;

/// The idempotent producer's id, the same on both clusters: a collision after failover is
/// exactly what `MIRROR_PID_RESET` must prevent.
pub const IDEMPOTENT_PRODUCER_ID: i64 = 1;
/// The transactional producer's id, also the same on both clusters.
pub const TRANSACTIONAL_PRODUCER_ID: i64 = 2;

/// One cluster.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct Cluster {
    /// The replicas; broker id = index. A `Vec`: an `im::Vector` of a large element allocates a
    /// 64-element chunk per change, which dominated the checker's memory.
    pub replicas: Vec<Replica>,
    /// The partition leader, if one is elected.
    pub leader: Option<BrokerId>,
    /// The partition's leader epoch (the controller's counter).
    pub leader_epoch: LeaderEpoch,
    /// The in-sync replicas.
    pub isr: Isr,
    /// The `__mirror_state` coordinator (durable; shared until written).
    pub coordinator: Shared<Coordinator>,
    /// The controller's topic catalogue (`mirror.name` lives here; durable; shared until an
    /// operator request changes it).
    pub catalogue: Shared<Catalogue>,
    /// The local producers.
    pub producers: Producers,
    /// A metadata sync round its partition leader started and whose write has not landed yet:
    /// the fence it read (see `kmirror_kernel::sync::gate`).
    pub sync_in_flight: Option<SyncFence>,
}

/// What the properties and the executor read of a cluster on nearly every step, derived at
/// most once per version of the cluster and shared by every world holding that version (see
/// [`Shared::view`]): a step changes one cluster, so the other's view carries over.
#[derive(Clone, Debug, Default)]
pub struct ClusterView {
    /// The mirror state the coordinator stores for the topic.
    stored: OnceLock<MirrorState>,
    /// The outcome of each per-cluster property check (bit `1 << check`), see
    /// [`crate::properties::ClusterCheck`].
    checks: OnceLock<u8>,
}

impl Cluster {
    /// The mirror state the coordinator stores for the topic (UNKNOWN if none), computed.
    fn compute_stored_state(&self) -> MirrorState {
        self.catalogue
            .key()
            .and_then(|key| self.coordinator.read_state(key))
            .map_or(MirrorState::Unknown, |v| v.state)
    }

    /// The leader replica, if elected and alive.
    pub fn leader_replica(&self) -> Option<&Replica> {
        self.leader
            .and_then(|b| self.replicas.get(b as usize))
            .filter(|r| r.alive)
    }
}

/// The controller's topic catalogue with what the model reads of it on every step, derived
/// once when the catalogue changes: the desired state its `mirror.name` encodes and the
/// topic's `__mirror_state` key.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct Catalogue {
    topics: TopicCatalogue,
    desired: DesiredState,
    key: Option<MirrorPartition>,
}

impl Catalogue {
    /// `topics` with its views derived.
    pub fn new(topics: TopicCatalogue) -> Self {
        let desired = topics
            .topic(TOPIC)
            .and_then(|t| t.desired_state().ok())
            .unwrap_or(DesiredState::NotMirrored);
        let key = desired.mirror().map(|mirror| MirrorPartition {
            mirror: mirror.clone(),
            topic_id: TOPIC_ID,
            partition: PARTITION,
        });
        Catalogue {
            topics,
            desired,
            key,
        }
    }

    /// The controller's catalogue.
    pub fn topics(&self) -> &TopicCatalogue {
        &self.topics
    }

    /// What the operator asked of the topic (NOT_MIRRORED when `mirror.name` does not parse).
    pub fn desired(&self) -> &DesiredState {
        &self.desired
    }

    /// The topic's `__mirror_state` key, when it is in a mirror.
    pub fn key(&self) -> Option<&MirrorPartition> {
        self.key.as_ref()
    }
}

/// What remains of each bounded source of nondeterminism.
#[derive(Clone, PartialEq, Eq, Hash, Debug, Serialize, Deserialize)]
pub struct Budget {
    /// Data batches producers may still append.
    pub records: u8,
    /// Transactions producers may still open.
    pub transactions: u8,
    /// Elections that replace a live leader (or unclean ones).
    pub elections: u8,
    /// Broker crashes.
    pub crashes: u8,
    /// Lost or duplicated messages.
    pub network_faults: u8,
    /// Coordinator moves.
    pub coordinator_moves: u8,
    /// ISR shrinks.
    pub isr_shrinks: u8,
    /// Accepted operator requests.
    pub operator_steps: u8,
    /// Metadata sync rounds that may still start.
    pub sync_steps: u8,
    /// Retry timers the search may still fire: bounded only with
    /// [`ModelConfig::mirror_cycles`], whose refused failbacks would otherwise retry without
    /// end (each retry a new state epoch); the liveness scheduler fires them regardless.
    pub retries: u8,
}

impl Budget {
    /// Whether no fault can happen any more (the premise of the bounded liveness properties).
    pub fn faults_exhausted(&self) -> bool {
        self.elections == 0
            && self.crashes == 0
            && self.network_faults == 0
            && self.coordinator_moves == 0
            && self.isr_shrinks == 0
    }
}

/// A safety violation observed by the executor while applying an effect (a property fails on
/// the first state carrying one).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize)]
pub enum Violation {
    /// A side effect ran while the coordinator held another state than the one it belongs to.
    ActedBeforePersisted,
    /// Fetched batches were appended while the stored state was not MIRRORING.
    FetchedOutsideMirroring,
    /// A transition the table refuses was requested by an up-to-date writer, or stored.
    IllegalTransitionPersisted,
    /// The coordinator accepted a write with a stale leader or state epoch.
    FencedWriteAccepted,
    /// A fresh local producer was refused because of producer state left by mirrored batches.
    ProducerIdCollision,
    /// A local write (a producer's, or the stop's ABORT marker or `MIRROR_PID_RESET`) carried
    /// an epoch below the log's latest: Kafka appends it and its epoch cache forgets the newer
    /// (mirrored) epochs.
    LocalWriteBelowMirroredEpoch,
    /// A log effect the kernel asked for was refused by the log.
    LogEffectRefused,
    /// PREPARING handed over to MIRRORING with a log that is not a prefix of the source's.
    DivergentAfterPreparing,
    /// A metadata sync write landed while the partition was STOPPING or STOPPED.
    SyncWriteAfterStop,
    /// Right after a destination handled a records answer (even none) to the fetch it waited
    /// for, served since the source's latest unclean election, its log was not a prefix of the
    /// source leader's.
    DivergentAfterFetch,
}

/// Observations that are history, not state, kept for the properties.
#[derive(Clone, PartialEq, Eq, Hash, Debug, Default)]
pub struct Ghosts {
    /// The first violation seen.
    pub violation: Option<Violation>,
    /// Whether a produce to a read-only mirror was refused.
    pub refused_produce: bool,
    /// Whether a metadata sync write landed.
    pub sync_landed: bool,
    /// Whether a stale metadata sync write was refused by the gate.
    pub sync_fenced: bool,
    /// Whether a fetched batch was appended with an epoch at or above the destination's leader
    /// epoch (KIP-1279's leader-epoch invariant: a later local write could reuse that epoch).
    /// Not a [`Violation`]: exploration goes on, so a local write below a mirrored epoch
    /// (`batch_epochs_never_decrease`) stays reachable after it.
    pub mirrored_epoch_not_below_leader: bool,
    /// How many leaders a source elected outside its ISR (the destination may then hold data
    /// the source lost, until its next fetch finds the divergence).
    pub source_losses: u8,
    /// Whether the source answered a mirror fetch its requester waited for with records (even
    /// none) although the requester's log was not a prefix of the source's: a divergence went
    /// unreported (KIP-320). Not a [`Violation`]: exploration goes on, so what the destination
    /// then does with the answer (`fetched_mirror_is_prefix_of_source`) stays reachable.
    pub divergence_unreported: bool,
}

/// The messages in flight with their multiplicities, ordered by message: a sorted `Vec`, which
/// a world's clone copies in one allocation and its drop frees in one (a `BTreeMap` walked its
/// nodes for both, and an `im::OrdMap` node is sized for 64 entries). The net changes on
/// almost every step and holds a handful of messages. Messages are shared (ordered, compared
/// and hashed by content), so cloning a world or an action copies no message.
#[derive(Clone, PartialEq, Eq, Hash, Debug, Default)]
pub struct Net(Vec<(Arc<Message>, u8)>);

impl Net {
    /// The messages and their multiplicities, in message order.
    pub fn iter(&self) -> impl Iterator<Item = (&Arc<Message>, u8)> {
        self.0.iter().map(|(m, n)| (m, *n))
    }

    /// The distinct messages, in order.
    pub fn keys(&self) -> impl Iterator<Item = &Arc<Message>> {
        self.0.iter().map(|(m, _)| m)
    }

    /// The number of distinct messages.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether nothing is in flight.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Adds `n` copies of `message`.
    pub fn add(&mut self, message: Arc<Message>, n: u8) {
        match self.0.binary_search_by(|(m, _)| m.cmp(&message)) {
            Ok(i) => self.0[i].1 += n,
            Err(i) => self.0.insert(i, (message, n)),
        }
    }

    /// Removes one copy of `message`; false if there was none.
    pub fn take(&mut self, message: &Message) -> bool {
        // A delivered message is usually the very one in flight: find it by address before
        // comparing contents.
        let found = match self
            .0
            .iter()
            .position(|(m, _)| std::ptr::eq(m.as_ref(), message))
        {
            Some(i) => Ok(i),
            None => self.0.binary_search_by(|(m, _)| m.as_ref().cmp(message)),
        };
        match found {
            Ok(i) if self.0[i].1 > 1 => {
                self.0[i].1 -= 1;
                true
            }
            Ok(i) => {
                self.0.remove(i);
                true
            }
            Err(_) => false,
        }
    }
}

impl FromIterator<(Arc<Message>, u8)> for Net {
    fn from_iter<I: IntoIterator<Item = (Arc<Message>, u8)>>(iter: I) -> Self {
        let mut net = Net::default();
        for (message, n) in iter {
            net.add(message, n);
        }
        net
    }
}

/// The whole world.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct World {
    /// Cluster A, then B, each with its stored mirror state derived once per version.
    pub clusters: [Shared<Cluster, ClusterView>; 2],
    /// Messages in flight, with their multiplicity (see [`Net`]).
    pub net: Net,
    /// Remaining nondeterminism.
    pub budget: Budget,
    /// History kept for the properties.
    pub ghosts: Ghosts,
}

impl World {
    /// The initial world: both clusters up with replica 0 leading at epoch 1; A's topic is a
    /// normal topic, B's is in mirror `from-a` (B mirrors A).
    pub fn initial(config: &ModelConfig) -> World {
        let cluster = |c: ClusterId| {
            let desired = if c == ClusterId::B {
                DesiredState::Mirror(ClusterId::A.mirror_name())
            } else {
                DesiredState::NotMirrored
            };
            let mut info = TopicInfo::new(TOPIC_ID, 1);
            info.mirror_name = Some(desired.config_value()).filter(|v| !v.is_empty());
            let catalogue = TopicCatalogue::new()
                .with_topic(TOPIC, info)
                .with_mirror(c.other().mirror_name());
            Shared::new(Cluster {
                replicas: (0..config.replicas_of(c))
                    .map(|b| Replica {
                        log: Shared::new(MemLog::new()),
                        alive: true,
                        incarnation: 0,
                        mirror: Some(PartitionMirror::new(
                            b.into(),
                            TOPIC_ID,
                            PARTITION,
                            desired.clone(),
                        )),
                        writable: false,
                        fetcher: false,
                        retry_timer: None,
                        fetched_up_to: 0,
                    })
                    .collect(),
                leader: None,
                leader_epoch: 0,
                isr: (0..config.replicas_of(c)).map(BrokerId::from).collect(),
                coordinator: Shared::new(
                    Coordinator::new(config.kernel.transitions.clone())
                        .with_fencing(config.state_fencing())
                        .with_mutant(config.kernel.mutant),
                ),
                catalogue: Shared::new(Catalogue::new(catalogue)),
                producers: Producers::default(),
                sync_in_flight: None,
            })
        };
        let mut world = World {
            clusters: [cluster(ClusterId::A), cluster(ClusterId::B)],
            net: Net::default(),
            budget: Budget {
                records: config.records,
                transactions: config.transactions,
                elections: config.elections,
                crashes: config.crashes,
                network_faults: config.network_faults,
                coordinator_moves: config.coordinator_moves,
                isr_shrinks: config.isr_shrinks,
                operator_steps: config.operator_steps,
                sync_steps: config.sync_steps,
                retries: if config.mirror_cycles {
                    MIRROR_CYCLE_RETRIES
                } else {
                    u8::MAX
                },
            },
            ghosts: Ghosts::default(),
        };
        // The clusters' epochs are independent; by default A starts one ahead so that mirrored
        // batches carry epochs the destination has not reached (the reason the destination
        // bumps its epoch); `epoch_lead` moves either far ahead.
        for c in ClusterId::BOTH {
            world.cluster_mut(c).leader_epoch = config.epoch_lead.initial_epoch(c);
        }
        for c in ClusterId::BOTH {
            world.elect(config, c, 0, false);
        }
        world
    }

    /// Cluster `c`.
    pub fn cluster(&self, c: ClusterId) -> &Cluster {
        &self.clusters[c.index()]
    }

    /// Cluster `c`, mutably.
    pub fn cluster_mut(&mut self, c: ClusterId) -> &mut Cluster {
        &mut self.clusters[c.index()]
    }

    /// What the operator asked of cluster `c`'s topic.
    pub fn desired(&self, c: ClusterId) -> DesiredState {
        self.desired_ref(c).clone()
    }

    /// What the operator asked of cluster `c`'s topic, borrowed (parsed once per version of
    /// the catalogue).
    pub fn desired_ref(&self, c: ClusterId) -> &DesiredState {
        self.cluster(c).catalogue.desired()
    }

    /// Whether cluster `c`'s topic is in a mirror (mirroring, paused or stopped).
    pub fn is_mirrored(&self, c: ClusterId) -> bool {
        *self.desired_ref(c) != DesiredState::NotMirrored
    }

    /// Cluster `c`'s `__mirror_state` key for the topic, when it is in a mirror.
    pub fn key(&self, c: ClusterId) -> Option<MirrorPartition> {
        self.cluster(c).catalogue.key().cloned()
    }

    /// The mirror state cluster `c`'s coordinator stores for its topic (UNKNOWN if none).
    pub fn stored_state(&self, c: ClusterId) -> MirrorState {
        let cluster = &self.clusters[c.index()];
        *cluster
            .view()
            .stored
            .get_or_init(|| cluster.compute_stored_state())
    }

    /// Whether cluster `c` passes the per-cluster property check `check` (computed for all
    /// checks at once, at most once per version of the cluster).
    pub fn cluster_passes(&self, c: ClusterId, check: ClusterCheck) -> bool {
        let stored = self.stored_state(c);
        let cluster = &self.clusters[c.index()];
        let passed = *cluster
            .view()
            .checks
            .get_or_init(|| crate::properties::cluster_checks(cluster, stored));
        passed & (1 << check as u8) != 0
    }

    /// The leader replica of cluster `c`, if elected and alive.
    pub fn leader(&self, c: ClusterId) -> Option<&Replica> {
        self.cluster(c).leader_replica()
    }

    /// Adds one copy of `message` to the network.
    pub fn send(&mut self, message: Message) {
        self.send_shared(Arc::new(message));
    }

    /// Adds one copy of a shared `message` to the network.
    pub fn send_shared(&mut self, message: Arc<Message>) {
        self.net.add(message, 1);
    }

    /// Removes one copy of `message` from the network; false if there was none.
    pub fn take(&mut self, message: &Message) -> bool {
        self.net.take(message)
    }

    /// Records the first violation.
    pub fn violate(&mut self, violation: Violation) {
        self.ghosts.violation.get_or_insert(violation);
    }
}
