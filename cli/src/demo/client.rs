//! The demo's Kafka client: everything `kmirror demo` writes to a node goes over Kafka's wire,
//! as a producer's requests (CreateTopics, InitProducerId, Produce, AddPartitionsToTxn,
//! EndTxn), so the node's gates, producer ids and transaction coordinator decide, as they do
//! for Kafka's own clients. Batches hold synthetic records ([`RawBatch::synthesize`]).

use std::time::Duration;

use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    AddPartitionsToTxnRequest, CreateTopicsRequest, EndTxnRequest, InitProducerIdRequest,
    ProduceRequest, ProducerId, TopicName, TransactionalId,
};
use kafka_protocol::protocol::StrBytes;
use kmirror_harness::record_batch::RawBatch;
use kmirror_harness::wire::Connection;
use kmirror_kernel::batch::BatchHeader;
use kmirror_kernel::types::{Offset, TopicId};

use super::DemoError;

/// The timestamp of every record the demo writes (fixed, so two runs write the same bytes).
const TIMESTAMP_MS: i64 = 1_700_000_000_000;

/// A producer the node gave an id: idempotent, or transactional with its transactional id.
#[derive(Debug)]
pub struct Producer {
    /// The producer id.
    pub id: i64,
    epoch: i16,
    next_sequence: i32,
    transactional_id: Option<String>,
    in_transaction: bool,
}

/// One connection to a node, writing partition 0 of one topic.
pub struct Client {
    conn: Connection,
    topic: String,
}

impl Client {
    /// Connects to the node at `address`, to write `topic`.
    pub fn connect(address: &str, topic: &str) -> Result<Client, DemoError> {
        let conn = Connection::connect(address, Duration::from_secs(5), Duration::from_secs(30))?;
        Ok(Client {
            conn,
            topic: topic.to_owned(),
        })
    }

    fn name(&self) -> TopicName {
        TopicName(StrBytes::from_string(self.topic.clone()))
    }

    /// CreateTopics of the topic, one partition: its id.
    pub fn create_topic(&mut self) -> Result<TopicId, DemoError> {
        let request = CreateTopicsRequest::default()
            .with_timeout_ms(30_000)
            .with_topics(vec![CreatableTopic::default()
                .with_name(self.name())
                .with_num_partitions(1)
                .with_replication_factor(-1)]);
        let response = self.conn.send("CreateTopics", &request, 7)?;
        let t = &response.topics[0];
        refused("CreateTopics", t.error_code, t.error_message.as_deref())?;
        Ok(TopicId(*t.topic_id.as_bytes()))
    }

