//! Following the source: what a running `kmirror mirror --topics` looks at again on every
//! refresh of the source's metadata, and the periodic work of a running node.
//!
//! A mirror is given a **selection** ([`Follow`]): include entries (topic names and globs), an
//! exclude list (globs; `__*` by default, the KIP authors' prototype's `mirror.topics.exclude`
//! of `__.*` written as a glob) and the mirror to put topics in. On every refresh of the source's
//! metadata (every [`Follow::metadata_refresh_ms`], and at once after a fetch error that says the
//! source's layout changed: a leadership error, an unknown topic id) the driver:
//!
//! - applies the selection to the source's topics and asks the kernel's
//!   [`discover`] which go into the mirror: a topic new to
//!   the destination is created (the source's id and partition count) and mirrored within that
//!   refresh; a failed-over topic (`<mirror>.removed`) is **never** put back (a failback is the
//!   operator's explicit `kmirror mirror --failback`), and is reported once per run;
//! - feeds every mirrored topic's source leaders to the node, whose partition count grows with
//!   the source's (the kernel's `CreatePartitions`);
//! - looks for the destination's mirrored topics the source no longer has: a topic whose name
//!   now has another id was re-created; a name missing from the listing is asked for by name
//!   ([`SourceCluster::topic_exists`](crate::wire::source_cluster::SourceCluster::topic_exists): a listing leaves out what the principal may not describe)
//!   and only an `UNKNOWN_TOPIC_OR_PARTITION` answer counts. Such a topic's partitions hear
//!   [`NodeInput::SourceTopicDeleted`](kmirror_kernel::node::NodeInput::SourceTopicDeleted): FAILED, not retried, their data kept read-only.
//!
//! Every [`CHECKPOINT_INTERVAL_MS`] (Kafka's `replica.high.watermark.checkpoint.interval.ms`)
//! the driver also writes the partitions' high watermarks to the log dir's checkpoint file, and
//! asks the source for the last stable offset of every partition it did not fetch in that time
//! (paused, failed, waiting), so that the lag shown is measured, not remembered.

use std::collections::{BTreeMap, BTreeSet};

use kmirror_kernel::desired::DesiredState;
use kmirror_kernel::discovery::{discover, Left};
use kmirror_kernel::types::{MirrorName, PartitionIndex, TopicId};

use crate::wire::authorization::AclResource;
use crate::wire::source_cluster::{SourceMetadata, TopicError, TopicExistence};
use crate::wire::topic_selection::{TopicPattern, TopicSelection};

use super::dest::NodeMeta;

/// How often a following mirror refreshes the source's metadata by default (ms).
pub const DEFAULT_METADATA_REFRESH_MS: i64 = 30_000;
/// The exclude list by default: topics whose name starts with two underscores.
pub const DEFAULT_EXCLUDE: &str = "__*";
/// How often a running node writes its high watermarks and refreshes the source's offsets of
/// the partitions it did not fetch (ms): Kafka's `replica.high.watermark.checkpoint.interval.ms`.
pub const CHECKPOINT_INTERVAL_MS: i64 = 5_000;

/// What a running mirror follows at the source. See the [module documentation](self).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Follow {
    /// The mirror new topics go into.
    pub mirror: MirrorName,
    /// Topic names and globs to mirror.
    pub include: TopicSelection,
    /// Globs of topics not to mirror, even when an include glob matches them (a topic named
    /// exactly in `include` is mirrored whatever they say).
    pub exclude: Option<TopicSelection>,
    /// How often the source's metadata is refreshed (ms).
    pub metadata_refresh_ms: i64,
}

impl Follow {
    /// Whether the selection takes `topic` of the source.
    pub fn selects(&self, topic: &str, is_internal: bool) -> bool {
        let named = self
            .include
            .patterns()
            .iter()
            .any(|p| matches!(p, TopicPattern::Name(n) if n == topic));
        named
            || (self.include.matches(topic, is_internal)
                && !self
                    .exclude
                    .as_ref()
                    .is_some_and(|e| e.matches(topic, is_internal)))
    }

    /// The selection the source cluster is asked for: the include entries, and every topic of
    /// the destination by name (the mirror follows all of them, and a name missing from the
    /// answer is how a deleted topic shows).
    pub fn source_selection(&self, meta: &NodeMeta) -> TopicSelection {
        let mut patterns = self.include.patterns().to_vec();
        for name in meta.topics.keys() {
            let pattern = TopicPattern::Name(name.clone());
            if !patterns.contains(&pattern) {
                patterns.push(pattern);
            }
        }
        TopicSelection::from_patterns(patterns)
    }
}

