//! Sample values of every message at every version: the values the golden-byte files
//! (`kernel/tests/golden/proto_wire/`) hold, which Apache Kafka's own `Schema` types encoded.
//! They double as examples of the typed API.
//!
//! Each message has a `defaults` sample (`Default::default()`, the schema's defaults) and one
//! or more filled samples: non-default values in every field, tagged fields set, nulls and
//! empty strings told apart, non-ASCII text, extreme numbers.

use super::conformance::CONFORMANCE;
use super::error::DecodeError;
use super::schema::MessageSchema;
use super::typed::WireMessage;
use super::value::{RawTaggedField, StructValue, Uuid, Value};
use super::{bump_rpcs as bump, mirror_records as mr, pid_reset, state_records as sr};
use super::{state_rpcs as st, topic_rpcs as tr};

/// One named value of a message at a version.
#[derive(Clone, PartialEq, Debug)]
pub struct Sample {
    /// The sample's name, unique within its message and version.
    pub name: &'static str,
    /// The value.
    pub value: StructValue,
}

/// Decodes bytes at a version with a typed struct and returns its dynamic value.
pub type TypedDecode = fn(&[u8], i16) -> Result<StructValue, DecodeError>;

/// The samples of one message at one version.
#[derive(Clone, Debug)]
pub struct GoldenCase {
    /// The message.
    pub schema: &'static MessageSchema,
    /// The version.
    pub version: i16,
    /// The samples.
    pub samples: Vec<Sample>,
    /// Decodes bytes with the message's typed struct and returns its dynamic value (`None` for
    /// the conformance schema, which has no typed struct).
    pub typed_decode: Option<TypedDecode>,
}

impl GoldenCase {
    /// The golden file's name: `<Message>.v<version>.hex`.
    pub fn file_name(&self) -> String {
        format!("{}.v{}.hex", self.schema.name, self.version)
    }
}

fn typed_decode<T: WireMessage>(bytes: &[u8], version: i16) -> Result<StructValue, DecodeError> {
    T::decode(bytes, version).map(|t| t.to_struct_value())
}

