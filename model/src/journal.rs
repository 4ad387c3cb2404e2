//! The journal of a trace: every kernel input (with the effects it returned) and every change
//! to a replica's log, in the order the model made them. It is what the harness replays on
//! real logs: the same inputs to the same kernel, the same log operations, then a comparison.
//!
//! Recording is off during model checking (one thread-local check per operation); it is on
//! only inside [`capture`].

use std::cell::RefCell;

use kmirror_kernel::batch::{BatchHeader, LeaderBatch};
use kmirror_kernel::effect::{Effect, LogEffect};
use kmirror_kernel::input::Input;
use kmirror_kernel::types::{BrokerId, LeaderEpoch, Offset};
use serde::{Deserialize, Serialize};

use crate::world::ClusterId;

/// One change to one replica's log.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub enum LogOp {
    /// A kernel log effect applied with `apply_log_effect`; `fetched` are the batches of the
    /// fetch response being handled (for `AppendFetched`).
    Effect {
        /// The effect.
        effect: LogEffect,
        /// The fetched batches' headers.
        fetched: Vec<BatchHeader>,
    },
    /// A local producer's append on the partition leader.
    AppendAsLeader {
        /// The leader epoch stamped.
        epoch: LeaderEpoch,
        /// What was appended.
        batch: LeaderBatch,
    },
    /// A follower copying batches from its leader.
    AppendAsFollower {
        /// The copied batches' headers.
        batches: Vec<BatchHeader>,
    },
    /// A follower truncating after a divergence or out-of-range answer.
    TruncateTo {
        /// The new LEO.
        offset: Offset,
    },
    /// A follower emptying its log to restart at its leader's log start.
    TruncateFullyAndStartAt {
        /// The new log start.
        offset: Offset,
    },
    /// The high watermark moving forward.
    AdvanceHighWatermark {
        /// The new HW.
        offset: Offset,
    },
    /// A new leader's epoch recorded at its LEO on election (Kafka's `Partition.makeLeader`).
    AssignEpochStartOffset {
        /// The new leader epoch.
        epoch: LeaderEpoch,
        /// Where it starts: the leader's LEO.
        offset: Offset,
    },
}

/// One journal entry.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub enum Event {
    /// Broker `broker` of `cluster` changed its log.
    Log {
        /// The cluster.
        cluster: ClusterId,
        /// The broker.
        broker: BrokerId,
        /// The change.
        op: LogOp,
    },
    /// The kernel of broker `broker` of `cluster` handled `input` and returned `effects`
    /// (empty when it ignored the input).
    Kernel {
        /// The cluster.
        cluster: ClusterId,
        /// The broker.
        broker: BrokerId,
        /// The input.
        input: Input,
        /// The effects returned.
        effects: Vec<Effect>,
    },
}

thread_local! {
    static JOURNAL: RefCell<Option<Vec<Event>>> = const { RefCell::new(None) };
}

/// Records the event `make` builds, if a capture is running on this thread.
pub fn record(make: impl FnOnce() -> Event) {
    JOURNAL.with(|j| {
        if let Some(events) = j.borrow_mut().as_mut() {
            events.push(make());
        }
    });
}

/// Runs `f` with recording on and returns its result and the events it recorded.
pub fn capture<T>(f: impl FnOnce() -> T) -> (T, Vec<Event>) {
    let outer = JOURNAL.with(|j| j.borrow_mut().replace(Vec::new()));
    let result = f();
    let events = JOURNAL.with(|j| std::mem::replace(&mut *j.borrow_mut(), outer));
    (result, events.unwrap_or_default())
}
