//! A live 3-broker Apache Kafka 4.4.0 cluster as the source of many partitions
//! (`-- --include-ignored oracle`).
//!
//! Three KRaft nodes (broker and controller each) started from the oracle's jars; two topics
//! (`orders`, 12 partitions, and `pay.eu`, 6 partitions) with replication factor 3, written by
//! Kafka's own Java producer (idempotent plain batches, committed and aborted transactions
//! spanning every partition). [`SourceCluster`] mirrors every partition through the coalesced
//! fetch (one Fetch per leader broker per round) into one harness [`FileLog`] per
//! `<topic>-<partition>/`, appending the raw fetched batches as the mirror does. Mid-mirror the
//! leader of `orders-0` is killed (SIGKILL) while Kafka's producer writes more (plain and
//! transactional) to every partition: the victim's partitions fail as retryable, the metadata
//! is refreshed, the new leaders are followed at the same offsets, the producer's retries land
//! on them. At the end every partition equals a surviving replica's partition directory byte
//! for byte, and Kafka's `DumpLogSegments` reads the copies as it reads the replicas; the killed
//! broker is restarted and its replicas, once caught up, equal the copies too.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use kmirror_harness::file_log::{FileLog, FileLogConfig, TopicPartition};
use kmirror_harness::wire::source_cluster::{PartitionFetchError, SourceClusterOptions};
use kmirror_harness::wire::{
    CurrentLeaderEpoch, PartitionFetchRequest, PartitionFetched, SourceCluster, TopicSelection,
};
use kmirror_kernel::config::FetchIsolation;
use kmirror_kernel::fetch::FetchResponse;
use kmirror_kernel::log::{LogView, PartitionLog};
use kmirror_kernel::types::{LeaderEpoch, Offset, PartitionIndex, TopicId};
use kmirror_testsupport::jvm::Oracle;
use kmirror_testsupport::kafka_broker::KafkaCluster;
use kmirror_testsupport::oracle_support::run;

/// Kafka's producer and admin (`LiveCluster`): one JSON line per step.
fn live_cluster(oracle: &Oracle, bootstrap: &str, steps: &[&str]) -> Vec<serde_json::Value> {
    let mut command = oracle.command("dev.kmirror.oracle.LiveCluster");
    command.arg(bootstrap).args(steps);
    let output = run(command, Duration::from_secs(120));
    assert!(
        output.status.success(),
        "LiveCluster {steps:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l:?}: {e}")))
        .collect()
}

/// The `.log` segment files of a partition directory, oldest first.
fn segments(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect();
    files.sort();
    files
}

/// The bytes of a partition's segments, back to back.
fn segment_bytes(dir: &Path) -> Vec<u8> {
    segments(dir)
        .iter()
        .flat_map(|f| std::fs::read(f).unwrap_or_else(|e| panic!("{}: {e}", f.display())))
        .collect()
}

/// `DumpLogSegments --deep-iteration` of `files`: the batch lines (`baseOffset: ...`), in order.
fn dumped_batches(oracle: &Oracle, files: &[PathBuf]) -> Vec<String> {
    let list: Vec<String> = files.iter().map(|p| p.display().to_string()).collect();
    let mut command = oracle.command("org.apache.kafka.tools.DumpLogSegments");
    command
        .arg("--deep-iteration")
        .arg("--files")
        .arg(list.join(","));
    let output = run(command, Duration::from_secs(120));
    assert!(output.status.success(), "DumpLogSegments: {output:?}");
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter(|l| l.starts_with("baseOffset:"))
        .map(str::to_owned)
        .collect()
}

/// One mirrored partition: its log and where its fetcher is.
struct Mirrored {
    topic: String,
    topic_id: TopicId,
    partition: PartitionIndex,
    log: FileLog,
    fetch_offset: Offset,
    last_epoch: Option<LeaderEpoch>,
    /// The source's HW and LSO at the last answer.
    high_watermark: Offset,
    last_stable_offset: Offset,
    /// The brokers that served it, in order (deduplicated consecutive).
    served_by: Vec<i32>,
    /// Retryable errors seen, by kind.
    errors: Vec<String>,
}

impl Mirrored {
    fn caught_up(&self) -> bool {
        self.fetch_offset == self.high_watermark && self.last_stable_offset == self.high_watermark
    }
}

