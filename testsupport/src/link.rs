//! A loopback TCP proxy standing for the network link between a client and a server, started
//! per test or bench: [`Link::start`] listens on `127.0.0.1`, and each connection made to it is
//! relayed to the upstream address through a simulated link.
//!
//! What it models, in each direction independently:
//! - propagation delay: every chunk of bytes is delivered [`LinkOptions::one_way_delay`] after
//!   the proxy read it, so a request and its answer cost twice the delay;
//! - pipelining: the delay is a latency, not a throughput limit; chunks read while earlier ones
//!   are still in flight are queued with their due time and delivered in order when due, as
//!   on a real link (nothing waits for the previous chunk's delivery to read the next);
//! - an optional bandwidth cap ([`LinkOptions::bandwidth_bytes_per_sec`]): writes are paced so
//!   that the bytes delivered per second do not exceed it, over **all the link's connections
//!   together** (one pacer per direction, shared), as a real link's capacity is shared by every
//!   connection that crosses it;
//! - half-close: when one side closes its sending half, the other side gets EOF after every
//!   byte already sent has been delivered, and the other direction keeps working.
//!
//! What it does not model: loss, reordering, jitter, or a receive window: each direction holds
//! up to [`MAX_QUEUED_BYTES`] read but not yet delivered, past which it stops reading and TCP
//! back-pressure reaches the sender. A read error on one side (a reset) is taken as that side
//! closing.
//!
//! Why a proxy: this machine's kernel has no netem (`tc qdisc ... netem`), so delay and
//! bandwidth cannot be put on the loopback interface; a proxy in the test process needs no
//! privileges either.
//!
//! Each connection costs four threads (a reader and a writer per direction), std only.
//! Dropping the [`Link`] stops accepting and shuts down every relayed connection, so both the
//! client and the server see EOF or a reset; the relay threads end on their own shortly after
//! (at the latest when the chunk they are waiting on falls due and its write fails).

use std::collections::VecDeque;
use std::io::{self, ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError, Weak};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

/// How many bytes one direction of a connection holds read but not yet delivered before it
/// stops reading from its sender: enough for a bandwidth-delay product of 1 Gbit/s over
/// 100 ms, bounded so a capped link under a fast sender does not buffer without end.
pub const MAX_QUEUED_BYTES: usize = 16 << 20;

/// The most one read takes from a socket: one chunk of the link.
const READ_CHUNK: usize = 64 << 10;

/// With a bandwidth cap, writes go in pieces of this fraction of a second's worth of bytes, so
/// that pacing is smooth rather than one large burst a chunk.
const PACING_PIECES_PER_SEC: u64 = 100;

/// What the simulated link does to the bytes it carries, the same in both directions.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LinkOptions {
    /// How long after the proxy reads a chunk it delivers it to the other side. Zero (the
    /// default) delivers at once.
    pub one_way_delay: Duration,
    /// The most bytes per second each direction of the link delivers, all its connections
    /// together, or `None` (the default) for no cap. `Some(0)` is refused by [`Link::start`].
    pub bandwidth_bytes_per_sec: Option<u64>,
}

/// A running proxy: connections to [`Link::address`] are relayed to the upstream address
/// through the link [`LinkOptions`] describe. Dropping it closes them all.
pub struct Link {
    address: SocketAddr,
    registry: Arc<Mutex<Registry>>,
    accept: Option<JoinHandle<()>>,
}

/// The sockets of the relayed connections, so that dropping the [`Link`] can shut them down.
/// Weak: a connection's sockets close when its relay threads are done with them.
#[derive(Default)]
struct Registry {
    closed: bool,
    sockets: Vec<Weak<TcpStream>>,
}

impl Link {
    /// Listens on `127.0.0.1` (a free port) and relays every connection it accepts to
    /// `upstream`, which is connected to once per accepted connection. An upstream that
    /// refuses is seen by the client as its connection closing.
    pub fn start(upstream: SocketAddr, options: LinkOptions) -> io::Result<Link> {
        if options.bandwidth_bytes_per_sec == Some(0) {
            return Err(io::Error::new(
                ErrorKind::InvalidInput,
                "a link's bandwidth cap must be positive",
            ));
        }
        let listener = TcpListener::bind(("127.0.0.1", 0))?;
        let address = listener.local_addr()?;
        let registry = Arc::new(Mutex::new(Registry::default()));
        let pacers = options
            .bandwidth_bytes_per_sec
            .map(|cap| (Arc::new(Pacer::new(cap)), Arc::new(Pacer::new(cap))));
        let accept = {
            let registry = Arc::clone(&registry);
            thread::Builder::new()
                .name("link-accept".to_owned())
                .spawn(move || accept_loop(&listener, upstream, options, &pacers, &registry))?
        };
        Ok(Link {
            address,
            registry,
            accept: Some(accept),
        })
    }

