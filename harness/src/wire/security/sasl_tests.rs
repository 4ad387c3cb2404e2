//! SASL on a new connection against the fake broker (PLAIN over SASL_PLAINTEXT): a good login
//! passes and the client works; a wrong password and a mechanism the broker does not enable
//! are typed errors that never show the password. (SCRAM is tested against RFC vectors in
//! [`scram`](super::scram) and against Kafka itself in `cli/tests/oracle_live_secure.rs`.)

use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::messages::ApiKey;

use super::{SaslMechanism, SaslSettings, Secret, SecurityConfig, SecurityProtocol};
use crate::wire::fake_broker::{FakeCluster, FakePartition, FakeTopic};
use crate::wire::{KafkaClient, WireError};

const SECOND: Duration = Duration::from_secs(1);

fn fake() -> FakeCluster {
    let fake = FakeCluster::start(
        1,
        vec![FakeTopic {
            name: "orders".into(),
            id: kmirror_kernel::types::TopicId([1; 16]),
            partitions: vec![FakePartition::with_batches(1, 5, 2)],
        }],
    );
    fake.state().plain_user = Some(("mirror".into(), "right-pw".into()));
    fake
}

fn client(fake: &FakeCluster, mechanism: SaslMechanism, password: &str) -> KafkaClient {
    let security = SecurityConfig {
        protocol: SecurityProtocol::SaslPlaintext,
        tls: None,
        sasl: Some(SaslSettings {
            mechanism,
            username: "mirror".into(),
            password: Secret::new(password),
        }),
        ignored_keys: Vec::new(),
    };
    KafkaClient::new(&fake.address(1), SECOND, SECOND).with_security(Arc::new(security))
}

#[test]
fn a_plain_login_then_requests_on_the_same_connection() {
    let fake = fake();
    let mut client = client(&fake, SaslMechanism::Plain, "right-pw");
    let metadata = client.metadata("orders").expect("metadata after the login");
    assert_eq!(metadata.partitions.len(), 1);
    let state = fake.state();
    assert_eq!(state.count(1, ApiKey::SaslHandshake), 1);
    assert_eq!(state.count(1, ApiKey::SaslAuthenticate), 1);
    // ApiVersions, SaslHandshake, SaslAuthenticate, then Metadata.
    let order: Vec<i16> = state.requests.iter().map(|(_, k, _)| *k).collect();
    assert_eq!(
        order,
        [
            ApiKey::ApiVersions as i16,
            ApiKey::SaslHandshake as i16,
            ApiKey::SaslAuthenticate as i16,
            ApiKey::Metadata as i16
        ]
    );
}

#[test]
fn a_wrong_password_is_an_authentication_error_without_the_password() {
    let fake = fake();
    let e = client(&fake, SaslMechanism::Plain, "wrong-pw-123")
        .metadata("orders")
        .expect_err("refused");
    assert!(matches!(e, WireError::Authentication { .. }), "{e}");
    let shown = format!("{e} {e:?}");
    assert!(!shown.contains("wrong-pw-123"), "{shown}");
    assert!(
        e.to_string().contains(
            "rejected the SASL PLAIN login of user 'mirror': Authentication failed: Invalid \
             username or password; check the username and password in sasl.jaas.config"
        ),
        "{e}"
    );
    assert!(e.is_security() && !e.is_connection());
}

#[test]
fn a_mechanism_the_broker_does_not_enable_names_the_ones_it_does() {
    let fake = fake();
    let e = client(&fake, SaslMechanism::ScramSha512, "right-pw")
        .metadata("orders")
        .expect_err("refused");
    assert!(matches!(e, WireError::SaslMechanism { .. }), "{e}");
    assert!(
        e.to_string()
            .contains("does not enable SASL mechanism SCRAM-SHA-512 (it enables PLAIN)"),
        "{e}"
    );
}
