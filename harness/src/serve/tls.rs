//! TLS on the listener: the server's certificate chain and key from PEM, as Kafka's
//! `ssl.keystore.type=PEM` reads them, in a `--listener-config` file of Kafka's
//! `server.properties` keys.
//!
//! | key | meaning |
//! |---|---|
//! | `security.protocol` | `SSL` (TLS) or `PLAINTEXT` (the default) |
//! | `ssl.keystore.type` | `PEM` (the only type read) |
//! | `ssl.keystore.location` | a PEM file holding the certificate chain and its unencrypted key |
//! | `ssl.keystore.certificate.chain`, `ssl.keystore.key` | the same, inline |
//!
//! Any other `ssl.`, `sasl.` or `security.` key is refused (a listener that looks secured and
//! is not would be worse than an error); other keys are errors too.

use std::path::Path;
use std::sync::Arc;

use rustls::ServerConfig;

use crate::wire::security::properties;
use crate::wire::security::tls::{certificates, private_key};

/// Why a `--listener-config` file cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("listener config {origin}: {reason}")]
pub struct ListenerConfigError {
    /// The file.
    pub origin: String,
    /// What is wrong, and what to do.
    pub reason: String,
}

/// Reads a `--listener-config` file: the TLS server configuration, or `None` for PLAINTEXT.
pub fn from_file(path: &Path) -> Result<Option<Arc<ServerConfig>>, ListenerConfigError> {
    let origin = path.display().to_string();
    let fail = |reason: String| ListenerConfigError {
        origin: origin.clone(),
        reason,
    };
    let text = std::fs::read_to_string(path).map_err(|e| fail(format!("cannot read it: {e}")))?;
    let props = properties::parse(&text).map_err(|e| fail(e.to_string()))?;
    let mut protocol = "PLAINTEXT".to_owned();
    let (mut location, mut chain, mut key) = (None, None, None);
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
            other => {
                return Err(fail(format!(
                    "{other} is not a listener setting kmirror reads (security.protocol, \
                     ssl.keystore.type, ssl.keystore.location, ssl.keystore.certificate.chain, \
                     ssl.keystore.key); SASL on the listener is not served yet"
                )))
            }
        }
    }
    match protocol.to_ascii_uppercase().as_str() {
        "PLAINTEXT" => return Ok(None),
        "SSL" => {}
        other => {
            return Err(fail(format!(
                "security.protocol={other}: the listener serves PLAINTEXT or SSL (SASL is not \
                 served yet)"
            )))
        }
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
                "security.protocol=SSL needs ssl.keystore.location (a PEM file with the \
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
    Ok(Some(Arc::new(config)))
}
