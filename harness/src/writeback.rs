//! Early writeback: the disk starts writing appended bytes while the mirror goes on fetching,
//! so that the fsyncs the flush rules require wait only for the last bytes.
//!
//! With `--flush kafka` mirrored batches stay in the page cache until a flush the protocol
//! needs (a segment roll, a `__mirror_state` write of the partition, `close`; see
//! [`crate::file_log`]). Left alone, the operating system writes them back late (Linux: after
//! `dirty_expire_centisecs`, 30 s by default), so each of those fsyncs waits for everything
//! appended since the last one: hundreds of megabytes on a fast mirror, a stall before every
//! state write and at close. Instead, each append of a segment [`start`]s the writeback of the
//! whole pages it completed, once at least [`MIN_BYTES`] of them wait: Linux's
//! `sync_file_range(SYNC_FILE_RANGE_WRITE)`, which queues the pages for writing and returns,
//! with no cache flush, no metadata and no waiting for the disk. By the time a flush comes,
//! most of its bytes are on their way or already written.
//!
//! The call is not free for its caller: with delayed allocation, ext4 allocates the range's
//! blocks in it and builds and submits the requests, and it waits when the device's queue is
//! full. It stays on the appending thread all the same: handed to a thread of its own, the
//! writeback starts later by as much as the fetch rounds save, and the close waits that much
//! longer (see BENCHMARKS.md, `node_mirroring`).
//!
//! **Nothing about durability changes.** Starting writeback promises nothing: the flush rules
//! still fsync before anything relies on the bytes, and recovery still trusts only what an
//! fsync covered (the recovery point). An error of the early writeback is left to that fsync,
//! which reports it (Linux reports a writeback error to the next `fsync` of the file). The last,
//! partial page of an append is not started, so a page is not written twice only because the
//! next append completes it. Elsewhere than Linux, [`start`] does nothing.

use std::fs::File;

/// The page size writeback is aligned to.
pub const PAGE_BYTES: u64 = 4096;

/// The least an append's writeback starts at once: 128 KiB, a common maximum size of one disk
/// request, so that small appends (a quiet partition's few records) are gathered into requests
/// of a useful size rather than sent a page at a time.
pub const MIN_BYTES: u64 = 128 * 1024;

/// The range whose writeback an append that ended at `end` starts, when the pages from `from`
/// (page-aligned: where the last started range ended) to the last whole page before `end` are at
/// least [`MIN_BYTES`]: `(from, length)`.
pub fn range_to_start(from: u64, end: u64) -> Option<(u64, u64)> {
    let whole_pages_end = end - end % PAGE_BYTES;
    let len = whole_pages_end.checked_sub(from)?;
    (len >= MIN_BYTES).then_some((from, len))
}

/// Asks the operating system to start writing `len` bytes of `file` from `from` to disk,
/// without waiting. Errors are ignored: the fsync that the flush rules do later reports them.
#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
pub fn start(file: &File, from: u64, len: u64) {
    use std::os::fd::AsRawFd;
    let (Ok(offset), Ok(nbytes)) = (i64::try_from(from), i64::try_from(len)) else {
        return;
    };
    // SAFETY: `sync_file_range` reads no memory of this process: it takes a file descriptor,
    // which `file` keeps open for the duration of the call, and three integers. An invalid
    // argument is an error return (ignored above), never undefined behaviour.
    let _ = unsafe {
        libc::sync_file_range(
            file.as_raw_fd(),
            offset,
            nbytes,
            libc::SYNC_FILE_RANGE_WRITE,
        )
    };
}

/// Does nothing: early writeback is a Linux system call.
#[cfg(not(target_os = "linux"))]
pub fn start(_file: &File, _from: u64, _len: u64) {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writeback_starts_whole_pages_once_enough_of_them_wait() {
        // Less than MIN_BYTES of whole pages: nothing yet.
        assert_eq!(range_to_start(0, MIN_BYTES - 1), None);
        assert_eq!(
            range_to_start(0, MIN_BYTES + PAGE_BYTES - 1),
            Some((0, MIN_BYTES))
        );
        // The partial last page waits for the next append.
        let end = 3 * MIN_BYTES + 100;
        assert_eq!(range_to_start(0, end), Some((0, 3 * MIN_BYTES)));
        // From where the last started range ended.
        assert_eq!(range_to_start(3 * MIN_BYTES, end), None);
        assert_eq!(
            range_to_start(3 * MIN_BYTES, 4 * MIN_BYTES + 5),
            Some((3 * MIN_BYTES, MIN_BYTES))
        );
        // A file cut below the last started range (a truncation the caller has not reported).
        assert_eq!(range_to_start(3 * MIN_BYTES, MIN_BYTES), None);
    }
}
