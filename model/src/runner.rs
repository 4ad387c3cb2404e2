//! Running the checker: exhaustive BFS or DFS with progress, and a report of every property
//! (holds, counterexample, example found, not reached) with the run's peak memory. Random walks
//! are in [`crate::swarm`].
//!
//! # BFS or DFS
//!
//! Breadth-first search ([`RunOptions::default`], `kmirror check --bfs`) finds the shortest
//! counterexamples but keeps its whole frontier of full states in memory, gigabytes for the
//! default configuration (figures: `BENCHMARKS.md`, `model_check`). Depth-first search
//! (`kmirror check`'s default) keeps only the visited fingerprints and the current path, so its
//! memory grows with the unique-state count alone (8 bytes and the map's overhead per state),
//! at the price of longer first counterexamples, which the runner shortens afterwards with a
//! per-property BFS that stops at the first discovery. Replica symmetry always runs depth-first:
//! stateright 0.31 canonicalizes states only in its DFS (`Representative` is consulted by
//! `spawn_dfs`, not `spawn_bfs`); a BFS with symmetry would need the model to return
//! representatives from `next_state`, which would make every trace's broker ids refer to a
//! renamed world and break replay on real logs.

use std::io::Write;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use std::collections::HashMap;

use stateright::{Checker, HasDiscoveries, Model};

use crate::actions::Action;
use crate::config::ModelConfig;
use crate::model::MirrorModel;
use crate::trace::Trace;

/// How a property fared.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub enum Verdict {
    /// An `always` property held in every state explored.
    Holds,
    /// An `always` property failed: a counterexample exists.
    Counterexample,
    /// A `sometimes` property was reached.
    ExampleFound,
    /// A `sometimes` property was never reached (the situation it names was not exercised).
    NotReached,
}

impl Verdict {
    /// The verdict of an `always` property (`always`) or a `sometimes` one, given whether the
    /// search found a state that discovers it (a violation, or an example).
    pub fn of(always: bool, found: bool) -> Verdict {
        match (always, found) {
            (true, true) => Verdict::Counterexample,
            (true, false) => Verdict::Holds,
            (false, true) => Verdict::ExampleFound,
            (false, false) => Verdict::NotReached,
        }
    }

    /// Whether the verdict is a failure of the check.
    pub fn is_failure(self) -> bool {
        matches!(self, Verdict::Counterexample)
    }
}

/// One property's outcome, with its trace when there is one.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PropertyReport {
    /// The property's name.
    pub name: String,
    /// `always` or `sometimes`.
    pub kind: String,
    /// The verdict.
    pub verdict: Verdict,
    /// The counterexample or example, when found.
    pub trace: Option<Trace>,
}

/// The figures and verdicts of one run.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CheckReport {
    /// States generated, repeats included.
    pub states: usize,
    /// Unique states.
    pub unique: usize,
    /// Greatest depth reached.
    pub depth: usize,
    /// Wall-clock seconds.
    pub seconds: f64,
    /// Whether the search covered every reachable state (false for simulation or a state
    /// limit).
    pub exhaustive: bool,
    /// The process's peak resident memory at the end of the run (Linux `VmHWM`), in bytes;
    /// `None` where the platform does not say.
    #[serde(default)]
    pub peak_rss_bytes: Option<u64>,
    /// Every property.
    pub properties: Vec<PropertyReport>,
}

impl CheckReport {
    /// Unique states per second.
    pub fn unique_per_second(&self) -> f64 {
        self.unique as f64 / self.seconds.max(1e-9)
    }

    /// The names of the properties with a counterexample, in report order.
    pub fn failed(&self) -> Vec<&str> {
        self.properties
            .iter()
            .filter(|p| p.verdict.is_failure())
            .map(|p| p.name.as_str())
            .collect()
    }

    /// Whether every `always` property held.
    pub fn all_hold(&self) -> bool {
        self.properties.iter().all(|p| !p.verdict.is_failure())
    }

    /// The report as the table `kmirror check` prints.
    pub fn table(&self) -> String {
        let mut out = String::new();
        out.push_str(&format!(
            "states generated {}  unique {}  depth {}  seconds {:.1}  unique/s {:.0}  peak memory {}{}\n",
            self.states,
            self.unique,
            self.depth,
            self.seconds,
            self.unique_per_second(),
            self.peak_rss_bytes
                .map_or("unknown".to_string(), |b| format!("{:.2} GB", b as f64 / 1e9)),
            if self.exhaustive {
                ""
            } else {
                "  (not exhaustive)"
            }
        ));
        let width = self
            .properties
            .iter()
            .map(|p| p.name.len())
            .max()
            .unwrap_or(8);
        for p in &self.properties {
            let verdict = match p.verdict {
                Verdict::Holds => "holds",
                Verdict::Counterexample => "COUNTEREXAMPLE",
                Verdict::ExampleFound => "example found",
                Verdict::NotReached => "not reached",
            };
            let steps = p
                .trace
                .as_ref()
                .map_or(String::new(), |t| format!(" ({} steps)", t.actions.len()));
            out.push_str(&format!(
                "  {:<9} {:<width$}  {verdict}{steps}\n",
                p.kind, p.name
            ));
        }
        out
    }
}

/// How to search.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// Worker threads.
    pub threads: usize,
    /// Stop after this many generated states (`None`: exhaust).
    pub state_limit: Option<usize>,
    /// Print a progress line to stderr every this often (`None`: quiet).
    pub progress: Option<Duration>,
    /// Re-run a short search per failed property for a short counterexample.
    pub shorten: bool,
    /// Explore one world per class of worlds equal up to a renaming of replicas (depth-first:
    /// stateright applies symmetry only there).
    pub symmetry: bool,
    /// Search depth-first: memory for the visited fingerprints and the path only, not a
    /// frontier of full states (see the module doc).
    pub dfs: bool,
    /// Stop evaluating a `sometimes` property once found
    /// ([`MirrorModel::pruning_examples`]): faster, and the example kept is one of the first
    /// found; `false` keeps stateright's own choice (the last state found in the whole search).
    pub prune_examples: bool,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            threads: 1,
            state_limit: None,
            progress: None,
            shorten: true,
            symmetry: false,
            dfs: false,
            prune_examples: true,
        }
    }
}

