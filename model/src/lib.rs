//! kmirror-model: an exhaustive stateright model of KIP-1279 mirroring, failover and failback.
//!
//! The model's world is two clusters, A (the source) and B (the mirror), each holding kernel
//! logs, kernel state machines, a kernel coordinator and a kernel controller catalogue. Every
//! mirroring decision is made by `kmirror-kernel`; the model only chooses what happens next
//! (deliveries, faults, producers, operator requests) and applies the kernel's effects.

pub mod actions;
pub mod config;
pub mod executor;
pub mod journal;
pub mod liveness;
pub mod model;
pub mod node;
pub mod properties;
pub mod replication;
pub mod runner;
pub mod shared;
pub mod swarm;
pub mod symmetry;
pub mod sync;
pub mod trace;
pub mod world;

pub use config::ModelConfig;
pub use model::MirrorModel;
