//! Test fixtures of the node driver: the wire layer's fake cluster with two topics and a source
//! reading it (the driver tests and the sync tests), and, for the metadata sync, a node
//! mirroring both topics and a source whose metadata (configs, groups, ACLs) is a metadata
//! directory, with log end offsets read from the fake cluster.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use kmirror_kernel::sync::acl::RawAclBinding;
use kmirror_kernel::sync::group_offsets::TopicPartition;
use kmirror_kernel::types::{MirrorName, Offset, TopicId};

use super::{NodeDest, NodeDriver, NodeDriverOptions, NodeMeta};
use crate::sync::local::MetadataDir;
use crate::sync::{GroupRecord, MetadataSource, Read, SyncError};
use crate::wire::fake_broker::{FakeCluster, FakePartition, FakeTopic};
use crate::wire::{SourceCluster, SourceClusterOptions, TopicSelection};

pub const ORDERS: TopicId = TopicId([1; 16]);
pub const PAY_EU: TopicId = TopicId([2; 16]);
/// Both topics of [`fake`].
pub const BOTH: &[&str] = &["orders", "pay.eu"];

/// orders: 3 partitions of 4, 5 and 6 batches (LEO 8, 10, 12); pay.eu: 2 partitions of 2
/// batches (LEO 4); two records a batch.
pub fn fake() -> FakeCluster {
    FakeCluster::start(
        2,
        vec![
            FakeTopic {
                name: "orders".into(),
                id: ORDERS,
                partitions: (0..3)
                    .map(|i| FakePartition::with_batches(1 + i % 2, 5, 4 + i64::from(i)))
                    .collect(),
            },
            FakeTopic {
                name: "pay.eu".into(),
                id: PAY_EU,
                partitions: (0..2)
                    .map(|i| FakePartition::with_batches(2 - i % 2, 3, 2))
                    .collect(),
            },
        ],
    )
}

/// A source cluster reading `topics` of `fake`, one Fetch in flight per broker (the tests
/// count them; several in flight: `link_tests.rs`).
pub fn source(fake: &FakeCluster, topics: &[&str]) -> SourceCluster {
    let options = SourceClusterOptions {
        connect_timeout: Duration::from_secs(1),
        request_timeout: Duration::from_secs(2),
        fetch_max_wait_ms: 0,
        fetches_in_flight: std::num::NonZeroUsize::new(1),
        ..SourceClusterOptions::default()
    };
    SourceCluster::new(
        &fake.address(1),
        TopicSelection::names(topics).unwrap(),
        options,
    )
}

pub fn east() -> MirrorName {
    MirrorName::new("fake-cluster").unwrap()
}

pub fn options() -> NodeDriverOptions {
    NodeDriverOptions {
        max_fetch_batches: 1,
        ..NodeDriverOptions::default()
    }
}

/// A node destination at `root` with both topics added to the mirror (not started).
pub fn added(fake: &FakeCluster, root: &Path) -> NodeDriver {
    added_from(fake, root, source(fake, BOTH), options())
}

/// [`added`], reading both topics through `source`, the driver with `options`.
pub fn added_from(
    fake: &FakeCluster,
    root: &Path,
    source: SourceCluster,
    options: NodeDriverOptions,
) -> NodeDriver {
    added_replicated(fake, root, source, options, 1)
}

/// [`added_from`] into a node with `replicas` replicas of every partition.
pub fn added_replicated(
    fake: &FakeCluster,
    root: &Path,
    source: SourceCluster,
    options: NodeDriverOptions,
    replicas: u32,
) -> NodeDriver {
    let mut meta = NodeMeta::new(Some(fake.address(1)), 4);
    meta.replicas = replicas;
    let dest = NodeDest::create(root, meta).unwrap();
    let mut driver = NodeDriver::from_dest(dest, Some(source), options).unwrap();
    let results = driver
        .add_topics(
            &east(),
            &[("orders".into(), ORDERS, 3), ("pay.eu".into(), PAY_EU, 2)],
            0,
        )
        .unwrap();
    assert!(results.values().all(Result::is_ok), "{results:?}");
    driver
}

/// `kmirror stop --topics orders` on `driver` with no source, run until settled.
pub fn fail_over_orders(driver: &mut NodeDriver, clock: &mut crate::clock::ManualClock) {
    driver.set_source(None);
    let results = driver
        .request_topics(
            crate::node::control::TopicsVerb::Stop,
            "orders",
            None,
            clock.now_ms,
        )
        .unwrap();
    assert!(results.values().all(Result::is_ok), "{results:?}");
    driver
        .run(clock, super::NodeUntil::Settled, &mut |_, _| {})
        .unwrap();
}

