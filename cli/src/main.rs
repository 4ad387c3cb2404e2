//! `kmirror`: model-check, simulate and explore the KIP-1279 mirroring design, and run the
//! kernel on real on-disk Kafka logs.

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use kmirror::{convert_cli, log_cli, model_cli, replay};

/// Kafka cluster mirroring (KIP-1279): a pure kernel, its exhaustive model, and real logs.
#[derive(Parser)]
#[command(name = "kmirror", version, about, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Exhaustively model-check the mirroring design (every interleaving, depth-first).
    Check(model_cli::CheckArgs),
    /// Random walks through configurations too big to exhaust.
    Simulate(model_cli::SimulateArgs),
    /// Serve stateright's Explorer to step through the model in a browser.
    Explore(model_cli::ExploreArgs),
    /// Print a saved trace (a counterexample or example) as a numbered story.
    Show(model_cli::ShowArgs),
    /// Print the mirror state machine (the kernel's transition table) as a Mermaid diagram.
    Diagram(model_cli::DiagramArgs),
    /// Replay a model trace on real on-disk Kafka logs, comparing after every step.
    Replay(replay::ReplayArgs),
    /// Make a node destination of a single-partition cluster directory (left as it is).
    ///
    /// The leader's log and __mirror_state are copied into NEW's Kafka log dir and
    /// node.properties takes the topic, its mirror.name, the leader epoch, the produce gate and
    /// the replica count; the node's followers copy the log when it first runs.
    Convert(convert_cli::ConvertArgs),
    #[command(flatten)]
    Logs(Box<log_cli::LogCommand>),
}

/// Exit status of a command whose standard output was closed under it: 128 + SIGPIPE, what a
/// shell reports for a tool SIGPIPE killed.
const BROKEN_PIPE_EXIT: i32 = 141;

/// Ends the process quietly when its standard output is closed under it (`kmirror status |
/// head -3`). Rust ignores SIGPIPE, so `println!` panics on the broken pipe instead; a command
/// line tool stops there, as it would have died of SIGPIPE, without a panic message.
fn exit_quietly_on_broken_pipe() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let payload = info.payload();
        let message = payload
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| payload.downcast_ref::<&str>().copied())
            .unwrap_or("");
        if message.starts_with("failed printing to stdout") && message.contains("Broken pipe") {
            std::process::exit(BROKEN_PIPE_EXIT);
        }
        default(info);
    }));
}

fn main() -> ExitCode {
    exit_quietly_on_broken_pipe();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Check(args) => model_cli::check(args),
        Command::Simulate(args) => model_cli::simulate(args),
        Command::Explore(args) => model_cli::explore(args),
        Command::Show(args) => model_cli::show(args),
        Command::Diagram(args) => model_cli::diagram(args),
        Command::Replay(args) => replay::run(args),
        Command::Convert(args) => convert_cli::convert(args),
        Command::Logs(cmd) => log_cli::run(*cmd),
    };
    match result {
        Ok(code) => code,
        Err(message) => {
            eprintln!("kmirror: {message}");
            ExitCode::from(2)
        }
    }
}
