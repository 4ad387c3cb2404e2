//! The prototype's `BumpLeaderEpochs` RPC (API key 105, version 0, flexible), to the
//! controller: raise the leader epoch of each partition to at least a minimum, so that the
//! destination's epoch stays at or above every mirrored epoch. Transcribed from
//! `clients/src/main/resources/common/message/` of the prototype.

use super::schema::{
    FieldDefault, FieldSchema, FieldType, MessageKind, MessageSchema, SchemaSource, StructSchema,
};
use super::versions::Versions;

const V0: Versions = Versions::since(0);

const LEADER_EPOCH_STATE: StructSchema = StructSchema {
    name: "LeaderEpochState",
    fields: &[
        FieldSchema::new("PartitionIndex", FieldType::Int32, V0),
        FieldSchema::new("MinLeaderEpoch", FieldType::Int32, V0).default(FieldDefault::Int(-1)),
    ],
};
const TOPIC_STATE: StructSchema = StructSchema {
    name: "TopicState",
    fields: &[
        FieldSchema::new("TopicName", FieldType::String, V0),
        FieldSchema::new(
            "Partitions",
            FieldType::Array(&FieldType::Struct(&LEADER_EPOCH_STATE)),
            V0,
        ),
    ],
};

/// `BumpLeaderEpochsRequest` (API key 105).
pub const BUMP_LEADER_EPOCHS_REQUEST: MessageSchema = MessageSchema {
    name: "BumpLeaderEpochsRequest",
    kind: MessageKind::Request { api_key: 105 },
    valid_versions: Versions::only(0),
    flexible_versions: V0,
    fields: &[FieldSchema::new(
        "Topics",
        FieldType::Array(&FieldType::Struct(&TOPIC_STATE)),
        V0,
    )],
    source: SchemaSource::prototype(
        "clients/src/main/resources/common/message/BumpLeaderEpochsRequest.json",
        "26379f442a6daa77c9877291de02615ec62d92c7",
    ),
};

const PARTITION_DETAIL: StructSchema = StructSchema {
    name: "PartitionDetail",
    fields: &[
        FieldSchema::new("PartitionIndex", FieldType::Int32, V0),
        // `"versions": "0"`, not "0+": the only field of these files bounded above.
        FieldSchema::new("ErrorCode", FieldType::Int16, Versions::only(0)),
        FieldSchema::new("ErrorMessage", FieldType::String, V0)
            .nullable(V0)
            .default(FieldDefault::Null),
    ],
};
const TOPIC_PARTITIONS: StructSchema = StructSchema {
    name: "TopicPartitions",
    fields: &[
        FieldSchema::new("TopicName", FieldType::String, V0),
        FieldSchema::new(
            "Partitions",
            FieldType::Array(&FieldType::Struct(&PARTITION_DETAIL)),
            V0,
        ),
    ],
};

/// `BumpLeaderEpochsResponse` (API key 105).
pub const BUMP_LEADER_EPOCHS_RESPONSE: MessageSchema = MessageSchema {
    name: "BumpLeaderEpochsResponse",
    kind: MessageKind::Response { api_key: 105 },
    valid_versions: Versions::only(0),
    flexible_versions: V0,
    fields: &[
        FieldSchema::new("ThrottleTimeMs", FieldType::Int32, V0),
        FieldSchema::new("ErrorCode", FieldType::Int16, V0),
        FieldSchema::new("ErrorMessage", FieldType::String, V0)
            .nullable(V0)
            .default(FieldDefault::Null),
        FieldSchema::new(
            "Topics",
            FieldType::Array(&FieldType::Struct(&TOPIC_PARTITIONS)),
            V0,
        ),
    ],
    source: SchemaSource::prototype(
        "clients/src/main/resources/common/message/BumpLeaderEpochsResponse.json",
        "ceaa4813062ea6d65c13c1d9d53b1a84bf903eba",
    ),
};

/// `BumpLeaderEpochsRequest`.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct BumpLeaderEpochsRequest {
    /// `Topics`.
    pub topics: Vec<BumpLeaderEpochsTopic>,
}
wire_message!(BumpLeaderEpochsRequest, BUMP_LEADER_EPOCHS_REQUEST, {
    topics
});

/// `BumpLeaderEpochsRequest.Topics[]` (`TopicState`).
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct BumpLeaderEpochsTopic {
    /// `TopicName`.
    pub topic_name: String,
    /// `Partitions`.
    pub partitions: Vec<BumpLeaderEpochsPartition>,
}
wire_struct!(BumpLeaderEpochsTopic, TOPIC_STATE.fields, { topic_name, partitions });

/// `BumpLeaderEpochsRequest.Topics[].Partitions[]` (`LeaderEpochState`).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct BumpLeaderEpochsPartition {
    /// `PartitionIndex`.
    pub partition_index: i32,
    /// `MinLeaderEpoch`: the least epoch to bump to, -1 (default) for none.
    pub min_leader_epoch: i32,
}
wire_struct!(BumpLeaderEpochsPartition, LEADER_EPOCH_STATE.fields, {
    partition_index, min_leader_epoch
});

/// `BumpLeaderEpochsResponse`.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct BumpLeaderEpochsResponse {
    /// `ThrottleTimeMs`.
    pub throttle_time_ms: i32,
    /// `ErrorCode`: the top-level error.
    pub error_code: i16,
    /// `ErrorMessage`, null (default) for none.
    pub error_message: Option<String>,
    /// `Topics`.
    pub topics: Vec<BumpLeaderEpochsTopicResult>,
}
wire_message!(BumpLeaderEpochsResponse, BUMP_LEADER_EPOCHS_RESPONSE, {
    throttle_time_ms, error_code, error_message, topics
});

/// `BumpLeaderEpochsResponse.Topics[]` (`TopicPartitions`).
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct BumpLeaderEpochsTopicResult {
    /// `TopicName`.
    pub topic_name: String,
    /// `Partitions`.
    pub partitions: Vec<BumpLeaderEpochsPartitionResult>,
}
wire_struct!(BumpLeaderEpochsTopicResult, TOPIC_PARTITIONS.fields, { topic_name, partitions });

/// `BumpLeaderEpochsResponse.Topics[].Partitions[]` (`PartitionDetail`).
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct BumpLeaderEpochsPartitionResult {
    /// `PartitionIndex`.
    pub partition_index: i32,
    /// `ErrorCode`, 0 for success.
    pub error_code: i16,
    /// `ErrorMessage`, null (default) for none.
    pub error_message: Option<String>,
}
wire_struct!(BumpLeaderEpochsPartitionResult, PARTITION_DETAIL.fields, {
    partition_index, error_code, error_message
});
