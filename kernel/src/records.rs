//! The records of `__mirror_state`: keys, values and their versioned binary encoding.
//!
//! `__mirror_state` is a compacted topic. Each record has a key naming one mirrored partition
//! ([`MirrorPartition`]) and one record type, and a value, or no value (a tombstone, which deletes
//! the key). The partition of `__mirror_state` that holds a key is chosen by
//! [`crate::partitioner::mirror_state_partition`].
//!
//! # Byte layout
//!
//! Everything is big-endian, as in Kafka's own coordinator records (`__consumer_offsets`). A
//! string is an `int16` byte length followed by that many bytes of UTF-8; a nullable string uses
//! length `-1` for null. Every key starts with an `int16` that is both its type and its version
//! (Kafka's coordinator-key convention); every value starts with an `int16` version. Only version
//! 0 of each value exists; decoding any other version fails with
//! [`RecordDecodeError::UnknownVersion`].
//!
//! Key (both types):
//!
//! | bytes | field |
//! |---|---|
//! | `int16` | key type: [`STATE_KEY_TYPE`] (0) = `MirrorPartitionStateKey`, [`LAST_MIRRORED_EPOCHS_KEY_TYPE`] (1) = `LastMirroredEpochsKey` |
//! | string | mirror name (a valid [`MirrorName`]) |
//! | 16 bytes | topic id |
//! | `int32` | partition |
//!
//! `MirrorPartitionStateValue`, version 0:
//!
//! | bytes | field |
//! |---|---|
//! | `int16` | version (0) |
//! | `int8` | state ([`MirrorState::code`]) |
//! | `int32` | leader epoch |
//! | `int32` | state epoch |
//! | nullable string | error message |
//! | `int32` | retry attempt (never negative) |
//! | `int8` | previous state ([`MirrorState::code`], or [`NO_STATE`] (-1) for none) |
//!
//! `LastMirroredEpochsValue`, version 0:
//!
//! | bytes | field |
//! |---|---|
//! | `int16` | version (0) |
//! | `int32` | last mirrored epoch ([`UNDEFINED_EPOCH`] (-1) for none) |
//! | `int64` | last mirrored offset ([`UNDEFINED_OFFSET`] (-1) when unknown) |
//!
//! A tombstone is a key with a null value. Decoding is strict: a key or value must be consumed
//! exactly ([`RecordDecodeError::TrailingBytes`] otherwise), and decoding never panics.

use serde::{Deserialize, Serialize};

use crate::state::MirrorState;
#[cfg(doc)]
use crate::types::UNDEFINED_OFFSET;
use crate::types::{
    InvalidMirrorName, LeaderEpoch, MirrorName, MirrorPartition, Offset, StateEpoch, TopicId,
    UNDEFINED_EPOCH,
};

/// The `retry_attempt` of a FAILED record that must not be retried automatically (the
/// prototype's non-retryable failures, e.g. an unclean election on the source without
/// `mirror.support.unclean.leader.election`). On the wire it is Kafka's `-1`.
pub const NON_RETRYABLE_ATTEMPT: u32 = u32::MAX;

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
    /// How many retries of the failed step were attempted, or [`NON_RETRYABLE_ATTEMPT`]: the
    /// failure is not retried automatically.
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

/// Key type (and key version) of `MirrorPartitionStateKey`.
pub const STATE_KEY_TYPE: i16 = 0;
/// Key type (and key version) of `LastMirroredEpochsKey`.
pub const LAST_MIRRORED_EPOCHS_KEY_TYPE: i16 = 1;
/// The only version of `MirrorPartitionStateValue` so far.
pub const STATE_VALUE_VERSION: i16 = 0;
/// The only version of `LastMirroredEpochsValue` so far.
pub const LAST_MIRRORED_EPOCHS_VALUE_VERSION: i16 = 0;
/// Wire code of an absent `previous_state` (no state has a negative code).
pub const NO_STATE: i8 = -1;
/// Wire length of a null nullable string.
const NULL_STRING_LENGTH: i16 = -1;

/// The key of a `__mirror_state` record: a record type and the mirrored partition it describes.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize)]
pub enum MirrorStateKey {
    /// `MirrorPartitionStateKey`, whose value is a [`MirrorPartitionStateValue`].
    PartitionState(MirrorPartition),
    /// `LastMirroredEpochsKey`, whose value is a [`LastMirroredEpochsValue`].
    LastMirroredEpochs(MirrorPartition),
}

/// One record of `__mirror_state`: a value for a key, or a tombstone deleting the key.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize)]
pub enum MirrorStateRecord {
    /// `MirrorPartitionStateKey` -> `MirrorPartitionStateValue`.
    PartitionState {
        /// The partition the state belongs to.
        partition: MirrorPartition,
        /// The persisted state.
        value: MirrorPartitionStateValue,
    },
    /// `LastMirroredEpochsKey` -> `LastMirroredEpochsValue`.
    LastMirroredEpochs {
        /// The partition the LME belongs to.
        partition: MirrorPartition,
        /// The persisted LME.
        value: LastMirroredEpochsValue,
    },
    /// `MirrorPartitionStateKey` with a null value: deletes the partition's state.
    PartitionStateTombstone(MirrorPartition),
    /// `LastMirroredEpochsKey` with a null value: deletes the partition's LME.
    LastMirroredEpochsTombstone(MirrorPartition),
}

