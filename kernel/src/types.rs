//! Kafka's scalar vocabulary: offsets, leader epochs, producer ids, topic ids and mirror names.
//!
//! Kafka marks "unknown" with `-1` on the wire. Inside the kernel an unknown value is an
//! [`Option`]; where the wire value itself matters (record encodings, `end_offset_for`'s answer,
//! the checkpoint file) the sentinel is one of the named constants below, never a bare `-1`.

use std::fmt;

use serde::{Deserialize, Serialize};

/// A position in a partition log (Kafka's `long` offset).
pub type Offset = i64;
/// The epoch of a partition leader, bumped by the controller on every leader change.
pub type LeaderEpoch = i32;
/// The id of a (possibly idempotent or transactional) producer.
pub type ProducerId = i64;
/// The epoch of a producer id, bumped when a transactional producer is fenced.
pub type ProducerEpoch = i16;
/// A producer's per-partition sequence number of a record.
pub type Sequence = i32;
/// The index of a partition within its topic.
pub type PartitionIndex = i32;
/// The id of a broker (a replica of a partition).
pub type BrokerId = i32;
/// The number of accepted writes of one `__mirror_state` key, used to fence stale writers.
pub type StateEpoch = i32;
/// A point in time or a duration, in milliseconds (Kafka's `long` of milliseconds), supplied by
/// the caller: the kernel reads no clock, and any monotonic logical clock works.
pub type TimestampMs = i64;

/// Kafka's `UNDEFINED_EPOCH`: no leader epoch known.
pub const UNDEFINED_EPOCH: LeaderEpoch = -1;
/// Kafka's `UNDEFINED_EPOCH_OFFSET`: no offset known for an epoch.
pub const UNDEFINED_OFFSET: Offset = -1;
/// Kafka's `RecordBatch.NO_PRODUCER_ID`: the batch was written by a plain producer.
pub const NO_PRODUCER_ID: ProducerId = -1;
/// Kafka's `RecordBatch.NO_PRODUCER_EPOCH`.
pub const NO_PRODUCER_EPOCH: ProducerEpoch = -1;
/// Kafka's `RecordBatch.NO_SEQUENCE`.
pub const NO_SEQUENCE: Sequence = -1;

/// A topic's 16-byte UUID (Kafka's `Uuid`), the stable identity of a topic across renames.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Default)]
pub struct TopicId(pub [u8; 16]);

impl TopicId {
    /// A topic id whose 16 bytes are `n` big-endian in the last eight: handy in tests and models.
    pub const fn from_u64(n: u64) -> Self {
        let b = n.to_be_bytes();
        TopicId([
            0, 0, 0, 0, 0, 0, 0, 0, b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7],
        ])
    }
}

/// The 16 bytes as 32 lowercase hex digits, first byte first (not the base64 of Kafka's
/// `Uuid.toString`): the form status output, error messages and the destinations' `topic.id=` /
/// `topic=` lines carry. Width and alignment flags apply to the whole text, as to a string.
impl fmt::Display for TopicId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let mut text = [0u8; 32];
        for (i, b) in self.0.iter().enumerate() {
            text[2 * i] = HEX[usize::from(b >> 4)];
            text[2 * i + 1] = HEX[usize::from(b & 0x0f)];
        }
        // Every byte is an ASCII hex digit, so the text is valid UTF-8.
        f.pad(std::str::from_utf8(&text).map_err(|_| fmt::Error)?)
    }
}

impl fmt::Debug for TopicId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TopicId({self})")
    }
}

/// The name of a cluster mirror, as written in topic config `mirror.name`.
///
/// Valid names follow Kafka's topic-name rules (1 to 249 characters of `[a-zA-Z0-9._-]`, not `.`
/// or `..`) and must not end in one of the suffixes the desired state uses (`.removed`,
/// `.paused`), so that parsing `mirror.name` from the right is unambiguous.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct MirrorName(String);

/// Why a string is not a valid [`MirrorName`]; maps to Kafka's `INVALID_CLUSTER_MIRROR_NAME`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidMirrorName {
    /// The name is empty.
    #[error("mirror name is empty")]
    Empty,
    /// The name is longer than Kafka allows for a topic name.
    #[error("mirror name {name:?} is {len} characters long; at most {max} are allowed")]
    TooLong {
        /// The offending name.
        name: String,
        /// Its length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// The name is `.` or `..`.
    #[error("mirror name {0:?} is reserved")]
    Reserved(String),
    /// The name contains a character outside `[a-zA-Z0-9._-]`.
    #[error("mirror name {name:?} contains {ch:?}; only ASCII letters, digits, '.', '_' and '-' are allowed")]
    IllegalCharacter {
        /// The offending name.
        name: String,
        /// The first illegal character.
        ch: char,
    },
    /// The name ends in a desired-state suffix and would be ambiguous in `mirror.name`.
    #[error("mirror name {name:?} ends in the reserved suffix {suffix:?}")]
    ReservedSuffix {
        /// The offending name.
        name: String,
        /// The suffix it ends in.
        suffix: &'static str,
    },
}

