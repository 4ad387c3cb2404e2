//! The `kmirror` binary's commands run in the bench's own process (the binary's `main` minus
//! the process start), for the benchmarks that time a `kmirror mirror` or set a destination up.

use std::path::Path;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::Parser;

/// The argument parser of the `kmirror` binary's log commands.
#[derive(Parser)]
struct Kmirror {
    #[command(subcommand)]
    command: kmirror::log_cli::LogCommand,
}

/// Runs `kmirror ARGS...` (without the program name); panics unless it succeeds. Its time.
pub fn kmirror(args: &[&str]) -> Duration {
    let start = Instant::now();
    let cli = Kmirror::try_parse_from(std::iter::once("kmirror").chain(args.iter().copied()))
        .expect("valid arguments");
    let code = kmirror::log_cli::run(cli.command).unwrap_or_else(|e| panic!("kmirror: {e}"));
    let elapsed = start.elapsed();
    assert_eq!(code, ExitCode::SUCCESS, "kmirror {args:?}");
    elapsed
}

/// `kmirror mirror --source-bootstrap B --topics TOPICS --dest DEST --until-caught-up --quiet`.
pub fn kmirror_mirror(bootstrap: &str, topics: &str, dest: &Path) -> Duration {
    let dest = dest.to_str().expect("a UTF-8 path");
    kmirror(&[
        "mirror",
        "--source-bootstrap",
        bootstrap,
        "--topics",
        topics,
        "--dest",
        dest,
        "--until-caught-up",
        "--quiet",
    ])
}
