//! Starts the oracle tests' Apache Kafka 4.4.0 cluster and keeps it running, to try kmirror
//! against by hand:
//!
//! ```sh
//! cargo run --release -p kmirror-testsupport --example kafka_cluster -- target/try-cluster 3
//! ```
//!
//! It builds `oracle/` if needed (Java 17 and Maven), starts N KRaft nodes (default 3) on free
//! loopback ports under DIR (default `target/kafka-cluster`), prints the bootstrap addresses and
//! a `java -cp ...` prefix that runs Kafka's own tools (`org.apache.kafka.tools.TopicCommand`,
//! `ConsoleProducer`...) against it, and stops every node on Ctrl-C or when its standard input
//! closes (on Ctrl-C the nodes, in the same process group, get the signal too).

use std::io::Read as _;
use std::path::PathBuf;
use std::process::ExitCode;

use kmirror_testsupport::jvm::Oracle;
use kmirror_testsupport::kafka_broker::KafkaCluster;

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
    let oracle = match Oracle::build() {
        Ok(oracle) => oracle,
        Err(e) => {
            eprintln!("kafka_cluster: {e}");
            return ExitCode::from(2);
        }
    };
    let cluster = match KafkaCluster::start(&oracle, &dir, nodes, &[]) {
        Ok(cluster) => cluster,
        Err(e) => {
            eprintln!("kafka_cluster: {e}");
            return ExitCode::from(2);
        }
    };
    println!("bootstrap: {}", cluster.bootstrap());
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
