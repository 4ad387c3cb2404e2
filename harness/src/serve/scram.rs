//! The server side of SCRAM (RFC 5802; SCRAM-SHA-256 and -512 per RFC 7677) for a SASL
//! listener, as Kafka's `ScramSaslServer` speaks it: no channel binding (the client's `c=`
//! must be the GS2 header it sent, `n,,` or `n,a=<user>,`), the user name's `=2C` and `=3D`
//! unescaped, extensions ignored.
//!
//! The users and passwords are the listener's (`user_NAME="PASSWORD"` of its JAAS entry, as for
//! PLAIN). A Kafka broker keeps salted credentials in its metadata; this node keeps the
//! passwords, so each login salts the password afresh ([`ITERATIONS`], Kafka's default) and
//! derives the keys from it.

use std::collections::BTreeMap;

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use hmac::digest::core_api::BlockSizeUser;
use hmac::digest::Digest;

use crate::wire::security::scram::{hi, hmac, new_nonce};
use crate::wire::security::Secret;

/// The iteration count of the salted passwords (Kafka's default for SCRAM credentials).
pub const ITERATIONS: u32 = 4096;

/// Kafka's message for any refused SCRAM login (it does not say which part was wrong).
const INVALID_CREDENTIALS: &str = "Authentication failed: Invalid user credentials";

/// A SCRAM mechanism's hash.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScramHash {
    /// SCRAM-SHA-256.
    Sha256,
    /// SCRAM-SHA-512.
    Sha512,
}

impl ScramHash {
    /// The hash of SASL mechanism `name` (`SCRAM-SHA-256` or `SCRAM-SHA-512`, any case).
    pub fn of(name: &str) -> Option<ScramHash> {
        match name.to_ascii_uppercase().as_str() {
            "SCRAM-SHA-256" => Some(ScramHash::Sha256),
            "SCRAM-SHA-512" => Some(ScramHash::Sha512),
            _ => None,
        }
    }
}

/// A SCRAM login between the client's first message and its final one.
#[derive(Debug)]
pub struct ScramServer {
    hash: ScramHash,
    user: String,
    password: Secret,
    gs2_header: String,
    client_first_bare: String,
    server_first: String,
    nonce: String,
    salt: Vec<u8>,
}

impl ScramServer {
    /// Answers the client's first message with the server's (`r=<nonce>,s=<salt>,i=<n>`), or
    /// refuses it (an unknown user, a malformed message, channel binding asked).
    pub fn start(
        hash: ScramHash,
        users: &BTreeMap<String, Secret>,
        client_first: &[u8],
    ) -> Result<(ScramServer, String), String> {
        let text = std::str::from_utf8(client_first).map_err(|_| malformed("first"))?;
        let (flag, rest) = text.split_once(',').ok_or_else(|| malformed("first"))?;
        if flag != "n" && flag != "y" {
            return Err("SCRAM channel binding is not supported".to_owned());
        }
        let (authzid, bare) = rest.split_once(',').ok_or_else(|| malformed("first"))?;
        let mut user = None;
        let mut client_nonce = None;
        for attribute in bare.split(',') {
            match attribute.split_once('=') {
                Some(("n", v)) => user = Some(v.replace("=2C", ",").replace("=3D", "=")),
                Some(("r", v)) => client_nonce = Some(v),
                _ => {}
            }
        }
        let (user, client_nonce) = user.zip(client_nonce).ok_or_else(|| malformed("first"))?;
        match authzid.strip_prefix("a=") {
            None if authzid.is_empty() => {}
            Some(a) if a == user => {}
            _ => return Err("the SCRAM authorization id must be the user name".to_owned()),
        }
        let password = users
            .get(&user)
            .ok_or_else(|| INVALID_CREDENTIALS.to_owned())?
            .clone();
        let nonce = format!("{client_nonce}{}", new_nonce()?);
        let salt = new_nonce()?.into_bytes();
        let server_first = format!("r={nonce},s={},i={ITERATIONS}", BASE64.encode(&salt));
        let server = ScramServer {
            hash,
            user,
            password,
            gs2_header: format!("{flag},{authzid},"),
            client_first_bare: bare.to_owned(),
            server_first: server_first.clone(),
            nonce,
            salt,
        };
        Ok((server, server_first))
    }

