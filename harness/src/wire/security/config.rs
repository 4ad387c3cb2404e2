//! [`SecurityConfig`]: how the source client connects, read from a Kafka `client.properties`
//! file (`--source-config FILE`).
//!
//! | key | values |
//! |---|---|
//! | `security.protocol` | `PLAINTEXT` (default), `SSL`, `SASL_PLAINTEXT`, `SASL_SSL` |
//! | `ssl.truststore.type` | `PEM` (the only type; JKS and PKCS12 must be converted) |
//! | `ssl.truststore.location` | a PEM file of the CA certificates that sign the brokers' certificates |
//! | `ssl.truststore.certificates` | the same PEM text inline (instead of the file) |
//! | `ssl.keystore.type` | `PEM` |
//! | `ssl.keystore.location` | a PEM file holding the client's private key (PKCS#8, unencrypted) and certificate chain: mutual TLS |
//! | `ssl.keystore.certificate.chain`, `ssl.keystore.key` | the same inline |
//! | `ssl.endpoint.identification.algorithm` | `https` (default: the broker's certificate must name the host connected to) or empty (not checked) |
//! | `sasl.mechanism` | `PLAIN`, `SCRAM-SHA-256`, `SCRAM-SHA-512` |
//! | `sasl.jaas.config` | `org.apache.kafka.common.security.scram.ScramLoginModule required username="u" password="p";` (or `PlainLoginModule` for PLAIN) |
//!
//! Any other key, a bad value, a key the protocol does not use (an `ssl.*` key with
//! `SASL_PLAINTEXT`), or a missing one (a TLS protocol without a truststore) is a
//! [`SecurityConfigError`] naming the file, the line and the key. Secret values (the JAAS
//! config, the private key, passwords) are never quoted in errors nor shown by `Debug`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::jaas::{self, PLAIN_LOGIN_MODULE, SCRAM_LOGIN_MODULE};
use super::properties::{self, Property};
use super::tls;
use super::Secret;

/// Kafka's `security.protocol`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SecurityProtocol {
    /// No TLS, no authentication.
    #[default]
    Plaintext,
    /// TLS.
    Ssl,
    /// SASL authentication without TLS.
    SaslPlaintext,
    /// SASL authentication over TLS.
    SaslSsl,
}

impl SecurityProtocol {
    /// Kafka's name (`SASL_SSL`).
    pub fn name(self) -> &'static str {
        match self {
            SecurityProtocol::Plaintext => "PLAINTEXT",
            SecurityProtocol::Ssl => "SSL",
            SecurityProtocol::SaslPlaintext => "SASL_PLAINTEXT",
            SecurityProtocol::SaslSsl => "SASL_SSL",
        }
    }

    /// Whether connections use TLS.
    pub fn uses_tls(self) -> bool {
        matches!(self, SecurityProtocol::Ssl | SecurityProtocol::SaslSsl)
    }

    /// Whether connections authenticate with SASL.
    pub fn uses_sasl(self) -> bool {
        matches!(
            self,
            SecurityProtocol::SaslPlaintext | SecurityProtocol::SaslSsl
        )
    }
}

/// Kafka's `sasl.mechanism` values kmirror speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SaslMechanism {
    /// `PLAIN` (RFC 4616): the password is sent as it is (use it over TLS).
    Plain,
    /// `SCRAM-SHA-256` (RFC 5802, RFC 7677).
    ScramSha256,
    /// `SCRAM-SHA-512`.
    ScramSha512,
}

impl SaslMechanism {
    /// Kafka's name (`SCRAM-SHA-512`).
    pub fn name(self) -> &'static str {
        match self {
            SaslMechanism::Plain => "PLAIN",
            SaslMechanism::ScramSha256 => "SCRAM-SHA-256",
            SaslMechanism::ScramSha512 => "SCRAM-SHA-512",
        }
    }

    fn login_module(self) -> &'static str {
        match self {
            SaslMechanism::Plain => PLAIN_LOGIN_MODULE,
            SaslMechanism::ScramSha256 | SaslMechanism::ScramSha512 => SCRAM_LOGIN_MODULE,
        }
    }
}

/// The SASL login: mechanism, user and password.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SaslSettings {
    /// The mechanism.
    pub mechanism: SaslMechanism,
    /// The user name (Kafka's principal is `User:<username>`).
    pub username: String,
    /// The password (redacted in `Debug`).
    pub password: Secret,
}

/// The TLS side: rustls' client configuration, built (and so checked) when the file is read.
#[derive(Clone)]
pub struct TlsSettings {
    /// The rustls configuration (trust anchors, client certificate, hostname check).
    pub client_config: Arc<rustls::ClientConfig>,
    /// Where the trusted CAs come from (a path, or `ssl.truststore.certificates`), for errors.
    pub truststore: String,
    /// Whether the broker's certificate must name the host connected to.
    pub verify_hostname: bool,
    /// Whether a client certificate is presented (mutual TLS).
    pub client_certificate: bool,
}

