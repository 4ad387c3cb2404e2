//! The driver on real logs: mirroring plain, idempotent and transactional data byte for byte,
//! failover with a half-mirrored transaction, failback, restarts, source faults, divergence.

use std::path::{Path, PathBuf};

use kmirror_harness::driver::cluster::{ClusterConfig, ClusterDir};
use kmirror_harness::driver::LocalSource;
use kmirror_harness::driver::{
    Cluster, Driver, DriverError, DriverOptions, Event, Idle, ManualClock, RunEnd, Until,
};
use kmirror_harness::producer::{self, ProduceOp};
use kmirror_harness::record_batch::RawBatch;
use kmirror_kernel::batch::ControlType;
use kmirror_kernel::config::{MirrorConfig, RetryPolicy, StopStrategy};
use kmirror_kernel::controller::{MirrorErrorCode, MirrorRequest};
use kmirror_kernel::log::LogView;
use kmirror_kernel::state::MirrorState;
use kmirror_kernel::types::{MirrorName, Offset, TopicId};

const TOPIC: &str = "orders";
const TOPIC_ID: TopicId = TopicId::from_u64(0xfeed);

fn name(s: &str) -> MirrorName {
    MirrorName::new(s).unwrap()
}

fn ops(text: &str) -> Vec<ProduceOp> {
    text.split_whitespace()
        .map(|s| s.parse().unwrap())
        .collect()
}

/// A one-replica source cluster `east` in `root/east` with `ops` produced.
fn source(root: &Path, text: &str) -> PathBuf {
    let dir = root.join("east");
    let config = ClusterConfig::new(name("east"), TOPIC, TOPIC_ID);
    let mut cluster =
        Cluster::open_dir(ClusterDir::create(&dir, config, 1).unwrap(), true).unwrap();
    producer::produce(&mut cluster, &ops(text), 1_000).unwrap();
    cluster.close().unwrap();
    dir
}

fn produce(dir: &Path, text: &str) -> Result<producer::ProduceReport, DriverError> {
    let mut cluster = Cluster::open(dir)?;
    let report = producer::produce(&mut cluster, &ops(text), 2_000);
    cluster.close()?;
    report
}

/// A destination cluster `west` mirroring `east`, with `replicas` replicas.
fn dest(root: &Path, replicas: u32) -> PathBuf {
    let dir = root.join("west");
    let mut config = ClusterConfig::new(name("west"), TOPIC, TOPIC_ID);
    config.mirror_name = Some("east".into());
    config.mirrors.insert(name("east"));
    ClusterDir::create(&dir, config, replicas).unwrap();
    dir
}

fn driver(dest: &Path, source: Option<&Path>, options: DriverOptions) -> Driver {
    let source = source.map(|s| {
        Box::new(LocalSource::open(s).unwrap()) as Box<dyn kmirror_harness::source::Source>
    });
    Driver::open(dest, source, options).unwrap()
}

/// Runs `dest` mirroring `source` until idle; returns the events.
fn mirror(dest: &Path, source: &Path, options: DriverOptions) -> (RunEnd, Vec<Event>) {
    let mut d = driver(dest, Some(source), options);
    let end = d
        .run(&mut ManualClock::default(), Until::Idle, &mut |_, _| {})
        .unwrap();
    let events = d.take_events();
    d.close().unwrap();
    (end, events)
}

/// The batches of replica `broker` of cluster `dir`.
fn batches(dir: &Path, broker: i32) -> Vec<RawBatch> {
    let cluster = Cluster::open(dir).unwrap();
    let log = if broker == cluster.dir.controller().leader {
        &cluster.leader
    } else {
        &cluster
            .followers
            .iter()
            .find(|f| f.id == broker)
            .unwrap()
            .log
    };
    let out = log
        .try_read(log.log_start_offset(), log.log_end_offset())
        .unwrap();
    drop(cluster);
    out
}

