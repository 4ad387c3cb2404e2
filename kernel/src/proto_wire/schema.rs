//! A message's schema as Rust data: the transcription of one message JSON file of Kafka's
//! message generator (`clients/src/main/resources/common/message/*.json` and the coordinator
//! records beside it).
//!
//! Only what decides the bytes is kept: names, types, `validVersions`, `flexibleVersions`,
//! each field's `versions`, `nullableVersions`, `taggedVersions` and `tag`, `default` and
//! `ignorable`. Documentation (`about`), `entityType` and `mapKey` change no byte and are left
//! out.

use super::versions::Versions;

/// Where a schema was transcribed from.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum SchemaSource {
    /// A message JSON file of the KIP-1279 authors' prototype.
    Prototype {
        /// The GitHub repository (`showuon/kafka`).
        repository: &'static str,
        /// The file's path in the repository.
        path: &'static str,
        /// The commit of the version transcribed.
        commit: &'static str,
    },
    /// A schema of kmirror's own (the conformance schema exercising every rule).
    Kmirror,
}

impl SchemaSource {
    /// The prototype's repository.
    pub const PROTOTYPE_REPOSITORY: &'static str = "showuon/kafka";

    /// A file of the prototype at a commit.
    pub const fn prototype(path: &'static str, commit: &'static str) -> SchemaSource {
        SchemaSource::Prototype {
            repository: Self::PROTOTYPE_REPOSITORY,
            path,
            commit,
        }
    }
}

/// The `"type"` of a message JSON file, with its `apiKey` where it has one.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum MessageKind {
    /// An RPC request body.
    Request {
        /// The API key.
        api_key: i16,
    },
    /// An RPC response body.
    Response {
        /// The API key.
        api_key: i16,
    },
    /// The key of a coordinator record: written after an `int16` of the API key, at version 0.
    CoordinatorKey {
        /// The record type.
        api_key: i16,
    },
    /// The value of a coordinator record: written after an `int16` of its version.
    CoordinatorValue {
        /// The record type.
        api_key: i16,
    },
    /// A plain data structure (`"type": "data"`).
    Data,
}

impl MessageKind {
    /// The message JSON's `"type"`.
    pub const fn json_type(self) -> &'static str {
        match self {
            MessageKind::Request { .. } => "request",
            MessageKind::Response { .. } => "response",
            MessageKind::CoordinatorKey { .. } => "coordinator-key",
            MessageKind::CoordinatorValue { .. } => "coordinator-value",
            MessageKind::Data => "data",
        }
    }

    /// The `apiKey`, if the kind has one.
    pub const fn api_key(self) -> Option<i16> {
        match self {
            MessageKind::Request { api_key }
            | MessageKind::Response { api_key }
            | MessageKind::CoordinatorKey { api_key }
            | MessageKind::CoordinatorValue { api_key } => Some(api_key),
            MessageKind::Data => None,
        }
    }
}

/// One message: a top-level struct with versions.
#[derive(Clone, Copy, PartialEq, Debug)]
pub struct MessageSchema {
    /// The message's name, e.g. `WriteMirrorStatesRequest`.
    pub name: &'static str,
    /// Request, response, coordinator key or value, or data.
    pub kind: MessageKind,
    /// `validVersions`.
    pub valid_versions: Versions,
    /// `flexibleVersions`: compact lengths and tagged fields.
    pub flexible_versions: Versions,
    /// The top-level fields, in wire order.
    pub fields: &'static [FieldSchema],
    /// Where the schema was transcribed from.
    pub source: SchemaSource,
}

/// A named struct type (`"type": "[]Topic"` with `"fields"`, or `"type": "Topic"`).
#[derive(Clone, Copy, PartialEq, Debug)]
pub struct StructSchema {
    /// The struct's type name, e.g. `TopicResult`.
    pub name: &'static str,
    /// Its fields, in wire order.
    pub fields: &'static [FieldSchema],
}

