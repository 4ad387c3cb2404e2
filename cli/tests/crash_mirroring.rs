//! Crash safety while mirroring, at many kill points: the `kmirror mirror` process is halted
//! right after its N-th effect (`--halt-after-effects N`: a write boundary, a fetch round
//! appended or a state written) and SIGKILLed there, under both flush policies.
//!
//! - **Every effect of a first run**: from an empty destination, a kill after effect 1, 2, 3...
//!   until a run finishes (creation, PREPARING, the first fetch rounds), each point from a fresh
//!   copy.
//! - **Chains across a whole mirroring**: killed after a seeded random 1 to 12 effects, restarted,
//!   killed again, until the destination has caught up (hundreds of fetch rounds).
//!
//! After every kill: the destination reopens, is a byte prefix of the source, lost nothing below
//! an earlier high watermark, its followers agree below their high watermarks, its state is
//! PREPARING or MIRRORING and only moves forward. Then a copy gets a **machine crash** (each
//! replica loses a seeded random tail past its recovery point, cut at a write boundary or torn
//! inside a batch): it must reopen with nothing below the high watermark lost, a restart must
//! converge to the source byte for byte, and `kmirror verify` must pass. The counts are printed.

mod common;

use std::fs;
use std::path::Path;

use common::*;
use kmirror_kernel::state::MirrorState;

/// Writes the source `root/east`; returns its batches.
fn source(root: &Path, repeat: u32) -> Vec<Vec<u8>> {
    let repeat = repeat.to_string();
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
            &repeat,
            "plain:3",
            "idem:1:2",
            "txn:7:2",
            "plain:1",
            "commit:7",
            "txn:8:1",
            "abort:8",
            "idem:1:1",
            "bump-epoch",
        ],
    );
    leader_bytes(&view(&root.join("east"), "-").unwrap())
}

fn mirror_template(flush: &'static str) -> Vec<&'static str> {
    let mut t = MIRROR.to_vec();
    t.extend(["--flush", flush]);
    t
}

/// What a kill while mirroring may leave. Returns the high watermark.
fn check_killed_mirroring(
    root: &Path,
    source: &[Vec<u8>],
    last_hw: i64,
    last_state_epoch: &mut i32,
    what: &str,
) -> i64 {
    let Some(v) = view(&root.join("west"), "east") else {
        return last_hw; // killed while creating the destination
    };
    assert!(
        is_prefix(&leader_bytes(&v), source),
        "{what}: not a prefix of the source"
    );
    assert!(
        v.leo >= last_hw,
        "{what}: LEO {} below the earlier HW {last_hw}",
        v.leo
    );
    check_followers(&v, what, false);
    if let Some(s) = &v.state {
        assert!(
            matches!(s.state, MirrorState::Preparing | MirrorState::Mirroring),
            "{what}: {s:?}"
        );
        assert!(
            s.state_epoch >= *last_state_epoch,
            "{what}: state epoch went back"
        );
        *last_state_epoch = s.state_epoch;
    }
    assert!(!v.writable, "{what}: writable while mirroring");
    v.hw
}

/// Restarts `root`'s mirror to the end and checks it converged byte for byte and verifies.
fn converge(root: &Path, source: &[Vec<u8>], flush: &'static str, what: &str) {
    run_ok(root, &mirror_template(flush));
    let v = view(&root.join("west"), "east").unwrap();
    if let Err(e) = same(&leader_bytes(&v), source) {
        panic!("{what}: no convergence after the restart: {e}");
    }
    assert_eq!(v.hw, v.leo, "{what}");
    assert_eq!(
        v.state.map(|s| s.state),
        Some(MirrorState::Mirroring),
        "{what}"
    );
    verify_ok(root, "{}/west");
}

#[test]
fn every_effect_of_a_first_mirroring_run() {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().join("base");
    let source = source(&base, 3);
    let mut rng = Rng(0x5eed_0001);
    let (mut kills, mut crashes, mut cut) = (0, 0, 0);
    for flush in ["kafka", "every-append"] {
        for n in 1.. {
            let root = tmp.path().join(format!("{flush}-{n}"));
            copy_dir(&base.join("east"), &root.join("east"));
            if !run_halted(&root, &mirror_template(flush), n) {
                break;
            }
            kills += 1;
            let what = format!("first run (--flush {flush}), kill after effect {n}");
            let copy = tmp.path().join("machine-crash");
            cut +=
                check_machine_crash_with(&root, &copy, &source, &mut rng, &mirror_template(flush));
            crashes += 1;
            check_killed_mirroring(&root, &source, 0, &mut -1, &what);
            converge(&root, &source, flush, &what);
            fs::remove_dir_all(&root).unwrap();
        }
    }
    kmirror_testsupport::crash_counts::report(
        "crash_mirroring, first run",
        kills as u64,
        0,
        &format!("{crashes} machine crashes ({cut} replica tails cut or torn)"),
    );
    assert!(kills >= 40, "only {kills} kill points");
    assert!(cut >= 1, "no machine crash cut a tail");
}

/// One chain per flush policy: killed again and again until caught up.
fn chain(flush: &'static str, seed: u64) -> (usize, usize, usize) {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let source = source(root, 20);
    let mut rng = Rng(seed);
    let (mut kills, mut crashes, mut cut) = (0, 0, 0);
    let (mut last_hw, mut last_state_epoch) = (0, -1);
    loop {
        let n = rng.between(1, 12);
        if !run_halted(root, &mirror_template(flush), n) {
            break;
        }
        kills += 1;
        let what = format!("chain (--flush {flush}), kill {kills} after effect {n}");
        // The copy restarts under the default policy (the crash already happened).
        cut += check_machine_crash(root, &root.join("machine-crash"), &source, &mut rng);
        crashes += 1;
        last_hw = check_killed_mirroring(root, &source, last_hw, &mut last_state_epoch, &what);
    }
    converge(root, &source, flush, &format!("chain (--flush {flush})"));
    (kills, crashes, cut)
}

#[test]
fn kill_chains_across_a_whole_mirroring() {
    let (mut kills, mut crashes, mut cut) = (0, 0, 0);
    for (flush, seed) in [("kafka", 0x5eed_0002), ("every-append", 0x5eed_0003)] {
        let (k, c, t) = chain(flush, seed);
        assert!(k >= 30, "--flush {flush}: only {k} kill points");
        kills += k;
        crashes += c;
        cut += t;
    }
    kmirror_testsupport::crash_counts::report(
        "crash_mirroring, chains",
        kills as u64,
        0,
        &format!("{crashes} machine crashes ({cut} replica tails cut or torn)"),
    );
    assert!(cut >= 10, "only {cut} machine crashes cut a tail");
}
