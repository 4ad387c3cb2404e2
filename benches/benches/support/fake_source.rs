//! A fake Kafka source cluster for the node benchmarks: `n` brokers on loopback answering
//! ApiVersions, Metadata, Fetch and ListOffsets from in-memory partitions, as the harness's
//! test-only `wire::fake_broker` does, but serving Fetch as a Kafka broker does for
//! throughput: each partition's records are a slice of one buffer, never copied in user space:
//! the response's other fields are encoded into a send buffer reused per connection, and the
//! records are sent from where they are, gathered with the fields in one `writev` per 1,024
//! pieces (as a Kafka broker sends its records zero-copy, with `sendfile`, instead of encoding
//! them into its send buffer); at most `partition_max_bytes` per partition and `max_bytes` per
//! response in whole batches (at least one batch for the first partition with data). At start,
//! every Fetch version the fake lays out itself is checked byte for byte against
//! `kafka_protocol`'s encoding.
//!
//! Every source partition starts empty ([`FakeSource::set_filled`] `false`) so that a
//! destination can be brought to MIRRORING untimed, then gets its data at once (`true`), or
//! its first batches only ([`FakeSource::set_visible_batches`]) for a destination that already
//! mirrors some of it.

use std::io::{IoSlice, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, BrokerId, FetchRequest, FetchResponse,
    ListOffsetsRequest, ListOffsetsResponse, MetadataRequest, MetadataResponse, RequestHeader,
    ResponseHeader, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, Message, StrBytes};
use kmirror_harness::record_batch::RawBatch;
use kmirror_kernel::types::TopicId;
use uuid::Uuid;

/// One source partition: its batches back to back in one buffer.
#[derive(Clone, Debug)]
pub struct FakePartition {
    /// The leader's broker id.
    pub leader: i32,
    /// The batches' bytes, back to back from offset 0.
    pub bytes: Bytes,
    /// Per batch: its last offset and the byte position where it ends.
    pub batches: Vec<(i64, usize)>,
}

impl FakePartition {
    /// The first `visible` batches (all of them when there are fewer).
    fn visible(&self, visible: usize) -> &[(i64, usize)] {
        &self.batches[..visible.min(self.batches.len())]
    }

    fn log_end(&self, visible: usize) -> i64 {
        self.visible(visible).last().map_or(0, |(last, _)| last + 1)
    }
}

/// `batches` laid back to back from offset 0, as a [`FakePartition`] holds them: the bytes and,
/// per batch, its last offset and the byte position where it ends.
pub fn back_to_back(batches: &[RawBatch]) -> (Vec<u8>, Vec<(i64, usize)>) {
    let mut bytes = Vec::new();
    let mut ends = Vec::new();
    for batch in batches {
        bytes.extend_from_slice(batch.bytes());
        ends.push((batch.header().last_offset, bytes.len()));
    }
    (bytes, ends)
}

/// `topics` topics of `per_topic` partitions, topic `t` named and numbered by `topic(t)`, each
/// partition holding the batches that end as `ends` says in the buffer `bytes` gives it (a
/// handle on one buffer, or a copy of its own), leaders spread over brokers 1 to `brokers`.
pub fn uniform_topics(
    topics: u64,
    per_topic: i32,
    brokers: i32,
    topic: impl Fn(u64) -> (String, TopicId),
    ends: &[(i64, usize)],
    bytes: impl Fn() -> Bytes,
) -> Vec<FakeTopic> {
    (0..topics)
        .map(|t| {
            let (name, id) = topic(t);
            FakeTopic {
                name,
                id,
                partitions: (0..per_topic)
                    .map(|p| FakePartition {
                        leader: 1 + (t as i32 * per_topic + p) % brokers,
                        bytes: bytes(),
                        batches: ends.to_vec(),
                    })
                    .collect(),
            }
        })
        .collect()
}