/// An unclean election on `fake`'s orders-0: the new leader (epoch 6) had only the first two
/// batches of epoch 5 (offsets 0..=3) and appended three batches of its own from offset 4, so
/// a copy's epoch-5 batches at 4..=7 exist nowhere any more. The leader answers KIP-320.
pub fn unclean_election_on_orders_0(fake: &FakeCluster) {
    use kmirror_kernel::batch::BatchHeader;
    let mut state = fake.state();
    state.kip320 = true;
    let p = &mut state.topics[0].partitions[0];
    p.batches.truncate(2);
    p.epoch = 6;
    for base in [4, 6, 8] {
        let header = BatchHeader::plain(base, base + 1, 6);
        p.batches
            .push(crate::record_batch::RawBatch::synthesize(&header, 3_000).unwrap());
    }
    // What the leader answers a fetch at 8 with last fetched epoch 5.
    assert_eq!(p.end_offset_for_epoch(5), (5, 4));
}

/// The source's metadata: a metadata directory, and log end offsets from the fake cluster.
pub struct DirSource {
    pub meta: MetadataDir,
    leos: BTreeMap<TopicPartition, Offset>,
    /// Rounds that read the source.
    pub reads: u32,
}

impl DirSource {
    pub fn new(root: &Path, fake: &FakeCluster) -> Self {
        let mut leos = BTreeMap::new();
        for t in &fake.state().topics {
            for (i, p) in t.partitions.iter().enumerate() {
                let end = p
                    .batches
                    .last()
                    .map_or(p.log_start, |b| b.header().last_offset + 1);
                leos.insert(TopicPartition::new(t.name.clone(), i as i32), end);
            }
        }
        DirSource {
            meta: MetadataDir::of(root),
            leos,
            reads: 0,
        }
    }

    pub fn set_config(&self, topic: &str, pairs: &[(&str, &str)]) {
        let config = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        self.meta.write_topic_config(topic, &config).unwrap();
    }

    pub fn set_group(&self, group: &str, offsets: &[(&str, i32, Offset)]) {
        let record = GroupRecord {
            members: Vec::new(),
            offsets: offsets
                .iter()
                .map(|(t, p, o)| (TopicPartition::new(*t, *p), *o))
                .collect(),
        };
        self.meta.write_group(group, &record).unwrap();
    }

    pub fn set_acls(&self, bindings: &[RawAclBinding]) {
        self.meta
            .write_acls(&crate::sync::local::AclsFile {
                version: 0,
                bindings: bindings.to_vec(),
                created_by_mirror: Vec::new(),
            })
            .unwrap();
    }
}

/// `ALLOW <principal> <op>` on a literal `kind` resource `name`, any host.
pub fn acl(kind: &str, name: &str, principal: &str, op: &str) -> RawAclBinding {
    RawAclBinding {
        resource_type: kind.into(),
        resource_name: name.into(),
        pattern_type: "LITERAL".into(),
        principal: principal.into(),
        host: "*".into(),
        operation: op.into(),
        permission_type: "ALLOW".into(),
    }
}

impl MetadataSource for DirSource {
    fn describe(&self) -> String {
        self.meta.root().display().to_string()
    }

    fn topic(&mut self) -> Result<(String, TopicId), SyncError> {
        Ok(("orders".into(), ORDERS))
    }

    fn log_end_offset(&mut self, partition: &TopicPartition) -> Result<Offset, SyncError> {
        self.leos
            .get(partition)
            .copied()
            .ok_or_else(|| SyncError::SourceUnavailable {
                source_name: self.describe(),
                reason: format!("no {partition}"),
            })
    }

    fn topic_config(&mut self, topic: &str) -> Result<Read<BTreeMap<String, String>>, SyncError> {
        self.meta.read_topic_config(topic)
    }

    fn groups(&mut self) -> Result<Read<BTreeMap<String, GroupRecord>>, SyncError> {
        self.reads += 1;
        self.meta.read_groups()
    }

    fn acls(&mut self) -> Result<Read<Vec<RawAclBinding>>, SyncError> {
        Ok(Read {
            value: self.meta.read_acls()?.unwrap().bindings,
            rejected: Vec::new(),
        })
    }

    fn release(&mut self) {}
}
