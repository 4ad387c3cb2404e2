//! Errors that stop a whole sync round (per-item rejections are not errors: they are reported
//! in the round's [`NodeSyncReport`](crate::node::NodeSyncReport) and the rest proceeds).

use std::path::PathBuf;

/// Why a sync round could not run at all.
#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    /// A metadata file could not be read or written.
    #[error("cannot {action} {}: {source}", path.display())]
    Io {
        /// What was being done.
        action: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// A destination metadata file that does not parse: the sync will not overwrite what it
    /// cannot read.
    #[error("{}: {reason}; fix the file or remove it", path.display())]
    BadDestinationFile {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// A node destination could not be opened or read (missing, corrupt, busy...): the node's
    /// [`NodeError`](crate::node::NodeError), boxed so that this lower module does not depend on
    /// the node (which converts its error with `From`).
    #[error(transparent)]
    Node(Box<dyn std::error::Error + Send + Sync>),
    /// Fault injection (a node sync's `halt_after_writes`): the round stopped right after its
    /// N-th write, as a crash there would.
    #[error("halted after {writes} sync writes (fault injection)")]
    Halted {
        /// Sync writes landed.
        writes: u64,
    },
    /// The source could not answer (a wire source's connection, for example).
    #[error("source {source_name} is unavailable: {reason}")]
    SourceUnavailable {
        /// The source.
        source_name: String,
        /// What went wrong.
        reason: String,
    },
}

impl SyncError {
    pub(crate) fn io(action: &'static str, path: &std::path::Path, source: std::io::Error) -> Self {
        SyncError::Io {
            action,
            path: path.to_path_buf(),
            source,
        }
    }
}
