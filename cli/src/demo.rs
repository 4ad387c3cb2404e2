//! `kmirror demo`: the whole KIP-1279 story on real on-disk logs, step by step.
//!
//! 1. **east** (one replica) gets plain, idempotent and transactional batches (a commit and an
//!    abort) over three leader epochs.
//! 2. **west** (three replicas) mirrors east until caught up: same batches, same offsets, same
//!    epochs; west is read-only.
//! 3. east goes on: producer 9 commits a transaction, producer 10 opens one. West mirrors only
//!    part of it (one batch per fetch) and is cut off with producer 9's data but not its COMMIT
//!    marker: a half-mirrored transaction. A local write to west is refused (`READ_ONLY_TOPIC`).
//! 4. **Failover**: west is removed from the mirror; the kernel bumps its leader epoch,
//!    truncates it to its LSO (dropping the half transaction), records the LME, appends
//!    `MIRROR_PID_RESET` and makes it writable.
//! 5. Producers write to west locally (new epoch, fresh producer state).
//! 6. **Failback**: east is added to a mirror from west; PREPARING truncates east to the LME
//!    west recorded (dropping what west never had), then east mirrors west's new data. Both
//!    logs end byte-for-byte equal.
//!
//! Every step goes through the kernel (controller functions, `PartitionMirror`, the driver);
//! the demo only chooses what to do and when, and reads the logs for the tables.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use kmirror_kernel::controller::MirrorRequest;
use kmirror_kernel::log::LogView;
use kmirror_kernel::types::{MirrorName, Offset, TopicId};
use serde::Serialize;

use kmirror_harness::driver::cluster::{ClusterConfig, ClusterDir};
use kmirror_harness::driver::LocalSource;
use kmirror_harness::driver::{
    format_epochs, Clock, Cluster, ClusterStatus, Driver, DriverError, DriverOptions, Event, Until,
};
use kmirror_harness::producer::{self, ProduceOp};

/// The demo's topic.
pub const TOPIC: &str = "orders";
/// The demo's topic id (`"kmirror"` in ASCII).
pub const TOPIC_ID: TopicId = TopicId::from_u64(0x006b_6d69_7272_6f72);

/// One cluster in a step's table.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct DemoRow {
    /// The cluster.
    pub cluster: String,
    /// Its role in this step.
    pub role: String,
    /// Its `mirror.name`.
    pub mirror_name: String,
    /// Its persisted mirror state.
    pub state: String,
    /// The leader's log end offset.
    pub log_end_offset: Offset,
    /// The leader's high watermark.
    pub high_watermark: Offset,
    /// The leader's last stable offset.
    pub last_stable_offset: Offset,
    /// The partition's leader epoch.
    pub leader_epoch: i32,
    /// The leader's epoch cache, `epoch@start`.
    pub epochs: String,
    /// Open transactions, `pid@first offset`.
    pub open_transactions: String,
    /// Replicas whose log matches the leader's, of all (`synced` column).
    pub replicas_in_sync: String,
    /// Whether local producers may write.
    pub writable: bool,
    /// What this step truncated.
    pub truncated: String,
}

/// One step of the demo.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct DemoStep {
    /// 1-based.
    pub number: usize,
    /// What happens.
    pub title: String,
    /// The clusters after the step.
    pub rows: Vec<DemoRow>,
    /// What to notice.
    pub notes: Vec<String>,
}

/// The demo's result.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct DemoReport {
    /// Where the clusters are (`None`: a temporary directory, removed).
    pub kept_in: Option<String>,
    /// The steps.
    pub steps: Vec<DemoStep>,
    /// Whether east and west ended byte-for-byte equal.
    pub verified: bool,
    /// The final check, in words.
    pub verification: String,
}

