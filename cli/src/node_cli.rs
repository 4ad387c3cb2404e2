//! `kmirror mirror|stop|pause|resume|status` on a **node destination**: many topics and
//! partitions behind the kernel's node manager (`--topics`, names and globs), in the format of
//! [`kmirror_harness::node::dest`].
//!
//! - `kmirror mirror --source-bootstrap H:P --topics 'orders,pay.*' --dest DIR
//!   [--until-caught-up]`: AddTopicsToMirror for every selected topic (created on the node with
//!   the source's id and partition count), then one process mirrors them all (one Fetch per
//!   source broker per round).
//! - `kmirror stop|pause|resume --dest DIR --topics LIST`: RemoveTopicsFromMirror /
//!   PauseMirrorTopics / ResumeMirrorTopics, answered per topic with Kafka's error codes, then
//!   the node is driven until it settles (no source needed). While a `kmirror mirror` holds
//!   the destination, the request is handed to it through the control channel
//!   ([`kmirror_harness::node::control`]) and its answer printed the same way.
//! - `kmirror status --dest DIR [--json]`: per partition state, LEO, HW, LSO, lag; per topic a
//!   rollup.
//! - `kmirror verify DIR`: the full CRC scan of every partition and `__mirror_state` partition
//!   ([`kmirror_harness::node::verify`]).
//!
//! A refused topic (unknown, a glob matching nothing, in another mirror, re-created, fewer
//! partitions at the source) is a `kmirror: TOPIC: ERROR_CODE: message` line; the accepted
//! ones go on; a summary line ends the output; the exit code is then 2.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

use kmirror_harness::clock::Clock;
use kmirror_harness::node::control::SETTLE_MS;
use kmirror_harness::node::dest::STATUS_FILE;
use kmirror_harness::node::follow::{left_line, Follow};
use kmirror_harness::node::verify::verify_node;
use kmirror_harness::node::{
    ControlClient, ControlRequest, ControlResponse, NodeDest, NodeDriver, NodeDriverOptions,
    NodeError, NodeIdle, NodeMeta, NodeStatus, NodeUntil, PartitionStatus, RequestStatus,
    TopicChange, TopicResults, TopicsVerb,
};
use kmirror_harness::wire::authorization::AclResource;
use kmirror_harness::wire::source_cluster::TopicError;
use kmirror_harness::wire::topic_selection::SelectionMiss;
use kmirror_harness::wire::{SecurityConfig, SourceCluster, SourceClusterOptions, TopicSelection};
use kmirror_kernel::config::{MirrorConfig, RetryPolicy, StopStrategy};
use kmirror_kernel::desired::DesiredState;
use kmirror_kernel::discovery::{discover, Left};
use kmirror_kernel::types::MirrorName;

use crate::log_cli::{
    report_verdicts, scan_line, MirrorArgs, PauseArgs, ResumeArgs, RunArgs, StatusArgs, StopArgs,
    StopStrategyArg, SystemClock, Verdict, VerifyArgs,
};
use crate::node_progress::NodeProgress;
use crate::node_sync_cli::InProcessSync;

/// How long a command waits for a node destination another kmirror process holds (ms).
const BUSY_WAIT_MS: i64 = 10_000;

/// Opens the node destination at `root`, waiting up to 10 s for another process to let go.
pub(crate) fn open(
    clock: &mut SystemClock,
    root: &Path,
    options: NodeDriverOptions,
) -> Result<NodeDriver, String> {
    let deadline = clock.now_ms() + BUSY_WAIT_MS;
    loop {
        match NodeDriver::open(root, None, options.clone()) {
            Err(NodeError::Busy { .. }) if clock.now_ms() < deadline => {
                let now = clock.now_ms();
                clock.sleep_until(now + 20);
            }
            other => return other.map_err(|e| e.to_string()),
        }
    }
}

/// The driver's options from the command line's.
pub(crate) fn options(run: Option<&RunArgs>, stop_strategy: StopStrategy) -> NodeDriverOptions {
    let mut o = NodeDriverOptions {
        mirror: MirrorConfig {
            stop_strategy,
            ..MirrorConfig::default()
        },
        ..NodeDriverOptions::default()
    };
    if let Some(run) = run {
        o.mirror.retry = RetryPolicy {
            max_attempts: run.max_retries,
            ..RetryPolicy::default()
        };
        o.max_fetch_batches = run.max_batches.max(1);
        o.flush = run.flush;
        o.halt_after_effects = run.halt_after_effects;
    }
    o
}

fn source_cluster(
    bootstrap: &str,
    names: &[String],
    security: &Arc<SecurityConfig>,
) -> Result<SourceCluster, String> {
    let selection = TopicSelection::names(names).map_err(|e| e.to_string())?;
    Ok(
        SourceCluster::new(bootstrap, selection, SourceClusterOptions::default())
            .with_security(security.clone()),
    )
}

