//! A producer simulator: writes batches to the leader of a cluster directory's partition as
//! local Kafka clients would, through the produce gate.
//!
//! Operations ([`ProduceOp`], parsed from the `kmirror produce` arguments):
//!
//! | syntax | what is appended |
//! |---|---|
//! | `plain:N` | one batch of `N` records from a plain (non-idempotent) producer |
//! | `idem:PID:N` | one batch of `N` records from idempotent producer `PID` (next sequence) |
//! | `txn:PID:N` | one batch of `N` records in producer `PID`'s transaction (opened if needed) |
//! | `commit:PID` / `abort:PID` | the COMMIT / ABORT marker closing `PID`'s open transaction |
//! | `bump-epoch` | nothing: the controller gives the partition a new leader epoch (a leader election) |
//! | `unclean:OFFSET` | an unclean leader election: the leader's log loses everything from `OFFSET` on, then a new epoch |
//!
//! `PID` may carry a producer epoch as `PID/EPOCH` (default 0). Records are synthetic (see
//! [`RawBatch::synthesize`](crate::record_batch::RawBatch::synthesize)), stamped with the
//! timestamp the caller passes. Each data batch and marker first passes the produce gate: the
//! kernel's [`check_produce`] on the persisted mirror state, and, for a mirrored topic, the
//! leader's write permission (the kernel's `SetWritable`, persisted in `produce-gate`). After
//! every append the followers replicate until the high watermark reaches the log end offset.

use std::fmt;
use std::str::FromStr;

use kmirror_kernel::batch::{BatchHeader, ControlType, LeaderBatch, ProducerBatchInfo};
use kmirror_kernel::controller::{check_produce, ProduceError};
use kmirror_kernel::desired::DesiredState;
use kmirror_kernel::log::{LogView, PartitionLog};
use kmirror_kernel::types::{LeaderEpoch, Offset, ProducerEpoch, ProducerId, Sequence};
use serde::Serialize;

use crate::driver::{Cluster, DriverError, DEFAULT_MAX_FETCH_BATCHES};

/// Most replication rounds after one append (each round moves every follower forward).
const MAX_ROUNDS: usize = 1_000;

/// One producer operation. See the [module documentation](self) for the syntax.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum ProduceOp {
    /// A batch from a plain producer.
    Plain {
        /// Records in the batch.
        records: u32,
    },
    /// A batch from an idempotent producer.
    Idempotent {
        /// The producer id.
        producer_id: ProducerId,
        /// Its epoch.
        producer_epoch: ProducerEpoch,
        /// Records in the batch.
        records: u32,
    },
    /// A batch in a transaction.
    Transactional {
        /// The producer id.
        producer_id: ProducerId,
        /// Its epoch.
        producer_epoch: ProducerEpoch,
        /// Records in the batch.
        records: u32,
    },
    /// The COMMIT marker of an open transaction.
    Commit {
        /// The producer id.
        producer_id: ProducerId,
        /// Its epoch.
        producer_epoch: ProducerEpoch,
    },
    /// The ABORT marker of an open transaction.
    Abort {
        /// The producer id.
        producer_id: ProducerId,
        /// Its epoch.
        producer_epoch: ProducerEpoch,
    },
    /// A leader election: the partition gets a new leader epoch.
    BumpLeaderEpoch,
    /// An unclean leader election: the log is truncated to `offset`, then a new leader epoch.
    Unclean {
        /// The new log end offset.
        offset: Offset,
    },
}

impl fmt::Display for ProduceOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let pid = |p: ProducerId, e: ProducerEpoch| {
            if e == 0 {
                p.to_string()
            } else {
                format!("{p}/{e}")
            }
        };
        match *self {
            ProduceOp::Plain { records } => write!(f, "plain:{records}"),
            ProduceOp::Idempotent {
                producer_id,
                producer_epoch,
                records,
            } => write!(f, "idem:{}:{records}", pid(producer_id, producer_epoch)),
            ProduceOp::Transactional {
                producer_id,
                producer_epoch,
                records,
            } => write!(f, "txn:{}:{records}", pid(producer_id, producer_epoch)),
            ProduceOp::Commit {
                producer_id,
                producer_epoch,
            } => write!(f, "commit:{}", pid(producer_id, producer_epoch)),
            ProduceOp::Abort {
                producer_id,
                producer_epoch,
            } => write!(f, "abort:{}", pid(producer_id, producer_epoch)),
            ProduceOp::BumpLeaderEpoch => write!(f, "bump-epoch"),
            ProduceOp::Unclean { offset } => write!(f, "unclean:{offset}"),
        }
    }
}

