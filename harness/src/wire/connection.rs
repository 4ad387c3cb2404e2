//! One connection to a Kafka broker: framing, correlation ids, header versions and the API
//! versions negotiated at connect time; TLS and SASL as its [`SecurityConfig`] says
//! ([`Connection::connect_with`]: TCP, the TLS handshake, ApiVersions, SaslHandshake and
//! SaslAuthenticate).
//!
//! A request is `size:int32` then the request header (v1, or v2 with tagged fields for
//! flexible versions) and the body; the response is `size:int32`, the response header (v0, or
//! v1 for flexible versions) and the body. Requests are sent one at a time and each response's
//! correlation id must match its request's.

use std::collections::HashMap;
use std::io::{ErrorKind, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, RequestHeader, ResponseHeader,
};
use kafka_protocol::protocol::{
    Decodable, Encodable, HeaderVersion, Message, Request, StrBytes, VersionRange,
};

use crate::read_buffer::ReadBuffer;

use super::security::{sasl, tls, SecurityConfig, TlsSettings};
use super::transport::Transport;
use super::{codes, error_name, WireError};

/// The largest response kmirror accepts (a sanity bound against a corrupt size prefix).
pub const MAX_RESPONSE_BYTES: usize = 256 << 20;
/// The `client.id` kmirror sends.
pub const CLIENT_ID: &str = "kmirror";

/// An open connection with the broker's API versions. See the [module documentation](self).
#[derive(Debug)]
pub struct Connection {
    address: String,
    stream: Transport,
    next_correlation_id: i32,
    versions: HashMap<i16, VersionRange>,
    /// When the broker ends the SASL session (KIP-368), if it set a lifetime.
    expires_at: Option<Instant>,
    /// The TLS settings, to explain an alert the broker sends after the handshake (TLS 1.3
    /// refuses a client certificate then).
    tls: Option<TlsSettings>,
    /// Where responses are read: a Fetch response's batches are slices of it, and its
    /// allocation (at most [`MAX_RESPONSE_BYTES`]) is reused for a later response once they are
    /// dropped. It keeps the last two responses' allocations; a caller that drops each
    /// response's batches before the next request, as the node driver does, uses one.
    frames: ReadBuffer,
    /// How long the ApiVersions exchange of the handshake took: one request answered at once,
    /// so about one round trip of the network between kmirror and the broker.
    handshake_round_trip: Duration,
}

impl Connection {
    /// Connects to `address` (`host:port`) in plaintext within `connect_timeout`, sets
    /// `request_timeout` as the socket's read and write timeout, and asks the broker for its
    /// API versions.
    pub fn connect(
        address: &str,
        connect_timeout: Duration,
        request_timeout: Duration,
    ) -> Result<Connection, WireError> {
        Connection::connect_with(
            address,
            connect_timeout,
            request_timeout,
            &SecurityConfig::default(),
        )
    }

    /// As [`connect`](Self::connect), with `security`: the TLS handshake right after TCP
    /// connects (a [`WireError::Tls`] when it fails), and the SASL login right after
    /// ApiVersions (a [`WireError::Authentication`] when the broker refuses it).
    pub fn connect_with(
        address: &str,
        connect_timeout: Duration,
        request_timeout: Duration,
        security: &SecurityConfig,
    ) -> Result<Connection, WireError> {
        let connect_error = |source| WireError::Connect {
            address: address.to_owned(),
            source,
        };
        let addrs: Vec<_> = address.to_socket_addrs().map_err(connect_error)?.collect();
        let mut last = std::io::Error::new(ErrorKind::NotFound, "the address resolves to nothing");
        let mut stream = None;
        for addr in addrs {
            match TcpStream::connect_timeout(&addr, connect_timeout) {
                Ok(s) => {
                    stream = Some(s);
                    break;
                }
                Err(e) => last = e,
            }
        }
        let stream = stream.ok_or_else(|| connect_error(last))?;
        let setup = |r: std::io::Result<()>| r.map_err(connect_error);
        setup(stream.set_read_timeout(Some(request_timeout)))?;
        setup(stream.set_write_timeout(Some(request_timeout)))?;
        setup(stream.set_nodelay(true))?;
        let stream = match &security.tls {
            None => Transport::Plain(stream),
            Some(settings) => Transport::Tls(Box::new(
                tls::handshake(stream, address, settings).map_err(|reason| WireError::Tls {
                    address: address.to_owned(),
                    reason,
                })?,
            )),
        };
        let mut connection = Connection {
            address: address.to_owned(),
            stream,
            next_correlation_id: 1,
            versions: HashMap::new(),
            expires_at: None,
            tls: security.tls.clone(),
            frames: ReadBuffer::default(),
            handshake_round_trip: Duration::ZERO,
        };
        let asked = Instant::now();
        connection.negotiate()?;
        connection.handshake_round_trip = asked.elapsed();
        if let Some(settings) = &security.sasl {
            let lifetime = sasl::authenticate(&mut connection, settings)?;
            // Reopen a little before the broker would close the session.
            connection.expires_at = lifetime.map(|l| Instant::now() + l.mul_f64(0.9));
        }
        Ok(connection)
    }