/// One round: one coalesced fetch of every partition; appends what came back. Returns how
/// many partitions failed (retryably).
fn round(source: &mut SourceCluster, mirrored: &mut [Mirrored], max_batches: usize) -> usize {
    let requests: Vec<PartitionFetchRequest> = mirrored
        .iter()
        .map(|m| PartitionFetchRequest {
            topic_id: m.topic_id,
            partition: m.partition,
            fetch_offset: m.fetch_offset,
            last_fetched_epoch: m.last_epoch,
            current_leader_epoch: CurrentLeaderEpoch::FromMetadata,
            isolation: FetchIsolation::ReadCommitted,
            max_batches,
        })
        .collect();
    let results = source.fetch(&requests);
    let mut failed = 0;
    for (m, result) in mirrored.iter_mut().zip(results) {
        assert_eq!(
            (result.topic_id, result.partition),
            (m.topic_id, m.partition)
        );
        match result.outcome {
            Ok(PartitionFetched {
                response: FetchResponse::Records(records),
                ..
            }) => {
                let broker = result.broker.expect("a broker answered");
                if m.served_by.last() != Some(&broker) {
                    m.served_by.push(broker);
                }
                if !records.batches.is_empty() {
                    m.log
                        .append_as_follower(&records.batches)
                        .unwrap_or_else(|e| panic!("{}-{}: {e}", m.topic, m.partition));
                }
                assert_eq!(m.log.log_end_offset(), records.next_offset);
                m.fetch_offset = records.next_offset;
                m.last_epoch = records.last_epoch.or(m.last_epoch);
                m.high_watermark = records.high_watermark;
                m.last_stable_offset = records.last_stable_offset;
            }
            Ok(other) => panic!(
                "{}-{}: a clean election on the source must not diverge or lose offsets: \
                 {other:?}",
                m.topic, m.partition
            ),
            Err(error) => {
                assert!(error.is_retryable(), "{}-{}: {error}", m.topic, m.partition);
                let kind = match &error {
                    PartitionFetchError::Leadership { name, .. } => name.clone(),
                    PartitionFetchError::Unreachable { .. } => "unreachable".to_owned(),
                    PartitionFetchError::NoLeader { .. } => "no leader".to_owned(),
                    other => other.to_string(),
                };
                m.errors.push(kind);
                failed += 1;
            }
        }
    }
    failed
}

