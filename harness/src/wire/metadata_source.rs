//! [`KafkaMetadataSource`]: a live Kafka cluster as the [`MetadataSource`] of a metadata sync.
//!
//! | trait method | wire |
//! |---|---|
//! | `topic` | Metadata (name and topic id; also the brokers and the partition's leader) |
//! | `log_end_offset` | ListOffsets latest, read-uncommitted, at the leader of the partition's topic (any topic): the **high watermark**, the end of what a consumer can read (a consumer cannot see the LEO) |
//! | `topic_config` | DescribeConfigs of the topic, keeping the entries whose source is `DYNAMIC_TOPIC_CONFIG` |
//! | `groups` | ListGroups on every broker (from v5 only `classic` and `consumer` groups), then per group FindCoordinator (key type GROUP), DescribeGroups (classic) or ConsumerGroupDescribe (KIP-848 `consumer` groups) at the coordinator for the members, and OffsetFetch (every topic) for the offsets |
//! | `acls` | DescribeAcls with a match-any filter |
//!
//! **Per item, or the whole round.** A broker that cannot be reached, breaks the connection,
//! answers nonsense or lacks an API version is a [`SyncError::SourceUnavailable`] naming the
//! bootstrap address (the reason names the broker and the API): the round stops, the
//! destination is untouched. An error code about one item goes to [`Read::rejected`] with a
//! message naming it, and the rest proceeds: a group whose coordinator is not available, whose
//! description or OffsetFetch fails, a partition's offset error, a sensitive config whose value
//! the broker hides. A group that disappeared between ListGroups and its description is left
//! out silently. Codes the kernel does not know (an ACL operation newer than it) are passed on
//! as `UNKNOWN(<code>)`, and the kernel rejects the binding. Errors about what cannot be read at
//! all (the topic's configs, ACLs when the broker refuses DescribeAcls) stop the round: syncing
//! "nothing" would delete the destination's copies. A broker without an authorizer
//! (`SECURITY_DISABLED`) has no ACLs: an empty list.
//!
//! Limits: share and streams groups are not synced (filtered by ListGroups v5; a broker older
//! than v5 lists every group and each is described as a classic group).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use kmirror_kernel::sync::acl::RawAclBinding;
use kmirror_kernel::sync::group_offsets::TopicPartition;
use kmirror_kernel::types::{Offset, TopicId};

use super::admin::{
    AclEntry, ConfigEntry, GroupDescription, DYNAMIC_TOPIC_CONFIG, GROUP_TYPE_CLASSIC,
    GROUP_TYPE_CONSUMER,
};
use super::authorization::{is_authorization, GROUP_AUTHORIZATION_FAILED};
use super::client::{TopicMetadata, LATEST_TIMESTAMP, READ_UNCOMMITTED};
use super::security::SecurityConfig;
use super::{error_name, KafkaClient, WireError};
use crate::sync::{GroupRecord, MetadataSource, Read, SyncError};

/// `SECURITY_DISABLED`: DescribeAcls on a broker without an authorizer.
const SECURITY_DISABLED: i16 = 54;
/// `GROUP_ID_NOT_FOUND`: the group is gone.
const GROUP_ID_NOT_FOUND: i16 = 69;

/// Timeouts of a [`KafkaMetadataSource`]'s requests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MetadataSourceOptions {
    /// How long a TCP connect may take.
    pub connect_timeout: Duration,
    /// How long a request may wait for its answer.
    pub request_timeout: Duration,
}

impl Default for MetadataSourceOptions {
    /// 3 s to connect, 30 s per request.
    fn default() -> Self {
        MetadataSourceOptions {
            connect_timeout: Duration::from_secs(3),
            request_timeout: Duration::from_secs(30),
        }
    }
}

/// A live Kafka cluster's metadata. See the [module documentation](self).
#[derive(Debug)]
pub struct KafkaMetadataSource {
    bootstrap: KafkaClient,
    others: BTreeMap<String, KafkaClient>,
    topic: String,
    options: MetadataSourceOptions,
    /// Metadata per topic asked, until [`MetadataSource::release`].
    metadata: BTreeMap<String, TopicMetadata>,
}

