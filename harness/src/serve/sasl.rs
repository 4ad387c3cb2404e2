//! SASL on a connection (KIP-43's framing: SaslHandshake v1, then SaslAuthenticate): PLAIN,
//! whose token `authzid NUL user NUL password` is checked against the listener's users, or
//! SCRAM-SHA-256/512 ([`super::scram`]), two SaslAuthenticate round trips. Until a login
//! succeeds a connection may send only ApiVersions, SaslHandshake and SaslAuthenticate; a
//! failed login is answered `SASL_AUTHENTICATION_FAILED` and closed.

use bytes::Bytes;
use kafka_protocol::messages::{
    RequestKind, ResponseKind, SaslAuthenticateResponse, SaslHandshakeResponse,
};
use kafka_protocol::protocol::StrBytes;

use super::scram::{ScramHash, ScramServer};
use super::security::ListenerSecurity;
use crate::wire::security::Secret;

/// `UNSUPPORTED_SASL_MECHANISM`.
const UNSUPPORTED_SASL_MECHANISM: i16 = 33;
/// `ILLEGAL_SASL_STATE`.
const ILLEGAL_SASL_STATE: i16 = 34;
/// `SASL_AUTHENTICATION_FAILED`.
const SASL_AUTHENTICATION_FAILED: i16 = 58;

/// The mechanism a connection's handshake chose.
#[derive(Debug)]
enum Mechanism {
    Plain,
    /// SCRAM, and the login once its first message was answered.
    Scram(ScramHash, Option<ScramServer>),
}

/// Where a connection is in its login.
#[derive(Debug)]
pub struct Sasl {
    required: bool,
    mechanism: Option<Mechanism>,
    user: Option<String>,
    failed: bool,
}

impl Sasl {
    /// A connection's login state (`required`: the listener is SASL_*).
    pub fn new(required: bool) -> Self {
        Sasl {
            required,
            mechanism: None,
            user: None,
            failed: false,
        }
    }

    /// Whether the connection may send other requests.
    pub fn authenticated(&self) -> bool {
        !self.required || self.user.is_some()
    }

    /// Whether the last answer refused a login (the connection then closes).
    pub fn failed(&self) -> bool {
        self.failed
    }

    /// The answer to a SASL request under the listener's `security`; `None` for any other
    /// request.
    pub fn answer(
        &mut self,
        request: &RequestKind,
        security: &ListenerSecurity,
    ) -> Option<ResponseKind> {
        match request {
            RequestKind::SaslHandshake(r) => {
                let asked = r.mechanism.to_ascii_uppercase();
                let served = security.sasl_users.is_some() && security.mechanisms.contains(&asked);
                self.mechanism = match ScramHash::of(&asked) {
                    _ if !served => None,
                    Some(hash) => Some(Mechanism::Scram(hash, None)),
                    None => Some(Mechanism::Plain),
                };
                let mut response = SaslHandshakeResponse::default();
                if security.sasl_users.is_some() {
                    response.mechanisms = security
                        .mechanisms
                        .iter()
                        .map(|m| StrBytes::from_string(m.clone()))
                        .collect();
                }
                if !served {
                    response.error_code = UNSUPPORTED_SASL_MECHANISM;
                }
                Some(ResponseKind::SaslHandshake(response))
            }
            RequestKind::SaslAuthenticate(r) => {
                let users = security.sasl_users.as_deref();
                Some(ResponseKind::SaslAuthenticate(
                    match (self.mechanism.as_mut(), users) {
                        (Some(_), Some(users)) if self.user.is_none() => {
                            self.authenticate(users, &r.auth_bytes)
                        }
                        _ => {
                            self.failed = true;
                            SaslAuthenticateResponse::default()
                                .with_error_code(ILLEGAL_SASL_STATE)
                                .with_error_message(Some(StrBytes::from_static_str(
                                    "SaslAuthenticate before a SaslHandshake choosing a served \
                                     mechanism, or after the login",
                                )))
                        }
                    },
                ))
            }
            _ => None,
        }
    }

    /// One SaslAuthenticate of the chosen mechanism's login.
    fn authenticate(
        &mut self,
        users: &std::collections::BTreeMap<String, Secret>,
        token: &[u8],
    ) -> SaslAuthenticateResponse {
        let step = match self.mechanism.as_mut() {
            Some(Mechanism::Plain) => check(users, token)
                .map(|user| (Bytes::new(), Some(user)))
                .ok_or_else(|| "Authentication failed: invalid username or password".to_owned()),
            Some(Mechanism::Scram(hash, login)) => match login.take() {
                None => ScramServer::start(*hash, users, token).map(|(server, first)| {
                    *login = Some(server);
                    (Bytes::from(first), None)
                }),
                Some(server) => server
                    .finish(token)
                    .map(|(last, user)| (Bytes::from(last), Some(user))),
            },
            None => Err("no mechanism chosen".to_owned()),
        };
        let response = SaslAuthenticateResponse::default();
        match step {
            Ok((bytes, user)) => {
                self.user = user;
                response.with_auth_bytes(bytes)
            }
            Err(message) => {
                self.failed = true;
                response
                    .with_error_code(SASL_AUTHENTICATION_FAILED)
                    .with_error_message(Some(StrBytes::from_string(message)))
            }
        }
    }
}

/// The user a PLAIN token logs in, if its password is right (`authzid` empty or the user).
fn check(users: &std::collections::BTreeMap<String, Secret>, token: &[u8]) -> Option<String> {
    let mut parts = token.split(|b| *b == 0);
    let authzid = std::str::from_utf8(parts.next()?).ok()?;
    let user = std::str::from_utf8(parts.next()?).ok()?;
    let password = std::str::from_utf8(parts.next()?).ok()?;
    if parts.next().is_some() || !(authzid.is_empty() || authzid == user) {
        return None;
    }
    let expected = users.get(user)?;
    (expected.expose() == password).then(|| user.to_owned())
}
