//! InitProducerId with a transactional id: a new producer id at epoch 0 for a new id, the
//! same producer id at the next epoch for a known one (its open transaction aborted first).

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{InitProducerIdRequest, InitProducerIdResponse, ProducerId};

use super::super::group::GroupCoordinator;
use super::super::produce::ProducerIds;
use super::super::{ServeError, ServedNode};
use super::{fenced, TxnCoordinator, TxnMetadata, TxnState, MAX_TIMEOUT_MS};

/// The first InitProducerId version that knows PRODUCER_FENCED.
const FENCED_SINCE: i16 = 4;

impl TxnCoordinator {
    /// InitProducerId for `request.transactional_id` (which must be set), Kafka's
    /// `handleInitProducerId`: an empty id is INVALID_REQUEST, a timeout outside
    /// 1..=[`MAX_TIMEOUT_MS`] INVALID_TRANSACTION_TIMEOUT; markers being written:
    /// CONCURRENT_TRANSACTIONS. A known id's producer (v3+ names its producer id and epoch,
    /// KIP-360) must be the id's current one, at its current epoch (bumped) or the epoch
    /// before the last bump (a retry: the current epoch answered again), else PRODUCER_FENCED.
    /// An open transaction is aborted at a fencing epoch before the epoch is bumped again; an
    /// exhausted epoch takes a new producer id at epoch 0.
    pub fn init_producer_id(
        &mut self,
        node: &mut dyn ServedNode,
        groups: &mut GroupCoordinator,
        ids: &mut ProducerIds,
        request: &InitProducerIdRequest,
        version: i16,
    ) -> Result<InitProducerIdResponse, ServeError> {
        let refused = |e: ResponseError| {
            InitProducerIdResponse::default()
                .with_error_code(e.code())
                .with_producer_id(ProducerId(-1))
                .with_producer_epoch(-1)
        };
        let id = request
            .transactional_id
            .as_ref()
            .map_or("", |t| t.0.as_str());
        if id.is_empty() {
            return Ok(refused(ResponseError::InvalidRequest));
        }
        let timeout_ms = request.transaction_timeout_ms;
        if !(1..=MAX_TIMEOUT_MS).contains(&timeout_ms) {
            return Ok(refused(ResponseError::InvalidTransactionTimeout));
        }
        let asked = (request.producer_id.0, request.producer_epoch);
        let next = match self.txns.get(id).cloned() {
            None => TxnMetadata::new(ids.next(node)?, timeout_ms),
            Some(t) if t.state.preparing() => {
                return Ok(refused(ResponseError::ConcurrentTransactions))
            }
            Some(t) if asked.0 >= 0 && asked.0 != t.producer_id => {
                return Ok(refused(fenced(version, FENCED_SINCE)))
            }
            Some(t)
                if asked.0 >= 0
                    && asked.1 == t.last_producer_epoch
                    && t.state != TxnState::Ongoing =>
            {
                // A retry of the bump that answered `t.producer_epoch`.
                t
            }
            Some(t) if asked.0 >= 0 && asked.1 != t.producer_epoch => {
                return Ok(refused(fenced(version, FENCED_SINCE)))
            }
            Some(mut t) => {
                if t.state == TxnState::Ongoing {
                    self.fence_and_abort(id, node, groups)?;
                    t = self.txns.get(id).cloned().unwrap_or(t);
                    if t.state.preparing() {
                        // A partition waits for its marker (see `complete`).
                        return Ok(refused(ResponseError::ConcurrentTransactions));
                    }
                }
                bumped(t, timeout_ms, ids, node)?
            }
        };
        let answer = InitProducerIdResponse::default()
            .with_producer_id(ProducerId(next.producer_id))
            .with_producer_epoch(next.producer_epoch);
        self.put(id, next)?;
        Ok(answer)
    }
}

/// `t` at the next producer epoch with no transaction open, or with a new producer id at
/// epoch 0 when the epoch is exhausted (Kafka keeps `Short.MAX_VALUE` for fencing).
fn bumped(
    mut t: TxnMetadata,
    timeout_ms: i32,
    ids: &mut ProducerIds,
    node: &dyn ServedNode,
) -> Result<TxnMetadata, ServeError> {
    if t.producer_epoch >= i16::MAX - 1 {
        return Ok(TxnMetadata::new(ids.next(node)?, timeout_ms));
    }
    t.last_producer_epoch = t.producer_epoch;
    t.producer_epoch += 1;
    t.timeout_ms = timeout_ms;
    t.state = TxnState::Empty;
    Ok(t)
}
