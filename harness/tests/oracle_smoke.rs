//! The Apache Kafka oracle builds and runs Kafka 4.4.0 (`cargo test -- --include-ignored oracle`).

use kmirror_testsupport::jvm::Oracle;

/// The oracle's classpath carries Apache Kafka 4.4.0, the version every oracle test compares with.
#[test]
#[ignore = "needs Java 17 and Maven; run with `-- --include-ignored oracle`"]
fn oracle_classpath_is_kafka_4_4_0() {
    let Some(oracle) = Oracle::for_tests("oracle_classpath_is_kafka_4_4_0") else {
        return;
    };
    let output = oracle
        .command("dev.kmirror.oracle.Version")
        .output()
        .expect("java starts");
    assert!(output.status.success(), "{output:?}");
    assert_eq!(String::from_utf8_lossy(&output.stdout).trim(), "4.4.0");
}
