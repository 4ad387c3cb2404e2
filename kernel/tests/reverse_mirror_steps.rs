//! PREPARING against a source that keeps `__mirror_state`: the source's own mirror of the
//! partition from this cluster (the reverse mirror) is checked before the LME truncation. A
//! loop or a reverse mirror still stopping fails the partition (retried) and cuts nothing; a
//! STOPPED one lets the LME rule cut exactly the suffix the source never had.

use kmirror_kernel::config::MirrorConfig;
use kmirror_kernel::effect::{Effect, LogEffect, RequestId, TruncationCause};
use kmirror_kernel::input::Input;
use kmirror_kernel::log::{LogView, PartitionLog};
use kmirror_kernel::partition::Activity;
use kmirror_kernel::state::MirrorState;
use kmirror_kernel::types::EpochAndOffset;

mod common;

use common::*;

/// A partition with offsets 0..6 at epoch 0 and 6..9 at epoch 2, PREPARING and waiting for
/// the LME answer (request 3).
fn preparing_with_a_log() -> Driver {
    let mut d = Driver::new(MirrorConfig::default());
    d.log
        .append_as_follower(&[data(0, 5, 0), data(6, 8, 2)])
        .unwrap();
    d.lead(3, &[ME]);
    let w = d.read(1);
    let q = d.ack_write(&w);
    assert_eq!(
        q,
        vec![Effect::QueryLastMirroredEpoch {
            request: RequestId(3),
            key: key()
        }]
    );
    d
}

fn answer(reverse: MirrorState) -> Input {
    answer_to(RequestId(3), reverse)
}

fn answer_to(request: RequestId, reverse: MirrorState) -> Input {
    Input::SourceMirrorStateReceived {
        request,
        reverse,
        lme: Some(EpochAndOffset {
            epoch: 0,
            end_offset: 6,
        }),
        source_log_start_offset: 0,
    }
}

/// The one FAILED write of `effects`, with its error message.
fn failed_with(effects: &[Effect]) -> String {
    match effects {
        [Effect::WriteState { value, .. }] if value.state == MirrorState::Failed => {
            value.error_message.clone().unwrap_or_default()
        }
        other => panic!("expected one FAILED write, got {other:?}"),
    }
}

#[test]
fn a_source_mirroring_the_partition_from_us_is_a_mirror_loop_and_nothing_is_cut() {
    for reverse in [
        MirrorState::Preparing,
        MirrorState::Mirroring,
        MirrorState::Paused,
        MirrorState::Failed,
    ] {
        let mut d = preparing_with_a_log();
        let error = failed_with(&d.step(answer(reverse)));
        assert!(error.starts_with("mirror loop"), "{reverse}: {error}");
        assert_eq!(d.log.log_end_offset(), 9, "{reverse}: the log is kept");
    }
}

#[test]
fn a_reverse_mirror_still_stopping_holds_the_failback_until_a_retry_finds_it_stopped() {
    let mut d = preparing_with_a_log();
    let w = d.step(answer(MirrorState::Stopping));
    assert!(failed_with(&w).contains("not STOPPED"), "{w:?}");
    assert_eq!(d.log.log_end_offset(), 9);
    // FAILED is retried: back to PREPARING, which asks again.
    let retry = d.ack_write(&w);
    let Some(Effect::ScheduleRetry { attempt, .. }) = retry.last().cloned() else {
        panic!("no retry scheduled: {retry:?}");
    };
    let w = d.step(Input::RetryDue { attempt });
    assert!(matches!(
        d.ack_write(&w).as_slice(),
        [Effect::QueryLastMirroredEpoch { key: k, .. }] if *k == key()
    ));
    let Activity::AwaitingLme(request) = *d.mirror.activity() else {
        panic!("not asking the LME: {:?}", d.mirror.activity());
    };
    // Now STOPPED: the LME rule cuts the suffix the source never had (offsets 6..9).
    let effects = d.step(answer_to(request, MirrorState::Stopped));
    assert_eq!(
        effects.first(),
        Some(&Effect::Log(LogEffect::TruncateTo {
            offset: 6,
            cause: TruncationCause::LastMirroredEpoch
        }))
    );
    assert_eq!(d.log.log_end_offset(), 6);
}

#[test]
fn no_reverse_mirror_at_the_source_truncates_by_the_lme_it_answered() {
    let mut d = preparing_with_a_log();
    let effects = d.step(Input::SourceMirrorStateReceived {
        request: RequestId(3),
        reverse: MirrorState::Unknown,
        lme: None,
        source_log_start_offset: 4,
    });
    assert_eq!(
        effects.first(),
        Some(&Effect::Log(LogEffect::TruncateFullyAndStartAt {
            offset: 4,
            cause: TruncationCause::NoLastMirroredEpoch
        }))
    );
}
