//! The prototype's topic-level mirror RPCs, sent by an admin client to a broker (or the
//! controller): `StartMirrorTopics` (95), `StopMirrorTopics` (96), `PauseMirrorTopics` (102),
//! `ResumeMirrorTopics` (103) and `RecoverMirrorTopics` (106; its response file says 107).
//! Every one is version 0 and flexible. Transcribed from
//! `clients/src/main/resources/common/message/` of the prototype.
//!
//! The request element `{TopicName}` and the response element `{TopicName|Name, ErrorCode,
//! ErrorMessage}` are the same on the wire in every message (only the response's field name
//! differs between files), so one typed struct each serves all: [`MirrorTopic`] and
//! [`MirrorTopicResult`].

use super::schema::{
    FieldDefault, FieldSchema, FieldType, MessageKind, MessageSchema, SchemaSource, StructSchema,
};
use super::versions::Versions;

const V0: Versions = Versions::since(0);
const MIRROR_NAME: FieldSchema = FieldSchema::new("MirrorName", FieldType::String, V0);
const THROTTLE_TIME_MS: FieldSchema = FieldSchema::new("ThrottleTimeMs", FieldType::Int32, V0);
const ERROR_CODE: FieldSchema = FieldSchema::new("ErrorCode", FieldType::Int16, V0);
const ERROR_MESSAGE: FieldSchema = FieldSchema::new("ErrorMessage", FieldType::String, V0)
    .nullable(V0)
    .default(FieldDefault::Null);
const STATE_OFFSET: FieldSchema =
    FieldSchema::new("StateOffset", FieldType::Int64, V0).default(FieldDefault::Int(-1));

/// `TopicMetadata` of the Stop, Pause, Resume and Recover requests.
const TOPIC_METADATA: StructSchema = StructSchema {
    name: "TopicMetadata",
    fields: &[FieldSchema::new("TopicName", FieldType::String, V0)],
};
const TOPICS: FieldSchema = FieldSchema::new(
    "Topics",
    FieldType::Array(&FieldType::Struct(&TOPIC_METADATA)),
    V0,
);

/// `TopicResult` with the topic in `TopicName` (Pause and Recover responses).
const TOPIC_RESULT: StructSchema = StructSchema {
    name: "TopicResult",
    fields: &[
        FieldSchema::new("TopicName", FieldType::String, V0),
        ERROR_CODE,
        ERROR_MESSAGE,
    ],
};
/// `TopicResult` with the topic in `Name` (Stop and Resume responses).
const TOPIC_RESULT_NAME: StructSchema = StructSchema {
    name: "TopicResult",
    fields: &[
        FieldSchema::new("Name", FieldType::String, V0),
        ERROR_CODE,
        ERROR_MESSAGE,
    ],
};

/// `StartMirrorTopicsRequest` (API key 95).
pub const START_MIRROR_TOPICS_REQUEST: MessageSchema = MessageSchema {
    name: "StartMirrorTopicsRequest",
    kind: MessageKind::Request { api_key: 95 },
    valid_versions: Versions::only(0),
    flexible_versions: V0,
    fields: &[
        MIRROR_NAME,
        FieldSchema::new("IncludePatterns", FieldType::Array(&FieldType::String), V0),
        FieldSchema::new("ExcludePatterns", FieldType::Array(&FieldType::String), V0).tagged(0, V0),
        FieldSchema::new("TimeoutMs", FieldType::Int32, V0),
    ],
    source: SchemaSource::prototype(
        "clients/src/main/resources/common/message/StartMirrorTopicsRequest.json",
        "0dfe7300075ff492210602b15801156891c004d2",
    ),
};

/// `StartMirrorTopicsResponse` (API key 95).
pub const START_MIRROR_TOPICS_RESPONSE: MessageSchema = MessageSchema {
    name: "StartMirrorTopicsResponse",
    kind: MessageKind::Response { api_key: 95 },
    valid_versions: Versions::only(0),
    flexible_versions: V0,
    fields: &[THROTTLE_TIME_MS, ERROR_CODE, ERROR_MESSAGE],
    source: SchemaSource::prototype(
        "clients/src/main/resources/common/message/StartMirrorTopicsResponse.json",
        "0dfe7300075ff492210602b15801156891c004d2",
    ),
};

