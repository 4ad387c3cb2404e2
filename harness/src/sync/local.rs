//! The local metadata directory: a destination's topic configs, consumer groups and ACLs,
//! kept as files beside its partition directories.
//!
//! # Layout
//!
//! ```text
//! <cluster>/metadata/
//!   topic-configs/<topic>.properties   the topic's config overrides
//!   consumer-offsets/<group>.json      one consumer group: members and committed offsets
//!   acls.json                          the cluster's ACL bindings
//! ```
//!
//! Every file is written atomically (temporary file, fsync, rename, directory fsync). A missing
//! directory or file is empty metadata.
//!
//! ## `topic-configs/<topic>.properties`
//!
//! One `key=value` per line (the value may contain `=`; no spaces around the first `=`); blank
//! lines and lines starting with `#` are ignored. These are the topic's overrides of the
//! cluster defaults, what `kafka-configs --describe` lists as `DYNAMIC_TOPIC_CONFIG`;
//! `mirror.name` is not here (it lives in `cluster.properties`).
//!
//! ```text
//! retention.ms=86400000
//! cleanup.policy=compact,delete
//! ```
//!
//! ## `consumer-offsets/<group>.json`
//!
//! The file name is the group id with every byte outside `[A-Za-z0-9_-]` written as `%XX`
//! (so `billing.v2` is `billing%2Ev2.json`); the `group` field is authoritative. `members` are
//! the ids of the group's active members (empty when nobody consumes): the sync never commits
//! for a destination group that has members.
//!
//! ```json
//! {"version": 0, "group": "billing", "members": ["consumer-1"],
//!  "offsets": [{"topic": "orders", "partition": 0, "offset": 40}]}
//! ```
//!
//! ## `acls.json`
//!
//! The bindings with Kafka's names, and on a destination the bindings the mirror created (the
//! only ones it will ever delete):
//!
//! ```json
//! {"version": 0,
//!  "bindings": [{"resource_type": "TOPIC", "resource_name": "orders", "pattern_type": "LITERAL",
//!                "principal": "User:app-1", "host": "*", "operation": "READ",
//!                "permission_type": "ALLOW"}],
//!  "created_by_mirror": []}
//! ```

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use kmirror_kernel::sync::acl::RawAclBinding;
use kmirror_kernel::sync::group_offsets::TopicPartition;
use kmirror_kernel::types::{Offset, PartitionIndex};
use serde::{Deserialize, Serialize};

use super::error::SyncError;
use super::{GroupRecord, Read};

/// The metadata directory's name inside a destination directory.
pub const METADATA_DIR: &str = "metadata";
/// Topic configs, inside [`METADATA_DIR`].
pub const TOPIC_CONFIGS_DIR: &str = "topic-configs";
/// Consumer groups, inside [`METADATA_DIR`].
pub const CONSUMER_OFFSETS_DIR: &str = "consumer-offsets";
/// ACL bindings, inside [`METADATA_DIR`].
pub const ACLS_FILE: &str = "acls.json";

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct GroupFile {
    version: u32,
    group: String,
    #[serde(default)]
    members: Vec<String>,
    #[serde(default)]
    offsets: Vec<OffsetEntry>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct OffsetEntry {
    topic: String,
    partition: PartitionIndex,
    offset: Offset,
}

/// The content of `acls.json`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AclsFile {
    /// Format version (0).
    pub version: u32,
    /// Every binding of the cluster.
    #[serde(default)]
    pub bindings: Vec<RawAclBinding>,
    /// The bindings a mirror created (destination only).
    #[serde(default)]
    pub created_by_mirror: Vec<RawAclBinding>,
}

/// The metadata directory of one destination.
#[derive(Clone, Debug)]
pub struct MetadataDir {
    root: PathBuf,
}

