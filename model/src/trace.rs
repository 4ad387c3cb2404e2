//! Traces: a path through the model as a numbered, readable story, and as JSON.
//!
//! A trace is the configuration plus the list of actions from the initial world; replaying the
//! actions through [`World::apply`] rebuilds every state, so the JSON form is enough to
//! reproduce a counterexample (and for the harness to replay it on real logs).

use std::fmt::Write as _;

use kmirror_kernel::log::LogView;
use serde::{Deserialize, Serialize};

use crate::actions::Action;
use crate::config::ModelConfig;
use crate::journal;
use crate::world::{ClusterId, Message, World};

/// A path through the model, reproducible from its configuration.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct Trace {
    /// The property the trace shows (a counterexample or an example), if any.
    pub property: Option<String>,
    /// The model configuration (bounds and kernel variant).
    pub config: ModelConfig,
    /// The actions taken from the initial world.
    pub actions: Vec<Action>,
}

/// One step of a trace with its journal.
#[derive(Clone, Debug)]
pub struct JournalStep {
    /// The action (`None` for the initial world).
    pub action: Option<Action>,
    /// What the step did, in order.
    pub events: Vec<journal::Event>,
    /// The world after the step.
    pub world: World,
}

/// Why a trace does not replay.
#[derive(Clone, PartialEq, Eq, Debug, thiserror::Error)]
pub enum ReplayError {
    /// Step `step` (1-based) is not possible in the world it reaches.
    #[error("step {step} ({action}) changes nothing in the world the trace reaches: the trace does not belong to this model version or configuration")]
    Inapplicable {
        /// The step.
        step: usize,
        /// The action, formatted.
        action: String,
    },
}

impl Trace {
    /// The worlds of the trace: the initial one, then one per action.
    pub fn worlds(&self) -> Result<Vec<World>, ReplayError> {
        let mut worlds = vec![World::initial(&self.config)];
        for (i, action) in self.actions.iter().enumerate() {
            let last = worlds.last().expect("starts with the initial world");
            let next = last.apply(&self.config, action.clone()).ok_or_else(|| {
                ReplayError::Inapplicable {
                    step: i + 1,
                    action: describe(action),
                }
            })?;
            worlds.push(next);
        }
        Ok(worlds)
    }

    /// Every step with what it did: the action, the journal of kernel inputs and log
    /// operations it caused, and the world after it (the first entry is the initial world,
    /// with the journal of the initial leader elections and no action).
    pub fn journal(&self) -> Result<Vec<JournalStep>, ReplayError> {
        let (initial, events) = journal::capture(|| World::initial(&self.config));
        let mut steps = vec![JournalStep {
            action: None,
            events,
            world: initial,
        }];
        for (i, action) in self.actions.iter().enumerate() {
            let last = &steps.last().expect("starts with the initial world").world;
            let (next, events) = journal::capture(|| last.apply(&self.config, action.clone()));
            let world = next.ok_or_else(|| ReplayError::Inapplicable {
                step: i + 1,
                action: describe(action),
            })?;
            steps.push(JournalStep {
                action: Some(action.clone()),
                events,
                world,
            });
        }
        Ok(steps)
    }

    /// The trace as a numbered story: each action, then the key state after it.
    pub fn render(&self) -> Result<String, ReplayError> {
        let worlds = self.worlds()?;
        let mut out = String::new();
        if let Some(p) = &self.property {
            let _ = writeln!(
                out,
                "trace for property `{p}` ({} steps)",
                self.actions.len()
            );
        }
        let _ = writeln!(out, "  0. initial world\n{}", summarize(&worlds[0]));
        for (i, (action, world)) in self.actions.iter().zip(worlds.iter().skip(1)).enumerate() {
            let _ = writeln!(
                out,
                "{:>3}. {}\n{}",
                i + 1,
                describe(action),
                summarize(world)
            );
        }
        Ok(out)
    }
}

