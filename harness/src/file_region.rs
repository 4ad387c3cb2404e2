//! A byte range of a segment file that a Fetch answer carries instead of its bytes, so that
//! the records go from the page cache to the client's socket without being read into memory
//! (Linux `sendfile`, as Kafka's `FileRecords.writeTo` uses `transferTo`). The node's thread
//! takes a region from its index alone ([`FileLog::region`](crate::file_log::FileLog::region));
//! the connection's thread sends it.
//!
//! # A truncation while a region is in flight
//!
//! The node's thread may truncate a log (the kernel's LME, LSO and failback truncations) while
//! a connection's thread sends a region of it, and a truncated segment file is then written
//! again at the same positions. A region therefore keeps its segment's file open (a deleted
//! segment stays readable through it) and the log's truncation count when it was taken
//! ([`Truncations`]). A truncation counts itself before it changes a file, so a sender that
//! finds the count unchanged after sending knows that every byte it sent was the region's:
//! [`FileRegion::intact`]. The sender holds back the response's last byte until that check
//! and closes the connection when it fails; the client, which never had a whole response,
//! fetches again.

use std::fs::File;
use std::io;
use std::net::TcpStream;
use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use kmirror_kernel::types::Offset;

/// How many times a log was truncated: each truncation counts itself before it changes a
/// file. Shared by the log and the regions taken of it.
#[derive(Clone, Debug, Default)]
pub struct Truncations(Arc<AtomicU64>);

impl Truncations {
    /// A truncation begins: regions taken before it are no longer known to be intact.
    pub fn begin(&self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }

    fn now(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }
}

/// Whole batches of one segment file: `len` bytes from `position`. See the
/// [module documentation](self).
#[derive(Clone, Debug)]
pub struct FileRegion {
    file: Arc<File>,
    path: PathBuf,
    position: u64,
    len: u64,
    last_offset: Offset,
    truncations: Truncations,
    taken_at: u64,
}

impl FileRegion {
    /// The region `position..position + len` of `file` (at `path`), whose last batch ends at
    /// `last_offset`, taken now of a log whose truncations `truncations` counts.
    pub fn new(
        file: Arc<File>,
        path: &Path,
        position: u64,
        len: u64,
        last_offset: Offset,
        truncations: &Truncations,
    ) -> FileRegion {
        FileRegion {
            file,
            path: path.to_path_buf(),
            position,
            len,
            last_offset,
            taken_at: truncations.now(),
            truncations: truncations.clone(),
        }
    }

    /// Its size in bytes.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether it has no bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The last offset of its last batch.
    pub fn last_offset(&self) -> Offset {
        self.last_offset
    }

    /// Whether no truncation of its log began since it was taken: the bytes read or sent of
    /// it until now were its own.
    pub fn intact(&self) -> bool {
        self.truncations.now() == self.taken_at
    }

    /// Reads `range` (relative to the region) into memory.
    pub fn read(&self, range: Range<u64>) -> io::Result<Vec<u8>> {
        let len = usize::try_from(range.end.saturating_sub(range.start))
            .map_err(|_| io::Error::other("region too large"))?;
        let mut buf = vec![0u8; len];
        self.file
            .read_exact_at(&mut buf, self.position + range.start)
            .map_err(|e| self.error("read", e))?;
        Ok(buf)
    }

    /// Sends `range` (relative to the region) to `socket`: with `sendfile` on Linux, the
    /// bytes never enter this process; elsewhere read and written.
    pub fn send(&self, socket: &TcpStream, range: Range<u64>) -> io::Result<()> {
        #[cfg(target_os = "linux")]
        {
            let mut at = self.position + range.start;
            let end = self.position + range.end;
            while at < end {
                let count = usize::try_from(end - at).unwrap_or(usize::MAX).min(1 << 30);
                match rustix::fs::sendfile(socket, &*self.file, Some(&mut at), count) {
                    Ok(0) => {
                        return Err(self.error(
                            "send",
                            io::Error::new(
                                io::ErrorKind::UnexpectedEof,
                                "the segment file ended before the region (truncated)",
                            ),
                        ))
                    }
                    Ok(_) => {}
                    Err(rustix::io::Errno::INTR) => {}
                    Err(e) => return Err(io::Error::from(e)),
                }
            }
            Ok(())
        }
        #[cfg(not(target_os = "linux"))]
        {
            use std::io::Write as _;
            let bytes = self.read(range)?;
            (&*socket).write_all(&bytes)
        }
    }

