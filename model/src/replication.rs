//! Plain Kafka replication inside one cluster: follower fetches, the high watermark, the ISR,
//! leader elections, broker crashes and restarts. This is the world the mirroring kernel lives
//! in, not mirroring logic. The replication rules themselves are the kernel's
//! ([`kmirror_kernel::replication`]: what a follower does with a fetch answer, what the leader
//! credits, the leader and follower HW, ISR expansion; the divergence rules of
//! [`kmirror_kernel::fetch`]); this module keeps the world's part: the journal, feeding inputs
//! to the kernels, elections, crashes.
//!
//! What the model simplifies (see the kernel module for Kafka's rules):
//! - the leader's record of a follower is only its credited LEO ([`Replica::fetched_up_to`]):
//!   the model has no clock, so no follower outside the ISR is ever "caught up and eligible"
//!   for the HW to wait for, and `min.insync.replicas` is 1 (never under min ISR);
//! - a follower learns the leader's HW when it moves, not on its next fetch;
//! - ISR expansion compares the credited LEO with the leader's current LEO where Kafka uses the
//!   start offset of the leader's epoch (the leader's LEO when elected): the model keeps no such
//!   offset, and while the leader only appends its LEO is at or above it, so the model admits a
//!   follower no earlier than Kafka does.
//!
//! [`Replica::fetched_up_to`]: crate::world::Replica::fetched_up_to

use kmirror_kernel::config::FetchIsolation;
use kmirror_kernel::fetch::serve_fetch;
use kmirror_kernel::input::Input;
use kmirror_kernel::log::{LogView, PartitionLog};
use kmirror_kernel::mem_log::MemLog;
use kmirror_kernel::partition::{Activity, PartitionMirror};
use kmirror_kernel::replication::{
    follower_fetch, follower_high_watermark, is_follower_in_sync, is_under_min_isr,
    leader_high_watermark, FollowerLog, FollowerLogOp, HwReplica,
};
use kmirror_kernel::types::{BrokerId, Offset};

use crate::config::ModelConfig;
use crate::executor::MAX_FETCH_BATCHES;
use crate::journal::{self, Event, LogOp};
use crate::world::{ClusterId, World, PARTITION, TOPIC_ID};

/// The model's `min.insync.replicas` (Kafka's default).
const MIN_INSYNC_REPLICAS: usize = 1;

impl World {
    /// Kafka's high-watermark rule ([`leader_high_watermark`]): the leader's HW is the smallest
    /// LEO it credited an ISR member with (its own LEO for itself); a follower's HW is the
    /// leader's, clamped into its log ([`follower_high_watermark`]). HWs only move forward here
    /// (truncation moves them back).
    ///
    /// When the leader's HW moves, its kernel is told (`Input::HighWatermarkAdvanced`).
    pub fn update_high_watermarks(&mut self, config: &ModelConfig, c: ClusterId) {
        let cluster = self.cluster_mut(c);
        let Some(leader) = cluster.leader else { return };
        let leader_end = cluster.replicas[leader as usize].log.log_end_offset();
        // A leader that truncates (a mirror does) forgets what followers copied past the cut.
        for r in cluster.replicas.iter_mut() {
            r.fetched_up_to = r.fetched_up_to.min(leader_end);
        }
        let remote = cluster
            .isr
            .iter()
            .filter(|&&b| b != leader)
            .filter_map(|&b| cluster.replicas.get(b as usize))
            .map(|r| HwReplica {
                log_end_offset: r.fetched_up_to,
                in_isr: true,
                caught_up_and_eligible: false,
            });
        let under_min_isr = is_under_min_isr(
            cluster.isr.len(),
            MIN_INSYNC_REPLICAS,
            cluster.replicas.len(),
        );
        let leader_log = &cluster.replicas[leader as usize].log;
        let new_hw = leader_high_watermark(
            leader_log.high_watermark(),
            leader_end,
            remote,
            under_min_isr,
        );
        let leader_log = &mut cluster.replicas[leader as usize].log;
        let mut leader_advanced = false;
        if let Some(hw) = new_hw {
            journal::record(|| advanced(c, leader, hw));
            leader_advanced = leader_log.advance_high_watermark(hw).is_ok();
        }
        let leader_hw = leader_log.high_watermark();
        for (b, replica) in cluster.replicas.iter_mut().enumerate() {
            if b as BrokerId == leader {
                continue;
            }
            let log = &replica.log;
            let hw =
                follower_high_watermark(leader_hw, log.log_start_offset(), log.log_end_offset());
            if hw > replica.log.high_watermark() {
                journal::record(|| advanced(c, b as BrokerId, hw));
                let _ = replica.log.advance_high_watermark(hw);
            }
        }
        if leader_advanced {
            self.feed(config, c, leader, Input::HighWatermarkAdvanced, &[]);
        }
    }

