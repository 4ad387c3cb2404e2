//! A Fetch response whose records are regions of segment files ([`crate::file_region`]), on
//! the wire: the response's own fields encoded by kafka-protocol, the records sent from the
//! files, never through this process's memory when the connection is plaintext on Linux
//! (`sendfile`); over TLS they are read, since the bytes must be encrypted here.
//!
//! kafka-protocol encodes a response into one buffer. So the response is encoded twice, its
//! regions' records once as empty and once as null: the two encodings differ exactly where
//! each region's records go (one byte in the flexible versions, 12 and later: the compact
//! length; four before: the length), in the response's order. The frame is the bytes around
//! those places, each region's real length, and the region ([`frame`]).
//!
//! Writing it ([`write()`]) holds back the frame's last byte until every region is known intact
//! ([`FileRegion::intact`]): when a truncation met a region in flight the connection is
//! closed before the client has a whole response, and the client fetches again.

use std::io::{self, Write};
use std::net::TcpStream;

use bytes::{BufMut, BytesMut};
use kafka_protocol::messages::{FetchResponse, ResponseHeader};
use kafka_protocol::protocol::Encodable;

use crate::file_region::FileRegion;

use super::PlacedRegion;

/// The first Fetch version in Kafka's flexible encoding (compact lengths).
const FIRST_FLEXIBLE_VERSION: i16 = 12;

/// A part of a frame: bytes in memory, or a region of a segment file.
#[derive(Debug)]
pub enum Piece {
    /// Bytes encoded here.
    Bytes(Vec<u8>),
    /// Records sent from a segment file.
    Region(FileRegion),
}

/// The frame of `response` (Fetch `version`, the response header of `header_version` with
/// `correlation_id`), whose `regions` partitions carry empty records as placeholders: its
/// pieces, the size prefix first. `Err` says why the response could not be split (a bug).
pub fn frame(
    correlation_id: i32,
    header_version: i16,
    response: &FetchResponse,
    version: i16,
    regions: Vec<PlacedRegion>,
) -> Result<Vec<Piece>, String> {
    let encode = |r: &FetchResponse| -> Result<BytesMut, String> {
        let mut out = BytesMut::new();
        ResponseHeader::default()
            .with_correlation_id(correlation_id)
            .encode(&mut out, header_version)
            .map_err(|e| format!("encode of a Fetch response header failed: {e}"))?;
        r.encode(&mut out, version)
            .map_err(|e| format!("encode of a Fetch v{version} response failed: {e}"))?;
        Ok(out)
    };
    let mut null = response.clone();
    for r in &regions {
        let partition = null
            .responses
            .get_mut(r.topic)
            .and_then(|t| t.partitions.get_mut(r.partition))
            .ok_or("a file region names no partition of its response")?;
        partition.records = None;
    }
    let (empty, null) = (encode(response)?, encode(&null)?);
    if empty.len() != null.len() {
        return Err("the two encodings of a Fetch response differ in length".into());
    }
    let flexible = version >= FIRST_FLEXIBLE_VERSION;
    let width = if flexible { 1 } else { 4 };
    let mut places = Vec::with_capacity(regions.len());
    let mut i = 0;
    while i < empty.len() {
        if empty[i] == null[i] {
            i += 1;
        } else {
            places.push(i);
            i += width;
        }
    }
    if places.len() != regions.len() {
        return Err(format!(
            "{} file regions but {} records placeholders in a Fetch response",
            regions.len(),
            places.len()
        ));
    }
    let size: u64 = regions.iter().map(|r| r.region.len()).sum();
    let mut pieces = Vec::with_capacity(2 * regions.len() + 1);
    let mut bytes = Vec::with_capacity(empty.len() + 5 * regions.len());
    bytes.put_i32(frame_size(
        empty.len() - width * regions.len(),
        &regions,
        flexible,
        size,
    )?);
    let mut from = 0;
    for (place, r) in places.into_iter().zip(regions) {
        bytes.extend_from_slice(&empty[from..place]);
        put_length(&mut bytes, r.region.len(), flexible)?;
        pieces.push(Piece::Bytes(std::mem::take(&mut bytes)));
        pieces.push(Piece::Region(r.region));
        from = place + width;
    }
    bytes.extend_from_slice(&empty[from..]);
    pieces.push(Piece::Bytes(bytes));
    Ok(pieces)
}