/// Prints one line per topic of an AddTopicsToMirror into `mirror` (`failback`: the
/// failed-over ones it puts back); returns whether every topic was accepted.
fn print_results(mirror: &MirrorName, failback: &[String], results: &TopicResults) -> bool {
    for (topic, result) in results {
        match result {
            Ok(TopicChange::Changed) if failback.contains(topic) => {
                println!("{topic}: failing back: in mirror {mirror} again")
            }
            Ok(TopicChange::Changed) => println!("{topic}: in mirror {mirror}"),
            Ok(TopicChange::Unchanged) => println!("{topic}: already in mirror {mirror}"),
            Err(e) => eprintln!("kmirror: {topic}: {e}"),
        }
    }
    results.values().all(Result::is_ok)
}

/// Writes `status.json` (best effort: it only feeds the lag column of a later status), dated.
fn write_status(driver: &NodeDriver) {
    let mut status = driver.status();
    status.measured_at_ms = Some(SystemClock.now_ms());
    write_status_file(driver.dest().root(), &status);
}

/// Writes `status` as `root/status.json`, what `kmirror status` shows while a process holds the
/// directory (best effort: a failed write leaves the previous one).
pub(crate) fn write_status_file(root: &Path, status: &NodeStatus) {
    if let Ok(text) = serde_json::to_string_pretty(status) {
        let _ = kmirror_harness::segment::write_atomically(root, STATUS_FILE, text.as_bytes());
    }
}

/// The `status.json` a run left in `root`, if any and readable.
pub(crate) fn read_status_file(root: &Path) -> Option<NodeStatus> {
    std::fs::read(root.join(STATUS_FILE))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
}

/// What a run has done, for the progress lines and the summary: totals at the start and at
/// the previous progress line.
#[derive(Clone, Copy, Debug)]
struct Progress {
    /// When the run started (ms).
    started_ms: i64,
    /// Sum of the partitions' log end offsets and bytes appended at the start.
    start: (i64, u64),
    /// The same at the previous progress line, and when it was printed.
    last: (i64, i64, u64),
}

impl Progress {
    fn new(driver: &NodeDriver, now_ms: i64) -> Self {
        let leo = leo_total(&driver.status());
        let bytes = driver.stats().bytes;
        Progress {
            started_ms: now_ms,
            start: (leo, bytes),
            last: (now_ms, leo, bytes),
        }
    }
}

fn leo_total(status: &NodeStatus) -> i64 {
    status.partitions.iter().map(|p| p.log_end_offset).sum()
}

/// "1000 partitions: MIRRORING x990, PREPARING x10" and the total lag in offsets.
fn partitions_and_lag(status: &NodeStatus) -> (String, i64) {
    let mut states: BTreeMap<&str, u32> = BTreeMap::new();
    for p in &status.partitions {
        *states.entry(p.state.as_str()).or_insert(0) += 1;
    }
    let states: Vec<String> = states.iter().map(|(s, n)| format!("{s} x{n}")).collect();
    let lag: i64 = status.partitions.iter().filter_map(|p| p.lag).sum();
    let line = format!(
        "{} partitions: {}",
        status.partitions.len(),
        states.join(", ")
    );
    (line, lag)
}

/// `count` per second over `ms` milliseconds (0 when no time passed).
fn per_second(count: f64, ms: i64) -> f64 {
    if ms <= 0 {
        0.0
    } else {
        count * 1_000.0 / ms as f64
    }
}

/// The progress line: states, rates since the previous line, bytes copied, lag.
fn progress_line(driver: &NodeDriver, progress: &mut Progress, now_ms: i64) -> String {
    let status = driver.status();
    let (partitions, lag) = partitions_and_lag(&status);
    let leo = leo_total(&status);
    let bytes = driver.stats().bytes;
    let (last_ms, last_leo, last_bytes) = progress.last;
    let ms = now_ms - last_ms;
    let records_s = per_second((leo - last_leo).max(0) as f64, ms);
    let mib_s = per_second(bytes.saturating_sub(last_bytes) as f64, ms) / (1 << 20) as f64;
    progress.last = (now_ms, leo, bytes);
    format!(
        "{partitions}; {records_s:.0} records/s, {mib_s:.1} MiB/s; {} bytes copied; lag {lag} \
         offsets",
        bytes.saturating_sub(progress.start.1)
    )
}

/// The final line's figures: what the run mirrored, how fast, and the lag left.
fn summary(records: i64, bytes: u64, elapsed_ms: i64, lag: i64) -> String {
    format!(
        "mirrored {records} records, {bytes} bytes in {:.1} s ({:.0} records/s, {:.1} MiB/s); lag \
         {lag} offsets",
        elapsed_ms.max(0) as f64 / 1_000.0,
        per_second(records as f64, elapsed_ms),
        per_second(bytes as f64, elapsed_ms) / (1 << 20) as f64,
    )
}

/// The final line of a run: partitions by state and [`summary`].
fn summary_line(driver: &NodeDriver, progress: &Progress, now_ms: i64) -> String {
    let status = driver.status();
    let (partitions, lag) = partitions_and_lag(&status);
    let records = i64::try_from(driver.stats().offsets).unwrap_or(i64::MAX);
    let bytes = driver.stats().bytes.saturating_sub(progress.start.1);
    format!(
        "{partitions}; {}",
        summary(records, bytes, now_ms - progress.started_ms, lag)
    )
}