fn bytes(batches: &[RawBatch]) -> Vec<Vec<u8>> {
    batches.iter().map(|b| b.bytes().to_vec()).collect()
}

/// The source's batches wholly below `bound`.
fn below(batches: &[RawBatch], bound: Offset) -> Vec<RawBatch> {
    batches
        .iter()
        .filter(|b| b.header().last_offset < bound)
        .cloned()
        .collect()
}

struct Snapshot {
    state: MirrorState,
    leo: Offset,
    hw: Offset,
    lso: Offset,
    leader_epoch: i32,
    writable: bool,
}

fn snapshot(dir: &Path) -> Snapshot {
    let cluster = Cluster::open(dir).unwrap();
    let s = Snapshot {
        state: cluster.mirror_state(),
        leo: cluster.leader.log_end_offset(),
        hw: cluster.leader.high_watermark(),
        lso: cluster.leader.last_stable_offset(),
        leader_epoch: cluster.dir.controller().leader_epoch,
        writable: cluster.dir.writable(),
    };
    drop(cluster);
    s
}

fn stop(dest: &Path, options: DriverOptions) -> Vec<Event> {
    let mut d = driver(dest, None, options);
    d.start(0).unwrap();
    d.request(
        &MirrorRequest::RemoveTopics {
            mirror: "east".into(),
            topics: vec![TOPIC.into()],
        },
        0,
    )
    .unwrap();
    let end = d
        .run(&mut ManualClock::default(), Until::Idle, &mut |_, _| {})
        .unwrap();
    assert_eq!(end, RunEnd::Settled);
    let events = d.take_events();
    d.close().unwrap();
    events
}

const MIXED: &str = "plain:3 idem:1:2 idem:1:2 bump-epoch txn:7:2 plain:1 txn:7:1 commit:7 \
                     txn:8:2 abort:8 bump-epoch idem:1:1 plain:2";

#[test]
fn mirrors_plain_idempotent_and_transactional_batches_byte_for_byte() {
    let tmp = tempfile::tempdir().unwrap();
    // Producer 9's transaction stays open: the source's LSO bounds what is mirrored.
    let src = source(tmp.path(), &format!("{MIXED} txn:9:2 plain:1"));
    let west = dest(tmp.path(), 3);
    let (end, events) = mirror(
        &west,
        &src,
        DriverOptions {
            max_fetch_batches: 3,
            ..DriverOptions::default()
        },
    );
    assert_eq!(end, RunEnd::CaughtUp);
    assert!(events.contains(&Event::FetcherStarted));
    let source_batches = batches(&src, 0);
    let bound = snapshot(&src).lso;
    let expected = below(&source_batches, bound);
    assert!(
        expected.len() < source_batches.len(),
        "the open transaction is not mirrored"
    );
    for broker in 0..3 {
        assert_eq!(
            bytes(&batches(&west, broker)),
            bytes(&expected),
            "replica {broker}"
        );
    }
    let s = snapshot(&west);
    assert_eq!(s.state, MirrorState::Mirroring);
    assert_eq!((s.leo, s.hw, s.lso), (bound, bound, bound));
    assert!(!s.writable);
    // Mirrored epochs follow the source.
    let (a, b) = (Cluster::open(&west).unwrap(), Cluster::open(&src).unwrap());
    assert_eq!(
        a.leader.epoch_cache().entries().collect::<Vec<_>>(),
        b.leader.epoch_cache().entries().collect::<Vec<_>>()
    );
    drop((a, b));
    // A local write is refused while mirroring.
    let err = produce(&west, "plain:1").unwrap_err();
    assert!(err.to_string().contains("READ_ONLY_TOPIC"), "{err}");

    // The source commits; the next run catches up from where the last one stopped.
    produce(&src, "commit:9 plain:4").unwrap();
    let (end, _) = mirror(&west, &src, DriverOptions::default());
    assert_eq!(end, RunEnd::CaughtUp);
    assert_eq!(bytes(&batches(&west, 0)), bytes(&batches(&src, 0)));
    assert_eq!(bytes(&batches(&west, 2)), bytes(&batches(&src, 0)));
}

