//! Plain Kafka replication inside one cluster: follower fetches, the high watermark, the ISR,
//! leader elections, broker crashes and restarts. This is the world the mirroring kernel lives
//! in, not mirroring logic; the divergence rules themselves are the kernel's
//! ([`serve_fetch`], [`divergence_truncation_offset`], [`resolve_out_of_range`]).

use kmirror_kernel::config::FetchIsolation;
use kmirror_kernel::fetch::{
    divergence_truncation_offset, resolve_out_of_range, serve_fetch, FetchResponse,
    OutOfRangeResolution,
};
use kmirror_kernel::input::Input;
use kmirror_kernel::log::{LogView, PartitionLog};
use kmirror_kernel::partition::{PartitionMirror, Step};
use kmirror_kernel::types::BrokerId;

use crate::config::ModelConfig;
use crate::executor::MAX_FETCH_BATCHES;
use crate::journal::{self, Event, LogOp};
use crate::world::{ClusterId, World, PARTITION, TOPIC_ID};

impl World {
    /// Kafka's high-watermark rule: the leader's HW is the smallest LEO in the ISR; a follower's
    /// HW is the leader's, capped by its own LEO. HWs only move forward here (truncation moves
    /// them back).
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
        let isr_min = cluster
            .isr
            .iter()
            .filter_map(|&b| cluster.replicas.get(b as usize).map(|r| (b, r)))
            .filter(|(_, r)| r.alive)
            .map(|(b, r)| {
                if b == leader {
                    leader_end
                } else {
                    r.fetched_up_to
                }
            })
            .min();
        let leader_log = &mut cluster.replicas[leader as usize].log;
        let mut leader_advanced = false;
        if let Some(hw) = isr_min {
            if hw > leader_log.high_watermark() {
                journal::record(|| advanced(c, leader, hw));
                leader_advanced = leader_log.advance_high_watermark(hw).is_ok();
            }
        }
        let leader_hw = leader_log.high_watermark();
        for (b, replica) in cluster.replicas.iter_mut().enumerate() {
            if b as BrokerId == leader {
                continue;
            }
            let hw = leader_hw.min(replica.log.log_end_offset());
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
    /// or a leader waiting for its report (Kafka followers fetch continuously; the model lets
    /// them fetch only when it can change something).
    pub fn follower_behind(&self, c: ClusterId, b: BrokerId) -> bool {
        let cluster = self.cluster(c);
        let (Some(leader), Some(follower)) = (self.leader(c), cluster.replicas.get(b as usize))
        else {
            return false;
        };
        let awaited = leader.mirror.as_ref().is_some_and(
            |m| matches!(m.step(), Step::AwaitingReplicas { done, .. } if !done.contains(&b)),
        );
        follower.alive
            && cluster.leader != Some(b)
            && (awaited
                || follower.fetched_up_to < follower.log.log_end_offset()
                || follower.log.batches() != leader.log.batches()
                || follower.log.log_start_offset() != leader.log.log_start_offset()
                || follower.log.high_watermark()
                    < leader
                        .log
                        .high_watermark()
                        .min(follower.log.log_end_offset())
                || !cluster.isr.contains(&b))
    }

    /// Follower `b` of cluster `c` fetches once from its leader, as a Kafka follower does.
    pub fn follower_fetch(&mut self, config: &ModelConfig, c: ClusterId, b: BrokerId) {
        let Some(leader) = self.leader(c) else { return };
        let follower = &self.cluster(c).replicas[b as usize];
        let response = serve_fetch(
            &leader.log,
            follower.log.log_end_offset(),
            follower.log.epoch_cache().latest_epoch(),
            FetchIsolation::Follower,
            MAX_FETCH_BATCHES,
        );
        let log = &mut self.cluster_mut(c).replicas[b as usize].log;
        let leo = log.log_end_offset();
        let fetched_records = matches!(response, FetchResponse::Records(_));
        let op = match response {
            FetchResponse::Records(records) if !records.batches.is_empty() => {
                Some(LogOp::AppendAsFollower {
                    batches: records.batches,
                })
            }
            FetchResponse::Records(_) => None,
            FetchResponse::Diverging(diverging) => Some(LogOp::TruncateTo {
                offset: divergence_truncation_offset(log.epoch_cache(), leo, diverging),
            }),
            FetchResponse::OffsetOutOfRange {
                log_start_offset,
                log_end_offset,
            } => match resolve_out_of_range(leo, log_start_offset, log_end_offset) {
                OutOfRangeResolution::TruncateTo(offset) => Some(LogOp::TruncateTo { offset }),
                OutOfRangeResolution::TruncateFullyAndStartAt(offset) => {
                    Some(LogOp::TruncateFullyAndStartAt { offset })
                }
                OutOfRangeResolution::FetchFrom(_) => None,
            },
        };
        if let Some(op) = op {
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
        if fetched_records {
            cluster.replicas[b as usize].fetched_up_to = follower_leo;
        }
        let leader_id = cluster.leader.unwrap_or_default();
        let caught_up = follower_leo == cluster.replicas[leader_id as usize].log.log_end_offset()
            && cluster.replicas[b as usize].log.batches()
                == cluster.replicas[leader_id as usize].log.batches();
        let rejoins = caught_up && !cluster.isr.contains(&b);
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
            isr: cluster.isr.clone(),
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
    pub fn elect(&mut self, config: &ModelConfig, c: ClusterId, b: BrokerId, unclean: bool) {
        if let Some(old) = self.cluster(c).leader {
            if old != b && self.cluster(c).replicas[old as usize].alive {
                self.feed(config, c, old, Input::BecameFollower, &[]);
            }
        }
        let cluster = self.cluster_mut(c);
        cluster.leader = Some(b);
        cluster.leader_epoch += 1;
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
            isr: cluster.isr.clone(),
        };
        self.update_high_watermarks(config, c);
        self.feed(config, c, b, input, &[]);
    }

    /// Broker `b` of cluster `c` crashes: its memory (kernel, flags, timers) is lost, its log
    /// stays; it leaves the ISR unless it was the last member, and stops leading.
    pub fn crash(&mut self, config: &ModelConfig, c: ClusterId, b: BrokerId) {
        let cluster = self.cluster_mut(c);
        let replica = &mut cluster.replicas[b as usize];
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

/// The journal entry of an HW advance.
fn advanced(cluster: ClusterId, broker: BrokerId, offset: kmirror_kernel::types::Offset) -> Event {
    Event::Log {
        cluster,
        broker,
        op: LogOp::AdvanceHighWatermark { offset },
    }
}
