//! The properties the checker verifies: `docs/design.md` section 9, each named for what it
//! protects.
//!
//! Safety properties are `always`; `sometimes` properties prove the interesting situations are
//! reached (a property that is never exercised proves nothing); the bounded liveness
//! properties run the fault-free scheduler of [`crate::liveness`] from every state in which no
//! fault can happen any more.

use kmirror_kernel::batch::{BatchHeader, ControlType};
use kmirror_kernel::config::TruncationQuorum;
use kmirror_kernel::input::{FetchOutcome, Input};
use kmirror_kernel::log::LogView;
use kmirror_kernel::state::MirrorState;
use kmirror_kernel::types::Offset;
use stateright::Property;

use crate::config::ModelConfig;
use crate::model::MirrorModel;
use crate::world::{ClusterId, Message, Violation, World};

/// Every property, safety first.
pub fn all() -> Vec<Property<MirrorModel>> {
    vec![
        Property::always("read_only_unless_stopped", |_: &MirrorModel, w: &World| {
            ClusterId::BOTH
                .into_iter()
                .all(|c| read_only_unless_stopped(w, c))
        }),
        Property::always(
            "mirror_is_prefix_of_source",
            |_: &MirrorModel, w: &World| {
                // After an unclean election on the source the destination may hold what the
                // source lost until its next fetch finds the divergence: then only its appends
                // are checked, when the source serves them (`divergence_reported_to_mirror`).
                w.ghosts.source_lost_data
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
            |_: &MirrorModel, w: &World| ClusterId::BOTH.into_iter().all(|c| isr_agrees(w, c)),
        ),
        Property::always(
            "epoch_cache_strictly_increasing",
            |_: &MirrorModel, w: &World| {
                replicas(w).all(|r| {
                    let cache = r.log.epoch_cache();
                    cache
                        .entries()
                        .zip(cache.entries().skip(1))
                        .all(|(a, b)| a.epoch < b.epoch && a.start_offset < b.start_offset)
                })
            },
        ),
        Property::always(
            "batch_epochs_never_decrease",
            |_: &MirrorModel, w: &World| {
                replicas(w).all(|r| {
                    let b = r.log.batches();
                    b.iter()
                        .zip(b.iter().skip(1))
                        .all(|(x, y)| x.partition_leader_epoch <= y.partition_leader_epoch)
                }) && no_violation(w, Violation::LocalWriteBelowMirroredEpoch)
            },
        ),
        Property::always(
            "divergence_reported_to_mirror",
            |_: &MirrorModel, w: &World| no_violation(w, Violation::DivergenceNotReported),
        ),
        Property::always(
            "mirrored_epochs_below_leader_epoch",
            |_: &MirrorModel, w: &World| !w.ghosts.mirrored_epoch_not_below_leader,
        ),
        Property::always(
            "local_writes_after_stop_above_lme",
            |_: &MirrorModel, w: &World| {
                ClusterId::BOTH
                    .into_iter()
                    .all(|c| local_writes_above_lme(w, c))
            },
        ),
        Property::always(
            "no_half_transaction_survives_stop",
            |_: &MirrorModel, w: &World| replicas(w).all(no_transaction_open_at_pid_reset),
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
                    && ClusterId::BOTH.into_iter().all(|c| {
                        w.stored_state(c) == MirrorState::Mirroring
                            || w.cluster(c).replicas.iter().all(|r| !r.fetcher)
                    })
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
        Property::sometimes("reaches_preparing", |_: &MirrorModel, w: &World| {
            reached(w, MirrorState::Preparing)
        }),
        Property::sometimes("reaches_mirroring", |_: &MirrorModel, w: &World| {
            reached(w, MirrorState::Mirroring)
        }),
        Property::sometimes("reaches_stopping", |_: &MirrorModel, w: &World| {
            reached(w, MirrorState::Stopping)
        }),
        Property::sometimes("reaches_stopped", |_: &MirrorModel, w: &World| {
            reached(w, MirrorState::Stopped)
        }),
        Property::sometimes("reaches_failed", |_: &MirrorModel, w: &World| {
            reached(w, MirrorState::Failed)
        }),
        Property::sometimes(
            "failover_with_open_transaction",
            |_: &MirrorModel, w: &World| {
                ClusterId::BOTH.into_iter().any(|c| {
                    w.stored_state(c) == MirrorState::Stopping
                        && w.leader(c).is_some_and(|l| {
                            l.log
                                .producer_state()
                                .first_open_transaction_offset()
                                .is_some()
                        })
                })
            },
        ),
        Property::sometimes("failback_truncates", |_: &MirrorModel, w: &World| {
            // A is mirroring back from B with data B never had: LME truncation must cut it.
            w.stored_state(ClusterId::A) == MirrorState::Preparing
                && !w.mirror_is_prefix_of_source(ClusterId::A)
        }),
        Property::sometimes("divergence_truncation", |_: &MirrorModel, w: &World| {
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
        Property::sometimes("fenced_stale_write", |_: &MirrorModel, w: &World| {
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
        Property::sometimes("refused_produce", |_: &MirrorModel, w: &World| {
            w.ghosts.refused_produce
        }),
        Property::sometimes("failback_completes", |_: &MirrorModel, w: &World| {
            w.stored_state(ClusterId::A) == MirrorState::Mirroring
                && w.stored_state(ClusterId::B) == MirrorState::Stopped
        }),
    ]
}

/// The prototype design's states, each reached at least once where the configuration can reach
/// it: EPOCH_FENCING always (the clusters' epochs differ), PAUSING with pause and resume,
/// ULE_RECOVERY with an unclean source and `mirror.support.unclean.leader.election`.
pub fn prototype(config: &ModelConfig) -> Vec<Property<MirrorModel>> {
    let mut sometimes = vec![Property::sometimes(
        "reaches_epoch_fencing",
        |_: &MirrorModel, w: &World| reached(w, MirrorState::EpochFencing),
    )];
    if config.pause_resume {
        sometimes.push(Property::sometimes(
            "reaches_pausing",
            |_: &MirrorModel, w: &World| reached(w, MirrorState::Pausing),
        ));
    }
    if config.unclean_source && config.kernel.truncation_quorum == TruncationQuorum::AllReplicas {
        sometimes.push(Property::sometimes(
            "reaches_ule_recovery",
            |_: &MirrorModel, w: &World| reached(w, MirrorState::UleRecovery),
        ));
    }
    sometimes
}

/// The metadata-sync properties, checked when the model includes the sync
/// ([`ModelConfig::sync_steps`](crate::config::ModelConfig::sync_steps) > 0).
pub fn sync() -> Vec<Property<MirrorModel>> {
    vec![
        Property::always("no_sync_write_after_stop", |_: &MirrorModel, w: &World| {
            no_violation(w, Violation::SyncWriteAfterStop)
        }),
        Property::sometimes("sync_write_lands", |_: &MirrorModel, w: &World| {
            w.ghosts.sync_landed
        }),
        Property::sometimes("stale_sync_write_fenced", |_: &MirrorModel, w: &World| {
            w.ghosts.sync_fenced
        }),
    ]
}

fn no_violation(w: &World, v: Violation) -> bool {
    w.ghosts.violation != Some(v)
}

fn replicas(w: &World) -> impl Iterator<Item = &crate::world::Replica> {
    w.clusters.iter().flat_map(|c| c.replicas.iter())
}

fn reached(w: &World, state: MirrorState) -> bool {
    ClusterId::BOTH
        .into_iter()
        .any(|c| w.stored_state(c) == state)
}

/// A broker of a mirrored topic accepts writes only while the stored state is STOPPED.
fn read_only_unless_stopped(w: &World, c: ClusterId) -> bool {
    !w.is_mirrored(c)
        || w.stored_state(c) == MirrorState::Stopped
        || w.cluster(c).replicas.iter().all(|r| !r.writable)
}

/// Every ISR member holds the leader's batches below the leader's HW, except while the
/// cluster is PREPARING: LME truncation deliberately rewrites history and may cut below the HW
/// (a failback or a re-mirror discards what the other side does not have); the ISR wait
/// restores agreement before MIRRORING, which is what `SkipIsrWait` breaks.
fn isr_agrees(w: &World, c: ClusterId) -> bool {
    if w.stored_state(c) == MirrorState::Preparing {
        return true;
    }
    let cluster = w.cluster(c);
    let Some(leader) = w.leader(c) else {
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
fn committed(r: &crate::world::Replica, hw: Offset) -> impl Iterator<Item = &BatchHeader> {
    r.log.batches().iter().filter(move |b| b.last_offset < hw)
}

/// In a STOPPED cluster, every batch after the recorded LME offset carries an epoch above the
/// LME.
fn local_writes_above_lme(w: &World, c: ClusterId) -> bool {
    if w.stored_state(c) != MirrorState::Stopped {
        return true;
    }
    let (Some(key), Some(leader)) = (w.key(c), w.leader(c)) else {
        return true;
    };
    let Some(lme) = w.cluster(c).coordinator.read_last_mirrored_epoch(&key) else {
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
fn no_transaction_open_at_pid_reset(r: &crate::world::Replica) -> bool {
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
