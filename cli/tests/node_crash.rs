//! The `kmirror` binary killed at every effect of a node's life, process against process:
//! `kmirror mirror --topics ... --until-caught-up` from the harness's fake Kafka source
//! (feature `testkit`), then `kmirror stop --topics orders`, each halted right after its N-th
//! effect (`--halt-after-effects N`, hidden) and SIGKILLed there. After each kill, running the
//! same command again converges: every mirrored partition a byte copy of the source and
//! MIRRORING, every stopped one STOPPED and writable after the source's bytes and one
//! `MIRROR_PID_RESET`, and `kmirror verify` finds every log whole.
//!
//! The in-process sweeps (`kmirror_harness::node` crash tests) add machine crashes, torn
//! `__mirror_state` writes and torn file writes; this one checks that the binary's own paths
//! (arguments, open, close, the status file, the control channel) keep the same guarantees.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

use kmirror_harness::file_log::FileLog;
use kmirror_harness::node::{NodeDriver, NodeDriverOptions};
use kmirror_harness::wire::fake_broker::{FakeCluster, FakePartition, FakeTopic};
use kmirror_kernel::batch::ControlType;
use kmirror_kernel::log::LogView;
use kmirror_kernel::node::PartitionKey;
use kmirror_kernel::state::MirrorState;
use kmirror_kernel::types::TopicId;
use kmirror_testsupport::{crash_counts, dir_tree};

const ORDERS: TopicId = TopicId([1; 16]);
const PAY_EU: TopicId = TopicId([2; 16]);
const TOPICS: [(&str, TopicId, i32); 2] = [("orders", ORDERS, 3), ("pay.eu", PAY_EU, 2)];

/// orders: 3 partitions of 3, 4 and 5 batches; pay.eu: 2 partitions of 2; brokers 1 and 2.
fn fake() -> FakeCluster {
    let topic = |name: &str, id, n: i32, batches: i64| FakeTopic {
        name: name.into(),
        id,
        partitions: (0..n)
            .map(|i| FakePartition::with_batches(1 + i % 2, 3, batches + i64::from(i)))
            .collect(),
    };
    FakeCluster::start(
        2,
        vec![topic("orders", ORDERS, 3, 3), topic("pay.eu", PAY_EU, 2, 2)],
    )
}

/// Runs kmirror with `args`. Returns true when it halted at its fault point (it is then
/// SIGKILLed, its files as the halt left them); false when it ran to its end, successfully.
fn run_or_kill(args: &[&str]) -> bool {
    let mut child = Command::new(env!("CARGO_BIN_EXE_kmirror"))
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run kmirror");
    let stderr = BufReader::new(child.stderr.take().unwrap());
    let mut said = Vec::new();
    for line in stderr.lines() {
        let line = line.unwrap();
        if line.contains("waiting to be killed") {
            child.kill().unwrap(); // SIGKILL
            child.wait().unwrap();
            return true;
        }
        said.push(line);
    }
    let status = child.wait().unwrap();
    assert!(status.success(), "{args:?}: {status}: {said:#?}");
    false
}

fn batches(log: &FileLog) -> Vec<(Vec<u8>, Option<ControlType>)> {
    log.try_read(log.log_start_offset(), log.log_end_offset())
        .unwrap()
        .iter()
        .map(|b| (b.bytes().to_vec(), b.header().control))
        .collect()
}

