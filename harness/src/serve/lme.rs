//! The last-mirrored-epoch lookup on the wire: a serving node answers the prototype's
//! `ReadMirrorStates` (API key 100, version 0, flexible) from its `__mirror_state` coordinator
//! records, so that a node failing back from it learns where their logs part.
//!
//! The request names a mirror and topics by name; the answer gives, per partition, the
//! persisted state of that mirror's copy (the prototype's state codes; UNKNOWN -1 when there is
//! no record and the topic is not in that mirror, PREPARING when it is but nothing is persisted
//! yet), its leader and state epochs, and the LME record (`LastMirrorEpoch`,
//! `LastMirrorOffset`; -1 when there is none). A node asks its source with the mirror name its
//! own cluster id gives (kmirror names a mirror after its source's cluster id unless told
//! otherwise), i.e. "your mirror of me": see `docs/failback.md`.
//!
//! kafka-protocol does not know the KIP's APIs, so the frame is handled here with the kernel's
//! codecs ([`kmirror_kernel::proto_wire`]): request header v2, response header v1 (a flexible
//! API's).

use std::sync::mpsc::SyncSender;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable};
use kmirror_kernel::coordinator::Coordinator;
use kmirror_kernel::desired::DesiredState;
use kmirror_kernel::proto_wire::state_rpcs::{
    ReadMirrorStatesPartitionResult, ReadMirrorStatesRequest, ReadMirrorStatesResponse,
    ReadMirrorStatesTopicResult,
};
use kmirror_kernel::proto_wire::WireMessage;
use kmirror_kernel::state::MirrorState;
use kmirror_kernel::types::{MirrorName, MirrorPartition};

use super::broker::ServedNode;
use super::metadata::UNKNOWN_TOPIC_OR_PARTITION;
use super::CallId;

/// `ReadMirrorStates`' API key (the prototype's).
pub const READ_MIRROR_STATES_KEY: i16 = 100;
/// The only version of `ReadMirrorStates`.
pub const READ_MIRROR_STATES_VERSION: i16 = 0;
/// Request header version of a flexible API.
const REQUEST_HEADER_VERSION: i16 = 2;
/// Response header version of a flexible API.
const RESPONSE_HEADER_VERSION: i16 = 1;
/// `INVALID_REQUEST`.
const INVALID_REQUEST: i16 = 42;

/// One `ReadMirrorStates` on its way to the node's thread.
#[derive(Debug)]
pub struct MirrorStatesCall {
    /// Unique per request.
    pub id: CallId,
    /// The request header (its correlation id goes back in the answer).
    pub header: RequestHeader,
    /// The request body.
    pub request: ReadMirrorStatesRequest,
    /// Where the answer goes (the connection's thread waits on it).
    pub reply: SyncSender<ReadMirrorStatesResponse>,
}

/// Decodes a `ReadMirrorStates` frame (the API key already read from it): header and body.
pub fn decode_request(
    mut frame: Bytes,
) -> Result<(RequestHeader, ReadMirrorStatesRequest), String> {
    let version = frame
        .get(2..4)
        .map(|v| i16::from_be_bytes([v[0], v[1]]))
        .ok_or("a ReadMirrorStates request has no header")?;
    if version != READ_MIRROR_STATES_VERSION {
        return Err(format!(
            "ReadMirrorStates v{version} is not served (only v0); the client sent it anyway"
        ));
    }
    let header = RequestHeader::decode(&mut frame, REQUEST_HEADER_VERSION)
        .map_err(|e| format!("bad ReadMirrorStates header: {e}"))?;
    let body = ReadMirrorStatesRequest::decode(frame.chunk(), READ_MIRROR_STATES_VERSION)
        .map_err(|e| format!("bad ReadMirrorStates request: {e}"))?;
    Ok((header, body))
}

/// A `ReadMirrorStates` request frame (size prefix included) with `correlation_id`.
pub fn encode_request(
    correlation_id: i32,
    client_id: &str,
    request: &ReadMirrorStatesRequest,
) -> Result<Vec<u8>, String> {
    let header = RequestHeader::default()
        .with_request_api_key(READ_MIRROR_STATES_KEY)
        .with_request_api_version(READ_MIRROR_STATES_VERSION)
        .with_correlation_id(correlation_id)
        .with_client_id(Some(kafka_protocol::protocol::StrBytes::from_string(
            client_id.to_owned(),
        )));
    frame(&header, REQUEST_HEADER_VERSION, request)
}

/// A `ReadMirrorStates` response frame (size prefix included) answering `correlation_id`.
pub fn encode_response(
    correlation_id: i32,
    response: &ReadMirrorStatesResponse,
) -> Result<Vec<u8>, String> {
    let header = ResponseHeader::default().with_correlation_id(correlation_id);
    frame(&header, RESPONSE_HEADER_VERSION, response)
}

