//! The five Kafka APIs a mirror fetcher uses, as a consumer (replica id -1), on one broker.
//!
//! [`KafkaClient`] connects lazily and reconnects after a connection error (the failed request
//! is reported, not retried: the caller decides). Each call checks the answer names what was
//! asked (the topic, the partition) and turns a Kafka error code into [`WireError::Broker`].

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic, ForgottenTopic};
use kafka_protocol::messages::fetch_response::PartitionData;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::offset_for_leader_epoch_request::{
    OffsetForLeaderPartition, OffsetForLeaderTopic,
};
use kafka_protocol::messages::{
    BrokerId, FetchRequest, FetchResponse, ListOffsetsRequest, MetadataRequest,
    OffsetForLeaderEpochRequest, TopicName,
};
use kafka_protocol::protocol::{Request, StrBytes};
use kmirror_kernel::types::{EpochAndOffset, TopicId};
use uuid::Uuid;

use super::authorization::{self, AclResource};
use super::fetch_session::{is_session_error, FetchSession, LastOffsets, SessionKey};
use super::security::SecurityConfig;
use super::{error_name, Connection, WireError};

/// ListOffsets' timestamp for the log start offset.
pub const EARLIEST_TIMESTAMP: i64 = -2;
/// ListOffsets' timestamp for the end of what the isolation level may read (HW or LSO).
pub const LATEST_TIMESTAMP: i64 = -1;
/// `isolation_level` READ_UNCOMMITTED.
pub const READ_UNCOMMITTED: i8 = 0;
/// `isolation_level` READ_COMMITTED.
pub const READ_COMMITTED: i8 = 1;
/// The replica id of a consumer.
pub const CONSUMER_REPLICA_ID: i32 = -1;

/// Metadata v10 is the first with topic ids.
const METADATA_MIN_VERSION: i16 = 10;
/// ListOffsets v2 is the first with an isolation level.
const LIST_OFFSETS_MIN_VERSION: i16 = 2;
/// Fetch v13 is the first addressing topics by id (and v12 the first with diverging epochs).
const FETCH_MIN_VERSION: i16 = 13;
/// OffsetForLeaderEpoch v3 is the first with a replica id (-1: a consumer).
const OFFSET_FOR_LEADER_EPOCH_MIN_VERSION: i16 = 3;

/// A topic as Metadata describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TopicMetadata {
    /// The cluster id (`None` from a broker that does not say).
    pub cluster_id: Option<String>,
    /// The topic's name.
    pub topic: String,
    /// The topic's id.
    pub topic_id: TopicId,
    /// Its partitions.
    pub partitions: Vec<PartitionMetadata>,
    /// The brokers: node id and `host:port`.
    pub brokers: Vec<(i32, String)>,
}

/// One partition as Metadata describes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PartitionMetadata {
    /// The partition index.
    pub index: i32,
    /// The leader's node id (-1: none).
    pub leader_id: i32,
    /// The leader epoch.
    pub leader_epoch: i32,
    /// The partition's error code (0: none).
    pub error_code: i16,
}

impl TopicMetadata {
    /// The `host:port` of partition `index`'s leader, if it has one the metadata knows.
    pub fn leader_address(&self, index: i32) -> Option<&str> {
        let leader = self.partitions.iter().find(|p| p.index == index)?.leader_id;
        self.brokers
            .iter()
            .find(|(id, _)| *id == leader)
            .map(|(_, a)| a.as_str())
    }
}

/// Every topic (or the topics asked for) as one Metadata answer describes them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MetadataSnapshot {
    /// The cluster id (`None` from a broker that does not say).
    pub cluster_id: Option<String>,
    /// The brokers: node id and `host:port`.
    pub brokers: Vec<(i32, String)>,
    /// The topics, in the broker's order.
    pub topics: Vec<TopicEntry>,
}

