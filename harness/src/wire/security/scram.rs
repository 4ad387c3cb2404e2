//! The client side of SCRAM (RFC 5802; SCRAM-SHA-256 and -512 per RFC 7677), as Kafka's
//! `ScramSaslClient` speaks it: no channel binding (`n,,`, `c=biws`), no SASLprep (Kafka's
//! server does none either), the user name with `=` and `,` escaped.
//!
//! Generic over the hash: [`ScramClient::<sha2::Sha256>`] for SCRAM-SHA-256,
//! [`ScramClient::<sha2::Sha512>`] for SCRAM-SHA-512.

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use hmac::digest::core_api::BlockSizeUser;
use hmac::digest::Digest;
use hmac::{Mac, SimpleHmac};

use super::Secret;

/// The most iterations a server may ask for (Kafka's maximum is 16384): a bound against a
/// server making the client spin.
pub const MAX_ITERATIONS: u32 = 1 << 20;

/// One SCRAM exchange: [`client_first`](Self::client_first), then
/// [`client_final`](Self::client_final) with the server's first message, then
/// [`verify_server_final`](Self::verify_server_final).
pub struct ScramClient<D> {
    client_first_bare: String,
    nonce: String,
    password: Secret,
    server_signature: Option<Vec<u8>>,
    _digest: std::marker::PhantomData<D>,
}

impl<D> std::fmt::Debug for ScramClient<D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScramClient")
            .field("client_first_bare", &self.client_first_bare)
            .finish_non_exhaustive()
    }
}

impl<D: Digest + BlockSizeUser + Clone> ScramClient<D> {
    /// A new exchange for `username` with the client nonce `nonce` (printable, no `,`).
    pub fn new(username: &str, password: &Secret, nonce: &str) -> Self {
        let name = username.replace('=', "=3D").replace(',', "=2C");
        ScramClient {
            client_first_bare: format!("n={name},r={nonce}"),
            nonce: nonce.to_owned(),
            password: password.clone(),
            server_signature: None,
            _digest: std::marker::PhantomData,
        }
    }

    /// The client-first message (`n,,n=user,r=nonce`).
    pub fn client_first(&self) -> String {
        format!("n,,{}", self.client_first_bare)
    }

    /// The client-final message answering `server_first` (`r=...,s=...,i=...`), with the
    /// proof; the server's signature is kept for [`verify_server_final`](Self::verify_server_final).
    pub fn client_final(&mut self, server_first: &str) -> Result<String, String> {
        let mut nonce = None;
        let mut salt = None;
        let mut iterations = None;
        for attribute in server_first.split(',') {
            match attribute.split_once('=') {
                Some(("r", v)) => nonce = Some(v),
                Some(("s", v)) => salt = Some(v),
                Some(("i", v)) => iterations = Some(v),
                Some(("m", _)) => {
                    return Err(
                        "the server asks for a SCRAM extension kmirror does not know".into(),
                    )
                }
                _ => {}
            }
        }
        let nonce = nonce.ok_or("the server's first SCRAM message has no nonce")?;
        if !nonce.starts_with(&self.nonce) || nonce.len() == self.nonce.len() {
            return Err("the server's SCRAM nonce does not extend the client's".into());
        }
        let salt = BASE64
            .decode(salt.ok_or("the server's first SCRAM message has no salt")?)
            .map_err(|_| "the server's SCRAM salt is not base64")?;
        let iterations: u32 = iterations
            .and_then(|i| i.parse().ok())
            .filter(|i| (1..=MAX_ITERATIONS).contains(i))
            .ok_or("the server's SCRAM iteration count is missing or out of range")?;
        let salted = hi::<D>(self.password.expose().as_bytes(), &salt, iterations);
        let client_key = hmac::<D>(&salted, b"Client Key");
        let stored_key = D::digest(&client_key);
        let without_proof = format!("c=biws,r={nonce}");
        let auth_message = format!("{},{server_first},{without_proof}", self.client_first_bare);
        let client_signature = hmac::<D>(&stored_key, auth_message.as_bytes());
        let proof: Vec<u8> = client_key
            .iter()
            .zip(&client_signature)
            .map(|(k, s)| k ^ s)
            .collect();
        let server_key = hmac::<D>(&salted, b"Server Key");
        self.server_signature = Some(hmac::<D>(&server_key, auth_message.as_bytes()));
        Ok(format!("{without_proof},p={}", BASE64.encode(proof)))
    }

    /// Checks the server-final message (`v=signature`): the server knew the password too.
    pub fn verify_server_final(&self, server_final: &str) -> Result<(), String> {
        if let Some(e) = server_final.strip_prefix("e=") {
            return Err(format!("the server ended the SCRAM exchange: {e}"));
        }
        let expected = self
            .server_signature
            .as_ref()
            .ok_or("the server's final SCRAM message came before the client's")?;
        let v = server_final
            .split(',')
            .find_map(|a| a.strip_prefix("v="))
            .ok_or("the server's final SCRAM message has no signature")?;
        match BASE64.decode(v) {
            Ok(signature) if &signature == expected => Ok(()),
            _ => Err(
                "the server's SCRAM signature is wrong: it does not know this user's \
                      credentials (a server impersonating the broker?)"
                    .into(),
            ),
        }
    }
}

