//! Topic config sync: the changes that make a destination topic's config overrides equal to
//! the source's, except the keys that stay local.
//!
//! Inputs are the topic's **overrides** on each side (what `DescribeConfigs` reports with
//! source `DYNAMIC_TOPIC_CONFIG`; cluster defaults are not copied). Output is a list of
//! `IncrementalAlterConfigs` operations, `SET` or `DELETE`, sorted by key.
//!
//! Keys that stay local (never read from the source, never changed on the destination):
//! - `mirror.name` itself (the destination's desired state);
//! - replica placement and throttles, which describe the destination's own brokers:
//!   `leader.replication.throttled.replicas`, `follower.replication.throttled.replicas`,
//!   `min.insync.replicas`, `unclean.leader.election.enable`;
//! - tiered storage, a property of the destination's storage: every key starting with
//!   `remote.` (`remote.storage.enable`, `remote.log.copy.disable`, ...) or `local.retention.`;
//! - any key the operator excludes ([`ConfigSyncPolicy::excluded`]).

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::SyncItemError;

/// Keys that are never synced (see the module documentation).
pub const LOCAL_KEYS: [&str; 5] = [
    "mirror.name",
    "leader.replication.throttled.replicas",
    "follower.replication.throttled.replicas",
    "min.insync.replicas",
    "unclean.leader.election.enable",
];

/// Key prefixes that are never synced: tiered storage.
pub const LOCAL_PREFIXES: [&str; 2] = ["remote.", "local.retention."];

/// What the operator configures about the config sync.
#[derive(Clone, PartialEq, Eq, Hash, Debug, Default, Serialize, Deserialize)]
pub struct ConfigSyncPolicy {
    /// More keys that stay local.
    pub excluded: BTreeSet<String>,
}

/// One `IncrementalAlterConfigs` operation on the destination topic.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize)]
pub enum ConfigChange {
    /// `SET key=value`.
    Set {
        /// The key.
        key: String,
        /// The source's value.
        value: String,
    },
    /// `DELETE key`: the source no longer overrides it, so neither does the destination.
    Delete {
        /// The key.
        key: String,
    },
}

impl ConfigChange {
    /// The key changed.
    pub fn key(&self) -> &str {
        match self {
            ConfigChange::Set { key, .. } | ConfigChange::Delete { key } => key,
        }
    }
}

/// The outcome of planning a topic's config sync.
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct ConfigPlan {
    /// The changes to apply, sorted by key.
    pub changes: Vec<ConfigChange>,
    /// Keys present on either side that stay local, sorted.
    pub kept_local: Vec<String>,
    /// Source values refused (the destination keeps its value for these keys).
    pub rejected: Vec<SyncItemError>,
}

/// The type of a topic config's values, as Kafka's `ConfigDef` declares it.
#[derive(Clone, Copy, PartialEq, Debug)]
pub enum ConfigType {
    /// `true` or `false` (any case).
    Boolean,
    /// A 32-bit integer of at least `min`.
    Int {
        /// The smallest valid value.
        min: i64,
    },
    /// A 64-bit integer of at least `min`.
    Long {
        /// The smallest valid value.
        min: i64,
    },
    /// A finite number in `min..=max`.
    Double {
        /// The smallest valid value.
        min: f64,
        /// The largest valid value.
        max: f64,
    },
    /// One of the listed values.
    Enum(&'static [&'static str]),
    /// A comma-separated list of the listed values (empty list allowed).
    List(&'static [&'static str]),
    /// A comma-separated list of anything (replica lists).
    AnyList,
}

const COMPRESSION: &[&str] = &["uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"];
const TIMESTAMP_TYPE: &[&str] = &["CreateTime", "LogAppendTime"];
const CLEANUP_POLICY: &[&str] = &["delete", "compact"];

