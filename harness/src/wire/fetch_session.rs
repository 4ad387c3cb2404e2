//! [`FetchSession`]: the client side of a Kafka fetch session (KIP-227), so that an idle
//! mirror of many partitions sends small Fetch requests.
//!
//! The first request of a session is **full** (session id 0, epoch 0: every partition); the
//! broker answers with a session id (0: it made none, and every request stays full). Each later
//! request is **incremental** (that id, the next epoch): only the partitions added or whose
//! fetch parameters changed (fetch offset, last fetched epoch, current leader epoch, maximum
//! bytes), and the partitions dropped as forgotten topics. The broker answers only the
//! partitions with something new (records, an error, a moved high watermark, last stable or log
//! start offset, a diverging epoch); a partition it leaves out has nothing new, and is answered
//! with its last known offsets and no records. `FETCH_SESSION_ID_NOT_FOUND`,
//! `INVALID_FETCH_SESSION_EPOCH` or `FETCH_SESSION_TOPIC_ID_ERROR` (the broker evicted the
//! session or restarted), and any failed request, reset the session: the next request is full.

use std::collections::BTreeMap;

use kmirror_kernel::types::TopicId;

use super::client::FetchPartitionParams;

/// `FETCH_SESSION_ID_NOT_FOUND`.
pub const FETCH_SESSION_ID_NOT_FOUND: i16 = 70;
/// `INVALID_FETCH_SESSION_EPOCH`.
pub const INVALID_FETCH_SESSION_EPOCH: i16 = 71;
/// `FETCH_SESSION_TOPIC_ID_ERROR`.
pub const FETCH_SESSION_TOPIC_ID_ERROR: i16 = 106;

/// Whether `code` means the session is gone and the next request must be full.
pub fn is_session_error(code: i16) -> bool {
    matches!(
        code,
        FETCH_SESSION_ID_NOT_FOUND | INVALID_FETCH_SESSION_EPOCH | FETCH_SESSION_TOPIC_ID_ERROR
    )
}

/// A partition's key in a session.
pub type SessionKey = (TopicId, i32);

/// The last offsets the broker gave for a partition, standing for it when an incremental
/// answer leaves it out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LastOffsets {
    /// The high watermark.
    pub high_watermark: i64,
    /// The last stable offset.
    pub last_stable_offset: i64,
    /// The log start offset.
    pub log_start_offset: i64,
}

/// One broker's fetch session for one isolation level. See the [module documentation](self).
#[derive(Clone, Debug, Default)]
pub struct FetchSession {
    id: i32,
    epoch: i32,
    /// What the broker's session holds per partition: the parameters last sent.
    sent: BTreeMap<SessionKey, FetchPartitionParams>,
    last: BTreeMap<SessionKey, LastOffsets>,
    /// Full requests answered.
    pub full_requests: u64,
    /// Incremental requests answered.
    pub incremental_requests: u64,
    /// Partition entries sent in requests, full or incremental.
    pub partitions_sent: u64,
}

/// What the next request carries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionRequest {
    /// The session id to send (0 for a full request).
    pub session_id: i32,
    /// The epoch to send (0 for a full request).
    pub epoch: i32,
    /// The partitions to send.
    pub partitions: Vec<FetchPartitionParams>,
    /// The partitions to drop from the session.
    pub forgotten: Vec<SessionKey>,
}

impl SessionRequest {
    /// Whether it is a full request.
    pub fn is_full(&self) -> bool {
        self.session_id == 0
    }
}

fn key(p: &FetchPartitionParams) -> SessionKey {
    (p.topic_id, p.partition)
}

impl FetchSession {
    /// A session not yet opened (the first request is full).
    pub fn new() -> Self {
        FetchSession::default()
    }

    /// The broker's session id (0: none).
    pub fn id(&self) -> i32 {
        self.id
    }

    /// The request for `wanted` (the partitions of this round, in order).
    pub fn request(&self, wanted: &[FetchPartitionParams]) -> SessionRequest {
        if self.id == 0 {
            return SessionRequest {
                session_id: 0,
                epoch: 0,
                partitions: wanted.to_vec(),
                forgotten: Vec::new(),
            };
        }
        let partitions = wanted
            .iter()
            .filter(|p| self.sent.get(&key(p)) != Some(p))
            .copied()
            .collect();
        let forgotten = self
            .sent
            .keys()
            .filter(|k| !wanted.iter().any(|p| key(p) == **k))
            .copied()
            .collect();
        SessionRequest {
            session_id: self.id,
            epoch: self.epoch,
            partitions,
            forgotten,
        }
    }

