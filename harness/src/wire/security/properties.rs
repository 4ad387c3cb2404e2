//! Java's `.properties` syntax, as Kafka reads `client.properties`: one `key=value` (or
//! `key:value`, or `key value`) a line, `#` and `!` comments, blank lines, a trailing `\`
//! continuing the value on the next line (its leading blanks dropped), and the escapes `\t`,
//! `\n`, `\r`, `\f`, `\uXXXX` and `\<any>` (the character itself). A key given twice keeps its
//! last value, as `java.util.Properties` does.
//!
//! Each entry keeps the line it starts on, for error messages.

/// One `key=value` entry and the (1-based) line it starts on.
#[derive(Clone, PartialEq, Eq)]
pub struct Property {
    /// The key, unescaped.
    pub key: String,
    /// The value, unescaped (may be a secret: never printed by this type's `Debug`).
    pub value: String,
    /// The line the entry starts on (1-based).
    pub line: usize,
}

impl std::fmt::Debug for Property {
    /// The key and line only: a value may be a password.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Property")
            .field("key", &self.key)
            .field("line", &self.line)
            .finish_non_exhaustive()
    }
}

/// A `\u` escape that is not four hex digits, at a line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: a \\u escape needs four hexadecimal digits")]
pub struct EscapeError {
    /// The line of the entry.
    pub line: usize,
}

/// Parses `text` into its entries, in file order (a repeated key appears once, with its last
/// value, at the line of that last occurrence).
pub fn parse(text: &str) -> Result<Vec<Property>, EscapeError> {
    let mut out: Vec<Property> = Vec::new();
    let mut lines = text.lines().enumerate().peekable();
    while let Some((index, raw)) = lines.next() {
        let start = index + 1;
        let first = raw.trim_start_matches([' ', '\t', '\x0c']);
        if first.is_empty() || first.starts_with('#') || first.starts_with('!') {
            continue;
        }
        // Join continuation lines: an odd number of trailing backslashes continues.
        let mut logical = String::from(first);
        while ends_with_odd_backslashes(&logical) {
            logical.pop();
            match lines.next() {
                Some((_, next)) => logical.push_str(next.trim_start_matches([' ', '\t', '\x0c'])),
                None => break,
            }
        }
        let (key, value) = split_key_value(&logical);
        let key = unescape(key, start)?;
        let value = unescape(value, start)?;
        out.retain(|p| p.key != key);
        out.push(Property {
            key,
            value,
            line: start,
        });
    }
    Ok(out)
}

fn ends_with_odd_backslashes(s: &str) -> bool {
    s.bytes().rev().take_while(|&b| b == b'\\').count() % 2 == 1
}

/// The raw key and the raw value: the key ends at the first unescaped `=`, `:` or blank; the
/// separator is blanks with at most one `=` or `:` among them.
fn split_key_value(line: &str) -> (&str, &str) {
    let bytes = line.as_bytes();
    let mut i = 0;
    let mut end = bytes.len();
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b'=' | b':' | b' ' | b'\t' | b'\x0c' => {
                end = i;
                break;
            }
            _ => i += 1,
        }
    }
    let end = end.min(bytes.len());
    let key = &line[..end];
    let mut rest = line[end..].trim_start_matches([' ', '\t', '\x0c']);
    if let Some(r) = rest.strip_prefix(['=', ':']) {
        rest = r.trim_start_matches([' ', '\t', '\x0c']);
    }
    (key, rest)
}

fn unescape(raw: &str, line: usize) -> Result<String, EscapeError> {
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            None => {}
            Some('t') => out.push('\t'),
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some('f') => out.push('\x0c'),
            Some('u') => {
                let hex: String = chars.by_ref().take(4).collect();
                let code = (hex.len() == 4)
                    .then(|| u32::from_str_radix(&hex, 16).ok())
                    .flatten()
                    .and_then(char::from_u32)
                    .ok_or(EscapeError { line })?;
                out.push(code);
            }
            Some(other) => out.push(other),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(text: &str) -> Vec<(String, String, usize)> {
        parse(text)
            .expect("parses")
            .into_iter()
            .map(|p| (p.key, p.value, p.line))
            .collect()
    }

    #[test]
    fn separators_comments_and_blank_lines() {
        let got = pairs("# a comment\n\n! another\na=1\n  b : 2 \nc 3\nd=\ne=x=y\n");
        let want = [
            ("a", "1", 4),
            ("b", "2 ", 5),
            ("c", "3", 6),
            ("d", "", 7),
            ("e", "x=y", 8),
        ];
        let want: Vec<(String, String, usize)> = want
            .iter()
            .map(|(k, v, l)| ((*k).to_owned(), (*v).to_owned(), *l))
            .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn continuations_and_escapes() {
        let got = pairs("k=one \\\n    two \\\n three\nesc=a\\tb\\u0041\\\\\nkey\\=x=y\n");
        assert_eq!(got[0], ("k".into(), "one two three".into(), 1));
        assert_eq!(got[1], ("esc".into(), "a\tbA\\".into(), 4));
        assert_eq!(got[2], ("key=x".into(), "y".into(), 5));
    }

    #[test]
    fn the_last_value_of_a_repeated_key_wins() {
        let got = pairs("a=1\nb=2\na=3\n");
        assert_eq!(
            got,
            vec![("b".into(), "2".into(), 2), ("a".into(), "3".into(), 3)]
        );
    }

    #[test]
    fn a_bad_unicode_escape_names_its_line() {
        assert_eq!(parse("a=1\nb=\\u12").unwrap_err(), EscapeError { line: 2 });
    }

    #[test]
    fn debug_never_shows_a_value() {
        let p = &parse("sasl.jaas.config=secret-stuff").unwrap()[0];
        assert!(!format!("{p:?}").contains("secret"), "{p:?}");
    }
}
