//! [`SourceCluster`]: every partition of the selected topics of a live Kafka cluster, fetched
//! the way Kafka's replica fetchers do: one Fetch per source broker per round, covering all the
//! partitions that broker leads; over a long round trip, several Fetches per broker in flight at
//! once, each with its share of them (fetch lanes, see `connection.rs`).
//!
//! - **Metadata** ([`SourceMetadata`]): for every selected topic ([`TopicSelection`]: names and
//!   globs) its name, id and partitions, each partition's leader and leader epoch, and the
//!   brokers' addresses. It is asked from a broker already connected (then the bootstrap
//!   addresses) on the first request, on demand ([`SourceCluster::refresh_metadata`],
//!   [`SourceCluster::invalidate_metadata`]), when older than
//!   [`SourceClusterOptions::metadata_max_age`], and before the next round after any
//!   partition's leadership error or a broker's failure. A selected name the cluster does not
//!   have, or a glob matching nothing, is an error of that entry alone
//!   ([`SourceMetadata::errors`]).
//! - **Connections**: per source broker, keyed by broker id, one [`KafkaClient`] per Fetch in
//!   flight (the first also carries every other request), connected on first use, closed after
//!   a connection error and reopened on the next request (to the broker's current address).
//! - **The coalesced fetch** ([`SourceCluster::fetch`]): the per-partition requests are grouped
//!   by their leader in the metadata, then by fetch lane ([`fetch_lanes`] of them per broker:
//!   one unless the round trip is long); each lane gets one Fetch (one per isolation level
//!   asked: Kafka's Fetch has one) with all its partitions, the lanes and brokers in parallel
//!   (one thread each, like Kafka's fetcher threads; [`SourceCluster::fetch_each`] hands each
//!   lane's answers over as soon as they are read), the partitions' order rotated every round so that a full
//!   response does not always starve the same ones. Each partition's answer is mapped as the kernel's
//!   `serve_fetch` answers for a local source: records
//!   as raw batches (a partial trailing batch dropped, batches ending below the fetch offset
//!   skipped, only batches ending below the isolation bound), a diverging epoch (KIP-320: after
//!   an unclean election on the source the new leader's shorter epoch is reported as it is, for
//!   the kernel's truncation rules), `OFFSET_OUT_OF_RANGE` with ListOffsets earliest / latest
//!   (one request each per broker for all such partitions).
//! - **Errors are per partition** ([`PartitionFetchError`]): a leadership error
//!   (`NOT_LEADER_OR_FOLLOWER`, `FENCED_LEADER_EPOCH`, `UNKNOWN_LEADER_EPOCH`,
//!   `LEADER_NOT_AVAILABLE`, `UNKNOWN_TOPIC_OR_PARTITION`...) fails that partition only, as
//!   retryable, and schedules a metadata refresh; a broker that cannot be reached fails only the
//!   partitions it leads; the other partitions of the same round are answered.
//!
//! [`SourceCluster::request_stats`] counts the requests sent to each broker (to see the
//! coalescing: one Fetch per broker and lane per round, whatever the number of partitions).
//!
//! - **The pipeline** ([`SourceCluster::send_fetches`], [`SourceCluster::poll_fetched`]): the
//!   same Fetches kept in flight between calls, each on the lane its caller names, each lane's
//!   answer handed over alone, so that no lane waits for another (Kafka's fetcher threads).
//!
//! The module's files, one concept each: `metadata.rs` (the metadata cache: what the source
//! has and who leads it), `fetch.rs` (the coalesced fetch engine), `pipeline.rs` (the same,
//! kept in flight lane by lane), `answer.rs` (one partition's
//! Fetch answer as the kernel's), `partition_error.rs` (each partition's own error),
//! `offsets.rs` (ListOffsets) and `read_access.rs` (the check before mirroring).

use std::collections::{BTreeMap, HashMap};
use std::num::NonZeroUsize;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::client::KafkaClient;
use super::security::SecurityConfig;
use super::topic_selection::TopicSelection;
use super::WireError;
use kmirror_kernel::types::{PartitionIndex, TopicId};

