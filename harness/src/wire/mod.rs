//! A live Apache Kafka broker as the source of a mirror, over Kafka's wire protocol.
//!
//! Our own small client on a blocking TCP stream (TLS with rustls when configured); the
//! [`kafka_protocol`] crate only encodes and decodes the messages.
//!
//! - [`connection`]: framing (a 4-byte size, then the header and the body), correlation ids,
//!   the request and response header versions, and the API versions negotiated with
//!   ApiVersions when the connection opens.
//! - [`client`]: the five APIs a mirror fetcher needs as a *consumer* (replica id -1):
//!   ApiVersions, Metadata (topic ids), ListOffsets, Fetch (record batches kept as raw bytes)
//!   and OffsetForLeaderEpoch.
//! - [`admin`]: the admin APIs a metadata sync reads (DescribeConfigs, ListGroups,
//!   FindCoordinator, DescribeGroups, ConsumerGroupDescribe, OffsetFetch, DescribeAcls).
//! - [`metadata_source`]: [`KafkaMetadataSource`], the sync's
//!   [`MetadataSource`](crate::sync::MetadataSource) on top of them.
//! - [`source_cluster`]: [`SourceCluster`], every partition of the selected topics
//!   ([`topic_selection`]: names and globs) of a multi-broker cluster, one connection per
//!   broker and one coalesced Fetch per leader broker per round, answered per partition, in a
//!   [`fetch_session`] (KIP-227) per broker.
//! - [`security`]: TLS (rustls) and SASL (PLAIN, SCRAM) from a Kafka `client.properties`
//!   ([`SecurityConfig`]), on every connection ([`transport`]: plain TCP or TLS);
//!   [`authorization`]: the ACL a principal lacks when the broker says so.
//!
//! Every failure is a [`WireError`] naming the broker's address and the API; a malformed
//! response is an error, never a panic.

pub mod admin;
pub mod authorization;
pub mod client;
pub mod connection;
#[cfg(any(test, feature = "testkit"))]
pub mod fake_broker;
#[cfg(test)]
pub(crate) mod fake_link;
pub mod fetch_session;
pub mod metadata_source;
pub mod security;
pub mod source_cluster;
pub mod topic_selection;
pub mod transport;

pub use authorization::{AclNeeded, AclResource};
pub use client::{KafkaClient, PartitionFetch, TopicMetadata};
pub use connection::Connection;
pub use metadata_source::{KafkaMetadataSource, MetadataSourceOptions};
pub use security::{SecurityConfig, SecurityConfigError};
pub use source_cluster::{
    CurrentLeaderEpoch, PartitionFetchError, PartitionFetchRequest, PartitionFetchResult,
    PartitionFetched, SourceCluster, SourceClusterOptions, SourceMetadata,
};
pub use topic_selection::TopicSelection;

