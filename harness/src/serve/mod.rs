//! `kmirror serve`: a node destination on Kafka's wire, so that Kafka's own clients read it
//! while it mirrors and write to it once it is failed over. The harness is the kernel's
//! reference embedding; this is the embedding's broker front end.
//!
//! # The contract
//!
//! - **One broker.** The node is the only broker of its metadata, the leader of every
//!   partition it holds (one replica: the high watermark is the log end offset), the
//!   coordinator of every group. Metadata answers the advertised address and each partition's
//!   leader epoch ([`leader_epoch`](broker::leader_epoch)).
//! - **The kernel's gates on the wire.** A Produce to a partition whose gate is closed (the
//!   kernel's `SetWritable(false)`: a mirrored partition that is not STOPPED) is refused with
//!   `READ_ONLY_TOPIC` (134, the KIP's prototype's code; Kafka 4.4 gives 134 another name,
//!   `GROUP_DELETION_FAILED`, which a stock client reports, with kmirror's message where the
//!   response carries one; AddPartitionsToTxn's carries none). The gate is read at the
//!   moment of the append, on the node's thread, so a stop takes effect for connected
//!   producers at once: no reconnect.
//! - **Threads.** [`Listener`] accepts clients and runs one thread per connection: framing
//!   and decoding there ([`listener`]); every decoded request goes, as a [`ClientCall`], to
//!   the node's thread, which owns the logs. There the node driver hands it to [`Broker`]
//!   with a [`ServedNode`] view of its logs and gates; the Broker answers at once, or parks a
//!   Fetch that waits for data (long poll) and answers it on a later
//!   [`Broker::poll`], or returns the [`TopicWork`] of a CreateTopics, CreatePartitions or
//!   DeleteTopics, which the driver carries out and then answers ([`topic_admin`]). Nothing
//!   else changes the logs.
//! - **Zero copy.** A Fetch answer's records are regions of the segment files, sent by the
//!   connection's thread with `sendfile` on a plaintext listener ([`fetch_frame`]); a
//!   truncation that meets them in flight closes the connection before the client has the
//!   whole answer ([`crate::file_region`]).
//! - **Bounded.** Frame size, connection count and idle time are limited
//!   ([`ServeOptions`]); a bad frame closes its connection with one log line.
//! - **Transactions.** The node is every transactional id's coordinator and every
//!   partition's leader ([`txn`]): EndTxn writes its COMMIT or ABORT markers itself
//!   ([`ServedNode::append_marker`]) after the coordinator's state file says PrepareCommit or
//!   PrepareAbort, so a restart between the two completes the transaction; [`Broker::poll`]
//!   aborts the transactions past their timeout or with a partition mirrored again.
//!
//! What is served, at which versions: [`versions`]; beside Kafka's APIs, the LME lookup a
//! failing-back mirror asks ([`lme`]); incremental fetch sessions ([`fetch_session`]). Not
//! yet: ACLs.
//! TLS (a PEM keystore) and SASL (PLAIN, SCRAM): [`security`], [`sasl`], [`scram`].

pub mod admin;
pub mod broker;
pub mod configs;
pub mod create_topics;
pub mod fetch;
pub mod fetch_frame;
pub mod fetch_session;
pub mod group;
pub mod listener;
pub mod lme;
pub mod metadata;
pub mod offsets;
pub mod produce;
pub mod sasl;
pub mod scram;
pub mod security;
pub mod topic_admin;
pub mod txn;
pub mod versions;

use std::path::PathBuf;
use std::sync::mpsc::SyncSender;
use std::time::Duration;

use kafka_protocol::messages::{RequestHeader, RequestKind, ResponseKind};

use crate::file_region::FileRegion;

pub use broker::{Broker, ServedNode};
pub use listener::Listener;
pub use topic_admin::{TopicEdit, TopicWork};

/// A response on its way to the connection's thread.
#[derive(Debug)]
pub struct Reply {
    /// The response.
    pub response: ResponseKind,
    /// A Fetch response's records that are regions of segment files, sent from the files
    /// ([`fetch_frame`]); their partitions' `records` are empty placeholders.
    pub regions: Vec<PlacedRegion>,
}

