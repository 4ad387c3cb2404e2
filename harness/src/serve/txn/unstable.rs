//! OffsetFetch's `require_stable` (v7+, what a read-committed consumer sends): a partition
//! with a transactional offset not yet committed or aborted is `UNSTABLE_OFFSET_COMMIT`, as
//! Kafka's group coordinator answers it; the client asks again.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::OffsetFetchResponse;

use super::TxnCoordinator;

impl TxnCoordinator {
    /// Whether an open transaction holds an offset of `group` for `topic`-`partition`.
    pub fn pending_offset(&self, group: &str, topic: &str, partition: i32) -> bool {
        self.txns.values().any(|t| {
            t.pending_offsets.iter().any(|p| {
                p.group == group && p.partition.topic == topic && p.partition.partition == partition
            })
        })
    }

    /// Marks the partitions of `response` (an OffsetFetch answered with `require_stable`;
    /// `group`: the request's group below v8, where the response does not name it) that have
    /// a pending transactional offset: `UNSTABLE_OFFSET_COMMIT`, offset -1.
    pub fn mark_unstable(&self, response: &mut OffsetFetchResponse, group: &str) {
        let unstable = ResponseError::UnstableOffsetCommit.code();
        for t in &mut response.topics {
            for p in &mut t.partitions {
                if self.pending_offset(group, &t.name.0, p.partition_index) {
                    p.error_code = unstable;
                    p.committed_offset = -1;
                }
            }
        }
        for g in &mut response.groups {
            for t in &mut g.topics {
                for p in &mut t.partitions {
                    if self.pending_offset(&g.group_id.0, &t.name.0, p.partition_index) {
                        p.error_code = unstable;
                        p.committed_offset = -1;
                    }
                }
            }
        }
    }
}