impl std::fmt::Debug for TlsSettings {
    /// Without the rustls configuration (it holds the private key).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsSettings")
            .field("truststore", &self.truststore)
            .field("verify_hostname", &self.verify_hostname)
            .field("client_certificate", &self.client_certificate)
            .finish_non_exhaustive()
    }
}

/// How the source client connects. The default is `PLAINTEXT`.
#[derive(Clone, Debug, Default)]
pub struct SecurityConfig {
    /// `security.protocol`.
    pub protocol: SecurityProtocol,
    /// Set for `SSL` and `SASL_SSL`.
    pub tls: Option<TlsSettings>,
    /// Set for `SASL_PLAINTEXT` and `SASL_SSL`.
    pub sasl: Option<SaslSettings>,
    /// Keys of the file kmirror does not read and ignored (`client.id`, `request.timeout.ms`,
    /// ...), as Kafka's clients ignore a config they do not know; the CLI warns about them.
    pub ignored_keys: Vec<String>,
}

/// Whether an unknown key is a security setting: refused rather than ignored, since a typo
/// there (`ssl.trustore.location`) or an unsupported feature would silently weaken the
/// connection.
fn is_security_key(key: &str) -> bool {
    ["security.", "ssl.", "sasl."]
        .iter()
        .any(|prefix| key.starts_with(prefix))
}

/// Why a `--source-config` file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum SecurityConfigError {
    /// The file cannot be read.
    #[error("cannot read the source config {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// A key is unknown, or its value is invalid or contradicts another key.
    #[error("{origin} line {line}: {key}: {problem}")]
    Invalid {
        /// The file.
        origin: String,
        /// The entry's line (1-based).
        line: usize,
        /// The key.
        key: String,
        /// What is wrong and what to write instead (never the value of a secret key).
        problem: String,
    },
    /// A key the protocol needs is missing.
    #[error("{origin}: {problem}")]
    Missing {
        /// The file.
        origin: String,
        /// Which key is missing and why it is needed.
        problem: String,
    },
}

/// The keys kmirror reads.
pub const KNOWN_KEYS: &[&str] = &[
    "security.protocol",
    "ssl.truststore.type",
    "ssl.truststore.location",
    "ssl.truststore.certificates",
    "ssl.truststore.password",
    "ssl.keystore.type",
    "ssl.keystore.location",
    "ssl.keystore.certificate.chain",
    "ssl.keystore.key",
    "ssl.keystore.password",
    "ssl.key.password",
    "ssl.endpoint.identification.algorithm",
    "sasl.mechanism",
    "sasl.jaas.config",
];

impl SecurityConfig {
    /// Reads and checks a `client.properties` file (PEM files it names are read too; relative
    /// paths are relative to the working directory, as for Kafka's clients).
    pub fn from_file(path: &Path) -> Result<SecurityConfig, SecurityConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| SecurityConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        SecurityConfig::parse(&text, &path.display().to_string())
    }

    /// Parses the text of a `client.properties` file; `origin` names it in errors.
    pub fn parse(text: &str, origin: &str) -> Result<SecurityConfig, SecurityConfigError> {
        let entries = properties::parse(text).map_err(|e| SecurityConfigError::Invalid {
            origin: origin.to_owned(),
            line: e.line,
            key: "(escape)".to_owned(),
            problem: "a \\u escape needs four hexadecimal digits".to_owned(),
        })?;
        Reader {
            origin,
            entries: &entries,
        }
        .read()
    }

    /// The principal Kafka's authorizer sees, when the config says (`User:<sasl user>`); a TLS
    /// client certificate's principal is its subject, which the broker maps.
    pub fn principal(&self) -> Option<String> {
        self.sasl.as_ref().map(|s| format!("User:{}", s.username))
    }

    /// One line describing the security (`SASL_SSL, SCRAM-SHA-512 as User:mirror`), no secret.
    pub fn describe(&self) -> String {
        let mut out = self.protocol.name().to_owned();
        if let Some(s) = &self.sasl {
            out.push_str(&format!(", {} as User:{}", s.mechanism.name(), s.username));
        }
        if let Some(t) = &self.tls {
            if t.client_certificate {
                out.push_str(", client certificate");
            }
            if !t.verify_hostname {
                out.push_str(", hostname verification off");
            }
        }
        out
    }
}

struct Reader<'a> {
    origin: &'a str,
    entries: &'a [Property],
}

