//! Property tests of the replication rules ([`kmirror_kernel::replication`]) on in-memory logs:
//! a leader takes random appends while followers fetch in random order; the leader credits fetch
//! offsets and moves its HW by Kafka's rule.

use kmirror_kernel::batch::LeaderBatch;
use kmirror_kernel::config::FetchIsolation;
use kmirror_kernel::fetch::serve_fetch;
use kmirror_kernel::log::{LogView, PartitionLog};
use kmirror_kernel::mem_log::MemLog;
use kmirror_kernel::replication::{
    follower_fetch, follower_high_watermark, leader_high_watermark, FollowerLog, FollowerLogOp,
    FollowerState, HwReplica,
};
use kmirror_kernel::types::Offset;
use proptest::prelude::*;

/// A leader and its followers, all in the ISR.
struct Cluster {
    leader: MemLog,
    followers: Vec<(MemLog, FollowerState)>,
    clock: i64,
}

impl Cluster {
    fn new(followers: usize) -> Self {
        Cluster {
            leader: MemLog::new(),
            followers: (0..followers)
                .map(|_| (MemLog::new(), FollowerState::EMPTY))
                .collect(),
            clock: 0,
        }
    }

    fn produce(&mut self, records: u32) {
        let batch = LeaderBatch::Records {
            record_count: records,
            producer: None,
            transactional: false,
        };
        self.leader.append_as_leader(1, batch).unwrap();
        self.update_hw();
    }

    /// Follower `i` fetches once (at most `max_batches` batches).
    fn fetch(&mut self, i: usize, max_batches: usize) {
        self.clock += 1;
        let (log, state) = &mut self.followers[i];
        let leo = log.log_end_offset();
        let response = serve_fetch(
            &self.leader,
            leo,
            log.epoch_cache().latest_epoch(),
            FetchIsolation::Follower,
            max_batches,
        );
        let fetch = follower_fetch(response, leo, FollowerLog::of(&*log));
        match fetch.log_op {
            Some(FollowerLogOp::Append(batches)) => log.append_as_follower(&batches).unwrap(),
            Some(op) => panic!("a single leader never makes a follower truncate: {op:?}"),
            None => {}
        }
        if let Some(report) = fetch.report {
            state.update_fetch_state(
                report.fetch_offset,
                report.follower_log_start_offset,
                self.clock,
                report.leader_log_end_offset,
            );
        }
        if let Some(hw) = fetch.leader_high_watermark {
            let hw = follower_high_watermark(hw, log.log_start_offset(), log.log_end_offset());
            if hw > log.high_watermark() {
                log.advance_high_watermark(hw).unwrap();
            }
        }
        self.update_hw();
    }

    fn update_hw(&mut self) {
        let replicas = self.followers.iter().map(|(_, s)| HwReplica {
            log_end_offset: s.log_end_offset,
            in_isr: true,
            caught_up_and_eligible: false,
        });
        if let Some(hw) = leader_high_watermark(
            self.leader.high_watermark(),
            self.leader.log_end_offset(),
            replicas,
            false,
        ) {
            self.leader.advance_high_watermark(hw).unwrap();
        }
    }

    fn smallest_follower_leo(&self) -> Offset {
        self.followers
            .iter()
            .map(|(log, _)| log.log_end_offset())
            .min()
            .unwrap_or(self.leader.log_end_offset())
    }
}

#[derive(Clone, Debug)]
enum Step {
    Produce(u32),
    Fetch(usize, usize),
}

fn steps(followers: usize) -> impl Strategy<Value = Vec<Step>> {
    prop::collection::vec(
        prop_oneof![
            (1u32..4).prop_map(Step::Produce),
            (0..followers, 1usize..3).prop_map(|(i, n)| Step::Fetch(i, n)),
        ],
        0..40,
    )
}

proptest! {
    /// The credited LEO never exceeds the follower's real LEO, so the leader's HW never passes
    /// a record some ISR follower lacks; followers' HWs never pass the leader's.
    #[test]
    fn hw_never_passes_a_record_a_follower_lacks(followers in 1usize..4, plan in steps(3)) {
        let mut cluster = Cluster::new(followers);
        for step in plan {
            match step {
                Step::Produce(n) => cluster.produce(n),
                Step::Fetch(i, n) => cluster.fetch(i % followers, n),
            }
            prop_assert!(cluster.leader.high_watermark() <= cluster.smallest_follower_leo());
            for (log, state) in &cluster.followers {
                prop_assert!(state.log_end_offset <= log.log_end_offset());
                prop_assert!(log.high_watermark() <= cluster.leader.high_watermark());
            }
        }
    }

    /// Once appends stop, round-robin fetches bring every HW to the leader's LEO, and the
    /// leader's HW reaches it only after each follower fetched again at the end (one more fetch
    /// than copying the data takes: the report of the new LEO).
    #[test]
    fn hw_reaches_the_leo_one_round_after_the_data(followers in 1usize..4, plan in steps(3)) {
        let mut cluster = Cluster::new(followers);
        for step in plan {
            match step {
                Step::Produce(n) => cluster.produce(n),
                Step::Fetch(i, n) => cluster.fetch(i % followers, n),
            }
        }
        let leo = cluster.leader.log_end_offset();
        // Copy everything (one batch at a time would take longer; ask for plenty).
        for i in 0..followers {
            cluster.fetch(i, 1_000);
        }
        prop_assert!(cluster.followers.iter().all(|(log, _)| log.log_end_offset() == leo));
        let all_reported = cluster.followers.iter().all(|(_, s)| s.log_end_offset == leo);
        prop_assert_eq!(cluster.leader.high_watermark() == leo, all_reported);
        // The reporting round.
        for i in 0..followers {
            cluster.fetch(i, 1_000);
        }
        prop_assert_eq!(cluster.leader.high_watermark(), leo);
        // The followers learn it on the fetch after.
        for i in 0..followers {
            cluster.fetch(i, 1_000);
        }
        for (log, _) in &cluster.followers {
            prop_assert_eq!(log.high_watermark(), leo);
        }
    }
}
