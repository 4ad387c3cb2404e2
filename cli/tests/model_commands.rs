//! The model side of the `kmirror` binary that needs no model run: `--mutant` parsing and its
//! refusal in a build without feature `mutants`, and `kmirror diagram`.

use std::process::{Command, Output};

use kmirror_kernel::mutant::Mutant;

fn kmirror(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kmirror"))
        .args(args)
        .output()
        .expect("the kmirror binary runs")
}

#[test]
fn help_lists_every_kernel_mutant() {
    for command in ["check", "simulate"] {
        let out = kmirror(&[command, "--help"]);
        assert!(out.status.success());
        let help = String::from_utf8_lossy(&out.stdout);
        for m in Mutant::ALL {
            assert!(
                help.contains(m.name()),
                "`{command} --help` lacks {}:\n{help}",
                m.name()
            );
        }
    }
}

#[test]
fn an_unknown_mutant_is_a_usage_error() {
    let out = kmirror(&["check", "--mutant", "no-such-mutant"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no-such-mutant"), "{err}");
    assert!(err.contains("skip-pid-reset"), "{err}");
}

/// Without feature `mutants` the kernel's mutated branches are compiled out, so asking for one
/// is refused (exit 2) with the command that builds a binary that has them; nothing is checked.
#[test]
#[cfg(not(feature = "mutants"))]
fn a_mutant_needs_a_mutants_build() {
    for command in ["check", "simulate"] {
        let out = kmirror(&[command, "--mutant", "skip-pid-reset"]);
        assert_eq!(out.status.code(), Some(2), "{command}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(&format!(
                "cargo run --release --features mutants -- {command} --mutant skip-pid-reset"
            )),
            "{err}"
        );
        assert!(
            out.stdout.is_empty(),
            "{command} ran: {}",
            String::from_utf8_lossy(&out.stdout)
        );
    }
}

#[test]
fn diagram_prints_the_kernels_mermaid() {
    let out = kmirror(&["diagram"]);
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        kmirror_kernel::diagram::mermaid()
    );
}
