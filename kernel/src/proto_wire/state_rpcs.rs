//! The prototype's RPCs to the `__mirror_state` coordinator: `ReadMirrorStates` (100) and
//! `WriteMirrorStates` (101), broker to broker, version 0, flexible. A write is fenced by the
//! writer's leader epoch and the expected state epoch (-1 skips either check). Transcribed from
//! `clients/src/main/resources/common/message/` of the prototype.

use super::schema::{
    FieldDefault, FieldSchema, FieldType, MessageKind, MessageSchema, SchemaSource, StructSchema,
};
use super::versions::Versions;

const V0: Versions = Versions::since(0);

const MIRROR_NAME: FieldSchema = FieldSchema::new("MirrorName", FieldType::String, V0);
const TOPIC_NAME: FieldSchema = FieldSchema::new("TopicName", FieldType::String, V0);
const PARTITION_INDEX: FieldSchema = FieldSchema::new("PartitionIndex", FieldType::Int32, V0);
const THROTTLE_TIME_MS: FieldSchema = FieldSchema::new("ThrottleTimeMs", FieldType::Int32, V0);
const ERROR_CODE: FieldSchema = FieldSchema::new("ErrorCode", FieldType::Int16, V0);
const ERROR_MESSAGE: FieldSchema = FieldSchema::new("ErrorMessage", FieldType::String, V0)
    .nullable(V0)
    .default(FieldDefault::Null);
const fn int32_default(name: &'static str, default: i64) -> FieldSchema {
    FieldSchema::new(name, FieldType::Int32, V0).default(FieldDefault::Int(default))
}
const LAST_MIRROR_OFFSET: FieldSchema =
    FieldSchema::new("LastMirrorOffset", FieldType::Int64, V0).default(FieldDefault::Int(-1));

const READ_PARTITION_DATA: StructSchema = StructSchema {
    name: "PartitionData",
    fields: &[PARTITION_INDEX],
};
const READ_TOPIC_METADATA: StructSchema = StructSchema {
    name: "TopicMetadata",
    fields: &[
        TOPIC_NAME,
        FieldSchema::new(
            "Partitions",
            FieldType::Array(&FieldType::Struct(&READ_PARTITION_DATA)),
            V0,
        ),
    ],
};

/// `ReadMirrorStatesRequest` (API key 100).
pub const READ_MIRROR_STATES_REQUEST: MessageSchema = MessageSchema {
    name: "ReadMirrorStatesRequest",
    kind: MessageKind::Request { api_key: 100 },
    valid_versions: Versions::only(0),
    flexible_versions: V0,
    fields: &[
        MIRROR_NAME,
        FieldSchema::new(
            "Topics",
            FieldType::Array(&FieldType::Struct(&READ_TOPIC_METADATA)),
            V0,
        ),
    ],
    source: SchemaSource::prototype(
        "clients/src/main/resources/common/message/ReadMirrorStatesRequest.json",
        "4c31faf9ae4fa1b67607a2cd501cb39998e2ccc7",
    ),
};

const READ_PARTITION_RESULT: StructSchema = StructSchema {
    name: "PartitionResult",
    fields: &[
        PARTITION_INDEX,
        FieldSchema::new("State", FieldType::Int8, V0),
        int32_default("LeaderEpoch", -1),
        int32_default("StateEpoch", 0),
        int32_default("LastMirrorEpoch", -1),
        LAST_MIRROR_OFFSET,
        ERROR_CODE,
        ERROR_MESSAGE,
        FieldSchema::new("RetryAttempt", FieldType::Int16, V0).default(FieldDefault::Int(0)),
        FieldSchema::new("PreviousState", FieldType::Int8, V0).default(FieldDefault::Int(16)),
    ],
};
const READ_TOPIC_RESULT: StructSchema = StructSchema {
    name: "TopicResult",
    fields: &[
        TOPIC_NAME,
        FieldSchema::new(
            "Partitions",
            FieldType::Array(&FieldType::Struct(&READ_PARTITION_RESULT)),
            V0,
        ),
    ],
};

/// `ReadMirrorStatesResponse` (API key 100).
pub const READ_MIRROR_STATES_RESPONSE: MessageSchema = MessageSchema {
    name: "ReadMirrorStatesResponse",
    kind: MessageKind::Response { api_key: 100 },
    valid_versions: Versions::only(0),
    flexible_versions: V0,
    fields: &[
        THROTTLE_TIME_MS,
        ERROR_CODE,
        ERROR_MESSAGE,
        FieldSchema::new(
            "Topics",
            FieldType::Array(&FieldType::Struct(&READ_TOPIC_RESULT)),
            V0,
        ),
    ],
    source: SchemaSource::prototype(
        "clients/src/main/resources/common/message/ReadMirrorStatesResponse.json",
        "09abc2ae6d9960220832eb3fbdc35cce02379019",
    ),
};

