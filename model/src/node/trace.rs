//! The node model's traces: a configuration and a path of actions, replayed and told step by
//! step.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use kmirror_kernel::input::{FetchOutcome, Input};
use kmirror_kernel::log::LogView;
use kmirror_kernel::node::{NodeInput, PartitionFetchResult, PartitionKey};
use serde::{Deserialize, Serialize};

use super::actions::NodeAction;
use super::config::NodeModelConfig;
use super::world::{CoordinatorRequest, NodeMessage, NodeWorld};

/// A path through the node model: its configuration and actions from the initial world.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct NodeTrace {
    /// The property it is a counterexample to (or an example of).
    pub property: Option<String>,
    /// The configuration it runs in.
    pub config: NodeModelConfig,
    /// The actions, in order.
    pub actions: Vec<NodeAction>,
}

/// A trace that does not replay: an action changes nothing where the trace says it acted.
#[derive(Clone, PartialEq, Eq, Debug, thiserror::Error)]
#[error("step {step} of the node trace changes nothing: {action}")]
pub struct NodeReplayError {
    /// The step (from 1).
    pub step: usize,
    /// The action, as debug text.
    pub action: String,
}

impl NodeTrace {
    /// The worlds after each step, from the initial one.
    pub fn replay(&self) -> Result<Vec<NodeWorld>, NodeReplayError> {
        let mut worlds = vec![NodeWorld::initial(&self.config)];
        for (i, action) in self.actions.iter().enumerate() {
            let last = worlds.last().expect("the initial world");
            let next = last
                .apply(&self.config, action.clone())
                .ok_or_else(|| NodeReplayError {
                    step: i + 1,
                    action: format!("{action:?}"),
                })?;
            worlds.push(next);
        }
        Ok(worlds)
    }

    /// The trace as text: each action, then whether the node is down, and every partition's
    /// stored state, log end offset (destination / source), produce gate when open, and fetch
    /// slot.
    pub fn render(&self) -> Result<String, NodeReplayError> {
        let worlds = self.replay()?;
        let mut out = String::new();
        let describe = |out: &mut String, w: &NodeWorld| {
            if w.node.is_none() {
                let _ = writeln!(out, "      (the node is down)");
            }
            let keys: BTreeSet<&PartitionKey> = w.keys().chain(w.source_logs.keys()).collect();
            for key in keys {
                let dest = w.dest_logs.get(key).map(|l| l.log_end_offset());
                let source = w.source_logs.get(key).map(|l| l.log_end_offset());
                let leo = |o: Option<i64>| o.map_or("-".to_string(), |o| o.to_string());
                let writable = w.dest.get(key).is_some_and(|p| p.writable);
                let _ = writeln!(
                    out,
                    "      {}: {:?} desired {:?}, LEO {}/{}{}, fetch {:?}",
                    name(key),
                    w.stored_state(key),
                    w.desired(key.topic_id),
                    leo(dest),
                    leo(source),
                    if writable { ", writable" } else { "" },
                    w.fetch_slot(key).map(|s| s.status),
                );
            }
            if let Some(v) = w.ghosts.violation {
                let _ = writeln!(out, "      violation: {v:?}");
            }
        };
        describe(&mut out, &worlds[0]);
        for (i, (action, w)) in self.actions.iter().zip(&worlds[1..]).enumerate() {
            let _ = writeln!(out, "  {:>3}. {}", i + 1, short(action));
            describe(&mut out, w);
        }
        Ok(out)
    }
}

/// `topic-partition` of `key`.
fn name(key: &PartitionKey) -> String {
    format!("{}-{}", NodeWorld::topic_name(key.topic_id), key.partition)
}

