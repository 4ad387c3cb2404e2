//! kmirror-kernel: the pure per-partition state machine of Kafka cluster mirroring (KIP-1279).
#![forbid(unsafe_code)]

pub mod batch;
pub mod desired;
pub mod effect;
pub mod epoch_cache;
pub mod input;
pub mod log;
pub mod mutant;
pub mod producer_state;
pub mod records;
pub mod state;
pub mod types;
