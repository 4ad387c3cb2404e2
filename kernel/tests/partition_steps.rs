//! The partition state machine, one input at a time: each test asserts the exact effect list
//! and the next state (openraft's engine-test style), through the public API only.

use kmirror_kernel::batch::{BatchHeader, LeaderBatch, ProducerBatchInfo};
use kmirror_kernel::config::{MirrorConfig, StopStrategy, TruncationQuorum};
use kmirror_kernel::coordinator::Coordinator;
use kmirror_kernel::desired::DesiredState;
use kmirror_kernel::effect::{Effect, LogEffect, RequestId, TruncationCause};
use kmirror_kernel::input::{FenceReason, FetchOutcome, Input};
use kmirror_kernel::log::{LogView, PartitionLog};
use kmirror_kernel::partition::{Activity, Ignored, PartitionMirror};
use kmirror_kernel::records::{LastMirroredEpochsValue, MirrorPartitionStateValue};
use kmirror_kernel::state::{MirrorState, TransitionTable};
use kmirror_kernel::types::EpochAndOffset;

mod common;

use common::*;

#[test]
fn new_leader_reads_then_persists_preparing_before_querying_the_lme() {
    let mut d = Driver::new(MirrorConfig::default());
    assert_eq!(
        d.lead(1, &[ME, 2]),
        vec![
            Effect::SetWritable(false),
            Effect::ReadState {
                request: RequestId(1),
                key: key()
            }
        ]
    );
    assert_eq!(
        d.read(1),
        vec![write(
            2,
            value(MirrorState::Preparing, 1, 0, MirrorState::Unknown),
            None
        )]
    );
    assert_eq!(
        d.mirror.state(),
        MirrorState::Unknown,
        "not acted before the ack"
    );
    assert_eq!(
        d.ack_write(&[write(
            2,
            value(MirrorState::Preparing, 1, 0, MirrorState::Unknown),
            None
        )]),
        vec![Effect::QueryLastMirroredEpoch {
            request: RequestId(3),
            key: key()
        }]
    );
    assert_eq!(d.mirror.state(), MirrorState::Preparing);
}

#[test]
fn first_time_mirroring_truncates_fully_then_waits_for_every_isr_member() {
    let mut d = Driver::new(MirrorConfig::default());
    d.log.append_as_follower(&[data(0, 4, 0)]).unwrap();
    d.lead(1, &[ME, 2, 3]);
    let w = d.read(1);
    d.ack_write(&w);
    let effects = d.step(Input::LastMirroredEpochReceived {
        request: RequestId(3),
        lme: None,
        source_log_start_offset: 10,
    });
    assert_eq!(
        effects,
        vec![Effect::Log(LogEffect::TruncateFullyAndStartAt {
            offset: 10,
            cause: TruncationCause::NoLastMirroredEpoch,
        })]
    );
    assert_eq!(d.log.log_start_offset(), 10);
    // A follower still above the truncation point has not truncated yet.
    assert!(matches!(
        d.mirror.handle(
            &d.config,
            Input::ReplicaFetched {
                replica: 2,
                log_end_offset: 11
            },
            &d.log
        ),
        Err(Ignored::NotApplicable { .. })
    ));
    assert_eq!(
        d.step(Input::ReplicaFetched {
            replica: 2,
            log_end_offset: 10
        }),
        vec![]
    );
    assert_eq!(
        d.step(Input::ReplicaFetched {
            replica: 3,
            log_end_offset: 0
        }),
        vec![write(
            4,
            value(MirrorState::Mirroring, 1, 1, MirrorState::Preparing),
            Some(0)
        )]
    );
}

#[test]
fn an_isr_shrink_releases_the_truncation_wait() {
    let mut d = Driver::new(MirrorConfig::default());
    d.lead(1, &[ME, 2]);
    let w = d.read(1);
    d.ack_write(&w);
    d.step(Input::LastMirroredEpochReceived {
        request: RequestId(3),
        lme: None,
        source_log_start_offset: 0,
    });
    assert_eq!(
        d.step(Input::IsrChanged {
            replicas: set(&[ME, 2]),
            isr: set(&[ME])
        }),
        vec![write(
            4,
            value(MirrorState::Mirroring, 1, 1, MirrorState::Preparing),
            Some(0)
        )]
    );
}

