//! A **node destination**: one directory holding every topic and partition one kmirror node
//! mirrors, in Kafka's data-dir layout. This is the one place its format is documented.
//!
//! # Layout
//!
//! ```text
//! <dest>/
//!   node.properties             the node's metadata: its source, its mirrors, its topics and
//!                               each partition's leader epoch and produce gate (below)
//!   .lock                       held (flock) by the kmirror process using the directory
//!   status.json                 the last per-partition status a `kmirror mirror --topics` or
//!                               `kmirror serve` run wrote (each second, and at close): what
//!                               `kmirror status` shows while a process holds the directory,
//!                               and the source positions a mirror measured, for the lag
//!   control/                    the control channel of a running mirror
//!                               (`<id>.request`, `<id>.taken`, `<id>.response`: JSON, each
//!                               written atomically; see `super::control`)
//!   replicas/broker-<id>/       with replicas=N > 1: the log dir of each follower broker
//!                               (ids broker.id + 1 .. broker.id + N - 1), laid out as data/
//!                               without __mirror_state (see below)
//!   data/                       the node's log dir (Kafka's `log.dirs`)
//!     recovery-point-offset-checkpoint   one line per partition of the log dir: its
//!     replication-offset-checkpoint      recovery point, high watermark and log start
//!     log-start-offset-checkpoint        offset (Kafka's log-dir-level files, below)
//!     <topic>-<partition>/      one FileLog per partition of every mirrored topic: its
//!                               segments (`<base>.log`, `<base>.index`) and its own
//!                               `leader-epoch-checkpoint`, as in Kafka
//!     __mirror_state-<k>/       partition k of __mirror_state, k in 0..mirror_state.partitions;
//!                               the state of a mirrored partition lives on partition
//!                               murmur2(key) % mirror_state.partitions (the kernel's
//!                               `mirror_state_partition`)
//! ```
//!
//! # The log dir's checkpoints
//!
//! As Kafka's `LogManager`, the node keeps **one** `recovery-point-offset-checkpoint`, one
//! `replication-offset-checkpoint` and one `log-start-offset-checkpoint` in `data/` for every
//! partition it holds, `__mirror_state` included ([`LogDirCheckpoints`](crate::log_dir_checkpoints)):
//! Kafka's `OffsetCheckpointFile` text (`0`, the entry count, then `<topic> <partition>
//! <offset>` lines), each written atomically (temporary file, fsync, rename, directory fsync)
//! for all partitions at once: after opening the logs, once per fetch round when something
//! changed, and at close; a truncation that lowers a partition's recovery point or high
//! watermark, or moves its log start, writes the file before it changes the segments. A
//! partition's `leader-epoch-checkpoint` stays in its directory (Kafka's place); its offset
//! indexes are not fsynced (recovery checks each against its segment and rebuilds a bad one).
//! What may lag on disk and why is argued in the [driver](super::driver)'s documentation.
//!
//! **The older layout** (`format=kmirror-node-1`, written by earlier versions) kept the three
//! offset files in every partition directory, one entry each. It is read and migrated on open:
//! a partition with no line in the log dir's files takes its offsets from its own files; once
//! the log dir's files hold every partition (fsynced), the per-partition files are removed and
//! `node.properties` is rewritten with `format=kmirror-node-2`. A crash part-way leaves the
//! older format and the migration runs again. An older kmirror refuses the new format (its
//! `format` check) rather than misreading it.
//!
//! **Replicas.** The node is the leader of every partition it holds. With `replicas=N` (set at
//! creation, `--replicas`), every partition also has `N - 1` in-process follower replicas,
//! each follower broker a log dir of its own under `replicas/`: they replicate from the leader
//! with Kafka's follower rules, and the leader's high watermark waits for them (the driver's
//! `followers.rs`). `__mirror_state` has one replica, in `data/`. With one replica (the
//! default) a partition's high watermark is its log end offset.
//!
//! A single-partition cluster directory (it has `cluster.properties`) is never read as a node
//! destination: [`NodeDest::open`] refuses it and names the commands that handle it.
//!
//! # `node.properties`
//!
//! One `key=value` per line, `#` comments and blank lines ignored, written atomically
//! (temporary file, fsync, rename, directory fsync) on every change. Unknown keys are errors.
//!
//! | key | meaning |
//! |---|---|
//! | `format` | `kmirror-node-2` (required; `kmirror-node-1`, the older layout, is migrated on open; anything else is refused) |
//! | `broker.id` | the node's broker id (the replica id of its partitions) |
//! | `source.bootstrap` | the source cluster's bootstrap addresses (`host:port,...`) |
//! | `mirror_state.partitions` | the partition count of `__mirror_state` (fixed at creation) |
//! | `segment.bytes` | segment size of every log (optional; default 1 GiB) |
//! | `replicas` | replicas of every partition, the leader included, 1 to 16 (optional; default 1; fixed at creation) |
//! | `mirrors` | comma-separated cluster mirrors created on this node; `mirror.name` must name one |
//! | `topic` | repeated, one per topic: `<name>,<topic id, 32 hex digits>,<partition count>,<mirror.name>` (an empty `mirror.name`: not mirrored) |
//! | `partition` | repeated, one per partition: `<topic>-<index>,<leader epoch>,<writable: 0 or 1>` |

