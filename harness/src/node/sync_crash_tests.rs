//! Kill points inside the node's metadata sync rounds: a node mirroring two topics runs four
//! sync rounds against a changing source (configs set and deleted, offsets committed for many
//! groups, ACLs created and deleted), with a stop of one topic between the third round's read
//! and its writes. The run is halted right after its N-th sync write, for every N
//! ([`NodeSync::halt_after_writes`]), and the driver dropped without closing (a SIGKILL); at
//! each kill point but the last, the next write is also torn (half its file left as the
//! `.tmp` an atomic write would have left). After every kill:
//!
//! - **recovery**: the node reopens and its metadata files read back;
//! - **nothing acknowledged lost, nothing extra**: the metadata is exactly the previous kill
//!   point's plus the one file the N-th write wrote;
//! - **no sync write after a stop**: from the stop request on, the stopped topic's config, its
//!   offsets in every group and its ACLs never change;
//! - **a restart converges**: reopened, stopped if the kill came before the stop, and synced
//!   until a round writes nothing, the still-mirrored topic's metadata equals an uninterrupted
//!   run's, and the stopped topic's is untouched by the restart.
//!
//! The test prints its counts.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use kmirror_kernel::controller::MirrorRequest;
use kmirror_kernel::desired::DesiredState;

use super::fixture::*;
use super::*;
use crate::clock::ManualClock;
use crate::sync::local::MetadataDir;
use crate::sync::SyncError;
use crate::wire::fake_broker::FakeCluster;

/// Consumer groups of the scenario (each round commits for each).
const GROUPS: i64 = 16;

/// The source's metadata at phase `k` (1 to 4).
fn phase(src: &DirSource, k: i64) {
    let retention = (1_000 * k).to_string();
    if k == 1 {
        src.set_config(
            "orders",
            &[("retention.ms", &retention), ("cleanup.policy", "compact")],
        );
    } else {
        src.set_config("orders", &[("retention.ms", &retention)]);
    }
    src.set_config("pay.eu", &[("segment.ms", &(3_600_000 + k).to_string())]);
    for g in 0..GROUPS {
        src.set_group(
            &format!("g{g}"),
            &[
                ("orders", 2, 2 * k + g % 2),
                ("pay.eu", i32::from(g % 2 == 1), k - 1),
            ],
        );
    }
    let app = format!("User:app-{k}");
    let mut acls = vec![
        acl("TOPIC", "pay.eu", &app, "WRITE"),
        acl("GROUP", "g0", "User:app", "READ"),
    ];
    if k <= 2 {
        acls.push(acl("TOPIC", "orders", "User:app", "READ"));
    }
    src.set_acls(&acls);
}

/// Every file under `root`'s `metadata/`, by path relative to it.
fn metadata_files(root: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    fn walk(base: &Path, dir: &Path, out: &mut BTreeMap<PathBuf, Vec<u8>>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries {
            let path = e.unwrap().path();
            if path.is_dir() {
                walk(base, &path, out);
            } else {
                let rel = path.strip_prefix(base).unwrap().to_path_buf();
                out.insert(rel, std::fs::read(&path).unwrap());
            }
        }
    }
    let base = root.join(crate::sync::local::METADATA_DIR);
    let mut out = BTreeMap::new();
    walk(&base, &base, &mut out);
    out
}

/// One topic's metadata on the destination: its config, its offsets in every group, the ACL
/// bindings on it (and whether the mirror created them).
fn topic_view(root: &Path, topic: &str) -> String {
    let meta = MetadataDir::of(root);
    let config = meta.read_topic_config(topic).unwrap();
    assert!(config.rejected.is_empty(), "{:?}", config.rejected);
    let groups = meta.read_groups().unwrap();
    assert!(groups.rejected.is_empty(), "{:?}", groups.rejected);
    let offsets: Vec<String> = groups
        .value
        .iter()
        .flat_map(|(g, r)| {
            r.offsets
                .iter()
                .filter(|(tp, _)| tp.topic == topic)
                .map(move |(tp, o)| format!("{g} {tp}={o}"))
        })
        .collect();
    let acls = meta.read_acls().unwrap().unwrap();
    let on = |list: &[kmirror_kernel::sync::acl::RawAclBinding]| -> Vec<String> {
        list.iter()
            .filter(|b| b.resource_name == topic)
            .map(|b| format!("{b:?}"))
            .collect()
    };
    format!(
        "{:?}\n{offsets:?}\n{:?}\n{:?}",
        config.value,
        on(&acls.bindings),
        on(&acls.created_by_mirror)
    )
}

