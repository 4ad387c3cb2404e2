//! One durability barrier for a whole file system: `syncfs(2)`, in place of one fsync per file
//! when a node closes thousands of logs at once.
//!
//! A node of 1,000 partitions that closes after mirroring into each of them has, per
//! partition, the active segment's data and (when the partition's epoch cache changed) a new
//! leader-epoch checkpoint to make durable: one `fdatasync`, and for the checkpoint's atomic
//! replacement one `fsync` of its `.tmp` file and one of the directory after the rename. With a
//! barrier the close is two `syncfs` calls for all of them: every log writes its checkpoint's
//! `.tmp` file unsynced, one `syncfs` makes the data and those files durable, the renames
//! follow, and a second `syncfs` makes the renames durable before the log dir's checkpoint
//! files move the recovery points (`harness/src/node/close.rs` has the ordering argument).
//!
//! **Errors.** `syncfs` reports writeback errors only on Linux 5.8 and later, and reports an
//! error of any file of the file system (a failing disk under another file fails the close:
//! the safe side). Like `fsync`, it reports an error that happened before the handle was opened
//! only if nobody has seen it yet, so the node opens its barrier when it opens the destination,
//! before the writes it will vouch for. Elsewhere (an older kernel, another system)
//! [`FsBarrier::open`] gives `None` and the caller fsyncs file by file.

use std::fs::File;
use std::path::{Path, PathBuf};

use crate::error::FileLogError;

/// A handle on the file system holding a directory, to make everything written to it durable
/// with one call. See the [module documentation](self).
#[derive(Debug)]
pub struct FsBarrier {
    dir: File,
    path: PathBuf,
}

impl FsBarrier {
    /// A barrier for the file system holding `dir`, or `None` where `syncfs` does not report
    /// writeback errors (not Linux, or Linux before 5.8).
    pub fn open(dir: &Path) -> Result<Option<FsBarrier>, FileLogError> {
        if !syncfs_reports_errors() {
            return Ok(None);
        }
        let file = File::open(dir).map_err(|e| FileLogError::io("open directory", dir, e))?;
        Ok(Some(FsBarrier {
            dir: file,
            path: dir.to_path_buf(),
        }))
    }

    /// The directory the barrier was opened on.
    pub fn dir(&self) -> &Path {
        &self.path
    }

    /// Makes every write to the file system so far durable (`syncfs`), failing if writeback
    /// failed for any of its files since the barrier was opened.
    pub fn sync(&self) -> Result<(), FileLogError> {
        syncfs(&self.dir).map_err(|e| FileLogError::io("syncfs", &self.path, e))
    }
}

#[cfg(target_os = "linux")]
fn syncfs(dir: &File) -> std::io::Result<()> {
    rustix::fs::syncfs(dir).map_err(std::io::Error::from)
}

#[cfg(not(target_os = "linux"))]
fn syncfs(_dir: &File) -> std::io::Result<()> {
    Err(std::io::Error::other("syncfs is Linux-only"))
}

#[cfg(target_os = "linux")]
fn syncfs_reports_errors() -> bool {
    let uname = rustix::system::uname();
    release_at_least(&uname.release().to_string_lossy(), (5, 8))
}

#[cfg(not(target_os = "linux"))]
fn syncfs_reports_errors() -> bool {
    false
}

/// Whether a kernel release string (`6.18.44-fc-v1252`, `5.8.0`) names `(major, minor)` or
/// later; an unparsable one does not.
fn release_at_least(release: &str, (major, minor): (u32, u32)) -> bool {
    let mut parts = release.split(|c: char| !c.is_ascii_digit());
    let number = |p: Option<&str>| p.and_then(|s| s.parse::<u32>().ok());
    match (number(parts.next()), number(parts.next())) {
        (Some(a), Some(b)) => (a, b) >= (major, minor),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn release_parsing_decides_on_major_and_minor() {
        assert!(release_at_least("6.18.44-fc-v1252", (5, 8)));
        assert!(release_at_least("5.8.0", (5, 8)));
        assert!(release_at_least("5.10", (5, 8)));
        assert!(!release_at_least("5.7.19", (5, 8)));
        assert!(!release_at_least("4.19.0-26-amd64", (5, 8)));
        assert!(!release_at_least("", (5, 8)));
        assert!(!release_at_least("linux", (5, 8)));
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_barrier_syncs_its_file_system() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("f"), b"bytes").unwrap();
        let barrier = FsBarrier::open(dir.path()).unwrap();
        if let Some(barrier) = barrier {
            barrier.sync().unwrap();
        }
        let missing = dir.path().join("missing");
        if syncfs_reports_errors() {
            let err = FsBarrier::open(&missing).unwrap_err();
            assert!(err.to_string().contains("missing"), "{err}");
        }
    }
}