    /// InitProducerId: an idempotent producer, or a transactional one.
    pub fn producer(&mut self, transactional_id: Option<&str>) -> Result<Producer, DemoError> {
        let request = InitProducerIdRequest::default()
            .with_transactional_id(transactional_id.map(txn_id))
            .with_transaction_timeout_ms(60_000)
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1);
        let response = self.conn.send("InitProducerId", &request, 4)?;
        refused("InitProducerId", response.error_code, None)?;
        Ok(Producer {
            id: response.producer_id.0,
            epoch: response.producer_epoch,
            next_sequence: 0,
            transactional_id: transactional_id.map(str::to_owned),
            in_transaction: false,
        })
    }

    /// A batch of `records` plain records (no producer id): its base offset, or the node's
    /// refusal as Kafka's error code and message.
    pub fn try_plain(&mut self, records: i64) -> Result<Result<Offset, (i16, String)>, DemoError> {
        self.produce(&header(records, -1, -1, -1, false), None)
    }

    /// A batch of `records` plain records: its base offset.
    pub fn plain(&mut self, records: i64) -> Result<Offset, DemoError> {
        let answer = self.try_plain(records)?;
        answer.or_else(|(code, message)| refused("Produce", code, Some(&message)).map(|()| 0))
    }

    /// A batch of `records` from producer `p` (in its transaction, which the first batch
    /// adds the partition to): its base offset.
    pub fn send(&mut self, p: &mut Producer, records: i64) -> Result<Offset, DemoError> {
        let transactional = p.transactional_id.clone();
        if let Some(id) = &transactional {
            if !p.in_transaction {
                let mut request = AddPartitionsToTxnRequest::default();
                request.v3_and_below_transactional_id = txn_id(id);
                request.v3_and_below_producer_id = ProducerId(p.id);
                request.v3_and_below_producer_epoch = p.epoch;
                request.v3_and_below_topics = vec![AddPartitionsToTxnTopic::default()
                    .with_name(self.name())
                    .with_partitions(vec![0])];
                let response = self.conn.send("AddPartitionsToTxn", &request, 3)?;
                for t in &response.results_by_topic_v3_and_below {
                    for r in &t.results_by_partition {
                        refused("AddPartitionsToTxn", r.partition_error_code, None)?;
                    }
                }
                p.in_transaction = true;
            }
        }
        let batch = header(
            records,
            p.id,
            p.epoch,
            p.next_sequence,
            transactional.is_some(),
        );
        let answer = self.produce(&batch, transactional.as_deref())?;
        let base = answer
            .or_else(|(code, message)| refused("Produce", code, Some(&message)).map(|()| 0))?;
        p.next_sequence += i32::try_from(records).unwrap_or(i32::MAX);
        Ok(base)
    }

    /// EndTxn: producer `p`'s transaction commits (`commit`) or aborts.
    pub fn end(&mut self, p: &mut Producer, commit: bool) -> Result<(), DemoError> {
        let id = p.transactional_id.as_deref().unwrap_or_default();
        let request = EndTxnRequest::default()
            .with_transactional_id(txn_id(id))
            .with_producer_id(ProducerId(p.id))
            .with_producer_epoch(p.epoch)
            .with_committed(commit);
        let response = self.conn.send("EndTxn", &request, 4)?;
        refused("EndTxn", response.error_code, None)?;
        p.in_transaction = false;
        Ok(())
    }

    /// Produce (acks=all) of `batch` to partition 0: its base offset, or the refusal.
    fn produce(
        &mut self,
        batch: &BatchHeader,
        transactional_id: Option<&str>,
    ) -> Result<Result<Offset, (i16, String)>, DemoError> {
        let raw = RawBatch::synthesize(batch, TIMESTAMP_MS).map_err(|e| DemoError::Refused {
            what: "encoding a batch".into(),
            message: e.to_string(),
        })?;
        let request = ProduceRequest::default()
            .with_acks(-1)
            .with_timeout_ms(30_000)
            .with_transactional_id(transactional_id.map(txn_id))
            .with_topic_data(vec![TopicProduceData::default()
                .with_name(self.name())
                .with_partition_data(vec![PartitionProduceData::default()
                    .with_index(0)
                    .with_records(Some(bytes::Bytes::copy_from_slice(raw.bytes())))])]);
        let response = self.conn.send("Produce", &request, 9)?;
        let p = &response.responses[0].partition_responses[0];
        Ok(if p.error_code == 0 {
            Ok(p.base_offset)
        } else {
            Err((
                p.error_code,
                p.error_message.as_deref().unwrap_or("").to_owned(),
            ))
        })
    }
}

/// A client's batch header: offsets from 0, no leader epoch.
fn header(records: i64, producer_id: i64, epoch: i16, sequence: i32, txn: bool) -> BatchHeader {
    BatchHeader {
        base_offset: 0,
        last_offset: records - 1,
        partition_leader_epoch: -1,
        producer_id,
        producer_epoch: epoch,
        base_sequence: sequence,
        is_transactional: txn,
        control: None,
    }
}

fn txn_id(id: &str) -> TransactionalId {
    TransactionalId(StrBytes::from_string(id.to_owned()))
}

/// `Ok` for error code 0, else the node's refusal of `what`.
fn refused(what: &str, code: i16, message: Option<&str>) -> Result<(), DemoError> {
    if code == 0 {
        return Ok(());
    }
    Err(DemoError::Refused {
        what: what.to_owned(),
        message: format!(
            "error code {code}{}",
            message.map(|m| format!(": {m}")).unwrap_or_default()
        ),
    })
}
