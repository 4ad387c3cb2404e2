//! Kafka record batches, message format v2 (magic 2), as they sit in a segment file.
//!
//! Layout (all big-endian, byte positions from the start of the batch):
//!
//! | pos | field | type |
//! |----:|-------|------|
//! |  0 | baseOffset | int64 |
//! |  8 | batchLength (bytes after this field) | int32 |
//! | 12 | partitionLeaderEpoch | int32 |
//! | 16 | magic (= 2) | int8 |
//! | 17 | crc: CRC-32C of bytes 21..end | uint32 |
//! | 21 | attributes | int16 |
//! | 23 | lastOffsetDelta | int32 |
//! | 27 | baseTimestamp | int64 |
//! | 35 | maxTimestamp | int64 |
//! | 43 | producerId | int64 |
//! | 51 | producerEpoch | int16 |
//! | 53 | baseSequence | int32 |
//! | 57 | records count | int32 |
//! | 61 | records | |
//!
//! Attributes: bits 0-2 compression, bit 3 timestamp type (log-append time), bit 4
//! transactional, bit 5 control. The leader epoch lies outside the CRC, so a broker can stamp it
//! without recomputing the CRC.
//!
//! Each record: varint length (of what follows), int8 attributes, varlong timestampDelta, varint
//! offsetDelta, varint key length and key bytes (-1: null), varint value length and value bytes,
//! varint header count and headers (varint key length, UTF-8 key, varint value length, value).
//! Varints are zig-zag encoded as in protobuf.
//!
//! Control records (a control batch holds one) have key `int16 version (0), int16 type` (see
//! [`ControlType::code`]). Their value:
//! - ABORT / COMMIT: Kafka's `EndTransactionMarker` v0: `int16 version (0), int32
//!   coordinatorEpoch` (6 bytes). kmirror writes coordinator epoch
//!   [`DEFAULT_COORDINATOR_EPOCH`], since the kernel's markers carry none.
//! - MIRROR_PID_RESET (type 100, kmirror's choice, see [`ControlType::MIRROR_PID_RESET_CODE`]):
//!   `int16 version (0)` only, [`MIRROR_PID_RESET_VALUE_VERSION`] (2 bytes). Everything else a
//!   reader needs is in the batch header: the batch's leader epoch is the epoch the reset
//!   happened at, and it carries no producer (`producerId = -1`) and is not transactional.
//!
//! A [`RawBatch`] is a header parsed from bytes that were validated (length, magic, CRC, and for
//! control batches the control record's key), kept together with those bytes, which are never
//! re-encoded: a mirrored batch is appended byte for byte.

use bytes::Bytes;

use kmirror_kernel::batch::{BatchHeader, ControlType, LeaderBatch};
use kmirror_kernel::types::{LeaderEpoch, Offset, NO_PRODUCER_EPOCH, NO_PRODUCER_ID, NO_SEQUENCE};

use crate::error::BatchError;

/// Bytes before `batchLength` counts: `baseOffset` and `batchLength` (Kafka's `LOG_OVERHEAD`).
pub const LOG_OVERHEAD: usize = 12;
/// Size of a v2 batch header up to and including the records count
/// (Kafka's `RECORD_BATCH_OVERHEAD`).
pub const RECORD_BATCH_OVERHEAD: usize = 61;
/// The smallest valid `batchLength`: a header with no records.
pub const MIN_BATCH_LENGTH: i32 = (RECORD_BATCH_OVERHEAD - LOG_OVERHEAD) as i32;
/// The only message format supported.
pub const MAGIC_V2: i8 = 2;

/// Attribute bits 0-2: the compression codec (0 = none).
pub const COMPRESSION_CODEC_MASK: i16 = 0x07;
/// Attribute bit 3: timestamps are log-append time.
pub const TIMESTAMP_TYPE_MASK: i16 = 0x08;
/// Attribute bit 4: the batch is part of a transaction.
pub const TRANSACTIONAL_FLAG_MASK: i16 = 0x10;
/// Attribute bit 5: the batch is a control batch.
pub const CONTROL_FLAG_MASK: i16 = 0x20;

/// Version written in a control record's key (Kafka's `CURRENT_CONTROL_RECORD_KEY_VERSION`).
pub const CONTROL_RECORD_KEY_VERSION: i16 = 0;
/// Version of the `EndTransactionMarker` value written for ABORT and COMMIT.
pub const END_TXN_MARKER_VERSION: i16 = 0;
/// Version of the `MIRROR_PID_RESET` value (its only field).
pub const MIRROR_PID_RESET_VALUE_VERSION: i16 = 0;
/// Coordinator epoch written in transaction markers built by the harness.
pub const DEFAULT_COORDINATOR_EPOCH: i32 = 0;

// Field positions within a batch.
const BASE_OFFSET_POS: usize = 0;
const LENGTH_POS: usize = 8;
const PARTITION_LEADER_EPOCH_POS: usize = 12;
const MAGIC_POS: usize = 16;
const CRC_POS: usize = 17;
const ATTRIBUTES_POS: usize = 21;
const LAST_OFFSET_DELTA_POS: usize = 23;
const BASE_TIMESTAMP_POS: usize = 27;
const MAX_TIMESTAMP_POS: usize = 35;
const PRODUCER_ID_POS: usize = 43;
const PRODUCER_EPOCH_POS: usize = 51;
const BASE_SEQUENCE_POS: usize = 53;
const RECORDS_COUNT_POS: usize = 57;

