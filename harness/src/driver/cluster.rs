//! A **cluster directory**: one local "cluster" hosting one topic partition, as the harness
//! keeps it on disk. Both ends of a mirror are cluster directories, so a destination that failed
//! over can serve as the source of a failback.
//!
//! # Layout
//!
//! ```text
//! <cluster>/
//!   cluster.properties          the topic's config, mirror.name included (below)
//!   controller-state            leader, leader epoch, replicas, ISR of the partition (below)
//!   produce-gate                the leader's write permission, set by the kernel's SetWritable
//!   .lock                       held (flock) by the kmirror process using the directory
//!   status.json                 the last status a following `kmirror mirror` wrote (shown by
//!                               `kmirror status` while that process holds the lock)
//!   broker-<id>/<topic>-0/      replica <id> of the partition: a FileLog directory
//!   broker-<leader>/__mirror_state-0/
//!                               the cluster's __mirror_state log (see MirrorStateLog)
//! ```
//!
//! The partition is always partition 0 of a one-partition topic. A cluster is created in
//! `.<name>.creating` beside its final path and renamed into place, so it exists whole or not
//! at all.
//!
//! # `cluster.properties`
//!
//! One `key=value` per line (no spaces around `=`); blank lines and lines starting with `#` are
//! ignored; unknown or repeated keys are errors (to catch typos):
//!
//! | key | meaning |
//! |---|---|
//! | `cluster.name` | this cluster's name (a valid mirror name: other clusters mirroring from it name their mirror after it by default) |
//! | `topic` | the topic name (Kafka's rules, not `__mirror_state`) |
//! | `topic.id` | the topic id, 32 hex digits (the same on both ends of a mirror) |
//! | `mirror.name` | the topic's desired state, Kafka's topic config: absent or empty = not mirrored, `<m>` = mirror from mirror `<m>`, `<m>.removed` = stop (fail over), `<m>.paused` = pause |
//! | `mirrors` | comma-separated cluster mirrors created on this cluster; `mirror.name` must name one of them |
//! | `source.dir` | the source cluster directory of the mirror, remembered by `kmirror mirror` / `start` |
//! | `segment.bytes` | segment size of every log of the cluster (default 1 GiB) |
//!
//! # `controller-state`
//!
//! The same `key=value` syntax, written atomically (temporary file, fsync, rename, directory
//! fsync) by the controller (here: the driver executing `BumpLeaderEpoch`, and the producer's
//! `bump-epoch`):
//!
//! ```text
//! version=0
//! leader=0
//! leader.epoch=3
//! replicas=0,1,2
//! isr=0,1,2
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::fs::{self, File};
use std::path::{Path, PathBuf};

use im::OrdSet;
use kmirror_kernel::controller::{TopicCatalogue, TopicInfo};
use kmirror_kernel::desired::DesiredState;
use kmirror_kernel::records::MirrorPartitionStateValue;
use kmirror_kernel::state::{MirrorState, TransitionTable};
use kmirror_kernel::types::{BrokerId, LeaderEpoch, MirrorName, MirrorPartition, TopicId};

use super::DriverError;
use crate::file_log::{FileLog, FileLogConfig, TopicPartition};
use crate::mirror_state_log::MirrorStateLog;
use crate::recovery::RecoveryReport;
use crate::replicas;
pub use crate::replicas::{Follower, RoundReport};
use crate::segment;
use crate::topic_partition::{check_topic, parse_topic_id};

/// File name of the topic config.
pub const CONFIG_FILE: &str = "cluster.properties";
/// File name of the controller state.
pub const CONTROLLER_STATE_FILE: &str = "controller-state";
/// File name of the produce gate.
pub const PRODUCE_GATE_FILE: &str = "produce-gate";
/// The partition index every cluster directory hosts.
pub const PARTITION: i32 = 0;
/// The largest replica count a cluster directory may have.
pub const MAX_REPLICAS: u32 = 16;

/// The topic config of a cluster directory (`cluster.properties`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterConfig {
    /// This cluster's name.
    pub name: MirrorName,
    /// The topic.
    pub topic: String,
    /// The topic id.
    pub topic_id: TopicId,
    /// The raw `mirror.name` value (`None`: absent).
    pub mirror_name: Option<String>,
    /// The cluster mirrors created on this cluster.
    pub mirrors: BTreeSet<MirrorName>,
    /// The source cluster directory of the mirror, if one was given.
    pub source_dir: Option<PathBuf>,
    /// Segment size of the cluster's logs.
    pub segment_bytes: Option<u64>,
}

