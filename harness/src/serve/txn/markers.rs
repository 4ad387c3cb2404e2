//! Writing a transaction's COMMIT or ABORT markers to its partitions, as their leader.

use kmirror_kernel::batch::ControlType;
use kmirror_kernel::log::LogView;

use crate::error::FileLogError;

use super::super::broker::{leader_epoch, partition_key, ServedNode};
use super::super::ServeError;
use super::state::TxnMetadata;

/// Writes `control` at `txn`'s producer id and epoch to each of its partitions where its
/// producer has a transaction open; returns how many such partitions are not writable now
/// (none written: the caller keeps the transaction in its Prepare state and tries again).
/// Idempotent: a partition whose producer state shows the transaction closed (its marker
/// already written, no record of the transaction written there, or the records truncated
/// away, as a failback does to a partition mirrored again) gets none. A partition that is gone
/// (its topic deleted) gets none either, nor one whose log refuses the marker (a newer
/// producer epoch there), with a line that says so. A disk failure is the node's error.
pub(super) fn write(
    node: &mut dyn ServedNode,
    txn: &TxnMetadata,
    control: ControlType,
) -> Result<usize, ServeError> {
    let mut waiting = 0;
    let producer = (txn.producer_id, txn.producer_epoch);
    for p in &txn.partitions {
        let Some(key) = partition_key(node, &p.topic, p.partition) else {
            continue;
        };
        let open = node
            .log(&key)
            .and_then(|l| l.mem_log().producer_state().get(txn.producer_id))
            .is_some_and(|e| e.current_txn_first_offset.is_some());
        if !open {
            continue;
        }
        if !node.writable(&key) {
            waiting += 1;
            continue;
        }
        let epoch = leader_epoch(node, &p.topic, &key);
        match node.append_marker(&key, epoch, producer, control) {
            Ok(_) => {}
            Err(ServeError::Log { source, .. }) if matches!(*source, FileLogError::Log(_)) => {
                eprintln!(
                    "serve: no {control:?} marker of producer {} on {}-{}: {source}",
                    txn.producer_id, p.topic, p.partition
                );
            }
            Err(e) => return Err(e),
        }
    }
    Ok(waiting)
}
