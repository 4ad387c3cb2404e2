//! Crash safety of failover (`kmirror stop`, both stop strategies) and failback (`kmirror
//! start`), at every effect: each kill point starts from a fresh copy of the same directories,
//! the process is halted right after its N-th effect (`--halt-after-effects N`) and SIGKILLed.
//!
//! After every kill, on the files left: nothing below the LSO the stop started from is lost,
//! the epoch is bumped at most once, at most one `MIRROR_PID_RESET` exists, the partition is
//! writable only once STOPPED is persisted (persist first, act after), the log past the LSO is
//! the mirrored tail or the destination's own markers. Then a copy gets a **machine crash**
//! (every replica loses a seeded random tail past its recovery point, cut at a write boundary or
//! torn inside a batch) and both the copy and the original are restarted to the end: STOPPED
//! and writable with exactly one `MIRROR_PID_RESET` after the kept bytes (failover), or a byte
//! copy of the new source (failback), and `kmirror verify` passes. The counts are printed.

mod common;

use std::fs;
use std::path::Path;

use common::*;
use kmirror_kernel::batch::ControlType;
use kmirror_kernel::state::MirrorState;
use kmirror_kernel::types::Offset;

/// East mirrored into west, then half a transaction mirrored: the state every failover kill
/// starts from. Returns west's LSO.
fn mirrored_with_open_transaction(root: &Path) -> Offset {
    run_ok(
        root,
        &[
            "produce",
            "--dir",
            "{}/east",
            "--topic",
            "orders",
            "--segment-bytes",
            "4096",
            "--timestamp",
            "1000",
            "--repeat",
            "6",
            "plain:3",
            "idem:1:2",
            "txn:7:2",
            "commit:7",
            "bump-epoch",
        ],
    );
    run_ok(root, MIRROR);
    run_ok(
        root,
        &[
            "produce",
            "--dir",
            "{}/east",
            "--timestamp",
            "2000",
            "txn:9:2",
            "txn:9:1",
            "txn:10:1",
            "commit:9",
            "plain:1",
        ],
    );
    run_ok(
        root,
        &[
            "mirror",
            "--source",
            "{}/east",
            "--dest",
            "{}/west",
            "--max-fetches",
            "2",
            "--max-batches",
            "1",
            "-q",
        ],
    );
    let v = view(&root.join("west"), "east").unwrap();
    assert!(v.lso < v.leo, "west holds an open transaction");
    v.lso
}

/// What failover must keep: the leader's bytes below the LSO, the source's bytes, the epoch.
struct Failover<'a> {
    strategy: &'a str,
    lso0: Offset,
    kept: Vec<Vec<u8>>,
    source: Vec<Vec<u8>>,
    epoch0: i32,
}

