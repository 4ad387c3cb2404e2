//! The harness's errors, one `thiserror` enum per concern.
//!
//! - [`BatchError`]: bytes that are not a valid Kafka v2 record batch, with the byte position
//!   (from the start of the buffer or file the bytes came from) where the problem is.
//! - [`FileLogError`]: everything the on-disk partition log can fail with: the kernel's
//!   [`LogError`] refusals, I/O errors naming the file, corrupt segments naming file and byte
//!   position, and bad checkpoint files naming file and line.

use std::io;
use std::path::PathBuf;

use kmirror_kernel::log::LogError;
use kmirror_kernel::types::Offset;

/// Bytes that are not a valid record batch (magic v2). Every variant names the byte position of
/// the problem, counted from the start of the buffer (or segment file) being decoded.
#[derive(Clone, PartialEq, Eq, Debug, thiserror::Error)]
pub enum BatchError {
    /// Fewer bytes than the batch needs: a torn or partial write when it ends a file.
    #[error(
        "incomplete record batch at byte {position}: it needs {needed} bytes but only \
         {available} are there (a torn write if this is the end of a segment)"
    )]
    Truncated {
        /// Where the batch starts.
        position: u64,
        /// How many bytes the batch needs (as far as its header tells).
        needed: u64,
        /// How many bytes are there from `position` on.
        available: u64,
    },
    /// The `batchLength` field is too small to hold a v2 batch header.
    #[error(
        "record batch at byte {position} declares batchLength {length}; a v2 batch needs at \
         least {minimum}"
    )]
    InvalidLength {
        /// Where the batch starts.
        position: u64,
        /// The declared `batchLength`.
        length: i32,
        /// The smallest valid `batchLength`.
        minimum: i32,
    },
    /// A magic byte other than 2 (message formats v0/v1 are not supported).
    #[error(
        "the record batch's magic byte at byte {position} is {magic}; only magic 2 is supported"
    )]
    UnsupportedMagic {
        /// Where the magic byte is.
        position: u64,
        /// The magic byte found.
        magic: i8,
    },
    /// The stored CRC-32C does not match the bytes from `attributes` to the end of the batch.
    #[error(
        "the record batch whose CRC-32C is at byte {position} fails its CRC-32C check: stored \
         {stored:#010x}, computed {computed:#010x} (the batch bytes are corrupt)"
    )]
    CrcMismatch {
        /// Where the stored CRC is.
        position: u64,
        /// The CRC stored in the batch.
        stored: u32,
        /// The CRC of the bytes.
        computed: u32,
    },
    /// A header field holds a value no valid batch has.
    #[error("record batch at byte {position}: field {field} = {value} is invalid: {reason}")]
    InvalidField {
        /// Byte position of the field.
        position: u64,
        /// The field's name as in Kafka's `DefaultRecordBatch`.
        field: &'static str,
        /// The value found.
        value: i64,
        /// Why it is invalid.
        reason: &'static str,
    },
    /// A control record whose type kmirror does not know (see
    /// [`ControlType`](kmirror_kernel::batch::ControlType)).
    #[error(
        "control record at byte {position} has type {code}; kmirror knows ABORT (0), COMMIT (1) \
         and MIRROR_PID_RESET (100)"
    )]
    UnknownControlType {
        /// Byte position of the control record's key.
        position: u64,
        /// The type code found.
        code: i16,
    },
    /// A record inside the batch that cannot be decoded.
    #[error("malformed record at byte {position}: {reason}")]
    MalformedRecord {
        /// Byte position of the problem.
        position: u64,
        /// What is wrong.
        reason: String,
    },
    /// A batch that cannot be encoded (too many records, a producer missing, ...).
    #[error("cannot encode record batch: {0}")]
    Unencodable(String),
}

impl BatchError {
    /// Where the problem is, counted from the start of the decoded buffer or file.
    pub fn position(&self) -> Option<u64> {
        match self {
            BatchError::Truncated { position, .. }
            | BatchError::InvalidLength { position, .. }
            | BatchError::UnsupportedMagic { position, .. }
            | BatchError::CrcMismatch { position, .. }
            | BatchError::InvalidField { position, .. }
            | BatchError::UnknownControlType { position, .. }
            | BatchError::MalformedRecord { position, .. } => Some(*position),
            BatchError::Unencodable(_) => None,
        }
    }

