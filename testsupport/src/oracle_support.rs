//! Shared by the Apache Kafka oracle tests: a long-running oracle process spoken to one line at a
//! time, a deterministic PRNG, delta debugging, a scratch directory on a RAM disk when there is
//! one, and running a process with a timeout.

use std::ffi::OsStr;
use std::io::{BufRead, BufReader, BufWriter, Read, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::jvm::Oracle;

/// One oracle JVM answering requests over stdin/stdout, one line each way.
pub struct LineOracle {
    child: Child,
    stdin: BufWriter<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    class: String,
}

impl LineOracle {
    /// Starts `main_class` of the oracle with `args`; its stderr goes to the test's stderr.
    pub fn start<S: AsRef<OsStr>>(oracle: &Oracle, main_class: &str, args: &[S]) -> LineOracle {
        let mut child = oracle
            .command(main_class)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| panic!("starting {main_class}: {e}"));
        let stdin = BufWriter::new(child.stdin.take().expect("piped stdin"));
        let stdout = BufReader::new(child.stdout.take().expect("piped stdout"));
        LineOracle {
            child,
            stdin,
            stdout,
            class: main_class.to_owned(),
        }
    }

    /// Sends one request line and returns the answer line, without its line end.
    pub fn ask(&mut self, request: &str) -> String {
        assert!(
            !request.contains('\n'),
            "a request is one line: {request:?}"
        );
        writeln!(self.stdin, "{request}")
            .and_then(|()| self.stdin.flush())
            .unwrap_or_else(|e| panic!("{} died before {request:?}: {e}", self.class));
        let mut answer = String::new();
        let read = self
            .stdout
            .read_line(&mut answer)
            .unwrap_or_else(|e| panic!("{}: reading the answer to {request:?}: {e}", self.class));
        assert!(
            read > 0,
            "{} exited before answering {request:?}",
            self.class
        );
        answer.trim_end_matches(['\n', '\r']).to_owned()
    }
}

impl Drop for LineOracle {
    fn drop(&mut self) {
        // Closing stdin ends the oracle's loop; kill it anyway if it is stuck.
        let _ = self.stdin.flush();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// splitmix64: a tiny deterministic PRNG, so every run generates the same cases from its seed.
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// A generator starting from `seed`.
    pub fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }

    /// A number in `lo..=hi`.
    pub fn range(&mut self, lo: i64, hi: i64) -> i64 {
        lo + self.below((hi - lo + 1) as u64) as i64
    }

    /// True with probability `percent`/100.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    /// One element of `items` (non-empty).
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }
}

/// Greedy delta debugging: the shortest sequence found by dropping chunks of `ops` (halving the
/// chunk size down to single operations) for as long as `first_difference` still finds one.
/// `first_difference` runs a sequence from scratch and returns the index of the first operation
/// on which the two sides differ; nothing after it is kept.
pub fn shrink<T: Clone>(
    ops: &[T],
    mut first_difference: impl FnMut(&[T]) -> Option<usize>,
) -> Vec<T> {
    let mut current = ops.to_vec();
    if let Some(at) = first_difference(&current) {
        current.truncate(at + 1);
    }
    let mut chunk = current.len().div_ceil(2).max(1);
    loop {
        let mut removed_any = false;
        let mut start = 0;
        while start < current.len() {
            let mut candidate = current.clone();
            candidate.drain(start..(start + chunk).min(current.len()));
            if let Some(at) = first_difference(&candidate) {
                candidate.truncate(at + 1);
                current = candidate;
                removed_any = true;
            } else {
                start += chunk;
            }
        }
        if chunk == 1 && !removed_any {
            return current;
        }
        if !removed_any {
            chunk = (chunk / 2).max(1);
        }
    }
}

/// A scratch directory, on `/dev/shm` when it exists: Kafka's checkpoint writes fsync, which is
/// free on a RAM disk.
pub fn scratch_dir() -> tempfile::TempDir {
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        if let Ok(dir) = tempfile::Builder::new()
            .prefix("kmirror-oracle-")
            .tempdir_in(shm)
        {
            return dir;
        }
    }
    tempfile::Builder::new()
        .prefix("kmirror-oracle-")
        .tempdir()
        .expect("a temporary directory")
}

/// Runs `command` to its end, killing it after `timeout`.
pub fn run(mut command: Command, timeout: Duration) -> Output {
    let what = format!("{command:?}");
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {what}: {e}"));
    // Drain the pipes on threads so a chatty child never blocks.
    let mut stdout = child.stdout.take().expect("piped");
    let mut stderr = child.stderr.take().expect("piped");
    let out = std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = stdout.read_to_end(&mut b);
        b
    });
    let err = std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = stderr.read_to_end(&mut b);
        b
    });
    let deadline = Instant::now() + timeout;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what} did not finish within {timeout:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    Output {
        status,
        stdout: out.join().expect("stdout"),
        stderr: err.join().expect("stderr"),
    }
}