#[test]
fn unclean_election_support_waits_for_every_replica_not_just_the_isr() {
    let mut d = Driver::new(MirrorConfig {
        truncation_quorum: TruncationQuorum::AllReplicas,
        ..MirrorConfig::default()
    });
    d.step(Input::BecameLeader {
        leader_epoch: 1,
        replicas: set(&[ME, 2]),
        isr: set(&[ME]),
    });
    let w = d.read(1);
    d.ack_write(&w);
    let effects = d.step(Input::LastMirroredEpochReceived {
        request: RequestId(3),
        lme: None,
        source_log_start_offset: 0,
    });
    assert_eq!(
        effects,
        vec![Effect::Log(LogEffect::TruncateFullyAndStartAt {
            offset: 0,
            cause: TruncationCause::NoLastMirroredEpoch,
        })]
    );
    assert!(matches!(
        d.mirror.activity(),
        Activity::AwaitingReplicas { .. }
    ));
}

#[test]
fn lme_truncation_cuts_at_the_start_of_the_first_epoch_above_the_lme() {
    let mut d = Driver::new(MirrorConfig::default());
    d.log
        .append_as_follower(&[data(0, 2, 1), data(3, 5, 3), data(6, 9, 5)])
        .unwrap();
    d.lead(1, &[ME]);
    let w = d.read(1);
    d.ack_write(&w);
    // LME 3 is known locally: keep epoch 3, cut where epoch 5 starts.
    let effects = d.step(Input::LastMirroredEpochReceived {
        request: RequestId(3),
        lme: Some(EpochAndOffset {
            epoch: 3,
            end_offset: 100,
        }),
        source_log_start_offset: 0,
    });
    assert_eq!(
        effects[0],
        Effect::Log(LogEffect::TruncateTo {
            offset: 6,
            cause: TruncationCause::LastMirroredEpoch,
        })
    );
    assert_eq!(d.log.log_end_offset(), 6);
}

#[test]
fn lme_between_local_epochs_keeps_the_floor_epoch() {
    let mut d = Driver::new(MirrorConfig::default());
    d.log
        .append_as_follower(&[data(0, 2, 1), data(3, 5, 3), data(6, 9, 5)])
        .unwrap();
    d.lead(1, &[ME]);
    let w = d.read(1);
    d.ack_write(&w);
    let effects = d.step(Input::LastMirroredEpochReceived {
        request: RequestId(3),
        lme: Some(EpochAndOffset {
            epoch: 2,
            end_offset: 100,
        }),
        source_log_start_offset: 0,
    });
    assert_eq!(
        effects[0],
        Effect::Log(LogEffect::TruncateTo {
            offset: 3,
            cause: TruncationCause::LastMirroredEpoch,
        })
    );
}

#[test]
fn lme_truncation_never_keeps_more_than_the_other_side_mirrored() {
    // Epoch 3 runs to offset 10 here, but the other side's copy of epoch 3 ended at 7: what
    // this side wrote in epoch 3 after the other side stopped mirroring is cut too.
    let mut d = Driver::new(MirrorConfig::default());
    d.log
        .append_as_follower(&[data(0, 2, 1), data(3, 6, 3), data(7, 9, 3)])
        .unwrap();
    d.lead(1, &[ME]);
    let w = d.read(1);
    d.ack_write(&w);
    let effects = d.step(Input::LastMirroredEpochReceived {
        request: RequestId(3),
        lme: Some(EpochAndOffset {
            epoch: 3,
            end_offset: 7,
        }),
        source_log_start_offset: 0,
    });
    assert_eq!(
        effects[0],
        Effect::Log(LogEffect::TruncateTo {
            offset: 7,
            cause: TruncationCause::LastMirroredEpoch,
        })
    );
}

#[test]
fn lme_at_or_above_the_latest_local_epoch_truncates_nothing() {
    for lme in [5, 9] {
        let mut d = Driver::new(MirrorConfig::default());
        d.log
            .append_as_follower(&[data(0, 2, 1), data(3, 9, 5)])
            .unwrap();
        d.lead(1, &[ME]);
        let w = d.read(1);
        d.ack_write(&w);
        let effects = d.step(Input::LastMirroredEpochReceived {
            request: RequestId(3),
            lme: Some(EpochAndOffset {
                epoch: lme,
                end_offset: 100,
            }),
            source_log_start_offset: 0,
        });
        assert_eq!(
            effects,
            vec![write(
                4,
                value(MirrorState::Mirroring, 1, 1, MirrorState::Preparing),
                Some(0)
            )],
            "lme {lme}"
        );
        assert_eq!(d.log.log_end_offset(), 10);
    }
}

