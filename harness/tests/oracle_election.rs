//! Differential test of a leader election's record in the epoch cache against Apache Kafka
//! 4.4.0's `kafka.cluster.Partition` (run with `cargo test --release -- --include-ignored
//! oracle`).
//!
//! Kafka's `Partition.makeLeader` records every new leader epoch at the log's end at once
//! (`UnifiedLog.assignEpochStartOffset(epoch, LEO)`), before the new leader writes anything;
//! the model's source does the same with [`MemLog::assign_epoch_start_offset`] on each
//! election. Random sequences of leader appends and re-elections of the leader at a new epoch
//! run through a real `Partition` leading over a real `UnifiedLog` (`dev.kmirror.oracle.
//! PartitionOracle`) and through a [`MemLog`]; after every operation the epoch cache, and the
//! answer to `lastOffsetForLeaderEpoch` (what a leader tells a fetcher whose last fetched epoch
//! it is: Kafka's `Partition.lastOffsetForLeaderEpoch`, the kernel's `end_offset_for`) for every
//! epoch from 0 to one above the latest, must be equal.
//!
//! The planted bug is the model's former source: a re-election that records nothing until the
//! new leader's first batch. Kafka's `Partition` shows it wrong in one operation: re-elected at
//! epoch 2, Kafka's leader answers a fetcher's last fetched epoch 2 with `(2, LEO)` where the
//! unrecorded election has no answer (`-1 -1`: the fetcher hears "offset out of range"); with a
//! batch of an older epoch at its end, an epoch between that one and the new one is answered
//! with the older epoch's end by Kafka (a fetcher that copied that epoch elsewhere hears
//! "diverging") and not at all by the unrecorded election.

use kmirror_kernel::batch::LeaderBatch;
use kmirror_kernel::log::{LogView, PartitionLog};
use kmirror_kernel::mem_log::MemLog;
use kmirror_kernel::types::LeaderEpoch;
use kmirror_testsupport::jvm::Oracle;
use kmirror_testsupport::oracle_support::{scratch_dir, shrink, LineOracle, SplitMix64};

/// One operation on the partition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    /// A leader append of that many records at the current leader epoch.
    Append(u32),
    /// The leader re-elected at the next leader epoch.
    Elect,
}

impl Op {
    /// The oracle's request line, the partition being led at `epoch` once `self` ran.
    fn request(self, epoch: LeaderEpoch) -> String {
        match self {
            Op::Append(n) => format!("APPEND {n} 0"),
            Op::Elect => format!("ELECT {epoch}"),
        }
    }
}

/// How the kernel side records an election.
type Elect = fn(&mut MemLog, LeaderEpoch);

/// Kafka's rule, the model's: the new epoch starts at LEO at once.
fn record_at_log_end(log: &mut MemLog, epoch: LeaderEpoch) {
    let leo = log.log_end_offset();
    log.assign_epoch_start_offset(epoch, leo)
        .expect("a non-negative epoch and offset");
}

/// The planted bug: a re-election leaves the cache alone (the epoch appears with the new
/// leader's first batch).
fn record_nothing(_: &mut MemLog, _: LeaderEpoch) {}

/// The kernel side: a log led at `epoch`.
struct Kernel {
    log: MemLog,
    epoch: LeaderEpoch,
    elect: Elect,
}

impl Kernel {
    /// A new partition led at epoch 1 (the oracle's `RESET 1 0`: `makeLeader` at epoch 1),
    /// re-elected by `elect`.
    fn new(elect: Elect) -> Self {
        let mut log = MemLog::new();
        record_at_log_end(&mut log, 1);
        Kernel {
            log,
            epoch: 1,
            elect,
        }
    }

    fn apply(&mut self, op: Op) {
        match op {
            Op::Append(n) => {
                let batch = LeaderBatch::Records {
                    record_count: n,
                    producer: None,
                    transactional: false,
                };
                self.log
                    .append_as_leader(self.epoch, batch)
                    .expect("a plain append at the leader's epoch");
            }
            Op::Elect => {
                self.epoch += 1;
                (self.elect)(&mut self.log, self.epoch);
            }
        }
    }

    /// The answers compared after each operation: the cache, then `end_offset_for` of every
    /// epoch up to one above the current.
    fn answers(&self) -> Vec<String> {
        let cache = self
            .log
            .epoch_cache()
            .entries()
            .fold("ok".to_owned(), |acc, e| {
                format!("{acc} {}@{}", e.epoch, e.start_offset)
            });
        let leo = self.log.log_end_offset();
        let mut out = vec![cache];
        for e in 0..=self.epoch + 1 {
            let answer = self.log.epoch_cache().end_offset_for(e, leo);
            out.push(format!("ok {} {}", answer.epoch, answer.end_offset));
        }
        out
    }
}

