//! The listener's security: TLS with the server's certificate chain and key from PEM, as
//! Kafka's `ssl.keystore.type=PEM` reads them, and SASL (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)
//! with the users of a broker's JAAS entry, in a `--listener-config` file of Kafka's
//! `server.properties` keys.
//!
//! | key | meaning |
//! |---|---|
//! | `security.protocol` | `PLAINTEXT` (the default), `SSL`, `SASL_PLAINTEXT` or `SASL_SSL` |
//! | `ssl.keystore.type` | `PEM` (the only type read) |
//! | `ssl.keystore.location` | a PEM file holding the certificate chain and its unencrypted key |
//! | `ssl.keystore.certificate.chain`, `ssl.keystore.key` | the same, inline |
//! | `sasl.enabled.mechanisms` | comma-separated, of `PLAIN` (the default), `SCRAM-SHA-256`, `SCRAM-SHA-512` |
//! | `sasl.jaas.config` | `org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret" ...;`: one `user_<name>="<password>"` per user, as on a Kafka broker; every mechanism logs in the same users (SCRAM salts the password at each login, [`super::scram`]) |
//!
//! Any other `ssl.`, `sasl.` or `security.` key is refused (a listener that looks secured and
//! is not would be worse than an error); other keys are errors too. Every authenticated user
//! may do everything (no ACLs are checked).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use rustls::ServerConfig;

use crate::wire::security::properties;
use crate::wire::security::tls::{certificates, private_key};
use crate::wire::security::Secret;

/// The security of a listener.
#[derive(Clone, Debug, Default)]
pub struct ListenerSecurity {
    /// TLS (`SSL`, `SASL_SSL`); `None`: plain TCP.
    pub tls: Option<Arc<ServerConfig>>,
    /// The SASL users and their passwords (`SASL_PLAINTEXT`, `SASL_SSL`); `None`: no
    /// authentication.
    pub sasl_users: Option<Arc<BTreeMap<String, Secret>>>,
    /// The SASL mechanisms served, by Kafka's names (`sasl.enabled.mechanisms`).
    pub mechanisms: Vec<String>,
}

impl ListenerSecurity {
    /// `security.protocol`'s name for this listener.
    pub fn protocol(&self) -> &'static str {
        match (self.tls.is_some(), self.sasl_users.is_some()) {
            (false, false) => "PLAINTEXT",
            (true, false) => "SSL",
            (false, true) => "SASL_PLAINTEXT",
            (true, true) => "SASL_SSL",
        }
    }
}

/// Why a `--listener-config` file cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("listener config {origin}: {reason}")]
pub struct ListenerConfigError {
    /// The file.
    pub origin: String,
    /// What is wrong, and what to do.
    pub reason: String,
}