/// One line for `action`.
fn short(action: &NodeAction) -> String {
    match action {
        NodeAction::Deliver(m) => format!("deliver {}", message(m)),
        NodeAction::FaultPart(m, key, fault) => {
            format!(
                "the source answers {} with {}'s part {fault:?}",
                message(m),
                name(key)
            )
        }
        NodeAction::LoseFetch(m) => format!("lost: {}", message(m)),
        NodeAction::Produce(key) => format!("the source appends a batch to {}", name(key)),
        NodeAction::BackoffElapses => "the fetch backoff elapses".to_string(),
        NodeAction::FireRetry(key) => format!("{}'s retry timer fires", name(key)),
        NodeAction::Stop(topic_id) => {
            format!(
                "the operator stops topic {}",
                NodeWorld::topic_name(*topic_id)
            )
        }
        NodeAction::Remirror => "the operator runs the same selection again".to_string(),
        NodeAction::Failback(topic_id) => {
            format!(
                "the operator fails topic {} back",
                NodeWorld::topic_name(*topic_id)
            )
        }
        NodeAction::GrowStopped(topic_id) => format!(
            "the operator adds a partition to failed-over topic {}",
            NodeWorld::topic_name(*topic_id)
        ),
        NodeAction::Crash => "the node crashes".to_string(),
        NodeAction::Start => "the node starts".to_string(),
        NodeAction::SourceAddsPartition(topic_id) => format!(
            "the source's topic {} gains a partition",
            NodeWorld::topic_name(*topic_id)
        ),
        NodeAction::SourceDeletesTopic(topic_id) => format!(
            "the source deletes topic {}",
            NodeWorld::topic_name(*topic_id)
        ),
    }
}

/// A message, in a few words.
fn message(m: &NodeMessage) -> String {
    match m {
        NodeMessage::Coordinator { key, body, .. } => {
            let key = name(&PartitionKey::new(key.topic_id, key.partition));
            match body {
                CoordinatorRequest::Read => format!("{key}: read of its state"),
                CoordinatorRequest::Write { value, .. } => {
                    format!("{key}: write of {:?}", value.state)
                }
                CoordinatorRequest::WriteLastMirroredEpoch { .. } => format!("{key}: LME write"),
            }
        }
        NodeMessage::QueryLastMirroredEpoch { key, .. } => {
            format!("{}: LME query to the source", name(key))
        }
        NodeMessage::BumpLeaderEpoch { key, at_least, .. } => {
            format!("{}: leader-epoch bump to at least {at_least}", name(key))
        }
        NodeMessage::Fetch(fetch) => {
            let parts: Vec<String> = fetch
                .partitions
                .iter()
                .map(|(key, f)| format!("{} from {}", name(key), f.fetch_offset))
                .collect();
            format!("Fetch [{}]", parts.join(", "))
        }
        NodeMessage::Answer { input, .. } => match input {
            NodeInput::Partition { key, input } => format!("{}: {}", name(key), answer(input)),
            NodeInput::CoordinatorAnswer { key, input, .. } => {
                let key = name(&PartitionKey::new(key.topic_id, key.partition));
                format!("{key}: {}", answer(input))
            }
            NodeInput::FetchResponse(response) => {
                let parts: Vec<String> = response
                    .partitions
                    .iter()
                    .map(|p| {
                        let result = match &p.result {
                            PartitionFetchResult::Completed(FetchOutcome::Records {
                                next_offset,
                                ..
                            }) => format!("records up to {next_offset}"),
                            other => format!("{other:?}"),
                        };
                        format!("{}: {result}", name(&p.key))
                    })
                    .collect();
                format!("Fetch response [{}]", parts.join(", "))
            }
            other => format!("{other:?}"),
        },
    }
}

/// A completion, in a few words.
fn answer(input: &Input) -> String {
    match input {
        Input::StateRead { value, .. } => {
            format!("state read: {:?}", value.as_ref().map(|v| v.state))
        }
        Input::StateWritten { value, .. } => format!("{:?} written", value.state),
        Input::LeaderEpochBumped { leader_epoch, .. } => {
            format!("leader epoch bumped to {leader_epoch}")
        }
        Input::LastMirroredEpochReceived { lme, .. } => format!("LME {lme:?} received"),
        Input::LastMirroredEpochWritten { .. } => "LME written".to_string(),
        other => format!("{other:?}"),
    }
}
