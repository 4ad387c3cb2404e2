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

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use kmirror_harness::driver::cluster::CONFIG_FILE;
use kmirror_harness::driver::Cluster;
use kmirror_harness::file_log::{
    decode_offset_checkpoint, FileLog, TopicPartition, HIGH_WATERMARK_FILE, RECOVERY_POINT_FILE,
};
use kmirror_harness::record_batch::batch_size_from_prefix;
use kmirror_kernel::batch::ControlType;
use kmirror_kernel::log::LogView;
use kmirror_kernel::records::MirrorPartitionStateValue;
use kmirror_kernel::state::MirrorState;
use kmirror_kernel::types::{MirrorName, MirrorPartition, Offset};

/// xorshift64*: deterministic pseudo-random kill points.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn between(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo + 1)
    }
}

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_kmirror")
}

fn args(root: &Path, template: &[&str]) -> Vec<String> {
    let r = root.display().to_string();
    template.iter().map(|a| a.replace("{}", &r)).collect()
}

/// Runs kmirror to completion; returns its stdout.
fn run_ok(root: &Path, template: &[&str]) -> String {
    let out = Command::new(bin())
        .args(args(root, template))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "kmirror {template:?} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Runs kmirror and SIGKILLs it after `delay_ms` unless it exited first (successfully).
/// Returns whether it was killed.
fn run_killed(root: &Path, template: &[&str], delay_ms: u64) -> bool {
    let err = root.join("stderr.txt");
    let mut child = Command::new(bin())
        .args(args(root, template))
        .stdout(Stdio::null())
        .stderr(fs::File::create(&err).unwrap())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_millis(delay_ms);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            assert!(
                status.success(),
                "kmirror {template:?} failed after a restart:\n{}",
                fs::read_to_string(&err).unwrap_or_default()
            );
            return false;
        }
        if Instant::now() >= deadline {
            child.kill().unwrap(); // SIGKILL
            child.wait().unwrap();
            return true;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Runs kmirror with `--halt-after-effects n` and SIGKILLs it once it reports the halt (right
/// after its `n`-th effect). Returns whether it was killed (false: it finished before `n`
/// effects, successfully).
fn run_halted(root: &Path, template: &[&str], n: u64) -> bool {
    use std::io::{BufRead, BufReader};
    let mut args = args(root, template);
    args.extend(["--halt-after-effects".to_owned(), n.to_string()]);
    let mut child = Command::new(bin())
        .args(&args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let mut seen = String::new();
    for line in BufReader::new(stderr).lines() {
        let line = line.unwrap();
        if line.contains("waiting to be killed") {
            child.kill().unwrap(); // SIGKILL
            child.wait().unwrap();
            return true;
        }
        seen.push_str(&line);
        seen.push('\n');
    }
    let status = child.wait().unwrap();
    assert!(status.success(), "kmirror {template:?} failed:\n{seen}");
    false
}

/// What a cluster directory holds, read the way the next process will (recovery included).
struct View {
    /// Each replica's batches (leader first) as bytes, with control types.
    replicas: Vec<Vec<(Vec<u8>, Option<ControlType>)>>,
    leo: Offset,
    hw: Offset,
    lso: Offset,
    followers_hw: Vec<Offset>,
    state: Option<MirrorPartitionStateValue>,
    mirror_name: Option<String>,
    leader_epoch: i32,
    writable: bool,
}

fn state_under(cluster: &Cluster, mirror: &str) -> Option<MirrorPartitionStateValue> {
    let key = MirrorPartition {
        mirror: MirrorName::new(mirror).unwrap(),
        topic_id: cluster.dir.config().topic_id,
        partition: 0,
    };
    cluster.state_log.coordinator().read_state(&key).cloned()
}

/// Reads `dir` (`None` if a killed creation left nothing), checking the epoch checkpoints.
fn view(dir: &Path, mirror: &str) -> Option<View> {
    if !dir.join(CONFIG_FILE).exists() {
        return None;
    }
    // The checkpoints as the killed process left them, before recovery rewrites them.
    let checkpoint = |broker: usize| -> PathBuf {
        dir.join(format!("broker-{broker}"))
            .join("orders-0")
            .join("leader-epoch-checkpoint")
    };
    let texts: Vec<Option<String>> = (0..3)
        .map(|b| fs::read_to_string(checkpoint(b)).ok())
        .collect();
    let cluster = Cluster::open(dir)
        .unwrap_or_else(|e| panic!("{} does not reopen after a kill: {e}", dir.display()));
    let mut logs: Vec<&FileLog> = vec![&cluster.leader];
    logs.extend(cluster.followers.iter().map(|f| &f.log));
    let mut replicas = Vec::new();
    for (b, log) in logs.iter().enumerate() {
        if let Some(Some(text)) = texts.get(b) {
            let mut cache = kmirror_kernel::checkpoint::decode(text)
                .unwrap_or_else(|e| panic!("{}: unreadable epoch checkpoint: {e}", dir.display()));
            cache.truncate_from_end(log.log_end_offset());
            assert_eq!(
                cache.entries().collect::<Vec<_>>(),
                log.epoch_cache().entries().collect::<Vec<_>>(),
                "{} replica {b}: the epoch checkpoint disagrees with the log",
                dir.display()
            );
        }
        let batches = log
            .try_read(log.log_start_offset(), log.log_end_offset())
            .unwrap();
        replicas.push(
            batches
                .iter()
                .map(|b| (b.bytes().to_vec(), b.header().control))
                .collect(),
        );
        assert!(log.last_stable_offset() <= log.high_watermark());
        assert!(log.high_watermark() <= log.log_end_offset());
    }
    let v = View {
        replicas,
        leo: cluster.leader.log_end_offset(),
        hw: cluster.leader.high_watermark(),
        lso: cluster.leader.last_stable_offset(),
        followers_hw: cluster
            .followers
            .iter()
            .map(|f| f.log.high_watermark())
            .collect(),
        state: state_under(&cluster, mirror),
        mirror_name: cluster.dir.config().mirror_name.clone(),
        leader_epoch: cluster.dir.controller().leader_epoch,
        writable: cluster.dir.writable(),
    };
    drop(cluster);
    Some(v)
}

/// `Ok` if `a == b`, else where they first differ (offsets, not bytes).
fn same(a: &[Vec<u8>], b: &[Vec<u8>]) -> Result<(), String> {
    if a == b {
        return Ok(());
    }
    let i = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    Err(format!(
        "{} vs {} batches, first difference at batch {i} (offsets {:?} vs {:?})",
        a.len(),
        b.len(),
        a.get(i).map(|x| base_offset(x)),
        b.get(i).map(|x| base_offset(x))
    ))
}

/// A replica's batches for comparing replicas: bytes, except that a `MIRROR_PID_RESET` batch
/// is compared by its first 17 bytes only (base offset, length, leader epoch, magic). A stop
/// resumed after a crash may re-append the reset at the same offset and epoch with a new
/// timestamp (see the ignored test in tests/driver.rs).
fn replica_keys(batches: &[(Vec<u8>, Option<ControlType>)]) -> Vec<Vec<u8>> {
    batches
        .iter()
        .map(|(b, c)| {
            if *c == Some(ControlType::MirrorPidReset) {
                b[..17].to_vec()
            } else {
                b.clone()
            }
        })
        .collect()
}

fn leader_bytes(v: &View) -> Vec<Vec<u8>> {
    v.replicas[0].iter().map(|(b, _)| b.clone()).collect()
}

fn is_prefix(a: &[Vec<u8>], b: &[Vec<u8>]) -> bool {
    a.len() <= b.len() && a.iter().zip(b).all(|(x, y)| x == y)
}

/// Batch offsets are in the bytes: the first 8 bytes are the base offset.
fn base_offset(batch: &[u8]) -> Offset {
    Offset::from_be_bytes(batch[..8].try_into().unwrap())
}

fn below(batches: &[Vec<u8>], bound: Offset) -> Vec<Vec<u8>> {
    batches
        .iter()
        .filter(|b| base_offset(b) < bound)
        .cloned()
        .collect()
}

/// Followers agree with the leader below the high watermarks. A follower's HW is never above
/// the leader's, except (`leader_truncated`) right after the stop's truncation to the LSO cut
/// the leader below its HW: the followers learn of it at their next fetch.
fn check_followers(v: &View, what: &str, leader_truncated: bool) {
    let leader = replica_keys(&v.replicas[0]);
    for (i, follower) in v.replicas.iter().enumerate().skip(1) {
        let f = replica_keys(follower);
        let hw = v.followers_hw[i - 1];
        if !leader_truncated {
            assert!(
                hw <= v.hw,
                "{what}: follower {i} HW {hw} above the leader's {}",
                v.hw
            );
        }
        let bound = hw.min(v.hw);
        if let Err(e) = same(&below(&f, bound), &below(&leader, bound)) {
            panic!("{what}: follower {i} below the HW: {e}");
        }
    }
}

fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for e in fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &to.join(e.file_name()));
        } else {
            fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}

/// What a machine crash does to the partition directory `dir`: whatever lies past both the
/// recovery point and the checkpointed high watermark may never have been fsynced (under
/// `--flush kafka` the high watermark is checkpointed only after a flush, so that is the
/// recovery point; under `every-append` every append was fsynced, so this is pessimistic), so
/// the log keeps its files up to a random point at or past it: the end of a batch (a fetch
/// round's write boundary), the middle of one (a torn write), or everything. Later segments are
/// lost. Returns that floor, the checkpointed high watermark, and whether bytes were cut.
fn machine_crash(dir: &Path, rng: &mut Rng) -> (Offset, Offset, bool) {
    let tp = TopicPartition::new("orders", 0).unwrap();
    let checkpoint = |name: &str| {
        let file = dir.join(name);
        fs::read_to_string(&file)
            .ok()
            .and_then(|t| decode_offset_checkpoint(&t, &file, &tp).ok().flatten())
            .unwrap_or(0)
    };
    let hw = checkpoint(HIGH_WATERMARK_FILE);
    let recovery_point = checkpoint(RECOVERY_POINT_FILE).max(hw);
    let mut segments: Vec<(Offset, PathBuf)> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "log"))
        .map(|p| {
            let base = p.file_stem().unwrap().to_str().unwrap().parse().unwrap();
            (base, p)
        })
        .collect();
    segments.sort();
    // Every place the crash may cut: (segment index, byte position).
    let mut cuts = Vec::new();
    for (i, (_, path)) in segments.iter().enumerate() {
        let bytes = fs::read(path).unwrap();
        let mut pos = 0usize;
        while pos + 61 <= bytes.len() {
            let Ok(size) = batch_size_from_prefix(&bytes[pos..]) else {
                break;
            };
            if pos + size > bytes.len() {
                break;
            }
            if base_offset(&bytes[pos..]) >= recovery_point {
                cuts.push((i, pos as u64));
                cuts.push((i, (pos + size / 2) as u64));
            }
            pos += size;
        }
    }
    if cuts.is_empty() {
        return (recovery_point, hw, false);
    }
    let pick = rng.between(0, cuts.len() as u64) as usize;
    let Some(&(i, position)) = cuts.get(pick) else {
        return (recovery_point, hw, false); // the crash lost nothing
    };
    fs::OpenOptions::new()
        .write(true)
        .open(&segments[i].1)
        .unwrap()
        .set_len(position)
        .unwrap();
    for (base, path) in &segments[i + 1..] {
        fs::remove_file(path).unwrap();
        let _ = fs::remove_file(dir.join(format!("{base:020}.index")));
    }
    (recovery_point, hw, true)
}

