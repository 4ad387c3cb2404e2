//! The lock a kmirror process holds on a destination directory it uses: an advisory `flock` on
//! `<dir>/.lock`, exclusive for a process that writes (a mirror, `serve`, a stop), shared for
//! one that only reads (`kmirror status` while nothing writes). Both destination formats use
//! it. The lock is released when the returned file is dropped, or when the process dies, so a
//! crash never leaves a directory locked.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

/// File name of the lock file.
pub const LOCK_FILE: &str = ".lock";

/// Why a directory's lock was not taken.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// Another process holds the lock (exclusively, or shared when asked exclusively).
    #[error(
        "{} is in use by another kmirror process (its .lock is held); wait for it or stop it",
        dir.display()
    )]
    Busy {
        /// The directory.
        dir: PathBuf,
    },
    /// The lock file cannot be opened or locked.
    #[error("cannot {action} {}: {source}", path.display())]
    Io {
        /// What was being done.
        action: &'static str,
        /// The lock file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// Takes `root`'s lock exclusively (creating `.lock` if needed), without waiting.
pub fn lock_exclusive(root: &Path) -> Result<File, LockError> {
    let path = root.join(LOCK_FILE);
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(|source| io("open", &path, source))?;
    try_lock(root, &path, file, File::try_lock)
}

/// Takes `root`'s lock shared, without waiting and without creating anything: `None` when the
/// directory has no `.lock` (nothing ever wrote it).
pub fn lock_shared(root: &Path) -> Result<Option<File>, LockError> {
    let path = root.join(LOCK_FILE);
    let file = match File::open(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
        Err(source) => return Err(io("open", &path, source)),
    };
    try_lock(root, &path, file, File::try_lock_shared).map(Some)
}

fn try_lock(
    root: &Path,
    path: &Path,
    file: File,
    lock: fn(&File) -> Result<(), TryLockError>,
) -> Result<File, LockError> {
    match lock(&file) {
        Ok(()) => Ok(file),
        Err(TryLockError::WouldBlock) => Err(LockError::Busy {
            dir: root.to_path_buf(),
        }),
        Err(TryLockError::Error(source)) => Err(io("lock", path, source)),
    }
}

fn io(action: &'static str, path: &Path, source: std::io::Error) -> LockError {
    LockError::Io {
        action,
        path: path.to_path_buf(),
        source,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_exclusive_lock_excludes_every_other_and_a_shared_one_only_writers() {
        let tmp = tempfile::tempdir().unwrap();
        assert!(lock_shared(tmp.path()).unwrap().is_none(), "no .lock yet");
        let held = lock_exclusive(tmp.path()).unwrap();
        assert!(matches!(
            lock_exclusive(tmp.path()),
            Err(LockError::Busy { .. })
        ));
        assert!(matches!(
            lock_shared(tmp.path()),
            Err(LockError::Busy { .. })
        ));
        drop(held);
        let reader = lock_shared(tmp.path()).unwrap().unwrap();
        let second = lock_shared(tmp.path()).unwrap();
        assert!(second.is_some(), "readers share");
        let busy = lock_exclusive(tmp.path()).unwrap_err();
        assert!(busy
            .to_string()
            .contains("in use by another kmirror process"));
        drop((reader, second));
        lock_exclusive(tmp.path()).unwrap();
    }
}