/// The still-mirrored topic's view plus the group ACLs.
fn mirrored_view(root: &Path) -> String {
    let acls = MetadataDir::of(root).read_acls().unwrap().unwrap();
    let groups: Vec<String> = acls
        .bindings
        .iter()
        .filter(|b| b.resource_type == "GROUP")
        .map(|b| format!("{b:?}"))
        .collect();
    format!("{}\n{groups:?}", topic_view(root, "pay.eu"))
}

/// Stops orders (no source needed) and drives the node until it settles.
fn stop_orders(driver: &mut NodeDriver, clock: &mut ManualClock) {
    let source = driver.set_source(None);
    let results = driver
        .request(
            &MirrorRequest::RemoveTopics {
                mirror: east().to_string(),
                topics: vec!["orders".into()],
            },
            clock.now_ms,
        )
        .unwrap();
    assert!(results["orders"].is_ok(), "{results:?}");
    driver
        .run(clock, NodeUntil::Settled, &mut |_, _| {})
        .unwrap();
    driver.set_source(source);
}

/// Starts leading every partition, as the mirroring process has (no fetch: the source is
/// set aside), and drives the node until it settles.
fn lead(driver: &mut NodeDriver, clock: &mut ManualClock) {
    let source = driver.set_source(None);
    driver
        .run(clock, NodeUntil::Settled, &mut |_, _| {})
        .unwrap();
    driver.set_source(source);
}

/// What a run of the scenario did.
struct Run {
    /// Sync writes before the stop was requested (`None`: the run was killed before it).
    stop_after: Option<u64>,
    /// `Err(Halted)` when killed.
    outcome: Result<(), SyncError>,
}

/// Four rounds, the third in flight across the stop of orders; halted after the `halt`-th
/// write, and then the driver is dropped without closing.
fn scenario(fake: &FakeCluster, root: &Path, src: &mut DirSource, halt: Option<u64>) -> Run {
    let mut driver = NodeDriver::open(root, Some(source(fake, BOTH)), options()).unwrap();
    let mut clock = ManualClock { now_ms: 1_000 };
    lead(&mut driver, &mut clock);
    let mut sync = NodeSync::new(NodeSyncPolicy::default(), 1);
    if let Some(n) = halt {
        sync = sync.halt_after_writes(n);
    }
    let mut stop_after = None;
    let outcome = rounds(&mut driver, &mut sync, src, &mut clock, &mut stop_after);
    if outcome.is_ok() {
        driver.close().unwrap();
    }
    // Killed: dropped as it is, nothing flushed or closed.
    Run {
        stop_after,
        outcome,
    }
}

/// The scenario's rounds; `stop_after` gets the writes before the stop request.
fn rounds(
    driver: &mut NodeDriver,
    sync: &mut NodeSync,
    src: &mut DirSource,
    clock: &mut ManualClock,
    stop_after: &mut Option<u64>,
) -> Result<(), SyncError> {
    for k in 1..=2 {
        phase(src, k);
        sync.round(driver, src)?;
    }
    phase(src, 3);
    let pending = sync.read(driver, src)?;
    *stop_after = Some(sync.writes());
    stop_orders(driver, clock);
    let report = sync.land(driver, pending)?;
    assert!(report.refused() >= 2, "{}", report.render());
    phase(src, 4);
    sync.round(driver, src)?;
    Ok(())
}

/// The changed files between two snapshots.
fn changed(
    before: &BTreeMap<PathBuf, Vec<u8>>,
    after: &BTreeMap<PathBuf, Vec<u8>>,
) -> Vec<PathBuf> {
    let mut paths: Vec<&PathBuf> = before.keys().chain(after.keys()).collect();
    paths.sort();
    paths.dedup();
    paths
        .into_iter()
        .filter(|p| before.get(*p) != after.get(*p))
        .cloned()
        .collect()
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        if e.path().is_dir() {
            copy_dir(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), target).unwrap();
        }
    }
}

/// After a kill: reopen (recovery), stop orders if the kill came before its stop, sync until
/// a round writes nothing; returns the stopped topic's view before and after the rounds.
fn restart(fake: &FakeCluster, root: &Path, src: &mut DirSource) -> (String, String) {
    let mut driver = NodeDriver::open(root, Some(source(fake, BOTH)), options()).unwrap();
    phase(src, 4);
    let stopped = matches!(
        driver.dest().meta().topics["orders"]
            .desired("orders")
            .unwrap(),
        DesiredState::Stop(_)
    );
    let mut clock = ManualClock { now_ms: 1_000 };
    lead(&mut driver, &mut clock);
    if !stopped {
        stop_orders(&mut driver, &mut clock);
    }
    let before = topic_view(root, "orders");
    let mut sync = NodeSync::new(NodeSyncPolicy::default(), 1);
    let mut quiet = false;
    for _ in 0..3 {
        let report = sync.round(&driver, src).unwrap();
        assert!(
            report.left_out.iter().any(|(t, _)| t == "orders"),
            "{}",
            report.render()
        );
        if report.written() == 0 {
            quiet = true;
            break;
        }
    }
    assert!(quiet, "the restart does not converge");
    driver.close().unwrap();
    (before, topic_view(root, "orders"))
}

