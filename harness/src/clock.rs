//! Where the node driver's time comes from: the caller's [`Clock`] (the library never reads one).

/// Where time comes from for [`NodeDriver::run`](crate::node::NodeDriver::run) (the library
/// never reads a clock itself).
pub trait Clock {
    /// The current time in milliseconds.
    fn now_ms(&mut self) -> i64;
    /// Waits until `deadline_ms` (a test clock jumps there).
    fn sleep_until(&mut self, deadline_ms: i64);
}

/// A clock that only moves when told to: [`Clock::sleep_until`] jumps to the deadline.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ManualClock {
    /// The current time.
    pub now_ms: i64,
}

impl Clock for ManualClock {
    fn now_ms(&mut self) -> i64 {
        self.now_ms
    }

    fn sleep_until(&mut self, deadline_ms: i64) {
        self.now_ms = self.now_ms.max(deadline_ms);
    }
}
