//! SIGINT and SIGTERM: a long-running command (`kmirror mirror` following its source) stops at
//! the next step and closes the destination as on a normal end: logs flushed, checkpoints and
//! `status.json` written, the lock released.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

static STOP: OnceLock<Arc<AtomicBool>> = OnceLock::new();

/// The flag SIGINT and SIGTERM raise, registered on first use. If registering fails (no signal
/// support), the signals keep their default action (the process ends at once, as a crash).
pub fn stop_flag() -> Arc<AtomicBool> {
    STOP.get_or_init(|| {
        let flag = Arc::new(AtomicBool::new(false));
        for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
            let _ = signal_hook::flag::register(signal, Arc::clone(&flag));
        }
        flag
    })
    .clone()
}

/// Whether SIGINT or SIGTERM arrived (false if [`stop_flag`] was never asked for).
pub fn interrupted() -> bool {
    STOP.get().is_some_and(|f| f.load(Ordering::Relaxed))
}
