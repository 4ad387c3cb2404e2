//! The KIP's whole loop on the wire with Kafka's Java clients (`-- --include-ignored oracle`):
//! a live 3-broker Apache Kafka 4.4.0 cluster K is mirrored into node A (serving); A fails over
//! and takes K's producer and consumer group; node B mirrors A over the wire and fails over,
//! taking them in turn; A fails back from B: it asks B for the LME (`ReadMirrorStates`),
//! truncates exactly the records B never had (counted: not the whole log), copies what B took,
//! and fails over again: the producer and the group return to A.
//!
//! The producer writes and the group reads at every step. The group reads every record of the
//! final log at least once, and twice only what it read after its last commit the destination
//! synced before a failover (counted per failover and bounded by those reads). A and B end
//! byte for byte equal over their common range.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use kmirror_testsupport::jvm::Oracle;
use kmirror_testsupport::kafka_broker::KafkaCluster;
use serde_json::Value;

mod serving;

use serving::{commits, java, kmirror_ok, read_group_file, Serving};

const CLIENTS: &str = "dev.kmirror.oracle.ServeClients";

/// Each partition's read (`read_uncommitted`) of `orders` at `bootstrap`.
fn read(oracle: &Oracle, bootstrap: &str) -> Vec<Value> {
    java(
        oracle,
        CLIENTS,
        bootstrap,
        &["read:orders:read_uncommitted"],
    )
    .into_iter()
    .filter(|l| l.get("digest").is_some())
    .collect()
}

/// Waits until `orders` at `mirror` reads as at `source`.
fn wait_equal(oracle: &Oracle, mirror: &str, source: &str) {
    let want = read(oracle, source);
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let got = read(oracle, mirror);
        if got == want {
            return;
        }
        assert!(Instant::now() < deadline, "{got:?}\nvs\n{want:?}");
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// Kafka's idempotent producer writes `n` records to `orders` at `bootstrap`, acked.
fn produce(oracle: &Oracle, bootstrap: &str, n: usize) {
    let written = java(
        oracle,
        CLIENTS,
        bootstrap,
        &[&format!("produce:orders:{n}:true")],
    );
    assert_eq!(written[0]["acked"], n, "{written:?}");
}

/// The bytes of every segment of `orders-<partition>` in the node destination `dest`.
fn log_bytes(dest: &Path, partition: i32) -> Vec<u8> {
    let dir = dest.join("data").join(format!("orders-{partition}"));
    let mut segments: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "log"))
        .collect();
    segments.sort();
    segments
        .iter()
        .flat_map(|p| std::fs::read(p).expect("segment"))
        .collect()
}

/// A consumer group's history across the loop: every offset it read, per partition, in order.
struct Group {
    name: &'static str,
    read: BTreeMap<i64, Vec<i64>>,
    /// Its last commit per partition, wherever it was made.
    committed: BTreeMap<i64, i64>,
}

impl Group {
    /// The group reads up to `n` records of `orders` at `bootstrap` (fewer once idle) and
    /// commits; the offsets it read, per partition.
    fn consume(&mut self, oracle: &Oracle, bootstrap: &str, n: usize) -> BTreeMap<i64, Vec<i64>> {
        let step = format!("group:{}:orders:{n}", self.name);
        let line = java(oracle, CLIENTS, bootstrap, &[&step]).remove(0);
        let mut read = BTreeMap::new();
        for (p, offsets) in line["offsets"].as_object().into_iter().flatten() {
            let offsets: Vec<i64> = offsets
                .as_array()
                .expect("offsets")
                .iter()
                .map(|o| o.as_i64().expect("an offset"))
                .collect();
            let p: i64 = p.parse().expect("a partition");
            self.read.entry(p).or_default().extend(&offsets);
            read.insert(p, offsets);
        }
        self.committed.extend(commits(&line));
        read
    }

