//! `kmirror mirror --failback`'s preview: what the source answers of each partition (its log
//! start and, from a serving kmirror, the LME its mirror of us recorded), and what the LME rule
//! will cut with it, printed before anything changes.

use std::collections::BTreeMap;

use kmirror_harness::node::failback::{self, SourceAnswer};
use kmirror_harness::node::lme_lookup::{read_reverse_mirrors, ReverseAnswer};
use kmirror_harness::node::NodeDriver;
use kmirror_harness::serve::metadata::node_cluster_id;
use kmirror_harness::wire::client::EARLIEST_TIMESTAMP;
use kmirror_harness::wire::SourceCluster;
use kmirror_kernel::config::FetchIsolation;
use kmirror_kernel::node::PartitionKey;
use kmirror_kernel::reverse_mirror::check_reverse_mirror;
use kmirror_kernel::types::TopicId;

use crate::node_cli::count_topics;

/// Prints what a failback of `topics` truncates, partition by partition, and whether it may go
/// ahead: always when nothing is lost, otherwise only with `yes`. A partition the source is
/// itself mirroring from us (or still stopping) is said in a line: it fails back once that
/// mirror is STOPPED.
pub fn failback_confirmed(
    driver: &NodeDriver,
    topics: &[String],
    source: &mut SourceCluster,
    yes: bool,
) -> Result<bool, String> {
    let meta = driver.dest().meta();
    let keys: Vec<PartitionKey> = topics
        .iter()
        .filter_map(|name| meta.topics.get(name))
        .flat_map(|t| (0..t.partitions).map(|p| PartitionKey::new(t.topic_id, p)))
        .collect();
    let asked: Vec<(TopicId, i32)> = keys.iter().map(|k| (k.topic_id, k.partition)).collect();
    let starts = source.list_offsets(&asked, EARLIEST_TIMESTAMP, FetchIsolation::ReadUncommitted);
    let us = node_cluster_id(driver.dest().root(), meta.broker);
    let reverse = read_reverse_mirrors(source, &us, &asked);
    let mut answers = BTreeMap::new();
    let mut said_unsupported = false;
    for ((key, start), reverse) in keys.into_iter().zip(starts).zip(reverse) {
        let log_start_offset = start.map_err(|e| {
            format!("cannot preview the failback: the source's log start is unknown: {e}")
        })?;
        let lme = match reverse {
            ReverseAnswer::Unsupported => {
                if !std::mem::replace(&mut said_unsupported, true) {
                    println!(
                        "the source does not serve the LME lookup (ReadMirrorStates): no last \
                         mirrored epoch"
                    );
                }
                None
            }
            ReverseAnswer::Found { reverse, lme } => {
                if let Err(refusal) = check_reverse_mirror(reverse) {
                    let name = meta.topic_name(key.topic_id).unwrap_or("?");
                    println!("{name}-{}: {refusal}", key.partition);
                }
                lme
            }
            ReverseAnswer::Failed(e) => {
                return Err(format!(
                    "cannot preview the failback: the source's last mirrored epoch is \
                     unknown: {e}"
                ))
            }
        };
        answers.insert(
            key,
            SourceAnswer {
                lme,
                log_start_offset,
            },
        );
    }
    let previews = failback::previews(driver, topics, &answers);
    for p in &previews {
        println!("{}", p.line());
    }
    let truncated: i64 = previews.iter().map(|p| p.truncated).sum();
    let here: i64 = previews.iter().map(|p| p.written_here).sum();
    if truncated == 0 || yes {
        return Ok(true);
    }
    eprintln!(
        "kmirror: mirror: the failback of {} truncates {truncated} offsets in {} partitions \
         ({here} written here since the failover); nothing changed: run again with --yes to go \
         ahead",
        count_topics(topics.len()),
        previews.iter().filter(|p| p.truncated > 0).count()
    );
    Ok(false)
}