use std::collections::{BTreeMap, BTreeSet};
use std::fs::{self, File};
use std::path::{Path, PathBuf};

use kmirror_kernel::controller::{TopicCatalogue, TopicInfo};
use kmirror_kernel::desired::DesiredState;
use kmirror_kernel::types::{LeaderEpoch, MirrorName, PartitionIndex, TopicId};

use crate::dir_lock;
use crate::file_log::{FileLogConfig, TopicPartition};
use crate::log_dir_checkpoints::CheckpointKind;
use crate::mirror_state_log::MIRROR_STATE_TOPIC;
use crate::segment;
use crate::topic_partition::{check_topic, parse_topic_id};

use super::NodeError;

/// File name of the node's metadata.
pub const NODE_FILE: &str = "node.properties";
/// The value of `format` this version writes and reads.
pub const NODE_FORMAT: &str = "kmirror-node-2";
/// The older `format`, read and migrated on open: every partition directory kept its own
/// recovery-point, high-watermark and log-start-offset checkpoint files.
pub const NODE_FORMAT_PER_PARTITION_CHECKPOINTS: &str = "kmirror-node-1";
/// The node's log dir, under the destination directory.
pub const LOG_DIR: &str = "data";
/// File name of the status snapshot a run leaves.
pub const STATUS_FILE: &str = "status.json";
/// Where the follower brokers' log dirs live, under the destination directory.
pub const REPLICAS_DIR: &str = "replicas";
/// The most replicas a partition may have (the leader included).
pub const MAX_REPLICAS: u32 = 16;
/// The file that marks a single-partition cluster directory.
pub const SINGLE_PARTITION_FILE: &str = "cluster.properties";

/// One topic of a node destination.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeTopic {
    /// The topic id (the source's).
    pub topic_id: TopicId,
    /// The partition count.
    pub partitions: PartitionIndex,
    /// The raw `mirror.name` (`None`: not mirrored).
    pub mirror_name: Option<String>,
}

impl NodeTopic {
    /// The desired state its `mirror.name` encodes.
    pub fn desired(&self, topic: &str) -> Result<DesiredState, NodeError> {
        DesiredState::parse(self.mirror_name.as_deref()).map_err(|e| NodeError::Invalid {
            message: format!("topic {topic}: mirror.name is invalid: {e}"),
        })
    }
}

/// One partition's controller state on this node.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct NodePartition {
    /// The leader epoch (bumped by the kernel's `BumpLeaderEpoch`).
    pub leader_epoch: LeaderEpoch,
    /// The produce gate (the kernel's `SetWritable`).
    pub writable: bool,
}