/// The bytes of an encoded record: a key and, unless the record is a tombstone, a value.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct EncodedRecord {
    /// The encoded key.
    pub key: Vec<u8>,
    /// The encoded value; `None` for a tombstone.
    pub value: Option<Vec<u8>>,
}

/// Why a record could not be encoded (a value outside what the wire format can carry).
#[derive(Clone, PartialEq, Eq, Debug, thiserror::Error)]
pub enum RecordEncodeError {
    /// A string is longer than an `int16` length can describe.
    #[error("{field} is {len} bytes of UTF-8; at most {max} fit an int16 length", max = i16::MAX)]
    StringTooLong {
        /// The field.
        field: &'static str,
        /// Its length in bytes.
        len: usize,
    },
    /// The retry count does not fit the wire's `int32`.
    #[error("retry attempt {0} does not fit an int32")]
    RetryCountTooLarge(u32),
    /// An optional epoch is `Some` of a negative number, which the wire reads as "none".
    #[error("{field} is Some({value}); a present epoch must not be negative")]
    NegativeEpoch {
        /// The field.
        field: &'static str,
        /// The epoch.
        value: LeaderEpoch,
    },
}

/// Why bytes are not a valid `__mirror_state` key or value.
#[derive(Clone, PartialEq, Eq, Debug, thiserror::Error)]
pub enum RecordDecodeError {
    /// The input ended inside a field.
    #[error("truncated input reading {field}: needed {needed} bytes, {available} available")]
    Truncated {
        /// The field being read.
        field: &'static str,
        /// Bytes the field needs.
        needed: usize,
        /// Bytes left in the input.
        available: usize,
    },
    /// The key type is neither [`STATE_KEY_TYPE`] nor [`LAST_MIRRORED_EPOCHS_KEY_TYPE`].
    #[error("unknown __mirror_state key type {0}")]
    UnknownKeyType(i16),
    /// The value version is not one this code reads.
    #[error("unknown version {version} of {record}")]
    UnknownVersion {
        /// The value type.
        record: &'static str,
        /// The version read.
        version: i16,
    },
    /// A state code is not one of [`MirrorState`]'s.
    #[error("unknown mirror state code {code} in {field}")]
    UnknownStateCode {
        /// The field.
        field: &'static str,
        /// The code read.
        code: i8,
    },
    /// The key's mirror name is not a valid [`MirrorName`].
    #[error("invalid mirror name in key: {0}")]
    InvalidMirrorName(#[from] InvalidMirrorName),
    /// A string length is negative (and the string is not nullable, or the length is not -1).
    #[error("invalid length {len} of {field}")]
    InvalidStringLength {
        /// The field.
        field: &'static str,
        /// The length read.
        len: i16,
    },
    /// A string is not valid UTF-8.
    #[error("{field} is not valid UTF-8")]
    InvalidUtf8 {
        /// The field.
        field: &'static str,
    },
    /// The retry count is negative.
    #[error("negative retry attempt {0}")]
    NegativeRetryCount(i32),
    /// An optional epoch is negative but not the -1 sentinel.
    #[error("invalid {field} {value}: an epoch is -1 (none) or not negative")]
    InvalidEpoch {
        /// The field.
        field: &'static str,
        /// The value read.
        value: i32,
    },
    /// Bytes are left after the last field.
    #[error("{count} trailing bytes after {what}")]
    TrailingBytes {
        /// What was decoded.
        what: &'static str,
        /// How many bytes are left.
        count: usize,
    },
}

/// A big-endian writer.
struct Writer(Vec<u8>);

impl Writer {
    fn i8(&mut self, v: i8) {
        self.0.extend_from_slice(&v.to_be_bytes());
    }
    fn i16(&mut self, v: i16) {
        self.0.extend_from_slice(&v.to_be_bytes());
    }
    fn i32(&mut self, v: i32) {
        self.0.extend_from_slice(&v.to_be_bytes());
    }
    fn i64(&mut self, v: i64) {
        self.0.extend_from_slice(&v.to_be_bytes());
    }
    fn bytes(&mut self, b: &[u8]) {
        self.0.extend_from_slice(b);
    }
    fn string(&mut self, field: &'static str, s: &str) -> Result<(), RecordEncodeError> {
        let len = i16::try_from(s.len()).map_err(|_| RecordEncodeError::StringTooLong {
            field,
            len: s.len(),
        })?;
        self.i16(len);
        self.bytes(s.as_bytes());
        Ok(())
    }
    fn nullable_string(
        &mut self,
        field: &'static str,
        s: Option<&str>,
    ) -> Result<(), RecordEncodeError> {
        match s {
            None => {
                self.i16(NULL_STRING_LENGTH);
                Ok(())
            }
            Some(s) => self.string(field, s),
        }
    }
}

/// A big-endian reader that never reads past its input.
struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    fn new(input: &'a [u8]) -> Self {
        Reader { rest: input }
    }

