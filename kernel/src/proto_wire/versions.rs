//! Version ranges as Kafka's message JSON writes them: `"0+"`, `"0"`, `"1-3"`, `"none"`.

use std::fmt;

/// A contiguous range of message versions (`validVersions`, `flexibleVersions`, a field's
/// `versions`, `nullableVersions` or `taggedVersions`), possibly empty.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct Versions {
    lowest: i16,
    highest: i16,
}

impl Versions {
    /// No version (`"none"`).
    pub const NONE: Versions = Versions {
        lowest: 0,
        highest: -1,
    };

    /// Every version from `lowest` on (`"N+"`).
    pub const fn since(lowest: i16) -> Versions {
        Versions {
            lowest,
            highest: i16::MAX,
        }
    }

    /// Exactly one version (`"N"`).
    pub const fn only(version: i16) -> Versions {
        Versions {
            lowest: version,
            highest: version,
        }
    }

    /// The versions `lowest..=highest` (`"L-H"`); empty when `highest < lowest`.
    pub const fn range(lowest: i16, highest: i16) -> Versions {
        Versions { lowest, highest }
    }

    /// Whether the range holds no version.
    pub const fn is_empty(self) -> bool {
        self.highest < self.lowest
    }

    /// Whether `version` is in the range.
    pub const fn contains(self, version: i16) -> bool {
        version >= self.lowest && version <= self.highest
    }

    /// The lowest version, unless the range is empty.
    pub const fn lowest(self) -> Option<i16> {
        if self.is_empty() {
            None
        } else {
            Some(self.lowest)
        }
    }

    /// The highest version, unless the range is empty (`i16::MAX` for an open range).
    pub const fn highest(self) -> Option<i16> {
        if self.is_empty() {
            None
        } else {
            Some(self.highest)
        }
    }

    /// Whether every version of `self` is in `other`.
    pub const fn is_subset_of(self, other: Versions) -> bool {
        self.is_empty() || (other.lowest <= self.lowest && self.highest <= other.highest)
    }
}

/// Kafka's spelling: `none`, `N`, `N+`, `L-H`.
impl fmt::Display for Versions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_empty() {
            f.write_str("none")
        } else if self.highest == i16::MAX {
            write!(f, "{}+", self.lowest)
        } else if self.lowest == self.highest {
            write!(f, "{}", self.lowest)
        } else {
            write!(f, "{}-{}", self.lowest, self.highest)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spelled_like_kafka() {
        assert_eq!(Versions::NONE.to_string(), "none");
        assert_eq!(Versions::since(0).to_string(), "0+");
        assert_eq!(Versions::only(3).to_string(), "3");
        assert_eq!(Versions::range(1, 4).to_string(), "1-4");
        assert_eq!(Versions::range(4, 1).to_string(), "none");
    }

    #[test]
    fn membership() {
        assert!(!Versions::NONE.contains(0));
        assert!(Versions::since(2).contains(i16::MAX));
        assert!(!Versions::since(2).contains(1));
        assert!(Versions::only(0).contains(0) && !Versions::only(0).contains(1));
        assert!(Versions::only(1).is_subset_of(Versions::since(0)));
        assert!(!Versions::since(0).is_subset_of(Versions::only(0)));
        assert!(Versions::NONE.is_subset_of(Versions::NONE));
        assert_eq!(Versions::NONE.lowest(), None);
        assert_eq!(Versions::range(1, 3).highest(), Some(3));
    }
}