/// Decodes a response frame's contents (no size prefix): its correlation id and body.
pub fn decode_response(mut frame: Bytes) -> Result<(i32, ReadMirrorStatesResponse), String> {
    let header = ResponseHeader::decode(&mut frame, RESPONSE_HEADER_VERSION)
        .map_err(|e| format!("bad ReadMirrorStates response header: {e}"))?;
    let body = ReadMirrorStatesResponse::decode(frame.chunk(), READ_MIRROR_STATES_VERSION)
        .map_err(|e| format!("bad ReadMirrorStates response: {e}"))?;
    Ok((header.correlation_id, body))
}

/// `header` (at `header_version`) then `body` (at version 0), behind their size.
fn frame(
    header: &impl Encodable,
    header_version: i16,
    body: &impl WireMessage,
) -> Result<Vec<u8>, String> {
    let body = body
        .encode(READ_MIRROR_STATES_VERSION)
        .map_err(|e| e.to_string())?;
    let mut head = BytesMut::new();
    header
        .encode(&mut head, header_version)
        .map_err(|e| e.to_string())?;
    let len = i32::try_from(head.len() + body.len()).map_err(|_| "frame too large".to_owned())?;
    let mut out = Vec::with_capacity(head.len() + body.len() + 4);
    out.put_i32(len);
    out.extend_from_slice(&head);
    out.extend_from_slice(&body);
    Ok(out)
}

/// Answers `request` from the node's `__mirror_state` records.
pub fn answer(
    node: &dyn ServedNode,
    request: &ReadMirrorStatesRequest,
) -> ReadMirrorStatesResponse {
    let mut response = ReadMirrorStatesResponse::default();
    let mirror = match MirrorName::new(request.mirror_name.as_str()) {
        Ok(m) => m,
        Err(e) => {
            response.error_code = INVALID_REQUEST;
            response.error_message = Some(format!("mirror name {:?}: {e}", request.mirror_name));
            return response;
        }
    };
    for topic in &request.topics {
        let known = node.meta().topics.get(&topic.topic_name);
        // A topic put in the asked mirror whose partitions persisted nothing yet is mirrored
        // all the same: PREPARING, not UNKNOWN, so that the asker sees the loop.
        let put_in_mirror = known.is_some_and(|t| {
            matches!(
                t.desired(&topic.topic_name),
                Ok(DesiredState::Mirror(m) | DesiredState::Pause(m)) if m == mirror
            )
        });
        let partitions = topic
            .partitions
            .iter()
            .map(|p| {
                let index = p.partition_index;
                match known.filter(|t| (0..t.partitions).contains(&index)) {
                    Some(t) => partition(
                        node,
                        &MirrorPartition {
                            mirror: mirror.clone(),
                            topic_id: t.topic_id,
                            partition: index,
                        },
                        put_in_mirror,
                    ),
                    None => ReadMirrorStatesPartitionResult {
                        partition_index: index,
                        error_code: UNKNOWN_TOPIC_OR_PARTITION,
                        error_message: Some(format!(
                            "this node has no partition {index} of topic {:?}",
                            topic.topic_name
                        )),
                        ..Default::default()
                    },
                }
            })
            .collect();
        response.topics.push(ReadMirrorStatesTopicResult {
            topic_name: topic.topic_name.clone(),
            partitions,
        });
    }
    response
}