/// The offsets copied (the partitions' log end offsets) and the source's end (plus the lag),
/// summed over the partitions.
fn copied_of_source_end(status: &NodeStatus) -> (i64, i64) {
    let copied = leo_total(status);
    let lag: i64 = status.partitions.iter().filter_map(|p| p.lag).sum();
    (copied, copied + lag)
}

/// Runs `driver` until `until`, showing progress ([`NodeProgress`]: a bar on a terminal, a
/// line a second otherwise, nothing when `quiet`) and running `sync`'s rounds between steps
/// when given. Returns how it ended and the run's [`Progress`].
fn drive(
    driver: &mut NodeDriver,
    clock: &mut SystemClock,
    until: NodeUntil,
    quiet: bool,
    mut sync: Option<&mut InProcessSync>,
) -> Result<(NodeIdle, Progress), String> {
    let follow = matches!(until, NodeUntil::Forever { .. });
    let start = clock.now_ms();
    let mut progress = Progress::new(driver, start);
    let mut display = NodeProgress::new(quiet);
    let mut last_status = start;
    let mut on_step = |d: &mut NodeDriver, now: i64| {
        if follow {
            // A run that follows the source says what happens as it happens.
            for line in d.take_events() {
                if !quiet {
                    display.print(&format!("  {line}\n"));
                }
            }
        }
        if let Some(text) = sync.as_deref_mut().and_then(|s| s.step(d, now)) {
            if !quiet {
                display.print(&text);
            }
        }
        if follow && now - last_status >= 1_000 {
            last_status = now;
            write_status(d);
        }
        if display.due(now) {
            let (copied, end) = copied_of_source_end(&d.status());
            display.show(copied, end, &progress_line(d, &mut progress, now));
        }
    };
    let end = driver.run(clock, until, &mut on_step);
    display.finish();
    if let Err(NodeError::Halted { effects }) = &end {
        // A crash test asked for this point (--halt-after-effects): say so, then wait for its
        // SIGKILL with every file as the halt left it (nothing closed, nothing flushed).
        eprintln!("kmirror: halted after {effects} effects; waiting to be killed");
        std::thread::sleep(std::time::Duration::from_secs(60));
        return Err(format!("halted after {effects} effects and was not killed"));
    }
    Ok((end.map_err(|e| e.to_string())?, progress))
}

fn print_events(driver: &mut NodeDriver, quiet: bool) {
    for line in driver.take_events() {
        if !quiet {
            println!("  {line}");
        }
    }
}

