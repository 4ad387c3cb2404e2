//! [`FetchSessions`]: the serving side of Kafka's fetch sessions (KIP-227), so that a
//! consumer of many partitions sends, and is answered, only what changed.
//!
//! # The contract
//!
//! Kafka's rules (its `FetchManager` and `FetchSessionCache`), from Fetch v7:
//!
//! - **Full Fetch, epoch 0 (INITIAL).** The request's partitions are read and all answered;
//!   then a session of them is created, with a new random id and epoch 1, if the cache has
//!   room. Without room the answer carries session id 0 (no session; the client keeps sending
//!   full Fetches). A session id in the request names a session to close first.
//! - **Epoch -1 (FINAL).** The named session is closed; the request's partitions (usually
//!   none) are answered in full with session id 0.
//! - **Incremental Fetch (session id, epoch n > 0).** An unknown id is answered
//!   `FETCH_SESSION_ID_NOT_FOUND` (70), an epoch other than the session's
//!   `INVALID_FETCH_SESSION_EPOCH` (71), a request version that names topics otherwise than the
//!   session's (by id from v13, by name before) `FETCH_SESSION_TOPIC_ID_ERROR` (106), each
//!   with no partitions and session id 0. Otherwise the request's partitions are added to the
//!   session or update its fetch parameters, its forgotten partitions are removed, the
//!   session's epoch advances, and **every** partition of the session is read; the answer
//!   lists only those with records, an error, a diverging epoch, or a high watermark, last
//!   stable offset or log start offset other than the last one answered. A partition that
//!   returned records moves to the end of the session, so a byte budget that runs out serves
//!   the others first next time. A session that an incremental Fetch leaves empty is closed
//!   and that Fetch answered with session id 0.
//! - **Sessions outlive connections.** A client may resume its session on a new connection;
//!   a session ends when it is closed, or when the cache evicts it.
//! - **Bounded.** At most `max_sessions` (1,000 by default, Kafka's
//!   `max.incremental.fetch.session.cache.slots`). When full, a new session evicts the least
//!   recently used one if it has been unused for longer than `eviction_ms` (Kafka's
//!   `min.incremental.fetch.session.eviction.ms`, 2 minutes), or else the smallest session
//!   older than that if the new one has more partitions (Kafka's rules; every client is a
//!   consumer, so none is privileged). An eviction logs one line. Otherwise no session is
//!   created.
//!
//! The last stable offset is compared beside Kafka's high watermark and log start offset:
//! with one replica it moves only with the high watermark, so the answers are Kafka's.

use std::collections::{BTreeMap, HashMap};

use kafka_protocol::messages::fetch_request::FetchPartition;
use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
use kafka_protocol::messages::{FetchRequest, FetchResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

use super::fetch::Read;
use super::PlacedRegion;
#[cfg(test)]
use crate::file_region::FileRegion;

pub use crate::wire::fetch_session::{
    FETCH_SESSION_ID_NOT_FOUND, FETCH_SESSION_TOPIC_ID_ERROR, INVALID_FETCH_SESSION_EPOCH,
};

/// The epoch of a full Fetch, which opens a session.
pub const INITIAL_EPOCH: i32 = 0;
/// The epoch of a Fetch that closes its session.
pub const FINAL_EPOCH: i32 = -1;
/// Sessions the cache holds by default (Kafka's `max.incremental.fetch.session.cache.slots`).
pub const DEFAULT_MAX_SESSIONS: usize = 1_000;
/// How long a session must be unused before a new one may evict it, by default (Kafka's
/// `min.incremental.fetch.session.eviction.ms`).
pub const DEFAULT_EVICTION_MS: i64 = 120_000;
/// The first Fetch version with sessions.
const FIRST_SESSION_VERSION: i16 = 7;
/// The first Fetch version that names topics by id.
const FIRST_TOPIC_ID_VERSION: i16 = 13;

/// A topic as a Fetch names it: by id from v13, by name before.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TopicRef {
    /// The topic's id (Fetch v13 and later).
    Id(Uuid),
    /// The topic's name (Fetch before v13).
    Name(String),
}

/// One partition a Fetch reads: its topic as named, and its fetch parameters (with the
/// partition's index).
#[derive(Clone, Debug, PartialEq)]
pub struct Wanted {
    /// The topic.
    pub topic: TopicRef,
    /// The fetch offset, epochs and byte limit.
    pub params: FetchPartition,
}

