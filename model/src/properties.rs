//! The properties the checker verifies: `docs/design.md` section 9, each named for what it
//! protects.
//!
//! Safety properties are `always`; `sometimes` properties prove the interesting situations are
//! reached (a property that is never exercised proves nothing); the bounded liveness
//! properties run the fault-free scheduler of [`crate::liveness`] from every state in which no
//! fault can happen any more.

use kmirror_kernel::batch::{BatchHeader, ControlType};
use kmirror_kernel::config::TruncationQuorum;
use kmirror_kernel::desired::DesiredState;
use kmirror_kernel::fetch::divergence_truncation_offset;
use kmirror_kernel::input::{FetchOutcome, Input};
use kmirror_kernel::log::LogView;
use kmirror_kernel::state::MirrorState;
use kmirror_kernel::types::Offset;
use stateright::Property;

use crate::config::ModelConfig;
use crate::model::MirrorModel;
use crate::world::{Cluster, ClusterId, Message, Replica, Violation, World};

/// A `sometimes` property whose condition tells the model when it holds, so that an
/// exhaustive search can stop evaluating it once found ([`MirrorModel::pruning_examples`]).
macro_rules! sometimes {
    ($name:literal, $condition:expr $(,)?) => {
        Property::sometimes($name, |m: &MirrorModel, w: &World| {
            let condition: fn(&World) -> bool = $condition;
            m.example($name, condition(w))
        })
    };
}

