//! The generic codec: writes and reads a [`StructValue`] by walking its [`MessageSchema`] at
//! one version, by the rules of Kafka's message generator (`MessageDataGenerator`):
//!
//! - a version outside `validVersions` is refused;
//! - a field whose `versions` exclude the version is not written; if its value is not the
//!   default, writing fails unless the field is `ignorable`; reading gives it its default;
//! - in `flexibleVersions`, strings, bytes and arrays take compact (unsigned varint) lengths and
//!   every struct, the message included, ends with its tagged fields: an unsigned varint count,
//!   then per field in increasing tag order an unsigned varint tag, an unsigned varint size and
//!   the value; a field in its `taggedVersions` is written there only when it differs from its
//!   default, and is never among the fixed fields;
//! - null is allowed only in `nullableVersions`: length -1 (0 compact) for strings, bytes and
//!   arrays; for a struct an `int8` -1, and 1 before a present one;
//! - strings are at most 32767 bytes of UTF-8 in every encoding; an array's count may not
//!   exceed the bytes left (Kafka's "Tried to allocate a collection of size ...").
//!
//! Decoding is stricter than Kafka's generated code in two ways, both about bytes Kafka never
//! writes: a known tagged field must fill exactly the size its header declares, and bytes left
//! after the message are an error.

use super::error::{DecodeError, EncodeError, ShapeError};
use super::primitives::{LengthPrefix, ReadError, WireReader, WireWriter};
use super::schema::{FieldSchema, FieldType, MessageSchema};
use super::value::{RawTaggedField, StructValue, Uuid, Value};

/// The longest string Kafka writes or reads, in bytes of UTF-8.
pub const MAX_STRING_LEN: usize = 0x7fff;

/// Encodes `value` as `schema` at `version`: the message body, no header or prefix.
pub fn encode(
    schema: &MessageSchema,
    version: i16,
    value: &StructValue,
) -> Result<Vec<u8>, EncodeError> {
    if !schema.valid_versions.contains(version) {
        return Err(EncodeError::UnsupportedVersion {
            message: schema.name,
            version,
            valid: schema.valid_versions.to_string(),
        });
    }
    let mut cx = Cx {
        version,
        flexible: schema.flexible_versions.contains(version),
        path: Path::new(schema.name),
    };
    let mut w = WireWriter::new();
    cx.write_struct(&mut w, schema.fields, value)?;
    Ok(w.into_bytes())
}

/// Decodes the body of a `schema` message at `version`, which must be all of `bytes`.
pub fn decode(
    schema: &MessageSchema,
    version: i16,
    bytes: &[u8],
) -> Result<StructValue, DecodeError> {
    if !schema.valid_versions.contains(version) {
        return Err(DecodeError::UnsupportedVersion {
            message: schema.name,
            version,
            valid: schema.valid_versions.to_string(),
        });
    }
    let mut cx = Cx {
        version,
        flexible: schema.flexible_versions.contains(version),
        path: Path::new(schema.name),
    };
    let mut r = WireReader::new(bytes);
    let value = cx.read_struct(&mut r, schema.fields)?;
    if r.remaining() > 0 {
        return Err(DecodeError::TrailingBytes {
            message: schema.name,
            count: r.remaining(),
        });
    }
    Ok(value)
}

/// Where in the message the codec is, rendered only for errors.
struct Path {
    segments: Vec<Segment>,
}

enum Segment {
    Field(&'static str),
    Index(usize),
}

impl Path {
    fn new(message: &'static str) -> Self {
        Path {
            segments: vec![Segment::Field(message)],
        }
    }

    fn render(&self) -> String {
        let mut out = String::new();
        // The message's own name is left out unless nothing else is there.
        let skip = usize::from(self.segments.len() > 1);
        for segment in &self.segments[skip..] {
            match segment {
                Segment::Field(name) => {
                    if !out.is_empty() {
                        out.push('.');
                    }
                    out.push_str(name);
                }
                Segment::Index(i) => out.push_str(&format!("[{i}]")),
            }
        }
        out
    }
}

struct Cx {
    version: i16,
    flexible: bool,
    path: Path,
}

impl Cx {
    fn string_prefix(&self) -> LengthPrefix {
        if self.flexible {
            LengthPrefix::Compact
        } else {
            LengthPrefix::Int16
        }
    }

