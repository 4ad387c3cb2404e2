//! The metadata sync of a node destination through the binary, with no Kafka cluster: the
//! source is another node, `east` (mirrored from the harness's fake source, its topic config
//! and a group's offsets in its metadata directory), served by `kmirror serve`, which answers
//! DescribeConfigs, the group APIs and DescribeAcls as a broker does. `kmirror mirror --topics
//! ... --sync-interval-ms` syncs inside the mirror, `kmirror sync --once` and `--interval-ms
//! --max-rounds` run rounds on the free destination, and once the topic failed over the
//! periodic sync ends by itself and `--once` is refused (exit code 1) without writing anything.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use kmirror_harness::sync::local::MetadataDir;
use kmirror_harness::sync::GroupRecord;
use kmirror_harness::wire::fake_broker::{FakeCluster, FakePartition, FakeTopic};
use kmirror_kernel::sync::group_offsets::TopicPartition;
use kmirror_kernel::types::TopicId;

const ORDERS: TopicId = TopicId([1; 16]);

fn kmirror(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kmirror"))
        .args(args)
        .output()
        .expect("run kmirror")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A `kmirror` child, killed when dropped.
struct Serving(Child);

impl Drop for Serving {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A free port on loopback (bound, then let go).
fn free_address() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().to_string()
}

/// `kmirror serve --dest DIR --listen ADDRESS`, once it accepts connections.
fn serve(dir: &str, address: &str) -> Serving {
    let child = Command::new(env!("CARGO_BIN_EXE_kmirror"))
        .args(["serve", "--dest", dir, "--listen", address])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn kmirror serve");
    let serving = Serving(child);
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::net::TcpStream::connect(address).is_err() {
        assert!(Instant::now() < deadline, "kmirror serve never listened");
        std::thread::sleep(Duration::from_millis(20));
    }
    serving
}

/// orders: one partition of 5 batches of two records (LEO 10), on broker 1.
fn fake() -> FakeCluster {
    FakeCluster::start(
        1,
        vec![FakeTopic {
            name: "orders".into(),
            id: ORDERS,
            partitions: vec![FakePartition::with_batches(1, 5, 5)],
        }],
    )
}

fn set_group(meta: &MetadataDir, offset: i64) {
    let record = GroupRecord {
        members: Vec::new(),
        offsets: BTreeMap::from([(TopicPartition::new("orders", 0), offset)]),
    };
    meta.write_group("billing", &record).unwrap();
}

/// The destination's committed offset of billing at orders-0.
fn billing(west: &Path) -> Option<i64> {
    let groups = MetadataDir::of(west).read_groups().unwrap();
    assert!(groups.rejected.is_empty(), "{:?}", groups.rejected);
    groups
        .value
        .get("billing")
        .map(|g| g.offsets[&TopicPartition::new("orders", 0)])
}

/// Every file under `root`'s `metadata/` with its bytes.
fn metadata_files(root: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.join("metadata")];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                out.insert(path.display().to_string(), std::fs::read(&path).unwrap());
            }
        }
    }
    out
}

