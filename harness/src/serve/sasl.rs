//! SASL/PLAIN on a connection (KIP-43's framing: SaslHandshake v1, then SaslAuthenticate):
//! the mechanism is PLAIN, the token `authzid NUL user NUL password`, checked against the
//! listener's users. Until it succeeds a connection may send only ApiVersions, SaslHandshake and
//! SaslAuthenticate; a failed login is answered `SASL_AUTHENTICATION_FAILED` and closed.

use std::collections::BTreeMap;

use bytes::Bytes;
use kafka_protocol::messages::{
    RequestKind, ResponseKind, SaslAuthenticateResponse, SaslHandshakeResponse,
};
use kafka_protocol::protocol::StrBytes;

use crate::wire::security::Secret;

/// `UNSUPPORTED_SASL_MECHANISM`.
const UNSUPPORTED_SASL_MECHANISM: i16 = 33;
/// `ILLEGAL_SASL_STATE`.
const ILLEGAL_SASL_STATE: i16 = 34;
/// `SASL_AUTHENTICATION_FAILED`.
const SASL_AUTHENTICATION_FAILED: i16 = 58;

/// Where a connection is in its login.
#[derive(Debug)]
pub struct Sasl {
    required: bool,
    mechanism_chosen: bool,
    user: Option<String>,
    failed: bool,
}

impl Sasl {
    /// A connection's login state (`required`: the listener is SASL_*).
    pub fn new(required: bool) -> Self {
        Sasl {
            required,
            mechanism_chosen: false,
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

    /// The answer to a SASL request; `None` for any other request.
    pub fn answer(
        &mut self,
        request: &RequestKind,
        users: Option<&BTreeMap<String, Secret>>,
    ) -> Option<ResponseKind> {
        match request {
            RequestKind::SaslHandshake(r) => {
                let plain = r.mechanism.eq_ignore_ascii_case("PLAIN") && users.is_some();
                self.mechanism_chosen = plain;
                let mut response = SaslHandshakeResponse::default();
                if users.is_some() {
                    response.mechanisms = vec![StrBytes::from_static_str("PLAIN")];
                }
                if !plain {
                    response.error_code = UNSUPPORTED_SASL_MECHANISM;
                }
                Some(ResponseKind::SaslHandshake(response))
            }
            RequestKind::SaslAuthenticate(r) => {
                let mut response = SaslAuthenticateResponse::default();
                if !self.mechanism_chosen || self.user.is_some() {
                    response.error_code = ILLEGAL_SASL_STATE;
                    response.error_message = Some(StrBytes::from_static_str(
                        "SaslAuthenticate before a SaslHandshake choosing PLAIN, or twice",
                    ));
                    self.failed = true;
                    return Some(ResponseKind::SaslAuthenticate(response));
                }
                match users.and_then(|u| check(u, &r.auth_bytes)) {
                    Some(user) => {
                        self.user = Some(user);
                        response.auth_bytes = Bytes::new();
                    }
                    None => {
                        response.error_code = SASL_AUTHENTICATION_FAILED;
                        response.error_message = Some(StrBytes::from_static_str(
                            "Authentication failed: invalid username or password",
                        ));
                        self.failed = true;
                    }
                }
                Some(ResponseKind::SaslAuthenticate(response))
            }
            _ => None,
        }
    }
}

/// The user a PLAIN token logs in, if its password is right (`authzid` empty or the user).
fn check(users: &BTreeMap<String, Secret>, token: &[u8]) -> Option<String> {
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
