//! One connection: read a bounded request head, answer it, close.
//!
//! One request per connection (every answer says `Connection: close`): a
//! scraper or a health probe asks one thing every few seconds, and closing
//! after each answer keeps a connection's life, and so the slot it holds,
//! short and bounded.
//!
//! Must never: buffer more than [`ServerLimits::max_header_bytes`] of a
//! request, wait for a head longer than [`ServerLimits::header_timeout`],
//! read a request body, or log anything a client sent.

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::time::{Duration, Instant};

use crate::{Reply, Route, ServerLimits, Source, TEXT_CONTENT_TYPE, unix_now};

/// After the answer, how long the rest of what the client sent is read and
/// thrown away, and how much of it at most. Closing a socket with unread
/// input makes the kernel send a reset, which can destroy the answer
/// before the client reads it (a 431 to a client still sending its huge
/// head); reading on for a moment lets the answer arrive.
const LINGER_TIME: Duration = Duration::from_secs(2);
const LINGER_BYTES: usize = 4 << 20;

/// How reading a request head ended.
#[derive(Debug, PartialEq, Eq)]
enum Head {
    /// The head, up to and including its empty line.
    Complete(Vec<u8>),
    /// No empty line within the size limit.
    TooLarge,
    /// No empty line within the time limit.
    TimedOut,
    /// The client closed or the connection failed before a full head.
    Gone,
}

/// Serves one connection to its end.
pub(crate) fn serve(mut stream: TcpStream, source: &Source, limits: &ServerLimits) {
    let _ = stream.set_write_timeout(Some(limits.write_timeout));
    let _ = stream.set_nodelay(true);
    let deadline = Instant::now() + limits.header_timeout;
    let (reply, with_body) = match read_head(&mut stream, limits.max_header_bytes, deadline) {
        Head::Complete(head) => answer(&head, source),
        Head::TooLarge => (
            Reply::new(
                431,
                TEXT_CONTENT_TYPE,
                format!(
                    "request header fields too large: at most {} bytes\n",
                    limits.max_header_bytes
                ),
            ),
            true,
        ),
        Head::TimedOut => (
            Reply::new(408, TEXT_CONTENT_TYPE, "request timeout\n"),
            true,
        ),
        Head::Gone => return,
    };
    // A client that went away is not our problem.
    if stream
        .write_all(&encode(&reply, with_body))
        .and_then(|()| stream.flush())
        .is_ok()
    {
        linger(&mut stream);
    }
}

/// Reads until the empty line that ends a request head, at most `max`
/// bytes and until `deadline`.
fn read_head(stream: &mut impl ReadWithTimeout, max: usize, deadline: Instant) -> Head {
    let mut head = Vec::with_capacity(max.min(1024));
    let mut chunk = [0u8; 1024];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Head::TimedOut;
        }
        if stream.set_timeout(left).is_err() {
            return Head::Gone;
        }
        // Never read past the limit: one byte more than `max` is enough to
        // know the head does not fit.
        let room = (max + 1 - head.len()).min(chunk.len());
        match stream.read(&mut chunk[..room]) {
            Ok(0) => return Head::Gone,
            Ok(n) => {
                let scan_from = head.len().saturating_sub(3);
                head.extend_from_slice(&chunk[..n]);
                if let Some(end) = end_of_head(&head, scan_from) {
                    if end > max {
                        return Head::TooLarge;
                    }
                    head.truncate(end);
                    return Head::Complete(head);
                }
                if head.len() > max {
                    return Head::TooLarge;
                }
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                return Head::TimedOut;
            }
            Err(_) => return Head::Gone,
        }
    }
}

/// A stream whose reads can be bounded in time (a `TcpStream`; a scripted
/// reader in tests).
trait ReadWithTimeout: Read {
    fn set_timeout(&mut self, timeout: Duration) -> std::io::Result<()>;
}

impl ReadWithTimeout for TcpStream {
    fn set_timeout(&mut self, timeout: Duration) -> std::io::Result<()> {
        self.set_read_timeout(Some(timeout))
    }
}