#[test]
fn mirroring_starts_the_fetcher_from_the_local_end_after_the_ack() {
    let d = mirroring(MirrorConfig::default());
    assert!(d.mirror.fetcher_running());
    assert_eq!(
        d.mirror.activity(),
        &Activity::Fetching(RequestId::for_fetch(0, None))
    );
}

#[test]
fn fetched_batches_are_appended_and_the_next_fetch_follows_them() {
    let mut d = mirroring(MirrorConfig::default());
    let effects = d
        .mirror
        .handle(
            &d.config,
            Input::FetchCompleted {
                request: RequestId::for_fetch(0, None),
                outcome: FetchOutcome::Records {
                    next_offset: 3,
                    last_epoch: Some(0),
                },
            },
            &d.log,
        )
        .unwrap();
    assert_eq!(
        effects,
        vec![Effect::Log(LogEffect::AppendFetched), fetch(3, Some(0))]
    );
    // An empty answer just fetches again from the same place.
    d.log.append_as_follower(&[data(0, 2, 0)]).unwrap();
    let effects = d.step(Input::FetchCompleted {
        request: RequestId::for_fetch(3, Some(0)),
        outcome: FetchOutcome::Records {
            next_offset: 3,
            last_epoch: None,
        },
    });
    assert_eq!(effects, vec![fetch(3, Some(0))]);
}

#[test]
fn a_source_epoch_at_or_above_ours_is_not_appended_before_our_epoch_is_bumped() {
    // KIP-1279's leader-epoch invariant: a later local leader must never reuse an epoch a
    // replica holds mirrored data for (the model's counterexample with an election).
    let mut d = mirroring(MirrorConfig::default());
    let effects = d.step(Input::FetchCompleted {
        request: RequestId::for_fetch(0, None),
        outcome: FetchOutcome::Records {
            next_offset: 3,
            last_epoch: Some(1),
        },
    });
    assert_eq!(
        effects,
        vec![Effect::BumpLeaderEpoch {
            request: RequestId(5),
            at_least: 2
        }]
    );
    assert_eq!(
        d.step(Input::LeaderEpochBumped {
            request: RequestId(5),
            leader_epoch: 2
        }),
        vec![fetch(0, None)],
        "the batches are fetched again, now below our epoch"
    );
    assert_eq!(d.mirror.leadership().map(|l| l.leader_epoch), Some(2));
}

#[test]
fn a_diverging_epoch_truncates_like_a_kafka_follower() {
    let mut d = mirroring(MirrorConfig::default());
    d.log
        .append_as_follower(&[data(0, 4, 1), data(5, 9, 2)])
        .unwrap();
    let effects = d.step(Input::FetchCompleted {
        request: RequestId::for_fetch(0, None),
        outcome: FetchOutcome::Diverging(EpochAndOffset {
            epoch: 1,
            end_offset: 3,
        }),
    });
    assert_eq!(
        effects,
        vec![
            Effect::Log(LogEffect::TruncateTo {
                offset: 3,
                cause: TruncationCause::DivergingEpoch,
            }),
            fetch(3, Some(1))
        ]
    );
}

#[test]
fn out_of_range_below_the_source_start_restarts_from_it() {
    let mut d = mirroring(MirrorConfig::default());
    let effects = d.step(Input::FetchCompleted {
        request: RequestId::for_fetch(0, None),
        outcome: FetchOutcome::OffsetOutOfRange {
            log_start_offset: 20,
            log_end_offset: 30,
        },
    });
    assert_eq!(
        effects,
        vec![
            Effect::Log(LogEffect::TruncateFullyAndStartAt {
                offset: 20,
                cause: TruncationCause::OffsetOutOfRange,
            }),
            fetch(20, None)
        ]
    );
}

