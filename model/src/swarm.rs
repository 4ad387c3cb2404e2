//! Swarm simulation: random walks on every core for configurations too big to exhaust.
//!
//! A plain random walk picks uniformly among the enabled actions, so the actions that are
//! enabled in almost every state (deliveries, follower fetches, producers) crowd out the rare
//! sequences a bug needs (three crashes in a row, a stop while nothing is delivered). *Swarm
//! testing* (Groce et al., ISSTA 2012) varies the mix instead: each walk draws its own subset
//! of action kinds ([`Action::kind`]; deliveries are in every mix) and chooses only among
//! enabled actions of those kinds, falling back to every enabled action when none of its kinds
//! is enabled (so a walk never stops early for its mix alone). Over many walks every combination of "this kind never
//! happens" is tried, which a uniform walk reaches with vanishing probability.
//!
//! Walks run on `threads` threads until `walks` walks, the time budget, or both; every walk
//! checks every `always` and `sometimes` property on every state it visits and keeps the
//! shortest path found to each discovery. The report's `unique` is the number of distinct
//! states the walks covered (counted by fingerprint in one shared set: 8 bytes and the set's
//! overhead per state), and a property that "holds" held on every covered state, which is
//! evidence, not proof (`exhaustive` is false).
//!
//! The walks are this module's, not stateright's simulation checker: stateright 0.31 records a
//! walk as action indices and, when a chosen action changes nothing (`next_state` is `None`,
//! as a refused produce is here), retries among the remaining actions but records the retry
//! as a step of its own, so the path it reports does not replay. Here a walk records the
//! actions themselves and only those that changed the world.
//!
//! Reproducibility: with one thread and a walk bound, a seed gives the same walks, the same
//! covered count and the same verdicts; with several threads each thread's walks are
//! reproducible but which thread reports a property first is not.

use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use stateright::{Expectation, Model};

use crate::actions::Action;
use crate::config::ModelConfig;
use crate::model::MirrorModel;
use crate::runner::{peak_rss_bytes, property_reports, CheckReport};
use crate::world::World;

/// How to simulate.
#[derive(Clone, Debug)]
pub struct SimulateOptions {
    /// Seed of the first walk of the first thread (thread `t` starts from `seed + t`).
    pub seed: u64,
    /// Stop after about this many walks (`walks * depth` states); `None`: only the time budget.
    pub walks: Option<usize>,
    /// Steps per walk at most.
    pub depth: usize,
    /// Worker threads.
    pub threads: usize,
    /// Stop after this long.
    pub time_budget: Option<Duration>,
    /// Draw a subset of action kinds per walk (swarm testing); `false`: uniform walks.
    pub swarm: bool,
    /// Print a progress line to stderr every this often (`None`: quiet).
    pub progress: Option<Duration>,
}

impl Default for SimulateOptions {
    fn default() -> Self {
        SimulateOptions {
            seed: 1,
            walks: Some(10_000),
            depth: 200,
            threads: 1,
            time_budget: None,
            swarm: true,
            progress: None,
        }
    }
}

/// Random walks of `config` as `options` says; see the module doc.
pub fn simulate(config: &ModelConfig, options: &SimulateOptions) -> CheckReport {
    let model = MirrorModel::new(config.clone());
    let shared = Arc::new(Shared {
        model: model.clone(),
        depth: options.depth.max(1),
        swarm: options.swarm,
        walk_limit: options.walks,
        deadline: options.time_budget.map(|b| Instant::now() + b),
        walks: AtomicUsize::new(0),
        states: AtomicUsize::new(0),
        max_depth: AtomicUsize::new(0),
        covered: Mutex::new(HashSet::new()),
        discoveries: Mutex::new(HashMap::new()),
    });
    let start = Instant::now();
    let handles: Vec<_> = (0..options.threads.max(1))
        .map(|t| {
            let shared = Arc::clone(&shared);
            let seed = options.seed.wrapping_add(t as u64);
            std::thread::Builder::new()
                .name(format!("swarm-{t}"))
                .spawn(move || shared.run_thread(seed))
        })
        .collect();
    if let Some(every) = options.progress {
        let mut next = every;
        while handles
            .iter()
            .any(|h| h.as_ref().is_ok_and(|h| !h.is_finished()))
        {
            std::thread::sleep(Duration::from_millis(100));
            if start.elapsed() >= next {
                next += every;
                let budget = options
                    .time_budget
                    .map_or(String::new(), |b| format!(" of {:.0}s", b.as_secs_f64()));
                eprint!(
                    "\r  {:>12} states  {:>11} covered  {:>9} walks  {:>6.0}s{budget}",
                    shared.states.load(Ordering::Relaxed),
                    shared.covered_count(),
                    shared.walks.load(Ordering::Relaxed),
                    start.elapsed().as_secs_f64(),
                );
                let _ = std::io::stderr().flush();
            }
        }
        eprintln!();
    }
    for handle in handles {
        if !handle.is_ok_and(|h| h.join().is_ok()) {
            eprintln!("kmirror: a simulation thread failed; the report is incomplete");
        }
    }
    let seconds = start.elapsed().as_secs_f64();
    let discoveries = shared
        .discoveries
        .lock()
        .map(|d| d.clone())
        .unwrap_or_default();
    CheckReport {
        states: shared.states.load(Ordering::Relaxed),
        unique: shared.covered_count(),
        depth: shared.max_depth.load(Ordering::Relaxed),
        seconds,
        exhaustive: false,
        peak_rss_bytes: peak_rss_bytes(),
        properties: property_reports(&model, discoveries, None),
    }
}

