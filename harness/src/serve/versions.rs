//! Which Kafka APIs the node serves, at which versions, and its ApiVersions answer.
//!
//! The ranges are those Apache Kafka 4.4's clients (Java, librdkafka, kafka-python) negotiate,
//! bounded by what the node implements: no topic-id-only OffsetCommit/OffsetFetch (v10), and
//! Metadata from v1 (v0 means "every topic" by an empty list, which nobody sends any more).
//! Beside them, the KIP's `ReadMirrorStates` v0 (the LME lookup, [`super::lme`]). No feature
//! is advertised: without `transaction.version` >= 2, Kafka's clients use transaction version 1
//! ([`super::txn`]).

use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::{ApiKey, ApiVersionsResponse};

use super::group::GROUP_API_VERSIONS;
use super::lme::{READ_MIRROR_STATES_KEY, READ_MIRROR_STATES_VERSION};

/// The APIs the node's own handlers serve: `(api, min version, max version)`.
const DATA_API_VERSIONS: &[(ApiKey, i16, i16)] = &[
    (ApiKey::ApiVersions, 0, 4),
    (ApiKey::Metadata, 1, 12),
    (ApiKey::ListOffsets, 1, 10),
    (ApiKey::Fetch, 4, 17),
    (ApiKey::OffsetForLeaderEpoch, 2, 4),
    (ApiKey::Produce, 3, 11),
    (ApiKey::InitProducerId, 0, 5),
    // Transaction version 1: a producer adds its partitions (v4+ is the brokers' batch form)
    // and ends with EndTxn v4 or older (v5 and TxnOffsetCommit v5 are transaction version 2).
    (ApiKey::AddPartitionsToTxn, 0, 3),
    (ApiKey::AddOffsetsToTxn, 0, 4),
    (ApiKey::EndTxn, 0, 4),
    (ApiKey::TxnOffsetCommit, 0, 4),
    (ApiKey::DescribeConfigs, 1, 4),
    (ApiKey::DescribeAcls, 1, 3),
    (ApiKey::DeleteRecords, 0, 2),
    (ApiKey::CreateTopics, 2, 7),
    (ApiKey::CreatePartitions, 0, 3),
    (ApiKey::DeleteTopics, 1, 6),
    (ApiKey::SaslHandshake, 1, 1),
    (ApiKey::SaslAuthenticate, 0, 2),
];

/// The version range of `key` the node serves, if it serves it.
pub fn range(key: ApiKey) -> Option<(i16, i16)> {
    DATA_API_VERSIONS
        .iter()
        .chain(GROUP_API_VERSIONS)
        .find(|(k, _, _)| *k == key)
        .map(|(_, min, max)| (*min, *max))
}

/// Whether the node serves `key` at `version`.
pub fn supported(key: ApiKey, version: i16) -> bool {
    range(key).is_some_and(|(min, max)| (min..=max).contains(&version))
}

/// The ApiVersions answer. `version` -1: the client asked at a version this node does not
/// know; the answer (written in v0) says UNSUPPORTED_VERSION and lists the versions, so the
/// client retries at one it shares, as with Kafka.
pub fn api_versions_response(version: i16) -> ApiVersionsResponse {
    let mut response = ApiVersionsResponse::default();
    if version < 0 {
        response.error_code = 35; // UNSUPPORTED_VERSION
    }
    response.api_keys = DATA_API_VERSIONS
        .iter()
        .chain(GROUP_API_VERSIONS)
        .map(|(key, min, max)| {
            ApiVersion::default()
                .with_api_key(*key as i16)
                .with_min_version(*min)
                .with_max_version(*max)
        })
        .collect();
    // The KIP's LME lookup, which kafka-protocol's ApiKey does not know.
    response.api_keys.push(
        ApiVersion::default()
            .with_api_key(READ_MIRROR_STATES_KEY)
            .with_min_version(READ_MIRROR_STATES_VERSION)
            .with_max_version(READ_MIRROR_STATES_VERSION),
    );
    response
}
