//! A `kmirror` command whose standard output is closed under it (`kmirror status | head -3`)
//! stops quietly with exit status 141 (128 + SIGPIPE, as a shell reports a tool SIGPIPE
//! killed), not with a panic and a backtrace.

use std::process::{Command, Stdio};

#[test]
fn a_closed_standard_output_ends_the_command_quietly() {
    // The reading end is gone before the command starts: its first line meets a broken pipe.
    let (reader, writer) = std::io::pipe().expect("a pipe");
    drop(reader);
    let out = Command::new(env!("CARGO_BIN_EXE_kmirror"))
        .arg("demo")
        .stdout(Stdio::from(writer))
        .stderr(Stdio::piped())
        .output()
        .expect("the kmirror binary runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(out.status.code(), Some(141), "{stderr}");
}
