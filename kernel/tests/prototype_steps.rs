//! The prototype design (`MirrorConfig::prototype`, `docs/prototype.md`), one input at a time:
//! the exact effects of the behaviour it adds to the shared kernel (PAUSING, EPOCH_FENCING,
//! ULE_RECOVERY, its FAILED rules and decisions, its stop's first steps).

mod common;

use common::*;
use kmirror_kernel::config::{
    FailedRetry, FetchIsolation, LmeCapture, MirrorConfig, TruncationQuorum,
};
use kmirror_kernel::desired::DesiredState;
use kmirror_kernel::effect::{Effect, LogEffect, RequestId, TruncationCause};
use kmirror_kernel::input::{FetchOutcome, Input};
use kmirror_kernel::log::{LogView, PartitionLog};
use kmirror_kernel::partition::{Activity, Ignored};
use kmirror_kernel::records::{
    LastMirroredEpochsValue, MirrorPartitionStateValue, NON_RETRYABLE_ATTEMPT,
};
use kmirror_kernel::state::MirrorState::{self, *};
use kmirror_kernel::types::EpochAndOffset;

/// The prototype fetches READ_UNCOMMITTED.
fn fetch_uncommitted(offset: i64, epoch: Option<i32>) -> Effect {
    Effect::Fetch {
        request: RequestId::for_fetch(offset, epoch),
        fetch_offset: offset,
        last_fetched_epoch: epoch,
        isolation: FetchIsolation::ReadUncommitted,
    }
}

fn failed(
    leader_epoch: i32,
    previous: MirrorState,
    retry_attempt: u32,
    error: &str,
) -> MirrorPartitionStateValue {
    MirrorPartitionStateValue {
        retry_attempt,
        error_message: Some(error.into()),
        ..value(Failed, leader_epoch, 0, previous)
    }
}

fn with_attempt(mut v: MirrorPartitionStateValue, retry_attempt: u32) -> MirrorPartitionStateValue {
    v.retry_attempt = retry_attempt;
    v
}

/// A prototype partition in MIRRORING at leader epoch 1 (state epoch 1; request ids 1-4 used).
fn prototype_mirroring() -> Driver {
    mirroring(MirrorConfig::prototype())
}

#[test]
fn a_pause_goes_through_pausing_and_a_resume_straight_back_to_mirroring() {
    let mut d = prototype_mirroring();
    assert_eq!(
        d.step(Input::DesiredStateChanged(DesiredState::Pause(mirror()))),
        vec![
            Effect::StopFetcher,
            write(5, value(Pausing, 1, 0, Mirroring), Some(1))
        ]
    );
    let w = d.step(Input::DesiredStateChanged(DesiredState::Pause(mirror())));
    assert_eq!(w, vec![], "decided when the write's answer arrives");
    assert_eq!(
        d.ack_write(&[write(5, value(Pausing, 1, 0, Mirroring), Some(1))]),
        vec![write(6, value(Paused, 1, 0, Pausing), Some(2))],
        "PAUSING's side effect asks for PAUSED"
    );
    assert_eq!(
        d.ack_write(&[write(6, value(Paused, 1, 0, Pausing), Some(2))]),
        vec![]
    );
    assert_eq!(d.mirror.state(), Paused);
    assert_eq!(
        d.step(Input::DesiredStateChanged(DesiredState::Mirror(mirror()))),
        vec![write(7, value(Mirroring, 1, 0, Paused), Some(3))]
    );
}

#[test]
fn a_batch_at_the_leader_epoch_is_appended_and_bumped_proactively() {
    let mut d = prototype_mirroring();
    d.fetched = vec![data(0, 2, 1)];
    assert_eq!(
        d.step(Input::FetchCompleted {
            request: RequestId::for_fetch(0, None),
            outcome: FetchOutcome::Records {
                next_offset: 3,
                last_epoch: Some(1),
            },
        }),
        vec![
            Effect::Log(LogEffect::AppendFetched),
            Effect::BumpLeaderEpoch {
                request: RequestId(5),
                at_least: 11
            }
        ],
        "the prototype's check is strict; 1 > 1 - 3 asks for the source epoch + 10"
    );
    assert_eq!(d.log.log_end_offset(), 3);
    assert_eq!(
        d.step(Input::LeaderEpochBumped {
            request: RequestId(5),
            leader_epoch: 11
        }),
        vec![fetch_uncommitted(3, Some(1))]
    );
    assert_eq!(d.mirror.state(), Mirroring, "no state change");
}