/// One line for an action.
pub fn describe(action: &Action) -> String {
    match action {
        Action::Deliver(m) => format!("deliver {}", describe_message(m)),
        Action::Lose(m) => format!("LOSE {} (requester times out)", describe_message(m)),
        Action::Duplicate(m) => format!("DUPLICATE {}", describe_message(m)),
        Action::Produce(c, kind) => format!("producer writes {kind:?} to {c}"),
        Action::FollowerFetch(c, b) => format!("{c}/broker {b} fetches from its leader"),
        Action::ShrinkIsr(c, b) => format!("{c}: broker {b} drops out of the ISR"),
        Action::Elect(c, b, unclean) => format!(
            "{c}: controller elects broker {b}{}",
            if *unclean { " (UNCLEAN)" } else { "" }
        ),
        Action::Crash(c, b) => format!("{c}/broker {b} CRASHES"),
        Action::Restart(c, b) => format!("{c}/broker {b} restarts"),
        Action::MoveCoordinator(c) => format!("{c}: __mirror_state coordinator moves"),
        Action::FireRetry(c, b) => format!("{c}/broker {b}: retry timer fires"),
        Action::Operator(c, r) => format!("operator sends {r:?} to {c}"),
        Action::SyncRead(c) => {
            format!("{c}: leader starts a metadata sync round (reads the source)")
        }
        Action::SyncWrite(c) => {
            format!("{c}: the metadata sync round's write reaches the destination")
        }
    }
}

fn describe_message(m: &Message) -> String {
    match m {
        Message::Request { from, to, body, .. } => format!(
            "request {body:?} from {}/{} to {to}",
            from.cluster, from.broker
        ),
        Message::Reply {
            to, input, batches, ..
        } => {
            let batches = if batches.is_empty() {
                String::new()
            } else {
                format!(" with {} batch(es)", batches.len())
            };
            format!("reply {input:?}{batches} to {}/{}", to.cluster, to.broker)
        }
    }
}

/// The key state of a world: per cluster the leader, epoch, stored state and desired state;
/// per replica LEO/HW/LSO, epochs, kernel step and flags; the messages in flight.
pub fn summarize(w: &World) -> String {
    let mut out = String::new();
    for c in ClusterId::BOTH {
        let cluster = w.cluster(c);
        let key = w.key(c);
        let stored = key
            .as_ref()
            .and_then(|k| cluster.coordinator.read_state(k).cloned());
        let lme = key
            .as_ref()
            .and_then(|k| cluster.coordinator.read_last_mirrored_epoch(k).copied());
        if let Some(f) = &cluster.sync_in_flight {
            let _ = writeln!(
                out,
                "       {c}: metadata sync in flight, read {} at state epoch {} (leader epoch {})",
                f.state, f.state_epoch, f.leader_epoch
            );
        }
        let _ = writeln!(
            out,
            "       {c}: leader {:?} epoch {} isr {:?} | {} | stored {} | lme {}",
            cluster.leader,
            cluster.leader_epoch,
            cluster.isr.iter().collect::<Vec<_>>(),
            w.desired(c),
            stored.map_or("-".into(), |s| format!(
                "{} (state epoch {}, leader epoch {}, from {:?})",
                s.state, s.state_epoch, s.leader_epoch, s.previous_state
            )),
            lme.map_or("-".into(), |l| format!(
                "{:?}@{}",
                l.last_mirrored_epoch, l.last_mirrored_offset
            )),
        );
        for (b, r) in cluster.replicas.iter().enumerate() {
            let epochs: Vec<String> = r
                .log
                .epoch_cache()
                .entries()
                .map(|e| format!("{}@{}", e.epoch, e.start_offset))
                .collect();
            let _ = writeln!(
                out,
                "         broker {b}{}: LEO {} HW {} LSO {} epochs [{}]{}{}{}",
                if r.alive { "" } else { " (down)" },
                r.log.log_end_offset(),
                r.log.high_watermark(),
                r.log.last_stable_offset(),
                epochs.join(" "),
                r.mirror
                    .as_ref()
                    .map_or(String::new(), |m| format!(" step {:?}", m.activity())),
                if r.writable { " WRITABLE" } else { "" },
                if r.fetcher { " fetcher" } else { "" },
            );
        }
    }
    if let Some(v) = w.ghosts.violation {
        let _ = writeln!(out, "       VIOLATION: {v:?}");
    }
    let _ = writeln!(out, "       in flight: {}", w.net.len());
    out
}