/// A copy of `root`'s `east` and `west` in `copy`, west's replicas crashed as a machine crash
/// would; checks the copy reopens as a prefix of the source with nothing below the high
/// watermark lost, then that a restart converges with the source. Returns the tails cut.
fn check_machine_crash(root: &Path, copy: &Path, source: &[Vec<u8>], rng: &mut Rng) -> usize {
    if !root.join("west").join(CONFIG_FILE).exists() {
        return 0; // killed while creating the destination
    }
    copy_dir(&root.join("east"), &copy.join("east"));
    copy_dir(&root.join("west"), &copy.join("west"));
    let west = copy.join("west");
    let mut cut = 0;
    let (mut leader_floor, mut leader_hw) = (0, 0);
    for b in 0..3 {
        let dir = west.join(format!("broker-{b}")).join("orders-0");
        if dir.is_dir() {
            let (floor, hw, was_cut) = machine_crash(&dir, rng);
            cut += usize::from(was_cut);
            if b == 0 {
                (leader_floor, leader_hw) = (floor, hw);
            }
        }
    }
    let Some(v) = view(&west, "east") else {
        return cut;
    };
    let what = format!("machine crash of {}", copy.display());
    let leader = leader_bytes(&v);
    assert!(
        is_prefix(&leader, source),
        "{what}: not a prefix of the source"
    );
    assert!(
        v.leo >= leader_floor && v.hw == leader_hw,
        "{what}: LEO {} / HW {} against the recovery point {leader_floor} and the checkpointed \
         HW {leader_hw}: data below the HW lost",
        v.leo,
        v.hw
    );
    check_followers(&v, &what, false);
    run_ok(copy, MIRROR);
    let v = view(&west, "east").unwrap();
    if let Err(e) = same(&leader_bytes(&v), source) {
        panic!("{what}: no convergence after the restart: {e}");
    }
    assert_eq!(v.hw, v.leo, "{what}");
    fs::remove_dir_all(copy).unwrap();
    cut
}

