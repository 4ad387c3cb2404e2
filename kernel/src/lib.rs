//! kmirror-kernel: the pure per-partition state machine of Kafka cluster mirroring (KIP-1279).
#![forbid(unsafe_code)]

pub mod apply;
pub mod batch;
pub mod checkpoint;
pub mod config;
pub mod controller;
pub mod coordinator;
pub mod desired;
pub mod effect;
pub mod epoch_cache;
pub mod fetch;
pub mod input;
pub mod log;
pub mod mem_log;
pub mod mutant;
pub mod partition;
pub mod partitioner;
pub mod producer_state;
pub mod records;
pub mod state;
#[cfg(any(test, feature = "testkit"))]
pub mod testkit;
pub mod types;