/// The contents of `node.properties`. See the [module documentation](self).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeMeta {
    /// The node's broker id.
    pub broker: i32,
    /// The source's bootstrap addresses.
    pub source_bootstrap: Option<String>,
    /// The partition count of `__mirror_state`.
    pub mirror_state_partitions: u32,
    /// `segment.bytes` of every log, if not the default.
    pub segment_bytes: Option<u64>,
    /// Replicas of every partition, the leader included (1: no followers).
    pub replicas: u32,
    /// The cluster mirrors created on this node.
    pub mirrors: BTreeSet<MirrorName>,
    /// The topics, by name.
    pub topics: BTreeMap<String, NodeTopic>,
    /// The partitions, by topic name and index.
    pub partitions: BTreeMap<(String, PartitionIndex), NodePartition>,
}

impl NodeMeta {
    /// An empty node: broker 0, no topics.
    pub fn new(source_bootstrap: Option<String>, mirror_state_partitions: u32) -> Self {
        NodeMeta {
            broker: 0,
            source_bootstrap,
            mirror_state_partitions,
            segment_bytes: None,
            replicas: 1,
            mirrors: BTreeSet::new(),
            topics: BTreeMap::new(),
            partitions: BTreeMap::new(),
        }
    }

    /// The follower brokers' ids: the `replicas - 1` ids after the node's own.
    pub fn follower_ids(&self) -> Vec<i32> {
        (1..self.replicas as i32)
            .map(|i| self.broker.saturating_add(i))
            .collect()
    }

    /// Every partition's replicas: the node's broker (the leader), then its followers.
    pub fn replica_set(&self) -> Vec<i32> {
        std::iter::once(self.broker)
            .chain(self.follower_ids())
            .collect()
    }

    /// The name of the topic with id `topic_id`.
    pub fn topic_name(&self, topic_id: TopicId) -> Option<&str> {
        self.topics
            .iter()
            .find(|(_, t)| t.topic_id == topic_id)
            .map(|(n, _)| n.as_str())
    }

    /// The controller's view: every topic with its `mirror.name`, and the mirrors.
    pub fn catalogue(&self) -> TopicCatalogue {
        let mut c = TopicCatalogue::new();
        for (name, t) in &self.topics {
            c.insert_topic(
                name.clone(),
                TopicInfo {
                    topic_id: t.topic_id,
                    partitions: t.partitions,
                    mirror_name: t.mirror_name.clone(),
                },
            );
        }
        for m in &self.mirrors {
            c.insert_mirror(m.clone());
        }
        c
    }

    /// The text of `node.properties`.
    pub fn encode(&self) -> String {
        let mut out = format!(
            "format={NODE_FORMAT}\nbroker.id={}\nmirror_state.partitions={}\n",
            self.broker, self.mirror_state_partitions
        );
        if let Some(b) = &self.source_bootstrap {
            out.push_str(&format!("source.bootstrap={b}\n"));
        }
        if let Some(s) = self.segment_bytes {
            out.push_str(&format!("segment.bytes={s}\n"));
        }
        if self.replicas > 1 {
            out.push_str(&format!("replicas={}\n", self.replicas));
        }
        let mirrors: Vec<&str> = self.mirrors.iter().map(MirrorName::as_str).collect();
        out.push_str(&format!("mirrors={}\n", mirrors.join(",")));
        for (name, t) in &self.topics {
            out.push_str(&format!(
                "topic={name},{},{},{}\n",
                t.topic_id,
                t.partitions,
                t.mirror_name.as_deref().unwrap_or("")
            ));
        }
        for ((topic, p), s) in &self.partitions {
            out.push_str(&format!(
                "partition={topic}-{p},{},{}\n",
                s.leader_epoch,
                u8::from(s.writable)
            ));
        }
        out
    }