/// One topic of a [`MetadataSnapshot`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TopicEntry {
    /// The topic's name.
    pub name: String,
    /// The topic's id.
    pub topic_id: TopicId,
    /// Whether it is one of Kafka's internal topics (`__consumer_offsets`...).
    pub is_internal: bool,
    /// The topic's error code (0: none; `UNKNOWN_TOPIC_OR_PARTITION` for a topic asked for by
    /// name that does not exist).
    pub error_code: i16,
    /// Its partitions.
    pub partitions: Vec<PartitionMetadata>,
}

/// A partition's answer to ListOffsets: the offset and its leader epoch (`None` for -1).
pub type ListOffsetAnswer = Result<(i64, Option<i32>), WireError>;

/// What a coalesced Fetch asks for one of its partitions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FetchPartitionParams {
    /// The topic id.
    pub topic_id: TopicId,
    /// The partition.
    pub partition: i32,
    /// The offset to read from.
    pub fetch_offset: i64,
    /// The epoch of the last batch the fetcher holds (KIP-320), if any.
    pub last_fetched_epoch: Option<i32>,
    /// The leader epoch the fetcher believes current (KIP-320's fencing: the broker answers
    /// `FENCED_LEADER_EPOCH` / `UNKNOWN_LEADER_EPOCH` when it differs); `None` sends -1, no check.
    pub current_leader_epoch: Option<i32>,
    /// The most bytes of records returned for this partition.
    pub partition_max_bytes: i32,
}

/// A coalesced Fetch of many partitions on one broker.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FetchManyParams {
    /// [`READ_COMMITTED`] or [`READ_UNCOMMITTED`] (one per request, as in Kafka).
    pub isolation_level: i8,
    /// How long the broker may hold the request for data.
    pub max_wait_ms: i32,
    /// The most bytes of records returned in all.
    pub max_bytes: i32,
    /// The partitions, in the order the broker fills them.
    pub partitions: Vec<FetchPartitionParams>,
}

/// What a Fetch asks for one partition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FetchParams {
    /// The topic id.
    pub topic_id: TopicId,
    /// The partition.
    pub partition: i32,
    /// The offset to read from.
    pub fetch_offset: i64,
    /// The epoch of the last batch the fetcher holds (KIP-320), if any.
    pub last_fetched_epoch: Option<i32>,
    /// [`READ_COMMITTED`] or [`READ_UNCOMMITTED`].
    pub isolation_level: i8,
    /// How long the broker may hold the request for `min_bytes`.
    pub max_wait_ms: i32,
    /// The most bytes of records returned.
    pub max_bytes: i32,
}

/// A partition's answer to a Fetch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionFetch {
    /// Kafka's error code (0: none).
    pub error_code: i16,
    /// The high watermark.
    pub high_watermark: i64,
    /// The last stable offset.
    pub last_stable_offset: i64,
    /// The log start offset.
    pub log_start_offset: i64,
    /// The diverging epoch (KIP-320), if the broker set one.
    pub diverging_epoch: Option<EpochAndOffset>,
    /// The aborted transactions of a read-committed fetch: producer id and first offset.
    pub aborted_transactions: Vec<(i64, i64)>,
    /// The record batches exactly as sent (the last one may be partial).
    pub records: Bytes,
}

/// A lazily connected client of one broker. See the [module documentation](self).
#[derive(Debug)]
pub struct KafkaClient {
    address: String,
    connect_timeout: Duration,
    request_timeout: Duration,
    security: Arc<SecurityConfig>,
    connection: Option<Connection>,
}

impl KafkaClient {
    /// A plaintext client of the broker at `address` (`host:port`); nothing is sent until the
    /// first call.
    pub fn new(address: &str, connect_timeout: Duration, request_timeout: Duration) -> Self {
        KafkaClient {
            address: address.to_owned(),
            connect_timeout,
            request_timeout,
            security: Arc::default(),
            connection: None,
        }
    }

    /// The same client connecting with `security` (TLS, SASL).
    pub fn with_security(mut self, security: Arc<SecurityConfig>) -> Self {
        self.security = security;
        self.connection = None;
        self
    }

    /// The security its connections use.
    pub fn security(&self) -> &Arc<SecurityConfig> {
        &self.security
    }

    /// The broker's address.
    pub fn address(&self) -> &str {
        &self.address
    }

