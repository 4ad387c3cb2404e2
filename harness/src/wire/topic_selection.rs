//! Which topics of a source cluster a mirror copies: a comma-separated list of topic names and
//! globs, as `orders,pay.*`.
//!
//! An entry without `*` or `?` is a topic name, matched exactly (Kafka's rules: 1 to 249
//! characters of `[a-zA-Z0-9._-]`). An entry with them is a glob: `*` matches any run of
//! characters (possibly none), `?` exactly one; every other character, `.` included, matches
//! itself (so `pay.*` matches `pay.eu` but not `payments`). Globs never match Kafka's internal
//! topics (`__consumer_offsets`, `__transaction_state`); naming one exactly selects it.
//!
//! Against a cluster's topics ([`TopicSelection::resolve`]) a name the cluster does not have,
//! or a glob matching nothing, is an error of that entry alone
//! ([`SelectionMiss`]); the other entries still select their topics.

use std::collections::BTreeSet;
use std::fmt;

/// One entry of a [`TopicSelection`].
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum TopicPattern {
    /// A topic name, matched exactly.
    Name(String),
    /// A glob with `*` and `?`.
    Glob(String),
}

impl TopicPattern {
    /// Whether `topic` (internal or not) is selected by this entry.
    pub fn matches(&self, topic: &str, is_internal: bool) -> bool {
        match self {
            TopicPattern::Name(name) => name == topic,
            TopicPattern::Glob(glob) => {
                !is_internal && glob_matches(glob.as_bytes(), topic.as_bytes())
            }
        }
    }

    /// The entry as written.
    pub fn as_str(&self) -> &str {
        match self {
            TopicPattern::Name(s) | TopicPattern::Glob(s) => s,
        }
    }
}

impl fmt::Display for TopicPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A topic selection could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectionError {
    /// Nothing was selected (an empty string, or only commas).
    #[error("the topic selection {selection:?} names no topic; give topic names or globs separated by commas, as `orders,pay.*`")]
    Empty {
        /// The selection as given.
        selection: String,
    },
    /// An entry is not a legal topic name or glob.
    #[error("{entry:?} in the topic selection is not a topic name or glob: {reason}")]
    Invalid {
        /// The entry.
        entry: String,
        /// What is wrong with it.
        reason: String,
    },
}

/// An entry of a selection that selects nothing in the cluster.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectionMiss {
    /// A topic name the cluster does not have.
    #[error("topic {topic} does not exist in the source cluster (UNKNOWN_TOPIC_OR_PARTITION)")]
    UnknownTopic {
        /// The topic name.
        topic: String,
    },
    /// A glob that matches none of the cluster's topics.
    #[error("the topic glob {glob} matches no topic of the source cluster")]
    NoMatch {
        /// The glob.
        glob: String,
    },
}

/// Topic names and globs. See the [module documentation](self).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TopicSelection {
    patterns: Vec<TopicPattern>,
}

impl TopicSelection {
    /// Parses `orders,pay.*` (entries separated by commas, spaces around them ignored,
    /// duplicates kept once).
    pub fn parse(selection: &str) -> Result<TopicSelection, SelectionError> {
        let mut patterns: Vec<TopicPattern> = Vec::new();
        for entry in selection
            .split(',')
            .map(str::trim)
            .filter(|e| !e.is_empty())
        {
            let pattern = parse_entry(entry)?;
            if !patterns.contains(&pattern) {
                patterns.push(pattern);
            }
        }
        if patterns.is_empty() {
            return Err(SelectionError::Empty {
                selection: selection.to_owned(),
            });
        }
        Ok(TopicSelection { patterns })
    }

    /// Exactly the topics `names` (each must be a legal topic name).
    pub fn names<S: AsRef<str>>(names: &[S]) -> Result<TopicSelection, SelectionError> {
        let mut patterns = Vec::new();
        for name in names {
            let name = name.as_ref();
            match parse_entry(name)? {
                p @ TopicPattern::Name(_) => patterns.push(p),
                TopicPattern::Glob(_) => {
                    return Err(SelectionError::Invalid {
                        entry: name.to_owned(),
                        reason: "a topic name has no `*` or `?`".into(),
                    })
                }
            }
        }
        if patterns.is_empty() {
            return Err(SelectionError::Empty {
                selection: String::new(),
            });
        }
        Ok(TopicSelection { patterns })
    }

    /// A selection of exactly `patterns` as given, unchecked (a name that is no legal topic
    /// name selects nothing the broker has).
    pub fn from_patterns(patterns: Vec<TopicPattern>) -> TopicSelection {
        TopicSelection { patterns }
    }

    /// The entries, in the order given.
    pub fn patterns(&self) -> &[TopicPattern] {
        &self.patterns
    }

    /// The topic names, when the selection has no glob (then Metadata can ask for just them).
    pub fn exact_names(&self) -> Option<Vec<String>> {
        self.patterns
            .iter()
            .map(|p| match p {
                TopicPattern::Name(n) => Some(n.clone()),
                TopicPattern::Glob(_) => None,
            })
            .collect()
    }

    /// Whether `topic` is selected.
    pub fn matches(&self, topic: &str, is_internal: bool) -> bool {
        self.patterns.iter().any(|p| p.matches(topic, is_internal))
    }