    fn bytes_prefix(&self) -> LengthPrefix {
        if self.flexible {
            LengthPrefix::Compact
        } else {
            LengthPrefix::Int32
        }
    }

    fn shape(&self, expected: &'static str, found: &Value) -> ShapeError {
        ShapeError::WrongType {
            field: self.path.render(),
            expected,
            found: found.type_name(),
        }
    }

    fn too_long(&self, len: usize, max: usize) -> EncodeError {
        EncodeError::TooLong {
            field: self.path.render(),
            len,
            max,
        }
    }

    fn read_error(&self, e: ReadError) -> DecodeError {
        match e {
            ReadError::Truncated { needed, available } => DecodeError::Truncated {
                field: self.path.render(),
                needed,
                available,
            },
            ReadError::InvalidVarint => DecodeError::InvalidVarint {
                field: self.path.render(),
            },
        }
    }

    fn write_struct(
        &mut self,
        w: &mut WireWriter,
        fields: &'static [FieldSchema],
        value: &StructValue,
    ) -> Result<(), EncodeError> {
        if value.fields.len() != fields.len() {
            return Err(ShapeError::FieldCount {
                field: self.path.render(),
                expected: fields.len(),
                found: value.fields.len(),
            }
            .into());
        }
        let mut tagged: Vec<(u32, Vec<u8>)> = Vec::new();
        for (field, v) in fields.iter().zip(&value.fields) {
            self.path.segments.push(Segment::Field(field.name));
            if !field.versions.contains(self.version) {
                if !field.ignorable && *v != Value::default_of(field) {
                    return Err(EncodeError::NonDefaultFieldNotInVersion {
                        field: self.path.render(),
                        version: self.version,
                    });
                }
            } else if let (true, Some(tag)) = (field.is_tagged_at(self.version), field.tag) {
                if *v != Value::default_of(field) {
                    let mut sub = WireWriter::new();
                    self.write_value(&mut sub, field, &field.ty, true, v)?;
                    tagged.push((tag.tag, sub.into_bytes()));
                }
            } else {
                self.write_value(w, field, &field.ty, true, v)?;
            }
            self.path.segments.pop();
        }
        if !self.flexible {
            if !value.unknown_tagged_fields.is_empty() {
                return Err(EncodeError::NonDefaultFieldNotInVersion {
                    field: format!("{} (tagged fields)", self.path.render()),
                    version: self.version,
                });
            }
            return Ok(());
        }
        for raw in &value.unknown_tagged_fields {
            if tagged.iter().any(|(tag, _)| *tag == raw.tag) {
                return Err(EncodeError::DuplicateTag {
                    field: self.path.render(),
                    tag: raw.tag,
                });
            }
            tagged.push((raw.tag, raw.data.clone()));
        }
        tagged.sort_by_key(|(tag, _)| *tag);
        let count = u32::try_from(tagged.len()).map_err(|_| self.too_long(tagged.len(), 0))?;
        w.unsigned_varint(count);
        for (tag, data) in tagged {
            w.unsigned_varint(tag);
            let size = u32::try_from(data.len())
                .map_err(|_| self.too_long(data.len(), u32::MAX as usize))?;
            w.unsigned_varint(size);
            w.raw(&data);
        }
        Ok(())
    }

