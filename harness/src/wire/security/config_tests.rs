//! [`SecurityConfig::parse`]: every key, the errors naming the key and the line, and that no
//! secret reaches an error or a `Debug`.

use std::path::Path;

use super::*;

/// A CA and a broker certificate it signs (for `localhost`), as PEM files in `dir`:
/// `ca.pem`, `client.pem` (a client key and certificate).
pub(crate) fn write_pems(dir: &Path) {
    let ca_key = rcgen::KeyPair::generate().expect("key");
    let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
    ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let ca_cert = ca.self_signed(&ca_key).expect("ca");
    std::fs::write(dir.join("ca.pem"), ca_cert.pem()).expect("write");
    let client_key = rcgen::KeyPair::generate().expect("key");
    let client = rcgen::CertificateParams::new(vec!["mirror".to_owned()])
        .expect("params")
        .signed_by(&client_key, &ca_cert, &ca_key)
        .expect("client");
    std::fs::write(
        dir.join("client.pem"),
        format!("{}{}", client_key.serialize_pem(), client.pem()),
    )
    .expect("write");
}

const SCRAM: &str = "org.apache.kafka.common.security.scram.ScramLoginModule";

fn parse(text: &str) -> Result<SecurityConfig, SecurityConfigError> {
    SecurityConfig::parse(text, "client.properties")
}

fn invalid(text: &str) -> (usize, String, String) {
    match parse(text) {
        Err(SecurityConfigError::Invalid {
            line, key, problem, ..
        }) => (line, key, problem),
        other => panic!("expected Invalid for {text:?}, got {other:?}"),
    }
}

#[test]
fn an_empty_file_is_plaintext() {
    let c = parse("# nothing\n").expect("parses");
    assert_eq!(c.protocol, SecurityProtocol::Plaintext);
    assert!(c.tls.is_none() && c.sasl.is_none());
    assert_eq!(c.principal(), None);
}

#[test]
fn sasl_ssl_with_scram_a_ca_file_and_a_client_certificate() {
    let dir = tempfile::tempdir().expect("tempdir");
    write_pems(dir.path());
    let text = format!(
        "security.protocol=SASL_SSL\n\
         ssl.truststore.type=PEM\n\
         ssl.truststore.location={ca}\n\
         ssl.keystore.type=PEM\n\
         ssl.keystore.location={client}\n\
         sasl.mechanism=SCRAM-SHA-512\n\
         sasl.jaas.config={SCRAM} required \\\n    username=\"mirror\" password=\"t0p-s3cret\";\n",
        ca = dir.path().join("ca.pem").display(),
        client = dir.path().join("client.pem").display(),
    );
    let c = parse(&text).expect("parses");
    assert_eq!(c.protocol, SecurityProtocol::SaslSsl);
    let tls = c.tls.as_ref().expect("tls");
    assert!(tls.verify_hostname && tls.client_certificate);
    let sasl = c.sasl.as_ref().expect("sasl");
    assert_eq!(sasl.mechanism, SaslMechanism::ScramSha512);
    assert_eq!(sasl.username, "mirror");
    assert_eq!(sasl.password.expose(), "t0p-s3cret");
    assert_eq!(c.principal().as_deref(), Some("User:mirror"));
    assert_eq!(
        c.describe(),
        "SASL_SSL, SCRAM-SHA-512 as User:mirror, client certificate"
    );
    let debug = format!("{c:?} {c:#?}");
    assert!(!debug.contains("t0p-s3cret"), "{debug}");
    assert!(!debug.contains("PRIVATE"), "{debug}");
}

#[test]
fn inline_pem_and_hostname_verification_off() {
    let dir = tempfile::tempdir().expect("tempdir");
    write_pems(dir.path());
    let ca = std::fs::read_to_string(dir.path().join("ca.pem")).expect("ca");
    let inline = ca.trim_end().replace('\n', "\\n\\\n");
    let text = format!(
        "security.protocol=ssl\nssl.truststore.certificates={inline}\n\
         ssl.endpoint.identification.algorithm=\n"
    );
    let c = parse(&text).expect("parses");
    let tls = c.tls.expect("tls");
    assert!(!tls.verify_hostname && !tls.client_certificate);
    assert_eq!(tls.truststore, "ssl.truststore.certificates");
}

#[test]
fn plain_over_sasl_plaintext() {
    let c = parse(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.jaas.config=\
         org.apache.kafka.common.security.plain.PlainLoginModule required username=\"u\" \
         password=\"p\";\n",
    )
    .expect("parses");
    assert_eq!(c.sasl.expect("sasl").mechanism, SaslMechanism::Plain);
    assert!(c.tls.is_none());
}

#[test]
fn client_settings_kmirror_does_not_read_are_ignored_and_listed() {
    let c = SecurityConfig::parse(
        "bootstrap.servers=b:9092\nclient.id=app\nsecurity.protocol=PLAINTEXT\nrequest.timeout.ms=30000\n",
        "client.properties",
    )
    .expect("parses");
    assert_eq!(
        c.ignored_keys,
        ["bootstrap.servers", "client.id", "request.timeout.ms"]
    );
    let (line, key, _) = invalid("client.id=app\nsasl.login.class=x\n");
    assert_eq!((line, key.as_str()), (2, "sasl.login.class"));
}

