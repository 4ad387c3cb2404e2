//! kmirror-testsupport: test infrastructure shared by the tests and benches of kmirror, used
//! only as a dev-dependency (never part of the `kmirror` binary or the harness library).
//!
//! - [`dir_tree`]: directory trees copied whole, and snapshotted to show what a command changed.
//! - [`crash_counts`]: the kill points and torn writes a crash test reports, shown in CI's log
//!   and summed by `.ci/run`.
//! - [`jvm`]: the Apache Kafka 4.4.0 oracle's JVM side (finding `java` and `mvn`, building
//!   `oracle/`, starting its programs).
//! - [`kafka_broker`]: a single-node Apache Kafka broker run from the oracle's jars, the live
//!   source of the wire tests.
//! - [`link`]: a loopback TCP proxy standing for a network link between a client and a
//!   server (a one-way delay that pipelines, an optional bandwidth cap), started per test.
//! - [`oracle_support`]: what the oracle tests share (a line-at-a-time oracle process, a
//!   deterministic PRNG, delta debugging, scratch directories, a process run with a timeout).
//!
//! Being test code, these helpers panic on failures instead of returning errors.

pub mod crash_counts;
pub mod dir_tree;
pub mod jvm;
pub mod kafka_broker;
pub mod link;
pub mod oracle_support;
