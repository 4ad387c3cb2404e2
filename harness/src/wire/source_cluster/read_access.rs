//! The check, before anything is mirrored, that a [`SourceCluster`]'s principal may read every
//! selected partition.

use std::collections::BTreeMap;

use super::super::authorization::{self, AclResource};
use super::super::client::{FetchManyParams, FetchPartitionParams, READ_UNCOMMITTED};
use super::super::{error_name, WireError};
use super::SourceCluster;

impl SourceCluster {
    /// Checks that this client may read every selected partition before anything is mirrored:
    /// one Fetch per leader broker with all its selected partitions, every broker asked at
    /// once, nothing waited for and at
    /// most one byte asked (Kafka still returns at most one whole batch). The first
    /// authorization error ([`WireError::Denied`], or a TLS / SASL failure) is returned; other
    /// errors are left to the mirror, which reports them per partition.
    pub fn check_read_access(&mut self) -> Result<(), WireError> {
        let metadata = self.metadata().map_err(|e| e.wire().clone())?.clone();
        let mut by_leader: BTreeMap<i32, Vec<(String, FetchPartitionParams)>> = BTreeMap::new();
        for (topic, p) in metadata.partitions() {
            let Some(leader) = p.leader else { continue };
            by_leader.entry(leader).or_default().push((
                topic.name.clone(),
                FetchPartitionParams {
                    topic_id: topic.topic_id,
                    partition: p.index,
                    fetch_offset: 0,
                    last_fetched_epoch: None,
                    current_leader_epoch: None,
                    partition_max_bytes: 1,
                },
            ));
        }
        let jobs: BTreeMap<i32, (String, Vec<(String, FetchPartitionParams)>)> = by_leader
            .into_iter()
            .filter_map(|(broker, partitions)| {
                let address = metadata.brokers.get(&broker)?.clone();
                Some((broker, (address, partitions)))
            })
            .collect();
        let answers = self.per_broker(jobs, |connection, partitions| {
            let params = FetchManyParams {
                isolation_level: READ_UNCOMMITTED,
                max_wait_ms: 0,
                max_bytes: 1,
                partitions: partitions.iter().map(|(_, p)| *p).collect(),
            };
            connection.stats.fetch_requests += 1;
            connection.stats.partitions_fetched += partitions.len() as u64;
            connection.stats.partitions_sent += partitions.len() as u64;
            let answer = connection.client_mut().fetch_many(&params);
            let principal = connection.client().security().principal();
            let address = connection.client().address().to_owned();
            (answer, principal, address, partitions)
        });
        for (answer, principal, address, partitions) in answers.into_values() {
            let answers = match answer {
                Err(e) if e.is_security() => return Err(e),
                Err(_) => continue,
                Ok(answers) => answers,
            };
            for ((topic, _), answer) in partitions.iter().zip(answers) {
                let Ok(answer) = answer else { continue };
                let resource = AclResource::Topic(topic.clone());
                if let Some(acl) =
                    authorization::needed("Fetch", answer.error_code, resource, principal.clone())
                {
                    return Err(WireError::Denied {
                        address: address.clone(),
                        api: "Fetch",
                        code: answer.error_code,
                        name: error_name(answer.error_code),
                        acl: Box::new(acl),
                    });
                }
            }
        }
        Ok(())
    }
}