/// One record of a batch, decoded.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Record {
    /// Record attributes (unused by Kafka today, 0).
    pub attributes: i8,
    /// Timestamp minus the batch's base timestamp.
    pub timestamp_delta: i64,
    /// Offset minus the batch's base offset.
    pub offset_delta: i32,
    /// The key, `None` for null.
    pub key: Option<Vec<u8>>,
    /// The value, `None` for null (a tombstone).
    pub value: Option<Vec<u8>>,
    /// The headers: UTF-8 key and nullable value.
    pub headers: Vec<(String, Option<Vec<u8>>)>,
}

/// A record batch: its validated header and its exact bytes.
///
/// Cloning is cheap (the bytes are shared), and so is parsing a buffer of many batches with
/// [`RawBatch::parse_many_shared`]: each batch is a slice of that buffer, not a copy. The header
/// always describes the bytes: both come from [`RawBatch::parse`] or from an encoder that
/// re-parses what it wrote.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct RawBatch {
    header: BatchHeader,
    bytes: Bytes,
}

impl RawBatch {
    /// Parses `bytes`, which must hold exactly one batch, validating its length, magic and
    /// CRC-32C (and the control record's key for a control batch). The bytes are kept as they
    /// are.
    pub fn parse(bytes: impl Into<Bytes>) -> Result<RawBatch, BatchError> {
        let bytes = bytes.into();
        let (header, size) = decode_header(&bytes)?;
        if size != bytes.len() {
            return Err(BatchError::InvalidField {
                position: LENGTH_POS as u64,
                field: "batchLength",
                value: read_i32(&bytes, LENGTH_POS) as i64,
                reason: "the buffer holds bytes after the batch; use RawBatch::parse_many",
            });
        }
        Ok(RawBatch { header, bytes })
    }

    /// Parses a concatenation of whole batches (a fetch response's records, or a segment),
    /// copying `buf` once. Error positions count from the start of `buf`.
    pub fn parse_many(buf: &[u8]) -> Result<Vec<RawBatch>, BatchError> {
        RawBatch::parse_many_shared(&Bytes::copy_from_slice(buf))
    }

    /// [`RawBatch::parse_many`] without the copy: every batch is a slice of `buf` (which each
    /// keeps alive while it lives). What a fetch path uses, so a fetched byte is copied from
    /// the read buffer only by the write that puts it in the segment.
    pub fn parse_many_shared(buf: &Bytes) -> Result<Vec<RawBatch>, BatchError> {
        let mut batches = Vec::new();
        let mut pos = 0usize;
        while pos < buf.len() {
            let (header, size) = decode_header(&buf[pos..]).map_err(|e| e.shifted(pos as u64))?;
            batches.push(RawBatch {
                header,
                bytes: buf.slice(pos..pos + size),
            });
            pos += size;
        }
        Ok(batches)
    }

    /// Encodes a batch with `header`'s offsets, leader epoch, producer fields and flags, base
    /// timestamp `base_timestamp_ms` and the given records (no compression, create-time
    /// timestamps). `maxTimestamp` is the greatest record timestamp.
    ///
    /// The result is parsed back, so an inconsistent request (a control header whose record key
    /// is not that control type, a record offset beyond the header's last offset, ...) is an
    /// error rather than a batch whose header lies.
    pub fn encode(
        header: &BatchHeader,
        base_timestamp_ms: i64,
        records: &[Record],
    ) -> Result<RawBatch, BatchError> {
        let last_offset_delta = header
            .last_offset
            .checked_sub(header.base_offset)
            .filter(|d| (0..=i32::MAX as i64).contains(d))
            .ok_or_else(|| {
                BatchError::Unencodable(format!(
                    "offsets {}..={} do not fit one batch",
                    header.base_offset, header.last_offset
                ))
            })? as i32;
        if header.base_offset < 0 {
            return Err(BatchError::Unencodable(format!(
                "negative base offset {}",
                header.base_offset
            )));
        }
        let records_count = i32::try_from(records.len())
            .map_err(|_| BatchError::Unencodable(format!("{} records", records.len())))?;
        let mut attributes: i16 = 0;
        if header.is_transactional {
            attributes |= TRANSACTIONAL_FLAG_MASK;
        }
        if header.control.is_some() {
            attributes |= CONTROL_FLAG_MASK;
        }
        let max_timestamp = records
            .iter()
            .map(|r| base_timestamp_ms.saturating_add(r.timestamp_delta))
            .max()
            .unwrap_or(base_timestamp_ms);

        let mut buf = Vec::with_capacity(RECORD_BATCH_OVERHEAD + records.len() * 32);
        buf.extend_from_slice(&header.base_offset.to_be_bytes());
        buf.extend_from_slice(&0i32.to_be_bytes()); // batchLength, patched below
        buf.extend_from_slice(&header.partition_leader_epoch.to_be_bytes());
        buf.push(MAGIC_V2 as u8);
        buf.extend_from_slice(&0u32.to_be_bytes()); // crc, patched below
        buf.extend_from_slice(&attributes.to_be_bytes());
        buf.extend_from_slice(&last_offset_delta.to_be_bytes());
        buf.extend_from_slice(&base_timestamp_ms.to_be_bytes());
        buf.extend_from_slice(&max_timestamp.to_be_bytes());
        buf.extend_from_slice(&header.producer_id.to_be_bytes());
        buf.extend_from_slice(&header.producer_epoch.to_be_bytes());
        buf.extend_from_slice(&header.base_sequence.to_be_bytes());
        buf.extend_from_slice(&records_count.to_be_bytes());
        debug_assert_eq!(buf.len(), RECORD_BATCH_OVERHEAD);
        for record in records {
            encode_record(&mut buf, record)?;
        }
        let batch_length = i32::try_from(buf.len() - LOG_OVERHEAD).map_err(|_| {
            BatchError::Unencodable(format!("batch of {} bytes is too large", buf.len()))
        })?;
        buf[LENGTH_POS..LENGTH_POS + 4].copy_from_slice(&batch_length.to_be_bytes());
        let crc = crc32c::crc32c(&buf[ATTRIBUTES_POS..]);
        buf[CRC_POS..CRC_POS + 4].copy_from_slice(&crc.to_be_bytes());

        let batch = RawBatch::parse(buf)?;
        if batch.header != *header {
            return Err(BatchError::Unencodable(format!(
                "records do not agree with the header: asked for {header:?}, the bytes decode \
                 to {:?}",
                batch.header
            )));
        }
        for record in records {
            if record.offset_delta < 0 || record.offset_delta > last_offset_delta {
                return Err(BatchError::Unencodable(format!(
                    "record offset delta {} outside 0..={last_offset_delta}",
                    record.offset_delta
                )));
            }
        }
        Ok(batch)
    }

