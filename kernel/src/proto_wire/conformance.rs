//! A schema of kmirror's own (not the prototype's) that exercises every rule the codec
//! implements, so the golden bytes Kafka generates cover them although every prototype message
//! has a single version: four versions (0-3), flexible from 2; every primitive type; a field
//! added in version 1 and one dropped after version 1 (`ignorable`); strings, bytes, arrays and
//! a struct that are nullable in some versions only; a field that is a fixed field in versions
//! 0-1 and a tagged field from 2; tagged fields of several types, in the message and in nested
//! structs.

use super::schema::{
    FieldDefault, FieldSchema, FieldType, MessageKind, MessageSchema, SchemaSource, StructSchema,
};
use super::versions::Versions;

const ALL: Versions = Versions::since(0);
const FLEXIBLE: Versions = Versions::since(2);

const ENTRY: StructSchema = StructSchema {
    name: "Entry",
    fields: &[
        FieldSchema::new("Key", FieldType::String, ALL),
        FieldSchema::new("Value", FieldType::Int64, ALL),
        FieldSchema::new("Extra", FieldType::Int32, FLEXIBLE).tagged(0, FLEXIBLE),
    ],
};

const INNER: StructSchema = StructSchema {
    name: "Inner",
    fields: &[
        FieldSchema::new("A", FieldType::Int32, ALL),
        FieldSchema::new("B", FieldType::String, FLEXIBLE)
            .nullable(FLEXIBLE)
            .default(FieldDefault::Null)
            .tagged(1, FLEXIBLE),
    ],
};

/// `KmirrorWireConformance`: versions 0-3, flexible from 2.
pub const CONFORMANCE: MessageSchema = MessageSchema {
    name: "KmirrorWireConformance",
    kind: MessageKind::Data,
    valid_versions: Versions::range(0, 3),
    flexible_versions: FLEXIBLE,
    fields: &[
        FieldSchema::new("Flag", FieldType::Bool, ALL),
        FieldSchema::new("Tiny", FieldType::Int8, ALL).default(FieldDefault::Int(-2)),
        FieldSchema::new("Short", FieldType::Int16, ALL),
        FieldSchema::new("Port", FieldType::Uint16, ALL).default(FieldDefault::Int(9092)),
        FieldSchema::new("Count", FieldType::Int32, ALL),
        FieldSchema::new("Big", FieldType::Uint32, Versions::since(1)),
        FieldSchema::new("Offset", FieldType::Int64, ALL).default(FieldDefault::Int(-1)),
        FieldSchema::new("Ratio", FieldType::Float64, Versions::since(1))
            .default(FieldDefault::Float(0.5)),
        FieldSchema::new("Id", FieldType::Uuid, ALL),
        FieldSchema::new("Name", FieldType::String, ALL).default(FieldDefault::Str("kmirror")),
        FieldSchema::new("Note", FieldType::String, Versions::since(1))
            .nullable(Versions::since(1))
            .default(FieldDefault::Null),
        FieldSchema::new("Payload", FieldType::Bytes, ALL),
        FieldSchema::new("MaybePayload", FieldType::Bytes, ALL)
            .nullable(ALL)
            .default(FieldDefault::Null),
        FieldSchema::new("Labels", FieldType::Array(&FieldType::String), ALL),
        FieldSchema::new("MaybeCounts", FieldType::Array(&FieldType::Int32), ALL)
            .nullable(Versions::since(1))
            .default(FieldDefault::Implicit),
        FieldSchema::new("Entries", FieldType::Array(&FieldType::Struct(&ENTRY)), ALL),
        FieldSchema::new("Nested", FieldType::Struct(&INNER), Versions::since(1))
            .nullable(Versions::since(3)),
        FieldSchema::new("Hint", FieldType::String, ALL).tagged(0, FLEXIBLE),
        FieldSchema::new("Legacy", FieldType::Int32, Versions::range(0, 1)).ignorable(),
        FieldSchema::new("TaggedId", FieldType::Uuid, Versions::since(3))
            .tagged(5, Versions::since(3)),
        FieldSchema::new("TaggedCount", FieldType::Int32, FLEXIBLE)
            .tagged(2, FLEXIBLE)
            .default(FieldDefault::Int(7)),
    ],
    source: SchemaSource::Kmirror,
};