/// What a Fetch is, once its session step is taken ([`FetchSessions::context`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FetchContext {
    /// Read the request's partitions and answer them all, with session id 0.
    Sessionless,
    /// Read the request's partitions, answer them all, and open a session of them if the
    /// cache has room.
    Full,
    /// Read the session's partitions and answer those with something new.
    Incremental {
        /// The session.
        id: i32,
    },
    /// Answer only this error code, with no partitions and session id 0.
    Error(i16),
}

/// A partition of a session: its fetch parameters and what was last answered for it.
#[derive(Clone, Debug)]
struct Cached {
    params: FetchPartition,
    high_watermark: i64,
    last_stable_offset: i64,
    log_start_offset: i64,
    /// Its place in the session's order.
    rank: u64,
}

impl Cached {
    /// Whether `data` must be answered (something new: `has_records`, or an offset, an epoch
    /// or an error), remembering its offsets.
    fn must_answer(&mut self, data: &PartitionData, has_records: bool) -> bool {
        let mut new =
            has_records || data.diverging_epoch.epoch >= 0 || data.preferred_read_replica.0 >= 0;
        for (cached, now) in [
            (&mut self.high_watermark, data.high_watermark),
            (&mut self.last_stable_offset, data.last_stable_offset),
            (&mut self.log_start_offset, data.log_start_offset),
        ] {
            new |= *cached != now;
            *cached = now;
        }
        if data.error_code != 0 {
            // Answered again once the error is gone.
            self.high_watermark = -1;
            new = true;
        }
        new
    }
}

type PartitionRef = (TopicRef, i32);

/// One open session.
#[derive(Debug)]
struct Session {
    epoch: i32,
    uses_topic_ids: bool,
    created_ms: i64,
    last_used_ms: i64,
    partitions: HashMap<PartitionRef, Cached>,
    /// The partitions in session order, by rank.
    order: BTreeMap<u64, PartitionRef>,
    next_rank: u64,
}

impl Session {
    /// Puts `key` at the end of the session's order.
    fn move_to_end(&mut self, key: &PartitionRef) {
        let rank = self.next_rank;
        if let Some(cached) = self.partitions.get_mut(key) {
            self.order.remove(&cached.rank);
            cached.rank = rank;
            self.order.insert(rank, key.clone());
            self.next_rank += 1;
        }
    }

    /// Adds `wanted` at the end, with the offsets last answered for it.
    fn add(&mut self, wanted: Wanted, answered: Option<&PartitionData>) {
        let key = (wanted.topic, wanted.params.partition);
        let offsets = answered.map_or((-1, -1, -1), |d| {
            (d.high_watermark, d.last_stable_offset, d.log_start_offset)
        });
        let cached = Cached {
            params: wanted.params,
            high_watermark: offsets.0,
            last_stable_offset: offsets.1,
            log_start_offset: offsets.2,
            rank: self.next_rank,
        };
        if let Some(old) = self.partitions.insert(key.clone(), cached) {
            self.order.remove(&old.rank);
        }
        self.order.insert(self.next_rank, key);
        self.next_rank += 1;
    }

    /// An incremental Fetch's changes: `wanted` added or updated, then `forgotten` removed.
    fn update(&mut self, wanted: Vec<Wanted>, forgotten: Vec<PartitionRef>) {
        for w in wanted {
            let key = (w.topic.clone(), w.params.partition);
            match self.partitions.get_mut(&key) {
                Some(cached) => cached.params = w.params,
                None => self.add(w, None),
            }
        }
        for key in forgotten {
            if let Some(old) = self.partitions.remove(&key) {
                self.order.remove(&old.rank);
            }
        }
    }

    /// The session's partitions, in order.
    fn wanted(&self) -> Vec<Wanted> {
        self.order
            .values()
            .filter_map(|key| {
                let cached = self.partitions.get(key)?;
                Some(Wanted {
                    topic: key.0.clone(),
                    params: cached.params.clone(),
                })
            })
            .collect()
    }
}

/// The broker's fetch session cache. See the [module documentation](self).
#[derive(Debug)]
pub struct FetchSessions {
    sessions: HashMap<i32, Session>,
    max_sessions: usize,
    eviction_ms: i64,
}

