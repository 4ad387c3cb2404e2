//! Crash safety of the `kmirror` binary: it is SIGKILLed at pseudo-random points (fixed seeds)
//! while mirroring, failing over and failing back, then restarted. After every kill the test
//! checks, on the files the killed process left:
//!
//! - nothing acknowledged is lost: what the destination held below its high watermark (and,
//!   across a stop, below the LSO it stopped at) is still there;
//! - the destination is a prefix of the source, byte for byte;
//! - each replica's leader-epoch checkpoint matches its log (it may only run ahead of the log,
//!   as Kafka's does when an append dies after assigning the epoch);
//! - the persisted mirror state only moves forward, the epoch is bumped at most once per stop,
//!   at most one MIRROR_PID_RESET is written, and a restart resumes from the persisted state.
//!
//! A SIGKILL loses nothing the process wrote (the page cache survives it). A machine crash
//! also loses what was not fsynced, which under `--flush kafka` (the default) is any tail of
//! mirrored batches past a log's recovery point. So after each kill while mirroring, a copy of
//! the destination also gets a **machine crash**: every replica's log loses a random tail past
//! its recovery point, cut at a write boundary of a fetch round or inside a batch (a torn
//! write), later segments gone. The copy must reopen (the tail cut), still be a prefix of the
//! source with nothing below a high watermark lost, and a restart must converge with the source.

mod common;

use std::time::Instant;

use common::*;
use kmirror_kernel::batch::ControlType;
use kmirror_kernel::state::MirrorState;

