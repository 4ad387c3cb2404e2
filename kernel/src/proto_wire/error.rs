//! Why a message could not be encoded or decoded.
//!
//! A field is named by its path from the message, e.g. `Topics[0].Partitions[2].State`.

/// Why a value could not be encoded at a version (a value the schema or the version cannot
/// carry, as Kafka's generated `write` refuses it).
#[derive(Clone, PartialEq, Eq, Debug, thiserror::Error)]
pub enum EncodeError {
    /// The version is outside the message's `validVersions`.
    #[error("{message} has no version {version} (valid versions: {valid})")]
    UnsupportedVersion {
        /// The message.
        message: &'static str,
        /// The version asked for.
        version: i16,
        /// The message's `validVersions`, in Kafka's spelling.
        valid: String,
    },
    /// A field that does not exist at this version holds a non-default value and is not
    /// `ignorable` (Kafka's `UnsupportedVersionException: Attempted to write a non-default ...`).
    #[error("attempted to write a non-default {field} at version {version}")]
    NonDefaultFieldNotInVersion {
        /// The field.
        field: String,
        /// The version being written.
        version: i16,
    },
    /// A null in a field that is not nullable at this version.
    #[error("{field} is null, but it is not nullable at version {version}")]
    NullNotAllowed {
        /// The field.
        field: String,
        /// The version being written.
        version: i16,
    },
    /// A string, byte array or array is longer than its length prefix can describe (a string
    /// at most 32767 bytes of UTF-8, as Kafka's generated code checks in every encoding).
    #[error("{field} is too long to be serialized: {len} (at most {max})")]
    TooLong {
        /// The field.
        field: String,
        /// Its length (bytes or elements).
        len: usize,
        /// The largest length that fits.
        max: usize,
    },
    /// A dynamic value does not have the shape of its schema (a wrong type or field count).
    #[error(transparent)]
    Shape(#[from] ShapeError),
    /// A message that is not a coordinator key (or value) was framed as one.
    #[error("{message} is a {kind} message, not a {expected}")]
    WrongKind {
        /// The message.
        message: &'static str,
        /// Its kind (`request`, `data`, ...).
        kind: &'static str,
        /// The kind asked for.
        expected: &'static str,
    },
    /// An unknown tagged field of the value reuses a tag the schema defines at this version, or
    /// two unknown tagged fields share a tag.
    #[error("tag {tag} of {field} is written twice")]
    DuplicateTag {
        /// The struct holding the tagged fields.
        field: String,
        /// The tag.
        tag: u32,
    },
}

/// Why bytes are not a valid message at a version. Decoding never panics and never allocates
/// more than its input justifies.
#[derive(Clone, PartialEq, Eq, Debug, thiserror::Error)]
pub enum DecodeError {
    /// The version is outside the message's `validVersions`.
    #[error("{message} has no version {version} (valid versions: {valid})")]
    UnsupportedVersion {
        /// The message.
        message: &'static str,
        /// The version asked for.
        version: i16,
        /// The message's `validVersions`, in Kafka's spelling.
        valid: String,
    },
    /// The input ended inside a field.
    #[error("truncated input reading {field}: needed {needed} bytes, {available} available")]
    Truncated {
        /// The field being read.
        field: String,
        /// Bytes the field needs.
        needed: usize,
        /// Bytes left.
        available: usize,
    },
    /// An unsigned varint longer than 5 bytes or above `u32::MAX`, or a varlong longer than 10
    /// bytes or above 64 bits.
    #[error("invalid varint in {field}")]
    InvalidVarint {
        /// The field being read.
        field: String,
    },
    /// A length or count that is negative (other than null's), longer than what is left, or a
    /// string longer than 32767 bytes.
    #[error("{field} has invalid length {len}")]
    InvalidLength {
        /// The field.
        field: String,
        /// The length read (a compact length already minus one).
        len: i64,
    },
    /// A null in a field that is not nullable at this version.
    #[error("non-nullable field {field} was serialized as null")]
    NullNotAllowed {
        /// The field.
        field: String,
    },
    /// A string is not valid UTF-8.
    #[error("{field} is not valid UTF-8")]
    InvalidUtf8 {
        /// The field.
        field: String,
    },
    /// Tagged fields must come in strictly increasing tag order (Kafka's `TaggedFields` type:
    /// "Invalid or out-of-order tag").
    #[error("invalid or out-of-order tag {tag} after {previous} in {field}")]
    TagOutOfOrder {
        /// The struct holding the tagged fields.
        field: String,
        /// The tag read.
        tag: u32,
        /// The tag before it.
        previous: u32,
    },
    /// A known tagged field's value does not fill exactly the size its header declared.
    #[error("tagged field {field} declares {declared} bytes but its value is {used}")]
    TaggedFieldSize {
        /// The field.
        field: String,
        /// The size in the tag header.
        declared: usize,
        /// The bytes its value used.
        used: usize,
    },
    /// Bytes are left after the message.
    #[error("{count} trailing bytes after {message}")]
    TrailingBytes {
        /// The message.
        message: &'static str,
        /// How many bytes are left.
        count: usize,
    },
    /// A coordinator record's key names a record type this code does not know.
    #[error("unknown {what} {code}")]
    UnknownRecordType {
        /// What the number is (e.g. "__mirror_state key type").
        what: &'static str,
        /// The number read.
        code: i16,
    },
    /// A decoded value does not fit the typed struct (a bug: the schema and the struct
    /// disagree).
    #[error(transparent)]
    Shape(#[from] ShapeError),
}

/// A dynamic value that does not match its schema: a programming error of the caller (or of
/// a typed struct), never caused by input bytes alone.
#[derive(Clone, PartialEq, Eq, Debug, thiserror::Error)]
pub enum ShapeError {
    /// A value of the wrong type.
    #[error("{field}: expected {expected}, found {found}")]
    WrongType {
        /// The field.
        field: String,
        /// The schema's type.
        expected: &'static str,
        /// The value's type.
        found: &'static str,
    },
    /// A struct value with another number of fields than its schema.
    #[error("{field}: the schema has {expected} fields, the value {found}")]
    FieldCount {
        /// The struct.
        field: String,
        /// Fields in the schema.
        expected: usize,
        /// Fields in the value.
        found: usize,
    },
}