    /// Waits (up to 60 s) until the destination `dest` holds the group's last commits.
    fn wait_synced(&self, dest: &Path) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let held = read_group_file(dest, self.name).unwrap_or_default();
            if self.committed.iter().all(|(p, o)| held.get(p) == Some(o)) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{} holds {held:?} of {}, not {:?}",
                dest.display(),
                self.name,
                self.committed
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

/// The producer and the group move from the primary at `from` to `to`, a node that mirrors it
/// (its directory `to_dir`): they work on `from`; `to` catches up and syncs the group's commit;
/// the group reads 2 more records on `from` (which the sync may not see in time); `kmirror stop`
/// fails `to` over; the group resumes on `to` at what was synced and reads to the end. Returns
/// how many records the group read twice (asserted at most those 2).
fn fail_over(oracle: &Oracle, group: &mut Group, from: &str, to: &Serving, to_dir: &Path) -> usize {
    produce(oracle, from, 6);
    group.consume(oracle, from, 100_000);
    wait_equal(oracle, &to.address, from);
    group.wait_synced(to_dir);
    let synced = group.committed.clone();
    produce(oracle, from, 3);
    wait_equal(oracle, &to.address, from);
    let late: usize = group.consume(oracle, from, 2).values().map(Vec::len).sum();
    assert_eq!(late, 2);
    let read_on_from = group.committed.clone();
    let dir = to_dir.to_str().expect("utf-8");
    kmirror_ok(&["stop", "--dest", dir, "--topics", "orders", "--quiet"]);
    let at_stop = read_group_file(to_dir, group.name).expect("the synced offsets");
    let resumed = group.consume(oracle, &to.address, 100_000);
    let mut twice = 0;
    for (p, offsets) in &resumed {
        let (start, done) = (at_stop[p], read_on_from.get(p).copied().unwrap_or(0));
        assert!(
            start >= synced.get(p).copied().unwrap_or(0),
            "orders-{p}: {at_stop:?}"
        );
        assert!(
            offsets.first().is_some_and(|first| *first >= start),
            "orders-{p} resumes at {start} (synced), not before: {offsets:?}"
        );
        twice += offsets.iter().filter(|o| **o < done).count();
    }
    assert!(
        twice <= late,
        "only what the group read after the last synced commit is read twice: {twice} of {late}"
    );
    twice
}

#[test]
#[ignore = "needs Java 17 and Maven; run with `-- --include-ignored oracle`"]
fn oracle_failback_two_nodes_fail_over_and_back_truncating_only_what_the_other_never_had() {
    let Some(oracle) = Oracle::for_tests(
        "oracle_failback_two_nodes_fail_over_and_back_truncating_only_what_the_other_never_had",
    ) else {
        return;
    };
    let tmp = tempfile::tempdir().expect("tempdir");
    let cluster = KafkaCluster::start(&oracle, &tmp.path().join("cluster"), 3, &[])
        .unwrap_or_else(|e| panic!("{e}"));
    let k = cluster.bootstrap();
    java(
        &oracle,
        "dev.kmirror.oracle.LiveCluster",
        &k,
        &["create:orders:3:3", "plain:orders:3:4"],
    );
    let (a_path, b_path) = (tmp.path().join("a"), tmp.path().join("b"));
    let mut group = Group {
        name: "billing",
        read: BTreeMap::new(),
        committed: BTreeMap::new(),
    };
    let mut twice = 0;

    // K into A, which serves; A fails over and takes the producer and the group.
    let a = Serving::start(&k, a_path.to_str().expect("utf-8"), "orders");
    twice += fail_over(&oracle, &mut group, &k, &a, &a_path);

    // B mirrors A over the wire and fails over in turn.
    let b = Serving::start(&a.address, b_path.to_str().expect("utf-8"), "orders");
    twice += fail_over(&oracle, &mut group, &a.address, &b, &b_path);
    // A takes 6 records after B stopped copying it (a producer that has not moved yet): B never
    // has them. The group does not read them.
    produce(&oracle, &a.address, 6);
    assert_eq!(a.stop(), Some(0), "A closes cleanly");

    // A fails back from B: the preview says what goes, then it runs.
    let a_dir = a_path.to_str().expect("utf-8");
    let out = kmirror_ok(&[
        "mirror",
        "--source-bootstrap",
        &b.address,
        "--topics",
        "orders",
        "--dest",
        a_dir,
        "--failback",
        "--yes",
        "--until-caught-up",
        "--quiet",
    ]);
    eprintln!("{out}");
    assert!(!out.contains("truncates all"), "{out}");
    let truncated: i64 = out
        .lines()
        .filter_map(|l| l.split_once(": failback truncates ")?.1.split_once(' '))
        .map(|(n, _)| n.parse::<i64>().expect("a count"))
        .sum();
    // Kafka's producer spreads 6 records as 2 per partition (as `oracle_serve` asserts): each
    // partition of A loses exactly those 2 records (and nothing B has).
    assert_eq!(truncated, 6, "{out}");

    // A follows B again, and the producer and the group return to A.
    let a = Serving::start(&b.address, a_dir, "orders");
    twice += fail_over(&oracle, &mut group, &b.address, &a, &a_path);
    produce(&oracle, &a.address, 6);
    let last: usize = group
        .consume(&oracle, &a.address, 100_000)
        .values()
        .map(Vec::len)
        .sum();
    assert_eq!(last, 6, "the group reads what the producer wrote to A");
    eprintln!("the loop: {twice} record(s) read twice in three failovers (at most 6)");

    // The group read every record of A's final log, at least once.
    for line in read(&oracle, &a.address) {
        let p = line["partition"].as_i64().expect("a partition");
        let read: std::collections::BTreeSet<i64> =
            group.read.get(&p).into_iter().flatten().copied().collect();
        assert_eq!(
            read.len() as i64,
            line["records"].as_i64().expect("a count"),
            "orders-{p}: the group read each record: {read:?} vs {line}"
        );
        assert_eq!(read.last().copied(), line["last"].as_i64());
    }
    assert_eq!(a.stop(), Some(0), "A closes cleanly");
    assert_eq!(b.stop(), Some(0), "B closes cleanly");
    // B's log is A's up to where A failed over: A has only its own records beyond it.
    for p in 0..3 {
        let (a_log, b_log) = (log_bytes(&a_path, p), log_bytes(&b_path, p));
        assert!(!b_log.is_empty());
        assert!(
            a_log.len() > b_log.len() && a_log.starts_with(&b_log),
            "orders-{p}: A and B differ over their common range"
        );
    }
}