    fn take(&mut self, field: &'static str, n: usize) -> Result<&'a [u8], RecordDecodeError> {
        if self.rest.len() < n {
            return Err(RecordDecodeError::Truncated {
                field,
                needed: n,
                available: self.rest.len(),
            });
        }
        let (head, tail) = self.rest.split_at(n);
        self.rest = tail;
        Ok(head)
    }

    fn array<const N: usize>(&mut self, field: &'static str) -> Result<[u8; N], RecordDecodeError> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(field, N)?);
        Ok(out)
    }

    fn i8(&mut self, field: &'static str) -> Result<i8, RecordDecodeError> {
        Ok(i8::from_be_bytes(self.array(field)?))
    }
    fn i16(&mut self, field: &'static str) -> Result<i16, RecordDecodeError> {
        Ok(i16::from_be_bytes(self.array(field)?))
    }
    fn i32(&mut self, field: &'static str) -> Result<i32, RecordDecodeError> {
        Ok(i32::from_be_bytes(self.array(field)?))
    }
    fn i64(&mut self, field: &'static str) -> Result<i64, RecordDecodeError> {
        Ok(i64::from_be_bytes(self.array(field)?))
    }

    fn nullable_string(
        &mut self,
        field: &'static str,
    ) -> Result<Option<String>, RecordDecodeError> {
        let len = self.i16(field)?;
        if len == NULL_STRING_LENGTH {
            return Ok(None);
        }
        let n = usize::try_from(len)
            .map_err(|_| RecordDecodeError::InvalidStringLength { field, len })?;
        let bytes = self.take(field, n)?;
        let s = std::str::from_utf8(bytes).map_err(|_| RecordDecodeError::InvalidUtf8 { field })?;
        Ok(Some(s.to_owned()))
    }

    fn string(&mut self, field: &'static str) -> Result<String, RecordDecodeError> {
        self.nullable_string(field)?
            .ok_or(RecordDecodeError::InvalidStringLength {
                field,
                len: NULL_STRING_LENGTH,
            })
    }

    fn state(&mut self, field: &'static str) -> Result<MirrorState, RecordDecodeError> {
        let code = self.i8(field)?;
        MirrorState::from_code(code).ok_or(RecordDecodeError::UnknownStateCode { field, code })
    }

    fn optional_state(
        &mut self,
        field: &'static str,
    ) -> Result<Option<MirrorState>, RecordDecodeError> {
        let code = self.i8(field)?;
        if code == NO_STATE {
            return Ok(None);
        }
        MirrorState::from_code(code)
            .map(Some)
            .ok_or(RecordDecodeError::UnknownStateCode { field, code })
    }

    fn finish(self, what: &'static str) -> Result<(), RecordDecodeError> {
        if self.rest.is_empty() {
            Ok(())
        } else {
            Err(RecordDecodeError::TrailingBytes {
                what,
                count: self.rest.len(),
            })
        }
    }
}

impl MirrorStateKey {
    /// The mirrored partition the key names.
    pub fn partition(&self) -> &MirrorPartition {
        match self {
            MirrorStateKey::PartitionState(p) | MirrorStateKey::LastMirroredEpochs(p) => p,
        }
    }

    /// The key type written first in the key bytes.
    pub fn key_type(&self) -> i16 {
        match self {
            MirrorStateKey::PartitionState(_) => STATE_KEY_TYPE,
            MirrorStateKey::LastMirroredEpochs(_) => LAST_MIRRORED_EPOCHS_KEY_TYPE,
        }
    }

    /// The key's bytes (see the module doc). Infallible: a [`MirrorName`] always fits.
    pub fn encode(&self) -> Vec<u8> {
        let p = self.partition();
        let name = p.mirror.as_str().as_bytes();
        let mut w = Writer(Vec::with_capacity(2 + 2 + name.len() + 16 + 4));
        w.i16(self.key_type());
        // A valid mirror name has at most `MirrorName::MAX_LEN` (249) bytes.
        w.i16(i16::try_from(name.len()).unwrap_or(i16::MAX));
        w.bytes(name);
        w.bytes(&p.topic_id.0);
        w.i32(p.partition);
        w.0
    }

    /// Decodes key bytes.
    pub fn decode(bytes: &[u8]) -> Result<Self, RecordDecodeError> {
        let mut r = Reader::new(bytes);
        let key_type = r.i16("key type")?;
        if key_type != STATE_KEY_TYPE && key_type != LAST_MIRRORED_EPOCHS_KEY_TYPE {
            return Err(RecordDecodeError::UnknownKeyType(key_type));
        }
        let mirror = MirrorName::new(r.string("mirror name")?)?;
        let topic_id = TopicId(r.array("topic id")?);
        let partition = r.i32("partition")?;
        r.finish("key")?;
        let p = MirrorPartition {
            mirror,
            topic_id,
            partition,
        };
        Ok(if key_type == STATE_KEY_TYPE {
            MirrorStateKey::PartitionState(p)
        } else {
            MirrorStateKey::LastMirroredEpochs(p)
        })
    }
}

impl MirrorPartitionStateValue {
    /// The value's bytes at [`STATE_VALUE_VERSION`] (see the module doc).
    pub fn encode(&self) -> Result<Vec<u8>, RecordEncodeError> {
        let retry = if self.retry_attempt == NON_RETRYABLE_ATTEMPT {
            -1
        } else {
            i32::try_from(self.retry_attempt)
                .map_err(|_| RecordEncodeError::RetryCountTooLarge(self.retry_attempt))?
        };
        let mut w = Writer(Vec::with_capacity(24));
        w.i16(STATE_VALUE_VERSION);
        w.i8(self.state.code());
        w.i32(self.leader_epoch);
        w.i32(self.state_epoch);
        w.nullable_string("error message", self.error_message.as_deref())?;
        w.i32(retry);
        w.i8(self.previous_state.map_or(NO_STATE, MirrorState::code));
        Ok(w.0)
    }

