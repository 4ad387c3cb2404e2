//! The kinds of synced metadata, and a source item a sync round rejects.

use std::fmt;

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
