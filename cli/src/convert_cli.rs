//! `kmirror convert`: a single-partition cluster directory made a node destination
//! ([`kmirror_harness::node::convert`]).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use kmirror_harness::node::convert::convert_single_partition;

/// `kmirror convert --from DIR --dest NEW`.
#[derive(Args, Debug)]
pub struct ConvertArgs {
    /// The single-partition cluster directory (it has cluster.properties); read, left as it is.
    #[arg(long, value_name = "DIR")]
    pub from: PathBuf,
    /// The node destination to make (a new or empty directory).
    #[arg(long, value_name = "NEW")]
    pub dest: PathBuf,
}

/// Converts, then says what the node holds and how to go on with it.
pub fn convert(args: ConvertArgs) -> Result<ExitCode, String> {
    let c = convert_single_partition(&args.from, &args.dest).map_err(|e| e.to_string())?;
    let dest = args.dest.display();
    println!(
        "{dest}: a node destination holding {}-0 ({}, LEO {}, {} replica{}) from {}",
        c.topic,
        c.state,
        c.log_end_offset,
        c.replicas,
        if c.replicas == 1 { "" } else { "s" },
        args.from.display()
    );
    match c
        .mirror_name
        .as_deref()
        .map(|m| (m, m.strip_suffix(".removed")))
    {
        None | Some((_, Some(_))) => {
            println!("serve it to Kafka's clients: kmirror serve --dest {dest} --listen HOST:PORT")
        }
        Some((mirror, None)) => {
            let mirror = mirror.strip_suffix(".paused").unwrap_or(mirror);
            println!(
                "go on mirroring it from a live cluster: kmirror mirror --source-bootstrap \
                 HOST:PORT --topics {} --dest {dest} --mirror-name {mirror}",
                c.topic
            )
        }
    }
    Ok(ExitCode::SUCCESS)
}
