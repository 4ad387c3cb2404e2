//! What a source principal lacks when the broker answers an authorization error, and the
//! `kafka-acls` command that grants it.
//!
//! The ACLs the mirror's principal needs on the source (Kafka's authorizer checks, per API the
//! client sends):
//!
//! | API | resource | operation |
//! |---|---|---|
//! | Metadata (topics by name) | each topic | Describe (a glob lists only the topics it may describe) |
//! | ListOffsets, OffsetForLeaderEpoch | the topic | Describe |
//! | Fetch (consumer) | the topic | Read |
//! | DescribeConfigs (sync) | the topic | DescribeConfigs |
//! | ListGroups, FindCoordinator, DescribeGroups, ConsumerGroupDescribe, OffsetFetch (sync) | each group | Describe (ListGroups lists only the groups it may describe, or all with Describe on the cluster) |
//! | OffsetFetch (sync) | each topic of the group's offsets | Describe |
//! | DescribeAcls (sync) | the cluster | Describe |

use std::fmt;

/// `TOPIC_AUTHORIZATION_FAILED`.
pub const TOPIC_AUTHORIZATION_FAILED: i16 = 29;
/// `GROUP_AUTHORIZATION_FAILED`.
pub const GROUP_AUTHORIZATION_FAILED: i16 = 30;
/// `CLUSTER_AUTHORIZATION_FAILED`.
pub const CLUSTER_AUTHORIZATION_FAILED: i16 = 31;

/// A resource an ACL is about.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AclResource {
    /// A topic.
    Topic(String),
    /// A consumer group.
    Group(String),
    /// The cluster.
    Cluster,
}

impl fmt::Display for AclResource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AclResource::Topic(t) => write!(f, "topic '{t}'"),
            AclResource::Group(g) => write!(f, "group '{g}'"),
            AclResource::Cluster => f.write_str("the cluster"),
        }
    }
}

impl AclResource {
    fn kafka_acls_option(&self) -> String {
        match self {
            AclResource::Topic(t) => format!("--topic {t}"),
            AclResource::Group(g) => format!("--group {g}"),
            AclResource::Cluster => "--cluster".to_owned(),
        }
    }
}

/// The ACL a principal lacks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AclNeeded {
    /// Kafka's operation name as `kafka-acls --operation` takes it (`Read`, `Describe`...).
    pub operation: &'static str,
    /// The resource.
    pub resource: AclResource,
    /// The principal (`User:mirror`), when the client knows it (its SASL user).
    pub principal: Option<String>,
}

impl fmt::Display for AclNeeded {
    /// `Read on topic 'orders' to User:mirror`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} on {} to {}",
            self.operation,
            self.resource,
            self.principal.as_deref().unwrap_or("this principal")
        )
    }
}

impl AclNeeded {
    /// The `kafka-acls.sh` command granting it.
    pub fn grant_command(&self, bootstrap: &str) -> String {
        format!(
            "kafka-acls.sh --bootstrap-server {bootstrap} --command-config ADMIN.properties --add \
             --allow-principal {} --operation {} {}",
            self.principal
                .as_deref()
                .unwrap_or("User:<the mirror's user>"),
            self.operation,
            self.resource.kafka_acls_option()
        )
    }
}

/// Whether `code` is one of Kafka's authorization errors.
pub fn is_authorization(code: i16) -> bool {
    matches!(
        code,
        TOPIC_AUTHORIZATION_FAILED | GROUP_AUTHORIZATION_FAILED | CLUSTER_AUTHORIZATION_FAILED
    )
}

/// The ACL that `api` needed when the broker answered `code` about `resource` (`None` when
/// `code` is no authorization error). The resource is the cluster for
/// `CLUSTER_AUTHORIZATION_FAILED` whatever was asked.
pub fn needed(
    api: &str,
    code: i16,
    resource: AclResource,
    principal: Option<String>,
) -> Option<AclNeeded> {
    let (operation, resource) = match code {
        TOPIC_AUTHORIZATION_FAILED => {
            let op = match api {
                "Fetch" => "Read",
                "DescribeConfigs" => "DescribeConfigs",
                _ => "Describe",
            };
            (op, resource)
        }
        GROUP_AUTHORIZATION_FAILED => ("Describe", resource),
        CLUSTER_AUTHORIZATION_FAILED => ("Describe", AclResource::Cluster),
        _ => return None,
    };
    Some(AclNeeded {
        operation,
        resource,
        principal,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operations_follow_the_api() {
        let t = || AclResource::Topic("orders".into());
        let user = Some("User:mirror".to_owned());
        let fetch = needed("Fetch", 29, t(), user.clone()).expect("denied");
        assert_eq!(fetch.to_string(), "Read on topic 'orders' to User:mirror");
        assert_eq!(
            fetch.grant_command("b:9093"),
            "kafka-acls.sh --bootstrap-server b:9093 --command-config ADMIN.properties --add \
             --allow-principal User:mirror --operation Read --topic orders"
        );
        assert_eq!(
            needed("Metadata", 29, t(), None).unwrap().operation,
            "Describe"
        );
        assert_eq!(
            needed("ListOffsets", 29, t(), None).unwrap().operation,
            "Describe"
        );
        assert_eq!(
            needed("DescribeConfigs", 29, t(), None).unwrap().operation,
            "DescribeConfigs"
        );
        let acls = needed("DescribeAcls", 31, t(), None).unwrap();
        assert_eq!(acls.resource, AclResource::Cluster);
        assert!(acls
            .grant_command("b:1")
            .ends_with("--operation Describe --cluster"));
        let group = needed(
            "DescribeGroups",
            30,
            AclResource::Group("billing".into()),
            None,
        );
        assert_eq!(
            group.unwrap().to_string(),
            "Describe on group 'billing' to this principal"
        );
        assert_eq!(needed("Fetch", 6, t(), None), None);
    }
}