#[test]
fn a_stale_fetch_response_is_ignored() {
    let mut d = mirroring(MirrorConfig::default());
    let stale = Input::FetchCompleted {
        request: RequestId(4),
        outcome: FetchOutcome::Records {
            next_offset: 3,
            last_epoch: Some(1),
        },
    };
    assert_eq!(
        d.mirror.handle(&d.config, stale, &d.log),
        Err(Ignored::StaleCompletion(RequestId(4)))
    );
}

/// Drives a MIRRORING partition holding mirrored epochs 3 and 4 through the whole stop.
#[test]
fn stop_runs_the_seed_sequence_in_order() {
    let mut d = mirroring(MirrorConfig::default());
    d.log
        .append_as_follower(&[data(0, 4, 3), data(5, 6, 4)])
        .unwrap();
    d.log.advance_high_watermark(7).unwrap();
    let w = d.step(Input::DesiredStateChanged(DesiredState::Stop(mirror())));
    // 1. remove the fetcher (revoked before the write), and persist STOPPING.
    assert_eq!(
        w,
        vec![
            Effect::StopFetcher,
            write(
                5,
                value(MirrorState::Stopping, 1, 2, MirrorState::Mirroring),
                Some(1)
            )
        ]
    );
    // The in-flight fetch is stale as soon as the stop is being written.
    assert!(d
        .mirror
        .handle(
            &d.config,
            Input::FetchCompleted {
                request: RequestId::for_fetch(0, None),
                outcome: FetchOutcome::Records {
                    next_offset: 9,
                    last_epoch: Some(4)
                }
            },
            &d.log
        )
        .is_err());
    // 2. bump the epoch above every mirrored epoch.
    assert_eq!(
        d.ack_write(&w),
        vec![Effect::BumpLeaderEpoch {
            request: RequestId(6),
            at_least: 5
        }]
    );
    // The bumped epoch is persisted (re-asserted STOPPING) before anything is written at it.
    let w = d.step(Input::LeaderEpochBumped {
        request: RequestId(6),
        leader_epoch: 5,
    });
    assert_eq!(
        w,
        vec![write(
            7,
            value(MirrorState::Stopping, 5, 3, MirrorState::Stopping),
            Some(2)
        )]
    );
    // 3. LSO = HW = LEO: nothing to truncate; 4. record the LME.
    assert_eq!(
        d.ack_write(&w),
        vec![Effect::WriteLastMirroredEpoch {
            request: RequestId(8),
            key: key(),
            value: LastMirroredEpochsValue {
                last_mirrored_epoch: Some(4),
                last_mirrored_offset: 7
            },
            expected_state_epoch: Some(3),
        }]
    );
    // 5. MIRROR_PID_RESET at the new epoch; STOPPED waits until it is committed.
    let w = d.step(Input::LastMirroredEpochWritten {
        request: RequestId(8),
    });
    assert_eq!(
        w,
        vec![Effect::Log(LogEffect::AppendPidReset { leader_epoch: 5 })]
    );
    assert_eq!(d.mirror.activity(), &Activity::AwaitingPidResetCommit);
    let early = d
        .mirror
        .handle(&d.config, Input::HighWatermarkAdvanced, &d.log);
    assert_eq!(early, Ok(vec![]), "HW still below the reset batch");
    d.log.advance_high_watermark(8).unwrap();
    let w = d.step(Input::HighWatermarkAdvanced);
    assert_eq!(
        w,
        vec![write(
            9,
            value(MirrorState::Stopped, 5, 4, MirrorState::Stopping),
            Some(3)
        )]
    );
    assert!(
        !d.mirror.is_writable(),
        "writable only once STOPPED is stored"
    );
    assert_eq!(d.ack_write(&w), vec![Effect::SetWritable(true)]);
    assert!(d.mirror.is_writable());
}

