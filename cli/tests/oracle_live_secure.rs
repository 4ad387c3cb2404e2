//! Mirroring from a live Apache Kafka 4.4.0 broker that requires TLS and SASL
//! (`-- --include-ignored oracle`).
//!
//! The broker has a `SASL_SSL` listener (its certificate, for `localhost` only, signed by a CA
//! generated here with rcgen), SCRAM users created by Kafka's `StorageTool format
//! --add-scram`, a PLAIN user, and Kafka's `StandardAuthorizer` (no ACL, no access). Kafka's own
//! producer writes plain, idempotent, committed and aborted batches through the PLAINTEXT
//! listener as the super user. Then, each through `--source-config FILE`:
//!
//! - `kmirror mirror --topics` as a SCRAM-SHA-512 user with Describe and Read on the topic:
//!   the node destination equals the broker's partition byte for byte;
//! - the same as a PLAIN user, and as a SCRAM-SHA-256 user with hostname verification off: the
//!   same bytes;
//! - a wrong password, an untrusted certificate (another CA), a hostname mismatch (connecting by
//!   IP), a principal with Describe but no Read: each a one-line error naming the cause (the
//!   missing ACL with the `kafka-acls` command granting it), exit code 2, a new destination not
//!   created and an existing one unchanged, and no password in any output.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kmirror_harness::wire::{
    CurrentLeaderEpoch, PartitionFetchRequest, PartitionFetched, SecurityConfig, SourceCluster,
    SourceClusterOptions, TopicSelection,
};
use kmirror_kernel::config::FetchIsolation;
use kmirror_kernel::fetch::FetchResponse;
use kmirror_testsupport::jvm::Oracle;
use kmirror_testsupport::kafka_broker::{KafkaBroker, SecureListener};
use kmirror_testsupport::oracle_support::run;

const TOPIC: &str = "orders";
const SCRAM: &str = "org.apache.kafka.common.security.scram.ScramLoginModule";
const PLAIN: &str = "org.apache.kafka.common.security.plain.PlainLoginModule";
/// Every password of the test: none may appear in kmirror's output.
const PASSWORDS: [&str; 5] = [
    "mirror-pw-512",
    "scram-pw-256",
    "plain-pw",
    "noread-pw",
    "WRONG-pw-xyz",
];

fn kmirror(args: &[&str]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_kmirror"));
    command.args(args);
    let output = run(command, Duration::from_secs(180));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    for password in PASSWORDS {
        assert!(!text.contains(password), "a password in the output: {text}");
    }
    output
}

fn kmirror_ok(args: &[&str]) -> String {
    let output = kmirror(args);
    assert!(
        output.status.success(),
        "kmirror {args:?} failed: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// A Java oracle program on the PLAINTEXT listener (the super user `User:ANONYMOUS`).
fn java(oracle: &Oracle, program: &str, bootstrap: &str, steps: &[&str]) {
    let mut command = oracle.command(&format!("dev.kmirror.oracle.{program}"));
    command.arg(bootstrap).arg(TOPIC).args(steps);
    let output = run(command, Duration::from_secs(120));
    assert!(
        output.status.success(),
        "{program} {steps:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The bytes of a partition directory's `.log` segments, back to back.
fn segment_bytes(dir: &Path) -> Vec<u8> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect();
    files.sort();
    files
        .iter()
        .flat_map(|f| std::fs::read(f).unwrap_or_else(|e| panic!("{}: {e}", f.display())))
        .collect()
}

/// Every file under `dir` with its bytes.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap_or_else(|e| panic!("{}: {e}", d.display())) {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let bytes = std::fs::read(&path).unwrap_or_default();
                out.insert(path, bytes);
            }
        }
    }
    out
}

/// A self-signed CA named `name`.
fn ca(name: &str) -> (rcgen::Certificate, rcgen::KeyPair) {
    let key = rcgen::KeyPair::generate().expect("key");
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, name);
    (params.self_signed(&key).expect("CA"), key)
}

/// A `client.properties` in `dir`.
fn properties(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write properties");
    path.to_str().expect("utf-8").to_owned()
}

fn sasl_ssl(truststore: &Path, mechanism: &str, module: &str, user: &str, pw: &str) -> String {
    format!(
        "# {user}\nsecurity.protocol=SASL_SSL\nssl.truststore.type=PEM\n\
         ssl.truststore.location={}\nsasl.mechanism={mechanism}\n\
         sasl.jaas.config={module} required username=\"{user}\" password=\"{pw}\";\n",
        truststore.display()
    )
}