    /// Builds the batch for `header` with deterministic synthetic contents, all records stamped
    /// `timestamp_ms`:
    /// - a data batch holds one record per offset `o`, key `o` in decimal ASCII, value
    ///   `"kmirror:<o>"`, no headers;
    /// - a control batch holds one control record whose value is described in the
    ///   [module documentation](self).
    pub fn synthesize(header: &BatchHeader, timestamp_ms: i64) -> Result<RawBatch, BatchError> {
        let records = synthetic_records(header)?;
        RawBatch::encode(header, timestamp_ms, &records)
    }

    /// The batch a leader of `leader_epoch` appends for `batch` at `base_offset`: the header of
    /// [`leader_batch_header`] with [synthetic](RawBatch::synthesize) contents.
    pub fn from_leader_batch(
        batch: &LeaderBatch,
        base_offset: Offset,
        leader_epoch: LeaderEpoch,
        timestamp_ms: i64,
    ) -> Result<RawBatch, BatchError> {
        let header = leader_batch_header(batch, base_offset, leader_epoch)?;
        RawBatch::synthesize(&header, timestamp_ms)
    }

    /// The batch's header.
    pub fn header(&self) -> BatchHeader {
        self.header
    }

    /// The batch's bytes, exactly as parsed or encoded.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The size of the batch in bytes (`batchLength + 12`).
    pub fn size_in_bytes(&self) -> usize {
        self.bytes.len()
    }

    /// The attributes field.
    pub fn attributes(&self) -> i16 {
        read_i16(&self.bytes, ATTRIBUTES_POS)
    }

    /// The compression codec (attribute bits 0-2; 0 = none).
    pub fn compression_codec(&self) -> i16 {
        self.attributes() & COMPRESSION_CODEC_MASK
    }

    /// The stored CRC-32C.
    pub fn crc(&self) -> u32 {
        read_u32(&self.bytes, CRC_POS)
    }

    /// The `baseTimestamp` field.
    pub fn base_timestamp(&self) -> i64 {
        read_i64(&self.bytes, BASE_TIMESTAMP_POS)
    }

    /// The `maxTimestamp` field.
    pub fn max_timestamp(&self) -> i64 {
        read_i64(&self.bytes, MAX_TIMESTAMP_POS)
    }

    /// The `records count` field.
    pub fn records_count(&self) -> i32 {
        read_i32(&self.bytes, RECORDS_COUNT_POS)
    }

    /// Decodes the records of an uncompressed batch. A compressed batch is an
    /// [`BatchError::InvalidField`] on `attributes` (the harness never needs to look inside
    /// one: mirrored batches are copied, not read).
    pub fn records(&self) -> Result<Vec<Record>, BatchError> {
        decode_records(&self.bytes)
    }
}

/// The header a leader of `leader_epoch` gives `batch` when appending it at `base_offset`
/// (Kafka's conventions):
/// - data records: `record_count` offsets from `base_offset`; an idempotent or transactional
///   producer's id, epoch and base sequence, otherwise `-1`s;
/// - a transaction marker: one offset, the producer's id and epoch, no sequence, transactional
///   and control flags;
/// - `MIRROR_PID_RESET`: one offset, no producer, control flag only.
pub fn leader_batch_header(
    batch: &LeaderBatch,
    base_offset: Offset,
    leader_epoch: LeaderEpoch,
) -> Result<BatchHeader, BatchError> {
    match *batch {
        LeaderBatch::Records {
            record_count,
            producer,
            transactional,
        } => {
            if record_count == 0 || record_count > i32::MAX as u32 {
                return Err(BatchError::Unencodable(format!(
                    "a batch holds 1..={} records, not {record_count}",
                    i32::MAX
                )));
            }
            if transactional && producer.is_none() {
                return Err(BatchError::Unencodable(
                    "a transactional batch needs a producer".into(),
                ));
            }
            let mut header = BatchHeader::plain(
                base_offset,
                base_offset + record_count as i64 - 1,
                leader_epoch,
            );
            if let Some(p) = producer {
                header.producer_id = p.producer_id;
                header.producer_epoch = p.producer_epoch;
                header.base_sequence = p.base_sequence;
            }
            header.is_transactional = transactional;
            Ok(header)
        }
        LeaderBatch::Control { control, producer } => {
            let mut header = BatchHeader::plain(base_offset, base_offset, leader_epoch);
            header.control = Some(control);
            if control.is_transaction_marker() {
                let (id, epoch) = producer.ok_or_else(|| {
                    BatchError::Unencodable(format!("a {control:?} marker needs a producer"))
                })?;
                header.producer_id = id;
                header.producer_epoch = epoch;
                header.is_transactional = true;
            } else if let Some((id, epoch)) = producer {
                header.producer_id = id;
                header.producer_epoch = epoch;
            }
            Ok(header)
        }
    }
}