    /// Parses `node.properties` (`file` names it in errors).
    pub fn decode(text: &str, file: &Path) -> Result<Self, NodeError> {
        let bad = |line: usize, reason: String| NodeError::BadFile {
            file: file.to_path_buf(),
            line,
            reason,
        };
        let mut meta = NodeMeta::new(None, 0);
        let mut format = None;
        let mut broker = None;
        for (i, raw) in text.lines().enumerate() {
            let line_no = i + 1;
            let line = raw.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let (key, value) = line
                .split_once('=')
                .ok_or_else(|| bad(line_no, format!("{line:?} is not key=value")))?;
            let number = |what: &str| bad(line_no, format!("{key}={value:?} is not {what}"));
            match key {
                "format" => format = Some(value.to_owned()),
                "broker.id" => broker = Some(value.parse().map_err(|_| number("a broker id"))?),
                "source.bootstrap" => meta.source_bootstrap = Some(value.to_owned()),
                "mirror_state.partitions" => {
                    meta.mirror_state_partitions = value
                        .parse()
                        .ok()
                        .filter(|n| *n > 0)
                        .ok_or_else(|| number("a positive count"))?
                }
                "segment.bytes" => {
                    meta.segment_bytes = Some(value.parse().map_err(|_| number("a size"))?)
                }
                "replicas" => {
                    meta.replicas = value
                        .parse()
                        .ok()
                        .filter(|n| (1..=MAX_REPLICAS).contains(n))
                        .ok_or_else(|| number(&format!("a replica count in 1..={MAX_REPLICAS}")))?
                }
                "mirrors" => {
                    for m in value.split(',').filter(|m| !m.is_empty()) {
                        meta.mirrors
                            .insert(MirrorName::new(m).map_err(|e| bad(line_no, e.to_string()))?);
                    }
                }
                "topic" => {
                    let parts: Vec<&str> = value.split(',').collect();
                    let [name, id, count, mirror] = parts[..] else {
                        return Err(bad(
                            line_no,
                            "topic= needs <name>,<id>,<partitions>,<mirror.name>".to_owned(),
                        ));
                    };
                    check_topic(name).map_err(|e| bad(line_no, e))?;
                    let topic_id = parse_topic_id(id).map_err(|e| bad(line_no, e))?;
                    let partitions: PartitionIndex = count
                        .parse()
                        .ok()
                        .filter(|n| *n > 0)
                        .ok_or_else(|| number("<name>,<id>,<positive count>,<mirror.name>"))?;
                    DesiredState::parse(Some(mirror)).map_err(|e| bad(line_no, e.to_string()))?;
                    let t = NodeTopic {
                        topic_id,
                        partitions,
                        mirror_name: (!mirror.is_empty()).then(|| mirror.to_owned()),
                    };
                    if meta.topics.insert(name.to_owned(), t).is_some() {
                        return Err(bad(line_no, format!("topic {name} is listed twice")));
                    }
                }
                "partition" => {
                    let parts: Vec<&str> = value.split(',').collect();
                    let [tp, epoch, writable] = parts[..] else {
                        return Err(bad(
                            line_no,
                            "partition= needs <topic>-<index>,<leader epoch>,<0|1>".to_owned(),
                        ));
                    };
                    let tp = TopicPartition::from_dir_name(tp)
                        .map_err(|e| bad(line_no, e.to_string()))?;
                    let leader_epoch = epoch.parse().map_err(|_| number("an epoch"))?;
                    let writable = match writable {
                        "0" => false,
                        "1" => true,
                        _ => return Err(number("0 or 1")),
                    };
                    meta.partitions.insert(
                        (tp.topic, tp.partition),
                        NodePartition {
                            leader_epoch,
                            writable,
                        },
                    );
                }
                other => return Err(bad(line_no, format!("unknown key {other:?}"))),
            }
        }
        if format.as_deref() != Some(NODE_FORMAT)
            && format.as_deref() != Some(NODE_FORMAT_PER_PARTITION_CHECKPOINTS)
        {
            return Err(bad(
                0,
                format!(
                    "format is {format:?}, not {NODE_FORMAT:?} (or the older \
                     {NODE_FORMAT_PER_PARTITION_CHECKPOINTS:?}, migrated on open); this is not a \
                     node destination this kmirror can read"
                ),
            ));
        }
        meta.broker = broker.ok_or_else(|| bad(0, "broker.id is missing".to_owned()))?;
        if meta.mirror_state_partitions == 0 {
            return Err(bad(0, "mirror_state.partitions is missing".to_owned()));
        }
        for (name, t) in &meta.topics {
            if let Some(m) = t.desired(name)?.mirror() {
                if !meta.mirrors.contains(m) {
                    return Err(bad(
                        0,
                        format!(
                            "topic {name}: mirror.name names mirror {m}, which is not in mirrors="
                        ),
                    ));
                }
            }
            for p in 0..t.partitions {
                meta.partitions.entry((name.clone(), p)).or_default();
            }
        }
        Ok(meta)
    }
}