impl FromStr for ProduceOp {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let usage = || {
            format!(
                "invalid produce operation {s:?}: use plain:N, idem:PID:N, txn:PID:N, commit:PID, \
                 abort:PID, bump-epoch or unclean:OFFSET (PID may be PID/EPOCH)"
            )
        };
        let parts: Vec<&str> = s.split(':').collect();
        let records = |t: &str| -> Result<u32, String> {
            t.parse::<u32>()
                .ok()
                .filter(|n| (1..=1_000_000).contains(n))
                .ok_or_else(|| format!("{s:?}: the record count {t:?} must be 1..=1000000"))
        };
        let producer = |t: &str| -> Result<(ProducerId, ProducerEpoch), String> {
            let (id, epoch) = t.split_once('/').unwrap_or((t, "0"));
            let id = id
                .parse::<ProducerId>()
                .ok()
                .filter(|n| *n >= 0)
                .ok_or_else(|| format!("{s:?}: producer id {id:?} must be a number >= 0"))?;
            let epoch = epoch
                .parse::<ProducerEpoch>()
                .ok()
                .filter(|n| *n >= 0)
                .ok_or_else(|| format!("{s:?}: producer epoch {epoch:?} must be 0..=32767"))?;
            Ok((id, epoch))
        };
        Ok(match parts[..] {
            ["plain", n] => ProduceOp::Plain {
                records: records(n)?,
            },
            ["idem", p, n] => {
                let (producer_id, producer_epoch) = producer(p)?;
                ProduceOp::Idempotent {
                    producer_id,
                    producer_epoch,
                    records: records(n)?,
                }
            }
            ["txn", p, n] => {
                let (producer_id, producer_epoch) = producer(p)?;
                ProduceOp::Transactional {
                    producer_id,
                    producer_epoch,
                    records: records(n)?,
                }
            }
            ["commit", p] => {
                let (producer_id, producer_epoch) = producer(p)?;
                ProduceOp::Commit {
                    producer_id,
                    producer_epoch,
                }
            }
            ["abort", p] => {
                let (producer_id, producer_epoch) = producer(p)?;
                ProduceOp::Abort {
                    producer_id,
                    producer_epoch,
                }
            }
            ["bump-epoch"] => ProduceOp::BumpLeaderEpoch,
            ["unclean", o] => ProduceOp::Unclean {
                offset: o
                    .parse::<Offset>()
                    .ok()
                    .filter(|n| *n >= 0)
                    .ok_or_else(usage)?,
            },
            _ => return Err(usage()),
        })
    }
}

/// What a [`produce`] call did.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ProduceReport {
    /// The batches appended, in order.
    pub appended: Vec<BatchHeader>,
    /// The leader epoch after the operations.
    pub leader_epoch: LeaderEpoch,
    /// The leader's log end offset after the operations.
    pub log_end_offset: Offset,
    /// The leader's high watermark after the operations.
    pub high_watermark: Offset,
    /// The leader's last stable offset after the operations.
    pub last_stable_offset: Offset,
}

/// Checks the produce gate of `cluster` (see the [module documentation](self)).
pub fn check_writable(cluster: &Cluster) -> Result<(), DriverError> {
    let config = cluster.dir.config();
    let state = cluster.mirror_state();
    check_produce(&config.catalogue(), &config.topic, state)?;
    let mirrored = !matches!(cluster.dir.desired_state()?, DesiredState::NotMirrored);
    if mirrored && !cluster.dir.writable() {
        return Err(ProduceError::ReadOnlyTopic {
            topic: config.topic.clone(),
            mirror_name: config.mirror_name.clone().unwrap_or_default(),
            state,
        }
        .into());
    }
    Ok(())
}

/// The sequence the next batch of `producer_id` at `producer_epoch` starts at.
fn next_sequence(
    cluster: &Cluster,
    producer_id: ProducerId,
    producer_epoch: ProducerEpoch,
) -> Sequence {
    match cluster.leader.producer_state().get(producer_id) {
        Some(e) if e.producer_epoch == producer_epoch => {
            let last = e.last_seq();
            if last < 0 || last == i32::MAX {
                0
            } else {
                last + 1
            }
        }
        _ => 0,
    }
}

