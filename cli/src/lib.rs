//! The `kmirror` binary's commands, as a library so that the integration tests can call them.
//!
//! - [`model_cli`]: `check`, `simulate`, `explore`, `show` (the stateright model).
//! - [`node_model_cli`]: the same with `--node`, the node model (many partitions, one node
//!   manager).
//! - [`replay`]: `replay`, a model trace replayed on real on-disk Kafka logs.
//! - [`log_cli`]: the arguments of `mirror`, `stop`, `pause`, `resume`, `status`, `verify`,
//!   `sync`, `serve` and `demo`, dispatched to the modules below.
//! - [`node_cli`]: those commands on a node destination (many topics and partitions behind the
//!   kernel's node manager), with [`node_progress`] (the progress bar or lines), [`sync_cli`]
//!   (`kmirror sync`) and [`node_sync_cli`] (the metadata sync inside the mirroring process).
//! - [`serve_cli`]: `serve`, a node destination on Kafka's wire, and the `--listen` options
//!   `mirror --topics` shares.
//! - [`failback_cli`]: `mirror --failback`'s preview, with the source's LME when it serves it.
//! - [`convert_cli`]: `convert`, a single-partition cluster directory made a node destination.
//! - [`demo`]: the scripted failover and failback of `kmirror demo`, two nodes on Kafka's wire.
//!
//! The kernel is `kmirror-kernel`, the model `kmirror-model`, the on-disk and wire side
//! `kmirror-harness`; this crate only parses arguments, reads the clock and prints.

pub mod convert_cli;
pub mod demo;
pub mod failback_cli;
pub mod log_cli;
pub mod model_cli;
pub mod node_cli;
pub mod node_model_cli;
pub mod node_progress;
pub mod node_sync_cli;
pub mod replay;
pub mod serve_cli;
pub mod signals;
pub mod sync_cli;
