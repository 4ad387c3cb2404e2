//! Every call that makes bytes durable, in one place: the data of a file (`fdatasync`), a file
//! (`fsync`), a directory's entries (`fsync` of the directory), and a whole file system at once
//! (`syncfs`, [`FsBarrier`]). Each call is counted ([`syncs`]), so that benchmarks print how
//! many an operation costs and tests bound them per partition.
//!
//! **The barrier.** A node that changes the state of thousands of partitions in one round must
//! make each partition's log durable before the `__mirror_state` records that name it. One
//! fsync per log is thousands of cache flushes; one `syncfs` of the log dir's file system is
//! one, whatever the number of files (`harness/src/node/commit.rs` has the ordering argument).
//! `syncfs` reports writeback errors only on Linux 5.8 and later, and reports an error of any
//! file of the file system (a failing disk under another file fails the barrier: the safe
//! side). Like `fsync`, it reports an error that happened before its handle was opened only if
//! nobody has seen it yet, so a node opens its barrier when it opens the destination, before
//! the writes it will vouch for. Elsewhere (an older kernel, another system)
//! [`FsBarrier::open`] gives `None` and the caller syncs file by file.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::FileLogError;

static SYNCS: AtomicU64 = AtomicU64::new(0);

/// Durability calls made by this process so far (every `fdatasync`, `fsync` and `syncfs`).
pub fn syncs() -> u64 {
    SYNCS.load(Ordering::Relaxed)
}

fn counted<T>(result: std::io::Result<T>) -> std::io::Result<T> {
    SYNCS.fetch_add(1, Ordering::Relaxed);
    result
}

/// `fdatasync` of `file` (at `path`, for the error).
pub fn sync_data(file: &File, path: &Path) -> Result<(), FileLogError> {
    counted(file.sync_data()).map_err(|e| FileLogError::io("fdatasync", path, e))
}

/// `fsync` of `file` (at `path`, for the error).
pub fn sync_all(file: &File, path: &Path) -> Result<(), FileLogError> {
    counted(file.sync_all()).map_err(|e| FileLogError::io("fsync", path, e))
}

/// `fsync` of directory `dir`: its renames, creations and deletions durable.
pub fn sync_dir(dir: &Path) -> Result<(), FileLogError> {
    File::open(dir)
        .and_then(|d| counted(d.sync_all()))
        .map_err(|e| FileLogError::io("fsync directory", dir, e))
}

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
        counted(syncfs(&self.dir)).map_err(|e| FileLogError::io("syncfs", &self.path, e))
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

    #[test]
    fn every_call_is_counted_and_a_barrier_syncs_its_file_system() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, b"bytes").unwrap();
        let file = File::open(&path).unwrap();
        let before = syncs();
        sync_data(&file, &path).unwrap();
        sync_all(&file, &path).unwrap();
        sync_dir(dir.path()).unwrap();
        // Other tests of this process sync too: at least these three.
        assert!(syncs() >= before + 3);
        if let Some(barrier) = FsBarrier::open(dir.path()).unwrap() {
            barrier.sync().unwrap();
            assert_eq!(barrier.dir(), dir.path());
        }
        if syncfs_reports_errors() {
            let err = FsBarrier::open(&dir.path().join("missing")).unwrap_err();
            assert!(err.to_string().contains("missing"), "{err}");
        }
    }
}
