//! The byte-level connection under the live transport: TCP, then TLS with
//! ProxOps' own rustls configuration, plugged into ureq's connector chain.
//!
//! Two things ureq's stock connector cannot do are done here:
//! - TLS with a custom certificate verifier (fingerprint pinning), the
//!   handshake completed before ureq writes the request, so a refused
//!   server never sees a byte of it;
//! - keeping the HTTP reason phrase, where PVE puts its error text. ureq 3
//!   drops it while parsing, so the status line is copied into an extra
//!   response header (`REASON_HEADER`) as the bytes arrive.
//!
//! **Architecture Invariant:** this module never reads or changes anything
//! but the status line; bodies and other headers pass through untouched.

use std::fmt;
use std::io::{self, Read, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use rustls::{ClientConfig, ClientConnection, StreamOwned};
use rustls_pki_types::ServerName;
use ureq::unversioned::transport::{
    Buffers, ConnectionDetails, Connector, LazyBuffers, NextTimeout, Transport, TransportAdapter,
};

/// The response header that carries the status line's reason phrase.
pub(crate) const REASON_HEADER: &str = "x-proxops-reason-phrase";

/// A status line longer than this is passed on as is (no reason kept).
const MAX_STATUS_LINE: usize = 16 * 1024;

/// A failed TLS handshake that another attempt would not fix (untrusted
/// certificate, wrong pin, no common protocol), as opposed to a dropped
/// connection during the handshake.
#[derive(Debug)]
pub(crate) struct TlsRefused(pub(crate) String);

impl fmt::Display for TlsRefused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for TlsRefused {}

/// Wraps the TCP transport of the chain in TLS (for https) and in the
/// reason-phrase keeper (always).
pub(crate) struct PveConnector {
    pub(crate) tls: Arc<ClientConfig>,
    /// Connections opened (each a TCP and, for https, a TLS handshake).
    pub(crate) opened: Arc<AtomicU64>,
}

impl fmt::Debug for PveConnector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PveConnector").finish_non_exhaustive()
    }
}

impl<In: Transport> Connector<In> for PveConnector {
    type Out = ReasonKeeper;

    fn connect(
        &self,
        details: &ConnectionDetails,
        chained: Option<In>,
    ) -> Result<Option<ReasonKeeper>, ureq::Error> {
        let Some(tcp) = chained else {
            return Ok(None);
        };
        self.opened.fetch_add(1, Ordering::Relaxed);
        let config = details.config;
        let buffers = LazyBuffers::new(config.input_buffer_size(), config.output_buffer_size());
        let mut sock = TransportAdapter::new(tcp.boxed(), details.current_time.clone());
        sock.set_timeout(details.timeout);
        if !details.needs_tls() {
            return Ok(Some(ReasonKeeper::new(Stream::Plain(sock), buffers)));
        }
        let host = details.uri.host().unwrap_or_default();
        let host = host
            .strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(host);
        let name = ServerName::try_from(host.to_owned())
            .map_err(|e| refused(format!("{host:?} is not a valid TLS server name: {e}")))?;
        let mut conn =
            ClientConnection::new(self.tls.clone(), name).map_err(|e| refused(e.to_string()))?;
        while conn.is_handshaking() {
            if let Err(e) = conn.complete_io(&mut sock) {
                return Err(handshake_error(e, host));
            }
        }
        Ok(Some(ReasonKeeper::new(
            Stream::Tls(Box::new(StreamOwned::new(conn, sock))),
            buffers,
        )))
    }
}

fn refused(message: String) -> ureq::Error {
    ureq::Error::Io(io::Error::other(TlsRefused(message)))
}

/// A rustls protocol error (certificate refused, no common cipher) is final;
/// anything else (reset, timeout) is a plain I/O error and may be retried.
fn handshake_error(e: io::Error, host: &str) -> ureq::Error {
    match e
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>())
    {
        // Our own verifier's reason (a fingerprint mismatch): rustls would
        // show it in Debug form.
        Some(rustls::Error::InvalidCertificate(rustls::CertificateError::Other(why))) => {
            refused(format!("handshake with {host} refused: {why}"))
        }
        // The first bytes back were not a TLS record: most likely a plain
        // HTTP server ("HTTP/1.1 400 …") on this port.
        Some(rustls::Error::InvalidMessage(rustls::InvalidMessage::InvalidContentType)) => {
            refused(format!(
                "handshake with {host} failed: the server answered in plain text, not TLS (is this port serving plain HTTP?); PVE's API speaks only https, on port 8006"
            ))
        }
        Some(tls) => refused(format!("handshake with {host} refused: {tls}")),
        None => ureq::Error::from(e),
    }
}

enum Stream {
    Tls(Box<StreamOwned<ClientConnection, TransportAdapter>>),
    Plain(TransportAdapter),
}

impl Stream {
    fn adapter(&mut self) -> &mut TransportAdapter {
        match self {
            Stream::Tls(tls) => tls.get_mut(),
            Stream::Plain(plain) => plain,
        }
    }

    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Tls(tls) => tls.read(buf),
            Stream::Plain(plain) => plain.read(buf),
        }
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        match self {
            Stream::Tls(tls) => tls.write_all(buf),
            Stream::Plain(plain) => plain.write_all(buf),
        }
    }
}

