//! The stateright [`Model`] of mirroring: the world, its actions and its properties.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use kmirror_kernel::state::Design;
use stateright::{Expectation, Model, Property};

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
    /// Whether [`Model::properties`] leaves out the `sometimes` properties already found (see
    /// [`MirrorModel::pruning_examples`]).
    prune_examples: bool,
    /// The `sometimes` properties whose condition held in some state, shared by the clones of
    /// this model (the checker's threads).
    examples: Arc<Mutex<BTreeSet<&'static str>>>,
}

impl MirrorModel {
    /// A model of `config`.
    pub fn new(config: ModelConfig) -> Self {
        MirrorModel {
            config,
            only: None,
            prune_examples: false,
            examples: Arc::default(),
        }
    }

    /// This model with the `sometimes` properties already found left out of
    /// [`Model::properties`], for an exhaustive search: stateright looks each property up in its
    /// discoveries (SipHash of the name) and evaluates it on every state, and re-records the
    /// path of a `sometimes` property on every state where it holds; once found, such a
    /// property's verdict cannot change. Stateright reads the list once per block of states, so
    /// the path it keeps is one found within a block of the first. The verdicts must be read
    /// from [`MirrorModel::all_properties`].
    pub fn pruning_examples(mut self) -> Self {
        self.prune_examples = true;
        self
    }

    /// Records that `sometimes` property `name` held when `holds` (what its condition returns).
    pub(crate) fn example(&self, name: &'static str, holds: bool) -> bool {
        if holds && self.prune_examples {
            self.examples
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(name);
        }
        holds
    }

    /// Every property of this model (within [`MirrorModel::only`]), found or not.
    pub fn all_properties(&self) -> Vec<Property<Self>> {
        let mut all = crate::properties::all();
        if self.config.sync_steps > 0 {
            all.extend(crate::properties::sync());
        }
        if self.config.unclean_source {
            all.extend(crate::properties::unclean_source());
        }
        if self.config.kernel.design == Design::Prototype {
            all.extend(crate::properties::prototype(&self.config));
        }
        if let Some(name) = self.only {
            all.retain(|p| p.name == name);
        }
        all
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
        let mut all = self.all_properties();
        if self.prune_examples {
            let found = self.examples.lock().unwrap_or_else(|e| e.into_inner());
            all.retain(|p| p.expectation != Expectation::Sometimes || !found.contains(p.name));
        }
        all
    }
}
