//! In-process follower replicas of one partition: Kafka's replication round run on
//! [`FileLog`]s, for the node destination's followers (the node driver's `followers.rs`).
//!
//! A round is what a Kafka follower's fetch and the leader's bookkeeping do, with the kernel's
//! rules ([`kmirror_kernel::replication`]): every follower fetches once from its LEO
//! ([`serve_fetch`] at follower isolation, at most `max_batches` batches); the follower appends,
//! truncates on a diverging epoch (KIP-320) or restarts its log when out of range
//! ([`follower_fetch`]); the leader credits the fetch offset of a fetch that was served records
//! ([`FollowerState::update_fetch_state`]); then the high watermarks move: the leader's to the
//! smallest LEO it credited an ISR member with ([`leader_high_watermark`]), each follower's to
//! the leader's clamped into its log ([`follower_high_watermark`]).
//!
//! What this simplifies against Kafka: followers learn the new HW in the same round (Kafka's
//! learn it on their next fetch); the ISR is the caller's (no follower is shrunk out of it or
//! waited for to join); there is no clock, so caught-up times stay 0; `min.insync.replicas` is
//! 1.

use std::path::PathBuf;

use kmirror_kernel::config::FetchIsolation;
use kmirror_kernel::fetch::serve_fetch;
use kmirror_kernel::log::{LogView, PartitionLog};
use kmirror_kernel::replication::{
    follower_fetch, follower_high_watermark, is_under_min_isr, leader_high_watermark, FollowerLog,
    FollowerLogOp, FollowerState, HwReplica,
};
use kmirror_kernel::types::{BrokerId, Offset};

use crate::error::FileLogError;
use crate::file_log::FileLog;

/// The `min.insync.replicas` of in-process replicas (Kafka's default).
const MIN_INSYNC_REPLICAS: usize = 1;

/// A follower replica and what its leader knows of it.
#[derive(Debug)]
pub struct Follower {
    /// The broker id.
    pub id: BrokerId,
    /// Its log.
    pub log: FileLog,
    /// The leader's record of it (Kafka's `ReplicaState`): its LEO is the fetch offset of its
    /// last fetch served records, what the leader knows it has.
    state: FollowerState,
}

impl Follower {
    /// Follower `id` with its opened `log`, not heard from yet.
    pub fn new(id: BrokerId, log: FileLog) -> Self {
        Follower {
            id,
            log,
            state: FollowerState::EMPTY,
        }
    }
}

/// What one replication round did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RoundReport {
    /// Whether any log, high watermark or acknowledged offset changed.
    pub changed: bool,
    /// `(follower, its log end offset after the fetch)`, for the kernel's `ReplicaFetched`.
    pub fetched: Vec<(BrokerId, Offset)>,
    /// Follower truncations: `(follower, from LEO, to LEO)`.
    pub truncations: Vec<(BrokerId, Offset, Offset)>,
    /// Whether the leader's high watermark moved.
    pub high_watermark_advanced: bool,
}

/// A log operation of a replication round failed.
#[derive(Debug, thiserror::Error)]
#[error("replica log {}: {source}", dir.display())]
pub struct ReplicaLogError {
    /// The log's directory.
    pub dir: PathBuf,
    /// What failed.
    pub source: Box<FileLogError>,
}

impl ReplicaLogError {
    /// The error of a failed operation on `log`.
    pub(crate) fn of(log: &FileLog) -> impl FnOnce(FileLogError) -> Self + '_ {
        move |source| ReplicaLogError {
            dir: log.dir().to_path_buf(),
            source: Box::new(source),
        }
    }
}

/// The leader's log was truncated: what followers had acknowledged may no longer be there, so
/// the high watermark waits for their next valid fetch.
pub fn leader_truncated(followers: &mut [Follower]) {
    for f in followers {
        f.state = FollowerState::EMPTY;
    }
}

/// Whether every follower holds exactly the leader's log range and the high watermarks are at
/// the leader's log end offset.
pub fn in_sync(leader: &FileLog, followers: &[Follower]) -> bool {
    let leo = leader.log_end_offset();
    leader.high_watermark() == leo
        && followers.iter().all(|f| {
            f.log.log_end_offset() == leo
                && f.log.log_start_offset() == leader.log_start_offset()
                && f.log.high_watermark() == leo
                && f.log.last_batch() == leader.last_batch()
        })
}

