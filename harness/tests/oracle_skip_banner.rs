//! Regression test: without Java or Maven (and outside CI) an oracle test must skip *loudly*.
//! `Oracle::for_tests` used to print its SKIPPED banner with `eprintln!`, which the test harness
//! captures and hides for a passing test, so the oracle tests passed silently.

use std::process::Command;

use kmirror_testsupport::jvm::Oracle;

/// Run by `oracle_skip_banner_is_visible_without_java` in a child process without Java on
/// `PATH`; on its own it just takes the oracle when there is one.
#[test]
#[ignore = "needs Java 17 and Maven; run with `-- --include-ignored oracle`"]
fn oracle_skip_banner_probe() {
    let Some(_oracle) = Oracle::for_tests("oracle_skip_banner_probe") else {
        return;
    };
}

/// With `PATH` holding no `java` or `mvn` and `CI` unset, an oracle test passes but its SKIPPED
/// banner reaches stderr even though the test harness captures test output.
#[test]
fn oracle_skip_banner_is_visible_without_java() {
    let output = Command::new(std::env::current_exe().expect("the test binary"))
        .args(["--exact", "oracle_skip_banner_probe", "--include-ignored"])
        .env("PATH", "/nonexistent")
        .env_remove("CI")
        .output()
        .expect("the test binary runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{output:?}");
    assert!(
        stderr.contains("SKIPPED: oracle_skip_banner_probe") && stderr.contains("did NOT run"),
        "the skip was silent; stderr:\n{stderr}"
    );
}
