//! The seam every write of the harness's log files goes through, and, **in the test build
//! only**, fault injection behind it: *the N-th write is cut short, then the process dies*.
//!
//! [`write_at`], [`write_vectored_at`] and [`write_all`] write bytes (segment appends, a fetch
//! round's vectored append included, offset index entries, the `.tmp` file of every atomic
//! replacement: leader-epoch checkpoint, the log dir's offset checkpoints, `node.properties`,
//! and through the segments the `__mirror_state` appends); [`gate`] comes before every other
//! change of the files (creating a segment or a `.tmp` file, a rename, a truncation, a
//! deletion). In a normal build they are the plain system calls and `gate` does nothing: the
//! fault injection is compiled only with `cfg(test)`, never into the library, the binary or
//! the benches.
//!
//! In the test build a test [`arm`]s a plan for a directory tree. Writes to files under it are
//! counted; the N-th writes only a seeded prefix of its bytes (possibly none) and fails with a
//! [`Halted`] error; from then on every write and every [`gate`] under the tree fails with
//! [`Halted`] too, so nothing else reaches those files, whatever the callers do with the error:
//! the tree is left as a process killed inside that write leaves it (the page cache keeps
//! every byte written before the kill). Files elsewhere (other tests' directories) are not
//! affected, so tests running in parallel do not disturb each other.

use std::fs::File;
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::path::Path;

/// Writes all of `bytes` at `position` of `file` (`path` names it).
pub(crate) fn write_at(file: &File, path: &Path, bytes: &[u8], position: u64) -> io::Result<()> {
    #[cfg(test)]
    if let Some(fate) = armed::fate(path, bytes.len(), 1) {
        return fate.apply(|keep| file.write_all_at(&bytes[..keep], position));
    }
    let _ = path;
    file.write_all_at(bytes, position)
}

/// Writes every slice of `parts`, back to back, at `position` of `file` (`path` names it):
/// one `writev` after a seek (the segment's other I/O is positional, so the file offset is
/// free), resumed after a short write.
pub(crate) fn write_vectored_at(
    file: &File,
    path: &Path,
    parts: &[&[u8]],
    position: u64,
) -> io::Result<()> {
    #[cfg(test)]
    {
        let len = parts.iter().map(|p| p.len()).sum();
        if let Some(fate) = armed::fate(path, len, parts.len()) {
            return fate.apply(|keep| {
                let (mut at, mut left) = (position, keep);
                for part in parts {
                    let n = part.len().min(left);
                    file.write_all_at(&part[..n], at)?;
                    at += n as u64;
                    left -= n;
                }
                Ok(())
            });
        }
    }
    let _ = path;
    write_all_vectored_at(file, parts, position)
}

/// Writes all of `bytes` to `file` at its current offset (`path` names it).
pub(crate) fn write_all(file: &mut File, path: &Path, bytes: &[u8]) -> io::Result<()> {
    #[cfg(test)]
    if let Some(fate) = armed::fate(path, bytes.len(), 1) {
        return fate.apply(|keep| file.write_all(&bytes[..keep]));
    }
    let _ = path;
    file.write_all(bytes)
}

/// Called before any change to `path` other than writing bytes (creation, rename, truncation,
/// deletion): fails once the process "died" (test build, armed); otherwise does nothing.
pub(crate) fn gate(path: &Path) -> io::Result<()> {
    #[cfg(test)]
    if let Some(fate) = armed::fate_of_change(path) {
        return fate.apply(|_| Ok(()));
    }
    let _ = path;
    Ok(())
}