/// Exhaustive search of `config`: BFS, or DFS with `options.dfs` or `options.symmetry`.
pub fn check(config: &ModelConfig, options: &RunOptions) -> CheckReport {
    let mut model = MirrorModel::new(config.clone());
    if options.prune_examples {
        model = model.pruning_examples();
    }
    let start = Instant::now();
    let mut builder = model.clone().checker().threads(options.threads.max(1));
    if let Some(limit) = options.state_limit {
        builder = builder.target_state_count(limit);
    }
    // Stateright reduces by symmetry only in its depth-first search.
    let checker: Box<dyn Checker<MirrorModel>> = if options.symmetry {
        Box::new(builder.symmetry().spawn_dfs())
    } else if options.dfs {
        Box::new(builder.spawn_dfs())
    } else {
        Box::new(builder.spawn_bfs())
    };
    let search = finish_search(checker, options, start);
    let shorten = options.shorten.then_some(options.threads);
    let properties = property_reports(&model, search.discoveries, shorten);
    CheckReport {
        states: search.states,
        unique: search.unique,
        depth: search.depth,
        seconds: search.seconds,
        exhaustive: search.exhaustive,
        peak_rss_bytes: peak_rss_bytes(),
        properties,
    }
}

/// What a finished exhaustive search found, for either model.
pub(crate) struct Search<A> {
    /// States generated, repeats included.
    pub states: usize,
    /// Unique states.
    pub unique: usize,
    /// Greatest depth reached.
    pub depth: usize,
    /// Wall-clock seconds since `start`.
    pub seconds: f64,
    /// Whether the search covered every reachable state.
    pub exhaustive: bool,
    /// Each discovered property's path, as actions.
    pub discoveries: HashMap<&'static str, Vec<A>>,
}

/// Waits for `checker`, printing a progress line as `options.progress` says, and collects its
/// figures and discoveries.
pub(crate) fn finish_search<M>(
    checker: Box<dyn Checker<M>>,
    options: &RunOptions,
    start: Instant,
) -> Search<M::Action>
where
    M: Model,
    M::State: Clone + PartialEq,
    M::Action: Clone + PartialEq,
{
    if let Some(every) = options.progress {
        while !checker.is_done() {
            std::thread::sleep(every.min(Duration::from_millis(200)));
            if start.elapsed().as_millis() % every.as_millis().max(1) < 200 {
                eprint!(
                    "\r  {:>10} states  {:>10} unique  depth {:>3}  {:>6.0}s",
                    checker.state_count(),
                    checker.unique_state_count(),
                    checker.max_depth(),
                    start.elapsed().as_secs_f64()
                );
                let _ = std::io::stderr().flush();
            }
        }
        eprintln!();
    }
    let mut checker = checker;
    for handle in checker.handles() {
        if handle.join().is_err() {
            eprintln!("kmirror: a checker thread panicked; the report is incomplete");
        }
    }
    let seconds = start.elapsed().as_secs_f64();
    Search {
        states: checker.state_count(),
        unique: checker.unique_state_count(),
        depth: checker.max_depth(),
        seconds,
        exhaustive: options
            .state_limit
            .is_none_or(|limit| checker.state_count() < limit),
        discoveries: checker
            .discoveries()
            .into_iter()
            .map(|(name, path)| (name, path.into_actions()))
            .collect(),
    }
}

/// The verdict of every property of `model` given the checker's `discoveries`; with
/// `shorten = Some(threads)`, each counterexample is replaced by a short one.
pub(crate) fn property_reports(
    model: &MirrorModel,
    mut discoveries: HashMap<&'static str, Vec<Action>>,
    shorten: Option<usize>,
) -> Vec<PropertyReport> {
    model
        .all_properties()
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
            PropertyReport {
                name: p.name.to_string(),
                kind: if always { "always" } else { "sometimes" }.to_string(),
                verdict,
                trace: actions.map(|actions| Trace {
                    property: Some(p.name.to_string()),
                    config: model.config.clone(),
                    actions,
                }),
            }
        })
        .collect()
}

/// A short counterexample to (or example of) `property`, searched breadth-first over that
/// property alone and stopping at its first discovery: the fast way to show a mutant is caught.
pub fn find(config: &ModelConfig, property: &'static str, threads: usize) -> Option<Trace> {
    shortest(config, property, threads).map(|actions| Trace {
        property: Some(property.to_string()),
        config: config.clone(),
        actions,
    })
}

/// A short path to a state violating `property`: a BFS over that property alone that stops at
/// its first discovery (stateright keeps the last discovery it sees, which a full run makes
/// long).
fn shortest(config: &ModelConfig, property: &'static str, threads: usize) -> Option<Vec<Action>> {
    let model = MirrorModel::new(config.clone()).only(property);
    let checker = model
        .checker()
        .threads(threads.max(1))
        .finish_when(HasDiscoveries::Any)
        .spawn_bfs()
        .join();
    checker.discovery(property).map(|p| p.into_actions())
}

/// The process's peak resident set size so far (`VmHWM` in `/proc/self/status`), in bytes.
pub fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// Serves stateright's Explorer for `config` on `address` (blocks).
pub fn explore(config: &ModelConfig, address: &str) {
    MirrorModel::new(config.clone()).checker().serve(address);
}
