//! The prototype's per-mirror `__mirror_state` records of an earlier design, keyed by a
//! system-generated mirror id instead of (mirror name, topic id, partition):
//! `LastMirroredOffsetsKey` -> `LastMirroredOffsetsValue` (the last mirrored offset of every
//! partition of the mirror) and `MirrorTopicsKey` (the mirror's topics; no value schema is in
//! the prototype's files).
//!
//! They are transcribed from the prototype's message files; their record types collide with
//! the current keys' (`LastMirroredOffsetsKey` is type 1 like `LastMirrorEpochsKey`), so
//! [`super::state_records::MirrorStateKey`] does not decode them: use
//! [`super::framing::decode_key`] with the type expected.

use super::schema::{
    FieldDefault, FieldSchema, FieldType, MessageKind, MessageSchema, SchemaSource, StructSchema,
};
use super::value::Uuid;
use super::versions::Versions;

const V0: Versions = Versions::since(0);

/// `LastMirroredOffsetsKey` (coordinator key, record type 1).
pub const LAST_MIRRORED_OFFSETS_KEY: MessageSchema = MessageSchema {
    name: "LastMirroredOffsetsKey",
    kind: MessageKind::CoordinatorKey { api_key: 1 },
    valid_versions: Versions::only(0),
    flexible_versions: Versions::NONE,
    fields: &[FieldSchema::new(
        "MirrorId",
        FieldType::Uuid,
        Versions::only(0),
    )],
    source: SchemaSource::prototype(
        "mirror-coordinator/src/main/resources/common/message/LastMirroredOffsetsKey.json",
        "da82b929f8dd1e885a9797d92889b25a777a70de",
    ),
};

const LAST_MIRRORED_OFFSETS_PARTITION: StructSchema = StructSchema {
    name: "Partition",
    fields: &[
        FieldSchema::new("PartitionIndex", FieldType::Int32, V0),
        FieldSchema::new("LastMirroredOffset", FieldType::Int64, V0),
        FieldSchema::new("LeaderEpoch", FieldType::Int32, V0).default(FieldDefault::Int(-1)),
    ],
};

const LAST_MIRRORED_OFFSETS_TOPIC: StructSchema = StructSchema {
    name: "Topic",
    fields: &[
        FieldSchema::new("Name", FieldType::String, Versions::only(0)),
        FieldSchema::new(
            "Partitions",
            FieldType::Array(&FieldType::Struct(&LAST_MIRRORED_OFFSETS_PARTITION)),
            V0,
        ),
    ],
};

/// `LastMirroredOffsetsValue` (coordinator value, record type 1).
pub const LAST_MIRRORED_OFFSETS_VALUE: MessageSchema = MessageSchema {
    name: "LastMirroredOffsetsValue",
    kind: MessageKind::CoordinatorValue { api_key: 1 },
    valid_versions: Versions::only(0),
    flexible_versions: V0,
    fields: &[FieldSchema::new(
        "Topics",
        FieldType::Array(&FieldType::Struct(&LAST_MIRRORED_OFFSETS_TOPIC)),
        V0,
    )],
    source: SchemaSource::prototype(
        "mirror-coordinator/src/main/resources/common/message/LastMirroredOffsetsValue.json",
        "f5cac4fd737ab0e7c9762ac878ecf32370e2f4b8",
    ),
};

/// `MirrorTopicsKey` (coordinator key, record type 0).
pub const MIRROR_TOPICS_KEY: MessageSchema = MessageSchema {
    name: "MirrorTopicsKey",
    kind: MessageKind::CoordinatorKey { api_key: 0 },
    valid_versions: Versions::only(0),
    flexible_versions: Versions::NONE,
    fields: &[FieldSchema::new(
        "MirrorId",
        FieldType::Uuid,
        Versions::only(0),
    )],
    source: SchemaSource::prototype(
        "mirror-coordinator/src/main/resources/common/message/MirrorTopicsKey.json",
        "da82b929f8dd1e885a9797d92889b25a777a70de",
    ),
};

/// `LastMirroredOffsetsKey`: the mirror whose offsets the value holds.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct LastMirroredOffsetsKey {
    /// `MirrorId`: the system-generated mirror id.
    pub mirror_id: Uuid,
}
wire_message!(LastMirroredOffsetsKey, LAST_MIRRORED_OFFSETS_KEY, {
    mirror_id
});

/// `LastMirroredOffsetsValue`: the last mirrored offset of each partition of the mirror.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct LastMirroredOffsetsValue {
    /// `Topics`.
    pub topics: Vec<LastMirroredOffsetsTopic>,
}
wire_message!(LastMirroredOffsetsValue, LAST_MIRRORED_OFFSETS_VALUE, {
    topics
});

/// `LastMirroredOffsetsValue.Topics[]`.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct LastMirroredOffsetsTopic {
    /// `Name`: the topic name.
    pub name: String,
    /// `Partitions`.
    pub partitions: Vec<LastMirroredOffsetsPartition>,
}
wire_struct!(LastMirroredOffsetsTopic, LAST_MIRRORED_OFFSETS_TOPIC.fields, { name, partitions });

/// `LastMirroredOffsetsValue.Topics[].Partitions[]`.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct LastMirroredOffsetsPartition {
    /// `PartitionIndex`.
    pub partition_index: i32,
    /// `LastMirroredOffset`.
    pub last_mirrored_offset: i64,
    /// `LeaderEpoch`: the leader epoch of the last mirrored offset, -1 (default) if unknown.
    pub leader_epoch: i32,
}
wire_struct!(LastMirroredOffsetsPartition, LAST_MIRRORED_OFFSETS_PARTITION.fields, {
    partition_index, last_mirrored_offset, leader_epoch
});

/// `MirrorTopicsKey`: the mirror whose topic list the (unpublished) value holds.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct MirrorTopicsKey {
    /// `MirrorId`.
    pub mirror_id: Uuid,
}
wire_message!(MirrorTopicsKey, MIRROR_TOPICS_KEY, { mirror_id });