/// One source topic.
#[derive(Clone, Debug)]
pub struct FakeTopic {
    /// The name.
    pub name: String,
    /// The id.
    pub id: TopicId,
    /// The partitions, by index.
    pub partitions: Vec<FakePartition>,
}

struct State {
    brokers: Vec<(i32, String)>,
    topics: Vec<FakeTopic>,
    /// How many batches of each partition the brokers serve.
    visible: AtomicUsize,
}

/// The fake cluster (brokers 1..=n, cluster id `fake-source`).
#[derive(Clone)]
pub struct FakeSource {
    state: Arc<State>,
}

impl FakeSource {
    /// Starts `n` brokers on loopback serving `topics`, empty until [`FakeSource::set_filled`].
    pub fn start(n: i32, topics: Vec<FakeTopic>) -> FakeSource {
        FakeSource::start_advertising(n, topics, |_, address| address.to_string())
    }

    /// As [`FakeSource::start`], each broker advertising (in Metadata, and as the bootstrap)
    /// the address `advertise` gives for its id and listening address: a proxy in front of it,
    /// so that clients following the metadata stay behind the proxy.
    pub fn start_advertising(
        n: i32,
        topics: Vec<FakeTopic>,
        mut advertise: impl FnMut(i32, SocketAddr) -> String,
    ) -> FakeSource {
        let listeners: Vec<(i32, TcpListener)> = (1..=n)
            .map(|id| (id, TcpListener::bind("127.0.0.1:0").expect("bind")))
            .collect();
        let brokers = listeners
            .iter()
            .map(|(id, l)| (*id, advertise(*id, l.local_addr().expect("address"))))
            .collect();
        let state = Arc::new(State {
            brokers,
            topics,
            visible: AtomicUsize::new(0),
        });
        check_gathered_encoding(&state);
        for (id, listener) in listeners {
            let state = Arc::clone(&state);
            std::thread::spawn(move || {
                for stream in listener.incoming() {
                    let Ok(stream) = stream else { return };
                    let state = Arc::clone(&state);
                    std::thread::spawn(move || serve(id, stream, &state));
                }
            });
        }
        FakeSource { state }
    }

    /// Broker 1's address (the bootstrap).
    pub fn bootstrap(&self) -> String {
        self.state.brokers[0].1.clone()
    }

    /// Whether the partitions hold their batches (`true`) or are empty.
    pub fn set_filled(&self, filled: bool) {
        self.set_visible_batches(if filled { usize::MAX } else { 0 });
    }

    /// Makes each partition hold its first `n` batches only.
    pub fn set_visible_batches(&self, n: usize) {
        self.state.visible.store(n, Ordering::SeqCst);
    }
}

fn serve(id: i32, mut stream: TcpStream, state: &State) {
    let _ = stream.set_nodelay(true);
    // Reused between responses, as a broker reuses its send buffers: no fresh allocation (and
    // its page faults) per response.
    let mut body = BytesMut::new();
    let mut holes = Vec::new();
    loop {
        let mut size = [0u8; 4];
        if stream.read_exact(&mut size).is_err() {
            return;
        }
        let mut frame = vec![0u8; i32::from_be_bytes(size).max(0) as usize];
        if stream.read_exact(&mut frame).is_err() {
            return;
        }
        let mut buf = Bytes::from(frame);
        let (key, version) = {
            let mut peek = buf.clone();
            (peek.get_i16(), peek.get_i16())
        };
        let Ok(api) = ApiKey::try_from(key) else {
            return;
        };
        let header =
            RequestHeader::decode(&mut buf, api.request_header_version(version)).expect("header");
        body.clear();
        holes.clear();
        body.put_i32(0); // the frame size, set below
        ResponseHeader::default()
            .with_correlation_id(header.correlation_id)
            .encode(&mut body, api.response_header_version(version))
            .expect("encode header");
        let visible = state.visible.load(Ordering::SeqCst);
        match api {
            ApiKey::ApiVersions => {
                ApiVersionsRequest::decode(&mut buf, version).expect("request");
                api_versions().encode(&mut body, version).expect("encode");
            }
            ApiKey::Metadata => {
                MetadataRequest::decode(&mut buf, version).expect("request");
                metadata(state).encode(&mut body, version).expect("encode");
            }
            ApiKey::Fetch => {
                let request = FetchRequest::decode(&mut buf, version).expect("request");
                let response = fetch(id, state, visible, &request);
                if version < GATHERED_MIN_VERSION {
                    // Sized once, as a broker sizes its send: no regrowing copy of the records.
                    body.reserve(response.compute_size(version).expect("size"));
                    response.encode(&mut body, version).expect("encode");
                } else {
                    encode_gathered(&response, version, &mut body, &mut holes);
                }
            }
            ApiKey::ListOffsets => {
                let request = ListOffsetsRequest::decode(&mut buf, version).expect("request");
                list_offsets(id, state, visible, &request)
                    .encode(&mut body, version)
                    .expect("encode");
            }
            _ => return,
        }
        let records: usize = holes.iter().map(|h: &Hole| h.records.len()).sum();
        let size = (body.len() + records - 4) as i32;
        body[..4].copy_from_slice(&size.to_be_bytes());
        if send_gathered(&mut stream, &body, &holes).is_err() {
            return;
        }
    }
}