impl Reader<'_> {
    fn get(&self, key: &str) -> Option<&Property> {
        self.entries.iter().find(|p| p.key == key)
    }

    fn invalid(&self, p: &Property, problem: impl Into<String>) -> SecurityConfigError {
        SecurityConfigError::Invalid {
            origin: self.origin.to_owned(),
            line: p.line,
            key: p.key.clone(),
            problem: problem.into(),
        }
    }

    /// A key `because` needs is missing: reported at `because`'s line when it is in the file.
    fn missing(&self, because: &str, problem: impl Into<String>) -> SecurityConfigError {
        match self.get(because) {
            Some(p) => self.invalid(p, problem),
            None => SecurityConfigError::Missing {
                origin: self.origin.to_owned(),
                problem: problem.into(),
            },
        }
    }

    fn read(&self) -> Result<SecurityConfig, SecurityConfigError> {
        let unknown = |p: &&Property| !KNOWN_KEYS.contains(&p.key.as_str());
        if let Some(p) = self
            .entries
            .iter()
            .filter(unknown)
            .find(|p| is_security_key(&p.key))
        {
            return Err(self.invalid(
                p,
                format!(
                    "unknown security key; kmirror reads only {} (see docs/live-source.md)",
                    KNOWN_KEYS.join(", ")
                ),
            ));
        }
        let protocol = match self.get("security.protocol") {
            None => SecurityProtocol::Plaintext,
            Some(p) => match p.value.trim().to_ascii_uppercase().as_str() {
                "PLAINTEXT" => SecurityProtocol::Plaintext,
                "SSL" => SecurityProtocol::Ssl,
                "SASL_PLAINTEXT" => SecurityProtocol::SaslPlaintext,
                "SASL_SSL" => SecurityProtocol::SaslSsl,
                _ => {
                    return Err(self.invalid(
                        p,
                        format!(
                            "{:?} is not a security protocol; use PLAINTEXT, SSL, SASL_PLAINTEXT \
                             or SASL_SSL",
                            p.value
                        ),
                    ))
                }
            },
        };
        // Keys the protocol does not use are mistakes (the operator expects them to apply).
        for p in self.entries {
            let unused = (p.key.starts_with("ssl.") && !protocol.uses_tls())
                || (p.key.starts_with("sasl.") && !protocol.uses_sasl());
            if unused {
                let wanted = if p.key.starts_with("ssl.") {
                    "SSL or SASL_SSL"
                } else {
                    "SASL_PLAINTEXT or SASL_SSL"
                };
                return Err(self.invalid(
                    p,
                    format!(
                        "is set, but security.protocol={} does not use it; set \
                         security.protocol={wanted}, or remove the key",
                        protocol.name()
                    ),
                ));
            }
        }
        let tls = if protocol.uses_tls() {
            Some(self.tls(protocol)?)
        } else {
            None
        };
        let sasl = if protocol.uses_sasl() {
            Some(self.sasl(protocol)?)
        } else {
            None
        };
        let ignored_keys = self
            .entries
            .iter()
            .filter(unknown)
            .map(|p| p.key.clone())
            .collect();
        Ok(SecurityConfig {
            protocol,
            tls,
            sasl,
            ignored_keys,
        })
    }

    fn pem_type(&self, key: &str) -> Result<(), SecurityConfigError> {
        if let Some(p) = self.get(key) {
            let v = p.value.trim();
            if !v.eq_ignore_ascii_case("PEM") {
                return Err(self.invalid(
                    p,
                    format!(
                        "{v:?} is not supported: kmirror reads PEM only (set {key}=PEM and \
                         convert the store, e.g. `keytool -exportcert -rfc` for certificates, \
                         `openssl pkcs12 -nodes` for a PKCS12 keystore)"
                    ),
                ));
            }
        }
        Ok(())
    }

    fn no_password(&self, key: &str) -> Result<(), SecurityConfigError> {
        match self.get(key) {
            Some(p) if !p.value.is_empty() => Err(self.invalid(
                p,
                "is not supported: PEM stores have no password and kmirror reads unencrypted \
                 PKCS#8 keys only (decrypt with `openssl pkcs8 -topk8 -nocrypt`); remove the key",
            )),
            _ => Ok(()),
        }
    }

    fn read_file(&self, p: &Property) -> Result<String, SecurityConfigError> {
        std::fs::read_to_string(p.value.trim())
            .map_err(|e| self.invalid(p, format!("cannot read {}: {e}", p.value.trim())))
    }

    fn tls(&self, protocol: SecurityProtocol) -> Result<TlsSettings, SecurityConfigError> {
        self.pem_type("ssl.truststore.type")?;
        self.pem_type("ssl.keystore.type")?;
        for key in [
            "ssl.truststore.password",
            "ssl.keystore.password",
            "ssl.key.password",
        ] {
            self.no_password(key)?;
        }
        // The trusted CAs.
        let (ca_pem, truststore, ca_entry) = match (
            self.get("ssl.truststore.location"),
            self.get("ssl.truststore.certificates"),
        ) {
            (Some(_), Some(inline)) => {
                return Err(self.invalid(
                    inline,
                    "ssl.truststore.location is set too; give one of them",
                ))
            }
            (Some(file), None) => (self.read_file(file)?, file.value.trim().to_owned(), file),
            (None, Some(inline)) => (
                inline.value.clone(),
                "ssl.truststore.certificates".to_owned(),
                inline,
            ),
            (None, None) => {
                return Err(self.missing(
                    "security.protocol",
                    format!(
                        "security.protocol={} needs ssl.truststore.location: a PEM file of the CA \
                     certificates that sign the brokers' certificates (kmirror does not use the \
                     system's trust store)",
                        protocol.name()
                    ),
                ))
            }
        };
        let roots = tls::certificates(&ca_pem).map_err(|e| self.invalid(ca_entry, e))?;
        // The client certificate (mutual TLS).
        let identity = match (
            self.get("ssl.keystore.location"),
            self.get("ssl.keystore.certificate.chain"),
            self.get("ssl.keystore.key"),
        ) {
            (None, None, None) => None,
            (Some(file), None, None) => {
                let pem = self.read_file(file)?;
                let chain = tls::certificates(&pem).map_err(|e| self.invalid(file, e))?;
                let key = tls::private_key(&pem).map_err(|e| self.invalid(file, e))?;
                Some((chain, key, file))
            }
            (None, Some(chain), Some(key)) => {
                let certs = tls::certificates(&chain.value).map_err(|e| self.invalid(chain, e))?;
                let k = tls::private_key(&key.value).map_err(|e| self.invalid(key, e))?;
                Some((certs, k, chain))
            }
            (Some(file), _, _) => {
                return Err(self.invalid(
                    file,
                    "ssl.keystore.certificate.chain / ssl.keystore.key are set too; give the \
                     file or the inline PEM, not both",
                ))
            }
            (None, Some(p), None) | (None, None, Some(p)) => {
                return Err(self.invalid(
                    p,
                    "ssl.keystore.certificate.chain and ssl.keystore.key go together; give both",
                ))
            }
        };
        let verify_hostname = match self.get("ssl.endpoint.identification.algorithm") {
            None => true,
            Some(p) => match p.value.trim() {
                "" => false,
                v if v.eq_ignore_ascii_case("https") => true,
                v => {
                    return Err(self.invalid(
                        p,
                        format!(
                            "{v:?} is not supported; use https (check the broker's hostname, \
                             the default) or an empty value (do not check it)"
                        ),
                    ))
                }
            },
        };
        let client_certificate = identity.is_some();
        let client_config = tls::client_config(
            roots,
            identity
                .as_ref()
                .map(|(c, k, _)| (c.clone(), k.clone_key())),
            verify_hostname,
        )
        .map_err(|e| match &identity {
            Some((_, _, at)) => self.invalid(at, e),
            None => self.invalid(ca_entry, e),
        })?;
        Ok(TlsSettings {
            client_config,
            truststore,
            verify_hostname,
            client_certificate,
        })
    }

    fn sasl(&self, protocol: SecurityProtocol) -> Result<SaslSettings, SecurityConfigError> {
        let Some(m) = self.get("sasl.mechanism") else {
            return Err(self.missing(
                "security.protocol",
                format!(
                    "security.protocol={} needs sasl.mechanism (PLAIN, SCRAM-SHA-256 or \
                 SCRAM-SHA-512; Kafka's default GSSAPI is not supported)",
                    protocol.name()
                ),
            ));
        };
        let mechanism = match m.value.trim().to_ascii_uppercase().as_str() {
            "PLAIN" => SaslMechanism::Plain,
            "SCRAM-SHA-256" => SaslMechanism::ScramSha256,
            "SCRAM-SHA-512" => SaslMechanism::ScramSha512,
            other => {
                return Err(self.invalid(
                    m,
                    format!(
                        "{other:?} is not supported; use PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512"
                    ),
                ))
            }
        };
        let Some(j) = self.get("sasl.jaas.config") else {
            return Err(self.missing(
                "sasl.mechanism",
                format!(
                    "sasl.mechanism={} needs sasl.jaas.config, e.g. {} required username=\"USER\" \
                 password=\"PASSWORD\";",
                    mechanism.name(),
                    mechanism.login_module()
                ),
            ));
        };
        let login = jaas::parse(&j.value).map_err(|e| self.invalid(j, e))?;
        if login.module != mechanism.login_module() {
            return Err(self.invalid(
                j,
                format!(
                    "the login module {} does not go with sasl.mechanism={}; use {}",
                    login.module,
                    mechanism.name(),
                    mechanism.login_module()
                ),
            ));
        }
        Ok(SaslSettings {
            mechanism,
            username: login.username,
            password: login.password,
        })
    }
}
