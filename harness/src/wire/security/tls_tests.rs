//! The TLS handshake of [`Connection::connect_with`] against an in-process rustls server: a
//! trusted certificate for the host passes, an unknown CA, a name mismatch and a listener that
//! is not TLS are [`WireError::Tls`] saying so; hostname verification can be turned off.

use std::net::TcpListener;
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

use super::{SecurityConfig, SecurityProtocol, TlsSettings};
use crate::wire::{Connection, WireError};

const SECOND: Duration = Duration::from_secs(1);

struct Pki {
    ca_pem: String,
    ca_cert: rcgen::Certificate,
    ca_key: rcgen::KeyPair,
    server_chain: Vec<CertificateDer<'static>>,
    server_key: PrivateKeyDer<'static>,
}

/// A CA and a server certificate it signs for `localhost` only.
fn pki() -> Pki {
    let ca_key = rcgen::KeyPair::generate().expect("key");
    let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
    ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let ca_cert = ca.self_signed(&ca_key).expect("ca");
    let key = rcgen::KeyPair::generate().expect("key");
    let cert = rcgen::CertificateParams::new(vec!["localhost".to_owned()])
        .expect("params")
        .signed_by(&key, &ca_cert, &ca_key)
        .expect("server");
    Pki {
        ca_pem: ca_cert.pem(),
        ca_cert,
        ca_key,
        server_chain: vec![cert.der().clone()],
        server_key: PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
    }
}

/// A TLS server for one connection: the handshake, then it hangs up. Its port.
fn tls_server(pki: &Pki) -> u16 {
    tls_server_with(pki, false)
}

/// As [`tls_server`], requiring a client certificate signed by the CA when `mutual`.
fn tls_server_with(pki: &Pki, mutual: bool) -> u16 {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .expect("versions");
    let builder = if mutual {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(pki.ca_cert.der().clone()).expect("CA");
        let verifier =
            rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .expect("client verifier");
        builder.with_client_cert_verifier(verifier)
    } else {
        builder.with_no_client_auth()
    };
    let config = builder
        .with_single_cert(pki.server_chain.clone(), pki.server_key.clone_key())
        .expect("server config");
    let config = Arc::new(config);
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("address").port();
    std::thread::spawn(move || {
        if let Ok((mut tcp, _)) = listener.accept() {
            let _ = tcp.set_read_timeout(Some(Duration::from_secs(5)));
            let mut server = rustls::ServerConnection::new(config).expect("connection");
            while server.is_handshaking() {
                if server.complete_io(&mut tcp).is_err() {
                    break;
                }
            }
        }
    });
    port
}

fn security(ca_pem: &str, verify_hostname: bool) -> SecurityConfig {
    let roots = super::tls::certificates(ca_pem).expect("CA");
    SecurityConfig {
        protocol: SecurityProtocol::Ssl,
        tls: Some(TlsSettings {
            client_config: super::tls::client_config(roots, None, verify_hostname).expect("tls"),
            truststore: "ca.pem".to_owned(),
            verify_hostname,
            client_certificate: false,
        }),
        sasl: None,
        ignored_keys: Vec::new(),
    }
}

fn connect(address: &str, security: &SecurityConfig) -> WireError {
    Connection::connect_with(address, SECOND, SECOND, security).expect_err("the server hangs up")
}

#[test]
fn a_trusted_certificate_for_the_host_passes_the_handshake() {
    let pki = pki();
    let port = tls_server(&pki);
    // The handshake passed: what fails is ApiVersions, when the server hangs up.
    let e = connect(&format!("localhost:{port}"), &security(&pki.ca_pem, true));
    assert!(
        matches!(
            e,
            WireError::Io {
                api: "ApiVersions",
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn a_certificate_of_another_ca_is_untrusted() {
    let pki = pki();
    let port = tls_server(&pki);
    let other = self::pki();
    let e = connect(&format!("localhost:{port}"), &security(&other.ca_pem, true));
    assert!(matches!(e, WireError::Tls { .. }), "{e}");
    assert!(e.to_string().contains("untrusted certificate"), "{e}");
    assert!(e.to_string().contains("ssl.truststore.location"), "{e}");
    assert!(!e.is_connection() && e.is_security());
}

#[test]
fn a_name_the_certificate_does_not_list_is_refused_unless_verification_is_off() {
    let pki = pki();
    let port = tls_server(&pki);
    let e = connect(&format!("127.0.0.1:{port}"), &security(&pki.ca_pem, true));
    assert!(matches!(e, WireError::Tls { .. }), "{e}");
    assert!(e.to_string().contains("not valid for \"127.0.0.1\""), "{e}");
    let port = tls_server(&pki);
    let e = connect(&format!("127.0.0.1:{port}"), &security(&pki.ca_pem, false));
    assert!(
        matches!(e, WireError::Io { .. }),
        "the handshake passes: {e}"
    );
}

#[test]
fn a_listener_that_is_not_tls_is_named() {
    let pki = pki();
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("address").port();
    std::thread::spawn(move || {
        if let Ok((tcp, _)) = listener.accept() {
            // A PLAINTEXT Kafka listener: a TLS ClientHello is no request it reads; it hangs up.
            let _ = tcp.shutdown(std::net::Shutdown::Both);
        }
    });
    let e = connect(&format!("localhost:{port}"), &security(&pki.ca_pem, true));
    assert!(matches!(e, WireError::Tls { .. }), "{e}");
    assert!(e.to_string().contains("TLS listener"), "{e}");
}

#[test]
fn a_broker_requiring_a_client_certificate_gets_one_from_the_keystore() {
    let pki = pki();
    // Without a client certificate: refused, and the error says which key to set.
    let port = tls_server_with(&pki, true);
    let e = connect(&format!("localhost:{port}"), &security(&pki.ca_pem, true));
    assert!(matches!(e, WireError::Tls { .. }), "{e}");
    assert!(e.to_string().contains("ssl.keystore.location"), "{e}");
    // With one signed by the broker's CA (ssl.keystore.location, PEM): the handshake passes.
    let key = rcgen::KeyPair::generate().expect("key");
    let cert = rcgen::CertificateParams::new(vec!["mirror".to_owned()])
        .expect("params")
        .signed_by(&key, &pki.ca_cert, &pki.ca_key)
        .expect("client certificate");
    let dir = tempfile::tempdir().expect("tempdir");
    let (ca, keystore) = (dir.path().join("ca.pem"), dir.path().join("client.pem"));
    std::fs::write(&ca, &pki.ca_pem).expect("write");
    std::fs::write(&keystore, format!("{}{}", key.serialize_pem(), cert.pem())).expect("write");
    let config = SecurityConfig::parse(
        &format!(
            "security.protocol=SSL\nssl.truststore.location={}\nssl.keystore.location={}\n",
            ca.display(),
            keystore.display()
        ),
        "client.properties",
    )
    .expect("config");
    let port = tls_server_with(&pki, true);
    let e = connect(&format!("localhost:{port}"), &config);
    assert!(
        matches!(e, WireError::Io { .. }),
        "the handshake passes: {e}"
    );
}
