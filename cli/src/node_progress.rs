//! How `kmirror mirror --topics` (and `stop`, `pause`, `resume`) show progress on stderr: an
//! [`indicatif`] bar when stderr is a terminal (offsets copied against the source's end, then
//! the states, rates, bytes copied and lag), one line a second otherwise (a log file, a
//! pipe), nothing with `--quiet`. What the run prints on stdout goes through
//! [`NodeProgress::print`], so it never tears the bar.

use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// How often the figures are refreshed (ms).
pub const REFRESH_MS: i64 = 1_000;

/// Where progress goes.
#[derive(Debug)]
pub enum Display {
    /// Nowhere (`--quiet`).
    Quiet,
    /// One `kmirror: ...` line on stderr per refresh.
    Lines,
    /// A bar, redrawn in place.
    Bar(ProgressBar),
}

/// A run's progress display. See the [module documentation](self).
#[derive(Debug)]
pub struct NodeProgress {
    display: Display,
    last_ms: Option<i64>,
}

impl NodeProgress {
    /// The display a run gets: quiet, else a bar on a terminal, else lines.
    pub fn new(quiet: bool) -> Self {
        let display = if quiet {
            Display::Quiet
        } else if std::io::stderr().is_terminal() {
            Display::Bar(bar(ProgressDrawTarget::stderr()))
        } else {
            Display::Lines
        };
        Self::with_display(display)
    }

    /// A run showing progress on `display`.
    pub fn with_display(display: Display) -> Self {
        if let Display::Bar(b) = &display {
            b.enable_steady_tick(Duration::from_millis(100));
        }
        NodeProgress {
            display,
            last_ms: None,
        }
    }

    /// Whether the figures are due for a refresh at `now_ms` (never when quiet; the first
    /// refresh a second into the run).
    pub fn due(&mut self, now_ms: i64) -> bool {
        if matches!(self.display, Display::Quiet) {
            return false;
        }
        let last = *self.last_ms.get_or_insert(now_ms);
        if now_ms - last < REFRESH_MS {
            return false;
        }
        self.last_ms = Some(now_ms);
        true
    }

    /// Shows `copied` offsets of the source's `source_end` (summed over the partitions) and
    /// `line` (states, rates, bytes, lag).
    pub fn show(&self, copied: i64, source_end: i64, line: &str) {
        match &self.display {
            Display::Quiet => {}
            Display::Lines => eprintln!("kmirror: {line}"),
            Display::Bar(b) => {
                let len = u64::try_from(source_end.max(copied)).unwrap_or(0);
                b.set_length(len);
                b.set_position(u64::try_from(copied).unwrap_or(0).min(len));
                b.set_message(line.to_owned());
            }
        }
    }

    /// Prints `text` on stdout (above the bar, if any).
    pub fn print(&self, text: &str) {
        match &self.display {
            Display::Bar(b) => b.suspend(|| print!("{text}")),
            _ => print!("{text}"),
        }
    }

    /// Removes the bar (the summary line follows on stdout).
    pub fn finish(&self) {
        if let Display::Bar(b) = &self.display {
            b.finish_and_clear();
        }
    }
}

/// The bar: a spinner, the offsets copied of the source's end, then the line.
pub fn bar(target: ProgressDrawTarget) -> ProgressBar {
    let style = ProgressStyle::with_template(
        "{spinner} [{elapsed_precise}] [{bar:30}] {pos}/{len} offsets {msg}",
    )
    .unwrap_or_else(|_| ProgressStyle::default_bar())
    .progress_chars("=> ");
    ProgressBar::with_draw_target(Some(0), target).with_style(style)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bar_shows_offsets_copied_of_the_source_end_and_the_line() {
        let progress = NodeProgress::with_display(Display::Bar(bar(ProgressDrawTarget::hidden())));
        progress.show(30, 120, "5 partitions: MIRRORING x5; lag 90 offsets");
        let Display::Bar(b) = &progress.display else {
            panic!("not a bar");
        };
        assert_eq!((b.position(), b.length()), (30, Some(120)));
        assert_eq!(b.message(), "5 partitions: MIRRORING x5; lag 90 offsets");
        // The source's end is unknown (no fetch yet): the bar is full, never past its end.
        progress.show(40, 0, "x");
        assert_eq!((b.position(), b.length()), (40, Some(40)));
        progress.finish();
        assert!(b.is_finished());
    }

    #[test]
    fn refreshes_once_a_second_and_never_when_quiet() {
        let mut lines = NodeProgress::with_display(Display::Lines);
        assert!(
            !lines.due(5_000),
            "the first refresh is a second into the run"
        );
        assert!(!lines.due(5_999));
        assert!(lines.due(6_000));
        assert!(!lines.due(6_500));
        assert!(lines.due(7_100));
        let mut quiet = NodeProgress::with_display(Display::Quiet);
        assert!(!quiet.due(0) && !quiet.due(60_000));
    }
}