#[test]
fn unknown_keys_and_bad_values_name_the_key_and_line() {
    let (line, key, problem) = invalid("security.protocol=SSL\n\nssl.trustore.location=/x\n");
    assert_eq!((line, key.as_str()), (3, "ssl.trustore.location"));
    assert!(problem.contains("unknown security key"), "{problem}");
    let (line, key, problem) = invalid("security.protocol=TLS\n");
    assert_eq!((line, key.as_str()), (1, "security.protocol"));
    assert!(problem.contains("SASL_SSL"), "{problem}");
    let (line, key, problem) =
        invalid("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=GSSAPI\nsasl.jaas.config=x\n");
    assert_eq!((line, key.as_str()), (2, "sasl.mechanism"));
    assert!(problem.contains("SCRAM-SHA-512"), "{problem}");
    let (line, key, problem) =
        invalid("security.protocol=SSL\nssl.truststore.type=JKS\nssl.truststore.location=/x\n");
    assert_eq!((line, key.as_str()), (2, "ssl.truststore.type"));
    assert!(problem.contains("PEM"), "{problem}");
    let (_, key, problem) =
        invalid("security.protocol=SSL\nssl.truststore.location=/nonexistent/ca.pem\n");
    assert_eq!(key, "ssl.truststore.location");
    assert!(problem.contains("/nonexistent/ca.pem"), "{problem}");
    let (_, key, problem) = invalid(
        "security.protocol=SSL\nssl.truststore.certificates=x\nssl.endpoint.identification.algorithm=none\n",
    );
    assert_eq!(key, "ssl.truststore.certificates");
    assert!(problem.contains("no PEM certificate"), "{problem}");
}

#[test]
fn keys_the_protocol_does_not_use_are_errors() {
    let (line, key, problem) = invalid("sasl.mechanism=PLAIN\n");
    assert_eq!((line, key.as_str()), (1, "sasl.mechanism"));
    assert!(problem.contains("security.protocol=PLAINTEXT"), "{problem}");
    let (_, key, problem) = invalid(
        "security.protocol=SASL_PLAINTEXT\nssl.truststore.location=/x\nsasl.mechanism=PLAIN\n",
    );
    assert_eq!(key, "ssl.truststore.location");
    assert!(problem.contains("SSL or SASL_SSL"), "{problem}");
}

#[test]
fn missing_keys_say_what_is_needed() {
    // Reported at the line of the key that needs the missing one.
    let missing = |text: &str| match parse(text) {
        Err(e @ SecurityConfigError::Invalid { line: 1, .. }) => e.to_string(),
        other => panic!("expected Invalid at line 1, got {other:?}"),
    };
    assert!(missing("security.protocol=SSL\n").contains("ssl.truststore.location"));
    assert!(missing("security.protocol=SASL_PLAINTEXT\n").contains("GSSAPI"));
    let e = parse("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-256\n")
        .expect_err("no JAAS");
    assert!(
        e.to_string()
            .starts_with("client.properties line 2: sasl.mechanism: sasl.mechanism=SCRAM-SHA-256 needs sasl.jaas.config"),
        "{e}"
    );
}

#[test]
fn secrets_never_reach_an_error() {
    for text in [
        format!(
            "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.jaas.config={SCRAM} \
             required username=\"u\" password=\"hunter2\";\n"
        ),
        format!(
            "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-256\nsasl.jaas.config=\
             {SCRAM} required username=\"u\" password=\"hunter2\"\n"
        ),
        "security.protocol=SSL\nssl.truststore.certificates=x\nssl.keystore.certificate.chain=x\n\
         ssl.keystore.key=hunter2\n"
            .to_owned(),
        "security.protocol=SSL\nssl.truststore.certificates=x\nssl.key.password=hunter2\n"
            .to_owned(),
    ] {
        let e = parse(&text).expect_err(&text);
        let shown = format!("{e} {e:?}");
        assert!(!shown.contains("hunter2"), "{shown}");
        assert!(shown.contains("line"), "{shown}");
    }
}

#[test]
fn a_module_that_does_not_go_with_the_mechanism_is_an_error() {
    let (line, key, problem) = invalid(&format!(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n\nsasl.jaas.config={SCRAM} \
         required username=\"u\" password=\"p\";\n"
    ));
    assert_eq!((line, key.as_str()), (4, "sasl.jaas.config"));
    assert!(problem.contains("PlainLoginModule"), "{problem}");
}

#[test]
fn a_missing_file_is_a_read_error() {
    let e = SecurityConfig::from_file(Path::new("/nonexistent/client.properties"))
        .expect_err("missing");
    assert!(matches!(e, SecurityConfigError::Read { .. }));
    assert!(
        e.to_string().contains("/nonexistent/client.properties"),
        "{e}"
    );
}
