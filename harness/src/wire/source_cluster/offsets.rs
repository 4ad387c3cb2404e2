//! ListOffsets of many partitions of a [`SourceCluster`], one request per leader broker, every
//! broker asked at once.

use std::collections::BTreeMap;

use kmirror_kernel::config::FetchIsolation;
use kmirror_kernel::types::{Offset, PartitionIndex, TopicId};

use super::answer::isolation_level;
use super::partition_error::{list_offset_answer, PartitionAt};
use super::{PartitionFetchError, SourceCluster};

impl SourceCluster {
    /// ListOffsets of many partitions at `timestamp` ([`EARLIEST_TIMESTAMP`](crate::wire::client::EARLIEST_TIMESTAMP): the log start;
    /// [`LATEST_TIMESTAMP`](crate::wire::client::LATEST_TIMESTAMP): the HW for read-uncommitted, the LSO for read-committed), one
    /// request per leader broker, all in flight together; one result per partition, in the order asked, with the
    /// errors of [`fetch`](Self::fetch).
    pub fn list_offsets(
        &mut self,
        partitions: &[(TopicId, PartitionIndex)],
        timestamp: i64,
        isolation: FetchIsolation,
    ) -> Vec<Result<Offset, PartitionFetchError>> {
        self.refresh_if_due();
        let mut out: Vec<Option<Result<Offset, PartitionFetchError>>> =
            (0..partitions.len()).map(|_| None).collect();
        let mut groups: BTreeMap<i32, (String, Vec<(usize, String)>)> = BTreeMap::new();
        let mut refresh = false;
        for (index, (topic_id, partition)) in partitions.iter().enumerate() {
            match self.resolve(*topic_id, *partition) {
                Err(e) => {
                    refresh |= !matches!(e, PartitionFetchError::NoMetadata { .. });
                    out[index] = Some(Err(e));
                }
                Ok(leader) => groups
                    .entry(leader.broker)
                    .or_insert_with(|| (leader.address.clone(), Vec::new()))
                    .1
                    .push((index, leader.topic)),
            }
        }
        let jobs: BTreeMap<i32, (String, Vec<(String, i32)>)> = groups
            .iter()
            .map(|(broker, (address, items))| {
                let asked = items
                    .iter()
                    .map(|(i, topic)| (topic.clone(), partitions[*i].1))
                    .collect();
                (*broker, (address.clone(), asked))
            })
            .collect();
        let mut answers = self.per_broker(jobs, |connection, asked: Vec<(String, i32)>| {
            connection.stats.list_offsets_requests += 1;
            let answer =
                connection
                    .client_mut()
                    .list_offsets(&asked, timestamp, isolation_level(isolation));
            if answer.is_err() {
                connection.stats.failed_requests += 1;
            }
            answer
        });
        for (broker, (address, items)) in groups {
            let Some(answer) = answers.remove(&broker) else {
                continue;
            };
            refresh |= answer.is_err();
            for (k, (index, topic)) in items.into_iter().enumerate() {
                let (topic_id, partition) = partitions[index];
                let at = PartitionAt {
                    topic: &topic,
                    topic_id,
                    partition,
                    broker,
                    address: &address,
                };
                let result = match &answer {
                    Err(e) => Err(at.request_failed(e.clone())),
                    Ok(all) => list_offset_answer(&at, all.get(k)),
                };
                if matches!(result, Err(PartitionFetchError::Leadership { .. })) {
                    refresh = true;
                }
                out[index] = Some(result);
            }
        }
        if refresh {
            self.stale = true;
        }
        out.into_iter()
            .zip(partitions)
            .map(|(r, (topic_id, partition))| {
                r.unwrap_or_else(|| {
                    Err(PartitionFetchError::Duplicate {
                        topic_id: topic_id.to_string(),
                        partition: *partition,
                    })
                })
            })
            .collect()
    }
}