impl MirrorName {
    /// Longest name Kafka accepts for a topic, and so for a mirror.
    pub const MAX_LEN: usize = 249;
    /// Suffixes of `mirror.name` that carry a desired state and so cannot end a mirror name.
    pub const RESERVED_SUFFIXES: [&'static str; 2] = [".removed", ".paused"];

    /// Validates `name` as a mirror name.
    pub fn new(name: impl Into<String>) -> Result<Self, InvalidMirrorName> {
        let name = name.into();
        if name.is_empty() {
            return Err(InvalidMirrorName::Empty);
        }
        if name.len() > Self::MAX_LEN {
            let len = name.len();
            return Err(InvalidMirrorName::TooLong {
                name,
                len,
                max: Self::MAX_LEN,
            });
        }
        if name == "." || name == ".." {
            return Err(InvalidMirrorName::Reserved(name));
        }
        if let Some(ch) = name
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
        {
            return Err(InvalidMirrorName::IllegalCharacter { name, ch });
        }
        if let Some(suffix) = Self::RESERVED_SUFFIXES
            .into_iter()
            .find(|s| name.ends_with(s))
        {
            return Err(InvalidMirrorName::ReservedSuffix { name, suffix });
        }
        Ok(MirrorName(name))
    }

    /// The name as a string slice.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for MirrorName {
    type Error = InvalidMirrorName;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        MirrorName::new(s)
    }
}

impl From<MirrorName> for String {
    fn from(n: MirrorName) -> String {
        n.0
    }
}

impl fmt::Debug for MirrorName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.0)
    }
}

impl fmt::Display for MirrorName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// One mirrored partition: the identity under which its state is persisted in `__mirror_state`
/// (the fields of Kafka's `MirrorPartitionStateKey` and `LastMirroredEpochsKey`).
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize)]
pub struct MirrorPartition {
    /// The mirror the partition belongs to.
    pub mirror: MirrorName,
    /// The topic's id.
    pub topic_id: TopicId,
    /// The partition index.
    pub partition: PartitionIndex,
}

/// An epoch and the end offset of that epoch, the answer of Kafka's `endOffsetFor` and of an
/// `OffsetForLeaderEpoch` request. [`EpochAndOffset::UNDEFINED`] is Kafka's `(-1, -1)`.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize)]
pub struct EpochAndOffset {
    /// The epoch (possibly lower than the one asked for: the floor epoch).
    pub epoch: LeaderEpoch,
    /// The first offset after that epoch.
    pub end_offset: Offset,
}

impl EpochAndOffset {
    /// Kafka's `(UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)`: nothing known.
    pub const UNDEFINED: EpochAndOffset = EpochAndOffset {
        epoch: UNDEFINED_EPOCH,
        end_offset: UNDEFINED_OFFSET,
    };

    /// True for [`EpochAndOffset::UNDEFINED`].
    pub fn is_undefined(&self) -> bool {
        *self == Self::UNDEFINED
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mirror_names_follow_kafka_topic_rules_and_refuse_suffixes() {
        assert!(MirrorName::new("east-1.prod_A").is_ok());
        assert_eq!(MirrorName::new(""), Err(InvalidMirrorName::Empty));
        assert!(matches!(
            MirrorName::new(".."),
            Err(InvalidMirrorName::Reserved(_))
        ));
        assert!(matches!(
            MirrorName::new("a b"),
            Err(InvalidMirrorName::IllegalCharacter { ch: ' ', .. })
        ));
        assert!(matches!(
            MirrorName::new("x".repeat(250)),
            Err(InvalidMirrorName::TooLong { len: 250, .. })
        ));
        assert!(MirrorName::new("x".repeat(249)).is_ok());
        assert!(matches!(
            MirrorName::new("east.paused"),
            Err(InvalidMirrorName::ReservedSuffix {
                suffix: ".paused",
                ..
            })
        ));
        assert!(matches!(
            MirrorName::new("east.removed"),
            Err(InvalidMirrorName::ReservedSuffix { .. })
        ));
        assert!(MirrorName::new("east.removedx").is_ok());
    }

    #[test]
    fn topic_id_from_u64_is_big_endian_in_the_low_half() {
        let id = TopicId::from_u64(0x0102);
        assert_eq!(id.0[14..], [1, 2]);
        assert_eq!(
            format!("{id:?}"),
            "TopicId(00000000000000000000000000000102)"
        );
    }

    #[test]
    fn topic_id_displays_as_32_lowercase_hex_digits() {
        let id = TopicId([
            0x00, 0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef, 0xfe, 0xdc, 0xba, 0x98, 0x76,
            0x54, 0x32,
        ]);
        assert_eq!(id.to_string(), "000123456789abcdeffedcba98765432");
        assert_eq!(TopicId::default().to_string(), "0".repeat(32));
        assert_eq!(
            format!("[{:>34}]", TopicId::from_u64(0xff)),
            format!("[  {}ff]", "0".repeat(30))
        );
    }
}