impl ClusterConfig {
    /// A config for a new, unmirrored topic.
    pub fn new(name: MirrorName, topic: impl Into<String>, topic_id: TopicId) -> Self {
        ClusterConfig {
            name,
            topic: topic.into(),
            topic_id,
            mirror_name: None,
            mirrors: BTreeSet::new(),
            source_dir: None,
            segment_bytes: None,
        }
    }

    /// The file's text.
    pub fn encode(&self) -> String {
        let mut out = String::from(
            "# kmirror cluster directory: topic config (see `kmirror produce --help`)\n",
        );
        out.push_str(&format!("cluster.name={}\n", self.name));
        out.push_str(&format!("topic={}\n", self.topic));
        out.push_str(&format!("topic.id={}\n", self.topic_id));
        if let Some(m) = &self.mirror_name {
            out.push_str(&format!("mirror.name={m}\n"));
        }
        if !self.mirrors.is_empty() {
            let names: Vec<&str> = self.mirrors.iter().map(MirrorName::as_str).collect();
            out.push_str(&format!("mirrors={}\n", names.join(",")));
        }
        if let Some(dir) = &self.source_dir {
            out.push_str(&format!("source.dir={}\n", dir.display()));
        }
        if let Some(b) = self.segment_bytes {
            out.push_str(&format!("segment.bytes={b}\n"));
        }
        out
    }

    /// Parses the file's text (`file` names it in errors).
    pub fn decode(text: &str, file: &Path) -> Result<Self, DriverError> {
        let mut props = Properties::parse(text, file)?;
        let name_line = props.line_of("cluster.name");
        let name = props.required("cluster.name")?;
        let name = MirrorName::new(name).map_err(|e| bad(file, name_line, e.to_string()))?;
        let topic_line = props.line_of("topic");
        let topic = props.required("topic")?;
        check_topic(&topic).map_err(|reason| bad(file, topic_line, reason))?;
        let id_line = props.line_of("topic.id");
        let id = props.required("topic.id")?;
        let topic_id = parse_topic_id(&id).map_err(|reason| bad(file, id_line, reason))?;
        let mirror_name = props.optional("mirror.name");
        let mut mirrors = BTreeSet::new();
        let mirrors_line = props.line_of("mirrors");
        if let Some(list) = props.optional("mirrors") {
            for m in list.split(',').filter(|m| !m.is_empty()) {
                let m = MirrorName::new(m)
                    .map_err(|e| bad(file, mirrors_line, format!("mirrors: {e}")))?;
                mirrors.insert(m);
            }
        }
        let source_dir = props.optional("source.dir").map(PathBuf::from);
        let seg_line = props.line_of("segment.bytes");
        let segment_bytes = match props.optional("segment.bytes") {
            None => None,
            Some(v) => Some(
                v.parse::<u64>()
                    .ok()
                    .filter(|b| *b >= 1024)
                    .ok_or_else(|| {
                        bad(
                            file,
                            seg_line,
                            format!("segment.bytes={v:?} is not a number of bytes >= 1024"),
                        )
                    })?,
            ),
        };
        props.finish()?;
        Ok(ClusterConfig {
            name,
            topic,
            topic_id,
            mirror_name,
            mirrors,
            source_dir,
            segment_bytes,
        })
    }

    /// The desired state `mirror.name` encodes, refusing a value the kernel does not parse and
    /// one naming a mirror this cluster does not have (a misspelt suffix, most likely).
    pub fn desired_state(&self, file: &Path) -> Result<DesiredState, DriverError> {
        let value = self.mirror_name.as_deref();
        let desired =
            DesiredState::parse(value).map_err(|source| DriverError::InvalidMirrorName {
                file: file.to_path_buf(),
                value: value.unwrap_or_default().to_owned(),
                source,
            })?;
        if let Some(m) = desired.mirror() {
            if !self.mirrors.contains(m) {
                return Err(DriverError::UnknownMirror {
                    file: file.to_path_buf(),
                    value: value.unwrap_or_default().to_owned(),
                    mirror: m.to_string(),
                    known: self.known_mirrors(),
                });
            }
        }
        Ok(desired)
    }