/// A node destination, opened and locked. See the [module documentation](self).
#[derive(Debug)]
pub struct NodeDest {
    root: PathBuf,
    meta: NodeMeta,
    /// `node.properties` still says [`NODE_FORMAT_PER_PARTITION_CHECKPOINTS`].
    per_partition_checkpoints: bool,
    _lock: File,
}

impl NodeDest {
    /// Whether `root` holds a node destination (`node.properties`).
    pub fn is_node_dest(root: &Path) -> bool {
        root.join(NODE_FILE).is_file()
    }

    /// Whether `root` holds a single-partition cluster directory (`cluster.properties`).
    pub fn is_single_partition(root: &Path) -> bool {
        root.join(SINGLE_PARTITION_FILE).is_file()
    }

    /// Creates a node destination at `root` (missing or empty) with `meta` (usually without
    /// topics: add them with [`NodeDest::add_topic`]), its log dir and every `__mirror_state`
    /// partition directory, and locks it.
    pub fn create(root: &Path, meta: NodeMeta) -> Result<Self, NodeError> {
        if Self::is_single_partition(root) {
            return Err(single_partition(root));
        }
        let empty = !root.exists()
            || fs::read_dir(root)
                .map_err(|e| io("read", root, e))?
                .next()
                .is_none();
        if !empty {
            let what = if Self::is_node_dest(root) {
                "is a node destination already".to_owned()
            } else {
                format!("exists and is neither empty nor a node destination (no {NODE_FILE})")
            };
            return Err(NodeError::Invalid {
                message: format!("{} {what}; pick a new directory", root.display()),
            });
        }
        if meta.mirror_state_partitions == 0 {
            return Err(NodeError::Invalid {
                message: "__mirror_state needs at least 1 partition".to_owned(),
            });
        }
        if !(1..=MAX_REPLICAS).contains(&meta.replicas) {
            return Err(NodeError::Invalid {
                message: format!(
                    "--replicas {}: a partition has 1 to {MAX_REPLICAS} replicas",
                    meta.replicas
                ),
            });
        }
        fs::create_dir_all(root.join(LOG_DIR)).map_err(|e| io("create", root, e))?;
        let lock = dir_lock::lock_exclusive(root)?;
        let dest = NodeDest {
            root: root.to_path_buf(),
            meta,
            per_partition_checkpoints: false,
            _lock: lock,
        };
        dest.save()?;
        Ok(dest)
    }

    /// Refuses a `root` that holds no node destination, saying what to do: missing, a
    /// single-partition cluster directory (`kmirror convert`), or without `node.properties`.
    pub fn check_is_node(root: &Path) -> Result<(), NodeError> {
        const CREATE: &str = "create one with `kmirror mirror --source-bootstrap HOST:PORT \
                              --topics LIST --dest DIR` or `kmirror serve --create --dest DIR \
                              --listen HOST:PORT`";
        if !root.is_dir() {
            return Err(NodeError::Invalid {
                message: format!("{} does not exist; {CREATE}", root.display()),
            });
        }
        if Self::is_single_partition(root) {
            return Err(single_partition(root));
        }
        if !root.join(NODE_FILE).is_file() {
            return Err(NodeError::Invalid {
                message: format!(
                    "{} is not a node destination (no {NODE_FILE}); {CREATE}",
                    root.display()
                ),
            });
        }
        Ok(())
    }