/// `StopMirrorTopicsRequest` (API key 96).
pub const STOP_MIRROR_TOPICS_REQUEST: MessageSchema = MessageSchema {
    name: "StopMirrorTopicsRequest",
    kind: MessageKind::Request { api_key: 96 },
    valid_versions: Versions::only(0),
    flexible_versions: V0,
    fields: &[
        MIRROR_NAME,
        TOPICS,
        FieldSchema::new("Patterns", FieldType::Array(&FieldType::String), V0).tagged(0, V0),
        STATE_OFFSET,
    ],
    source: SchemaSource::prototype(
        "clients/src/main/resources/common/message/StopMirrorTopicsRequest.json",
        "15b728222b67ef5b098c0327f04cde14d71e50d7",
    ),
};

/// `StopMirrorTopicsResponse` (API key 96).
pub const STOP_MIRROR_TOPICS_RESPONSE: MessageSchema = MessageSchema {
    name: "StopMirrorTopicsResponse",
    kind: MessageKind::Response { api_key: 96 },
    valid_versions: Versions::only(0),
    flexible_versions: V0,
    fields: &[
        THROTTLE_TIME_MS,
        ERROR_CODE,
        ERROR_MESSAGE,
        FieldSchema::new(
            "Topics",
            FieldType::Array(&FieldType::Struct(&TOPIC_RESULT_NAME)),
            V0,
        ),
    ],
    source: SchemaSource::prototype(
        "clients/src/main/resources/common/message/StopMirrorTopicsResponse.json",
        "47e1e629be9e60ef1f6fb23e8fa6d8014e1949ec",
    ),
};

/// `PauseMirrorTopicsRequest` (API key 102).
pub const PAUSE_MIRROR_TOPICS_REQUEST: MessageSchema = MessageSchema {
    name: "PauseMirrorTopicsRequest",
    kind: MessageKind::Request { api_key: 102 },
    valid_versions: Versions::only(0),
    flexible_versions: V0,
    fields: &[MIRROR_NAME, TOPICS, STATE_OFFSET],
    source: SchemaSource::prototype(
        "clients/src/main/resources/common/message/PauseMirrorTopicsRequest.json",
        "15b728222b67ef5b098c0327f04cde14d71e50d7",
    ),
};

/// `PauseMirrorTopicsResponse` (API key 102).
pub const PAUSE_MIRROR_TOPICS_RESPONSE: MessageSchema = MessageSchema {
    name: "PauseMirrorTopicsResponse",
    kind: MessageKind::Response { api_key: 102 },
    valid_versions: Versions::only(0),
    flexible_versions: V0,
    fields: &[
        THROTTLE_TIME_MS,
        ERROR_CODE,
        ERROR_MESSAGE,
        FieldSchema::new(
            "Topics",
            FieldType::Array(&FieldType::Struct(&TOPIC_RESULT)),
            V0,
        ),
    ],
    source: SchemaSource::prototype(
        "clients/src/main/resources/common/message/PauseMirrorTopicsResponse.json",
        "4c31faf9ae4fa1b67607a2cd501cb39998e2ccc7",
    ),
};

/// `ResumeMirrorTopicsRequest` (API key 103).
pub const RESUME_MIRROR_TOPICS_REQUEST: MessageSchema = MessageSchema {
    name: "ResumeMirrorTopicsRequest",
    kind: MessageKind::Request { api_key: 103 },
    valid_versions: Versions::only(0),
    flexible_versions: V0,
    fields: &[MIRROR_NAME, TOPICS, STATE_OFFSET],
    source: SchemaSource::prototype(
        "clients/src/main/resources/common/message/ResumeMirrorTopicsRequest.json",
        "15b728222b67ef5b098c0327f04cde14d71e50d7",
    ),
};

