//! Dynamic values: any message as a tree of [`Value`]s that follows its schema, what the
//! generic codec ([`super::codec`]) reads and writes.
//!
//! A [`StructValue`] holds one value per field of its schema, every field of every version, in
//! schema order: a field absent at the version being written must hold its default (or be
//! `ignorable`), and decoding fills absent fields with their defaults, as Kafka's generated
//! classes do. Tagged fields the schema does not know at the version read are kept as
//! [`RawTaggedField`]s and written back unchanged.

use std::fmt;

use super::error::ShapeError;
use super::schema::{FieldDefault, FieldSchema, FieldType};
use crate::types::TopicId;

/// One value of a field.
#[derive(Clone, PartialEq, Debug)]
pub enum Value {
    /// `bool`.
    Bool(bool),
    /// `int8`.
    Int8(i8),
    /// `int16`.
    Int16(i16),
    /// `uint16`.
    Uint16(u16),
    /// `int32`.
    Int32(i32),
    /// `uint32`.
    Uint32(u32),
    /// `int64`.
    Int64(i64),
    /// `float64`.
    Float64(f64),
    /// `uuid`.
    Uuid(Uuid),
    /// `string`.
    String(String),
    /// `bytes`.
    Bytes(Vec<u8>),
    /// A struct.
    Struct(StructValue),
    /// An array.
    Array(Vec<Value>),
    /// Null (a nullable string, bytes, array or struct).
    Null,
}

impl Value {
    /// The value's type name, for error messages.
    pub const fn type_name(&self) -> &'static str {
        match self {
            Value::Bool(_) => "bool",
            Value::Int8(_) => "int8",
            Value::Int16(_) => "int16",
            Value::Uint16(_) => "uint16",
            Value::Int32(_) => "int32",
            Value::Uint32(_) => "uint32",
            Value::Int64(_) => "int64",
            Value::Float64(_) => "float64",
            Value::Uuid(_) => "uuid",
            Value::String(_) => "string",
            Value::Bytes(_) => "bytes",
            Value::Struct(_) => "struct",
            Value::Array(_) => "array",
            Value::Null => "null",
        }
    }

    /// The default of a field (its `default`, or its type's own).
    pub fn default_of(field: &FieldSchema) -> Value {
        match (field.default, field.ty) {
            (FieldDefault::Null, _) => Value::Null,
            // Schema validation keeps integer defaults within their type; a value out of range
            // would only come from an unvalidated schema and falls back to the type's zero.
            (FieldDefault::Int(v), FieldType::Int8) => Value::Int8(i8::try_from(v).unwrap_or(0)),
            (FieldDefault::Int(v), FieldType::Int16) => Value::Int16(i16::try_from(v).unwrap_or(0)),
            (FieldDefault::Int(v), FieldType::Uint16) => {
                Value::Uint16(u16::try_from(v).unwrap_or(0))
            }
            (FieldDefault::Int(v), FieldType::Int32) => Value::Int32(i32::try_from(v).unwrap_or(0)),
            (FieldDefault::Int(v), FieldType::Uint32) => {
                Value::Uint32(u32::try_from(v).unwrap_or(0))
            }
            (FieldDefault::Int(v), FieldType::Int64) => Value::Int64(v),
            (FieldDefault::Float(v), FieldType::Float64) => Value::Float64(v),
            (FieldDefault::Bool(v), FieldType::Bool) => Value::Bool(v),
            (FieldDefault::Str(s), FieldType::String) => Value::String(s.to_owned()),
            (_, ty) => Value::zero(&ty),
        }
    }

    /// The type's own default: 0, false, "", empty bytes or array, the zero uuid, a struct of
    /// defaults.
    pub fn zero(ty: &FieldType) -> Value {
        match ty {
            FieldType::Bool => Value::Bool(false),
            FieldType::Int8 => Value::Int8(0),
            FieldType::Int16 => Value::Int16(0),
            FieldType::Uint16 => Value::Uint16(0),
            FieldType::Int32 => Value::Int32(0),
            FieldType::Uint32 => Value::Uint32(0),
            FieldType::Int64 => Value::Int64(0),
            FieldType::Float64 => Value::Float64(0.0),
            FieldType::Uuid => Value::Uuid(Uuid::ZERO),
            FieldType::String => Value::String(String::new()),
            FieldType::Bytes => Value::Bytes(Vec::new()),
            FieldType::Struct(s) => Value::Struct(StructValue::defaults(s.fields)),
            FieldType::Array(_) => Value::Array(Vec::new()),
        }
    }
}

/// A tagged field this schema does not know, kept as its bytes (Kafka's `RawTaggedField`).
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct RawTaggedField {
    /// The tag.
    pub tag: u32,
    /// The field's bytes, without the tag and size.
    pub data: Vec<u8>,
}

/// The value of a struct (or of a whole message): one value per schema field, and any
/// unknown tagged fields.
#[derive(Clone, PartialEq, Debug, Default)]
pub struct StructValue {
    /// One value per field of the schema, in schema order.
    pub fields: Vec<Value>,
    /// Tagged fields unknown at the version read, in tag order.
    pub unknown_tagged_fields: Vec<RawTaggedField>,
}

