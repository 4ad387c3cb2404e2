//! TLS with rustls (the `ring` provider; no OpenSSL): PEM loading, the client configuration
//! (trust anchors, optional client certificate, hostname verification on by default), the
//! handshake, and handshake failures explained in an operator's terms.

use std::net::TcpStream;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{
    CertificateError, ClientConfig, ClientConnection, DigitallySignedStruct, RootCertStore,
    SignatureScheme, StreamOwned,
};

use super::TlsSettings;

/// The certificates of a PEM text (`-----BEGIN CERTIFICATE-----` blocks).
pub fn certificates(pem: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs: Vec<CertificateDer<'static>> = rustls_pemfile::certs(&mut pem.as_bytes())
        .collect::<Result<_, _>>()
        .map_err(|e| format!("is not valid PEM: {e}"))?;
    if certs.is_empty() {
        return Err(
            "holds no PEM certificate (-----BEGIN CERTIFICATE-----); kmirror reads \
                    PEM only (ssl.truststore.type=PEM)"
                .to_owned(),
        );
    }
    Ok(certs)
}

/// The private key of a PEM text (PKCS#8, PKCS#1 or SEC1, unencrypted). The error never
/// quotes the text.
pub fn private_key(pem: &str) -> Result<PrivateKeyDer<'static>, String> {
    match rustls_pemfile::private_key(&mut pem.as_bytes()) {
        Ok(Some(key)) => Ok(key),
        Ok(None) if pem.contains("ENCRYPTED PRIVATE KEY") => Err(
            "holds an encrypted private key; kmirror reads unencrypted keys only (decrypt with \
             `openssl pkcs8 -topk8 -nocrypt`)"
                .to_owned(),
        ),
        Ok(None) => Err("holds no PEM private key (-----BEGIN PRIVATE KEY-----)".to_owned()),
        Err(_) => Err("holds a private key that is not valid PEM".to_owned()),
    }
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The rustls client configuration: `roots` as the only trust anchors, `identity` (chain and
/// key) presented when the broker asks for a client certificate, the broker's certificate
/// checked against the host name unless `verify_hostname` is false.
pub fn client_config(
    roots: Vec<CertificateDer<'static>>,
    identity: Option<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)>,
    verify_hostname: bool,
) -> Result<Arc<ClientConfig>, String> {
    let mut store = RootCertStore::empty();
    for (i, cert) in roots.into_iter().enumerate() {
        store
            .add(cert)
            .map_err(|e| format!("certificate {} is not a usable CA certificate: {e}", i + 1))?;
    }
    let provider = provider();
    let verifier = WebPkiServerVerifier::builder_with_provider(Arc::new(store), provider.clone())
        .build()
        .map_err(|e| format!("cannot build the certificate verifier: {e}"))?;
    let builder = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("cannot configure TLS: {e}"))?;
    let builder = if verify_hostname {
        builder.with_webpki_verifier(verifier)
    } else {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AnyHostname(verifier)))
    };
    let config = match identity {
        None => builder.with_no_client_auth(),
        Some((chain, key)) => builder.with_client_auth_cert(chain, key).map_err(|e| {
            format!("the client certificate and key do not form a usable identity: {e}")
        })?,
    };
    Ok(Arc::new(config))
}