    /// Opens and locks the node destination at `root` ([`NodeDest::check_is_node`] first).
    pub fn open(root: &Path) -> Result<Self, NodeError> {
        Self::check_is_node(root)?;
        let file = root.join(NODE_FILE);
        let lock = dir_lock::lock_exclusive(root)?;
        let meta = Self::read_meta(root)?;
        let text = fs::read_to_string(&file).map_err(|e| io("read", &file, e))?;
        let per_partition_checkpoints = text
            .lines()
            .any(|l| l.trim() == format!("format={NODE_FORMAT_PER_PARTITION_CHECKPOINTS}"));
        Ok(NodeDest {
            root: root.to_path_buf(),
            meta,
            per_partition_checkpoints,
            _lock: lock,
        })
    }

    /// Whether the destination is in the older layout ([`NODE_FORMAT_PER_PARTITION_CHECKPOINTS`]):
    /// its partitions' offsets are read from per-partition files until
    /// [`NodeDest::finish_migration`].
    pub fn has_per_partition_checkpoints(&self) -> bool {
        self.per_partition_checkpoints
    }

    /// Ends the migration from the older layout, once every partition's offsets are in the
    /// log dir's checkpoint files (fsynced): removes the per-partition checkpoint files of
    /// every partition directory, then writes `node.properties` with [`NODE_FORMAT`]. A crash
    /// part-way leaves the older format, and the next open does it again.
    pub fn finish_migration(&mut self) -> Result<(), NodeError> {
        if !self.per_partition_checkpoints {
            return Ok(());
        }
        let log_dir = self.log_dir();
        for entry in fs::read_dir(&log_dir).map_err(|e| io("list", &log_dir, e))? {
            let dir = entry.map_err(|e| io("list", &log_dir, e))?.path();
            if !dir.is_dir() {
                continue;
            }
            for kind in CheckpointKind::ALL {
                let path = dir.join(kind.file_name());
                match fs::remove_file(&path) {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => return Err(io("delete", &path, e)),
                }
            }
        }
        self.save()?;
        self.per_partition_checkpoints = false;
        Ok(())
    }

    /// A shared hold on `root`'s `.lock` for a reader (`kmirror status`): a writer cannot
    /// start while it is held. `Ok(None)` when there is no `.lock` (nothing was ever opened
    /// there: nothing to hold, and nothing is created); [`NodeError::Busy`] while a process
    /// holds the directory.
    /// [`NodeDest::check_is_node`] first.
    pub fn read_lock(root: &Path) -> Result<Option<File>, NodeError> {
        Self::check_is_node(root)?;
        Ok(dir_lock::lock_shared(root)?)
    }

    /// Checks, reading only, that every directory `node.properties` of `root` names is there:
    /// the log dir, each partition's `<topic>-<partition>/` and each `__mirror_state-<k>/`.
    /// Opening creates a missing `__mirror_state` partition (a new destination's), so a reader
    /// that must change nothing (`kmirror status`) checks this first.
    pub fn check_complete(root: &Path) -> Result<NodeMeta, NodeError> {
        let meta = Self::read_meta(root)?;
        let log_dir = root.join(LOG_DIR);
        let missing = |dir: &Path, what: String| NodeError::Invalid {
            message: format!(
                "{} is missing: {what} has lost its log directory (restore it from a backup); \
                 nothing was changed",
                dir.display()
            ),
        };
        if !log_dir.is_dir() {
            return Err(missing(&log_dir, "the node destination".to_owned()));
        }
        for (name, topic) in &meta.topics {
            for p in 0..topic.partitions {
                let tp = TopicPartition::new(name, p).map_err(|e| NodeError::Invalid {
                    message: e.to_string(),
                })?;
                let dir = log_dir.join(tp.dir_name());
                if !dir.is_dir() {
                    return Err(missing(&dir, format!("partition {p} of {name}")));
                }
            }
        }
        for k in 0..meta.mirror_state_partitions {
            let dir = log_dir.join(format!("{MIRROR_STATE_TOPIC}-{k}"));
            if !dir.is_dir() {
                return Err(missing(&dir, format!("__mirror_state partition {k}")));
            }
        }
        Ok(meta)
    }