/// Reads a `--listener-config` file.
pub fn from_file(path: &Path) -> Result<ListenerSecurity, ListenerConfigError> {
    let origin = path.display().to_string();
    let fail = |reason: String| ListenerConfigError {
        origin: origin.clone(),
        reason,
    };
    let text = std::fs::read_to_string(path).map_err(|e| fail(format!("cannot read it: {e}")))?;
    let props = properties::parse(&text).map_err(|e| fail(e.to_string()))?;
    let mut protocol = "PLAINTEXT".to_owned();
    let (mut location, mut chain, mut key) = (None, None, None);
    let (mut mechanisms, mut jaas) = (None, None);
    for p in props {
        match p.key.as_str() {
            "security.protocol" | "listener.security.protocol" => protocol = p.value.clone(),
            "ssl.keystore.type" if p.value.eq_ignore_ascii_case("PEM") => {}
            "ssl.keystore.type" => {
                return Err(fail(format!(
                    "ssl.keystore.type={} is not read; convert the keystore to PEM \
                     (ssl.keystore.type=PEM)",
                    p.value
                )))
            }
            "ssl.keystore.location" => location = Some(p.value.clone()),
            "ssl.keystore.certificate.chain" => chain = Some(p.value.clone()),
            "ssl.keystore.key" => key = Some(p.value.clone()),
            "sasl.enabled.mechanisms" => mechanisms = Some(p.value.clone()),
            "sasl.jaas.config" => jaas = Some(p.value.clone()),
            other => {
                return Err(fail(format!(
                    "{other} is not a listener setting kmirror reads (security.protocol, \
                     ssl.keystore.type, ssl.keystore.location, ssl.keystore.certificate.chain, \
                     ssl.keystore.key, sasl.enabled.mechanisms, sasl.jaas.config)"
                )))
            }
        }
    }
    let (tls, sasl) = match protocol.to_ascii_uppercase().as_str() {
        "PLAINTEXT" => (false, false),
        "SSL" => (true, false),
        "SASL_PLAINTEXT" => (false, true),
        "SASL_SSL" => (true, true),
        other => {
            return Err(fail(format!(
                "security.protocol={other}: the listener serves PLAINTEXT, SSL, SASL_PLAINTEXT \
                 or SASL_SSL"
            )))
        }
    };
    let mechanisms = enabled_mechanisms(mechanisms.as_deref().unwrap_or("PLAIN")).map_err(fail)?;
    let sasl_users = if sasl {
        let jaas = jaas.ok_or_else(|| {
            fail(
                "SASL needs sasl.jaas.config with the users: `org.apache.kafka.common.security.\
                 plain.PlainLoginModule required user_NAME=\"PASSWORD\";`"
                    .to_owned(),
            )
        })?;
        let users = jaas_users(&jaas).map_err(fail)?;
        Some(Arc::new(users))
    } else {
        None
    };
    let security = ListenerSecurity {
        tls: None,
        sasl_users,
        mechanisms: if sasl { mechanisms } else { Vec::new() },
    };
    if !tls {
        return Ok(security);
    }
    let (chain_pem, key_pem) = match (location, chain, key) {
        (Some(path), None, None) => {
            let pem = std::fs::read_to_string(&path)
                .map_err(|e| fail(format!("ssl.keystore.location {path}: {e}")))?;
            (pem.clone(), pem)
        }
        (None, Some(chain), Some(key)) => (chain, key),
        _ => {
            return Err(fail(
                "TLS (SSL, SASL_SSL) needs ssl.keystore.location (a PEM file with the \
                 certificate chain and the key) or both ssl.keystore.certificate.chain and \
                 ssl.keystore.key"
                    .to_owned(),
            ))
        }
    };
    let chain = certificates(&chain_pem).map_err(|e| fail(format!("the keystore {e}")))?;
    let key = private_key(&key_pem).map_err(|e| fail(format!("the keystore {e}")))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| fail(e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(|e| fail(format!("the certificate and key do not go together: {e}")))?;
    Ok(ListenerSecurity {
        tls: Some(Arc::new(config)),
        ..security
    })
}

/// The mechanisms of `sasl.enabled.mechanisms`, by Kafka's names, each one served.
fn enabled_mechanisms(list: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    for m in list.split(',').map(str::trim).filter(|m| !m.is_empty()) {
        let name = m.to_ascii_uppercase();
        if !SERVED_MECHANISMS.contains(&name.as_str()) {
            return Err(format!(
                "sasl.enabled.mechanisms: {m} is not served (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)"
            ));
        }
        if !out.contains(&name) {
            out.push(name);
        }
    }
    if out.is_empty() {
        return Err("sasl.enabled.mechanisms names no mechanism".to_owned());
    }
    Ok(out)
}

/// The SASL mechanisms a listener serves.
pub const SERVED_MECHANISMS: [&str; 3] = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"];

/// The `user_<name>="<password>"` options of a broker's JAAS entry. The error never quotes a
/// password.
fn jaas_users(jaas: &str) -> Result<BTreeMap<String, Secret>, String> {
    let mut users = BTreeMap::new();
    let mut rest = jaas;
    while let Some(at) = rest.find("user_") {
        rest = &rest[at + "user_".len()..];
        let Some(eq) = rest.find('=') else { break };
        let name = rest[..eq].trim().to_owned();
        let value = rest[eq + 1..].trim_start();
        let Some(quoted) = value.strip_prefix('"') else {
            return Err(format!(
                "sasl.jaas.config: user_{name}'s password is not quoted"
            ));
        };
        let end = quoted
            .find('"')
            .ok_or_else(|| format!("sasl.jaas.config: user_{name}'s password is not closed"))?;
        let password = quoted[..end].to_owned();
        users.insert(name, Secret::new(password));
        rest = &quoted[end + 1..];
    }
    if users.is_empty() {
        return Err("sasl.jaas.config names no user (user_NAME=\"PASSWORD\")".to_owned());
    }
    Ok(users)
}