/// `ResumeMirrorTopicsResponse` (API key 103).
pub const RESUME_MIRROR_TOPICS_RESPONSE: MessageSchema = MessageSchema {
    name: "ResumeMirrorTopicsResponse",
    kind: MessageKind::Response { api_key: 103 },
    valid_versions: Versions::only(0),
    flexible_versions: V0,
    fields: &[
        THROTTLE_TIME_MS,
        ERROR_CODE,
        ERROR_MESSAGE,
        FieldSchema::new(
            "Topics",
            FieldType::Array(&FieldType::Struct(&TOPIC_RESULT_NAME)),
            V0,
        ),
    ],
    source: SchemaSource::prototype(
        "clients/src/main/resources/common/message/ResumeMirrorTopicsResponse.json",
        "47e1e629be9e60ef1f6fb23e8fa6d8014e1949ec",
    ),
};

/// `RecoverMirrorTopicsRequest` (API key 106).
pub const RECOVER_MIRROR_TOPICS_REQUEST: MessageSchema = MessageSchema {
    name: "RecoverMirrorTopicsRequest",
    kind: MessageKind::Request { api_key: 106 },
    valid_versions: Versions::only(0),
    flexible_versions: V0,
    fields: &[MIRROR_NAME, TOPICS],
    source: SchemaSource::prototype(
        "clients/src/main/resources/common/message/RecoverMirrorTopicsRequest.json",
        "77136a8a21fbc13fd7b9aef7bd633d48ce0dc034",
    ),
};

/// `RecoverMirrorTopicsResponse` (the transcribed file says API key 107, its request 106).
pub const RECOVER_MIRROR_TOPICS_RESPONSE: MessageSchema = MessageSchema {
    name: "RecoverMirrorTopicsResponse",
    kind: MessageKind::Response { api_key: 107 },
    valid_versions: Versions::only(0),
    flexible_versions: V0,
    fields: &[
        THROTTLE_TIME_MS,
        ERROR_CODE,
        ERROR_MESSAGE,
        FieldSchema::new(
            "Topics",
            FieldType::Array(&FieldType::Struct(&TOPIC_RESULT)),
            V0,
        ),
    ],
    source: SchemaSource::prototype(
        "clients/src/main/resources/common/message/RecoverMirrorTopicsResponse.json",
        "3503205d0ba5f86149141889a4d34df037e00c9c",
    ),
};

/// A topic named in a Stop, Pause, Resume or Recover request (`TopicMetadata`).
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct MirrorTopic {
    /// `TopicName`.
    pub topic_name: String,
}
wire_struct!(MirrorTopic, TOPIC_METADATA.fields, { topic_name });

/// One topic's answer in a Stop, Pause, Resume or Recover response (`TopicResult`).
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct MirrorTopicResult {
    /// `TopicName` (`Name` in the Stop and Resume responses).
    pub topic_name: String,
    /// `ErrorCode`: 0 for success.
    pub error_code: i16,
    /// `ErrorMessage`: null (default) when there is no error.
    pub error_message: Option<String>,
}
wire_struct!(MirrorTopicResult, TOPIC_RESULT.fields, {
    topic_name, error_code, error_message
});

/// `StartMirrorTopicsRequest`: add topic patterns to a mirror.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct StartMirrorTopicsRequest {
    /// `MirrorName`.
    pub mirror_name: String,
    /// `IncludePatterns`: regexes added to `topics.include`.
    pub include_patterns: Vec<String>,
    /// `ExcludePatterns` (tagged, tag 0): regexes added to `topics.exclude`.
    pub exclude_patterns: Vec<String>,
    /// `TimeoutMs`.
    pub timeout_ms: i32,
}
wire_message!(StartMirrorTopicsRequest, START_MIRROR_TOPICS_REQUEST, {
    mirror_name, include_patterns, exclude_patterns, timeout_ms
});