#[test]
fn a_batch_above_the_leader_epoch_persists_epoch_fencing_then_bumps_then_mirrors() {
    let mut d = prototype_mirroring();
    let fencing = value(EpochFencing, 1, 0, Mirroring);
    assert_eq!(
        d.step(Input::FetchCompleted {
            request: RequestId::for_fetch(0, None),
            outcome: FetchOutcome::Records {
                next_offset: 3,
                last_epoch: Some(4),
            },
        }),
        vec![Effect::StopFetcher, write(5, fencing.clone(), Some(1))],
        "nothing appended: the batch waits for the bump"
    );
    assert_eq!(d.log.log_end_offset(), 0);
    assert_eq!(
        d.ack_write(&[write(5, fencing, Some(1))]),
        vec![Effect::BumpLeaderEpoch {
            request: RequestId(6),
            at_least: 14
        }]
    );
    let back = value(Mirroring, 14, 0, EpochFencing);
    assert_eq!(
        d.step(Input::LeaderEpochBumped {
            request: RequestId(6),
            leader_epoch: 14
        }),
        vec![write(7, back.clone(), Some(2))]
    );
    assert_eq!(
        d.ack_write(&[write(7, back, Some(2))]),
        vec![Effect::StartFetcher, fetch_uncommitted(0, None)]
    );
}

#[test]
fn a_stop_during_epoch_fencing_is_legal_and_makes_the_bump_stale() {
    let mut d = prototype_mirroring();
    let w = d.step(Input::FetchCompleted {
        request: RequestId::for_fetch(0, None),
        outcome: FetchOutcome::Records {
            next_offset: 3,
            last_epoch: Some(4),
        },
    });
    d.ack_write(&w);
    assert_eq!(
        d.step(Input::DesiredStateChanged(DesiredState::Stop(mirror()))),
        vec![write(7, value(Stopping, 1, 0, EpochFencing), Some(2))]
    );
    assert!(matches!(
        d.mirror.handle(
            &d.config,
            Input::LeaderEpochBumped {
                request: RequestId(6),
                leader_epoch: 14
            },
            &d.log
        ),
        Err(Ignored::StaleCompletion(RequestId(6)))
    ));
}

#[test]
fn a_divergence_without_unclean_support_fails_for_good() {
    let mut d = prototype_mirroring();
    d.log
        .append_as_follower(&[data(0, 2, 1), data(3, 9, 2)])
        .unwrap();
    let error =
        "log truncation while mirroring implies an unclean leader election in the source cluster";
    let fail = failed(1, Mirroring, NON_RETRYABLE_ATTEMPT, error);
    assert_eq!(
        d.step(Input::FetchCompleted {
            request: RequestId::for_fetch(0, None),
            outcome: FetchOutcome::Diverging(EpochAndOffset {
                epoch: 1,
                end_offset: 3,
            }),
        }),
        vec![
            Effect::Log(LogEffect::TruncateTo {
                offset: 3,
                cause: TruncationCause::DivergingEpoch,
            }),
            Effect::StopFetcher,
            write(5, fail.clone(), Some(1))
        ]
    );
    assert_eq!(d.ack_write(&[write(5, fail, Some(1))]), vec![], "no retry");
    assert_eq!(d.mirror.state(), Failed);
    assert_eq!(d.mirror.activity(), &Activity::Settled);
}

#[test]
fn a_divergence_with_unclean_support_recovers_once_the_replicas_converge() {
    let mut d = Driver::new(MirrorConfig {
        truncation_quorum: TruncationQuorum::AllReplicas,
        ..MirrorConfig::prototype()
    });
    d.lead(1, &[ME, 2]);
    let w = d.read(1);
    d.ack_write(&w);
    d.step(Input::LastMirroredEpochReceived {
        request: RequestId(3),
        lme: None,
        source_log_start_offset: 0,
    });
    let w = d.step(Input::ReplicaFetched {
        replica: 2,
        log_end_offset: 0,
    });
    d.ack_write(&w);
    assert_eq!(d.mirror.state(), Mirroring);
    d.log
        .append_as_follower(&[data(0, 2, 1), data(3, 9, 2)])
        .unwrap();
    let recovery = value(UleRecovery, 1, 0, Mirroring);
    assert_eq!(
        d.step(Input::FetchCompleted {
            request: RequestId::for_fetch(0, None),
            outcome: FetchOutcome::Diverging(EpochAndOffset {
                epoch: 1,
                end_offset: 3,
            }),
        }),
        vec![
            Effect::Log(LogEffect::TruncateTo {
                offset: 3,
                cause: TruncationCause::DivergingEpoch,
            }),
            Effect::StopFetcher,
            write(5, recovery.clone(), Some(1))
        ]
    );
    assert_eq!(d.log.log_end_offset(), 3, "truncated");
    assert_eq!(d.ack_write(&[write(5, recovery, Some(1))]), vec![], "waits");
    assert!(
        matches!(
            d.mirror.activity(),
            Activity::AwaitingReplicas {
                truncated_to: 3,
                ..
            }
        ),
        "{:?} {:?}",
        d.mirror.activity(),
        d.mirror.state()
    );
    assert_eq!(
        d.step(Input::ReplicaFetched {
            replica: 2,
            log_end_offset: 3
        }),
        vec![write(6, value(Mirroring, 1, 0, UleRecovery), Some(2))]
    );
}

