//! Kafka's primitive encodings (`org.apache.kafka.common.protocol.types.Type`,
//! `ByteUtils`): big-endian fixed-width integers, `float64`, `bool`, `uuid`, unsigned and
//! zig-zag varints, and the three length prefixes of strings, bytes and arrays.
//!
//! | type | bytes |
//! |---|---|
//! | `int8`, `int16`, `uint16`, `int32`, `uint32`, `int64` | two's complement (or unsigned), big-endian |
//! | `float64` | IEEE 754 binary64, big-endian |
//! | `bool` | one byte, 1 for true; any non-zero byte reads as true, as in Kafka |
//! | `uuid` | 16 bytes: most significant long, then least significant, big-endian |
//! | unsigned varint | 7 bits a byte, least significant group first, high bit = more; at most 5 bytes for 32 bits |
//! | varint / varlong | zig-zag (`(n << 1) ^ (n >> 31)`) then unsigned varint; at most 5 / 10 bytes |
//! | string, bytes, array length | `int16` (strings) or `int32` (bytes, arrays), `-1` for null; in flexible versions an unsigned varint of length + 1, `0` for null |
//!
//! The reader never reads past its input: every read returns [`ReadError`] instead. It is
//! stricter than Kafka in one corner: a fifth varint byte that carries bits above 32 (which
//! Kafka silently drops) is refused.

/// Why a primitive could not be read.
#[derive(Clone, Copy, PartialEq, Eq, Debug, thiserror::Error)]
pub enum ReadError {
    /// The input ended: `needed` bytes were wanted, `available` were left.
    #[error("needed {needed} bytes, {available} available")]
    Truncated {
        /// Bytes wanted.
        needed: usize,
        /// Bytes left.
        available: usize,
    },
    /// A varint is too long or overflows its width.
    #[error("invalid varint")]
    InvalidVarint,
}

/// How a string, byte array or array states its length.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum LengthPrefix {
    /// `int16`, -1 for null (strings in non-flexible versions).
    Int16,
    /// `int32`, -1 for null (bytes and arrays in non-flexible versions).
    Int32,
    /// Unsigned varint of length + 1, 0 for null (everything in flexible versions).
    Compact,
}

impl LengthPrefix {
    /// The greatest length the prefix can state.
    pub const fn max_len(self) -> usize {
        match self {
            LengthPrefix::Int16 => i16::MAX as usize,
            LengthPrefix::Int32 => i32::MAX as usize,
            LengthPrefix::Compact => u32::MAX as usize - 1,
        }
    }
}

/// Appends Kafka primitives to a byte vector.
#[derive(Clone, Debug, Default)]
pub struct WireWriter {
    buf: Vec<u8>,
}

impl WireWriter {
    /// An empty writer.
    pub fn new() -> Self {
        WireWriter::default()
    }

    /// The bytes written so far.
    pub fn into_bytes(self) -> Vec<u8> {
        self.buf
    }

    /// How many bytes were written.
    pub fn len(&self) -> usize {
        self.buf.len()
    }

    /// Whether nothing was written.
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// Raw bytes, no prefix.
    pub fn raw(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// `int8`.
    pub fn int8(&mut self, v: i8) {
        self.raw(&v.to_be_bytes());
    }

    /// `int16`.
    pub fn int16(&mut self, v: i16) {
        self.raw(&v.to_be_bytes());
    }

    /// `uint16`.
    pub fn uint16(&mut self, v: u16) {
        self.raw(&v.to_be_bytes());
    }

    /// `int32`.
    pub fn int32(&mut self, v: i32) {
        self.raw(&v.to_be_bytes());
    }

    /// `uint32`.
    pub fn uint32(&mut self, v: u32) {
        self.raw(&v.to_be_bytes());
    }

    /// `int64`.
    pub fn int64(&mut self, v: i64) {
        self.raw(&v.to_be_bytes());
    }

    /// `float64`.
    pub fn float64(&mut self, v: f64) {
        self.raw(&v.to_bits().to_be_bytes());
    }

    /// `bool`: 1 or 0.
    pub fn bool(&mut self, v: bool) {
        self.buf.push(u8::from(v));
    }

    /// `uuid`: its 16 bytes.
    pub fn uuid(&mut self, v: &[u8; 16]) {
        self.raw(v);
    }

    /// Unsigned varint (`ByteUtils.writeUnsignedVarint`).
    pub fn unsigned_varint(&mut self, v: u32) {
        self.unsigned_varlong(u64::from(v));
    }

    /// Unsigned 64-bit varint (`ByteUtils.writeUnsignedVarlong`).
    pub fn unsigned_varlong(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.buf.push((v as u8 & 0x7f) | 0x80);
            v >>= 7;
        }
        self.buf.push(v as u8);
    }