/// Runs `ops` against the leader of `cluster`, stamping records with `timestamp_ms`, and
/// replicates each append to the followers.
pub fn produce(
    cluster: &mut Cluster,
    ops: &[ProduceOp],
    timestamp_ms: i64,
) -> Result<ProduceReport, DriverError> {
    let mut report = ProduceReport::default();
    for op in ops {
        let epoch = cluster.dir.controller().leader_epoch;
        let batch = match *op {
            ProduceOp::BumpLeaderEpoch => {
                cluster.dir.bump_leader_epoch(0)?;
                continue;
            }
            ProduceOp::Unclean { offset } => {
                let leo = cluster.leader.log_end_offset();
                if offset > leo {
                    return Err(DriverError::Invalid(format!(
                        "{op}: the log ends at {leo}; an unclean election can only lose data"
                    )));
                }
                let dir = cluster.leader.dir().to_path_buf();
                cluster
                    .leader
                    .truncate_to(offset)
                    .map_err(|source| DriverError::Log {
                        dir,
                        source: Box::new(source),
                    })?;
                cluster.leader_truncated();
                cluster.dir.bump_leader_epoch(0)?;
                cluster.replicate_until_in_sync(DEFAULT_MAX_FETCH_BATCHES, MAX_ROUNDS)?;
                continue;
            }
            ProduceOp::Plain { records } => LeaderBatch::Records {
                record_count: records,
                producer: None,
                transactional: false,
            },
            ProduceOp::Idempotent {
                producer_id,
                producer_epoch,
                records,
            }
            | ProduceOp::Transactional {
                producer_id,
                producer_epoch,
                records,
            } => LeaderBatch::Records {
                record_count: records,
                producer: Some(ProducerBatchInfo {
                    producer_id,
                    producer_epoch,
                    base_sequence: next_sequence(cluster, producer_id, producer_epoch),
                }),
                transactional: matches!(op, ProduceOp::Transactional { .. }),
            },
            ProduceOp::Commit {
                producer_id,
                producer_epoch,
            }
            | ProduceOp::Abort {
                producer_id,
                producer_epoch,
            } => {
                let open = cluster
                    .leader
                    .producer_state()
                    .get(producer_id)
                    .and_then(|e| e.current_txn_first_offset);
                if open.is_none() {
                    return Err(DriverError::Invalid(format!(
                        "{op}: producer {producer_id} has no open transaction on this partition \
                         (start one with txn:{producer_id}:N)"
                    )));
                }
                LeaderBatch::Control {
                    control: if matches!(op, ProduceOp::Commit { .. }) {
                        ControlType::Commit
                    } else {
                        ControlType::Abort
                    },
                    producer: Some((producer_id, producer_epoch)),
                }
            }
        };
        check_writable(cluster)?;
        let dir = cluster.leader.dir().to_path_buf();
        let header = cluster
            .leader
            .append_as_leader_at(epoch, batch, timestamp_ms)
            .map_err(|source| DriverError::Log {
                dir,
                source: Box::new(source),
            })?;
        report.appended.push(header);
        cluster.replicate_until_in_sync(DEFAULT_MAX_FETCH_BATCHES, MAX_ROUNDS)?;
    }
    report.leader_epoch = cluster.dir.controller().leader_epoch;
    report.log_end_offset = cluster.leader.log_end_offset();
    report.high_watermark = cluster.leader.high_watermark();
    report.last_stable_offset = cluster.leader.last_stable_offset();
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ops_parse_and_print() {
        for s in [
            "plain:3",
            "idem:5:2",
            "txn:7/2:1",
            "commit:7/2",
            "abort:8",
            "bump-epoch",
            "unclean:12",
        ] {
            let op: ProduceOp = s.parse().unwrap();
            assert_eq!(op.to_string(), s);
        }
        for bad in [
            "plain",
            "plain:0",
            "idem:x:1",
            "txn:1",
            "commit",
            "nope:1",
            "unclean:-1",
        ] {
            assert!(bad.parse::<ProduceOp>().is_err(), "{bad}");
        }
    }
}