impl DemoReport {
    /// The steps as text tables.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "kmirror demo: KIP-1279 cluster mirroring on real logs{}\n",
            self.kept_in
                .as_deref()
                .map(|d| format!(" (kept in {d})"))
                .unwrap_or_else(|| " (in a temporary directory)".to_owned())
        );
        for step in &self.steps {
            let _ = writeln!(out, "Step {}. {}", step.number, step.title);
            let _ = writeln!(
                out,
                "  {:<5} {:<11} {:<13} {:<10} {:>4} {:>4} {:>4} {:>5}  {:<18} {:<9} {:<6} {:<8} truncated",
                "", "role", "mirror.name", "state", "LEO", "HW", "LSO", "epoch", "epochs", "open txn",
                "synced", "writable"
            );
            for r in &step.rows {
                let _ = writeln!(
                    out,
                    "  {:<5} {:<11} {:<13} {:<10} {:>4} {:>4} {:>4} {:>5}  {:<18} {:<9} {:<6} {:<8} {}",
                    r.cluster,
                    r.role,
                    r.mirror_name,
                    r.state,
                    r.log_end_offset,
                    r.high_watermark,
                    r.last_stable_offset,
                    r.leader_epoch,
                    r.epochs,
                    r.open_transactions,
                    r.replicas_in_sync,
                    if r.writable { "yes" } else { "no" },
                    r.truncated
                );
            }
            for n in &step.notes {
                let _ = writeln!(out, "  - {n}");
            }
            let _ = writeln!(out);
        }
        let _ = writeln!(
            out,
            "{} {}",
            if self.verified { "OK:" } else { "MISMATCH:" },
            self.verification
        );
        out
    }
}

fn name(s: &str) -> Result<MirrorName, DriverError> {
    MirrorName::new(s).map_err(|e| DriverError::Invalid(e.to_string()))
}

fn ops(text: &str) -> Result<Vec<ProduceOp>, DriverError> {
    text.split_whitespace()
        .map(|s| s.parse().map_err(DriverError::Invalid))
        .collect()
}

/// Reads a cluster for a table row (opening and closing it).
fn row(dir: &Path, role: &str, truncated: String) -> Result<DemoRow, DriverError> {
    let cluster = Cluster::open(dir)?;
    let status = ClusterStatus::of(&cluster);
    let leader = &status.replicas[0];
    let in_sync = status
        .replicas
        .iter()
        .filter(|r| {
            r.log_end_offset == leader.log_end_offset
                && r.epochs == leader.epochs
                && r.batches == leader.batches
        })
        .count();
    let row = DemoRow {
        cluster: status.cluster.clone(),
        role: role.to_owned(),
        mirror_name: status.mirror_name.clone().unwrap_or_else(|| "-".into()),
        state: if status.mirror_name.is_some() {
            status.state.clone()
        } else {
            "-".to_owned()
        },
        log_end_offset: leader.log_end_offset,
        high_watermark: leader.high_watermark,
        last_stable_offset: leader.last_stable_offset,
        leader_epoch: status.leader_epoch,
        epochs: format_epochs(&leader.epochs),
        open_transactions: if leader.open_transactions.is_empty() {
            "-".to_owned()
        } else {
            leader
                .open_transactions
                .iter()
                .map(|(p, o)| format!("{p}@{o}"))
                .collect::<Vec<_>>()
                .join(",")
        },
        replicas_in_sync: format!("{in_sync}/{}", status.replicas.len()),
        writable: status.writable,
        truncated,
    };
    cluster.close()?;
    Ok(row)
}

/// What the events of a step truncated, in a few words.
fn truncations(events: &[Event]) -> String {
    let mut parts = Vec::new();
    for e in events {
        match e {
            Event::LeaderTruncated { from, to, cause } => {
                parts.push(format!("{from}->{to} ({cause})"));
            }
            Event::LeaderTruncatedFully { from, start, cause } => {
                parts.push(format!("emptied (LEO {from}), starts at {start} ({cause})"));
            }
            _ => {}
        }
    }
    let followers: Vec<String> = events
        .iter()
        .filter_map(|e| match e {
            Event::FollowerTruncated { replica, from, to } => {
                Some(format!("f{replica} {from}->{to}"))
            }
            _ => None,
        })
        .collect();
    if !followers.is_empty() {
        parts.push(format!("followers: {}", followers.join(", ")));
    }
    if parts.is_empty() {
        "-".to_owned()
    } else {
        parts.join("; ")
    }
}

