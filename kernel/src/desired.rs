//! The desired state of a topic, read from its `mirror.name` config.
//!
//! `"<name>"` mirrors from `<name>`, `"<name>.removed"` stops (fails over), `"<name>.paused"`
//! pauses, and an empty or absent value means the topic is not mirrored. The suffix is parsed
//! from the right; [`MirrorName`] forbids names ending in a suffix, so parsing is unambiguous.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::types::{InvalidMirrorName, MirrorName};

/// The config key holding the desired state.
pub const MIRROR_NAME_CONFIG: &str = "mirror.name";
/// Suffix of `mirror.name` asking to stop mirroring (fail over).
pub const REMOVED_SUFFIX: &str = ".removed";
/// Suffix of `mirror.name` asking to pause mirroring.
pub const PAUSED_SUFFIX: &str = ".paused";

/// What the operator asked for a topic.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize)]
pub enum DesiredState {
    /// `mirror.name` empty or absent: a normal, writable topic.
    NotMirrored,
    /// `mirror.name=<name>`: mirror from `<name>`.
    Mirror(MirrorName),
    /// `mirror.name=<name>.paused`: keep read-only, fetcher removed.
    Pause(MirrorName),
    /// `mirror.name=<name>.removed`: fail over and become writable.
    Stop(MirrorName),
}

impl DesiredState {
    /// Parses a `mirror.name` value (`None` when the config is absent).
    pub fn parse(config: Option<&str>) -> Result<Self, InvalidMirrorName> {
        let value = match config {
            None | Some("") => return Ok(DesiredState::NotMirrored),
            Some(v) => v,
        };
        if let Some(name) = value.strip_suffix(REMOVED_SUFFIX) {
            return MirrorName::new(name).map(DesiredState::Stop);
        }
        if let Some(name) = value.strip_suffix(PAUSED_SUFFIX) {
            return MirrorName::new(name).map(DesiredState::Pause);
        }
        MirrorName::new(value).map(DesiredState::Mirror)
    }

    /// The `mirror.name` value that encodes this state (empty for [`DesiredState::NotMirrored`]).
    pub fn config_value(&self) -> String {
        match self {
            DesiredState::NotMirrored => String::new(),
            DesiredState::Mirror(n) => n.to_string(),
            DesiredState::Pause(n) => format!("{n}{PAUSED_SUFFIX}"),
            DesiredState::Stop(n) => format!("{n}{REMOVED_SUFFIX}"),
        }
    }

    /// The mirror named, if any.
    pub fn mirror(&self) -> Option<&MirrorName> {
        match self {
            DesiredState::NotMirrored => None,
            DesiredState::Mirror(n) | DesiredState::Pause(n) | DesiredState::Stop(n) => Some(n),
        }
    }
}

impl fmt::Display for DesiredState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{MIRROR_NAME_CONFIG}={:?}", self.config_value())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(s: &str) -> MirrorName {
        MirrorName::new(s).unwrap()
    }

    #[test]
    fn parses_each_form_from_the_right() {
        assert_eq!(DesiredState::parse(None), Ok(DesiredState::NotMirrored));
        assert_eq!(DesiredState::parse(Some("")), Ok(DesiredState::NotMirrored));
        assert_eq!(
            DesiredState::parse(Some("east")),
            Ok(DesiredState::Mirror(name("east")))
        );
        assert_eq!(
            DesiredState::parse(Some("east.removed")),
            Ok(DesiredState::Stop(name("east")))
        );
        assert_eq!(
            DesiredState::parse(Some("east.paused")),
            Ok(DesiredState::Pause(name("east")))
        );
        assert_eq!(
            DesiredState::parse(Some("a.b.c.paused")),
            Ok(DesiredState::Pause(name("a.b.c")))
        );
    }

    #[test]
    fn stacked_or_bare_suffixes_are_invalid() {
        assert!(matches!(
            DesiredState::parse(Some("east.paused.removed")),
            Err(InvalidMirrorName::ReservedSuffix {
                suffix: ".paused",
                ..
            })
        ));
        assert_eq!(
            DesiredState::parse(Some(".removed")),
            Err(InvalidMirrorName::Empty)
        );
        assert!(DesiredState::parse(Some("east west")).is_err());
    }

    #[test]
    fn config_value_round_trips() {
        for d in [
            DesiredState::NotMirrored,
            DesiredState::Mirror(name("m")),
            DesiredState::Pause(name("m")),
            DesiredState::Stop(name("m")),
        ] {
            assert_eq!(DesiredState::parse(Some(&d.config_value())), Ok(d.clone()));
        }
    }
}
