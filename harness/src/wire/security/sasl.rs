//! SASL authentication of a new connection, after ApiVersions: SaslHandshake (v1: the
//! mechanism, the broker answers with its enabled ones), then SaslAuthenticate rounds carrying
//! the mechanism's messages (KIP-152). PLAIN is one round (`\0user\0password`); SCRAM two
//! (client-first / server-first, client-final / server-final, the server's signature checked).

use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::{SaslAuthenticateRequest, SaslHandshakeRequest};
use kafka_protocol::protocol::StrBytes;

use super::scram::{new_nonce, ScramClient};
use super::{SaslMechanism, SaslSettings};
use crate::wire::{error_name, Connection, WireError};

/// `UNSUPPORTED_SASL_MECHANISM`.
pub const UNSUPPORTED_SASL_MECHANISM: i16 = 33;
/// `SASL_AUTHENTICATION_FAILED`.
pub const SASL_AUTHENTICATION_FAILED: i16 = 58;

/// Authenticates `connection` as `settings` says. Returns the session's lifetime when the
/// broker set one (`connections.max.reauth.ms`, KIP-368): the connection must be reopened
/// before it ends.
pub fn authenticate(
    connection: &mut Connection,
    settings: &SaslSettings,
) -> Result<Option<Duration>, WireError> {
    const HANDSHAKE: &str = "SaslHandshake";
    let mechanism = settings.mechanism.name();
    let version = connection.version_for::<SaslHandshakeRequest>(HANDSHAKE, 1)?;
    let request =
        SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str(mechanism));
    let response = connection.send(HANDSHAKE, &request, version)?;
    match response.error_code {
        0 => {}
        UNSUPPORTED_SASL_MECHANISM => {
            return Err(WireError::SaslMechanism {
                address: connection.address().to_owned(),
                mechanism,
                enabled: response
                    .mechanisms
                    .iter()
                    .map(|m| m.to_string())
                    .collect::<Vec<_>>()
                    .join(", "),
            })
        }
        code => {
            return Err(WireError::Broker {
                address: connection.address().to_owned(),
                api: HANDSHAKE,
                what: format!("mechanism {mechanism}"),
                code,
                name: error_name(code),
            })
        }
    }
    let failed = |connection: &Connection, message: String| WireError::Authentication {
        address: connection.address().to_owned(),
        mechanism,
        username: settings.username.clone(),
        message,
    };
    match settings.mechanism {
        SaslMechanism::Plain => {
            let mut token = Vec::new();
            token.push(0);
            token.extend_from_slice(settings.username.as_bytes());
            token.push(0);
            token.extend_from_slice(settings.password.expose().as_bytes());
            let (_, lifetime) = round(connection, settings, token)?;
            Ok(lifetime)
        }
        SaslMechanism::ScramSha256 => scram::<sha2::Sha256>(connection, settings, &failed),
        SaslMechanism::ScramSha512 => scram::<sha2::Sha512>(connection, settings, &failed),
    }
}

fn scram<D>(
    connection: &mut Connection,
    settings: &SaslSettings,
    failed: &dyn Fn(&Connection, String) -> WireError,
) -> Result<Option<Duration>, WireError>
where
    D: hmac::digest::Digest + hmac::digest::core_api::BlockSizeUser + Clone,
{
    let nonce = new_nonce().map_err(|e| failed(connection, e))?;
    let mut client = ScramClient::<D>::new(&settings.username, &settings.password, &nonce);
    let (server_first, _) = round(connection, settings, client.client_first().into_bytes())?;
    let server_first = String::from_utf8(server_first.to_vec())
        .map_err(|_| failed(connection, "the server's SCRAM message is not UTF-8".into()))?;
    let last = client
        .client_final(&server_first)
        .map_err(|e| failed(connection, e))?;
    let (server_final, lifetime) = round(connection, settings, last.into_bytes())?;
    let server_final = String::from_utf8_lossy(&server_final);
    client
        .verify_server_final(&server_final)
        .map_err(|e| failed(connection, e))?;
    Ok(lifetime)
}

/// One SaslAuthenticate round: our bytes, the server's bytes and the session lifetime.
fn round(
    connection: &mut Connection,
    settings: &SaslSettings,
    token: Vec<u8>,
) -> Result<(Bytes, Option<Duration>), WireError> {
    const API: &str = "SaslAuthenticate";
    let version = connection.version_for::<SaslAuthenticateRequest>(API, 0)?;
    let request = SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from(token));
    let response = connection.send(API, &request, version)?;
    if response.error_code != 0 {
        let message = response
            .error_message
            .as_ref()
            .map(|m| m.split_whitespace().collect::<Vec<_>>().join(" "))
            .filter(|m| !m.is_empty())
            .unwrap_or_else(|| error_name(response.error_code));
        return Err(WireError::Authentication {
            address: connection.address().to_owned(),
            mechanism: settings.mechanism.name(),
            username: settings.username.clone(),
            message,
        });
    }
    let lifetime = (response.session_lifetime_ms > 0)
        .then(|| Duration::from_millis(response.session_lifetime_ms.unsigned_abs()));
    Ok((response.auth_bytes, lifetime))
}
