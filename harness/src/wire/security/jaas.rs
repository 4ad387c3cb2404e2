//! The `sasl.jaas.config` value of a Kafka client: one login module, its control flag and its
//! options, e.g.
//! `org.apache.kafka.common.security.scram.ScramLoginModule required username="u" password="p";`.
//!
//! Only `username` and `password` are used; other options are ignored, as Kafka's login modules
//! ignore options they do not know, except `tokenauth=true` (delegation tokens), which kmirror
//! does not support. Error messages never quote the value (it holds the password).

use super::Secret;

/// Kafka's PLAIN login module.
pub const PLAIN_LOGIN_MODULE: &str = "org.apache.kafka.common.security.plain.PlainLoginModule";
/// Kafka's SCRAM login module.
pub const SCRAM_LOGIN_MODULE: &str = "org.apache.kafka.common.security.scram.ScramLoginModule";

/// A parsed `sasl.jaas.config`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JaasLogin {
    /// The login module's class name.
    pub module: String,
    /// The `username` option.
    pub username: String,
    /// The `password` option.
    pub password: Secret,
}

/// Parses a `sasl.jaas.config` value. The error says what is wrong without quoting the value.
pub fn parse(value: &str) -> Result<JaasLogin, String> {
    let mut s = Scanner {
        chars: value.chars().collect(),
        at: 0,
    };
    s.skip_blanks();
    let module = s.word();
    if module.is_empty() {
        return Err(format!(
            "is empty; write `{SCRAM_LOGIN_MODULE} required username=\"USER\" password=\"PASSWORD\";`"
        ));
    }
    s.skip_blanks();
    let flag = s.word();
    if !matches!(
        flag.as_str(),
        "required" | "requisite" | "sufficient" | "optional"
    ) {
        return Err(format!(
            "the login module {module} must be followed by its control flag (`required`)"
        ));
    }
    let mut username = None;
    let mut password = None;
    let mut previous = String::from("the control flag");
    loop {
        s.skip_blanks();
        match s.peek() {
            None => return Err("does not end with `;`".to_owned()),
            Some(';') => {
                s.at += 1;
                s.skip_blanks();
                if s.peek().is_some() {
                    return Err(
                        "holds more than one login module; kmirror takes one (after the first \
                         `;` there must be nothing)"
                            .to_owned(),
                    );
                }
                break;
            }
            Some(_) => {}
        }
        let key = s.key();
        if key.is_empty() {
            return Err("has an option without a name (expected name=\"value\")".to_owned());
        }
        s.skip_blanks();
        if s.peek() != Some('=') {
            // The token is not quoted: it may be a misplaced password.
            return Err(format!(
                "the option after {previous} has no `=` and value (write name=\"value\")"
            ));
        }
        previous = format!("option {key}");
        s.at += 1;
        s.skip_blanks();
        let value = s
            .value()
            .ok_or_else(|| format!("the value of option {key} has no closing `\"`"))?;
        match key.as_str() {
            "username" => username = Some(value),
            "password" => password = Some(Secret::new(value)),
            "tokenauth" if value.eq_ignore_ascii_case("true") => {
                return Err("tokenauth=true (delegation tokens) is not supported".to_owned())
            }
            _ => {}
        }
    }
    let username = username
        .filter(|u| !u.is_empty())
        .ok_or("has no username=\"...\" option")?;
    let password = password.ok_or("has no password=\"...\" option")?;
    Ok(JaasLogin {
        module,
        username,
        password,
    })
}

struct Scanner {
    chars: Vec<char>,
    at: usize,
}

impl Scanner {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.at).copied()
    }

    fn skip_blanks(&mut self) {
        while self.peek().is_some_and(char::is_whitespace) {
            self.at += 1;
        }
    }

    /// Up to a blank or `;`.
    fn word(&mut self) -> String {
        let mut out = String::new();
        while let Some(c) = self.peek().filter(|c| !c.is_whitespace() && *c != ';') {
            out.push(c);
            self.at += 1;
        }
        out
    }

    /// Up to a blank, `=` or `;`.
    fn key(&mut self) -> String {
        let mut out = String::new();
        while let Some(c) = self
            .peek()
            .filter(|c| !c.is_whitespace() && *c != '=' && *c != ';')
        {
            out.push(c);
            self.at += 1;
        }
        out
    }

    /// A `"quoted"` value (with `\"` and `\\`), or a bare word; `None` for an unclosed quote.
    fn value(&mut self) -> Option<String> {
        if self.peek() != Some('"') {
            return Some(self.word());
        }
        self.at += 1;
        let mut out = String::new();
        loop {
            let c = self.peek()?;
            self.at += 1;
            match c {
                '"' => return Some(out),
                '\\' => {
                    out.push(self.peek()?);
                    self.at += 1;
                }
                c => out.push(c),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kafka_examples_parse() {
        let l = parse(&format!(
            "{SCRAM_LOGIN_MODULE} required username=\"alice\" password=\"al ice\\\"s;=\";"
        ))
        .expect("parses");
        assert_eq!(l.module, SCRAM_LOGIN_MODULE);
        assert_eq!(l.username, "alice");
        assert_eq!(l.password.expose(), "al ice\"s;=");
        let l = parse(&format!(
            "  {PLAIN_LOGIN_MODULE}   required\n  serviceName=kafka username=bob password=pw ; "
        ))
        .expect("parses");
        assert_eq!((l.username.as_str(), l.password.expose()), ("bob", "pw"));
    }

    #[test]
    fn errors_never_quote_the_password() {
        let cases = [
            format!("{SCRAM_LOGIN_MODULE} required username=\"u\" password=\"s3cr3t\""),
            format!("{SCRAM_LOGIN_MODULE} required password=\"s3cr3t\";"),
            format!("{SCRAM_LOGIN_MODULE} username=\"u\" password=\"s3cr3t\";"),
            format!("{SCRAM_LOGIN_MODULE} required username=\"u\" password=\"s3cr3t;"),
            format!("{SCRAM_LOGIN_MODULE} required username=\"u\" password=\"s3cr3t\"; x y;"),
            format!("{SCRAM_LOGIN_MODULE} required username=\"u\" s3cr3t;"),
        ];
        for case in cases {
            let e = parse(&case).expect_err(&case);
            assert!(!e.contains("s3cr3t"), "{e}");
        }
        assert_eq!(
            parse(&format!("{SCRAM_LOGIN_MODULE} required username=\"u\";")).unwrap_err(),
            "has no password=\"...\" option"
        );
    }

    #[test]
    fn delegation_tokens_are_refused() {
        let e = parse(&format!(
            "{SCRAM_LOGIN_MODULE} required username=\"u\" password=\"p\" tokenauth=true;"
        ))
        .unwrap_err();
        assert!(e.contains("tokenauth"), "{e}");
    }
}