/// What one refresh of the source's metadata asks of the driver.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Discovered {
    /// Topics to put in the mirror: name, id and partition count at the source.
    pub add: Vec<(String, TopicId, PartitionIndex)>,
    /// Topics the selection matches that stay out, with why.
    pub left: BTreeMap<String, Left>,
    /// Mirrored topics of the destination the source lists under another id (re-created):
    /// name and the destination's id.
    pub recreated: Vec<(String, TopicId)>,
    /// Mirrored topics of the destination missing from the source's answer (no entry, and no
    /// error naming them), to be asked for by name before they count as deleted: name and the
    /// destination's id.
    pub missing: Vec<(String, TopicId)>,
}

/// Applies `follow` to the source's `metadata` against the destination's `meta`: see the
/// [module documentation](self). `deleted` are the topics already known to be gone.
pub fn discover_topics(
    follow: &Follow,
    metadata: &SourceMetadata,
    meta: &NodeMeta,
    deleted: &BTreeSet<TopicId>,
) -> Discovered {
    let matched: Vec<&str> = metadata
        .topics
        .keys()
        .map(String::as_str)
        .filter(|name| follow.selects(name, false))
        .collect();
    let mut catalogue = meta.catalogue();
    catalogue.insert_mirror(follow.mirror.clone());
    let found = discover(&catalogue, &follow.mirror, matched, false, None);
    let requested = found.request_topics();
    let mut out = Discovered {
        left: found.left,
        ..Discovered::default()
    };
    for name in requested {
        let Some(topic) = metadata.topics.get(&name) else {
            continue;
        };
        // The destination's copy of a re-created topic keeps its id: the refusal is the
        // driver's (`add_topics`), reported like any other.
        let count = topic
            .partitions
            .iter()
            .map(|p| p.index + 1)
            .max()
            .unwrap_or(0);
        out.add.push((name, topic.topic_id, count));
    }
    // Topics the source answered about with an error (denied, not available): present, or
    // at least not known to be gone.
    let in_error: BTreeSet<&str> = metadata
        .errors
        .iter()
        .filter_map(|e| match e {
            TopicError::Broker { topic, .. } => Some(topic.as_str()),
            TopicError::Denied { acl, .. } => match &acl.resource {
                AclResource::Topic(topic) => Some(topic.as_str()),
                _ => None,
            },
            TopicError::Selection { .. } => None,
        })
        .collect();
    for (name, topic) in &meta.topics {
        let mirrored = matches!(
            topic.desired(name),
            Ok(DesiredState::Mirror(_) | DesiredState::Pause(_))
        );
        if !mirrored || deleted.contains(&topic.topic_id) {
            continue;
        }
        match metadata.topics.get(name) {
            Some(source) if source.topic_id != topic.topic_id => {
                out.recreated.push((name.clone(), topic.topic_id))
            }
            Some(_) => {}
            // Denied or in error at the source: nothing can be concluded.
            None if in_error.contains(name.as_str()) => {}
            // Absent: asked for by name (`missing`) before it counts as deleted.
            None => out.missing.push((name.clone(), topic.topic_id)),
        }
    }
    out
}

/// Whether a topic asked for by name ([`SourceCluster::topic_exists`]) is gone: the source has
/// no topic of that name, or one with another id.
///
/// [`SourceCluster::topic_exists`]: crate::wire::SourceCluster::topic_exists
pub fn is_gone(existence: TopicExistence, topic_id: TopicId) -> bool {
    match existence {
        TopicExistence::Unknown => true,
        TopicExistence::Exists(id) => id != topic_id,
        TopicExistence::Undecided => false,
    }
}