/// Runs the demo in `dir` (kept), or in a temporary directory (removed), with time from
/// `clock`.
pub fn run(dir: Option<&Path>, clock: &mut dyn Clock) -> Result<DemoReport, DriverError> {
    let temp;
    let root: PathBuf = match dir {
        Some(d) => d.to_path_buf(),
        None => {
            temp = tempfile::Builder::new()
                .prefix("kmirror-demo-")
                .tempdir()
                .map_err(|e| DriverError::Io {
                    action: "create a temporary directory in",
                    path: std::env::temp_dir(),
                    source: e,
                })?;
            temp.path().to_path_buf()
        }
    };
    let east = root.join("east");
    let west = root.join("west");
    let mut steps = Vec::new();

    // 1. The source.
    let mut cluster = Cluster::open_dir(
        ClusterDir::create(&east, ClusterConfig::new(name("east")?, TOPIC, TOPIC_ID), 1)?,
        true,
    )?;
    producer::produce(
        &mut cluster,
        &ops(
            "plain:3 idem:1:2 idem:1:2 bump-epoch txn:7:2 plain:1 txn:7:1 commit:7 txn:8:2 \
             abort:8 bump-epoch plain:2 idem:1:1",
        )?,
        clock.now_ms(),
    )?;
    cluster.close()?;
    steps.push(DemoStep {
        number: 1,
        title: "east: local producers write plain, idempotent and transactional batches over \
                three leader epochs"
            .into(),
        rows: vec![row(&east, "source", "-".into())?],
        notes: vec![
            "producer 7 committed a transaction, producer 8 aborted one; producer 1 is \
             idempotent (sequences 0..4)"
                .into(),
        ],
    });

    // 2. Mirror east -> west.
    let mut config = ClusterConfig::new(name("west")?, TOPIC, TOPIC_ID);
    config.mirror_name = Some("east".into());
    config.mirrors.insert(name("east")?);
    config.source_dir = Some(east.clone());
    let cluster = Cluster::open_dir(ClusterDir::create(&west, config, 3)?, true)?;
    let mut driver = Driver::from_cluster(
        cluster,
        Some(Box::new(LocalSource::open(&east)?)),
        DriverOptions::default(),
    )?;
    driver.run(clock, Until::Idle, &mut |_, _| {})?;
    let events = driver.take_events();
    driver.close()?;
    steps.push(DemoStep {
        number: 2,
        title: "west (3 replicas) mirrors east until caught up".into(),
        rows: vec![
            row(&east, "source", "-".into())?,
            row(&west, "mirror", truncations(&events))?,
        ],
        notes: vec![
            "UNKNOWN -> PREPARING (east has no LME for west: truncate fully, start at east's log \
             start) -> MIRRORING; batches are appended byte for byte with east's leader epochs"
                .into(),
        ],
    });

    // 3. East goes on; west is cut off in the middle of producer 9's transaction.
    let mut cluster = Cluster::open(&east)?;
    let report = producer::produce(
        &mut cluster,
        &ops("txn:9:2 txn:9:1 commit:9 plain:1 txn:10:2")?,
        clock.now_ms(),
    )?;
    cluster.close()?;
    let commit_offset = report.appended[2].base_offset;
    let cluster = Cluster::open(&west)?;
    let options = DriverOptions {
        max_fetch_batches: 1,
        ..DriverOptions::default()
    };
    let mut driver =
        Driver::from_cluster(cluster, Some(Box::new(LocalSource::open(&east)?)), options)?;
    while driver.cluster().leader.log_end_offset() < commit_offset {
        if driver.run_once(clock.now_ms())?.is_some() {
            break;
        }
    }
    // Let the followers catch up with what was fetched.
    driver.release_source();
    driver.set_source(None);
    driver.run(clock, Until::Idle, &mut |_, _| {})?;
    let events = driver.take_events();
    driver.close()?;
    let mut cluster = Cluster::open(&west)?;
    let refused = match producer::produce(&mut cluster, &ops("plain:1")?, clock.now_ms()) {
        Err(e) => format!("a local write to west is refused: {e}"),
        Ok(_) => "a local write to west was accepted (unexpected)".to_owned(),
    };
    cluster.close()?;
    steps.push(DemoStep {
        number: 3,
        title: "east goes on; west is cut off with producer 9's transaction half mirrored".into(),
        rows: vec![
            row(&east, "source", "-".into())?,
            row(&west, "mirror", truncations(&events))?,
        ],
        notes: vec![
            format!(
                "west holds producer 9's data but not its COMMIT marker at offset \
                 {commit_offset}: an open transaction, so its LSO stays below its LEO"
            ),
            "producer 10's transaction is still open on east: read-committed fetches never \
             copy it"
                .into(),
            refused,
        ],
    });

    // 4. Failover: west leaves the mirror.
    let mut driver = Driver::open(&west, None, DriverOptions::default())?;
    let now = clock.now_ms();
    driver.start(now)?;
    driver.request(
        &MirrorRequest::RemoveTopics {
            mirror: "east".into(),
            topics: vec![TOPIC.into()],
        },
        now,
    )?;
    driver.run(clock, Until::Idle, &mut |_, _| {})?;
    let events = driver.take_events();
    driver.close()?;
    let mut notes = Vec::new();
    for e in &events {
        match e {
            Event::EpochBumped { leader_epoch } => notes.push(format!(
                "the controller bumped west's leader epoch to {leader_epoch}, above every \
                 mirrored epoch"
            )),
            Event::LastMirroredEpochWritten { epoch, offset } => notes.push(format!(
                "LastMirroredEpochs recorded in west's __mirror_state: epoch {}, ending at \
                 offset {offset}",
                epoch.map_or("-1".to_owned(), |e| e.to_string())
            )),
            Event::PidResetAppended {
                offset,
                leader_epoch,
            } => notes.push(format!(
                "MIRROR_PID_RESET appended at offset {offset} (epoch {leader_epoch}): mirrored \
                 producer state expired"
            )),
            _ => {}
        }
    }
    steps.push(DemoStep {
        number: 4,
        title: "failover: RemoveTopicsFromMirror (mirror.name=east.removed), driven to STOPPED"
            .into(),
        rows: vec![
            row(&east, "(lost)", "-".into())?,
            row(&west, "writable", truncations(&events))?,
        ],
        notes,
    });

    // 5. Local writes on west.
    let mut cluster = Cluster::open(&west)?;
    let report = producer::produce(
        &mut cluster,
        &ops("plain:2 idem:1:2 txn:11:1 commit:11")?,
        clock.now_ms(),
    )?;
    cluster.close()?;
    steps.push(DemoStep {
        number: 5,
        title: "local producers write to west".into(),
        rows: vec![row(&west, "primary", "-".into())?],
        notes: vec![format!(
            "{} batches at leader epoch {}; idempotent producer 1 starts again at sequence 0",
            report.appended.len(),
            report.leader_epoch
        )],
    });

    // 6. Failback: east mirrors from west.
    let mut driver = Driver::open(
        &east,
        Some(Box::new(LocalSource::open(&west)?)),
        DriverOptions::default(),
    )?;
    let now = clock.now_ms();
    driver.create_mirror(name("west")?, Some(west.clone()), now)?;
    driver.request(
        &MirrorRequest::AddTopics {
            mirror: "west".into(),
            topics: vec![TOPIC.into()],
        },
        now,
    )?;
    driver.run(clock, Until::Idle, &mut |_, _| {})?;
    let events = driver.take_events();
    driver.close()?;
    steps.push(DemoStep {
        number: 6,
        title: "failback: AddTopicsToMirror on east from west; east truncates to the LME, then \
                mirrors"
            .into(),
        rows: vec![
            row(&west, "source", "-".into())?,
            row(&east, "mirror", truncations(&events))?,
        ],
        notes: vec![
            "PREPARING asked west for the LME and cut east where its copy stopped matching: \
             producer 9's commit, the later plain batch and producer 10's open transaction \
             are gone"
                .into(),
        ],
    });

    let (verified, verification) = compare(&east, &west)?;
    Ok(DemoReport {
        kept_in: dir.map(|d| d.display().to_string()),
        steps,
        verified,
        verification,
    })
}

/// Whether the leaders of `a` and `b` hold the same batches, byte for byte.
fn compare(a: &Path, b: &Path) -> Result<(bool, String), DriverError> {
    let read = |dir: &Path| -> Result<Vec<Vec<u8>>, DriverError> {
        let cluster = Cluster::open_leader_only(dir)?;
        let log = &cluster.leader;
        let batches = log
            .try_read(log.log_start_offset(), log.log_end_offset())
            .map_err(|source| DriverError::Log {
                dir: log.dir().to_path_buf(),
                source: Box::new(source),
            })?;
        let bytes = batches.iter().map(|b| b.bytes().to_vec()).collect();
        cluster.close()?;
        Ok(bytes)
    };
    let (x, y) = (read(a)?, read(b)?);
    let size: usize = x.iter().map(Vec::len).sum();
    Ok(if x == y {
        (
            true,
            format!(
                "east and west hold the same {} batches ({size} bytes), byte for byte",
                x.len()
            ),
        )
    } else {
        (
            false,
            format!(
                "east holds {} batches and west {}; they differ",
                x.len(),
                y.len()
            ),
        )
    })
}