/// Kafka's answers, in the order of [`Kernel::answers`].
fn kafka_answers(kafka: &mut LineOracle, epoch: LeaderEpoch) -> Vec<String> {
    let mut out = vec![kafka.ask("EPOCHS")];
    for e in 0..=epoch + 1 {
        out.push(kafka.ask(&format!("END_OFFSET_FOR {e}")));
    }
    out
}

/// Runs `ops` on both sides; the index of the first operation after which they differ.
fn first_difference(kafka: &mut LineOracle, elect: Elect, ops: &[Op]) -> Option<usize> {
    let reset = kafka.ask("RESET 1 0");
    assert!(reset.starts_with("ok"), "{reset}");
    let mut kernel = Kernel::new(elect);
    if kernel.answers() != kafka_answers(kafka, kernel.epoch) {
        return Some(0);
    }
    ops.iter().position(|&op| {
        kernel.apply(op);
        let answer = kafka.ask(&op.request(kernel.epoch));
        assert!(answer.starts_with("ok"), "{op:?}: {answer}");
        kernel.answers() != kafka_answers(kafka, kernel.epoch)
    })
}

/// Both sides' answers after every operation of `ops`, for a failure message.
fn report(kafka: &mut LineOracle, elect: Elect, ops: &[Op]) -> String {
    kafka.ask("RESET 1 0");
    let mut kernel = Kernel::new(elect);
    let mut out = String::new();
    for op in ops {
        kernel.apply(*op);
        let request = op.request(kernel.epoch);
        kafka.ask(&request);
        let (ours, theirs) = (kernel.answers(), kafka_answers(kafka, kernel.epoch));
        let mark = if ours == theirs { "  " } else { "!!" };
        out += &format!(
            "{mark} {request:<12} kernel: {ours:?}\n{:<16}kafka:  {theirs:?}\n",
            ""
        );
    }
    out
}

fn random_ops(rng: &mut SplitMix64) -> Vec<Op> {
    (0..1 + rng.below(12))
        .map(|_| {
            if rng.chance(35) {
                Op::Elect
            } else {
                Op::Append(rng.range(1, 3) as u32)
            }
        })
        .collect()
}

/// Runs `cases` random sequences through `elect` and Kafka; the shrunk first difference.
fn compare(kafka: &mut LineOracle, elect: Elect, cases: usize) -> Result<usize, Vec<Op>> {
    let mut rng = SplitMix64::new(0xE1EC7);
    let mut operations = 0;
    for _ in 0..cases {
        let ops = random_ops(&mut rng);
        operations += ops.len();
        if first_difference(kafka, elect, &ops).is_some() {
            return Err(shrink(&ops, |ops| first_difference(kafka, elect, ops)));
        }
    }
    Ok(operations)
}

/// A new leader records its epoch at LEO as Kafka's `Partition.makeLeader` does, and answers
/// every fetcher's last fetched epoch as Kafka's `lastOffsetForLeaderEpoch` does.
#[test]
#[ignore = "needs Java 17 and Maven; run with `-- --include-ignored oracle`"]
fn oracle_election_records_the_new_epoch_as_kafka() {
    let Some(oracle) = Oracle::for_tests("oracle_election_records_the_new_epoch_as_kafka") else {
        return;
    };
    let dir = scratch_dir();
    let mut kafka = LineOracle::start(&oracle, "dev.kmirror.oracle.PartitionOracle", &[dir.path()]);
    match compare(&mut kafka, record_at_log_end, 300) {
        Ok(operations) => eprintln!("300 sequences, {operations} operations agree with Kafka"),
        Err(shrunk) => panic!(
            "the kernel and Kafka's Partition differ:\n{}",
            report(&mut kafka, record_at_log_end, &shrunk)
        ),
    }
}

/// The comparison is not vacuous: a re-election that records nothing (the model's source
/// before) is caught, shrunk to the election alone.
#[test]
#[ignore = "needs Java 17 and Maven; run with `-- --include-ignored oracle`"]
fn oracle_election_catches_an_unrecorded_election() {
    let Some(oracle) = Oracle::for_tests("oracle_election_catches_an_unrecorded_election") else {
        return;
    };
    let dir = scratch_dir();
    let mut kafka = LineOracle::start(&oracle, "dev.kmirror.oracle.PartitionOracle", &[dir.path()]);
    let Err(shrunk) = compare(&mut kafka, record_nothing, 300) else {
        panic!("an election that records nothing went unnoticed");
    };
    let story = report(&mut kafka, record_nothing, &shrunk);
    eprintln!("{story}");
    assert_eq!(shrunk, [Op::Elect], "{story}");
}