    /// The known mirrors, comma-separated (or `none`).
    pub fn known_mirrors(&self) -> String {
        if self.mirrors.is_empty() {
            "none".to_owned()
        } else {
            let names: Vec<&str> = self.mirrors.iter().map(MirrorName::as_str).collect();
            names.join(", ")
        }
    }

    /// The controller's catalogue: this topic (one partition) and the known mirrors.
    pub fn catalogue(&self) -> TopicCatalogue {
        let mut catalogue = TopicCatalogue::new().with_topic(
            self.topic.clone(),
            TopicInfo {
                topic_id: self.topic_id,
                partitions: 1,
                mirror_name: self.mirror_name.clone(),
            },
        );
        for m in &self.mirrors {
            catalogue.insert_mirror(m.clone());
        }
        catalogue
    }
}

/// The controller's state of the partition (`controller-state`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ControllerState {
    /// The leader broker.
    pub leader: BrokerId,
    /// The leader epoch.
    pub leader_epoch: LeaderEpoch,
    /// Every replica, ascending.
    pub replicas: Vec<BrokerId>,
    /// The in-sync replicas, ascending (the leader included).
    pub isr: Vec<BrokerId>,
}

impl ControllerState {
    /// A new partition with replicas `0..count`, leader 0, epoch 0, every replica in sync.
    pub fn new(count: u32) -> Self {
        let replicas: Vec<BrokerId> = (0..count as BrokerId).collect();
        ControllerState {
            leader: 0,
            leader_epoch: 0,
            isr: replicas.clone(),
            replicas,
        }
    }

    /// The file's text.
    pub fn encode(&self) -> String {
        let list = |v: &[BrokerId]| {
            v.iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(",")
        };
        format!(
            "version=0\nleader={}\nleader.epoch={}\nreplicas={}\nisr={}\n",
            self.leader,
            self.leader_epoch,
            list(&self.replicas),
            list(&self.isr)
        )
    }

    /// Parses and checks the file's text.
    pub fn decode(text: &str, file: &Path) -> Result<Self, DriverError> {
        let mut props = Properties::parse(text, file)?;
        let line = props.line_of("version");
        let version = props.required("version")?;
        if version != "0" {
            return Err(bad(file, line, format!("version {version:?} is not 0")));
        }
        let number = |props: &mut Properties, key: &str| -> Result<i32, DriverError> {
            let line = props.line_of(key);
            let v = props.required(key)?;
            v.parse::<i32>()
                .ok()
                .filter(|n| *n >= 0)
                .ok_or_else(|| bad(file, line, format!("{key}={v:?} is not a number >= 0")))
        };
        let leader = number(&mut props, "leader")?;
        let leader_epoch = number(&mut props, "leader.epoch")?;
        let list = |props: &mut Properties, key: &str| -> Result<Vec<BrokerId>, DriverError> {
            let line = props.line_of(key);
            let v = props.required(key)?;
            let mut ids = BTreeSet::new();
            for id in v.split(',') {
                let n = id
                    .parse::<BrokerId>()
                    .ok()
                    .filter(|n| (0..MAX_REPLICAS as BrokerId).contains(n))
                    .ok_or_else(|| {
                        bad(
                            file,
                            line,
                            format!("{key}: {id:?} is not a broker id in 0..{MAX_REPLICAS}"),
                        )
                    })?;
                if !ids.insert(n) {
                    return Err(bad(file, line, format!("{key}: broker {n} appears twice")));
                }
            }
            Ok(ids.into_iter().collect())
        };
        let replicas = list(&mut props, "replicas")?;
        let isr_line = props.line_of("isr");
        let isr = list(&mut props, "isr")?;
        props.finish()?;
        if !replicas.contains(&leader) {
            return Err(bad(
                file,
                0,
                format!("leader {leader} is not one of the replicas {replicas:?}"),
            ));
        }
        if !isr.contains(&leader) || isr.iter().any(|b| !replicas.contains(b)) {
            return Err(bad(
                file,
                isr_line,
                format!("the ISR {isr:?} must hold the leader {leader} and only replicas"),
            ));
        }
        Ok(ControllerState {
            leader,
            leader_epoch,
            replicas,
            isr,
        })
    }

    /// The replicas as the kernel's set.
    pub fn replica_set(&self) -> OrdSet<BrokerId> {
        self.replicas.iter().copied().collect()
    }