    /// Whether the broker's SASL session lifetime is (nearly) over: the connection must be
    /// reopened before the next request.
    pub fn is_expired(&self) -> bool {
        self.expires_at.is_some_and(|at| Instant::now() >= at)
    }

    /// The broker's address.
    pub fn address(&self) -> &str {
        &self.address
    }

    /// How long the handshake's ApiVersions request took to be answered: a measure of the round
    /// trip to the broker (the broker answers it at once, and it carries a few hundred bytes).
    pub fn handshake_round_trip(&self) -> Duration {
        self.handshake_round_trip
    }

    /// The broker's version range of `api_key`, if it supports the API at all.
    pub fn broker_versions(&self, api_key: ApiKey) -> Option<VersionRange> {
        self.versions.get(&(api_key as i16)).copied()
    }

    /// Whether the broker listed API `api_key` at `version` in its ApiVersions answer (also
    /// for APIs kafka-protocol does not know, as the KIP's).
    pub fn serves(&self, api_key: i16, version: i16) -> bool {
        self.versions
            .get(&api_key)
            .is_some_and(|r| (r.min..=r.max).contains(&version))
    }

    /// Sends the frame `encode` builds (size prefix included) for the correlation id it is
    /// given, and returns that id with the response frame (no size prefix), undecoded: for
    /// APIs kafka-protocol does not know.
    pub fn send_raw(
        &mut self,
        api: &'static str,
        version: i16,
        encode: impl FnOnce(i32) -> Result<Vec<u8>, String>,
    ) -> Result<(i32, Bytes), WireError> {
        let correlation_id = self.next_correlation_id;
        self.next_correlation_id = self.next_correlation_id.wrapping_add(1).max(1);
        let frame = encode(correlation_id).map_err(|reason| WireError::Encode {
            address: self.address.clone(),
            api,
            version,
            reason,
        })?;
        self.stream
            .write_all(&frame)
            .and_then(|()| self.stream.flush())
            .map_err(|source| self.io_error(api, source))?;
        let response = self.read_frame(api, version)?;
        Ok((correlation_id, response))
    }

    /// The highest version of `R` both sides speak, at least `min` (the oldest version with the
    /// fields kmirror relies on).
    pub fn version_for<R: Request>(&self, api: &'static str, min: i16) -> Result<i16, WireError> {
        let ours = VersionRange {
            min: R::VERSIONS.min.max(min),
            max: R::VERSIONS.max,
        };
        let broker = self.versions.get(&R::KEY).copied();
        match broker.map(|b| b.intersect(&ours)) {
            Some(both) if !both.is_empty() => Ok(both.max),
            _ => Err(WireError::Unsupported {
                address: self.address.clone(),
                api,
                broker: broker.map_or("none".to_owned(), |b| b.to_string()),
                needed: ours.to_string(),
            }),
        }
    }