    /// Writes one value of type `ty`; `top` is true for the field itself (which may be
    /// nullable), false for array elements (never null).
    fn write_value(
        &mut self,
        w: &mut WireWriter,
        field: &FieldSchema,
        ty: &FieldType,
        top: bool,
        v: &Value,
    ) -> Result<(), EncodeError> {
        let nullable = top && field.nullable_versions.contains(self.version);
        match (ty, v) {
            (ty, Value::Null) if ty.can_be_null() => {
                if !nullable {
                    return Err(EncodeError::NullNotAllowed {
                        field: self.path.render(),
                        version: self.version,
                    });
                }
                match ty {
                    FieldType::String => w.length(self.string_prefix(), None),
                    FieldType::Bytes | FieldType::Array(_) => w.length(self.bytes_prefix(), None),
                    _ => {
                        w.int8(-1);
                        Ok(())
                    }
                }
                .map_err(|max| self.too_long(0, max))?;
            }
            (FieldType::Bool, Value::Bool(b)) => w.bool(*b),
            (FieldType::Int8, Value::Int8(n)) => w.int8(*n),
            (FieldType::Int16, Value::Int16(n)) => w.int16(*n),
            (FieldType::Uint16, Value::Uint16(n)) => w.uint16(*n),
            (FieldType::Int32, Value::Int32(n)) => w.int32(*n),
            (FieldType::Uint32, Value::Uint32(n)) => w.uint32(*n),
            (FieldType::Int64, Value::Int64(n)) => w.int64(*n),
            (FieldType::Float64, Value::Float64(n)) => w.float64(*n),
            (FieldType::Uuid, Value::Uuid(Uuid(bytes))) => w.uuid(bytes),
            (FieldType::String, Value::String(s)) => {
                if s.len() > MAX_STRING_LEN {
                    return Err(self.too_long(s.len(), MAX_STRING_LEN));
                }
                w.length(self.string_prefix(), Some(s.len()))
                    .map_err(|max| self.too_long(s.len(), max))?;
                w.raw(s.as_bytes());
            }
            (FieldType::Bytes, Value::Bytes(b)) => {
                w.length(self.bytes_prefix(), Some(b.len()))
                    .map_err(|max| self.too_long(b.len(), max))?;
                w.raw(b);
            }
            (FieldType::Array(element), Value::Array(items)) => {
                w.length(self.bytes_prefix(), Some(items.len()))
                    .map_err(|max| self.too_long(items.len(), max))?;
                for (i, item) in items.iter().enumerate() {
                    self.path.segments.push(Segment::Index(i));
                    self.write_value(w, field, element, false, item)?;
                    self.path.segments.pop();
                }
            }
            (FieldType::Struct(s), Value::Struct(sv)) => {
                if nullable {
                    w.int8(1);
                }
                self.write_struct(w, s.fields, sv)?;
            }
            (ty, v) => {
                return Err(self
                    .shape(ty.primitive_name().unwrap_or(type_kind(ty)), v)
                    .into())
            }
        }
        Ok(())
    }

    fn read_struct(
        &mut self,
        r: &mut WireReader<'_>,
        fields: &'static [FieldSchema],
    ) -> Result<StructValue, DecodeError> {
        let mut value = StructValue::defaults(fields);
        for (field, slot) in fields.iter().zip(value.fields.iter_mut()) {
            if field.versions.contains(self.version) && !field.is_tagged_at(self.version) {
                self.path.segments.push(Segment::Field(field.name));
                *slot = self.read_value(r, field, &field.ty, true)?;
                self.path.segments.pop();
            }
        }
        if !self.flexible {
            return Ok(value);
        }
        let count = r.unsigned_varint().map_err(|e| self.read_error(e))?;
        let mut previous: Option<u32> = None;
        for _ in 0..count {
            let tag = r.unsigned_varint().map_err(|e| self.read_error(e))?;
            if let Some(previous) = previous.filter(|p| tag <= *p) {
                return Err(DecodeError::TagOutOfOrder {
                    field: self.path.render(),
                    tag,
                    previous,
                });
            }
            previous = Some(tag);
            let size = r.unsigned_varint().map_err(|e| self.read_error(e))?;
            let data = usize::try_from(size)
                .map_err(|_| ReadError::InvalidVarint)
                .and_then(|size| r.take(size))
                .map_err(|e| self.read_error(e))?;
            let known = fields.iter().position(|f| {
                f.versions.contains(self.version)
                    && f.is_tagged_at(self.version)
                    && f.tag.is_some_and(|t| t.tag == tag)
            });
            match known {
                Some(i) => {
                    let field = &fields[i];
                    self.path.segments.push(Segment::Field(field.name));
                    let mut sub = WireReader::new(data);
                    value.fields[i] = self.read_value(&mut sub, field, &field.ty, true)?;
                    if sub.remaining() > 0 {
                        return Err(DecodeError::TaggedFieldSize {
                            field: self.path.render(),
                            declared: data.len(),
                            used: data.len() - sub.remaining(),
                        });
                    }
                    self.path.segments.pop();
                }
                None => value.unknown_tagged_fields.push(RawTaggedField {
                    tag,
                    data: data.to_vec(),
                }),
            }
        }
        Ok(value)
    }

