//! The admin APIs a metadata sync reads, on one broker: DescribeConfigs, ListGroups,
//! FindCoordinator, DescribeGroups, ConsumerGroupDescribe, OffsetFetch and DescribeAcls.
//!
//! Each call negotiates its version like the fetcher's APIs ([`KafkaClient`] picks the highest
//! version both sides speak), checks that the answer names what was asked, and keeps Kafka's
//! codes (config sources, ACL enums) as numbers: the mapping to names and the per-item
//! decisions belong to [`KafkaMetadataSource`](super::metadata_source::KafkaMetadataSource).
//! A top-level error code is a [`WireError::Broker`]; a per-item error code is returned in the
//! item.

use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestGroup;
use kafka_protocol::messages::{
    ConsumerGroupDescribeRequest, DescribeAclsRequest, DescribeConfigsRequest,
    DescribeGroupsRequest, FindCoordinatorRequest, GroupId, ListGroupsRequest, OffsetFetchRequest,
};
use kafka_protocol::protocol::StrBytes;

use super::authorization::AclResource;
use super::{KafkaClient, WireError};

/// ConfigResource type `TOPIC`.
pub const CONFIG_RESOURCE_TOPIC: i8 = 2;
/// Config source `DYNAMIC_TOPIC_CONFIG`: a topic's own override.
pub const DYNAMIC_TOPIC_CONFIG: i8 = 1;
/// FindCoordinator key type `GROUP`.
pub const COORDINATOR_KEY_GROUP: i8 = 0;
/// The `ANY` value of Kafka's ACL enums (resource type, pattern type, operation, permission).
pub const ACL_ANY: i8 = 1;
/// ListGroups v5 group type of a classic group.
pub const GROUP_TYPE_CLASSIC: &str = "classic";
/// ListGroups v5 group type of a KIP-848 consumer group.
pub const GROUP_TYPE_CONSUMER: &str = "consumer";

/// FindCoordinator v4 is the first with batched keys.
const FIND_COORDINATOR_BATCHED: i16 = 4;
/// OffsetFetch v8 is the first with several groups per request.
const OFFSET_FETCH_GROUPS: i16 = 8;

/// One config entry of a DescribeConfigs answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigEntry {
    /// The key.
    pub name: String,
    /// The value (`None` for a sensitive or unset value).
    pub value: Option<String>,
    /// Kafka's config source code ([`DYNAMIC_TOPIC_CONFIG`] for a topic override).
    pub source: i8,
    /// Whether the broker hides the value.
    pub sensitive: bool,
}

/// A group as ListGroups lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListedGroup {
    /// The group id.
    pub group_id: String,
    /// The protocol type (`consumer`, `connect`, or empty for a group that only commits).
    pub protocol_type: String,
    /// The state (v4+; empty before).
    pub state: String,
    /// The group type (v5+: `classic`, `consumer`, `share`, `streams`; empty before).
    pub group_type: String,
}

/// A group as DescribeGroups or ConsumerGroupDescribe describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupDescription {
    /// The group id.
    pub group_id: String,
    /// Kafka's error code for this group (0: none).
    pub error_code: i16,
    /// The broker's error message, if any.
    pub error_message: Option<String>,
    /// The state (`Stable`, `Empty`, `Dead`...).
    pub state: String,
    /// The members' ids.
    pub members: Vec<String>,
}

/// One committed offset of an OffsetFetch answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommittedOffset {
    /// The topic.
    pub topic: String,
    /// The partition.
    pub partition: i32,
    /// The committed offset (-1: none).
    pub offset: i64,
    /// Kafka's error code for this partition (0: none).
    pub error_code: i16,
}

/// One ACL binding of a DescribeAcls answer, with Kafka's enum codes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AclEntry {
    /// Resource type code (2 `TOPIC`, 3 `GROUP`...).
    pub resource_type: i8,
    /// The resource name.
    pub resource_name: String,
    /// Pattern type code (3 `LITERAL`, 4 `PREFIXED`).
    pub pattern_type: i8,
    /// The principal, `<type>:<name>`.
    pub principal: String,
    /// The host.
    pub host: String,
    /// Operation code (3 `READ`, 4 `WRITE`...).
    pub operation: i8,
    /// Permission type code (2 `DENY`, 3 `ALLOW`).
    pub permission_type: i8,
}