    /// Opens the connection now (TCP, TLS, ApiVersions, SASL as configured), if it is not open
    /// (or its SASL session is about to end).
    pub fn connect(&mut self) -> Result<&mut Connection, WireError> {
        if self.connection.as_ref().is_some_and(Connection::is_expired) {
            self.connection = None;
        }
        if self.connection.is_none() {
            self.connection = Some(Connection::connect_with(
                &self.address,
                self.connect_timeout,
                self.request_timeout,
                &self.security,
            )?);
        }
        self.connection.as_mut().ok_or_else(|| WireError::Connect {
            address: self.address.clone(),
            source: std::io::Error::other("not connected"),
        })
    }

    /// Closes the connection (the next call opens a new one).
    pub fn disconnect(&mut self) {
        self.connection = None;
    }

    /// Sends a request at the highest common version (at least `min`); a connection error
    /// closes the connection.
    pub(crate) fn call<R: Request>(
        &mut self,
        api: &'static str,
        min: i16,
        build: impl FnOnce(i16) -> R,
    ) -> Result<(R::Response, i16), WireError> {
        let connection = self.connect()?;
        let version = connection.version_for::<R>(api, min)?;
        let request = build(version);
        let result = connection.send(api, &request, version);
        if let Err(e) = &result {
            if e.is_connection() || matches!(e, WireError::Malformed { .. }) {
                self.disconnect();
            }
        }
        result.map(|r| (r, version))
    }

    pub(crate) fn broker_error(&self, api: &'static str, what: String, code: i16) -> WireError {
        WireError::Broker {
            address: self.address.clone(),
            api,
            what,
            code,
            name: error_name(code),
        }
    }

    /// A Kafka error code about `resource`: [`WireError::Denied`] naming the missing ACL for
    /// an authorization error, else [`WireError::Broker`].
    pub(crate) fn broker_error_on(
        &self,
        api: &'static str,
        what: String,
        code: i16,
        resource: AclResource,
    ) -> WireError {
        match authorization::needed(api, code, resource, self.security.principal()) {
            Some(acl) => WireError::Denied {
                address: self.address.clone(),
                api,
                code,
                name: error_name(code),
                acl: Box::new(acl),
            },
            None => self.broker_error(api, what, code),
        }
    }

    pub(crate) fn malformed(&self, api: &'static str, version: i16, reason: String) -> WireError {
        WireError::Malformed {
            address: self.address.clone(),
            api,
            version,
            reason,
        }
    }

    /// The round trip measured by the open connection's handshake
    /// ([`Connection::handshake_round_trip`]), if a connection is open.
    pub fn round_trip(&self) -> Option<Duration> {
        self.connection
            .as_ref()
            .map(Connection::handshake_round_trip)
    }

    /// Whether a connection is open (it may still turn out broken on the next request).
    pub fn is_connected(&self) -> bool {
        self.connection.is_some()
    }

    /// Metadata of the named `topics` (never creating them), or of every topic of the cluster
    /// for `None`: each topic's id, partitions and leaders (or its error code), the brokers and
    /// the cluster id. A topic-level error is returned in its entry, not as an error.
    pub fn metadata_topics(
        &mut self,
        topics: Option<&[String]>,
    ) -> Result<MetadataSnapshot, WireError> {
        self.metadata_versioned(topics)
            .map(|(snapshot, _)| snapshot)
    }

