//! The coalescing check of property `coalesced_fetch_part_as_lone_fetch`: before the node
//! handles a coalesced fetch response, each part's answer is given to a copy of its
//! partition's `PartitionMirror` alone; after, the node's effects for the partition, its state
//! and its next fetch must be exactly the lone copy's.

use kmirror_kernel::effect::Effect;
use kmirror_kernel::input::Input;
use kmirror_kernel::node::{
    CoalescedFetchResponse, FetchRequest, NodeEffect, PartitionFetchResult, PartitionKey,
};
use kmirror_kernel::partition::PartitionMirror;

use super::config::NodeModelConfig;
use super::world::{NodeViolation, NodeWorld};

/// What one part of a coalesced response does to its partition alone.
#[derive(Debug)]
pub struct LonePart {
    key: PartitionKey,
    /// The partition after the answer.
    mirror: PartitionMirror,
    /// Its effects, the fetch it asks for next left out.
    effects: Vec<Effect>,
    /// The fetch it waits on after the answer (asked for next, or kept when not told).
    fetch: Option<FetchRequest>,
}

impl NodeWorld {
    /// Each part of `response` given to its partition alone (a copy of the node's), as a lone
    /// fetch's answer: `FetchCompleted` for a completed part, `RequestFailed` for a failed one;
    /// a retriable part is not told to the partition (the node backs its fetch off).
    pub fn lone_parts(
        &self,
        config: &NodeModelConfig,
        response: &CoalescedFetchResponse,
    ) -> Vec<LonePart> {
        let mut parts = Vec::new();
        for part in &response.partitions {
            let (Some(mirror), Some(log)) =
                (self.partition(&part.key), self.dest_logs.get(&part.key))
            else {
                continue;
            };
            let mut mirror = mirror.clone();
            let before = self.fetch_slot(&part.key).map(|s| s.request);
            let input = match &part.result {
                PartitionFetchResult::Completed(outcome) => Input::FetchCompleted {
                    request: part.request,
                    outcome: *outcome,
                },
                PartitionFetchResult::Failed(error) => Input::RequestFailed {
                    request: part.request,
                    error: error.clone(),
                },
                PartitionFetchResult::Retriable(_) => {
                    parts.push(LonePart {
                        key: part.key,
                        mirror,
                        effects: Vec::new(),
                        fetch: before,
                    });
                    continue;
                }
            };
            let (effects, fetch) = match mirror.handle(&config.kernel, input, log) {
                Ok(all) => {
                    let mut effects = Vec::new();
                    let mut fetch = None;
                    for effect in all {
                        match effect {
                            Effect::Fetch {
                                request,
                                fetch_offset,
                                last_fetched_epoch,
                                isolation,
                            } => {
                                fetch = Some(FetchRequest {
                                    request,
                                    fetch_offset,
                                    last_fetched_epoch,
                                    isolation,
                                })
                            }
                            effect => effects.push(effect),
                        }
                    }
                    (effects, fetch)
                }
                Err(_) => (Vec::new(), before),
            };
            parts.push(LonePart {
                key: part.key,
                mirror,
                effects,
                fetch,
            });
        }
        parts
    }

    /// Flags [`NodeViolation::CoalescedPartDiffers`] when the node's `effects` for a part's
    /// partition, its state or its fetch differ from the lone partition's.
    pub fn check_parts(&mut self, effects: &[NodeEffect], lone: Vec<LonePart>) {
        for part in lone {
            let node_effects: Vec<&Effect> = effects
                .iter()
                .filter_map(|e| match e {
                    NodeEffect::Partition { key, effect } if *key == part.key => Some(effect),
                    _ => None,
                })
                .collect();
            let same = node_effects.iter().copied().eq(part.effects.iter())
                && self.partition(&part.key) == Some(&part.mirror)
                && self.fetch_slot(&part.key).map(|s| s.request) == part.fetch;
            if !same {
                self.violate(NodeViolation::CoalescedPartDiffers);
            }
        }
    }
}
