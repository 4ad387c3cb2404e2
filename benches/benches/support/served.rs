//! A node destination served on Kafka's wire by a `NodeDriver` on its own thread, as `kmirror
//! serve` runs it, for the benches whose clients or mirrors read from a serving node.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use kmirror::log_cli::SystemClock;
use kmirror_harness::node::{NodeDriver, NodeDriverOptions, NodeUntil};
use kmirror_harness::serve::ServeOptions;

/// The destination served on a loopback port until dropped (then closed).
pub struct Served {
    /// The listening address (`127.0.0.1:PORT`).
    pub address: String,
    /// Raised to end the node's run.
    stop: Arc<AtomicBool>,
    /// The node's thread, joined on drop.
    thread: Option<JoinHandle<()>>,
}

impl Served {
    /// Opens the destination at `dest` and serves it on a free loopback port.
    pub fn start(dest: &Path) -> Served {
        let mut driver =
            NodeDriver::open(dest, None, NodeDriverOptions::default()).expect("opened");
        let address = driver
            .serve_clients(&ServeOptions::new("127.0.0.1:0"))
            .expect("listening")
            .to_string();
        let stop = Arc::new(AtomicBool::new(false));
        driver.interrupt_on(stop.clone());
        let thread = std::thread::spawn(move || {
            driver
                .run(
                    &mut SystemClock,
                    NodeUntil::Forever { poll_ms: 200 },
                    &mut |_, _| {},
                )
                .expect("serves");
            driver.close().expect("closed");
        });
        Served {
            address,
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Served {
    /// Ends the node's run and waits for its close.
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