    /// Whether the bytes simply end too early (a torn write), as opposed to being wrong.
    pub fn is_truncation(&self) -> bool {
        matches!(self, BatchError::Truncated { .. })
    }

    /// The same error with every position moved by `delta` bytes (to turn a position within a
    /// batch into a position within its file).
    pub fn shifted(self, delta: u64) -> Self {
        match self {
            BatchError::Truncated {
                position,
                needed,
                available,
            } => BatchError::Truncated {
                position: position + delta,
                needed,
                available,
            },
            BatchError::InvalidLength {
                position,
                length,
                minimum,
            } => BatchError::InvalidLength {
                position: position + delta,
                length,
                minimum,
            },
            BatchError::UnsupportedMagic { position, magic } => BatchError::UnsupportedMagic {
                position: position + delta,
                magic,
            },
            BatchError::CrcMismatch {
                position,
                stored,
                computed,
            } => BatchError::CrcMismatch {
                position: position + delta,
                stored,
                computed,
            },
            BatchError::InvalidField {
                position,
                field,
                value,
                reason,
            } => BatchError::InvalidField {
                position: position + delta,
                field,
                value,
                reason,
            },
            BatchError::UnknownControlType { position, code } => BatchError::UnknownControlType {
                position: position + delta,
                code,
            },
            BatchError::MalformedRecord { position, reason } => BatchError::MalformedRecord {
                position: position + delta,
                reason,
            },
            e @ BatchError::Unencodable(_) => e,
        }
    }
}

/// A topic name or partition index that cannot name a partition directory.
#[derive(Clone, PartialEq, Eq, Debug, thiserror::Error)]
pub enum TopicPartitionError {
    /// The topic name breaks Kafka's rules.
    #[error(
        "{0:?} is not a legal topic name: use 1 to 249 of [a-zA-Z0-9._-], not \".\" or \"..\""
    )]
    InvalidTopic(String),
    /// A negative partition index.
    #[error("partition {0} is negative")]
    NegativePartition(i32),
    /// A directory name that is not `<topic>-<partition>`.
    #[error("directory name {0:?} is not <topic>-<partition>")]
    InvalidDirName(String),
}

/// A checkpoint file (Kafka's text format) that cannot be used.
#[derive(Clone, PartialEq, Eq, Debug, thiserror::Error)]
#[error(
    "checkpoint file {} is invalid at line {line}: {reason}; restore it from a backup or \
     delete it to have it rebuilt from the segments",
    file.display()
)]
pub struct CheckpointError {
    /// The checkpoint file.
    pub file: PathBuf,
    /// The 1-based line of the problem (0: the file as a whole).
    pub line: usize,
    /// What is wrong.
    pub reason: String,
}

