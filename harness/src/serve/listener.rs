//! The listener: accepts Kafka clients on a TCP address and turns each connection's frames
//! into [`ClientCall`]s for the node's thread, one at a time per connection, as Kafka's socket
//! server does (a connection is muted while its request is answered, so answers go out in
//! request order).
//!
//! Everything a connection does is bounded: a frame larger than
//! [`ServeOptions::max_request_bytes`] or one that does not decode closes the connection with
//! one log line; so does a client idle for [`ServeOptions::idle_timeout`], and a connection
//! beyond [`ServeOptions::max_connections`] is closed at once. ApiVersions is answered on the
//! connection's thread (it needs nothing of the node), every other request by the node. The
//! KIP's `ReadMirrorStates`, which kafka-protocol does not know, is framed by [`super::lme`].

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, Sender, SyncSender};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader, RequestKind, ResponseHeader, ResponseKind};
use kafka_protocol::protocol::{Decodable, Encodable};

use super::lme::{self, MirrorStatesCall, READ_MIRROR_STATES_KEY};
use super::sasl::Sasl;
use super::versions::{api_versions_response, supported};
use super::{fetch_frame, CallId, ClientCall, NodeCall, Reply, ServeError, ServeOptions};

/// A running listener. Dropping it stops accepting (connections end as their clients leave).
#[derive(Debug)]
pub struct Listener {
    address: SocketAddr,
    stop: Arc<AtomicBool>,
}

impl Listener {
    /// Binds `options.listen` and starts accepting; every decoded request is sent on `calls`.
    pub fn start(options: &ServeOptions, calls: Sender<NodeCall>) -> Result<Listener, ServeError> {
        let socket = TcpListener::bind(&options.listen).map_err(|source| ServeError::Bind {
            address: options.listen.clone(),
            source,
        })?;
        let address = socket.local_addr().map_err(|source| ServeError::Bind {
            address: options.listen.clone(),
            source,
        })?;
        socket
            .set_nonblocking(true)
            .map_err(|source| ServeError::Bind {
                address: options.listen.clone(),
                source,
            })?;
        let stop = Arc::new(AtomicBool::new(false));
        let shared = Arc::new(Shared {
            options: options.clone(),
            calls,
            open: AtomicUsize::new(0),
            next_call: AtomicU64::new(1),
            stop: stop.clone(),
        });
        thread::Builder::new()
            .name("kmirror-listen".into())
            .spawn(move || accept_loop(&socket, &shared))
            .map_err(|source| ServeError::Bind {
                address: options.listen.clone(),
                source,
            })?;
        Ok(Listener { address, stop })
    }