mod answer;
mod connection;
mod fetch;
#[cfg(test)]
mod lane_tests;
mod metadata;
mod offsets;
mod partition_error;
mod per_broker;
mod pipeline;
#[cfg(test)]
mod pipeline_tests;
mod position;
mod read_access;
#[cfg(test)]
mod tests;

#[cfg(test)]
pub(crate) use answer::split_batches;
use connection::BrokerConnection;
pub use connection::{fetch_lanes, AUTO_LINK_BYTES_PER_SEC, MAX_AUTO_FETCHES_IN_FLIGHT};
pub use fetch::{
    CurrentLeaderEpoch, PartitionFetchRequest, PartitionFetchResult, PartitionFetched,
};
pub use metadata::{
    ClusterError, SourceMetadata, SourcePartition, SourceTopic, TopicError, TopicExistence,
};
pub use partition_error::PartitionFetchError;
pub use position::SourcePosition;

/// Timeouts, sizes and the metadata's age of a [`SourceCluster`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SourceClusterOptions {
    /// How long a TCP connect may take.
    pub connect_timeout: Duration,
    /// How long a request may wait for its answer.
    pub request_timeout: Duration,
    /// How long a broker may hold a Fetch waiting for data (`max_wait_ms`).
    pub fetch_max_wait_ms: i32,
    /// The most bytes of records one Fetch returns in all (`max_bytes`).
    pub fetch_max_bytes: i32,
    /// The most bytes of records one Fetch returns per partition (`partition_max_bytes`).
    pub partition_max_bytes: i32,
    /// The metadata is asked again when older than this (Kafka's `metadata.max.age.ms`).
    pub metadata_max_age: Duration,
    /// A refresh scheduled by an error waits at least this long after the previous attempt
    /// (Kafka's `retry.backoff.ms`), so that rounds failing fast (a broker refusing
    /// connections) do not ask Metadata each time.
    pub metadata_refresh_backoff: Duration,
    /// Whether the coalesced Fetch of each broker runs in a fetch session (KIP-227): after
    /// the first, full request only the partitions that changed are sent, and only those with
    /// news are answered ([`FetchSession`](super::fetch_session::FetchSession)); each fetch
    /// lane has its own.
    pub fetch_sessions: bool,
    /// How many Fetches each broker has in flight at once, each on its own connection with a
    /// share of the broker's partitions (see `connection.rs`); `None` (the default): as many
    /// as the bandwidth-delay product needs, from the round trip the connections measure
    /// ([`fetch_lanes`]).
    pub fetches_in_flight: Option<NonZeroUsize>,
}

impl Default for SourceClusterOptions {
    /// 3 s to connect, 30 s per request, fetches held at most 100 ms, 10 MiB per fetch and
    /// 1 MiB per partition (the KIP-1279 prototype's `mirror.fetch.response.max.bytes` and
    /// `mirror.fetch.max.bytes`, Kafka's replica fetcher defaults: a mirror fetches as a
    /// follower does; smaller answers also let the node driver write one while it reads the
    /// next, see BENCHMARKS.md, `node_mirroring`), metadata at most 5 minutes old and
    /// refreshed at most every 100 ms, fetch sessions on, Fetches in flight from the measured
    /// round trip.
    fn default() -> Self {
        SourceClusterOptions {
            connect_timeout: Duration::from_secs(3),
            request_timeout: Duration::from_secs(30),
            fetch_max_wait_ms: 100,
            fetch_max_bytes: 10 << 20,
            partition_max_bytes: 1 << 20,
            metadata_max_age: Duration::from_secs(300),
            metadata_refresh_backoff: Duration::from_millis(100),
            fetch_sessions: true,
            fetches_in_flight: None,
        }
    }
}

