//! The knobs of the model: how big a world to explore and which design variant to check.

use kmirror_kernel::config::{
    FetchIsolation, MirrorConfig, StopOrder, StopStrategy, TruncationQuorum,
};
use kmirror_kernel::mutant::Mutant;
use kmirror_kernel::state::{Design, TransitionTable};
use kmirror_kernel::state_fencing::StateFencing;
use serde::{Deserialize, Serialize};

use crate::world::ClusterId;

/// One cluster's leader-epoch counter started ahead of the other's: the clusters' epochs are
/// independent counters, so either may run far ahead (the destination must then bump its own
/// above every mirrored epoch, or need no bump at all).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Serialize, Deserialize)]
pub struct EpochLead {
    /// The cluster whose counter starts ahead.
    pub cluster: ClusterId,
    /// Its initial leader epoch (the other cluster's is 0); each starts at one more when its
    /// first leader is elected.
    pub by: u8,
}

impl EpochLead {
    /// The initial leader epoch (before the first election) of cluster `c`.
    pub fn initial_epoch(self, c: ClusterId) -> i32 {
        if c == self.cluster {
            i32::from(self.by)
        } else {
            0
        }
    }
}

impl Default for EpochLead {
    /// A one ahead (the model's world before the knob existed).
    fn default() -> Self {
        EpochLead {
            cluster: ClusterId::A,
            by: 1,
        }
    }
}

/// Bounds on the nondeterminism the checker explores, and the kernel variant under test.
///
/// Every bound is a budget consumed by the corresponding action, so the state space is finite.
#[derive(Clone, PartialEq, Eq, Hash, Debug, Serialize, Deserialize)]
pub struct ModelConfig {
    /// Replicas per cluster (each cluster's partition has this many brokers).
    pub replicas: u8,
    /// Cluster B's replicas, when they differ from [`Self::replicas`] (`--replicas-b`): a
    /// one-replica destination beside a two-replica source keeps an unclean-source run small.
    #[serde(default)]
    pub replicas_b: Option<u8>,
    /// Batches producers may append in all (plain, idempotent and transactional records).
    pub records: u8,
    /// Transactions producers may open (each may then commit or abort).
    pub transactions: u8,
    /// Leader elections beyond those needed to replace a crashed leader.
    pub elections: u8,
    /// Broker crashes (each crashed broker may restart).
    pub crashes: u8,
    /// Network faults: a request or response lost (the requester times out) or duplicated.
    pub network_faults: u8,
    /// Moves of a `__mirror_state` coordinator: its in-flight requests fail, and so do the
    /// answers it sent that have not arrived (a write it applied stays applied, unacknowledged).
    pub coordinator_moves: u8,
    /// ISR shrinks of a lagging follower.
    pub isr_shrinks: u8,
    /// Accepted operator requests (stop, failback, pause, resume, re-mirror).
    pub operator_steps: u8,
    /// Whether the operator may pause and resume (adds states; off by default).
    pub pause_resume: bool,
    /// Whether a mirror destination may elect a replica outside its ISR.
    pub unclean_elections: bool,
    /// Whether the source (a cluster whose topic is not in a mirror) may elect a replica
    /// outside its ISR, and its brokers may crash, while the other cluster mirrors it: the
    /// destination then holds data the source lost and must truncate by KIP-320's divergence
    /// rules. Off by default (the pinned state counts).
    #[serde(default)]
    pub unclean_source: bool,
    /// Whether crashes and budgeted elections (beyond replacing a crashed leader) hit only a
    /// cluster whose topic is in no mirror, the source (`--source-faults-only`): the
    /// destination only mirrors. Off by default.
    #[serde(default)]
    pub source_faults_only: bool,
    /// Whether producers write plain batches only, no idempotent producer (`--plain-records`;
    /// transactions still follow [`Self::transactions`]). Off by default.
    #[serde(default)]
    pub plain_records: bool,
    /// Steps the fault-free scheduler may take in the bounded liveness properties.
    pub liveness_bound: u16,
    /// How the clusters' `__mirror_state` coordinators number and fence state writes, when it
    /// differs from the design's ([`StateFencing::for_design`]; `--state-fencing`).
    #[serde(default)]
    pub state_fencing: Option<StateFencing>,
    /// Metadata sync rounds a destination's leader may start (each reads the source, then
    /// writes later; see `kmirror_kernel::sync::gate`). 0 (the default) leaves the sync out of
    /// the model entirely, so the pinned state counts do not change.
    #[serde(default)]
    pub sync_steps: u8,
    /// Which cluster's controller starts its leader-epoch counter ahead, and by how much
    /// (`--epoch-lead a:N|b:N`). The default, A by one, is the world the pinned state counts
    /// were measured in: mirrored batches carry epochs the destination has not reached.
    #[serde(default)]
    pub epoch_lead: EpochLead,
    /// Whether the operator may order a failback while the other cluster still mirrors the
    /// topic from this one, or is stopping that mirror (`--mirror-cycles`): the kernel's
    /// reverse-mirror check must then refuse it. Off, the operator waits until the other side
    /// is STOPPED, the world the pinned state counts were measured in.
    #[serde(default)]
    pub mirror_cycles: bool,
    /// The kernel variant.
    pub kernel: MirrorConfig,
}

impl ModelConfig {
    /// How the coordinators number and fence state writes: [`Self::state_fencing`], else the
    /// design's.
    pub fn state_fencing(&self) -> StateFencing {
        self.state_fencing
            .unwrap_or_else(|| StateFencing::for_design(self.kernel.design))
    }