    /// Whether follower `b` of cluster `c` has a reason to fetch: something to copy or truncate,
    /// an LEO its leader has not credited yet (the leader credits the fetch offset, so after
    /// copying, one more fetch reports the new LEO), an HW to learn, an ISR to rejoin, or a
    /// mirroring leader waiting for its report (Kafka followers fetch continuously; the model
    /// lets them fetch only when it can change something).
    pub fn follower_behind(&self, c: ClusterId, b: BrokerId) -> bool {
        let cluster = self.cluster(c);
        let (Some(leader), Some(follower)) = (self.leader(c), cluster.replicas.get(b as usize))
        else {
            return false;
        };
        let awaited = leader.mirror.as_ref().is_some_and(
            |m| matches!(m.activity(), Activity::AwaitingReplicas { done, .. } if !done.contains(&b)),
        );
        follower.alive
            && cluster.leader != Some(b)
            && (awaited
                || follower.fetched_up_to != follower.log.log_end_offset()
                || follower.log.batches() != leader.log.batches()
                || follower.log.log_start_offset() != leader.log.log_start_offset()
                || follower.log.high_watermark()
                    < leader
                        .log
                        .high_watermark()
                        .min(follower.log.log_end_offset())
                || !cluster.isr.contains(&b))
    }

    /// Follower `b` of cluster `c` fetches once from its leader, as a Kafka follower does: the
    /// kernel's [`follower_fetch`] decides the follower's log operation and what the leader
    /// credits (the fetch offset of a fetch served records); a follower outside the ISR joins
    /// it by [`is_follower_in_sync`], before the HW moves (Kafka's order).
    pub fn follower_fetch(&mut self, config: &ModelConfig, c: ClusterId, b: BrokerId) {
        let Some(leader) = self.leader(c) else { return };
        let follower = &self.cluster(c).replicas[b as usize];
        let fetch_offset = follower.log.log_end_offset();
        let response = serve_fetch(
            &*leader.log,
            fetch_offset,
            follower.log.epoch_cache().latest_epoch(),
            FetchIsolation::Follower,
            MAX_FETCH_BATCHES,
        );
        let fetch = follower_fetch(response, fetch_offset, FollowerLog::of(&*follower.log));
        let log = &mut self.cluster_mut(c).replicas[b as usize].log;
        if let Some(op) = fetch.log_op {
            let op = match op {
                FollowerLogOp::Append(batches) => LogOp::AppendAsFollower { batches },
                FollowerLogOp::TruncateTo(offset) => LogOp::TruncateTo { offset },
                FollowerLogOp::TruncateFullyAndStartAt(offset) => {
                    LogOp::TruncateFullyAndStartAt { offset }
                }
            };
            journal::record(|| Event::Log {
                cluster: c,
                broker: b,
                op: op.clone(),
            });
            let _ = match op {
                LogOp::AppendAsFollower { batches } => log.append_as_follower(&batches),
                LogOp::TruncateTo { offset } => log.truncate_to(offset),
                LogOp::TruncateFullyAndStartAt { offset } => {
                    log.truncate_fully_and_start_at(offset)
                }
                _ => Ok(()),
            };
        }
        let follower_leo = log.log_end_offset();
        let cluster = self.cluster_mut(c);
        if let Some(report) = fetch.report {
            cluster.replicas[b as usize].fetched_up_to = report.fetch_offset;
        }
        let leader_id = cluster.leader.unwrap_or_default();
        let leader_log = &cluster.replicas[leader_id as usize].log;
        let rejoins = fetch.report.is_some()
            && !cluster.isr.contains(&b)
            && is_follower_in_sync(
                cluster.replicas[b as usize].fetched_up_to,
                leader_log.high_watermark(),
                Some(leader_log.log_end_offset()),
            );
        if rejoins {
            cluster.isr.insert(b);
        }
        self.update_high_watermarks(config, c);
        let input = Input::ReplicaFetched {
            replica: b,
            log_end_offset: follower_leo,
        };
        self.feed(config, c, leader_id, input, &[]);
        if rejoins {
            self.notify_isr(config, c);
        }
    }

    /// Tells the leader's kernel the current replica set and ISR.
    pub fn notify_isr(&mut self, config: &ModelConfig, c: ClusterId) {
        let cluster = self.cluster(c);
        let Some(leader) = cluster.leader else { return };
        let input = Input::IsrChanged {
            replicas: (0..cluster.replicas.len() as BrokerId).collect(),
            isr: cluster.isr.0.clone(),
        };
        self.feed(config, c, leader, input, &[]);
    }

    /// Removes lagging follower `b` from cluster `c`'s ISR.
    pub fn shrink_isr(&mut self, config: &ModelConfig, c: ClusterId, b: BrokerId) {
        self.cluster_mut(c).isr.remove(&b);
        self.update_high_watermarks(config, c);
        self.notify_isr(config, c);
    }