    /// Zig-zag varint (`ByteUtils.writeVarint`).
    pub fn varint(&mut self, v: i32) {
        self.unsigned_varint(((v << 1) ^ (v >> 31)) as u32);
    }

    /// Zig-zag varlong (`ByteUtils.writeVarlong`).
    pub fn varlong(&mut self, v: i64) {
        self.unsigned_varlong(((v << 1) ^ (v >> 63)) as u64);
    }

    /// A length prefix: `None` is null. A length above [`LengthPrefix::max_len`] is refused
    /// (`Err` carries that maximum) and nothing is written.
    pub fn length(&mut self, prefix: LengthPrefix, len: Option<usize>) -> Result<(), usize> {
        let max = prefix.max_len();
        match (prefix, len) {
            (_, Some(n)) if n > max => return Err(max),
            (LengthPrefix::Int16, None) => self.int16(-1),
            (LengthPrefix::Int32, None) => self.int32(-1),
            (LengthPrefix::Compact, None) => self.unsigned_varint(0),
            // The guard above bounds n by the prefix's maximum, so these casts are exact.
            (LengthPrefix::Int16, Some(n)) => self.int16(n as i16),
            (LengthPrefix::Int32, Some(n)) => self.int32(n as i32),
            (LengthPrefix::Compact, Some(n)) => self.unsigned_varint(n as u32 + 1),
        }
        Ok(())
    }
}

/// Reads Kafka primitives from a byte slice, never past its end.
#[derive(Clone, Debug)]
pub struct WireReader<'a> {
    rest: &'a [u8],
}

impl<'a> WireReader<'a> {
    /// A reader of `input`.
    pub fn new(input: &'a [u8]) -> Self {
        WireReader { rest: input }
    }

    /// Bytes not read yet.
    pub fn remaining(&self) -> usize {
        self.rest.len()
    }