#[test]
fn failed_wins_over_a_stop_and_the_retry_does_not_look_at_it_again() {
    let mut d = prototype_mirroring();
    let fail = failed(1, Mirroring, 1, "NETWORK_EXCEPTION");
    assert_eq!(
        d.step(Input::RequestFailed {
            request: RequestId::for_fetch(0, None),
            error: "NETWORK_EXCEPTION".into()
        }),
        vec![Effect::StopFetcher, write(5, fail.clone(), Some(1))]
    );
    let retry = Effect::ScheduleRetry {
        attempt: 1,
        delay_ms: 1_000,
    };
    assert_eq!(d.ack_write(&[write(5, fail, Some(1))]), vec![retry.clone()]);
    assert_eq!(
        d.step(Input::DesiredStateChanged(DesiredState::Stop(mirror()))),
        vec![retry],
        "FAILED wins: the stop is not acted on"
    );
    let back = with_attempt(value(Mirroring, 1, 0, Failed), 1);
    assert_eq!(
        d.step(Input::RetryDue { attempt: 1 }),
        vec![write(6, back.clone(), Some(2))]
    );
    assert_eq!(
        d.ack_write(&[write(6, back, Some(2))]),
        vec![Effect::StartFetcher, fetch_uncommitted(0, None)],
        "the prototype decides on triggers only: MIRRORING although the stop is desired"
    );
    assert_eq!(d.mirror.desired(), &DesiredState::Stop(mirror()));

    // The seed decides after every acknowledged write: the same retry goes on to STOPPING.
    let mut seed = mirroring(MirrorConfig::default());
    let w = seed.step(Input::RequestFailed {
        request: RequestId::for_fetch(0, None),
        error: "NETWORK_EXCEPTION".into(),
    });
    seed.ack_write(&w);
    seed.step(Input::DesiredStateChanged(DesiredState::Stop(mirror())));
    let w = seed.step(Input::RetryDue { attempt: 1 });
    let after = seed.ack_write(&w);
    assert!(
        after.iter().any(|e| matches!(
            e,
            Effect::WriteState { value, .. } if value.state == Stopping
        )),
        "{after:?}"
    );
}

/// EPOCH_FENCING's bump fails: FAILED with `prevState` EPOCH_FENCING, and the retry to it is
/// refused by the prototype's table (`docs/prototype.md` D1). Returns the driver at the retry.
fn failed_epoch_fencing(config: MirrorConfig) -> Driver {
    let mut d = mirroring(config);
    let w = d.step(Input::FetchCompleted {
        request: RequestId::for_fetch(0, None),
        outcome: FetchOutcome::Records {
            next_offset: 3,
            last_epoch: Some(4),
        },
    });
    d.ack_write(&w);
    let fail = failed(1, EpochFencing, 1, "NOT_CONTROLLER");
    assert_eq!(
        d.step(Input::RequestFailed {
            request: RequestId(6),
            error: "NOT_CONTROLLER".into()
        }),
        vec![write(7, fail.clone(), Some(2))]
    );
    assert_eq!(
        d.ack_write(&[write(7, fail, Some(2))]),
        vec![Effect::ScheduleRetry {
            attempt: 1,
            delay_ms: 1_000
        }]
    );
    d
}

#[test]
fn a_failed_epoch_fencing_is_never_retried_as_coded() {
    let mut d = failed_epoch_fencing(MirrorConfig::prototype());
    assert_eq!(d.step(Input::RetryDue { attempt: 1 }), vec![]);
    assert_eq!(d.mirror.state(), Failed);
    assert_eq!(d.mirror.activity(), &Activity::Settled);
}

