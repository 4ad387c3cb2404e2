//! Helpers shared by the crash tests (`crash*.rs`): running the `kmirror` binary to completion,
//! killed after a delay or halted after its N-th effect; reading a cluster directory the way the
//! next process will; comparing batches byte for byte; and simulating a machine crash (the
//! unflushed page-cache tail past each replica's recovery point lost, cut at a write boundary or
//! torn inside a batch).

#![allow(dead_code)] // each test binary uses its own subset

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
use kmirror_kernel::types::{MirrorName, MirrorPartition, Offset};

/// xorshift64*: deterministic pseudo-random kill points.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    pub fn between(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo + 1)
    }
}

pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_kmirror")
}

pub fn args(root: &Path, template: &[&str]) -> Vec<String> {
    let r = root.display().to_string();
    template.iter().map(|a| a.replace("{}", &r)).collect()
}

/// Held while a test spawns a process and while it opens a cluster directory in-process (which
/// takes the directory's `flock`): a child forked while another test thread holds such a lock
/// inherits the descriptor until its `exec`, and the next process to open that directory would
/// find it busy (seen in CI: `kmirror verify` refused a copy "in use by another kmirror
/// process").
static SPAWN: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn spawn_lock() -> std::sync::MutexGuard<'static, ()> {
    SPAWN.lock().unwrap_or_else(|p| p.into_inner())
}

/// Spawns `command`; `spawn` returns once the child has exec'd and closed our descriptors.
fn spawn(command: &mut Command) -> std::process::Child {
    let _spawning = spawn_lock();
    command.spawn().unwrap()
}