fn write_all_vectored_at(file: &File, parts: &[&[u8]], position: u64) -> io::Result<()> {
    use std::io::{IoSlice, Seek, SeekFrom};
    let parts: Vec<&[u8]> = parts.iter().copied().filter(|p| !p.is_empty()).collect();
    let mut handle = file;
    handle.seek(SeekFrom::Start(position))?;
    let (mut i, mut skip) = (0usize, 0usize);
    while i < parts.len() {
        let mut slices = Vec::with_capacity(parts.len() - i);
        slices.push(IoSlice::new(&parts[i][skip..]));
        slices.extend(parts[i + 1..].iter().map(|p| IoSlice::new(p)));
        let mut written = match handle.write_vectored(&slices) {
            Ok(0) => return Err(io::Error::from(io::ErrorKind::WriteZero)),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        while i < parts.len() && written >= parts[i].len() - skip {
            written -= parts[i].len() - skip;
            i += 1;
            skip = 0;
        }
        skip += written;
    }
    Ok(())
}

#[cfg(test)]
pub(crate) use armed::{arm, is_halted, TornWrite};

#[cfg(test)]
mod armed {
    use std::error::Error;
    use std::io;
    use std::path::{Path, PathBuf};
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Mutex;

    /// The write that was cut short.
    #[derive(Clone, Debug, PartialEq, Eq)]
    pub(crate) struct TornWrite {
        /// Its number among the armed tree's writes (1-based).
        pub n: u64,
        /// The file.
        pub file: PathBuf,
        /// Bytes the write would have written.
        pub len: usize,
        /// Bytes it wrote before the process died (less than `len`).
        pub kept: usize,
        /// The slices of a vectored write (1 for a plain write).
        pub parts: usize,
    }

    /// The error of the torn write and of everything after it: the process is dead.
    #[derive(Debug)]
    pub(crate) struct Halted {
        /// The torn write.
        pub torn: TornWrite,
        /// Whether this is the torn write itself (not a later, refused change).
        pub at_tear: bool,
    }

    impl std::fmt::Display for Halted {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            let t = &self.torn;
            if self.at_tear {
                write!(f, "fault injection: write {} cut short", t.n)?;
            } else {
                write!(f, "fault injection: the process died at write {}", t.n)?;
            }
            write!(
                f,
                " ({} of {} bytes of {})",
                t.kept,
                t.len,
                t.file.display()
            )
        }
    }

    impl Error for Halted {}

    /// Whether `error` or one of its sources is [`Halted`].
    pub(crate) fn is_halted(error: &(dyn Error + 'static)) -> bool {
        let mut next = Some(error);
        while let Some(e) = next {
            if e.is::<Halted>()
                || e.downcast_ref::<io::Error>()
                    .and_then(io::Error::get_ref)
                    .is_some_and(|inner| inner.is::<Halted>())
            {
                return true;
            }
            next = e.source();
        }
        false
    }

    struct Plan {
        id: u64,
        root: PathBuf,
        tear_at: Option<u64>,
        seed: u64,
        writes: u64,
        torn: Option<TornWrite>,
    }

    static PLANS: Mutex<Vec<Plan>> = Mutex::new(Vec::new());
    static NEXT_ID: AtomicU64 = AtomicU64::new(1);

    fn plans() -> std::sync::MutexGuard<'static, Vec<Plan>> {
        PLANS.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A plan in force until dropped. See the [module documentation](super).
    pub(crate) struct Armed {
        id: u64,
    }

    impl Armed {
        fn with<T>(&self, f: impl FnOnce(&Plan) -> T) -> Option<T> {
            plans().iter().find(|p| p.id == self.id).map(f)
        }

        /// Writes counted so far under the tree (the torn one included).
        pub(crate) fn writes(&self) -> u64 {
            self.with(|p| p.writes).unwrap_or(0)
        }

        /// The torn write, once it happened.
        pub(crate) fn torn(&self) -> Option<TornWrite> {
            self.with(|p| p.torn.clone()).flatten()
        }
    }

    impl Drop for Armed {
        fn drop(&mut self) {
            plans().retain(|p| p.id != self.id);
        }
    }

    /// Arms a plan for the files under `root`: with `tear_at` Some(N), the N-th write is cut
    /// to a prefix chosen by `seed` and N, and the process "dies"; with `None` writes are only
    /// counted.
    pub(crate) fn arm(root: &Path, tear_at: Option<u64>, seed: u64) -> Armed {
        let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        plans().push(Plan {
            id,
            root: root.to_path_buf(),
            tear_at,
            seed,
            writes: 0,
            torn: None,
        });
        Armed { id }
    }

    /// What happens to a write or a change.
    pub(super) enum Fate {
        /// Write this many bytes, then fail with the error.
        Prefix(usize, io::Error),
        /// Fail at once.
        Refused(io::Error),
    }

    impl Fate {
        /// Carries the fate out with `write(keep)`.
        pub(super) fn apply(self, write: impl FnOnce(usize) -> io::Result<()>) -> io::Result<()> {
            match self {
                Fate::Prefix(keep, halted) => {
                    write(keep)?;
                    Err(halted)
                }
                Fate::Refused(halted) => Err(halted),
            }
        }
    }

    fn halted(torn: &TornWrite, at_tear: bool) -> io::Error {
        io::Error::other(Halted {
            torn: torn.clone(),
            at_tear,
        })
    }

    /// The fate of a write of `len` bytes in `parts` slices to `path`: `None` to write it
    /// whole.
    pub(super) fn fate(path: &Path, len: usize, parts: usize) -> Option<Fate> {
        let mut plans = plans();
        let plan = plans.iter_mut().find(|p| path.starts_with(&p.root))?;
        if let Some(torn) = &plan.torn {
            return Some(Fate::Refused(halted(torn, false)));
        }
        plan.writes += 1;
        if plan.tear_at != Some(plan.writes) {
            return None;
        }
        // xorshift64* of the seed and N: the prefix kept, 0 to len - 1 bytes.
        let mut x = (plan.seed ^ plan.writes.wrapping_mul(0x9e37_79b9_7f4a_7c15)) | 1;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        let kept = (x.wrapping_mul(0x2545_f491_4f6c_dd1d) % len.max(1) as u64) as usize;
        let torn = TornWrite {
            n: plan.writes,
            file: path.to_path_buf(),
            len,
            kept,
            parts,
        };
        plan.torn = Some(torn.clone());
        Some(Fate::Prefix(kept, halted(&torn, true)))
    }

    /// The fate of a change to `path` (not a write): `None` to make it.
    pub(super) fn fate_of_change(path: &Path) -> Option<Fate> {
        let plans = plans();
        let plan = plans.iter().find(|p| path.starts_with(&p.root))?;
        plan.torn
            .as_ref()
            .map(|torn| Fate::Refused(halted(torn, false)))
    }

    mod tests {
        use super::super::{gate, write_all, write_at, write_vectored_at};
        use super::*;

        #[test]
        fn the_nth_write_is_cut_short_then_nothing_reaches_the_tree() {
            let tmp = tempfile::tempdir().unwrap();
            let inside = tmp.path().join("armed");
            std::fs::create_dir(&inside).unwrap();
            let path = inside.join("f");
            let other = tmp.path().join("g");
            let file = std::fs::File::create(&path).unwrap();
            let outside = std::fs::File::create(&other).unwrap();
            let armed = arm(&inside, Some(3), 7);
            write_at(&file, &path, b"aaaa", 0).unwrap();
            write_vectored_at(&file, &path, &[b"bb", b"cc"], 4).unwrap();
            let parts: [&[u8]; 3] = [b"0123", b"4567", b"89"];
            let e = write_vectored_at(&file, &path, &parts, 8).unwrap_err();
            assert!(is_halted(&e), "{e}");
            let torn = armed.torn().unwrap();
            assert_eq!(
                (torn.n, torn.len, torn.parts, torn.file.clone()),
                (3, 10, 3, path.clone())
            );
            assert!(torn.kept < 10);
            // Dead: no write, no change under the tree; elsewhere all goes on.
            assert!(is_halted(&write_at(&file, &path, b"x", 0).unwrap_err()));
            let mut f = std::fs::OpenOptions::new()
                .append(true)
                .open(&path)
                .unwrap();
            assert!(is_halted(&write_all(&mut f, &path, b"x").unwrap_err()));
            assert!(is_halted(&gate(&path).unwrap_err()));
            write_at(&outside, &other, b"free", 0).unwrap();
            assert_eq!(armed.writes(), 3);
            let bytes = std::fs::read(&path).unwrap();
            assert_eq!(bytes.len(), 8 + torn.kept);
            assert_eq!(
                &bytes[..8 + torn.kept],
                &b"aaaabbcc0123456789"[..8 + torn.kept]
            );
            drop(armed);
            write_at(&file, &path, b"alive", 0).unwrap();
            gate(&path).unwrap();
        }
    }
}