/// The frame's size: `fixed` bytes of fields, each region's length prefix and `records`
/// bytes of records.
fn frame_size(
    fixed: usize,
    regions: &[PlacedRegion],
    flexible: bool,
    records: u64,
) -> Result<i32, String> {
    let mut prefixes = 0u64;
    for r in regions {
        let mut prefix = Vec::new();
        put_length(&mut prefix, r.region.len(), flexible)?;
        prefixes += prefix.len() as u64;
    }
    i32::try_from(fixed as u64 + prefixes + records)
        .map_err(|_| "a Fetch response larger than 2 GiB".to_owned())
}

/// Kafka's length of a records field of `len` bytes: an unsigned varint of `len + 1` in the
/// flexible versions, a 32-bit length before.
fn put_length(out: &mut Vec<u8>, len: u64, flexible: bool) -> Result<(), String> {
    let len = i32::try_from(len).map_err(|_| "records larger than 2 GiB".to_owned())?;
    if flexible {
        let mut v = len as u32 + 1;
        while v >= 0x80 {
            out.push((v as u8 & 0x7f) | 0x80);
            v >>= 7;
        }
        out.push(v as u8);
    } else {
        out.put_i32(len);
    }
    Ok(())
}

/// Writes `pieces` to `stream`: each region with `sendfile` on `socket` (the same connection,
/// plaintext), or read into memory when there is no `socket` (TLS). The frame's last byte goes
/// out only once every region is known intact; otherwise the error says the connection must
/// close.
pub fn write(
    stream: &mut impl Write,
    socket: Option<&TcpStream>,
    pieces: Vec<Piece>,
) -> io::Result<()> {
    let regions: Vec<FileRegion> = pieces
        .iter()
        .filter_map(|p| match p {
            Piece::Region(r) => Some(r.clone()),
            Piece::Bytes(_) => None,
        })
        .collect();
    let intact = || {
        if regions.iter().all(FileRegion::intact) {
            Ok(())
        } else {
            Err(io::Error::other(
                "a truncation of the log met records in flight; closing so that the client \
                 fetches again",
            ))
        }
    };
    let Some(socket) = socket else {
        let mut all = Vec::new();
        for piece in pieces {
            match piece {
                Piece::Bytes(b) => all.extend_from_slice(&b),
                Piece::Region(r) => all.extend_from_slice(&r.read(0..r.len())?),
            }
        }
        intact()?;
        stream.write_all(&all)?;
        return stream.flush();
    };
    let last_region = pieces.iter().rposition(|p| matches!(p, Piece::Region(_)));
    let mut held = Vec::new();
    for (i, piece) in pieces.into_iter().enumerate() {
        match piece {
            Piece::Bytes(b) => held.extend_from_slice(&b),
            Piece::Region(r) if r.is_empty() => {}
            Piece::Region(r) => {
                stream.write_all(&held)?;
                held.clear();
                if Some(i) == last_region {
                    // Its last byte is held back with the frame's end.
                    let end = r.len() - 1;
                    held = r.read(end..r.len())?;
                    r.send(socket, 0..end)?;
                } else {
                    r.send(socket, 0..r.len())?;
                }
            }
        }
    }
    let Some((&last, rest)) = held.split_last() else {
        return Ok(());
    };
    stream.write_all(rest)?;
    intact()?;
    stream.write_all(&[last])?;
    stream.flush()
}

#[cfg(test)]
mod tests {
    use std::io::Read;
    use std::net::{TcpListener, TcpStream};
    use std::path::Path;
    use std::sync::Arc;

    use bytes::Bytes;
    use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
    use kafka_protocol::messages::TopicName;
    use kafka_protocol::protocol::StrBytes;

    use super::*;
    use crate::file_region::Truncations;

    /// A file of 300 bytes (byte `i` is `i % 251`), and regions of it.
    struct Fixture {
        file: Arc<std::fs::File>,
        truncations: Truncations,
    }

    impl Fixture {
        fn new() -> Fixture {
            let mut file = tempfile::tempfile().unwrap();
            let bytes: Vec<u8> = (0..300u32).map(|i| (i % 251) as u8).collect();
            std::io::Write::write_all(&mut file, &bytes).unwrap();
            Fixture {
                file: Arc::new(file),
                truncations: Truncations::default(),
            }
        }

        fn region(&self, position: u64, len: u64) -> FileRegion {
            let path = Path::new("segment");
            FileRegion::new(self.file.clone(), path, position, len, 0, &self.truncations)
        }
    }

