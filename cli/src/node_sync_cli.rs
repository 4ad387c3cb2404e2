//! `kmirror mirror --topics LIST --sync-interval-ms MS`: the metadata sync inside the mirroring
//! process ([`NodeSync`]), a round between the driver's steps whenever one is due, so a mirror
//! and its sync no longer exclude each other through the destination's lock.
//!
//! A round that wrote or refused something, or whose rejections changed, is printed; a source
//! that cannot be reached skips the round (the next interval asks again); any other error
//! (a destination metadata file that does not parse) stops the sync for the rest of the run,
//! mirroring goes on, and the run's exit code is 2.

use std::sync::Arc;

use kmirror_harness::node::{NodeDriver, NodeSync, NodeSyncReport};
use kmirror_harness::sync::SyncError;
use kmirror_harness::wire::{KafkaMetadataSource, MetadataSourceOptions, SecurityConfig};

use crate::sync_cli::SyncPolicyArgs;

/// The sync of one mirroring run.
pub struct InProcessSync {
    sync: NodeSync,
    source: KafkaMetadataSource,
    rounds: u64,
    last_rejected: Vec<String>,
    failure: Option<String>,
}

impl InProcessSync {
    /// A sync every `interval_ms` from the cluster at `bootstrap`; `topic` is one of the
    /// mirrored topics (where the source's brokers are asked for).
    pub fn new(
        interval_ms: u64,
        policy: &SyncPolicyArgs,
        bootstrap: &str,
        topic: &str,
        security: &Arc<SecurityConfig>,
    ) -> Result<Self, String> {
        let policy = policy.node_policy().map_err(|e| e.to_string())?;
        Ok(InProcessSync {
            sync: NodeSync::new(policy, interval_ms),
            source: KafkaMetadataSource::new(bootstrap, topic, MetadataSourceOptions::default())
                .with_security(security.clone()),
            rounds: 0,
            last_rejected: Vec::new(),
            failure: None,
        })
    }

    /// A round if one is due at `now_ms`; the text to print, if any.
    pub fn step(&mut self, driver: &NodeDriver, now_ms: i64) -> Option<String> {
        if self.failure.is_some() {
            return None;
        }
        let outcome = self.sync.round_if_due(driver, &mut self.source, now_ms)?;
        self.outcome(outcome)
    }

    /// A last round, due or not (the end of an `--until-caught-up` run).
    pub fn final_round(&mut self, driver: &NodeDriver) -> Option<String> {
        if self.failure.is_some() {
            return None;
        }
        let outcome = self.sync.round(driver, &mut self.source);
        self.outcome(outcome)
    }

    /// Why the sync stopped during the run, if it did.
    pub fn failure(&self) -> Option<&str> {
        self.failure.as_deref()
    }

    fn outcome(&mut self, outcome: Result<NodeSyncReport, SyncError>) -> Option<String> {
        self.rounds += 1;
        match outcome {
            Ok(report) => {
                let rejected: Vec<String> =
                    report.rejected.iter().map(|r| r.message.clone()).collect();
                let changed = rejected != self.last_rejected;
                self.last_rejected = rejected;
                (self.rounds == 1 || report.written() > 0 || report.refused() > 0 || changed)
                    .then(|| format!("sync round {}: {}", self.rounds, report.render()))
            }
            Err(e @ SyncError::SourceUnavailable { .. }) => {
                Some(format!("sync round {}: {e}; round skipped\n", self.rounds))
            }
            Err(e) => {
                let message = format!("sync stopped: {e}; mirroring goes on");
                self.failure = Some(message.clone());
                Some(format!("kmirror: {message}\n"))
            }
        }
    }
}