    /// Reads `node.properties` of `root` without locking (for a status while another process
    /// holds the directory).
    pub fn read_meta(root: &Path) -> Result<NodeMeta, NodeError> {
        let file = root.join(NODE_FILE);
        let bytes = fs::read(&file).map_err(|e| io("read", &file, e))?;
        let text = String::from_utf8(bytes).map_err(|_| NodeError::BadFile {
            file: file.clone(),
            line: 0,
            reason: "the file is not UTF-8 text".to_owned(),
        })?;
        NodeMeta::decode(&text, &file)
    }

    /// The directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The log dir (`<dest>/data`).
    pub fn log_dir(&self) -> PathBuf {
        self.root.join(LOG_DIR)
    }

    /// The log dir of follower broker `id` (see [`NodeMeta::follower_ids`]).
    pub fn replica_log_dir(&self, id: i32) -> PathBuf {
        self.root.join(REPLICAS_DIR).join(format!("broker-{id}"))
    }

    /// The metadata.
    pub fn meta(&self) -> &NodeMeta {
        &self.meta
    }

    /// The config every log of the node is opened with.
    pub fn file_log_config(&self) -> FileLogConfig {
        let mut c = FileLogConfig::default();
        if let Some(b) = self.meta.segment_bytes {
            c.segment_bytes = b;
        }
        c
    }

    /// Replaces the metadata and writes it atomically (checked first: what is written reads
    /// back).
    pub fn set_meta(&mut self, meta: NodeMeta) -> Result<(), NodeError> {
        NodeMeta::decode(&meta.encode(), &self.root.join(NODE_FILE))?;
        let old = std::mem::replace(&mut self.meta, meta);
        if let Err(e) = self.save() {
            self.meta = old;
            return Err(e);
        }
        Ok(())
    }

    /// Bumps the leader epoch of partition `partition` of topic `topic` in memory only, to one
    /// more than it was and at least `at_least`, and returns it; the caller writes it with
    /// [`NodeDest::save`] before anything depends on it being on disk (a group commit's
    /// bumps). In place: a round bumping thousands of partitions costs no copy of the metadata.
    pub fn stage_leader_epoch(
        &mut self,
        topic: &str,
        partition: PartitionIndex,
        at_least: LeaderEpoch,
    ) -> LeaderEpoch {
        let entry = self
            .meta
            .partitions
            .entry((topic.to_owned(), partition))
            .or_default();
        entry.leader_epoch = entry.leader_epoch.saturating_add(1).max(at_least);
        entry.leader_epoch
    }

    /// Adds (or grows) topic `name` with `partitions` partitions and `mirror.name`: the
    /// partition directories are created and synced, then the metadata is written.
    pub fn add_topic(
        &mut self,
        name: &str,
        topic_id: TopicId,
        partitions: PartitionIndex,
        mirror_name: Option<String>,
    ) -> Result<(), NodeError> {
        let mut meta = self.meta.clone();
        self.add_topic_to(&mut meta, name, topic_id, partitions, mirror_name)?;
        let log_dir = self.log_dir();
        segment::sync_dir(&log_dir).map_err(|source| NodeError::Log {
            dir: log_dir,
            source: Box::new(source),
        })?;
        self.set_meta(meta)
    }

    /// Adds (or grows) topic `name` with `partitions` partitions and `mirror.name` to `meta`
    /// (checked as `node.properties` would be) and creates the partition directories, not
    /// synced: the caller makes them durable before it writes `meta` ([`NodeDest::set_meta`]).
    pub fn add_topic_to(
        &self,
        meta: &mut NodeMeta,
        name: &str,
        topic_id: TopicId,
        partitions: PartitionIndex,
        mirror_name: Option<String>,
    ) -> Result<(), NodeError> {
        check_topic(name).map_err(|message| NodeError::Invalid { message })?;
        let mut next = meta.clone();
        next.topics.insert(
            name.to_owned(),
            NodeTopic {
                topic_id,
                partitions,
                mirror_name,
            },
        );
        for p in 0..partitions {
            next.partitions.entry((name.to_owned(), p)).or_default();
        }
        NodeMeta::decode(&next.encode(), &self.root.join(NODE_FILE))?;
        for p in 0..partitions {
            let dir = self.log_dir().join(format!("{name}-{p}"));
            fs::create_dir_all(&dir).map_err(|e| io("create", &dir, e))?;
        }
        *meta = next;
        Ok(())
    }

