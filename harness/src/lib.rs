//! kmirror-harness: executes kernel effects on real Kafka logs (being written).
