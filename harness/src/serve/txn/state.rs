//! One transactional id's metadata, as Kafka's `TransactionMetadata` keeps it: its producer id
//! and epoch, the state of its current transaction, the partitions and groups in it.

use std::collections::BTreeSet;

use kmirror_kernel::types::{ProducerEpoch, ProducerId};
use serde::{Deserialize, Serialize};

/// The state of a transactional id's transaction (Kafka's `TransactionState`, without Dead
/// and PrepareEpochFence: an epoch fence here is an abort at a bumped epoch).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum TxnState {
    /// No transaction open (a new id, or a producer epoch just bumped).
    Empty,
    /// Partitions or groups were added: a transaction is open.
    Ongoing,
    /// A commit was asked; its markers are being written.
    PrepareCommit,
    /// An abort was decided; its markers are being written.
    PrepareAbort,
    /// The last transaction committed.
    CompleteCommit,
    /// The last transaction aborted.
    CompleteAbort,
}

impl TxnState {
    /// Whether markers are being written (PrepareCommit, PrepareAbort): other requests are
    /// answered CONCURRENT_TRANSACTIONS until they are.
    pub fn preparing(self) -> bool {
        matches!(self, TxnState::PrepareCommit | TxnState::PrepareAbort)
    }
}

/// A partition of a transaction, by topic name.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct TxnPartition {
    /// The topic.
    pub topic: String,
    /// The partition.
    pub partition: i32,
}

/// A group offset committed in a transaction (TxnOffsetCommit), made visible by its commit.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct PendingOffset {
    /// The consumer group.
    pub group: String,
    /// The partition the offset is of.
    pub partition: TxnPartition,
    /// The committed offset.
    pub offset: i64,
}

/// What the coordinator keeps of one transactional id.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TxnMetadata {
    /// The producer id the transactional id has now.
    pub producer_id: ProducerId,
    /// Its current producer epoch.
    pub producer_epoch: ProducerEpoch,
    /// The epoch before the last bump (-1: none): a producer retrying InitProducerId with it
    /// gets the current epoch back (KIP-360).
    pub last_producer_epoch: ProducerEpoch,
    /// `transaction.timeout.ms` the producer asked for.
    pub timeout_ms: i32,
    /// The state of its transaction.
    pub state: TxnState,
    /// When the open transaction started (the node's clock, ms).
    pub start_ms: i64,
    /// The partitions of the open transaction.
    pub partitions: BTreeSet<TxnPartition>,
    /// The groups of the open transaction (AddOffsetsToTxn).
    pub groups: BTreeSet<String>,
    /// The group offsets of the open transaction (TxnOffsetCommit).
    pub pending_offsets: BTreeSet<PendingOffset>,
}

impl TxnMetadata {
    /// A new transactional id with `producer_id` at epoch 0, no transaction open.
    pub fn new(producer_id: ProducerId, timeout_ms: i32) -> Self {
        TxnMetadata {
            producer_id,
            producer_epoch: 0,
            last_producer_epoch: -1,
            timeout_ms,
            state: TxnState::Empty,
            start_ms: 0,
            partitions: BTreeSet::new(),
            groups: BTreeSet::new(),
            pending_offsets: BTreeSet::new(),
        }
    }

    /// Whether the open transaction has run past its timeout at `now_ms`.
    pub fn timed_out(&self, now_ms: i64) -> bool {
        self.state == TxnState::Ongoing
            && now_ms >= self.start_ms.saturating_add(i64::from(self.timeout_ms))
    }

    /// Moves to Ongoing (starting the transaction's clock when none was open).
    pub fn begin(&mut self, now_ms: i64) {
        if self.state != TxnState::Ongoing {
            self.state = TxnState::Ongoing;
            self.start_ms = now_ms;
        }
    }

    /// Sets the offset of `group` for `partition` (a later TxnOffsetCommit of the same
    /// partition replaces an earlier one).
    pub fn pend_offset(&mut self, group: &str, partition: TxnPartition, offset: i64) {
        self.pending_offsets
            .retain(|p| !(p.group == group && p.partition == partition));
        self.pending_offsets.insert(PendingOffset {
            group: group.to_owned(),
            partition,
            offset,
        });
    }
}