/// The synthetic records [`RawBatch::synthesize`] writes for `header`.
pub fn synthetic_records(header: &BatchHeader) -> Result<Vec<Record>, BatchError> {
    match header.control {
        Some(control) => {
            if header.last_offset != header.base_offset {
                return Err(BatchError::Unencodable(format!(
                    "a control batch covers one offset, not {}..={}",
                    header.base_offset, header.last_offset
                )));
            }
            Ok(vec![control_record(control, DEFAULT_COORDINATOR_EPOCH)])
        }
        None => {
            let count = header.record_count();
            if !(1..=i32::MAX as i64).contains(&count) {
                return Err(BatchError::Unencodable(format!(
                    "a batch holds 1..={} records, not {count}",
                    i32::MAX
                )));
            }
            Ok((0..count as i32)
                .map(|delta| {
                    let offset = header.base_offset + delta as i64;
                    Record {
                        attributes: 0,
                        timestamp_delta: 0,
                        offset_delta: delta,
                        key: Some(offset.to_string().into_bytes()),
                        value: Some(format!("kmirror:{offset}").into_bytes()),
                        headers: Vec::new(),
                    }
                })
                .collect())
        }
    }
}

/// The control record for `control`: key `int16 0, int16 type`; value as described in the
/// [module documentation](self).
pub fn control_record(control: ControlType, coordinator_epoch: i32) -> Record {
    let mut key = Vec::with_capacity(4);
    key.extend_from_slice(&CONTROL_RECORD_KEY_VERSION.to_be_bytes());
    key.extend_from_slice(&control.code().to_be_bytes());
    let value = match control {
        ControlType::Abort | ControlType::Commit => {
            let mut v = Vec::with_capacity(6);
            v.extend_from_slice(&END_TXN_MARKER_VERSION.to_be_bytes());
            v.extend_from_slice(&coordinator_epoch.to_be_bytes());
            v
        }
        ControlType::MirrorPidReset => MIRROR_PID_RESET_VALUE_VERSION.to_be_bytes().to_vec(),
    };
    Record {
        attributes: 0,
        timestamp_delta: 0,
        offset_delta: 0,
        key: Some(key),
        value: Some(value),
        headers: Vec::new(),
    }
}

/// Reads the `batchLength` of the batch starting `buf` and returns the batch's total size
/// (`batchLength + 12`), validating only the length. Needs [`LOG_OVERHEAD`] bytes.
pub fn batch_size_from_prefix(buf: &[u8]) -> Result<usize, BatchError> {
    if buf.len() < LOG_OVERHEAD {
        return Err(BatchError::Truncated {
            position: 0,
            needed: LOG_OVERHEAD as u64,
            available: buf.len() as u64,
        });
    }
    let length = read_i32(buf, LENGTH_POS);
    if length < MIN_BATCH_LENGTH {
        return Err(BatchError::InvalidLength {
            position: LENGTH_POS as u64,
            length,
            minimum: MIN_BATCH_LENGTH,
        });
    }
    Ok(LOG_OVERHEAD + length as usize)
}

/// Validates the batch starting at `buf[0]` and returns its header and size in bytes; `buf` may
/// extend past the batch. Checks, in order: enough bytes for `batchLength`, `batchLength` large
/// enough, enough bytes for the whole batch, magic 2, CRC-32C, base offset and
/// `lastOffsetDelta` not negative, records count not negative, and for a control batch: not
/// compressed, at least one record, a known control type in the first record's key.
/// Positions in errors count from `buf[0]`.
pub fn decode_header(buf: &[u8]) -> Result<(BatchHeader, usize), BatchError> {
    let size = batch_size_from_prefix(buf)?;
    if buf.len() < size {
        return Err(BatchError::Truncated {
            position: 0,
            needed: size as u64,
            available: buf.len() as u64,
        });
    }
    let batch = &buf[..size];
    let magic = batch[MAGIC_POS] as i8;
    if magic != MAGIC_V2 {
        return Err(BatchError::UnsupportedMagic {
            position: MAGIC_POS as u64,
            magic,
        });
    }
    let stored = read_u32(batch, CRC_POS);
    let computed = crc32c::crc32c(&batch[ATTRIBUTES_POS..]);
    if stored != computed {
        return Err(BatchError::CrcMismatch {
            position: CRC_POS as u64,
            stored,
            computed,
        });
    }
    let base_offset = read_i64(batch, BASE_OFFSET_POS);
    if base_offset < 0 {
        return Err(BatchError::InvalidField {
            position: BASE_OFFSET_POS as u64,
            field: "baseOffset",
            value: base_offset,
            reason: "offsets are not negative",
        });
    }
    let last_offset_delta = read_i32(batch, LAST_OFFSET_DELTA_POS);
    if last_offset_delta < 0 {
        return Err(BatchError::InvalidField {
            position: LAST_OFFSET_DELTA_POS as u64,
            field: "lastOffsetDelta",
            value: last_offset_delta as i64,
            reason: "a batch's last offset is not below its base offset",
        });
    }
    let last_offset =
        base_offset
            .checked_add(last_offset_delta as i64)
            .ok_or(BatchError::InvalidField {
                position: LAST_OFFSET_DELTA_POS as u64,
                field: "lastOffsetDelta",
                value: last_offset_delta as i64,
                reason: "the last offset overflows int64",
            })?;
    let records_count = read_i32(batch, RECORDS_COUNT_POS);
    if records_count < 0 {
        return Err(BatchError::InvalidField {
            position: RECORDS_COUNT_POS as u64,
            field: "recordsCount",
            value: records_count as i64,
            reason: "a record count is not negative",
        });
    }
    let attributes = read_i16(batch, ATTRIBUTES_POS);
    let control = if attributes & CONTROL_FLAG_MASK != 0 {
        Some(decode_control_type(batch, attributes, records_count)?)
    } else {
        None
    };
    let header = BatchHeader {
        base_offset,
        last_offset,
        partition_leader_epoch: read_i32(batch, PARTITION_LEADER_EPOCH_POS),
        producer_id: read_i64(batch, PRODUCER_ID_POS),
        producer_epoch: read_i16(batch, PRODUCER_EPOCH_POS),
        base_sequence: read_i32(batch, BASE_SEQUENCE_POS),
        is_transactional: attributes & TRANSACTIONAL_FLAG_MASK != 0,
        control,
    };
    Ok((header, size))
}