/// One replication round (see the [module documentation](self)): every follower fetches once,
/// then the high watermarks move. `isr` says whether a follower is in the ISR; the leader's
/// HW waits for ISR members only. `replica_count` counts the leader.
pub fn replicate_round(
    leader: &mut FileLog,
    followers: &mut [Follower],
    isr: &dyn Fn(BrokerId) -> bool,
    replica_count: usize,
    max_batches: usize,
) -> Result<RoundReport, ReplicaLogError> {
    let mut report = RoundReport::default();
    for f in followers.iter_mut() {
        let before = (f.log.log_start_offset(), f.log.log_end_offset(), f.state);
        let leo = f.log.log_end_offset();
        // The view reads at most `max_batches` batches from the fetch offset: a round costs
        // what it replicates, not a read of the rest of the leader's log.
        let response = serve_fetch(
            &leader.fetch_view(max_batches),
            leo,
            f.log.epoch_cache().latest_epoch(),
            FetchIsolation::Follower,
            max_batches,
        );
        let fetch = follower_fetch(response, leo, FollowerLog::of(&f.log));
        if let Some(r) = fetch.report {
            f.state.update_fetch_state(
                r.fetch_offset,
                r.follower_log_start_offset,
                0,
                r.leader_log_end_offset,
            );
        }
        let applied = match fetch.log_op {
            Some(FollowerLogOp::Append(batches)) => f.log.append_as_follower(&batches),
            Some(FollowerLogOp::TruncateTo(to)) => f.log.truncate_to(to),
            Some(FollowerLogOp::TruncateFullyAndStartAt(start)) => {
                f.log.truncate_fully_and_start_at(start)
            }
            None => Ok(()),
        };
        applied.map_err(ReplicaLogError::of(&f.log))?;
        let after_leo = f.log.log_end_offset();
        if after_leo < leo || f.log.log_start_offset() != before.0 {
            report.truncations.push((f.id, leo, after_leo));
        }
        if (f.log.log_start_offset(), after_leo, f.state) != before {
            report.changed = true;
        }
        report.fetched.push((f.id, after_leo));
    }
    let (leader_moved, any_moved) = update_high_watermarks(leader, followers, isr, replica_count)?;
    report.high_watermark_advanced = leader_moved;
    report.changed |= any_moved;
    Ok(report)
}

/// Moves the high watermarks (see the [module documentation](self)), forward only; returns
/// whether the leader's moved and whether any moved.
pub fn update_high_watermarks(
    leader: &mut FileLog,
    followers: &mut [Follower],
    isr: &dyn Fn(BrokerId) -> bool,
    replica_count: usize,
) -> Result<(bool, bool), ReplicaLogError> {
    let in_isr = 1 + followers.iter().filter(|f| isr(f.id)).count();
    let remote = followers.iter().map(|f| HwReplica {
        log_end_offset: f.state.log_end_offset,
        in_isr: isr(f.id),
        caught_up_and_eligible: false,
    });
    let under_min_isr = is_under_min_isr(in_isr, MIN_INSYNC_REPLICAS, replica_count);
    let new_hw = leader_high_watermark(
        leader.high_watermark(),
        leader.log_end_offset(),
        remote,
        under_min_isr,
    );
    let mut leader_moved = false;
    if let Some(hw) = new_hw {
        leader
            .advance_high_watermark(hw)
            .map_err(ReplicaLogError::of(leader))?;
        leader_moved = true;
    }
    let mut any_moved = leader_moved;
    let leader_hw = leader.high_watermark();
    for f in followers.iter_mut() {
        let hw =
            follower_high_watermark(leader_hw, f.log.log_start_offset(), f.log.log_end_offset());
        if hw > f.log.high_watermark() {
            f.log
                .advance_high_watermark(hw)
                .map_err(ReplicaLogError::of(&f.log))?;
            any_moved = true;
        }
    }
    Ok((leader_moved, any_moved))
}

/// Replicates until a round changes nothing (every follower caught up, the high watermarks at
/// the log end offset), at most `max_rounds` rounds. Returns every round's reports merged:
/// the last `fetched` of each follower, every truncation, whether the leader's HW moved.
pub fn replicate_until_in_sync(
    leader: &mut FileLog,
    followers: &mut [Follower],
    isr: &dyn Fn(BrokerId) -> bool,
    replica_count: usize,
    max_batches: usize,
    max_rounds: usize,
) -> Result<RoundReport, ReplicaLogError> {
    let mut merged = RoundReport::default();
    for _ in 0..max_rounds {
        let round = replicate_round(leader, followers, isr, replica_count, max_batches)?;
        merged.high_watermark_advanced |= round.high_watermark_advanced;
        merged.truncations.extend(round.truncations);
        merged.fetched = round.fetched;
        if !round.changed {
            break;
        }
        merged.changed = true;
    }
    Ok(merged)
}

