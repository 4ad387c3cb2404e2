//! [`MirrorStateLogError`]: why a `__mirror_state` partition cannot be read or written.

use std::path::PathBuf;

use kmirror_kernel::records::{RecordDecodeError, RecordEncodeError};
use kmirror_kernel::types::Offset;

use crate::error::{BatchError, FileLogError};

/// Why the `__mirror_state` log cannot be read or written.
#[derive(Debug, thiserror::Error)]
pub enum MirrorStateLogError {
    /// The partition directory itself failed (I/O, corrupt segment, bad checkpoint...).
    #[error("__mirror_state log {}: {source}", dir.display())]
    Log {
        /// The `__mirror_state-<k>` directory.
        dir: PathBuf,
        /// What failed.
        source: Box<FileLogError>,
    },
    /// A record whose bytes are not a `__mirror_state` record.
    #[error(
        "__mirror_state log {} holds an unreadable record at offset {offset}: {source}; the \
         coordinator cannot rebuild its state (restore the directory from a backup)",
        dir.display()
    )]
    BadRecord {
        /// The `__mirror_state-<k>` directory.
        dir: PathBuf,
        /// The record's offset.
        offset: Offset,
        /// Why it does not decode.
        source: RecordDecodeError,
    },
    /// A batch whose records cannot be decoded at all (compressed, malformed).
    #[error(
        "__mirror_state log {} holds an unreadable batch at offset {offset}: {source}",
        dir.display()
    )]
    BadBatch {
        /// The `__mirror_state-<k>` directory.
        dir: PathBuf,
        /// The batch's base offset.
        offset: Offset,
        /// Why its records do not decode.
        source: BatchError,
    },
    /// A record without a key (every `__mirror_state` record has one).
    #[error(
        "__mirror_state log {} holds a record without a key at offset {offset}",
        dir.display()
    )]
    MissingKey {
        /// The `__mirror_state-<k>` directory.
        dir: PathBuf,
        /// The record's offset.
        offset: Offset,
    },
    /// A record the kernel's codec refuses to encode.
    #[error("cannot encode a __mirror_state record: {0}")]
    Encode(#[from] RecordEncodeError),
    /// The batch holding new records could not be built.
    #[error("cannot build a __mirror_state batch: {0}")]
    Batch(BatchError),
    /// The directory does not exist (opening would silently create an empty coordinator).
    #[error(
        "__mirror_state log {} does not exist; the destination is incomplete",
        dir.display()
    )]
    Missing {
        /// The missing directory.
        dir: PathBuf,
    },
    /// A partition index past what Kafka's partition numbers hold.
    #[error("__mirror_state partition {0} is out of range (at most 2147483647)")]
    PartitionOutOfRange(u32),
}