/// The first Fetch version whose responses [`encode_gathered`] lays out: v13, the first
/// addressing topics by id (all flexible versions from v12 end a partition with its records).
const GATHERED_MIN_VERSION: i16 = 13;

/// A partition's records left out of an encoded response: they belong at byte `at` of the
/// encoded fields.
struct Hole {
    at: usize,
    records: Bytes,
}

/// Encodes `response` (Fetch v13 or later) into `out` without its records, pushing one
/// [`Hole`] per partition with records, in order. The layout is Fetch's flexible one: the
/// response's fields, a compact array of topics (id, compact array of partitions, no tagged
/// fields), no tagged fields; a partition is its fields as `kafka_protocol` encodes them with
/// the records last, so its records are a length (unsigned varint, length + 1) and the bytes,
/// then its tagged fields. [`check_gathered_encoding`] checks the result against
/// `kafka_protocol`'s own.
fn encode_gathered(
    response: &FetchResponse,
    version: i16,
    out: &mut BytesMut,
    holes: &mut Vec<Hole>,
) {
    assert!(response.node_endpoints.is_empty() && response.unknown_tagged_fields.is_empty());
    out.put_i32(response.throttle_time_ms);
    out.put_i16(response.error_code);
    out.put_i32(response.session_id);
    put_uvarint(out, response.responses.len() + 1);
    for topic in &response.responses {
        assert!(topic.unknown_tagged_fields.is_empty());
        out.put_slice(topic.topic_id.as_bytes());
        put_uvarint(out, topic.partitions.len() + 1);
        for partition in &topic.partitions {
            // The partition without its records: ends with a null record set (0) and no
            // tagged fields (0); the records and the tagged fields are put back after it.
            let start = out.len();
            partition
                .clone()
                .with_records(None)
                .encode(out, version)
                .expect("encode a partition");
            assert_eq!(&out[start..][out.len() - start - 2..], [0, 0]);
            out.truncate(out.len() - 2);
            match &partition.records {
                None => out.put_u8(0),
                Some(records) => {
                    put_uvarint(out, records.len() + 1);
                    if !records.is_empty() {
                        holes.push(Hole {
                            at: out.len(),
                            records: records.clone(),
                        });
                    }
                }
            }
            out.put_u8(0);
        }
        out.put_u8(0);
    }
    out.put_u8(0);
}

/// Kafka's unsigned varint.
fn put_uvarint(out: &mut BytesMut, mut n: usize) {
    while n >= 0x80 {
        out.put_u8((n as u8 & 0x7f) | 0x80);
        n >>= 7;
    }
    out.put_u8(n as u8);
}

/// The most pieces one `writev` takes (Linux's `IOV_MAX`).
const MAX_PIECES: usize = 1024;