/// Mirrors until `west` holds producer 9's data batches but not its COMMIT marker; returns the
/// marker's offset.
fn mirror_half_a_transaction(root: &Path, src: &Path, west: &Path) -> Offset {
    let (end, _) = mirror(west, src, DriverOptions::default());
    assert_eq!(end, RunEnd::CaughtUp);
    let report = produce(src, "txn:9:2 txn:9:1 commit:9 plain:1").unwrap();
    let commit = report.appended[2].base_offset;
    let mut d = driver(
        west,
        Some(src),
        DriverOptions {
            max_fetch_batches: 1,
            ..DriverOptions::default()
        },
    );
    let mut now = 0;
    while d.cluster().leader.log_end_offset() < commit {
        now += 1;
        assert_eq!(d.run_once(now).unwrap(), None, "{d:?}");
    }
    d.set_source(None);
    assert_eq!(
        d.run(&mut ManualClock::default(), Until::Idle, &mut |_, _| {})
            .unwrap(),
        RunEnd::NeedsSource
    );
    d.close().unwrap();
    let _ = root;
    commit
}

#[test]
fn stop_with_an_open_transaction_truncates_to_the_lso_and_resets_producers() {
    let tmp = tempfile::tempdir().unwrap();
    let src = source(tmp.path(), MIXED);
    let west = dest(tmp.path(), 3);
    let commit = mirror_half_a_transaction(tmp.path(), &src, &west);
    let before = snapshot(&west);
    assert_eq!(before.leo, commit);
    assert!(before.lso < before.leo, "an open transaction");
    assert_eq!(before.hw, before.leo, "followers replicated it");
    let lso = before.lso;

    let events = stop(&west, DriverOptions::default());
    let after = snapshot(&west);
    assert_eq!(after.state, MirrorState::Stopped);
    assert!(after.writable);
    // Truncated to the LSO, then exactly one MIRROR_PID_RESET.
    assert!(events.contains(&Event::LeaderTruncated {
        from: commit,
        to: lso,
        cause: "stop: truncation to LSO".into()
    }));
    assert_eq!(after.leo, lso + 1);
    let leader = batches(&west, 0);
    let last = leader.last().unwrap().header();
    assert_eq!(last.control, Some(ControlType::MirrorPidReset));
    assert_eq!(last.base_offset, lso);
    // Everything before it is the source's, byte for byte.
    let source_batches = batches(&src, 0);
    assert_eq!(
        bytes(&leader[..leader.len() - 1]),
        bytes(&below(&source_batches, lso))
    );
    // The LME is the last mirrored epoch; the reset is written above it.
    let lme = events
        .iter()
        .find_map(|e| match e {
            Event::LastMirroredEpochWritten { epoch, offset } => Some((*epoch, *offset)),
            _ => None,
        })
        .unwrap();
    let mirrored_epoch = leader[leader.len() - 2].header().partition_leader_epoch;
    assert_eq!(lme, (Some(mirrored_epoch), lso));
    assert!(last.partition_leader_epoch > mirrored_epoch);
    assert_eq!(after.leader_epoch, last.partition_leader_epoch);
    // Followers agree; no transaction is left open; new producers start afresh.
    for broker in 1..3 {
        assert_eq!(bytes(&batches(&west, broker)), bytes(&leader));
    }
    let cluster = Cluster::open(&west).unwrap();
    assert!(cluster.leader.producer_state().is_empty());
    drop(cluster);
    let report = produce(&west, "plain:2 idem:1:3 txn:4:1 commit:4").unwrap();
    assert_eq!(report.appended.len(), 4);
    assert!(report
        .appended
        .iter()
        .all(|h| h.partition_leader_epoch == after.leader_epoch));
    assert_eq!(
        report.appended[1].base_sequence, 0,
        "producer 1 starts again"
    );

    // A repeated stop is a no-op success that changes nothing.
    let leo = snapshot(&west).leo;
    stop(&west, DriverOptions::default());
    assert_eq!(snapshot(&west).leo, leo);
}

