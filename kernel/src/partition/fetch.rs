//! MIRRORING: the fetcher, one fetch in flight at a time; each response is appended, or
//! first calls for a bump of the leader epoch, or truncates (a diverging epoch, an offset out
//! of range) and fetches again. EPOCH_FENCING (the prototype design) is the bump persisted as
//! a state.
//!
//! The destination's leader epoch stays above every mirrored epoch (KIP-1279's leader-epoch
//! invariant), or a later leader writes at an epoch a replica already holds mirrored data for.

use super::design::DesignRules;
use super::failure::Failure;
use super::{mutated, Activity, Ignored, PartitionMirror};
use crate::config::{MirrorConfig, TruncationQuorum};
use crate::effect::{Effect, LogEffect, RequestId, TruncationCause};
use crate::fetch::{divergence_truncation_offset, resolve_out_of_range, OutOfRangeResolution};
use crate::input::FetchOutcome;
use crate::log::LogView;
use crate::mutant::Mutant;
use crate::state::MirrorState;
use crate::types::{EpochAndOffset, LeaderEpoch, Offset};

impl PartitionMirror {
    /// MIRRORING's side effect: start the fetcher and fetch from the log end.
    pub(super) fn start_mirroring(
        &mut self,
        config: &MirrorConfig,
        log: &impl LogView,
        out: &mut Vec<Effect>,
    ) {
        if !self.fetcher_running {
            self.fetcher_running = true;
            out.push(Effect::StartFetcher);
        }
        self.fetch_from_log_end(config, log, out);
    }

    /// Stops the fetcher if it runs.
    pub(super) fn stop_fetcher(&mut self, out: &mut Vec<Effect>) {
        if self.fetcher_running {
            self.fetcher_running = false;
            out.push(Effect::StopFetcher);
        }
    }

    /// Fetches from the log end, with the log's latest epoch.
    pub(super) fn fetch_from_log_end(
        &mut self,
        config: &MirrorConfig,
        log: &impl LogView,
        out: &mut Vec<Effect>,
    ) {
        let last_fetched_epoch = log.epoch_cache().latest_epoch();
        self.fetch(config, log.log_end_offset(), last_fetched_epoch, out);
    }

    /// Fetches from `fetch_offset`, the local log's epoch there being `last_fetched_epoch`
    /// (KIP-320: the source checks it and answers a divergence). Also the seed's
    /// [`DesignRules::diverged`]: after a truncation for a diverging epoch, fetch on from the
    /// cut.
    pub(super) fn fetch(
        &mut self,
        config: &MirrorConfig,
        fetch_offset: Offset,
        last_fetched_epoch: Option<LeaderEpoch>,
        out: &mut Vec<Effect>,
    ) {
        let last_fetched_epoch =
            last_fetched_epoch.filter(|_| !mutated(config, Mutant::FetchWithoutLastEpoch));
        let request = RequestId::for_fetch(fetch_offset, last_fetched_epoch);
        self.activity = Activity::Fetching(request);
        out.push(Effect::Fetch {
            request,
            fetch_offset,
            last_fetched_epoch,
            isolation: config.fetch_isolation,
        });
    }

    /// `FetchCompleted`: the answer to the fetch in flight.
    pub(super) fn on_fetch_completed(
        &mut self,
        config: &MirrorConfig,
        request: RequestId,
        outcome: FetchOutcome,
        log: &impl LogView,
        out: &mut Vec<Effect>,
    ) -> Result<(), Ignored> {
        let running_in_stopping = mutated(config, Mutant::FetcherRunsInStopping)
            && self.fetcher_running
            && self.state() == MirrorState::Stopping;
        if self.activity != Activity::Fetching(request) && !running_in_stopping {
            return Err(Ignored::StaleCompletion(request));
        }
        match outcome {
            FetchOutcome::Records {
                next_offset,
                last_epoch,
            } => self.on_records(config, next_offset, last_epoch, log, out),
            FetchOutcome::Diverging(diverging) => self.on_diverging(config, diverging, log, out),
            FetchOutcome::OffsetOutOfRange {
                log_start_offset,
                log_end_offset,
            } => self.on_out_of_range(config, log_start_offset, log_end_offset, log, out),
        }
        Ok(())
    }