impl Default for FetchSessions {
    fn default() -> Self {
        FetchSessions::new(DEFAULT_MAX_SESSIONS, DEFAULT_EVICTION_MS)
    }
}

impl FetchSessions {
    /// A cache of at most `max_sessions` sessions (0: none is ever created), a session
    /// evictable once unused for `eviction_ms`.
    pub fn new(max_sessions: usize, eviction_ms: i64) -> Self {
        FetchSessions {
            sessions: HashMap::new(),
            max_sessions,
            eviction_ms,
        }
    }

    /// Sessions open.
    pub fn open_sessions(&self) -> usize {
        self.sessions.len()
    }

    /// Takes `request`'s session step at `now_ms` (closes, checks, updates, advances the
    /// epoch) and says how to answer it. Taken once per request, before it is read, however
    /// long it then waits for data.
    pub fn context(&mut self, now_ms: i64, request: &FetchRequest, version: i16) -> FetchContext {
        if version < FIRST_SESSION_VERSION {
            return FetchContext::Sessionless;
        }
        let id = request.session_id;
        if request.session_epoch == INITIAL_EPOCH || request.session_epoch == FINAL_EPOCH {
            self.sessions.remove(&id);
            return if request.session_epoch == FINAL_EPOCH {
                FetchContext::Sessionless
            } else {
                FetchContext::Full
            };
        }
        let Some(session) = self.sessions.get_mut(&id) else {
            return FetchContext::Error(FETCH_SESSION_ID_NOT_FOUND);
        };
        if session.epoch != request.session_epoch {
            return FetchContext::Error(INVALID_FETCH_SESSION_EPOCH);
        }
        if session.uses_topic_ids != (version >= FIRST_TOPIC_ID_VERSION) {
            return FetchContext::Error(FETCH_SESSION_TOPIC_ID_ERROR);
        }
        session.update(requested(request, version), forgotten(request, version));
        if session.partitions.is_empty() {
            self.sessions.remove(&id);
            return FetchContext::Sessionless;
        }
        session.last_used_ms = now_ms;
        session.epoch = next_epoch(session.epoch);
        FetchContext::Incremental { id }
    }

    /// The partitions a Fetch reads under `context`: the request's, or its session's in
    /// session order (none if the session was evicted meanwhile: the answer says so).
    pub fn wanted(
        &self,
        context: FetchContext,
        request: &FetchRequest,
        version: i16,
    ) -> Vec<Wanted> {
        match context {
            FetchContext::Sessionless | FetchContext::Full => requested(request, version),
            FetchContext::Incremental { id } => self
                .sessions
                .get(&id)
                .map_or_else(Vec::new, Session::wanted),
            FetchContext::Error(_) => Vec::new(),
        }
    }

    /// The answer to a Fetch under `context` whose [`wanted`](Self::wanted) partitions were
    /// read (`read`, in that order), at `now_ms`: all of them, or (incremental) those with
    /// something new. A full Fetch's session is created here.
    pub fn respond(
        &mut self,
        now_ms: i64,
        context: FetchContext,
        version: i16,
        read: Vec<Read>,
    ) -> (FetchResponse, Vec<PlacedRegion>) {
        match context {
            FetchContext::Error(code) => {
                (FetchResponse::default().with_error_code(code), Vec::new())
            }
            FetchContext::Sessionless => response(read),
            FetchContext::Full => {
                let id = self.create(now_ms, version >= FIRST_TOPIC_ID_VERSION, &read);
                let (answer, regions) = response(read);
                (answer.with_session_id(id), regions)
            }
            FetchContext::Incremental { id } => {
                let Some(session) = self.sessions.get_mut(&id) else {
                    return (
                        FetchResponse::default().with_error_code(FETCH_SESSION_ID_NOT_FOUND),
                        Vec::new(),
                    );
                };
                let mut answered = Vec::new();
                for (wanted, data, region) in read {
                    let key = (wanted.topic.clone(), wanted.params.partition);
                    let Some(cached) = session.partitions.get_mut(&key) else {
                        continue;
                    };
                    let has_records = region.is_some();
                    if !cached.must_answer(&data, has_records) {
                        continue;
                    }
                    if has_records {
                        session.move_to_end(&key);
                    }
                    answered.push((wanted, data, region));
                }
                let (answer, regions) = response(answered);
                (answer.with_session_id(id), regions)
            }
        }
    }

