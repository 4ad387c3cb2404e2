//! What a crash test reports: its kill points and torn writes, on the test process's stderr
//! itself (libtest captures `eprintln!` and hides the output of a passing test, so `.ci/run`'s
//! log would not show them) and, when [`COUNTS_FILE_ENV`] names a file, as one line appended to
//! it, which `.ci/run` sums into a total across every crash test of the run.

use std::io::Write;

/// The environment variable naming the file the counts are appended to (`.ci/run` sets it).
pub const COUNTS_FILE_ENV: &str = "KMIRROR_CRASH_COUNTS";

/// Reports `test`'s counts: `kill_points` processes killed (by SIGKILL, a halt after an
/// effect, or inside a torn write), `torn_writes` of them inside a write cut short, and
/// `detail` (machine crashes, kinds of writes, time). One line on stderr,
/// `crash counts: TEST: K kill points, T torn writes; DETAIL`, and, with
/// [`COUNTS_FILE_ENV`] set, `TEST<tab>K<tab>T` appended to that file.
pub fn report(test: &str, kill_points: u64, torn_writes: u64, detail: &str) {
    let line = format!(
        "crash counts: {test}: {kill_points} kill points, {torn_writes} torn writes; {detail}\n"
    );
    let _ = std::io::stderr().write_all(line.as_bytes());
    if let Some(path) = std::env::var_os(COUNTS_FILE_ENV) {
        let appended = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .and_then(|mut f| {
                f.write_all(format!("{test}\t{kill_points}\t{torn_writes}\n").as_bytes())
            });
        if let Err(e) = appended {
            let _ = std::io::stderr().write_all(
                format!(
                    "crash counts: cannot append to {}: {e}\n",
                    path.to_string_lossy()
                )
                .as_bytes(),
            );
        }
    }
}