#[test]
fn failback_truncates_the_old_source_to_the_lme_and_mirrors_the_new_one() {
    let tmp = tempfile::tempdir().unwrap();
    let src = source(tmp.path(), MIXED);
    let west = dest(tmp.path(), 2);
    mirror_half_a_transaction(tmp.path(), &src, &west);
    stop(&west, DriverOptions::default());
    produce(&west, "plain:2 idem:1:2 txn:11:1 commit:11").unwrap();
    // East went on writing after west stopped mirroring it, and has an open transaction.
    produce(&src, "plain:3 txn:12:1").unwrap();
    let east_leo = snapshot(&src).leo;

    // Failback: east joins a mirror from west.
    let mut d = driver(&src, Some(&west), DriverOptions::default());
    // A mirror the cluster does not know is refused, and nothing changes.
    let err = d
        .request(
            &MirrorRequest::AddTopics {
                mirror: "west".into(),
                topics: vec![TOPIC.into()],
            },
            0,
        )
        .unwrap_err();
    assert!(
        matches!(&err, DriverError::Refused(e) if e.code == MirrorErrorCode::UnknownClusterMirror),
        "{err}"
    );
    d.create_mirror(name("west"), Some(west.clone()), 0)
        .unwrap();
    d.request(
        &MirrorRequest::AddTopics {
            mirror: "west".into(),
            topics: vec![TOPIC.into()],
        },
        0,
    )
    .unwrap();
    let end = d
        .run(&mut ManualClock::default(), Until::Idle, &mut |_, _| {})
        .unwrap();
    assert_eq!(end, RunEnd::CaughtUp);
    let events = d.take_events();
    d.close().unwrap();
    let truncated = events.iter().find_map(|e| match e {
        Event::LeaderTruncated { from, to, cause } if cause == "LME truncation" => {
            Some((*from, *to))
        }
        _ => None,
    });
    let (from, to) = truncated.expect("LME truncation");
    assert_eq!(from, east_leo);
    assert!(to < east_leo);
    assert_eq!(bytes(&batches(&src, 0)), bytes(&batches(&west, 0)));
    let s = snapshot(&src);
    assert_eq!(s.state, MirrorState::Mirroring);
    assert!(!s.writable);
    assert!(produce(&src, "plain:1").is_err(), "east is read-only now");
}

#[test]
fn a_restarted_driver_resumes_from_the_persisted_state() {
    let tmp = tempfile::tempdir().unwrap();
    let src = source(tmp.path(), &format!("{MIXED} ").repeat(4));
    let west = dest(tmp.path(), 2);
    let options = DriverOptions {
        max_fetch_batches: 2,
        max_follower_batches: 1,
        ..DriverOptions::default()
    };
    let mut last_epoch = -1;
    let mut last_leo = 0;
    for _ in 0..6 {
        // Run a little, then drop the driver without closing it, as a crash would.
        let mut d = driver(&west, Some(&src), options.clone());
        let end = d
            .run(
                &mut ManualClock::default(),
                Until::Fetches(3),
                &mut |_, _| {},
            )
            .unwrap();
        assert!(matches!(end, RunEnd::FetchesDone | RunEnd::CaughtUp));
        drop(d);
        let cluster = Cluster::open(&west).unwrap();
        let record = cluster.persisted_state().unwrap().clone();
        assert_eq!(record.state, MirrorState::Mirroring);
        // The reopened driver leads at the epoch it persisted: the record is its own
        // leadership's, so it acts on it without writing it again (an epoch is one leadership).
        assert!(
            record.state_epoch >= last_epoch,
            "the state epoch never goes back"
        );
        last_epoch = record.state_epoch;
        let leo = cluster.leader.log_end_offset();
        assert!(leo >= last_leo, "nothing mirrored is lost");
        last_leo = leo;
        drop(cluster);
    }
    mirror(&west, &src, options);
    assert_eq!(bytes(&batches(&west, 0)), bytes(&batches(&src, 0)));
    assert_eq!(bytes(&batches(&west, 1)), bytes(&batches(&src, 0)));
}