    /// A new session of `read`'s partitions: its id, or 0 when the cache has no room.
    fn create(&mut self, now_ms: i64, uses_topic_ids: bool, read: &[Read]) -> i32 {
        if self.sessions.len() >= self.max_sessions && !self.evict_for(now_ms, read.len()) {
            return 0;
        }
        let Some(id) = self.new_id() else {
            return 0;
        };
        let mut session = Session {
            epoch: next_epoch(INITIAL_EPOCH),
            uses_topic_ids,
            created_ms: now_ms,
            last_used_ms: now_ms,
            partitions: HashMap::new(),
            order: BTreeMap::new(),
            next_rank: 0,
        };
        for (wanted, data, _) in read {
            session.add(wanted.clone(), Some(data));
        }
        self.sessions.insert(id, session);
        id
    }

    /// Evicts a session to make room for one of `size` partitions, if Kafka's rules allow:
    /// the least recently used if it is stale, else the smallest established one if smaller.
    fn evict_for(&mut self, now_ms: i64, size: usize) -> bool {
        let stale = self
            .sessions
            .iter()
            .min_by_key(|(id, s)| (s.last_used_ms, **id))
            .filter(|(_, s)| now_ms.saturating_sub(s.last_used_ms) > self.eviction_ms)
            .map(|(id, _)| (*id, "unused for longer than the eviction time"));
        let smaller = || {
            self.sessions
                .iter()
                .filter(|(_, s)| now_ms.saturating_sub(s.created_ms) > self.eviction_ms)
                .min_by_key(|(id, s)| (s.partitions.len(), **id))
                .filter(|(_, s)| s.partitions.len() < size)
                .map(|(id, _)| (*id, "a larger session needs its place"))
        };
        let Some((id, why)) = stale.or_else(smaller) else {
            return false;
        };
        if let Some(session) = self.sessions.remove(&id) {
            eprintln!(
                "serve: fetch session {id} evicted ({} partitions, unused for {} ms): {why} \
                 and the cache holds {} sessions",
                session.partitions.len(),
                now_ms.saturating_sub(session.last_used_ms),
                self.max_sessions
            );
        }
        true
    }

    /// A random positive id no open session has (`None`: the system's random source failed).
    fn new_id(&self) -> Option<i32> {
        let random = rustls::crypto::ring::default_provider().secure_random;
        for _ in 0..16 {
            let mut bytes = [0u8; 4];
            random.fill(&mut bytes).ok()?;
            let id = i32::from_be_bytes(bytes) & i32::MAX;
            if id != 0 && !self.sessions.contains_key(&id) {
                return Some(id);
            }
        }
        None
    }
}

/// The epoch after `epoch` (wrapping to 1, never to the INITIAL or FINAL epoch).
fn next_epoch(epoch: i32) -> i32 {
    if epoch == i32::MAX {
        1
    } else {
        epoch + 1
    }
}

/// Each entry of `topics` (a topic's name, id and per-partition entries) with its topic as
/// `version` names it: by id from v13, by name before.
fn by_topic<'a, P: 'a>(
    version: i16,
    topics: impl Iterator<Item = (&'a TopicName, Uuid, &'a [P])>,
) -> impl Iterator<Item = (TopicRef, &'a P)> {
    topics.flat_map(move |(name, id, entries)| {
        let topic = if version >= FIRST_TOPIC_ID_VERSION {
            TopicRef::Id(id)
        } else {
            TopicRef::Name(name.0.to_string())
        };
        entries.iter().map(move |e| (topic.clone(), e))
    })
}

/// The partitions `request` lists.
fn requested(request: &FetchRequest, version: i16) -> Vec<Wanted> {
    let topics = request.topics.iter();
    by_topic(
        version,
        topics.map(|t| (&t.topic, t.topic_id, &t.partitions[..])),
    )
    .map(|(topic, params)| Wanted {
        topic,
        params: params.clone(),
    })
    .collect()
}

/// The partitions `request` drops from its session.
fn forgotten(request: &FetchRequest, version: i16) -> Vec<PartitionRef> {
    let topics = request.forgotten_topics_data.iter();
    by_topic(
        version,
        topics.map(|t| (&t.topic, t.topic_id, &t.partitions[..])),
    )
    .map(|(topic, partition)| (topic, *partition))
    .collect()
}