fn decode_control_type(
    batch: &[u8],
    attributes: i16,
    records_count: i32,
) -> Result<ControlType, BatchError> {
    if attributes & COMPRESSION_CODEC_MASK != 0 {
        return Err(BatchError::InvalidField {
            position: ATTRIBUTES_POS as u64,
            field: "attributes",
            value: attributes as i64,
            reason: "a control batch is never compressed",
        });
    }
    if records_count < 1 {
        return Err(BatchError::InvalidField {
            position: RECORDS_COUNT_POS as u64,
            field: "recordsCount",
            value: records_count as i64,
            reason: "a control batch holds a control record",
        });
    }
    let mut reader = Reader::new(batch, RECORD_BATCH_OVERHEAD);
    let record = reader.record()?;
    let key_pos = record.key_position;
    let key = record.record.key.ok_or(BatchError::MalformedRecord {
        position: key_pos,
        reason: "a control record has a null key".into(),
    })?;
    if key.len() < 4 {
        return Err(BatchError::MalformedRecord {
            position: key_pos,
            reason: format!(
                "a control record key holds int16 version and int16 type (4 bytes), not {} bytes",
                key.len()
            ),
        });
    }
    let version = i16::from_be_bytes([key[0], key[1]]);
    if version < 0 {
        return Err(BatchError::MalformedRecord {
            position: key_pos,
            reason: format!("control record key version {version} is negative"),
        });
    }
    let code = i16::from_be_bytes([key[2], key[3]]);
    ControlType::from_code(code).ok_or(BatchError::UnknownControlType {
        position: key_pos + 2,
        code,
    })
}

fn decode_records(batch: &[u8]) -> Result<Vec<Record>, BatchError> {
    let attributes = read_i16(batch, ATTRIBUTES_POS);
    if attributes & COMPRESSION_CODEC_MASK != 0 {
        return Err(BatchError::InvalidField {
            position: ATTRIBUTES_POS as u64,
            field: "attributes",
            value: attributes as i64,
            reason: "compressed records cannot be decoded by the harness",
        });
    }
    let count = read_i32(batch, RECORDS_COUNT_POS).max(0) as usize;
    let mut reader = Reader::new(batch, RECORD_BATCH_OVERHEAD);
    let mut records = Vec::with_capacity(count.min(batch.len()));
    for _ in 0..count {
        records.push(reader.record()?.record);
    }
    if reader.pos != batch.len() {
        return Err(BatchError::MalformedRecord {
            position: reader.pos as u64,
            reason: format!(
                "{} bytes left after the {count} records the header announces",
                batch.len() - reader.pos
            ),
        });
    }
    Ok(records)
}

struct DecodedRecord {
    record: Record,
    key_position: u64,
}

