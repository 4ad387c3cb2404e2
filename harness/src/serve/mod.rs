//! `kmirror serve`: a node destination answering Kafka's own clients.
pub mod group;
