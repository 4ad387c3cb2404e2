//! The journal of a trace is complete: replaying its log operations on fresh in-memory logs
//! (what the harness does on disk) reproduces every replica's log at every step.

use kmirror_kernel::apply::apply_log_effect;
use kmirror_kernel::log::{LogView, PartitionLog};
use kmirror_kernel::mem_log::MemLog;
use kmirror_model::journal::{Event, LogOp};
use kmirror_model::runner::{check, RunOptions};
use kmirror_model::world::ClusterId;
use kmirror_model::ModelConfig;

#[test]
fn replaying_the_journal_reproduces_every_log() {
    let report = check(&ModelConfig::tiny(), &RunOptions::default());
    let mut replayed = 0;
    for property in [
        "failback_completes",
        "divergence_truncation",
        "failover_with_open_transaction",
    ] {
        let trace = report
            .properties
            .iter()
            .find(|p| p.name == property)
            .and_then(|p| p.trace.clone())
            .unwrap_or_else(|| panic!("{property} has an example"));
        let steps = trace.journal().expect("the trace replays");
        let replicas = trace.config.replicas as usize;
        let mut logs = vec![vec![MemLog::new(); replicas]; 2];
        for step in &steps {
            for event in &step.events {
                let Event::Log {
                    cluster,
                    broker,
                    op,
                } = event
                else {
                    continue;
                };
                let log = &mut logs[cluster.index()][*broker as usize];
                let result = match op {
                    LogOp::Effect { effect, fetched } => apply_log_effect(log, effect, fetched),
                    LogOp::AppendAsLeader { epoch, batch } => {
                        log.append_as_leader(*epoch, *batch).map(drop)
                    }
                    LogOp::AppendAsFollower { batches } => log.append_as_follower(batches),
                    LogOp::TruncateTo { offset } => log.truncate_to(*offset),
                    LogOp::TruncateFullyAndStartAt { offset } => {
                        log.truncate_fully_and_start_at(*offset)
                    }
                    LogOp::AdvanceHighWatermark { offset } => log.advance_high_watermark(*offset),
                    LogOp::AssignEpochStartOffset { epoch, offset } => {
                        log.assign_epoch_start_offset(*epoch, *offset)
                    }
                };
                result.expect("a journalled operation applies");
            }
            for c in ClusterId::BOTH {
                for (b, replica) in step.world.cluster(c).replicas.iter().enumerate() {
                    let ours = &logs[c.index()][b];
                    assert_eq!(ours.batches(), replica.log.batches(), "{property}: {c}/{b}");
                    assert_eq!(ours.high_watermark(), replica.log.high_watermark());
                    assert_eq!(ours.epoch_cache(), replica.log.epoch_cache());
                }
            }
        }
        replayed += steps.len();
    }
    assert!(replayed > 30, "the traces exercise the journal");
}