/// The commands of the node sync, from a mirror with its sync to the end of the sync after a
/// failover.
#[test]
fn the_node_sync_commands_from_the_mirror_to_the_failover() {
    let fake = fake();
    let tmp = tempfile::tempdir().unwrap();
    let east = tmp.path().join("east");
    let west = tmp.path().join("west");
    let (e, w) = (east.to_str().unwrap(), west.to_str().unwrap());

    // The source node: orders mirrored from the fake, a config override and a group.
    let out = kmirror(&[
        "mirror",
        "--source-bootstrap",
        &fake.address(1),
        "--topics",
        "orders",
        "--dest",
        e,
        "--mirror-name",
        "origin",
        "--until-caught-up",
        "--quiet",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let source_meta = MetadataDir::of(&east);
    source_meta
        .write_topic_config(
            "orders",
            &BTreeMap::from([("retention.ms".to_owned(), "86400000".to_owned())]),
        )
        .unwrap();
    set_group(&source_meta, 4);
    let address = free_address();
    let _serving = serve(e, &address);

    // Mirrored with the sync inside the mirror: the last round, once caught up, syncs all.
    let out = kmirror(&[
        "mirror",
        "--source-bootstrap",
        &address,
        "--topics",
        "orders",
        "--dest",
        w,
        "--mirror-name",
        "east",
        "--until-caught-up",
        "--sync-interval-ms",
        "10",
    ]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
    assert!(
        stdout.contains("config   orders SET retention.ms=86400000"),
        "{stdout}"
    );
    // A round while orders-0 still catches up commits at most its LSO there; the commits
    // never go back and end at the source's offset.
    let commits: Vec<(i64, i64)> = stdout
        .lines()
        .filter_map(|l| l.strip_prefix("  offsets  billing orders-0: commit "))
        .map(|rest| {
            let (offset, rest) = rest.split_once(" (source ").unwrap();
            let (source, _) = rest.split_once(',').unwrap();
            (offset.parse().unwrap(), source.parse().unwrap())
        })
        .collect();
    assert!(!commits.is_empty(), "{stdout}");
    assert!(commits.iter().all(|&(_, source)| source == 4), "{stdout}");
    assert!(commits.windows(2).all(|w| w[0].0 < w[1].0), "{stdout}");
    assert_eq!(commits.last(), Some(&(4, 4)), "{stdout}");
    assert_eq!(billing(&west), Some(4));
    assert_eq!(
        MetadataDir::of(&west)
            .read_topic_config("orders")
            .unwrap()
            .value,
        BTreeMap::from([("retention.ms".to_owned(), "86400000".to_owned())])
    );

    // The group moves on at the source; `kmirror sync` on the free destination.
    set_group(&source_meta, 6);
    let sync = ["sync", "--source-bootstrap", &address, "--dest", w];
    let out = kmirror(&[&sync[..], &["--once"]].concat());
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    assert!(
        stdout.contains("offsets  billing orders-0: commit 6 (source 6, was 4)"),
        "{stdout}"
    );
    assert!(
        stdout.contains("1 change(s) written, 0 item(s) rejected"),
        "{stdout}"
    );
    assert_eq!(billing(&west), Some(6));
    let out = kmirror(&[&sync[..], &["--interval-ms", "10", "--max-rounds", "2"]].concat());
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    assert_eq!(stdout.matches("0 change(s) written").count(), 2, "{stdout}");
    assert!(
        stdout.contains("round 1: sync of orders (1/1 partitions)")
            && stdout.contains("round 2: sync of orders (1/1 partitions)")
            && !stdout.contains("round 3"),
        "{stdout}"
    );

    // orders fails over: the node owns its metadata. The periodic sync ends by itself, and
    // --once is refused; neither writes anything, while the source's group moves on.
    let out = kmirror(&["stop", "--dest", w, "--topics", "orders", "--quiet"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    set_group(&source_meta, 8);
    let before = metadata_files(&west);
    let out = kmirror(&[&sync[..], &["--interval-ms", "10"]].concat());
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    assert!(
        stdout
            .contains("round 1: sync of no topic\n  left out orders: mirror.name is east.removed"),
        "{stdout}"
    );
    assert!(
        stdout.ends_with("kmirror: the destination owns its metadata now; sync ends\n"),
        "{stdout}"
    );
    let out = kmirror(&[&sync[..], &["--once"]].concat());
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}{}", text(&out.stderr));
    assert!(
        stdout.starts_with("sync of no topic\n  left out orders: mirror.name is east.removed"),
        "{stdout}"
    );
    assert_eq!(
        metadata_files(&west),
        before,
        "nothing written after the stop"
    );
    assert_eq!(billing(&west), Some(6));

    // A round needs --once or --interval-ms.
    let out = kmirror(&sync);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("--once") && text(&out.stderr).contains("--interval-ms"),
        "{}",
        text(&out.stderr)
    );
}