/// The file name of group `group`'s file.
pub fn group_file_name(group: &str) -> String {
    let mut out = String::new();
    for b in group.bytes() {
        if b.is_ascii_alphanumeric() || b == b'_' || b == b'-' {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out.push_str(".json");
    out
}

impl MetadataDir {
    /// The metadata directory of the destination `cluster`.
    pub fn of(cluster: &Path) -> Self {
        MetadataDir {
            root: cluster.join(METADATA_DIR),
        }
    }

    /// The directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The path of topic `topic`'s config file.
    pub fn topic_config_path(&self, topic: &str) -> PathBuf {
        self.root
            .join(TOPIC_CONFIGS_DIR)
            .join(format!("{topic}.properties"))
    }

    /// The path of group `group`'s file.
    pub fn group_path(&self, group: &str) -> PathBuf {
        self.root
            .join(CONSUMER_OFFSETS_DIR)
            .join(group_file_name(group))
    }

    /// The path of the ACL file.
    pub fn acls_path(&self) -> PathBuf {
        self.root.join(ACLS_FILE)
    }

    /// Reads topic `topic`'s overrides; lines that do not parse are rejected one by one.
    pub fn read_topic_config(
        &self,
        topic: &str,
    ) -> Result<Read<BTreeMap<String, String>>, SyncError> {
        let path = self.topic_config_path(topic);
        let mut read = Read::default();
        let Some(text) = read_optional(&path)? else {
            return Ok(read);
        };
        for (i, line) in text.lines().enumerate() {
            if line.trim().is_empty() || line.starts_with('#') {
                continue;
            }
            let at = format!("{}, line {}", path.display(), i + 1);
            match line.split_once('=') {
                Some((key, value)) if !key.is_empty() && key == key.trim() => {
                    if read.value.contains_key(key) {
                        read.rejected
                            .push(format!("{at}: {key} is set twice; the first value is kept"));
                    } else {
                        read.value.insert(key.to_owned(), value.to_owned());
                    }
                }
                _ => read.rejected.push(format!(
                    "{at}: expected key=value, found {line:?}; line ignored"
                )),
            }
        }
        Ok(read)
    }

    /// Writes topic `topic`'s overrides (atomically).
    pub fn write_topic_config(
        &self,
        topic: &str,
        config: &BTreeMap<String, String>,
    ) -> Result<(), SyncError> {
        let mut text = format!("# topic config overrides of {topic} (see kmirror sync --help)\n");
        for (k, v) in config {
            text.push_str(&format!("{k}={v}\n"));
        }
        write(
            &self.root.join(TOPIC_CONFIGS_DIR),
            &format!("{topic}.properties"),
            &text,
        )
    }

    /// Reads every group; a file that does not parse is rejected alone.
    pub fn read_groups(&self) -> Result<Read<BTreeMap<String, GroupRecord>>, SyncError> {
        let dir = self.root.join(CONSUMER_OFFSETS_DIR);
        let mut read = Read::default();
        let entries = match fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(read),
            Err(e) => return Err(SyncError::io("read directory", &dir, e)),
        };
        let mut paths: Vec<PathBuf> = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| SyncError::io("read directory", &dir, e))?;
            let path = entry.path();
            if path.extension().is_some_and(|x| x == "json") {
                paths.push(path);
            }
        }
        paths.sort();
        for path in paths {
            match read_group_file(&path) {
                Ok((group, record)) => {
                    if read.value.insert(group.clone(), record).is_some() {
                        read.rejected.push(format!(
                            "{}: group {group:?} is described by two files; this one is ignored",
                            path.display()
                        ));
                    }
                }
                Err(reason) => read
                    .rejected
                    .push(format!("{}: {reason}; group not synced", path.display())),
            }
        }
        Ok(read)
    }

    /// Writes group `group` (atomically).
    pub fn write_group(&self, group: &str, record: &GroupRecord) -> Result<(), SyncError> {
        let file = GroupFile {
            version: 0,
            group: group.to_owned(),
            members: record.members.clone(),
            offsets: record
                .offsets
                .iter()
                .map(|(tp, o)| OffsetEntry {
                    topic: tp.topic.clone(),
                    partition: tp.partition,
                    offset: *o,
                })
                .collect(),
        };
        let text =
            serde_json::to_string_pretty(&file).map_err(|e| SyncError::BadDestinationFile {
                path: self.group_path(group),
                reason: e.to_string(),
            })? + "\n";
        write(
            &self.root.join(CONSUMER_OFFSETS_DIR),
            &group_file_name(group),
            &text,
        )
    }

    /// Reads `acls.json` (an empty file set when missing); `Err(reason)` when it does not parse.
    pub fn read_acls(&self) -> Result<Result<AclsFile, String>, SyncError> {
        let path = self.acls_path();
        let Some(text) = read_optional(&path)? else {
            return Ok(Ok(AclsFile::default()));
        };
        Ok(serde_json::from_str::<AclsFile>(&text)
            .map_err(|e| e.to_string())
            .and_then(|f| {
                if f.version == 0 {
                    Ok(f)
                } else {
                    Err(format!("version {} is not 0", f.version))
                }
            }))
    }

    /// Writes `acls.json` (atomically).
    pub fn write_acls(&self, acls: &AclsFile) -> Result<(), SyncError> {
        let text =
            serde_json::to_string_pretty(acls).map_err(|e| SyncError::BadDestinationFile {
                path: self.acls_path(),
                reason: e.to_string(),
            })? + "\n";
        write(&self.root, ACLS_FILE, &text)
    }
}