    /// Two topics: partitions 0 and 1 of `a` with records from `regions[0]` and `[1]`,
    /// partition 2 of `a` with none; partition 0 of `b` from `regions[2]`. With `inline`, the
    /// records in the response itself (as kafka-protocol alone would encode them).
    fn response(f: &Fixture, inline: bool) -> (FetchResponse, Vec<PlacedRegion>) {
        let regions = [f.region(0, 100), f.region(100, 7), f.region(120, 180)];
        let records = |r: &FileRegion| {
            if inline {
                Bytes::from(r.read(0..r.len()).unwrap())
            } else {
                Bytes::new()
            }
        };
        let partition = |i: i32, records: Bytes| {
            PartitionData::default()
                .with_partition_index(i)
                .with_high_watermark(300)
                .with_records(Some(records))
        };
        let topic = |name: &str, partitions| {
            FetchableTopicResponse::default()
                .with_topic(TopicName(StrBytes::from_string(name.to_owned())))
                .with_partitions(partitions)
        };
        let response = FetchResponse::default().with_responses(vec![
            topic(
                "a",
                vec![
                    partition(0, records(&regions[0])),
                    partition(1, records(&regions[1])),
                    partition(2, Bytes::new()),
                ],
            ),
            topic("b", vec![partition(0, records(&regions[2]))]),
        ]);
        let [r0, r1, r2] = regions;
        let placed = [(0, 0, r0), (0, 1, r1), (1, 0, r2)]
            .into_iter()
            .map(|(topic, partition, region)| PlacedRegion {
                topic,
                partition,
                region,
            })
            .collect();
        (response, placed)
    }

    /// The frame kafka-protocol alone writes, records inline.
    fn whole(response: &FetchResponse, version: i16, header_version: i16) -> Vec<u8> {
        let mut body = BytesMut::new();
        ResponseHeader::default()
            .with_correlation_id(42)
            .encode(&mut body, header_version)
            .unwrap();
        response.encode(&mut body, version).unwrap();
        let mut frame = Vec::new();
        frame.put_i32(body.len() as i32);
        frame.extend_from_slice(&body);
        frame
    }

    /// A connected pair of sockets on loopback.
    fn pair() -> (TcpStream, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, _) = listener.accept().unwrap();
        (server, client)
    }

    #[test]
    fn a_frame_sent_from_the_files_is_the_frame_kafka_protocol_writes() {
        let f = Fixture::new();
        // v11 (lengths of four bytes, header v0) and v12, v17 (compact lengths, header v1).
        for (version, header_version) in [(4, 0), (11, 0), (12, 1), (17, 1)] {
            let expected = whole(&response(&f, true).0, version, header_version);
            let (placeholders, regions) = response(&f, false);
            // Read into memory (TLS), and with sendfile on a socket (plaintext).
            let pieces =
                frame(42, header_version, &placeholders, version, regions.clone()).unwrap();
            let mut read = Vec::new();
            write(&mut read, None, pieces).unwrap();
            assert_eq!(read, expected, "v{version}, read");
            let (mut server, mut client) = pair();
            let pieces = frame(42, header_version, &placeholders, version, regions).unwrap();
            let socket = server.try_clone().unwrap();
            write(&mut server, Some(&socket), pieces).unwrap();
            drop((server, socket));
            let mut sent = Vec::new();
            client.read_to_end(&mut sent).unwrap();
            assert_eq!(sent, expected, "v{version}, sendfile");
        }
    }

    #[test]
    fn a_truncation_meeting_records_in_flight_closes_before_the_last_byte() {
        let f = Fixture::new();
        let (placeholders, regions) = response(&f, false);
        let expected = whole(&response(&f, true).0, 17, 1);
        let pieces = frame(42, 1, &placeholders, 17, regions.clone()).unwrap();
        // The log is truncated after the regions were taken, before they are sent.
        f.truncations.begin();
        let (mut server, mut client) = pair();
        let socket = server.try_clone().unwrap();
        let error = write(&mut server, Some(&socket), pieces).unwrap_err();
        assert!(
            error.to_string().contains("met records in flight"),
            "{error}"
        );
        drop((server, socket));
        let mut sent = Vec::new();
        client.read_to_end(&mut sent).unwrap();
        assert_eq!(
            sent.len(),
            expected.len() - 1,
            "the client never has the whole frame"
        );
        let mut tls = Vec::new();
        let pieces = frame(42, 1, &placeholders, 17, regions).unwrap();
        assert!(write(&mut tls, None, pieces).is_err());
        assert!(tls.is_empty(), "read into memory: nothing written");
    }
}