    /// The replicas of cluster `c`'s partition.
    pub fn replicas_of(&self, c: ClusterId) -> u8 {
        match (c, self.replicas_b) {
            (ClusterId::B, Some(n)) => n,
            _ => self.replicas,
        }
    }

    /// The default `check` configuration: a failover with an open transaction and a failback,
    /// small enough to exhaust in minutes on two cores.
    pub fn default_check() -> Self {
        ModelConfig {
            replicas: 1,
            replicas_b: None,
            records: 2,
            transactions: 1,
            elections: 0,
            crashes: 1,
            network_faults: 0,
            coordinator_moves: 0,
            isr_shrinks: 0,
            operator_steps: 2,
            pause_resume: false,
            unclean_elections: false,
            unclean_source: false,
            source_faults_only: false,
            plain_records: false,
            liveness_bound: 200,
            state_fencing: None,
            sync_steps: 0,
            epoch_lead: EpochLead::default(),
            mirror_cycles: false,
            // docs/design.md 5.3: read-committed fetches. A stop can still cut a transaction in half: the
            // fetcher copies it batch by batch (see FINDINGS.md).
            kernel: MirrorConfig::default(),
        }
    }

    /// A configuration that exhausts in about a second, for tests.
    pub fn tiny() -> Self {
        ModelConfig {
            records: 1,
            crashes: 0,
            ..Self::default_check()
        }
    }

    /// The metadata-sync configuration: [`Self::tiny`] with two sync rounds, so that a round
    /// read while MIRRORING can still be in flight across a failover (and a failback).
    pub fn sync_check() -> Self {
        Self::tiny().with_sync_steps(2)
    }

    /// This configuration with `steps` metadata sync rounds.
    pub fn with_sync_steps(mut self, steps: u8) -> Self {
        self.sync_steps = steps;
        self
    }

    /// This configuration with failbacks ordered while the other side still mirrors
    /// ([`ModelConfig::mirror_cycles`]).
    pub fn with_mirror_cycles(mut self) -> Self {
        self.mirror_cycles = true;
        self
    }

    /// This configuration with cluster `cluster`'s initial leader epoch `by` above the other's.
    pub fn with_epoch_lead(mut self, cluster: ClusterId, by: u8) -> Self {
        self.epoch_lead = EpochLead { cluster, by };
        self
    }

    /// This configuration with kernel `mutant` switched on.
    pub fn with_mutant(mut self, mutant: Mutant) -> Self {
        self.kernel.mutant = Some(mutant);
        self
    }

    /// This configuration with the mirror fetcher's isolation level `isolation`.
    pub fn with_fetch_isolation(mut self, isolation: FetchIsolation) -> Self {
        self.kernel.fetch_isolation = isolation;
        self
    }

    /// This configuration with stop strategy `strategy`.
    pub fn with_stop_strategy(mut self, strategy: StopStrategy) -> Self {
        self.kernel.stop_strategy = strategy;
        self
    }

    /// This configuration with STOPPING's steps 2 to 5 run in `order` (`kernel.stop_order`).
    pub fn with_stop_order(mut self, order: StopOrder) -> Self {
        self.kernel.stop_order = order;
        self
    }

    /// The small configuration of the stop order (`model/FINDINGS.md`, design question 2): two
    /// replicas (so a follower that did not copy the stop's writes matters), one batch that may
    /// be part of a transaction open at the stop, a failover and a failback, no crash. Each of
    /// the 24 orders checks in about a second; the table in `FINDINGS.md` adds a crash.
    pub fn stop_order_check() -> Self {
        ModelConfig {
            replicas: 2,
            records: 1,
            transactions: 1,
            crashes: 0,
            ..Self::default_check()
        }
    }

    /// The configuration of KIP-320's interesting case (`model/FINDINGS.md`, "A source that
    /// diverges twice"): a source of two replicas that may crash twice and elect uncleanly
    /// twice, two plain batches, and a one-replica destination that only mirrors. The source's
    /// old leader can then hold a batch at a lower epoch where the destination copied one at a
    /// higher epoch from an intermediate leader, and be re-elected uncleanly: only the
    /// destination's own epoch lookup finds how far to truncate. About two seconds.
    pub fn divergence_check() -> Self {
        ModelConfig {
            replicas: 2,
            replicas_b: Some(1),
            records: 2,
            plain_records: true,
            transactions: 0,
            crashes: 2,
            elections: 2,
            operator_steps: 0,
            unclean_source: true,
            source_faults_only: true,
            ..Self::default_check()
        }
    }

    /// This configuration with the truncation quorum `quorum`.
    pub fn with_quorum(mut self, quorum: TruncationQuorum) -> Self {
        self.kernel.truncation_quorum = quorum;
        self
    }

    /// This configuration with stopping a PAUSED partition allowed or refused, in the design's
    /// table.
    pub fn with_stop_from_paused(mut self, allowed: bool) -> Self {
        self.kernel.transitions = match self.kernel.design {
            Design::Seed => TransitionTable::kip1279(allowed),
            Design::Prototype => TransitionTable::prototype(allowed),
        };
        self
    }

    /// This configuration running `design`'s kernel ([`MirrorConfig::for_design`]), keeping the
    /// mutant; apply it before the other kernel knobs, which override the design's choices.
    pub fn with_design(mut self, design: Design) -> Self {
        let mutant = self.kernel.mutant;
        self.kernel = MirrorConfig::for_design(design);
        self.kernel.mutant = mutant;
        self
    }
}

impl Default for ModelConfig {
    fn default() -> Self {
        Self::default_check()
    }
}