    fn error(&self, action: &str, e: io::Error) -> io::Error {
        io::Error::new(
            e.kind(),
            format!("{action} of {}: {e}", self.path.display()),
        )
    }
}

#[cfg(test)]
mod tests {
    use kmirror_kernel::batch::LeaderBatch;
    use kmirror_kernel::log::PartitionLog;

    use crate::file_log::FileLog;
    use crate::log_config::FileLogConfig;
    use crate::topic_partition::TopicPartition;

    /// A log of six one-record batches, three to a segment: their sizes.
    fn log(dir: &std::path::Path) -> (FileLog, u64) {
        let tp = TopicPartition::new("orders", 0).unwrap();
        let (mut log, _) = FileLog::open(dir, tp, FileLogConfig::default()).unwrap();
        let one = LeaderBatch::Records {
            record_count: 1,
            producer: None,
            transactional: false,
        };
        log.append_as_leader(0, one).unwrap();
        let size = log.read(0, 1)[0].size_in_bytes() as u64;
        let config = FileLogConfig {
            segment_bytes: 3 * size,
            ..FileLogConfig::default()
        };
        drop(log);
        let tp = TopicPartition::new("orders", 0).unwrap();
        let (mut log, _) = FileLog::open(dir, tp, config).unwrap();
        for _ in 1..6 {
            log.append_as_leader(0, one).unwrap();
        }
        log.advance_high_watermark(6).unwrap();
        (log, size)
    }

    #[test]
    fn a_region_is_whole_batches_of_one_segment_within_its_limits() {
        let dir = tempfile::tempdir().unwrap();
        let (log, size) = log(dir.path());
        let region = |from, below, limit, first| {
            log.region(from, below, limit, first)
                .unwrap()
                .map(|r| (r.len() / size, r.last_offset()))
        };
        assert_eq!(
            region(0, 6, u64::MAX, true),
            Some((3, 2)),
            "the first segment only"
        );
        assert_eq!(region(3, 6, u64::MAX, true), Some((3, 5)), "then the next");
        assert_eq!(region(1, 6, u64::MAX, true), Some((2, 2)));
        assert_eq!(
            region(3, 5, u64::MAX, true),
            Some((2, 4)),
            "below the bound"
        );
        assert_eq!(
            region(0, 6, 2 * size, true),
            Some((2, 1)),
            "within the limit"
        );
        assert_eq!(
            region(0, 6, size - 1, true),
            Some((1, 0)),
            "at least one batch"
        );
        assert_eq!(region(0, 6, size - 1, false), None);
        assert_eq!(region(6, 6, u64::MAX, true), None, "nothing at the end");
        // Its bytes are the batches'.
        let r = log.region(3, 6, u64::MAX, true).unwrap().unwrap();
        let batches: Vec<u8> = log
            .read(3, 6)
            .iter()
            .flat_map(|b| b.bytes().to_vec())
            .collect();
        assert_eq!(r.read(0..r.len()).unwrap(), batches);
    }

    #[test]
    fn a_truncation_makes_the_regions_taken_before_it_not_intact() {
        let dir = tempfile::tempdir().unwrap();
        let (mut log, _) = log(dir.path());
        let before = log.region(3, 6, u64::MAX, true).unwrap().unwrap();
        let earlier = log.region(0, 3, u64::MAX, true).unwrap().unwrap();
        assert!(before.intact());
        log.truncate_to(4).unwrap();
        assert!(!before.intact(), "its segment was cut");
        assert!(!earlier.intact(), "any truncation of the log counts");
        let after = log.region(3, 4, u64::MAX, true).unwrap().unwrap();
        assert!(after.intact());
        log.truncate_fully_and_start_at(10).unwrap();
        assert!(!after.intact());
    }
}
