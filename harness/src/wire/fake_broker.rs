//! A fake multi-broker Kafka cluster for tests (the wire layer's own, and other crates' with the
//! harness feature `testkit`): each broker a loopback
//! listener answering ApiVersions, Metadata, Fetch and ListOffsets from one shared, mutable
//! [`FakeState`] (leaders, epochs, batches, injected errors, brokers taken down). Every
//! request is recorded.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex, MutexGuard};

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::fetch_response::{
    EpochEndOffset, FetchableTopicResponse, PartitionData,
};
use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, BrokerId, FetchRequest, FetchResponse,
    ListOffsetsRequest, ListOffsetsResponse, MetadataRequest, MetadataResponse, RequestHeader,
    ResponseHeader, SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest,
    SaslHandshakeResponse, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, Message, StrBytes};
use kmirror_kernel::batch::BatchHeader;
use kmirror_kernel::types::TopicId;
use uuid::Uuid;

use crate::record_batch::RawBatch;

/// One partition of a fake topic.
#[derive(Clone, Debug)]
pub struct FakePartition {
    /// The leader's broker id (-1: none).
    pub leader: i32,
    /// The leader epoch.
    pub epoch: i32,
    /// The log start offset.
    pub log_start: i64,
    /// The batches, back to back from `log_start`.
    pub batches: Vec<RawBatch>,
    /// An error code the leader answers Fetch with, if set.
    pub fetch_error: Option<i16>,
    /// A diverging epoch the leader answers a Fetch carrying a last fetched epoch with.
    pub diverging: Option<(i32, i64)>,
}

impl FakePartition {
    /// A partition led by `leader` at `epoch` with `batches` plain batches of 2 records each.
    pub fn with_batches(leader: i32, epoch: i32, batches: i64) -> FakePartition {
        FakePartition {
            leader,
            epoch,
            log_start: 0,
            batches: (0..batches)
                .map(|b| {
                    RawBatch::synthesize(&BatchHeader::plain(2 * b, 2 * b + 1, epoch), 1_000)
                        .expect("batch")
                })
                .collect(),
            fetch_error: None,
            diverging: None,
        }
    }

    /// Kafka's `endOffsetForEpoch`: the largest epoch of the batches at or below `wanted`, and
    /// the offset where it ends (the next epoch's first offset, or the log end); `(-1, -1)`
    /// when every batch has a larger epoch.
    pub fn end_offset_for_epoch(&self, wanted: i32) -> (i32, i64) {
        let Some(epoch) = self
            .batches
            .iter()
            .map(|b| b.header().partition_leader_epoch)
            .filter(|e| *e <= wanted)
            .max()
        else {
            return (-1, -1);
        };
        let end = self
            .batches
            .iter()
            .find(|b| b.header().partition_leader_epoch > epoch)
            .map_or(self.log_end(), |b| b.header().base_offset);
        (epoch, end)
    }

    fn log_end(&self) -> i64 {
        self.batches
            .last()
            .map_or(self.log_start, |b| b.header().last_offset + 1)
    }
}

/// A fake topic.
#[derive(Clone, Debug)]
pub struct FakeTopic {
    /// The name.
    pub name: String,
    /// The id.
    pub id: TopicId,
    /// The partitions, by index.
    pub partitions: Vec<FakePartition>,
}

/// The fake cluster's state, shared by its brokers.
#[derive(Debug, Default)]
pub struct FakeState {
    /// The brokers: id and address.
    pub brokers: Vec<(i32, String)>,
    /// The topics.
    pub topics: Vec<FakeTopic>,
    /// Brokers that close every connection at once.
    pub down: HashSet<i32>,
    /// Every request: (broker id, API key, partitions in it).
    pub requests: Vec<(i32, i16, usize)>,
    /// Whether the brokers open fetch sessions (KIP-227) when a Fetch asks for one.
    pub fetch_sessions: bool,
    /// The open fetch sessions, by id.
    pub sessions: HashMap<i32, FakeSession>,
    /// Whether the leaders apply KIP-320's check to a Fetch carrying a last fetched epoch, from
    /// their batches' epochs as Kafka does: the largest epoch at or below the one asked and
    /// where it ends; diverging when that epoch is smaller or ends below the fetch offset (off:
    /// only [`FakePartition::diverging`] is answered).
    pub kip320: bool,
    /// Whether a Fetch with nothing new waits up to its `max_wait_ms` (at most 500 ms) before
    /// it is answered, as Kafka's long poll does (off: answered at once).
    pub long_poll: bool,
    /// The Fetches held for their `max_wait_ms` because they had nothing new (with
    /// `long_poll`).
    pub long_polls: usize,
    /// The one SASL PLAIN user `(name, password)` the brokers accept (SASL_PLAINTEXT, only
    /// the `PLAIN` mechanism enabled).
    pub plain_user: Option<(String, String)>,
    next_session: i32,
}

