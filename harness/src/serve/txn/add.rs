//! AddPartitionsToTxn (v0-3, a producer adding its own partitions) and AddOffsetsToTxn: what
//! joins the open transaction (and starts it).

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::add_partitions_to_txn_response::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnTopicResult,
};
use kafka_protocol::messages::{
    AddOffsetsToTxnRequest, AddOffsetsToTxnResponse, AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
};

use super::super::broker::partition_key;
use super::super::{ServeError, ServedNode};
use super::{code, TxnCoordinator, TxnPartition};

/// The first AddPartitionsToTxn and AddOffsetsToTxn version that knows PRODUCER_FENCED.
const FENCED_SINCE: i16 = 2;

impl TxnCoordinator {
    /// AddPartitionsToTxn v0-3: the producer's checks first (one error for every partition);
    /// then a partition the node does not have is UNKNOWN_TOPIC_OR_PARTITION, one that is not
    /// writable READ_ONLY_TOPIC, and the others OPERATION_NOT_ATTEMPTED when any is refused;
    /// else all join the transaction, durably, before the answer.
    pub fn add_partitions(
        &mut self,
        now_ms: i64,
        node: &dyn ServedNode,
        request: &AddPartitionsToTxnRequest,
        version: i16,
    ) -> Result<AddPartitionsToTxnResponse, ServeError> {
        let id = request.v3_and_below_transactional_id.0.as_str();
        let producer = (
            request.v3_and_below_producer_id.0,
            request.v3_and_below_producer_epoch,
        );
        let asked: Vec<(&kafka_protocol::messages::TopicName, &[i32])> = request
            .v3_and_below_topics
            .iter()
            .map(|t| (&t.name, t.partitions.as_slice()))
            .collect();
        let partition_error = |topic: &str, p: i32| match partition_key(node, topic, p) {
            None => Some(ResponseError::UnknownTopicOrPartition),
            Some(k) if !node.writable(&k) => Some(ResponseError::Unknown(
                super::super::produce::READ_ONLY_TOPIC,
            )),
            Some(_) => None,
        };
        let errors: Vec<Vec<Result<(), ResponseError>>> =
            match self.check_producer(id, producer, version, FENCED_SINCE) {
                Err(e) => asked.iter().map(|(_, ps)| vec![Err(e); ps.len()]).collect(),
                Ok(_) => {
                    let each: Vec<Vec<Option<ResponseError>>> = asked
                        .iter()
                        .map(|(t, ps)| {
                            ps.iter()
                                .map(|p| partition_error(t.0.as_str(), *p))
                                .collect()
                        })
                        .collect();
                    let refused = each.iter().flatten().any(Option::is_some);
                    let not_attempted = |e: Option<ResponseError>| match e {
                        Some(e) => Err(e),
                        None if refused => Err(ResponseError::OperationNotAttempted),
                        None => Ok(()),
                    };
                    each.into_iter()
                        .map(|ps| ps.into_iter().map(not_attempted).collect())
                        .collect()
                }
            };
        let all_ok = errors.iter().flatten().all(Result::is_ok);
        if all_ok {
            if let Some(mut txn) = self.txns.get(id).cloned() {
                for (t, ps) in &asked {
                    for p in *ps {
                        txn.partitions.insert(TxnPartition {
                            topic: t.0.to_string(),
                            partition: *p,
                        });
                    }
                }
                txn.begin(now_ms);
                self.put(id, txn)?;
            }
        }
        let mut response = AddPartitionsToTxnResponse::default();
        response.results_by_topic_v3_and_below = asked
            .iter()
            .zip(errors)
            .map(|((name, ps), errs)| {
                AddPartitionsToTxnTopicResult::default()
                    .with_name((*name).clone())
                    .with_results_by_partition(
                        ps.iter()
                            .zip(errs)
                            .map(|(p, e)| {
                                AddPartitionsToTxnPartitionResult::default()
                                    .with_partition_index(*p)
                                    .with_partition_error_code(code(e))
                            })
                            .collect(),
                    )
            })
            .collect();
        Ok(response)
    }

    /// AddOffsetsToTxn: the group joins the transaction (its TxnOffsetCommits may follow),
    /// after the producer's checks.
    pub fn add_offsets(
        &mut self,
        now_ms: i64,
        request: &AddOffsetsToTxnRequest,
        version: i16,
    ) -> Result<AddOffsetsToTxnResponse, ServeError> {
        let id = request.transactional_id.0.as_str();
        let producer = (request.producer_id.0, request.producer_epoch);
        let result = match self.check_producer(id, producer, version, FENCED_SINCE) {
            Err(e) => Err(e),
            Ok(txn) => {
                let mut txn = txn.clone();
                txn.groups.insert(request.group_id.0.to_string());
                txn.begin(now_ms);
                self.put(id, txn)?;
                Ok(())
            }
        };
        Ok(AddOffsetsToTxnResponse::default().with_error_code(code(result)))
    }
}