/// Everything a [`FileLog`](crate::file_log::FileLog) operation can fail with.
#[derive(Debug, thiserror::Error)]
pub enum FileLogError {
    /// The kernel's log contract refused the operation; nothing was changed.
    #[error(transparent)]
    Log(#[from] LogError),
    /// Bytes offered for a follower append are not valid record batches; the error's position
    /// counts from the start of the bytes offered. Nothing was appended.
    #[error("bytes offered for a follower append are not valid record batches: {0}")]
    InvalidBatches(BatchError),
    /// An I/O operation on a file of the log failed.
    #[error("{action} {}: {source}", file.display())]
    Io {
        /// What was being done (e.g. "fsync").
        action: &'static str,
        /// The file or directory.
        file: PathBuf,
        /// The OS error.
        source: io::Error,
    },
    /// A segment holds bytes that are not a valid batch below the recovery point, where data is
    /// known to have been flushed: kmirror never repairs that silently.
    #[error(
        "segment {} is corrupt in the record batch starting at byte {position}, below the \
         recovery point {recovery_point} (data there was flushed, so this is not a torn write): \
         {source}; inspect the file, restore the partition from a replica, or move the \
         directory away",
        file.display()
    )]
    CorruptSegment {
        /// The segment file.
        file: PathBuf,
        /// Where the bad batch starts in the file (the source's positions are in the file too).
        position: u64,
        /// The recovery point of the log.
        recovery_point: Offset,
        /// What is wrong at that position.
        source: BatchError,
    },
    /// Segment files whose batches do not follow each other.
    #[error(
        "segment {} at byte {position}: batch at offset {found} does not follow offset \
         {expected} (batches must be in increasing offset order){}",
        file.display(),
        if *.below_recovery_point { "; below the recovery point, so not repaired" } else { "" }
    )]
    OffsetOrder {
        /// The segment file.
        file: PathBuf,
        /// Byte position of the batch.
        position: u64,
        /// The least offset the batch may start at.
        expected: Offset,
        /// The batch's base offset.
        found: Offset,
        /// Whether the problem lies below the recovery point.
        below_recovery_point: bool,
    },
    /// A batch read back from a segment is no longer what was written or verified there.
    #[error(
        "segment {} changed on disk at byte {position}: {detail}; the file was modified or \
         damaged while the log was open",
        file.display()
    )]
    CorruptRead {
        /// The segment file.
        file: PathBuf,
        /// Byte position of the batch.
        position: u64,
        /// What was found.
        detail: String,
    },
    /// The batches on disk, valid one by one, break the log contract when replayed (for example
    /// an epoch going backwards): the directory was not written by a correct log.
    #[error(
        "segment {} at byte {position} (offset {offset}): the batch cannot follow the ones \
         before it: {source}",
        file.display()
    )]
    Replay {
        /// The segment file.
        file: PathBuf,
        /// Byte position of the batch.
        position: u64,
        /// The batch's base offset.
        offset: Offset,
        /// Why the log contract refuses it.
        source: LogError,
    },
    /// The leader-epoch checkpoint and the batches disagree below the recovery point, where no
    /// crash can leave them apart.
    #[error(
        "{} disagrees with segment {} at byte {position} (offset {offset}), below the recovery \
         point {recovery_point}: the checkpoint has {checkpoint:?}, the batches give \
         {batches:?}; a batch's partitionLeaderEpoch (not covered by the CRC) or the checkpoint \
         is corrupt",
        checkpoint_file.display(),
        file.display()
    )]
    EpochMismatch {
        /// The leader-epoch checkpoint file.
        checkpoint_file: PathBuf,
        /// The segment holding the first disagreeing offset.
        file: PathBuf,
        /// Byte position of the batch holding that offset.
        position: u64,
        /// The first offset where they disagree.
        offset: Offset,
        /// The recovery point.
        recovery_point: Offset,
        /// The checkpoint's entry there.
        checkpoint: Option<kmirror_kernel::epoch_cache::EpochEntry>,
        /// The entry the batches give there.
        batches: Option<kmirror_kernel::epoch_cache::EpochEntry>,
    },
    /// A batch the harness built for a leader append could not be encoded.
    #[error("cannot build the batch for a leader append: {0}")]
    Encode(BatchError),
    /// A checkpoint file that cannot be parsed or does not belong to this partition.
    #[error(transparent)]
    Checkpoint(#[from] CheckpointError),
    /// The files of the partition directory contradict each other.
    #[error("partition directory {} is inconsistent: {reason}", dir.display())]
    Inconsistent {
        /// The partition directory.
        dir: PathBuf,
        /// What contradicts what.
        reason: String,
    },
    /// A batch is too large for a segment (its size would overflow the segment's 32-bit
    /// positions).
    #[error("batch of {size} bytes at offset {base_offset} is too large for a segment")]
    BatchTooLarge {
        /// The batch's size in bytes.
        size: u64,
        /// The batch's base offset.
        base_offset: Offset,
    },
    /// An earlier I/O failure left disk and memory possibly out of step; the log refuses every
    /// mutation until it is reopened (Kafka takes the log directory offline likewise).
    #[error(
        "log {} failed earlier ({reason}) and must be reopened before it can be changed",
        dir.display()
    )]
    Failed {
        /// The partition directory.
        dir: PathBuf,
        /// The earlier failure.
        reason: String,
    },
}

impl FileLogError {
    /// An [`FileLogError::Io`] for `action` on `file`.
    pub fn io(action: &'static str, file: impl Into<PathBuf>, source: io::Error) -> Self {
        FileLogError::Io {
            action,
            file: file.into(),
            source,
        }
    }
}