#[test]
#[ignore = "needs Java 17 and Maven; run with `-- --include-ignored oracle`"]
fn oracle_live_cluster_coalesced_mirror_follows_leader_changes() {
    let Some(oracle) =
        Oracle::for_tests("oracle_live_cluster_coalesced_mirror_follows_leader_changes")
    else {
        return;
    };
    let started = Instant::now();
    let tmp = tempfile::tempdir().expect("tempdir");
    let mut cluster = KafkaCluster::start(&oracle, &tmp.path().join("cluster"), 3, &[])
        .unwrap_or_else(|e| panic!("{e}"));
    let bootstrap = cluster.bootstrap();
    eprintln!("3 brokers up at {bootstrap} after {:?}", started.elapsed());

    // 1. Two topics, replication factor 3; plain batches and transactions on every partition.
    let steps = live_cluster(
        &oracle,
        &bootstrap,
        &[
            "create:orders:12:3",
            "create:pay.eu:6:3",
            "plain:orders:3:4",
            "commit:orders:tx-orders-1:3",
            "abort:orders:tx-orders-2:2",
            "plain:pay.eu:2:5",
            "commit:pay.eu:tx-pay-1:2",
        ],
    );
    eprintln!(
        "produced {} steps after {:?}",
        steps.len(),
        started.elapsed()
    );

    // 2. The source: every partition of `orders,pay.*`; a bad selection is a per-entry error.
    // One Fetch in flight per broker: step 6 counts them against the rounds.
    let options = SourceClusterOptions {
        fetch_max_wait_ms: 50,
        fetches_in_flight: std::num::NonZeroUsize::new(1),
        ..SourceClusterOptions::default()
    };
    let mut source = SourceCluster::new(
        &bootstrap,
        TopicSelection::parse("orders,pay.*").expect("selection"),
        options,
    );
    let metadata = source.metadata().expect("metadata").clone();
    assert!(metadata.errors.is_empty(), "{:?}", metadata.errors);
    assert_eq!(metadata.partition_count(), 18);
    let mut missing = SourceCluster::new(
        &bootstrap,
        TopicSelection::parse("orders,audit,refunds.*").expect("selection"),
        options,
    );
    let errors: Vec<String> = missing
        .metadata()
        .expect("metadata")
        .errors
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(errors.len(), 2, "{errors:?}");
    assert!(
        errors[0].contains("topic audit does not exist"),
        "{errors:?}"
    );
    assert!(
        errors[1].contains("refunds.* matches no topic"),
        "{errors:?}"
    );

    let dest = tmp.path().join("dest");
    let mut mirrored: Vec<Mirrored> = metadata
        .partitions()
        .map(|(topic, p)| {
            let tp = TopicPartition::new(topic.name.clone(), p.index).expect("topic partition");
            let (log, _) =
                FileLog::open(&dest, tp, FileLogConfig::default()).expect("destination log");
            Mirrored {
                topic: topic.name.clone(),
                topic_id: topic.topic_id,
                partition: p.index,
                log,
                fetch_offset: 0,
                last_epoch: None,
                high_watermark: -1,
                last_stable_offset: -1,
                served_by: Vec::new(),
                errors: Vec::new(),
            }
        })
        .collect();

    // 3. Two rounds of one batch per partition: mirroring is under way.
    let mut rounds = 0;
    for _ in 0..2 {
        assert_eq!(round(&mut source, &mut mirrored, 1), 0);
        rounds += 1;
    }
    assert!(mirrored
        .iter()
        .all(|m| m.fetch_offset > 0 && !m.caught_up()));

    // 4. Kill the leader of orders-0 (SIGKILL): its partitions fail, retryably, until the
    //    controller fences it and elects new leaders; the mirror follows them at the same offsets.
    let (victim, _) = cluster
        .leader("orders", 0)
        .expect("metadata")
        .expect("orders-0 has a leader");
    let led: BTreeSet<(String, PartitionIndex)> = metadata
        .partitions()
        .filter(|(_, p)| p.leader == Some(victim))
        .map(|(t, p)| (t.name.clone(), p.index))
        .collect();
    // Kafka's producer writes to every partition (plain, then a transaction) across the kill:
    // it retries to the new leaders.
    let producer = {
        let (oracle, bootstrap) = (oracle.clone(), bootstrap.clone());
        std::thread::spawn(move || {
            live_cluster(
                &oracle,
                &bootstrap,
                &[
                    "plain:orders:2:3",
                    "commit:orders:tx-orders-3:2",
                    "plain:pay.eu:1:4",
                    "abort:pay.eu:tx-pay-2:2",
                ],
            )
        })
    };
    std::thread::sleep(Duration::from_millis(1500));
    cluster.kill(victim);
    let killed_at = Instant::now();
    eprintln!(
        "killed broker {victim} (leader of {} partitions: {led:?}) after {:?}",
        led.len(),
        started.elapsed()
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let failed = round(&mut source, &mut mirrored, 2);
        rounds += 1;
        let moved = mirrored
            .iter()
            .filter(|m| led.contains(&(m.topic.clone(), m.partition)))
            .all(|m| m.served_by.last() != Some(&victim));
        if failed == 0 && moved {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the leaders did not move within 60 s"
        );
        std::thread::sleep(Duration::from_millis(if failed > 0 { 250 } else { 0 }));
    }
    eprintln!(
        "following the new leaders {:?} after the kill, round {rounds}",
        killed_at.elapsed()
    );

    // 5. The producer finishes on the new leaders; mirror to the end.
    let produced = producer.join().expect("the producer thread");
    eprintln!(
        "the producer wrote {} steps across the kill, done {:?} after it",
        produced.len(),
        killed_at.elapsed()
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut caught_up_rounds = 0;
    while caught_up_rounds < 2 {
        let failed = round(&mut source, &mut mirrored, 4);
        rounds += 1;
        if failed > 0 {
            std::thread::sleep(Duration::from_millis(250));
        }
        caught_up_rounds = if mirrored.iter().all(Mirrored::caught_up) {
            caught_up_rounds + 1
        } else {
            0
        };
        assert!(Instant::now() < deadline, "not caught up within 60 s");
    }
    // A transaction's markers are written by its coordinator after the producer's commit
    // returns, and on a partition whose leader died only once the coordinator has found the new
    // leader: a partition can look caught up (fetch offset = HW = LSO) before its last marker
    // lands. Mirror on while a surviving replica holds more than the mirror.
    let survivor = cluster
        .ids()
        .into_iter()
        .find(|id| *id != victim)
        .expect("a surviving broker");
    let behind_survivor = |mirrored: &[Mirrored]| {
        mirrored.iter().any(|m| {
            let replica = cluster.partition_dir(survivor, &m.topic, m.partition);
            segment_bytes(&replica).len() > segment_bytes(m.log.dir()).len()
        })
    };
    while behind_survivor(&mirrored) {
        assert!(
            Instant::now() < deadline,
            "a surviving replica stays ahead of the mirror"
        );
        std::thread::sleep(Duration::from_millis(200));
        round(&mut source, &mut mirrored, 4);
        rounds += 1;
    }
    eprintln!("caught up after {rounds} rounds, {:?}", started.elapsed());

    // Every partition the victim led was served by it, failed, then by another broker.
    for m in &mirrored {
        if led.contains(&(m.topic.clone(), m.partition)) {
            assert!(
                !m.errors.is_empty(),
                "{}-{} never failed",
                m.topic,
                m.partition
            );
            assert_eq!(
                m.served_by.first(),
                Some(&victim),
                "{}-{}",
                m.topic,
                m.partition
            );
            assert_ne!(
                m.served_by.last(),
                Some(&victim),
                "{}-{}",
                m.topic,
                m.partition
            );
        }
        let mut errors: BTreeMap<&str, usize> = BTreeMap::new();
        for e in &m.errors {
            *errors.entry(e.as_str()).or_default() += 1;
        }
        eprintln!(
            "{}-{}: offsets 0..{}, served by brokers {:?}, retryable errors {errors:?}",
            m.topic, m.partition, m.fetch_offset, m.served_by
        );
    }

    // 6. Coalescing: one Fetch per leader broker per round, whatever the partition count.
    let stats = source.request_stats();
    let fetches: u64 = stats.values().map(|s| s.fetch_requests).sum();
    for (id, s) in &stats {
        eprintln!(
            "broker {id}: {} Fetch requests carrying {} partition entries, {} ListOffsets, \
             {} Metadata, {} failed",
            s.fetch_requests,
            s.partitions_fetched,
            s.list_offsets_requests,
            s.metadata_requests,
            s.failed_requests
        );
    }
    eprintln!(
        "{} partitions x {rounds} rounds = {} partition fetches in {fetches} Fetch requests",
        mirrored.len(),
        mirrored.len() * rounds
    );
    assert!(
        fetches <= 3 * rounds as u64,
        "{fetches} Fetch requests in {rounds} rounds"
    );
    assert!(fetches * 3 < (mirrored.len() * rounds) as u64);

    // 7. Byte for byte against a surviving replica, and DumpLogSegments reads both alike.
    let mut dest_dirs = BTreeMap::new();
    let mut batches = 0;
    let mut markers = 0;
    for m in mirrored {
        let dir = m.log.dir().to_path_buf();
        let headers = m.log.try_read(0, m.fetch_offset).expect("read back");
        batches += headers.len();
        markers += headers
            .iter()
            .filter(|b| b.header().control.is_some())
            .count();
        m.log.close().expect("close");
        dest_dirs.insert((m.topic, m.partition), dir);
    }
    assert!(markers >= 18 * 2, "{markers} transaction markers");
    let deadline = Instant::now() + Duration::from_secs(30);
    for ((topic, partition), dir) in &dest_dirs {
        let replica = cluster.partition_dir(survivor, topic, *partition);
        let ours = segment_bytes(dir);
        // A follower may still be a fetch behind its leader.
        while segment_bytes(&replica) != ours && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(200));
        }
        assert!(
            segment_bytes(&replica) == ours,
            "{topic}-{partition}: {} bytes mirrored, broker {survivor}'s replica has {}",
            ours.len(),
            segment_bytes(&replica).len()
        );
    }
    let dest_files: Vec<PathBuf> = dest_dirs.values().flat_map(|d| segments(d)).collect();
    let replica_files: Vec<PathBuf> = dest_dirs
        .keys()
        .flat_map(|(t, p)| segments(&cluster.partition_dir(survivor, t, *p)))
        .collect();
    let ours = dumped_batches(&oracle, &dest_files);
    assert_eq!(ours.len(), batches);
    assert_eq!(ours, dumped_batches(&oracle, &replica_files));
    eprintln!(
        "{} partitions, {batches} batches ({markers} markers) equal broker {survivor}'s replicas \
         after {:?}",
        dest_dirs.len(),
        started.elapsed()
    );

    // 8. The victim comes back, truncates what it alone had and catches up: its replicas end
    //    equal to the mirror too.
    cluster
        .restart(victim)
        .unwrap_or_else(|e| panic!("restarting broker {victim}: {e}"));
    let deadline = Instant::now() + Duration::from_secs(60);
    for ((topic, partition), dir) in &dest_dirs {
        let replica = cluster.partition_dir(victim, topic, *partition);
        let ours = segment_bytes(dir);
        while segment_bytes(&replica) != ours && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(200));
        }
        assert!(
            segment_bytes(&replica) == ours,
            "{topic}-{partition}: {} bytes mirrored, the restarted broker {victim} has {}",
            ours.len(),
            segment_bytes(&replica).len()
        );
    }
    eprintln!(
        "broker {victim} restarted and caught up: its replicas equal the mirror too; {:?} in all",
        started.elapsed()
    );
    drop(cluster);
}
