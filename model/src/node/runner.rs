//! Running the node model: exhaustive breadth-first search, a short counterexample per
//! property, random walks, the Explorer.

use std::collections::BTreeMap;
use std::time::Instant;

use serde::{Deserialize, Serialize};
use stateright::{Checker, HasDiscoveries, Model, UniformChooser};

use super::actions::NodeAction;
use super::config::NodeModelConfig;
use super::model::NodeModel;
use super::trace::NodeTrace;
use crate::runner::{
    finish_search, peak_rss_bytes, CheckReport, PropertyReport, RunOptions, Verdict,
};

/// The report of a node check, with the node traces of its counterexamples.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct NodeCheckReport {
    /// Figures and verdicts (its property traces are empty: see `traces`).
    pub report: CheckReport,
    /// The counterexample (or example) of each property that has one.
    pub traces: BTreeMap<String, NodeTrace>,
}

/// Exhaustive breadth-first search of `config` (depth-first with `options.dfs`; the node
/// model has no symmetry reduction).
pub fn check(config: &NodeModelConfig, options: &RunOptions) -> NodeCheckReport {
    let model = NodeModel::new(config.clone());
    let start = Instant::now();
    let mut builder = model.clone().checker().threads(options.threads.max(1));
    if let Some(limit) = options.state_limit {
        builder = builder.target_state_count(limit);
    }
    let checker: Box<dyn Checker<NodeModel>> = if options.dfs {
        Box::new(builder.spawn_dfs())
    } else {
        Box::new(builder.spawn_bfs())
    };
    let search = finish_search(checker, options, start);
    let (properties, traces) = reports(
        &model,
        search.discoveries.into_iter().collect(),
        options.shorten.then_some(options.threads),
    );
    NodeCheckReport {
        report: CheckReport {
            states: search.states,
            unique: search.unique,
            depth: search.depth,
            seconds: search.seconds,
            exhaustive: search.exhaustive,
            peak_rss_bytes: peak_rss_bytes(),
            properties,
        },
        traces,
    }
}

/// The verdict of every property given the checker's discoveries; with `shorten =
/// Some(threads)`, each counterexample is replaced by a short one.
fn reports(
    model: &NodeModel,
    mut discoveries: BTreeMap<&'static str, Vec<NodeAction>>,
    shorten: Option<usize>,
) -> (Vec<PropertyReport>, BTreeMap<String, NodeTrace>) {
    let mut traces = BTreeMap::new();
    let properties = model
        .properties()
        .into_iter()
        .map(|p| {
            let always = p.expectation.discovery_is_failure();
            let found = discoveries.remove(p.name);
            let verdict = Verdict::of(always, found.is_some());
            let actions = match shorten {
                Some(threads) if verdict == Verdict::Counterexample => {
                    shortest(&model.config, p.name, threads).or(found)
                }
                _ => found,
            };
            if let Some(actions) = actions {
                let trace = NodeTrace {
                    property: Some(p.name.to_string()),
                    config: model.config.clone(),
                    actions,
                };
                traces.insert(p.name.to_string(), trace);
            }
            PropertyReport {
                name: p.name.to_string(),
                kind: if always { "always" } else { "sometimes" }.to_string(),
                verdict,
                trace: None,
            }
        })
        .collect();
    (properties, traces)
}

/// A short counterexample to (or example of) `property`: a breadth-first search over that
/// property alone, stopping at its first discovery.
pub fn find(config: &NodeModelConfig, property: &'static str, threads: usize) -> Option<NodeTrace> {
    shortest(config, property, threads).map(|actions| NodeTrace {
        property: Some(property.to_string()),
        config: config.clone(),
        actions,
    })
}

fn shortest(
    config: &NodeModelConfig,
    property: &'static str,
    threads: usize,
) -> Option<Vec<NodeAction>> {
    let checker = NodeModel::new(config.clone())
        .only(property)
        .checker()
        .threads(threads.max(1))
        .finish_when(HasDiscoveries::Any)
        .spawn_bfs()
        .join();
    checker.discovery(property).map(|p| p.into_actions())
}

/// `walks` random walks of at most `depth` steps from seed `seed`.
pub fn simulate(
    config: &NodeModelConfig,
    seed: u64,
    walks: usize,
    depth: usize,
) -> NodeCheckReport {
    let model = NodeModel::new(config.clone());
    let start = Instant::now();
    let checker = model
        .clone()
        .checker()
        .target_max_depth(depth)
        .target_state_count(walks.saturating_mul(depth).max(1))
        .spawn_simulation(seed, UniformChooser)
        .join();
    let seconds = start.elapsed().as_secs_f64();
    let discoveries = checker
        .discoveries()
        .into_iter()
        .map(|(name, path)| (name, path.into_actions()))
        .collect();
    let (properties, traces) = reports(&model, discoveries, None);
    NodeCheckReport {
        report: CheckReport {
            states: checker.state_count(),
            unique: checker.unique_state_count(),
            depth: checker.max_depth(),
            seconds,
            exhaustive: false,
            peak_rss_bytes: peak_rss_bytes(),
            properties,
        },
        traces,
    }
}

/// Serves stateright's Explorer for `config` on `address` (blocks).
pub fn explore(config: &NodeModelConfig, address: &str) {
    NodeModel::new(config.clone()).checker().serve(address);
}
