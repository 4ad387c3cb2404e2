//! EndTxn, and ending a transaction: the Prepare state written, the markers, the group
//! offsets of a commit, the Complete state written.

use std::collections::BTreeMap;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{EndTxnRequest, EndTxnResponse};
use kmirror_kernel::batch::ControlType;
use kmirror_kernel::sync::group_offsets::TopicPartition;

use super::super::group::GroupCoordinator;
use super::super::{ServeError, ServedNode};
use super::{code, markers, TxnCoordinator, TxnState};

/// The first EndTxn version that knows PRODUCER_FENCED.
const FENCED_SINCE: i16 = 2;

impl TxnCoordinator {
    /// EndTxn (v0-4): an Ongoing transaction commits or aborts, answered once its markers are
    /// written; a retry of the transaction's end is answered without error, the other end
    /// INVALID_TXN_STATE, as is an EndTxn with no transaction open.
    pub fn end_txn(
        &mut self,
        node: &mut dyn ServedNode,
        groups: &mut GroupCoordinator,
        request: &EndTxnRequest,
        version: i16,
    ) -> Result<EndTxnResponse, ServeError> {
        let id = request.transactional_id.0.as_str();
        let producer = (request.producer_id.0, request.producer_epoch);
        let commit = request.committed;
        let checked = self
            .check_producer(id, producer, version, FENCED_SINCE)
            .map(|t| t.state);
        let result = match checked {
            Err(e) => Err(e),
            Ok(TxnState::Ongoing) => {
                self.complete(id, commit, node, groups)?;
                Ok(())
            }
            Ok(TxnState::CompleteCommit) if commit => Ok(()),
            Ok(TxnState::CompleteAbort) if !commit => Ok(()),
            Ok(_) => Err(ResponseError::InvalidTxnState),
        };
        Ok(EndTxnResponse::default().with_error_code(code(result)))
    }

    /// Ends `id`'s transaction: PrepareCommit or PrepareAbort written (unless already), the
    /// markers written at its producer epoch, a commit's group offsets handed to `groups`,
    /// then CompleteCommit or CompleteAbort written, with no partition, group or offset left.
    /// While a partition that needs a marker is not writable (a node just opened, whose gates
    /// are not known yet, or a partition mirrored again and not yet truncated) the transaction
    /// stays in its Prepare state, for the next [`TxnCoordinator::poll`] to go on.
    pub(super) fn complete(
        &mut self,
        id: &str,
        commit: bool,
        node: &mut dyn ServedNode,
        groups: &mut GroupCoordinator,
    ) -> Result<(), ServeError> {
        let Some(mut txn) = self.txns.get(id).cloned() else {
            return Ok(());
        };
        let (prepare, done, control) = if commit {
            (
                TxnState::PrepareCommit,
                TxnState::CompleteCommit,
                ControlType::Commit,
            )
        } else {
            (
                TxnState::PrepareAbort,
                TxnState::CompleteAbort,
                ControlType::Abort,
            )
        };
        if txn.state != prepare {
            txn.state = prepare;
            self.put(id, txn.clone())?;
        }
        if markers::write(node, &txn, control)? > 0 {
            return Ok(());
        }
        if commit {
            let mut by_group: BTreeMap<&str, BTreeMap<TopicPartition, i64>> = BTreeMap::new();
            for p in &txn.pending_offsets {
                by_group.entry(p.group.as_str()).or_default().insert(
                    TopicPartition::new(p.partition.topic.clone(), p.partition.partition),
                    p.offset,
                );
            }
            for (group, offsets) in by_group {
                groups.commit_offsets(group, offsets)?;
            }
        }
        txn.state = done;
        txn.partitions.clear();
        txn.groups.clear();
        txn.pending_offsets.clear();
        self.put(id, txn)
    }

    /// Aborts `id`'s Ongoing transaction at a bumped producer epoch (Kafka's epoch fence):
    /// the producer that opened it is fenced, and must InitProducerId again. At the last
    /// epoch the epoch stays (the next InitProducerId gives a new producer id).
    pub(super) fn fence_and_abort(
        &mut self,
        id: &str,
        node: &mut dyn ServedNode,
        groups: &mut GroupCoordinator,
    ) -> Result<(), ServeError> {
        let Some(mut txn) = self.txns.get(id).cloned() else {
            return Ok(());
        };
        if txn.producer_epoch < i16::MAX {
            txn.last_producer_epoch = txn.producer_epoch;
            txn.producer_epoch += 1;
        }
        txn.state = TxnState::PrepareAbort;
        self.put(id, txn)?;
        self.complete(id, false, node, groups)
    }
}