/// A cursor over the bytes of a batch, for records.
struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn new(buf: &'a [u8], pos: usize) -> Self {
        Reader { buf, pos }
    }

    fn malformed(&self, reason: impl Into<String>) -> BatchError {
        BatchError::MalformedRecord {
            position: self.pos as u64,
            reason: reason.into(),
        }
    }

    fn byte(&mut self) -> Result<u8, BatchError> {
        let b = *self
            .buf
            .get(self.pos)
            .ok_or_else(|| self.malformed("the record runs past the end of the batch"))?;
        self.pos += 1;
        Ok(b)
    }

    fn varlong(&mut self) -> Result<i64, BatchError> {
        let start = self.pos;
        let mut raw: u64 = 0;
        for shift in (0..70).step_by(7) {
            let b = self.byte()?;
            if shift == 63 && b > 1 {
                self.pos = start;
                return Err(self.malformed("varint longer than 64 bits"));
            }
            raw |= ((b & 0x7f) as u64) << shift;
            if b & 0x80 == 0 {
                return Ok(((raw >> 1) as i64) ^ -((raw & 1) as i64));
            }
        }
        self.pos = start;
        Err(self.malformed("varint longer than 10 bytes"))
    }

    fn varint(&mut self) -> Result<i32, BatchError> {
        let start = self.pos;
        let v = self.varlong()?;
        i32::try_from(v).map_err(|_| {
            self.pos = start;
            self.malformed(format!("varint {v} does not fit 32 bits"))
        })
    }

    fn bytes(&mut self, what: &str) -> Result<Option<Vec<u8>>, BatchError> {
        let len_pos = self.pos;
        let len = self.varint()?;
        if len < 0 {
            return Ok(None);
        }
        let end = self
            .pos
            .checked_add(len as usize)
            .filter(|&e| e <= self.buf.len());
        let Some(end) = end else {
            self.pos = len_pos;
            return Err(self.malformed(format!(
                "{what} of {len} bytes runs past the end of the batch"
            )));
        };
        let out = self.buf[self.pos..end].to_vec();
        self.pos = end;
        Ok(Some(out))
    }

    fn record(&mut self) -> Result<DecodedRecord, BatchError> {
        let len_pos = self.pos;
        let length = self.varint()?;
        if length < 0 {
            self.pos = len_pos;
            return Err(self.malformed(format!("negative record length {length}")));
        }
        let body_start = self.pos;
        let attributes = self.byte()? as i8;
        let timestamp_delta = self.varlong()?;
        let offset_delta = self.varint()?;
        let key = self.bytes("key")?;
        let key_position = (self.pos - key.as_ref().map_or(0, Vec::len)) as u64;
        let value = self.bytes("value")?;
        let header_count_pos = self.pos;
        let header_count = self.varint()?;
        if header_count < 0 {
            self.pos = header_count_pos;
            return Err(self.malformed(format!("negative header count {header_count}")));
        }
        let mut headers = Vec::new();
        for _ in 0..header_count {
            let key_pos = self.pos;
            let key = self
                .bytes("header key")?
                .ok_or_else(|| self.malformed("a header key is never null"))?;
            let key = String::from_utf8(key).map_err(|_| {
                self.pos = key_pos;
                self.malformed("a header key is not UTF-8")
            })?;
            let value = self.bytes("header value")?;
            headers.push((key, value));
        }
        let consumed = self.pos - body_start;
        if consumed != length as usize {
            self.pos = len_pos;
            return Err(self.malformed(format!(
                "record length says {length} bytes but its fields take {consumed}"
            )));
        }
        Ok(DecodedRecord {
            record: Record {
                attributes,
                timestamp_delta,
                offset_delta,
                key,
                value,
                headers,
            },
            key_position,
        })
    }
}

fn put_varlong(buf: &mut Vec<u8>, v: i64) {
    let mut raw = ((v << 1) ^ (v >> 63)) as u64;
    while raw >= 0x80 {
        buf.push((raw as u8 & 0x7f) | 0x80);
        raw >>= 7;
    }
    buf.push(raw as u8);
}

fn put_bytes(buf: &mut Vec<u8>, bytes: Option<&[u8]>) -> Result<(), BatchError> {
    match bytes {
        None => put_varlong(buf, -1),
        Some(b) => {
            let len = i32::try_from(b.len())
                .map_err(|_| BatchError::Unencodable(format!("field of {} bytes", b.len())))?;
            put_varlong(buf, len as i64);
            buf.extend_from_slice(b);
        }
    }
    Ok(())
}

fn encode_record(buf: &mut Vec<u8>, record: &Record) -> Result<(), BatchError> {
    let mut body = Vec::new();
    body.push(record.attributes as u8);
    put_varlong(&mut body, record.timestamp_delta);
    put_varlong(&mut body, record.offset_delta as i64);
    put_bytes(&mut body, record.key.as_deref())?;
    put_bytes(&mut body, record.value.as_deref())?;
    let header_count = i32::try_from(record.headers.len())
        .map_err(|_| BatchError::Unencodable(format!("{} headers", record.headers.len())))?;
    put_varlong(&mut body, header_count as i64);
    for (key, value) in &record.headers {
        put_bytes(&mut body, Some(key.as_bytes()))?;
        put_bytes(&mut body, value.as_deref())?;
    }
    let len = i32::try_from(body.len())
        .map_err(|_| BatchError::Unencodable(format!("record of {} bytes", body.len())))?;
    put_varlong(buf, len as i64);
    buf.extend_from_slice(&body);
    Ok(())
}

fn read_i16(b: &[u8], pos: usize) -> i16 {
    i16::from_be_bytes([b[pos], b[pos + 1]])
}

fn read_i32(b: &[u8], pos: usize) -> i32 {
    i32::from_be_bytes([b[pos], b[pos + 1], b[pos + 2], b[pos + 3]])
}

fn read_u32(b: &[u8], pos: usize) -> u32 {
    u32::from_be_bytes([b[pos], b[pos + 1], b[pos + 2], b[pos + 3]])
}

fn read_i64(b: &[u8], pos: usize) -> i64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[pos..pos + 8]);
    i64::from_be_bytes(a)
}

/// Whether `header` is a batch from no producer (`producerId`, epoch and sequence all `-1`).
pub fn has_no_producer(header: &BatchHeader) -> bool {
    header.producer_id == NO_PRODUCER_ID
        && header.producer_epoch == NO_PRODUCER_EPOCH
        && header.base_sequence == NO_SEQUENCE
}

