//! What the exact-effect tests of the partition state machine share: a driver that feeds one
//! partition its inputs, applies its log effects and stores its writes in a coordinator, and
//! builders of the effects and records the tests expect.
#![allow(dead_code)] // each test file uses a part

use im::OrdSet;
use kmirror_kernel::apply::apply_log_effect;
use kmirror_kernel::batch::BatchHeader;
use kmirror_kernel::config::{FetchIsolation, MirrorConfig};
use kmirror_kernel::coordinator::Coordinator;
use kmirror_kernel::desired::DesiredState;
use kmirror_kernel::effect::{Effect, RequestId};
use kmirror_kernel::input::Input;
use kmirror_kernel::mem_log::MemLog;
use kmirror_kernel::partition::PartitionMirror;
use kmirror_kernel::records::MirrorPartitionStateValue;
use kmirror_kernel::state::MirrorState;
use kmirror_kernel::types::{MirrorName, MirrorPartition, TopicId};

pub const ME: i32 = 1;

pub fn mirror() -> MirrorName {
    MirrorName::new("east").unwrap()
}

pub fn key() -> MirrorPartition {
    MirrorPartition {
        mirror: mirror(),
        topic_id: TopicId::from_u64(7),
        partition: 0,
    }
}

pub fn set(ids: &[i32]) -> OrdSet<i32> {
    ids.iter().copied().collect()
}

/// One partition, its local log and its coordinator, driven input by input.
pub struct Driver {
    /// The partition's configuration.
    pub config: MirrorConfig,
    /// The state machine under test.
    pub mirror: PartitionMirror,
    /// Its local log.
    pub log: MemLog,
    /// Its `__mirror_state` coordinator.
    pub coordinator: Coordinator,
    /// The batches the next `AppendFetched` appends.
    pub fetched: Vec<BatchHeader>,
}

impl Driver {
    pub fn new(config: MirrorConfig) -> Self {
        Driver {
            coordinator: Coordinator::new(config.transitions.clone()),
            config,
            mirror: PartitionMirror::new(ME, key().topic_id, 0, DesiredState::Mirror(mirror())),
            log: MemLog::new(),
            fetched: Vec::new(),
        }
    }

    /// Handles `input`, applies the log effects to the local log, returns all effects.
    pub fn step(&mut self, input: Input) -> Vec<Effect> {
        let effects = self
            .mirror
            .handle(&self.config, input, &self.log)
            .expect("input applies");
        for e in &effects {
            if let Effect::Log(le) = e {
                apply_log_effect(&mut self.log, le, &self.fetched).expect("log effect applies");
            }
        }
        effects
    }

    /// Stores the single `WriteState` of `effects` in the coordinator and acknowledges it.
    pub fn ack_write(&mut self, effects: &[Effect]) -> Vec<Effect> {
        let (request, value, expected) = effects
            .iter()
            .find_map(|e| match e {
                Effect::WriteState {
                    request,
                    value,
                    expected_state_epoch,
                    ..
                } => Some((*request, value.clone(), *expected_state_epoch)),
                _ => None,
            })
            .expect("a WriteState effect");
        let stored = self
            .coordinator
            .write_state(&key(), value, expected)
            .expect("write accepted");
        self.step(Input::StateWritten {
            request,
            value: stored,
        })
    }

    pub fn lead(&mut self, epoch: i32, isr: &[i32]) -> Vec<Effect> {
        self.step(Input::BecameLeader {
            leader_epoch: epoch,
            replicas: set(isr),
            isr: set(isr),
        })
    }

    pub fn read(&mut self, request: u64) -> Vec<Effect> {
        let value = self.coordinator.read_state(&key()).cloned();
        self.step(Input::StateRead {
            request: RequestId(request),
            value,
        })
    }
}

pub fn value(
    state: MirrorState,
    leader_epoch: i32,
    state_epoch: i32,
    previous: MirrorState,
) -> MirrorPartitionStateValue {
    MirrorPartitionStateValue {
        state,
        leader_epoch,
        state_epoch,
        error_message: None,
        retry_attempt: 0,
        previous_state: Some(previous),
    }
}

/// A `WriteState` effect; the value carries the state epoch the writer expects (the
/// coordinator assigns the next one).
pub fn write(request: u64, mut v: MirrorPartitionStateValue, expected: Option<i32>) -> Effect {
    v.state_epoch = expected.unwrap_or(0);
    Effect::WriteState {
        request: RequestId(request),
        key: key(),
        value: v,
        expected_state_epoch: expected,
    }
}

pub fn fetch(offset: i64, epoch: Option<i32>) -> Effect {
    Effect::Fetch {
        request: RequestId::for_fetch(offset, epoch),
        fetch_offset: offset,
        last_fetched_epoch: epoch,
        isolation: FetchIsolation::ReadCommitted,
    }
}

pub fn data(base: i64, last: i64, epoch: i32) -> BatchHeader {
    BatchHeader::plain(base, last, epoch)
}

/// Drives a fresh partition to MIRRORING with ISR `{ME}` and returns the driver; request ids
/// used: 1 read, 2 write PREPARING, 3 LME query, 4 write MIRRORING; the first fetch is
/// `RequestId::for_fetch(0, None)`.
pub fn mirroring(config: MirrorConfig) -> Driver {
    let mut d = Driver::new(config);
    d.lead(1, &[ME]);
    let w = d.read(1);
    let q = d.ack_write(&w);
    let w = d.step(Input::LastMirroredEpochReceived {
        request: RequestId(3),
        lme: None,
        source_log_start_offset: 0,
    });
    assert_eq!(
        q,
        vec![Effect::QueryLastMirroredEpoch {
            request: RequestId(3),
            key: key()
        }]
    );
    d.ack_write(&w);
    assert_eq!(d.mirror.state(), MirrorState::Mirroring);
    d
}