/// `kmirror mirror --source-bootstrap H:P --topics LIST --dest DIR`.
pub fn mirror(args: MirrorArgs) -> Result<ExitCode, String> {
    let mut clock = SystemClock;
    let Some(topics) = args.topics.as_deref() else {
        return Err("--topics is missing".to_owned());
    };
    let Some(bootstrap) = args.source_bootstrap.as_deref() else {
        return Err(
            "--topics mirrors from a live cluster: give --source-bootstrap HOST:PORT".to_owned(),
        );
    };
    let include = TopicSelection::parse(topics).map_err(|e| e.to_string())?;
    let exclude = match args.exclude.trim() {
        "" => None,
        list => Some(TopicSelection::parse(list).map_err(|e| format!("--exclude: {e}"))?),
    };
    if args.dest.exists() && !args.dest.is_dir() {
        return Err(format!(
            "{} is a file, not a directory: give --dest a directory (new or a node destination)",
            args.dest.display()
        ));
    }
    if NodeDest::is_single_partition(&args.dest) {
        return Err(NodeError::SinglePartition {
            dir: args.dest.clone(),
        }
        .to_string());
    }
    // The selection resolved on the source cluster, by the client that then follows it (its
    // connections open once: across a link each new one costs round trips).
    let security = crate::log_cli::source_security(args.source_config.as_deref())?;
    let source_options = SourceClusterOptions {
        metadata_max_age: std::time::Duration::from_millis(args.metadata_refresh_ms.max(1)),
        fetches_in_flight: args.fetches_in_flight,
        ..SourceClusterOptions::default()
    };
    let mut resolver = SourceCluster::new(bootstrap, include.clone(), source_options)
        .with_security(security.clone());
    let metadata = resolver.metadata().map_err(|e| e.to_string())?.clone();
    // A missing Read ACL (or a refused login): nothing is created or run.
    match resolver.check_read_access() {
        Err(e) if !e.is_connection() => return Err(e.to_string()),
        _ => {}
    }
    // Entries of the selection the source refuses: one `kmirror: TOPIC: ...` line each.
    for e in &metadata.errors {
        eprintln!("kmirror: {}", selection_error_line(e));
    }
    let missed = metadata.errors.len();
    let mut refused = missed > 0;
    let mirror = match (&args.mirror_name, &metadata.cluster_id) {
        (Some(m), _) => {
            MirrorName::new(m.as_str()).map_err(|e| format!("invalid --mirror-name {m:?}: {e}"))?
        }
        (None, Some(id)) => MirrorName::new(id.as_str()).map_err(|e| {
            format!(
                "the source's cluster id {id:?} cannot be a mirror name ({e}); pass --mirror-name"
            )
        })?,
        (None, None) => {
            return Err("the source cluster has no cluster id; pass --mirror-name".to_owned())
        }
    };
    let follow = Follow {
        mirror: mirror.clone(),
        include,
        exclude,
        metadata_refresh_ms: i64::try_from(args.metadata_refresh_ms.max(1)).unwrap_or(i64::MAX),
    };
    let matched: Vec<&str> = metadata
        .topics
        .keys()
        .map(String::as_str)
        .filter(|name| follow.selects(name, false))
        .collect();
    if matched.is_empty() {
        eprintln!(
            "kmirror: mirror: no topic of the source matches --topics {topics:?}{}; nothing \
             changed",
            if follow.exclude.is_some() {
                format!(" outside --exclude {:?}", args.exclude)
            } else {
                String::new()
            }
        );
        return Ok(ExitCode::from(2));
    }
    let options = options(Some(&args.run), StopStrategy::TruncateToLso);
    let mut driver = if NodeDest::is_node_dest(&args.dest) {
        let driver = open(&mut clock, &args.dest, options)?;
        check_replicas(&driver, args.replicas)?;
        if let Some(old) = &driver.dest().meta().source_bootstrap {
            if old != bootstrap {
                eprintln!(
                    "kmirror: {} mirrored from {old}; now from {bootstrap}",
                    args.dest.display()
                );
            }
        }
        driver
    } else {
        let mut meta = NodeMeta::new(
            Some(bootstrap.to_owned()),
            kmirror_kernel::node::DEFAULT_MIRROR_STATE_PARTITIONS,
        );
        meta.replicas = args.replicas.unwrap_or(1);
        let dest = NodeDest::create(&args.dest, meta).map_err(|e| e.to_string())?;
        NodeDriver::from_dest(dest, None, options).map_err(|e| e.to_string())?
    };
    // What this run puts in the mirror: never a failed-over topic, unless --failback.
    let mut catalogue = driver.dest().meta().catalogue();
    catalogue.insert_mirror(mirror.clone());
    let found = discover(&catalogue, &mirror, matched, args.failback, None);
    for (topic, left) in &found.left {
        if matches!(left, Left::FailedOver) {
            println!("{}", left_line(topic, left));
        }
    }
    if args.failback && found.failback.is_empty() {
        println!("no failed-over topic matches --topics {topics:?}: nothing to fail back");
    }
    if !found.failback.is_empty()
        && !crate::failback_cli::failback_confirmed(
            &driver,
            &found.failback,
            &mut resolver,
            args.yes,
        )?
    {
        driver.close().map_err(|e| e.to_string())?;
        return Ok(ExitCode::from(2));
    }
    // A topic in another mirror (or with a bad mirror.name) is asked anyway: the controller
    // refuses it with Kafka's error code, as AddTopicsToMirror would.
    // Topics mirroring already are asked again too: a repeat changes nothing, and the
    // destination's checks against the source (same id, no fewer partitions) still run. A
    // paused one stays paused (AddTopicsToMirror would refuse it): `resume` resumes it.
    let meta = driver.dest().meta();
    let (paused, mirroring): (Vec<&String>, Vec<&String>) = found.already.iter().partition(|t| {
        meta.topics
            .get(*t)
            .is_some_and(|topic| matches!(topic.desired(t), Ok(DesiredState::Pause(_))))
    });
    for topic in paused {
        println!(
            "{topic}: paused in mirror {mirror} (`kmirror resume --topics {topic}` mirrors it \
             again)"
        );
    }
    let mut asked = found.request_topics();
    asked.extend(mirroring.into_iter().cloned());
    asked.extend(
        found
            .left
            .iter()
            .filter(|(_, left)| !matches!(left, Left::FailedOver))
            .map(|(topic, _)| topic.clone()),
    );
    let wanted: Vec<(String, kmirror_kernel::types::TopicId, i32)> = asked
        .iter()
        .filter_map(|name| metadata.topics.get(name))
        .map(|t| {
            (
                t.name.clone(),
                t.topic_id,
                i32::try_from(t.partitions.len()).unwrap_or(i32::MAX),
            )
        })
        .collect();
    let now = clock.now_ms();
    let results = driver
        .add_topics(&mirror, &wanted, now)
        .map_err(|e| e.to_string())?;
    refused |= !print_results(&mirror, &found.failback, &results);
    if !results.is_empty() && !results.values().any(Result::is_ok) {
        // Every topic asked for refused: nothing runs, nothing changes.
        driver.close().map_err(|e| e.to_string())?;
        eprintln!(
            "kmirror: mirror: {} of {} refused; nothing changed",
            results.len() + missed,
            count_topics(results.len() + missed)
        );
        return Ok(ExitCode::from(2));
    }
    let mirrored_any = driver.dest().meta().topics.iter().any(|(name, t)| {
        t.desired(name)
            .is_ok_and(|d| matches!(d, DesiredState::Mirror(_) | DesiredState::Pause(_)))
    });
    if !mirrored_any {
        // Nothing to follow: every selected topic refused or skipped.
        driver.close().map_err(|e| e.to_string())?;
        eprintln!(
            "kmirror: mirror: no topic of {} is in a mirror; nothing to follow",
            args.dest.display()
        );
        return Ok(ExitCode::from(2));
    }
    driver
        .set_source_bootstrap(bootstrap)
        .map_err(|e| e.to_string())?;
    resolver.set_selection(follow.source_selection(driver.dest().meta()));
    driver.set_source(Some(resolver));
    driver.follow(follow, found.left.keys().cloned().collect());
    driver.interrupt_on(crate::signals::stop_flag());
    // `kmirror stop|pause|resume --topics` reach this run through the control channel.
    driver.serve_control().map_err(|e| e.to_string())?;
    args.serve.start(&mut driver)?;
    let until = if args.run.until_caught_up {
        NodeUntil::CaughtUp
    } else {
        NodeUntil::Forever {
            poll_ms: i64::try_from(args.run.poll_ms).unwrap_or(i64::MAX),
        }
    };
    let names: Vec<String> = driver.dest().meta().topics.keys().cloned().collect();
    let mut sync = match args.sync_interval_ms {
        Some(ms) => Some(InProcessSync::new(
            ms, &args.sync, bootstrap, &names[0], &security,
        )?),
        None => None,
    };
    let (end, progress) = drive(
        &mut driver,
        &mut clock,
        until,
        args.run.quiet,
        sync.as_mut(),
    )?;
    if let Some(sync) = sync.as_mut() {
        // Caught up: one more round, so the run ends with the source's metadata.
        if let Some(text) = sync.final_round(&driver) {
            if !args.run.quiet {
                print!("{text}");
            }
        }
    }
    print_events(&mut driver, args.run.quiet);
    write_status(&driver);
    println!(
        "{}: {} ({}); {}",
        args.dest.display(),
        match end {
            NodeIdle::CaughtUp => "caught up with the source",
            NodeIdle::Interrupted => "stopped by a signal (closed cleanly)",
            _ => "settled",
        },
        mirror,
        summary_line(&driver, &progress, clock.now_ms())
    );
    let failed = driver
        .status()
        .partitions
        .iter()
        .any(|p| p.state == "FAILED");
    driver.close().map_err(|e| e.to_string())?;
    let sync_failed = sync.as_ref().and_then(InProcessSync::failure);
    if let Some(why) = sync_failed {
        eprintln!("kmirror: {why}");
    }
    Ok(if refused || sync_failed.is_some() {
        ExitCode::from(2)
    } else if failed {
        eprintln!("kmirror: some partitions are FAILED (see `kmirror status --dest DIR`)");
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// `TOPIC: CODE: message` for an entry of `--topics` the source's metadata refuses.
fn selection_error_line(e: &TopicError) -> String {
    match e {
        TopicError::Selection {
            miss: SelectionMiss::UnknownTopic { topic },
            address,
        } => format!(
            "{topic}: UNKNOWN_TOPIC_OR_PARTITION: the source cluster has no such topic (Metadata \
             from Kafka broker {address})"
        ),
        TopicError::Selection {
            miss: SelectionMiss::NoMatch { glob },
            address,
        } => format!(
            "{glob}: UNKNOWN_TOPIC_OR_PARTITION: the glob matches no topic of the source cluster \
             (Metadata from Kafka broker {address})"
        ),
        TopicError::Broker { topic, .. } => format!("{topic}: {e}"),
        TopicError::Denied { acl, .. } => match &acl.resource {
            AclResource::Topic(topic) => format!("{topic}: {e}"),
            _ => e.to_string(),
        },
    }
}

/// How long `stop`, `pause` and `resume` wait for a running mirror to claim a request handed
/// over the control channel before withdrawing it (ms).
const CLAIM_WAIT_MS: i64 = 10_000;

/// The environment variable overriding [`CLAIM_WAIT_MS`] (tests of the timeout).
const CLAIM_WAIT_ENV: &str = "KMIRROR_CONTROL_CLAIM_MS";

/// How long they wait for the answer to a claimed request (ms): the mirror answers once the
/// partitions settled, at the latest after [`SETTLE_MS`].
const ANSWER_WAIT_MS: i64 = SETTLE_MS + 10_000;

/// A node destination opened by this process, or a running mirror's answer.
enum Held {
    /// The lock was free (or freed): this process runs the request.
    Driver(Box<NodeDriver>),
    /// A running `kmirror mirror` ran it (the control channel).
    Answered(ControlResponse),
}

/// Opens `dest`; while another process holds it, hands `request` to it through the control
/// channel ([`kmirror_harness::node::control`]) and waits for the answer, taking the lock
/// instead if it frees before a mirror claims the request.
fn open_or_hand_over(
    clock: &mut SystemClock,
    dest: &Path,
    options: &NodeDriverOptions,
    request: &ControlRequest,
) -> Result<Held, String> {
    match NodeDriver::open(dest, None, options.clone()) {
        Err(NodeError::Busy { .. }) => {}
        other => {
            return other
                .map(|d| Held::Driver(Box::new(d)))
                .map_err(|e| e.to_string())
        }
    }
    let client = ControlClient::submit(dest, request).map_err(|e| e.to_string())?;
    let claim_wait_ms = std::env::var(CLAIM_WAIT_ENV)
        .ok()
        .and_then(|v| v.parse::<i64>().ok())
        .unwrap_or(CLAIM_WAIT_MS);
    let start = clock.now_ms();
    let mut claimed_at: Option<i64> = None;
    loop {
        let now = clock.now_ms();
        match client.status().map_err(|e| e.to_string())? {
            RequestStatus::Answered(response) => return Ok(Held::Answered(response)),
            RequestStatus::Claimed => {
                let since = *claimed_at.get_or_insert(now);
                if now - since > ANSWER_WAIT_MS {
                    return Err(format!(
                        "the kmirror mirror running on {} took request {} but has not answered \
                         in {} s; see `kmirror status --dest {}`",
                        dest.display(),
                        client.id(),
                        ANSWER_WAIT_MS / 1_000,
                        dest.display()
                    ));
                }
            }
            RequestStatus::Waiting => match NodeDriver::open(dest, None, options.clone()) {
                // The holder was not a mirror and has finished: run the request here, unless a
                // mirror claimed it in the meantime (its answer then follows).
                Ok(driver) => {
                    if client.withdraw().map_err(|e| e.to_string())? {
                        return Ok(Held::Driver(Box::new(driver)));
                    }
                }
                Err(NodeError::Busy { .. }) => {
                    if now - start > claim_wait_ms
                        && client.withdraw().map_err(|e| e.to_string())?
                    {
                        return Err(format!(
                            "{} is held by another kmirror process that took no control request \
                             in {} (a running `kmirror mirror --topics` takes one within a \
                             second; another command or `kmirror sync` does not); nothing was \
                             changed: try again once it is done",
                            dest.display(),
                            if claim_wait_ms % 1_000 == 0 {
                                format!("{} s", claim_wait_ms / 1_000)
                            } else {
                                format!("{claim_wait_ms} ms")
                            }
                        ));
                    }
                }
                Err(e) => {
                    let _ = client.withdraw();
                    return Err(e.to_string());
                }
            },
        }
        clock.sleep_until(now + 20);
    }
}

/// `orders: removed from its mirror (failing over)` on stdout for each accepted topic, and
/// `kmirror: nope: UNKNOWN_TOPIC_OR_PARTITION: the destination has no such topic` on stderr
/// for each refused one (or selection entry selecting none).
fn print_topic_results(verb: TopicsVerb, results: &TopicResults) {
    let action = match verb {
        TopicsVerb::Stop => "removed from its mirror (failing over)",
        TopicsVerb::Pause => "pausing",
        TopicsVerb::Resume => "resuming",
    };
    let already = match verb {
        TopicsVerb::Stop => "already removed from its mirror",
        TopicsVerb::Pause => "already paused",
        TopicsVerb::Resume => "already resuming",
    };
    for (topic, result) in results {
        match result {
            Ok(TopicChange::Changed) => println!("{topic}: {action}"),
            Ok(TopicChange::Unchanged) => println!("{topic}: {already}"),
            Err(e) => eprintln!("kmirror: {topic}: {}: {}", e.code, e.message),
        }
    }
}

pub(crate) fn count_topics(n: usize) -> String {
    if n == 1 {
        "1 topic".to_owned()
    } else {
        format!("{n} topics")
    }
}

/// Whether partition `p` is where `verb` puts it (STOPPED and writable, PAUSED, MIRRORING).
fn reached(verb: TopicsVerb, p: &PartitionStatus) -> bool {
    p.state == verb.target().to_string() && (verb != TopicsVerb::Stop || p.writable)
}

/// The end of `stop`, `pause` or `resume`: one line per partition of the accepted topics,
/// then a summary. Exit code 2 when a topic was refused; an error when a partition did not
/// reach the request's state.
fn finish(
    verb: TopicsVerb,
    dest: &Path,
    results: &TopicResults,
    partitions: &[PartitionStatus],
) -> Result<ExitCode, String> {
    let target = verb.target().to_string();
    let mut unsettled = Vec::new();
    for p in partitions {
        println!(
            "{}-{}: {}  LEO {}  HW {}  LSO {}  {}",
            p.topic,
            p.partition,
            p.state,
            p.log_end_offset,
            p.high_watermark,
            p.last_stable_offset,
            if p.writable { "writable" } else { "read-only" }
        );
        if p.state != target {
            unsettled.push(format!("{}-{} is {}", p.topic, p.partition, p.state));
        }
    }
    if !unsettled.is_empty() {
        return Err(format!(
            "{}; see `kmirror status --dest {}`",
            unsettled.join(", "),
            dest.display()
        ));
    }
    let refused = results.values().filter(|r| r.is_err()).count();
    let accepted = results.len() - refused;
    let changed = results
        .values()
        .filter(|r| matches!(r, Ok(TopicChange::Changed)))
        .count();
    let done = match verb {
        TopicsVerb::Stop => "stopped (failed over, writable)",
        TopicsVerb::Pause => "paused",
        TopicsVerb::Resume => "mirroring again",
    };
    let done = if changed == 0 && accepted > 0 {
        format!("{done} already; nothing changed")
    } else {
        done.to_owned()
    };
    if refused == 0 {
        println!("{}: {} {done}", verb.name(), count_topics(accepted));
        return Ok(ExitCode::SUCCESS);
    }
    let rest = if accepted == 0 {
        String::new()
    } else {
        format!("; {} {done}", count_topics(accepted))
    };
    eprintln!(
        "kmirror: {}: {} of {} refused, nothing changed for {}{rest}",
        verb.name(),
        refused,
        count_topics(results.len()),
        if refused == 1 { "it" } else { "them" }
    );
    Ok(ExitCode::from(2))
}

/// A `stop`, `pause` or `resume` of some topics of a node destination.
struct TopicsRequest<'a> {
    verb: TopicsVerb,
    dest: &'a Path,
    topics: Option<&'a str>,
    mirror: Option<&'a str>,
}

fn request_topics(
    request: TopicsRequest<'_>,
    options: NodeDriverOptions,
    source: Option<SourceCluster>,
    until: NodeUntil,
    quiet: bool,
) -> Result<ExitCode, String> {
    let TopicsRequest {
        verb,
        dest,
        topics,
        mirror,
    } = request;
    let mut clock = SystemClock;
    if NodeDest::is_single_partition(dest) {
        return Err(NodeError::SinglePartition {
            dir: dest.to_path_buf(),
        }
        .to_string());
    }
    let Some(topics) = topics else {
        return Err(format!(
            "{} is a node destination (many topics): give --topics LIST",
            dest.display()
        ));
    };
    // A bad selection is refused before anything is asked or written.
    TopicSelection::parse(topics).map_err(|e| e.to_string())?;
    let mut handed = ControlRequest::new(verb, topics, mirror);
    if verb == TopicsVerb::Stop {
        handed.stop_strategy = Some(options.mirror.stop_strategy);
    }
    let mut driver = match open_or_hand_over(&mut clock, dest, &options, &handed)? {
        Held::Driver(driver) => *driver,
        Held::Answered(response) => {
            if let Some(error) = response.error {
                return Err(error);
            }
            print_topic_results(verb, &response.results);
            return finish(verb, dest, &response.results, &response.partitions);
        }
    };
    let now = clock.now_ms();
    let results = driver
        .request_topics(verb, topics, mirror, now)
        .map_err(|e| e.to_string())?;
    print_topic_results(verb, &results);
    let accepted: Vec<&String> = results
        .iter()
        .filter(|(_, r)| r.is_ok())
        .map(|(t, _)| t)
        .collect();
    if accepted.is_empty() {
        // Nothing accepted: the node is not even started, so nothing is written.
        driver.close().map_err(|e| e.to_string())?;
        return finish(verb, dest, &results, &[]);
    }
    let repeats = results
        .values()
        .all(|r| !matches!(r, Ok(TopicChange::Changed)));
    let settled: Vec<PartitionStatus> = driver
        .status()
        .partitions
        .into_iter()
        .filter(|p| accepted.contains(&&p.topic))
        .collect();
    if repeats && settled.iter().all(|p| reached(verb, p)) {
        // Every accepted topic is already where the request puts it: nothing to run, nothing
        // written.
        driver.close().map_err(|e| e.to_string())?;
        return finish(verb, dest, &results, &settled);
    }
    driver.start(now).map_err(|e| e.to_string())?;
    if let Some(source) = source {
        driver.set_source(Some(source));
    }
    drive(&mut driver, &mut clock, until, quiet, None)?;
    print_events(&mut driver, quiet);
    let partitions: Vec<PartitionStatus> = driver
        .status()
        .partitions
        .into_iter()
        .filter(|p| accepted.contains(&&p.topic))
        .collect();
    write_status(&driver);
    driver.close().map_err(|e| e.to_string())?;
    finish(verb, dest, &results, &partitions)
}

/// `kmirror stop --dest DIR --topics LIST`.
pub fn stop(args: StopArgs) -> Result<ExitCode, String> {
    let strategy = match args.stop_strategy {
        StopStrategyArg::TruncateToLso => StopStrategy::TruncateToLso,
        StopStrategyArg::AbortOpenTransactions => StopStrategy::AbortOpenTransactions,
    };
    let mut options = options(None, strategy);
    options.halt_after_effects = args.halt_after_effects;
    request_topics(
        TopicsRequest {
            verb: TopicsVerb::Stop,
            dest: &args.dest,
            topics: args.topics.as_deref(),
            mirror: args.mirror.as_deref(),
        },
        options,
        None,
        NodeUntil::Settled,
        args.quiet,
    )
}

/// `kmirror pause --dest DIR --topics LIST`.
pub fn pause(args: PauseArgs) -> Result<ExitCode, String> {
    request_topics(
        TopicsRequest {
            verb: TopicsVerb::Pause,
            dest: &args.dest,
            topics: args.topics.as_deref(),
            mirror: None,
        },
        options(None, StopStrategy::TruncateToLso),
        None,
        NodeUntil::Settled,
        args.quiet,
    )
}

/// `kmirror resume --dest DIR --topics LIST [--until-caught-up]`: back to MIRRORING; with
/// --until-caught-up it also fetches from the node's source until caught up (otherwise the
/// next `kmirror mirror --topics` run fetches).
pub fn resume(args: ResumeArgs) -> Result<ExitCode, String> {
    let (source, until) = if args.run.until_caught_up {
        let meta = NodeDest::read_meta(&args.dest).map_err(|e| e.to_string())?;
        let bootstrap = meta
            .source_bootstrap
            .clone()
            .ok_or_else(|| "the node destination records no source.bootstrap".to_owned())?;
        let names: Vec<String> = meta.topics.keys().cloned().collect();
        let security = crate::log_cli::source_security(args.source_config.as_deref())?;
        (
            Some(source_cluster(&bootstrap, &names, &security)?),
            NodeUntil::CaughtUp,
        )
    } else {
        (None, NodeUntil::Settled)
    };
    request_topics(
        TopicsRequest {
            verb: TopicsVerb::Resume,
            dest: &args.dest,
            topics: args.topics.as_deref(),
            mirror: None,
        },
        options(Some(&args.run), StopStrategy::TruncateToLso),
        source,
        until,
        args.run.quiet,
    )
}

/// `kmirror status --dest DIR [--json]` of a node destination, read changing nothing
/// ([`NodeStatus::inspect`]: no lock taken for writing, no repair, nothing created; a
/// destination missing a directory is an error naming it). While another process holds the
/// directory, its last `status.json` is shown.
pub fn status(args: StatusArgs) -> Result<ExitCode, String> {
    let snapshot = read_status_file(&args.dest);
    let status = match NodeDest::read_lock(&args.dest) {
        Ok(_held) => {
            let status = NodeStatus::inspect(&args.dest).map_err(|e| e.to_string())?;
            match &snapshot {
                Some(old) => status.with_source_positions_from(old),
                None => status,
            }
        }
        Err(NodeError::Busy { .. }) => match snapshot {
            Some(s) => {
                eprintln!(
                    "kmirror: {} is in use by a running kmirror; showing its last status.json",
                    args.dest.display()
                );
                s
            }
            None => {
                return Err(format!(
                    "{} is in use by another kmirror process and has no status.json yet; try \
                     again in a second",
                    args.dest.display()
                ))
            }
        },
        Err(e) => return Err(e.to_string()),
    };
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&status).map_err(|e| e.to_string())?
        );
    } else {
        print!("{}", status.render(SystemClock.now_ms()));
    }
    Ok(ExitCode::SUCCESS)
}