impl Failover<'_> {
    fn stop(&self) -> Vec<&str> {
        let mut t = STOP.to_vec();
        t.extend(["--stop-strategy", self.strategy]);
        t
    }

    /// The leader is the mirrored bytes (a prefix of the source holding everything below the
    /// LSO) followed by the destination's own markers only. Returns the markers.
    fn check_log(&self, v: &View, what: &str) -> Vec<ControlType> {
        let leader = leader_bytes(v);
        if let Err(e) = same(&below(&leader, self.lso0), &self.kept) {
            panic!("{what}: lost data below the LSO: {e}");
        }
        let mirrored = leader
            .iter()
            .zip(&self.source)
            .take_while(|(a, b)| a == b)
            .count();
        assert!(mirrored >= self.kept.len(), "{what}: lost mirrored data");
        let own: Vec<ControlType> = v.replicas[0][mirrored..]
            .iter()
            .map(|(b, c)| c.unwrap_or_else(|| panic!("{what}: a data batch at {}", base_offset(b))))
            .collect();
        let resets = own
            .iter()
            .filter(|c| **c == ControlType::MirrorPidReset)
            .count();
        assert!(resets <= 1, "{what}: {resets} MIRROR_PID_RESET batches");
        if resets == 1 {
            assert_eq!(own.last(), Some(&ControlType::MirrorPidReset), "{what}");
        }
        if self.strategy == "truncate-to-lso" {
            assert!(
                own.iter().all(|c| *c == ControlType::MirrorPidReset),
                "{what}: {own:?}"
            );
            assert!(
                own.is_empty() || leader.len() == self.kept.len() + 1,
                "{what}: the reset is not right after the LSO"
            );
        } else {
            assert!(
                own.iter()
                    .all(|c| matches!(c, ControlType::Abort | ControlType::MirrorPidReset)),
                "{what}: {own:?}"
            );
        }
        assert!(v.leader_epoch >= self.epoch0, "{what}: the epoch went back");
        own
    }

    /// After a kill mid-failover.
    fn check_killed(&self, v: &View, what: &str) {
        self.check_log(v, what);
        assert!(
            matches!(v.mirror_name.as_deref(), Some("east" | "east.removed")),
            "{what}"
        );
        let state = v.state.as_ref().map(|s| s.state);
        assert!(
            matches!(
                state,
                Some(MirrorState::Mirroring | MirrorState::Stopping | MirrorState::Stopped)
            ),
            "{what}: {state:?}"
        );
        assert!(
            !v.writable || state == Some(MirrorState::Stopped),
            "{what}: writable before STOPPED"
        );
        check_followers(v, what, true);
    }

    /// Runs the stop to the end in `root` and checks the outcome.
    fn finish(&self, root: &Path, what: &str) {
        run_ok(root, &self.stop());
        let v = view(&root.join("west"), "east").unwrap();
        let own = self.check_log(&v, what);
        assert_eq!(
            v.state.as_ref().map(|s| s.state),
            Some(MirrorState::Stopped),
            "{what}"
        );
        assert!(v.writable, "{what}: not writable after STOPPED");
        assert_eq!(own.last(), Some(&ControlType::MirrorPidReset), "{what}");
        let epoch_of = |b: &[u8]| i32::from_be_bytes(b[12..16].try_into().unwrap());
        let leader = leader_bytes(&v);
        let mirrored_max = leader[..leader.len() - own.len()]
            .iter()
            .map(|b| epoch_of(b))
            .max()
            .unwrap_or(-1);
        assert!(
            epoch_of(leader.last().unwrap()) > mirrored_max,
            "{what}: MIRROR_PID_RESET not above the mirrored epochs"
        );
        for (i, f) in v.replicas.iter().enumerate().skip(1) {
            if let Err(e) = same(&replica_keys(f), &replica_keys(&v.replicas[0])) {
                panic!("{what}: follower {i} not caught up after the stop: {e}");
            }
        }
        verify_ok(root, "{}/west");
    }
}

#[test]
fn every_effect_of_a_failover() {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().join("base");
    let lso0 = mirrored_with_open_transaction(&base);
    let v = view(&base.join("west"), "east").unwrap();
    let mut rng = Rng(0x5eed_0010);
    let (mut kills, mut crashes, mut cut) = (0, 0, 0);
    for strategy in ["truncate-to-lso", "abort-open-transactions"] {
        let f = Failover {
            strategy,
            lso0,
            kept: below(&leader_bytes(&v), lso0),
            source: leader_bytes(&view(&base.join("east"), "-").unwrap()),
            epoch0: v.leader_epoch,
        };
        let mut epochs = Vec::new();
        for n in 1.. {
            let root = tmp.path().join(format!("{strategy}-{n}"));
            copy_dir(&base, &root);
            if !run_halted(&root, &f.stop(), n) {
                f.finish(&root, &format!("{strategy}, no kill"));
                break;
            }
            kills += 1;
            let what = format!("failover ({strategy}), kill after effect {n}");
            let copy = tmp.path().join("machine-crash");
            let (floor, hw, c) = machine_crash_copy(&root, &copy, "west", &mut rng).unwrap();
            cut += c;
            crashes += 1;
            let crashed = format!("{what}, machine crash");
            let cv = view(&copy.join("west"), "east").unwrap();
            check_nothing_below_hw_lost(&cv, floor, hw, &crashed);
            f.check_killed(&cv, &crashed);
            f.finish(&copy, &crashed);
            fs::remove_dir_all(&copy).unwrap();

            let v = view(&root.join("west"), "east").unwrap();
            f.check_killed(&v, &what);
            f.finish(&root, &what);
            let v = view(&root.join("west"), "east").unwrap();
            if !epochs.contains(&v.leader_epoch) {
                epochs.push(v.leader_epoch);
            }
            fs::remove_dir_all(&root).unwrap();
        }
        // Wherever the stop was killed, it ends at the same leader epoch (bumped once at most).
        assert_eq!(epochs.len(), 1, "{strategy}: final epochs {epochs:?}");
    }
    kmirror_testsupport::crash_counts::report(
        "crash_failover, failover",
        kills as u64,
        0,
        &format!("{crashes} machine crashes ({cut} replica tails cut or torn)"),
    );
    assert!(kills >= 16, "only {kills} kill points");
}