/// The transport ureq talks to. After each request it reads the response's
/// status line itself and hands ureq the same bytes plus one header line
/// `x-proxops-reason-phrase: <reason>`.
pub(crate) struct ReasonKeeper {
    buffers: LazyBuffers,
    stream: Stream,
    /// A request went out; the next bytes in start a status line.
    expect_status_line: bool,
    /// Bytes of a status line read so far.
    head: Vec<u8>,
    /// Bytes ready for ureq that did not fit into its input buffer yet.
    pending: Vec<u8>,
}

impl ReasonKeeper {
    fn new(stream: Stream, buffers: LazyBuffers) -> ReasonKeeper {
        ReasonKeeper {
            buffers,
            stream,
            expect_status_line: false,
            head: Vec::new(),
            pending: Vec::new(),
        }
    }

    /// Moves pending bytes into ureq's input buffer; true if any moved.
    fn drain_pending(&mut self) -> bool {
        if self.pending.is_empty() {
            return false;
        }
        let room = self.buffers.input_append_buf();
        let n = room.len().min(self.pending.len());
        room[..n].copy_from_slice(&self.pending[..n]);
        self.buffers.input_appended(n);
        self.pending.drain(..n);
        n > 0
    }
}

/// The status line with the reason-phrase header after it. `line` excludes
/// its CRLF.
fn with_reason_header(line: &[u8]) -> Vec<u8> {
    let reason = line.splitn(3, |b| *b == b' ').nth(2).unwrap_or_default();
    // A header value may hold tab, space, visible ASCII and obs-text.
    let reason: Vec<u8> = reason
        .iter()
        .copied()
        .filter(|b| *b == b'\t' || *b >= 0x20 && *b != 0x7f)
        .collect();
    let mut out = Vec::with_capacity(line.len() + REASON_HEADER.len() + reason.len() + 8);
    out.extend_from_slice(line);
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(REASON_HEADER.as_bytes());
    out.extend_from_slice(b": ");
    out.extend_from_slice(&reason);
    out.extend_from_slice(b"\r\n");
    out
}

impl Transport for ReasonKeeper {
    fn buffers(&mut self) -> &mut dyn Buffers {
        &mut self.buffers
    }

    fn transmit_output(&mut self, amount: usize, timeout: NextTimeout) -> Result<(), ureq::Error> {
        self.stream.adapter().set_timeout(timeout);
        let output = &self.buffers.output()[..amount];
        self.stream.write_all(output)?;
        self.expect_status_line = true;
        self.head.clear();
        Ok(())
    }

    fn await_input(&mut self, timeout: NextTimeout) -> Result<bool, ureq::Error> {
        if self.drain_pending() {
            return Ok(true);
        }
        self.stream.adapter().set_timeout(timeout);
        if !self.expect_status_line {
            let input = self.buffers.input_append_buf();
            let n = self.stream.read(input)?;
            self.buffers.input_appended(n);
            return Ok(n > 0);
        }
        let mut chunk = [0u8; 4096];
        loop {
            let n = self.stream.read(&mut chunk)?;
            if n == 0 {
                // Closed before a whole status line: pass on what came.
                self.expect_status_line = false;
                self.pending = std::mem::take(&mut self.head);
                return Ok(self.drain_pending());
            }
            self.head.extend_from_slice(&chunk[..n]);
            if let Some(end) = self.head.windows(2).position(|w| w == b"\r\n") {
                let rest = self.head.split_off(end + 2);
                let mut bytes = with_reason_header(&self.head[..end]);
                bytes.extend_from_slice(&rest);
                self.head.clear();
                self.pending = bytes;
                self.expect_status_line = false;
                return Ok(self.drain_pending());
            }
            if self.head.len() > MAX_STATUS_LINE {
                self.expect_status_line = false;
                self.pending = std::mem::take(&mut self.head);
                return Ok(self.drain_pending());
            }
        }
    }

    fn is_open(&mut self) -> bool {
        self.stream.adapter().get_mut().is_open()
    }

    fn is_tls(&self) -> bool {
        matches!(self.stream, Stream::Tls(_))
    }
}

impl fmt::Debug for ReasonKeeper {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReasonKeeper")
            .field("tls", &self.is_tls())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reason_phrase_becomes_a_header_line() {
        let out = with_reason_header(b"HTTP/1.1 500 can't lock file '/x' - got timeout");
        assert_eq!(
            out,
            b"HTTP/1.1 500 can't lock file '/x' - got timeout\r\nx-proxops-reason-phrase: can't lock file '/x' - got timeout\r\n"
        );
    }

    #[test]
    fn missing_reason_gives_an_empty_header_and_control_bytes_are_dropped() {
        assert_eq!(
            with_reason_header(b"HTTP/1.1 200"),
            b"HTTP/1.1 200\r\nx-proxops-reason-phrase: \r\n"
        );
        assert_eq!(
            with_reason_header(b"HTTP/1.1 400 a\x00b"),
            b"HTTP/1.1 400 a\x00b\r\nx-proxops-reason-phrase: ab\r\n"
        );
    }
}