/// Apache Kafka's topic configs and their types (`TopicConfig`, `LogConfig`).
const KNOWN: &[(&str, ConfigType)] = &[
    ("cleanup.policy", ConfigType::List(CLEANUP_POLICY)),
    ("compression.gzip.level", ConfigType::Int { min: -1 }),
    ("compression.lz4.level", ConfigType::Int { min: 1 }),
    ("compression.type", ConfigType::Enum(COMPRESSION)),
    ("compression.zstd.level", ConfigType::Int { min: -131_072 }),
    ("delete.retention.ms", ConfigType::Long { min: 0 }),
    ("file.delete.delay.ms", ConfigType::Long { min: 0 }),
    ("flush.messages", ConfigType::Long { min: 1 }),
    ("flush.ms", ConfigType::Long { min: 0 }),
    (
        "follower.replication.throttled.replicas",
        ConfigType::AnyList,
    ),
    ("index.interval.bytes", ConfigType::Int { min: 0 }),
    ("leader.replication.throttled.replicas", ConfigType::AnyList),
    ("local.retention.bytes", ConfigType::Long { min: -2 }),
    ("local.retention.ms", ConfigType::Long { min: -2 }),
    ("max.compaction.lag.ms", ConfigType::Long { min: 1 }),
    ("max.message.bytes", ConfigType::Int { min: 0 }),
    ("message.downconversion.enable", ConfigType::Boolean),
    (
        "message.timestamp.after.max.ms",
        ConfigType::Long { min: 0 },
    ),
    (
        "message.timestamp.before.max.ms",
        ConfigType::Long { min: 0 },
    ),
    (
        "message.timestamp.difference.max.ms",
        ConfigType::Long { min: 0 },
    ),
    ("message.timestamp.type", ConfigType::Enum(TIMESTAMP_TYPE)),
    (
        "min.cleanable.dirty.ratio",
        ConfigType::Double { min: 0.0, max: 1.0 },
    ),
    ("min.compaction.lag.ms", ConfigType::Long { min: 0 }),
    ("min.insync.replicas", ConfigType::Int { min: 1 }),
    ("preallocate", ConfigType::Boolean),
    ("remote.log.copy.disable", ConfigType::Boolean),
    ("remote.log.delete.on.disable", ConfigType::Boolean),
    ("remote.storage.enable", ConfigType::Boolean),
    ("retention.bytes", ConfigType::Long { min: -1 }),
    ("retention.ms", ConfigType::Long { min: -1 }),
    ("segment.bytes", ConfigType::Int { min: 14 }),
    ("segment.index.bytes", ConfigType::Int { min: 4 }),
    ("segment.jitter.ms", ConfigType::Long { min: 0 }),
    ("segment.ms", ConfigType::Long { min: 1 }),
    ("unclean.leader.election.enable", ConfigType::Boolean),
];

/// The type of topic config `key`, if Apache Kafka knows it.
pub fn config_type(key: &str) -> Option<ConfigType> {
    KNOWN.iter().find(|(k, _)| *k == key).map(|(_, t)| *t)
}

/// Whether `key` stays local under `policy`.
pub fn is_local(key: &str, policy: &ConfigSyncPolicy) -> bool {
    LOCAL_KEYS.contains(&key)
        || LOCAL_PREFIXES.iter().any(|p| key.starts_with(p))
        || policy.excluded.contains(key)
}

impl ConfigType {
    /// What a valid value looks like, for messages.
    pub fn describe(self) -> &'static str {
        match self {
            ConfigType::Boolean => "true or false",
            ConfigType::Int { .. } => "a 32-bit integer in the key's range",
            ConfigType::Long { .. } => "a 64-bit integer in the key's range",
            ConfigType::Double { .. } => "a number in the key's range",
            ConfigType::Enum(_) => "one of the key's values",
            ConfigType::List(_) => "a comma-separated list of the key's values",
            ConfigType::AnyList => "a comma-separated list",
        }
    }

    /// Whether `value` is valid.
    pub fn accepts(self, value: &str) -> bool {
        let v = value.trim();
        match self {
            ConfigType::Boolean => {
                v.eq_ignore_ascii_case("true") || v.eq_ignore_ascii_case("false")
            }
            ConfigType::Int { min } => v.parse::<i32>().is_ok_and(|n| i64::from(n) >= min),
            ConfigType::Long { min } => v.parse::<i64>().is_ok_and(|n| n >= min),
            ConfigType::Double { min, max } => v
                .parse::<f64>()
                .is_ok_and(|n| n.is_finite() && n >= min && n <= max),
            ConfigType::Enum(values) => values.contains(&v),
            ConfigType::List(values) => {
                v.is_empty() || v.split(',').all(|item| values.contains(&item.trim()))
            }
            ConfigType::AnyList => true,
        }
    }
}