#[cfg(test)]
mod tests {
    use super::*;
    use kmirror_kernel::batch::ProducerBatchInfo;

    fn plain(base: Offset, count: u32, epoch: LeaderEpoch) -> RawBatch {
        RawBatch::from_leader_batch(
            &LeaderBatch::Records {
                record_count: count,
                producer: None,
                transactional: false,
            },
            base,
            epoch,
            1_700_000_000_000,
        )
        .unwrap()
    }

    #[test]
    fn layout_matches_kafka_field_positions() {
        let b = plain(42, 3, 7);
        let bytes = b.bytes();
        assert_eq!(read_i64(bytes, 0), 42);
        assert_eq!(read_i32(bytes, 8) as usize, bytes.len() - 12);
        assert_eq!(read_i32(bytes, 12), 7);
        assert_eq!(bytes[16], 2);
        assert_eq!(read_i32(bytes, 23), 2);
        assert_eq!(read_i64(bytes, 27), 1_700_000_000_000);
        assert_eq!(read_i64(bytes, 35), 1_700_000_000_000);
        assert_eq!(read_i64(bytes, 43), -1);
        assert_eq!(read_i16(bytes, 51), -1);
        assert_eq!(read_i32(bytes, 53), -1);
        assert_eq!(read_i32(bytes, 57), 3);
        assert_eq!(b.crc(), crc32c::crc32c(&bytes[21..]));
        assert_eq!(b.header(), BatchHeader::plain(42, 44, 7));
    }

    #[test]
    fn golden_bytes_of_a_one_record_batch() {
        // Computed by hand from the format: record body of 16 bytes (length varint 0x20),
        // attrs 0, tsDelta 0, offsetDelta 0, key "5" (len 1 -> zig-zag 0x02), value
        // "kmirror:5" (len 9 -> 0x12), 0 headers.
        let b = plain(5, 1, 0);
        let record: &[u8] = &[
            0x20, 0x00, 0x00, 0x00, 0x02, b'5', 0x12, b'k', b'm', b'i', b'r', b'r', b'o', b'r',
            b':', b'5', 0x00,
        ];
        assert_eq!(&b.bytes()[61..], record);
        assert_eq!(b.size_in_bytes(), 61 + record.len());
    }