    /// Batches up to `next_offset`, the last at `last_epoch`: bump first when the source's
    /// epoch caught up with the leader's (the design says how), else append and fetch on
    /// (after the prototype's proactive bump, when its rule asks for one).
    fn on_records(
        &mut self,
        config: &MirrorConfig,
        next_offset: Offset,
        last_epoch: Option<LeaderEpoch>,
        log: &impl LogView,
        out: &mut Vec<Effect>,
    ) {
        if next_offset <= log.log_end_offset() {
            return self.fetch_from_log_end(config, log, out);
        }
        let leader_epoch = self.leader_epoch();
        let source_epoch = last_epoch.unwrap_or(leader_epoch);
        let ahead = |e| {
            config.epoch_bump.reactive(e, leader_epoch)
                && !(e == leader_epoch && mutated(config, Mutant::EpochTieNotBumped))
        };
        if last_epoch.is_some_and(ahead) && !mutated(config, Mutant::SkipEpochBump) {
            // Bump first (the invariant), then fetch the batches again.
            return (DesignRules::of(config).source_ahead)(self, config, source_epoch, out);
        }
        out.push(Effect::Log(LogEffect::AppendFetched));
        if last_epoch.is_some_and(|e| config.epoch_bump.proactive(e, leader_epoch)) {
            // The prototype's proactive bump, without leaving MIRRORING: the next fetch waits
            // for it.
            return self.bump_while_mirroring(config, source_epoch, out);
        }
        let last_fetched_epoch = last_epoch.or(log.epoch_cache().latest_epoch());
        self.fetch(config, next_offset, last_fetched_epoch, out);
    }

    /// The seed's [`DesignRules::source_ahead`] (and the prototype's proactive bump): ask the
    /// controller for an epoch above `source_epoch` without leaving MIRRORING; the next fetch
    /// waits for it.
    pub(super) fn bump_while_mirroring(
        &mut self,
        config: &MirrorConfig,
        source_epoch: LeaderEpoch,
        out: &mut Vec<Effect>,
    ) {
        let at_least = config.epoch_bump.target(source_epoch);
        self.ask_bump(Activity::AwaitingFetchEpochBump, at_least, out);
    }

    /// The prototype's [`DesignRules::source_ahead`]: persist EPOCH_FENCING, whose side effect
    /// ([`Self::fence_epoch`]) bumps above `source_epoch`.
    pub(super) fn enter_epoch_fencing(
        &mut self,
        config: &MirrorConfig,
        source_epoch: LeaderEpoch,
        out: &mut Vec<Effect>,
    ) {
        self.fencing_epoch = Some(source_epoch);
        self.write_state(config, MirrorState::EpochFencing, None, out);
    }

    /// EPOCH_FENCING (the prototype design): bump the leader epoch above the source's epoch
    /// `S` (the fencing batch's, or after a leader change the log's latest) when `S` is within
    /// the bump rule's threshold of the leader epoch `L` (`S > L - threshold`), then MIRRORING;
    /// otherwise MIRRORING at once.
    pub(super) fn fence_epoch(
        &mut self,
        config: &MirrorConfig,
        log: &impl LogView,
        out: &mut Vec<Effect>,
    ) {
        self.stop_fetcher(out);
        let leader_epoch = self.leader_epoch();
        let source_epoch = self
            .fencing_epoch
            .take()
            .or(log.epoch_cache().latest_epoch())
            .unwrap_or(leader_epoch);
        let threshold = config.epoch_bump.proactive_threshold.unwrap_or(0);
        if source_epoch > leader_epoch.saturating_sub(i32::from(threshold)) {
            let at_least = config.epoch_bump.target(source_epoch);
            self.ask_bump(Activity::AwaitingFencingBump, at_least, out);
        } else {
            self.write_state(config, MirrorState::Mirroring, None, out);
        }
    }