const WRITE_PARTITION_DATA: StructSchema = StructSchema {
    name: "PartitionData",
    fields: &[
        PARTITION_INDEX,
        FieldSchema::new("State", FieldType::Int8, V0),
        int32_default("LeaderEpoch", -1),
        int32_default("StateEpoch", -1),
        int32_default("LastMirrorEpoch", -1),
        LAST_MIRROR_OFFSET,
        ERROR_MESSAGE,
        int32_default("RetryAttempt", -1),
        FieldSchema::new("NonRetryable", FieldType::Bool, V0).default(FieldDefault::Bool(false)),
    ],
};
const WRITE_TOPIC_METADATA: StructSchema = StructSchema {
    name: "TopicMetadata",
    fields: &[
        TOPIC_NAME,
        FieldSchema::new(
            "Partitions",
            FieldType::Array(&FieldType::Struct(&WRITE_PARTITION_DATA)),
            V0,
        ),
    ],
};

/// `WriteMirrorStatesRequest` (API key 101).
pub const WRITE_MIRROR_STATES_REQUEST: MessageSchema = MessageSchema {
    name: "WriteMirrorStatesRequest",
    kind: MessageKind::Request { api_key: 101 },
    valid_versions: Versions::only(0),
    flexible_versions: V0,
    fields: &[
        MIRROR_NAME,
        FieldSchema::new(
            "Topics",
            FieldType::Array(&FieldType::Struct(&WRITE_TOPIC_METADATA)),
            V0,
        ),
    ],
    source: SchemaSource::prototype(
        "clients/src/main/resources/common/message/WriteMirrorStatesRequest.json",
        "01b3013c94b1d8353683568426219434295fb155",
    ),
};

const WRITE_PARTITION_RESULT: StructSchema = StructSchema {
    name: "PartitionResult",
    fields: &[
        PARTITION_INDEX,
        int32_default("StateEpoch", -1),
        ERROR_CODE,
        ERROR_MESSAGE,
    ],
};
const WRITE_TOPIC_RESULT: StructSchema = StructSchema {
    name: "TopicResult",
    fields: &[
        TOPIC_NAME,
        FieldSchema::new(
            "Partitions",
            FieldType::Array(&FieldType::Struct(&WRITE_PARTITION_RESULT)),
            V0,
        ),
    ],
};

/// `WriteMirrorStatesResponse` (API key 101).
pub const WRITE_MIRROR_STATES_RESPONSE: MessageSchema = MessageSchema {
    name: "WriteMirrorStatesResponse",
    kind: MessageKind::Response { api_key: 101 },
    valid_versions: Versions::only(0),
    flexible_versions: V0,
    fields: &[
        THROTTLE_TIME_MS,
        ERROR_CODE,
        ERROR_MESSAGE,
        FieldSchema::new(
            "Topics",
            FieldType::Array(&FieldType::Struct(&WRITE_TOPIC_RESULT)),
            V0,
        ),
    ],
    source: SchemaSource::prototype(
        "clients/src/main/resources/common/message/WriteMirrorStatesResponse.json",
        "4c31faf9ae4fa1b67607a2cd501cb39998e2ccc7",
    ),
};

/// `ReadMirrorStatesRequest`: read the states of some partitions of a mirror.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct ReadMirrorStatesRequest {
    /// `MirrorName`.
    pub mirror_name: String,
    /// `Topics`.
    pub topics: Vec<ReadMirrorStatesTopic>,
}
wire_message!(ReadMirrorStatesRequest, READ_MIRROR_STATES_REQUEST, { mirror_name, topics });

/// `ReadMirrorStatesRequest.Topics[]`.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct ReadMirrorStatesTopic {
    /// `TopicName`.
    pub topic_name: String,
    /// `Partitions`.
    pub partitions: Vec<ReadMirrorStatesPartition>,
}
wire_struct!(ReadMirrorStatesTopic, READ_TOPIC_METADATA.fields, { topic_name, partitions });

/// `ReadMirrorStatesRequest.Topics[].Partitions[]`.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct ReadMirrorStatesPartition {
    /// `PartitionIndex`.
    pub partition_index: i32,
}
wire_struct!(ReadMirrorStatesPartition, READ_PARTITION_DATA.fields, {
    partition_index
});

/// `ReadMirrorStatesResponse`.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct ReadMirrorStatesResponse {
    /// `ThrottleTimeMs`.
    pub throttle_time_ms: i32,
    /// `ErrorCode`: the top-level error.
    pub error_code: i16,
    /// `ErrorMessage`: the top-level error message, or null (default).
    pub error_message: Option<String>,
    /// `Topics`.
    pub topics: Vec<ReadMirrorStatesTopicResult>,
}
wire_message!(ReadMirrorStatesResponse, READ_MIRROR_STATES_RESPONSE, {
    throttle_time_ms, error_code, error_message, topics
});

/// `ReadMirrorStatesResponse.Topics[]`.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct ReadMirrorStatesTopicResult {
    /// `TopicName`.
    pub topic_name: String,
    /// `Partitions`.
    pub partitions: Vec<ReadMirrorStatesPartitionResult>,
}
wire_struct!(ReadMirrorStatesTopicResult, READ_TOPIC_RESULT.fields, { topic_name, partitions });