/// Requests sent to one broker.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BrokerStats {
    /// Fetch requests (each covering many partitions).
    pub fetch_requests: u64,
    /// Partition entries in those Fetch requests.
    pub partitions_fetched: u64,
    /// ListOffsets requests (after `OFFSET_OUT_OF_RANGE`, or asked directly).
    pub list_offsets_requests: u64,
    /// Metadata requests.
    pub metadata_requests: u64,
    /// Requests that failed as a whole (connection errors, malformed answers).
    pub failed_requests: u64,
    /// Fetch requests sent incremental in a fetch session (a subset of `fetch_requests`).
    pub incremental_fetch_requests: u64,
    /// Partition entries actually sent in Fetch requests (in a fetch session, only the
    /// changed ones; without, as `partitions_fetched`).
    pub partitions_sent: u64,
}

impl std::ops::AddAssign for BrokerStats {
    fn add_assign(&mut self, other: BrokerStats) {
        self.fetch_requests += other.fetch_requests;
        self.partitions_fetched += other.partitions_fetched;
        self.list_offsets_requests += other.list_offsets_requests;
        self.metadata_requests += other.metadata_requests;
        self.failed_requests += other.failed_requests;
        self.incremental_fetch_requests += other.incremental_fetch_requests;
        self.partitions_sent += other.partitions_sent;
    }
}

/// Many partitions of a live Kafka cluster. See the [module documentation](self).
#[derive(Debug)]
pub struct SourceCluster {
    bootstrap: Vec<KafkaClient>,
    bootstrap_metadata_requests: u64,
    selection: TopicSelection,
    options: SourceClusterOptions,
    security: Arc<SecurityConfig>,
    metadata: Option<SourceMetadata>,
    metadata_at: Option<Instant>,
    refreshed_at: Option<Instant>,
    stale: bool,
    last_metadata_error: Option<WireError>,
    brokers: HashMap<i32, BrokerConnection>,
    /// Successful metadata refreshes so far.
    metadata_generation: u64,
    /// The shortest round trip any connection's handshake measured.
    round_trip: Option<Duration>,
    /// The fetches kept in flight between calls ([`SourceCluster::send_fetches`]).
    pipeline: pipeline::Pipeline,
}

impl SourceCluster {
    /// The cluster reached at `bootstrap` (`host:port`, several separated by commas), its
    /// topics selected by `selection`. Nothing is sent until the first request.
    pub fn new(bootstrap: &str, selection: TopicSelection, options: SourceClusterOptions) -> Self {
        let bootstrap = bootstrap
            .split(',')
            .map(str::trim)
            .filter(|a| !a.is_empty())
            .map(|a| KafkaClient::new(a, options.connect_timeout, options.request_timeout))
            .collect();
        SourceCluster {
            bootstrap,
            bootstrap_metadata_requests: 0,
            selection,
            options,
            security: Arc::default(),
            metadata: None,
            metadata_at: None,
            refreshed_at: None,
            stale: true,
            last_metadata_error: None,
            brokers: HashMap::new(),
            metadata_generation: 0,
            round_trip: None,
            pipeline: pipeline::Pipeline::new(),
        }
    }

    /// The same cluster, every connection (bootstrap, Metadata, Fetch, ListOffsets) with
    /// `security` (TLS, SASL). Open connections are closed.
    pub fn with_security(mut self, security: Arc<SecurityConfig>) -> Self {
        self.set_security(security);
        self
    }

    /// Sets the security of every connection; open connections are closed.
    pub fn set_security(&mut self, security: Arc<SecurityConfig>) {
        for client in &mut self.bootstrap {
            let plain = KafkaClient::new(
                client.address(),
                self.options.connect_timeout,
                self.options.request_timeout,
            );
            *client = plain.with_security(security.clone());
        }
        self.brokers.clear();
        self.pipeline.disconnect();
        self.security = security;
    }

    /// The security of its connections.
    pub fn security(&self) -> &Arc<SecurityConfig> {
        &self.security
    }