/// A field's type.
#[derive(Clone, Copy, PartialEq, Debug)]
pub enum FieldType {
    /// `bool`.
    Bool,
    /// `int8`.
    Int8,
    /// `int16`.
    Int16,
    /// `uint16`.
    Uint16,
    /// `int32`.
    Int32,
    /// `uint32`.
    Uint32,
    /// `int64`.
    Int64,
    /// `float64`.
    Float64,
    /// `uuid`.
    Uuid,
    /// `string` (UTF-8).
    String,
    /// `bytes`.
    Bytes,
    /// A struct.
    Struct(&'static StructSchema),
    /// `[]T`: an array of the element type.
    Array(&'static FieldType),
}

impl FieldType {
    /// The type as the message JSON spells it: `int32`, `[]string`, `[]TopicResult`.
    pub fn json_name(&self) -> String {
        match self {
            FieldType::Struct(s) => s.name.to_owned(),
            FieldType::Array(element) => format!("[]{}", element.json_name()),
            primitive => primitive.primitive_name().unwrap_or("?").to_owned(),
        }
    }

    /// The name of a primitive type (`None` for structs and arrays).
    pub const fn primitive_name(&self) -> Option<&'static str> {
        Some(match self {
            FieldType::Bool => "bool",
            FieldType::Int8 => "int8",
            FieldType::Int16 => "int16",
            FieldType::Uint16 => "uint16",
            FieldType::Int32 => "int32",
            FieldType::Uint32 => "uint32",
            FieldType::Int64 => "int64",
            FieldType::Float64 => "float64",
            FieldType::Uuid => "uuid",
            FieldType::String => "string",
            FieldType::Bytes => "bytes",
            FieldType::Struct(_) | FieldType::Array(_) => return None,
        })
    }

    /// Whether Kafka allows null for this type (with `nullableVersions`): strings, bytes,
    /// arrays and structs.
    pub const fn can_be_null(&self) -> bool {
        matches!(
            self,
            FieldType::String | FieldType::Bytes | FieldType::Array(_) | FieldType::Struct(_)
        )
    }
}

/// A field's `default`, as the message JSON states it.
#[derive(Clone, Copy, PartialEq, Debug)]
pub enum FieldDefault {
    /// No `default`: the type's own (0, false, "", empty bytes, empty array, the zero uuid, a
    /// struct of defaults).
    Implicit,
    /// A number, for integer types.
    Int(i64),
    /// A number, for `float64`.
    Float(f64),
    /// `true` or `false`.
    Bool(bool),
    /// A string literal, for `string`.
    Str(&'static str),
    /// `"null"`, for a nullable field.
    Null,
}

/// A field's tag, for fields that are tagged in some versions.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct Tag {
    /// `tag`.
    pub tag: u32,
    /// `taggedVersions`.
    pub versions: Versions,
}

/// One field of a message or struct.
#[derive(Clone, Copy, PartialEq, Debug)]
pub struct FieldSchema {
    /// The field's name, e.g. `ErrorMessage`.
    pub name: &'static str,
    /// The field's type.
    pub ty: FieldType,
    /// `versions`: the versions that have the field.
    pub versions: Versions,
    /// `nullableVersions`.
    pub nullable_versions: Versions,
    /// `tag` and `taggedVersions`, for a tagged field.
    pub tag: Option<Tag>,
    /// `default`.
    pub default: FieldDefault,
    /// `ignorable`: a non-default value is silently dropped at a version without the field
    /// instead of refused.
    pub ignorable: bool,
}

impl FieldSchema {
    /// A field present in `versions`, never null, untagged, with the type's default.
    pub const fn new(name: &'static str, ty: FieldType, versions: Versions) -> FieldSchema {
        FieldSchema {
            name,
            ty,
            versions,
            nullable_versions: Versions::NONE,
            tag: None,
            default: FieldDefault::Implicit,
            ignorable: false,
        }
    }

    /// With `nullableVersions`.
    pub const fn nullable(self, versions: Versions) -> FieldSchema {
        FieldSchema {
            nullable_versions: versions,
            ..self
        }
    }

    /// With `tag` and `taggedVersions`.
    pub const fn tagged(self, tag: u32, versions: Versions) -> FieldSchema {
        FieldSchema {
            tag: Some(Tag { tag, versions }),
            ..self
        }
    }

    /// With a `default`.
    pub const fn default(self, default: FieldDefault) -> FieldSchema {
        FieldSchema { default, ..self }
    }

    /// With `"ignorable": true`.
    pub const fn ignorable(self) -> FieldSchema {
        FieldSchema {
            ignorable: true,
            ..self
        }
    }