impl KafkaMetadataSource {
    /// The cluster whose broker listens at `bootstrap` (`host:port`, or a comma-separated
    /// list as `--source-bootstrap` takes: its first address is asked), mirrored topic `topic`
    /// (what [`MetadataSource::topic`] describes; `log_end_offset` and `topic_config` answer for
    /// any topic, as a node destination's sync asks). Nothing is sent until the first call.
    pub fn new(bootstrap: &str, topic: &str, options: MetadataSourceOptions) -> Self {
        let first = bootstrap.split(',').map(str::trim).find(|a| !a.is_empty());
        KafkaMetadataSource {
            bootstrap: KafkaClient::new(
                first.unwrap_or(bootstrap),
                options.connect_timeout,
                options.request_timeout,
            ),
            others: BTreeMap::new(),
            topic: topic.to_owned(),
            options,
            metadata: BTreeMap::new(),
        }
    }

    fn unavailable(&self, error: WireError) -> SyncError {
        SyncError::SourceUnavailable {
            source_name: format!("Kafka cluster at {}", self.bootstrap.address()),
            reason: error.to_string(),
        }
    }

    /// A per-item error's message, or the error that stops the round (anything but a Kafka
    /// error code: the connection, a malformed answer, a missing API version).
    fn per_item(&self, error: WireError) -> Result<String, SyncError> {
        match error {
            WireError::Broker { .. } | WireError::Denied { .. } => Ok(error.to_string()),
            other => Err(self.unavailable(other)),
        }
    }

    /// The client of the broker at `address` (the bootstrap client when it is that broker).
    fn client(&mut self, address: &str) -> &mut KafkaClient {
        if address == self.bootstrap.address() {
            return &mut self.bootstrap;
        }
        let options = self.options;
        let security = self.bootstrap.security().clone();
        self.others.entry(address.to_owned()).or_insert_with(|| {
            KafkaClient::new(address, options.connect_timeout, options.request_timeout)
                .with_security(security)
        })
    }

    /// The same source, every connection with `security` (TLS, SASL).
    pub fn with_security(mut self, security: Arc<SecurityConfig>) -> Self {
        self.bootstrap = self.bootstrap.with_security(security);
        self.others.clear();
        self
    }

    fn metadata(&mut self) -> Result<TopicMetadata, SyncError> {
        let topic = self.topic.clone();
        self.metadata_of(&topic)
    }

    /// The metadata of `topic` (any topic: a node destination's sync asks for each of its
    /// topics), asked once until [`MetadataSource::release`].
    fn metadata_of(&mut self, topic: &str) -> Result<TopicMetadata, SyncError> {
        if let Some(m) = self.metadata.get(topic) {
            return Ok(m.clone());
        }
        let m = self
            .bootstrap
            .metadata(topic)
            .map_err(|e| self.unavailable(e))?;
        self.metadata.insert(topic.to_owned(), m.clone());
        Ok(m)
    }

    /// The members and offsets of `listed` (whose group type is `group_type`), or a rejection;
    /// `Ok(None)` when the group is gone.
    fn group(
        &mut self,
        group: &str,
        group_type: &str,
    ) -> Result<Result<Option<GroupRecord>, String>, SyncError> {
        let coordinator = match self.bootstrap.find_group_coordinator(group) {
            Ok((_, address)) => address,
            Err(e) => {
                return Ok(Err(format!(
                    "group {group:?} on the source: {}; not synced this round",
                    self.per_item(e)?
                )))
            }
        };
        let ids = [group.to_owned()];
        let client = self.client(&coordinator);
        let described = if group_type == GROUP_TYPE_CONSUMER {
            client.consumer_group_describe(&ids)
        } else {
            client.describe_groups(&ids)
        };
        let described = match described {
            Ok(d) => d,
            Err(e) => {
                return Ok(Err(format!(
                    "group {group:?} on the source: {}; not synced this round",
                    self.per_item(e)?
                )))
            }
        };
        let members = match describe_outcome(group, described) {
            Ok(Some(members)) => members,
            Ok(None) => return Ok(Ok(None)),
            Err(message) => return Ok(Err(message)),
        };
        let offsets = match self.client(&coordinator).offset_fetch(group) {
            Ok(o) => o,
            Err(e) => {
                return Ok(Err(format!(
                    "group {group:?} on the source: {}; not synced this round",
                    self.per_item(e)?
                )))
            }
        };
        let mut record = GroupRecord {
            members,
            offsets: BTreeMap::new(),
        };
        let mut partition_errors = Vec::new();
        for o in offsets {
            if o.error_code != 0 {
                let grant = if is_authorization(o.error_code) {
                    format!(" (grant Describe on topic {:?})", o.topic)
                } else {
                    String::new()
                };
                partition_errors.push(format!(
                    "{}-{}: {} (error code {}){grant}",
                    o.topic,
                    o.partition,
                    error_name(o.error_code),
                    o.error_code
                ));
            } else if o.offset >= 0 {
                record
                    .offsets
                    .insert(TopicPartition::new(o.topic, o.partition), o.offset);
            }
        }
        if !partition_errors.is_empty() {
            return Ok(Err(format!(
                "group {group:?} on the source: OffsetFetch at Kafka broker {coordinator} \
                 failed for {}; the group is not synced this round",
                partition_errors.join(", ")
            )));
        }
        Ok(Ok(Some(record)))
    }
}

