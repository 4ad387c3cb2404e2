//! [`ReadBuffer`]: a read buffer whose bytes are handed out shared, reused once they are all
//! dropped. Both read paths of fetched batches go through one: a segment read
//! ([`Segment::read_batches`](crate::segment::Segment::read_batches)) and a broker's response
//! frame (the wire client's connection). The batches are slices of the read, not copies, and a
//! loop that drops each read's batches before the next read neither allocates nor zeroes (nor,
//! for a fresh allocation, page-faults) per read.

use std::io;

use bytes::Bytes;

/// A read buffer that hands out its bytes shared and takes its allocation back once they are
/// all dropped. The batches of a read are slices of it, not copies; the next read reuses the
/// allocation when nothing holds the previous one (a fetch loop that writes and drops each
/// fetch's batches neither allocates nor zeroes per fetch), and allocates a new one when
/// something still does.
#[derive(Debug, Default)]
pub struct ReadBuffer {
    /// The whole allocation of the last read, kept to take back.
    last: Bytes,
}

impl ReadBuffer {
    /// `len` bytes filled by `fill`, shared with the buffer.
    pub fn read(
        &mut self,
        len: usize,
        fill: impl FnOnce(&mut [u8]) -> io::Result<()>,
    ) -> io::Result<Bytes> {
        let mut vec: Vec<u8> = match std::mem::take(&mut self.last).try_into_mut() {
            Ok(unshared) => unshared.into(),
            Err(_still_shared) => Vec::new(),
        };
        if vec.len() < len {
            vec.resize(len, 0); // zeroed once, when it grows: no memset per read
        }
        fill(&mut vec[..len])?;
        let whole = Bytes::from(vec);
        self.last = whole.clone();
        Ok(whole.slice(..len))
    }

    /// The size of the allocation kept for the next read.
    pub fn retained(&self) -> usize {
        self.last.len()
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
        assert_eq!(
            &held[..],
            b"aaaa",
            "a read must not write into bytes a batch still holds"
        );
        assert_eq!(&second[..], b"bbbb");
        assert_ne!(held.as_ptr(), second.as_ptr());
        let reused_from = second.as_ptr();
        drop(second);
        let third = buf.read(3, fill(b'c')).unwrap();
        assert_eq!(&third[..], b"ccc");
        assert_eq!(third.as_ptr(), reused_from, "a freed allocation is reused");
        assert_eq!(buf.retained(), 4);
        let failed = buf.read(2, |_| Err(io::Error::other("disk gone")));
        assert!(failed.is_err());
        assert_eq!(&third[..], b"ccc");
    }
}