    /// Writes the metadata in memory to `node.properties`, atomically.
    pub fn save(&self) -> Result<(), NodeError> {
        segment::write_atomically(&self.root, NODE_FILE, self.meta.encode().as_bytes()).map_err(
            |source| NodeError::Log {
                dir: self.root.join(NODE_FILE),
                source: Box::new(source),
            },
        )
    }
}

fn single_partition(root: &Path) -> NodeError {
    NodeError::SinglePartition {
        dir: root.to_path_buf(),
    }
}

fn io(action: &'static str, path: &Path, source: std::io::Error) -> NodeError {
    NodeError::Io {
        action,
        path: path.to_path_buf(),
        source,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta() -> NodeMeta {
        let mut m = NodeMeta::new(Some("127.0.0.1:9092".into()), 4);
        m.mirrors.insert(MirrorName::new("east").unwrap());
        m.topics.insert(
            "pay.eu".into(),
            NodeTopic {
                topic_id: TopicId::from_u64(3),
                partitions: 2,
                mirror_name: Some("east.removed".into()),
            },
        );
        m.partitions.insert(
            ("pay.eu".into(), 0),
            NodePartition {
                leader_epoch: 7,
                writable: true,
            },
        );
        m.partitions
            .insert(("pay.eu".into(), 1), NodePartition::default());
        m
    }

    #[test]
    fn meta_round_trips() {
        let m = meta();
        let text = m.encode();
        assert_eq!(NodeMeta::decode(&text, Path::new("x")).unwrap(), m);
    }

    #[test]
    fn meta_refuses_unknown_keys_and_unknown_mirrors() {
        let text = meta().encode();
        let e = NodeMeta::decode(&format!("{text}colour=red\n"), Path::new("x")).unwrap_err();
        assert!(e.to_string().contains("unknown key"), "{e}");
        let e = NodeMeta::decode(&text.replace("mirrors=east", "mirrors="), Path::new("x"))
            .unwrap_err();
        assert!(e.to_string().contains("not in mirrors="), "{e}");
        let e = NodeMeta::decode("broker.id=0\n", Path::new("x")).unwrap_err();
        assert!(e.to_string().contains("not a node destination"), "{e}");
    }

    #[test]
    fn a_single_partition_directory_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join(SINGLE_PARTITION_FILE), "topic=orders\n").unwrap();
        let e = NodeDest::open(dir.path()).unwrap_err();
        let text = e.to_string();
        assert!(text.contains("single-partition"), "{text}");
        assert!(text.contains("kmirror convert --from DIR"), "{text}");
        let e = NodeDest::create(dir.path(), meta()).unwrap_err();
        assert!(matches!(e, NodeError::SinglePartition { .. }), "{e}");
    }

    #[test]
    fn create_then_open_and_lock() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("west");
        let mut dest = NodeDest::create(&root, NodeMeta::new(None, 2)).unwrap();
        dest.add_topic("orders", TopicId::from_u64(1), 3, Some("east".into()))
            .unwrap_err(); // mirror east not created
        let mut m = dest.meta().clone();
        m.mirrors.insert(MirrorName::new("east").unwrap());
        dest.set_meta(m).unwrap();
        dest.add_topic("orders", TopicId::from_u64(1), 3, Some("east".into()))
            .unwrap();
        assert!(root.join("data/orders-2").is_dir());
        assert!(matches!(NodeDest::open(&root), Err(NodeError::Busy { .. })));
        drop(dest);
        let dest = NodeDest::open(&root).unwrap();
        assert_eq!(dest.meta().topics["orders"].partitions, 3);
        assert_eq!(dest.meta().partitions.len(), 3);
    }
}