/// A response of `answered`, consecutive partitions of a topic under one topic entry.
/// The response of `answered`, each topic's partitions together in the order given, and the
/// regions of those that carry records, each with its place in the response.
fn response(answered: Vec<Read>) -> (FetchResponse, Vec<PlacedRegion>) {
    let mut response = FetchResponse::default();
    let mut regions = Vec::new();
    let mut last: Option<TopicRef> = None;
    for (wanted, data, region) in answered {
        if last.as_ref() != Some(&wanted.topic) {
            let entry = match &wanted.topic {
                TopicRef::Id(id) => FetchableTopicResponse::default().with_topic_id(*id),
                TopicRef::Name(name) => FetchableTopicResponse::default()
                    .with_topic(TopicName(StrBytes::from_string(name.clone()))),
            };
            response.responses.push(entry);
            last = Some(wanted.topic);
        }
        let topic = response.responses.len().saturating_sub(1);
        if let Some(entry) = response.responses.last_mut() {
            entry.partitions.push(data);
            let partition = entry.partitions.len() - 1;
            regions.extend(region.map(|r| PlacedRegion {
                topic,
                partition,
                region: r,
            }));
        }
    }
    (response, regions)
}

#[cfg(test)]
pub(crate) mod tests {
    use bytes::Bytes;
    use kafka_protocol::messages::fetch_request::{FetchTopic, ForgottenTopic};

    use super::*;

    const TOPIC: Uuid = Uuid::from_u128(7);

    fn params(partition: i32, fetch_offset: i64) -> FetchPartition {
        FetchPartition::default()
            .with_partition(partition)
            .with_fetch_offset(fetch_offset)
            .with_partition_max_bytes(1 << 20)
    }

    /// A v13 Fetch in session `id` at `epoch` of `partitions` (index, fetch offset) of
    /// [`TOPIC`], forgetting `forget`.
    fn request(id: i32, epoch: i32, partitions: &[(i32, i64)], forget: &[i32]) -> FetchRequest {
        request_of(TOPIC, id, epoch, partitions, forget)
    }

    /// A v13 Fetch in session `id` at `epoch` of `partitions` (index, fetch offset) of
    /// `topic`, forgetting `forget`.
    pub(crate) fn request_of(
        topic: Uuid,
        id: i32,
        epoch: i32,
        partitions: &[(i32, i64)],
        forget: &[i32],
    ) -> FetchRequest {
        let mut request = FetchRequest::default()
            .with_session_id(id)
            .with_session_epoch(epoch);
        if !partitions.is_empty() {
            request.topics.push(
                FetchTopic::default().with_topic_id(topic).with_partitions(
                    partitions
                        .iter()
                        .map(|(p, offset)| params(*p, *offset))
                        .collect(),
                ),
            );
        }
        if !forget.is_empty() {
            request.forgotten_topics_data.push(
                ForgottenTopic::default()
                    .with_topic_id(topic)
                    .with_partitions(forget.to_vec()),
            );
        }
        request
    }

    /// What a read of `wanted` gives when each partition's high watermark is `hw` and the
    /// partitions in `with_records` have records (a region of a five-byte file).
    fn read(wanted: Vec<Wanted>, hw: i64, with_records: &[i32]) -> Vec<Read> {
        wanted
            .into_iter()
            .map(|w| {
                let region = with_records.contains(&w.params.partition).then(|| {
                    let mut file = tempfile::tempfile().unwrap();
                    std::io::Write::write_all(&mut file, b"batch").unwrap();
                    let truncations = crate::file_region::Truncations::default();
                    let path = std::path::Path::new("batch");
                    FileRegion::new(std::sync::Arc::new(file), path, 0, 5, 0, &truncations)
                });
                let data = PartitionData::default()
                    .with_partition_index(w.params.partition)
                    .with_high_watermark(hw)
                    .with_last_stable_offset(hw)
                    .with_log_start_offset(0)
                    .with_records(Some(Bytes::new()));
                (w, data, region)
            })
            .collect()
    }