    /// The address clients connect to instead of the upstream's.
    pub fn address(&self) -> SocketAddr {
        self.address
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        {
            let mut registry = lock(&self.registry);
            registry.closed = true;
            for socket in registry.sockets.drain(..) {
                if let Some(socket) = socket.upgrade() {
                    let _ = socket.shutdown(Shutdown::Both);
                }
            }
        }
        // The accept loop is blocked in `accept`: one connection wakes it to see `closed`.
        // Without it (the connect failed) the thread is left blocked rather than waited on.
        if TcpStream::connect(self.address).is_ok() {
            if let Some(accept) = self.accept.take() {
                let _ = accept.join();
            }
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// One direction's bandwidth cap, shared by every connection of the link: the earliest time
/// the next piece of bytes may start, each piece reserving the time its bytes take at the cap,
/// so any span of time carries at most one piece over the cap, whichever connection sends it.
struct Pacer {
    cap: u64,
    next_free: Mutex<Instant>,
}

impl Pacer {
    fn new(cap: u64) -> Pacer {
        Pacer {
            cap,
            next_free: Mutex::new(Instant::now()),
        }
    }

    /// The bytes a piece holds at most: [`PACING_PIECES_PER_SEC`] pieces a second.
    fn piece_len(&self) -> usize {
        usize::try_from(self.cap / PACING_PIECES_PER_SEC)
            .unwrap_or(usize::MAX)
            .max(1)
    }

    /// Waits until a piece of `len` bytes may go, and reserves its time.
    fn wait_for(&self, len: usize) {
        let start = {
            let mut next_free = lock(&self.next_free);
            let start = (*next_free).max(Instant::now());
            *next_free = start + Duration::from_secs_f64(len as f64 / self.cap as f64);
            start
        };
        sleep_until(start);
    }
}

/// The link's two pacers when it has a cap: client to server, and server to client.
type Pacers = Option<(Arc<Pacer>, Arc<Pacer>)>;

fn accept_loop(
    listener: &TcpListener,
    upstream: SocketAddr,
    options: LinkOptions,
    pacers: &Pacers,
    registry: &Mutex<Registry>,
) {
    loop {
        let accepted = listener.accept();
        if lock(registry).closed {
            return;
        }
        let client = match accepted {
            Ok((client, _)) => client,
            Err(_) => {
                // Out of descriptors and the like: wait instead of spinning.
                thread::sleep(Duration::from_millis(10));
                continue;
            }
        };
        let Ok(server) = TcpStream::connect(upstream) else {
            continue;
        };
        // The link's delay is the only one wanted: no Nagle coalescing on the proxy's writes.
        let _ = client.set_nodelay(true);
        let _ = server.set_nodelay(true);
        let client = Arc::new(client);
        let server = Arc::new(server);
        {
            let mut registry = lock(registry);
            if registry.closed {
                return;
            }
            registry.sockets.retain(|socket| socket.strong_count() > 0);
            registry.sockets.push(Arc::downgrade(&client));
            registry.sockets.push(Arc::downgrade(&server));
        }
        let (upward, downward) = match pacers {
            Some((up, down)) => (Some(Arc::clone(up)), Some(Arc::clone(down))),
            None => (None, None),
        };
        relay(Arc::clone(&client), Arc::clone(&server), options, upward);
        relay(server, client, options, downward);
    }
}

/// Starts one direction of a connection: a reader thread that reads `from` and queues each
/// chunk with its due time, and a writer thread that delivers the chunks to `to` when due, paced
/// by the direction's shared `pacer` when the link has a cap.
fn relay(
    from: Arc<TcpStream>,
    to: Arc<TcpStream>,
    options: LinkOptions,
    pacer: Option<Arc<Pacer>>,
) {
    let queue = Arc::new(Queue::default());
    {
        let (from, queue) = (Arc::clone(&from), Arc::clone(&queue));
        thread::spawn(move || read_side(&from, &queue, options.one_way_delay));
    }
    thread::spawn(move || write_side(&from, &to, &queue, pacer.as_deref()));
}

fn read_side(from: &TcpStream, queue: &Queue, delay: Duration) {
    let mut buffer = vec![0; READ_CHUNK];
    loop {
        let read = match (&*from).read(&mut buffer) {
            Ok(0) => break,
            Ok(read) => read,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(_) => break,
        };
        let due = Instant::now() + delay;
        if !queue.push(due, buffer[..read].to_vec()) {
            break;
        }
    }
    queue.close();
}

fn write_side(from: &TcpStream, to: &TcpStream, queue: &Queue, pacer: Option<&Pacer>) {
    let piece_len = pacer.map_or(usize::MAX, Pacer::piece_len);
    while let Some((due, chunk)) = queue.pop() {
        sleep_until(due);
        for piece in chunk.chunks(piece_len) {
            if let Some(pacer) = pacer {
                pacer.wait_for(piece.len());
            }
            if (&*to).write_all(piece).is_err() {
                // The receiver is gone: stop reading what can no longer be delivered.
                queue.abandon();
                let _ = from.shutdown(Shutdown::Read);
                return;
            }
        }
    }
    let _ = to.shutdown(Shutdown::Write);
}

fn sleep_until(deadline: Instant) {
    loop {
        let now = Instant::now();
        if now >= deadline {
            return;
        }
        thread::sleep(deadline - now);
    }
}

/// The chunks of one direction read and not yet delivered, with their due times.
#[derive(Default)]
struct Queue {
    state: Mutex<QueueState>,
    changed: Condvar,
}

#[derive(Default)]
struct QueueState {
    chunks: VecDeque<(Instant, Vec<u8>)>,
    bytes: usize,
    /// The reader saw EOF: once `chunks` is empty, the writer half-closes.
    closed: bool,
    /// The writer failed: nothing more is delivered.
    abandoned: bool,
}

impl Queue {
    /// Queues a chunk, waiting while [`MAX_QUEUED_BYTES`] are queued; false if the writer has
    /// given up.
    fn push(&self, due: Instant, chunk: Vec<u8>) -> bool {
        let mut state = lock(&self.state);
        while !state.abandoned && state.bytes > 0 && state.bytes + chunk.len() > MAX_QUEUED_BYTES {
            state = self
                .changed
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
        }
        if state.abandoned {
            return false;
        }
        state.bytes += chunk.len();
        state.chunks.push_back((due, chunk));
        self.changed.notify_all();
        true
    }

    /// The reader is done: the writer delivers what is queued, then half-closes.
    fn close(&self) {
        lock(&self.state).closed = true;
        self.changed.notify_all();
    }

    /// The writer is done: the reader stops queueing.
    fn abandon(&self) {
        let mut state = lock(&self.state);
        state.abandoned = true;
        state.chunks.clear();
        state.bytes = 0;
        self.changed.notify_all();
    }

    /// The next chunk, waiting for one; `None` once the reader is done and all are taken.
    fn pop(&self) -> Option<(Instant, Vec<u8>)> {
        let mut state = lock(&self.state);
        loop {
            if let Some((due, chunk)) = state.chunks.pop_front() {
                state.bytes -= chunk.len();
                self.changed.notify_all();
                return Some((due, chunk));
            }
            if state.closed {
                return None;
            }
            state = self
                .changed
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::oracle_support::SplitMix64;
    use std::sync::mpsc;

    const MS: Duration = Duration::from_millis(1);

    /// An upstream that accepts one connection and echoes it until EOF, then half-closes and
    /// sends on the returned channel.
    fn echo_server() -> (SocketAddr, mpsc::Receiver<()>) {
        let listener = TcpListener::bind(("127.0.0.1", 0)).unwrap();
        let address = listener.local_addr().unwrap();
        let (done, saw_eof) = mpsc::channel();
        thread::spawn(move || {
            let (mut stream, _) = listener.accept().unwrap();
            stream.set_nodelay(true).unwrap();
            let mut buffer = [0; 16 << 10];
            loop {
                match stream.read(&mut buffer) {
                    Ok(0) | Err(_) => break,
                    Ok(read) => {
                        if stream.write_all(&buffer[..read]).is_err() {
                            break;
                        }
                    }
                }
            }
            let _ = stream.shutdown(Shutdown::Write);
            let _ = done.send(());
        });
        (address, saw_eof)
    }

    /// An upstream that reads each connection it accepts to EOF and answers with the byte count
    /// (8 bytes, big-endian).
    fn counting_sink() -> SocketAddr {
        let listener = TcpListener::bind(("127.0.0.1", 0)).unwrap();
        let address = listener.local_addr().unwrap();
        thread::spawn(move || {
            for stream in listener.incoming() {
                let mut stream = stream.unwrap();
                thread::spawn(move || {
                    let count = io::copy(&mut stream, &mut io::sink()).unwrap();
                    stream.write_all(&count.to_be_bytes()).unwrap();
                });
            }
        });
        address
    }

    fn connect(link: &Link) -> TcpStream {
        let stream = TcpStream::connect(link.address()).unwrap();
        stream.set_nodelay(true).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        stream
    }

    fn delayed(one_way_delay: Duration) -> LinkOptions {
        LinkOptions {
            one_way_delay,
            bandwidth_bytes_per_sec: None,
        }
    }

    #[test]
    fn relays_every_byte_both_ways_and_half_closes() {
        let (upstream, _) = echo_server();
        let link = Link::start(upstream, delayed(MS)).unwrap();
        let mut rng = SplitMix64::new(30);
        let sent: Vec<u8> = (0..(4 << 20) / 8)
            .flat_map(|_| rng.next_u64().to_le_bytes())
            .collect();
        let client = connect(&link);
        let writer = {
            let (mut client, sent) = (client.try_clone().unwrap(), sent.clone());
            thread::spawn(move || {
                client.write_all(&sent).unwrap();
                client.shutdown(Shutdown::Write).unwrap();
            })
        };
        let mut received = Vec::new();
        // read_to_end ends at the EOF the echo server's half-close sends back through the link.
        (&client).read_to_end(&mut received).unwrap();
        writer.join().unwrap();
        assert_eq!(received.len(), sent.len());
        assert!(received == sent, "the bytes came back altered");
    }

    #[test]
    fn a_round_trip_costs_twice_the_one_way_delay() {
        let (upstream, _) = echo_server();
        let link = Link::start(upstream, delayed(50 * MS)).unwrap();
        let mut client = connect(&link);
        let started = Instant::now();
        client.write_all(b"ping").unwrap();
        let mut answer = [0; 4];
        client.read_exact(&mut answer).unwrap();
        let elapsed = started.elapsed();
        println!("round trip over a 50 ms one-way link: {elapsed:?}");
        assert_eq!(&answer, b"ping");
        assert!(elapsed >= 100 * MS, "{elapsed:?}");
        assert!(elapsed < 500 * MS, "{elapsed:?}");
    }

    #[test]
    fn the_delay_pipelines_instead_of_serializing_chunks() {
        let (upstream, _) = echo_server();
        let link = Link::start(upstream, delayed(50 * MS)).unwrap();
        let client = connect(&link);
        const MESSAGES: usize = 20;
        let started = Instant::now();
        let writer = {
            let mut client = client.try_clone().unwrap();
            // A little spacing keeps the messages separate chunks, each delayed on its own.
            thread::spawn(move || {
                for i in 0..MESSAGES {
                    client.write_all(&[i as u8; 10]).unwrap();
                    thread::sleep(2 * MS);
                }
            })
        };
        let mut echoed = [0; MESSAGES * 10];
        (&client).read_exact(&mut echoed).unwrap();
        let elapsed = started.elapsed();
        writer.join().unwrap();
        println!("{MESSAGES} pipelined echoes over a 50 ms one-way link: {elapsed:?}");
        let expected: Vec<u8> = (0..MESSAGES).flat_map(|i| [i as u8; 10]).collect();
        assert_eq!(echoed.as_slice(), expected.as_slice());
        assert!(elapsed >= 100 * MS, "{elapsed:?}");
        // Delivering one chunk per delay would take 50 ms per message in each direction.
        assert!(elapsed < MESSAGES as u32 * 100 * MS / 2, "{elapsed:?}");

        // In bulk, a proxy that reads again only after delivering (stop-and-wait) carries one
        // read's worth per delay: 4 MiB in 64 KiB reads would take over 3 s each way.
        const BULK: usize = 4 << 20;
        let started = Instant::now();
        let writer = {
            let mut client = client.try_clone().unwrap();
            thread::spawn(move || client.write_all(&vec![1; BULK]).unwrap())
        };
        let mut echoed = vec![0; BULK];
        (&client).read_exact(&mut echoed).unwrap();
        let elapsed = started.elapsed();
        writer.join().unwrap();
        println!("4 MiB echoed over a 50 ms one-way link: {elapsed:?}");
        assert!(echoed.iter().all(|&byte| byte == 1));
        assert!(elapsed >= 100 * MS, "{elapsed:?}");
        assert!(elapsed < 1500 * MS, "{elapsed:?}");
    }

    /// A link to a [`counting_sink`] capped at 4 MiB/s, no delay.
    fn capped_sink() -> Link {
        Link::start(
            counting_sink(),
            LinkOptions {
                one_way_delay: Duration::ZERO,
                bandwidth_bytes_per_sec: Some(4 << 20),
            },
        )
        .unwrap()
    }

    /// Sends `len` bytes on `client`, closes its sending half, and returns the count the sink
    /// answers.
    fn send_counted(mut client: TcpStream, len: usize) -> u64 {
        client.write_all(&vec![7; len]).unwrap();
        client.shutdown(Shutdown::Write).unwrap();
        let mut count = [0; 8];
        client.read_exact(&mut count).unwrap();
        u64::from_be_bytes(count)
    }

    #[test]
    fn the_bandwidth_cap_paces_the_bytes() {
        const SENT: usize = 2 << 20;
        let link = capped_sink();
        let client = connect(&link);
        let started = Instant::now();
        let count = send_counted(client, SENT);
        let elapsed = started.elapsed();
        println!("2 MiB over a 4 MiB/s link: {elapsed:?}");
        assert_eq!(count, SENT as u64);
        // 0.5 s at the cap, less the first piece that goes at once; uncapped it takes ms.
        assert!(elapsed >= 350 * MS, "{elapsed:?}");
        assert!(elapsed < 3000 * MS, "{elapsed:?}");
    }

    #[test]
    fn the_bandwidth_cap_is_shared_by_the_links_connections() {
        const SENT: usize = 1 << 20;
        let link = capped_sink();
        let started = Instant::now();
        let senders: Vec<_> = (0..2)
            .map(|_| {
                let client = connect(&link);
                thread::spawn(move || send_counted(client, SENT))
            })
            .collect();
        for sender in senders {
            assert_eq!(sender.join().unwrap(), SENT as u64);
        }
        let elapsed = started.elapsed();
        println!("2 x 1 MiB over one 4 MiB/s link: {elapsed:?}");
        // 2 MiB in all: 0.5 s at the cap (a cap per connection would take 0.25 s).
        assert!(elapsed >= 400 * MS, "{elapsed:?}");
        assert!(elapsed < 3000 * MS, "{elapsed:?}");
    }

    #[test]
    fn dropping_the_link_closes_both_sides() {
        let (upstream, server_saw_eof) = echo_server();
        let link = Link::start(upstream, LinkOptions::default()).unwrap();
        let mut client = connect(&link);
        client.write_all(b"x").unwrap();
        let mut answer = [0; 1];
        client.read_exact(&mut answer).unwrap();
        client
            .set_read_timeout(Some(Duration::from_secs(2)))
            .unwrap();
        drop(link);
        match client.read(&mut answer) {
            Ok(0) => {}
            Ok(read) => panic!("read {read} bytes after the link was dropped"),
            Err(e) => assert!(
                !matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut),
                "the client's connection stayed open: {e}"
            ),
        }
        server_saw_eof
            .recv_timeout(Duration::from_secs(2))
            .expect("the server's connection stayed open");
    }

    #[test]
    fn a_zero_bandwidth_cap_is_refused() {
        let options = LinkOptions {
            one_way_delay: Duration::ZERO,
            bandwidth_bytes_per_sec: Some(0),
        };
        let refused = Link::start("127.0.0.1:9".parse().unwrap(), options);
        assert_eq!(
            refused.err().map(|e| e.kind()),
            Some(ErrorKind::InvalidInput)
        );
    }
}
