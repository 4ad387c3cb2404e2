//! `kmirror demo`: the whole KIP-1279 story between two nodes on Kafka's wire, step by step.
//!
//! 1. **east**, a node of its own, serves Kafka's protocol; a producer creates `orders` on it
//!    (CreateTopics) and writes plain, idempotent and transactional batches (one transaction
//!    committed, one aborted).
//! 2. **west** mirrors east over the wire until caught up: same batches, same offsets, same
//!    epochs; west is read-only.
//! 3. east goes on: one transaction commits, another stays open. West mirrors one batch per
//!    fetch and is cut off with the committed transaction's data but not its COMMIT marker: a
//!    half-mirrored transaction. A producer's write to west is refused (`READ_ONLY_TOPIC`).
//! 4. **Failover**: the topic is stopped on west; the kernel bumps its leader epoch, truncates
//!    it to its LSO (dropping the half transaction), records the LME, appends
//!    `MIRROR_PID_RESET` and opens its produce gate.
//! 5. Producers write to west (producer ids of west's own, the new leader epoch).
//! 6. **Failback**: east mirrors from west; PREPARING asks west for the LME (west answers from
//!    its `__mirror_state`) and cuts east where west's copy ended, then east mirrors west's new
//!    data. Both logs end byte for byte equal.
//!
//! Each node is a [`NodeDriver`] in this process with a Kafka listener on loopback. A node
//! that only serves runs on a thread of its own (`Served`); a node the demo steps (a mirror
//! it cuts off, a stop, a failback) runs on the caller's thread. Every write goes through the
//! node's listener (`client.rs`), every decision is the kernel's: the demo only chooses what to
//! do and when, and reads the nodes for the tables ([`DemoRow`]).

mod client;
mod report;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use kmirror_harness::clock::Clock;
use kmirror_harness::node::{
    NodeDest, NodeDriver, NodeError, NodeIdle, NodeMeta, NodeUntil, TopicResults, TopicsVerb,
};
use kmirror_harness::serve::metadata::node_cluster_id;
use kmirror_harness::serve::ServeOptions;
use kmirror_harness::wire::source_cluster::SourceClusterOptions;
use kmirror_harness::wire::{SourceCluster, TopicSelection, WireError};
use kmirror_kernel::config::StopStrategy;
use kmirror_kernel::log::LogView;
use kmirror_kernel::node::{PartitionKey, DEFAULT_MIRROR_STATE_PARTITIONS};
use kmirror_kernel::types::{MirrorName, Offset, TopicId};

use crate::log_cli::{DemoArgs, SystemClock};
use client::Client;
pub use report::{DemoReport, DemoRow, DemoStep};

/// The demo's topic.
pub const TOPIC: &str = "orders";

