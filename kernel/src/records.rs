//! The records of `__mirror_state`: keys, values, their versioned binary encoding and the
//! partitioner that places a key in a `__mirror_state` partition.

use serde::{Deserialize, Serialize};

use crate::state::MirrorState;
use crate::types::{LeaderEpoch, Offset, StateEpoch};

/// `MirrorPartitionStateValue`: where a mirrored partition is, as persisted.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize)]
pub struct MirrorPartitionStateValue {
    /// The mirror state.
    pub state: MirrorState,
    /// The leader epoch of the partition leader that wrote the record (fences older leaders).
    pub leader_epoch: LeaderEpoch,
    /// How many writes of this key were accepted; assigned by the coordinator.
    pub state_epoch: StateEpoch,
    /// Why the partition FAILED, when it did.
    pub error_message: Option<String>,
    /// How many retries of the failed step were attempted.
    pub retry_attempt: u32,
    /// For FAILED: the state to retry. Otherwise the state this one was entered from.
    pub previous_state: Option<MirrorState>,
}

/// `LastMirroredEpochsValue`: the last epoch (and its end offset) mirrored before a stop.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize)]
pub struct LastMirroredEpochsValue {
    /// The LME: the greatest leader epoch both clusters share, or `None` if nothing was mirrored.
    pub last_mirrored_epoch: Option<LeaderEpoch>,
    /// The end offset of that epoch in the log that stopped.
    pub last_mirrored_offset: Offset,
}