#[test]
fn sigkill_at_random_points_loses_nothing_acknowledged() {
    let started = Instant::now();
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let (east, west) = (root.join("east"), root.join("west"));
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);

    // The source: many small segments, plain, idempotent and transactional batches, epochs.
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
            "60",
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
    let source = view(&east, "-").unwrap();
    let source_bytes = leader_bytes(&source);

    // Phase A: mirroring, killed again and again.
    let mut last_hw = 0;
    let mut last_state_epoch = -1;
    let mut kills = 0;
    let (mut machine_crashes, mut tails_cut) = (0, 0);
    for attempt in 0..16 {
        // Both flush policies get killed: `kafka` (the default) leaves mirrored batches in the
        // page cache, `every-append` fsyncs each fetch round (and is slower, so more kills land
        // before it catches up).
        let flush = if attempt % 2 == 0 {
            "kafka"
        } else {
            "every-append"
        };
        let mut template = MIRROR.to_vec();
        template.extend(["--flush", flush]);
        // The first kills, and every other one after, land right after a random effect (a
        // write boundary: a fetch round appended, a state written), so that kills land however
        // fast this machine mirrors; the others at a random time.
        let (killed, at) = if attempt < 4 || attempt % 2 == 0 {
            let n = rng.between(5, 60);
            (run_halted(root, &template, n), format!("effect {n}"))
        } else {
            let delay = rng.between(10, 150);
            (run_killed(root, &template, delay), format!("{delay} ms"))
        };
        if !killed {
            break;
        }
        kills += 1;
        // Before anything reopens (and so recovers) the original.
        let copy = root.join(format!("machine-crash-{kills}"));
        tails_cut += check_machine_crash(root, &copy, &source_bytes, &mut rng);
        machine_crashes += 1;
        let Some(v) = view(&west, "east") else {
            continue;
        };
        let what = format!("mirroring (--flush {flush}), kill {kills} after {at}");
        let leader = leader_bytes(&v);
        assert!(
            is_prefix(&leader, &source_bytes),
            "{what}: not a prefix of the source"
        );
        assert!(
            v.leo >= last_hw,
            "{what}: LEO {} below the earlier HW {last_hw}",
            v.leo
        );
        check_followers(&v, &what, false);
        if let Some(s) = &v.state {
            assert!(
                matches!(s.state, MirrorState::Preparing | MirrorState::Mirroring),
                "{what}: {s:?}"
            );
            assert!(
                s.state_epoch >= last_state_epoch,
                "{what}: state epoch went back"
            );
            last_state_epoch = s.state_epoch;
        }
        assert!(!v.writable, "{what}: writable while mirroring");
        eprintln!(
            "{what}: {:?}, LEO {}, HW {}",
            v.state.as_ref().map(|s| s.state),
            v.leo,
            v.hw
        );
        last_hw = v.hw;
    }
    assert!(kills >= 3, "only {kills} kills landed while mirroring");
    assert!(tails_cut >= 1, "no machine crash cut a tail");
    let before = view(&west, "east").and_then(|v| v.state.map(|s| s.state));
    let out = run_ok(root, MIRROR);
    if before == Some(MirrorState::Mirroring) {
        // The restarted kernel resumed MIRRORING, not PREPARING again: it re-asserts the
        // record when an earlier leadership wrote it, and writes nothing when this one did.
        if let Some(first) = out.lines().find(|l| l.contains("persisted")) {
            assert!(first.contains("state MIRRORING persisted"), "{out}");
        }
        assert!(!out.contains("state PREPARING persisted"), "{out}");
    }
    let v = view(&west, "east").unwrap();
    if let Err(e) = same(&leader_bytes(&v), &source_bytes) {
        panic!("not caught up after the kills: {e}");
    }
    assert_eq!(v.hw, v.leo);
    verify_ok(root, "{}/west");

    // Phase B: half a transaction mirrored, then a failover killed again and again.
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
    let v = view(&west, "east").unwrap();
    assert!(v.lso < v.leo, "west holds an open transaction");
    let lso0 = v.lso;
    let epoch0 = v.leader_epoch;
    let kept = below(&leader_bytes(&v), lso0);
    let source_now = leader_bytes(&view(&east, "-").unwrap());
    let mut epochs_seen = vec![epoch0];
    let mut stop_kills = 0;
    for n in 1..=30 {
        // Killed right after its n-th effect: each run gets further than the one before.
        if !run_halted(root, STOP, n) {
            break;
        }
        stop_kills += 1;
        let v = view(&west, "east").unwrap();
        let what = format!("failover, kill {stop_kills} after effect {n}");
        let leader = leader_bytes(&v);
        if let Err(e) = same(&below(&leader, lso0), &kept) {
            panic!("{what}: lost data below the LSO: {e}");
        }
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
        if !epochs_seen.contains(&v.leader_epoch) {
            epochs_seen.push(v.leader_epoch);
        }
        assert!(
            epochs_seen.len() <= 2,
            "{what}: epoch bumped twice: {epochs_seen:?}"
        );
        let resets = v.replicas[0]
            .iter()
            .filter(|(_, c)| *c == Some(ControlType::MirrorPidReset))
            .count();
        assert!(resets <= 1, "{what}: {resets} MIRROR_PID_RESET batches");
        // Past the LSO: the mirrored transaction (not truncated yet) or the reset.
        let tail: Vec<&(Vec<u8>, Option<ControlType>)> = v.replicas[0]
            .iter()
            .filter(|(b, _)| base_offset(b) >= lso0)
            .collect();
        let untouched = is_prefix(&leader, &source_now);
        let reset_only = tail.len() == 1 && tail[0].1 == Some(ControlType::MirrorPidReset);
        assert!(
            tail.is_empty() || untouched || reset_only,
            "{what}: unexpected tail"
        );
        // Persist first, act after: writable only once STOPPED is persisted (a kill between
        // the two leaves STOPPED not yet writable; the restart re-runs the side effect).
        assert!(
            !v.writable || state == Some(MirrorState::Stopped),
            "{what}: writable before STOPPED"
        );
        check_followers(&v, &what, true);
        eprintln!("{what}: {state:?}, epoch {}, LEO {}", v.leader_epoch, v.leo);
    }
    run_ok(root, STOP);
    let v = view(&west, "east").unwrap();
    assert_eq!(
        v.state.as_ref().map(|s| s.state),
        Some(MirrorState::Stopped)
    );
    assert!(v.writable);
    assert_eq!(v.leo, lso0 + 1);
    let last = v.replicas[0].last().unwrap();
    assert_eq!(last.1, Some(ControlType::MirrorPidReset));
    same(&below(&leader_bytes(&v), lso0), &kept).unwrap();
    // Local writes carry an epoch above every mirrored one (the kernel keeps the leader epoch
    // above mirrored epochs while mirroring, so the stop bumps only when that is not so).
    let epoch_of = |bytes: &[u8]| i32::from_be_bytes(bytes[12..16].try_into().unwrap());
    let mirrored_max = v.replicas[0][..v.replicas[0].len() - 1]
        .iter()
        .map(|(b, _)| epoch_of(b))
        .max()
        .unwrap_or(-1);
    assert!(v.leader_epoch >= epoch0, "the leader epoch never decreases");
    assert!(
        epoch_of(&last.0) > mirrored_max,
        "MIRROR_PID_RESET at epoch {} is not above the mirrored epoch {mirrored_max}",
        epoch_of(&last.0)
    );
    for (i, f) in v.replicas.iter().enumerate().skip(1) {
        if let Err(e) = same(&replica_keys(f), &replica_keys(&v.replicas[0])) {
            panic!("follower {i} not caught up after the stop: {e}");
        }
    }
    verify_ok(root, "{}/west");

    // Phase C: local writes on west; east took writes west never saw.
    run_ok(
        root,
        &[
            "produce",
            "--dir",
            "{}/west",
            "--timestamp",
            "3000",
            "--repeat",
            "40",
            "plain:5",
            "idem:1:3",
            "txn:4:2",
            "commit:4",
        ],
    );
    run_ok(
        root,
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
    let east_before = leader_bytes(&view(&east, "west").unwrap());
    let west_bytes = leader_bytes(&view(&west, "east").unwrap());

    // Phase D: failback, killed again and again.
    let mut back_kills = 0;
    for i in 0..10 {
        // The first kills walk through PREPARING effect by effect, later ones land in
        // MIRRORING (or, timed, between a leader append and its replication).
        let (killed, at) = if i < 6 {
            (
                run_halted(root, FAILBACK, i + 1),
                format!("effect {}", i + 1),
            )
        } else {
            let delay = rng.between(20, 150);
            (run_killed(root, FAILBACK, delay), format!("{delay} ms"))
        };
        if !killed {
            break;
        }
        back_kills += 1;
        let v = view(&east, "west").unwrap();
        let what = format!("failback, kill {back_kills} after {at}");
        let leader = leader_bytes(&v);
        if let Err(e) = same(&below(&leader, lso0), &below(&east_before, lso0)) {
            panic!("{what}: east lost data below the LME: {e}");
        }
        assert!(
            leader == east_before || is_prefix(&leader, &west_bytes),
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
        eprintln!("{what}: {state:?}, LEO {}", v.leo);
    }
    run_ok(root, FAILBACK);
    let v = view(&east, "west").unwrap();
    assert_eq!(
        v.state.as_ref().map(|s| s.state),
        Some(MirrorState::Mirroring)
    );
    if let Err(e) = same(&leader_bytes(&v), &west_bytes) {
        panic!("east did not catch up with west: {e}");
    }
    verify_ok(root, "{}/east");
    kmirror_testsupport::crash_counts::report(
        "crash (one lifecycle)",
        (kills + stop_kills + back_kills) as u64,
        0,
        &format!(
            "{kills} mirroring + {stop_kills} failover + {back_kills} failback kills, \
             {machine_crashes} machine crashes ({tails_cut} replica tails cut or torn past the \
             recovery point) in {:.1} s",
            started.elapsed().as_secs_f64()
        ),
    );
}