    fn metadata_versioned(
        &mut self,
        topics: Option<&[String]>,
    ) -> Result<(MetadataSnapshot, i16), WireError> {
        const API: &str = "Metadata";
        let requested = topics.map(|names| {
            names
                .iter()
                .map(|n| {
                    MetadataRequestTopic::default()
                        .with_name(Some(TopicName(StrBytes::from_string(n.clone()))))
                })
                .collect::<Vec<_>>()
        });
        let (response, version) = self.call(API, METADATA_MIN_VERSION, |_| {
            MetadataRequest::default()
                .with_topics(requested.clone())
                .with_allow_auto_topic_creation(false)
        })?;
        if response.error_code != 0 {
            let what = match topics {
                Some(names) => format!("topics {}", names.join(",")),
                None => "every topic".to_owned(),
            };
            return Err(self.broker_error(API, what, response.error_code));
        }
        let snapshot = MetadataSnapshot {
            cluster_id: response.cluster_id.as_ref().map(|c| c.to_string()),
            brokers: response
                .brokers
                .iter()
                .map(|b| (b.node_id.0, format!("{}:{}", &*b.host, b.port)))
                .collect(),
            topics: response
                .topics
                .iter()
                .map(|t| TopicEntry {
                    name: t.name.as_ref().map(|n| n.0.to_string()).unwrap_or_default(),
                    topic_id: topic_id_of(t.topic_id),
                    is_internal: t.is_internal,
                    error_code: t.error_code,
                    partitions: t
                        .partitions
                        .iter()
                        .map(|p| PartitionMetadata {
                            index: p.partition_index,
                            leader_id: p.leader_id.0,
                            leader_epoch: p.leader_epoch,
                            error_code: p.error_code,
                        })
                        .collect(),
                })
                .collect(),
        };
        Ok((snapshot, version))
    }

    /// Metadata of `topic` (never creating it): its id, partitions and leaders, the cluster id.
    pub fn metadata(&mut self, topic: &str) -> Result<TopicMetadata, WireError> {
        const API: &str = "Metadata";
        let (snapshot, version) = self.metadata_versioned(Some(&[topic.to_owned()]))?;
        let what = format!("topic {topic}");
        let found = snapshot
            .topics
            .iter()
            .find(|t| t.name == topic)
            .ok_or_else(|| self.malformed(API, version, format!("no entry for topic {topic}")))?;
        if found.error_code != 0 {
            let resource = AclResource::Topic(topic.to_owned());
            return Err(self.broker_error_on(API, what, found.error_code, resource));
        }
        Ok(TopicMetadata {
            cluster_id: snapshot.cluster_id.clone(),
            topic: topic.to_owned(),
            topic_id: found.topic_id,
            partitions: found.partitions.clone(),
            brokers: snapshot.brokers.clone(),
        })
    }

    /// ListOffsets of one partition at `timestamp` ([`EARLIEST_TIMESTAMP`] or
    /// [`LATEST_TIMESTAMP`]) under `isolation_level`: the offset and its leader epoch (`None`
    /// for Kafka's -1).
    pub fn list_offset(
        &mut self,
        topic: &str,
        partition: i32,
        timestamp: i64,
        isolation_level: i8,
    ) -> Result<(i64, Option<i32>), WireError> {
        let asked = [(topic.to_owned(), partition)];
        let mut answers = self.list_offsets(&asked, timestamp, isolation_level)?;
        answers.pop().unwrap_or_else(|| {
            Err(self.malformed(
                "ListOffsets",
                LIST_OFFSETS_MIN_VERSION,
                format!("no entry for {topic}-{partition}"),
            ))
        })
    }

