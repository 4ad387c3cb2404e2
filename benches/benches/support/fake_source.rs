//! A fake Kafka source cluster for the node benchmarks: `n` brokers on loopback answering
//! ApiVersions, Metadata, Fetch and ListOffsets from in-memory partitions, as the harness's
//! test-only `wire::fake_broker` does, but serving Fetch as a Kafka broker does for
//! throughput: each partition's records are a slice of one buffer (no copy before encoding;
//! the response is encoded once into a send buffer sized for it and reused per connection),
//! at most `partition_max_bytes` per partition and `max_bytes` per response in whole batches
//! (at least one batch for the first partition with data).
//!
//! Every source partition starts empty ([`FakeSource::set_filled`] `false`) so that a
//! destination can be brought to MIRRORING untimed, then gets its data at once (`true`), or
//! its first batches only ([`FakeSource::set_visible_batches`]) for a destination that already
//! mirrors some of it.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::api_versions_response::ApiVersion;
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
        let listeners: Vec<(i32, TcpListener)> = (1..=n)
            .map(|id| (id, TcpListener::bind("127.0.0.1:0").expect("bind")))
            .collect();
        let brokers = listeners
            .iter()
            .map(|(id, l)| (*id, l.local_addr().expect("address").to_string()))
            .collect();
        let state = Arc::new(State {
            brokers,
            topics,
            visible: AtomicUsize::new(0),
        });
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
                // Sized once, as a broker sizes its send: no regrowing copy of the records.
                body.reserve(response.compute_size(version).expect("size"));
                response.encode(&mut body, version).expect("encode");
            }
            ApiKey::ListOffsets => {
                let request = ListOffsetsRequest::decode(&mut buf, version).expect("request");
                list_offsets(id, state, visible, &request)
                    .encode(&mut body, version)
                    .expect("encode");
            }
            _ => return,
        }
        let size = (body.len() - 4) as i32;
        body[..4].copy_from_slice(&size.to_be_bytes());
        if stream.write_all(&body).is_err() {
            return;
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