    /// Sends `request` as version `version` and reads its response.
    pub fn send<R: Request>(
        &mut self,
        api: &'static str,
        request: &R,
        version: i16,
    ) -> Result<R::Response, WireError> {
        let correlation_id = self.next_correlation_id;
        self.next_correlation_id = self.next_correlation_id.wrapping_add(1).max(1);
        let header = RequestHeader::default()
            .with_request_api_key(R::KEY)
            .with_request_api_version(version)
            .with_correlation_id(correlation_id)
            .with_client_id(Some(StrBytes::from_static_str(CLIENT_ID)));
        let encode_error = |reason: String| WireError::Encode {
            address: self.address.clone(),
            api,
            version,
            reason,
        };
        let mut body = BytesMut::new();
        header
            .encode(&mut body, R::header_version(version))
            .map_err(|e| encode_error(e.to_string()))?;
        request
            .encode(&mut body, version)
            .map_err(|e| encode_error(e.to_string()))?;
        let size = i32::try_from(body.len()).map_err(|_| encode_error("too large".into()))?;
        let mut frame = BytesMut::with_capacity(body.len() + 4);
        frame.put_i32(size);
        frame.put_slice(&body);
        self.stream
            .write_all(&frame)
            .and_then(|()| self.stream.flush())
            .map_err(|source| self.io_error(api, source))?;

        let mut response = self.read_frame(api, version)?;
        let malformed = |reason: String| WireError::Malformed {
            address: self.address.clone(),
            api,
            version,
            reason,
        };
        let header_version = <R::Response as HeaderVersion>::header_version(version);
        let header = ResponseHeader::decode(&mut response, header_version)
            .map_err(|e| malformed(format!("bad response header: {e}")))?;
        if header.correlation_id != correlation_id {
            return Err(malformed(format!(
                "correlation id {} answers no request (expected {correlation_id})",
                header.correlation_id
            )));
        }
        R::Response::decode(&mut response, version).map_err(|e| malformed(e.to_string()))
    }

    fn read_frame(&mut self, api: &'static str, version: i16) -> Result<Bytes, WireError> {
        let mut size = [0u8; 4];
        self.stream
            .read_exact(&mut size)
            .map_err(|source| self.io_error(api, source))?;
        let size = i32::from_be_bytes(size);
        let len = usize::try_from(size)
            .ok()
            .filter(|&n| n <= MAX_RESPONSE_BYTES)
            .ok_or_else(|| WireError::Malformed {
                address: self.address.clone(),
                api,
                version,
                reason: format!("response size {size} is out of range"),
            })?;
        let stream = &mut self.stream;
        match self.frames.read(len, |dest| stream.read_exact(dest)) {
            Ok(frame) => Ok(frame),
            Err(source) => Err(self.io_error(api, source)),
        }
    }

    fn io_error(&self, api: &'static str, source: std::io::Error) -> WireError {
        let is_tls = source
            .get_ref()
            .is_some_and(|inner| inner.downcast_ref::<rustls::Error>().is_some());
        if let (true, Some(settings)) = (is_tls, &self.tls) {
            return WireError::Tls {
                address: self.address.clone(),
                reason: tls::explain(&source, tls::host_of(&self.address), settings),
            };
        }
        let source = if matches!(source.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) {
            std::io::Error::new(ErrorKind::TimedOut, "no answer within the request timeout")
        } else if source.kind() == ErrorKind::UnexpectedEof {
            std::io::Error::new(ErrorKind::UnexpectedEof, "the broker closed the connection")
        } else {
            source
        };
        WireError::Io {
            address: self.address.clone(),
            api,
            source,
        }
    }

