//! Topic config sync: exact change lists, and idempotence as a property.

use std::collections::{BTreeMap, BTreeSet};

use kmirror_kernel::sync::topic_config::{
    apply_config_changes, plan_topic_config, ConfigChange, ConfigSyncPolicy,
};
use kmirror_kernel::sync::SyncItemError;
use proptest::prelude::*;

fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn set(key: &str, value: &str) -> ConfigChange {
    ConfigChange::Set {
        key: key.into(),
        value: value.into(),
    }
}

#[test]
fn source_values_overwrite_and_deleted_overrides_are_removed() {
    let source = map(&[
        ("retention.ms", "86400000"),
        ("cleanup.policy", "compact"),
        ("max.message.bytes", "2097152"),
    ]);
    let dest = map(&[
        ("retention.ms", "604800000"),
        ("max.message.bytes", "2097152"),
        ("segment.ms", "3600000"),
    ]);
    let plan = plan_topic_config(&source, &dest, &ConfigSyncPolicy::default());
    assert_eq!(
        plan.changes,
        vec![
            set("cleanup.policy", "compact"),
            set("retention.ms", "86400000"),
            ConfigChange::Delete {
                key: "segment.ms".into()
            },
        ]
    );
    assert!(plan.rejected.is_empty());
    assert!(plan.kept_local.is_empty());
}

#[test]
fn local_keys_are_never_touched() {
    let source = map(&[
        ("mirror.name", "west"),
        ("min.insync.replicas", "3"),
        ("leader.replication.throttled.replicas", "*"),
        ("remote.storage.enable", "true"),
        ("local.retention.ms", "1000"),
        ("retention.bytes", "1024"),
        ("segment.jitter.ms", "5"),
    ]);
    let dest = map(&[
        ("mirror.name", "east"),
        ("min.insync.replicas", "2"),
        ("follower.replication.throttled.replicas", "0:1"),
        ("unclean.leader.election.enable", "false"),
    ]);
    let policy = ConfigSyncPolicy {
        excluded: BTreeSet::from(["segment.jitter.ms".to_string()]),
    };
    let plan = plan_topic_config(&source, &dest, &policy);
    assert_eq!(plan.changes, vec![set("retention.bytes", "1024")]);
    assert_eq!(
        plan.kept_local,
        vec![
            "follower.replication.throttled.replicas",
            "leader.replication.throttled.replicas",
            "local.retention.ms",
            "min.insync.replicas",
            "mirror.name",
            "remote.storage.enable",
            "segment.jitter.ms",
            "unclean.leader.election.enable",
        ]
    );
}

#[test]
fn a_value_that_does_not_parse_is_rejected_alone() {
    let source = map(&[
        ("retention.ms", "a week"),
        ("compression.type", "zstd"),
        ("x.custom", "1"),
    ]);
    let dest = map(&[("retention.ms", "604800000")]);
    let plan = plan_topic_config(&source, &dest, &ConfigSyncPolicy::default());
    assert_eq!(plan.changes, vec![set("compression.type", "zstd")]);
    assert_eq!(
        plan.rejected,
        vec![
            SyncItemError::InvalidConfigValue {
                key: "retention.ms".into(),
                value: "a week".into(),
                expected: "a 64-bit integer in the key's range",
            },
            SyncItemError::UnknownConfig {
                key: "x.custom".into()
            },
        ]
    );
    let message = plan.rejected[0].to_string();
    assert!(
        message.contains("retention.ms=\"a week\"") && message.contains("destination keeps"),
        "{message}"
    );
}

fn key() -> impl Strategy<Value = String> {
    prop::sample::select(vec![
        "retention.ms",
        "retention.bytes",
        "cleanup.policy",
        "compression.type",
        "mirror.name",
        "min.insync.replicas",
        "remote.storage.enable",
        "segment.ms",
        "preallocate",
        "unknown.key",
    ])
    .prop_map(str::to_string)
}

fn value() -> impl Strategy<Value = String> {
    prop::sample::select(vec!["1", "-1", "compact", "zstd", "true", "oops", ""])
        .prop_map(str::to_string)
}

proptest! {
    /// Applying the plan, then planning again, changes nothing; applying it twice equals once.
    #[test]
    fn config_sync_is_idempotent(
        source in prop::collection::btree_map(key(), value(), 0..8),
        dest in prop::collection::btree_map(key(), value(), 0..8),
        exclude_segment_ms in any::<bool>(),
    ) {
        let mut policy = ConfigSyncPolicy::default();
        if exclude_segment_ms {
            policy.excluded.insert("segment.ms".into());
        }
        let plan = plan_topic_config(&source, &dest, &policy);
        let once = apply_config_changes(&dest, &plan.changes);
        prop_assert_eq!(&apply_config_changes(&once, &plan.changes), &once);
        let again = plan_topic_config(&source, &once, &policy);
        prop_assert!(again.changes.is_empty(), "{:?}", again.changes);
        prop_assert_eq!(again.rejected, plan.rejected);
        // Local keys keep their destination values.
        for k in &plan.kept_local {
            prop_assert_eq!(once.get(k), dest.get(k));
        }
    }
}
