//! What the oracle tests share: running the `kmirror` binary and the oracle's Java programs,
//! and, for the tests of a serving node, a `kmirror mirror --listen` that follows its source
//! while it serves.

#![allow(dead_code)] // each test binary uses its own subset

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use kmirror_testsupport::jvm::Oracle;
use kmirror_testsupport::oracle_support::run;
use serde_json::Value;

/// Runs `kmirror ARGS` to completion (at most 180 s).
pub fn kmirror(args: &[&str]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_kmirror"));
    command.args(args);
    run(command, Duration::from_secs(180))
}

/// Runs `kmirror ARGS` to completion; its stdout (a failure fails the test).
pub fn kmirror_ok(args: &[&str]) -> String {
    let output = kmirror(args);
    assert!(
        output.status.success(),
        "kmirror {args:?} failed: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// A Java program of the oracle: its JSON lines.
pub fn java(oracle: &Oracle, class: &str, bootstrap: &str, steps: &[&str]) -> Vec<Value> {
    let mut command = oracle.command(class);
    command.arg(bootstrap).args(steps);
    let output = run(command, Duration::from_secs(180));
    assert!(
        output.status.success(),
        "{class} {steps:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect()
}

/// A `kmirror mirror` that follows the source and serves clients, or a `kmirror serve`; its
/// listen address.
pub struct Serving {
    child: Child,
    /// Where it serves clients.
    pub address: String,
}

impl Serving {
    /// `kmirror mirror --topics TOPICS --listen` from `bootstrap` into `dest`, syncing every
    /// 500 ms.
    pub fn start(bootstrap: &str, dest: &str, topics: &str) -> Serving {
        Serving::spawn(&[
            "mirror",
            "--source-bootstrap",
            bootstrap,
            "--topics",
            topics,
            "--dest",
            dest,
            "--listen",
            "127.0.0.1:0",
            "--poll-ms",
            "50",
            "--sync-interval-ms",
            "500",
            "--quiet",
        ])
    }

    /// `kmirror serve --dest DEST --listen 127.0.0.1:0`: an existing node served.
    pub fn serve(dest: &str) -> Serving {
        Serving::spawn(&["serve", "--dest", dest, "--listen", "127.0.0.1:0"])
    }

    /// `kmirror serve --create --dest DEST --listen ... EXTRA`: a node of its own.
    pub fn new_node(dest: &str, extra: &[&str]) -> Serving {
        let args = [
            "serve",
            "--create",
            "--dest",
            dest,
            "--listen",
            "127.0.0.1:0",
        ];
        Serving::spawn(&[&args[..], extra].concat())
    }

    /// `kmirror ARGS`, once it says where it serves clients.
    fn spawn(args: &[&str]) -> Serving {
        let mut child = Command::new(env!("CARGO_BIN_EXE_kmirror"))
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("kmirror starts");
        let stdout = child.stdout.take().expect("stdout");
        let (send, lines) = mpsc::channel();
        let name = args[0].to_owned();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                eprintln!("{name}: {line}");
                if send.send(line).is_err() {
                    return;
                }
            }
        });
        let deadline = Instant::now() + Duration::from_secs(60);
        let address = loop {
            let line = lines
                .recv_timeout(deadline.saturating_duration_since(Instant::now()))
                .expect("kmirror says where it serves clients");
            if let Some(rest) = line.strip_prefix("serving Kafka clients on ") {
                break rest.split_whitespace().next().expect("address").to_owned();
            }
        };
        std::thread::spawn(move || for _ in lines {});
        Serving { child, address }
    }

    /// SIGTERM, then the exit status (a clean close is 0).
    pub fn stop(mut self) -> Option<i32> {
        let pid = self.child.id().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        self.child.wait().expect("wait").code()
    }
}

/// The committed offsets a `group` line reports, by partition.
pub fn commits(line: &Value) -> BTreeMap<i64, i64> {
    line["committed"]
        .as_object()
        .map(|m| {
            m.iter()
                .map(|(p, o)| (p.parse().unwrap(), o.as_i64().unwrap()))
                .collect()
        })
        .unwrap_or_default()
}

/// The offsets the destination holds for `group` (`metadata/consumer-offsets/<group>.json`).
pub fn read_group_file(dest: &Path, group: &str) -> Option<BTreeMap<i64, i64>> {
    let path = dest
        .join("metadata/consumer-offsets")
        .join(format!("{group}.json"));
    let text = std::fs::read_to_string(path).ok()?;
    let value: Value = serde_json::from_str(&text).ok()?;
    Some(
        value["offsets"]
            .as_array()?
            .iter()
            .map(|o| {
                (
                    o["partition"].as_i64().unwrap(),
                    o["offset"].as_i64().unwrap(),
                )
            })
            .collect(),
    )
}

/// Waits (up to 60 s) for the sync to write `group`'s offsets to the destination.
pub fn wait_for_group_file(dest: &Path, group: &str) -> BTreeMap<i64, i64> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(offsets) = read_group_file(dest, group).filter(|o| !o.is_empty()) {
            return offsets;
        }
        assert!(
            Instant::now() < deadline,
            "the sync never wrote {group}'s offsets"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}
