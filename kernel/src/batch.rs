//! Record batches as the log operations see them: the header of a Kafka v2 record batch.
//!
//! The kernel never looks inside records; what it needs of a batch is its offsets, the leader
//! epoch that wrote it, its producer and its transactional/control flags. A disk log keeps the
//! batch's bytes beside this header; the in-memory log keeps only the header.

use serde::{Deserialize, Serialize};

use crate::types::{
    LeaderEpoch, Offset, ProducerEpoch, ProducerId, Sequence, NO_PRODUCER_EPOCH, NO_PRODUCER_ID,
    NO_SEQUENCE,
};

/// The type of a control record (Kafka's `ControlRecordType`), the `int16 type` of its key.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize)]
pub enum ControlType {
    /// Transaction marker: the producer's open transaction is aborted (type 0).
    Abort,
    /// Transaction marker: the producer's open transaction is committed (type 1).
    Commit,
    /// KIP-1279's marker written at failover: every producer-state entry expires.
    MirrorPidReset,
}

impl ControlType {
    /// The wire code of `MIRROR_PID_RESET`, kmirror's choice: KIP-1279 names the control batch
    /// but assigns no number. Kafka uses 0..=6 today (ABORT, COMMIT, LEADER_CHANGE,
    /// SNAPSHOT_HEADER, SNAPSHOT_FOOTER, KRAFT_VERSION, KRAFT_VOTERS); 100 keeps clear of them.
    pub const MIRROR_PID_RESET_CODE: i16 = 100;

    /// The `int16 type` written in the control record's key.
    pub const fn code(self) -> i16 {
        match self {
            ControlType::Abort => 0,
            ControlType::Commit => 1,
            ControlType::MirrorPidReset => Self::MIRROR_PID_RESET_CODE,
        }
    }

    /// The control type with wire code `code`, if kmirror knows it.
    pub const fn from_code(code: i16) -> Option<ControlType> {
        match code {
            0 => Some(ControlType::Abort),
            1 => Some(ControlType::Commit),
            Self::MIRROR_PID_RESET_CODE => Some(ControlType::MirrorPidReset),
            _ => None,
        }
    }

    /// Whether this is a transaction marker (ABORT or COMMIT), which Kafka flags with the
    /// transactional attribute as well as the control attribute.
    pub const fn is_transaction_marker(self) -> bool {
        matches!(self, ControlType::Abort | ControlType::Commit)
    }
}

/// The header of a record batch (magic v2), everything the log operations need.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize)]
pub struct BatchHeader {
    /// Offset of the first record.
    pub base_offset: Offset,
    /// Offset of the last record (`base_offset + lastOffsetDelta`).
    pub last_offset: Offset,
    /// `partitionLeaderEpoch`: the epoch of the leader that first appended the batch.
    pub partition_leader_epoch: LeaderEpoch,
    /// Producer id, or [`NO_PRODUCER_ID`].
    pub producer_id: ProducerId,
    /// Producer epoch, or [`NO_PRODUCER_EPOCH`].
    pub producer_epoch: ProducerEpoch,
    /// Sequence of the first record, or [`NO_SEQUENCE`].
    pub base_sequence: Sequence,
    /// Attribute bit 4: part of a transaction (also set on transaction markers).
    pub is_transactional: bool,
    /// Attribute bit 5 and the control record's type, for control batches.
    pub control: Option<ControlType>,
}

impl BatchHeader {
    /// A plain (non-idempotent, non-transactional) data batch.
    pub const fn plain(base_offset: Offset, last_offset: Offset, epoch: LeaderEpoch) -> Self {
        BatchHeader {
            base_offset,
            last_offset,
            partition_leader_epoch: epoch,
            producer_id: NO_PRODUCER_ID,
            producer_epoch: NO_PRODUCER_EPOCH,
            base_sequence: NO_SEQUENCE,
            is_transactional: false,
            control: None,
        }
    }

    /// Number of records (offsets) the batch covers.
    pub const fn record_count(&self) -> i64 {
        self.last_offset - self.base_offset + 1
    }

    /// The offset after the batch.
    pub const fn next_offset(&self) -> Offset {
        self.last_offset + 1
    }

    /// Whether the batch carries a producer id.
    pub const fn has_producer_id(&self) -> bool {
        self.producer_id != NO_PRODUCER_ID
    }

    /// Whether this is a control batch.
    pub const fn is_control(&self) -> bool {
        self.control.is_some()
    }

    /// Sequence of the last record, or [`NO_SEQUENCE`]; wraps at `i32::MAX` as Kafka's does.
    pub fn last_sequence(&self) -> Sequence {
        if self.base_sequence == NO_SEQUENCE {
            return NO_SEQUENCE;
        }
        let delta = self.last_offset - self.base_offset;
        ((self.base_sequence as i64 + delta) % (i32::MAX as i64 + 1)) as Sequence
    }
}

/// What a leader is asked to append; the log assigns offsets and stamps its leader epoch.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize)]
pub enum LeaderBatch {
    /// `record_count` data records, optionally from an idempotent or transactional producer.
    Records {
        /// How many records (at least 1).
        record_count: u32,
        /// The producer, for idempotent and transactional batches.
        producer: Option<ProducerBatchInfo>,
        /// Whether the batch belongs to a transaction (requires `producer`).
        transactional: bool,
    },
    /// A single control record (transaction marker or `MIRROR_PID_RESET`).
    Control {
        /// The control record's type.
        control: ControlType,
        /// The producer a transaction marker closes; `None` for `MIRROR_PID_RESET`.
        producer: Option<(ProducerId, ProducerEpoch)>,
    },
}

/// The producer fields of an idempotent or transactional batch.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize)]
pub struct ProducerBatchInfo {
    /// The producer id.
    pub producer_id: ProducerId,
    /// The producer epoch.
    pub producer_epoch: ProducerEpoch,
    /// Sequence of the first record.
    pub base_sequence: Sequence,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_codes_round_trip() {
        for c in [
            ControlType::Abort,
            ControlType::Commit,
            ControlType::MirrorPidReset,
        ] {
            assert_eq!(ControlType::from_code(c.code()), Some(c));
        }
        assert_eq!(ControlType::from_code(2), None);
        assert!(ControlType::Commit.is_transaction_marker());
        assert!(!ControlType::MirrorPidReset.is_transaction_marker());
    }

    #[test]
    fn last_sequence_wraps_like_kafka() {
        let mut b = BatchHeader::plain(10, 14, 0);
        assert_eq!(b.last_sequence(), NO_SEQUENCE);
        b.producer_id = 7;
        b.base_sequence = i32::MAX - 1;
        assert_eq!(b.record_count(), 5);
        assert_eq!(b.last_sequence(), 2);
        b.base_sequence = 3;
        assert_eq!(b.last_sequence(), 7);
    }
}