    /// ListOffsets of many partitions (`(topic, partition)`) in one request, at `timestamp`
    /// under `isolation_level`: one answer per partition, in the order asked (a partition's
    /// Kafka error code, or its missing entry, is that partition's error). A failed request is
    /// the outer error.
    pub fn list_offsets(
        &mut self,
        partitions: &[(String, i32)],
        timestamp: i64,
        isolation_level: i8,
    ) -> Result<Vec<ListOffsetAnswer>, WireError> {
        const API: &str = "ListOffsets";
        let timeout_ms = i32::try_from(self.request_timeout.as_millis()).unwrap_or(i32::MAX);
        let mut topics: Vec<ListOffsetsTopic> = Vec::new();
        for (topic, partition) in partitions {
            let entry = ListOffsetsPartition::default()
                .with_partition_index(*partition)
                .with_current_leader_epoch(-1)
                .with_timestamp(timestamp);
            match topics.iter_mut().find(|t| &*t.name.0 == topic.as_str()) {
                Some(t) => t.partitions.push(entry),
                None => topics.push(
                    ListOffsetsTopic::default()
                        .with_name(TopicName(StrBytes::from_string(topic.clone())))
                        .with_partitions(vec![entry]),
                ),
            }
        }
        let (response, version) = self.call(API, LIST_OFFSETS_MIN_VERSION, |_| {
            ListOffsetsRequest::default()
                .with_replica_id(BrokerId(CONSUMER_REPLICA_ID))
                .with_isolation_level(isolation_level)
                .with_timeout_ms(timeout_ms)
                .with_topics(topics)
        })?;
        Ok(partitions
            .iter()
            .map(|(topic, partition)| {
                let p = response
                    .topics
                    .iter()
                    .filter(|t| &*t.name.0 == topic.as_str())
                    .flat_map(|t| t.partitions.iter())
                    .find(|p| p.partition_index == *partition)
                    .ok_or_else(|| {
                        self.malformed(API, version, format!("no entry for {topic}-{partition}"))
                    })?;
                if p.error_code != 0 {
                    return Err(self.broker_error_on(
                        API,
                        format!("topic {topic} partition {partition}"),
                        p.error_code,
                        AclResource::Topic(topic.clone()),
                    ));
                }
                Ok((p.offset, (p.leader_epoch >= 0).then_some(p.leader_epoch)))
            })
            .collect())
    }

    /// A consumer Fetch of one partition, addressed by topic id, without a fetch session. The
    /// partition's error code is returned in the answer (the caller maps it); a top-level error
    /// is a [`WireError::Broker`].
    pub fn fetch(&mut self, params: &FetchParams) -> Result<PartitionFetch, WireError> {
        let many = FetchManyParams {
            isolation_level: params.isolation_level,
            max_wait_ms: params.max_wait_ms,
            max_bytes: params.max_bytes,
            partitions: vec![FetchPartitionParams {
                topic_id: params.topic_id,
                partition: params.partition,
                fetch_offset: params.fetch_offset,
                last_fetched_epoch: params.last_fetched_epoch,
                current_leader_epoch: None,
                partition_max_bytes: params.max_bytes,
            }],
        };
        let mut answers = self.fetch_many(&many)?;
        answers.pop().unwrap_or_else(|| {
            Err(self.malformed(
                "Fetch",
                FETCH_MIN_VERSION,
                "no partition in the answer".into(),
            ))
        })
    }

    /// A consumer Fetch of many partitions in ONE request (Kafka's fetcher shape), addressed
    /// by topic id, without a fetch session: one answer per partition, in the order asked. A
    /// partition's Kafka error code is returned in its [`PartitionFetch`] (the caller maps it);
    /// a partition missing from the answer is that partition's [`WireError::Malformed`]; a
    /// failed request or a top-level error is the outer error.
    pub fn fetch_many(
        &mut self,
        params: &FetchManyParams,
    ) -> Result<Vec<Result<PartitionFetch, WireError>>, WireError> {
        const API: &str = "Fetch";
        let (response, version) = self.call(API, FETCH_MIN_VERSION, |_| {
            fetch_request(params)
                .with_session_id(0)
                .with_session_epoch(-1)
                .with_topics(fetch_topics(&params.partitions))
        })?;
        if response.error_code != 0 {
            return Err(self.fetch_error(params, response.error_code));
        }
        Ok(params
            .partitions
            .iter()
            .map(|asked| {
                find_partition(&response, asked)
                    .map(partition_fetch)
                    .ok_or_else(|| {
                        self.malformed(API, version, format!("no entry for {}", what_of(asked)))
                    })
            })
            .collect())
    }