    /// A diverging epoch: truncate to where the local log stops matching the source, then go
    /// on as the design says ([`DesignRules::diverged`]); with nothing to cut, fetch on.
    fn on_diverging(
        &mut self,
        config: &MirrorConfig,
        diverging: EpochAndOffset,
        log: &impl LogView,
        out: &mut Vec<Effect>,
    ) {
        let leo = log.log_end_offset();
        let (offset, epoch) = divergence_point(config, diverging, log);
        if offset < leo {
            out.push(Effect::Log(LogEffect::TruncateTo {
                offset,
                cause: TruncationCause::DivergingEpoch,
            }));
            (DesignRules::of(config).diverged)(self, config, offset, epoch, out);
        } else {
            self.fetch(config, offset, epoch, out);
        }
    }

    /// The prototype's [`DesignRules::diverged`]: the source lost data it had served, an
    /// unclean election there. The prototype recovers (ULE_RECOVERY) only when unclean
    /// elections are supported, else fails for good.
    pub(super) fn recover_from_source_loss(
        &mut self,
        config: &MirrorConfig,
        _truncated_to: Offset,
        _epoch: Option<LeaderEpoch>,
        out: &mut Vec<Effect>,
    ) {
        if config.truncation_quorum == TruncationQuorum::AllReplicas {
            self.write_state(config, MirrorState::UleRecovery, None, out);
        } else {
            let error = "log truncation while mirroring implies an unclean leader election in \
                         the source cluster";
            self.write_value(
                config,
                MirrorState::Failed,
                Some(error.into()),
                Failure::NotRetried,
                out,
            );
        }
    }

    /// The source's log does not cover the fetch offset: truncate or restart the log as the
    /// source's range says, and fetch from there.
    fn on_out_of_range(
        &mut self,
        config: &MirrorConfig,
        source_log_start_offset: Offset,
        source_log_end_offset: Offset,
        log: &impl LogView,
        out: &mut Vec<Effect>,
    ) {
        let leo = log.log_end_offset();
        let cache = log.epoch_cache();
        match resolve_out_of_range(leo, source_log_start_offset, source_log_end_offset) {
            OutOfRangeResolution::TruncateTo(offset) => {
                out.push(Effect::Log(LogEffect::TruncateTo {
                    offset,
                    cause: TruncationCause::OffsetOutOfRange,
                }));
                self.fetch(config, offset, cache.epoch_for_offset(offset - 1), out);
            }
            OutOfRangeResolution::TruncateFullyAndStartAt(offset) => {
                out.push(Effect::Log(LogEffect::TruncateFullyAndStartAt {
                    offset,
                    cause: TruncationCause::OffsetOutOfRange,
                }));
                self.fetch(config, offset, None, out);
            }
            OutOfRangeResolution::FetchFrom(offset) => {
                self.fetch(config, offset, cache.latest_epoch(), out);
            }
        }
    }
}

/// Where a diverging epoch cuts the local log (KIP-320), and the local epoch there.
fn divergence_point(
    config: &MirrorConfig,
    diverging: EpochAndOffset,
    log: &impl LogView,
) -> (Offset, Option<LeaderEpoch>) {
    let (leo, cache) = (log.log_end_offset(), log.epoch_cache());
    if mutated(config, Mutant::DivergenceTakenAtItsWord) {
        return (diverging.end_offset.clamp(0, leo), Some(diverging.epoch));
    }
    let offset = if mutated(config, Mutant::DivergenceTruncatesToLogEnd) {
        leo
    } else {
        divergence_truncation_offset(cache, leo, diverging)
    };
    (offset, cache.epoch_for_offset(offset - 1))
}
