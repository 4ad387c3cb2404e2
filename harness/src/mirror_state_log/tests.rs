//! The `__mirror_state` log: fences, commits, reopening, typed errors.

use super::*;
use kmirror_kernel::batch::BatchHeader;

use crate::record_batch::{RawBatch, Record};
use kmirror_kernel::state::MirrorState;
use kmirror_kernel::types::MirrorName;

fn key(mirror: &str) -> MirrorPartition {
    MirrorPartition {
        mirror: MirrorName::new(mirror).unwrap(),
        topic_id: TopicId::from_u64(9),
        partition: 0,
    }
}

fn value(state: MirrorState) -> MirrorPartitionStateValue {
    MirrorPartitionStateValue {
        state,
        leader_epoch: 1,
        state_epoch: 0,
        error_message: None,
        retry_attempt: 0,
        previous_state: None,
    }
}

#[test]
fn writes_survive_reopening_and_refused_writes_are_not_logged() {
    let tmp = tempfile::tempdir().unwrap();
    let table = TransitionTable::default();
    let mut log =
        MirrorStateLog::create(tmp.path(), table.clone(), FileLogConfig::default()).unwrap();
    let k = key("east");
    let stored = log
        .write_state(&k, value(MirrorState::Preparing), None, 5)
        .unwrap()
        .unwrap();
    assert_eq!(stored.state_epoch, 0);
    // Stale state epoch: refused, nothing appended.
    let leo = log.log().log_end_offset();
    assert!(log
        .write_state(&k, value(MirrorState::Mirroring), None, 6)
        .unwrap()
        .is_err());
    assert_eq!(log.log().log_end_offset(), leo);
    log.write_state(&k, value(MirrorState::Mirroring), Some(0), 7)
        .unwrap()
        .unwrap();
    let lme = LastMirroredEpochsValue {
        last_mirrored_epoch: Some(3),
        last_mirrored_offset: 40,
    };
    // An LME write is fenced by its key's state epoch: none stored yet, refused.
    let leo = log.log().log_end_offset();
    assert!(log
        .write_last_mirrored_epoch(&key("old"), lme, Some(0), 8)
        .unwrap()
        .is_err());
    assert_eq!(log.log().log_end_offset(), leo);
    for k in ["old", "b"] {
        log.write_state(&key(k), value(MirrorState::Preparing), None, 8)
            .unwrap()
            .unwrap();
    }
    log.write_last_mirrored_epoch(&key("old"), lme, Some(0), 8)
        .unwrap()
        .unwrap();
    let newer = LastMirroredEpochsValue {
        last_mirrored_epoch: Some(2),
        last_mirrored_offset: 20,
    };
    log.write_last_mirrored_epoch(&key("b"), newer, Some(0), 9)
        .unwrap()
        .unwrap();
    log.close().unwrap();

    let log = MirrorStateLog::open(tmp.path(), table, FileLogConfig::default()).unwrap();
    let state = log.coordinator().read_state(&k).unwrap();
    assert_eq!(
        (state.state, state.state_epoch),
        (MirrorState::Mirroring, 1)
    );
    // The newest LME record wins, whatever the key order.
    let (k2, v2) = log
        .latest_last_mirrored_epoch(TopicId::from_u64(9), 0)
        .unwrap();
    assert_eq!((k2.mirror.as_str(), *v2), ("b", newer));
    assert!(log
        .latest_last_mirrored_epoch(TopicId::from_u64(8), 0)
        .is_none());
    assert_eq!(log.records().unwrap().len(), 6);
}

#[test]
fn a_garbage_record_is_a_typed_error() {
    let tmp = tempfile::tempdir().unwrap();
    let table = TransitionTable::default();
    let mut log =
        MirrorStateLog::create(tmp.path(), table.clone(), FileLogConfig::default()).unwrap();
    log.write_state(&key("east"), value(MirrorState::Preparing), None, 1)
        .unwrap()
        .unwrap();
    log.close().unwrap();
    let (mut raw, _) = FileLog::open(
        tmp.path(),
        MirrorStateLog::topic_partition(),
        FileLogConfig::default(),
    )
    .unwrap();
    let leo = raw.log_end_offset();
    let garbage = Record {
        attributes: 0,
        timestamp_delta: 0,
        offset_delta: 0,
        key: Some(vec![0, 9, 1, 2]),
        value: Some(vec![1]),
        headers: Vec::new(),
    };
    let batch = RawBatch::encode(&BatchHeader::plain(leo, leo, 0), 0, &[garbage]).unwrap();
    raw.append_as_follower(&[batch]).unwrap();
    raw.close().unwrap();
    let err = MirrorStateLog::open(tmp.path(), table, FileLogConfig::default()).unwrap_err();
    assert!(
        matches!(err, MirrorStateLogError::BadRecord { offset, .. } if offset == leo),
        "{err}"
    );
    assert!(err
        .to_string()
        .contains("unknown __mirror_state key type 9"));
}

/// A node destination's partition: writes staged together are fenced against each other,
/// committed as one batch, invisible to the coordinator until committed, and read back after
/// reopening; `inspect` sees the same.
#[test]
fn staged_writes_commit_as_one_batch_in_a_log_dir() {
    let tmp = tempfile::tempdir().unwrap();
    let table = TransitionTable::default();
    let store = Arc::new(LogDirCheckpoints::open(tmp.path()).unwrap());
    let open = |store: &Arc<LogDirCheckpoints>| {
        MirrorStateLog::open_in_log_dir(
            tmp.path(),
            3,
            table.clone(),
            FileLogConfig::default(),
            Arc::clone(store),
        )
        .unwrap()
    };
    let mut log = open(&store);
    assert_eq!(log.partition(), 3);
    let k = key("east");
    let first = log
        .stage_state(&k, value(MirrorState::Preparing), None)
        .unwrap();
    // The second write is fenced against the first, though nothing is on disk yet.
    assert!(log
        .stage_state(&k, value(MirrorState::Mirroring), None)
        .is_err());
    log.stage_state(&k, value(MirrorState::Mirroring), Some(first.state_epoch))
        .unwrap();
    assert!(log.has_staged());
    assert!(
        log.coordinator().read_state(&k).is_none(),
        "not committed yet"
    );
    assert_eq!(log.log().log_end_offset(), 0);
    log.commit(5).unwrap();
    assert!(!log.has_staged());
    assert_eq!(log.log().log_end_offset(), 2, "two records, one batch");
    assert_eq!(log.log().try_read(0, 2).unwrap().len(), 1);
    assert_eq!(
        log.coordinator().read_state(&k).map(|v| v.state),
        Some(MirrorState::Mirroring)
    );
    log.close().unwrap();
    let inspected =
        MirrorStateLog::inspect(tmp.path(), 3, table.clone(), Arc::clone(&store)).unwrap();
    assert_eq!(
        inspected.read_state(&k).map(|v| v.state),
        Some(MirrorState::Mirroring)
    );
    let log = open(&store);
    assert_eq!(log.records().unwrap().len(), 2);
}
