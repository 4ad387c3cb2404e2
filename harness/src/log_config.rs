//! How a [`FileLog`](crate::file_log::FileLog) lays out, flushes and verifies its data:
//! [`FileLogConfig`], [`FlushPolicy`] and [`Verify`].

/// Kafka's default `log.segment.bytes` (1 GiB).
pub const DEFAULT_SEGMENT_BYTES: u64 = 1 << 30;
/// Kafka's default `log.index.interval.bytes`.
pub const DEFAULT_INDEX_INTERVAL_BYTES: u64 = 4096;

/// When appended data is fsynced. The [`file_log`](crate::file_log) documentation argues for
/// [`FlushPolicy::Kafka`], the default.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub enum FlushPolicy {
    /// Kafka's default (`flush.messages` / `flush.ms` never), the default here: a follower append
    /// (a batch fetched from a source or a leader, which can be fetched again) is written with one
    /// write per call and left in the page cache; the offset index and the high watermark are not
    /// fsynced or checkpointed. A leader append (a batch this log's own cluster decided, such as
    /// `MIRROR_PID_RESET`, an ABORT marker or a local produce, which nothing can re-fetch) is
    /// fsynced before it returns, unless the log defers durability to its caller
    /// ([`FileLogConfig::deferred_durability`]: the node driver's group commit makes it durable
    /// before anything names it). Segment rolls,
    /// [`FileLog::flush`](crate::file_log::FileLog::flush),
    /// [`FileLog::close`](crate::file_log::FileLog::close) and truncations fsync and move the
    /// recovery point; the leader-epoch checkpoint is rewritten whenever the cache changes, before
    /// the append (in a node destination's layout, by the next flush that writes it, before the
    /// recovery point passes the new epoch:
    /// [`FileLog::stage_flush`](crate::file_log::FileLog::stage_flush)). A crash (of the machine,
    /// not the process) may lose the unflushed tail of follower appends, which recovery cuts and
    /// the fetcher fetches again.
    #[default]
    Kafka,
    /// Every append fsyncs its segment before returning (and every high-watermark change is
    /// checkpointed): nothing appended is lost in a crash. For the paranoid; mirroring is
    /// slower (see BENCHMARKS.md, `mirroring` and `node_mirroring`).
    EveryAppend,
    /// No append fsyncs, not even a leader append: only
    /// [`FileLog::flush`](crate::file_log::FileLog::flush),
    /// [`FileLog::close`](crate::file_log::FileLog::close), segment rolls and truncations do. For
    /// tests and benchmarks that build logs; a crash may lose any unflushed tail.
    Manual,
}

impl FlushPolicy {
    /// The name `kmirror mirror --flush` takes: `kafka`, `every-append` or `manual`.
    pub fn name(self) -> &'static str {
        match self {
            FlushPolicy::Kafka => "kafka",
            FlushPolicy::EveryAppend => "every-append",
            FlushPolicy::Manual => "manual",
        }
    }
}

impl std::fmt::Display for FlushPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A flush policy name that is not one of [`FlushPolicy::name`]'s.
#[derive(Clone, PartialEq, Eq, Debug, thiserror::Error)]
#[error("unknown flush policy {0:?}: use `kafka` (the default) or `every-append`")]
pub struct UnknownFlushPolicy(pub String);

impl std::str::FromStr for FlushPolicy {
    type Err = UnknownFlushPolicy;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        [
            FlushPolicy::Kafka,
            FlushPolicy::EveryAppend,
            FlushPolicy::Manual,
        ]
        .into_iter()
        .find(|p| p.name() == s)
        .ok_or_else(|| UnknownFlushPolicy(s.to_owned()))
    }
}

/// How much of a log [`FileLog::open_with`](crate::file_log::FileLog::open_with) CRC-checks.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub enum Verify {
    /// Kafka's recovery: batches from the recovery point on are verified whole (CRC-32C included)
    /// and a bad tail there is cut; below the recovery point (data known to have been fsynced) only
    /// the batch headers are read and checked for structure (length, magic, offsets in order),
    /// enough to rebuild the in-memory index, epoch cache and producer state. A flipped payload
    /// byte below the recovery point goes unnoticed until the batch is read (every read checks the
    /// CRC again). The default of [`FileLog::open`](crate::file_log::FileLog::open).
    #[default]
    FromRecoveryPoint,
    /// Every batch of every segment is verified whole, CRC included (`kmirror verify`); a bad batch
    /// below the recovery point is
    /// [`FileLogError::CorruptSegment`](crate::error::FileLogError::CorruptSegment). Costs a read
    /// of the whole log.
    All,
}

/// How a [`FileLog`](crate::file_log::FileLog) lays out and flushes its data.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct FileLogConfig {
    /// A segment rolls when the next batch would take it past this size (Kafka's
    /// `segment.bytes`); a batch larger than this gets a segment of its own.
    pub segment_bytes: u64,
    /// An offset index entry is added once more than this many bytes were appended since the
    /// last one (Kafka's `index.interval.bytes`).
    pub index_interval_bytes: u64,
    /// When to fsync.
    pub flush: FlushPolicy,
    /// The timestamp (ms) leader appends through
    /// [`PartitionLog::append_as_leader`](kmirror_kernel::log::PartitionLog::append_as_leader)
    /// stamp on their records until
    /// [`FileLog::set_append_timestamp`](crate::file_log::FileLog::set_append_timestamp) changes
    /// it. The library never reads a clock.
    pub append_timestamp_ms: i64,
    /// Whether the caller makes this log's own decisions durable for many logs at once, before it
    /// acts on them ([`FileLog::stage_flush`](crate::file_log::FileLog::stage_flush), a file-system
    /// barrier, [`FileLog::finish_flush`](crate::file_log::FileLog::finish_flush): a node's group
    /// commit): under [`FlushPolicy::Kafka`] a leader append is then not fsynced when it returns,
    /// and a log recovered from an empty directory is created without syncs. Off, the log makes
    /// each durable itself.
    pub deferred_durability: bool,
}

impl Default for FileLogConfig {
    fn default() -> Self {
        FileLogConfig {
            segment_bytes: DEFAULT_SEGMENT_BYTES,
            index_interval_bytes: DEFAULT_INDEX_INTERVAL_BYTES,
            flush: FlushPolicy::Kafka,
            append_timestamp_ms: 0,
            deferred_durability: false,
        }
    }
}