    /// As [`fetch_many`](Self::fetch_many), in the fetch session `session` (KIP-227): the
    /// first request is full and opens the session, later ones send only what changed and
    /// forget the partitions no longer asked; a partition the broker's incremental answer
    /// leaves out has nothing new and is answered with its last offsets and no records. A
    /// session the broker no longer knows is reopened at once with a full request; a failed
    /// request resets it.
    pub fn fetch_many_in_session(
        &mut self,
        session: &mut FetchSession,
        params: &FetchManyParams,
    ) -> Result<Vec<Result<PartitionFetch, WireError>>, WireError> {
        const API: &str = "Fetch";
        loop {
            let request = session.request(&params.partitions);
            let forgotten = forgotten_topics(&request.forgotten);
            session.partitions_sent += request.partitions.len() as u64;
            let answer = self.call(API, FETCH_MIN_VERSION, |_| {
                fetch_request(params)
                    .with_session_id(request.session_id)
                    .with_session_epoch(request.epoch)
                    .with_topics(fetch_topics(&request.partitions))
                    .with_forgotten_topics_data(forgotten)
            });
            let (response, version) = match answer {
                Ok(answer) => answer,
                Err(e) => {
                    session.reset();
                    return Err(e);
                }
            };
            if response.error_code != 0 {
                session.reset();
                if is_session_error(response.error_code) && !request.is_full() {
                    continue;
                }
                return Err(self.fetch_error(params, response.error_code));
            }
            session.accepted(&request, &params.partitions, response.session_id);
            let mut answers = Vec::with_capacity(params.partitions.len());
            let mut lost = false;
            for asked in &params.partitions {
                let key = (asked.topic_id, asked.partition);
                let answer = match find_partition(&response, asked) {
                    Some(p) => {
                        let fetched = partition_fetch(p);
                        if fetched.error_code == 0 {
                            session.answered(
                                key,
                                LastOffsets {
                                    high_watermark: fetched.high_watermark,
                                    last_stable_offset: fetched.last_stable_offset,
                                    log_start_offset: fetched.log_start_offset,
                                },
                            );
                        }
                        Ok(fetched)
                    }
                    None => match session.last_offsets(key).filter(|_| !request.is_full()) {
                        Some(last) => Ok(PartitionFetch {
                            error_code: 0,
                            high_watermark: last.high_watermark,
                            last_stable_offset: last.last_stable_offset,
                            log_start_offset: last.log_start_offset,
                            diverging_epoch: None,
                            aborted_transactions: Vec::new(),
                            records: Bytes::new(),
                        }),
                        None => {
                            lost = true;
                            Err(self.malformed(
                                API,
                                version,
                                format!("no entry for {}", what_of(asked)),
                            ))
                        }
                    },
                };
                answers.push(answer);
            }
            if lost {
                // The session and this client disagree: start again with a full request.
                session.reset();
            }
            return Ok(answers);
        }
    }

    fn fetch_error(&self, params: &FetchManyParams, code: i16) -> WireError {
        let what = match params.partitions.as_slice() {
            [one] => what_of(one),
            many => format!("{} partitions", many.len()),
        };
        self.broker_error("Fetch", what, code)
    }

    /// OffsetForLeaderEpoch as a consumer: the end offset of `leader_epoch` in the partition's
    /// log, as `(epoch, end offset)` (Kafka's -1s when the broker knows no such epoch).
    pub fn offset_for_leader_epoch(
        &mut self,
        topic: &str,
        partition: i32,
        leader_epoch: i32,
    ) -> Result<EpochAndOffset, WireError> {
        const API: &str = "OffsetForLeaderEpoch";
        let name = TopicName(StrBytes::from_string(topic.to_owned()));
        let (response, version) = self.call(API, OFFSET_FOR_LEADER_EPOCH_MIN_VERSION, |_| {
            OffsetForLeaderEpochRequest::default()
                .with_replica_id(BrokerId(CONSUMER_REPLICA_ID))
                .with_topics(vec![OffsetForLeaderTopic::default()
                    .with_topic(name.clone())
                    .with_partitions(vec![OffsetForLeaderPartition::default()
                        .with_partition(partition)
                        .with_current_leader_epoch(-1)
                        .with_leader_epoch(leader_epoch)])])
        })?;
        let p = response
            .topics
            .iter()
            .filter(|t| &*t.topic.0 == topic)
            .flat_map(|t| t.partitions.iter())
            .find(|p| p.partition == partition)
            .ok_or_else(|| {
                self.malformed(API, version, format!("no entry for {topic}-{partition}"))
            })?;
        if p.error_code != 0 {
            return Err(self.broker_error_on(
                API,
                format!("topic {topic} partition {partition} epoch {leader_epoch}"),
                p.error_code,
                AclResource::Topic(topic.to_owned()),
            ));
        }
        Ok(EpochAndOffset {
            epoch: p.leader_epoch,
            end_offset: p.end_offset,
        })
    }
}