/// `ssl.endpoint.identification.algorithm=` (empty): the chain is verified, the name is not.
#[derive(Debug)]
struct AnyHostname(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for AnyHostname {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        // webpki checks the chain first and the name last: a name error means a good chain.
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

/// A TLS stream to a broker.
pub type TlsStream = StreamOwned<ClientConnection, TcpStream>;

/// The host part of `host:port` (`[::1]:9093` -> `::1`).
pub fn host_of(address: &str) -> &str {
    let host = address.rsplit_once(':').map_or(address, |(h, _)| h);
    host.trim_start_matches('[').trim_end_matches(']')
}

/// Runs the TLS handshake on `tcp` for the broker at `address`; the error says why the broker
/// was not trusted (or refused us) and what to change.
pub fn handshake(
    tcp: TcpStream,
    address: &str,
    settings: &TlsSettings,
) -> Result<TlsStream, String> {
    let host = host_of(address);
    let name = ServerName::try_from(host.to_owned())
        .map_err(|_| format!("{host:?} is not a host name TLS can verify"))?;
    let connection = ClientConnection::new(settings.client_config.clone(), name)
        .map_err(|e| format!("cannot start TLS: {e}"))?;
    let mut stream = StreamOwned::new(connection, tcp);
    while stream.conn.is_handshaking() {
        if let Err(e) = stream.conn.complete_io(&mut stream.sock) {
            return Err(explain(&e, host, settings));
        }
    }
    Ok(stream)
}

/// An operator's reading of a failed handshake.
pub fn explain(error: &std::io::Error, host: &str, settings: &TlsSettings) -> String {
    let tls = error
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>());
    let Some(tls) = tls else {
        return match error.kind() {
            std::io::ErrorKind::UnexpectedEof | std::io::ErrorKind::ConnectionReset => format!(
                "the broker closed the connection during the TLS handshake ({error}); is this a \
                 TLS listener (SSL or SASL_SSL)?"
            ),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => {
                "no answer to the TLS handshake within the request timeout; is this a TLS \
                 listener (SSL or SASL_SSL)?"
                    .to_owned()
            }
            _ => format!("the TLS handshake failed: {error}"),
        };
    };
    match tls {
        rustls::Error::InvalidCertificate(
            CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
        ) => format!(
            "the broker's certificate is not valid for {host:?} (hostname verification, \
             ssl.endpoint.identification.algorithm=https): connect through a name the \
             certificate lists in its subject alternative names, or reissue the certificate"
        ),
        rustls::Error::InvalidCertificate(
            CertificateError::UnknownIssuer | CertificateError::BadSignature,
        ) => format!(
            "the broker's certificate is not signed by a CA of {} (untrusted certificate): put \
             the CA that signed the brokers' certificates in ssl.truststore.location",
            settings.truststore
        ),
        rustls::Error::InvalidCertificate(CertificateError::Expired)
        | rustls::Error::InvalidCertificate(CertificateError::ExpiredContext { .. }) => {
            "the broker's certificate has expired".to_owned()
        }
        rustls::Error::InvalidCertificate(other) => {
            format!("the broker's certificate was refused: {other:?}")
        }
        rustls::Error::AlertReceived(alert) => {
            let hint = if settings.client_certificate {
                "the broker refused the client certificate of ssl.keystore.location (is it \
                 signed by a CA in the broker's ssl.truststore?)"
            } else {
                "the broker may require a client certificate (ssl.client.auth=required): set \
                 ssl.keystore.location"
            };
            format!("the broker ended the TLS handshake with alert {alert:?}: {hint}")
        }
        rustls::Error::InvalidMessage(_) | rustls::Error::InappropriateMessage { .. } => format!(
            "the broker did not answer in TLS ({tls}); is this a TLS listener? security.protocol \
             says SSL or SASL_SSL"
        ),
        other => format!("the TLS handshake failed: {other}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_of_addresses() {
        assert_eq!(host_of("broker-1.example.com:9093"), "broker-1.example.com");
        assert_eq!(host_of("127.0.0.1:9093"), "127.0.0.1");
        assert_eq!(host_of("[::1]:9093"), "::1");
        assert_eq!(host_of("nohost"), "nohost");
    }

    #[test]
    fn pem_errors_say_what_is_wrong_without_quoting_a_key() {
        assert!(certificates("not pem at all")
            .unwrap_err()
            .contains("no PEM certificate"));
        let e = private_key(
            "-----BEGIN ENCRYPTED PRIVATE KEY-----\nMIIBvTBXBgkqhkiG9w0BBQ0wSjApBgkqhkiG9w0BBQww\n\
             -----END ENCRYPTED PRIVATE KEY-----\n",
        )
        .unwrap_err();
        assert!(e.contains("encrypted"), "{e}");
        assert!(!e.contains("MIIB"), "{e}");
    }
}