/// The line a run prints, once, for a topic the selection matches but discovery leaves out.
pub fn left_line(topic: &str, left: &Left) -> String {
    match left {
        Left::FailedOver => format!(
            "{topic}: skipped: failed over (removed from its mirror); only `kmirror mirror \
             --failback --topics {topic}` mirrors it again"
        ),
        Left::OtherMirror(m) => format!("{topic}: skipped: in cluster mirror {m}"),
        Left::InvalidMirrorName(raw) => {
            format!("{topic}: skipped: its mirror.name {raw:?} does not parse")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::dest::NodeTopic;
    use crate::wire::authorization::AclNeeded;
    use crate::wire::source_cluster::{SourcePartition, SourceTopic};

    fn id(n: u64) -> TopicId {
        TopicId::from_u64(n)
    }

    fn source(topics: &[(&str, u64, i32)], errors: Vec<TopicError>) -> SourceMetadata {
        SourceMetadata {
            cluster_id: Some("east".into()),
            brokers: BTreeMap::new(),
            topics: topics
                .iter()
                .map(|&(name, n, partitions)| {
                    let partitions = (0..partitions)
                        .map(|index| SourcePartition {
                            index,
                            leader: Some(1),
                            leader_epoch: 0,
                            error_code: 0,
                        })
                        .collect();
                    let topic = SourceTopic {
                        name: name.into(),
                        topic_id: id(n),
                        partitions,
                    };
                    (name.to_owned(), topic)
                })
                .collect(),
            errors,
            answered_by: "broker".into(),
        }
    }

    fn destination(topics: &[(&str, u64, Option<&str>)]) -> NodeMeta {
        let mut meta = NodeMeta::new(None, 8);
        for &(name, n, mirror_name) in topics {
            meta.topics.insert(
                name.to_owned(),
                NodeTopic {
                    topic_id: id(n),
                    partitions: 1,
                    mirror_name: mirror_name.map(str::to_owned),
                },
            );
        }
        meta
    }

    fn follow(include: &str) -> Follow {
        Follow {
            mirror: MirrorName::new("east").unwrap(),
            include: TopicSelection::parse(include).unwrap(),
            exclude: Some(TopicSelection::parse(DEFAULT_EXCLUDE).unwrap()),
            metadata_refresh_ms: DEFAULT_METADATA_REFRESH_MS,
        }
    }

    #[test]
    fn new_topics_are_added_failed_over_ones_left_and_excludes_apply_to_globs_only() {
        let f = follow("orders,pay.*,__named");
        let meta = destination(&[
            ("pay.eu", 2, Some("east")),
            ("pay.old", 3, Some("east.removed")),
        ]);
        let src = source(
            &[
                ("orders", 1, 3),
                ("pay.eu", 2, 1),
                ("pay.old", 3, 1),
                ("pay.us", 4, 2),
                ("__pay", 5, 1),
                ("__named", 6, 1),
            ],
            vec![],
        );
        let found = discover_topics(&f, &src, &meta, &BTreeSet::new());
        assert_eq!(
            found.add,
            vec![
                ("__named".to_owned(), id(6), 1),
                ("orders".to_owned(), id(1), 3),
                ("pay.us".to_owned(), id(4), 2)
            ]
        );
        assert_eq!(
            found.left,
            [("pay.old".to_owned(), Left::FailedOver)]
                .into_iter()
                .collect()
        );
        assert!(found.recreated.is_empty() && found.missing.is_empty());
        assert!(left_line("pay.old", &Left::FailedOver).contains("--failback --topics pay.old"));
    }

    #[test]
    fn a_mirrored_topic_missing_or_re_created_is_a_suspect_unless_the_source_says_why() {
        let f = follow("t.*");
        let meta = destination(&[
            ("t.gone", 1, Some("east")),
            ("t.new", 2, Some("east.paused")),
            ("t.denied", 3, Some("east")),
            ("t.stopped", 4, Some("east.removed")),
            ("t.known", 5, Some("east")),
        ]);
        let denied = TopicError::Denied {
            address: "broker".into(),
            code: 29,
            name: "TOPIC_AUTHORIZATION_FAILED".into(),
            acl: AclNeeded {
                operation: "Describe",
                resource: AclResource::Topic("t.denied".into()),
                principal: None,
            },
        };
        let src = source(&[("t.new", 9, 1)], vec![denied]);
        let deleted = [id(5)].into_iter().collect();
        let found = discover_topics(&f, &src, &meta, &deleted);
        assert_eq!(found.recreated, vec![("t.new".to_owned(), id(2))]);
        assert_eq!(found.missing, vec![("t.gone".to_owned(), id(1))]);
        assert!(is_gone(TopicExistence::Unknown, id(1)));
        assert!(is_gone(TopicExistence::Exists(id(9)), id(1)));
        assert!(!is_gone(TopicExistence::Exists(id(1)), id(1)));
        assert!(!is_gone(TopicExistence::Undecided, id(1)));
    }
}