/// Runs kmirror to completion; returns its stdout.
pub fn run_ok(root: &Path, template: &[&str]) -> String {
    let out = spawn(
        Command::new(bin())
            .args(args(root, template))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
    )
    .wait_with_output()
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
pub fn run_killed(root: &Path, template: &[&str], delay_ms: u64) -> bool {
    let err = root.join("stderr.txt");
    let mut child = spawn(
        Command::new(bin())
            .args(args(root, template))
            .stdout(Stdio::null())
            .stderr(fs::File::create(&err).unwrap()),
    );
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
pub fn run_halted(root: &Path, template: &[&str], n: u64) -> bool {
    use std::io::{BufRead, BufReader};
    let mut args = args(root, template);
    args.extend(["--halt-after-effects".to_owned(), n.to_string()]);
    let mut child = spawn(
        Command::new(bin())
            .args(&args)
            .stdout(Stdio::null())
            .stderr(Stdio::piped()),
    );
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
pub struct View {
    /// Each replica's batches (leader first) as bytes, with control types.
    pub replicas: Vec<Vec<(Vec<u8>, Option<ControlType>)>>,
    pub leo: Offset,
    pub hw: Offset,
    pub lso: Offset,
    pub followers_hw: Vec<Offset>,
    pub state: Option<MirrorPartitionStateValue>,
    pub mirror_name: Option<String>,
    pub leader_epoch: i32,
    pub writable: bool,
}

pub fn state_under(cluster: &Cluster, mirror: &str) -> Option<MirrorPartitionStateValue> {
    let key = MirrorPartition {
        mirror: MirrorName::new(mirror).unwrap(),
        topic_id: cluster.dir.config().topic_id,
        partition: 0,
    };
    cluster.state_log.coordinator().read_state(&key).cloned()
}

/// Reads `dir` (`None` if a killed creation left nothing), checking the epoch checkpoints.
pub fn view(dir: &Path, mirror: &str) -> Option<View> {
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
    let _spawning = spawn_lock(); // until `cluster` is dropped, at the end of this function
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
pub fn same(a: &[Vec<u8>], b: &[Vec<u8>]) -> Result<(), String> {
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
pub fn replica_keys(batches: &[(Vec<u8>, Option<ControlType>)]) -> Vec<Vec<u8>> {
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

pub fn leader_bytes(v: &View) -> Vec<Vec<u8>> {
    v.replicas[0].iter().map(|(b, _)| b.clone()).collect()
}

pub fn is_prefix(a: &[Vec<u8>], b: &[Vec<u8>]) -> bool {
    a.len() <= b.len() && a.iter().zip(b).all(|(x, y)| x == y)
}

/// Batch offsets are in the bytes: the first 8 bytes are the base offset.
pub fn base_offset(batch: &[u8]) -> Offset {
    Offset::from_be_bytes(batch[..8].try_into().unwrap())
}

pub fn below(batches: &[Vec<u8>], bound: Offset) -> Vec<Vec<u8>> {
    batches
        .iter()
        .filter(|b| base_offset(b) < bound)
        .cloned()
        .collect()
}

/// Followers agree with the leader below the high watermarks. A follower's HW is never above
/// the leader's, except (`leader_truncated`) right after the stop's truncation to the LSO cut
/// the leader below its HW: the followers learn of it at their next fetch.
pub fn check_followers(v: &View, what: &str, leader_truncated: bool) {
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

pub fn copy_dir(from: &Path, to: &Path) {
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
pub fn machine_crash(dir: &Path, rng: &mut Rng) -> (Offset, Offset, bool) {
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

/// A machine crash of a copy: `root`'s `east` and `west` copied to `copy`, then every replica
/// of `copy/<cluster>` crashed by [`machine_crash`]. Returns the leader's (broker 0) recovery
/// floor and checkpointed high watermark, and how many replica tails were cut or torn; `None`
/// when `cluster` was never created (a kill while creating it).
pub fn machine_crash_copy(
    root: &Path,
    copy: &Path,
    cluster: &str,
    rng: &mut Rng,
) -> Option<(Offset, Offset, usize)> {
    if !root.join(cluster).join(CONFIG_FILE).exists() {
        return None;
    }
    copy_dir(&root.join("east"), &copy.join("east"));
    copy_dir(&root.join("west"), &copy.join("west"));
    let mut cut = 0;
    let (mut leader_floor, mut leader_hw) = (0, 0);
    for b in 0..3 {
        let dir = copy
            .join(cluster)
            .join(format!("broker-{b}"))
            .join("orders-0");
        if dir.is_dir() {
            let (floor, hw, was_cut) = machine_crash(&dir, rng);
            cut += usize::from(was_cut);
            if b == 0 {
                (leader_floor, leader_hw) = (floor, hw);
            }
        }
    }
    Some((leader_floor, leader_hw, cut))
}

/// After a machine crash: the leader kept everything below its recovery floor and its high
/// watermark is the checkpointed one (nothing below a high watermark lost).
pub fn check_nothing_below_hw_lost(v: &View, floor: Offset, hw: Offset, what: &str) {
    assert!(
        v.leo >= floor && v.hw == hw,
        "{what}: LEO {} / HW {} against the recovery point {floor} and the checkpointed HW \
         {hw}: data below the HW lost",
        v.leo,
        v.hw
    );
}

/// A copy of `root`'s `east` and `west` in `copy`, west's replicas crashed as a machine crash
/// would; checks the copy reopens as a prefix of the source with nothing below the high
/// watermark lost, then that a restart converges with the source and `kmirror verify` passes.
/// Returns the tails cut.
pub fn check_machine_crash(root: &Path, copy: &Path, source: &[Vec<u8>], rng: &mut Rng) -> usize {
    check_machine_crash_with(root, copy, source, rng, MIRROR)
}

/// [`check_machine_crash`], restarting with `mirror` (a `MIRROR`-like template).
pub fn check_machine_crash_with(
    root: &Path,
    copy: &Path,
    source: &[Vec<u8>],
    rng: &mut Rng,
    mirror: &[&str],
) -> usize {
    let Some((leader_floor, leader_hw, cut)) = machine_crash_copy(root, copy, "west", rng) else {
        return 0; // killed while creating the destination
    };
    let west = copy.join("west");
    let Some(v) = view(&west, "east") else {
        fs::remove_dir_all(copy).unwrap();
        return cut;
    };
    let what = format!("machine crash of {}", copy.display());
    let leader = leader_bytes(&v);
    assert!(
        is_prefix(&leader, source),
        "{what}: not a prefix of the source"
    );
    check_nothing_below_hw_lost(&v, leader_floor, leader_hw, &what);
    check_followers(&v, &what, false);
    run_ok(copy, mirror);
    let v = view(&west, "east").unwrap();
    if let Err(e) = same(&leader_bytes(&v), source) {
        panic!("{what}: no convergence after the restart: {e}");
    }
    assert_eq!(v.hw, v.leo, "{what}");
    verify_ok(copy, "{}/west");
    fs::remove_dir_all(copy).unwrap();
    cut
}

/// Mirrors east into west (3 replicas) until caught up, two batches a fetch.
pub const MIRROR: &[&str] = &[
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
/// Fails west over (RemoveTopicsFromMirror, driven to STOPPED).
pub const STOP: &[&str] = &["stop", "--dest", "{}/west", "-q"];
/// Fails back: east mirrors west until caught up.
pub const FAILBACK: &[&str] = &[
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

/// `kmirror verify DIR` (every CRC of every replica and of `__mirror_state`) succeeds.
pub fn verify_ok(root: &Path, dir: &str) {
    let out = run_ok(root, &["verify", dir]);
    assert!(out.contains("all good"), "kmirror verify {dir}: {out}");
}