    /// Checks the client's final message (`c=...,r=...,p=<proof>`): the server's final message
    /// (`v=<signature>`) and the user logged in, or the refusal.
    pub fn finish(&self, client_final: &[u8]) -> Result<(String, String), String> {
        let text = std::str::from_utf8(client_final).map_err(|_| malformed("final"))?;
        let (without_proof, proof) = text.rsplit_once(",p=").ok_or_else(|| malformed("final"))?;
        let mut binding = None;
        let mut nonce = None;
        for attribute in without_proof.split(',') {
            match attribute.split_once('=') {
                Some(("c", v)) => binding = Some(v),
                Some(("r", v)) => nonce = Some(v),
                _ => {}
            }
        }
        let binding = binding
            .and_then(|b| BASE64.decode(b).ok())
            .ok_or_else(|| malformed("final"))?;
        if binding != self.gs2_header.as_bytes() || nonce != Some(self.nonce.as_str()) {
            return Err(INVALID_CREDENTIALS.to_owned());
        }
        let proof = BASE64.decode(proof).map_err(|_| malformed("final"))?;
        let auth_message = format!(
            "{},{},{without_proof}",
            self.client_first_bare, self.server_first
        );
        let signature = match self.hash {
            ScramHash::Sha256 => self.verify::<sha2::Sha256>(&proof, &auth_message),
            ScramHash::Sha512 => self.verify::<sha2::Sha512>(&proof, &auth_message),
        }
        .ok_or_else(|| INVALID_CREDENTIALS.to_owned())?;
        Ok((format!("v={}", BASE64.encode(signature)), self.user.clone()))
    }

    /// The server's signature when `proof` proves the client knows the password (RFC 5802:
    /// the client key recovered from the proof hashes to the stored key).
    fn verify<D: Digest + BlockSizeUser + Clone>(
        &self,
        proof: &[u8],
        auth_message: &str,
    ) -> Option<Vec<u8>> {
        let salted = hi::<D>(self.password.expose().as_bytes(), &self.salt, ITERATIONS);
        let stored_key = D::digest(hmac::<D>(&salted, b"Client Key")).to_vec();
        let client_signature = hmac::<D>(&stored_key, auth_message.as_bytes());
        if proof.len() != client_signature.len() {
            return None;
        }
        let client_key: Vec<u8> = proof
            .iter()
            .zip(&client_signature)
            .map(|(p, s)| p ^ s)
            .collect();
        if D::digest(&client_key).to_vec() != stored_key {
            return None;
        }
        let server_key = hmac::<D>(&salted, b"Server Key");
        Some(hmac::<D>(&server_key, auth_message.as_bytes()))
    }
}

fn malformed(which: &str) -> String {
    format!("the client's {which} SCRAM message is malformed")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::security::scram::ScramClient;

    fn users() -> BTreeMap<String, Secret> {
        [("al,ice".to_owned(), Secret::new("pencil"))].into()
    }

    /// A whole login with kmirror's own SCRAM client: the client checks the server's
    /// signature, the server the client's proof.
    fn login<D: Digest + BlockSizeUser + Clone>(
        hash: ScramHash,
        password: &str,
    ) -> Result<String, String> {
        let mut client = ScramClient::<D>::new("al,ice", &Secret::new(password), "abc");
        let (server, server_first) =
            ScramServer::start(hash, &users(), client.client_first().as_bytes())?;
        let client_final = client.client_final(&server_first)?;
        let (server_final, user) = server.finish(client_final.as_bytes())?;
        client.verify_server_final(&server_final)?;
        Ok(user)
    }

    #[test]
    fn kmirrors_scram_client_logs_in_with_both_hashes() {
        assert_eq!(
            login::<sha2::Sha256>(ScramHash::Sha256, "pencil"),
            Ok("al,ice".into())
        );
        assert_eq!(
            login::<sha2::Sha512>(ScramHash::Sha512, "pencil"),
            Ok("al,ice".into())
        );
    }

    #[test]
    fn a_wrong_password_an_unknown_user_or_a_changed_nonce_is_refused() {
        assert_eq!(
            login::<sha2::Sha256>(ScramHash::Sha256, "pen"),
            Err(INVALID_CREDENTIALS.to_owned())
        );
        assert_eq!(
            login::<sha2::Sha512>(ScramHash::Sha256, "pencil"),
            Err(INVALID_CREDENTIALS.to_owned()),
            "a client hashing with the other mechanism"
        );
        let unknown = ScramServer::start(ScramHash::Sha256, &users(), b"n,,n=bob,r=abc");
        assert_eq!(unknown.unwrap_err(), INVALID_CREDENTIALS);
        let binding = ScramServer::start(ScramHash::Sha256, &users(), b"p=tls-unique,,n=x,r=a");
        assert!(binding.unwrap_err().contains("channel binding"));
        let other = ScramServer::start(ScramHash::Sha256, &users(), b"n,a=bob,n=al=2Cice,r=a");
        assert!(other.unwrap_err().contains("authorization id"));
        let (server, first) =
            ScramServer::start(ScramHash::Sha256, &users(), b"n,,n=al=2Cice,r=abc").unwrap();
        let nonce = first.split(',').next().unwrap().strip_prefix("r=").unwrap();
        let replayed = format!("c=biws,r={}x,p=AAAA", nonce);
        assert_eq!(
            server.finish(replayed.as_bytes()).unwrap_err(),
            INVALID_CREDENTIALS
        );
        assert!(server.finish(b"c=biws").unwrap_err().contains("malformed"));
    }
}
