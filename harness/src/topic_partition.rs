//! [`TopicPartition`]: a topic partition as a log names it on disk, in its directory name
//! `<topic>-<partition>` and in the lines of the offset checkpoints; the topic names a
//! destination may hold ([`check_topic`]) and topic ids as its files write them
//! ([`parse_topic_id`]).

use kmirror_kernel::types::{PartitionIndex, TopicId};

use crate::error::TopicPartitionError;

/// A topic partition, named as in its directory `<topic>-<partition>`.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct TopicPartition {
    /// The topic name (Kafka's rules: `[a-zA-Z0-9._-]`, 1 to 249 characters).
    pub topic: String,
    /// The partition index.
    pub partition: PartitionIndex,
}

impl TopicPartition {
    /// A topic partition. Fails when `topic` is not a legal Kafka topic name (so that
    /// directory and checkpoint lines stay parseable) or `partition` is negative.
    pub fn new(
        topic: impl Into<String>,
        partition: PartitionIndex,
    ) -> Result<Self, TopicPartitionError> {
        let topic = topic.into();
        if topic.is_empty()
            || topic.len() > 249
            || topic == "."
            || topic == ".."
            || !topic
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
        {
            return Err(TopicPartitionError::InvalidTopic(topic));
        }
        if partition < 0 {
            return Err(TopicPartitionError::NegativePartition(partition));
        }
        Ok(TopicPartition { topic, partition })
    }

    /// The directory name `<topic>-<partition>`.
    pub fn dir_name(&self) -> String {
        format!("{}-{}", self.topic, self.partition)
    }

    /// Parses a directory name `<topic>-<partition>` (split at the last `-`).
    pub fn from_dir_name(name: &str) -> Result<Self, TopicPartitionError> {
        let invalid = || TopicPartitionError::InvalidDirName(name.to_owned());
        let (topic, partition) = name.rsplit_once('-').ok_or_else(invalid)?;
        if partition.is_empty() || !partition.bytes().all(|b| b.is_ascii_digit()) {
            return Err(invalid());
        }
        TopicPartition::new(topic, partition.parse().map_err(|_| invalid())?)
    }
}

/// The topic name of the mirror-state log.
pub const MIRROR_STATE_TOPIC: &str = "__mirror_state";

/// Checks a topic name: Kafka's rules, and not the mirror-state topic.
pub fn check_topic(topic: &str) -> Result<(), String> {
    TopicPartition::new(topic, 0).map_err(|e| e.to_string())?;
    if topic == MIRROR_STATE_TOPIC {
        return Err(format!(
            "{MIRROR_STATE_TOPIC} is reserved for the mirror state"
        ));
    }
    Ok(())
}

/// Parses 32 hex digits into a topic id.
pub fn parse_topic_id(text: &str) -> Result<TopicId, String> {
    let bytes = text.as_bytes();
    if bytes.len() != 32 || !bytes.iter().all(u8::is_ascii_hexdigit) {
        return Err(format!("topic.id {text:?} is not 32 hex digits"));
    }
    let mut id = [0u8; 16];
    for (i, b) in id.iter_mut().enumerate() {
        *b = u8::from_str_radix(&text[2 * i..2 * i + 2], 16)
            .map_err(|_| format!("topic.id {text:?} is not 32 hex digits"))?;
    }
    Ok(TopicId(id))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topic_partition_dir_names_round_trip() {
        let tp = TopicPartition::new("my-topic.v2", 7).unwrap();
        assert_eq!(tp.dir_name(), "my-topic.v2-7");
        assert_eq!(TopicPartition::from_dir_name("my-topic.v2-7"), Ok(tp));
        assert_eq!(
            TopicPartition::from_dir_name("topic-x"),
            Err(TopicPartitionError::InvalidDirName("topic-x".into()))
        );
        assert_eq!(
            TopicPartition::from_dir_name("-3"),
            Err(TopicPartitionError::InvalidTopic("".into()))
        );
        assert_eq!(
            TopicPartition::new("a b", 0),
            Err(TopicPartitionError::InvalidTopic("a b".into()))
        );
        assert_eq!(
            TopicPartition::new("a", -1),
            Err(TopicPartitionError::NegativePartition(-1))
        );
    }
}