fn typed_case<T: WireMessage + Default>(samples: Vec<(&'static str, T)>) -> GoldenCase {
    let mut all = vec![Sample {
        name: "defaults",
        value: T::default().to_struct_value(),
    }];
    all.extend(samples.into_iter().map(|(name, t)| Sample {
        name,
        value: t.to_struct_value(),
    }));
    GoldenCase {
        schema: T::SCHEMA,
        version: 0,
        samples: all,
        typed_decode: Some(typed_decode::<T>),
    }
}

/// A topic id for samples: bytes 0x10..0x1f.
pub const SAMPLE_TOPIC_ID: Uuid = Uuid([
    0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18, 0x19, 0x1a, 0x1b, 0x1c, 0x1d, 0x1e, 0x1f,
]);

/// A UUID with its high bits set, so a sign error in either long shows.
pub const SAMPLE_HIGH_UUID: Uuid = Uuid([
    0xff, 0xee, 0xdd, 0xcc, 0xbb, 0xaa, 0x99, 0x88, 0x87, 0x65, 0x43, 0x21, 0x0f, 0xed, 0xcb, 0xa9,
]);

fn s(text: &str) -> String {
    text.to_owned()
}

fn topics(names: &[&str]) -> Vec<tr::MirrorTopic> {
    names
        .iter()
        .map(|n| tr::MirrorTopic { topic_name: s(n) })
        .collect()
}

fn results() -> Vec<tr::MirrorTopicResult> {
    vec![
        tr::MirrorTopicResult {
            topic_name: s("orders"),
            error_code: 0,
            error_message: None,
        },
        tr::MirrorTopicResult {
            topic_name: s("pay.eu"),
            error_code: 3,
            error_message: Some(s("This server does not host this topic-partition.")),
        },
        tr::MirrorTopicResult {
            topic_name: s(""),
            error_code: -1,
            error_message: Some(s("")),
        },
    ]
}

/// Every golden case: each prototype message at version 0, then the conformance schema at
/// versions 0 to 3.
pub fn golden_cases() -> Vec<GoldenCase> {
    let mut cases = vec![
        typed_case(vec![
            (
                "east",
                sr::MirrorPartitionStateKey {
                    mirror_name: s("east"),
                    topic_id: SAMPLE_TOPIC_ID,
                    partition: 7,
                },
            ),
            (
                "extremes",
                sr::MirrorPartitionStateKey {
                    mirror_name: s("m.é-☃"),
                    topic_id: SAMPLE_HIGH_UUID,
                    partition: i32::MAX,
                },
            ),
        ]),
        typed_case(vec![
            (
                "mirroring",
                sr::MirrorPartitionStateValue {
                    state: sr::state_code::MIRRORING,
                    leader_epoch: 12,
                    state_epoch: 3,
                    error_message: None,
                    retry_attempt: 0,
                    previous_state: sr::state_code::EPOCH_FENCING,
                },
            ),
            (
                "failed",
                sr::MirrorPartitionStateValue {
                    state: sr::state_code::FAILED,
                    leader_epoch: i32::MAX,
                    state_epoch: 70_000,
                    error_message: Some(s("fetch failed: NOT_LEADER_OR_FOLLOWER ✗")),
                    retry_attempt: -1,
                    previous_state: sr::state_code::LOG_ALIGNMENT,
                },
            ),
        ]),
        typed_case(vec![(
            "east",
            sr::LastMirrorEpochsKey {
                mirror_name: s("east"),
                topic_id: SAMPLE_TOPIC_ID,
                partition: 0,
            },
        )]),
        typed_case(vec![
            (
                "epoch",
                sr::LastMirrorEpochsValue {
                    last_mirror_epoch: 41,
                },
            ),
            (
                "none",
                sr::LastMirrorEpochsValue {
                    last_mirror_epoch: -1,
                },
            ),
        ]),
        typed_case(vec![(
            "mirror",
            mr::LastMirroredOffsetsKey {
                mirror_id: SAMPLE_HIGH_UUID,
            },
        )]),
        typed_case(vec![(
            "two-topics",
            mr::LastMirroredOffsetsValue {
                topics: vec![
                    mr::LastMirroredOffsetsTopic {
                        name: s("orders"),
                        partitions: vec![
                            mr::LastMirroredOffsetsPartition {
                                partition_index: 0,
                                last_mirrored_offset: 1_234_567_890_123,
                                leader_epoch: 5,
                            },
                            mr::LastMirroredOffsetsPartition {
                                partition_index: 1,
                                last_mirrored_offset: 0,
                                leader_epoch: -1,
                            },
                        ],
                    },
                    mr::LastMirroredOffsetsTopic {
                        name: s("empty"),
                        partitions: vec![],
                    },
                ],
            },
        )]),
        typed_case(vec![(
            "mirror",
            mr::MirrorTopicsKey {
                mirror_id: SAMPLE_TOPIC_ID,
            },
        )]),
        typed_case(vec![
            (
                "with-excludes",
                tr::StartMirrorTopicsRequest {
                    mirror_name: s("east"),
                    include_patterns: vec![s("orders"), s("pay\\..*")],
                    exclude_patterns: vec![s(".*\\.internal"), s("")],
                    timeout_ms: 30_000,
                },
            ),
            (
                "no-excludes",
                tr::StartMirrorTopicsRequest {
                    mirror_name: s("west"),
                    include_patterns: vec![],
                    exclude_patterns: vec![],
                    timeout_ms: -1,
                },
            ),
        ]),
        typed_case(vec![(
            "error",
            tr::StartMirrorTopicsResponse {
                throttle_time_ms: 100,
                error_code: 42,
                error_message: Some(s("The cluster mirror does not exist.")),
            },
        )]),
        typed_case(vec![
            (
                "with-patterns",
                tr::StopMirrorTopicsRequest {
                    mirror_name: s("east"),
                    topics: topics(&["orders", "pay.eu"]),
                    patterns: vec![s("pay\\..*")],
                    state_offset: 987_654,
                },
            ),
            (
                "topics-only",
                tr::StopMirrorTopicsRequest {
                    mirror_name: s("east"),
                    topics: topics(&["orders"]),
                    patterns: vec![],
                    state_offset: -1,
                },
            ),
        ]),
        typed_case(vec![(
            "results",
            tr::StopMirrorTopicsResponse {
                throttle_time_ms: 0,
                error_code: 0,
                error_message: None,
                topics: results(),
            },
        )]),
        typed_case(vec![(
            "two-topics",
            tr::PauseMirrorTopicsRequest {
                mirror_name: s("east"),
                topics: topics(&["orders", "pay.eu"]),
                state_offset: 5,
            },
        )]),
        typed_case(vec![(
            "results",
            tr::PauseMirrorTopicsResponse {
                throttle_time_ms: 7,
                error_code: 0,
                error_message: None,
                topics: results(),
            },
        )]),
        typed_case(vec![(
            "two-topics",
            tr::ResumeMirrorTopicsRequest {
                mirror_name: s("east"),
                topics: topics(&["orders", "pay.eu"]),
                state_offset: -1,
            },
        )]),
        typed_case(vec![(
            "results",
            tr::ResumeMirrorTopicsResponse {
                throttle_time_ms: 0,
                error_code: 0,
                error_message: Some(s("partial")),
                topics: results(),
            },
        )]),
        typed_case(vec![(
            "one-topic",
            tr::RecoverMirrorTopicsRequest {
                mirror_name: s("east"),
                topics: topics(&["orders"]),
            },
        )]),
        typed_case(vec![(
            "results",
            tr::RecoverMirrorTopicsResponse {
                throttle_time_ms: 0,
                error_code: 0,
                error_message: None,
                topics: results(),
            },
        )]),
        typed_case(vec![(
            "two-topics",
            st::ReadMirrorStatesRequest {
                mirror_name: s("east"),
                topics: vec![
                    st::ReadMirrorStatesTopic {
                        topic_name: s("orders"),
                        partitions: vec![
                            st::ReadMirrorStatesPartition { partition_index: 0 },
                            st::ReadMirrorStatesPartition { partition_index: 2 },
                        ],
                    },
                    st::ReadMirrorStatesTopic {
                        topic_name: s("pay.eu"),
                        partitions: vec![],
                    },
                ],
            },
        )]),
        typed_case(vec![(
            "states",
            st::ReadMirrorStatesResponse {
                throttle_time_ms: 0,
                error_code: 0,
                error_message: None,
                topics: vec![st::ReadMirrorStatesTopicResult {
                    topic_name: s("orders"),
                    partitions: vec![
                        st::ReadMirrorStatesPartitionResult {
                            partition_index: 0,
                            state: sr::state_code::MIRRORING,
                            leader_epoch: 9,
                            state_epoch: 4,
                            last_mirror_epoch: 8,
                            last_mirror_offset: 1_000,
                            error_code: 0,
                            error_message: None,
                            retry_attempt: 0,
                            previous_state: sr::state_code::EPOCH_FENCING,
                        },
                        st::ReadMirrorStatesPartitionResult {
                            partition_index: 1,
                            state: sr::state_code::FAILED,
                            leader_epoch: -1,
                            state_epoch: 0,
                            last_mirror_epoch: -1,
                            last_mirror_offset: -1,
                            error_code: 16,
                            error_message: Some(s("NOT_COORDINATOR")),
                            retry_attempt: 3,
                            previous_state: sr::state_code::UNKNOWN,
                        },
                    ],
                }],
            },
        )]),
        typed_case(vec![(
            "fenced-write",
            st::WriteMirrorStatesRequest {
                mirror_name: s("east"),
                topics: vec![st::WriteMirrorStatesTopic {
                    topic_name: s("orders"),
                    partitions: vec![
                        st::WriteMirrorStatesPartition {
                            partition_index: 0,
                            state: sr::state_code::STOPPING,
                            leader_epoch: 10,
                            state_epoch: 4,
                            last_mirror_epoch: 9,
                            last_mirror_offset: 123_456_789_012,
                            error_message: None,
                            retry_attempt: -1,
                            non_retryable: false,
                        },
                        st::WriteMirrorStatesPartition {
                            partition_index: 3,
                            state: sr::state_code::FAILED,
                            leader_epoch: 10,
                            state_epoch: -1,
                            last_mirror_epoch: -1,
                            last_mirror_offset: -1,
                            error_message: Some(s("source topic deleted")),
                            retry_attempt: 2,
                            non_retryable: true,
                        },
                    ],
                }],
            },
        )]),
        typed_case(vec![(
            "results",
            st::WriteMirrorStatesResponse {
                throttle_time_ms: 0,
                error_code: 0,
                error_message: None,
                topics: vec![st::WriteMirrorStatesTopicResult {
                    topic_name: s("orders"),
                    partitions: vec![
                        st::WriteMirrorStatesPartitionResult {
                            partition_index: 0,
                            state_epoch: 5,
                            error_code: 0,
                            error_message: None,
                        },
                        st::WriteMirrorStatesPartitionResult {
                            partition_index: 3,
                            state_epoch: -1,
                            error_code: 74,
                            error_message: Some(s("FENCED_LEADER_EPOCH")),
                        },
                    ],
                }],
            },
        )]),
        typed_case(vec![(
            "two-topics",
            bump::BumpLeaderEpochsRequest {
                topics: vec![
                    bump::BumpLeaderEpochsTopic {
                        topic_name: s("orders"),
                        partitions: vec![
                            bump::BumpLeaderEpochsPartition {
                                partition_index: 0,
                                min_leader_epoch: 13,
                            },
                            bump::BumpLeaderEpochsPartition {
                                partition_index: 1,
                                min_leader_epoch: -1,
                            },
                        ],
                    },
                    bump::BumpLeaderEpochsTopic {
                        topic_name: s("pay.eu"),
                        partitions: vec![bump::BumpLeaderEpochsPartition {
                            partition_index: 4,
                            min_leader_epoch: i32::MAX,
                        }],
                    },
                ],
            },
        )]),
        typed_case(vec![(
            "results",
            bump::BumpLeaderEpochsResponse {
                throttle_time_ms: 0,
                error_code: 0,
                error_message: None,
                topics: vec![bump::BumpLeaderEpochsTopicResult {
                    topic_name: s("orders"),
                    partitions: vec![
                        bump::BumpLeaderEpochsPartitionResult {
                            partition_index: 0,
                            error_code: 0,
                            error_message: None,
                        },
                        bump::BumpLeaderEpochsPartitionResult {
                            partition_index: 1,
                            error_code: 6,
                            error_message: Some(s("not the leader")),
                        },
                    ],
                }],
            },
        )]),
        typed_case(vec![(
            "version-0",
            pid_reset::MirrorPidResetRecord { version: 0 },
        )]),
    ];
    for version in 0..=3 {
        let mut samples = vec![
            Sample {
                name: "defaults",
                value: StructValue::defaults(CONFORMANCE.fields),
            },
            Sample {
                name: "values",
                value: conformance_sample(version, false),
            },
            Sample {
                name: "nulls",
                value: conformance_sample(version, true),
            },
        ];
        if CONFORMANCE.flexible_versions.contains(version) {
            let mut value = conformance_sample(version, false);
            value.unknown_tagged_fields = vec![
                RawTaggedField {
                    tag: 3,
                    data: vec![0xca, 0xfe],
                },
                RawTaggedField {
                    tag: 200,
                    data: vec![],
                },
            ];
            if let Some(Value::Array(entries)) = value.fields.get_mut(field_index("Entries")) {
                if let Some(Value::Struct(entry)) = entries.get_mut(1) {
                    entry.unknown_tagged_fields = vec![RawTaggedField {
                        tag: 4,
                        data: vec![1, 2, 3],
                    }];
                }
            }
            samples.push(Sample {
                name: "unknown-tags",
                value,
            });
        }
        cases.push(GoldenCase {
            schema: &CONFORMANCE,
            version,
            samples,
            typed_decode: None,
        });
    }
    cases
}

fn field_index(name: &str) -> usize {
    CONFORMANCE
        .fields
        .iter()
        .position(|f| f.name == name)
        .unwrap_or(usize::MAX)
}

/// A value of the conformance schema valid at `version`: every field present at the version
/// non-default; with `nulls`, every field nullable at the version null.
fn conformance_sample(version: i16, nulls: bool) -> StructValue {
    let fields = CONFORMANCE.fields;
    let mut value = StructValue::defaults(fields);
    let flexible = CONFORMANCE.flexible_versions.contains(version);
    let mut set = |name: &str, v: Value| {
        let i = field_index(name);
        if let (Some(field), Some(slot)) = (fields.get(i), value.fields.get_mut(i)) {
            if field.versions.contains(version) {
                let null_ok = field.nullable_versions.contains(version);
                *slot = if nulls && null_ok { Value::Null } else { v };
            }
        }
    };
    set("Flag", Value::Bool(true));
    set("Tiny", Value::Int8(i8::MIN));
    set("Short", Value::Int16(-12_345));
    set("Port", Value::Uint16(u16::MAX));
    set("Count", Value::Int32(i32::MIN));
    set("Big", Value::Uint32(u32::MAX));
    set("Offset", Value::Int64(i64::MAX));
    set("Ratio", Value::Float64(-1234.5625));
    set("Id", Value::Uuid(SAMPLE_HIGH_UUID));
    set("Name", Value::String(s("héllo, Kafka ✓")));
    // An empty string where the default is null: the two must stay apart.
    set("Note", Value::String(String::new()));
    set("Payload", Value::Bytes(vec![0, 1, 0x7f, 0x80, 0xfe, 0xff]));
    set("MaybePayload", Value::Bytes(Vec::new()));
    set(
        "Labels",
        Value::Array(vec![
            Value::String(s("a")),
            Value::String(String::new()),
            Value::String(s("ümlaut")),
        ]),
    );
    set(
        "MaybeCounts",
        Value::Array(vec![
            Value::Int32(1),
            Value::Int32(-1),
            Value::Int32(1 << 20),
        ]),
    );
    let entry = |key: &str, v: i64, extra: i32| {
        Value::Struct(StructValue::new(vec![
            Value::String(s(key)),
            Value::Int64(v),
            Value::Int32(if flexible { extra } else { 0 }),
        ]))
    };
    set(
        "Entries",
        Value::Array(vec![entry("k1", 1, 42), entry("k2", -1, 0)]),
    );
    let b = if !flexible || nulls {
        Value::Null
    } else {
        Value::String(s("b"))
    };
    set(
        "Nested",
        Value::Struct(StructValue::new(vec![Value::Int32(5), b])),
    );
    set("Hint", Value::String(s("hint")));
    set("Legacy", Value::Int32(77));
    set("TaggedId", Value::Uuid(SAMPLE_TOPIC_ID));
    set("TaggedCount", Value::Int32(8));
    value
}