/// The members of the one group a DescribeGroups / ConsumerGroupDescribe answered, `None` when
/// the group is gone (`GROUP_ID_NOT_FOUND`, or state `Dead`), or a rejection.
fn describe_outcome(
    group: &str,
    described: Vec<GroupDescription>,
) -> Result<Option<Vec<String>>, String> {
    let Some(d) = described.into_iter().find(|d| d.group_id == group) else {
        return Ok(None);
    };
    if d.error_code == GROUP_ID_NOT_FOUND
        || (d.error_code == 0 && d.state.eq_ignore_ascii_case("dead"))
    {
        return Ok(None);
    }
    if d.error_code != 0 {
        let grant = if d.error_code == GROUP_AUTHORIZATION_FAILED {
            format!(" (the mirror's principal needs Describe on group {group:?})")
        } else {
            String::new()
        };
        return Err(format!(
            "group {group:?} on the source cannot be described: {} (error code {}){}{grant}; \
             not synced this round",
            error_name(d.error_code),
            d.error_code,
            d.error_message
                .filter(|m| !m.is_empty())
                .map(|m| format!(": {m}"))
                .unwrap_or_default()
        ));
    }
    let mut members = d.members;
    members.sort();
    Ok(Some(members))
}

/// The topic's overrides (source `DYNAMIC_TOPIC_CONFIG`) of a DescribeConfigs answer; an
/// override whose value the broker hides is rejected.
pub fn topic_overrides(topic: &str, entries: &[ConfigEntry]) -> Read<BTreeMap<String, String>> {
    let mut read: Read<BTreeMap<String, String>> = Read::default();
    for e in entries.iter().filter(|e| e.source == DYNAMIC_TOPIC_CONFIG) {
        match &e.value {
            Some(v) if !e.sensitive => {
                read.value.insert(e.name.clone(), v.clone());
            }
            _ => read.rejected.push(format!(
                "topic config {} of topic {topic} on the source is sensitive or has no value \
                 (DescribeConfigs does not return it); the destination keeps its value",
                e.name
            )),
        }
    }
    read
}

