//! The state diagram, generated from the transition table.
//!
//! [`mermaid`] renders [`TransitionTable::default`] as a Mermaid `stateDiagram-v2`; the crate doc
//! and `docs/design.md` embed its output verbatim, and a test fails when either copy no longer
//! matches the table (`kmirror diagram` prints it). The structural rules of the table (every
//! state may fail, FAILED retries the state recorded with it, a state may re-assert itself) are
//! drawn too, so the picture shows every transition [`TransitionTable::is_legal`] accepts.

use std::fmt::Write;

use crate::state::{Design, FailedExits, MirrorState, TransitionTable};

/// The default transition table as a Mermaid state diagram.
pub fn mermaid() -> String {
    mermaid_of(&TransitionTable::default())
}

/// The transition table of `design` as a Mermaid state diagram, with the design's state names
/// (the prototype's PREPARING is LOG_ALIGNMENT).
pub fn mermaid_for(design: Design) -> String {
    match design {
        Design::Seed => mermaid(),
        Design::Prototype => render(&TransitionTable::prototype(true), design),
    }
}

/// `table` as a Mermaid state diagram: `[*]` enters at UNKNOWN, one arrow per explicit edge in
/// the table's order, then FAILED's structural arrows: every other state may fail, and FAILED
/// goes back to the state recorded with it, the state whose side effect failed (any state but
/// UNKNOWN, which has no side effect to fail). A table whose FAILED exits are edges
/// ([`FailedExits::Edges`]) draws those instead of the retry arrows.
pub fn mermaid_of(table: &TransitionTable) -> String {
    render(table, Design::Seed)
}

fn render(table: &TransitionTable, names: Design) -> String {
    let name = |s: MirrorState| s.name_in(names);
    let failed = name(MirrorState::Failed);
    let mut out = String::from("stateDiagram-v2\n");
    let _ = writeln!(out, "    [*] --> {}", name(MirrorState::Unknown));
    for (from, to) in table.edges() {
        let label = if from == MirrorState::Failed {
            ": retry"
        } else {
            ""
        };
        let _ = writeln!(out, "    {} --> {}{label}", name(from), name(to));
    }
    let states = table.states();
    for &state in &states {
        if state != MirrorState::Failed {
            let _ = writeln!(out, "    {} --> {failed}: step failed", name(state));
        }
    }
    if table.failed_exits() == FailedExits::RetryTarget {
        for &target in &states {
            if !matches!(target, MirrorState::Unknown | MirrorState::Failed) {
                let _ = writeln!(out, "    {failed} --> {}: retry", name(target));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The diagram block as embedded in a document: the text between the line opening a
    /// `mermaid` code block and the closing fence, with `prefix` (e.g. `//! `) removed.
    fn embedded(document: &str, prefix: &str) -> Option<String> {
        let mut lines = document.lines().map(|l| {
            l.strip_prefix(prefix)
                .unwrap_or(l.strip_prefix(prefix.trim_end()).unwrap_or(l))
        });
        lines.by_ref().find(|l| l.trim() == "```mermaid")?;
        let mut block = String::new();
        for line in lines {
            if line.trim() == "```" {
                return Some(block);
            }
            block.push_str(line);
            block.push('\n');
        }
        None
    }

    #[test]
    fn the_crate_doc_shows_the_current_table() {
        let doc = embedded(include_str!("lib.rs"), "//! ").expect("a mermaid block in lib.rs");
        assert_eq!(
            doc,
            mermaid(),
            "kernel/src/lib.rs's state diagram is stale: paste the output of `kmirror diagram`"
        );
    }

    #[test]
    fn the_design_document_shows_the_current_table() {
        let doc = embedded(include_str!("../../docs/design.md"), "")
            .expect("a mermaid block in docs/design.md");
        assert_eq!(
            doc,
            mermaid(),
            "docs/design.md's state diagram is stale: paste the output of `kmirror diagram`"
        );
    }

    #[test]
    fn every_legal_transition_is_drawn() {
        let table = TransitionTable::default();
        let diagram = mermaid_of(&table);
        for from in table.states() {
            for to in table.states() {
                // A FAILED record names the state whose side effect failed; UNKNOWN has none.
                let retry = (from == MirrorState::Failed).then_some(to);
                let recordable = !(from == MirrorState::Failed && to == MirrorState::Unknown);
                if from != to && recordable && table.is_legal(from, to, retry) {
                    let arrow = format!("    {from} --> {to}");
                    assert!(diagram.contains(&arrow), "{arrow} missing:\n{diagram}");
                }
            }
        }
    }

    #[test]
    fn the_prototype_diagram_names_log_alignment_and_draws_only_its_failed_exits() {
        let diagram = mermaid_for(Design::Prototype);
        assert!(diagram.contains("    UNKNOWN --> LOG_ALIGNMENT\n"));
        assert!(diagram.contains("    FAILED --> MIRRORING: retry\n"));
        assert!(diagram.contains("    PAUSING --> FAILED: step failed\n"));
        assert!(!diagram.contains("FAILED --> PAUSED"));
        assert!(!diagram.contains("PREPARING"));
        assert_eq!(mermaid_for(Design::Seed), mermaid());
        let table = TransitionTable::prototype(true);
        for from in MirrorState::ALL {
            for to in MirrorState::ALL {
                if from != to && to != MirrorState::Failed && table.is_legal(from, to, None) {
                    let arrow = format!(
                        "    {} --> {}",
                        from.name_in(Design::Prototype),
                        to.name_in(Design::Prototype)
                    );
                    assert!(diagram.contains(&arrow), "{arrow} missing:\n{diagram}");
                }
            }
        }
    }

    #[test]
    fn a_table_without_stop_from_paused_draws_no_such_arrow() {
        let diagram = mermaid_of(&TransitionTable::kip1279(false));
        assert!(!diagram.contains("PAUSED --> STOPPING"));
        assert!(mermaid().contains("PAUSED --> STOPPING\n"));
    }
}