    /// The ISR as the kernel's set.
    pub fn isr_set(&self) -> OrdSet<BrokerId> {
        self.isr.iter().copied().collect()
    }
}

/// `key=value` lines with their line numbers.
struct Properties {
    file: PathBuf,
    entries: BTreeMap<String, (usize, String)>,
}

impl Properties {
    fn parse(text: &str, file: &Path) -> Result<Self, DriverError> {
        let mut entries = BTreeMap::new();
        for (i, line) in text.lines().enumerate() {
            let n = i + 1;
            if line.trim().is_empty() || line.starts_with('#') {
                continue;
            }
            let (key, value) = line
                .split_once('=')
                .ok_or_else(|| bad(file, n, format!("expected key=value, found {line:?}")))?;
            if key.is_empty() || key != key.trim() {
                return Err(bad(file, n, format!("invalid key {key:?}")));
            }
            if entries
                .insert(key.to_owned(), (n, value.to_owned()))
                .is_some()
            {
                return Err(bad(file, n, format!("{key} is set twice")));
            }
        }
        Ok(Properties {
            file: file.to_path_buf(),
            entries,
        })
    }

    fn line_of(&self, key: &str) -> usize {
        self.entries.get(key).map_or(0, |(n, _)| *n)
    }

    fn required(&mut self, key: &str) -> Result<String, DriverError> {
        self.entries
            .remove(key)
            .map(|(_, v)| v)
            .ok_or_else(|| bad(&self.file, 0, format!("the required key {key} is missing")))
    }

    fn optional(&mut self, key: &str) -> Option<String> {
        self.entries.remove(key).map(|(_, v)| v)
    }

    fn finish(self) -> Result<(), DriverError> {
        match self.entries.into_iter().next() {
            None => Ok(()),
            Some((key, (n, _))) => Err(bad(&self.file, n, format!("unknown key {key:?}"))),
        }
    }
}

fn bad(file: &Path, line: usize, reason: String) -> DriverError {
    DriverError::BadFile {
        file: file.to_path_buf(),
        line,
        reason,
    }
}

/// A cluster directory opened and locked: its config and controller state (the logs are opened
/// by [`Cluster`]).
#[derive(Debug)]
pub struct ClusterDir {
    root: PathBuf,
    config: ClusterConfig,
    controller: ControllerState,
    writable: bool,
    _lock: File,
}

impl ClusterDir {
    /// Creates a cluster directory at `root` (which must not exist, or be empty) with
    /// `replicas` replicas, every log empty, and locks it. The directory is built beside `root`
    /// (`.<name>.creating`) and renamed into place, so a crash leaves either no cluster or a
    /// complete one.
    pub fn create(root: &Path, config: ClusterConfig, replicas: u32) -> Result<Self, DriverError> {
        if !(1..=MAX_REPLICAS).contains(&replicas) {
            return Err(DriverError::Invalid(format!(
                "--replicas {replicas}: a partition has 1 to {MAX_REPLICAS} replicas"
            )));
        }
        check_topic(&config.topic).map_err(DriverError::Invalid)?;
        if root.exists() {
            let empty = fs::read_dir(root)
                .map_err(|e| io("read directory", root, e))?
                .next()
                .is_none();
            if !empty {
                return Err(DriverError::NotEmpty {
                    path: root.to_path_buf(),
                });
            }
        }
        let name = root.file_name().and_then(|n| n.to_str()).ok_or_else(|| {
            DriverError::Invalid(format!("{} has no directory name", root.display()))
        })?;
        let parent = match root.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        fs::create_dir_all(&parent).map_err(|e| io("create directory", &parent, e))?;
        let staging = parent.join(format!(".{name}.creating"));
        if staging.exists() {
            // A creation interrupted earlier: nothing in it was ever used.
            fs::remove_dir_all(&staging).map_err(|e| io("remove", &staging, e))?;
        }
        fs::create_dir(&staging).map_err(|e| io("create directory", &staging, e))?;
        let lock = crate::dir_lock::lock_exclusive(&staging)?;
        let controller = ControllerState::new(replicas);
        let file_config = file_log_config(&config);
        let tp = topic_partition(&config);
        for b in &controller.replicas {
            let dir = broker_dir(&staging, *b);
            let (log, _) = FileLog::open(&dir, tp.clone(), file_config).map_err(|source| {
                DriverError::Log {
                    dir: dir.join(tp.dir_name()),
                    source: Box::new(source),
                }
            })?;
            log.close().map_err(|source| DriverError::Log {
                dir: dir.join(tp.dir_name()),
                source: Box::new(source),
            })?;
        }
        MirrorStateLog::create(
            &broker_dir(&staging, controller.leader),
            TransitionTable::default(),
            file_config,
        )?
        .close()?;
        write_file(&staging, PRODUCE_GATE_FILE, "writable=false\n")?;
        write_file(&staging, CONTROLLER_STATE_FILE, &controller.encode())?;
        write_file(&staging, CONFIG_FILE, &config.encode())?;
        fs::rename(&staging, root).map_err(|e| io("rename into place", &staging, e))?;
        segment::sync_dir(&parent).map_err(|source| DriverError::Log {
            dir: parent.clone(),
            source: Box::new(source),
        })?;
        Ok(ClusterDir {
            root: root.to_path_buf(),
            config,
            controller,
            writable: false,
            _lock: lock,
        })
    }

