//! The golden-byte files (`kernel/tests/golden/proto_wire/<Message>.v<version>.hex`): one per
//! message and version, a readable header, then per sample its value and its bytes as Apache
//! Kafka encoded them.
//!
//! ```text
//! # MirrorPartitionStateValue version 0 (flexible)
//! # schema: showuon/kafka mirror-coordinator/.../MirrorPartitionStateValue.json @ 01b3013c...
//! # bytes: Apache Kafka 4.4.0, org.apache.kafka.common.protocol.types.Schema (oracle WireGolden)
//!
//! ## sample: defaults
//! # value: {State: 0, LeaderEpoch: -1, StateEpoch: 0, ErrorMessage: null, ...}
//! 00 ff ff ff ff 00 00 00 00 00 00 00 ff 00
//! ```
//!
//! Lines starting with `#` (other than `## sample:`) are comments; the bytes are hex pairs,
//! sixteen a line.

use std::fmt::Write as _;

use super::schema::{FieldSchema, MessageSchema, SchemaSource};
use super::value::{StructValue, Value};

/// The header line naming who wrote the bytes.
pub const BYTES_ORIGIN: &str =
    "Apache Kafka 4.4.0, org.apache.kafka.common.protocol.types.Schema (oracle WireGolden)";

/// The text of a golden file: `samples` are (name, value, bytes) in order.
pub fn render(
    schema: &MessageSchema,
    version: i16,
    samples: &[(&str, &StructValue, &[u8])],
) -> String {
    let mut out = String::new();
    let flexible = if schema.flexible_versions.contains(version) {
        "flexible"
    } else {
        "not flexible"
    };
    let _ = writeln!(out, "# {} version {version} ({flexible})", schema.name);
    match schema.source {
        SchemaSource::Prototype {
            repository,
            path,
            commit,
        } => {
            let _ = writeln!(out, "# schema: {repository} {path} @ {commit}");
        }
        SchemaSource::Kmirror => {
            let _ = writeln!(
                out,
                "# schema: kmirror's own (kernel/src/proto_wire/conformance.rs)"
            );
        }
    }
    let _ = writeln!(out, "# bytes: {BYTES_ORIGIN}");
    for (name, value, bytes) in samples {
        let _ = writeln!(out, "\n## sample: {name}");
        let _ = writeln!(out, "# value: {}", describe(schema.fields, version, value));
        let _ = writeln!(out, "# {} bytes", bytes.len());
        for line in bytes.chunks(16) {
            let hex: Vec<String> = line.iter().map(|b| format!("{b:02x}")).collect();
            let _ = writeln!(out, "{}", hex.join(" "));
        }
    }
    out
}

/// Why a golden file could not be read.
#[derive(Clone, PartialEq, Eq, Debug, thiserror::Error)]
#[error("golden file line {line}: {problem}")]
pub struct GoldenParseError {
    /// The line (1-based).
    pub line: usize,
    /// What is wrong.
    pub problem: String,
}

/// The samples of a golden file: (name, bytes), in file order.
pub fn parse(text: &str) -> Result<Vec<(String, Vec<u8>)>, GoldenParseError> {
    let mut samples: Vec<(String, Vec<u8>)> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if let Some(name) = line.strip_prefix("## sample:") {
            samples.push((name.trim().to_owned(), Vec::new()));
        } else if line.is_empty() || line.starts_with('#') {
            continue;
        } else {
            let Some((_, bytes)) = samples.last_mut() else {
                return Err(GoldenParseError {
                    line: i + 1,
                    problem: "bytes before the first sample".into(),
                });
            };
            for pair in line.split_whitespace() {
                let byte = u8::from_str_radix(pair, 16)
                    .ok()
                    .filter(|_| pair.len() == 2)
                    .ok_or_else(|| GoldenParseError {
                        line: i + 1,
                        problem: format!("{pair:?} is not a hex byte"),
                    })?;
                bytes.push(byte);
            }
        }
    }
    Ok(samples)
}

/// A one-line rendering of a struct value: the fields present at `version`, then any unknown
/// tagged fields as `+tag<N>=<hex>`.
pub fn describe(fields: &[FieldSchema], version: i16, value: &StructValue) -> String {
    let mut parts: Vec<String> = fields
        .iter()
        .zip(&value.fields)
        .filter(|(f, _)| f.versions.contains(version))
        .map(|(f, v)| format!("{}: {}", f.name, describe_value(f, version, v)))
        .collect();
    parts.extend(
        value
            .unknown_tagged_fields
            .iter()
            .map(|raw| format!("+tag{}={}", raw.tag, hex(&raw.data))),
    );
    format!("{{{}}}", parts.join(", "))
}

fn describe_value(field: &FieldSchema, version: i16, v: &Value) -> String {
    match v {
        Value::Bool(b) => b.to_string(),
        Value::Int8(n) => n.to_string(),
        Value::Int16(n) => n.to_string(),
        Value::Uint16(n) => n.to_string(),
        Value::Int32(n) => n.to_string(),
        Value::Uint32(n) => n.to_string(),
        Value::Int64(n) => n.to_string(),
        Value::Float64(n) => format!("{n:?}"),
        Value::Uuid(u) => hex(&u.0),
        Value::String(s) => format!("{s:?}"),
        Value::Bytes(b) => format!("0x{}", hex(b)),
        Value::Null => "null".into(),
        Value::Array(items) => {
            let parts: Vec<String> = items
                .iter()
                .map(|item| describe_value(field, version, item))
                .collect();
            format!("[{}]", parts.join(", "))
        }
        Value::Struct(s) => {
            let mut ty = &field.ty;
            while let super::schema::FieldType::Array(inner) = ty {
                ty = inner;
            }
            match ty {
                super::schema::FieldType::Struct(schema) => describe(schema.fields, version, s),
                _ => "{?}".into(),
            }
        }
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto_wire::pid_reset::MIRROR_PID_RESET_RECORD;

    #[test]
    fn render_then_parse() {
        let value = StructValue::new(vec![Value::Int16(0)]);
        let bytes: Vec<u8> = (0..20).collect();
        let text = render(
            &MIRROR_PID_RESET_RECORD,
            0,
            &[("a", &value, &bytes), ("b", &value, &[])],
        );
        assert!(text.contains("## sample: a\n# value: {Version: 0}\n# 20 bytes\n00 01"));
        assert_eq!(
            parse(&text).unwrap(),
            vec![("a".to_owned(), bytes), ("b".to_owned(), vec![])]
        );
        assert!(parse("00").is_err());
        assert!(parse("## sample: x\n0g").is_err());
    }
}