/// Sends `head` with each hole's records put in at its place, gathered: one `writev` per
/// [`MAX_PIECES`] pieces, nothing copied in user space.
fn send_gathered(stream: &mut TcpStream, head: &[u8], holes: &[Hole]) -> std::io::Result<()> {
    let mut pieces = Vec::with_capacity(2 * holes.len() + 1);
    let mut from = 0;
    for hole in holes {
        pieces.push(IoSlice::new(&head[from..hole.at]));
        pieces.push(IoSlice::new(&hole.records));
        from = hole.at;
    }
    pieces.push(IoSlice::new(&head[from..]));
    pieces.retain(|p| !p.is_empty());
    let mut pieces = &mut pieces[..];
    while !pieces.is_empty() {
        let n = pieces.len().min(MAX_PIECES);
        match stream.write_vectored(&pieces[..n]) {
            Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
            Ok(sent) => IoSlice::advance_slices(&mut pieces, sent),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Checks, for every Fetch version the fake source lays out itself, that a response with
/// every partition's first batch encodes to the same bytes gathered as `kafka_protocol`
/// encodes it: the benchmark's client would reject a malformed response, but this names the
/// cause.
fn check_gathered_encoding(state: &State) {
    let request = FetchRequest::default()
        .with_max_bytes(i32::MAX)
        .with_topics(
            state
                .topics
                .iter()
                .map(|t| {
                    FetchTopic::default()
                        .with_topic_id(Uuid::from_bytes(t.id.0))
                        .with_partitions(
                            (0..t.partitions.len() as i32)
                                .map(|p| {
                                    FetchPartition::default()
                                        .with_partition(p)
                                        .with_partition_max_bytes(16 << 10)
                                })
                                .collect(),
                        )
                })
                .collect(),
        );
    for &(id, _) in &state.brokers {
        let response = fetch(id, state, usize::MAX, &request);
        for version in GATHERED_MIN_VERSION..=FetchResponse::VERSIONS.max {
            let mut expected = BytesMut::new();
            response.encode(&mut expected, version).expect("encode");
            let (mut head, mut holes) = (BytesMut::new(), Vec::new());
            encode_gathered(&response, version, &mut head, &mut holes);
            let mut gathered = Vec::new();
            let mut from = 0;
            for hole in &holes {
                gathered.extend_from_slice(&head[from..hole.at]);
                gathered.extend_from_slice(&hole.records);
                from = hole.at;
            }
            gathered.extend_from_slice(&head[from..]);
            assert!(
                gathered == expected[..],
                "the fake source's gathered Fetch v{version} response differs from \
                 kafka_protocol's encoding"
            );
        }
    }
}

fn api_versions() -> ApiVersionsResponse {
    let range = |key: ApiKey, r: kafka_protocol::protocol::VersionRange| {
        ApiVersion::default()
            .with_api_key(key as i16)
            .with_min_version(r.min)
            .with_max_version(r.max)
    };
    ApiVersionsResponse::default().with_api_keys(vec![
        range(ApiKey::ApiVersions, ApiVersionsRequest::VERSIONS),
        range(ApiKey::Metadata, MetadataRequest::VERSIONS),
        range(ApiKey::Fetch, FetchRequest::VERSIONS),
        range(ApiKey::ListOffsets, ListOffsetsRequest::VERSIONS),
    ])
}

fn metadata(state: &State) -> MetadataResponse {
    let topics = state
        .topics
        .iter()
        .map(|t| {
            MetadataResponseTopic::default()
                .with_name(Some(TopicName(StrBytes::from_string(t.name.clone()))))
                .with_topic_id(Uuid::from_bytes(t.id.0))
                .with_partitions(
                    t.partitions
                        .iter()
                        .enumerate()
                        .map(|(i, p)| {
                            MetadataResponsePartition::default()
                                .with_partition_index(i as i32)
                                .with_leader_id(BrokerId(p.leader))
                                .with_leader_epoch(0)
                        })
                        .collect(),
                )
        })
        .collect();
    MetadataResponse::default()
        .with_cluster_id(Some(StrBytes::from_static_str("fake-source")))
        .with_brokers(
            state
                .brokers
                .iter()
                .map(|(id, address)| {
                    let (host, port) = address.rsplit_once(':').expect("host:port");
                    MetadataResponseBroker::default()
                        .with_node_id(BrokerId(*id))
                        .with_host(StrBytes::from_string(host.to_owned()))
                        .with_port(port.parse().expect("port"))
                })
                .collect(),
        )
        .with_topics(topics)
}

fn fetch(id: i32, state: &State, visible: usize, request: &FetchRequest) -> FetchResponse {
    let mut budget = usize::try_from(request.max_bytes.max(0)).unwrap_or(usize::MAX);
    let mut any = false;
    let responses = request
        .topics
        .iter()
        .map(|t| {
            let topic = state
                .topics
                .iter()
                .find(|x| Uuid::from_bytes(x.id.0) == t.topic_id);
            let partitions = t
                .partitions
                .iter()
                .map(|asked| {
                    let data = PartitionData::default()
                        .with_partition_index(asked.partition)
                        .with_high_watermark(-1)
                        .with_last_stable_offset(-1)
                        .with_log_start_offset(-1);
                    let Some(p) = topic.and_then(|t| t.partitions.get(asked.partition as usize))
                    else {
                        return data.with_error_code(3);
                    };
                    if p.leader != id {
                        return data.with_error_code(6);
                    }
                    let leo = p.log_end(visible);
                    if asked.fetch_offset < 0 || asked.fetch_offset > leo {
                        return data.with_error_code(1);
                    }
                    let data = data
                        .with_high_watermark(leo)
                        .with_last_stable_offset(leo)
                        .with_log_start_offset(0);
                    // Whole batches from the one holding fetch_offset, within both limits.
                    let batches = p.visible(visible);
                    let first = batches.partition_point(|(last, _)| *last < asked.fetch_offset);
                    let start = if first == 0 { 0 } else { batches[first - 1].1 };
                    let limit = usize::try_from(asked.partition_max_bytes.max(0))
                        .unwrap_or(usize::MAX)
                        .min(budget);
                    let mut end = start;
                    for &(_, batch_end) in &batches[first..] {
                        if batch_end - start > limit && (end > start || any) {
                            break;
                        }
                        end = batch_end;
                    }
                    if end > start {
                        any = true;
                        budget = budget.saturating_sub(end - start);
                    }
                    data.with_records(Some(p.bytes.slice(start..end)))
                })
                .collect();
            FetchableTopicResponse::default()
                .with_topic_id(t.topic_id)
                .with_partitions(partitions)
        })
        .collect();
    FetchResponse::default().with_responses(responses)
}

fn list_offsets(
    id: i32,
    state: &State,
    visible: usize,
    request: &ListOffsetsRequest,
) -> ListOffsetsResponse {
    let topics = request
        .topics
        .iter()
        .map(|t| {
            let topic = state.topics.iter().find(|x| x.name == *t.name.0);
            ListOffsetsTopicResponse::default()
                .with_name(t.name.clone())
                .with_partitions(
                    t.partitions
                        .iter()
                        .map(|asked| {
                            let answer = ListOffsetsPartitionResponse::default()
                                .with_partition_index(asked.partition_index)
                                .with_leader_epoch(-1);
                            match topic
                                .and_then(|t| t.partitions.get(asked.partition_index as usize))
                            {
                                None => answer.with_error_code(3),
                                Some(p) if p.leader != id => answer.with_error_code(6),
                                Some(p) => answer.with_offset(if asked.timestamp == -2 {
                                    0
                                } else {
                                    p.log_end(visible)
                                }),
                            }
                        })
                        .collect(),
                )
        })
        .collect();
    ListOffsetsResponse::default().with_topics(topics)
}
