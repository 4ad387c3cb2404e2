//! [`Transport`]: the byte stream under a [`Connection`](super::Connection), plain TCP or TLS.

use std::io::{Read, Write};
use std::net::TcpStream;

use super::security::tls::TlsStream;

/// A broker connection's stream: plain TCP (`PLAINTEXT`, `SASL_PLAINTEXT`) or TLS over TCP
/// (`SSL`, `SASL_SSL`). The read and write timeouts are the TCP socket's.
pub enum Transport {
    /// Plain TCP.
    Plain(TcpStream),
    /// TLS (rustls) over TCP.
    Tls(Box<TlsStream>),
}

impl std::fmt::Debug for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Transport::Plain(s) => f.debug_tuple("Plain").field(s).finish(),
            Transport::Tls(s) => f.debug_tuple("Tls").field(&s.sock).finish(),
        }
    }
}

impl Read for Transport {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Transport::Plain(s) => s.read(buf),
            Transport::Tls(s) => s.read(buf),
        }
    }
}

impl Write for Transport {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Transport::Plain(s) => s.write(buf),
            Transport::Tls(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Transport::Plain(s) => s.flush(),
            Transport::Tls(s) => s.flush(),
        }
    }
}
