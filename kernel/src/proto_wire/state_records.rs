//! The prototype's `__mirror_state` records: `MirrorPartitionStateKey` ->
//! `MirrorPartitionStateValue` (where a mirrored partition is) and `LastMirrorEpochsKey` ->
//! `LastMirrorEpochsValue` (the last mirrored epoch, for failback), transcribed from
//! `mirror-coordinator/src/main/resources/common/message/` of the prototype.
//!
//! Both keys are `{MirrorName: string, TopicId: uuid, Partition: int32}`, non-flexible, written
//! after an `int16` record type (their `apiKey`: 2 and 1); both values are flexible version 0,
//! written after an `int16` version ([`super::framing`]).

use super::framing;
use super::schema::{
    FieldDefault, FieldSchema, FieldType, MessageKind, MessageSchema, SchemaSource,
};
use super::typed::WireMessage;
use super::value::Uuid;
use super::versions::Versions;
use super::{DecodeError, EncodeError};

const V0: Versions = Versions::since(0);

const MIRROR_PARTITION_FIELDS: &[FieldSchema] = &[
    FieldSchema::new("MirrorName", FieldType::String, V0),
    FieldSchema::new("TopicId", FieldType::Uuid, V0),
    FieldSchema::new("Partition", FieldType::Int32, V0),
];

/// `MirrorPartitionStateKey` (coordinator key, record type 2).
pub const MIRROR_PARTITION_STATE_KEY: MessageSchema = MessageSchema {
    name: "MirrorPartitionStateKey",
    kind: MessageKind::CoordinatorKey { api_key: 2 },
    valid_versions: Versions::only(0),
    flexible_versions: Versions::NONE,
    fields: MIRROR_PARTITION_FIELDS,
    source: SchemaSource::prototype(
        "mirror-coordinator/src/main/resources/common/message/MirrorPartitionStateKey.json",
        "00d40f59bd00647a7782b1ea138d0f51e11a22df",
    ),
};

/// `MirrorPartitionStateValue` (coordinator value; its file says `apiKey` 1, not its key's 2).
pub const MIRROR_PARTITION_STATE_VALUE: MessageSchema = MessageSchema {
    name: "MirrorPartitionStateValue",
    kind: MessageKind::CoordinatorValue { api_key: 1 },
    valid_versions: Versions::only(0),
    flexible_versions: V0,
    fields: &[
        FieldSchema::new("State", FieldType::Int8, V0),
        FieldSchema::new("LeaderEpoch", FieldType::Int32, V0).default(FieldDefault::Int(-1)),
        FieldSchema::new("StateEpoch", FieldType::Int32, V0).default(FieldDefault::Int(0)),
        FieldSchema::new("ErrorMessage", FieldType::String, V0)
            .nullable(V0)
            .default(FieldDefault::Null),
        FieldSchema::new("RetryAttempt", FieldType::Int16, V0).default(FieldDefault::Int(0)),
        FieldSchema::new("PreviousState", FieldType::Int8, V0).default(FieldDefault::Int(-1)),
    ],
    source: SchemaSource::prototype(
        "mirror-coordinator/src/main/resources/common/message/MirrorPartitionStateValue.json",
        "01b3013c94b1d8353683568426219434295fb155",
    ),
};

/// `LastMirrorEpochsKey` (coordinator key, record type 1).
pub const LAST_MIRROR_EPOCHS_KEY: MessageSchema = MessageSchema {
    name: "LastMirrorEpochsKey",
    kind: MessageKind::CoordinatorKey { api_key: 1 },
    valid_versions: Versions::only(0),
    flexible_versions: Versions::NONE,
    fields: MIRROR_PARTITION_FIELDS,
    source: SchemaSource::prototype(
        "mirror-coordinator/src/main/resources/common/message/LastMirrorEpochsKey.json",
        "00d40f59bd00647a7782b1ea138d0f51e11a22df",
    ),
};

/// `LastMirrorEpochsValue` (coordinator value, record type 1).
pub const LAST_MIRROR_EPOCHS_VALUE: MessageSchema = MessageSchema {
    name: "LastMirrorEpochsValue",
    kind: MessageKind::CoordinatorValue { api_key: 1 },
    valid_versions: Versions::only(0),
    flexible_versions: V0,
    fields: &[FieldSchema::new("LastMirrorEpoch", FieldType::Int32, V0)],
    source: SchemaSource::prototype(
        "mirror-coordinator/src/main/resources/common/message/LastMirrorEpochsValue.json",
        "00d40f59bd00647a7782b1ea138d0f51e11a22df",
    ),
};

/// The prototype's partition states (`MirrorPartitionState` in `server-common`), the `int8`
/// codes of `State` and `PreviousState`.
pub mod state_code {
    /// Aligning the local log with the source leader's.
    pub const LOG_ALIGNMENT: i8 = 0;
    /// Bumping the local leader epoch to the source's.
    pub const EPOCH_FENCING: i8 = 1;
    /// Recovering from an unclean leader election on the source.
    pub const ULE_RECOVERY: i8 = 2;
    /// Mirroring.
    pub const MIRRORING: i8 = 3;
    /// Pausing (transient).
    pub const PAUSING: i8 = 4;
    /// Paused.
    pub const PAUSED: i8 = 5;
    /// Stopping (transient).
    pub const STOPPING: i8 = 6;
    /// Stopped: the topic is writable.
    pub const STOPPED: i8 = 7;
    /// Failed; retryable or not.
    pub const FAILED: i8 = 8;
    /// Unknown or not recorded.
    pub const UNKNOWN: i8 = -1;
}