#[test]
fn a_failing_source_makes_the_partition_failed_then_retried() {
    let tmp = tempfile::tempdir().unwrap();
    let src = source(tmp.path(), MIXED);
    let west = dest(tmp.path(), 1);
    let moved = tmp.path().join("east-away");
    let mut d = Driver::open(
        &west,
        Some(Box::new(LocalSource::new(&src))),
        DriverOptions {
            max_fetch_batches: 1,
            ..DriverOptions::default()
        },
    )
    .unwrap();
    let mut clock = ManualClock::default();
    // Mirror a few batches, then the source disappears.
    while d.cluster().leader.log_end_offset() < 5 {
        assert_eq!(d.run_once(clock.now_ms).unwrap(), None);
    }
    d.release_source();
    std::fs::rename(&src, &moved).unwrap();
    let mut idle = None;
    for _ in 0..20 {
        idle = d.run_once(clock.now_ms).unwrap();
        if idle.is_some() {
            break;
        }
    }
    let Some(Idle::WaitingForRetry { due_ms }) = idle else {
        panic!("expected a retry timer, got {idle:?}");
    };
    let record = d.cluster().persisted_state().unwrap().clone();
    assert_eq!(record.state, MirrorState::Failed);
    assert_eq!(record.previous_state, Some(MirrorState::Mirroring));
    assert!(record.error_message.unwrap().contains("unavailable"));
    let events = d.take_events();
    assert!(events
        .iter()
        .any(|e| matches!(e, Event::RequestFailed { .. })));
    assert!(events
        .iter()
        .any(|e| matches!(e, Event::RetryScheduled { attempt: 1, .. })));
    // The timer does not fire early; once the source is back, the retry resumes mirroring.
    assert_eq!(
        d.run_once(due_ms - 1).unwrap(),
        Some(Idle::WaitingForRetry { due_ms })
    );
    std::fs::rename(&moved, &src).unwrap();
    clock.now_ms = due_ms;
    let end = d.run(&mut clock, Until::Idle, &mut |_, _| {}).unwrap();
    assert_eq!(end, RunEnd::CaughtUp);
    assert_eq!(d.state(), MirrorState::Mirroring);
    d.close().unwrap();
    assert_eq!(bytes(&batches(&west, 0)), bytes(&batches(&src, 0)));
}

#[test]
fn retries_give_up_after_max_attempts() {
    let tmp = tempfile::tempdir().unwrap();
    let src = source(tmp.path(), MIXED);
    let west = dest(tmp.path(), 1);
    let options = DriverOptions {
        mirror: MirrorConfig {
            retry: RetryPolicy {
                initial_delay_ms: 10,
                max_delay_ms: 100,
                max_attempts: Some(2),
            },
            ..MirrorConfig::default()
        },
        ..DriverOptions::default()
    };
    let mut d = Driver::open(&west, Some(Box::new(LocalSource::new(&src))), options).unwrap();
    std::fs::rename(&src, tmp.path().join("gone")).unwrap();
    let end = d
        .run(&mut ManualClock::default(), Until::Idle, &mut |_, _| {})
        .unwrap();
    assert_eq!(end, RunEnd::Settled);
    let record = d.cluster().persisted_state().unwrap().clone();
    assert_eq!(record.state, MirrorState::Failed);
    assert_eq!(record.retry_attempt, 3);
    d.close().unwrap();
}