pub(crate) fn hmac<D: Digest + BlockSizeUser + Clone>(key: &[u8], data: &[u8]) -> Vec<u8> {
    // SimpleHmac takes keys of any length: the error cannot happen (an empty result would only
    // make the server refuse the proof).
    match <SimpleHmac<D> as Mac>::new_from_slice(key) {
        Ok(mut mac) => {
            mac.update(data);
            mac.finalize().into_bytes().to_vec()
        }
        Err(_) => Vec::new(),
    }
}

/// RFC 5802's `Hi`: PBKDF2 with HMAC-`D`, one block.
pub(crate) fn hi<D: Digest + BlockSizeUser + Clone>(
    password: &[u8],
    salt: &[u8],
    iterations: u32,
) -> Vec<u8> {
    let mut first = salt.to_vec();
    first.extend_from_slice(&1u32.to_be_bytes());
    let mut u = hmac::<D>(password, &first);
    let mut out = u.clone();
    for _ in 1..iterations {
        u = hmac::<D>(password, &u);
        for (o, x) in out.iter_mut().zip(&u) {
            *o ^= x;
        }
    }
    out
}

/// A fresh client nonce: 24 random bytes, base64 (never a `,`).
pub fn new_nonce() -> Result<String, String> {
    let mut bytes = [0u8; 24];
    rustls::crypto::ring::default_provider()
        .secure_random
        .fill(&mut bytes)
        .map_err(|_| "the system's random source failed".to_owned())?;
    Ok(BASE64.encode(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 5802 section 5: SCRAM-SHA-1, user `user`, password `pencil`.
    #[test]
    fn rfc5802_sha1_vector() {
        let mut c = ScramClient::<sha1::Sha1>::new(
            "user",
            &Secret::new("pencil"),
            "fyko+d2lbbFgONRv9qkxdawL",
        );
        assert_eq!(c.client_first(), "n,,n=user,r=fyko+d2lbbFgONRv9qkxdawL");
        let last = c
            .client_final("r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,s=QSXCR+Q6sek8bf92,i=4096")
            .expect("final");
        assert_eq!(
            last,
            "c=biws,r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,p=v0X8v3Bz2T0CJGbJQyF0X+HI4Ts="
        );
        c.verify_server_final("v=rmF9pqV8S7suAoZWja4dJRkFsKQ=")
            .expect("the server's signature");
        assert!(c
            .verify_server_final("v=AAAApqV8S7suAoZWja4dJRkFsKQ=")
            .is_err());
    }

    /// RFC 7677 section 3: SCRAM-SHA-256, user `user`, password `pencil`.
    #[test]
    fn rfc7677_sha256_vector() {
        let mut c = ScramClient::<sha2::Sha256>::new(
            "user",
            &Secret::new("pencil"),
            "rOprNGfwEbeRWgbNEkqO",
        );
        assert_eq!(c.client_first(), "n,,n=user,r=rOprNGfwEbeRWgbNEkqO");
        let last = c
            .client_final(
                "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,\
                 i=4096",
            )
            .expect("final");
        assert_eq!(
            last,
            "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,\
             p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
        );
        c.verify_server_final("v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")
            .expect("the server's signature");
    }

    #[test]
    fn user_names_are_escaped() {
        let c = ScramClient::<sha2::Sha512>::new("a=b,c", &Secret::new("p"), "n0nce");
        assert_eq!(c.client_first(), "n,,n=a=3Db=2Cc,r=n0nce");
    }

    #[test]
    fn a_bad_server_first_message_is_an_error() {
        let mut c = ScramClient::<sha2::Sha512>::new("u", &Secret::new("p"), "abc");
        for bad in [
            "r=xyz123,s=QSXCR+Q6sek8bf92,i=4096",
            "r=abc,s=QSXCR+Q6sek8bf92,i=4096",
            "r=abcdef,s=!!!,i=4096",
            "r=abcdef,s=QSXCR+Q6sek8bf92,i=0",
            "r=abcdef,s=QSXCR+Q6sek8bf92,i=99999999",
            "m=ext,r=abcdef,s=QSXCR+Q6sek8bf92,i=4096",
            "garbage",
        ] {
            c.client_final(bad).expect_err(bad);
        }
        assert!(c
            .verify_server_final("e=invalid-proof")
            .unwrap_err()
            .contains("invalid-proof"));
    }

    #[test]
    fn nonces_are_fresh_and_comma_free() {
        let a = new_nonce().expect("nonce");
        let b = new_nonce().expect("nonce");
        assert_ne!(a, b);
        assert!(!a.contains(',') && a.len() == 32, "{a}");
    }
}
