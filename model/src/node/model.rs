//! The stateright [`Model`] of the node: its world, actions and properties.

use stateright::{Model, Property};

use super::actions::NodeAction;
use super::config::NodeModelConfig;
use super::world::NodeWorld;

/// Several partitions of several topics sharing one node manager, explored exhaustively.
#[derive(Clone, Debug)]
pub struct NodeModel {
    /// The bounds and the kernel variant.
    pub config: NodeModelConfig,
    /// Check only this property (for a short counterexample search).
    pub only: Option<&'static str>,
}

impl NodeModel {
    /// A model of `config`.
    pub fn new(config: NodeModelConfig) -> Self {
        NodeModel { config, only: None }
    }

    /// This model checking property `name` alone.
    pub fn only(mut self, name: &'static str) -> Self {
        self.only = Some(name);
        self
    }
}

impl Model for NodeModel {
    type State = NodeWorld;
    type Action = NodeAction;

    fn init_states(&self) -> Vec<NodeWorld> {
        vec![NodeWorld::initial(&self.config)]
    }

    fn actions(&self, state: &NodeWorld, actions: &mut Vec<NodeAction>) {
        if state.ghosts.violation.is_none() {
            state.enabled_actions(&self.config, actions);
        }
    }

    fn next_state(&self, last: &NodeWorld, action: NodeAction) -> Option<NodeWorld> {
        last.apply(&self.config, action)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        let mut all = super::properties::all();
        if let Some(name) = self.only {
            all.retain(|p| p.name == name);
        }
        all
    }
}
