//! The Apache Kafka oracle's JVM side: finding `java` and `mvn`, building `oracle/` once, and
//! starting its programs.
//!
//! `oracle/pom.xml` fetches Apache Kafka 4.4.0's own jars from Maven Central. Building it writes
//! `oracle/target/kmirror-oracle.jar` and `oracle/target/classpath.txt` (every dependency jar);
//! [`Oracle::command`] starts a class of that jar or of Kafka itself with the full classpath.
//!
//! Tests that need the oracle call [`Oracle::for_tests`]: on a developer's machine without Java
//! or Maven it returns `None` after printing a loud `SKIPPED` banner; under CI (`CI` set to
//! anything but `false` or `0`) a missing toolchain is a test failure, never a silent pass.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

/// Why the oracle cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum OracleError {
    /// A tool the oracle needs is not on `PATH`.
    #[error("`{tool}` is not on PATH: install Java 17+ and Maven to run the Apache Kafka oracle")]
    ToolMissing {
        /// `java` or `mvn`.
        tool: &'static str,
    },
    /// `mvn package` of `oracle/pom.xml` failed.
    #[error("building the Kafka oracle failed (`mvn -B -q -f {pom} package`): {output}")]
    BuildFailed {
        /// The pom that was built.
        pom: String,
        /// What Maven printed.
        output: String,
    },
    /// An I/O error reading the build's outputs or starting a process.
    #[error("Kafka oracle: {context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The underlying error.
        source: std::io::Error,
    },
}

/// A built oracle: the jar and the classpath of Kafka 4.4.0 it runs against.
#[derive(Debug, Clone)]
pub struct Oracle {
    classpath: String,
}

/// Serialises builds within one process (tests run on several threads).
static BUILD_LOCK: Mutex<()> = Mutex::new(());

impl Oracle {
    /// The `oracle/` Maven project of this repository.
    pub fn project_dir() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .map(|root| root.join("oracle"))
            .unwrap_or_else(|| PathBuf::from("oracle"))
    }

    /// Builds `oracle/` if its jar is missing or older than any of its sources, then returns the
    /// oracle. The first build downloads Kafka's jars from Maven Central (a minute or two).
    pub fn build() -> Result<Oracle, OracleError> {
        for tool in ["java", "mvn"] {
            if !on_path(tool) {
                return Err(OracleError::ToolMissing { tool });
            }
        }
        let _guard = BUILD_LOCK
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let dir = Self::project_dir();
        let jar = dir.join("target/kmirror-oracle.jar");
        let classpath_file = dir.join("target/classpath.txt");
        if is_stale(&jar, &dir) || !classpath_file.exists() {
            let pom = dir.join("pom.xml");
            let output = Command::new("mvn")
                .args(["-B", "-q", "-f"])
                .arg(&pom)
                .arg("package")
                .output()
                .map_err(|source| OracleError::Io {
                    context: "starting mvn".into(),
                    source,
                })?;
            if !output.status.success() {
                return Err(OracleError::BuildFailed {
                    pom: pom.display().to_string(),
                    output: format!(
                        "{}{}",
                        String::from_utf8_lossy(&output.stdout),
                        String::from_utf8_lossy(&output.stderr)
                    ),
                });
            }
        }
        let dependencies =
            std::fs::read_to_string(&classpath_file).map_err(|source| OracleError::Io {
                context: format!("reading {}", classpath_file.display()),
                source,
            })?;
        Ok(Oracle {
            classpath: format!("{}:{}", jar.display(), dependencies.trim()),
        })
    }

    /// The oracle for a test, or `None` (after a loud banner on stderr) when Java or Maven is
    /// missing outside CI. Under CI, or when the build itself fails, it panics with the reason.
    pub fn for_tests(test: &str) -> Option<Oracle> {
        match Self::build() {
            Ok(oracle) => Some(oracle),
            Err(error @ OracleError::ToolMissing { .. }) if !in_ci() => {
                // Written to the process's stderr itself, not with `eprintln!`, which the test
                // harness captures and hides for a passing test.
                let _ = writeln!(
                    std::io::stderr(),
                    "\n==================== SKIPPED: {test} ====================\n\
                     {error}\n\
                     This test compares kmirror with Apache Kafka's own code; it did NOT run.\n\
                     ==========================================================\n"
                );
                None
            }
            Err(error) => panic!("{test}: {error}"),
        }
    }

    /// The full classpath: the oracle jar, then every Kafka 4.4.0 dependency.
    pub fn classpath(&self) -> &str {
        &self.classpath
    }

    /// `java -cp <classpath> <main_class>`, ready for arguments and stdio settings.
    pub fn command(&self, main_class: &str) -> Command {
        let mut command = Command::new("java");
        command.arg("-cp").arg(&self.classpath).arg(main_class);
        command
    }
}

/// Whether this process runs under CI (`CI` set, and not to `false` or `0`).
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|value| value != "false" && value != "0" && !value.is_empty())
}

fn on_path(tool: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|dir| dir.join(tool).is_file()))
}

/// Whether `jar` is missing or older than `pom.xml` or any file under `src/`.
fn is_stale(jar: &Path, project: &Path) -> bool {
    let Ok(built) = jar.metadata().and_then(|meta| meta.modified()) else {
        return true;
    };
    let mut pending = vec![project.join("src"), project.join("pom.xml")];
    while let Some(path) = pending.pop() {
        if path.is_dir() {
            if let Ok(entries) = std::fs::read_dir(&path) {
                pending.extend(entries.flatten().map(|entry| entry.path()));
            }
        } else if path
            .metadata()
            .and_then(|meta| meta.modified())
            .is_ok_and(|modified| modified > built)
        {
            return true;
        }
    }
    false
}