fn read_group_file(path: &Path) -> Result<(String, GroupRecord), String> {
    let text = fs::read_to_string(path).map_err(|e| format!("cannot read it: {e}"))?;
    let file: GroupFile =
        serde_json::from_str(&text).map_err(|e| format!("not a group file: {e}"))?;
    if file.version != 0 {
        return Err(format!("version {} is not 0", file.version));
    }
    let mut offsets = BTreeMap::new();
    for e in file.offsets {
        let tp = TopicPartition::new(e.topic, e.partition);
        if offsets.insert(tp.clone(), e.offset).is_some() {
            return Err(format!("{tp} is listed twice"));
        }
    }
    Ok((
        file.group,
        GroupRecord {
            members: file.members,
            offsets,
        },
    ))
}

fn read_optional(path: &Path) -> Result<Option<String>, SyncError> {
    match fs::read(path) {
        Ok(bytes) => {
            String::from_utf8(bytes)
                .map(Some)
                .map_err(|_| SyncError::BadDestinationFile {
                    path: path.to_path_buf(),
                    reason: "the file is not UTF-8 text".into(),
                })
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(SyncError::io("read", path, e)),
    }
}

fn write(dir: &Path, name: &str, text: &str) -> Result<(), SyncError> {
    fs::create_dir_all(dir).map_err(|e| SyncError::io("create directory", dir, e))?;
    crate::segment::write_atomically(dir, name, text.as_bytes()).map_err(|e| SyncError::Io {
        action: "write",
        path: dir.join(name),
        source: std::io::Error::other(e.to_string()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_file_names_are_safe_and_distinct() {
        assert_eq!(group_file_name("billing"), "billing.json");
        assert_eq!(group_file_name("billing.v2"), "billing%2Ev2.json");
        assert_eq!(group_file_name("../etc"), "%2E%2E%2Fetc.json");
        assert_ne!(group_file_name("a.b"), group_file_name("a%2Eb"));
    }

    #[test]
    fn round_trips_and_rejects_per_item() {
        let tmp = tempfile::tempdir().unwrap();
        let m = MetadataDir::of(tmp.path());
        let config = BTreeMap::from([("retention.ms".to_string(), "1=2".to_string())]);
        m.write_topic_config("orders", &config).unwrap();
        assert_eq!(m.read_topic_config("orders").unwrap().value, config);
        let record = GroupRecord {
            members: vec!["c-1".into()],
            offsets: BTreeMap::from([(TopicPartition::new("orders", 0), 7)]),
        };
        m.write_group("a.b", &record).unwrap();
        std::fs::write(m.root().join(CONSUMER_OFFSETS_DIR).join("zz.json"), "{").unwrap();
        let groups = m.read_groups().unwrap();
        assert_eq!(groups.value, BTreeMap::from([("a.b".to_string(), record)]));
        assert_eq!(groups.rejected.len(), 1);
        assert!(
            groups.rejected[0].contains("zz.json"),
            "{:?}",
            groups.rejected
        );
        assert_eq!(m.read_acls().unwrap(), Ok(AclsFile::default()));
    }
}