#[test]
fn stop_truncates_to_the_lso_when_data_is_not_yet_stable() {
    let mut d = mirroring(MirrorConfig::default());
    let txn = |base, last| BatchHeader {
        producer_id: 9,
        producer_epoch: 0,
        base_sequence: (base - 2) as i32,
        is_transactional: true,
        ..data(base, last, 3)
    };
    d.log
        .append_as_follower(&[data(0, 1, 3), txn(2, 3), txn(4, 4)])
        .unwrap();
    d.log.advance_high_watermark(5).unwrap();
    assert_eq!(d.log.last_stable_offset(), 2);
    let w = d.step(Input::DesiredStateChanged(DesiredState::Stop(mirror())));
    d.ack_write(&w);
    let w = d.step(Input::LeaderEpochBumped {
        request: RequestId(6),
        leader_epoch: 4,
    });
    let effects = d.ack_write(&w);
    assert_eq!(
        effects,
        vec![
            Effect::Log(LogEffect::TruncateTo {
                offset: 2,
                cause: TruncationCause::LastStableOffset,
            }),
            Effect::WriteLastMirroredEpoch {
                request: RequestId(8),
                key: key(),
                value: LastMirroredEpochsValue {
                    last_mirrored_epoch: Some(3),
                    last_mirrored_offset: 2
                },
                expected_state_epoch: Some(3),
            }
        ]
    );
    assert_eq!(d.log.producer_state().open_transactions().count(), 0);
}

#[test]
fn the_abort_strategy_closes_open_transactions_with_markers() {
    let mut d = mirroring(MirrorConfig {
        stop_strategy: StopStrategy::AbortOpenTransactions,
        ..MirrorConfig::default()
    });
    d.log
        .append_as_leader(
            3,
            LeaderBatch::Records {
                record_count: 2,
                producer: Some(ProducerBatchInfo {
                    producer_id: 9,
                    producer_epoch: 0,
                    base_sequence: 0,
                }),
                transactional: true,
            },
        )
        .unwrap();
    d.log.advance_high_watermark(2).unwrap();
    let w = d.step(Input::DesiredStateChanged(DesiredState::Stop(mirror())));
    d.ack_write(&w);
    let w = d.step(Input::LeaderEpochBumped {
        request: RequestId(6),
        leader_epoch: 4,
    });
    let effects = d.ack_write(&w);
    assert_eq!(
        effects,
        vec![
            Effect::Log(LogEffect::AbortTransaction {
                producer_id: 9,
                producer_epoch: 0,
                leader_epoch: 4
            }),
            Effect::WriteLastMirroredEpoch {
                request: RequestId(8),
                key: key(),
                value: LastMirroredEpochsValue {
                    last_mirrored_epoch: Some(3),
                    last_mirrored_offset: 2
                },
                expected_state_epoch: Some(3),
            }
        ]
    );
    assert_eq!(d.log.log_end_offset(), 3, "the marker was appended");
}

#[test]
fn a_leader_already_above_every_mirrored_epoch_does_not_bump_again() {
    let mut d = mirroring(MirrorConfig::default());
    d.log.append_as_follower(&[data(0, 4, 0)]).unwrap();
    d.log.advance_high_watermark(5).unwrap();
    let w = d.step(Input::DesiredStateChanged(DesiredState::Stop(mirror())));
    assert_eq!(
        d.ack_write(&w),
        vec![write(
            6,
            value(MirrorState::Stopping, 1, 3, MirrorState::Stopping),
            Some(2)
        )]
    );
}

#[test]
fn a_restarted_leader_resumes_a_bumped_stop_without_a_second_bump_or_pid_reset() {
    let mut d = mirroring(MirrorConfig::default());
    d.log.append_as_follower(&[data(0, 4, 3)]).unwrap();
    d.log.advance_high_watermark(5).unwrap();
    let w = d.step(Input::DesiredStateChanged(DesiredState::Stop(mirror())));
    d.ack_write(&w);
    let w = d.step(Input::LeaderEpochBumped {
        request: RequestId(6),
        leader_epoch: 4,
    });
    d.ack_write(&w);
    let w = d.step(Input::LastMirroredEpochWritten {
        request: RequestId(8),
    });
    assert_eq!(
        w[0],
        Effect::Log(LogEffect::AppendPidReset { leader_epoch: 4 })
    );
    // Crash before STOPPED is stored: a new instance re-reads STOPPING (bumped) and re-runs.
    d.mirror = PartitionMirror::new(ME, key().topic_id, 0, DesiredState::Stop(mirror()));
    d.log.advance_high_watermark(6).unwrap();
    assert_eq!(
        d.lead(5, &[ME]),
        vec![
            Effect::SetWritable(false),
            Effect::ReadState {
                request: RequestId(1),
                key: key()
            }
        ]
    );
    // It first re-asserts the record under its leadership, keeping the stop epoch (4).
    let w = d.read(1);
    assert_eq!(
        w,
        vec![write(
            2,
            value(MirrorState::Stopping, 4, 3, MirrorState::Stopping),
            Some(3)
        )]
    );
    assert_eq!(
        d.ack_write(&w),
        vec![Effect::WriteLastMirroredEpoch {
            request: RequestId(3),
            key: key(),
            value: LastMirroredEpochsValue {
                last_mirrored_epoch: Some(3),
                last_mirrored_offset: 5
            },
            expected_state_epoch: Some(4),
        }]
    );
    assert_eq!(
        d.step(Input::LastMirroredEpochWritten {
            request: RequestId(3)
        }),
        vec![write(
            4,
            value(MirrorState::Stopped, 5, 5, MirrorState::Stopping),
            Some(4)
        )]
    );
}

