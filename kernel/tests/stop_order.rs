//! STOPPING's steps 2 to 5 in orders other than the KIP's (`MirrorConfig::stop_order`): each test
//! asserts the exact effects of one order on the same log, through the public API only (the
//! style of `partition_steps.rs`). The orders are model-checked in `model/tests/stop_order.rs`;
//! `model/FINDINGS.md` (design question 2) has the table of all 24.
//!
//! The log every test stops: mirrored batches at epoch 3 (offsets 0-1 plain, 2-4 an open
//! transaction of producer 9), HW 5, so the LSO is 2; the destination leads at epoch 5, above
//! every mirrored epoch, so the bump is only the STOPPING record.

use kmirror_kernel::batch::{BatchHeader, ControlType};
use kmirror_kernel::config::{MirrorConfig, StopOrder, StopStep};
use kmirror_kernel::desired::DesiredState;
use kmirror_kernel::effect::{Effect, LogEffect, RequestId, TruncationCause};
use kmirror_kernel::input::Input;
use kmirror_kernel::log::{LogView, PartitionLog};
use kmirror_kernel::partition::{Activity, PartitionMirror};
use kmirror_kernel::records::{LastMirroredEpochsValue, MirrorPartitionStateValue};
use kmirror_kernel::state::MirrorState;

mod common;

use common::{key, mirror, Driver, ME};

const EPOCH: i32 = 5;

fn order(s: &str) -> StopOrder {
    s.parse().expect("a stop order")
}

/// A crash: a new instance on the same broker with the same log, leading at `epoch`.
fn restart(d: &mut Driver, epoch: i32) -> Vec<Effect> {
    d.mirror = PartitionMirror::new(ME, key().topic_id, 0, DesiredState::Stop(mirror()));
    d.lead(epoch, &[ME]);
    d.read(1)
}

fn txn(base: i64, last: i64) -> BatchHeader {
    BatchHeader {
        producer_id: 9,
        producer_epoch: 0,
        base_sequence: (base - 2) as i32,
        is_transactional: true,
        ..BatchHeader::plain(base, last, 3)
    }
}

/// A MIRRORING partition led at epoch 5 (request ids 1-4 used), holding the log described in
/// the module doc, asked to stop: the returned effects remove the fetcher and write STOPPING
/// (request 5).
fn stopping(stop_order: StopOrder) -> (Driver, Vec<Effect>) {
    let config = MirrorConfig {
        stop_order,
        ..MirrorConfig::default()
    };
    let mut d = Driver::new(config);
    d.lead(EPOCH, &[ME]);
    let w = d.read(1);
    d.ack_write(&w);
    let w = d.step(Input::LastMirroredEpochReceived {
        request: RequestId(3),
        lme: None,
        source_log_start_offset: 0,
    });
    d.ack_write(&w);
    assert_eq!(d.mirror.state(), MirrorState::Mirroring);
    d.log
        .append_as_follower(&[BatchHeader::plain(0, 1, 3), txn(2, 3), txn(4, 4)])
        .unwrap();
    d.log.advance_high_watermark(5).unwrap();
    assert_eq!(d.log.last_stable_offset(), 2);
    let w = d.step(Input::DesiredStateChanged(DesiredState::Stop(mirror())));
    assert_eq!(w[0], Effect::StopFetcher);
    (d, w)
}

/// A `WriteState` of `state` at `leader_epoch` from `previous`, expecting state epoch
/// `expected` (the value carries it; the coordinator stores the next one).
fn write(
    request: u64,
    state: MirrorState,
    leader_epoch: i32,
    previous: MirrorState,
    expected: i32,
) -> Effect {
    Effect::WriteState {
        request: RequestId(request),
        key: key(),
        value: MirrorPartitionStateValue {
            state,
            leader_epoch,
            state_epoch: expected,
            error_message: None,
            retry_attempt: 0,
            previous_state: Some(previous),
        },
        expected_state_epoch: Some(expected),
    }
}

/// The state epoch of the STOPPING record with the bump recorded (PREPARING 0, MIRRORING 1,
/// STOPPING 2, the bump's STOPPING 3): the fence every LME write here carries.
const BUMPED_STATE_EPOCH: i32 = 3;

fn lme(request: u64, epoch: i32, offset: i64) -> Effect {
    Effect::WriteLastMirroredEpoch {
        request: RequestId(request),
        key: key(),
        value: LastMirroredEpochsValue {
            last_mirrored_epoch: Some(epoch),
            last_mirrored_offset: offset,
        },
        expected_state_epoch: Some(BUMPED_STATE_EPOCH),
    }
}

fn truncate(offset: i64) -> Effect {
    Effect::Log(LogEffect::TruncateTo {
        offset,
        cause: TruncationCause::LastStableOffset,
    })
}

