//! What a sync round did, item by item, and its text form for `kmirror sync`.

use std::fmt;

use kmirror_kernel::sync::acl::AclBinding;
use kmirror_kernel::sync::gate::{SyncFence, SyncRefused};
use kmirror_kernel::sync::group_offsets::{GroupSkip, OffsetCommit};
use kmirror_kernel::sync::topic_config::ConfigChange;

/// The three kinds of metadata.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub enum Category {
    /// Topic configs.
    TopicConfig,
    /// Consumer group offsets.
    GroupOffsets,
    /// ACL bindings.
    Acls,
}

impl fmt::Display for Category {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Category::TopicConfig => "config",
            Category::GroupOffsets => "offsets",
            Category::Acls => "acl",
        })
    }
}

/// One source item refused.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Rejection {
    /// Its kind.
    pub category: Category,
    /// What is wrong and what to do.
    pub message: String,
}

/// Whether one category's writes landed.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct WriteOutcome {
    /// The category.
    pub category: Category,
    /// `Ok(changes written)`, or why the gate refused the write.
    pub result: Result<usize, SyncRefused>,
}

/// What one round did.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct RoundReport {
    /// The fence the round read, or why no round could start.
    pub started: Result<SyncFence, SyncRefused>,
    /// Config changes planned.
    pub config_changes: Vec<ConfigChange>,
    /// Config keys that stay local.
    pub kept_local: Vec<String>,
    /// Offset commits planned.
    pub commits: Vec<OffsetCommit>,
    /// Groups or partitions left alone.
    pub group_skips: Vec<(String, GroupSkip)>,
    /// ACL bindings to create.
    pub acl_creates: Vec<AclBinding>,
    /// ACL bindings to delete (created by the mirror).
    pub acl_deletes: Vec<AclBinding>,
    /// Selected bindings already on the destination, not the mirror's: left alone.
    pub acl_not_owned: Vec<AclBinding>,
    /// Source bindings no filter selects.
    pub acl_unselected: usize,
    /// Source items refused.
    pub rejected: Vec<Rejection>,
    /// Per category, whether its writes landed.
    pub writes: Vec<WriteOutcome>,
}

impl RoundReport {
    /// A round that could not start.
    pub fn refused(reason: SyncRefused) -> Self {
        RoundReport {
            started: Err(reason),
            config_changes: Vec::new(),
            kept_local: Vec::new(),
            commits: Vec::new(),
            group_skips: Vec::new(),
            acl_creates: Vec::new(),
            acl_deletes: Vec::new(),
            acl_not_owned: Vec::new(),
            acl_unselected: 0,
            rejected: Vec::new(),
            writes: Vec::new(),
        }
    }

    /// Why the round wrote nothing at all because of the gate, if it did not start or every
    /// write was refused.
    pub fn refusal(&self) -> Option<&SyncRefused> {
        match &self.started {
            Err(r) => Some(r),
            Ok(_) => self.writes.iter().find_map(|w| w.result.as_ref().err()),
        }
    }

    /// Changes written to the destination.
    pub fn written(&self) -> usize {
        self.writes
            .iter()
            .filter_map(|w| w.result.as_ref().ok())
            .sum()
    }

    /// The round as lines for `kmirror sync`.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let mut line = |s: String| {
            out.push_str(&s);
            out.push('\n');
        };
        let fence = match &self.started {
            Err(r) => {
                line(format!("sync refused: {r}"));
                return out;
            }
            Ok(f) => f,
        };
        line(format!(
            "sync of mirror {}: partition {} (state epoch {}, leader epoch {})",
            fence.mirror, fence.state, fence.state_epoch, fence.leader_epoch
        ));
        for c in &self.config_changes {
            match c {
                ConfigChange::Set { key, value } => line(format!("  config   SET {key}={value}")),
                ConfigChange::Delete { key } => line(format!("  config   DELETE {key}")),
            }
        }
        if !self.kept_local.is_empty() {
            line(format!(
                "  config   kept local: {}",
                self.kept_local.join(", ")
            ));
        }
        for c in &self.commits {
            line(format!(
                "  offsets  {} {}: commit {} (source {}, was {})",
                c.group,
                c.partition,
                c.offset,
                c.source_offset,
                c.previous.map_or("none".into(), |p| p.to_string())
            ));
        }
        for (group, skip) in &self.group_skips {
            let why = match skip {
                GroupSkip::Excluded => "excluded by the group patterns".to_string(),
                GroupSkip::ActiveOnDestination { members } => {
                    format!("{members} active member(s) on the destination own its offsets")
                }
                GroupSkip::NotMirrored(tp) => format!("{tp} is not mirrored here"),
                GroupSkip::UpToDate(tp) => format!("{tp} up to date"),
                GroupSkip::DestinationAhead {
                    partition,
                    dest,
                    synced,
                } => format!(
                    "{partition}: destination at {dest}, ahead of {synced}; never moved back"
                ),
            };
            line(format!("  offsets  {group}: skipped, {why}"));
        }
        for b in &self.acl_creates {
            line(format!("  acl      CREATE {b}"));
        }
        for b in &self.acl_deletes {
            line(format!("  acl      DELETE {b}"));
        }
        for b in &self.acl_not_owned {
            line(format!(
                "  acl      left alone (not created by the mirror): {b}"
            ));
        }
        if self.acl_unselected > 0 {
            line(format!(
                "  acl      {} source binding(s) not selected by the mirror's filters",
                self.acl_unselected
            ));
        }
        for r in &self.rejected {
            line(format!(
                "  {:<8} REJECTED: {}",
                r.category.to_string(),
                r.message
            ));
        }
        for w in &self.writes {
            if let Err(r) = &w.result {
                line(format!("  {:<8} NOT WRITTEN: {r}", w.category.to_string()));
            }
        }
        line(format!(
            "  {} change(s) written, {} item(s) rejected",
            self.written(),
            self.rejected.len()
        ));
        out
    }
}
