//! Why a node destination or its driver failed.

use std::path::PathBuf;

use crate::error::FileLogError;
use crate::mirror_state_log::MirrorStateLogError;
use crate::sync::SyncError;

/// A node destination or node driver failure. Every message says what to do.
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    /// The directory is a single-partition cluster directory.
    #[error(
        "{} is a single-partition cluster directory (cluster.properties: one partition of one \
         topic), the destination format before the node destination, which kmirror no longer \
         runs; `kmirror convert --from DIR --dest NEW` makes a node destination of it (the \
         directory is left as it is)",
        dir.display()
    )]
    SinglePartition {
        /// The directory.
        dir: PathBuf,
    },
    /// Another kmirror process holds the directory.
    #[error(
        "{} is in use by another kmirror process (its .lock is held); wait for it or stop it",
        dir.display()
    )]
    Busy {
        /// The directory.
        dir: PathBuf,
    },
    /// Serving Kafka clients failed (the listener, a client's write to disk).
    #[error(transparent)]
    Serve(#[from] crate::serve::ServeError),
    /// A metadata file does not parse.
    #[error("{}:{line}: {reason}", file.display())]
    BadFile {
        /// The file.
        file: PathBuf,
        /// The line (0: the file as a whole).
        line: usize,
        /// What is wrong.
        reason: String,
    },
    /// A file system operation failed.
    #[error("cannot {action} {}: {source}", path.display())]
    Io {
        /// What was being done.
        action: &'static str,
        /// The path.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// A partition log failed (open, append, truncate, flush).
    #[error("log {}: {source}", dir.display())]
    Log {
        /// The partition directory.
        dir: PathBuf,
        /// What failed.
        source: Box<FileLogError>,
    },
    /// A kernel log effect could not be applied.
    #[error("log {}: applying {effect} failed: {source}", dir.display())]
    LogEffect {
        /// The partition directory.
        dir: PathBuf,
        /// The effect.
        effect: String,
        /// What failed.
        source: Box<FileLogError>,
    },
    /// A file of the metadata directory (a topic's config overrides) could not be written.
    #[error(transparent)]
    Metadata(Box<SyncError>),
    /// A `__mirror_state` partition failed.
    #[error("{0}")]
    MirrorState(#[from] MirrorStateLogError),
    /// Bad input (arguments, a request that cannot apply).
    #[error("{message}")]
    Invalid {
        /// What is wrong and what to do.
        message: String,
    },
    /// The source cluster could not be asked at all.
    #[error("the source cluster: {message}")]
    Source {
        /// What failed (naming the brokers).
        message: String,
    },
    /// Fault injection ([`NodeDriverOptions::halt_after_effects`](super::NodeDriverOptions)):
    /// the driver stopped right after its N-th effect, as a crash there would.
    #[error("halted after {effects} effects (fault injection)")]
    Halted {
        /// Effects executed.
        effects: u64,
    },
}

/// A node destination that cannot be opened or read stops a metadata sync round.
impl From<NodeError> for SyncError {
    fn from(e: NodeError) -> Self {
        SyncError::Node(Box::new(e))
    }
}

impl From<crate::dir_lock::LockError> for NodeError {
    fn from(e: crate::dir_lock::LockError) -> Self {
        match e {
            crate::dir_lock::LockError::Busy { dir } => NodeError::Busy { dir },
            crate::dir_lock::LockError::Io {
                action,
                path,
                source,
            } => NodeError::Io {
                action,
                path,
                source,
            },
        }
    }
}

/// A follower's or a leader's log operation of a replication round failed.
impl From<crate::replicas::ReplicaLogError> for NodeError {
    fn from(e: crate::replicas::ReplicaLogError) -> Self {
        NodeError::Log {
            dir: e.dir,
            source: e.source,
        }
    }
}