const MIRROR: &[&str] = &[
    "mirror",
    "--source",
    "{}/east",
    "--dest",
    "{}/west",
    "--replicas",
    "3",
    "--until-caught-up",
    "--max-batches",
    "2",
    "-q",
];
const STOP: &[&str] = &["stop", "--dest", "{}/west", "-q"];
const FAILBACK: &[&str] = &[
    "start",
    "--dest",
    "{}/east",
    "--source",
    "{}/west",
    "--until-caught-up",
    "--max-batches",
    "2",
    "-q",
];

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
        // The restarted kernel resumed MIRRORING (re-asserted), not PREPARING again.
        let first = out.lines().find(|l| l.contains("persisted")).unwrap_or("");
        assert!(first.contains("state MIRRORING persisted"), "{out}");
    }
    let v = view(&west, "east").unwrap();
    if let Err(e) = same(&leader_bytes(&v), &source_bytes) {
        panic!("not caught up after the kills: {e}");
    }
    assert_eq!(v.hw, v.leo);

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
    eprintln!(
        "crash test: {kills} + {stop_kills} + {back_kills} kills, {machine_crashes} machine \
         crashes ({tails_cut} replica tails cut or torn past the recovery point) in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    assert!(started.elapsed() < Duration::from_secs(120));
}
