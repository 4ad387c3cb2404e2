//! Before a partition truncates by the source's LME, the source's own mirror of it from this
//! cluster (the reverse mirror) must be out of the way, as the prototype requires before its
//! log alignment:
//!
//! - **Mirror loop.** A source that is itself mirroring the partition from this cluster
//!   (PREPARING, MIRRORING, PAUSED, FAILED there: the topic is still in its mirror) would copy
//!   back what it copies from us: the partition fails with "mirror loop" (retried by the
//!   policy, so it starts once the operator stops the other side).
//! - **Reverse mirror not STOPPED.** A source still STOPPING its mirror from us has not
//!   recorded its LME: a failback does not start until it has (the partition fails, retried).
//!
//! A source with no mirror of the partition from us (UNKNOWN), or one that finished stopping
//! it (STOPPED), lets the LME truncation go ahead. [`check_reverse_mirror`] is the rule; the
//! executor only reports the source's state.

use crate::state::MirrorState;

/// Why the reverse mirror keeps a partition from truncating and mirroring.
#[derive(Clone, Copy, PartialEq, Eq, Debug, thiserror::Error)]
pub enum ReverseMirrorRefusal {
    /// The source mirrors this partition from this cluster.
    #[error(
        "mirror loop: the source is itself mirroring this partition from this cluster ({0} \
         there); stop that mirror first"
    )]
    MirrorLoop(MirrorState),
    /// The source's mirror of this partition from this cluster is still stopping.
    #[error(
        "the reverse mirror is {0} at the source, not STOPPED: the failback waits until it has \
         stopped and recorded its last mirrored epoch"
    )]
    NotStopped(MirrorState),
}

/// Whether a partition may truncate by the source's LME and mirror from it, given `reverse`:
/// the state of the source's mirror of this partition from this cluster (`Unknown`: it has
/// none).
pub fn check_reverse_mirror(reverse: MirrorState) -> Result<(), ReverseMirrorRefusal> {
    match reverse {
        MirrorState::Unknown | MirrorState::Stopped => Ok(()),
        MirrorState::Stopping => Err(ReverseMirrorRefusal::NotStopped(reverse)),
        MirrorState::Preparing
        | MirrorState::Mirroring
        | MirrorState::Paused
        | MirrorState::Failed
        | MirrorState::EpochFencing
        | MirrorState::UleRecovery
        | MirrorState::Pausing => Err(ReverseMirrorRefusal::MirrorLoop(reverse)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_stopped_or_absent_reverse_mirror_lets_the_partition_start() {
        for state in MirrorState::ALL {
            let verdict = check_reverse_mirror(state);
            match state {
                MirrorState::Unknown | MirrorState::Stopped => assert_eq!(verdict, Ok(())),
                MirrorState::Stopping => {
                    assert_eq!(verdict, Err(ReverseMirrorRefusal::NotStopped(state)))
                }
                _ => assert_eq!(verdict, Err(ReverseMirrorRefusal::MirrorLoop(state))),
            }
        }
    }

    #[test]
    fn a_loop_says_mirror_loop() {
        let line = check_reverse_mirror(MirrorState::Mirroring)
            .unwrap_err()
            .to_string();
        assert!(line.starts_with("mirror loop:"), "{line}");
        assert!(line.contains("MIRRORING"), "{line}");
    }
}