    /// Opens and locks the cluster directory `root`, reading its config and controller state.
    pub fn open(root: &Path) -> Result<Self, DriverError> {
        if !root.is_dir() {
            return Err(DriverError::Missing {
                path: root.to_path_buf(),
                hint: "; create a cluster with `kmirror produce --dir DIR --topic NAME ...` or \
                       `kmirror mirror --source SRC --dest DIR`"
                    .to_owned(),
            });
        }
        let config_path = root.join(CONFIG_FILE);
        if !config_path.is_file() {
            return Err(DriverError::NotACluster {
                path: root.to_path_buf(),
                reason: format!("{CONFIG_FILE} is missing"),
            });
        }
        let lock = crate::dir_lock::lock_exclusive(root)?;
        let config = ClusterConfig::decode(&read_text(&config_path)?, &config_path)?;
        let controller_path = root.join(CONTROLLER_STATE_FILE);
        let controller = ControllerState::decode(&read_text(&controller_path)?, &controller_path)?;
        let gate_path = root.join(PRODUCE_GATE_FILE);
        let writable = match read_text(&gate_path)?.as_str() {
            "writable=true\n" => true,
            "writable=false\n" => false,
            other => {
                return Err(bad(
                    &gate_path,
                    1,
                    format!("expected writable=true or writable=false, found {other:?}"),
                ))
            }
        };
        Ok(ClusterDir {
            root: root.to_path_buf(),
            config,
            controller,
            writable,
            _lock: lock,
        })
    }

    /// The directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The topic config.
    pub fn config(&self) -> &ClusterConfig {
        &self.config
    }

    /// The path of `cluster.properties`.
    pub fn config_path(&self) -> PathBuf {
        self.root.join(CONFIG_FILE)
    }

    /// The controller state.
    pub fn controller(&self) -> &ControllerState {
        &self.controller
    }

    /// The desired state (see [`ClusterConfig::desired_state`]).
    pub fn desired_state(&self) -> Result<DesiredState, DriverError> {
        self.config.desired_state(&self.config_path())
    }

    /// The `__mirror_state` key of the partition under the mirror `mirror.name` names.
    pub fn mirror_key(&self) -> Option<MirrorPartition> {
        let desired = DesiredState::parse(self.config.mirror_name.as_deref()).ok()?;
        desired.mirror().map(|m| MirrorPartition {
            mirror: m.clone(),
            topic_id: self.config.topic_id,
            partition: PARTITION,
        })
    }

    /// The topic partition.
    pub fn topic_partition(&self) -> TopicPartition {
        topic_partition(&self.config)
    }

    /// The log config of the cluster's logs.
    pub fn file_log_config(&self) -> FileLogConfig {
        file_log_config(&self.config)
    }

    /// The log directory of broker `b` (holding its `<topic>-0`).
    pub fn broker_dir(&self, b: BrokerId) -> PathBuf {
        broker_dir(&self.root, b)
    }

    /// Whether the leader last allowed local producers (the kernel's `SetWritable`).
    pub fn writable(&self) -> bool {
        self.writable
    }

    /// Persists the leader's write permission.
    pub fn set_writable(&mut self, writable: bool) -> Result<(), DriverError> {
        write_file(
            &self.root,
            PRODUCE_GATE_FILE,
            if writable {
                "writable=true\n"
            } else {
                "writable=false\n"
            },
        )?;
        self.writable = writable;
        Ok(())
    }