    /// Decodes value bytes.
    pub fn decode(bytes: &[u8]) -> Result<Self, RecordDecodeError> {
        let mut r = Reader::new(bytes);
        let version = r.i16("value version")?;
        if version != STATE_VALUE_VERSION {
            return Err(RecordDecodeError::UnknownVersion {
                record: "MirrorPartitionStateValue",
                version,
            });
        }
        let state = r.state("state")?;
        let leader_epoch = r.i32("leader epoch")?;
        let state_epoch = r.i32("state epoch")?;
        let error_message = r.nullable_string("error message")?;
        let retry = r.i32("retry attempt")?;
        let retry_attempt = if retry == -1 {
            NON_RETRYABLE_ATTEMPT
        } else {
            u32::try_from(retry).map_err(|_| RecordDecodeError::NegativeRetryCount(retry))?
        };
        let previous_state = r.optional_state("previous state")?;
        r.finish("MirrorPartitionStateValue")?;
        Ok(MirrorPartitionStateValue {
            state,
            leader_epoch,
            state_epoch,
            error_message,
            retry_attempt,
            previous_state,
        })
    }
}

impl LastMirroredEpochsValue {
    /// The value's bytes at [`LAST_MIRRORED_EPOCHS_VALUE_VERSION`] (see the module doc).
    pub fn encode(&self) -> Result<Vec<u8>, RecordEncodeError> {
        let epoch = match self.last_mirrored_epoch {
            None => UNDEFINED_EPOCH,
            Some(e) if e < 0 => {
                return Err(RecordEncodeError::NegativeEpoch {
                    field: "last mirrored epoch",
                    value: e,
                })
            }
            Some(e) => e,
        };
        let mut w = Writer(Vec::with_capacity(14));
        w.i16(LAST_MIRRORED_EPOCHS_VALUE_VERSION);
        w.i32(epoch);
        w.i64(self.last_mirrored_offset);
        Ok(w.0)
    }

    /// Decodes value bytes.
    pub fn decode(bytes: &[u8]) -> Result<Self, RecordDecodeError> {
        let mut r = Reader::new(bytes);
        let version = r.i16("value version")?;
        if version != LAST_MIRRORED_EPOCHS_VALUE_VERSION {
            return Err(RecordDecodeError::UnknownVersion {
                record: "LastMirroredEpochsValue",
                version,
            });
        }
        let epoch = r.i32("last mirrored epoch")?;
        let last_mirrored_epoch = match epoch {
            UNDEFINED_EPOCH => None,
            e if e < 0 => {
                return Err(RecordDecodeError::InvalidEpoch {
                    field: "last mirrored epoch",
                    value: e,
                })
            }
            e => Some(e),
        };
        let last_mirrored_offset = r.i64("last mirrored offset")?;
        r.finish("LastMirroredEpochsValue")?;
        Ok(LastMirroredEpochsValue {
            last_mirrored_epoch,
            last_mirrored_offset,
        })
    }
}

impl MirrorStateRecord {
    /// The record's key.
    pub fn key(&self) -> MirrorStateKey {
        match self {
            MirrorStateRecord::PartitionState { partition, .. }
            | MirrorStateRecord::PartitionStateTombstone(partition) => {
                MirrorStateKey::PartitionState(partition.clone())
            }
            MirrorStateRecord::LastMirroredEpochs { partition, .. }
            | MirrorStateRecord::LastMirroredEpochsTombstone(partition) => {
                MirrorStateKey::LastMirroredEpochs(partition.clone())
            }
        }
    }

    /// The mirrored partition the record describes.
    pub fn partition(&self) -> &MirrorPartition {
        match self {
            MirrorStateRecord::PartitionState { partition, .. }
            | MirrorStateRecord::PartitionStateTombstone(partition)
            | MirrorStateRecord::LastMirroredEpochs { partition, .. }
            | MirrorStateRecord::LastMirroredEpochsTombstone(partition) => partition,
        }
    }

    /// Whether the record is a tombstone (a key without a value).
    pub fn is_tombstone(&self) -> bool {
        matches!(
            self,
            MirrorStateRecord::PartitionStateTombstone(_)
                | MirrorStateRecord::LastMirroredEpochsTombstone(_)
        )
    }