#[test]
fn kills_after_every_sync_write_lose_nothing_and_converge() {
    let fake = fake();
    // No machine crash is simulated (each metadata write is atomic and fsynced): the kill
    // points run on a RAM disk when there is one, 80 directories' worth of fsyncs.
    let shm = Path::new("/dev/shm");
    let tmp = if shm.is_dir() {
        tempfile::tempdir_in(shm).unwrap()
    } else {
        tempfile::tempdir().unwrap()
    };
    // The template: both topics mirrored and caught up.
    let template = tmp.path().join("template");
    {
        let mut driver = added(&fake, &template);
        let mut clock = ManualClock::default();
        for _ in 0..10_000 {
            clock.now_ms += 10;
            driver.run_once(clock.now_ms).unwrap();
            if driver.all_caught_up() {
                break;
            }
        }
        assert!(driver.all_caught_up());
        driver.close().unwrap();
    }

    // An uninterrupted run: the writes, the stop point, the end state.
    let reference = tmp.path().join("reference");
    copy_dir(&template, &reference);
    let mut src = DirSource::new(&tmp.path().join("east-0"), &fake);
    let run = scenario(&fake, &reference, &mut src, None);
    run.outcome.unwrap();
    let stop_after = run.stop_after.unwrap();
    let final_view = mirrored_view(&reference);

    let mut previous = metadata_files(&template);
    let mut at_stop: Option<String> = None;
    let (mut kills, mut torn, mut after_stop) = (0u64, 0u64, 0u64);
    let mut by_kind: BTreeMap<&str, u64> = BTreeMap::new();
    let mut snapshots = Vec::new();
    for n in 1.. {
        let root = tmp.path().join(format!("kill-{n}"));
        copy_dir(&template, &root);
        let mut src = DirSource::new(&tmp.path().join(format!("east-{n}")), &fake);
        let run = scenario(&fake, &root, &mut src, Some(n));
        match run.outcome {
            Err(SyncError::Halted { writes }) => assert_eq!(writes, n),
            Ok(()) => break,
            Err(e) => panic!("kill point {n}: {e}"),
        }
        kills += 1;
        let files = metadata_files(&root);
        let written = changed(&previous, &files);
        assert_eq!(
            written.len(),
            1,
            "kill point {n}: the metadata must be the previous kill point's plus one write, \
             found {written:?} changed"
        );
        let kind = match written[0].components().next().unwrap().as_os_str().to_str() {
            Some("topic-configs") => "config",
            Some("consumer-offsets") => "offsets",
            _ => "acl",
        };
        *by_kind.entry(kind).or_default() += 1;
        if n == stop_after {
            at_stop = Some(topic_view(&root, "orders"));
        }
        if n > stop_after {
            after_stop += 1;
            assert_eq!(
                topic_view(&root, "orders"),
                *at_stop.as_ref().unwrap(),
                "kill point {n}: a sync write changed orders after its stop was requested"
            );
        }
        snapshots.push((root, files.clone()));
        previous = files;
    }
    assert!(kills >= 40, "only {kills} kill points");

    // Tear the next write at every kill point but the last, then restart each.
    for i in 0..snapshots.len() {
        let (root, files) = &snapshots[i];
        if let Some((_, next)) = snapshots.get(i + 1) {
            let path = &changed(files, next)[0];
            let bytes = &next[path];
            let meta = root.join(crate::sync::local::METADATA_DIR);
            let mut tmp_name = path.file_name().unwrap().to_os_string();
            tmp_name.push(".tmp");
            let dir = meta.join(path.parent().unwrap());
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join(tmp_name), &bytes[..bytes.len() / 2]).unwrap();
            torn += 1;
        }
        let n = i + 1;
        let mut src = DirSource::new(&tmp.path().join(format!("east-{n}")), &fake);
        let (before, after) = restart(&fake, root, &mut src);
        assert_eq!(
            before, after,
            "kill point {n}: the restart's sync changed the stopped topic"
        );
        assert_eq!(
            mirrored_view(root),
            final_view,
            "kill point {n}: the restart did not converge"
        );
    }
    kmirror_testsupport::crash_counts::report(
        "node sync crash test",
        kills,
        torn,
        &format!(
            "kill points after sync writes ({} config, {} offsets, {} acl), {after_stop} of them \
             after a stop; every restart converged",
            by_kind.get("config").unwrap_or(&0),
            by_kind.get("offsets").unwrap_or(&0),
            by_kind.get("acl").unwrap_or(&0),
        ),
    );
}