/// What the simulation threads share.
struct Shared {
    model: MirrorModel,
    depth: usize,
    swarm: bool,
    walk_limit: Option<usize>,
    deadline: Option<Instant>,
    /// Walks started, all threads.
    walks: AtomicUsize,
    /// States visited, repeats included.
    states: AtomicUsize,
    /// The longest walk so far.
    max_depth: AtomicUsize,
    /// Fingerprints of every state visited.
    covered: Mutex<HashSet<u64>>,
    /// The shortest path found to each property's discovery.
    discoveries: Mutex<HashMap<&'static str, Vec<Action>>>,
}

impl Shared {
    /// One thread's walks, from `seed`, until the walk limit or the deadline.
    fn run_thread(&self, seed: u64) {
        let mut rng = SplitMix64(seed);
        loop {
            if self.deadline.is_some_and(|d| Instant::now() >= d) {
                return;
            }
            let walk = self.walks.fetch_add(1, Ordering::Relaxed);
            if self.walk_limit.is_some_and(|limit| walk >= limit) {
                return;
            }
            let walk_seed = rng.next();
            self.walk(&mut SplitMix64(walk_seed));
        }
    }

    /// One walk: a mix of action kinds, then at most `depth` steps, checking every property in
    /// every state visited.
    fn walk(&self, rng: &mut SplitMix64) {
        let kinds = if self.swarm {
            // Deliveries always: without them the kernel never hears back and the walk idles.
            rng.next() as u32 | 1 << DELIVER_KIND
        } else {
            u32::MAX
        };
        let properties = self.model.properties();
        let mut inits = self.model.init_states();
        let mut world = inits.swap_remove(rng.below(inits.len()));
        let mut path: Vec<Action> = Vec::new();
        let mut seen = HashSet::new();
        let mut actions = Vec::new();
        loop {
            if !seen.insert(fingerprint(&world)) {
                break; // a cycle
            }
            self.visit(&world, path.len());
            for p in &properties {
                let found = match p.expectation {
                    Expectation::Always => !(p.condition)(&self.model, &world),
                    Expectation::Sometimes => (p.condition)(&self.model, &world),
                    // Liveness is the exhaustive checker's (crate::liveness); a walk cut at
                    // its depth says nothing about "eventually".
                    Expectation::Eventually => false,
                };
                if found {
                    self.discover(p.name, &path);
                }
            }
            if path.len() >= self.depth {
                break;
            }
            actions.clear();
            self.model.actions(&world, &mut actions);
            let Some((action, next)) = self.step(&world, &mut actions, kinds, rng) else {
                break; // nothing enabled changes the world
            };
            path.push(action);
            world = next;
        }
    }

    /// Chooses an action of the walk's kinds (any kind when none of them is enabled) that
    /// changes the world, and the world it leads to.
    fn step(
        &self,
        world: &World,
        actions: &mut Vec<Action>,
        kinds: u32,
        rng: &mut SplitMix64,
    ) -> Option<(Action, World)> {
        let (mut preferred, mut others): (Vec<Action>, Vec<Action>) = actions
            .drain(..)
            .partition(|a| kinds & (1 << a.kind()) != 0);
        for pool in [&mut preferred, &mut others] {
            while !pool.is_empty() {
                let action = pool.swap_remove(rng.below(pool.len()));
                if let Some(next) = self.model.next_state(world, action.clone()) {
                    return Some((action, next));
                }
            }
        }
        None
    }

    /// Counts a visited state.
    fn visit(&self, world: &World, depth: usize) {
        self.states.fetch_add(1, Ordering::Relaxed);
        self.max_depth.fetch_max(depth, Ordering::Relaxed);
        if let Ok(mut covered) = self.covered.lock() {
            covered.insert(fingerprint(world));
        }
    }

    /// Records `path` as the way to `property`'s discovery if it is the shortest so far.
    fn discover(&self, property: &'static str, path: &[Action]) {
        if let Ok(mut discoveries) = self.discoveries.lock() {
            let known = discoveries.entry(property).or_insert_with(|| path.to_vec());
            if path.len() < known.len() {
                *known = path.to_vec();
            }
        }
    }

    /// How many distinct states the walks have covered so far.
    fn covered_count(&self) -> usize {
        self.covered.lock().map_or(0, |set| set.len())
    }
}

/// [`Action::kind`] of `Action::Deliver`, in every walk's mix.
const DELIVER_KIND: u32 = 0;

/// Seeds of the fingerprints of covered states: fixed, so a run's count is reproducible.
const FINGERPRINT_SEEDS: [u64; 4] = [
    0x6b6d_6972_726f_7231,
    0x7377_6172_6d5f_7631,
    0x0123_4567_89ab_cdef,
    0xfedc_ba98_7654_3210,
];

/// The 64-bit fingerprint of a world, for the covered set and cycle detection.
fn fingerprint(world: &World) -> u64 {
    let [a, b, c, d] = FINGERPRINT_SEEDS;
    ahash::RandomState::with_seeds(a, b, c, d).hash_one(world)
}

/// Vigna's SplitMix64: a tiny generator whose sequence never changes between versions, so a
/// seed names the same walks forever.
struct SplitMix64(u64);

impl SplitMix64 {
    /// The next 64 random bits.
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (0 when `n` is 0).
    fn below(&mut self, n: usize) -> usize {
        ((self.next() as u128 * n as u128) >> 64) as usize
    }
}