    /// Takes the session step of `request` at `now_ms`, reads its partitions and answers.
    fn fetch(
        sessions: &mut FetchSessions,
        now_ms: i64,
        request: &FetchRequest,
        hw: i64,
        with_records: &[i32],
    ) -> FetchResponse {
        let context = sessions.context(now_ms, request, 13);
        let wanted = sessions.wanted(context, request, 13);
        sessions
            .respond(now_ms, context, 13, read(wanted, hw, with_records))
            .0
    }

    /// The partitions an answer lists.
    pub(crate) fn answered(response: &FetchResponse) -> Vec<i32> {
        response
            .responses
            .iter()
            .flat_map(|t| t.partitions.iter().map(|p| p.partition_index))
            .collect()
    }

    /// A session of partitions 0, 1 and 2 (fetch offset 0, high watermark 10), opened at 0.
    fn opened(sessions: &mut FetchSessions) -> i32 {
        let full = fetch(
            sessions,
            0,
            &request(0, 0, &[(0, 0), (1, 0), (2, 0)], &[]),
            10,
            &[],
        );
        assert_eq!(
            answered(&full),
            [0, 1, 2],
            "a full Fetch answers every partition"
        );
        assert_ne!(full.session_id, 0, "the cache has room: a session");
        full.session_id
    }

    #[test]
    fn an_incremental_fetch_answers_only_the_partitions_with_something_new() {
        let mut sessions = FetchSessions::default();
        let id = opened(&mut sessions);

        let idle = fetch(&mut sessions, 1, &request(id, 1, &[], &[]), 10, &[]);
        assert_eq!((idle.error_code, idle.session_id), (0, id));
        assert!(answered(&idle).is_empty(), "nothing changed: no partition");

        let moved = fetch(&mut sessions, 2, &request(id, 2, &[], &[]), 12, &[]);
        assert_eq!(answered(&moved), [0, 1, 2], "the high watermarks moved");
        let records = fetch(&mut sessions, 3, &request(id, 3, &[], &[]), 12, &[1]);
        assert_eq!(answered(&records), [1], "only the partition with records");
        let order: Vec<i32> = sessions
            .wanted(
                FetchContext::Incremental { id },
                &FetchRequest::default(),
                13,
            )
            .iter()
            .map(|w| w.params.partition)
            .collect();
        assert_eq!(
            order,
            [0, 2, 1],
            "a partition that returned records goes last"
        );

        let mut failing = read(
            sessions.wanted(
                FetchContext::Incremental { id },
                &FetchRequest::default(),
                13,
            ),
            12,
            &[],
        );
        failing[0].1.error_code = 1;
        let context = sessions.context(4, &request(id, 4, &[], &[]), 13);
        let (error, _) = sessions.respond(4, context, 13, failing);
        assert_eq!(answered(&error), [0], "an error is always answered");
        let recovered = fetch(&mut sessions, 5, &request(id, 5, &[], &[]), 12, &[]);
        assert_eq!(
            answered(&recovered),
            [0],
            "and answered again once it is gone"
        );
        let quiet = fetch(&mut sessions, 6, &request(id, 6, &[], &[]), 12, &[]);
        assert!(answered(&quiet).is_empty());
    }

    #[test]
    fn an_incremental_fetch_adds_updates_and_forgets_partitions() {
        let mut sessions = FetchSessions::default();
        let id = opened(&mut sessions);
        let changes = request(id, 1, &[(0, 7), (3, 5)], &[2]);
        let context = sessions.context(1, &changes, 13);
        assert_eq!(context, FetchContext::Incremental { id });
        let wanted: Vec<(i32, i64)> = sessions
            .wanted(context, &changes, 13)
            .iter()
            .map(|w| (w.params.partition, w.params.fetch_offset))
            .collect();
        assert_eq!(
            wanted,
            [(0, 7), (1, 0), (3, 5)],
            "updated, kept, added; 2 forgotten"
        );
        let (first, _) = sessions.respond(
            1,
            context,
            13,
            read(sessions.wanted(context, &changes, 13), 10, &[]),
        );
        assert_eq!(
            answered(&first),
            [3],
            "only the new partition: the others are unchanged"
        );
        let later = fetch(&mut sessions, 2, &request(id, 2, &[], &[]), 11, &[]);
        assert_eq!(
            answered(&later),
            [0, 1, 3],
            "a forgotten partition is not answered"
        );

        let emptied = request(id, 3, &[], &[0, 1, 3]);
        assert_eq!(sessions.context(3, &emptied, 13), FetchContext::Sessionless);
        assert_eq!(
            sessions.open_sessions(),
            0,
            "a session left empty is closed"
        );
    }