/// A fetch session a fake broker holds.
#[derive(Clone, Debug, Default)]
pub struct FakeSession {
    /// The broker holding it.
    pub broker: i32,
    /// The epoch the next request must carry.
    pub epoch: i32,
    /// Each partition's parameters as last sent, and the (HW, LSO, log start) last answered.
    pub partitions: BTreeMap<(Uuid, i32), (FetchPartition, Offsets)>,
}

/// A partition's (high watermark, last stable offset, log start offset).
pub type Offsets = (i64, i64, i64);

impl FakeState {
    /// The requests of `api` sent to broker `id`.
    pub fn count(&self, id: i32, api: ApiKey) -> usize {
        self.requests
            .iter()
            .filter(|(b, k, _)| *b == id && *k == api as i16)
            .count()
    }
}

/// A fake cluster of brokers 1..=n.
#[derive(Clone, Debug)]
pub struct FakeCluster {
    state: Arc<Mutex<FakeState>>,
}

impl FakeCluster {
    /// Starts `n` brokers (ids 1..=n) on loopback with `topics`.
    pub fn start(n: i32, topics: Vec<FakeTopic>) -> FakeCluster {
        let state = Arc::new(Mutex::new(FakeState {
            topics,
            ..FakeState::default()
        }));
        for id in 1..=n {
            let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
            let address = listener.local_addr().expect("address").to_string();
            lock(&state).brokers.push((id, address));
            let state = Arc::clone(&state);
            std::thread::spawn(move || {
                for stream in listener.incoming() {
                    let Ok(stream) = stream else { return };
                    let state = Arc::clone(&state);
                    std::thread::spawn(move || serve(id, stream, &state));
                }
            });
        }
        FakeCluster { state }
    }

    /// The state, to read or change.
    pub fn state(&self) -> MutexGuard<'_, FakeState> {
        lock(&self.state)
    }

    /// Broker `id`'s address.
    pub fn address(&self, id: i32) -> String {
        self.state()
            .brokers
            .iter()
            .find(|(b, _)| *b == id)
            .map(|(_, a)| a.clone())
            .expect("broker")
    }
}

fn lock(state: &Mutex<FakeState>) -> MutexGuard<'_, FakeState> {
    state.lock().unwrap_or_else(|p| p.into_inner())
}