    /// Whether the field is tagged at `version` (it is in the tagged-fields section, not in
    /// the struct's fixed fields).
    pub const fn is_tagged_at(&self, version: i16) -> bool {
        match self.tag {
            Some(tag) => tag.versions.contains(version),
            None => false,
        }
    }
}

/// Why a schema breaks a rule of Kafka's message generator.
#[derive(Clone, PartialEq, Eq, Debug, thiserror::Error)]
pub enum SchemaError {
    /// A rule is broken; the text says which, naming the field.
    #[error("{message}: {problem}")]
    Invalid {
        /// The message.
        message: &'static str,
        /// What is wrong.
        problem: String,
    },
}

impl MessageSchema {
    /// Checks the generator's rules: tagged versions inside the field's versions and inside
    /// the flexible versions, tags unique per struct, null only for nullable types, defaults
    /// of the field's type, flexible versions inside the valid ones.
    pub fn validate(&self) -> Result<(), SchemaError> {
        let fail = |problem: String| SchemaError::Invalid {
            message: self.name,
            problem,
        };
        if self.valid_versions.is_empty() {
            return Err(fail("validVersions is empty".into()));
        }
        let flexible_inside = Versions::range(
            self.flexible_versions.lowest().unwrap_or(0),
            self.flexible_versions
                .highest()
                .unwrap_or(-1)
                .min(self.valid_versions.highest().unwrap_or(-1)),
        );
        if !flexible_inside.is_subset_of(self.valid_versions) {
            return Err(fail(format!(
                "flexibleVersions {} outside validVersions {}",
                self.flexible_versions, self.valid_versions
            )));
        }
        validate_fields(self.fields, self.name, self.flexible_versions).map_err(fail)
    }
}

fn validate_fields(fields: &[FieldSchema], owner: &str, flexible: Versions) -> Result<(), String> {
    let mut tags = Vec::new();
    for field in fields {
        let name = format!("{owner}.{}", field.name);
        if !field.nullable_versions.is_empty() && !field.ty.can_be_null() {
            return Err(format!(
                "{name}: a {} cannot be nullable",
                field.ty.json_name()
            ));
        }
        if let Some(tag) = field.tag {
            if !tag.versions.is_subset_of(field.versions) {
                return Err(format!(
                    "{name}: taggedVersions {} not inside versions {}",
                    tag.versions, field.versions
                ));
            }
            if !tag.versions.is_subset_of(flexible) {
                return Err(format!(
                    "{name}: taggedVersions {} not inside flexibleVersions {flexible}",
                    tag.versions
                ));
            }
            if tags.contains(&tag.tag) {
                return Err(format!("{name}: tag {} used twice", tag.tag));
            }
            tags.push(tag.tag);
        }
        let default_fits = match (field.default, field.ty) {
            (FieldDefault::Implicit, _) => true,
            (FieldDefault::Null, ty) => ty.can_be_null() && !field.nullable_versions.is_empty(),
            (FieldDefault::Int(v), FieldType::Int8) => i8::try_from(v).is_ok(),
            (FieldDefault::Int(v), FieldType::Int16) => i16::try_from(v).is_ok(),
            (FieldDefault::Int(v), FieldType::Uint16) => u16::try_from(v).is_ok(),
            (FieldDefault::Int(v), FieldType::Int32) => i32::try_from(v).is_ok(),
            (FieldDefault::Int(v), FieldType::Uint32) => u32::try_from(v).is_ok(),
            (FieldDefault::Int(_), FieldType::Int64) => true,
            (FieldDefault::Float(_), FieldType::Float64) => true,
            (FieldDefault::Bool(_), FieldType::Bool) => true,
            (FieldDefault::Str(s), FieldType::String) => s.len() <= i16::MAX as usize,
            _ => false,
        };
        if !default_fits {
            return Err(format!(
                "{name}: default {:?} does not fit {}",
                field.default,
                field.ty.json_name()
            ));
        }
        let mut element = &field.ty;
        while let FieldType::Array(inner) = element {
            element = inner;
        }
        if let FieldType::Struct(s) = element {
            validate_fields(s.fields, s.name, flexible)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const INNER: StructSchema = StructSchema {
        name: "Inner",
        fields: &[FieldSchema::new("A", FieldType::Int32, Versions::since(0))],
    };

    fn message(fields: &'static [FieldSchema]) -> MessageSchema {
        MessageSchema {
            name: "Test",
            kind: MessageKind::Data,
            valid_versions: Versions::range(0, 2),
            flexible_versions: Versions::since(1),
            fields,
            source: SchemaSource::Kmirror,
        }
    }

    #[test]
    fn type_names_as_in_json() {
        assert_eq!(FieldType::Array(&FieldType::String).json_name(), "[]string");
        assert_eq!(
            FieldType::Array(&FieldType::Struct(&INNER)).json_name(),
            "[]Inner"
        );
        assert_eq!(FieldType::Uuid.json_name(), "uuid");
    }

    #[test]
    fn generator_rules_are_checked() {
        let fine = [FieldSchema::new("A", FieldType::Int8, Versions::since(0))];
        assert!(message(Box::leak(Box::new(fine))).validate().is_ok());
        let nullable_int =
            [FieldSchema::new("A", FieldType::Int8, Versions::since(0))
                .nullable(Versions::since(0))];
        assert!(message(Box::leak(Box::new(nullable_int)))
            .validate()
            .is_err());
        let tagged_inflexible = [FieldSchema::new("A", FieldType::Int8, Versions::since(0))
            .tagged(0, Versions::since(0))];
        assert!(message(Box::leak(Box::new(tagged_inflexible)))
            .validate()
            .is_err());
        let twice = [
            FieldSchema::new("A", FieldType::Int8, Versions::since(1))
                .tagged(0, Versions::since(1)),
            FieldSchema::new("B", FieldType::Int8, Versions::since(1))
                .tagged(0, Versions::since(1)),
        ];
        assert!(message(Box::leak(Box::new(twice))).validate().is_err());
        let big_default = [FieldSchema::new("A", FieldType::Int8, Versions::since(0))
            .default(FieldDefault::Int(300))];
        assert!(message(Box::leak(Box::new(big_default)))
            .validate()
            .is_err());
    }
}