#[test]
fn an_lme_write_fenced_by_a_successors_state_write_is_dropped_and_the_state_re_read() {
    let mut d = mirroring(MirrorConfig::default());
    d.log.append_as_follower(&[data(0, 4, 3)]).unwrap();
    d.log.advance_high_watermark(5).unwrap();
    let w = d.step(Input::DesiredStateChanged(DesiredState::Stop(mirror())));
    d.ack_write(&w);
    let w = d.step(Input::LeaderEpochBumped {
        request: RequestId(6),
        leader_epoch: 4,
    });
    let w = d.ack_write(&w);
    let Some(Effect::WriteLastMirroredEpoch {
        key: k,
        value: lme,
        expected_state_epoch,
        ..
    }) = w.last().cloned()
    else {
        panic!("the LME write: {w:?}")
    };
    assert_eq!(expected_state_epoch, Some(3));
    // A successor (leader epoch 5) re-asserts STOPPING before its own LME lands.
    let successor = MirrorPartitionStateValue {
        leader_epoch: 5,
        ..d.coordinator.read_state(&k).unwrap().clone()
    };
    d.coordinator.write_state(&k, successor, Some(3)).unwrap();
    let refused = d
        .coordinator
        .write_last_mirrored_epoch(&k, lme, expected_state_epoch)
        .unwrap_err();
    assert_eq!(d.coordinator.read_last_mirrored_epoch(&k), None);
    // The deposed leader drops its stop and re-reads instead of appending MIRROR_PID_RESET.
    assert_eq!(
        d.step(Input::WriteFenced {
            request: RequestId(8),
            reason: refused.reason(),
        }),
        vec![Effect::ReadState {
            request: RequestId(9),
            key: key()
        }]
    );
}

#[test]
fn failback_revokes_writes_before_persisting_preparing() {
    let mut d = Driver::new(MirrorConfig::default());
    d.coordinator
        .write_state(
            &key(),
            value(MirrorState::Preparing, 1, 0, MirrorState::Unknown),
            None,
        )
        .unwrap();
    d.coordinator
        .write_state(
            &key(),
            value(MirrorState::Stopping, 1, 0, MirrorState::Preparing),
            Some(0),
        )
        .unwrap();
    d.coordinator
        .write_state(
            &key(),
            value(MirrorState::Stopped, 1, 0, MirrorState::Stopping),
            Some(1),
        )
        .unwrap();
    d.mirror = PartitionMirror::new(ME, key().topic_id, 0, DesiredState::Stop(mirror()));
    d.lead(2, &[ME]);
    let w = d.read(1);
    assert_eq!(
        w,
        vec![write(
            2,
            value(MirrorState::Stopped, 2, 2, MirrorState::Stopping),
            Some(2)
        )],
        "a new leader re-asserts STOPPED before making the partition writable"
    );
    assert_eq!(d.ack_write(&w), vec![Effect::SetWritable(true)]);
    assert_eq!(
        d.step(Input::DesiredStateChanged(DesiredState::Mirror(mirror()))),
        vec![
            Effect::SetWritable(false),
            write(
                3,
                value(MirrorState::Preparing, 2, 3, MirrorState::Stopped),
                Some(3)
            )
        ]
    );
}