impl StructValue {
    /// A struct with these field values and no unknown tagged fields.
    pub fn new(fields: Vec<Value>) -> Self {
        StructValue {
            fields,
            unknown_tagged_fields: Vec::new(),
        }
    }

    /// Every field at its default.
    pub fn defaults(fields: &[FieldSchema]) -> Self {
        StructValue::new(fields.iter().map(Value::default_of).collect())
    }
}

/// A UUID as Kafka writes it: 16 bytes, most significant first.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Uuid(pub [u8; 16]);

impl Uuid {
    /// The zero UUID (Kafka's `Uuid.ZERO_UUID`), the default of a `uuid` field.
    pub const ZERO: Uuid = Uuid([0; 16]);
}

impl fmt::Debug for Uuid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Uuid(")?;
        for b in self.0 {
            write!(f, "{b:02x}")?;
        }
        write!(f, ")")
    }
}

impl From<TopicId> for Uuid {
    fn from(id: TopicId) -> Self {
        Uuid(id.0)
    }
}

impl From<Uuid> for TopicId {
    fn from(id: Uuid) -> Self {
        TopicId(id.0)
    }
}

/// A Rust type that stands for one wire type in a typed message struct.
pub trait WireValue: Sized {
    /// The dynamic value.
    fn to_value(&self) -> Value;
    /// From a dynamic value; `field` names it in the error.
    fn from_value(value: Value, field: &str) -> Result<Self, ShapeError>;
}

fn wrong(field: &str, expected: &'static str, found: &Value) -> ShapeError {
    ShapeError::WrongType {
        field: field.to_owned(),
        expected,
        found: found.type_name(),
    }
}

macro_rules! primitive_wire_value {
    ($($rust:ty => $variant:ident, $name:literal;)*) => {$(
        impl WireValue for $rust {
            fn to_value(&self) -> Value {
                Value::$variant(Clone::clone(self))
            }
            fn from_value(value: Value, field: &str) -> Result<Self, ShapeError> {
                match value {
                    Value::$variant(v) => Ok(v),
                    other => Err(wrong(field, $name, &other)),
                }
            }
        }
    )*};
}

primitive_wire_value! {
    bool => Bool, "bool";
    i8 => Int8, "int8";
    i16 => Int16, "int16";
    u16 => Uint16, "uint16";
    i32 => Int32, "int32";
    u32 => Uint32, "uint32";
    i64 => Int64, "int64";
    f64 => Float64, "float64";
    Uuid => Uuid, "uuid";
    String => String, "string";
}

/// A nullable field: `None` is null.
impl<T: WireValue> WireValue for Option<T> {
    fn to_value(&self) -> Value {
        match self {
            None => Value::Null,
            Some(v) => v.to_value(),
        }
    }
    fn from_value(value: Value, field: &str) -> Result<Self, ShapeError> {
        match value {
            Value::Null => Ok(None),
            v => T::from_value(v, field).map(Some),
        }
    }
}

/// An array.
impl<T: WireValue> WireValue for Vec<T> {
    fn to_value(&self) -> Value {
        Value::Array(self.iter().map(WireValue::to_value).collect())
    }
    fn from_value(value: Value, field: &str) -> Result<Self, ShapeError> {
        match value {
            Value::Array(items) => items
                .into_iter()
                .enumerate()
                .map(|(i, v)| T::from_value(v, &format!("{field}[{i}]")))
                .collect(),
            other => Err(wrong(field, "array", &other)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto_wire::versions::Versions;

    #[test]
    fn defaults_follow_the_schema() {
        let f = FieldSchema::new("A", FieldType::Int32, Versions::since(0))
            .default(FieldDefault::Int(-1));
        assert_eq!(Value::default_of(&f), Value::Int32(-1));
        let s = FieldSchema::new("S", FieldType::String, Versions::since(0))
            .nullable(Versions::since(0))
            .default(FieldDefault::Null);
        assert_eq!(Value::default_of(&s), Value::Null);
        let a = FieldSchema::new("L", FieldType::Array(&FieldType::Int8), Versions::since(0));
        assert_eq!(Value::default_of(&a), Value::Array(vec![]));
        assert_eq!(Value::zero(&FieldType::Uuid), Value::Uuid(Uuid::ZERO));
    }

    #[test]
    fn typed_conversions() {
        assert_eq!(Some(5i32).to_value(), Value::Int32(5));
        assert_eq!(None::<String>.to_value(), Value::Null);
        assert_eq!(
            Vec::<i16>::from_value(Value::Array(vec![Value::Int16(1)]), "x"),
            Ok(vec![1])
        );
        assert!(matches!(
            i32::from_value(Value::Int16(1), "x"),
            Err(ShapeError::WrongType { .. })
        ));
        assert_eq!(
            TopicId::from(Uuid::from(TopicId::from_u64(9))),
            TopicId::from_u64(9)
        );
    }
}