#[test]
fn an_unclean_election_at_the_source_is_a_diverging_epoch() {
    let tmp = tempfile::tempdir().unwrap();
    let src = source(tmp.path(), MIXED);
    let west = dest(tmp.path(), 3);
    mirror(&west, &src, DriverOptions::default());
    let leo = snapshot(&src).leo;
    // The source loses its last leader epoch (two batches) to an unclean election, then takes
    // new writes at a newer epoch.
    let source_batches = batches(&src, 0);
    let cut = source_batches[source_batches.len() - 2]
        .header()
        .base_offset;
    produce(&src, &format!("unclean:{cut} plain:2 idem:5:3")).unwrap();
    let (end, events) = mirror(&west, &src, DriverOptions::default());
    assert_eq!(end, RunEnd::CaughtUp);
    assert!(
        events.iter().any(|e| matches!(
            e,
            Event::LeaderTruncated { from, to, cause } if *from == leo && *to == cut && cause == "diverging epoch"
        )),
        "{events:?}"
    );
    assert!(events
        .iter()
        .any(|e| matches!(e, Event::FollowerTruncated { .. })));
    for broker in 0..3 {
        assert_eq!(bytes(&batches(&west, broker)), bytes(&batches(&src, 0)));
    }
}

#[test]
fn pause_and_resume_keep_the_log_and_the_fetch_position() {
    let tmp = tempfile::tempdir().unwrap();
    let src = source(tmp.path(), MIXED);
    let west = dest(tmp.path(), 2);
    mirror(&west, &src, DriverOptions::default());
    let mut d = driver(&west, None, DriverOptions::default());
    d.start(0).unwrap();
    d.request(
        &MirrorRequest::PauseTopics {
            mirror: "east".into(),
            topics: vec![TOPIC.into()],
        },
        0,
    )
    .unwrap();
    assert_eq!(
        d.run(&mut ManualClock::default(), Until::Idle, &mut |_, _| {})
            .unwrap(),
        RunEnd::Settled
    );
    assert_eq!(d.state(), MirrorState::Paused);
    assert!(!d.fetcher_running());
    d.close().unwrap();
    produce(&src, "plain:3").unwrap();
    let leo = snapshot(&west).leo;
    let mut d = driver(&west, Some(&src), DriverOptions::default());
    d.start(0).unwrap();
    d.request(
        &MirrorRequest::ResumeTopics {
            mirror: "east".into(),
            topics: vec![TOPIC.into()],
        },
        0,
    )
    .unwrap();
    d.run(&mut ManualClock::default(), Until::Idle, &mut |_, _| {})
        .unwrap();
    let events = d.take_events();
    d.close().unwrap();
    assert!(!events.iter().any(|e| matches!(
        e,
        Event::LeaderTruncated { .. } | Event::LeaderTruncatedFully { .. }
    )));
    assert!(snapshot(&west).leo > leo);
    assert_eq!(bytes(&batches(&west, 0)), bytes(&batches(&src, 0)));
}

#[test]
fn the_abort_strategy_closes_open_transactions_with_markers() {
    let tmp = tempfile::tempdir().unwrap();
    let src = source(tmp.path(), MIXED);
    let west = dest(tmp.path(), 1);
    let commit = mirror_half_a_transaction(tmp.path(), &src, &west);
    let options = DriverOptions {
        mirror: MirrorConfig {
            stop_strategy: StopStrategy::AbortOpenTransactions,
            ..MirrorConfig::default()
        },
        ..DriverOptions::default()
    };
    let events = stop(&west, options);
    assert!(events.contains(&Event::AbortMarkerAppended {
        offset: commit,
        producer_id: 9
    }));
    let leader = batches(&west, 0);
    let n = leader.len();
    assert_eq!(leader[n - 2].header().control, Some(ControlType::Abort));
    assert_eq!(
        leader[n - 1].header().control,
        Some(ControlType::MirrorPidReset)
    );
    let s = snapshot(&west);
    assert_eq!(
        (s.state, s.lso, s.leo),
        (MirrorState::Stopped, s.leo, commit + 2)
    );
}