    /// The record's key and value bytes (see the module doc).
    pub fn encode(&self) -> Result<EncodedRecord, RecordEncodeError> {
        let value = match self {
            MirrorStateRecord::PartitionState { value, .. } => Some(value.encode()?),
            MirrorStateRecord::LastMirroredEpochs { value, .. } => Some(value.encode()?),
            MirrorStateRecord::PartitionStateTombstone(_)
            | MirrorStateRecord::LastMirroredEpochsTombstone(_) => None,
        };
        Ok(EncodedRecord {
            key: self.key().encode(),
            value,
        })
    }

    /// Decodes a record from its key bytes and value bytes (`None`: a tombstone). The key type
    /// decides how the value is read.
    pub fn decode(key: &[u8], value: Option<&[u8]>) -> Result<Self, RecordDecodeError> {
        Ok(match (MirrorStateKey::decode(key)?, value) {
            (MirrorStateKey::PartitionState(partition), Some(v)) => {
                MirrorStateRecord::PartitionState {
                    partition,
                    value: MirrorPartitionStateValue::decode(v)?,
                }
            }
            (MirrorStateKey::PartitionState(partition), None) => {
                MirrorStateRecord::PartitionStateTombstone(partition)
            }
            (MirrorStateKey::LastMirroredEpochs(partition), Some(v)) => {
                MirrorStateRecord::LastMirroredEpochs {
                    partition,
                    value: LastMirroredEpochsValue::decode(v)?,
                }
            }
            (MirrorStateKey::LastMirroredEpochs(partition), None) => {
                MirrorStateRecord::LastMirroredEpochsTombstone(partition)
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn partition() -> MirrorPartition {
        MirrorPartition {
            mirror: MirrorName::new("east").unwrap(),
            topic_id: TopicId::from_u64(0x0102),
            partition: 3,
        }
    }

    fn failed_value() -> MirrorPartitionStateValue {
        MirrorPartitionStateValue {
            state: MirrorState::Failed,
            leader_epoch: 7,
            state_epoch: 2,
            error_message: Some("oops".to_owned()),
            retry_attempt: 1,
            previous_state: Some(MirrorState::Preparing),
        }
    }

    fn mirroring_value() -> MirrorPartitionStateValue {
        MirrorPartitionStateValue {
            state: MirrorState::Mirroring,
            leader_epoch: 0,
            state_epoch: 0,
            error_message: None,
            retry_attempt: 0,
            previous_state: None,
        }
    }

    /// Key bytes of `partition()` after the key type.
    const KEY_BODY: [u8; 26] = [
        0x00, 0x04, b'e', b'a', b's', b't', // mirror name
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01, 0x02, // topic id
        0x00, 0x00, 0x00, 0x03, // partition
    ];

    fn key_bytes(key_type: u8) -> Vec<u8> {
        let mut v = vec![0x00, key_type];
        v.extend_from_slice(&KEY_BODY);
        v
    }

    const FAILED_VALUE_BYTES: [u8; 22] = [
        0x00, 0x00, // version 0
        0x06, // FAILED
        0x00, 0x00, 0x00, 0x07, // leader epoch 7
        0x00, 0x00, 0x00, 0x02, // state epoch 2
        0x00, 0x04, b'o', b'o', b'p', b's', // error message
        0x00, 0x00, 0x00, 0x01, // retry attempt 1
        0x01, // previous state PREPARING
    ];

    const MIRRORING_VALUE_BYTES: [u8; 18] = [
        0x00, 0x00, // version 0
        0x02, // MIRRORING
        0x00, 0x00, 0x00, 0x00, // leader epoch 0
        0x00, 0x00, 0x00, 0x00, // state epoch 0
        0xff, 0xff, // null error message
        0x00, 0x00, 0x00, 0x00, // retry attempt 0
        0xff, // no previous state
    ];

    const LME_VALUE_BYTES: [u8; 14] = [
        0x00, 0x00, // version 0
        0x00, 0x00, 0x00, 0x05, // epoch 5
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, // offset 256
    ];

    const NO_LME_VALUE_BYTES: [u8; 14] = [
        0x00, 0x00, // version 0
        0xff, 0xff, 0xff, 0xff, // UNDEFINED_EPOCH
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // UNDEFINED_OFFSET
    ];

    fn all_records() -> Vec<MirrorStateRecord> {
        vec![
            MirrorStateRecord::PartitionState {
                partition: partition(),
                value: failed_value(),
            },
            MirrorStateRecord::PartitionState {
                partition: partition(),
                value: mirroring_value(),
            },
            MirrorStateRecord::LastMirroredEpochs {
                partition: partition(),
                value: LastMirroredEpochsValue {
                    last_mirrored_epoch: Some(5),
                    last_mirrored_offset: 256,
                },
            },
            MirrorStateRecord::LastMirroredEpochs {
                partition: partition(),
                value: LastMirroredEpochsValue {
                    last_mirrored_epoch: None,
                    last_mirrored_offset: -1,
                },
            },
            MirrorStateRecord::PartitionStateTombstone(partition()),
            MirrorStateRecord::LastMirroredEpochsTombstone(partition()),
        ]
    }

    #[test]
    fn every_record_round_trips() {
        for record in all_records() {
            let encoded = record.encode().unwrap();
            assert_eq!(encoded.value.is_none(), record.is_tombstone());
            let decoded = MirrorStateRecord::decode(&encoded.key, encoded.value.as_deref());
            assert_eq!(decoded, Ok(record));
        }
    }

    #[test]
    fn every_state_and_previous_state_round_trips() {
        for state in MirrorState::ALL {
            for previous_state in MirrorState::ALL.into_iter().map(Some).chain([None]) {
                let value = MirrorPartitionStateValue {
                    state,
                    leader_epoch: i32::MAX,
                    state_epoch: i32::MIN,
                    error_message: Some("é ✓".to_owned()),
                    retry_attempt: i32::MAX as u32,
                    previous_state,
                };
                let bytes = value.encode().unwrap();
                assert_eq!(MirrorPartitionStateValue::decode(&bytes), Ok(value));
            }
        }
    }

    #[test]
    fn golden_keys() {
        let state_key = MirrorStateKey::PartitionState(partition());
        let lme_key = MirrorStateKey::LastMirroredEpochs(partition());
        assert_eq!(state_key.encode(), key_bytes(0));
        assert_eq!(lme_key.encode(), key_bytes(1));
        assert_eq!(MirrorStateKey::decode(&key_bytes(0)), Ok(state_key));
        assert_eq!(MirrorStateKey::decode(&key_bytes(1)), Ok(lme_key));
    }

    #[test]
    fn golden_state_values() {
        assert_eq!(failed_value().encode().unwrap(), FAILED_VALUE_BYTES);
        assert_eq!(
            MirrorPartitionStateValue::decode(&FAILED_VALUE_BYTES),
            Ok(failed_value())
        );
        assert_eq!(mirroring_value().encode().unwrap(), MIRRORING_VALUE_BYTES);
        assert_eq!(
            MirrorPartitionStateValue::decode(&MIRRORING_VALUE_BYTES),
            Ok(mirroring_value())
        );
    }

    #[test]
    fn golden_lme_values() {
        let lme = LastMirroredEpochsValue {
            last_mirrored_epoch: Some(5),
            last_mirrored_offset: 256,
        };
        assert_eq!(lme.encode().unwrap(), LME_VALUE_BYTES);
        assert_eq!(LastMirroredEpochsValue::decode(&LME_VALUE_BYTES), Ok(lme));
        let none = LastMirroredEpochsValue {
            last_mirrored_epoch: None,
            last_mirrored_offset: crate::types::UNDEFINED_OFFSET,
        };
        assert_eq!(none.encode().unwrap(), NO_LME_VALUE_BYTES);
        assert_eq!(
            LastMirroredEpochsValue::decode(&NO_LME_VALUE_BYTES),
            Ok(none)
        );
    }

    #[test]
    fn golden_tombstones() {
        let encoded = MirrorStateRecord::PartitionStateTombstone(partition())
            .encode()
            .unwrap();
        assert_eq!(
            encoded,
            EncodedRecord {
                key: key_bytes(0),
                value: None
            }
        );
        let encoded = MirrorStateRecord::LastMirroredEpochsTombstone(partition())
            .encode()
            .unwrap();
        assert_eq!(
            encoded,
            EncodedRecord {
                key: key_bytes(1),
                value: None
            }
        );
    }

    #[test]
    fn the_key_type_decides_how_the_value_is_read() {
        // LME bytes under a state key are not a state value: too short.
        assert!(matches!(
            MirrorStateRecord::decode(&key_bytes(0), Some(&LME_VALUE_BYTES)),
            Err(RecordDecodeError::Truncated { .. }) | Err(RecordDecodeError::TrailingBytes { .. })
        ));
        // State bytes under an LME key leave bytes over.
        assert!(matches!(
            MirrorStateRecord::decode(&key_bytes(1), Some(&MIRRORING_VALUE_BYTES)),
            Err(RecordDecodeError::TrailingBytes { .. })
        ));
    }

    #[test]
    fn every_truncation_of_every_encoding_is_refused_with_counts() {
        for record in all_records() {
            let encoded = record.encode().unwrap();
            for cut in 0..encoded.key.len() {
                match MirrorStateKey::decode(&encoded.key[..cut]) {
                    Err(RecordDecodeError::Truncated {
                        needed, available, ..
                    }) => assert!(available < needed, "cut {cut}: {available} >= {needed}"),
                    other => panic!("key cut at {cut}: {other:?}"),
                }
            }
            if let Some(value) = &encoded.value {
                for cut in 0..value.len() {
                    let decoded = MirrorStateRecord::decode(&encoded.key, Some(&value[..cut]));
                    assert!(
                        matches!(decoded, Err(RecordDecodeError::Truncated { .. })),
                        "value cut at {cut}: {decoded:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn truncation_reports_field_needed_and_available() {
        let err = LastMirroredEpochsValue::decode(&LME_VALUE_BYTES[..9]).unwrap_err();
        assert_eq!(
            err,
            RecordDecodeError::Truncated {
                field: "last mirrored offset",
                needed: 8,
                available: 3,
            }
        );
        assert_eq!(
            err.to_string(),
            "truncated input reading last mirrored offset: needed 8 bytes, 3 available"
        );
        // A string length larger than the rest of the input.
        let mut key = key_bytes(0);
        key[3] = 200;
        assert_eq!(
            MirrorStateKey::decode(&key),
            Err(RecordDecodeError::Truncated {
                field: "mirror name",
                needed: 200,
                available: 24,
            })
        );
    }

    #[test]
    fn unknown_key_type_and_versions_are_refused() {
        assert_eq!(
            MirrorStateKey::decode(&key_bytes(2)),
            Err(RecordDecodeError::UnknownKeyType(2))
        );
        let mut v = MIRRORING_VALUE_BYTES;
        v[1] = 1;
        assert_eq!(
            MirrorPartitionStateValue::decode(&v),
            Err(RecordDecodeError::UnknownVersion {
                record: "MirrorPartitionStateValue",
                version: 1
            })
        );
        let mut v = LME_VALUE_BYTES;
        v[0] = 0xff;
        v[1] = 0xff;
        assert_eq!(
            LastMirroredEpochsValue::decode(&v),
            Err(RecordDecodeError::UnknownVersion {
                record: "LastMirroredEpochsValue",
                version: -1
            })
        );
    }

    #[test]
    fn unknown_state_codes_are_refused() {
        let mut v = MIRRORING_VALUE_BYTES;
        v[2] = 10;
        assert_eq!(
            MirrorPartitionStateValue::decode(&v),
            Err(RecordDecodeError::UnknownStateCode {
                field: "state",
                code: 10
            })
        );
        // -1 means "none" only for the previous state.
        v[2] = 0xff;
        assert_eq!(
            MirrorPartitionStateValue::decode(&v),
            Err(RecordDecodeError::UnknownStateCode {
                field: "state",
                code: -1
            })
        );
        let mut v = MIRRORING_VALUE_BYTES;
        v[17] = 0x80;
        assert_eq!(
            MirrorPartitionStateValue::decode(&v),
            Err(RecordDecodeError::UnknownStateCode {
                field: "previous state",
                code: i8::MIN
            })
        );
    }

    #[test]
    fn invalid_mirror_names_are_refused() {
        let mut key = key_bytes(0);
        key[4..8].copy_from_slice(b"e st");
        assert!(matches!(
            MirrorStateKey::decode(&key),
            Err(RecordDecodeError::InvalidMirrorName(
                InvalidMirrorName::IllegalCharacter { ch: ' ', .. }
            ))
        ));
        // An empty name.
        let mut key = vec![0x00, 0x00, 0x00, 0x00];
        key.extend_from_slice(&KEY_BODY[6..]);
        assert_eq!(
            MirrorStateKey::decode(&key),
            Err(RecordDecodeError::InvalidMirrorName(
                InvalidMirrorName::Empty
            ))
        );
        // A null name.
        let mut key = vec![0x00, 0x00, 0xff, 0xff];
        key.extend_from_slice(&KEY_BODY[6..]);
        assert_eq!(
            MirrorStateKey::decode(&key),
            Err(RecordDecodeError::InvalidStringLength {
                field: "mirror name",
                len: -1
            })
        );
    }

    #[test]
    fn negative_string_lengths_other_than_null_are_refused() {
        let mut v = MIRRORING_VALUE_BYTES;
        v[11] = 0xff;
        v[12] = 0xfe;
        assert_eq!(
            MirrorPartitionStateValue::decode(&v),
            Err(RecordDecodeError::InvalidStringLength {
                field: "error message",
                len: -2
            })
        );
    }

    #[test]
    fn negative_retry_counts_are_refused() {
        let mut v = MIRRORING_VALUE_BYTES;
        v[13..17].copy_from_slice(&(-3i32).to_be_bytes());
        assert_eq!(
            MirrorPartitionStateValue::decode(&v),
            Err(RecordDecodeError::NegativeRetryCount(-3))
        );
    }

    #[test]
    fn a_non_retryable_failure_is_kafkas_minus_one() {
        let mut v = mirroring_value();
        v.retry_attempt = NON_RETRYABLE_ATTEMPT;
        let bytes = v.encode().unwrap();
        assert_eq!(bytes[13..17], (-1i32).to_be_bytes());
        assert_eq!(MirrorPartitionStateValue::decode(&bytes), Ok(v));
    }

    #[test]
    fn epochs_below_the_sentinel_are_refused() {
        let mut v = LME_VALUE_BYTES;
        v[2..6].copy_from_slice(&(-2i32).to_be_bytes());
        assert_eq!(
            LastMirroredEpochsValue::decode(&v),
            Err(RecordDecodeError::InvalidEpoch {
                field: "last mirrored epoch",
                value: -2
            })
        );
    }

    #[test]
    fn trailing_bytes_are_refused() {
        let mut key = key_bytes(1);
        key.push(0);
        assert_eq!(
            MirrorStateKey::decode(&key),
            Err(RecordDecodeError::TrailingBytes {
                what: "key",
                count: 1
            })
        );
        let mut v = FAILED_VALUE_BYTES.to_vec();
        v.extend_from_slice(&[0, 0]);
        assert_eq!(
            MirrorPartitionStateValue::decode(&v),
            Err(RecordDecodeError::TrailingBytes {
                what: "MirrorPartitionStateValue",
                count: 2
            })
        );
        let mut v = LME_VALUE_BYTES.to_vec();
        v.extend_from_slice(&[1, 2, 3]);
        assert_eq!(
            LastMirroredEpochsValue::decode(&v),
            Err(RecordDecodeError::TrailingBytes {
                what: "LastMirroredEpochsValue",
                count: 3
            })
        );
    }

    #[test]
    fn invalid_utf8_is_refused() {
        let mut key = key_bytes(0);
        key[4] = 0xc3; // a lone lead byte
        assert_eq!(
            MirrorStateKey::decode(&key),
            Err(RecordDecodeError::InvalidUtf8 {
                field: "mirror name"
            })
        );
        let mut v = FAILED_VALUE_BYTES.to_vec();
        v[13] = 0xff;
        assert_eq!(
            MirrorPartitionStateValue::decode(&v),
            Err(RecordDecodeError::InvalidUtf8 {
                field: "error message"
            })
        );
    }

    #[test]
    fn unencodable_values_are_refused() {
        let mut v = mirroring_value();
        v.retry_attempt = i32::MAX as u32 + 1;
        assert_eq!(
            v.encode(),
            Err(RecordEncodeError::RetryCountTooLarge(1 << 31))
        );
        let mut v = mirroring_value();
        v.error_message = Some("x".repeat(i16::MAX as usize + 1));
        assert_eq!(
            v.encode(),
            Err(RecordEncodeError::StringTooLong {
                field: "error message",
                len: 32768
            })
        );
        v.error_message = Some("x".repeat(i16::MAX as usize));
        let bytes = v.encode().unwrap();
        assert_eq!(MirrorPartitionStateValue::decode(&bytes), Ok(v));
        let lme = LastMirroredEpochsValue {
            last_mirrored_epoch: Some(-1),
            last_mirrored_offset: 0,
        };
        assert_eq!(
            lme.encode(),
            Err(RecordEncodeError::NegativeEpoch {
                field: "last mirrored epoch",
                value: -1
            })
        );
    }

    #[test]
    fn decoding_arbitrary_bytes_never_panics() {
        // A cheap deterministic fuzz: every prefix and every single-byte corruption.
        for record in all_records() {
            let encoded = record.encode().unwrap();
            let mut key = encoded.key.clone();
            for i in 0..key.len() {
                for b in [0x00, 0x7f, 0x80, 0xff] {
                    let saved = key[i];
                    key[i] = b;
                    let _ = MirrorStateRecord::decode(&key, encoded.value.as_deref());
                    key[i] = saved;
                }
            }
            if let Some(mut value) = encoded.value {
                for i in 0..value.len() {
                    for b in [0x00, 0x7f, 0x80, 0xff] {
                        let saved = value[i];
                        value[i] = b;
                        let _ = MirrorStateRecord::decode(&encoded.key, Some(&value));
                        value[i] = saved;
                    }
                }
            }
        }
    }

    fn any_state() -> impl Strategy<Value = MirrorState> {
        proptest::sample::select(MirrorState::ALL.to_vec())
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_decode_without_panicking(
            key in proptest::collection::vec(any::<u8>(), 0..48),
            value in proptest::option::of(proptest::collection::vec(any::<u8>(), 0..48)),
        ) {
            let _ = MirrorStateRecord::decode(&key, value.as_deref());
            let _ = MirrorPartitionStateValue::decode(&key);
            let _ = LastMirroredEpochsValue::decode(&key);
        }

        #[test]
        fn arbitrary_state_values_round_trip(
            state in any_state(),
            leader_epoch in any::<i32>(),
            state_epoch in any::<i32>(),
            error_message in proptest::option::of(".{0,40}"),
            retry_attempt in 0..=i32::MAX as u32,
            previous_state in proptest::option::of(any_state()),
        ) {
            let value = MirrorPartitionStateValue {
                state, leader_epoch, state_epoch, error_message, retry_attempt, previous_state,
            };
            let bytes = value.encode().unwrap();
            prop_assert_eq!(MirrorPartitionStateValue::decode(&bytes), Ok(value));
        }

        #[test]
        fn arbitrary_lme_values_and_keys_round_trip(
            epoch in proptest::option::of(0..=i32::MAX),
            offset in any::<i64>(),
            name in "[a-z0-9_-]{1,40}",
            topic in any::<[u8; 16]>(),
            index in any::<i32>(),
        ) {
            let value = LastMirroredEpochsValue {
                last_mirrored_epoch: epoch,
                last_mirrored_offset: offset,
            };
            let partition = MirrorPartition {
                mirror: MirrorName::new(name).unwrap(),
                topic_id: TopicId(topic),
                partition: index,
            };
            let record = MirrorStateRecord::LastMirroredEpochs { partition, value };
            let encoded = record.encode().unwrap();
            prop_assert_eq!(
                MirrorStateRecord::decode(&encoded.key, encoded.value.as_deref()),
                Ok(record)
            );
        }
    }
}