    /// A length for a string, bytes or array: `None` for null (refused unless nullable).
    fn read_length(
        &self,
        r: &mut WireReader<'_>,
        prefix: LengthPrefix,
        nullable: bool,
    ) -> Result<Option<usize>, DecodeError> {
        let len = r.length(prefix).map_err(|e| self.read_error(e))?;
        match len {
            -1 if nullable => Ok(None),
            -1 => Err(DecodeError::NullNotAllowed {
                field: self.path.render(),
            }),
            len => usize::try_from(len)
                .ok()
                .filter(|n| *n <= r.remaining())
                .map(Some)
                .ok_or(DecodeError::InvalidLength {
                    field: self.path.render(),
                    len,
                }),
        }
    }

    fn read_value(
        &mut self,
        r: &mut WireReader<'_>,
        field: &FieldSchema,
        ty: &FieldType,
        top: bool,
    ) -> Result<Value, DecodeError> {
        let nullable = top && field.nullable_versions.contains(self.version);
        let read = |cx: &Self, e: ReadError| cx.read_error(e);
        Ok(match ty {
            FieldType::Bool => Value::Bool(r.bool().map_err(|e| read(self, e))?),
            FieldType::Int8 => Value::Int8(r.int8().map_err(|e| read(self, e))?),
            FieldType::Int16 => Value::Int16(r.int16().map_err(|e| read(self, e))?),
            FieldType::Uint16 => Value::Uint16(r.uint16().map_err(|e| read(self, e))?),
            FieldType::Int32 => Value::Int32(r.int32().map_err(|e| read(self, e))?),
            FieldType::Uint32 => Value::Uint32(r.uint32().map_err(|e| read(self, e))?),
            FieldType::Int64 => Value::Int64(r.int64().map_err(|e| read(self, e))?),
            FieldType::Float64 => Value::Float64(r.float64().map_err(|e| read(self, e))?),
            FieldType::Uuid => Value::Uuid(Uuid(r.uuid().map_err(|e| read(self, e))?)),
            FieldType::String => {
                let len = r.length(self.string_prefix()).map_err(|e| read(self, e))?;
                match len {
                    -1 if nullable => Value::Null,
                    -1 => {
                        return Err(DecodeError::NullNotAllowed {
                            field: self.path.render(),
                        })
                    }
                    len if len < 0 || len > MAX_STRING_LEN as i64 => {
                        return Err(DecodeError::InvalidLength {
                            field: self.path.render(),
                            len,
                        })
                    }
                    len => {
                        // 0 <= len <= 0x7fff here.
                        let bytes = r.take(len as usize).map_err(|e| read(self, e))?;
                        let s =
                            std::str::from_utf8(bytes).map_err(|_| DecodeError::InvalidUtf8 {
                                field: self.path.render(),
                            })?;
                        Value::String(s.to_owned())
                    }
                }
            }
            FieldType::Bytes => match self.read_length(r, self.bytes_prefix(), nullable)? {
                None => Value::Null,
                Some(n) => Value::Bytes(r.take(n).map_err(|e| read(self, e))?.to_vec()),
            },
            FieldType::Array(element) => {
                match self.read_length(r, self.bytes_prefix(), nullable)? {
                    None => Value::Null,
                    Some(n) => {
                        // n <= bytes left, so this allocation is bounded by the input.
                        let mut items = Vec::with_capacity(n);
                        for i in 0..n {
                            self.path.segments.push(Segment::Index(i));
                            items.push(self.read_value(r, field, element, false)?);
                            self.path.segments.pop();
                        }
                        Value::Array(items)
                    }
                }
            }
            FieldType::Struct(s) => {
                if nullable && r.int8().map_err(|e| read(self, e))? < 0 {
                    Value::Null
                } else {
                    Value::Struct(self.read_struct(r, s.fields)?)
                }
            }
        })
    }
}

const fn type_kind(ty: &FieldType) -> &'static str {
    match ty {
        FieldType::Struct(_) => "struct",
        FieldType::Array(_) => "array",
        _ => "primitive",
    }
}
