//! Replica symmetry: the replicas of a cluster are interchangeable up to their broker ids, so
//! two worlds that differ only by a renaming of brokers within a cluster behave alike. The
//! representative renames brokers so that replicas appear in a canonical order (the leader
//! first, then by log and flags), which `kmirror check --symmetry` uses to explore one world
//! per equivalence class.

use std::sync::Arc;

use kmirror_kernel::log::LogView;
use kmirror_kernel::types::BrokerId;
use stateright::Representative;

use crate::world::{Addr, ClusterId, Message, Replica, World};

/// What orders replicas, none of it depending on broker ids.
fn sort_key(leader: bool, in_isr: bool, r: &Replica) -> impl Ord + '_ {
    (
        !leader,
        !in_isr,
        r.log.batches(),
        r.log.high_watermark(),
        r.log.log_start_offset(),
        !r.alive,
        r.incarnation,
        r.writable,
        r.fetcher,
        r.retry_timer,
        r.mirror.as_ref().map(|m| m.activity()),
    )
}

impl Representative for World {
    fn representative(&self) -> Self {
        let mut world = self.clone();
        let mut renames: [Vec<BrokerId>; 2] = [Vec::new(), Vec::new()];
        for c in ClusterId::BOTH {
            let cluster = self.cluster(c);
            let mut order: Vec<usize> = (0..cluster.replicas.len()).collect();
            order.sort_by(|&a, &b| {
                let key = |i: usize| {
                    let id = i as BrokerId;
                    sort_key(
                        cluster.leader == Some(id),
                        cluster.isr.contains(&id),
                        &cluster.replicas[i],
                    )
                };
                key(a).cmp(&key(b))
            });
            // order[new] = old; rename[old] = new.
            let mut rename = vec![0; order.len()];
            for (new, &old) in order.iter().enumerate() {
                rename[old] = new as BrokerId;
            }
            let to = |b: BrokerId| rename[b as usize];
            let target = world.cluster_mut(c);
            target.replicas = order
                .iter()
                .map(|&old| {
                    let mut r = cluster.replicas[old].clone();
                    r.mirror = r.mirror.map(|m| m.renumbered(to));
                    r
                })
                .collect();
            target.leader = cluster.leader.map(to);
            target.isr = cluster.isr.iter().map(|&b| to(b)).collect();
            renames[c.index()] = rename;
        }
        let rename_addr = |a: Addr| Addr {
            broker: renames[a.cluster.index()][a.broker as usize],
            ..a
        };
        world.net = self
            .net
            .iter()
            .map(|(m, n)| {
                let m = match Message::clone(m) {
                    Message::Request {
                        from,
                        to,
                        request,
                        body,
                    } => Message::Request {
                        from: rename_addr(from),
                        to,
                        request,
                        body,
                    },
                    Message::Reply {
                        to,
                        input,
                        batches,
                        source_losses,
                    } => Message::Reply {
                        to: rename_addr(to),
                        input,
                        batches,
                        source_losses,
                    },
                };
                (Arc::new(m), n)
            })
            .collect();
        world
    }
}
