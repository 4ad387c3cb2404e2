//! [`Secret`]: a password or a private key that never prints.

use std::fmt;

/// A secret string (a SASL password). Its `Debug` prints `Secret(<redacted>)`; it has no
/// `Display` and no serialization, so it cannot reach a log line, `status.json` or an error
/// message by accident. [`expose`](Secret::expose) is the only way to the text.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps `text`.
    pub fn new(text: impl Into<String>) -> Secret {
        Secret(text.into())
    }

    /// The secret text, for the one place that sends it (the SASL exchange).
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_is_redacted() {
        let s = Secret::new("hunter2");
        assert_eq!(format!("{s:?}"), "Secret(<redacted>)");
        assert_eq!(
            format!("{:#?}", Some(&s)),
            "Some(\n    Secret(<redacted>),\n)"
        );
        assert_eq!(s.expose(), "hunter2");
    }
}