fn text(s: &StrBytes) -> String {
    s.to_string()
}

impl KafkaClient {
    /// DescribeConfigs of topic `topic`: every entry, with its source (no synonyms, no
    /// documentation). The resource's error code is a [`WireError::Broker`].
    pub fn describe_topic_configs(&mut self, topic: &str) -> Result<Vec<ConfigEntry>, WireError> {
        const API: &str = "DescribeConfigs";
        let name = StrBytes::from_string(topic.to_owned());
        let (response, version) = self.call(API, 1, |_| {
            DescribeConfigsRequest::default()
                .with_resources(vec![DescribeConfigsResource::default()
                    .with_resource_type(CONFIG_RESOURCE_TOPIC)
                    .with_resource_name(name.clone())
                    .with_configuration_keys(None)])
                .with_include_synonyms(false)
                .with_include_documentation(false)
        })?;
        let result = response
            .results
            .iter()
            .find(|r| r.resource_type == CONFIG_RESOURCE_TOPIC && &*r.resource_name == topic)
            .ok_or_else(|| self.malformed(API, version, format!("no entry for topic {topic}")))?;
        if result.error_code != 0 {
            return Err(self.broker_error_on(
                API,
                format!("the configs of topic {topic}"),
                result.error_code,
                AclResource::Topic(topic.to_owned()),
            ));
        }
        Ok(result
            .configs
            .iter()
            .map(|c| ConfigEntry {
                name: text(&c.name),
                value: c.value.as_ref().map(text),
                source: c.config_source,
                sensitive: c.is_sensitive,
            })
            .collect())
    }

    /// ListGroups of this broker's coordinators, every state; from v5 only the `types` given
    /// (empty: every type).
    pub fn list_groups(&mut self, types: &[&str]) -> Result<Vec<ListedGroup>, WireError> {
        const API: &str = "ListGroups";
        let (response, _) = self.call(API, 0, |version| {
            let request = ListGroupsRequest::default();
            if version >= 5 {
                request.with_types_filter(
                    types
                        .iter()
                        .map(|t| StrBytes::from_string((*t).to_owned()))
                        .collect(),
                )
            } else {
                request
            }
        })?;
        if response.error_code != 0 {
            return Err(self.broker_error_on(
                API,
                "the groups".into(),
                response.error_code,
                AclResource::Cluster,
            ));
        }
        Ok(response
            .groups
            .iter()
            .map(|g| ListedGroup {
                group_id: text(&g.group_id.0),
                protocol_type: text(&g.protocol_type),
                state: text(&g.group_state),
                group_type: text(&g.group_type),
            })
            .collect())
    }

    /// FindCoordinator of group `group`: the coordinator's node id and `host:port`. An error
    /// code (`COORDINATOR_NOT_AVAILABLE`...) is a [`WireError::Broker`].
    pub fn find_group_coordinator(&mut self, group: &str) -> Result<(i32, String), WireError> {
        const API: &str = "FindCoordinator";
        let key = StrBytes::from_string(group.to_owned());
        let (response, version) = self.call(API, 0, |version| {
            let request = FindCoordinatorRequest::default().with_key_type(COORDINATOR_KEY_GROUP);
            if version >= FIND_COORDINATOR_BATCHED {
                request.with_coordinator_keys(vec![key.clone()])
            } else {
                request.with_key(key.clone())
            }
        })?;
        let what = format!("the coordinator of group {group:?}");
        let (code, node, host, port) = if version >= FIND_COORDINATOR_BATCHED {
            let c = response
                .coordinators
                .iter()
                .find(|c| &*c.key == group)
                .ok_or_else(|| self.malformed(API, version, format!("no entry for {what}")))?;
            (c.error_code, c.node_id.0, text(&c.host), c.port)
        } else {
            (
                response.error_code,
                response.node_id.0,
                text(&response.host),
                response.port,
            )
        };
        if code != 0 {
            return Err(self.broker_error_on(API, what, code, AclResource::Group(group.into())));
        }
        if host.is_empty() || !(1..=65535).contains(&port) {
            return Err(self.malformed(API, version, format!("{what} is at {host:?} port {port}")));
        }
        Ok((node, format!("{host}:{port}")))
    }