#[test]
fn pause_removes_the_fetcher_and_resume_restarts_it_without_truncation() {
    let mut d = mirroring(MirrorConfig::default());
    let w = d.step(Input::DesiredStateChanged(DesiredState::Pause(mirror())));
    assert_eq!(
        w,
        vec![
            Effect::StopFetcher,
            write(
                5,
                value(MirrorState::Paused, 1, 2, MirrorState::Mirroring),
                Some(1)
            )
        ]
    );
    assert_eq!(d.ack_write(&w), vec![]);
    let w = d.step(Input::DesiredStateChanged(DesiredState::Mirror(mirror())));
    assert_eq!(d.ack_write(&w), vec![Effect::StartFetcher, fetch(0, None)]);
}

#[test]
fn stopping_a_paused_partition_follows_the_transition_table() {
    let mut config = MirrorConfig {
        transitions: TransitionTable::kip1279(false),
        ..MirrorConfig::default()
    };
    let mut d = mirroring(config.clone());
    let w = d.step(Input::DesiredStateChanged(DesiredState::Pause(mirror())));
    d.ack_write(&w);
    assert_eq!(
        d.step(Input::DesiredStateChanged(DesiredState::Stop(mirror()))),
        vec![],
        "PAUSED -> STOPPING is not in this table"
    );
    config.transitions = TransitionTable::kip1279(true);
    d.config = config;
    d.coordinator = Coordinator::new(d.config.transitions.clone()).replay(d.coordinator.records());
    assert!(matches!(
        d.step(Input::DesiredStateChanged(DesiredState::Stop(mirror())))[..],
        [Effect::WriteState { .. }]
    ));
}

#[test]
fn a_fenced_write_rereads_the_state() {
    let mut d = Driver::new(MirrorConfig::default());
    d.lead(1, &[ME]);
    d.read(1);
    assert_eq!(
        d.step(Input::WriteFenced {
            request: RequestId(2),
            reason: FenceReason::FencedLeaderEpoch
        }),
        vec![Effect::ReadState {
            request: RequestId(3),
            key: key()
        }]
    );
}

#[test]
fn a_failed_lme_query_persists_failed_and_retries_with_backoff() {
    let mut d = Driver::new(MirrorConfig::default());
    d.lead(1, &[ME]);
    let w = d.read(1);
    d.ack_write(&w);
    let w = d.step(Input::RequestFailed {
        request: RequestId(3),
        error: "source unreachable".into(),
    });
    let failed = MirrorPartitionStateValue {
        state: MirrorState::Failed,
        leader_epoch: 1,
        state_epoch: 0,
        error_message: Some("source unreachable".into()),
        retry_attempt: 1,
        previous_state: Some(MirrorState::Preparing),
    };
    assert_eq!(w, vec![write(4, failed, Some(0))]);
    assert_eq!(
        d.ack_write(&w),
        vec![Effect::ScheduleRetry {
            attempt: 1,
            delay_ms: 100
        }]
    );
    assert!(matches!(
        d.mirror
            .handle(&d.config, Input::RetryDue { attempt: 2 }, &d.log),
        Err(Ignored::NotApplicable { .. })
    ));
    let w = d.step(Input::RetryDue { attempt: 1 });
    let retry = MirrorPartitionStateValue {
        state: MirrorState::Preparing,
        leader_epoch: 1,
        state_epoch: 1,
        error_message: None,
        retry_attempt: 1,
        previous_state: Some(MirrorState::Failed),
    };
    assert_eq!(w, vec![write(5, retry, Some(1))]);
    // A second failure counts on and doubles the delay.
    d.ack_write(&w);
    let w = d.step(Input::RequestFailed {
        request: RequestId(6),
        error: "still unreachable".into(),
    });
    assert_eq!(
        d.ack_write(&w),
        vec![Effect::ScheduleRetry {
            attempt: 2,
            delay_ms: 200
        }]
    );
}

#[test]
fn stale_leadership_and_completions_are_reported_not_applied() {
    let mut d = Driver::new(MirrorConfig::default());
    d.lead(3, &[ME]);
    let before = d.mirror.clone();
    assert_eq!(
        d.mirror.handle(
            &d.config,
            Input::BecameLeader {
                leader_epoch: 2,
                replicas: set(&[ME]),
                isr: set(&[ME])
            },
            &d.log
        ),
        Err(Ignored::StaleLeaderEpoch { current: 3, got: 2 })
    );
    assert_eq!(
        d.mirror.handle(
            &d.config,
            Input::StateRead {
                request: RequestId(9),
                value: None
            },
            &d.log
        ),
        Err(Ignored::StaleCompletion(RequestId(9)))
    );
    assert_eq!(d.mirror, before);
    let mut follower = PartitionMirror::new(2, key().topic_id, 0, DesiredState::Mirror(mirror()));
    assert_eq!(
        follower.handle(
            &d.config,
            Input::IsrChanged {
                replicas: set(&[1]),
                isr: set(&[1])
            },
            &d.log
        ),
        Err(Ignored::NotLeader)
    );
}