    #[test]
    fn bytes_equal_kafka_pythons_builder() {
        // kafka-python 3.0.12: MemoryRecordsBuilder(magic=2, compression_type=0, offset=0),
        // append(timestamp=1700000000000, key=b'0', value=b'kmirror:0') and the same for 1.
        let golden = "00000000000000000000005300000000021e21d0e40000000000010000018bcfe568000000\
                      018bcfe56800ffffffffffffffffffffffffffff00000002200000000230126b6d6972726f\
                      723a3000200000020231126b6d6972726f723a3100";
        let golden: Vec<u8> = (0..golden.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&golden[i..i + 2], 16).unwrap())
            .collect();
        assert_eq!(plain(0, 2, 0).bytes(), &golden[..]);
    }

    #[test]
    fn records_round_trip_with_synthetic_contents() {
        let b = plain(100, 4, 1);
        let records = b.records().unwrap();
        assert_eq!(records.len(), 4);
        for (i, r) in records.iter().enumerate() {
            assert_eq!(r.offset_delta, i as i32);
            assert_eq!(r.key.as_deref(), Some((100 + i).to_string().as_bytes()));
            assert_eq!(
                r.value.as_deref(),
                Some(format!("kmirror:{}", 100 + i).as_bytes())
            );
        }
    }

    #[test]
    fn encode_keeps_nulls_headers_and_negative_varints() {
        let header = BatchHeader::plain(0, 1, 0);
        let records = vec![
            Record {
                attributes: 0,
                timestamp_delta: -5,
                offset_delta: 0,
                key: None,
                value: Some(vec![1; 300]),
                headers: vec![("h".into(), None), ("é".into(), Some(vec![9]))],
            },
            Record {
                attributes: 0,
                timestamp_delta: i64::MAX / 4,
                offset_delta: 1,
                key: Some(vec![]),
                value: None,
                headers: vec![],
            },
        ];
        let b = RawBatch::encode(&header, 1000, &records).unwrap();
        assert_eq!(b.records().unwrap(), records);
        assert_eq!(b.max_timestamp(), 1000 + i64::MAX / 4);
    }

    #[test]
    fn control_batches_carry_their_type_and_kafka_marker_value() {
        let commit = RawBatch::from_leader_batch(
            &LeaderBatch::Control {
                control: ControlType::Commit,
                producer: Some((9, 2)),
            },
            10,
            3,
            0,
        )
        .unwrap();
        let h = commit.header();
        assert_eq!(h.control, Some(ControlType::Commit));
        assert!(h.is_transactional);
        assert_eq!(
            (h.producer_id, h.producer_epoch, h.base_sequence),
            (9, 2, -1)
        );
        assert_eq!(commit.attributes(), 0x30);
        let r = &commit.records().unwrap()[0];
        assert_eq!(r.key.as_deref(), Some(&[0u8, 0, 0, 1][..]));
        assert_eq!(r.value.as_deref(), Some(&[0u8, 0, 0, 0, 0, 0][..]));

        let reset = RawBatch::from_leader_batch(
            &LeaderBatch::Control {
                control: ControlType::MirrorPidReset,
                producer: None,
            },
            11,
            4,
            0,
        )
        .unwrap();
        let h = reset.header();
        assert_eq!(h.control, Some(ControlType::MirrorPidReset));
        assert!(!h.is_transactional);
        assert!(has_no_producer(&h));
        assert_eq!(reset.attributes(), 0x20);
        let r = &reset.records().unwrap()[0];
        assert_eq!(r.key.as_deref(), Some(&[0u8, 0, 0, 100][..]));
        assert_eq!(r.value.as_deref(), Some(&[0u8, 0][..]));

        assert!(RawBatch::from_leader_batch(
            &LeaderBatch::Control {
                control: ControlType::Abort,
                producer: None
            },
            0,
            0,
            0
        )
        .is_err());
    }

    #[test]
    fn transactional_and_idempotent_headers() {
        let b = RawBatch::from_leader_batch(
            &LeaderBatch::Records {
                record_count: 2,
                producer: Some(ProducerBatchInfo {
                    producer_id: 77,
                    producer_epoch: 1,
                    base_sequence: 5,
                }),
                transactional: true,
            },
            0,
            0,
            0,
        )
        .unwrap();
        let h = b.header();
        assert_eq!(
            (h.producer_id, h.producer_epoch, h.base_sequence),
            (77, 1, 5)
        );
        assert!(h.is_transactional);
        assert_eq!(b.attributes(), 0x10);
        assert!(RawBatch::from_leader_batch(
            &LeaderBatch::Records {
                record_count: 1,
                producer: None,
                transactional: true
            },
            0,
            0,
            0
        )
        .is_err());
    }

    #[test]
    fn leader_epoch_is_outside_the_crc() {
        let b = plain(0, 2, 1);
        let mut bytes = b.bytes().to_vec();
        bytes[12..16].copy_from_slice(&99i32.to_be_bytes());
        let re = RawBatch::parse(bytes).unwrap();
        assert_eq!(re.header().partition_leader_epoch, 99);
    }

    #[test]
    fn every_flipped_bit_after_the_epoch_is_detected() {
        let b = plain(3, 2, 1);
        for pos in 16..b.size_in_bytes() {
            let mut bytes = b.bytes().to_vec();
            bytes[pos] ^= 0x01;
            let err = RawBatch::parse(bytes).unwrap_err();
            match pos {
                16 => assert!(matches!(err, BatchError::UnsupportedMagic { magic: 3, .. })),
                _ => assert!(
                    matches!(err, BatchError::CrcMismatch { position: 17, .. }),
                    "byte {pos}: {err}"
                ),
            }
        }
    }

    #[test]
    fn truncation_and_bad_lengths_are_typed() {
        let b = plain(0, 1, 0);
        let full = b.bytes();
        for cut in 0..full.len() {
            let err = decode_header(&full[..cut]).unwrap_err();
            assert!(err.is_truncation(), "cut at {cut}: {err}");
        }
        let mut bytes = full.to_vec();
        bytes[8..12].copy_from_slice(&10i32.to_be_bytes());
        assert!(matches!(
            decode_header(&bytes),
            Err(BatchError::InvalidLength {
                position: 8,
                length: 10,
                ..
            })
        ));
    }

    #[test]
    fn parse_many_reports_positions_from_buffer_start_and_the_shared_parse_copies_nothing() {
        let a = plain(0, 2, 0);
        let b = plain(2, 1, 0);
        let mut buf = a.bytes().to_vec();
        buf.extend_from_slice(b.bytes());
        let parsed = RawBatch::parse_many(&buf).unwrap();
        assert_eq!(parsed, vec![a.clone(), b.clone()]);
        let shared = Bytes::from(buf.clone());
        let sliced = RawBatch::parse_many_shared(&shared).unwrap();
        assert_eq!(sliced, parsed);
        assert_eq!(sliced[0].bytes().as_ptr(), shared.as_ptr());
        assert_eq!(
            sliced[1].bytes().as_ptr(),
            shared[a.size_in_bytes()..].as_ptr(),
            "the second batch is a slice of the same buffer"
        );
        let last = buf.len() - 1;
        buf[last] ^= 0xff;
        let err = RawBatch::parse_many(&buf).unwrap_err();
        assert_eq!(err.position(), Some(a.size_in_bytes() as u64 + 17));
    }

    #[test]
    fn unknown_control_type_is_an_error_naming_the_key_position() {
        let header = BatchHeader {
            control: Some(ControlType::MirrorPidReset),
            ..BatchHeader::plain(0, 0, 0)
        };
        let mut rec = control_record(ControlType::MirrorPidReset, 0);
        rec.key = Some(vec![0, 0, 0, 2]); // LEADER_CHANGE
        let err = RawBatch::encode(&header, 0, &[rec]).unwrap_err();
        // The re-parse inside encode refuses the batch.
        assert!(
            matches!(err, BatchError::UnknownControlType { code: 2, .. }),
            "{err}"
        );
        // Position: 61 + record length varint (1) + attrs (1) + ts (1) + offset (1) + key len (1).
        assert_eq!(err.position(), Some(61 + 5 + 2));
    }

    #[test]
    fn header_disagreeing_with_records_is_refused() {
        let header = BatchHeader::plain(0, 0, 0);
        let rec = Record {
            attributes: 0,
            timestamp_delta: 0,
            offset_delta: 3,
            key: None,
            value: None,
            headers: vec![],
        };
        assert!(matches!(
            RawBatch::encode(&header, 0, &[rec]),
            Err(BatchError::Unencodable(_))
        ));
    }
}