    /// Rewrites `cluster.properties` with `config` (atomically).
    pub fn set_config(&mut self, config: ClusterConfig) -> Result<(), DriverError> {
        if let Some(dir) = &config.source_dir {
            let text = dir.to_str().unwrap_or("\n");
            if text.contains('\n') || text.contains('\r') {
                return Err(DriverError::Invalid(format!(
                    "source directory {} cannot be recorded in {CONFIG_FILE}: use a UTF-8 path \
                     without line breaks",
                    dir.display()
                )));
            }
        }
        write_file(&self.root, CONFIG_FILE, &config.encode())?;
        self.config = config;
        Ok(())
    }

    /// Re-reads `cluster.properties` (someone may have edited it); returns whether it changed.
    pub fn reload_config(&mut self) -> Result<bool, DriverError> {
        let path = self.config_path();
        let config = ClusterConfig::decode(&read_text(&path)?, &path)?;
        let changed = config != self.config;
        self.config = config;
        Ok(changed)
    }

    /// The controller gives the partition a new leader epoch of at least `at_least` (and above
    /// the current one), persisted before it is returned.
    pub fn bump_leader_epoch(&mut self, at_least: LeaderEpoch) -> Result<LeaderEpoch, DriverError> {
        let mut next = self.controller.clone();
        next.leader_epoch = next.leader_epoch.saturating_add(1).max(at_least);
        write_file(&self.root, CONTROLLER_STATE_FILE, &next.encode())?;
        self.controller = next;
        Ok(self.controller.leader_epoch)
    }

    /// Opens the log of replica `b`, which must exist.
    pub fn open_replica(&self, b: BrokerId) -> Result<(FileLog, RecoveryReport), DriverError> {
        let tp = self.topic_partition();
        let log_dir = self.broker_dir(b);
        let dir = log_dir.join(tp.dir_name());
        if !dir.is_dir() {
            return Err(DriverError::Missing {
                path: dir,
                hint: format!(
                    "; replica {b} of {} has lost its log directory (restore it, or recreate \
                     the cluster)",
                    self.root.display()
                ),
            });
        }
        FileLog::open(&log_dir, tp, self.file_log_config()).map_err(|source| DriverError::Log {
            dir,
            source: Box::new(source),
        })
    }

    /// Opens the cluster's `__mirror_state` log.
    pub fn open_mirror_state(&self) -> Result<MirrorStateLog, DriverError> {
        Ok(MirrorStateLog::open(
            &self.broker_dir(self.controller.leader),
            TransitionTable::default(),
            self.file_log_config(),
        )?)
    }
}

fn topic_partition(config: &ClusterConfig) -> TopicPartition {
    TopicPartition {
        topic: config.topic.clone(),
        partition: PARTITION,
    }
}

fn file_log_config(config: &ClusterConfig) -> FileLogConfig {
    let mut c = FileLogConfig::default();
    if let Some(b) = config.segment_bytes {
        c.segment_bytes = b;
    }
    c
}

fn broker_dir(root: &Path, b: BrokerId) -> PathBuf {
    root.join(format!("broker-{b}"))
}

fn io(action: &'static str, path: &Path, source: std::io::Error) -> DriverError {
    DriverError::Io {
        action,
        path: path.to_path_buf(),
        source,
    }
}

fn read_text(path: &Path) -> Result<String, DriverError> {
    let bytes = fs::read(path).map_err(|e| io("read", path, e))?;
    String::from_utf8(bytes).map_err(|_| bad(path, 0, "the file is not UTF-8 text".to_owned()))
}

fn write_file(root: &Path, name: &str, text: &str) -> Result<(), DriverError> {
    segment::write_atomically(root, name, text.as_bytes()).map_err(|source| DriverError::Log {
        dir: root.join(name),
        source: Box::new(source),
    })
}

/// A cluster directory with its logs open: the leader, the followers and `__mirror_state`.
#[derive(Debug)]
pub struct Cluster {
    /// The directory, config and controller state.
    pub dir: ClusterDir,
    /// The leader replica's log.
    pub leader: FileLog,
    /// The follower replicas (empty when opened leader-only).
    pub followers: Vec<Follower>,
    /// The `__mirror_state` log.
    pub state_log: MirrorStateLog,
    /// Recovery reports of logs that needed repair when opened.
    pub repaired: Vec<(PathBuf, RecoveryReport)>,
}

