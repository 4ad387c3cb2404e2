//! A partition log's checkpoint files: their names (Kafka's), Kafka's `OffsetCheckpointFile`
//! text format of the three offset checkpoints, and the values a log last wrote to them. The
//! leader-epoch checkpoint's format is the kernel's ([`kmirror_kernel::checkpoint`]).

use std::path::Path;

use kmirror_kernel::epoch_cache::EpochCache;
use kmirror_kernel::types::{Offset, PartitionIndex};

use crate::error::CheckpointError;
use crate::topic_partition::TopicPartition;

/// File name of the high-watermark checkpoint (Kafka's log-dir-level name).
pub const HIGH_WATERMARK_FILE: &str = "replication-offset-checkpoint";
/// File name of the log-start-offset checkpoint (Kafka's log-dir-level name).
pub const LOG_START_OFFSET_FILE: &str = "log-start-offset-checkpoint";
/// File name of the recovery-point checkpoint (Kafka's log-dir-level name).
pub const RECOVERY_POINT_FILE: &str = "recovery-point-offset-checkpoint";
/// File name of the leader-epoch checkpoint (as Kafka, per partition).
pub const LEADER_EPOCH_FILE: &str = kmirror_kernel::checkpoint::FILE_NAME;

/// The values last written to the checkpoint files, to skip rewriting unchanged ones.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Persisted {
    pub(crate) log_start_offset: Offset,
    pub(crate) high_watermark: Offset,
    pub(crate) recovery_point: Offset,
    pub(crate) epoch_cache: EpochCache,
}

/// The text of a per-partition offset checkpoint holding `offset` for `tp`: Kafka's
/// `OffsetCheckpointFile` format, `0\n1\n<topic> <partition> <offset>\n`.
pub fn encode_offset_checkpoint(tp: &TopicPartition, offset: Offset) -> String {
    format!("0\n1\n{} {} {offset}\n", tp.topic, tp.partition)
}

/// The offset `text` (Kafka's `OffsetCheckpointFile` format, read from `file`) holds for `tp`,
/// or `None` when it holds no entry for `tp`. Several entries are accepted (a Kafka
/// log-dir-level file): see [`decode_offset_checkpoint_entries`].
pub fn decode_offset_checkpoint(
    text: &str,
    file: &Path,
    tp: &TopicPartition,
) -> Result<Option<Offset>, CheckpointError> {
    Ok(decode_offset_checkpoint_entries(text, file)?
        .into_iter()
        .find(|((topic, partition), _)| *topic == tp.topic && *partition == tp.partition)
        .map(|(_, offset)| offset))
}

/// One line of an offset checkpoint: `((topic, partition), offset)`.
pub type CheckpointEntry = ((String, PartitionIndex), Offset);

/// Every `(topic, partition) -> offset` entry of `text` (Kafka's `OffsetCheckpointFile`
/// format, read from `file`), in file order, as long as the version is 0, the count matches,
/// every line has three fields, offsets are not negative and no partition appears twice.
pub fn decode_offset_checkpoint_entries(
    text: &str,
    file: &Path,
) -> Result<Vec<CheckpointEntry>, CheckpointError> {
    let err = |line: usize, reason: String| CheckpointError {
        file: file.to_path_buf(),
        line,
        reason,
    };
    let mut lines = text.lines();
    let version = lines
        .next()
        .ok_or_else(|| err(0, "the file is empty".into()))?;
    if version != "0" {
        return Err(err(1, format!("version {version:?} is not 0")));
    }
    let count_text = lines
        .next()
        .ok_or_else(|| err(2, "the entry count line is missing".into()))?;
    let count: usize = count_text
        .parse()
        .map_err(|_| err(2, format!("entry count {count_text:?} is not a number")))?;
    let mut out = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for (i, line) in lines.enumerate() {
        let line_no = i + 3;
        let fields: Vec<&str> = line.split(' ').collect();
        let [topic, partition, offset] = fields[..] else {
            return Err(err(
                line_no,
                format!("expected `<topic> <partition> <offset>`, found {line:?}"),
            ));
        };
        let partition: PartitionIndex = partition
            .parse()
            .map_err(|_| err(line_no, format!("partition {partition:?} is not a number")))?;
        let offset: Offset = offset
            .parse()
            .map_err(|_| err(line_no, format!("offset {offset:?} is not a number")))?;
        if offset < 0 {
            return Err(err(line_no, format!("offset {offset} is negative")));
        }
        if !seen.insert((topic, partition)) {
            return Err(err(
                line_no,
                format!("a second entry for {topic}-{partition}"),
            ));
        }
        out.push(((topic.to_owned(), partition), offset));
    }
    if out.len() != count {
        return Err(err(
            2,
            format!("the file announces {count} entries but holds {}", out.len()),
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offset_checkpoint_format_round_trips_and_refuses_garbage() {
        let tp = TopicPartition::new("t", 3).unwrap();
        let f = Path::new("/x/replication-offset-checkpoint");
        let text = encode_offset_checkpoint(&tp, 42);
        assert_eq!(text, "0\n1\nt 3 42\n");
        assert_eq!(decode_offset_checkpoint(&text, f, &tp), Ok(Some(42)));
        assert_eq!(
            decode_offset_checkpoint("0\n2\nu 0 5\nt 3 9\n", f, &tp),
            Ok(Some(9))
        );
        assert_eq!(decode_offset_checkpoint("0\n0\n", f, &tp), Ok(None));
        for (bad, line) in [
            ("", 0),
            ("1\n0\n", 1),
            ("0\nx\n", 2),
            ("0\n1\nt 3\n", 3),
            ("0\n1\nt 3 -1\n", 3),
            ("0\n1\nt 3 4x\n", 3),
            ("0\n2\nt 3 4\n", 2),
            ("0\n2\nt 3 4\nt 3 5\n", 4),
        ] {
            let e = decode_offset_checkpoint(bad, f, &tp).unwrap_err();
            assert_eq!(e.line, line, "{bad:?}: {e}");
            assert!(e.to_string().contains("replication-offset-checkpoint"));
        }
    }
}
