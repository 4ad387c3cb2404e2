//! The stateright [`Model`] of mirroring: the world, its actions and its properties.

use kmirror_kernel::state::Design;
use stateright::{Model, Property};

use crate::actions::Action;
use crate::config::ModelConfig;
use crate::world::World;

/// Two clusters mirroring one partition, explored exhaustively.
#[derive(Clone, Debug)]
pub struct MirrorModel {
    /// The bounds and the kernel variant.
    pub config: ModelConfig,
    /// Check only this property (for a short counterexample search).
    pub only: Option<&'static str>,
}

impl MirrorModel {
    /// A model of `config`.
    pub fn new(config: ModelConfig) -> Self {
        MirrorModel { config, only: None }
    }

    /// This model checking property `name` alone.
    pub fn only(mut self, name: &'static str) -> Self {
        self.only = Some(name);
        self
    }
}

impl Model for MirrorModel {
    type State = World;
    type Action = Action;

    fn init_states(&self) -> Vec<World> {
        vec![World::initial(&self.config)]
    }

    fn actions(&self, state: &World, actions: &mut Vec<Action>) {
        if state.ghosts.violation.is_none() {
            state.enabled_actions(&self.config, actions);
        }
    }

    fn next_state(&self, last: &World, action: Action) -> Option<World> {
        last.apply(&self.config, action)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        let mut all = crate::properties::all();
        if self.config.sync_steps > 0 {
            all.extend(crate::properties::sync());
        }
        if self.config.kernel.design == Design::Prototype {
            all.extend(crate::properties::prototype(&self.config));
        }
        if let Some(name) = self.only {
            all.retain(|p| p.name == name);
        }
        all
    }
}