/// Every property, safety first.
pub fn all() -> Vec<Property<MirrorModel>> {
    vec![
        Property::always("read_only_unless_stopped", |_: &MirrorModel, w: &World| {
            both_pass(w, ClusterCheck::ReadOnlyUnlessStopped)
        }),
        Property::always(
            "mirror_is_prefix_of_source",
            |_: &MirrorModel, w: &World| {
                // After an unclean election on the source the destination may hold what the
                // source lost until its next fetch finds the divergence: then only its appends
                // are checked, when the source serves them (`divergence_reported_to_mirror`).
                w.ghosts.source_losses > 0
                    || ClusterId::BOTH.into_iter().all(|c| {
                        !matches!(
                            w.stored_state(c),
                            MirrorState::Mirroring
                                | MirrorState::Paused
                                | MirrorState::Pausing
                                | MirrorState::EpochFencing
                                | MirrorState::UleRecovery
                        ) || w.mirror_is_prefix_of_source(c)
                    })
            },
        ),
        Property::always(
            "isr_agrees_below_high_watermark",
            |_: &MirrorModel, w: &World| both_pass(w, ClusterCheck::IsrAgrees),
        ),
        Property::always(
            "epoch_cache_strictly_increasing",
            |_: &MirrorModel, w: &World| both_pass(w, ClusterCheck::EpochCacheIncreasing),
        ),
        Property::always(
            "batch_epochs_never_decrease",
            |_: &MirrorModel, w: &World| {
                both_pass(w, ClusterCheck::BatchEpochsNondecreasing)
                    && no_violation(w, Violation::LocalWriteBelowMirroredEpoch)
            },
        ),
        Property::always(
            "divergence_reported_to_mirror",
            |_: &MirrorModel, w: &World| !w.ghosts.divergence_unreported,
        ),
        Property::always(
            "fetched_mirror_is_prefix_of_source",
            // `mirror_is_prefix_of_source` without its exemption after a source's data loss: at
            // every records answer a destination acts on, served since the source's latest
            // unclean election, its log is a prefix of the source's.
            |_: &MirrorModel, w: &World| no_violation(w, Violation::DivergentAfterFetch),
        ),
        Property::always(
            "mirrored_epochs_below_leader_epoch",
            |_: &MirrorModel, w: &World| !w.ghosts.mirrored_epoch_not_below_leader,
        ),
        Property::always(
            "local_writes_after_stop_above_lme",
            |_: &MirrorModel, w: &World| both_pass(w, ClusterCheck::LocalWritesAboveLme),
        ),
        Property::always(
            "no_half_transaction_survives_stop",
            |_: &MirrorModel, w: &World| both_pass(w, ClusterCheck::NoTransactionOpenAtPidReset),
        ),
        Property::always(
            "no_producer_id_collision_after_failover",
            |_: &MirrorModel, w: &World| no_violation(w, Violation::ProducerIdCollision),
        ),
        Property::always(
            "state_persisted_before_acted_on",
            |_: &MirrorModel, w: &World| no_violation(w, Violation::ActedBeforePersisted),
        ),
        Property::always(
            "only_legal_transitions_persisted",
            |_: &MirrorModel, w: &World| no_violation(w, Violation::IllegalTransitionPersisted),
        ),
        Property::always(
            "fenced_writes_change_nothing",
            |_: &MirrorModel, w: &World| no_violation(w, Violation::FencedWriteAccepted),
        ),
        Property::always(
            "fetcher_only_while_mirroring",
            |_: &MirrorModel, w: &World| {
                no_violation(w, Violation::FetchedOutsideMirroring)
                    && both_pass(w, ClusterCheck::FetcherOnlyWhileMirroring)
            },
        ),
        Property::always(
            "failback_keeps_only_source_data",
            |_: &MirrorModel, w: &World| no_violation(w, Violation::DivergentAfterPreparing),
        ),
        Property::always(
            "kernel_log_effects_succeed",
            |_: &MirrorModel, w: &World| no_violation(w, Violation::LogEffectRefused),
        ),
        Property::always(
            "stop_reaches_stopped_once_faults_stop",
            |m: &MirrorModel, w: &World| crate::liveness::stop_reaches_stopped(m, w),
        ),
        Property::always(
            "mirror_reaches_mirroring_once_faults_stop",
            |m: &MirrorModel, w: &World| crate::liveness::mirror_reaches_mirroring(m, w),
        ),
        Property::always(
            "failed_partition_retries_once_faults_stop",
            |m: &MirrorModel, w: &World| crate::liveness::failed_retries(m, w),
        ),
        Property::always(
            "mirror_converges_once_source_stops",
            |m: &MirrorModel, w: &World| crate::liveness::mirror_converges(m, w),
        ),
        sometimes!("reaches_preparing", |w: &World| {
            reached(w, MirrorState::Preparing)
        }),
        sometimes!("reaches_mirroring", |w: &World| {
            reached(w, MirrorState::Mirroring)
        }),
        sometimes!("reaches_stopping", |w: &World| {
            reached(w, MirrorState::Stopping)
        }),
        sometimes!("reaches_stopped", |w: &World| {
            reached(w, MirrorState::Stopped)
        }),
        sometimes!("reaches_failed", |w: &World| {
            reached(w, MirrorState::Failed)
        }),
        sometimes!("failover_with_open_transaction", |w: &World| {
            ClusterId::BOTH.into_iter().any(|c| {
                w.stored_state(c) == MirrorState::Stopping
                    && w.leader(c).is_some_and(|l| {
                        l.log
                            .producer_state()
                            .first_open_transaction_offset()
                            .is_some()
                    })
            })
        },),
        sometimes!("failback_truncates", |w: &World| {
            // A is mirroring back from B with data B never had: LME truncation must cut it.
            w.stored_state(ClusterId::A) == MirrorState::Preparing
                && !w.mirror_is_prefix_of_source(ClusterId::A)
        }),
        sometimes!("divergence_truncation", |w: &World| {
            w.net.keys().any(|m| {
                matches!(
                    m.as_ref(),
                    Message::Reply {
                        input: Input::FetchCompleted {
                            outcome: FetchOutcome::Diverging(_),
                            ..
                        },
                        ..
                    }
                )
            })
        }),
        sometimes!("fenced_stale_write", |w: &World| {
            w.net.keys().any(|m| {
                matches!(
                    m.as_ref(),
                    Message::Reply {
                        input: Input::WriteFenced { .. },
                        ..
                    }
                )
            })
        }),
        sometimes!("refused_produce", |w: &World| { w.ghosts.refused_produce }),
        sometimes!("failback_completes", |w: &World| {
            w.stored_state(ClusterId::A) == MirrorState::Mirroring
                && w.stored_state(ClusterId::B) == MirrorState::Stopped
        }),
    ]
}

/// The prototype design's states, each reached at least once where the configuration can reach
/// it: EPOCH_FENCING always (the clusters' epochs differ), PAUSING with pause and resume,
/// ULE_RECOVERY with an unclean source and `mirror.support.unclean.leader.election`.
pub fn prototype(config: &ModelConfig) -> Vec<Property<MirrorModel>> {
    let mut sometimes = vec![
        sometimes!("reaches_epoch_fencing", |w: &World| {
            reached(w, MirrorState::EpochFencing)
        }),
        sometimes!("stops_from_epoch_fencing", |w: &World| {
            stopping_from(w, MirrorState::EpochFencing)
        }),
    ];
    if config.pause_resume {
        sometimes.push(sometimes!("reaches_pausing", |w: &World| {
            reached(w, MirrorState::Pausing)
        }));
        sometimes.push(sometimes!("stops_from_paused", |w: &World| {
            stopping_from(w, MirrorState::Paused)
        }));
    }
    if config.unclean_source && config.kernel.truncation_quorum == TruncationQuorum::AllReplicas {
        sometimes.push(sometimes!("reaches_ule_recovery", |w: &World| {
            reached(w, MirrorState::UleRecovery)
        }));
    }
    sometimes
}