    /// ApiVersions at the highest version we speak; a broker that does not know it answers
    /// `UNSUPPORTED_VERSION` with its own range in a v0 body, and we ask again at its highest.
    fn negotiate(&mut self) -> Result<(), WireError> {
        const API: &str = "ApiVersions";
        let request = ApiVersionsRequest::default()
            .with_client_software_name(StrBytes::from_static_str(CLIENT_ID))
            .with_client_software_version(StrBytes::from_static_str(env!("CARGO_PKG_VERSION")));
        let mut version = ApiVersionsRequest::VERSIONS.max;
        let mut response: ApiVersionsResponse = self.send(API, &request, version)?;
        if response.error_code == codes::UNSUPPORTED_VERSION {
            let theirs = response
                .api_keys
                .iter()
                .find(|k| k.api_key == ApiKey::ApiVersions as i16)
                .map(|k| k.max_version)
                .unwrap_or(0);
            version = theirs.clamp(0, ApiVersionsRequest::VERSIONS.max);
            response = self.send(API, &request, version)?;
        }
        if response.error_code != 0 {
            return Err(WireError::Broker {
                address: self.address.clone(),
                api: API,
                what: "the broker's API versions".into(),
                code: response.error_code,
                name: error_name(response.error_code),
            });
        }
        self.versions = response
            .api_keys
            .iter()
            .map(|k| {
                (
                    k.api_key,
                    VersionRange {
                        min: k.min_version,
                        max: k.max_version,
                    },
                )
            })
            .collect();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::net::TcpListener;

    use super::*;

    const SECOND: Duration = Duration::from_secs(1);

    /// A one-connection fake broker: reads one request frame, then does `answer`.
    fn fake_broker(answer: impl FnOnce(&mut TcpStream) + Send + 'static) -> String {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let address = listener.local_addr().expect("address").to_string();
        std::thread::spawn(move || {
            if let Ok((mut stream, _)) = listener.accept() {
                let mut size = [0u8; 4];
                if stream.read_exact(&mut size).is_ok() {
                    let mut request = vec![0u8; i32::from_be_bytes(size).max(0) as usize];
                    let _ = stream.read_exact(&mut request);
                }
                answer(&mut stream);
            }
        });
        address
    }

    #[test]
    fn nothing_listening_is_a_connect_error_naming_the_address() {
        let address = {
            let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
            listener.local_addr().expect("address").to_string()
        };
        let error = Connection::connect(&address, SECOND, SECOND).expect_err("refused");
        assert!(matches!(error, WireError::Connect { .. }));
        assert!(error.to_string().contains(&address), "{error}");
        assert!(error.is_connection());
    }

    #[test]
    fn a_broker_that_hangs_up_is_an_io_error() {
        let address = fake_broker(|stream| {
            let _ = stream.shutdown(std::net::Shutdown::Both);
        });
        let error = Connection::connect(&address, SECOND, SECOND).expect_err("closed");
        assert!(
            matches!(
                error,
                WireError::Io {
                    api: "ApiVersions",
                    ..
                }
            ),
            "{error}"
        );
        assert!(
            error.to_string().contains("closed the connection"),
            "{error}"
        );
    }

    #[test]
    fn a_silent_broker_times_out() {
        let address = fake_broker(|_| std::thread::sleep(Duration::from_secs(3)));
        let error =
            Connection::connect(&address, SECOND, Duration::from_millis(200)).expect_err("timeout");
        assert!(error.to_string().contains("request timeout"), "{error}");
    }

    #[test]
    fn malformed_responses_are_errors_not_panics() {
        // A negative size.
        let address = fake_broker(|stream| {
            let _ = stream.write_all(&(-5i32).to_be_bytes());
        });
        let error = Connection::connect(&address, SECOND, SECOND).expect_err("bad size");
        assert!(matches!(error, WireError::Malformed { .. }), "{error}");
        // Garbage where the header and body belong.
        let address = fake_broker(|stream| {
            let _ = stream.write_all(&[0, 0, 0, 3, 0xff, 0xff, 0xff]);
        });
        let error = Connection::connect(&address, SECOND, SECOND).expect_err("garbage");
        assert!(matches!(error, WireError::Malformed { .. }), "{error}");
        assert!(error.to_string().contains(&address), "{error}");
        // A well-formed header answering another request.
        let address = fake_broker(|stream| {
            let _ = stream.write_all(&[0, 0, 0, 4, 0, 0, 0, 99]);
        });
        let error = Connection::connect(&address, SECOND, SECOND).expect_err("correlation");
        assert!(error.to_string().contains("correlation id 99"), "{error}");
    }
}
