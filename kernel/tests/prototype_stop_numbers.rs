//! `cluster_mirroring_test.py`'s `test_stop_with_txns` (GitHub `showuon/kafka`,
//! `tests/kafkatest/tests/core/cluster_mirroring_test.py`) stops a mirror holding two open
//! transactions and counts what the stop wrote: one ABORT marker per open transaction and one
//! `MIRROR_PID_RESET`. The model has one transactional producer (`model/tests/
//! prototype_numbers.rs`); here one partition's kernel, `--design prototype`, stops over a log
//! holding two, and the seed design's answer on the same log is pinned beside it.

mod common;

use common::*;
use kmirror_kernel::batch::{BatchHeader, ControlType};
use kmirror_kernel::config::MirrorConfig;
use kmirror_kernel::desired::DesiredState;
use kmirror_kernel::effect::Effect;
use kmirror_kernel::input::Input;
use kmirror_kernel::log::{LogView, PartitionLog};
use kmirror_kernel::state::MirrorState;

/// A transactional batch of producer `pid` at `offset`, epoch 0.
fn transactional(offset: i64, pid: i64) -> BatchHeader {
    BatchHeader {
        producer_id: pid,
        producer_epoch: 0,
        base_sequence: 0,
        is_transactional: true,
        ..data(offset, offset, 0)
    }
}

/// The log a partition mirrored before its stop: plain, producer 7's transaction, producer 8's,
/// plain; both transactions open. Its LEO is 4, its LSO 1.
fn mirrored_with_two_open_transactions(config: MirrorConfig) -> Driver {
    let mut d = mirroring(config);
    let batches = [
        data(0, 0, 0),
        transactional(1, 7),
        transactional(2, 8),
        data(3, 3, 0),
    ];
    d.log.append_as_follower(&batches).expect("a mirrored log");
    d.log.advance_high_watermark(4).expect("replicated");
    assert_eq!((d.log.log_end_offset(), d.log.last_stable_offset()), (4, 1));
    d
}

/// Runs the stop to STOPPED, answering every request it makes; the log's batches then.
fn stop(mut d: Driver) -> Vec<BatchHeader> {
    let mut effects = d.step(Input::DesiredStateChanged(DesiredState::Stop(mirror())));
    for _ in 0..20 {
        if d.mirror.state() == MirrorState::Stopped {
            return d.log.batches().iter().copied().collect();
        }
        let request = effects.iter().find(|e| {
            matches!(
                e,
                Effect::WriteState { .. }
                    | Effect::WriteLastMirroredEpoch { .. }
                    | Effect::BumpLeaderEpoch { .. }
            )
        });
        effects = match request {
            Some(Effect::WriteState { .. }) => d.ack_write(&effects),
            Some(Effect::WriteLastMirroredEpoch { request, .. }) => {
                d.step(Input::LastMirroredEpochWritten { request: *request })
            }
            Some(Effect::BumpLeaderEpoch { request, at_least }) => {
                d.step(Input::LeaderEpochBumped {
                    request: *request,
                    leader_epoch: *at_least,
                })
            }
            _ => {
                // The stop's writes wait for the HW (a single replica: at once).
                let leo = d.log.log_end_offset();
                d.log
                    .advance_high_watermark(leo)
                    .expect("HW within the log");
                d.step(Input::HighWatermarkAdvanced)
            }
        };
    }
    panic!("no STOPPED: {effects:?}");
}

fn controls(batches: &[BatchHeader]) -> Vec<(i64, ControlType)> {
    batches
        .iter()
        .filter_map(|b| b.control.map(|c| (b.producer_id, c)))
        .collect()
}

/// The prototype aborts each open transaction, then resets: 2 + 1 batches past the mirrored
/// log's end (`expected_extra = 2 + num_partitions`).
#[test]
fn the_prototype_writes_one_abort_per_open_transaction_then_the_reset() {
    let batches = stop(mirrored_with_two_open_transactions(
        MirrorConfig::prototype(),
    ));
    assert_eq!(batches.len(), 4 + 2 + 1);
    assert_eq!(
        controls(&batches),
        [
            (7, ControlType::Abort),
            (8, ControlType::Abort),
            (-1, ControlType::MirrorPidReset)
        ]
    );
}

/// The seed truncates to the LSO instead: both transactions and what follows them go, and the
/// reset lands at the LSO (1 + 1 batches). (Reading committed data only, the seed's fetcher
/// would not have copied past the LSO in the first place.)
#[test]
fn the_seed_truncates_to_the_lso_then_resets() {
    let batches = stop(mirrored_with_two_open_transactions(MirrorConfig::default()));
    assert_eq!(batches.len(), 1 + 1);
    assert_eq!(controls(&batches), [(-1, ControlType::MirrorPidReset)]);
}
