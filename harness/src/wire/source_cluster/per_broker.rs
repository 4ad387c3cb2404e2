//! One request per broker, sent to every broker at once: what a [`SourceCluster`] asks of each
//! leader outside the fetch rounds (ListOffsets, the read-access check) costs one round trip
//! for the whole cluster, not one per broker, which across a link of tens of milliseconds is
//! the difference between a mirror that starts at once and one that waits a round trip per
//! broker, twice (a connection's handshake, then its request).

use std::collections::BTreeMap;

use super::connection::BrokerConnection;
use super::SourceCluster;

impl SourceCluster {
    /// Runs `work` on the connection of every broker of `jobs` (broker id to its address and
    /// its job), each broker on its own thread when there are several, and returns each
    /// broker's result. The connections are taken out for the call and put back after.
    pub(super) fn per_broker<J, T>(
        &mut self,
        jobs: BTreeMap<i32, (String, J)>,
        work: impl Fn(&mut BrokerConnection, J) -> T + Sync,
    ) -> BTreeMap<i32, T>
    where
        J: Send,
        T: Send,
    {
        let mut taken: Vec<(i32, BrokerConnection, J)> = jobs
            .into_iter()
            .map(|(broker, (address, job))| (broker, self.take_connection(broker, &address), job))
            .collect();
        let mut results = BTreeMap::new();
        if taken.len() == 1 {
            if let Some((broker, mut connection, job)) = taken.pop() {
                results.insert(broker, work(&mut connection, job));
                self.brokers.insert(broker, connection);
            }
            return results;
        }
        let work = &work;
        let done: Vec<(i32, BrokerConnection, T)> = std::thread::scope(|scope| {
            let handles: Vec<_> = taken
                .into_iter()
                .map(|(broker, mut connection, job)| {
                    scope.spawn(move || {
                        let result = work(&mut connection, job);
                        (broker, connection, result)
                    })
                })
                .collect();
            // A broker's thread that panicked panics the caller, as the same work done inline
            // would.
            handles
                .into_iter()
                .map(|handle| {
                    handle
                        .join()
                        .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
                })
                .collect()
        });
        for (broker, connection, result) in done {
            self.brokers.insert(broker, connection);
            results.insert(broker, result);
        }
        results
    }
}
