//! kmirror-harness: executes kernel effects on real Kafka logs.
//!
//! The on-disk side: [`record_batch`] (Kafka record batch v2 codec), [`segment`] (segment files
//! and their offset index), [`file_log`] (a partition log on disk implementing the kernel's log
//! contract), [`recovery`] (what opening a log after a crash repaired), [`error`].

pub mod error;
pub mod file_log;
pub mod jvm;
pub mod record_batch;
pub mod recovery;
pub mod segment;

pub mod cli;
pub mod demo;
pub mod driver;
pub mod mirror_state_log;
pub mod producer;
pub mod replay;
pub mod source;
pub mod sync;

pub mod kafka_broker;
pub mod wire;