    /// Applies the selection to a cluster's topics (`(name, is_internal)`): the selected names
    /// (sorted, each once) and one miss per entry that selects nothing.
    pub fn resolve<'a>(
        &self,
        topics: impl IntoIterator<Item = (&'a str, bool)> + Clone,
    ) -> (BTreeSet<String>, Vec<SelectionMiss>) {
        let mut selected = BTreeSet::new();
        let mut misses = Vec::new();
        for pattern in &self.patterns {
            let mut any = false;
            for (name, internal) in topics.clone() {
                if pattern.matches(name, internal) {
                    any = true;
                    selected.insert(name.to_owned());
                }
            }
            if !any {
                misses.push(match pattern {
                    TopicPattern::Name(topic) => SelectionMiss::UnknownTopic {
                        topic: topic.clone(),
                    },
                    TopicPattern::Glob(glob) => SelectionMiss::NoMatch { glob: glob.clone() },
                });
            }
        }
        (selected, misses)
    }
}

impl fmt::Display for TopicSelection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let entries: Vec<&str> = self.patterns.iter().map(TopicPattern::as_str).collect();
        f.write_str(&entries.join(","))
    }
}

impl std::str::FromStr for TopicSelection {
    type Err = SelectionError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        TopicSelection::parse(s)
    }
}

fn parse_entry(entry: &str) -> Result<TopicPattern, SelectionError> {
    let invalid = |reason: &str| SelectionError::Invalid {
        entry: entry.to_owned(),
        reason: reason.to_owned(),
    };
    if entry.len() > 249 {
        return Err(invalid("longer than Kafka's 249 characters"));
    }
    if let Some(c) = entry
        .chars()
        .find(|&c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '*' | '?')))
    {
        return Err(invalid(&format!(
            "{c:?} is not allowed (topic names use [a-zA-Z0-9._-]; globs add * and ?)"
        )));
    }
    if entry.contains(['*', '?']) {
        Ok(TopicPattern::Glob(entry.to_owned()))
    } else if entry == "." || entry == ".." {
        Err(invalid("Kafka does not allow `.` or `..` as a topic name"))
    } else {
        Ok(TopicPattern::Name(entry.to_owned()))
    }
}

/// Glob matching with `*` and `?` (iterative, with backtracking to the last `*`).
fn glob_matches(glob: &[u8], text: &[u8]) -> bool {
    let (mut g, mut t) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        match glob.get(g) {
            Some(b'*') => {
                star = Some((g, t));
                g += 1;
            }
            Some(&c) if c == b'?' || c == text[t] => {
                g += 1;
                t += 1;
            }
            _ => match star {
                Some((sg, st)) => {
                    g = sg + 1;
                    t = st + 1;
                    star = Some((sg, st + 1));
                }
                None => return false,
            },
        }
    }
    glob[g..].iter().all(|&c| c == b'*')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_globs_parse() {
        let s = TopicSelection::parse(" orders, pay.* ,orders,,a?c").expect("parses");
        assert_eq!(
            s.patterns(),
            &[
                TopicPattern::Name("orders".into()),
                TopicPattern::Glob("pay.*".into()),
                TopicPattern::Glob("a?c".into()),
            ]
        );
        assert_eq!(s.to_string(), "orders,pay.*,a?c");
        assert_eq!(s.exact_names(), None);
        assert_eq!(
            TopicSelection::parse("a,b").expect("parses").exact_names(),
            Some(vec!["a".into(), "b".into()])
        );
    }

    #[test]
    fn bad_selections_are_errors_naming_the_entry() {
        assert!(matches!(
            TopicSelection::parse(" , "),
            Err(SelectionError::Empty { .. })
        ));
        let e = TopicSelection::parse("orders,pay/eu").expect_err("slash");
        assert!(e.to_string().contains("\"pay/eu\""), "{e}");
        assert!(TopicSelection::parse("..").is_err());
        assert!(TopicSelection::parse(&"a".repeat(250)).is_err());
        assert!(TopicSelection::names(&["a*"]).is_err());
        assert!(TopicSelection::names::<&str>(&[]).is_err());
    }

    #[test]
    fn globs_match_like_shells() {
        let m = |g: &str, t: &str| glob_matches(g.as_bytes(), t.as_bytes());
        assert!(m("pay.*", "pay.eu"));
        assert!(m("pay.*", "pay."));
        assert!(!m("pay.*", "payments"));
        assert!(m("*", ""));
        assert!(m("*-events", "orders-events"));
        assert!(!m("*-events", "orders-event"));
        assert!(m("a*b*c", "aXXbYYbZc"));
        assert!(!m("a*b*c", "aXXbYY"));
        assert!(m("t?", "t1"));
        assert!(!m("t?", "t"));
        assert!(m("**x", "x"));
    }

    #[test]
    fn resolve_reports_each_entry_that_selects_nothing() {
        let s = TopicSelection::parse("orders,pay.*,audit,x*").expect("parses");
        let topics = [
            ("orders", false),
            ("pay.eu", false),
            ("pay.us", false),
            ("payments", false),
            ("__consumer_offsets", true),
        ];
        let (selected, misses) = s.resolve(topics.iter().copied());
        assert_eq!(
            selected.into_iter().collect::<Vec<_>>(),
            vec!["orders", "pay.eu", "pay.us"]
        );
        assert_eq!(
            misses,
            vec![
                SelectionMiss::UnknownTopic {
                    topic: "audit".into()
                },
                SelectionMiss::NoMatch { glob: "x*".into() }
            ]
        );
        assert!(misses[0].to_string().contains("topic audit does not exist"));
        // Globs skip internal topics, names do not.
        let all = TopicSelection::parse("*,__consumer_offsets").expect("parses");
        let (selected, _) = all.resolve(topics.iter().copied());
        assert!(selected.contains("__consumer_offsets"));
        let (selected, _) = TopicSelection::parse("*")
            .expect("parses")
            .resolve(topics.iter().copied());
        assert!(!selected.contains("__consumer_offsets"));
    }
}
