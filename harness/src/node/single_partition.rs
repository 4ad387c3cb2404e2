//! The single-partition cluster directory, the destination format before the node, as
//! [`convert`](super::convert) reads it: its three small files parsed, its logs located. Nothing
//! here writes to it.
//!
//! ```text
//! <cluster>/
//!   cluster.properties     cluster.name, topic, topic.id, mirror.name, mirrors, source.dir,
//!                          segment.bytes (key=value lines; `#` comments)
//!   controller-state       version=0, leader, leader.epoch, replicas, isr
//!   produce-gate           writable=true or writable=false
//!   broker-<id>/<topic>-0/ replica <id> of partition 0: a Kafka log directory
//!   broker-<leader>/__mirror_state-0/
//!                          the cluster's __mirror_state log
//! ```
//!
//! Unknown or repeated keys are refused, as the format's own reader refused them, so a damaged
//! file is named rather than half read.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

use kmirror_kernel::desired::DesiredState;
use kmirror_kernel::types::{BrokerId, LeaderEpoch, MirrorName, TopicId};

use crate::topic_partition::{check_topic, parse_topic_id};

use super::NodeError;

/// The topic config file of a single-partition cluster directory.
pub const CONFIG_FILE: &str = "cluster.properties";
/// The controller's state file.
pub const CONTROLLER_STATE_FILE: &str = "controller-state";
/// The leader's write permission file.
pub const PRODUCE_GATE_FILE: &str = "produce-gate";

/// A single-partition cluster directory's files, read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SinglePartitionDir {
    /// The directory.
    pub root: PathBuf,
    /// The topic (its partition 0 is the directory's one partition).
    pub topic: String,
    /// The topic id.
    pub topic_id: TopicId,
    /// The raw `mirror.name` (`None`: absent or empty).
    pub mirror_name: Option<String>,
    /// The topic's desired state `mirror.name` encodes.
    pub desired: DesiredState,
    /// The cluster mirrors created on the cluster.
    pub mirrors: BTreeSet<MirrorName>,
    /// `segment.bytes` of its logs, if set.
    pub segment_bytes: Option<u64>,
    /// The leader broker.
    pub leader: BrokerId,
    /// The partition's leader epoch.
    pub leader_epoch: LeaderEpoch,
    /// The number of replicas.
    pub replicas: u32,
    /// The produce gate.
    pub writable: bool,
}

impl SinglePartitionDir {
    /// Whether `root` looks like a single-partition cluster directory (has `cluster.properties`).
    pub fn is_single_partition(root: &Path) -> bool {
        root.join(CONFIG_FILE).is_file()
    }

    /// Reads the directory's three files.
    pub fn read(root: &Path) -> Result<Self, NodeError> {
        if !Self::is_single_partition(root) {
            return Err(NodeError::Invalid {
                message: format!(
                    "{} is not a single-partition cluster directory ({CONFIG_FILE} is missing)",
                    root.display()
                ),
            });
        }
        let config_path = root.join(CONFIG_FILE);
        let mut config = Properties::read(&config_path)?;
        config.optional("cluster.name");
        config.optional("source.dir");
        let (topic_line, topic) = config.required("topic")?;
        check_topic(&topic).map_err(|r| config.bad(topic_line, r))?;
        let (id_line, id) = config.required("topic.id")?;
        let topic_id = parse_topic_id(&id).map_err(|r| config.bad(id_line, r))?;
        let mut mirrors = BTreeSet::new();
        if let Some((line, list)) = config.optional("mirrors") {
            for m in list.split(',').filter(|m| !m.is_empty()) {
                let m =
                    MirrorName::new(m).map_err(|e| config.bad(line, format!("mirrors: {e}")))?;
                mirrors.insert(m);
            }
        }
        let mirror_name = config.optional("mirror.name");
        let desired = DesiredState::parse(mirror_name.as_ref().map(|(_, v)| v.as_str()))
            .map_err(|e| config.bad(mirror_name.as_ref().map_or(0, |(l, _)| *l), e.to_string()))?;
        if let Some(m) = desired.mirror() {
            if !mirrors.contains(m) {
                let line = mirror_name.as_ref().map_or(0, |(l, _)| *l);
                return Err(config.bad(line, format!("mirror.name names {m}, not in mirrors")));
            }
        }
        let segment_bytes = match config.optional("segment.bytes") {
            None => None,
            Some((line, v)) => Some(v.parse::<u64>().ok().filter(|b| *b >= 1024).ok_or_else(
                || config.bad(line, format!("segment.bytes={v:?} is not a size >= 1024")),
            )?),
        };
        config.finish()?;

        let mut controller = Properties::read(&root.join(CONTROLLER_STATE_FILE))?;
        let (line, version) = controller.required("version")?;
        if version != "0" {
            return Err(controller.bad(line, format!("version {version:?} is not 0")));
        }
        let leader = controller.number("leader")?;
        let leader_epoch = controller.number("leader.epoch")?;
        let (line, replicas) = controller.required("replicas")?;
        let replicas: BTreeSet<&str> = replicas.split(',').collect();
        if !replicas.contains(leader.to_string().as_str()) {
            return Err(controller.bad(line, format!("the leader {leader} is not a replica")));
        }
        controller.required("isr")?;
        controller.finish()?;

        let gate_path = root.join(PRODUCE_GATE_FILE);
        let writable = match read_text(&gate_path)?.as_str() {
            "writable=true\n" => true,
            "writable=false\n" => false,
            other => {
                return Err(NodeError::BadFile {
                    file: gate_path,
                    line: 1,
                    reason: format!("expected writable=true or writable=false, found {other:?}"),
                })
            }
        };
        Ok(SinglePartitionDir {
            root: root.to_path_buf(),
            topic,
            topic_id,
            mirror_name: mirror_name.map(|(_, v)| v).filter(|v| !v.is_empty()),
            desired,
            mirrors,
            segment_bytes,
            leader,
            leader_epoch,
            replicas: replicas.len() as u32,
            writable,
        })
    }