impl Cluster {
    /// Opens every log of the cluster directory `root` (locked while the value lives). Every
    /// file is read and checked before anything is returned.
    pub fn open(root: &Path) -> Result<Self, DriverError> {
        Self::open_dir(ClusterDir::open(root)?, true)
    }

    /// Opens the leader's log and `__mirror_state` only (enough to serve as a source).
    pub fn open_leader_only(root: &Path) -> Result<Self, DriverError> {
        Self::open_dir(ClusterDir::open(root)?, false)
    }

    /// Opens the logs of an already locked cluster directory.
    pub fn open_dir(dir: ClusterDir, with_followers: bool) -> Result<Self, DriverError> {
        // Refuse a bad mirror.name before touching any log.
        dir.desired_state()?;
        let mut repaired = Vec::new();
        let (leader, report) = dir.open_replica(dir.controller().leader)?;
        if !report.is_clean() && !report.created {
            repaired.push((leader.dir().to_path_buf(), report));
        }
        let mut followers = Vec::new();
        if with_followers {
            for &b in &dir.controller().replicas {
                if b == dir.controller().leader {
                    continue;
                }
                let (log, report) = dir.open_replica(b)?;
                if !report.is_clean() && !report.created {
                    repaired.push((log.dir().to_path_buf(), report));
                }
                followers.push(Follower::new(b, log));
            }
        }
        let state_log = dir.open_mirror_state()?;
        let report = state_log.recovery_report();
        if !report.is_clean() && !report.created {
            repaired.push((state_log.log().dir().to_path_buf(), report.clone()));
        }
        Ok(Cluster {
            dir,
            leader,
            followers,
            state_log,
            repaired,
        })
    }

    /// The persisted mirror state of the partition under the mirror `mirror.name` names.
    pub fn persisted_state(&self) -> Option<&MirrorPartitionStateValue> {
        let key = self.dir.mirror_key()?;
        self.state_log.coordinator().read_state(&key)
    }

    /// The persisted state, UNKNOWN when nothing is stored.
    pub fn mirror_state(&self) -> MirrorState {
        self.persisted_state()
            .map_or(MirrorState::Unknown, |v| v.state)
    }

    /// The leader's log was truncated: what followers had acknowledged may no longer be there,
    /// so the high watermark waits for their next valid fetch.
    pub fn leader_truncated(&mut self) {
        replicas::leader_truncated(&mut self.followers);
    }

    /// Whether every follower holds exactly the leader's log range and the high watermarks are
    /// at the leader's log end offset.
    pub fn in_sync(&self) -> bool {
        replicas::in_sync(&self.leader, &self.followers)
    }

    /// One replication round ([`replicas::replicate_round`]) with the controller state's ISR.
    pub fn replicate_round(&mut self, max_batches: usize) -> Result<RoundReport, DriverError> {
        let controller = self.dir.controller();
        let isr = |b: BrokerId| controller.isr.contains(&b);
        replicas::replicate_round(
            &mut self.leader,
            &mut self.followers,
            &isr,
            controller.replicas.len(),
            max_batches,
        )
        .map_err(DriverError::from)
    }

    /// Replicates until a round changes nothing, at most `max_rounds` rounds
    /// ([`replicas::replicate_until_in_sync`]).
    pub fn replicate_until_in_sync(
        &mut self,
        max_batches: usize,
        max_rounds: usize,
    ) -> Result<(), DriverError> {
        let controller = self.dir.controller();
        let isr = |b: BrokerId| controller.isr.contains(&b);
        replicas::replicate_until_in_sync(
            &mut self.leader,
            &mut self.followers,
            &isr,
            controller.replicas.len(),
            max_batches,
            max_rounds,
        )
        .map(|_| ())
        .map_err(DriverError::from)
    }