/// What an unclean source must be seen to do ([`ModelConfig::unclean_source`]), so that the
/// divergence properties are not vacuous: two unclean elections in one run, and a diverging
/// answer whose end offset lies above where the two logs part (the source's old leader holds a
/// batch at a lower epoch where the destination copied one at a higher epoch from an
/// intermediate leader), so that only the destination's own epoch lookup truncates enough
/// (what `divergence-taken-at-its-word` skips).
pub fn unclean_source() -> Vec<Property<MirrorModel>> {
    vec![
        sometimes!("two_unclean_source_elections", |w: &World| {
            w.ghosts.source_losses >= 2
        }),
        sometimes!("divergence_needs_the_local_epoch_lookup", |w: &World| {
            w.net.keys().any(|m| match m.as_ref() {
                Message::Reply {
                    to,
                    input:
                        Input::FetchCompleted {
                            outcome: FetchOutcome::Diverging(diverging),
                            ..
                        },
                    ..
                } => {
                    let log = &w.cluster(to.cluster).replicas[to.broker as usize].log;
                    let leo = log.log_end_offset();
                    divergence_truncation_offset(log.epoch_cache(), leo, *diverging)
                        < diverging.end_offset.min(leo)
                }
                _ => false,
            })
        }),
    ]
}

/// The metadata-sync properties, checked when the model includes the sync
/// ([`ModelConfig::sync_steps`](crate::config::ModelConfig::sync_steps) > 0).
pub fn sync() -> Vec<Property<MirrorModel>> {
    vec![
        Property::always("no_sync_write_after_stop", |_: &MirrorModel, w: &World| {
            no_violation(w, Violation::SyncWriteAfterStop)
        }),
        sometimes!("sync_write_lands", |w: &World| { w.ghosts.sync_landed }),
        sometimes!("stale_sync_write_fenced", |w: &World| {
            w.ghosts.sync_fenced
        }),
    ]
}

fn no_violation(w: &World, v: Violation) -> bool {
    w.ghosts.violation != Some(v)
}

/// The checks of the properties that read one cluster alone, evaluated together once per
/// version of a cluster ([`World::cluster_passes`]): a step changes one cluster, so the
/// other's outcomes carry over from the state before.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum ClusterCheck {
    /// `read_only_unless_stopped`.
    ReadOnlyUnlessStopped,
    /// `isr_agrees_below_high_watermark`.
    IsrAgrees,
    /// `epoch_cache_strictly_increasing`.
    EpochCacheIncreasing,
    /// `batch_epochs_never_decrease` (the log's part).
    BatchEpochsNondecreasing,
    /// `local_writes_after_stop_above_lme`.
    LocalWritesAboveLme,
    /// `no_half_transaction_survives_stop`.
    NoTransactionOpenAtPidReset,
    /// `fetcher_only_while_mirroring` (the fetchers' part).
    FetcherOnlyWhileMirroring,
}

/// Every [`ClusterCheck`] of `cluster`, whose stored mirror state is `stored`: bit
/// `1 << check` is set when the check passes.
pub(crate) fn cluster_checks(cluster: &Cluster, stored: MirrorState) -> u8 {
    let epoch_cache_increasing = |r: &Replica| {
        let cache = r.log.epoch_cache();
        cache
            .entries()
            .zip(cache.entries().skip(1))
            .all(|(a, b)| a.epoch < b.epoch && a.start_offset < b.start_offset)
    };
    let batch_epochs_nondecreasing = |r: &Replica| {
        let b = r.log.batches();
        b.iter()
            .zip(b.iter().skip(1))
            .all(|(x, y)| x.partition_leader_epoch <= y.partition_leader_epoch)
    };
    [
        (
            ClusterCheck::ReadOnlyUnlessStopped,
            read_only_unless_stopped(cluster, stored),
        ),
        (ClusterCheck::IsrAgrees, isr_agrees(cluster, stored)),
        (
            ClusterCheck::EpochCacheIncreasing,
            cluster.replicas.iter().all(epoch_cache_increasing),
        ),
        (
            ClusterCheck::BatchEpochsNondecreasing,
            cluster.replicas.iter().all(batch_epochs_nondecreasing),
        ),
        (
            ClusterCheck::LocalWritesAboveLme,
            local_writes_above_lme(cluster, stored),
        ),
        (
            ClusterCheck::NoTransactionOpenAtPidReset,
            cluster
                .replicas
                .iter()
                .all(no_transaction_open_at_pid_reset),
        ),
        (
            ClusterCheck::FetcherOnlyWhileMirroring,
            stored == MirrorState::Mirroring || cluster.replicas.iter().all(|r| !r.fetcher),
        ),
    ]
    .into_iter()
    .fold(0, |bits, (check, passes)| {
        bits | (u8::from(passes) << check as u8)
    })
}

