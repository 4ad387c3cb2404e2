//! The kernel's persisted partition state ([`crate::records::MirrorPartitionStateValue`]) in the
//! prototype's wire record ([`MirrorPartitionStateValue`]) and back, so a broker running the
//! kernel with [`MirrorConfig::prototype`](crate::config::MirrorConfig::prototype) can store
//! its states in the prototype's `__mirror_state` format.
//!
//! The state codes are [`MirrorState::prototype_code`]; a non-retryable failure is the
//! prototype's `RetryAttempt` -1 ([`NON_RETRYABLE_ATTEMPT`] in the kernel). The prototype's
//! `RetryAttempt` is an `int16`: a larger count is refused, never cut.

use crate::records::{self, NON_RETRYABLE_ATTEMPT};
use crate::state::MirrorState;

use super::state_records::MirrorPartitionStateValue;

/// Why a state record does not fit the other side's format.
#[derive(Clone, PartialEq, Eq, Debug, thiserror::Error)]
pub enum BridgeError {
    /// A retry count above the prototype's `int16`.
    #[error("retry attempt {0} does not fit the prototype's int16 RetryAttempt")]
    RetryAttemptTooLarge(u32),
    /// A negative retry count other than -1 (non-retryable).
    #[error("retry attempt {0} is negative and not -1 (non-retryable)")]
    NegativeRetryAttempt(i16),
    /// A state code the prototype does not define.
    #[error("{field} {code} is not one of the prototype's state codes (-1 to 8)")]
    UnknownStateCode {
        /// `State` or `PreviousState`.
        field: &'static str,
        /// The code read.
        code: i8,
    },
}

impl TryFrom<&records::MirrorPartitionStateValue> for MirrorPartitionStateValue {
    type Error = BridgeError;

    /// The kernel's record as the prototype writes it.
    fn try_from(v: &records::MirrorPartitionStateValue) -> Result<Self, BridgeError> {
        let retry_attempt = if v.retry_attempt == NON_RETRYABLE_ATTEMPT {
            -1
        } else {
            i16::try_from(v.retry_attempt)
                .map_err(|_| BridgeError::RetryAttemptTooLarge(v.retry_attempt))?
        };
        Ok(MirrorPartitionStateValue {
            state: v.state.prototype_code(),
            leader_epoch: v.leader_epoch,
            state_epoch: v.state_epoch,
            error_message: v.error_message.clone(),
            retry_attempt,
            previous_state: v
                .previous_state
                .map_or(MirrorState::Unknown.prototype_code(), |s| {
                    s.prototype_code()
                }),
        })
    }
}

impl TryFrom<&MirrorPartitionStateValue> for records::MirrorPartitionStateValue {
    type Error = BridgeError;

    /// The prototype's record as the kernel keeps it; a `PreviousState` of UNKNOWN is none.
    fn try_from(v: &MirrorPartitionStateValue) -> Result<Self, BridgeError> {
        let state = |field, code| {
            MirrorState::from_prototype_code(code)
                .ok_or(BridgeError::UnknownStateCode { field, code })
        };
        let retry_attempt = match v.retry_attempt {
            -1 => NON_RETRYABLE_ATTEMPT,
            n => u32::try_from(n).map_err(|_| BridgeError::NegativeRetryAttempt(n))?,
        };
        let previous = state("PreviousState", v.previous_state)?;
        Ok(records::MirrorPartitionStateValue {
            state: state("State", v.state)?,
            leader_epoch: v.leader_epoch,
            state_epoch: v.state_epoch,
            error_message: v.error_message.clone(),
            retry_attempt,
            previous_state: (previous != MirrorState::Unknown).then_some(previous),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::state_records::state_code;
    use super::super::typed::WireMessage;
    use super::*;

    #[test]
    fn the_kernels_prototype_codes_are_the_wire_codes() {
        let pairs = [
            (MirrorState::Preparing, state_code::LOG_ALIGNMENT),
            (MirrorState::EpochFencing, state_code::EPOCH_FENCING),
            (MirrorState::UleRecovery, state_code::ULE_RECOVERY),
            (MirrorState::Mirroring, state_code::MIRRORING),
            (MirrorState::Pausing, state_code::PAUSING),
            (MirrorState::Paused, state_code::PAUSED),
            (MirrorState::Stopping, state_code::STOPPING),
            (MirrorState::Stopped, state_code::STOPPED),
            (MirrorState::Failed, state_code::FAILED),
            (MirrorState::Unknown, state_code::UNKNOWN),
        ];
        for (state, code) in pairs {
            assert_eq!(state.prototype_code(), code, "{state}");
        }
        assert_eq!(pairs.len(), MirrorState::ALL.len());
    }

    #[test]
    fn every_state_record_survives_the_prototypes_bytes() {
        for state in MirrorState::ALL {
            for previous in MirrorState::ALL
                .into_iter()
                .filter(|&s| s != MirrorState::Unknown)
                .map(Some)
                .chain([None])
            {
                for retry_attempt in [0, 3, NON_RETRYABLE_ATTEMPT] {
                    let kernel = records::MirrorPartitionStateValue {
                        state,
                        leader_epoch: 7,
                        state_epoch: 2,
                        error_message: Some("e".into()),
                        retry_attempt,
                        previous_state: previous,
                    };
                    let wire = MirrorPartitionStateValue::try_from(&kernel).unwrap();
                    let bytes = wire.encode(0).unwrap();
                    let back = MirrorPartitionStateValue::decode(&bytes, 0).unwrap();
                    assert_eq!(
                        records::MirrorPartitionStateValue::try_from(&back),
                        Ok(kernel)
                    );
                }
            }
        }
    }

    #[test]
    fn what_does_not_fit_is_refused() {
        let mut kernel = records::MirrorPartitionStateValue {
            state: MirrorState::Failed,
            leader_epoch: 1,
            state_epoch: 0,
            error_message: None,
            retry_attempt: 40_000,
            previous_state: None,
        };
        assert_eq!(
            MirrorPartitionStateValue::try_from(&kernel),
            Err(BridgeError::RetryAttemptTooLarge(40_000))
        );
        kernel.retry_attempt = 0;
        let mut wire = MirrorPartitionStateValue::try_from(&kernel).unwrap();
        wire.state = 16;
        assert_eq!(
            records::MirrorPartitionStateValue::try_from(&wire),
            Err(BridgeError::UnknownStateCode {
                field: "State",
                code: 16
            })
        );
        wire.state = state_code::FAILED;
        wire.retry_attempt = -2;
        assert_eq!(
            records::MirrorPartitionStateValue::try_from(&wire),
            Err(BridgeError::NegativeRetryAttempt(-2))
        );
    }
}