/// Regression (found by the crash test): a crash after the stop appended `MIRROR_PID_RESET`
/// but before the high watermark covered it once made the restarted stop truncate to its LSO
/// (below the reset) and append a second reset at the same offset and epoch, so a follower that
/// had copied the first held different bytes. The kernel now skips step 3 once a batch at the
/// stop epoch exists.
#[test]
fn a_stop_resumed_after_a_crash_keeps_replicas_byte_identical() {
    let tmp = tempfile::tempdir().unwrap();
    let src = source(tmp.path(), "plain:3 bump-epoch plain:2");
    let west = dest(tmp.path(), 2);
    mirror(&west, &src, DriverOptions::default());
    let mut d = driver(&west, None, DriverOptions::default());
    d.start(100).unwrap();
    d.request(
        &MirrorRequest::RemoveTopics {
            mirror: "east".into(),
            topics: vec![TOPIC.into()],
        },
        100,
    )
    .unwrap();
    let mut now = 100;
    while !d
        .take_events()
        .iter()
        .any(|e| matches!(e, Event::PidResetAppended { .. }))
    {
        now += 1;
        d.run_once(now).unwrap();
    }
    // One replication round: the follower copies the reset; the leader's HW lags a round.
    d.run_once(now + 1).unwrap();
    assert!(d.cluster().leader.high_watermark() < d.cluster().leader.log_end_offset());
    drop(d); // crash
    let mut d = driver(&west, None, DriverOptions::default());
    d.run(
        &mut ManualClock { now_ms: 5_000 },
        Until::Idle,
        &mut |_, _| {},
    )
    .unwrap();
    assert_eq!(d.state(), MirrorState::Stopped);
    d.close().unwrap();
    assert_eq!(bytes(&batches(&west, 1)), bytes(&batches(&west, 0)));
}

/// Mirrors `src` into a new `west` under `root` fetching two batches at a time; after the
/// `release_after`-th fetch response is fed, the driver lets go of the source. Returns the
/// driver's counters.
fn mirror_in_steps(
    root: &Path,
    src: &Path,
    fetch_ahead: bool,
    release_after: Option<u64>,
) -> kmirror_harness::driver::Stats {
    let west = root.join(format!("west-{fetch_ahead}-{release_after:?}"));
    let mut config = ClusterConfig::new(name("west"), TOPIC, TOPIC_ID);
    config.mirror_name = Some("east".into());
    config.mirrors.insert(name("east"));
    ClusterDir::create(&west, config, 1).unwrap();
    let options = DriverOptions {
        max_fetch_batches: 2,
        fetch_ahead,
        ..DriverOptions::default()
    };
    let mut d = driver(&west, Some(src), options);
    let (mut now, mut release_after) = (0, release_after);
    while d.run_once(now).unwrap().is_none() {
        now += 1;
        if release_after == Some(d.stats().fetches) {
            d.release_source();
            release_after = None;
        }
    }
    let stats = d.stats();
    d.close().unwrap();
    assert_eq!(bytes(&batches(&west, 0)), bytes(&batches(src, 0)));
    stats
}

#[test]
fn fetch_ahead_answers_the_next_fetch_and_nothing_after_a_release() {
    let tmp = tempfile::tempdir().unwrap();
    let src = source(tmp.path(), &"plain:2 ".repeat(12));
    let ahead = mirror_in_steps(tmp.path(), &src, true, None);
    let serial = mirror_in_steps(tmp.path(), &src, false, None);
    assert_eq!(serial.fetched_ahead, 0);
    assert_eq!(ahead.fetches, serial.fetches, "the same fetches either way");
    assert!(
        ahead.fetched_ahead + 2 >= ahead.fetches && ahead.fetched_ahead > 0,
        "every fetch but the first (and one repeated after an epoch bump) read ahead: {ahead:?}"
    );
    // Letting go of the source drops what was read from it ahead: the next fetch asks again.
    let released = mirror_in_steps(tmp.path(), &src, true, Some(3));
    assert_eq!(
        released.fetched_ahead + 1,
        ahead.fetched_ahead,
        "{released:?}"
    );
}