/// Whether both clusters pass `check`.
fn both_pass(w: &World, check: ClusterCheck) -> bool {
    ClusterId::BOTH
        .into_iter()
        .all(|c| w.cluster_passes(c, check))
}

/// Whether a cluster's stored record is STOPPING entered from `from`.
fn stopping_from(w: &World, from: MirrorState) -> bool {
    ClusterId::BOTH.into_iter().any(|c| {
        let cluster = w.cluster(c);
        cluster
            .catalogue
            .key()
            .and_then(|key| cluster.coordinator.read_state(key))
            .is_some_and(|v| v.state == MirrorState::Stopping && v.previous_state == Some(from))
    })
}

fn reached(w: &World, state: MirrorState) -> bool {
    ClusterId::BOTH
        .into_iter()
        .any(|c| w.stored_state(c) == state)
}

/// A broker of a mirrored topic accepts writes only while the stored state is STOPPED.
fn read_only_unless_stopped(cluster: &Cluster, stored: MirrorState) -> bool {
    *cluster.catalogue.desired() == DesiredState::NotMirrored
        || stored == MirrorState::Stopped
        || cluster.replicas.iter().all(|r| !r.writable)
}

/// Every ISR member holds the leader's batches below the leader's HW, except while the
/// cluster is PREPARING: LME truncation deliberately rewrites history and may cut below the HW
/// (a failback or a re-mirror discards what the other side does not have); the ISR wait
/// restores agreement before MIRRORING, which is what `SkipIsrWait` breaks.
fn isr_agrees(cluster: &Cluster, stored: MirrorState) -> bool {
    if stored == MirrorState::Preparing {
        return true;
    }
    let Some(leader) = cluster.leader_replica() else {
        return true;
    };
    let hw = leader.log.high_watermark();
    cluster
        .isr
        .iter()
        .filter_map(|&b| cluster.replicas.get(b as usize))
        .filter(|r| r.alive)
        .all(|r| committed(r, hw).eq(committed(leader, hw)))
}

/// The batches of replica `r` below high watermark `hw`.
fn committed(r: &Replica, hw: Offset) -> impl Iterator<Item = &BatchHeader> {
    r.log.batches().iter().filter(move |b| b.last_offset < hw)
}

/// In a STOPPED cluster, every batch after the recorded LME offset carries an epoch above the
/// LME.
fn local_writes_above_lme(cluster: &Cluster, stored: MirrorState) -> bool {
    if stored != MirrorState::Stopped {
        return true;
    }
    let (Some(key), Some(leader)) = (cluster.catalogue.key(), cluster.leader_replica()) else {
        return true;
    };
    let Some(lme) = cluster.coordinator.read_last_mirrored_epoch(key) else {
        return true;
    };
    let Some(epoch) = lme.last_mirrored_epoch else {
        return true;
    };
    leader
        .log
        .batches()
        .iter()
        .filter(|b| b.base_offset >= lme.last_mirrored_offset)
        .all(|b| b.partition_leader_epoch > epoch)
}

/// Scanning the log, no transaction is open when a `MIRROR_PID_RESET` batch is reached: a
/// transaction cut in half by a failover would otherwise be exposed as committed.
fn no_transaction_open_at_pid_reset(r: &Replica) -> bool {
    let mut open = std::collections::BTreeSet::new();
    for b in r.log.batches() {
        match b.control {
            Some(ControlType::MirrorPidReset) if !open.is_empty() => return false,
            Some(ControlType::MirrorPidReset) => {}
            Some(ControlType::Commit | ControlType::Abort) => {
                open.remove(&b.producer_id);
            }
            None if b.is_transactional => {
                open.insert(b.producer_id);
            }
            None => {}
        }
    }
    true
}