/// `MirrorPartitionStateKey`: which mirrored partition a state belongs to.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct MirrorPartitionStateKey {
    /// `MirrorName`: the cluster mirror.
    pub mirror_name: String,
    /// `TopicId`.
    pub topic_id: Uuid,
    /// `Partition`.
    pub partition: i32,
}
wire_message!(MirrorPartitionStateKey, MIRROR_PARTITION_STATE_KEY, {
    mirror_name, topic_id, partition
});

/// `MirrorPartitionStateValue`: the state of a mirrored partition, written on every transition.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct MirrorPartitionStateValue {
    /// `State`: one of [`state_code`].
    pub state: i8,
    /// `LeaderEpoch`: the highest leader epoch seen, or -1 (default).
    pub leader_epoch: i32,
    /// `StateEpoch`: incremented on every transition (default 0).
    pub state_epoch: i32,
    /// `ErrorMessage`: why the partition FAILED, or null (default).
    pub error_message: Option<String>,
    /// `RetryAttempt`: automatic retries while FAILED, -1 for a non-retryable failure.
    pub retry_attempt: i16,
    /// `PreviousState`: the state before this transition, -1 (UNKNOWN, default) if not recorded.
    pub previous_state: i8,
}
wire_message!(MirrorPartitionStateValue, MIRROR_PARTITION_STATE_VALUE, {
    state, leader_epoch, state_epoch, error_message, retry_attempt, previous_state
});

/// `LastMirrorEpochsKey`: which mirrored partition a last mirror epoch belongs to.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct LastMirrorEpochsKey {
    /// `MirrorName`.
    pub mirror_name: String,
    /// `TopicId`.
    pub topic_id: Uuid,
    /// `Partition`.
    pub partition: i32,
}
wire_message!(LastMirrorEpochsKey, LAST_MIRROR_EPOCHS_KEY, {
    mirror_name, topic_id, partition
});

/// `LastMirrorEpochsValue`: the partition's last mirrored leader epoch (for failback).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct LastMirrorEpochsValue {
    /// `LastMirrorEpoch`.
    pub last_mirror_epoch: i32,
}
wire_message!(LastMirrorEpochsValue, LAST_MIRROR_EPOCHS_VALUE, {
    last_mirror_epoch
});

/// A `__mirror_state` key of the prototype, told apart by its `int16` record type.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub enum MirrorStateKey {
    /// Record type 2.
    PartitionState(MirrorPartitionStateKey),
    /// Record type 1.
    LastMirrorEpochs(LastMirrorEpochsKey),
}

/// A `__mirror_state` value of the prototype; which one is decided by its key.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub enum MirrorStateValue {
    /// The value of a [`MirrorStateKey::PartitionState`].
    PartitionState(MirrorPartitionStateValue),
    /// The value of a [`MirrorStateKey::LastMirrorEpochs`].
    LastMirrorEpochs(LastMirrorEpochsValue),
}

impl MirrorStateKey {
    /// The record key's bytes: `int16` record type, then the key at version 0.
    pub fn encode(&self) -> Result<Vec<u8>, EncodeError> {
        match self {
            MirrorStateKey::PartitionState(k) => framing::encode_key(k),
            MirrorStateKey::LastMirrorEpochs(k) => framing::encode_key(k),
        }
    }

    /// Decodes a record key.
    pub fn decode(bytes: &[u8]) -> Result<Self, DecodeError> {
        let (record_type, body) = framing::split_prefix(bytes, "__mirror_state key type")?;
        match Some(record_type) {
            t if t == MIRROR_PARTITION_STATE_KEY.kind.api_key() => Ok(
                MirrorStateKey::PartitionState(MirrorPartitionStateKey::decode(body, 0)?),
            ),
            t if t == LAST_MIRROR_EPOCHS_KEY.kind.api_key() => Ok(
                MirrorStateKey::LastMirrorEpochs(LastMirrorEpochsKey::decode(body, 0)?),
            ),
            _ => Err(DecodeError::UnknownRecordType {
                what: "__mirror_state key type",
                code: record_type,
            }),
        }
    }
}

impl MirrorStateValue {
    /// The record value's bytes: `int16` version, then the value at that version.
    pub fn encode(&self, version: i16) -> Result<Vec<u8>, EncodeError> {
        match self {
            MirrorStateValue::PartitionState(v) => framing::encode_value(v, version),
            MirrorStateValue::LastMirrorEpochs(v) => framing::encode_value(v, version),
        }
    }

    /// Decodes the value of a record whose key is `key`.
    pub fn decode(key: &MirrorStateKey, bytes: &[u8]) -> Result<Self, DecodeError> {
        let (version, body) = framing::split_prefix(bytes, "__mirror_state value version")?;
        Ok(match key {
            MirrorStateKey::PartitionState(_) => {
                MirrorStateValue::PartitionState(MirrorPartitionStateValue::decode(body, version)?)
            }
            MirrorStateKey::LastMirrorEpochs(_) => {
                MirrorStateValue::LastMirrorEpochs(LastMirrorEpochsValue::decode(body, version)?)
            }
        })
    }
}