/// What can go wrong talking to a Kafka broker. Every message names the broker and the API.
#[derive(Debug, thiserror::Error)]
pub enum WireError {
    /// The broker's address does not resolve or nothing listens there.
    #[error(
        "cannot connect to Kafka broker {address}: {source}; check that the broker runs and \
         listens there"
    )]
    Connect {
        /// The broker's address (`host:port`).
        address: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// The connection broke (or timed out) while a request was in flight.
    #[error("the connection to Kafka broker {address} failed during {api}: {source}")]
    Io {
        /// The broker's address.
        address: String,
        /// The API of the request.
        api: &'static str,
        /// The OS error (`TimedOut` / `WouldBlock` for a timeout).
        source: std::io::Error,
    },
    /// A request could not be encoded (a bug, or a value out of the protocol's range).
    #[error("cannot encode a {api} v{version} request for {address}: {reason}")]
    Encode {
        /// The broker's address.
        address: String,
        /// The API.
        api: &'static str,
        /// The version.
        version: i16,
        /// Why.
        reason: String,
    },
    /// A response that does not parse, or does not answer what was asked.
    #[error("malformed {api} v{version} response from Kafka broker {address}: {reason}")]
    Malformed {
        /// The broker's address.
        address: String,
        /// The API.
        api: &'static str,
        /// The version.
        version: i16,
        /// What is wrong.
        reason: String,
    },
    /// The broker does not support a version of an API that kmirror can speak.
    #[error(
        "Kafka broker {address} supports {api} versions {broker}, kmirror needs one of {needed}; \
         use Apache Kafka 3.1 or later"
    )]
    Unsupported {
        /// The broker's address.
        address: String,
        /// The API.
        api: &'static str,
        /// The broker's range (`min..max`, or `none`).
        broker: String,
        /// Ours.
        needed: String,
    },
    /// The broker answered with a Kafka error code.
    #[error("{api} of {what} at Kafka broker {address} failed: {name} (error code {code})")]
    Broker {
        /// The broker's address.
        address: String,
        /// The API.
        api: &'static str,
        /// What was asked (`topic orders partition 0`).
        what: String,
        /// Kafka's error code.
        code: i16,
        /// Kafka's name of the error (`UNKNOWN_TOPIC_ID`...).
        name: String,
    },
    /// The broker refused an operation to this principal: an ACL is missing.
    #[error(
        "the source denied {acl} ({name} from Kafka broker {address} in {api}): grant it with \
         `{}`",
        acl.grant_command(address)
    )]
    Denied {
        /// The broker's address.
        address: String,
        /// The API.
        api: &'static str,
        /// Kafka's error code (`TOPIC_AUTHORIZATION_FAILED`...).
        code: i16,
        /// Kafka's name of it.
        name: String,
        /// The missing ACL.
        acl: Box<AclNeeded>,
    },
    /// The TLS handshake failed (an untrusted or mismatched certificate, not a TLS listener...).
    #[error("TLS with Kafka broker {address} failed: {reason}")]
    Tls {
        /// The broker's address.
        address: String,
        /// Why, and what to change.
        reason: String,
    },
    /// The broker rejected the SASL login (`SASL_AUTHENTICATION_FAILED`).
    #[error(
        "Kafka broker {address} rejected the SASL {mechanism} login of user '{username}': \
         {message}; check the username and password in sasl.jaas.config of the source config"
    )]
    Authentication {
        /// The broker's address.
        address: String,
        /// The SASL mechanism.
        mechanism: &'static str,
        /// The user name (never the password).
        username: String,
        /// The broker's message (or what failed on our side).
        message: String,
    },
    /// The broker does not enable the configured SASL mechanism.
    #[error(
        "Kafka broker {address} does not enable SASL mechanism {mechanism} (it enables \
         {enabled}); set sasl.mechanism to one of them"
    )]
    SaslMechanism {
        /// The broker's address.
        address: String,
        /// The mechanism asked for.
        mechanism: &'static str,
        /// The broker's enabled mechanisms.
        enabled: String,
    },
}

impl Clone for WireError {
    /// A copy for each partition of a failed coalesced request (the OS error is copied as its
    /// kind and message).
    fn clone(&self) -> Self {
        match self {
            WireError::Connect { address, source } => WireError::Connect {
                address: address.clone(),
                source: copy_io_error(source),
            },
            WireError::Io {
                address,
                api,
                source,
            } => WireError::Io {
                address: address.clone(),
                api,
                source: copy_io_error(source),
            },
            WireError::Encode {
                address,
                api,
                version,
                reason,
            } => WireError::Encode {
                address: address.clone(),
                api,
                version: *version,
                reason: reason.clone(),
            },
            WireError::Malformed {
                address,
                api,
                version,
                reason,
            } => WireError::Malformed {
                address: address.clone(),
                api,
                version: *version,
                reason: reason.clone(),
            },
            WireError::Unsupported {
                address,
                api,
                broker,
                needed,
            } => WireError::Unsupported {
                address: address.clone(),
                api,
                broker: broker.clone(),
                needed: needed.clone(),
            },
            WireError::Broker {
                address,
                api,
                what,
                code,
                name,
            } => WireError::Broker {
                address: address.clone(),
                api,
                what: what.clone(),
                code: *code,
                name: name.clone(),
            },
            WireError::Denied {
                address,
                api,
                code,
                name,
                acl,
            } => WireError::Denied {
                address: address.clone(),
                api,
                code: *code,
                name: name.clone(),
                acl: acl.clone(),
            },
            WireError::Tls { address, reason } => WireError::Tls {
                address: address.clone(),
                reason: reason.clone(),
            },
            WireError::Authentication {
                address,
                mechanism,
                username,
                message,
            } => WireError::Authentication {
                address: address.clone(),
                mechanism,
                username: username.clone(),
                message: message.clone(),
            },
            WireError::SaslMechanism {
                address,
                mechanism,
                enabled,
            } => WireError::SaslMechanism {
                address: address.clone(),
                mechanism,
                enabled: enabled.clone(),
            },
        }
    }
}

fn copy_io_error(e: &std::io::Error) -> std::io::Error {
    std::io::Error::new(e.kind(), e.to_string())
}

impl WireError {
    /// Whether the error is about the connection (reconnecting may help), not an answer.
    pub fn is_connection(&self) -> bool {
        matches!(self, WireError::Connect { .. } | WireError::Io { .. })
    }

    /// The broker's error code, for [`WireError::Broker`] and [`WireError::Denied`].
    pub fn code(&self) -> Option<i16> {
        match self {
            WireError::Broker { code, .. } | WireError::Denied { code, .. } => Some(*code),
            _ => None,
        }
    }

