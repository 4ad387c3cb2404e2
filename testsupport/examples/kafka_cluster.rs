//! Starts the oracle tests' Apache Kafka 4.4.0 cluster and keeps it running, to try kmirror
//! against by hand:
//!
//! ```sh
//! cargo run --release -p kmirror-testsupport --example kafka_cluster -- target/try-cluster 3
//! # the same cluster also reachable through a simulated link of 50 ms round trip (25 ms each
//! # way), optionally capped at 200 MiB/s per broker link:
//! cargo run --release -p kmirror-testsupport --example kafka_cluster -- target/try-cluster 3 25 200
//! ```
//!
//! It builds `oracle/` if needed (Java 17 and Maven), starts N KRaft nodes (default 3) on free
//! loopback ports under DIR (default `target/kafka-cluster`), prints the bootstrap addresses and
//! a `java -cp ...` prefix that runs Kafka's own tools (`org.apache.kafka.tools.TopicCommand`,
//! `ConsoleProducer`...) against it, and stops every node on Ctrl-C or when its standard input
//! closes (on Ctrl-C the nodes, in the same process group, get the signal too). With a one-way
//! delay in milliseconds (third argument) each node also gets a `LINK` listener behind a
//! loopback proxy (`kmirror_testsupport::link`) delaying each direction by that much, and
//! advertising the proxy, so a client bootstrapped from the printed `link bootstrap` stays
//! behind the link; a fourth argument caps each proxy's bandwidth in MiB/s.

use std::io::Read as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use kmirror_testsupport::jvm::Oracle;
use kmirror_testsupport::kafka_broker::KafkaCluster;
use kmirror_testsupport::link::LinkOptions;

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let dir = PathBuf::from(args.next().unwrap_or_else(|| "target/kafka-cluster".into()));
    let nodes: i32 = match args.next().map(|n| n.parse()) {
        None => 3,
        Some(Ok(n)) if (1..=9).contains(&n) => n,
        Some(_) => {
            eprintln!("kafka_cluster: the node count is a number from 1 to 9");
            return ExitCode::from(2);
        }
    };
    let link = match (
        args.next().map(|d| d.parse::<u64>()),
        args.next().map(|c| c.parse::<u64>()),
    ) {
        (None, _) => None,
        (Some(Ok(delay_ms)), None) => Some(LinkOptions {
            one_way_delay: Duration::from_millis(delay_ms),
            bandwidth_bytes_per_sec: None,
        }),
        (Some(Ok(delay_ms)), Some(Ok(cap_mib))) if cap_mib > 0 => Some(LinkOptions {
            one_way_delay: Duration::from_millis(delay_ms),
            bandwidth_bytes_per_sec: Some(cap_mib << 20),
        }),
        _ => {
            eprintln!(
                "kafka_cluster: the link's one-way delay is a number of milliseconds, its cap \
                 a positive number of MiB/s"
            );
            return ExitCode::from(2);
        }
    };
    let oracle = match Oracle::build() {
        Ok(oracle) => oracle,
        Err(e) => {
            eprintln!("kafka_cluster: {e}");
            return ExitCode::from(2);
        }
    };
    let started = match link {
        Some(link) => KafkaCluster::start_behind_links(&oracle, &dir, nodes, &[], link),
        None => KafkaCluster::start(&oracle, &dir, nodes, &[]),
    };
    let cluster = match started {
        Ok(cluster) => cluster,
        Err(e) => {
            eprintln!("kafka_cluster: {e}");
            return ExitCode::from(2);
        }
    };
    println!("bootstrap: {}", cluster.bootstrap());
    if let Some(link) = link {
        println!(
            "link bootstrap: {} ({} ms each way{})",
            cluster.link_bootstrap(),
            link.one_way_delay.as_millis(),
            link.bandwidth_bytes_per_sec
                .map_or(String::new(), |cap| format!(
                    ", {} MiB/s per broker",
                    cap >> 20
                ))
        );
    }
    println!(
        "kafka tools: java -cp {} org.apache.kafka.tools.TopicCommand ...",
        oracle.classpath()
    );
    println!("data: {}", dir.display());
    println!("running; Ctrl-D (stdin closed) or Ctrl-C stops every node");
    // Dropping the cluster kills its nodes.
    let _ = std::io::stdin().read_to_end(&mut Vec::new());
    drop(cluster);
    ExitCode::SUCCESS
}