/// The length of the head (through its empty line) if `buf` holds one.
/// Leading empty lines are not the end (RFC 9112 §2.2 lets a server skip
/// them); a bare LF ends a line as CRLF does.
fn end_of_head(buf: &[u8], scan_from: usize) -> Option<usize> {
    let start = buf
        .iter()
        .position(|b| *b != b'\r' && *b != b'\n')
        .unwrap_or(buf.len());
    let from = scan_from.max(start);
    (from..buf.len()).find_map(|i| {
        let rest = &buf[i..];
        if rest.starts_with(b"\n\r\n") {
            Some(i + 3)
        } else if rest.starts_with(b"\n\n") {
            Some(i + 2)
        } else {
            None
        }
    })
}

/// The answer to a complete head, and whether it carries its body (not
/// for `HEAD`).
fn answer(head: &[u8], source: &Source) -> (Reply, bool) {
    let bad = |why: &str| {
        (
            Reply::new(400, TEXT_CONTENT_TYPE, format!("bad request: {why}\n")),
            true,
        )
    };
    let Ok(text) = std::str::from_utf8(head) else {
        return bad("the request head is not UTF-8");
    };
    let line = text
        .trim_start_matches(['\r', '\n'])
        .lines()
        .next()
        .unwrap_or("");
    let mut parts = line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return bad("the request line is not METHOD TARGET HTTP/1.1");
    };
    if method.is_empty() || !method.bytes().all(is_token_byte) || target.is_empty() {
        return bad("the request line is not METHOD TARGET HTTP/1.1");
    }
    match version {
        "HTTP/1.1" | "HTTP/1.0" => {}
        v if v.starts_with("HTTP/") => {
            return (
                Reply::new(505, TEXT_CONTENT_TYPE, "only HTTP/1.1 is served\n"),
                true,
            );
        }
        _ => return bad("the request line is not METHOD TARGET HTTP/1.1"),
    }
    let with_body = method != "HEAD";
    let reply = match method {
        "GET" | "HEAD" => match Route::from_target(target) {
            Some(route) => source(route, unix_now()),
            None => Reply::new(
                404,
                TEXT_CONTENT_TYPE,
                "not found: try /healthz, /metrics or /status\n",
            ),
        },
        _ => Reply::new(
            405,
            TEXT_CONTENT_TYPE,
            "method not allowed: only GET and HEAD\n",
        ),
    };
    (reply, with_body)
}

/// RFC 9110 `tchar`.
fn is_token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// The bytes of an HTTP/1.1 answer that closes the connection.
fn encode(reply: &Reply, with_body: bool) -> Vec<u8> {
    let mut out = format!(
        "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n",
        reply.status,
        reason_phrase(reply.status),
        one_line(&reply.content_type),
        reply.body.len()
    );
    if reply.status == 405 {
        out.push_str("Allow: GET, HEAD\r\n");
    }
    out.push_str("\r\n");
    let mut bytes = out.into_bytes();
    if with_body {
        bytes.extend_from_slice(reply.body.as_bytes());
    }
    bytes
}

/// A header value cannot hold a line break (response splitting).
fn one_line(s: &str) -> String {
    s.replace(['\r', '\n'], " ")
}

fn reason_phrase(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        505 => "HTTP Version Not Supported",
        _ => "",
    }
}