#[cfg(test)]
mod tests {
    use kmirror_kernel::batch::LeaderBatch;

    use super::*;
    use crate::file_log::{FileLogConfig, TopicPartition};

    fn open(root: &std::path::Path, broker: &str) -> FileLog {
        let tp = TopicPartition::new("orders", 0).unwrap();
        FileLog::open(&root.join(broker), tp, FileLogConfig::default())
            .unwrap()
            .0
    }

    fn plain(log: &mut FileLog, epoch: i32, batches: usize) {
        for _ in 0..batches {
            let batch = LeaderBatch::Records {
                record_count: 2,
                producer: None,
                transactional: false,
            };
            log.append_as_leader(epoch, batch).unwrap();
        }
    }

    fn bytes(log: &FileLog) -> Vec<u8> {
        log.try_read(log.log_start_offset(), log.log_end_offset())
            .unwrap()
            .iter()
            .flat_map(|b| b.bytes().to_vec())
            .collect()
    }

    /// The leader credits a follower with the offset it fetched from, so the HW moves a round
    /// after the copy; only ISR members hold it back; a leader that truncated and went on in a
    /// new epoch makes its followers truncate (KIP-320) and copy the new batches.
    #[test]
    fn the_high_watermark_follows_the_isr_and_followers_truncate_with_their_leader() {
        let tmp = tempfile::tempdir().unwrap();
        let mut leader = open(tmp.path(), "broker-0");
        plain(&mut leader, 0, 4);
        let mut followers = vec![
            Follower::new(1, open(tmp.path(), "broker-1")),
            Follower::new(2, open(tmp.path(), "broker-2")),
        ];
        let everyone = |_: BrokerId| true;

        // One batch a round: after the first, the followers hold offsets 0..2 but the leader
        // credited them with their fetch offset 0.
        let round = replicate_round(&mut leader, &mut followers, &everyone, 3, 1).unwrap();
        assert_eq!(round.fetched, vec![(1, 2), (2, 2)]);
        assert_eq!(leader.high_watermark(), 0);
        assert!(!round.high_watermark_advanced);
        let round = replicate_round(&mut leader, &mut followers, &everyone, 3, 1).unwrap();
        assert_eq!(leader.high_watermark(), 2, "credited at their second fetch");
        assert!(round.high_watermark_advanced);
        assert_eq!(followers[0].log.high_watermark(), 2);

        let merged = replicate_until_in_sync(&mut leader, &mut followers, &everyone, 3, 1, 64);
        assert!(merged.unwrap().changed);
        assert!(in_sync(&leader, &followers));
        assert_eq!(leader.high_watermark(), 8);

        // A new follower in the ISR holds the HW back until it catches up; out of it, not.
        plain(&mut leader, 0, 2);
        followers.push(Follower::new(3, open(tmp.path(), "broker-3")));
        for _ in 0..2 {
            replicate_round(&mut leader, &mut followers, &everyone, 4, 1).unwrap();
        }
        assert_eq!(followers[0].log.log_end_offset(), 12);
        assert_eq!(leader.high_watermark(), 8, "follower 3 was credited with 2");
        let not_three = |b: BrokerId| b != 3;
        replicate_round(&mut leader, &mut followers, &not_three, 4, 1).unwrap();
        assert_eq!(leader.high_watermark(), 12);

        // The leader loses its last two batches and appends three of epoch 1.
        leader.truncate_to(4).unwrap();
        leader_truncated(&mut followers);
        plain(&mut leader, 1, 3);
        let merged =
            replicate_until_in_sync(&mut leader, &mut followers, &everyone, 4, 100, 64).unwrap();
        assert_eq!(merged.truncations, vec![(1, 12, 4), (2, 12, 4), (3, 6, 4)]);
        assert!(in_sync(&leader, &followers));
        for f in &followers {
            assert_eq!(bytes(&f.log), bytes(&leader), "follower {}", f.id);
            assert_eq!(f.log.epoch_cache(), leader.epoch_cache());
        }
    }
}