/// Checks a source value for a topic config that is synced.
pub fn validate(key: &str, value: &str) -> Result<(), SyncItemError> {
    let Some(t) = config_type(key) else {
        return Err(SyncItemError::UnknownConfig {
            key: key.to_owned(),
        });
    };
    if t.accepts(value) {
        Ok(())
    } else {
        Err(SyncItemError::InvalidConfigValue {
            key: key.to_owned(),
            value: value.to_owned(),
            expected: t.describe(),
        })
    }
}

/// The changes that bring the destination's overrides `dest` in line with the source's
/// overrides `source` (see the module documentation).
pub fn plan_topic_config(
    source: &BTreeMap<String, String>,
    dest: &BTreeMap<String, String>,
    policy: &ConfigSyncPolicy,
) -> ConfigPlan {
    let mut plan = ConfigPlan::default();
    let keys: BTreeSet<&String> = source.keys().chain(dest.keys()).collect();
    for key in keys {
        if is_local(key, policy) {
            plan.kept_local.push(key.clone());
            continue;
        }
        match (source.get(key), dest.get(key)) {
            (Some(value), current) => {
                if let Err(e) = validate(key, value) {
                    plan.rejected.push(e);
                } else if current != Some(value) {
                    plan.changes.push(ConfigChange::Set {
                        key: key.clone(),
                        value: value.clone(),
                    });
                }
            }
            (None, Some(_)) => plan.changes.push(ConfigChange::Delete { key: key.clone() }),
            (None, None) => {}
        }
    }
    plan
}

/// `dest` with `changes` applied (what the destination holds afterwards).
pub fn apply_config_changes(
    dest: &BTreeMap<String, String>,
    changes: &[ConfigChange],
) -> BTreeMap<String, String> {
    let mut out = dest.clone();
    for change in changes {
        match change {
            ConfigChange::Set { key, value } => {
                out.insert(key.clone(), value.clone());
            }
            ConfigChange::Delete { key } => {
                out.remove(key);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_local_key_is_a_known_key_or_prefix() {
        for k in LOCAL_KEYS.iter().filter(|k| **k != "mirror.name") {
            assert!(config_type(k).is_some(), "{k}");
        }
        for (k, _) in KNOWN {
            if k.starts_with("remote.") || k.starts_with("local.retention.") {
                assert!(is_local(k, &ConfigSyncPolicy::default()));
            }
        }
    }

    #[test]
    fn types_accept_and_refuse() {
        let cases = [
            ("retention.ms", "-1", true),
            ("retention.ms", "-2", false),
            ("retention.ms", "1d", false),
            ("retention.ms", " 604800000 ", true),
            ("segment.bytes", "99999999999", false),
            ("segment.bytes", "1048576", true),
            ("cleanup.policy", "compact,delete", true),
            ("cleanup.policy", "compact, delete", true),
            ("cleanup.policy", "archive", false),
            ("compression.type", "zstd", true),
            ("compression.type", "brotli", false),
            ("preallocate", "TRUE", true),
            ("preallocate", "yes", false),
            ("min.cleanable.dirty.ratio", "0.5", true),
            ("min.cleanable.dirty.ratio", "1.5", false),
            ("min.cleanable.dirty.ratio", "NaN", false),
            ("message.timestamp.type", "LogAppendTime", true),
            ("message.timestamp.type", "logappendtime", false),
        ];
        for (k, v, ok) in cases {
            assert_eq!(validate(k, v).is_ok(), ok, "{k}={v}");
        }
        assert_eq!(
            validate("retention.msec", "1"),
            Err(SyncItemError::UnknownConfig {
                key: "retention.msec".into()
            })
        );
    }
}
