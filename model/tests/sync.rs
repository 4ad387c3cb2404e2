//! The metadata sync in the model: with sync rounds enabled, no sync write lands after a stop
//! began (property `no_sync_write_after_stop`), a stale round in flight across a stop is
//! refused (`stale_sync_write_fenced` is reached), and the state count of the sync
//! configuration is pinned.

use kmirror_model::runner::{check, find, RunOptions, Verdict};
use kmirror_model::ModelConfig;

#[test]
fn sync_configuration_holds_and_is_pinned() {
    let config = ModelConfig::sync_check();
    let report = check(
        &config,
        &RunOptions {
            threads: 1,
            shorten: false,
            ..RunOptions::default()
        },
    );
    let failed = report.failed();
    assert!(failed.is_empty(), "properties failed: {failed:?}");
    assert!(report.exhaustive);
    for name in [
        "no_sync_write_after_stop",
        "sync_write_lands",
        "stale_sync_write_fenced",
    ] {
        let p = report
            .properties
            .iter()
            .find(|p| p.name == name)
            .unwrap_or_else(|| panic!("{name} is not checked"));
        assert_ne!(p.verdict, Verdict::NotReached, "{name} not reached");
    }
    assert_eq!(report.unique, SYNC_UNIQUE, "the sync state space changed");
}

/// The shortest stale write: a round read while MIRRORING, a stop, and the write refused.
#[test]
fn a_round_in_flight_across_a_stop_is_fenced() {
    let trace = find(&ModelConfig::sync_check(), "stale_sync_write_fenced", 1)
        .expect("a stale sync write is explored");
    let story = trace.render().expect("the example replays");
    assert!(story.contains("metadata sync round"), "{story}");
}

/// Without sync rounds the sync properties are not part of the model at all.
#[test]
fn sync_properties_only_with_sync_rounds() {
    let model = kmirror_model::MirrorModel::new(ModelConfig::tiny());
    use stateright::Model;
    assert!(model
        .properties()
        .iter()
        .all(|p| p.name != "no_sync_write_after_stop"));
}

const SYNC_UNIQUE: usize = 59_090;
