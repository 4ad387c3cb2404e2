//! TxnOffsetCommit: a transaction's group offsets, kept pending in the transaction until it
//! ends (a commit hands them to the group coordinator, an abort drops them).

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::txn_offset_commit_response::{
    TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use kafka_protocol::messages::{TxnOffsetCommitRequest, TxnOffsetCommitResponse};

use super::super::broker::partition_key;
use super::super::{ServeError, ServedNode};
use super::{code, TxnCoordinator, TxnPartition};

/// The first TxnOffsetCommit version that knows PRODUCER_FENCED.
const FENCED_SINCE: i16 = 3;

impl TxnCoordinator {
    /// TxnOffsetCommit (v0-4): after the producer's checks, a group that did not join the
    /// transaction (AddOffsetsToTxn) is INVALID_TXN_STATE; a partition the node does not
    /// have UNKNOWN_TOPIC_OR_PARTITION; the other offsets are kept pending, durably. The
    /// group's generation and member are not checked.
    pub fn txn_offset_commit(
        &mut self,
        node: &dyn ServedNode,
        request: &TxnOffsetCommitRequest,
        version: i16,
    ) -> Result<TxnOffsetCommitResponse, ServeError> {
        let id = request.transactional_id.0.as_str();
        let group = request.group_id.0.as_str();
        let producer = (request.producer_id.0, request.producer_epoch);
        let checked = self
            .check_producer(id, producer, version, FENCED_SINCE)
            .and_then(|t| {
                if t.groups.contains(group) {
                    Ok(t.clone())
                } else {
                    Err(ResponseError::InvalidTxnState)
                }
            });
        let mut pending = checked.as_ref().ok().cloned();
        let mut response = TxnOffsetCommitResponse::default();
        for t in &request.topics {
            let mut out = TxnOffsetCommitResponseTopic::default().with_name(t.name.clone());
            for p in &t.partitions {
                let result = match &checked {
                    Err(e) => Err(*e),
                    Ok(_) if partition_key(node, &t.name.0, p.partition_index).is_none() => {
                        Err(ResponseError::UnknownTopicOrPartition)
                    }
                    Ok(_) => {
                        let partition = TxnPartition {
                            topic: t.name.0.to_string(),
                            partition: p.partition_index,
                        };
                        if let Some(txn) = pending.as_mut() {
                            txn.pend_offset(group, partition, p.committed_offset);
                        }
                        Ok(())
                    }
                };
                out.partitions.push(
                    TxnOffsetCommitResponsePartition::default()
                        .with_partition_index(p.partition_index)
                        .with_error_code(code(result)),
                );
            }
            response.topics.push(out);
        }
        if let Some(txn) = pending {
            self.put(id, txn)?;
        }
        Ok(response)
    }
}
