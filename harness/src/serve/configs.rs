//! DescribeConfigs and DescribeAcls, as a node that mirrors from this one (or an admin tool)
//! asks them: a topic's config overrides are those its metadata directory holds
//! (`metadata/topic-configs/<topic>.properties`, what the metadata sync writes), each a
//! `DYNAMIC_TOPIC_CONFIG`; the broker has no overrides of its own. The listener checks no ACLs,
//! so DescribeAcls is `SECURITY_DISABLED`, as a Kafka broker without an authorizer answers.

use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult,
};
use kafka_protocol::messages::{
    DescribeAclsResponse, DescribeConfigsRequest, DescribeConfigsResponse,
};
use kafka_protocol::protocol::StrBytes;

use crate::sync::local::MetadataDir;

use super::broker::ServedNode;
use super::metadata::UNKNOWN_TOPIC_OR_PARTITION;

/// `POLICY_VIOLATION`: what this node does not do.
pub const POLICY_VIOLATION: i16 = 44;
/// `SECURITY_DISABLED`: no authorizer.
pub const SECURITY_DISABLED: i16 = 54;
/// `KAFKA_STORAGE_ERROR`: a config file cannot be read.
const KAFKA_STORAGE_ERROR: i16 = 56;
/// Kafka's resource types and config source.
const TOPIC: i8 = 2;
const BROKER: i8 = 4;
const DYNAMIC_TOPIC_CONFIG: i8 = 1;

/// Answers DescribeConfigs for topics and the broker.
pub fn describe_configs(
    node: &dyn ServedNode,
    request: &DescribeConfigsRequest,
) -> DescribeConfigsResponse {
    let dir = MetadataDir::of(node.root());
    let mut response = DescribeConfigsResponse::default();
    for r in &request.resources {
        let mut result = DescribeConfigsResult::default()
            .with_resource_type(r.resource_type)
            .with_resource_name(r.resource_name.clone());
        let name = r.resource_name.to_string();
        match r.resource_type {
            TOPIC if !node.meta().topics.contains_key(&name) => {
                result.error_code = UNKNOWN_TOPIC_OR_PARTITION;
            }
            TOPIC => match dir.read_topic_config(&name) {
                Ok(read) => {
                    let wanted = r.configuration_keys.as_ref();
                    result.configs = read
                        .value
                        .into_iter()
                        .filter(|(k, _)| wanted.is_none_or(|w| w.iter().any(|x| **x == **k)))
                        .map(|(k, v)| {
                            DescribeConfigsResourceResult::default()
                                .with_name(StrBytes::from_string(k))
                                .with_value(Some(StrBytes::from_string(v)))
                                .with_config_source(DYNAMIC_TOPIC_CONFIG)
                        })
                        .collect();
                }
                Err(e) => {
                    result.error_code = KAFKA_STORAGE_ERROR;
                    result.error_message = Some(StrBytes::from_string(e.to_string()));
                }
            },
            BROKER => {}
            _ => {
                result.error_code = POLICY_VIOLATION;
                result.error_message = Some(StrBytes::from_static_str(
                    "this kmirror node describes topic and broker configs only",
                ));
            }
        }
        response.results.push(result);
    }
    response
}

/// Answers DescribeAcls: no authorizer.
pub fn describe_acls() -> DescribeAclsResponse {
    DescribeAclsResponse::default()
        .with_error_code(SECURITY_DISABLED)
        .with_error_message(Some(StrBytes::from_static_str(
            "this kmirror node checks no ACLs (no authorizer)",
        )))
}