    /// Flushes and closes every log (persisting recovery points and high watermarks).
    pub fn close(self) -> Result<(), DriverError> {
        let close = |log: FileLog| {
            let dir = log.dir().to_path_buf();
            log.close().map_err(|source| DriverError::Log {
                dir,
                source: Box::new(source),
            })
        };
        close(self.leader)?;
        for f in self.followers {
            close(f.log)?;
        }
        self.state_log.close()?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kmirror_kernel::log::LogView;

    #[test]
    fn config_round_trips_and_refuses_typos() {
        let mut c = ClusterConfig::new(
            MirrorName::new("east").unwrap(),
            "orders",
            TopicId::from_u64(0xabc),
        );
        c.mirror_name = Some("west.removed".into());
        c.mirrors.insert(MirrorName::new("west").unwrap());
        c.source_dir = Some(PathBuf::from("/tmp/west"));
        let f = Path::new("cluster.properties");
        assert_eq!(ClusterConfig::decode(&c.encode(), f).unwrap(), c);
        let err = ClusterConfig::decode(&format!("{}mirror.nmae=x\n", c.encode()), f).unwrap_err();
        assert!(
            err.to_string().contains("unknown key \"mirror.nmae\""),
            "{err}"
        );
        assert!(matches!(
            c.desired_state(f),
            Ok(DesiredState::Stop(m)) if m.as_str() == "west"
        ));
        c.mirror_name = Some("west.stopped".into());
        let err = c.desired_state(f).unwrap_err();
        assert!(err.to_string().contains("west.stopped"), "{err}");
        c.mirror_name = Some("west.paused.removed".into());
        assert!(matches!(
            c.desired_state(f),
            Err(DriverError::InvalidMirrorName { .. })
        ));
    }

    #[test]
    fn controller_state_round_trips_and_is_checked() {
        let s = ControllerState::new(3);
        let f = Path::new("controller-state");
        assert_eq!(ControllerState::decode(&s.encode(), f).unwrap(), s);
        for bad in [
            "",
            "version=1\n",
            "version=0\nleader=0\nleader.epoch=-1\nreplicas=0\nisr=0\n",
            "version=0\nleader=3\nleader.epoch=0\nreplicas=0\nisr=0\n",
            "version=0\nleader=0\nleader.epoch=0\nreplicas=0,0\nisr=0\n",
            "version=0\nleader=0\nleader.epoch=0\nreplicas=0,1\nisr=1\n",
        ] {
            assert!(ControllerState::decode(bad, f).is_err(), "{bad:?}");
        }
    }

    /// A follower's fetch reads the fetched window only: a batch damaged on disk past it (below
    /// the recovery point, so opening trusted it) is not read, and the leader stays healthy,
    /// until a follower fetches that far. (Served from a read of the whole log, the first round
    /// read the damaged batch and failed the leader.)
    #[test]
    fn a_follower_fetch_reads_only_what_it_replicates() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("west");
        let config = ClusterConfig::new(
            MirrorName::new("west").unwrap(),
            "orders",
            TopicId::from_u64(7),
        );
        let dir = ClusterDir::create(&root, config, 2).unwrap();
        let mut cluster = Cluster::open_dir(dir, false).unwrap();
        let ops: Vec<crate::producer::ProduceOp> =
            (0..10).map(|_| "plain:1".parse().unwrap()).collect();
        crate::producer::produce(&mut cluster, &ops, 1_000).unwrap();
        let leader_dir = cluster.leader.dir().to_path_buf();
        cluster.close().unwrap();
        // Flip the last payload byte of the last batch.
        let segment = leader_dir.join(format!("{:020}.log", 0));
        let mut bytes = std::fs::read(&segment).unwrap();
        *bytes.last_mut().unwrap() ^= 0xff;
        std::fs::write(&segment, bytes).unwrap();

        let mut cluster = Cluster::open(&root).unwrap();
        cluster.replicate_round(2).unwrap();
        assert_eq!(cluster.followers[0].log.log_end_offset(), 2);
        assert!(cluster.leader.try_read(0, 0).is_ok(), "the leader failed");
        for _ in 0..3 {
            cluster.replicate_round(2).unwrap();
        }
        assert_eq!(cluster.followers[0].log.log_end_offset(), 8);
        // The follower reaching the damaged batch finds it, as a Kafka leader's read would.
        cluster.replicate_round(2).unwrap();
        assert!(cluster.leader.try_read(0, 0).is_err());
        assert_eq!(cluster.followers[0].log.log_end_offset(), 9);
    }

    #[test]
    fn topic_ids_are_hex() {
        let id = TopicId::from_u64(0x0102_0304);
        assert_eq!(parse_topic_id(&id.to_string()), Ok(id));
        assert!(parse_topic_id("xyz").is_err());
    }
}