    /// DescribeGroups (classic groups) of `groups` at their coordinator: one description per
    /// group asked, each with its own error code.
    pub fn describe_groups(
        &mut self,
        groups: &[String],
    ) -> Result<Vec<GroupDescription>, WireError> {
        const API: &str = "DescribeGroups";
        let ids: Vec<GroupId> = groups
            .iter()
            .map(|g| GroupId(StrBytes::from_string(g.clone())))
            .collect();
        let (response, version) = self.call(API, 0, |_| {
            DescribeGroupsRequest::default().with_groups(ids.clone())
        })?;
        let described: Vec<GroupDescription> = response
            .groups
            .iter()
            .map(|g| GroupDescription {
                group_id: text(&g.group_id.0),
                error_code: g.error_code,
                error_message: g.error_message.as_ref().map(text),
                state: text(&g.group_state),
                members: g.members.iter().map(|m| text(&m.member_id)).collect(),
            })
            .collect();
        self.check_all_described(API, version, groups, &described)?;
        Ok(described)
    }

    /// ConsumerGroupDescribe (KIP-848 consumer groups) of `groups` at their coordinator.
    pub fn consumer_group_describe(
        &mut self,
        groups: &[String],
    ) -> Result<Vec<GroupDescription>, WireError> {
        const API: &str = "ConsumerGroupDescribe";
        let ids: Vec<GroupId> = groups
            .iter()
            .map(|g| GroupId(StrBytes::from_string(g.clone())))
            .collect();
        let (response, version) = self.call(API, 0, |_| {
            ConsumerGroupDescribeRequest::default().with_group_ids(ids.clone())
        })?;
        let described: Vec<GroupDescription> = response
            .groups
            .iter()
            .map(|g| GroupDescription {
                group_id: text(&g.group_id.0),
                error_code: g.error_code,
                error_message: g.error_message.as_ref().map(text),
                state: text(&g.group_state),
                members: g.members.iter().map(|m| text(&m.member_id)).collect(),
            })
            .collect();
        self.check_all_described(API, version, groups, &described)?;
        Ok(described)
    }

    fn check_all_described(
        &self,
        api: &'static str,
        version: i16,
        asked: &[String],
        described: &[GroupDescription],
    ) -> Result<(), WireError> {
        match asked
            .iter()
            .find(|g| !described.iter().any(|d| &d.group_id == *g))
        {
            Some(missing) => {
                Err(self.malformed(api, version, format!("no entry for group {missing:?}")))
            }
            None => Ok(()),
        }
    }

    /// OffsetFetch of every committed offset of group `group` (all topics), at the group's
    /// coordinator. The group's error code is a [`WireError::Broker`]; each partition carries
    /// its own.
    pub fn offset_fetch(&mut self, group: &str) -> Result<Vec<CommittedOffset>, WireError> {
        const API: &str = "OffsetFetch";
        let id = GroupId(StrBytes::from_string(group.to_owned()));
        let (response, version) = self.call(API, 1, |version| {
            if version >= OFFSET_FETCH_GROUPS {
                OffsetFetchRequest::default().with_groups(vec![OffsetFetchRequestGroup::default()
                    .with_group_id(id.clone())
                    .with_topics(None)])
            } else {
                OffsetFetchRequest::default()
                    .with_group_id(id.clone())
                    .with_topics(None)
            }
        })?;
        let what = format!("the offsets of group {group:?}");
        if version >= OFFSET_FETCH_GROUPS {
            let g = response
                .groups
                .iter()
                .find(|g| &*g.group_id.0 == group)
                .ok_or_else(|| self.malformed(API, version, format!("no entry for {what}")))?;
            if g.error_code != 0 {
                let resource = AclResource::Group(group.to_owned());
                return Err(self.broker_error_on(API, what, g.error_code, resource));
            }
            Ok(g.topics
                .iter()
                .flat_map(|t| {
                    t.partitions.iter().map(|p| CommittedOffset {
                        topic: text(&t.name.0),
                        partition: p.partition_index,
                        offset: p.committed_offset,
                        error_code: p.error_code,
                    })
                })
                .collect())
        } else {
            if response.error_code != 0 {
                let resource = AclResource::Group(group.to_owned());
                return Err(self.broker_error_on(API, what, response.error_code, resource));
            }
            Ok(response
                .topics
                .iter()
                .flat_map(|t| {
                    t.partitions.iter().map(|p| CommittedOffset {
                        topic: text(&t.name.0),
                        partition: p.partition_index,
                        offset: p.committed_offset,
                        error_code: p.error_code,
                    })
                })
                .collect())
        }
    }