/// `ReadMirrorStatesResponse.Topics[].Partitions[]`: one partition's persisted state.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct ReadMirrorStatesPartitionResult {
    /// `PartitionIndex`.
    pub partition_index: i32,
    /// `State`: a [`super::state_records::state_code`].
    pub state: i8,
    /// `LeaderEpoch`, -1 (default) if not available.
    pub leader_epoch: i32,
    /// `StateEpoch` (default 0).
    pub state_epoch: i32,
    /// `LastMirrorEpoch`, -1 (default) if not available.
    pub last_mirror_epoch: i32,
    /// `LastMirrorOffset`, -1 (default) if not available.
    pub last_mirror_offset: i64,
    /// `ErrorCode`: the partition's error (e.g. `NOT_COORDINATOR`), 0 for none.
    pub error_code: i16,
    /// `ErrorMessage`, null (default) for none.
    pub error_message: Option<String>,
    /// `RetryAttempt`: retries while FAILED, 0 (default), -1 if non-retryable.
    pub retry_attempt: i16,
    /// `PreviousState`: the state before FAILED. Its default is 16, which is no state code of
    /// the prototype (whose UNKNOWN is -1).
    pub previous_state: i8,
}
wire_struct!(ReadMirrorStatesPartitionResult, READ_PARTITION_RESULT.fields, {
    partition_index, state, leader_epoch, state_epoch, last_mirror_epoch, last_mirror_offset,
    error_code, error_message, retry_attempt, previous_state
});

/// `WriteMirrorStatesRequest`: fenced writes of partition states.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct WriteMirrorStatesRequest {
    /// `MirrorName`.
    pub mirror_name: String,
    /// `Topics`.
    pub topics: Vec<WriteMirrorStatesTopic>,
}
wire_message!(WriteMirrorStatesRequest, WRITE_MIRROR_STATES_REQUEST, { mirror_name, topics });

/// `WriteMirrorStatesRequest.Topics[]`.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct WriteMirrorStatesTopic {
    /// `TopicName`.
    pub topic_name: String,
    /// `Partitions`.
    pub partitions: Vec<WriteMirrorStatesPartition>,
}
wire_struct!(WriteMirrorStatesTopic, WRITE_TOPIC_METADATA.fields, { topic_name, partitions });

/// `WriteMirrorStatesRequest.Topics[].Partitions[]`: one partition's new state.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct WriteMirrorStatesPartition {
    /// `PartitionIndex`.
    pub partition_index: i32,
    /// `State`: a [`super::state_records::state_code`].
    pub state: i8,
    /// `LeaderEpoch` of the writing broker, -1 (default) to skip the check.
    pub leader_epoch: i32,
    /// `StateEpoch` expected, -1 (default) to skip the check.
    pub state_epoch: i32,
    /// `LastMirrorEpoch`, -1 (default) if not available.
    pub last_mirror_epoch: i32,
    /// `LastMirrorOffset`, -1 (default) if not available.
    pub last_mirror_offset: i64,
    /// `ErrorMessage` when entering FAILED, else null (default).
    pub error_message: Option<String>,
    /// `RetryAttempt` (an `int32` here, `int16` in the record), -1 (default) when unavailable.
    pub retry_attempt: i32,
    /// `NonRetryable`: whether the failure is non-retryable (default false).
    pub non_retryable: bool,
}
wire_struct!(WriteMirrorStatesPartition, WRITE_PARTITION_DATA.fields, {
    partition_index, state, leader_epoch, state_epoch, last_mirror_epoch, last_mirror_offset,
    error_message, retry_attempt, non_retryable
});

/// `WriteMirrorStatesResponse`.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct WriteMirrorStatesResponse {
    /// `ThrottleTimeMs`.
    pub throttle_time_ms: i32,
    /// `ErrorCode`: the top-level error.
    pub error_code: i16,
    /// `ErrorMessage`, null (default) for none.
    pub error_message: Option<String>,
    /// `Topics`.
    pub topics: Vec<WriteMirrorStatesTopicResult>,
}
wire_message!(WriteMirrorStatesResponse, WRITE_MIRROR_STATES_RESPONSE, {
    throttle_time_ms, error_code, error_message, topics
});

/// `WriteMirrorStatesResponse.Topics[]`.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct WriteMirrorStatesTopicResult {
    /// `TopicName`.
    pub topic_name: String,
    /// `Partitions`.
    pub partitions: Vec<WriteMirrorStatesPartitionResult>,
}
wire_struct!(WriteMirrorStatesTopicResult, WRITE_TOPIC_RESULT.fields, { topic_name, partitions });

/// `WriteMirrorStatesResponse.Topics[].Partitions[]`.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct WriteMirrorStatesPartitionResult {
    /// `PartitionIndex`.
    pub partition_index: i32,
    /// `StateEpoch` after the write, -1 (default) if it failed.
    pub state_epoch: i32,
    /// `ErrorCode` (e.g. a fenced epoch), 0 for success.
    pub error_code: i16,
    /// `ErrorMessage`, null (default) for none.
    pub error_message: Option<String>,
}
wire_struct!(WriteMirrorStatesPartitionResult, WRITE_PARTITION_RESULT.fields, {
    partition_index, state_epoch, error_code, error_message
});