fn serve(id: i32, mut stream: TcpStream, state_mutex: &Mutex<FakeState>) {
    let state = state_mutex;
    loop {
        let mut size = [0u8; 4];
        if stream.read_exact(&mut size).is_err() {
            return;
        }
        let mut frame = vec![0u8; i32::from_be_bytes(size).max(0) as usize];
        if stream.read_exact(&mut frame).is_err() {
            return;
        }
        if lock(state).down.contains(&id) {
            let _ = stream.shutdown(std::net::Shutdown::Both);
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
        let mut body = BytesMut::new();
        ResponseHeader::default()
            .with_correlation_id(header.correlation_id)
            .encode(&mut body, api.response_header_version(version))
            .expect("encode header");
        let mut state = lock(state);
        match api {
            ApiKey::ApiVersions => {
                ApiVersionsRequest::decode(&mut buf, version).expect("request");
                state.requests.push((id, key, 0));
                api_versions().encode(&mut body, version).expect("encode");
            }
            ApiKey::Metadata => {
                let request = MetadataRequest::decode(&mut buf, version).expect("request");
                state.requests.push((id, key, 0));
                metadata(&state, &request)
                    .encode(&mut body, version)
                    .expect("encode");
            }
            ApiKey::Fetch => {
                let request = FetchRequest::decode(&mut buf, version).expect("request");
                let n = request.topics.iter().map(|t| t.partitions.len()).sum();
                state.requests.push((id, key, n));
                if state.long_poll
                    && request.max_wait_ms > 0
                    && !has_news(&fetch(id, &state, &request))
                {
                    // Kafka holds an empty fetch up to max_wait_ms: so does a long-polling fake
                    // (capped at half a second), then answers what it has then.
                    state.long_polls += 1;
                    drop(state);
                    let wait = u64::try_from(request.max_wait_ms.min(500)).unwrap_or(0);
                    std::thread::sleep(std::time::Duration::from_millis(wait));
                    state = lock(state_mutex);
                }
                fetch_in_session(id, &mut state, &request)
                    .encode(&mut body, version)
                    .expect("encode");
            }
            ApiKey::ListOffsets => {
                let request = ListOffsetsRequest::decode(&mut buf, version).expect("request");
                let n = request.topics.iter().map(|t| t.partitions.len()).sum();
                state.requests.push((id, key, n));
                list_offsets(id, &state, &request)
                    .encode(&mut body, version)
                    .expect("encode");
            }
            ApiKey::SaslHandshake => {
                let request = SaslHandshakeRequest::decode(&mut buf, version).expect("request");
                state.requests.push((id, key, 0));
                let code = if &*request.mechanism == "PLAIN" {
                    0
                } else {
                    33
                };
                SaslHandshakeResponse::default()
                    .with_error_code(code)
                    .with_mechanisms(vec![StrBytes::from_static_str("PLAIN")])
                    .encode(&mut body, version)
                    .expect("encode");
            }
            ApiKey::SaslAuthenticate => {
                let request = SaslAuthenticateRequest::decode(&mut buf, version).expect("request");
                state.requests.push((id, key, 0));
                let token: Vec<&[u8]> = request.auth_bytes.split(|b| *b == 0).collect();
                let accepted = state.plain_user.as_ref().is_some_and(|(user, password)| {
                    token.len() == 3
                        && token[1] == user.as_bytes()
                        && token[2] == password.as_bytes()
                });
                let response = if accepted {
                    SaslAuthenticateResponse::default()
                } else {
                    SaslAuthenticateResponse::default()
                        .with_error_code(58)
                        .with_error_message(Some(StrBytes::from_static_str(
                            "Authentication failed: Invalid username or password",
                        )))
                };
                response.encode(&mut body, version).expect("encode");
            }
            _ => return,
        }
        drop(state);
        let mut out = BytesMut::new();
        out.put_i32(body.len() as i32);
        out.put_slice(&body);
        if stream.write_all(&out).is_err() {
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
        range(ApiKey::SaslHandshake, SaslHandshakeRequest::VERSIONS),
        range(ApiKey::SaslAuthenticate, SaslAuthenticateRequest::VERSIONS),
    ])
}

fn metadata(state: &FakeState, request: &MetadataRequest) -> MetadataResponse {
    let topic_entry = |t: &FakeTopic| {
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
                            .with_leader_epoch(p.epoch)
                    })
                    .collect(),
            )
    };
    let topics = match &request.topics {
        None => state.topics.iter().map(topic_entry).collect(),
        Some(asked) => asked
            .iter()
            .map(|a| {
                let name = a.name.as_ref().map(|n| n.0.to_string()).unwrap_or_default();
                match state.topics.iter().find(|t| t.name == name) {
                    Some(t) => topic_entry(t),
                    None => MetadataResponseTopic::default()
                        .with_name(Some(TopicName(StrBytes::from_string(name))))
                        .with_error_code(3),
                }
            })
            .collect(),
    };
    MetadataResponse::default()
        .with_cluster_id(Some(StrBytes::from_static_str("fake-cluster")))
        .with_brokers(
            state
                .brokers
                .iter()
                .filter(|(id, _)| !state.down.contains(id))
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

fn fetch(id: i32, state: &FakeState, request: &FetchRequest) -> FetchResponse {
    let responses = request
        .topics
        .iter()
        .map(|t| {
            let topic = state
                .topics
                .iter()
                .find(|x| Uuid::from_bytes(x.id.0) == t.topic_id);
            FetchableTopicResponse::default()
                .with_topic_id(t.topic_id)
                .with_partitions(
                    t.partitions
                        .iter()
                        .map(|asked| {
                            let data = PartitionData::default()
                                .with_partition_index(asked.partition)
                                .with_high_watermark(-1)
                                .with_last_stable_offset(-1)
                                .with_log_start_offset(-1)
                                .with_diverging_epoch(
                                    EpochEndOffset::default().with_epoch(-1).with_end_offset(-1),
                                );
                            let Some(topic) = topic else {
                                return data.with_error_code(100);
                            };
                            let Some(p) = topic.partitions.get(asked.partition as usize) else {
                                return data.with_error_code(3);
                            };
                            if p.leader != id {
                                return data.with_error_code(6);
                            }
                            if let Some(code) = p.fetch_error {
                                return data.with_error_code(code);
                            }
                            let current = asked.current_leader_epoch;
                            if current >= 0 && current < p.epoch {
                                return data.with_error_code(74);
                            }
                            if current > p.epoch {
                                return data.with_error_code(75);
                            }
                            let leo = p.log_end();
                            if asked.fetch_offset < p.log_start || asked.fetch_offset > leo {
                                return data.with_error_code(1);
                            }
                            let data = data
                                .with_high_watermark(leo)
                                .with_last_stable_offset(leo)
                                .with_log_start_offset(p.log_start);
                            if let (Some((epoch, end)), true) =
                                (p.diverging, asked.last_fetched_epoch >= 0)
                            {
                                return data.with_diverging_epoch(
                                    EpochEndOffset::default()
                                        .with_epoch(epoch)
                                        .with_end_offset(end),
                                );
                            }
                            if state.kip320 && asked.last_fetched_epoch >= 0 {
                                let (epoch, end) = p.end_offset_for_epoch(asked.last_fetched_epoch);
                                if epoch < asked.last_fetched_epoch || end < asked.fetch_offset {
                                    return data.with_diverging_epoch(
                                        EpochEndOffset::default()
                                            .with_epoch(epoch)
                                            .with_end_offset(end),
                                    );
                                }
                            }
                            let mut records = Vec::new();
                            for b in &p.batches {
                                if b.header().last_offset >= asked.fetch_offset {
                                    records.extend_from_slice(b.bytes());
                                }
                            }
                            data.with_records(Some(Bytes::from(records)))
                        })
                        .collect(),
                )
        })
        .collect();
    FetchResponse::default().with_responses(responses)
}

/// Whether a fetch answer carries anything: records, an error or a diverging epoch.
fn has_news(response: &FetchResponse) -> bool {
    response.responses.iter().any(|t| {
        t.partitions.iter().any(|d| {
            d.error_code != 0
                || d.diverging_epoch.epoch != -1
                || d.records.as_ref().is_some_and(|r| !r.is_empty())
        })
    })
}

/// A Fetch in a session when the state allows sessions and the request asks for one: a full
/// request opens one; an incremental one updates it (`FETCH_SESSION_ID_NOT_FOUND`,
/// `INVALID_FETCH_SESSION_EPOCH` when it does not match) and is answered for every partition of
/// the session, keeping only those with records, an error or moved offsets.
fn fetch_in_session(id: i32, state: &mut FakeState, request: &FetchRequest) -> FetchResponse {
    if !state.fetch_sessions || request.session_epoch == -1 {
        return fetch(id, state, request);
    }
    let offsets = |d: &PartitionData| (d.high_watermark, d.last_stable_offset, d.log_start_offset);
    if request.session_id == 0 {
        let response = fetch(id, state, request);
        state.next_session += 1;
        let session_id = state.next_session;
        let mut session = FakeSession {
            broker: id,
            epoch: 1,
            partitions: BTreeMap::new(),
        };
        for (t, answered) in request.topics.iter().zip(&response.responses) {
            for (p, d) in t.partitions.iter().zip(&answered.partitions) {
                session
                    .partitions
                    .insert((t.topic_id, p.partition), (p.clone(), offsets(d)));
            }
        }
        state.sessions.insert(session_id, session);
        return response.with_session_id(session_id);
    }
    let Some(mut session) = state
        .sessions
        .remove(&request.session_id)
        .filter(|s| s.broker == id)
    else {
        return FetchResponse::default().with_error_code(70);
    };
    if request.session_epoch != session.epoch {
        state.sessions.insert(request.session_id, session);
        return FetchResponse::default().with_error_code(71);
    }
    for t in &request.topics {
        for p in &t.partitions {
            let old = session.partitions.get(&(t.topic_id, p.partition));
            let last = old.map_or((-1, -1, -1), |(_, last)| *last);
            session
                .partitions
                .insert((t.topic_id, p.partition), (p.clone(), last));
        }
    }
    for f in &request.forgotten_topics_data {
        for p in &f.partitions {
            session.partitions.remove(&(f.topic_id, *p));
        }
    }
    let mut full: Vec<FetchTopic> = Vec::new();
    for ((topic_id, _), (p, _)) in &session.partitions {
        match full.last_mut() {
            Some(t) if t.topic_id == *topic_id => t.partitions.push(p.clone()),
            _ => full.push(
                FetchTopic::default()
                    .with_topic_id(*topic_id)
                    .with_partitions(vec![p.clone()]),
            ),
        }
    }
    let answer = fetch(id, state, &FetchRequest::default().with_topics(full));
    let mut responses = Vec::new();
    for mut t in answer.responses {
        let mut kept = Vec::new();
        for d in std::mem::take(&mut t.partitions) {
            let entry = session
                .partitions
                .get_mut(&(t.topic_id, d.partition_index))
                .expect("asked");
            let news = d.error_code != 0
                || d.records.as_ref().is_some_and(|r| !r.is_empty())
                || d.diverging_epoch.epoch != -1
                || offsets(&d) != entry.1;
            entry.1 = offsets(&d);
            if news {
                kept.push(d);
            }
        }
        if !kept.is_empty() {
            responses.push(t.with_partitions(kept));
        }
    }
    session.epoch += 1;
    state.sessions.insert(request.session_id, session);
    FetchResponse::default()
        .with_session_id(request.session_id)
        .with_responses(responses)
}

fn list_offsets(id: i32, state: &FakeState, request: &ListOffsetsRequest) -> ListOffsetsResponse {
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
                                    p.log_start
                                } else {
                                    p.log_end()
                                }),
                            }
                        })
                        .collect(),
                )
        })
        .collect();
    ListOffsetsResponse::default().with_topics(topics)
}