    /// Elects broker `b` leader of cluster `c` with a new epoch; `unclean` resets the ISR to it.
    ///
    /// A source's new leader records its epoch at its LEO at once, as Kafka's
    /// `Partition.makeLeader` does (`harness/tests/oracle_election.rs` checks the rule against
    /// Kafka's own class): asked for a later epoch it never wrote in, it then answers with the
    /// end of its own older epoch, and a destination that copied that later epoch from a deposed
    /// leader hears "diverging" rather than "offset out of range". A cluster whose topic is in a
    /// mirror records nothing: its kernel fetches with its log's latest epoch and compares the
    /// log's epochs with the source's (LME truncation, the stop's epoch checks), so its own
    /// leader epochs stay out of its cache until it writes at them, as the destination's design
    /// (`docs/design.md`) keeps them.
    pub fn elect(&mut self, config: &ModelConfig, c: ClusterId, b: BrokerId, unclean: bool) {
        if let Some(old) = self.cluster(c).leader {
            if old != b && self.cluster(c).replicas[old as usize].alive {
                self.feed(config, c, old, Input::BecameFollower, &[]);
            }
        }
        let records_epoch = !self.is_mirrored(c);
        let cluster = self.cluster_mut(c);
        cluster.leader = Some(b);
        cluster.leader_epoch += 1;
        if records_epoch {
            let (epoch, log) = (cluster.leader_epoch, &mut cluster.replicas[b as usize].log);
            let offset = log.log_end_offset();
            journal::record(|| Event::Log {
                cluster: c,
                broker: b,
                op: LogOp::AssignEpochStartOffset { epoch, offset },
            });
            let _ = log.assign_epoch_start_offset(epoch, offset);
        }
        // A new leader knows nothing of its followers until they fetch.
        for r in cluster.replicas.iter_mut() {
            r.fetched_up_to = 0;
        }
        if unclean {
            cluster.isr = std::iter::once(b).collect();
        }
        let input = Input::BecameLeader {
            leader_epoch: cluster.leader_epoch,
            replicas: (0..cluster.replicas.len() as BrokerId).collect(),
            isr: cluster.isr.0.clone(),
        };
        self.update_high_watermarks(config, c);
        self.feed(config, c, b, input, &[]);
    }

    /// Broker `b` of cluster `c` crashes: its memory (kernel, flags, timers) is lost, its log
    /// stays as its restart will load it (Kafka's log loading truncates the epoch cache at the
    /// LEO: an epoch recorded on election with no batch after it is gone); it leaves the ISR
    /// unless it was the last member, and stops leading.
    pub fn crash(&mut self, config: &ModelConfig, c: ClusterId, b: BrokerId) {
        let cluster = self.cluster_mut(c);
        let replica = &mut cluster.replicas[b as usize];
        if let Some(offset) = load_on_restart(&mut replica.log) {
            journal::record(|| Event::Log {
                cluster: c,
                broker: b,
                op: LogOp::TruncateTo { offset },
            });
        }
        replica.alive = false;
        replica.incarnation += 1;
        replica.mirror = None;
        replica.writable = false;
        replica.fetcher = false;
        replica.retry_timer = None;
        if cluster.isr.len() > 1 {
            cluster.isr.remove(&b);
        }
        if cluster.leader == Some(b) {
            cluster.leader = None;
        } else {
            self.update_high_watermarks(config, c);
            self.notify_isr(config, c);
        }
    }

    /// Broker `b` of cluster `c` restarts with a fresh kernel reading the topic's desired state.
    pub fn restart(&mut self, c: ClusterId, b: BrokerId) {
        let desired = self.desired(c);
        let replica = &mut self.cluster_mut(c).replicas[b as usize];
        replica.alive = true;
        replica.mirror = Some(PartitionMirror::new(b, TOPIC_ID, PARTITION, desired));
    }
}

impl World {
    /// This world with every replica's log as a restart of its broker loads it
    /// ([`load_on_restart`]): what a replay compares its reopened logs with.
    pub fn logs_as_loaded(&self) -> World {
        let mut w = self.clone();
        for c in ClusterId::BOTH {
            for replica in w.cluster_mut(c).replicas.iter_mut() {
                load_on_restart(&mut replica.log);
            }
        }
        w
    }
}

/// Trims `log` to what a broker restart loads: Kafka's log loading truncates the epoch cache at
/// the LEO, so an epoch recorded on election with no batch after it is gone. Returns the LEO
/// when that changed the log (the truncation to journal), `None` when nothing changed.
pub fn load_on_restart(log: &mut MemLog) -> Option<Offset> {
    let leo = log.log_end_offset();
    let stale = log
        .epoch_cache()
        .latest()
        .is_some_and(|e| e.start_offset >= leo);
    (stale && log.truncate_to(leo).is_ok()).then_some(leo)
}

/// The journal entry of an HW advance.
fn advanced(cluster: ClusterId, broker: BrokerId, offset: Offset) -> Event {
    Event::Log {
        cluster,
        broker,
        op: LogOp::AdvanceHighWatermark { offset },
    }
}
