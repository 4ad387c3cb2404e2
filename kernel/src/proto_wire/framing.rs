//! How a coordinator record's key and value are framed in a record of `__mirror_state`, as
//! Kafka frames its coordinator records (`MessageUtil.toCoordinatorTypePrefixedBytes` and
//! `toVersionPrefixedBytes`):
//!
//! - key: `int16` record type (the key's `apiKey`), then the key message at version 0;
//! - value: `int16` version, then the value message at that version; a tombstone has no value.

use super::error::{DecodeError, EncodeError};
use super::primitives::WireReader;
use super::schema::MessageKind;
use super::typed::WireMessage;

/// A record key: `int16` record type, then `key` at version 0.
pub fn encode_key<K: WireMessage>(key: &K) -> Result<Vec<u8>, EncodeError> {
    let MessageKind::CoordinatorKey { api_key } = K::SCHEMA.kind else {
        return Err(EncodeError::WrongKind {
            message: K::SCHEMA.name,
            kind: K::SCHEMA.kind.json_type(),
            expected: "coordinator-key",
        });
    };
    prefixed(api_key, key.encode(0)?)
}

/// A record value: `int16` version, then `value` at that version.
pub fn encode_value<V: WireMessage>(value: &V, version: i16) -> Result<Vec<u8>, EncodeError> {
    if !matches!(V::SCHEMA.kind, MessageKind::CoordinatorValue { .. }) {
        return Err(EncodeError::WrongKind {
            message: V::SCHEMA.name,
            kind: V::SCHEMA.kind.json_type(),
            expected: "coordinator-value",
        });
    }
    prefixed(version, value.encode(version)?)
}

fn prefixed(prefix: i16, body: Vec<u8>) -> Result<Vec<u8>, EncodeError> {
    let mut out = Vec::with_capacity(2 + body.len());
    out.extend_from_slice(&prefix.to_be_bytes());
    out.extend_from_slice(&body);
    Ok(out)
}

/// The `int16` prefix of a record key or value, and the bytes after it; `what` names the
/// prefix in the error.
pub fn split_prefix<'a>(bytes: &'a [u8], what: &str) -> Result<(i16, &'a [u8]), DecodeError> {
    let mut r = WireReader::new(bytes);
    let prefix = r.int16().map_err(|_| DecodeError::Truncated {
        field: what.to_owned(),
        needed: 2,
        available: bytes.len(),
    })?;
    Ok((prefix, &bytes[2..]))
}

/// Decodes a record key of type `K`: the prefix must be `K`'s record type.
pub fn decode_key<K: WireMessage>(bytes: &[u8]) -> Result<K, DecodeError> {
    let (record_type, body) = split_prefix(bytes, K::SCHEMA.name)?;
    if Some(record_type) != K::SCHEMA.kind.api_key() {
        return Err(DecodeError::UnknownRecordType {
            what: K::SCHEMA.name,
            code: record_type,
        });
    }
    K::decode(body, 0)
}

/// Decodes a record value of type `V` at the version its prefix states.
pub fn decode_value<V: WireMessage>(bytes: &[u8]) -> Result<V, DecodeError> {
    let (version, body) = split_prefix(bytes, V::SCHEMA.name)?;
    V::decode(body, version)
}