/// Why the demo could not run to its end.
#[derive(Debug, thiserror::Error)]
pub enum DemoError {
    /// A node failed (its directory, its logs, its listener).
    #[error(transparent)]
    Node(#[from] NodeError),
    /// A request on the wire failed.
    #[error(transparent)]
    Wire(#[from] WireError),
    /// A node refused what the demo asked, or a step did not end as the story needs.
    #[error("{what}: {message}")]
    Refused {
        /// What was asked.
        what: String,
        /// The node's answer.
        message: String,
    },
    /// The demo's directory could not be made.
    #[error("cannot create a temporary directory in {}: {source}", dir.display())]
    TempDir {
        /// Where.
        dir: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
}

/// `kmirror demo [--dir DIR] [--json]`: exit 0 when east and west end byte for byte equal.
pub fn run_command(args: DemoArgs) -> Result<ExitCode, String> {
    let report = run(args.dir.as_deref()).map_err(|e| e.to_string())?;
    if args.json {
        let text = serde_json::to_string_pretty(&report)
            .map_err(|e| format!("cannot encode the demo: {e}"))?;
        println!("{text}");
    } else {
        print!("{}", report.render());
    }
    Ok(if report.verified {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// Runs the demo in `dir` (kept), or in a temporary directory (removed).
pub fn run(dir: Option<&Path>) -> Result<DemoReport, DemoError> {
    let temp;
    let root: PathBuf = match dir {
        Some(d) => d.to_path_buf(),
        None => {
            temp = tempfile::Builder::new()
                .prefix("kmirror-demo-")
                .tempdir()
                .map_err(|source| DemoError::TempDir {
                    dir: std::env::temp_dir(),
                    source,
                })?;
            temp.path().to_path_buf()
        }
    };
    let (east_root, west_root) = (root.join("east"), root.join("west"));
    if let Some(taken) = [&east_root, &west_root].into_iter().find(|d| d.exists()) {
        return Err(DemoError::Refused {
            what: format!("--dir {}", root.display()),
            message: format!(
                "{} exists (a previous demo?); remove it or pick another directory",
                taken.display()
            ),
        });
    }
    let mut clock = SystemClock;
    let mut steps = Vec::new();

    // 1. East, a node of its own, written by producers on its listener.
    let dest = NodeDest::create(&east_root, NodeMeta::new(None, STATE_PARTITIONS))?;
    let east = Served::start(NodeDriver::from_dest(dest, None, options())?)?;
    let mut to_east = Client::connect(&east.address, TOPIC)?;
    let topic_id = to_east.create_topic()?;
    to_east.plain(3)?;
    let mut idempotent = to_east.producer(None)?;
    to_east.send(&mut idempotent, 2)?;
    to_east.send(&mut idempotent, 2)?;
    let mut committed = to_east.producer(Some("demo-1"))?;
    to_east.send(&mut committed, 2)?;
    to_east.plain(1)?;
    to_east.send(&mut committed, 1)?;
    to_east.end(&mut committed, true)?;
    let mut aborted = to_east.producer(Some("demo-2"))?;
    to_east.send(&mut aborted, 2)?;
    to_east.end(&mut aborted, false)?;
    to_east.plain(2)?;
    to_east.send(&mut idempotent, 1)?;
    steps.push(DemoStep {
        number: 1,
        title: "east, a node of its own: a producer creates orders and writes plain, idempotent \
                and transactional batches"
            .into(),
        rows: vec![east.row("east", "source")?],
        notes: vec![format!(
            "producer {} committed a transaction, producer {} aborted one (east is their \
             transaction coordinator); producer {} is idempotent (sequences 0..4)",
            committed.id, aborted.id, idempotent.id
        )],
    });

    // 2. West mirrors east over the wire.
    let mirror = mirror_name(node_cluster_id(&east_root, 0))?;
    let dest = NodeDest::create(
        &west_root,
        NodeMeta::new(Some(east.address.clone()), STATE_PARTITIONS),
    )?;
    let mut west = NodeDriver::from_dest(dest, Some(source_at(&east.address)?), options())?;
    accepted(west.add_topics(&mirror, &[(TOPIC.into(), topic_id, 1)], clock.now_ms())?)?;
    west.run(&mut clock, NodeUntil::CaughtUp, &mut |_, _| {})?;
    let mut notes = vec![format!(
        "west's mirror is named after east's cluster id ({mirror}); UNKNOWN -> PREPARING \
         (east keeps no mirror state of west: start at east's log start) -> MIRRORING; \
         batches are appended byte for byte with east's offsets and epochs"
    )];
    notes.extend(reported("west", &mut west));
    steps.push(DemoStep {
        number: 2,
        title: "west mirrors east over Kafka's wire until caught up".into(),
        rows: vec![
            east.row("east", "source")?,
            DemoRow::of(&west, "west", "mirror"),
        ],
        notes,
    });

    // 3. East goes on; west is cut off in the middle of a committed transaction.
    let mut half = to_east.producer(Some("demo-3"))?;
    to_east.send(&mut half, 2)?;
    let last = to_east.send(&mut half, 1)?;
    to_east.end(&mut half, true)?;
    let commit_offset = last + 1;
    to_east.plain(1)?;
    let mut open = to_east.producer(Some("demo-4"))?;
    to_east.send(&mut open, 2)?;
    mirror_until(&mut west, &mut clock, commit_offset)?;
    west.set_source(None);
    let mut notes = reported("west", &mut west);
    let served_west = Served::start(west)?;
    let refusal = match Client::connect(&served_west.address, TOPIC)?.try_plain(1)? {
        Err((code, message)) => format!(
            "a producer's write to west is refused with error code {code} (READ_ONLY_TOPIC): \
             {message}"
        ),
        Ok(offset) => format!("a producer's write to west was accepted at {offset} (unexpected)"),
    };
    notes.extend([
        format!(
            "west holds producer {}'s data but not its COMMIT marker at offset \
             {commit_offset}: an open transaction, so its LSO stays below its LEO",
            half.id
        ),
        format!("producer {}'s transaction is still open on east", open.id),
        refusal,
    ]);
    steps.push(DemoStep {
        number: 3,
        title: "east goes on; west is cut off with a transaction half mirrored".into(),
        rows: vec![
            east.row("east", "source")?,
            served_west.row("west", "mirror")?,
        ],
        notes,
    });

    // 4. Failover: the topic is stopped on west.
    let mut west = served_west.stop()?;
    accepted(west.request_topics(TopicsVerb::Stop, TOPIC, None, clock.now_ms())?)?;
    west.run(&mut clock, NodeUntil::Settled, &mut |_, _| {})?;
    let notes = reported("west", &mut west);
    steps.push(DemoStep {
        number: 4,
        title: "failover: west's topic is stopped (mirror.name=<mirror>.removed), driven to \
                STOPPED"
            .into(),
        rows: vec![
            east.row("east", "(lost)")?,
            DemoRow::of(&west, "west", "primary"),
        ],
        notes,
    });

    // 5. Producers write to west.
    let served_west = Served::start(west)?;
    let mut to_west = Client::connect(&served_west.address, TOPIC)?;
    to_west.plain(2)?;
    let mut idempotent = to_west.producer(None)?;
    to_west.send(&mut idempotent, 2)?;
    let mut local = to_west.producer(Some("demo-5"))?;
    to_west.send(&mut local, 1)?;
    to_west.end(&mut local, true)?;
    steps.push(DemoStep {
        number: 5,
        title: "producers write to west".into(),
        rows: vec![served_west.row("west", "primary")?],
        notes: vec![format!(
            "west gave producer ids {} and {}, above every id in its log (east's producers' \
             among them); the idempotent one starts at sequence 0, after the MIRROR_PID_RESET",
            idempotent.id, local.id
        )],
    });

    // 6. Failback: east mirrors from west.
    let mut east = east.stop()?;
    let back = mirror_name(node_cluster_id(&west_root, 0))?;
    east.set_source(Some(source_at(&served_west.address)?));
    east.set_source_bootstrap(&served_west.address)?;
    accepted(east.add_topics(&back, &[(TOPIC.into(), topic_id, 1)], clock.now_ms())?)?;
    east.run(&mut clock, NodeUntil::CaughtUp, &mut |_, _| {})?;
    let mut notes = vec![
        "PREPARING asked west for the LME (west answers it from its __mirror_state) and cut \
         east where west's copy ended: the half-mirrored transaction, the later plain batch and \
         the open transaction are gone from east"
            .to_owned(),
    ];
    notes.extend(reported("east", &mut east));
    steps.push(DemoStep {
        number: 6,
        title: "failback: east mirrors from west; east truncates to the LME, then mirrors".into(),
        rows: vec![
            served_west.row("west", "source")?,
            DemoRow::of(&east, "east", "mirror"),
        ],
        notes,
    });

    let west = served_west.stop()?;
    let (verified, verification) = compare(&east, &west, topic_id)?;
    east.close()?;
    west.close()?;
    Ok(DemoReport {
        kept_in: dir.map(|d| d.display().to_string()),
        steps,
        verified,
        verification,
    })
}

/// `__mirror_state` partitions of each node.
const STATE_PARTITIONS: u32 = DEFAULT_MIRROR_STATE_PARTITIONS;

/// The nodes' options: a mirror fetches one batch per partition and fetch, so that step 3
/// can cut west off between two batches.
fn options() -> kmirror_harness::node::NodeDriverOptions {
    let mut o = crate::node_cli::options(None, StopStrategy::TruncateToLso);
    o.max_fetch_batches = 1;
    o
}

/// The demo's topic at the node serving at `address`, without long polls.
fn source_at(address: &str) -> Result<SourceCluster, DemoError> {
    let options = SourceClusterOptions {
        fetch_max_wait_ms: 0,
        ..SourceClusterOptions::default()
    };
    let selection = TopicSelection::names(&[TOPIC]).map_err(|e| DemoError::Refused {
        what: format!("the selection {TOPIC}"),
        message: e.to_string(),
    })?;
    Ok(SourceCluster::new(address, selection, options))
}

fn mirror_name(name: String) -> Result<MirrorName, DemoError> {
    MirrorName::new(&name).map_err(|e| DemoError::Refused {
        what: format!("the mirror name {name}"),
        message: e.to_string(),
    })
}

/// `Ok` when every topic of a mirror request was accepted.
fn accepted(results: TopicResults) -> Result<(), DemoError> {
    for (topic, result) in results {
        if let Err(e) = result {
            return Err(DemoError::Refused {
                what: format!("the mirror request for {topic}"),
                message: e.to_string(),
            });
        }
    }
    Ok(())
}

/// What `driver` reported doing to its logs and epochs since it was last asked, each line
/// prefixed with `node`.
fn reported(node: &str, driver: &mut NodeDriver) -> Vec<String> {
    driver
        .take_events()
        .into_iter()
        .filter(|e| {
            [
                "truncated",
                "emptied",
                "MIRROR_PID_RESET",
                "ABORT marker",
                "epoch bumped",
            ]
            .iter()
            .any(|w| e.contains(w))
        })
        .map(|e| format!("{node}: {e}"))
        .collect()
}

/// The log of the demo's partition on `driver`.
fn log_of(driver: &NodeDriver) -> Option<&kmirror_harness::file_log::FileLog> {
    let topic = driver.dest().meta().topics.get(TOPIC)?;
    driver.log(&PartitionKey::new(topic.topic_id, 0))
}

/// Runs `west` until its log ends at `offset` (one batch per fetch), then stops fetching.
fn mirror_until(
    west: &mut NodeDriver,
    clock: &mut SystemClock,
    offset: Offset,
) -> Result<(), DemoError> {
    let end = |d: &NodeDriver| log_of(d).map_or(0, LogView::log_end_offset);
    let deadline = Instant::now() + Duration::from_secs(60);
    while end(west) < offset && Instant::now() < deadline {
        if let Some(NodeIdle::WaitingForRetry { .. } | NodeIdle::Settled) =
            west.run_once(clock.now_ms())?
        {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    if end(west) != offset {
        return Err(DemoError::Refused {
            what: "cutting west off before the COMMIT marker".into(),
            message: format!("west's log ends at {}, not {offset}", end(west)),
        });
    }
    Ok(())
}

/// Whether the demo's partition holds the same batches on `a` and `b`, byte for byte.
fn compare(a: &NodeDriver, b: &NodeDriver, topic_id: TopicId) -> Result<(bool, String), DemoError> {
    let key = PartitionKey::new(topic_id, 0);
    let read = |d: &NodeDriver| -> Result<Vec<Vec<u8>>, DemoError> {
        let Some(log) = d.log(&key) else {
            return Ok(Vec::new());
        };
        let batches = log
            .try_read(log.log_start_offset(), log.log_end_offset())
            .map_err(|e| DemoError::Refused {
                what: format!("reading {}", log.dir().display()),
                message: e.to_string(),
            })?;
        Ok(batches.iter().map(|b| b.bytes().to_vec()).collect())
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

/// A row asked of a serving node's thread: the node's name, its role, where to answer.
type RowAsk = (String, String, mpsc::Sender<DemoRow>);

/// A node serving Kafka clients on its own thread, until [`Served::stop`] hands its driver
/// back (dropped, as when a step fails, it stops the thread, which closes the node). Its rows
/// are read on its thread, between its steps.
struct Served {
    /// Where it serves clients.
    address: String,
    stop: Arc<AtomicBool>,
    asks: mpsc::Sender<RowAsk>,
    thread: Option<JoinHandle<Result<NodeDriver, NodeError>>>,
}

impl Drop for Served {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Served {
    /// Serves `driver` on a free loopback port, on a new thread.
    fn start(mut driver: NodeDriver) -> Result<Served, DemoError> {
        let address = driver
            .serve_clients(&ServeOptions::new("127.0.0.1:0"))?
            .to_string();
        let stop = Arc::new(AtomicBool::new(false));
        driver.interrupt_on(stop.clone());
        let (asks, asked) = mpsc::channel::<RowAsk>();
        let thread = std::thread::spawn(move || {
            let mut clock = SystemClock;
            driver.run(
                &mut clock,
                NodeUntil::Forever { poll_ms: 10 },
                &mut |d, _| {
                    while let Ok((node, role, reply)) = asked.try_recv() {
                        let _ = reply.send(DemoRow::of(d, &node, &role));
                    }
                },
            )?;
            Ok(driver)
        });
        Ok(Served {
            address,
            stop,
            asks,
            thread: Some(thread),
        })
    }

    /// The node's row, as its thread reads it.
    fn row(&self, node: &str, role: &str) -> Result<DemoRow, DemoError> {
        let (reply, answer) = mpsc::channel();
        let gone = || DemoError::Refused {
            what: format!("reading {node}"),
            message: "its serving thread ended".into(),
        };
        self.asks
            .send((node.to_owned(), role.to_owned(), reply))
            .map_err(|_| gone())?;
        answer
            .recv_timeout(Duration::from_secs(30))
            .map_err(|_| gone())
    }

    /// Stops the thread and returns the driver, ready to run again on the caller's thread.
    fn stop(mut self) -> Result<NodeDriver, DemoError> {
        self.stop.store(true, Ordering::Relaxed);
        let thread = self.thread.take().ok_or_else(|| DemoError::Refused {
            what: "stopping a node".into(),
            message: "its thread was already stopped".into(),
        })?;
        let mut driver = match thread.join() {
            Ok(result) => result?,
            Err(panic) => std::panic::resume_unwind(panic),
        };
        driver.interrupt_on(Arc::new(AtomicBool::new(false)));
        Ok(driver)
    }
}