/// Asserts a refused mirror: exit code 2, one stderr line containing `expected`.
fn refused(output: &Output, expected: &str) -> String {
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
    assert!(stderr.contains(expected), "{expected:?} in {stderr}");
    stderr
}

#[test]
#[ignore = "needs Java 17 and Maven; run with `-- --include-ignored oracle`"]
fn oracle_live_secure_sasl_ssl_mirror_and_refusals() {
    let Some(oracle) = Oracle::for_tests("oracle_live_secure_sasl_ssl_mirror_and_refusals") else {
        return;
    };
    let started = Instant::now();
    let tmp = tempfile::tempdir().expect("tempdir");
    let certs = tmp.path().join("certs");
    std::fs::create_dir_all(&certs).expect("certs dir");

    // Certificates: the broker's for `localhost` only, signed by our CA; another CA.
    let (ca_cert, ca_key) = ca("kmirror test CA");
    let broker_key = rcgen::KeyPair::generate().expect("key");
    let broker_cert = rcgen::CertificateParams::new(vec!["localhost".to_owned()])
        .expect("params")
        .signed_by(&broker_key, &ca_cert, &ca_key)
        .expect("broker certificate");
    let keystore = certs.join("broker.pem");
    std::fs::write(
        &keystore,
        format!("{}{}", broker_key.serialize_pem(), broker_cert.pem()),
    )
    .expect("keystore");
    let truststore = certs.join("ca.pem");
    std::fs::write(&truststore, ca_cert.pem()).expect("truststore");
    let rogue = certs.join("rogue-ca.pem");
    std::fs::write(&rogue, ca("another CA").0.pem()).expect("rogue CA");

    let listener = SecureListener {
        keystore_pem: keystore,
        advertised_host: "localhost".to_owned(),
        scram_users: vec![
            ("SCRAM-SHA-512".into(), "mirror".into(), PASSWORDS[0].into()),
            (
                "SCRAM-SHA-256".into(),
                "mirror256".into(),
                PASSWORDS[1].into(),
            ),
            ("SCRAM-SHA-512".into(), "noread".into(), PASSWORDS[3].into()),
        ],
        plain_users: vec![("plainuser".into(), PASSWORDS[2].into())],
        super_users: Some(vec![]),
    };
    let broker = KafkaBroker::start_secure(&oracle, &tmp.path().join("broker"), &[], &listener)
        .unwrap_or_else(|e| panic!("{e}"));
    let plaintext = broker.bootstrap();
    let secure = broker.secure_bootstrap().expect("SASL_SSL listener");
    let secure_port = secure.rsplit_once(':').expect("port").1.to_owned();
    eprintln!(
        "broker up (SASL_SSL at {secure}) after {:?}",
        started.elapsed()
    );

    java(
        &oracle,
        "LiveProducer",
        &plaintext,
        &[
            "create",
            "plain:3:4",
            "idem:2:3",
            "commit:tx-1:3",
            "abort:tx-2:2",
            "plain:1:2",
        ],
    );
    let mut acls = Vec::new();
    for user in ["mirror", "mirror256", "plainuser"] {
        acls.push(format!("acl:User:{user},TOPIC,{TOPIC},DESCRIBE,ALLOW"));
        acls.push(format!("acl:User:{user},TOPIC,{TOPIC},READ,ALLOW"));
    }
    acls.push(format!("acl:User:noread,TOPIC,{TOPIC},DESCRIBE,ALLOW"));
    // What `kmirror sync` needs besides (docs/live-source.md), for plainuser only.
    acls.push(format!(
        "acl:User:plainuser,TOPIC,{TOPIC},DESCRIBE_CONFIGS,ALLOW"
    ));
    acls.push("acl:User:plainuser,GROUP,*,DESCRIBE,ALLOW".to_owned());
    acls.push("acl:User:plainuser,CLUSTER,kafka-cluster,DESCRIBE,ALLOW".to_owned());
    let acls: Vec<&str> = acls.iter().map(String::as_str).collect();
    java(&oracle, "LiveGroup", &plaintext, &acls);
    let source = segment_bytes(&broker.partition_dir(TOPIC, 0));
    assert!(!source.is_empty());

    let dir = tmp.path();
    let good = properties(
        dir,
        "mirror.properties",
        &sasl_ssl(&truststore, "SCRAM-SHA-512", SCRAM, "mirror", PASSWORDS[0]),
    );

    // 1. A node destination over SASL_SSL / SCRAM-SHA-512: byte for byte.
    let west = dir.join("west");
    let west_arg = west.to_str().expect("utf-8");
    let out = kmirror_ok(&[
        "mirror",
        "--source-bootstrap",
        &secure,
        "--source-config",
        &good,
        "--topics",
        TOPIC,
        "--dest",
        west_arg,
        "--until-caught-up",
        "--quiet",
    ]);
    eprintln!("{out}");
    assert!(
        segment_bytes(&west.join("data").join(format!("{TOPIC}-0"))) == source,
        "the node destination equals the broker's partition byte for byte"
    );
    let status = std::fs::read_to_string(west.join("status.json")).expect("status.json");
    assert!(!status.contains(PASSWORDS[0]), "{status}");
    eprintln!("node mirror over SASL_SSL after {:?}", started.elapsed());

    // 2. As a PLAIN user, and as a SCRAM-SHA-256 user with hostname verification off (so
    //    connecting by IP is accepted): the same bytes.
    let plain = properties(
        dir,
        "plain.properties",
        &sasl_ssl(&truststore, "PLAIN", PLAIN, "plainuser", PASSWORDS[2]),
    );
    let no_hostname = properties(
        dir,
        "no-hostname.properties",
        &format!(
            "{}ssl.endpoint.identification.algorithm=\n",
            sasl_ssl(
                &truststore,
                "SCRAM-SHA-256",
                SCRAM,
                "mirror256",
                PASSWORDS[1]
            )
        ),
    );
    for (config, bootstrap, name) in [
        (&plain, secure.clone(), "plain"),
        (
            &no_hostname,
            format!("127.0.0.1:{secure_port}"),
            "scram-256",
        ),
    ] {
        let dest = dir.join(name);
        kmirror_ok(&[
            "mirror",
            "--source-bootstrap",
            &bootstrap,
            "--source-config",
            config,
            "--topics",
            TOPIC,
            "--dest",
            dest.to_str().expect("utf-8"),
            "--until-caught-up",
            "--quiet",
        ]);
        let copy = segment_bytes(&dest.join("data").join(format!("{TOPIC}-0")));
        assert!(copy == source, "{name}: byte for byte");
    }

    // 2b. `kmirror sync` over SASL_SSL: the mirror's principal lacks DescribeConfigs (the round
    //     stops, naming it); plainuser has the documented ACLs and syncs.
    let plain_dest = dir.join("plain");
    let plain_arg = plain_dest.to_str().expect("utf-8");
    let sync = |config: &str| {
        kmirror(&[
            "sync",
            "--source-bootstrap",
            &secure,
            "--source-config",
            config,
            "--dest",
            plain_arg,
            "--once",
        ])
    };
    refused(
        &sync(&good),
        "the source denied DescribeConfigs on topic 'orders' to User:mirror",
    );
    let out = sync(&plain);
    assert!(out.status.success(), "{out:?}");
    eprintln!("{}", String::from_utf8_lossy(&out.stdout));

    // 3. Refusals: one line, exit code 2, nothing created, the existing destination unchanged.
    let before = snapshot(&west);
    let wrong = properties(
        dir,
        "wrong.properties",
        &sasl_ssl(&truststore, "SCRAM-SHA-512", SCRAM, "mirror", PASSWORDS[4]),
    );
    let untrusted = properties(
        dir,
        "untrusted.properties",
        &sasl_ssl(&rogue, "SCRAM-SHA-512", SCRAM, "mirror", PASSWORDS[0]),
    );
    let noread = properties(
        dir,
        "noread.properties",
        &sasl_ssl(&truststore, "SCRAM-SHA-512", SCRAM, "noread", PASSWORDS[3]),
    );
    let by_ip = format!("127.0.0.1:{secure_port}");
    let cases: [(&str, &str, &str); 4] = [
        (
            &wrong,
            &secure,
            "rejected the SASL SCRAM-SHA-512 login of user 'mirror'",
        ),
        (&untrusted, &secure, "untrusted certificate"),
        (&good, &by_ip, "not valid for \"127.0.0.1\""),
        (
            &noread,
            &secure,
            "the source denied Read on topic 'orders' to User:noread",
        ),
    ];
    for (config, bootstrap, expected) in cases {
        let fresh = dir.join("fresh");
        for dest in [west_arg, fresh.to_str().expect("utf-8")] {
            let line = refused(
                &kmirror(&[
                    "mirror",
                    "--source-bootstrap",
                    bootstrap,
                    "--source-config",
                    config,
                    "--topics",
                    TOPIC,
                    "--dest",
                    dest,
                    "--until-caught-up",
                ]),
                expected,
            );
            eprintln!("{}", line.trim_end());
        }
        assert!(!fresh.exists(), "a refused mirror creates nothing");
        assert!(snapshot(&west) == before, "the destination is unchanged");
    }
    // The missing ACL comes with the command that grants it.
    let line = refused(
        &kmirror(&[
            "mirror",
            "--source-bootstrap",
            &secure,
            "--source-config",
            &noread,
            "--topics",
            TOPIC,
            "--dest",
            west_arg,
        ]),
        "--add --allow-principal User:noread --operation Read --topic orders",
    );
    assert!(line.contains("TOPIC_AUTHORIZATION_FAILED"), "{line}");

    // 4. A bad --source-config is refused before anything connects, naming the key and line.
    let bad = properties(
        dir,
        "bad.properties",
        &format!(
            "{}ssl.truststore.password=x\n",
            sasl_ssl(&truststore, "SCRAM-SHA-512", SCRAM, "mirror", PASSWORDS[0])
        ),
    );
    refused(
        &kmirror(&[
            "mirror",
            "--source-bootstrap",
            &secure,
            "--source-config",
            &bad,
            "--topics",
            TOPIC,
            "--dest",
            west_arg,
        ]),
        "line 7: ssl.truststore.password",
    );
    assert!(snapshot(&west) == before, "the destination is unchanged");

    // 5. The library on the same listener: the source cluster's fetch sessions (KIP-227) with
    //    the real broker. Once caught up, the incremental requests carry no partition and
    //    every answer comes from the session.
    let security = SecurityConfig::from_file(Path::new(&good)).expect("the source config");
    let mut cluster = SourceCluster::new(
        &secure,
        TopicSelection::names(&[TOPIC]).expect("selection"),
        SourceClusterOptions {
            fetch_max_wait_ms: 10,
            ..SourceClusterOptions::default()
        },
    )
    .with_security(Arc::new(security));
    let topic_id = cluster.metadata().expect("metadata").topics[TOPIC].topic_id;
    let ask = |fetch_offset| PartitionFetchRequest {
        topic_id,
        partition: 0,
        fetch_offset,
        last_fetched_epoch: None,
        current_leader_epoch: CurrentLeaderEpoch::FromMetadata,
        isolation: FetchIsolation::ReadCommitted,
        max_batches: 10_000,
    };
    let fetched =
        |results: Vec<kmirror_harness::wire::PartitionFetchResult>| match &results[0].outcome {
            Ok(PartitionFetched {
                response: FetchResponse::Records(r),
                ..
            }) => (r.batches.len(), r.next_offset, r.high_watermark),
            other => panic!("expected records, got {other:?}"),
        };
    let (batches, end, hw) = fetched(cluster.fetch(&[ask(0)]));
    assert!(
        batches > 0 && end == hw,
        "{batches} batches up to {end}, HW {hw}"
    );
    for _ in 0..5 {
        assert_eq!(fetched(cluster.fetch(&[ask(end)])), (0, end, hw));
    }
    let stats: Vec<_> = cluster.request_stats().into_values().collect();
    let sum = |f: fn(&kmirror_harness::wire::source_cluster::BrokerStats) -> u64| {
        stats.iter().map(f).sum::<u64>()
    };
    assert_eq!(sum(|s| s.fetch_requests), 6);
    assert_eq!(sum(|s| s.incremental_fetch_requests), 5);
    // The full request, then the new fetch offset once, then nothing.
    assert_eq!(sum(|s| s.partitions_sent), 2);
    eprintln!("fetch sessions with Kafka 4.4.0 over SASL_SSL: {stats:?}");
    eprintln!("done after {:?}", started.elapsed());
}