fn code_name(code: i8, names: &[&'static str]) -> String {
    usize::try_from(code)
        .ok()
        .and_then(|i| names.get(i))
        .map_or_else(|| format!("UNKNOWN({code})"), |n| (*n).to_owned())
}

/// Kafka's `ResourceType` names by code.
const RESOURCE_TYPES: &[&str] = &[
    "UNKNOWN",
    "ANY",
    "TOPIC",
    "GROUP",
    "CLUSTER",
    "TRANSACTIONAL_ID",
    "DELEGATION_TOKEN",
    "USER",
];
/// Kafka's `PatternType` names by code.
const PATTERN_TYPES: &[&str] = &["UNKNOWN", "ANY", "MATCH", "LITERAL", "PREFIXED"];
/// Kafka's `AclOperation` names by code.
const OPERATIONS: &[&str] = &[
    "UNKNOWN",
    "ANY",
    "ALL",
    "READ",
    "WRITE",
    "CREATE",
    "DELETE",
    "ALTER",
    "DESCRIBE",
    "CLUSTER_ACTION",
    "DESCRIBE_CONFIGS",
    "ALTER_CONFIGS",
    "IDEMPOTENT_WRITE",
    "CREATE_TOKENS",
    "DESCRIBE_TOKENS",
    "TWO_PHASE_COMMIT",
];
/// Kafka's `AclPermissionType` names by code.
const PERMISSION_TYPES: &[&str] = &["UNKNOWN", "ANY", "DENY", "ALLOW"];

/// A DescribeAcls binding with Kafka's names (`UNKNOWN(<code>)` for a code without one, which
/// the kernel then rejects).
pub fn raw_binding(entry: &AclEntry) -> RawAclBinding {
    RawAclBinding {
        resource_type: code_name(entry.resource_type, RESOURCE_TYPES),
        resource_name: entry.resource_name.clone(),
        pattern_type: code_name(entry.pattern_type, PATTERN_TYPES),
        principal: entry.principal.clone(),
        host: entry.host.clone(),
        operation: code_name(entry.operation, OPERATIONS),
        permission_type: code_name(entry.permission_type, PERMISSION_TYPES),
    }
}

impl MetadataSource for KafkaMetadataSource {
    fn describe(&self) -> String {
        format!("Kafka cluster at {}", self.bootstrap.address())
    }

    fn topic(&mut self) -> Result<(String, TopicId), SyncError> {
        let m = self.metadata()?;
        Ok((m.topic, m.topic_id))
    }

    fn log_end_offset(&mut self, partition: &TopicPartition) -> Result<Offset, SyncError> {
        let m = self.metadata_of(&partition.topic)?;
        let Some(leader) = m.leader_address(partition.partition).map(str::to_owned) else {
            return Err(SyncError::SourceUnavailable {
                source_name: self.describe(),
                reason: format!("Metadata names no leader for {partition}"),
            });
        };
        let (topic, index) = (partition.topic.clone(), partition.partition);
        let answer =
            self.client(&leader)
                .list_offset(&topic, index, LATEST_TIMESTAMP, READ_UNCOMMITTED);
        match answer {
            Ok((offset, _)) => Ok(offset),
            Err(e) => {
                // The leader may have moved: look it up again next time.
                self.metadata.remove(&partition.topic);
                Err(self.unavailable(e))
            }
        }
    }

    fn topic_config(&mut self, topic: &str) -> Result<Read<BTreeMap<String, String>>, SyncError> {
        let entries = self
            .bootstrap
            .describe_topic_configs(topic)
            .map_err(|e| self.unavailable(e))?;
        Ok(topic_overrides(topic, &entries))
    }

    fn groups(&mut self) -> Result<Read<BTreeMap<String, GroupRecord>>, SyncError> {
        let brokers = self.metadata()?.brokers;
        let mut read: Read<BTreeMap<String, GroupRecord>> = Read::default();
        let mut listed = BTreeMap::new();
        for (node, address) in &brokers {
            match self
                .client(address)
                .list_groups(&[GROUP_TYPE_CLASSIC, GROUP_TYPE_CONSUMER])
            {
                Ok(groups) => {
                    for g in groups {
                        listed.insert(g.group_id.clone(), g);
                    }
                }
                Err(e) => read.rejected.push(format!(
                    "the groups coordinated by broker {node}: {}; they are not synced this round",
                    self.per_item(e)?
                )),
            }
        }
        for (group, listed) in listed {
            match self.group(&group, &listed.group_type)? {
                Ok(Some(record)) => {
                    read.value.insert(group, record);
                }
                Ok(None) => {}
                Err(message) => read.rejected.push(message),
            }
        }
        Ok(read)
    }

    fn acls(&mut self) -> Result<Read<Vec<RawAclBinding>>, SyncError> {
        match self.bootstrap.describe_all_acls() {
            Ok(entries) => Ok(Read {
                value: entries.iter().map(raw_binding).collect(),
                rejected: Vec::new(),
            }),
            Err(WireError::Broker { code, .. }) if code == SECURITY_DISABLED => Ok(Read::default()),
            Err(e) => Err(self.unavailable(e)),
        }
    }

    fn release(&mut self) {
        // Connections stay open (a broker serves many clients); the metadata is read again.
        self.metadata.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Only `DYNAMIC_TOPIC_CONFIG` entries are overrides; a hidden value is rejected alone.
    #[test]
    fn only_dynamic_topic_overrides_are_kept_and_hidden_values_rejected() {
        let entry = |name: &str, value: Option<&str>, source, sensitive| ConfigEntry {
            name: name.into(),
            value: value.map(Into::into),
            source,
            sensitive,
        };
        let read = topic_overrides(
            "orders",
            &[
                entry(
                    "retention.ms",
                    Some("86400000"),
                    DYNAMIC_TOPIC_CONFIG,
                    false,
                ),
                entry("segment.bytes", Some("1073741824"), 5, false),
                entry("cleanup.policy", Some("delete"), 4, false),
                entry("secret.key", None, DYNAMIC_TOPIC_CONFIG, true),
            ],
        );
        assert_eq!(
            read.value,
            BTreeMap::from([("retention.ms".to_owned(), "86400000".to_owned())])
        );
        assert_eq!(read.rejected.len(), 1);
        assert!(
            read.rejected[0].contains("secret.key"),
            "{:?}",
            read.rejected
        );
    }

    /// ACL codes get Kafka's names; an unknown code stays visible and the kernel rejects it.
    #[test]
    fn acl_codes_map_to_kafkas_names_and_unknown_codes_stay_visible() {
        let raw = raw_binding(&AclEntry {
            resource_type: 2,
            resource_name: "orders".into(),
            pattern_type: 3,
            principal: "User:alice".into(),
            host: "*".into(),
            operation: 3,
            permission_type: 3,
        });
        assert_eq!(
            (
                raw.resource_type.as_str(),
                raw.pattern_type.as_str(),
                raw.operation.as_str(),
                raw.permission_type.as_str()
            ),
            ("TOPIC", "LITERAL", "READ", "ALLOW")
        );
        let odd = raw_binding(&AclEntry {
            resource_type: 42,
            resource_name: "x".into(),
            pattern_type: -1,
            principal: "User:bob".into(),
            host: "*".into(),
            operation: 99,
            permission_type: 2,
        });
        assert_eq!(odd.resource_type, "UNKNOWN(42)");
        assert_eq!(odd.pattern_type, "UNKNOWN(-1)");
        assert_eq!(odd.operation, "UNKNOWN(99)");
        assert_eq!(odd.permission_type, "DENY");
        assert!(kmirror_kernel::sync::acl::AclBinding::from_raw(&odd).is_err());
    }

    /// A group gone between ListGroups and its description is left out; an error rejects it.
    #[test]
    fn a_vanished_group_is_left_out_and_a_group_error_is_rejected() {
        let d = |code, state: &str| GroupDescription {
            group_id: "g".into(),
            error_code: code,
            error_message: None,
            state: state.into(),
            members: vec!["m-2".into(), "m-1".into()],
        };
        assert_eq!(describe_outcome("g", vec![d(0, "Dead")]), Ok(None));
        assert_eq!(describe_outcome("g", vec![d(69, "")]), Ok(None));
        assert_eq!(
            describe_outcome("g", vec![d(0, "Stable")]),
            Ok(Some(vec!["m-1".into(), "m-2".into()]))
        );
        let rejected = describe_outcome("g", vec![d(15, "")]).expect_err("rejected");
        assert!(rejected.contains("COORDINATOR_NOT_AVAILABLE"), "{rejected}");
    }

    /// An unreachable broker stops the round as `SourceUnavailable`, naming its address.
    #[test]
    fn an_unreachable_broker_is_source_unavailable_naming_it() {
        // Port 1 on the loopback: nothing listens there.
        let options = MetadataSourceOptions {
            connect_timeout: std::time::Duration::from_millis(500),
            ..MetadataSourceOptions::default()
        };
        let mut source = KafkaMetadataSource::new("127.0.0.1:1", "orders", options);
        let error = source.topic().expect_err("nothing listens on port 1");
        assert!(
            matches!(error, SyncError::SourceUnavailable { .. }),
            "{error}"
        );
        assert!(error.to_string().contains("127.0.0.1:1"), "{error}");
    }
}