#[test]
fn every_effect_of_a_failback() {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().join("base");
    mirrored_with_open_transaction(&base);
    run_ok(&base, STOP);
    // West takes local writes; east took writes west never saw.
    run_ok(
        &base,
        &[
            "produce",
            "--dir",
            "{}/west",
            "--timestamp",
            "3000",
            "--repeat",
            "12",
            "plain:5",
            "idem:1:3",
            "txn:4:2",
            "commit:4",
        ],
    );
    run_ok(
        &base,
        &[
            "produce",
            "--dir",
            "{}/east",
            "--timestamp",
            "3000",
            "plain:2",
            "txn:12:1",
        ],
    );
    let west = leader_bytes(&view(&base.join("west"), "east").unwrap());
    let east_before = leader_bytes(&view(&base.join("east"), "west").unwrap());
    // The divergence point: what east and west share.
    let common = east_before
        .iter()
        .zip(&west)
        .take_while(|(a, b)| a == b)
        .count();
    let check = |v: &View, what: &str| {
        let leader = leader_bytes(v);
        if let Err(e) = same(&leader[..common.min(leader.len())], &west[..common]) {
            panic!("{what}: east lost the history it shares with west: {e}");
        }
        assert!(
            leader == east_before || is_prefix(&leader, &west),
            "{what}: east is neither untouched nor a prefix of west"
        );
        let state = v.state.as_ref().map(|s| s.state);
        assert!(
            matches!(
                state,
                None | Some(MirrorState::Preparing | MirrorState::Mirroring)
            ),
            "{what}: {state:?}"
        );
        assert!(
            !v.writable || state.is_none(),
            "{what}: writable while mirroring"
        );
    };
    let finish = |root: &Path, what: &str| {
        run_ok(root, FAILBACK);
        let v = view(&root.join("east"), "west").unwrap();
        assert_eq!(
            v.state.as_ref().map(|s| s.state),
            Some(MirrorState::Mirroring),
            "{what}"
        );
        if let Err(e) = same(&leader_bytes(&v), &west) {
            panic!("{what}: east did not catch up with west: {e}");
        }
        verify_ok(root, "{}/east");
    };
    let mut rng = Rng(0x5eed_0011);
    let (mut kills, mut crashes, mut cut) = (0, 0, 0);
    // Every effect of PREPARING and the first fetch rounds, then seeded strides to the end.
    let mut n = 0;
    loop {
        n += if n < 40 { 1 } else { rng.between(1, 4) };
        let root = tmp.path().join(format!("failback-{n}"));
        copy_dir(&base, &root);
        if !run_halted(&root, FAILBACK, n) {
            break;
        }
        kills += 1;
        let what = format!("failback, kill after effect {n}");
        let copy = tmp.path().join("machine-crash");
        let (floor, hw, c) = machine_crash_copy(&root, &copy, "east", &mut rng).unwrap();
        cut += c;
        crashes += 1;
        let crashed = format!("{what}, machine crash");
        let cv = view(&copy.join("east"), "west").unwrap();
        check_nothing_below_hw_lost(&cv, floor, hw, &crashed);
        check(&cv, &crashed);
        finish(&copy, &crashed);
        fs::remove_dir_all(&copy).unwrap();

        check(&view(&root.join("east"), "west").unwrap(), &what);
        finish(&root, &what);
        fs::remove_dir_all(&root).unwrap();
    }
    kmirror_testsupport::crash_counts::report(
        "crash_failover, failback",
        kills as u64,
        0,
        &format!("{crashes} machine crashes ({cut} replica tails cut or torn)"),
    );
    assert!(kills >= 40, "only {kills} kill points");
}