#[test]
fn the_javadoc_reading_retries_every_failure_from_log_alignment() {
    let mut d = failed_epoch_fencing(MirrorConfig {
        failed_retry: FailedRetry::LogAlignment,
        ..MirrorConfig::prototype()
    });
    assert_eq!(
        d.step(Input::RetryDue { attempt: 1 }),
        vec![write(
            8,
            with_attempt(value(Preparing, 1, 0, Failed), 1),
            Some(3)
        )]
    );
}

#[test]
fn a_pause_during_log_alignment_is_dropped() {
    let mut d = Driver::new(MirrorConfig::prototype());
    d.lead(1, &[ME]);
    let w = d.read(1);
    d.ack_write(&w);
    assert_eq!(
        d.step(Input::DesiredStateChanged(DesiredState::Pause(mirror()))),
        vec![Effect::QueryLastMirroredEpoch {
            request: RequestId(4),
            key: key()
        }],
        "no PAUSING: alignment runs again"
    );
    assert_eq!(d.mirror.state(), Preparing);
}

#[test]
fn the_stop_records_the_lme_first_unfenced_at_the_log_end() {
    let mut d = prototype_mirroring();
    d.log.append_as_follower(&[data(0, 2, 0)]).unwrap();
    let stopping = value(Stopping, 1, 0, Mirroring);
    assert_eq!(
        d.step(Input::DesiredStateChanged(DesiredState::Stop(mirror()))),
        vec![Effect::StopFetcher, write(5, stopping.clone(), Some(1))]
    );
    assert_eq!(
        d.ack_write(&[write(5, stopping, Some(1))]),
        vec![Effect::WriteLastMirroredEpoch {
            request: RequestId(6),
            key: key(),
            value: LastMirroredEpochsValue {
                last_mirrored_epoch: Some(0),
                last_mirrored_offset: 3,
            },
            expected_state_epoch: None,
        }]
    );
    assert_eq!(
        d.step(Input::LastMirroredEpochWritten {
            request: RequestId(6)
        }),
        vec![write(7, value(Stopping, 1, 0, Stopping), Some(2))],
        "then the bump (the leader's epoch 1 is above the log's 0: recorded, no request)"
    );
}

/// Runs a prototype stop (LME first) on a log holding `data(0, 2, 0)` up to the
/// `MIRROR_PID_RESET` at offset 3, then makes the partition leader again at epoch 2: the
/// re-entered stop records the LME again. Returns that write's value.
fn lme_recorded_after_a_leader_change(config: MirrorConfig) -> LastMirroredEpochsValue {
    let mut d = mirroring(config);
    d.log.append_as_follower(&[data(0, 2, 0)]).unwrap();
    let w = d.step(Input::DesiredStateChanged(DesiredState::Stop(mirror())));
    d.ack_write(&w);
    let w = d.step(Input::LastMirroredEpochWritten {
        request: RequestId(6),
    });
    let lme = d.ack_write(&w);
    let [Effect::WriteLastMirroredEpoch { request, .. }] = lme[..] else {
        panic!("the re-entered stop records the LME again: {lme:?}");
    };
    let after = d.step(Input::LastMirroredEpochWritten { request });
    assert!(
        after.contains(&Effect::Log(LogEffect::AppendPidReset { leader_epoch: 1 })),
        "{after:?}"
    );
    assert_eq!(d.log.log_end_offset(), 4);
    let read = d.lead(2, &[ME]);
    let [Effect::SetWritable(false), Effect::ReadState { request, .. }] = read[..] else {
        panic!("a new leader reads its state: {read:?}");
    };
    let w = d.read(request.0);
    let effects = d.ack_write(&w);
    match &effects[..] {
        [Effect::WriteLastMirroredEpoch { value, .. }] => *value,
        other => panic!("expected the LME write, got {other:?}"),
    }
}

#[test]
fn a_resumed_stop_records_its_own_reset_as_mirrored_when_it_captures_the_log_end() {
    assert_eq!(
        lme_recorded_after_a_leader_change(MirrorConfig::prototype()),
        LastMirroredEpochsValue {
            last_mirrored_epoch: Some(1),
            last_mirrored_offset: 4,
        },
        "the prototype's capture names the stop's own MIRROR_PID_RESET"
    );
    assert_eq!(
        lme_recorded_after_a_leader_change(MirrorConfig {
            lme_capture: LmeCapture::BeforeStopWrites,
            ..MirrorConfig::prototype()
        }),
        LastMirroredEpochsValue {
            last_mirrored_epoch: Some(0),
            last_mirrored_offset: 3,
        },
        "the seed's capture stops where the stop's writes begin"
    );
}