#[test]
fn losing_leadership_stops_the_fetcher_and_forgets_everything() {
    let mut d = mirroring(MirrorConfig::default());
    assert_eq!(d.step(Input::BecameFollower), vec![Effect::StopFetcher]);
    assert_eq!(d.mirror.activity(), &Activity::Idle);
    assert_eq!(d.mirror.state(), MirrorState::Unknown);
    // Request ids keep growing so completions from the old term stay stale.
    assert_eq!(
        d.lead(2, &[ME]),
        vec![
            Effect::SetWritable(false),
            Effect::ReadState {
                request: RequestId(5),
                key: key()
            }
        ]
    );
}

#[test]
fn a_topic_that_is_not_mirrored_needs_nothing() {
    let mut d = Driver::new(MirrorConfig::default());
    d.mirror = PartitionMirror::new(ME, key().topic_id, 0, DesiredState::NotMirrored);
    assert_eq!(
        d.lead(1, &[ME]),
        vec![Effect::SetWritable(false)],
        "the gate is closed (it only matters while the topic is mirrored)"
    );
}

#[test]
fn a_partition_added_after_the_failover_is_written_stopped_and_opens_its_gate() {
    // Nothing persisted under a topic asking STOP: a partition that never mirrored.
    let mut d = Driver::new(MirrorConfig::default());
    d.mirror = PartitionMirror::new(ME, key().topic_id, 0, DesiredState::Stop(mirror()));
    d.lead(1, &[ME]);
    let written = d.read(1);
    assert_eq!(
        written,
        vec![write(
            2,
            value(MirrorState::Stopped, 1, 0, MirrorState::Unknown),
            None
        )],
        "STOPPED at once: no fetcher, no stop sequence"
    );
    assert_eq!(d.ack_write(&written), vec![Effect::SetWritable(true)]);
    assert_eq!(d.mirror.state(), MirrorState::Stopped);
    // The prototype's table has no such edge: its partition stays UNKNOWN and read-only.
    let mut p = Driver::new(MirrorConfig::prototype());
    p.mirror = PartitionMirror::new(ME, key().topic_id, 0, DesiredState::Stop(mirror()));
    p.lead(1, &[ME]);
    assert_eq!(p.read(1), vec![]);
    assert_eq!(p.mirror.state(), MirrorState::Unknown);
}

#[test]
fn a_resumed_stop_never_truncates_its_own_pid_reset() {
    let mut d = mirroring(MirrorConfig::default());
    d.log.append_as_follower(&[data(0, 4, 3)]).unwrap();
    d.log.advance_high_watermark(5).unwrap();
    let w = d.step(Input::DesiredStateChanged(DesiredState::Stop(mirror())));
    d.ack_write(&w);
    let w = d.step(Input::LeaderEpochBumped {
        request: RequestId(6),
        leader_epoch: 4,
    });
    d.ack_write(&w);
    d.step(Input::LastMirroredEpochWritten {
        request: RequestId(8),
    });
    // Crash before the reset batch (offset 5) is committed: HW 5 is below it, so LSO = 5.
    assert_eq!(d.log.last_stable_offset(), 5);
    d.mirror = PartitionMirror::new(ME, key().topic_id, 0, DesiredState::Stop(mirror()));
    d.lead(5, &[ME]);
    let w = d.read(1);
    let effects = d.ack_write(&w);
    assert!(
        effects
            .iter()
            .all(|e| !matches!(e, Effect::Log(LogEffect::TruncateTo { .. }))),
        "step 3 already ran: {effects:?}"
    );
    let effects = d.step(Input::LastMirroredEpochWritten {
        request: RequestId(3),
    });
    assert_eq!(effects, vec![], "the reset is there: wait for its commit");
    assert_eq!(d.log.log_end_offset(), 6);
}
