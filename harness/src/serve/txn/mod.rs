//! The transaction coordinator of `kmirror serve`: InitProducerId with a transactional id,
//! AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit and EndTxn, as Apache Kafka's
//! `TransactionCoordinator` answers a producer of transaction version 1 (the node does not
//! advertise the `transaction.version` feature, so Kafka's clients add partitions themselves
//! and end transactions with EndTxn v4 or older).
//!
//! # Contract
//!
//! - **One coordinator, one leader.** The node coordinates every transactional id
//!   (FindCoordinator key type 1 names it) and leads every partition, so EndTxn writes its
//!   markers itself, at once: it answers when the transaction is complete. Only writable
//!   partitions (the kernel's gate open: STOPPED, or not mirrored) can join a transaction
//!   (`READ_ONLY_TOPIC` otherwise).
//! - **State before markers.** [`TxnCoordinator`] keeps each transactional id's
//!   [`TxnMetadata`] in `<dest>/metadata/transactions/transactions.json` ([`store`]), written
//!   before it is answered; EndTxn writes PrepareCommit or PrepareAbort before the first
//!   marker and the Complete state after the last. The markers are idempotent per partition
//!   (`markers::write`): a node stopped between the two completes the transaction on its
//!   first [`TxnCoordinator::poll`] that finds the partitions writable, writing the markers
//!   missing. Until then the transactional id answers CONCURRENT_TRANSACTIONS.
//! - **Aborts.** A transaction found Ongoing when the node opens (its producer's process is
//!   gone with the old node), one past its `transaction.timeout.ms`, and one a partition of
//!   which is no longer writable (mirrored again) are aborted on the next poll: the producer
//!   epoch is bumped (fencing the producer, which must InitProducerId again) and ABORT
//!   markers are written to the partitions writable. A partition mirrored again gets no
//!   marker: the mirror owns it, and the failback that starts its mirroring truncates it to
//!   the last mirrored offset, which closes the transaction there (its records are gone);
//!   until then the transaction stays PrepareAbort.
//! - **Failures.** A failed write of the coordinator's file or of a marker is the node's error
//!   ([`ServeError`]), as a failed Produce write is: the call is not answered (its connection
//!   closes) and nothing in memory changed that the file does not say.
//! - **Group offsets.** TxnOffsetCommit keeps the offsets in the transaction (and its file);
//!   a commit hands them to the group coordinator ([`GroupCoordinator::commit_offsets`]), an
//!   abort drops them. Until then an OffsetFetch with `require_stable` gets
//!   UNSTABLE_OFFSET_COMMIT for them ([`TxnCoordinator::mark_unstable`]).
//!
//! # What differs from Kafka
//!
//! - A marker is written only to a partition where the producer has records in the open
//!   transaction (Kafka writes one to every partition added).
//! - TxnOffsetCommit does not check the group's generation or member.
//! - InitProducerId bumping an Ongoing transaction's producer aborts it and answers the
//!   new epoch at once (Kafka answers CONCURRENT_TRANSACTIONS until the abort completes).
//! - No transactional id expiration (`transactional.id.expiration.ms`), no
//!   DescribeTransactions or ListTransactions, no transaction version 2.

mod add;
mod end;
mod init;
mod markers;
mod offsets;
pub mod state;
pub mod store;
#[cfg(test)]
pub(crate) mod tests;
mod unstable;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use kafka_protocol::error::ResponseError;
use kmirror_kernel::types::{ProducerEpoch, ProducerId};

use super::group::GroupCoordinator;
use super::ServeError;

pub use state::{PendingOffset, TxnMetadata, TxnPartition, TxnState};
pub use store::TxnStore;

/// Kafka's `transaction.max.timeout.ms` default: the longest timeout a producer may ask.
pub const MAX_TIMEOUT_MS: i32 = 900_000;

/// What the coordinator cannot answer for: its file.
#[derive(Debug, thiserror::Error)]
pub enum TxnError {
    /// The file cannot be read or written.
    #[error("transaction state {}: {reason}", path.display())]
    Store {
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// The file does not parse.
    #[error("transaction state {} does not parse: {reason}", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
}

/// The transaction coordinator of one node. See the [module documentation](self).
#[derive(Debug)]
pub struct TxnCoordinator {
    store: TxnStore,
    txns: BTreeMap<String, TxnMetadata>,
    /// Transactional ids found Ongoing on open, aborted by the first poll.
    orphaned: BTreeSet<String>,
}

impl TxnCoordinator {
    /// The coordinator of the destination at `root`, with the state its file keeps.
    pub fn open(root: &Path) -> Result<Self, TxnError> {
        let store = TxnStore::of(root);
        let txns = store.load()?;
        let orphaned = txns
            .iter()
            .filter(|(_, t)| t.state == TxnState::Ongoing)
            .map(|(id, _)| id.clone())
            .collect();
        Ok(TxnCoordinator {
            store,
            txns,
            orphaned,
        })
    }

