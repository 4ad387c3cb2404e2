//! Kafka clients of the node ([`crate::serve`]): the listener's calls are answered on the
//! driver's thread, between the kernel's steps, from the logs the driver owns. A client's
//! write meets the produce gate as the kernel last set it, so a stop or a pause reaches
//! connected clients with the next request. A CreateTopics, CreatePartitions or DeleteTopics
//! comes back from the broker as work, which the driver carries out (`topic_admin.rs`) before
//! it answers.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::Duration;

use kmirror_kernel::batch::{BatchHeader, ControlType, LeaderBatch};
use kmirror_kernel::coordinator::Coordinator;
use kmirror_kernel::log::PartitionLog;
use kmirror_kernel::node::PartitionKey;
use kmirror_kernel::partitioner::mirror_state_partition;
use kmirror_kernel::types::{
    LeaderEpoch, MirrorName, MirrorPartition, Offset, ProducerEpoch, ProducerId,
};

use crate::error::FileLogError;
use crate::file_log::FileLog;
use crate::record_batch::RawBatch;
use crate::serve::{lme, Broker, Listener, NodeCall, ServeError, ServeOptions, ServedNode};

use super::super::dest::{NodeDest, NodeMeta};
use super::super::follow::Follow;
use super::super::NodeError;
use super::followers::NodeFollowers;
use super::source::Following;
use super::topic_admin::Growing;
use super::{gate_open, NodeDriver};
use crate::mirror_state_log::MirrorStateLog;

/// Most client calls answered in one step (the kernel's work goes on between them).
const CALLS_PER_STEP: usize = 64;

/// The listener, its calls, and the broker answering them.
pub(super) struct Clients {
    listener: Listener,
    calls: Receiver<NodeCall>,
    broker: Broker,
    /// A call received while the driver waited, answered at its next step.
    waiting: Option<NodeCall>,
    /// The driver's effect count when the parked Fetches were last looked at: the logs change
    /// only through effects and client writes.
    seen_effects: u64,
    /// CreateTopics and CreatePartitions carried out, waiting for their new partitions' gates.
    pub(super) growing: Vec<Growing>,
}

impl Clients {
    /// Topic `name` was deleted: the groups' committed offsets of it go.
    pub(super) fn forget_topic(&mut self, name: &str) -> Result<(), ServeError> {
        self.broker.forget_topic(name)
    }
}

/// The driver's parts a client call reads and writes.
struct View<'a> {
    dest: &'a NodeDest,
    logs: &'a mut BTreeMap<PartitionKey, FileLog>,
    followers: &'a mut NodeFollowers,
    gates: &'a BTreeMap<PartitionKey, bool>,
    states: &'a BTreeMap<u32, MirrorStateLog>,
    started: bool,
    /// The running mirror's selection, when it follows a source.
    follow: Option<&'a Follow>,
}

impl ServedNode for View<'_> {
    fn meta(&self) -> &NodeMeta {
        self.dest.meta()
    }

    fn root(&self) -> &Path {
        self.dest.root()
    }

    fn log(&self, key: &PartitionKey) -> Option<&FileLog> {
        self.logs.get(key)
    }

    fn state_coordinator(&self, key: &MirrorPartition) -> Option<&Coordinator> {
        let k = mirror_state_partition(key, self.dest.meta().mirror_state_partitions).ok()?;
        self.states.get(&k).map(MirrorStateLog::coordinator)
    }

    fn writable(&self, key: &PartitionKey) -> bool {
        gate_open(self.dest.meta(), self.started, self.gates, self.states, key)
    }

    fn append(
        &mut self,
        key: &PartitionKey,
        leader_epoch: LeaderEpoch,
        batch: &RawBatch,
    ) -> Result<BatchHeader, ServeError> {
        self.append_leader(key, |log| log.append_client_batch(leader_epoch, batch))
    }

    fn append_marker(
        &mut self,
        key: &PartitionKey,
        leader_epoch: LeaderEpoch,
        producer: (ProducerId, ProducerEpoch),
        control: ControlType,
    ) -> Result<BatchHeader, ServeError> {
        let batch = LeaderBatch::Control {
            control,
            producer: Some(producer),
        };
        self.append_leader(key, |log| log.append_as_leader(leader_epoch, batch))
    }

    fn delete_records(&mut self, key: &PartitionKey, offset: Offset) -> Result<Offset, ServeError> {
        let Some(log) = self.logs.get_mut(key) else {
            return Err(ServeError::NoLog { partition: *key });
        };
        let failed = |log: &FileLog, source| ServeError::Log {
            dir: log.dir().to_path_buf(),
            source: Box::new(source),
        };
        let start = log
            .delete_records_before(offset)
            .map_err(|e| failed(log, e))?;
        // Kafka's followers move their log start to the leader's from its fetch answers;
        // in-process ones move with it.
        for f in self.followers.of_mut(key) {
            f.log
                .delete_records_before(start)
                .map_err(|e| failed(&f.log, e))?;
        }
        Ok(start)
    }

    fn mirror_selecting(&self, name: &str) -> Option<MirrorName> {
        let follow = self.follow?;
        follow.selects(name, false).then(|| follow.mirror.clone())
    }
}

