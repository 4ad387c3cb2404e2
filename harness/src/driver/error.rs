//! [`DriverError`]: everything the driver and the commands around it can fail with.

use std::path::PathBuf;

use kmirror_kernel::controller::{MirrorRequestError, ProduceError};
use kmirror_kernel::types::InvalidMirrorName;

use crate::error::FileLogError;
use crate::mirror_state_log::MirrorStateLogError;
use crate::source::SourceError;
use crate::sync::SyncError;

/// Everything the driver (and the commands around it) can fail with. Each message says what is
/// wrong and what to do.
#[derive(Debug, thiserror::Error)]
pub enum DriverError {
    /// A directory or file that must exist does not.
    #[error("{} does not exist{hint}", path.display())]
    Missing {
        /// The missing path.
        path: PathBuf,
        /// What to do (starts with `; ` when present).
        hint: String,
    },
    /// A directory that is not a cluster directory.
    #[error(
        "{} is not a kmirror cluster directory ({reason}); point at a directory made by \
         `kmirror produce --topic ...` or `kmirror mirror`",
        path.display()
    )]
    NotACluster {
        /// The directory.
        path: PathBuf,
        /// What is missing.
        reason: String,
    },
    /// A cluster cannot be created in a directory holding files.
    #[error(
        "{} is not empty; give a new directory (or an empty one) to create a cluster in",
        path.display()
    )]
    NotEmpty {
        /// The directory.
        path: PathBuf,
    },
    /// A config or state file that does not parse.
    #[error(
        "{}{}: {reason}; fix the file or restore it from a backup",
        file.display(),
        if *line > 0 { format!(", line {line}") } else { String::new() }
    )]
    BadFile {
        /// The file.
        file: PathBuf,
        /// The 1-based line (0: the file as a whole).
        line: usize,
        /// What is wrong.
        reason: String,
    },
    /// Another process holds the directory's lock.
    #[error(
        "{} is in use by another kmirror process; wait for it to finish (or stop it)",
        dir.display()
    )]
    Busy {
        /// The directory.
        dir: PathBuf,
    },
    /// An I/O error on a file the driver owns.
    #[error("cannot {action} {}: {source}", path.display())]
    Io {
        /// What was being done.
        action: &'static str,
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// A partition log failed (I/O, corruption, a bad checkpoint...).
    #[error("{}: {source}", dir.display())]
    Log {
        /// The partition directory (or file).
        dir: PathBuf,
        /// What failed.
        source: Box<FileLogError>,
    },
    /// The `__mirror_state` log failed.
    #[error(transparent)]
    MirrorState(#[from] MirrorStateLogError),
    /// `mirror.name` does not parse.
    #[error(
        "{}: mirror.name={value:?} is invalid: {source}; the value is <mirror>, \
         <mirror>.removed (stop) or <mirror>.paused (pause)",
        file.display()
    )]
    InvalidMirrorName {
        /// The config file.
        file: PathBuf,
        /// The value.
        value: String,
        /// Why it is invalid.
        source: InvalidMirrorName,
    },
    /// `mirror.name` names a mirror this cluster does not have (usually a misspelt suffix).
    #[error(
        "{}: mirror.name={value:?} names cluster mirror {mirror:?}, which does not exist on \
         this cluster (known: {known}); the only suffixes are .removed (stop) and .paused \
         (pause)",
        file.display()
    )]
    UnknownMirror {
        /// The config file.
        file: PathBuf,
        /// The value.
        value: String,
        /// The mirror it names.
        mirror: String,
        /// The mirrors that exist.
        known: String,
    },
    /// The source hosts another topic than the destination.
    #[error(
        "the source hosts {source_topic} but the destination hosts {dest_topic}; a mirror \
         copies one topic, same name and id, on both sides"
    )]
    TopicMismatch {
        /// The source's topic: `<dir>: <topic> (id <hex>)`.
        source_topic: String,
        /// The destination's topic, likewise.
        dest_topic: String,
    },
    /// The controller refused a mirror request for the topic.
    #[error("the controller refused the request: {0}")]
    Refused(#[from] MirrorRequestError),
    /// The produce gate refused a local write.
    #[error("produce refused: {0}")]
    ProduceRefused(#[from] ProduceError),
    /// A log effect of the kernel could not be applied to the leader's log.
    #[error(
        "applying the kernel's {effect} to {} failed: {source}",
        dir.display()
    )]
    LogEffect {
        /// The leader's partition directory.
        dir: PathBuf,
        /// The effect.
        effect: String,
        /// Why.
        source: Box<FileLogError>,
    },
    /// The source failed at a point where the driver cannot hand the failure to the kernel.
    #[error(transparent)]
    Source(#[from] SourceError),
    /// A request that cannot be carried out as given.
    #[error("{0}")]
    Invalid(String),
    /// Fault injection: the driver stopped right after its `effects`-th effect
    /// ([`DriverOptions::halt_after_effects`](super::DriverOptions::halt_after_effects)).
    #[error("halted after {effects} effects (fault injection)")]
    Halted {
        /// Effects executed.
        effects: u64,
    },
}

/// A cluster directory that cannot be opened or read stops a metadata sync round.
impl From<DriverError> for SyncError {
    fn from(e: DriverError) -> Self {
        SyncError::Cluster(Box::new(e))
    }
}

impl From<crate::dir_lock::LockError> for DriverError {
    fn from(e: crate::dir_lock::LockError) -> Self {
        match e {
            crate::dir_lock::LockError::Busy { dir } => DriverError::Busy { dir },
            crate::dir_lock::LockError::Io {
                action,
                path,
                source,
            } => DriverError::Io {
                action,
                path,
                source,
            },
        }
    }
}

/// A follower's or the leader's log operation of a replication round failed.
impl From<crate::replicas::ReplicaLogError> for DriverError {
    fn from(e: crate::replicas::ReplicaLogError) -> Self {
        DriverError::Log {
            dir: e.dir,
            source: e.source,
        }
    }
}
