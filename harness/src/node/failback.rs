//! What a failback will cut: the preview `kmirror mirror --failback` prints before it acts.
//!
//! A failback puts a failed-over topic back in a mirror: its partitions go PREPARING, where the
//! kernel truncates each log by the LME rule ([`lme_truncation`]) before fetching again. A
//! serving kmirror source answers the LME its mirror of us recorded when it stopped
//! ([`crate::node::lme_lookup`]): only the suffix it never had is cut. Against a source that
//! records no last mirrored epoch (a stock Kafka cluster answers Kafka's -1), the rule empties
//! the partition and copies it all again: every record written here since the failover, and
//! the `MIRROR_PID_RESET` the stop appended, are gone. [`preview`] applies the same function to
//! each log as it is now, so the operator sees the numbers first.

use std::collections::BTreeMap;

use kmirror_kernel::desired::DesiredState;
use kmirror_kernel::effect::LogEffect;
use kmirror_kernel::lme::lme_truncation;
use kmirror_kernel::log::LogView;
use kmirror_kernel::node::PartitionKey;
use kmirror_kernel::types::{EpochAndOffset, LeaderEpoch, Offset, PartitionIndex};
use serde::{Deserialize, Serialize};

use super::NodeDriver;

/// One partition's failback, as the LME rule will apply it to the log as it is now.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FailbackPreview {
    /// The topic.
    pub topic: String,
    /// The partition.
    pub partition: PartitionIndex,
    /// The log end offset now.
    pub log_end_offset: Offset,
    /// Where the log will start again (`TruncateFullyAndStartAt`) or end (`TruncateTo`).
    pub truncate_to: Offset,
    /// Whether the whole log goes (the source has no LME).
    pub whole_log: bool,
    /// Offsets the failback removes.
    pub truncated: i64,
    /// Of those, the offsets written here since the failover: at or above the stop's leader
    /// epoch (the `MIRROR_PID_RESET` and local producers' records).
    pub written_here: i64,
}

/// The failback of partition `partition` of `topic`, given the source's LME answer (`None`:
/// Kafka's -1) and log start offset, and the stop's leader epoch (the STOPPED record's).
pub fn preview(
    topic: &str,
    partition: PartitionIndex,
    log: &impl LogView,
    lme: Option<EpochAndOffset>,
    source_log_start_offset: Offset,
    stop_epoch: Option<LeaderEpoch>,
) -> FailbackPreview {
    let leo = log.log_end_offset();
    let (truncate_to, effect) = lme_truncation(lme, source_log_start_offset, log, None);
    let (whole_log, kept_end) = match effect {
        Some(LogEffect::TruncateFullyAndStartAt { .. }) => (true, log.log_start_offset()),
        Some(LogEffect::TruncateTo { offset, .. }) => (false, offset),
        _ => (false, leo),
    };
    let truncated = (leo - kept_end).max(0);
    let here_start = stop_epoch
        .and_then(|stop| {
            log.epoch_cache()
                .entries()
                .find(|e| e.epoch >= stop)
                .map(|e| e.start_offset)
        })
        .unwrap_or(leo);
    let written_here = (leo - here_start.max(kept_end)).max(0);
    FailbackPreview {
        topic: topic.to_owned(),
        partition,
        log_end_offset: leo,
        truncate_to,
        whole_log,
        truncated,
        written_here,
    }
}

/// What the source answered of one partition before a failback: the LME its mirror of us
/// recorded (`None`: Kafka's -1, as a stock Kafka cluster answers) and its log start offset.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SourceAnswer {
    /// The source's LME.
    pub lme: Option<EpochAndOffset>,
    /// The source's log start offset.
    pub log_start_offset: Offset,
}

/// The failback of every partition of `topics` (failed-over topics of `driver`'s destination)
/// given what the source answered of each (no LME and log start 0 when missing): one preview
/// per partition, in topic and partition order.
pub fn previews(
    driver: &NodeDriver,
    topics: &[String],
    source: &BTreeMap<PartitionKey, SourceAnswer>,
) -> Vec<FailbackPreview> {
    let meta = driver.dest().meta();
    let mut out = Vec::new();
    for name in topics {
        let Some(topic) = meta.topics.get(name) else {
            continue;
        };
        let stopped_from = match topic.desired(name) {
            Ok(DesiredState::Stop(m)) => Some(m),
            _ => None,
        };
        for p in 0..topic.partitions {
            let key = PartitionKey::new(topic.topic_id, p);
            let Some(log) = driver.log(&key) else {
                continue;
            };
            let stop_epoch = stopped_from
                .clone()
                .and_then(|m| driver.persisted_record(&key.in_mirror(m)))
                .map(|v| v.leader_epoch);
            let answer = source.get(&key).copied().unwrap_or_default();
            out.push(preview(
                name,
                p,
                log,
                answer.lme,
                answer.log_start_offset,
                stop_epoch,
            ));
        }
    }
    out
}

impl FailbackPreview {
    /// `orders-0: truncates 21 offsets (all of 0..21; 3 written here since the failover)`.
    pub fn line(&self) -> String {
        let what = if self.truncated == 0 {
            "keeps its log".to_owned()
        } else if self.whole_log {
            format!(
                "truncates all {} offsets (up to {}; the source records no last mirrored \
                 epoch, so the partition is copied again from offset {})",
                self.truncated, self.log_end_offset, self.truncate_to
            )
        } else {
            format!(
                "truncates {} offsets ({}..{})",
                self.truncated, self.truncate_to, self.log_end_offset
            )
        };
        format!(
            "{}-{}: failback {what}; {} of them written here since the failover",
            self.topic, self.partition, self.written_here
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kmirror_kernel::batch::{BatchHeader, ControlType, LeaderBatch};
    use kmirror_kernel::log::PartitionLog;
    use kmirror_kernel::mem_log::MemLog;

    /// Four mirrored offsets at epoch 3, then the stop at epoch 5: a reset and two local ones.
    fn failed_over() -> MemLog {
        let mut log = MemLog::new();
        log.append_as_follower(&[BatchHeader::plain(0, 3, 3)])
            .unwrap();
        let reset = LeaderBatch::Control {
            control: ControlType::MirrorPidReset,
            producer: None,
        };
        log.append_as_leader(5, reset).unwrap();
        let batch = LeaderBatch::Records {
            record_count: 2,
            producer: None,
            transactional: false,
        };
        log.append_as_leader(5, batch).unwrap();
        log
    }

    #[test]
    fn no_lme_truncates_everything_and_counts_what_was_written_here() {
        let log = failed_over();
        let p = preview("orders", 0, &log, None, 0, Some(5));
        assert_eq!(p.log_end_offset, 7);
        assert!(p.whole_log);
        assert_eq!((p.truncated, p.written_here), (7, 3));
        assert_eq!(
            p.line(),
            "orders-0: failback truncates all 7 offsets (up to 7; the source records no last \
             mirrored epoch, so the partition is copied again from offset 0); 3 of them \
             written here since the failover"
        );
    }

    #[test]
    fn an_lme_keeps_what_both_clusters_share() {
        let log = failed_over();
        let lme = EpochAndOffset {
            epoch: 3,
            end_offset: 4,
        };
        let p = preview("orders", 0, &log, Some(lme), 0, Some(5));
        assert!(!p.whole_log);
        assert_eq!((p.truncate_to, p.truncated, p.written_here), (4, 3, 3));
        let nothing = preview("orders", 0, &MemLog::new(), None, 0, None);
        assert_eq!((nothing.truncated, nothing.written_here), (0, 0));
        assert!(nothing.line().contains("keeps its log"));
    }
}
