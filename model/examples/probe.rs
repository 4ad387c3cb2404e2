//! Scratch probe of state-space size (not part of the product).
use kmirror_model::trace::Trace;
use kmirror_model::{MirrorModel, ModelConfig};
use stateright::{Checker, Model};
fn main() {
    let mut cfg = ModelConfig::tiny();
    let mut limit = 5_000_000usize;
    let mut show = None;
    for a in std::env::args().skip(1) {
        let (k, v) = a.split_once('=').unwrap();
        match k {
            "records" => cfg.records = v.parse().unwrap(),
            "txn" => cfg.transactions = v.parse().unwrap(),
            "crashes" => cfg.crashes = v.parse().unwrap(),
            "net" => cfg.network_faults = v.parse().unwrap(),
            "ops" => cfg.operator_steps = v.parse().unwrap(),
            "replicas" => cfg.replicas = v.parse().unwrap(),
            "elections" => cfg.elections = v.parse().unwrap(),
            "limit" => limit = v.parse().unwrap(),
            "live" => cfg.liveness_bound = v.parse().unwrap(),
            "show" => show = Some(v.to_string()),
            _ => panic!("{k}"),
        }
    }
    let t = std::time::Instant::now();
    let c = MirrorModel::new(cfg.clone())
        .checker()
        .threads(2)
        .target_state_count(limit)
        .spawn_bfs()
        .join();
    println!(
        "states {} unique {} depth {} secs {:.1}",
        c.state_count(),
        c.unique_state_count(),
        c.max_depth(),
        t.elapsed().as_secs_f64()
    );
    let mut d: Vec<_> = c.discoveries().into_iter().collect();
    d.sort_by_key(|(k, _)| *k);
    for (k, p) in d {
        let actions = p.into_actions();
        println!("  {k}: path {}", actions.len());
        if show.as_deref() == Some(k) {
            let t = Trace {
                property: Some(k.into()),
                config: cfg.clone(),
                actions,
            };
            println!("{}", t.render().unwrap());
        }
    }
}