    /// The metadata of `transactional_id`, if it is known.
    pub fn get(&self, transactional_id: &str) -> Option<&TxnMetadata> {
        self.txns.get(transactional_id)
    }

    /// When the first open transaction times out (`None`: none open). The rest of
    /// [`Self::poll`]'s work (transactions left in a Prepare state, orphaned ones, gates that
    /// closed) is done at the node's next poll, whenever that is.
    pub fn next_deadline_ms(&self) -> Option<i64> {
        self.txns
            .values()
            .filter(|t| t.state == TxnState::Ongoing)
            .map(|t| t.start_ms.saturating_add(i64::from(t.timeout_ms)))
            .min()
    }

    /// Sets `transactional_id`'s metadata to `next`, durably: the file is written first, and
    /// on failure nothing changes.
    fn put(&mut self, transactional_id: &str, next: TxnMetadata) -> Result<(), ServeError> {
        let mut all = self.txns.clone();
        all.insert(transactional_id.to_owned(), next);
        self.store.save(&all)?;
        self.txns = all;
        Ok(())
    }

    /// Kafka's checks of a producer's request against its transactional id: unknown id or
    /// another producer id: INVALID_PRODUCER_ID_MAPPING; another epoch: PRODUCER_FENCED
    /// (INVALID_PRODUCER_EPOCH below `fenced_since`, the API's first version that knows it);
    /// markers being written: CONCURRENT_TRANSACTIONS.
    fn check_producer(
        &self,
        transactional_id: &str,
        producer: (ProducerId, ProducerEpoch),
        version: i16,
        fenced_since: i16,
    ) -> Result<&TxnMetadata, ResponseError> {
        let txn = self
            .txns
            .get(transactional_id)
            .filter(|t| t.producer_id == producer.0)
            .ok_or(ResponseError::InvalidProducerIdMapping)?;
        if txn.producer_epoch != producer.1 {
            return Err(fenced(version, fenced_since));
        }
        if txn.state.preparing() {
            return Err(ResponseError::ConcurrentTransactions);
        }
        Ok(txn)
    }

    /// The transactions the next [`Self::poll`] must complete or abort at `now_ms`, in order:
    /// Prepare* ones (recovered), then Ongoing ones orphaned, timed out, or with a partition
    /// that `writable` refuses.
    fn due(&self, now_ms: i64, writable: &dyn Fn(&TxnPartition) -> bool) -> Vec<(String, bool)> {
        let mut due = Vec::new();
        for (id, t) in &self.txns {
            match t.state {
                TxnState::PrepareCommit => due.push((id.clone(), true)),
                TxnState::PrepareAbort => due.push((id.clone(), false)),
                TxnState::Ongoing
                    if self.orphaned.contains(id)
                        || t.timed_out(now_ms)
                        || !t.partitions.iter().all(writable) =>
                {
                    due.push((id.clone(), false));
                }
                _ => {}
            }
        }
        due
    }

    /// Completes the transactions recovered in a Prepare state, and aborts (at a bumped
    /// epoch) those found Ongoing on open, past their timeout, or with a partition no longer
    /// writable. `groups` takes a commit's offsets.
    pub fn poll(
        &mut self,
        now_ms: i64,
        node: &mut dyn super::ServedNode,
        groups: &mut GroupCoordinator,
    ) -> Result<(), ServeError> {
        let writable = |p: &TxnPartition| {
            super::broker::partition_key(node, &p.topic, p.partition)
                .is_none_or(|k| node.writable(&k))
        };
        let due = self.due(now_ms, &writable);
        for (id, commit) in due {
            let Some(txn) = self.txns.get(&id) else {
                continue;
            };
            if txn.state == TxnState::Ongoing {
                eprintln!(
                    "serve: aborting transaction of {id:?} (producer {}, epoch {})",
                    txn.producer_id, txn.producer_epoch
                );
                self.fence_and_abort(&id, node, groups)?;
            } else {
                self.complete(&id, commit, node, groups)?;
            }
        }
        // Every orphan was due in this poll: aborted now, or left PrepareAbort for later.
        self.orphaned.clear();
        Ok(())
    }
}

/// PRODUCER_FENCED, or INVALID_PRODUCER_EPOCH at a version below `since` (KIP-588).
fn fenced(version: i16, since: i16) -> ResponseError {
    if version >= since {
        ResponseError::ProducerFenced
    } else {
        ResponseError::InvalidProducerEpoch
    }
}

/// The error code of an answer (0: none).
fn code(result: Result<(), ResponseError>) -> i16 {
    result.err().map_or(0, |e| e.code())
}
