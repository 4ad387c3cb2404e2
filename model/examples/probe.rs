//! Scratch probe of state-space size (not part of the product).
use kmirror_model::trace::Trace;
use kmirror_model::{MirrorModel, ModelConfig};
use stateright::{Checker, Model};
fn main() {
    let arg = std::env::args().nth(1).unwrap_or_default();
    let mut cfg = if arg == "default" { ModelConfig::default_check() } else { ModelConfig::tiny() };
    if let Some(n) = std::env::args().nth(2) { cfg.records = n.parse().unwrap(); }
    let limit: usize = std::env::args().nth(3).map(|s| s.parse().unwrap()).unwrap_or(2_000_000);
    let show = std::env::args().nth(4);
    let t = std::time::Instant::now();
    let c = MirrorModel::new(cfg.clone()).checker().threads(2).target_state_count(limit).spawn_bfs().join();
    println!("states {} unique {} depth {} secs {:.1}", c.state_count(), c.unique_state_count(), c.max_depth(), t.elapsed().as_secs_f64());
    let mut d: Vec<_> = c.discoveries().into_iter().collect();
    d.sort_by_key(|(k, _)| *k);
    for (k, p) in d {
        let actions = p.into_actions();
        println!("  {k}: path {}", actions.len());
        if show.as_deref() == Some(k) {
            let t = Trace { property: Some(k.into()), config: cfg.clone(), actions };
            println!("{}", t.render().unwrap());
        }
    }
}