/// `StartMirrorTopicsResponse`.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct StartMirrorTopicsResponse {
    /// `ThrottleTimeMs`.
    pub throttle_time_ms: i32,
    /// `ErrorCode`.
    pub error_code: i16,
    /// `ErrorMessage`.
    pub error_message: Option<String>,
}
wire_message!(StartMirrorTopicsResponse, START_MIRROR_TOPICS_RESPONSE, {
    throttle_time_ms, error_code, error_message
});

/// `StopMirrorTopicsRequest`: fail the named topics over (stop mirroring them).
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct StopMirrorTopicsRequest {
    /// `MirrorName`.
    pub mirror_name: String,
    /// `Topics`.
    pub topics: Vec<MirrorTopic>,
    /// `Patterns` (tagged, tag 0): patterns removed from the include list or added to the
    /// exclude list.
    pub patterns: Vec<String>,
    /// `StateOffset`: the metadata offset at which the broker validated the partition states,
    /// -1 (default) to skip the check.
    pub state_offset: i64,
}
wire_message!(StopMirrorTopicsRequest, STOP_MIRROR_TOPICS_REQUEST, {
    mirror_name, topics, patterns, state_offset
});

/// `PauseMirrorTopicsRequest`.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct PauseMirrorTopicsRequest {
    /// `MirrorName`.
    pub mirror_name: String,
    /// `Topics`.
    pub topics: Vec<MirrorTopic>,
    /// `StateOffset`, -1 (default) to skip the check.
    pub state_offset: i64,
}
wire_message!(PauseMirrorTopicsRequest, PAUSE_MIRROR_TOPICS_REQUEST, {
    mirror_name, topics, state_offset
});

/// `ResumeMirrorTopicsRequest`.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct ResumeMirrorTopicsRequest {
    /// `MirrorName`.
    pub mirror_name: String,
    /// `Topics`.
    pub topics: Vec<MirrorTopic>,
    /// `StateOffset`, -1 (default) to skip the check.
    pub state_offset: i64,
}
wire_message!(ResumeMirrorTopicsRequest, RESUME_MIRROR_TOPICS_REQUEST, {
    mirror_name, topics, state_offset
});

/// `RecoverMirrorTopicsRequest`: retry the FAILED partitions of the named topics.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct RecoverMirrorTopicsRequest {
    /// `MirrorName`.
    pub mirror_name: String,
    /// `Topics`.
    pub topics: Vec<MirrorTopic>,
}
wire_message!(RecoverMirrorTopicsRequest, RECOVER_MIRROR_TOPICS_REQUEST, {
    mirror_name, topics
});

macro_rules! topic_results_response {
    ($(#[$doc:meta])* $ty:ident, $schema:expr) => {
        $(#[$doc])*
        #[derive(Clone, PartialEq, Eq, Hash, Debug)]
        pub struct $ty {
            /// `ThrottleTimeMs`.
            pub throttle_time_ms: i32,
            /// `ErrorCode`: the top-level error, 0 for none.
            pub error_code: i16,
            /// `ErrorMessage`: the top-level error message, or null (default).
            pub error_message: Option<String>,
            /// `Topics`: one result per topic.
            pub topics: Vec<MirrorTopicResult>,
        }
        wire_message!($ty, $schema, { throttle_time_ms, error_code, error_message, topics });
    };
}

topic_results_response!(
    /// `StopMirrorTopicsResponse`.
    StopMirrorTopicsResponse,
    STOP_MIRROR_TOPICS_RESPONSE
);
topic_results_response!(
    /// `PauseMirrorTopicsResponse`.
    PauseMirrorTopicsResponse,
    PAUSE_MIRROR_TOPICS_RESPONSE
);
topic_results_response!(
    /// `ResumeMirrorTopicsResponse`.
    ResumeMirrorTopicsResponse,
    RESUME_MIRROR_TOPICS_RESPONSE
);
topic_results_response!(
    /// `RecoverMirrorTopicsResponse`.
    RecoverMirrorTopicsResponse,
    RECOVER_MIRROR_TOPICS_RESPONSE
);
