//! [`ReadBuffer`]: a read buffer whose bytes are handed out shared, reused once they are all
//! dropped. Both read paths of fetched batches go through one: a segment read
//! ([`Segment::read_batches`](crate::segment::Segment::read_batches)) and a broker's response
//! frame (the wire client's connection). The batches are slices of the read, not copies, and a
//! loop that drops each read's batches before the next read neither allocates nor zeroes (nor,
//! for a fresh allocation, page-faults) per read.

use std::io;

use bytes::Bytes;

/// A read buffer that hands out its bytes shared and takes its allocations back once they
/// are all dropped. The batches of a read are slices of it, not copies. It keeps the
/// allocations of its last two reads: the next read reuses one that nothing holds any more, so
/// a fetch loop that drops each fetch's batches before the next read, and one that reads the
/// next fetch while the last one's batches are still being appended (the driver's fetch-ahead),
/// both neither allocate nor zero per fetch. A read allocates only when both are still held.
#[derive(Debug, Default)]
pub struct ReadBuffer {
    /// The whole allocations of the last two reads, kept to take back.
    kept: [Bytes; 2],
    /// The slot of the older of the two: the one let go when both are still held.
    older: usize,
}

impl ReadBuffer {
    /// `len` bytes filled by `fill`, shared with the buffer.
    pub fn read(
        &mut self,
        len: usize,
        fill: impl FnOnce(&mut [u8]) -> io::Result<()>,
    ) -> io::Result<Bytes> {
        let mut taken = None;
        for (slot, kept) in self.kept.iter_mut().enumerate() {
            match std::mem::take(kept).try_into_mut() {
                Ok(unshared) => {
                    taken = Some((slot, Vec::from(unshared)));
                    break;
                }
                Err(still_shared) => *kept = still_shared,
            }
        }
        let (slot, mut vec) = taken.unwrap_or_else(|| (self.older, Vec::new()));
        if vec.len() < len {
            vec.resize(len, 0); // zeroed once, when it grows: no memset per read
        }
        let filled = fill(&mut vec[..len]);
        let whole = Bytes::from(vec);
        self.kept[slot] = whole.clone();
        self.older = 1 - slot;
        filled?;
        Ok(whole.slice(..len))
    }

    /// The bytes of the allocations kept for the next reads.
    pub fn retained(&self) -> usize {
        self.kept.iter().map(Bytes::len).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_buffer_never_overwrites_bytes_still_held_and_reuses_freed_ones() {
        let mut buf = ReadBuffer::default();
        let fill = |byte: u8| {
            move |dest: &mut [u8]| -> io::Result<()> {
                dest.fill(byte);
                Ok(())
            }
        };
        let held = buf.read(4, fill(b'a')).unwrap();
        let second = buf.read(4, fill(b'b')).unwrap();
        assert_ne!(held.as_ptr(), second.as_ptr());
        let reused_from = second.as_ptr();
        drop(second);
        // One read ahead of batches still held (the driver's fetch-ahead): the freed
        // allocation is reused, the held one untouched.
        let third = buf.read(3, fill(b'c')).unwrap();
        assert_eq!(third.as_ptr(), reused_from, "a freed allocation is reused");
        assert_eq!(&third[..], b"ccc");
        // Both kept allocations held: a new one.
        let fourth = buf.read(4, fill(b'd')).unwrap();
        assert!(![held.as_ptr(), third.as_ptr()].contains(&fourth.as_ptr()));
        assert_eq!(
            (&held[..], &third[..], &fourth[..]),
            (&b"aaaa"[..], &b"ccc"[..], &b"dddd"[..]),
            "a read must not write into bytes a batch still holds"
        );
        assert_eq!(buf.retained(), 8, "the last two reads' allocations");
        let failed = buf.read(2, |_| Err(io::Error::other("disk gone")));
        assert!(failed.is_err());
        assert_eq!((&held[..], &fourth[..]), (&b"aaaa"[..], &b"dddd"[..]));
    }
}