impl From<ResponseKind> for Reply {
    fn from(response: ResponseKind) -> Reply {
        Reply {
            response,
            regions: Vec::new(),
        }
    }
}

/// A Fetch response partition's records as a region of a segment file: the partition is
/// `responses[topic].partitions[partition]`.
#[derive(Clone, Debug)]
pub struct PlacedRegion {
    /// The topic's index in the response.
    pub topic: usize,
    /// The partition's index in its topic.
    pub partition: usize,
    /// The records.
    pub region: FileRegion,
}

/// Identifies one request handed to the node (unique in the process).
pub type CallId = u64;

/// One decoded client request, on its way to the node's thread.
#[derive(Debug)]
pub struct ClientCall {
    /// Unique per request.
    pub id: CallId,
    /// The request header (API key, version, correlation id, client id).
    pub header: RequestHeader,
    /// The request body.
    pub request: RequestKind,
    /// Where the answer goes (the connection's thread waits on it).
    pub reply: SyncSender<Reply>,
    /// The client's address (DescribeGroups reports it).
    pub client_host: String,
}

/// A request for the node's thread: a Kafka API kafka-protocol decodes, or the KIP's
/// `ReadMirrorStates` ([`lme`]).
#[derive(Debug)]
pub enum NodeCall {
    /// A Kafka client's request.
    Client(Box<ClientCall>),
    /// A mirror's last-mirrored-epoch lookup.
    MirrorStates(lme::MirrorStatesCall),
}

/// How the node serves Kafka clients.
#[derive(Clone, Debug)]
pub struct ServeOptions {
    /// The address to listen on (`host:port`; port 0 picks one).
    pub listen: String,
    /// The `host:port` Metadata tells clients to connect to (default: the listener's).
    pub advertised: Option<String>,
    /// Most connections open at once.
    pub max_connections: usize,
    /// Largest request frame accepted.
    pub max_request_bytes: usize,
    /// A connection with no request for this long is closed.
    pub idle_timeout: Duration,
    /// TLS and SASL on the listener ([`security::from_file`]); the default: PLAINTEXT.
    pub security: security::ListenerSecurity,
}

impl ServeOptions {
    /// Listens on `listen` with Kafka's defaults: 100 MiB frames
    /// (`socket.request.max.bytes`), 10 minutes idle (`connections.max.idle.ms`), and at most
    /// 1,000 connections.
    pub fn new(listen: &str) -> Self {
        ServeOptions {
            listen: listen.to_owned(),
            advertised: None,
            max_connections: 1_000,
            max_request_bytes: 100 << 20,
            idle_timeout: Duration::from_secs(600),
            security: security::ListenerSecurity::default(),
        }
    }
}

/// What can go wrong serving clients.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The listen address cannot be bound.
    #[error("cannot listen on {address}: {source}; choose a free address with --listen HOST:PORT")]
    Bind {
        /// The address.
        address: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The advertised address is not `host:port`.
    #[error("advertised address {0:?} is not host:port")]
    BadAdvertised(String),
    /// A client write to a partition's log failed on disk (the log is marked failed).
    #[error("write to {} failed: {source}", dir.display())]
    Log {
        /// The partition directory.
        dir: PathBuf,
        /// Why.
        #[source]
        source: Box<crate::error::FileLogError>,
    },
    /// The node holds no log for a partition its metadata lists.
    #[error("the node has no log for partition {partition:?} (its node.properties lists it)")]
    NoLog {
        /// The partition.
        partition: kmirror_kernel::node::PartitionKey,
    },
    /// The group coordinator could not read or write a group's file.
    #[error(transparent)]
    Group(#[from] group::GroupError),
    /// The transaction coordinator could not read or write its file.
    #[error(transparent)]
    Txn(#[from] txn::TxnError),
    /// The producer-id block file cannot be read or written.
    #[error("{action} {}: {source}", path.display())]
    ProducerIds {
        /// What was being done.
        action: &'static str,
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}
