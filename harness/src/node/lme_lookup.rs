//! Asking a source that keeps `__mirror_state` (a serving kmirror node) for its mirror of us:
//! one `ReadMirrorStates` ([`crate::serve::lme`]) per source broker, naming the mirror by this
//! node's cluster id (kmirror's default mirror name), and the topics by name. Each partition's
//! answer is the state of that reverse mirror and its LME; the kernel decides what they mean
//! ([`kmirror_kernel::reverse_mirror`], [`kmirror_kernel::lme`]).
//!
//! A broker that does not list the API in its ApiVersions (a stock Kafka cluster) is
//! [`ReverseAnswer::Unsupported`]: the caller answers "no LME" as before. The node driver
//! asks it for its PREPARING partitions; `kmirror mirror --failback` for its preview.

use std::collections::BTreeMap;

use kmirror_kernel::proto_wire::state_rpcs::{
    ReadMirrorStatesPartition, ReadMirrorStatesRequest, ReadMirrorStatesResponse,
    ReadMirrorStatesTopic,
};
use kmirror_kernel::state::MirrorState;
use kmirror_kernel::types::{EpochAndOffset, PartitionIndex, TopicId};

use crate::serve::lme::{self, READ_MIRROR_STATES_KEY, READ_MIRROR_STATES_VERSION};
use crate::wire::connection::CLIENT_ID;
use crate::wire::source_cluster::SourceCluster;

/// What the source said of one partition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReverseAnswer {
    /// The source's broker does not serve the lookup.
    Unsupported,
    /// The state of the source's mirror of the partition from us (`Unknown`: none) and the
    /// LME it recorded.
    Found {
        /// The reverse mirror's state.
        reverse: MirrorState,
        /// Its LME (`None`: Kafka's -1).
        lme: Option<EpochAndOffset>,
    },
    /// The lookup failed, said in a line.
    Failed(String),
}

/// Asks the source about `asked` in the mirror named `mirror` (this node's cluster id); one
/// answer per partition, in the order asked.
pub fn read_reverse_mirrors(
    source: &mut SourceCluster,
    mirror: &str,
    asked: &[(TopicId, PartitionIndex)],
) -> Vec<ReverseAnswer> {
    let mut answers = vec![ReverseAnswer::Failed("not asked".to_owned()); asked.len()];
    // Which broker leads each partition, and the topic's name there.
    let mut by_broker: BTreeMap<i32, Vec<(usize, String, PartitionIndex)>> = BTreeMap::new();
    match source.metadata() {
        Ok(metadata) => {
            for (i, (topic_id, partition)) in asked.iter().enumerate() {
                let topic = metadata.topic_by_id(*topic_id).map(|t| t.name.clone());
                match (topic, metadata.leader_of(*topic_id, *partition)) {
                    (Some(name), Some(leader)) => by_broker
                        .entry(leader)
                        .or_default()
                        .push((i, name, *partition)),
                    _ => {
                        answers[i] = ReverseAnswer::Failed(format!(
                            "the source's metadata has no leader of partition {partition} of \
                             topic id {topic_id}"
                        ))
                    }
                }
            }
        }
        Err(e) => {
            let line = e.to_string();
            return asked
                .iter()
                .map(|_| ReverseAnswer::Failed(line.clone()))
                .collect();
        }
    }
    for (broker, partitions) in by_broker {
        let found = ask_broker(source, broker, mirror, &partitions);
        for ((i, _, _), answer) in partitions.iter().zip(found) {
            answers[*i] = answer;
        }
    }
    answers
}

/// One `ReadMirrorStates` to `broker` for `partitions`; one answer each, in order.
fn ask_broker(
    source: &mut SourceCluster,
    broker: i32,
    mirror: &str,
    partitions: &[(usize, String, PartitionIndex)],
) -> Vec<ReverseAnswer> {
    let all = |answer: ReverseAnswer| vec![answer; partitions.len()];
    let mut topics: BTreeMap<&str, Vec<ReadMirrorStatesPartition>> = BTreeMap::new();
    for (_, name, partition) in partitions {
        topics
            .entry(name.as_str())
            .or_default()
            .push(ReadMirrorStatesPartition {
                partition_index: *partition,
            });
    }
    let request = ReadMirrorStatesRequest {
        mirror_name: mirror.to_owned(),
        topics: topics
            .into_iter()
            .map(|(name, partitions)| ReadMirrorStatesTopic {
                topic_name: name.to_owned(),
                partitions,
            })
            .collect(),
    };
    let client = match source.broker_client(broker) {
        Ok(client) => client,
        Err(e) => return all(ReverseAnswer::Failed(e.to_string())),
    };
    let connection = match client.connect() {
        Ok(connection) => connection,
        Err(e) => return all(ReverseAnswer::Failed(e.to_string())),
    };
    if !connection.serves(READ_MIRROR_STATES_KEY, READ_MIRROR_STATES_VERSION) {
        return all(ReverseAnswer::Unsupported);
    }
    let sent = connection.send_raw("ReadMirrorStates", READ_MIRROR_STATES_VERSION, |id| {
        lme::encode_request(id, CLIENT_ID, &request)
    });
    let response = match sent {
        Ok((id, frame)) => match lme::decode_response(frame) {
            Ok((answered, response)) if answered == id => response,
            Ok((answered, _)) => {
                client.disconnect();
                return all(ReverseAnswer::Failed(format!(
                    "ReadMirrorStates: correlation id {answered} answers no request (expected \
                     {id})"
                )));
            }
            Err(e) => return all(ReverseAnswer::Failed(e)),
        },
        Err(e) => {
            client.disconnect();
            return all(ReverseAnswer::Failed(e.to_string()));
        }
    };
    partitions
        .iter()
        .map(|(_, name, partition)| answer_of(&response, name, *partition))
        .collect()
}

/// The answer `response` gives of partition `partition` of `topic`.
fn answer_of(
    response: &ReadMirrorStatesResponse,
    topic: &str,
    partition: PartitionIndex,
) -> ReverseAnswer {
    if response.error_code != 0 {
        return ReverseAnswer::Failed(format!(
            "ReadMirrorStates: error {}: {}",
            response.error_code,
            response.error_message.as_deref().unwrap_or("")
        ));
    }
    let found = response
        .topics
        .iter()
        .filter(|t| t.topic_name == topic)
        .flat_map(|t| &t.partitions)
        .find(|p| p.partition_index == partition);
    let Some(p) = found else {
        return ReverseAnswer::Failed(format!(
            "ReadMirrorStates: no answer for partition {partition} of {topic}"
        ));
    };
    if p.error_code != 0 {
        return ReverseAnswer::Failed(format!(
            "ReadMirrorStates: {topic}-{partition}: error {}: {}",
            p.error_code,
            p.error_message.as_deref().unwrap_or("")
        ));
    }
    let Some(reverse) = MirrorState::from_prototype_code(p.state) else {
        return ReverseAnswer::Failed(format!(
            "ReadMirrorStates: {topic}-{partition}: state code {} is no state",
            p.state
        ));
    };
    let lme = (p.last_mirror_epoch >= 0).then_some(EpochAndOffset {
        epoch: p.last_mirror_epoch,
        end_offset: p.last_mirror_offset,
    });
    ReverseAnswer::Found { reverse, lme }
}