    /// DescribeAcls with a match-any filter: every binding the authorizer holds. A broker
    /// without an authorizer answers `SECURITY_DISABLED`, a [`WireError::Broker`].
    pub fn describe_all_acls(&mut self) -> Result<Vec<AclEntry>, WireError> {
        const API: &str = "DescribeAcls";
        let (response, _) = self.call(API, 1, |_| {
            DescribeAclsRequest::default()
                .with_resource_type_filter(ACL_ANY)
                .with_resource_name_filter(None)
                .with_pattern_type_filter(ACL_ANY)
                .with_principal_filter(None)
                .with_host_filter(None)
                .with_operation(ACL_ANY)
                .with_permission_type(ACL_ANY)
        })?;
        if response.error_code != 0 {
            let what = match &response.error_message {
                Some(m) if !m.is_empty() => format!("every ACL ({m})"),
                _ => "every ACL".to_owned(),
            };
            return Err(self.broker_error_on(API, what, response.error_code, AclResource::Cluster));
        }
        Ok(response
            .resources
            .iter()
            .flat_map(|r| {
                r.acls.iter().map(|a| AclEntry {
                    resource_type: r.resource_type,
                    resource_name: text(&r.resource_name),
                    pattern_type: r.pattern_type,
                    principal: text(&a.principal),
                    host: text(&a.host),
                    operation: a.operation,
                    permission_type: a.permission_type,
                })
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};
    use std::time::Duration;

    use bytes::{BufMut, BytesMut};
    use kafka_protocol::messages::api_versions_response::ApiVersion;
    use kafka_protocol::messages::describe_acls_response::{AclDescription, DescribeAclsResource};
    use kafka_protocol::messages::describe_configs_response::DescribeConfigsResult;
    use kafka_protocol::messages::{
        ApiKey, ApiVersionsResponse, DescribeAclsResponse, DescribeConfigsResponse, ResponseHeader,
    };
    use kafka_protocol::protocol::Encodable;

    use super::*;

    /// The body of one answer, encoded at the request's version.
    type Answer = Box<dyn FnOnce(i16) -> BytesMut + Send>;

    fn encoded<M: Encodable + Send + 'static>(message: M) -> Answer {
        Box::new(move |version| {
            let mut body = BytesMut::new();
            message.encode(&mut body, version).expect("encodes");
            body
        })
    }

    fn respond(stream: &mut TcpStream, api_key: i16, version: i16, correlation: i32, body: &[u8]) {
        let header_version = ApiKey::try_from(api_key)
            .map(|k| k.response_header_version(version))
            .unwrap_or(0);
        let mut frame = BytesMut::new();
        ResponseHeader::default()
            .with_correlation_id(correlation)
            .encode(&mut frame, header_version)
            .expect("header");
        frame.put_slice(body);
        let mut out = Vec::new();
        out.extend_from_slice(&i32::try_from(frame.len()).expect("small").to_be_bytes());
        out.extend_from_slice(&frame);
        let _ = stream.write_all(&out);
    }

    /// A one-connection fake broker: it answers ApiVersions with every admin API, then each
    /// further request with the next of `answers`.
    fn fake_broker(answers: Vec<Answer>) -> String {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let address = listener.local_addr().expect("address").to_string();
        std::thread::spawn(move || {
            let Ok((mut stream, _)) = listener.accept() else {
                return;
            };
            let mut answers = answers.into_iter();
            loop {
                let mut size = [0u8; 4];
                if stream.read_exact(&mut size).is_err() {
                    return;
                }
                let mut request = vec![0u8; usize::try_from(i32::from_be_bytes(size)).unwrap_or(0)];
                if stream.read_exact(&mut request).is_err() || request.len() < 8 {
                    return;
                }
                let api_key = i16::from_be_bytes([request[0], request[1]]);
                let version = i16::from_be_bytes([request[2], request[3]]);
                let correlation =
                    i32::from_be_bytes([request[4], request[5], request[6], request[7]]);
                let body = if api_key == ApiKey::ApiVersions as i16 {
                    let keys = [
                        (ApiKey::ApiVersions, 0, 3),
                        (ApiKey::DescribeConfigs, 1, 4),
                        (ApiKey::DescribeAcls, 1, 3),
                    ];
                    encoded(
                        ApiVersionsResponse::default().with_api_keys(
                            keys.iter()
                                .map(|(k, min, max)| {
                                    ApiVersion::default()
                                        .with_api_key(*k as i16)
                                        .with_min_version(*min)
                                        .with_max_version(*max)
                                })
                                .collect(),
                        ),
                    )(version)
                } else {
                    match answers.next() {
                        Some(answer) => answer(version),
                        None => return,
                    }
                };
                respond(&mut stream, api_key, version, correlation, &body);
            }
        });
        address
    }

    fn client(address: &str) -> KafkaClient {
        KafkaClient::new(address, Duration::from_secs(1), Duration::from_secs(2))
    }

    /// A DescribeConfigs answer about another topic is malformed, not a panic nor an empty
    /// config (which would delete the destination's overrides).
    #[test]
    fn describe_configs_for_another_resource_is_malformed() {
        let address = fake_broker(vec![encoded(
            DescribeConfigsResponse::default().with_results(vec![DescribeConfigsResult::default()
                .with_resource_type(CONFIG_RESOURCE_TOPIC)
                .with_resource_name(StrBytes::from_static_str("payments"))]),
        )]);
        let error = client(&address)
            .describe_topic_configs("orders")
            .expect_err("wrong topic");
        assert!(matches!(error, WireError::Malformed { .. }), "{error}");
        assert!(
            error.to_string().contains("no entry for topic orders"),
            "{error}"
        );
        assert!(error.to_string().contains(&address), "{error}");
    }

    /// A resource error code is a broker error naming Kafka's error.
    #[test]
    fn describe_configs_resource_error_is_a_broker_error() {
        let address = fake_broker(vec![encoded(
            DescribeConfigsResponse::default().with_results(vec![DescribeConfigsResult::default()
                .with_resource_type(CONFIG_RESOURCE_TOPIC)
                .with_resource_name(StrBytes::from_static_str("orders"))
                .with_error_code(3)]),
        )]);
        let error = client(&address)
            .describe_topic_configs("orders")
            .expect_err("error code");
        assert_eq!(error.code(), Some(3), "{error}");
        assert!(
            error.to_string().contains("UNKNOWN_TOPIC_OR_PARTITION"),
            "{error}"
        );
    }

    /// DescribeAcls bindings come back with the codes as sent, and a missing API is
    /// `Unsupported`.
    #[test]
    fn describe_acls_and_a_missing_api() {
        let address = fake_broker(vec![encoded(
            DescribeAclsResponse::default().with_resources(vec![DescribeAclsResource::default()
                .with_resource_type(2)
                .with_resource_name(StrBytes::from_static_str("orders"))
                .with_pattern_type(3)
                .with_acls(vec![AclDescription::default()
                    .with_principal(StrBytes::from_static_str("User:app"))
                    .with_host(StrBytes::from_static_str("*"))
                    .with_operation(3)
                    .with_permission_type(3)])]),
        )]);
        let mut c = client(&address);
        let acls = c.describe_all_acls().expect("acls");
        assert_eq!(
            acls,
            [AclEntry {
                resource_type: 2,
                resource_name: "orders".into(),
                pattern_type: 3,
                principal: "User:app".into(),
                host: "*".into(),
                operation: 3,
                permission_type: 3,
            }]
        );
        let error = c.list_groups(&[]).expect_err("no ListGroups");
        assert!(matches!(error, WireError::Unsupported { .. }), "{error}");
    }
}