fn reset(leader_epoch: i32) -> Effect {
    Effect::Log(LogEffect::AppendPidReset { leader_epoch })
}

/// The record of the bump (no bump request: epoch 5 is above the log's epoch 3).
fn bump_record(request: u64, expected: i32) -> Effect {
    write(
        request,
        MirrorState::Stopping,
        EPOCH,
        MirrorState::Stopping,
        expected,
    )
}

#[test]
fn the_kip_order_is_the_default_and_runs_as_documented() {
    assert_eq!(MirrorConfig::default().stop_order, StopOrder::KIP);
    assert_eq!(
        StopOrder::KIP.steps(),
        [
            StopStep::Bump,
            StopStep::Truncate,
            StopStep::Lme,
            StopStep::Reset
        ]
    );
    let (mut d, w) = stopping(StopOrder::KIP);
    assert_eq!(d.ack_write(&w), vec![bump_record(6, 2)]);
    let w = d.ack_write(&[bump_record(6, 2)]);
    assert_eq!(w, vec![truncate(2), lme(7, 3, 2)]);
    assert_eq!(
        d.step(Input::LastMirroredEpochWritten {
            request: RequestId(7)
        }),
        vec![reset(EPOCH)]
    );
    assert_eq!(d.mirror.activity(), &Activity::AwaitingPidResetCommit);
    d.log.advance_high_watermark(3).unwrap();
    assert_eq!(
        d.step(Input::HighWatermarkAdvanced),
        vec![write(
            8,
            MirrorState::Stopped,
            EPOCH,
            MirrorState::Stopping,
            3
        )]
    );
}

/// Reset before truncate: the reset is a write at the stop epoch, which marks step 3 done, so
/// the open transaction is never truncated, and the reset has expired its producer state: the
/// half transaction now reads as committed (the model's `no_half_transaction_survives_stop`).
#[test]
fn reset_before_truncate_keeps_the_half_transaction() {
    let (mut d, w) = stopping(order("bump,reset,truncate,lme"));
    let w = d.ack_write(&w);
    assert_eq!(w, vec![bump_record(6, 2)]);
    assert_eq!(d.ack_write(&w), vec![reset(EPOCH), lme(7, 3, 5)]);
    assert_eq!(
        d.log.log_end_offset(),
        6,
        "offsets 2-4 kept, the reset at 5"
    );
    assert_eq!(d.log.producer_state().open_transactions().count(), 0);
    assert_eq!(
        d.log.last_stable_offset(),
        5,
        "the transaction no longer holds it"
    );
    // The LME's completion finds every step done and waits for the reset's commit.
    assert_eq!(
        d.step(Input::LastMirroredEpochWritten {
            request: RequestId(7)
        }),
        vec![]
    );
    assert_eq!(d.mirror.activity(), &Activity::AwaitingPidResetCommit);
}

/// LME before truncate: the LME is recorded at the log end, naming the open transaction's
/// batches that the truncation then removes (the model's `failback_keeps_only_source_data`:
/// on failback the other side keeps data this side no longer has).
#[test]
fn lme_before_truncate_records_data_the_truncation_removes() {
    let (mut d, w) = stopping(order("bump,lme,truncate,reset"));
    let w = d.ack_write(&w);
    assert_eq!(d.ack_write(&w), vec![lme(7, 3, 5)]);
    assert_eq!(
        d.step(Input::LastMirroredEpochWritten {
            request: RequestId(7)
        }),
        vec![truncate(2), reset(EPOCH)]
    );
    assert_eq!(d.log.log_end_offset(), 3);
}

/// Truncate before bump: the truncation runs as soon as STOPPING is stored, the bump's record
/// follows in the same call, and the re-entry after it finds nothing left to truncate.
#[test]
fn truncate_before_bump_truncates_once() {
    let (mut d, w) = stopping(order("truncate,bump,lme,reset"));
    assert_eq!(d.ack_write(&w), vec![truncate(2), bump_record(6, 2)]);
    assert_eq!(d.ack_write(&[bump_record(6, 2)]), vec![lme(7, 3, 2)]);
    assert_eq!(
        d.step(Input::LastMirroredEpochWritten {
            request: RequestId(7)
        }),
        vec![reset(EPOCH)]
    );
}

