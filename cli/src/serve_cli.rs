//! `kmirror serve --dest DIR --listen HOST:PORT`: a node destination on Kafka's wire
//! ([`kmirror_harness::serve`]), and the listener options `kmirror mirror --topics` shares.
//!
//! The node is opened as `kmirror stop` opens it (no source); `kmirror stop|pause|resume
//! --topics` reach it through its control channel, and their effect on the produce gates
//! reaches connected clients with their next request. Ctrl-C (or SIGTERM) closes it cleanly.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use kmirror_harness::clock::Clock;
use kmirror_harness::node::{NodeDest, NodeDriver, NodeIdle, NodeMeta, NodeUntil};
use kmirror_harness::serve::ServeOptions;
use kmirror_kernel::config::MirrorConfig;
use kmirror_kernel::node::DEFAULT_MIRROR_STATE_PARTITIONS;

use crate::log_cli::SystemClock;

/// Where and how the node listens for Kafka clients.
#[derive(Args, Debug, Clone)]
pub struct ListenArgs {
    /// Serve Kafka clients on this address (HOST:PORT; port 0 picks a free one).
    #[arg(long, value_name = "HOST:PORT")]
    pub listen: Option<String>,
    /// The address Metadata gives clients (default: the one listened on).
    #[arg(long, value_name = "HOST:PORT", requires = "listen")]
    pub advertised_listener: Option<String>,
    /// Most client connections open at once.
    #[arg(long, value_name = "N", default_value_t = 1_000, requires = "listen")]
    pub max_connections: usize,
    /// Largest request accepted (bytes; Kafka's socket.request.max.bytes).
    #[arg(long, value_name = "BYTES", default_value_t = 100 << 20, requires = "listen")]
    pub max_request_bytes: usize,
    /// Close a client connection idle this long (ms; Kafka's connections.max.idle.ms).
    #[arg(
        long,
        value_name = "MS",
        default_value_t = 600_000,
        requires = "listen"
    )]
    pub idle_timeout_ms: u64,
    /// TLS and SASL (PLAIN, SCRAM-SHA-256/512) on the listener: Kafka's server.properties keys
    /// (security.protocol, a PEM keystore, sasl.enabled.mechanisms, sasl.jaas.config with
    /// user_NAME="PASSWORD"); see docs/serve.md.
    #[arg(long, value_name = "FILE", requires = "listen")]
    pub listener_config: Option<PathBuf>,
}

impl ListenArgs {
    /// The serving options, when `--listen` was given (`Err`: the listener config is bad).
    pub fn options(&self) -> Result<Option<ServeOptions>, String> {
        let Some(listen) = self.listen.as_deref() else {
            return Ok(None);
        };
        let mut o = ServeOptions::new(listen);
        o.advertised = self.advertised_listener.clone();
        o.max_connections = self.max_connections.max(1);
        o.max_request_bytes = self.max_request_bytes.max(1024);
        o.idle_timeout = Duration::from_millis(self.idle_timeout_ms.max(1));
        if let Some(path) = &self.listener_config {
            o.security =
                kmirror_harness::serve::security::from_file(path).map_err(|e| e.to_string())?;
        }
        Ok(Some(o))
    }

    /// Starts serving on `driver` when `--listen` was given, printing where.
    pub fn start(&self, driver: &mut NodeDriver) -> Result<(), String> {
        let Some(options) = self.options()? else {
            return Ok(());
        };
        let address = driver.serve_clients(&options).map_err(|e| e.to_string())?;
        println!(
            "serving Kafka clients on {address} (bootstrap.servers={}, {})",
            options
                .advertised
                .as_deref()
                .unwrap_or(&address.to_string()),
            options.security.protocol()
        );
        Ok(())
    }
}

/// `kmirror serve`.
#[derive(Args, Debug)]
pub struct ServeArgs {
    /// The node destination to serve.
    #[arg(long, value_name = "DIR")]
    pub dest: PathBuf,
    /// Create an empty node destination at DIR when none is there (a node that stands alone:
    /// Kafka clients create its topics). Without it a missing DIR is an error.
    #[arg(long)]
    pub create: bool,
    /// Replicas of every partition of a node --create makes, the leader included (1 to 16;
    /// the others are in-process followers under DIR/replicas/); checked against an existing
    /// node.
    #[arg(long, value_name = "N")]
    pub replicas: Option<u32>,
    /// The listener.
    #[command(flatten)]
    pub listen: ListenArgs,
}

/// `kmirror serve --dest DIR --listen HOST:PORT`.
pub fn serve(args: ServeArgs) -> Result<ExitCode, String> {
    if args.listen.listen.is_none() {
        return Err("--listen HOST:PORT is missing (where Kafka clients connect)".to_owned());
    }
    let mut clock = SystemClock;
    let options = crate::node_cli::options(None, MirrorConfig::default().stop_strategy);
    let mut driver = if args.create && !NodeDest::is_node_dest(&args.dest) {
        let mut meta = NodeMeta::new(None, DEFAULT_MIRROR_STATE_PARTITIONS);
        meta.replicas = args.replicas.unwrap_or(1);
        let dest = NodeDest::create(&args.dest, meta).map_err(|e| e.to_string())?;
        println!("{}: created an empty node destination", args.dest.display());
        NodeDriver::from_dest(dest, None, options).map_err(|e| e.to_string())?
    } else {
        if !args.dest.exists() {
            return Err(format!(
                "{} does not exist; `kmirror serve --create` makes an empty node destination \
                 there, `kmirror mirror --topics LIST --dest DIR` a mirror",
                args.dest.display()
            ));
        }
        let driver = crate::node_cli::open(&mut clock, &args.dest, options)?;
        crate::node_cli::check_replicas(&driver, args.replicas)?;
        driver
    };
    driver.interrupt_on(crate::signals::stop_flag());
    driver.serve_control().map_err(|e| e.to_string())?;
    args.listen.start(&mut driver)?;
    let meta = driver.dest().meta();
    println!(
        "{}: {} topics, {} partitions; kmirror stop|pause|resume --dest {} --topics ... reach \
         this process; Ctrl-C stops it",
        args.dest.display(),
        meta.topics.len(),
        meta.partitions.len(),
        args.dest.display()
    );
    // `kmirror status` shows what this process writes to status.json each second: the
    // partitions as they are now, the source positions as the last mirror run measured them
    // (serving measures none).
    let measured = crate::node_cli::read_status_file(&args.dest);
    let write_status = |d: &NodeDriver| {
        let status = match &measured {
            Some(older) => d.status().with_source_positions_from(older),
            None => d.status(),
        };
        crate::node_cli::write_status_file(d.dest().root(), &status);
    };
    write_status(&driver);
    let mut last_status = clock.now_ms();
    let end = driver
        .run(
            &mut clock,
            NodeUntil::Forever { poll_ms: 200 },
            &mut |d, now| {
                for line in d.take_events() {
                    println!("  {line}");
                }
                if now - last_status >= 1_000 {
                    last_status = now;
                    write_status(d);
                }
            },
        )
        .map_err(|e| e.to_string())?;
    write_status(&driver);
    let closed = driver.close().map_err(|e| e.to_string());
    match (end, closed) {
        (_, Err(e)) => Err(e),
        (NodeIdle::Interrupted, Ok(())) => {
            println!(
                "{}: stopped by a signal (closed cleanly)",
                args.dest.display()
            );
            Ok(ExitCode::SUCCESS)
        }
        (_, Ok(())) => Ok(ExitCode::SUCCESS),
    }
}
