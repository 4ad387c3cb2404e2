//! Security of the source client: TLS (rustls) and SASL (PLAIN, SCRAM-SHA-256/512), configured
//! with Kafka's client property names from a `client.properties` file.
//!
//! - [`properties`]: Java's `.properties` syntax, with each entry's line.
//! - [`config`]: [`SecurityConfig`] from those properties, checked (typed
//!   [`SecurityConfigError`]s naming the key and the line).
//! - [`jaas`]: the `sasl.jaas.config` value (user and password).
//! - [`secret`]: [`Secret`], a password that never prints.
//! - [`tls`]: rustls' client configuration and the handshake, failures explained.
//! - [`sasl`]: SaslHandshake and SaslAuthenticate on a new connection.
//! - [`scram`]: the SCRAM client messages (RFC 5802 / RFC 7677).
//!
//! Every connection the source client opens ([`Connection::connect_with`](super::Connection::connect_with))
//! does TCP, then TLS when the protocol says so, then ApiVersions, then SASL.

pub mod config;
pub mod jaas;
pub mod properties;
pub mod sasl;
pub mod scram;
pub mod secret;
pub mod tls;

#[cfg(test)]
mod config_tests;
#[cfg(test)]
mod sasl_tests;
#[cfg(test)]
mod tls_tests;

pub use config::{
    SaslMechanism, SaslSettings, SecurityConfig, SecurityConfigError, SecurityProtocol, TlsSettings,
};
pub use secret::Secret;