    /// Whether the source refused this client: an untrusted or mismatched TLS certificate, a
    /// rejected SASL login or mechanism, a missing ACL. Retrying does not help until an
    /// operator changes the source config or the ACLs.
    pub fn is_security(&self) -> bool {
        matches!(
            self,
            WireError::Denied { .. }
                | WireError::Tls { .. }
                | WireError::Authentication { .. }
                | WireError::SaslMechanism { .. }
        )
    }
}

/// Kafka's error codes the source handles by name.
pub mod codes {
    /// `OFFSET_OUT_OF_RANGE`.
    pub const OFFSET_OUT_OF_RANGE: i16 = 1;
    /// `UNKNOWN_TOPIC_OR_PARTITION`.
    pub const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
    /// `LEADER_NOT_AVAILABLE`.
    pub const LEADER_NOT_AVAILABLE: i16 = 5;
    /// `NOT_LEADER_OR_FOLLOWER`.
    pub const NOT_LEADER_OR_FOLLOWER: i16 = 6;
    /// `UNSUPPORTED_VERSION`.
    pub const UNSUPPORTED_VERSION: i16 = 35;
    /// `FENCED_LEADER_EPOCH`.
    pub const FENCED_LEADER_EPOCH: i16 = 74;
    /// `UNKNOWN_LEADER_EPOCH`.
    pub const UNKNOWN_LEADER_EPOCH: i16 = 75;
    /// `UNKNOWN_TOPIC_ID`.
    pub const UNKNOWN_TOPIC_ID: i16 = 100;
    /// `OFFSET_NOT_AVAILABLE` (ListOffsets during a leader change).
    pub const OFFSET_NOT_AVAILABLE: i16 = 78;
    /// `REPLICA_NOT_AVAILABLE`.
    pub const REPLICA_NOT_AVAILABLE: i16 = 9;
    /// `KAFKA_STORAGE_ERROR` (the leader's log dir is offline; another replica takes over).
    pub const KAFKA_STORAGE_ERROR: i16 = 56;

    /// The per-partition codes after which the partition's leader must be looked up again
    /// (Kafka's consumer refreshes its metadata on them): the request is retried, not failed.
    pub fn is_leadership(code: i16) -> bool {
        matches!(
            code,
            NOT_LEADER_OR_FOLLOWER
                | FENCED_LEADER_EPOCH
                | UNKNOWN_LEADER_EPOCH
                | LEADER_NOT_AVAILABLE
                | UNKNOWN_TOPIC_OR_PARTITION
                | REPLICA_NOT_AVAILABLE
                | KAFKA_STORAGE_ERROR
                | OFFSET_NOT_AVAILABLE
        )
    }
}

/// Kafka's name of an error code (`UNKNOWN_TOPIC_ID`), from the protocol crate's table.
pub fn error_name(code: i16) -> String {
    match kafka_protocol::ResponseError::try_from_code(code) {
        None => "NONE".to_owned(),
        Some(kafka_protocol::ResponseError::Unknown(c)) => format!("UNKNOWN_SERVER_ERROR({c})"),
        Some(e) => screaming_snake(&format!("{e:?}")),
    }
}

/// `UnknownTopicId` -> `UNKNOWN_TOPIC_ID`.
fn screaming_snake(camel: &str) -> String {
    let mut out = String::new();
    for (i, c) in camel.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(c.to_ascii_uppercase());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_denial_is_one_line_naming_the_acl_and_the_command() {
        let e = WireError::Denied {
            address: "b1:9093".into(),
            api: "Fetch",
            code: 29,
            name: error_name(29),
            acl: Box::new(AclNeeded {
                operation: "Read",
                resource: AclResource::Topic("orders".into()),
                principal: Some("User:mirror".into()),
            }),
        };
        assert_eq!(
            e.to_string(),
            "the source denied Read on topic 'orders' to User:mirror (TOPIC_AUTHORIZATION_FAILED \
             from Kafka broker b1:9093 in Fetch): grant it with `kafka-acls.sh --bootstrap-server \
             b1:9093 --command-config ADMIN.properties --add --allow-principal User:mirror \
             --operation Read --topic orders`"
        );
        assert!(e.is_security() && !e.is_connection());
        assert_eq!(e.code(), Some(29));
    }

    #[test]
    fn error_names_are_kafkas() {
        assert_eq!(error_name(100), "UNKNOWN_TOPIC_ID");
        assert_eq!(error_name(1), "OFFSET_OUT_OF_RANGE");
        assert_eq!(error_name(6), "NOT_LEADER_OR_FOLLOWER");
        assert_eq!(error_name(0), "NONE");
    }
}