    /// The bootstrap addresses, separated by commas.
    pub fn bootstrap(&self) -> String {
        self.bootstrap
            .iter()
            .map(KafkaClient::address)
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The topic selection.
    pub fn selection(&self) -> &TopicSelection {
        &self.selection
    }

    /// Selects `selection` from now on: the metadata is asked again with the next request,
    /// over the connections already open.
    pub fn set_selection(&mut self, selection: TopicSelection) {
        self.selection = selection;
        self.invalidate_metadata();
    }

    /// The options.
    pub fn options(&self) -> &SourceClusterOptions {
        &self.options
    }

    /// Requests sent so far, per broker id.
    pub fn request_stats(&self) -> BTreeMap<i32, BrokerStats> {
        let mut stats: BTreeMap<i32, BrokerStats> =
            self.brokers.iter().map(|(id, c)| (*id, c.stats)).collect();
        for (id, pipelined) in &self.pipeline.stats {
            *stats.entry(*id).or_default() += *pipelined;
        }
        stats
    }

    /// The shortest round trip to the source the connections' handshakes measured so far
    /// (`None` before the first connection).
    pub fn measured_round_trip(&self) -> Option<Duration> {
        self.round_trip
    }

    /// Takes in a round trip a connection measured.
    fn note_round_trip(&mut self, measured: Option<Duration>) {
        self.round_trip = metadata::min_round_trip(self.round_trip, measured);
    }

    /// How many Fetches in flight a broker leading `partitions` of a round gets
    /// ([`fetch_lanes`]).
    pub fn fetches_in_flight(&self, partitions: usize) -> usize {
        fetch_lanes(
            self.options.fetches_in_flight,
            self.round_trip,
            self.options.fetch_max_bytes,
            partitions,
        )
    }

    /// The most Fetches one broker had in flight in the last rounds or in the pipeline (its
    /// fetch lanes), one before any.
    pub fn most_fetches_in_flight(&self) -> usize {
        self.brokers
            .values()
            .map(|c| c.lanes.len())
            .chain([self.pipeline.most_lanes()])
            .max()
            .unwrap_or(1)
            .max(1)
    }

    /// Metadata requests sent to the bootstrap addresses (not yet known by broker id).
    pub fn bootstrap_metadata_requests(&self) -> u64 {
        self.bootstrap_metadata_requests
    }

    /// The connection of broker `id` at `address` (a new one if it moved).
    fn take_connection(&mut self, id: i32, address: &str) -> BrokerConnection {
        match self.brokers.remove(&id) {
            Some(c) if c.client().address() == address => c,
            old => BrokerConnection::new(
                address,
                &self.options,
                &self.security,
                old.map(|c| c.stats).unwrap_or_default(),
            ),
        }
    }

    /// The client of broker `id` (connected lazily), for requests this layer does not make.
    pub fn broker_client(&mut self, id: i32) -> Result<&mut KafkaClient, ClusterError> {
        let address =
            self.metadata()?
                .brokers
                .get(&id)
                .cloned()
                .ok_or_else(|| ClusterError::Metadata {
                    tried: self.bootstrap(),
                    last: WireError::Connect {
                        address: format!("broker id {id}"),
                        source: std::io::Error::other("the source's metadata has no such broker"),
                    },
                })?;
        let connection = self.take_connection(id, &address);
        Ok(self.brokers.entry(id).or_insert(connection).client_mut())
    }

    /// The client of the leader of `topic_id` / `partition` (for requests this layer does not
    /// make, as OffsetForLeaderEpoch), with the topic's name and the leader's id. The
    /// metadata is asked first if it is stale; a failed request through the client should be
    /// followed by [`invalidate_metadata`](Self::invalidate_metadata).
    pub fn leader_client(
        &mut self,
        topic_id: TopicId,
        partition: PartitionIndex,
    ) -> Result<(&mut KafkaClient, String, i32), PartitionFetchError> {
        self.refresh_if_due();
        let leader = self.resolve(topic_id, partition).inspect_err(|e| {
            if !matches!(e, PartitionFetchError::NoMetadata { .. }) {
                self.stale = true;
            }
        })?;
        let connection = self.take_connection(leader.broker, &leader.address);
        let connection = self.brokers.entry(leader.broker).or_insert(connection);
        Ok((connection.client_mut(), leader.topic, leader.broker))
    }
}