/// Says "no more from us", then reads and drops what the client still
/// sends, for a bounded time and amount, so the answer is not lost to a
/// reset.
fn linger(stream: &mut TcpStream) {
    if stream.shutdown(Shutdown::Write).is_err() {
        return;
    }
    let deadline = Instant::now() + LINGER_TIME;
    let mut sink = [0u8; 8192];
    let mut drained = 0;
    while drained < LINGER_BYTES {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() || stream.set_read_timeout(Some(left)).is_err() {
            return;
        }
        match stream.read(&mut sink) {
            Ok(0) => return,
            Ok(n) => drained += n,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => return,
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::io::Cursor;
    use std::sync::Arc;

    use super::*;

    /// A reader over fixed bytes that counts how much was read.
    struct Scripted {
        bytes: Cursor<Vec<u8>>,
    }

    impl Read for Scripted {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            self.bytes.read(buf)
        }
    }

    impl ReadWithTimeout for Scripted {
        fn set_timeout(&mut self, _: Duration) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn head_of(bytes: &[u8], max: usize) -> (Head, u64) {
        let mut s = Scripted {
            bytes: Cursor::new(bytes.to_vec()),
        };
        let head = read_head(&mut s, max, Instant::now() + Duration::from_secs(5));
        (head, s.bytes.position())
    }

    fn source() -> Source {
        Arc::new(|route, _| Reply::new(200, "text/plain", format!("{route:?}")))
    }

    #[test]
    fn a_head_ends_at_its_empty_line_and_the_body_is_not_read_into_it() {
        let (head, _) = head_of(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\nBODY", 8192);
        assert_eq!(
            head,
            Head::Complete(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n".to_vec())
        );
    }

    #[test]
    fn a_head_over_the_limit_is_too_large_and_no_more_than_the_limit_is_read() {
        let mut huge = b"GET /metrics HTTP/1.1\r\nX-Filler: ".to_vec();
        huge.extend(std::iter::repeat_n(b'a', 1 << 20));
        let (head, read) = head_of(&huge, 8192);
        assert_eq!(head, Head::TooLarge);
        assert!(read <= 8193, "read {read} bytes of a 1 MiB head");
    }

    #[test]
    fn a_head_exactly_at_the_limit_is_served() {
        let start = b"GET /healthz HTTP/1.1\r\nX: ";
        let mut exact = start.to_vec();
        exact.extend(std::iter::repeat_n(b'a', 100 - start.len() - 4));
        exact.extend_from_slice(b"\r\n\r\n");
        assert_eq!(exact.len(), 100);
        assert!(matches!(head_of(&exact, 100).0, Head::Complete(_)));
        assert_eq!(head_of(&exact, 99).0, Head::TooLarge);
    }

    #[test]
    fn a_client_that_closes_mid_head_gets_no_answer() {
        assert_eq!(head_of(b"GET /metrics HTTP/1.1\r\nHo", 8192).0, Head::Gone);
        assert_eq!(head_of(b"", 8192).0, Head::Gone);
    }

    #[test]
    fn bare_line_feeds_and_leading_empty_lines_are_accepted() {
        assert!(matches!(
            head_of(b"\r\nGET /status HTTP/1.0\nHost: x\n\n", 8192).0,
            Head::Complete(_)
        ));
        let (reply, body) = answer(b"\r\nGET /status HTTP/1.0\n\n", &source());
        assert_eq!(
            (reply.status, reply.body.as_str(), body),
            (200, "Status", true)
        );
    }

    #[test]
    fn malformed_request_lines_are_400_and_other_versions_505() {
        for head in [
            &b"GET /metrics\r\n\r\n"[..],
            b"GET  /metrics HTTP/1.1\r\n\r\n",
            b"G(T /metrics HTTP/1.1\r\n\r\n",
            b"GET /metrics HTTP/1.1 extra\r\n\r\n",
            b"GET /metrics FTP/1.1\r\n\r\n",
            b"\xff /metrics HTTP/1.1\r\n\r\n",
        ] {
            assert_eq!(answer(head, &source()).0.status, 400, "{head:?}");
        }
        assert_eq!(
            answer(b"GET /metrics HTTP/2.0\r\n\r\n", &source()).0.status,
            505
        );
    }

    #[test]
    fn head_answers_carry_no_body_but_the_body_length() {
        let (reply, with_body) = answer(b"HEAD /metrics HTTP/1.1\r\n\r\n", &source());
        let text = String::from_utf8(encode(&reply, with_body)).unwrap();
        assert!(
            text.ends_with("Content-Length: 7\r\nConnection: close\r\n\r\n"),
            "{text}"
        );
    }

    #[test]
    fn a_content_type_cannot_split_the_answer() {
        let reply = Reply::new(200, "text/plain\r\nX-Evil: 1", "x");
        let text = String::from_utf8(encode(&reply, true)).unwrap();
        assert!(!text.contains("\r\nX-Evil"), "{text}");
    }
}