/// Kafka's topic id as the kernel's.
pub fn topic_id_of(uuid: Uuid) -> TopicId {
    TopicId(*uuid.as_bytes())
}

/// A consumer Fetch request's common fields (replica id -1, `min_bytes` 1).
fn fetch_request(params: &FetchManyParams) -> FetchRequest {
    FetchRequest::default()
        .with_replica_id(BrokerId(CONSUMER_REPLICA_ID))
        .with_max_wait_ms(params.max_wait_ms)
        .with_min_bytes(1)
        .with_max_bytes(params.max_bytes)
        .with_isolation_level(params.isolation_level)
}

/// The request's topics: consecutive partitions of a topic share its entry (the order asked is
/// kept).
fn fetch_topics(partitions: &[FetchPartitionParams]) -> Vec<FetchTopic> {
    let mut topics: Vec<FetchTopic> = Vec::new();
    for p in partitions {
        let uuid = Uuid::from_bytes(p.topic_id.0);
        let entry = FetchPartition::default()
            .with_partition(p.partition)
            .with_current_leader_epoch(p.current_leader_epoch.unwrap_or(-1))
            .with_fetch_offset(p.fetch_offset)
            .with_last_fetched_epoch(p.last_fetched_epoch.unwrap_or(-1))
            .with_log_start_offset(-1)
            .with_partition_max_bytes(p.partition_max_bytes);
        match topics.last_mut() {
            Some(t) if t.topic_id == uuid => t.partitions.push(entry),
            _ => topics.push(
                FetchTopic::default()
                    .with_topic_id(uuid)
                    .with_partitions(vec![entry]),
            ),
        }
    }
    topics
}

/// The forgotten partitions of an incremental request, by topic id.
fn forgotten_topics(forgotten: &[SessionKey]) -> Vec<ForgottenTopic> {
    let mut topics: Vec<ForgottenTopic> = Vec::new();
    for (topic_id, partition) in forgotten {
        let uuid = Uuid::from_bytes(topic_id.0);
        match topics.iter_mut().find(|t| t.topic_id == uuid) {
            Some(t) => t.partitions.push(*partition),
            None => topics.push(
                ForgottenTopic::default()
                    .with_topic_id(uuid)
                    .with_partitions(vec![*partition]),
            ),
        }
    }
    topics
}

fn what_of(p: &FetchPartitionParams) -> String {
    format!(
        "topic id {} partition {}",
        Uuid::from_bytes(p.topic_id.0).simple(),
        p.partition
    )
}

fn find_partition<'a>(
    response: &'a FetchResponse,
    asked: &FetchPartitionParams,
) -> Option<&'a PartitionData> {
    let uuid = Uuid::from_bytes(asked.topic_id.0);
    response
        .responses
        .iter()
        .filter(|t| t.topic_id == uuid)
        .flat_map(|t| t.partitions.iter())
        .find(|p| p.partition_index == asked.partition)
}

fn partition_fetch(p: &PartitionData) -> PartitionFetch {
    let diverging = (p.diverging_epoch.epoch != -1 || p.diverging_epoch.end_offset != -1)
        .then_some(EpochAndOffset {
            epoch: p.diverging_epoch.epoch,
            end_offset: p.diverging_epoch.end_offset,
        });
    PartitionFetch {
        error_code: p.error_code,
        high_watermark: p.high_watermark,
        last_stable_offset: p.last_stable_offset,
        log_start_offset: p.log_start_offset,
        diverging_epoch: diverging,
        aborted_transactions: p
            .aborted_transactions
            .iter()
            .flatten()
            .map(|a| (a.producer_id.0, a.first_offset))
            .collect(),
        records: p.records.clone().unwrap_or_default(),
    }
}
