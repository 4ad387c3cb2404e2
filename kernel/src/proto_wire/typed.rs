//! Typed message structs: each is a plain Rust struct whose fields follow its schema's order,
//! converted to and from a [`StructValue`] so that the generic codec writes it.
//!
//! A broker author uses [`WireMessage::encode`] and [`WireMessage::decode`] (and, for
//! `__mirror_state` records, [`super::framing`]); `Default::default()` of each struct is its
//! schema's defaults. Tagged fields unknown to the schema are dropped by the typed structs
//! (the dynamic [`StructValue`] keeps them).

use super::codec;
use super::error::{DecodeError, EncodeError, ShapeError};
use super::schema::{FieldSchema, MessageSchema};
use super::value::StructValue;

/// A typed struct mirroring one struct schema.
pub trait WireStruct: Sized {
    /// The fields of the schema the struct mirrors, in order.
    const FIELDS: &'static [FieldSchema];

    /// The dynamic value.
    fn to_struct_value(&self) -> StructValue;

    /// From a dynamic value (unknown tagged fields are dropped); `path` names it in errors.
    fn from_struct_value(value: StructValue, path: &str) -> Result<Self, ShapeError>;
}

/// A typed message: a [`WireStruct`] with a [`MessageSchema`].
pub trait WireMessage: WireStruct {
    /// The message's schema.
    const SCHEMA: &'static MessageSchema;

    /// The message body at `version`.
    fn encode(&self, version: i16) -> Result<Vec<u8>, EncodeError> {
        codec::encode(Self::SCHEMA, version, &self.to_struct_value())
    }

    /// Decodes a message body at `version`; it must be all of `bytes`.
    fn decode(bytes: &[u8], version: i16) -> Result<Self, DecodeError> {
        let value = codec::decode(Self::SCHEMA, version, bytes)?;
        Ok(Self::from_struct_value(value, Self::SCHEMA.name)?)
    }
}

/// Implements [`WireStruct`], [`super::value::WireValue`] and `Default` (the schema's
/// defaults) for a struct whose fields are listed in schema order.
macro_rules! wire_struct {
    ($ty:ident, $fields:expr, { $($field:ident),* $(,)? }) => {
        impl $crate::proto_wire::typed::WireStruct for $ty {
            const FIELDS: &'static [$crate::proto_wire::schema::FieldSchema] = $fields;

            fn to_struct_value(&self) -> $crate::proto_wire::value::StructValue {
                $crate::proto_wire::value::StructValue::new(vec![
                    $($crate::proto_wire::value::WireValue::to_value(&self.$field)),*
                ])
            }

            fn from_struct_value(
                value: $crate::proto_wire::value::StructValue,
                path: &str,
            ) -> Result<Self, $crate::proto_wire::error::ShapeError> {
                let fields = <Self as $crate::proto_wire::typed::WireStruct>::FIELDS;
                if value.fields.len() != fields.len() {
                    return Err($crate::proto_wire::error::ShapeError::FieldCount {
                        field: path.to_owned(),
                        expected: fields.len(),
                        found: value.fields.len(),
                    });
                }
                let mut values = value.fields.into_iter().zip(fields.iter());
                Ok($ty {
                    $($field: {
                        let (v, f) = values.next().ok_or_else(|| {
                            $crate::proto_wire::error::ShapeError::FieldCount {
                                field: path.to_owned(),
                                expected: fields.len(),
                                found: 0,
                            }
                        })?;
                        $crate::proto_wire::value::WireValue::from_value(
                            v,
                            &format!("{path}.{}", f.name),
                        )?
                    }),*
                })
            }
        }

        impl $crate::proto_wire::value::WireValue for $ty {
            fn to_value(&self) -> $crate::proto_wire::value::Value {
                $crate::proto_wire::value::Value::Struct(
                    $crate::proto_wire::typed::WireStruct::to_struct_value(self),
                )
            }

            fn from_value(
                value: $crate::proto_wire::value::Value,
                field: &str,
            ) -> Result<Self, $crate::proto_wire::error::ShapeError> {
                match value {
                    $crate::proto_wire::value::Value::Struct(s) => {
                        $crate::proto_wire::typed::WireStruct::from_struct_value(s, field)
                    }
                    other => Err($crate::proto_wire::error::ShapeError::WrongType {
                        field: field.to_owned(),
                        expected: "struct",
                        found: other.type_name(),
                    }),
                }
            }
        }

        /// The schema's defaults.
        impl Default for $ty {
            fn default() -> Self {
                let fields = <Self as $crate::proto_wire::typed::WireStruct>::FIELDS;
                <Self as $crate::proto_wire::typed::WireStruct>::from_struct_value(
                    $crate::proto_wire::value::StructValue::defaults(fields),
                    stringify!($ty),
                )
                .expect("a typed struct lists its schema's fields in order")
            }
        }
    };
}

/// [`wire_struct!`] plus [`WireMessage`] for a top-level message with schema `$schema`.
macro_rules! wire_message {
    ($ty:ident, $schema:expr, { $($field:ident),* $(,)? }) => {
        wire_struct!($ty, $schema.fields, { $($field),* });

        impl $crate::proto_wire::typed::WireMessage for $ty {
            const SCHEMA: &'static $crate::proto_wire::schema::MessageSchema = &$schema;
        }
    };
}