    #[test]
    fn a_wrong_epoch_an_unknown_id_or_a_switch_of_topic_naming_is_refused() {
        let mut sessions = FetchSessions::default();
        let id = opened(&mut sessions);
        for (request, version, code) in [
            (request(id, 2, &[], &[]), 13, INVALID_FETCH_SESSION_EPOCH),
            (request(id ^ 1, 1, &[], &[]), 13, FETCH_SESSION_ID_NOT_FOUND),
            (request(id, 1, &[], &[]), 12, FETCH_SESSION_TOPIC_ID_ERROR),
        ] {
            let context = sessions.context(1, &request, version);
            assert_eq!(context, FetchContext::Error(code));
            assert!(sessions.wanted(context, &request, version).is_empty());
            let (response, _) = sessions.respond(1, context, version, Vec::new());
            assert_eq!((response.error_code, response.session_id), (code, 0));
            assert!(response.responses.is_empty());
        }
        let idle = fetch(&mut sessions, 2, &request(id, 1, &[], &[]), 10, &[]);
        assert_eq!(
            idle.error_code, 0,
            "a refused request leaves the session as it was"
        );
    }

    #[test]
    fn the_final_epoch_closes_a_session_and_a_full_fetch_replaces_it() {
        let mut sessions = FetchSessions::default();
        let id = opened(&mut sessions);
        let closing = fetch(
            &mut sessions,
            1,
            &request(id, FINAL_EPOCH, &[], &[]),
            10,
            &[],
        );
        assert_eq!((closing.error_code, closing.session_id), (0, 0));
        let gone = fetch(&mut sessions, 2, &request(id, 1, &[], &[]), 10, &[]);
        assert_eq!(gone.error_code, FETCH_SESSION_ID_NOT_FOUND);

        let id = opened(&mut sessions);
        let again = fetch(&mut sessions, 3, &request(id, 0, &[(0, 0)], &[]), 10, &[]);
        assert_ne!(again.session_id, 0);
        assert_eq!(
            sessions.open_sessions(),
            1,
            "a full Fetch naming a session closes it"
        );
        let old = sessions.context(4, &request(id, 1, &[], &[]), 13);
        assert_eq!(old, FetchContext::Error(FETCH_SESSION_ID_NOT_FOUND));

        let before_sessions = sessions.context(5, &request(0, 0, &[(0, 0)], &[]), 6);
        assert_eq!(
            before_sessions,
            FetchContext::Sessionless,
            "Fetch v6 has no sessions"
        );
    }

    #[test]
    fn a_full_cache_evicts_a_stale_or_a_smaller_session_or_opens_none() {
        let mut sessions = FetchSessions::new(1, 1_000);
        let first = opened(&mut sessions);
        let busy = fetch(&mut sessions, 500, &request(0, 0, &[(0, 0)], &[]), 10, &[]);
        assert_eq!(
            busy.session_id, 0,
            "no room, and the open session is neither stale nor smaller"
        );

        let late = fetch(
            &mut sessions,
            2_000,
            &request(0, 0, &[(0, 0)], &[]),
            10,
            &[],
        );
        assert_ne!(late.session_id, 0, "the stale session was evicted");
        let evicted = sessions.context(2_001, &request(first, 1, &[], &[]), 13);
        assert_eq!(evicted, FetchContext::Error(FETCH_SESSION_ID_NOT_FOUND));

        let used = fetch(
            &mut sessions,
            3_500,
            &request(late.session_id, 1, &[], &[]),
            10,
            &[],
        );
        assert_eq!(used.error_code, 0);
        let larger = fetch(
            &mut sessions,
            3_600,
            &request(0, 0, &[(0, 0), (1, 0)], &[]),
            10,
            &[],
        );
        assert_ne!(
            larger.session_id, 0,
            "a larger session takes an established smaller one's place"
        );
        assert_eq!(sessions.open_sessions(), 1);

        let (none, _) = FetchSessions::new(0, 1_000).respond(0, FetchContext::Full, 13, Vec::new());
        assert_eq!(none.session_id, 0, "a cache of no sessions opens none");
    }
}