/// `kmirror verify DIR` of a node destination: every log of its log dir (each partition of
/// every topic, each `__mirror_state` partition) opened with `Verify::All`, one line per log.
/// Exit code 0 when all pass, 1 when some log is damaged; a destination that cannot be
/// scanned (in use, a damaged `node.properties`) is the `Err` (exit code 2).
pub fn verify(args: VerifyArgs) -> Result<ExitCode, String> {
    let verdicts = verify_node(&args.dir).map_err(|e| e.to_string())?;
    let lines: Vec<Verdict> = verdicts
        .into_iter()
        .map(|v| Verdict {
            path: v.dir,
            outcome: v
                .result
                .map(|scan| {
                    scan_line(
                        &scan.report,
                        scan.segments,
                        scan.log_start_offset,
                        scan.log_end_offset,
                    )
                })
                .map_err(|e| match e {
                    // The line starts with the directory already.
                    NodeError::Log { source, .. } => source.to_string(),
                    other => other.to_string(),
                }),
        })
        .collect();
    Ok(report_verdicts(&lines))
}

/// Refuses `--replicas N` for an existing node that has another replica count (fixed at
/// creation).
pub fn check_replicas(driver: &NodeDriver, replicas: Option<u32>) -> Result<(), String> {
    let count = driver.dest().meta().replicas;
    match replicas {
        Some(n) if n != count => Err(format!(
            "{} has {count} replica(s) per partition, not {n}; the replica count is fixed when \
             a node is created (drop --replicas, or create a new node)",
            driver.dest().root().display()
        )),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_gives_records_bytes_rates_and_lag() {
        assert_eq!(
            summary(8_000, 4 << 20, 2_000, 5),
            "mirrored 8000 records, 4194304 bytes in 2.0 s (4000 records/s, 2.0 MiB/s); lag 5 \
             offsets"
        );
    }

    #[test]
    fn no_time_passed_is_no_rate() {
        assert_eq!(
            summary(0, 0, 0, 0),
            "mirrored 0 records, 0 bytes in 0.0 s (0 records/s, 0.0 MiB/s); lag 0 offsets"
        );
        assert_eq!(per_second(10.0, -5), 0.0);
    }
}
