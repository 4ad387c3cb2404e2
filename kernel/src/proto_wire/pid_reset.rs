//! The prototype's `MirrorPidResetRecord`: the value of the control record of a
//! `MIRROR_PID_RESET` control batch (the prototype's `ControlRecordType.MIRROR_PID_RESET` is
//! type 7), written like Kafka's other control record values (`LeaderChangeMessage`): the
//! message at its version, with no prefix, its first field repeating the version.

use super::schema::{FieldSchema, FieldType, MessageKind, MessageSchema, SchemaSource};
use super::versions::Versions;

/// The control record type of `MIRROR_PID_RESET` in the prototype (kmirror's seed uses 100).
pub const PROTOTYPE_MIRROR_PID_RESET_CONTROL_TYPE: i16 = 7;

/// `MirrorPidResetRecord` (`"type": "data"`).
pub const MIRROR_PID_RESET_RECORD: MessageSchema = MessageSchema {
    name: "MirrorPidResetRecord",
    kind: MessageKind::Data,
    valid_versions: Versions::only(0),
    flexible_versions: Versions::since(0),
    fields: &[FieldSchema::new(
        "Version",
        FieldType::Int16,
        Versions::since(0),
    )],
    source: SchemaSource::prototype(
        "clients/src/main/resources/common/message/MirrorPidResetRecord.json",
        "053f9385cf174f0148a4744da83341a7d8c5074a",
    ),
};

/// `MirrorPidResetRecord`: the control record value of a `MIRROR_PID_RESET` batch.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct MirrorPidResetRecord {
    /// `Version`: the record's version (0).
    pub version: i16,
}
wire_message!(MirrorPidResetRecord, MIRROR_PID_RESET_RECORD, { version });
