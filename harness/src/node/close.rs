//! How a node closes its partition logs: every log flushed, before the log dir's checkpoint
//! files move the recovery points to the log ends.
//!
//! **With a file-system barrier** ([`FsBarrier`], Linux 5.8 and later; the default):
//!
//! 1. every log writes its leader-epoch checkpoint's `.tmp` file if its cache changed, nothing
//!    fsynced ([`FileLog::stage_close`]);
//! 2. one `syncfs`: every log's data and every `.tmp` file durable;
//! 3. every `.tmp` file renamed over its checkpoint ([`StagedClose::finish`]);
//! 4. one `syncfs`: the renames durable;
//! 5. (the caller) the `__mirror_state` partitions closed, then the log dir's checkpoint files
//!    written atomically with the new recovery points.
//!
//! A crash anywhere leaves what the file-by-file close can leave: before 2 completes, the
//! recovery points still name only data fsynced earlier, and recovery verifies the rest and
//! deletes the `.tmp` leftovers; from 2 on, each checkpoint is the old one or the new one,
//! whole (its bytes were durable before its rename), and both agree with the data below the
//! old recovery point; from 4 on, the state is the one the file-by-file close reaches before
//! step 5. So the close makes two syncing calls for the whole node where it made up to three
//! per partition (the data, the `.tmp` file, the directory).
//!
//! **File by file** (no barrier, or [`NodeDriverOptions::fs_barrier`] off): each log's
//! [`FileLog::close`] (the `.log` fdatasynced, the checkpoint written atomically), on up to
//! [`CLOSE_THREADS`] threads, as Kafka's `LogManager` closes a log dir's logs on a pool.
//!
//! [`NodeDriverOptions::fs_barrier`]: super::NodeDriverOptions::fs_barrier

use std::path::Path;

use crate::error::FileLogError;
use crate::file_log::{FileLog, StagedClose};
use crate::fs_barrier::FsBarrier;

use super::NodeError;

/// Most threads a node's close works on. The work is fsyncs and file creations, which wait on
/// the disk rather than the CPU: the block layer merges the cache flushes of concurrent
/// fsyncs, so more threads than cores pay off (32 against 8 halved the file-by-file close of
/// 1,000 partitions in the `node_mirroring` bench).
pub const CLOSE_THREADS: usize = 32;

/// Closes `logs`: with `barrier` as the [module documentation](self) describes, file by file
/// without one. The first error in `logs`' order is returned.
pub(super) fn close_logs(logs: Vec<FileLog>, barrier: Option<&FsBarrier>) -> Result<(), NodeError> {
    let Some(barrier) = barrier else {
        return on_pool(logs, |log| {
            let dir = log.dir().to_path_buf();
            log.close().map_err(|source| log_error(&dir, source))
        })
        .map(drop);
    };
    let staged = on_pool(logs, |log| {
        let dir = log.dir().to_path_buf();
        log.stage_close().map_err(|source| log_error(&dir, source))
    })?;
    barrier
        .sync()
        .map_err(|source| log_error(barrier.dir(), source))?;
    on_pool(staged, |staged: StagedClose| {
        let dir = staged.dir().to_path_buf();
        staged.finish().map_err(|source| log_error(&dir, source))
    })?;
    barrier
        .sync()
        .map_err(|source| log_error(barrier.dir(), source))
}

fn log_error(dir: &Path, source: FileLogError) -> NodeError {
    NodeError::Log {
        dir: dir.to_path_buf(),
        source: Box::new(source),
    }
}

/// `f` applied to every item on up to [`CLOSE_THREADS`] threads, each taking a consecutive
/// chunk in order and stopping at its first error; the results in `items`' order, or the
/// first error in that order.
fn on_pool<T: Send, U: Send>(
    items: Vec<T>,
    f: impl Fn(T) -> Result<U, NodeError> + Sync,
) -> Result<Vec<U>, NodeError> {
    let per_thread = items.len().div_ceil(CLOSE_THREADS).max(1);
    let mut chunks: Vec<Vec<T>> = Vec::new();
    let mut rest = items.into_iter();
    loop {
        let chunk: Vec<T> = rest.by_ref().take(per_thread).collect();
        if chunk.is_empty() {
            break;
        }
        chunks.push(chunk);
    }
    let run = |chunk: Vec<T>| chunk.into_iter().map(&f).collect::<Result<Vec<U>, _>>();
    let results: Vec<Result<Vec<U>, NodeError>> = if chunks.len() <= 1 {
        chunks.into_iter().map(run).collect()
    } else {
        std::thread::scope(|scope| {
            let handles: Vec<_> = chunks
                .into_iter()
                .map(|chunk| scope.spawn(|| run(chunk)))
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join().unwrap_or_else(|_| {
                        Err(NodeError::Invalid {
                            message: "a thread closing partition logs panicked".into(),
                        })
                    })
                })
                .collect()
        })
    };
    let mut out = Vec::new();
    for result in results {
        out.extend(result?);
    }
    Ok(out)
}