    /// The leader's log directory of partition 0.
    pub fn leader_log_dir(&self) -> PathBuf {
        self.broker_dir().join(format!("{}-0", self.topic))
    }

    /// The leader's `__mirror_state` log directory.
    pub fn mirror_state_dir(&self) -> PathBuf {
        self.broker_dir()
            .join(format!("{}-0", crate::mirror_state_log::MIRROR_STATE_TOPIC))
    }

    fn broker_dir(&self) -> PathBuf {
        self.root.join(format!("broker-{}", self.leader))
    }
}

/// `key=value` lines with their line numbers.
struct Properties {
    file: PathBuf,
    entries: BTreeMap<String, (usize, String)>,
}

impl Properties {
    fn read(file: &Path) -> Result<Self, NodeError> {
        let text = read_text(file)?;
        let mut props = Properties {
            file: file.to_path_buf(),
            entries: BTreeMap::new(),
        };
        for (i, line) in text.lines().enumerate() {
            if line.trim().is_empty() || line.starts_with('#') {
                continue;
            }
            let (key, value) = line
                .split_once('=')
                .ok_or_else(|| props.bad(i + 1, format!("expected key=value, found {line:?}")))?;
            if props
                .entries
                .insert(key.to_owned(), (i + 1, value.to_owned()))
                .is_some()
            {
                return Err(props.bad(i + 1, format!("{key} is set twice")));
            }
        }
        Ok(props)
    }

    fn bad(&self, line: usize, reason: String) -> NodeError {
        NodeError::BadFile {
            file: self.file.clone(),
            line,
            reason,
        }
    }

    fn optional(&mut self, key: &str) -> Option<(usize, String)> {
        self.entries.remove(key)
    }

    fn required(&mut self, key: &str) -> Result<(usize, String), NodeError> {
        self.optional(key)
            .ok_or_else(|| self.bad(0, format!("the required key {key} is missing")))
    }

    fn number(&mut self, key: &str) -> Result<i32, NodeError> {
        let (line, v) = self.required(key)?;
        v.parse::<i32>()
            .ok()
            .filter(|n| *n >= 0)
            .ok_or_else(|| self.bad(line, format!("{key}={v:?} is not a number >= 0")))
    }

    fn finish(self) -> Result<(), NodeError> {
        match self.entries.iter().next() {
            None => Ok(()),
            Some((key, (line, _))) => Err(self.bad(*line, format!("unknown key {key:?}"))),
        }
    }
}

fn read_text(file: &Path) -> Result<String, NodeError> {
    fs::read_to_string(file).map_err(|source| NodeError::Io {
        action: "read",
        path: file.to_path_buf(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir_with(config: &str, controller: &str, gate: &str) -> tempfile::TempDir {
        let tmp = tempfile::tempdir().unwrap();
        fs::write(tmp.path().join(CONFIG_FILE), config).unwrap();
        fs::write(tmp.path().join(CONTROLLER_STATE_FILE), controller).unwrap();
        fs::write(tmp.path().join(PRODUCE_GATE_FILE), gate).unwrap();
        tmp
    }

    const CONFIG: &str = "# comment\ncluster.name=west\ntopic=orders\n\
        topic.id=0123456789abcdef0123456789abcdef\nmirror.name=east.removed\nmirrors=east\n\
        source.dir=../east\nsegment.bytes=1024\n";
    const CONTROLLER: &str = "version=0\nleader=1\nleader.epoch=4\nreplicas=0,1,2\nisr=1\n";

    #[test]
    fn reads_the_three_files() {
        let tmp = dir_with(CONFIG, CONTROLLER, "writable=true\n");
        let d = SinglePartitionDir::read(tmp.path()).unwrap();
        assert_eq!(d.topic, "orders");
        assert_eq!(d.mirror_name.as_deref(), Some("east.removed"));
        assert!(matches!(d.desired, DesiredState::Stop(_)));
        assert_eq!(d.segment_bytes, Some(1024));
        assert_eq!((d.leader, d.leader_epoch, d.replicas), (1, 4, 3));
        assert!(d.writable);
        assert_eq!(d.leader_log_dir(), tmp.path().join("broker-1/orders-0"));
        assert_eq!(
            d.mirror_state_dir(),
            tmp.path().join("broker-1/__mirror_state-0")
        );
    }

    #[test]
    fn a_damaged_file_is_named_with_its_line() {
        let cases = [
            (
                CONFIG.replace("mirrors=east", "mirrors=west"),
                CONTROLLER.to_owned(),
                "writable=true\n",
                "cluster.properties:5",
            ),
            (
                format!("{CONFIG}colour=blue\n"),
                CONTROLLER.to_owned(),
                "writable=true\n",
                "unknown key \"colour\"",
            ),
            (
                CONFIG.to_owned(),
                CONTROLLER.replace("leader=1", "leader=7"),
                "writable=true\n",
                "the leader 7 is not a replica",
            ),
            (
                CONFIG.to_owned(),
                CONTROLLER.replace("version=0", "version=1"),
                "writable=true\n",
                "controller-state:1",
            ),
            (
                CONFIG.to_owned(),
                CONTROLLER.to_owned(),
                "writable=maybe\n",
                "produce-gate:1",
            ),
        ];
        for (config, controller, gate, expected) in cases {
            let tmp = dir_with(&config, &controller, gate);
            let err = SinglePartitionDir::read(tmp.path())
                .unwrap_err()
                .to_string();
            assert!(err.contains(expected), "{expected}: {err}");
        }
    }
}