/// An order that does not start with the bump acts on the log first, so a new leader that reads
/// a STOPPING record without the bump re-asserts it before acting (the KIP's order needs no
/// re-assertion there: its first action is exactly that record). The resumed stop truncates no
/// further and records the bump.
#[test]
fn a_restarted_leader_reasserts_an_unbumped_stop_before_acting() {
    let (mut d, w) = stopping(order("truncate,bump,lme,reset"));
    assert_eq!(d.ack_write(&w), vec![truncate(2), bump_record(6, 2)]);
    // Crash before the bump's record is written.
    let w = restart(&mut d, EPOCH + 1);
    assert_eq!(
        w,
        vec![write(
            2,
            MirrorState::Stopping,
            EPOCH,
            MirrorState::Mirroring,
            2
        )]
    );
    assert_eq!(
        d.ack_write(&w),
        vec![write(
            3,
            MirrorState::Stopping,
            EPOCH + 1,
            MirrorState::Stopping,
            3
        )]
    );
    // The KIP's order, read by a new leader at the same point, writes the bump's record at once.
    let (mut k, w) = stopping(StopOrder::KIP);
    k.coordinator
        .write_state(
            &key(),
            match &w[1] {
                Effect::WriteState { value, .. } => value.clone(),
                other => panic!("{other:?}"),
            },
            Some(1),
        )
        .unwrap();
    assert_eq!(
        restart(&mut k, EPOCH + 1),
        vec![write(
            2,
            MirrorState::Stopping,
            EPOCH + 1,
            MirrorState::Stopping,
            2
        )]
    );
}

/// Reset before bump: the first reset is written at the epoch the STOPPING record carries,
/// which the log then holds, so the bump is needed; after it the first reset lies below the
/// stop epoch, so it is not the stop's reset: a second one is written at the new epoch, and the
/// LME counts the first reset (a local write) as mirrored data (the model's
/// `mirror_is_prefix_of_source` on failback).
#[test]
fn reset_before_bump_writes_two_resets_and_counts_the_first_as_mirrored() {
    let (mut d, w) = stopping(order("reset,bump,truncate,lme"));
    assert_eq!(
        d.ack_write(&w),
        vec![
            reset(EPOCH),
            Effect::BumpLeaderEpoch {
                request: RequestId(6),
                at_least: EPOCH + 1
            }
        ]
    );
    let w = d.step(Input::LeaderEpochBumped {
        request: RequestId(6),
        leader_epoch: EPOCH + 1,
    });
    assert_eq!(
        w,
        vec![write(
            7,
            MirrorState::Stopping,
            EPOCH + 1,
            MirrorState::Stopping,
            2
        )]
    );
    assert_eq!(d.ack_write(&w), vec![reset(EPOCH + 1), lme(8, EPOCH, 6)]);
    let last = d.log.last_batch().unwrap();
    assert_eq!(
        (last.control, last.partition_leader_epoch, last.base_offset),
        (Some(ControlType::MirrorPidReset), EPOCH + 1, 6)
    );
}

/// Every order, driven by an executor that completes each request at once: no call panics or
/// emits more than a handful of effects, and every order reaches STOPPED on this fault-free
/// path in a bounded number of inputs, its last batch the reset at the stop epoch (what each
/// order leaves behind is the model's question).
#[test]
fn every_order_ends_each_call_and_reaches_stopped_without_faults() {
    for stop_order in StopOrder::ALL {
        let (mut d, mut effects) = stopping(stop_order);
        let mut inputs = 0;
        while d.mirror.state() != MirrorState::Stopped || !d.mirror.is_writable() {
            inputs += 1;
            assert!(inputs < 20, "{stop_order}: no STOPPED after 20 inputs");
            assert!(effects.len() <= 6, "{stop_order}: {effects:?}");
            let next = effects.iter().find_map(|e| match e {
                Effect::WriteState { .. } => Some(None),
                Effect::BumpLeaderEpoch { request, at_least } => {
                    Some(Some(Input::LeaderEpochBumped {
                        request: *request,
                        leader_epoch: *at_least,
                    }))
                }
                Effect::WriteLastMirroredEpoch { request, .. } => {
                    Some(Some(Input::LastMirroredEpochWritten { request: *request }))
                }
                _ => None,
            });
            effects = match next {
                Some(None) => d.ack_write(&effects),
                Some(Some(input)) => d.step(input),
                None => {
                    assert_eq!(
                        d.mirror.activity(),
                        &Activity::AwaitingPidResetCommit,
                        "{stop_order}"
                    );
                    let leo = d.log.log_end_offset();
                    d.log.advance_high_watermark(leo).unwrap();
                    d.step(Input::HighWatermarkAdvanced)
                }
            };
        }
        // Whatever the order, the stop ends with its reset at the stop epoch (in some orders
        // after a first reset at a lower epoch, kept or truncated away).
        let last = d.log.last_batch().unwrap();
        let stop_epoch = d.mirror.stored_value().unwrap().leader_epoch;
        assert_eq!(
            (last.control, last.partition_leader_epoch),
            (Some(ControlType::MirrorPidReset), stop_epoch),
            "{stop_order}"
        );
    }
}
