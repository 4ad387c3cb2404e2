//! Glob patterns for names (group ids, principals): `*` matches any run of characters, `?` any
//! one character, everything else itself. Operators write `orders-*` or `User:app-*`.

use serde::{Deserialize, Serialize};

/// A glob pattern.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize)]
pub struct Glob(String);

impl Glob {
    /// The pattern `pattern` (every string is a valid pattern).
    pub fn new(pattern: impl Into<String>) -> Self {
        Glob(pattern.into())
    }

    /// The pattern that matches everything.
    pub fn any() -> Self {
        Glob("*".into())
    }

    /// The pattern's text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether `name` matches the pattern.
    pub fn matches(&self, name: &str) -> bool {
        let p: Vec<char> = self.0.chars().collect();
        let s: Vec<char> = name.chars().collect();
        // Iterative wildcard matching with backtracking to the last `*`.
        let (mut pi, mut si) = (0, 0);
        let mut star: Option<(usize, usize)> = None;
        while si < s.len() {
            if pi < p.len() && (p[pi] == '?' || p[pi] == s[si]) {
                pi += 1;
                si += 1;
            } else if pi < p.len() && p[pi] == '*' {
                star = Some((pi, si));
                pi += 1;
            } else if let Some((sp, ss)) = star {
                pi = sp + 1;
                si = ss + 1;
                star = Some((sp, ss + 1));
            } else {
                return false;
            }
        }
        p[pi..].iter().all(|c| *c == '*')
    }
}

impl std::fmt::Display for Glob {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Include and exclude patterns: a name is selected when it matches an include pattern and no
/// exclude pattern (excludes win).
#[derive(Clone, PartialEq, Eq, Hash, Debug, Default, Serialize, Deserialize)]
pub struct NameFilter {
    /// Names to select (empty: none).
    pub include: Vec<Glob>,
    /// Names to leave out even when included.
    pub exclude: Vec<Glob>,
}

impl NameFilter {
    /// Selects every name.
    pub fn all() -> Self {
        NameFilter {
            include: vec![Glob::any()],
            exclude: Vec::new(),
        }
    }

    /// Whether `name` is selected.
    pub fn selects(&self, name: &str) -> bool {
        self.include.iter().any(|g| g.matches(name))
            && !self.exclude.iter().any(|g| g.matches(name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs() {
        let cases = [
            ("*", "", true),
            ("*", "abc", true),
            ("a*", "abc", true),
            ("a*", "bac", false),
            ("*c", "abc", true),
            ("a?c", "abc", true),
            ("a?c", "ac", false),
            ("User:app-*", "User:app-1", true),
            ("User:app-*", "User:admin", false),
            ("a*b*c", "axxbyyc", true),
            ("a*b*c", "axxbyy", false),
            ("", "", true),
            ("", "a", false),
        ];
        for (p, s, want) in cases {
            assert_eq!(Glob::new(p).matches(s), want, "{p:?} vs {s:?}");
        }
    }

    #[test]
    fn excludes_win() {
        let f = NameFilter {
            include: vec![Glob::new("app-*")],
            exclude: vec![Glob::new("app-test*")],
        };
        assert!(f.selects("app-billing"));
        assert!(!f.selects("app-test-1"));
        assert!(!f.selects("other"));
        assert!(!NameFilter::default().selects("x"));
        assert!(NameFilter::all().selects("x"));
    }
}
