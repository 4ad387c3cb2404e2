//! PREPARING's LME truncation: where a failback (or a first mirroring) cuts the local log before
//! fetching, from the source's last mirrored epoch (`docs/design.md` section 5.2).
//!
//! The source answers the LME it recorded when it stopped mirroring from this cluster, with the
//! offset at which its mirrored copy of that epoch ended, or Kafka's -1 when it has none (it never
//! mirrored from here, or it is a stock Kafka cluster). [`lme_truncation`] is the rule the
//! partition applies to that answer; the same function lets an operator's tool say, before a
//! failback, how much of each log it will cut.

use crate::effect::{LogEffect, TruncationCause};
use crate::log::LogView;
use crate::mutant::{self, Mutant};
use crate::types::{EpochAndOffset, Offset};

/// Where the LME truncation leaves a log, and the log effect that gets it there (`None`: the
/// log is kept whole).
pub fn lme_truncation(
    lme: Option<EpochAndOffset>,
    source_log_start_offset: Offset,
    log: &impl LogView,
    mutant: Option<Mutant>,
) -> (Offset, Option<LogEffect>) {
    let leo = log.log_end_offset();
    match lme {
        // No LME: nothing local is known to match the source; start again at its log start.
        None => (
            source_log_start_offset,
            Some(LogEffect::TruncateFullyAndStartAt {
                offset: source_log_start_offset,
                cause: TruncationCause::NoLastMirroredEpoch,
            }),
        ),
        // Keep what both clusters share: up to the end of the LME in the local epoch cache,
        // and no further than where the source's copy of it ended.
        Some(lme) => {
            let answer = log.epoch_cache().end_offset_for(lme.epoch, leo);
            let epoch_end = if answer.is_undefined() {
                leo
            } else {
                answer.end_offset
            };
            let mut target = epoch_end.min(lme.end_offset).min(leo);
            if mutant::active(mutant, Mutant::LmeOffByOne) {
                target = (target + 1).min(leo);
            }
            let effect = (target < leo).then_some(LogEffect::TruncateTo {
                offset: target,
                cause: TruncationCause::LastMirroredEpoch,
            });
            (target, effect)
        }
    }
}