    /// The address it listens on (the port chosen when `listen` said port 0).
    pub fn address(&self) -> SocketAddr {
        self.address
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// What every connection thread shares.
struct Shared {
    options: ServeOptions,
    calls: Sender<NodeCall>,
    open: AtomicUsize,
    next_call: AtomicU64,
    stop: Arc<AtomicBool>,
}

fn accept_loop(socket: &TcpListener, shared: &Arc<Shared>) {
    while !shared.stop.load(Ordering::Relaxed) {
        match socket.accept() {
            Ok((stream, peer)) => {
                if shared.open.load(Ordering::Relaxed) >= shared.options.max_connections {
                    eprintln!(
                        "serve: connection from {peer} refused: {} connections are open \
                         (--max-connections)",
                        shared.options.max_connections
                    );
                    continue;
                }
                shared.open.fetch_add(1, Ordering::Relaxed);
                let conn = shared.clone();
                let spawned = thread::Builder::new()
                    .name(format!("kmirror-client-{peer}"))
                    .spawn(move || {
                        if let Err(reason) = serve_connection(stream, &conn) {
                            eprintln!("serve: connection from {peer} closed: {reason}");
                        }
                        conn.open.fetch_sub(1, Ordering::Relaxed);
                    });
                if spawned.is_err() {
                    shared.open.fetch_sub(1, Ordering::Relaxed);
                }
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => thread::sleep(Duration::from_millis(20)),
            Err(e) => {
                eprintln!("serve: accept failed: {e}");
                thread::sleep(Duration::from_millis(100));
            }
        }
    }
}

/// Why a connection ended (logged in one line; a client that leaves is not an error).
type Closed = String;

fn serve_connection(stream: TcpStream, shared: &Shared) -> Result<(), Closed> {
    let client_host = stream
        .peer_addr()
        .map_or_else(|_| "unknown".to_owned(), |a| format!("/{}", a.ip()));
    stream.set_nodelay(true).map_err(|e| e.to_string())?;
    stream
        .set_read_timeout(Some(shared.options.idle_timeout))
        .map_err(|e| e.to_string())?;
    stream
        .set_write_timeout(Some(shared.options.idle_timeout))
        .map_err(|e| e.to_string())?;
    match &shared.options.security.tls {
        None => {
            // The same connection, for the records a Fetch answer sends from the files.
            let socket = stream.try_clone().map_err(|e| e.to_string())?;
            serve_frames(stream, Some(&socket), &client_host, shared)
        }
        Some(config) => {
            let tls = rustls::ServerConnection::new(config.clone())
                .map_err(|e| format!("TLS setup failed: {e}"))?;
            let stream = rustls::StreamOwned::new(tls, stream);
            serve_frames(stream, None, &client_host, shared)
        }
    }
}

/// Reads a connection's frames one at a time, answers each, until the client leaves. `socket`:
/// the connection itself when records may be sent from the files (plaintext).
fn serve_frames(
    mut stream: impl Read + Write,
    socket: Option<&TcpStream>,
    client_host: &str,
    shared: &Shared,
) -> Result<(), Closed> {
    let (reply_to, replies) = mpsc::sync_channel(1);
    let security = &shared.options.security;
    let mut sasl = Sasl::new(security.sasl_users.is_some());
    loop {
        let Some(frame) = read_frame(&mut stream, shared.options.max_request_bytes)? else {
            return Ok(());
        };
        if frame.get(..2) == Some(&READ_MIRROR_STATES_KEY.to_be_bytes()[..]) {
            // Like every API but ApiVersions and SASL's own, only once authenticated.
            if !sasl.authenticated() {
                return Err(format!(
                    "ReadMirrorStates before SASL authentication (the listener is {}); closed",
                    shared.options.security.protocol()
                ));
            }
            let call = shared.next_call.fetch_add(1, Ordering::Relaxed);
            match ask_mirror_states(shared, call, frame).and_then(|answer| {
                stream
                    .write_all(&answer)
                    .and_then(|()| stream.flush())
                    .map_err(|e| e.to_string())
            }) {
                Ok(()) => continue,
                Err(reason) => return Err(reason),
            }
        }
        let (header, body, version) = decode_request(frame)?;
        let api_key = ApiKey::try_from(header.request_api_key)
            .map_err(|()| format!("unknown API key {}", header.request_api_key))?;
        // acks=0: Kafka writes no response to a Produce; the client expects none.
        let silent = matches!(&body, RequestKind::Produce(p) if p.acks == 0);
        let reply = if api_key == ApiKey::ApiVersions {
            ResponseKind::ApiVersions(api_versions_response(version)).into()
        } else if let Some(answer) = sasl.answer(&body, security) {
            answer.into()
        } else if !sasl.authenticated() {
            return Err(format!(
                "{api_key:?} before SASL authentication (the listener is {}); closed",
                shared.options.security.protocol()
            ));
        } else {
            let call = shared.next_call.fetch_add(1, Ordering::Relaxed);
            ask_node(
                shared,
                call,
                header.clone(),
                body,
                client_host,
                &reply_to,
                &replies,
            )?
        };
        if silent {
            continue;
        }
        let failed_login = sasl.failed();
        match write_response(
            &mut stream,
            socket,
            api_key,
            version,
            header.correlation_id,
            reply,
        ) {
            Ok(()) => {}
            // The client left before its answer: not an error of either side.
            Err(Written::ClientLeft) => return Ok(()),
            Err(Written::Failed(reason)) => return Err(reason),
        }
        if failed_login {
            return Err("SASL authentication failed; closed".to_owned());
        }
    }
}

/// Sends one call to the node and waits for its answer.
fn ask_node(
    shared: &Shared,
    call: CallId,
    header: RequestHeader,
    request: RequestKind,
    client_host: &str,
    reply_to: &SyncSender<Reply>,
    replies: &Receiver<Reply>,
) -> Result<Reply, Closed> {
    shared
        .calls
        .send(NodeCall::Client(Box::new(ClientCall {
            id: call,
            header,
            request,
            reply: reply_to.clone(),
            client_host: client_host.to_owned(),
        })))
        .map_err(|_| "the node is shutting down".to_owned())?;
    replies
        .recv()
        .map_err(|_| "the node dropped the request (shutting down)".to_owned())
}

/// Decodes a `ReadMirrorStates` frame, has the node answer it, and returns the response frame.
fn ask_mirror_states(shared: &Shared, call: CallId, frame: Bytes) -> Result<Vec<u8>, Closed> {
    let (header, request) = lme::decode_request(frame)?;
    let (reply, answer) = mpsc::sync_channel(1);
    let correlation_id = header.correlation_id;
    shared
        .calls
        .send(NodeCall::MirrorStates(MirrorStatesCall {
            id: call,
            header,
            request,
            reply,
        }))
        .map_err(|_| "the node is shutting down".to_owned())?;
    let response = answer
        .recv()
        .map_err(|_| "the node dropped the request (shutting down)".to_owned())?;
    lme::encode_response(correlation_id, &response)
}

/// Reads one size-prefixed frame; `None` when the client closed the connection between frames.
fn read_frame(stream: &mut impl Read, max_bytes: usize) -> Result<Option<Bytes>, Closed> {
    let mut size = [0u8; 4];
    match stream.read_exact(&mut size) {
        Ok(()) => {}
        Err(e) if e.kind() == ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
            return Err("idle for longer than --idle-timeout-ms".to_owned())
        }
        Err(e) if e.kind() == ErrorKind::ConnectionReset => return Ok(None),
        Err(e) => return Err(format!("read failed: {e}")),
    }
    let size = i32::from_be_bytes(size);
    let size = usize::try_from(size).map_err(|_| format!("negative frame size {size}"))?;
    if size > max_bytes {
        return Err(format!(
            "a request of {size} bytes is larger than --max-request-bytes ({max_bytes})"
        ));
    }
    let mut buf = vec![0u8; size];
    stream
        .read_exact(&mut buf)
        .map_err(|e| format!("read of a {size}-byte request failed: {e}"))?;
    Ok(Some(Bytes::from(buf)))
}

/// Decodes a request's header and body. ApiVersions of a version this node does not know is
/// decoded at version 0 (its answer then says which versions there are, as Kafka does).
fn decode_request(mut frame: Bytes) -> Result<(RequestHeader, RequestKind, i16), Closed> {
    if frame.len() < 4 {
        return Err(format!("a {}-byte request has no header", frame.len()));
    }
    let api = i16::from_be_bytes([frame[0], frame[1]]);
    let version = i16::from_be_bytes([frame[2], frame[3]]);
    let key = ApiKey::try_from(api).map_err(|()| format!("unknown API key {api}"))?;
    if key == ApiKey::ApiVersions && !supported(key, version) {
        // Kafka answers an unknown ApiVersions version with UNSUPPORTED_VERSION in v0.
        let header = RequestHeader::decode(&mut frame, 1)
            .map_err(|e| format!("bad ApiVersions header: {e}"))?;
        return Ok((header, RequestKind::ApiVersions(Default::default()), -1));
    }
    if !supported(key, version) {
        return Err(format!(
            "{key:?} v{version} is not served (ApiVersions lists what is); the client sent it anyway"
        ));
    }
    let header = RequestHeader::decode(&mut frame, key.request_header_version(version))
        .map_err(|e| format!("bad {key:?} v{version} header: {e}"))?;
    let body = RequestKind::decode(key, &mut frame, version)
        .map_err(|e| format!("bad {key:?} v{version} request: {e}"))?;
    Ok((header, body, version))
}

/// Why a response was not written.
enum Written {
    /// The client closed its connection first.
    ClientLeft,
    /// Anything else, said in a line.
    Failed(Closed),
}

/// Encodes and writes one response (`version` -1: an ApiVersions answer to a version this node
/// does not know, written in v0); a Fetch response's file regions are sent from the files
/// ([`fetch_frame`]), with `sendfile` on `socket` when there is one.
fn write_response(
    stream: &mut impl Write,
    socket: Option<&TcpStream>,
    key: ApiKey,
    version: i16,
    correlation_id: i32,
    reply: Reply,
) -> Result<(), Written> {
    let version = version.max(0);
    let header_version = key.response_header_version(version);
    let failed = |reason: String| Written::Failed(reason);
    let written = |e: std::io::Error| match e.kind() {
        ErrorKind::BrokenPipe | ErrorKind::ConnectionReset => Written::ClientLeft,
        _ => failed(format!("write of a {key:?} response failed: {e}")),
    };
    let Reply { response, regions } = reply;
    if let (ResponseKind::Fetch(fetch), false) = (&response, regions.is_empty()) {
        let pieces = fetch_frame::frame(correlation_id, header_version, fetch, version, regions)
            .map_err(failed)?;
        return fetch_frame::write(stream, socket, pieces).map_err(written);
    }
    let mut body = BytesMut::new();
    let header = ResponseHeader::default().with_correlation_id(correlation_id);
    header
        .encode(&mut body, header_version)
        .map_err(|e| failed(format!("encode of a {key:?} response header failed: {e}")))?;
    response.encode(&mut body, version).map_err(|e| {
        failed(format!(
            "encode of a {key:?} v{version} response failed: {e}"
        ))
    })?;
    let mut frame = BytesMut::with_capacity(4 + body.len());
    let len = i32::try_from(body.len()).map_err(|_| failed("response too large".to_owned()))?;
    frame.put_i32(len);
    frame.put(body);
    stream
        .write_all(frame.chunk())
        .and_then(|()| stream.flush())
        .map_err(written)
}