impl View<'_> {
    /// Appends to `key` with `append` (as its leader), then the followers replicate it and the
    /// high watermark moves (to the log end offset: every replica is in the ISR).
    fn append_leader(
        &mut self,
        key: &PartitionKey,
        append: impl FnOnce(&mut FileLog) -> Result<BatchHeader, FileLogError>,
    ) -> Result<BatchHeader, ServeError> {
        let Some(log) = self.logs.get_mut(key) else {
            return Err(ServeError::NoLog { partition: *key });
        };
        let failed = |log: &FileLog, source| ServeError::Log {
            dir: log.dir().to_path_buf(),
            source: Box::new(source),
        };
        let header = append(log).map_err(|e| failed(log, e))?;
        self.followers
            .replicate(key, log)
            .map_err(|e| ServeError::Log {
                dir: e.dir,
                source: e.source,
            })?;
        Ok(header)
    }
}

impl NodeDriver {
    /// Serves Kafka clients on `options.listen` from now on; returns the address listened on.
    pub fn serve_clients(&mut self, options: &ServeOptions) -> Result<SocketAddr, NodeError> {
        let (send, calls) = mpsc::channel();
        let listener = Listener::start(options, send)?;
        let address = listener.address();
        let advertised = options
            .advertised
            .clone()
            .unwrap_or_else(|| address.to_string());
        let broker = Broker::new(self.dest.meta().broker, &advertised, self.dest.root())?;
        self.clients = Some(Clients {
            listener,
            calls,
            broker,
            waiting: None,
            seen_effects: 0,
            growing: Vec::new(),
        });
        Ok(address)
    }

    /// The address clients connect to, when this driver serves them.
    pub fn client_address(&self) -> Option<SocketAddr> {
        self.clients.as_ref().map(|c| c.listener.address())
    }

    /// The clients, if served, and the view of the driver's parts their calls read and write
    /// (borrowed side by side).
    fn clients_and_view(&mut self) -> (Option<&mut Clients>, View<'_>) {
        let view = View {
            dest: &self.dest,
            logs: &mut self.logs,
            followers: &mut self.followers,
            gates: &self.gates,
            states: &self.states,
            started: self.started,
            follow: self.following.as_ref().map(Following::follow),
        };
        (self.clients.as_mut(), view)
    }

    /// Answers the clients' new calls and the parked Fetches that can be answered. A call that
    /// changes topics comes back from the broker as work
    /// ([`TopicWork`](crate::serve::TopicWork)): it is carried out, and answered, before the
    /// next call is looked at. Returns whether it answered a new call.
    pub(super) fn poll_clients(&mut self, now_ms: i64) -> Result<bool, NodeError> {
        let mut answered = 0;
        while answered < CALLS_PER_STEP {
            let (Some(clients), mut view) = self.clients_and_view() else {
                return Ok(false);
            };
            let call = match clients.waiting.take() {
                Some(call) => call,
                None => match clients.calls.try_recv() {
                    Ok(call) => call,
                    Err(_) => break,
                },
            };
            let work = match call {
                NodeCall::Client(call) => clients.broker.handle(now_ms, *call, &mut view)?,
                NodeCall::MirrorStates(call) => {
                    let _ = call.reply.send(lme::answer(&view, &call.request));
                    None
                }
            };
            answered += 1;
            if let Some(work) = work {
                self.carry_out(now_ms, work)?;
            }
        }
        self.answer_grown(now_ms);
        let effects = self.effects;
        let (Some(clients), mut view) = self.clients_and_view() else {
            return Ok(false);
        };
        let moved = answered > 0 || clients.seen_effects != effects;
        clients.seen_effects = effects;
        clients.broker.poll(now_ms, moved, &mut view)?;
        Ok(answered > 0)
    }

    /// Waits until `until_ms` (on the caller's clock, `now_ms` now) or the next client call,
    /// whichever is first. `false` when no clients are served (the caller sleeps instead).
    pub(super) fn wait_for_clients(&mut self, now_ms: i64, until_ms: i64) -> bool {
        let Some(clients) = self.clients.as_mut() else {
            return false;
        };
        let until_ms = clients
            .broker
            .next_deadline_ms()
            .map_or(until_ms, |d| d.min(until_ms));
        let wait = Duration::from_millis(u64::try_from(until_ms - now_ms).unwrap_or(0).max(1));
        match clients.calls.recv_timeout(wait) {
            Ok(call) => clients.waiting = Some(call),
            Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => {}
        }
        true
    }
}