/// One partition's persisted state and LME record in mirror `key.mirror` (`put_in_mirror`: the
/// topic is in that mirror, so no record yet reads as PREPARING).
fn partition(
    node: &dyn ServedNode,
    key: &MirrorPartition,
    put_in_mirror: bool,
) -> ReadMirrorStatesPartitionResult {
    let coordinator: Option<&Coordinator> = node.state_coordinator(key);
    let state = coordinator.and_then(|c| c.read_state(key));
    let lme = coordinator.and_then(|c| c.read_last_mirrored_epoch(key));
    let mut result = ReadMirrorStatesPartitionResult {
        partition_index: key.partition,
        state: state
            .map_or(
                if put_in_mirror {
                    MirrorState::Preparing
                } else {
                    MirrorState::Unknown
                },
                |v| v.state,
            )
            .prototype_code(),
        ..Default::default()
    };
    if let Some(v) = state {
        result.leader_epoch = v.leader_epoch;
        result.state_epoch = v.state_epoch;
        result.error_message = v.error_message.clone();
        result.retry_attempt = i16::try_from(v.retry_attempt).unwrap_or(-1);
        result.previous_state = v
            .previous_state
            .unwrap_or(MirrorState::Unknown)
            .prototype_code();
    }
    if let Some(epoch) = lme.and_then(|v| v.last_mirrored_epoch) {
        result.last_mirror_epoch = epoch;
        result.last_mirror_offset = lme.map_or(-1, |v| v.last_mirrored_offset);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use kmirror_kernel::proto_wire::state_rpcs::{
        ReadMirrorStatesPartition, ReadMirrorStatesTopic,
    };

    fn request() -> ReadMirrorStatesRequest {
        ReadMirrorStatesRequest {
            mirror_name: "kmirror-a-0".into(),
            topics: vec![ReadMirrorStatesTopic {
                topic_name: "orders".into(),
                partitions: vec![ReadMirrorStatesPartition { partition_index: 2 }],
            }],
        }
    }

    /// A node with `orders` (3 partitions) under `mirror.name` `mirror_name` and no
    /// `__mirror_state` record.
    struct Stub(crate::node::dest::NodeMeta);

    impl ServedNode for Stub {
        fn meta(&self) -> &crate::node::dest::NodeMeta {
            &self.0
        }
        fn root(&self) -> &std::path::Path {
            std::path::Path::new("/nowhere/b")
        }
        fn log(&self, _: &kmirror_kernel::node::PartitionKey) -> Option<&crate::file_log::FileLog> {
            None
        }
        fn state_coordinator(&self, _: &MirrorPartition) -> Option<&Coordinator> {
            None
        }
        fn writable(&self, _: &kmirror_kernel::node::PartitionKey) -> bool {
            false
        }
        fn append(
            &mut self,
            key: &kmirror_kernel::node::PartitionKey,
            _: kmirror_kernel::types::LeaderEpoch,
            _: &crate::record_batch::RawBatch,
        ) -> Result<kmirror_kernel::batch::BatchHeader, super::super::ServeError> {
            Err(super::super::ServeError::NoLog { partition: *key })
        }
        fn append_marker(
            &mut self,
            key: &kmirror_kernel::node::PartitionKey,
            _: kmirror_kernel::types::LeaderEpoch,
            _: (i64, i16),
            _: kmirror_kernel::batch::ControlType,
        ) -> Result<kmirror_kernel::batch::BatchHeader, super::super::ServeError> {
            Err(super::super::ServeError::NoLog { partition: *key })
        }
        fn delete_records(
            &mut self,
            key: &kmirror_kernel::node::PartitionKey,
            _: kmirror_kernel::types::Offset,
        ) -> Result<kmirror_kernel::types::Offset, super::super::ServeError> {
            Err(super::super::ServeError::NoLog { partition: *key })
        }
        fn mirror_selecting(&self, _: &str) -> Option<kmirror_kernel::types::MirrorName> {
            None
        }
    }

    fn stub(mirror_name: Option<&str>) -> Stub {
        let mut meta = crate::node::dest::NodeMeta::new(None, 4);
        meta.topics.insert(
            "orders".into(),
            crate::node::dest::NodeTopic {
                topic_id: kmirror_kernel::types::TopicId::from_u64(7),
                partitions: 3,
                mirror_name: mirror_name.map(str::to_owned),
            },
        );
        Stub(meta)
    }

    fn state_answered(node: &Stub) -> (i16, i8) {
        let response = answer(node, &request());
        let p = &response.topics[0].partitions[0];
        (p.error_code, p.state)
    }

    #[test]
    fn a_topic_in_the_asked_mirror_with_nothing_persisted_reads_as_preparing_not_absent() {
        let preparing = MirrorState::Preparing.prototype_code();
        let unknown = MirrorState::Unknown.prototype_code();
        assert_eq!(state_answered(&stub(Some("kmirror-a-0"))), (0, preparing));
        assert_eq!(
            state_answered(&stub(Some("kmirror-a-0.paused"))),
            (0, preparing)
        );
        // Failed over from that mirror, in another one, or in none: no reverse mirror.
        assert_eq!(
            state_answered(&stub(Some("kmirror-a-0.removed"))),
            (0, unknown)
        );
        assert_eq!(state_answered(&stub(Some("kmirror-c-0"))), (0, unknown));
        assert_eq!(state_answered(&stub(None)), (0, unknown));
        let mut missing = request();
        missing.topics[0].partitions[0].partition_index = 3;
        let response = answer(&stub(None), &missing);
        assert_eq!(
            response.topics[0].partitions[0].error_code,
            UNKNOWN_TOPIC_OR_PARTITION
        );
    }

    #[test]
    fn a_request_frame_decodes_to_its_header_and_body() {
        let frame = encode_request(7, "kmirror", &request()).unwrap();
        let size = i32::from_be_bytes(frame[..4].try_into().unwrap());
        assert_eq!(usize::try_from(size).unwrap(), frame.len() - 4);
        let (header, body) = decode_request(Bytes::from(frame[4..].to_vec())).unwrap();
        assert_eq!(header.request_api_key, READ_MIRROR_STATES_KEY);
        assert_eq!(header.correlation_id, 7);
        assert_eq!(body, request());
    }

    #[test]
    fn a_version_other_than_0_is_refused_not_misread() {
        let mut frame = encode_request(7, "kmirror", &request()).unwrap();
        frame[7] = 1; // the API version's low byte, after the size and the API key
        let refused = decode_request(Bytes::from(frame[4..].to_vec())).unwrap_err();
        assert!(refused.contains("v1 is not served"), "{refused}");
    }

    #[test]
    fn a_response_frame_decodes_to_its_correlation_id_and_body() {
        let response = ReadMirrorStatesResponse {
            error_code: INVALID_REQUEST,
            ..Default::default()
        };
        let frame = encode_response(9, &response).unwrap();
        let (id, decoded) = decode_response(Bytes::from(frame[4..].to_vec())).unwrap();
        assert_eq!((id, decoded), (9, response));
    }
}