/// After a restart ran to its end: `stopped` topics STOPPED and writable after the source's
/// bytes and one reset, the others MIRRORING byte copies; every log whole (`kmirror verify`).
fn check_converged(fake: &FakeCluster, root: &Path, stopped: &[TopicId], what: &str) {
    let driver = NodeDriver::open(root, None, NodeDriverOptions::default())
        .unwrap_or_else(|e| panic!("{what}: does not reopen: {e}"));
    for (name, id, count) in TOPICS {
        for p in 0..count {
            let key = PartitionKey::new(id, p);
            let source: Vec<Vec<u8>> = fake
                .state()
                .topics
                .iter()
                .find(|t| t.id == id)
                .unwrap()
                .partitions[p as usize]
                .batches
                .iter()
                .map(|b| b.bytes().to_vec())
                .collect();
            let got = batches(driver.log(&key).unwrap());
            let state = driver.persisted_state(&key);
            let copied: Vec<&Vec<u8>> = got.iter().map(|(b, _)| b).take(source.len()).collect();
            assert!(
                copied.iter().zip(&source).all(|(a, b)| *a == b) && copied.len() == source.len(),
                "{what}: {name}-{p} is not the source's bytes"
            );
            if stopped.contains(&id) {
                assert_eq!(state, MirrorState::Stopped, "{what}: {name}-{p}");
                assert_eq!(got.len(), source.len() + 1, "{what}: {name}-{p}");
                assert_eq!(got[source.len()].1, Some(ControlType::MirrorPidReset));
                assert!(
                    driver.dest().meta().partitions[&(name.to_owned(), p)].writable,
                    "{what}: {name}-{p} STOPPED, its produce gate closed"
                );
            } else {
                assert_eq!(state, MirrorState::Mirroring, "{what}: {name}-{p}");
                assert_eq!(got.len(), source.len(), "{what}: {name}-{p}");
            }
        }
    }
    driver.close().unwrap();
    let verify = Command::new(env!("CARGO_BIN_EXE_kmirror"))
        .args(["verify", root.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        verify.status.success(),
        "{what}: kmirror verify: {}",
        String::from_utf8_lossy(&verify.stdout)
    );
}

#[test]
fn the_binary_killed_at_every_effect_of_mirroring_and_stopping_converges() {
    let fake = fake();
    let tmp = tempfile::tempdir().unwrap();
    let bootstrap = fake.address(1);
    let mirror = |root: &Path, halt: Option<u64>| {
        let root = root.to_str().unwrap().to_owned();
        let halt = halt.map(|n| n.to_string());
        let mut args = vec![
            "mirror",
            "--source-bootstrap",
            &bootstrap,
            "--topics",
            "orders,pay.eu",
            "--dest",
            &root,
            "--until-caught-up",
            "--quiet",
        ];
        if let Some(n) = &halt {
            args.extend(["--halt-after-effects", n]);
        }
        run_or_kill(&args)
    };
    let stop = |root: &Path, halt: Option<u64>| {
        let root = root.to_str().unwrap().to_owned();
        let halt = halt.map(|n| n.to_string());
        let mut args = vec!["stop", "--dest", &root, "--topics", "orders", "--quiet"];
        if let Some(n) = &halt {
            args.extend(["--halt-after-effects", n]);
        }
        run_or_kill(&args)
    };

    let mut mirror_kills = 0u64;
    for n in 1.. {
        let root = tmp.path().join(format!("mirror-{n}"));
        if !mirror(&root, Some(n)) {
            break;
        }
        mirror_kills += 1;
        assert!(!mirror(&root, None));
        check_converged(
            &fake,
            &root,
            &[],
            &format!("mirror, killed after effect {n}"),
        );
        std::fs::remove_dir_all(&root).unwrap();
    }

    let base = tmp.path().join("base");
    assert!(!mirror(&base, None));
    let mut stop_kills = 0u64;
    for n in 1.. {
        let root = tmp.path().join(format!("stop-{n}"));
        dir_tree::copy(&base, &root);
        if !stop(&root, Some(n)) {
            std::fs::remove_dir_all(&root).unwrap();
            break;
        }
        stop_kills += 1;
        assert!(!stop(&root, None));
        let what = format!("stop, killed after effect {n}");
        check_converged(&fake, &root, &[ORDERS], &what);
        std::fs::remove_dir_all(&root).unwrap();
    }
    crash_counts::report(
        "node binary crash test, mirror then stop",
        mirror_kills + stop_kills,
        0,
        &format!("{mirror_kills} in the mirror, {stop_kills} in the stop"),
    );
    assert!(mirror_kills >= 20, "{mirror_kills}");
    assert!(stop_kills >= 10, "{stop_kills}");
}
