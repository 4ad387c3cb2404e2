//! Applying a [`LogEffect`] to any [`PartitionLog`]: the one place where the kernel's log
//! decisions turn into log mutations, shared by every executor (model and harness).

use crate::batch::{ControlType, LeaderBatch};
use crate::effect::LogEffect;
use crate::log::PartitionLog;

/// Applies `effect` to `log`. `fetched` holds the batches of the fetch response being handled,
/// used by [`LogEffect::AppendFetched`] (empty otherwise).
pub fn apply_log_effect<L: PartitionLog>(
    log: &mut L,
    effect: &LogEffect,
    fetched: &[L::Batch],
) -> Result<(), L::Error> {
    match *effect {
        LogEffect::TruncateTo { offset, .. } => log.truncate_to(offset),
        LogEffect::TruncateFullyAndStartAt { offset, .. } => {
            log.truncate_fully_and_start_at(offset)
        }
        LogEffect::AppendFetched => log.append_as_follower(fetched),
        LogEffect::AbortTransaction {
            producer_id,
            producer_epoch,
            leader_epoch,
        } => log
            .append_as_leader(
                leader_epoch,
                LeaderBatch::Control {
                    control: ControlType::Abort,
                    producer: Some((producer_id, producer_epoch)),
                },
            )
            .map(drop),
        LogEffect::AppendPidReset { leader_epoch } => log
            .append_as_leader(
                leader_epoch,
                LeaderBatch::Control {
                    control: ControlType::MirrorPidReset,
                    producer: None,
                },
            )
            .map(drop),
    }
}