    /// Records that the broker accepted `request` (for `wanted`) and answered with
    /// `session_id`.
    pub fn accepted(
        &mut self,
        request: &SessionRequest,
        wanted: &[FetchPartitionParams],
        session_id: i32,
    ) {
        if request.is_full() {
            self.full_requests += 1;
            self.last.clear();
            self.id = session_id;
            self.epoch = 1;
        } else {
            self.incremental_requests += 1;
            // Kafka's epochs wrap from i32::MAX to 1 (0 is the initial epoch).
            self.epoch = if self.epoch == i32::MAX {
                1
            } else {
                self.epoch + 1
            };
        }
        if self.id == 0 {
            self.sent.clear();
            self.last.clear();
            return;
        }
        self.sent = wanted.iter().map(|p| (key(p), *p)).collect();
        self.last.retain(|k, _| self.sent.contains_key(k));
    }

    /// Records a partition's offsets from an answer.
    pub fn answered(&mut self, key: SessionKey, offsets: LastOffsets) {
        if self.id != 0 {
            self.last.insert(key, offsets);
        }
    }

    /// The last offsets of a partition an incremental answer left out.
    pub fn last_offsets(&self, key: SessionKey) -> Option<LastOffsets> {
        self.last.get(&key).copied()
    }

    /// Forgets the session: the next request is full.
    pub fn reset(&mut self) {
        self.id = 0;
        self.epoch = 0;
        self.sent.clear();
        self.last.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(partition: i32, offset: i64) -> FetchPartitionParams {
        FetchPartitionParams {
            topic_id: TopicId([7; 16]),
            partition,
            fetch_offset: offset,
            last_fetched_epoch: None,
            current_leader_epoch: Some(3),
            partition_max_bytes: 1 << 20,
        }
    }

    #[test]
    fn full_then_incremental_with_only_the_changes() {
        let mut s = FetchSession::new();
        let round1 = [p(0, 10), p(1, 20), p(2, 30)];
        let r = s.request(&round1);
        assert!(r.is_full());
        assert_eq!(r.partitions.len(), 3);
        s.accepted(&r, &round1, 42);
        // Nothing changed: an empty incremental request.
        let r = s.request(&round1);
        assert_eq!((r.session_id, r.epoch), (42, 1));
        assert!(r.partitions.is_empty() && r.forgotten.is_empty());
        s.accepted(&r, &round1, 42);
        // Partition 1 advanced, partition 2 dropped, partition 3 added.
        let round3 = [p(0, 10), p(1, 25), p(3, 0)];
        let r = s.request(&round3);
        assert_eq!(r.epoch, 2);
        assert_eq!(r.partitions, vec![p(1, 25), p(3, 0)]);
        assert_eq!(r.forgotten, vec![(TopicId([7; 16]), 2)]);
        s.accepted(&r, &round3, 42);
        assert_eq!((s.full_requests, s.incremental_requests), (1, 2));
    }

    #[test]
    fn a_broker_without_sessions_gets_full_requests() {
        let mut s = FetchSession::new();
        let round = [p(0, 10)];
        let r = s.request(&round);
        s.accepted(&r, &round, 0);
        assert!(s.request(&round).is_full());
    }

    #[test]
    fn a_reset_makes_the_next_request_full_and_forgets_offsets() {
        let mut s = FetchSession::new();
        let round = [p(0, 10)];
        let r = s.request(&round);
        s.accepted(&r, &round, 9);
        let offsets = LastOffsets {
            high_watermark: 12,
            last_stable_offset: 12,
            log_start_offset: 0,
        };
        s.answered(key(&round[0]), offsets);
        assert_eq!(s.last_offsets(key(&round[0])), Some(offsets));
        s.reset();
        assert!(s.request(&round).is_full());
        assert_eq!(s.last_offsets(key(&round[0])), None);
        assert!(is_session_error(FETCH_SESSION_ID_NOT_FOUND));
        assert!(is_session_error(INVALID_FETCH_SESSION_EPOCH));
        assert!(!is_session_error(6));
    }
}
