//! The wire formats of the KIP-1279 authors' prototype (GitHub `showuon/kafka`), encoded
//! exactly as Kafka's message generator would encode its message JSON files: the
//! `__mirror_state` records, the mirror RPCs and the `MIRROR_PID_RESET` control record value.
//!
//! The seed's own `__mirror_state` codec is [`crate::records`]; this module is the prototype's,
//! so that a broker embedding the kernel can speak the formats being proposed.
//! `docs/prototype-wire.md` lists the differences.
//!
//! # Layers
//!
//! - [`primitives`]: Kafka's primitive encodings (fixed-width integers, varints, UUIDs, length
//!   prefixes).
//! - [`schema`]: a message's schema as Rust data ([`MessageSchema`]), transcribed by hand from
//!   the prototype's JSON, with the file and commit it came from.
//! - [`value`] and [`codec`]: a dynamic [`StructValue`] and the generic codec that writes and
//!   reads it by walking a schema at a version, following the generator's rules
//!   (`validVersions`, `flexibleVersions`, per-field `versions`, `nullableVersions`,
//!   `taggedVersions`/`tag`, `default`, `ignorable`).
//! - [`typed`]: plain structs per message ([`WireMessage::encode`] /
//!   [`WireMessage::decode`]), in [`state_records`], [`mirror_records`], [`topic_rpcs`],
//!   [`state_rpcs`], [`bump_rpcs`] and [`pid_reset`]; [`framing`] puts a coordinator record's
//!   `int16` prefix in front.
//! - [`kernel_bridge`]: the kernel's persisted state in the prototype's record and back.
//! - [`conformance`]: a schema of kmirror's own exercising every rule across four versions;
//!   [`samples`]: the values of the golden-byte tests, which Apache Kafka 4.4.0's
//!   `org.apache.kafka.common.protocol.types.Schema` encoded (`harness/tests/oracle_proto_wire.rs`).
//!
//! # Example
//!
//! ```
//! use kmirror_kernel::proto_wire::state_records::{
//!     state_code, MirrorPartitionStateKey, MirrorPartitionStateValue, MirrorStateKey,
//!     MirrorStateValue,
//! };
//! use kmirror_kernel::proto_wire::{Uuid, WireMessage};
//!
//! let key = MirrorStateKey::PartitionState(MirrorPartitionStateKey {
//!     mirror_name: "east".into(),
//!     topic_id: Uuid([7; 16]),
//!     partition: 0,
//! });
//! let value = MirrorStateValue::PartitionState(MirrorPartitionStateValue {
//!     state: state_code::MIRRORING,
//!     state_epoch: 1,
//!     ..Default::default()
//! });
//! let (key_bytes, value_bytes) = (key.encode().unwrap(), value.encode(0).unwrap());
//! assert_eq!(&key_bytes[..2], &[0, 2], "record type 2");
//! assert_eq!(MirrorStateKey::decode(&key_bytes).unwrap(), key);
//! assert_eq!(MirrorStateValue::decode(&key, &value_bytes).unwrap(), value);
//!
//! // Every message body alone, at a version:
//! let body = MirrorPartitionStateValue::default().encode(0).unwrap();
//! assert_eq!(MirrorPartitionStateValue::decode(&body, 0).unwrap(), Default::default());
//! ```

#[macro_use]
pub mod typed;

pub mod bump_rpcs;
pub mod codec;
pub mod conformance;
pub mod error;
pub mod framing;
pub mod golden;
pub mod kernel_bridge;
pub mod mirror_records;
pub mod pid_reset;
pub mod primitives;
pub mod samples;
pub mod schema;
pub mod state_records;
pub mod state_rpcs;
pub mod topic_rpcs;
pub mod value;
pub mod versions;

pub use error::{DecodeError, EncodeError, ShapeError};
pub use schema::{FieldDefault, FieldSchema, FieldType, MessageKind, MessageSchema, SchemaSource};
pub use typed::{WireMessage, WireStruct};
pub use value::{RawTaggedField, StructValue, Uuid, Value};
pub use versions::Versions;

/// Every prototype message transcribed: the `__mirror_state` records, then the RPCs (request,
/// response), then `MirrorPidResetRecord`.
pub const PROTOTYPE_MESSAGES: &[&MessageSchema] = &[
    &state_records::MIRROR_PARTITION_STATE_KEY,
    &state_records::MIRROR_PARTITION_STATE_VALUE,
    &state_records::LAST_MIRROR_EPOCHS_KEY,
    &state_records::LAST_MIRROR_EPOCHS_VALUE,
    &mirror_records::LAST_MIRRORED_OFFSETS_KEY,
    &mirror_records::LAST_MIRRORED_OFFSETS_VALUE,
    &mirror_records::MIRROR_TOPICS_KEY,
    &topic_rpcs::START_MIRROR_TOPICS_REQUEST,
    &topic_rpcs::START_MIRROR_TOPICS_RESPONSE,
    &topic_rpcs::STOP_MIRROR_TOPICS_REQUEST,
    &topic_rpcs::STOP_MIRROR_TOPICS_RESPONSE,
    &topic_rpcs::PAUSE_MIRROR_TOPICS_REQUEST,
    &topic_rpcs::PAUSE_MIRROR_TOPICS_RESPONSE,
    &topic_rpcs::RESUME_MIRROR_TOPICS_REQUEST,
    &topic_rpcs::RESUME_MIRROR_TOPICS_RESPONSE,
    &topic_rpcs::RECOVER_MIRROR_TOPICS_REQUEST,
    &topic_rpcs::RECOVER_MIRROR_TOPICS_RESPONSE,
    &state_rpcs::READ_MIRROR_STATES_REQUEST,
    &state_rpcs::READ_MIRROR_STATES_RESPONSE,
    &state_rpcs::WRITE_MIRROR_STATES_REQUEST,
    &state_rpcs::WRITE_MIRROR_STATES_RESPONSE,
    &bump_rpcs::BUMP_LEADER_EPOCHS_REQUEST,
    &bump_rpcs::BUMP_LEADER_EPOCHS_RESPONSE,
    &pid_reset::MIRROR_PID_RESET_RECORD,
];