    /// The next `n` bytes.
    pub fn take(&mut self, n: usize) -> Result<&'a [u8], ReadError> {
        if self.rest.len() < n {
            return Err(ReadError::Truncated {
                needed: n,
                available: self.rest.len(),
            });
        }
        let (head, tail) = self.rest.split_at(n);
        self.rest = tail;
        Ok(head)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], ReadError> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }

    /// `int8`.
    pub fn int8(&mut self) -> Result<i8, ReadError> {
        self.array().map(i8::from_be_bytes)
    }

    /// `int16`.
    pub fn int16(&mut self) -> Result<i16, ReadError> {
        self.array().map(i16::from_be_bytes)
    }

    /// `uint16`.
    pub fn uint16(&mut self) -> Result<u16, ReadError> {
        self.array().map(u16::from_be_bytes)
    }

    /// `int32`.
    pub fn int32(&mut self) -> Result<i32, ReadError> {
        self.array().map(i32::from_be_bytes)
    }

    /// `uint32`.
    pub fn uint32(&mut self) -> Result<u32, ReadError> {
        self.array().map(u32::from_be_bytes)
    }

    /// `int64`.
    pub fn int64(&mut self) -> Result<i64, ReadError> {
        self.array().map(i64::from_be_bytes)
    }

    /// `float64`.
    pub fn float64(&mut self) -> Result<f64, ReadError> {
        self.array().map(|b| f64::from_bits(u64::from_be_bytes(b)))
    }

    /// `bool`: any non-zero byte is true (Kafka's `readByte() != 0`).
    pub fn bool(&mut self) -> Result<bool, ReadError> {
        self.array::<1>().map(|[b]| b != 0)
    }

    /// `uuid`.
    pub fn uuid(&mut self) -> Result<[u8; 16], ReadError> {
        self.array()
    }

    /// Unsigned varint of at most 32 bits (at most 5 bytes).
    pub fn unsigned_varint(&mut self) -> Result<u32, ReadError> {
        let v = self.varlong_bits(5)?;
        u32::try_from(v).map_err(|_| ReadError::InvalidVarint)
    }

    /// Unsigned varint of at most 64 bits (at most 10 bytes).
    pub fn unsigned_varlong(&mut self) -> Result<u64, ReadError> {
        self.varlong_bits(10)
    }

    /// Zig-zag varint.
    pub fn varint(&mut self) -> Result<i32, ReadError> {
        let u = self.unsigned_varint()?;
        Ok(((u >> 1) as i32) ^ -((u & 1) as i32))
    }

    /// Zig-zag varlong.
    pub fn varlong(&mut self) -> Result<i64, ReadError> {
        let u = self.unsigned_varlong()?;
        Ok(((u >> 1) as i64) ^ -((u & 1) as i64))
    }

    fn varlong_bits(&mut self, max_bytes: u32) -> Result<u64, ReadError> {
        let mut value: u64 = 0;
        for i in 0..max_bytes {
            let [b] = self.array::<1>()?;
            let group = u64::from(b & 0x7f);
            let shift = 7 * i;
            // The tenth group holds bit 63 only; more would fall off the 64-bit value.
            if shift == 63 && group > 1 {
                return Err(ReadError::InvalidVarint);
            }
            value |= group << shift;
            if b & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(ReadError::InvalidVarint)
    }

    /// A length prefix as a signed number: -1 is null (a compact length is already minus one;
    /// any other negative number is invalid and left to the caller to refuse).
    pub fn length(&mut self, prefix: LengthPrefix) -> Result<i64, ReadError> {
        match prefix {
            LengthPrefix::Int16 => self.int16().map(i64::from),
            LengthPrefix::Int32 => self.int32().map(i64::from),
            LengthPrefix::Compact => self.unsigned_varint().map(|n| i64::from(n) - 1),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn uvarint_bytes(v: u32) -> Vec<u8> {
        let mut w = WireWriter::new();
        w.unsigned_varint(v);
        w.into_bytes()
    }

    #[test]
    fn unsigned_varints_as_kafka_writes_them() {
        // ByteUtilsTest's vectors.
        assert_eq!(uvarint_bytes(0), [0x00]);
        assert_eq!(uvarint_bytes(0x7f), [0x7f]);
        assert_eq!(uvarint_bytes(0x80), [0x80, 0x01]);
        assert_eq!(uvarint_bytes(0x3fff), [0xff, 0x7f]);
        assert_eq!(uvarint_bytes(0x4000), [0x80, 0x80, 0x01]);
        assert_eq!(uvarint_bytes(0x0fff_ffff), [0xff, 0xff, 0xff, 0x7f]);
        assert_eq!(uvarint_bytes(0x1000_0000), [0x80, 0x80, 0x80, 0x80, 0x01]);
        assert_eq!(uvarint_bytes(u32::MAX), [0xff, 0xff, 0xff, 0xff, 0x0f]);
    }

    #[test]
    fn zigzag_varints() {
        for (v, bytes) in [
            (0i32, vec![0x00]),
            (-1, vec![0x01]),
            (1, vec![0x02]),
            (-64, vec![0x7f]),
            (64, vec![0x80, 0x01]),
            (i32::MAX, vec![0xfe, 0xff, 0xff, 0xff, 0x0f]),
            (i32::MIN, vec![0xff, 0xff, 0xff, 0xff, 0x0f]),
        ] {
            let mut w = WireWriter::new();
            w.varint(v);
            assert_eq!(w.into_bytes(), bytes, "{v}");
            assert_eq!(WireReader::new(&bytes).varint(), Ok(v));
        }
        for v in [0i64, -1, 1, i64::MAX, i64::MIN, 1 << 40] {
            let mut w = WireWriter::new();
            w.varlong(v);
            let bytes = w.into_bytes();
            assert!(bytes.len() <= 10);
            assert_eq!(WireReader::new(&bytes).varlong(), Ok(v));
        }
    }

    #[test]
    fn bad_varints_are_refused() {
        // Six bytes, or a fifth byte with bits above 32.
        let long = [0x80, 0x80, 0x80, 0x80, 0x80, 0x01];
        assert_eq!(
            WireReader::new(&long).unsigned_varint(),
            Err(ReadError::InvalidVarint)
        );
        let wide = [0xff, 0xff, 0xff, 0xff, 0x1f];
        assert_eq!(
            WireReader::new(&wide).unsigned_varint(),
            Err(ReadError::InvalidVarint)
        );
        let wide64 = [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02];
        assert_eq!(
            WireReader::new(&wide64).unsigned_varlong(),
            Err(ReadError::InvalidVarint)
        );
        let max64 = [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01];
        assert_eq!(WireReader::new(&max64).unsigned_varlong(), Ok(u64::MAX));
        assert_eq!(
            WireReader::new(&[0x80]).unsigned_varint(),
            Err(ReadError::Truncated {
                needed: 1,
                available: 0
            })
        );
    }

    #[test]
    fn fixed_width_round_trip() {
        let mut w = WireWriter::new();
        w.int8(-2);
        w.int16(-300);
        w.uint16(65_000);
        w.int32(-70_000);
        w.uint32(4_000_000_000);
        w.int64(-5_000_000_000);
        w.float64(-1.25);
        w.bool(true);
        w.uuid(&[7; 16]);
        let bytes = w.into_bytes();
        assert_eq!(bytes.len(), 1 + 2 + 2 + 4 + 4 + 8 + 8 + 1 + 16);
        let mut r = WireReader::new(&bytes);
        assert_eq!(r.int8(), Ok(-2));
        assert_eq!(r.int16(), Ok(-300));
        assert_eq!(r.uint16(), Ok(65_000));
        assert_eq!(r.int32(), Ok(-70_000));
        assert_eq!(r.uint32(), Ok(4_000_000_000));
        assert_eq!(r.int64(), Ok(-5_000_000_000));
        assert_eq!(r.float64(), Ok(-1.25));
        assert_eq!(r.bool(), Ok(true));
        assert_eq!(r.uuid(), Ok([7; 16]));
        assert_eq!(r.remaining(), 0);
        assert_eq!(WireReader::new(&[2]).bool(), Ok(true));
    }

    #[test]
    fn length_prefixes() {
        let mut w = WireWriter::new();
        w.length(LengthPrefix::Int16, None).unwrap();
        w.length(LengthPrefix::Int32, Some(3)).unwrap();
        w.length(LengthPrefix::Compact, None).unwrap();
        w.length(LengthPrefix::Compact, Some(200)).unwrap();
        assert_eq!(
            w.length(LengthPrefix::Int16, Some(40_000)),
            Err(i16::MAX as usize)
        );
        let bytes = w.into_bytes();
        assert_eq!(bytes, [0xff, 0xff, 0, 0, 0, 3, 0, 0xc9, 0x01]);
        let mut r = WireReader::new(&bytes);
        assert_eq!(r.length(LengthPrefix::Int16), Ok(-1));
        assert_eq!(r.length(LengthPrefix::Int32), Ok(3));
        assert_eq!(r.length(LengthPrefix::Compact), Ok(-1));
        assert_eq!(r.length(LengthPrefix::Compact), Ok(200));
    }
}
