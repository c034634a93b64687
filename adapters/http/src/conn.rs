//! One connection: read a bounded request head, answer it, close.
//!
//! One request per connection (every answer says `Connection: close`): a
//! scraper or a health probe asks one thing every few seconds, and closing
//! after each answer keeps a connection's life, and so the slot it holds,
//! short and bounded.
//!
//! Owns the order of checks: a well-formed head, then the method and the
//! route, then the access credential (every route but `/healthz` and the
//! webhook, which proves itself, [`crate::hooks`]), then the answer.
//!
//! Must never: buffer more than [`crate::ServerLimits::max_header_bytes`]
//! of a request, wait for a head longer than
//! [`crate::ServerLimits::header_timeout`], read a body other than a
//! webhook's (and that one only into its HMAC), or log anything a client
//! sent.

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::time::{Duration, Instant};

use crate::slots::{Phase, Slot};
use crate::{
    Reply, Request, Route, ServerEvent, ServerOptions, Source, TEXT_CONTENT_TYPE, hooks, not_found,
    unix_now,
};

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
    /// The head, up to and including its empty line, and what came after
    /// it in the same reads (the start of a body).
    Complete { head: Vec<u8>, rest: Vec<u8> },
    /// No empty line within the size limit.
    TooLarge,
    /// No empty line within the time limit.
    TimedOut,
    /// The client closed or the connection failed before a full head.
    Gone,
}

/// Serves one connection to its end, telling `slot` which phase it is in.
pub(crate) fn serve(mut stream: TcpStream, slot: &Slot, source: &Source, options: &ServerOptions) {
    let limits = &options.limits;
    let _ = stream.set_write_timeout(Some(limits.write_timeout));
    let _ = stream.set_nodelay(true);
    let deadline = Instant::now() + limits.header_timeout;
    let (reply, with_body) = match read_head(&mut stream, limits.max_header_bytes, deadline) {
        Head::Complete { head, rest } => respond(
            &head,
            &rest,
            &mut stream,
            &|| slot.enter(Phase::Render),
            source,
            options,
        ),
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
    slot.enter(Phase::Write);
    if stream
        .write_all(&encode(&reply, with_body))
        .and_then(|()| stream.flush())
        .is_ok()
    {
        slot.enter(Phase::Linger);
        linger(&mut stream);
    }
}

/// The answer to a complete head (reading a webhook's body from `stream`
/// when there is one), and whether it carries its body (not for `HEAD`).
/// `rendering` is told when the source is asked.
fn respond(
    head: &[u8],
    rest: &[u8],
    stream: &mut impl ReadWithTimeout,
    rendering: &dyn Fn(),
    source: &Source,
    options: &ServerOptions,
) -> (Reply, bool) {
    let parsed = match parse(head) {
        Ok(p) => p,
        Err(reply) => return (reply, true),
    };
    let request = Request::from_target(parsed.target);
    let tell = |event: &ServerEvent| {
        if let Some(observer) = &options.observer {
            observer(event);
        }
    };
    let reply = match (request.route, parsed.method, &options.hooks) {
        (Route::GitHook, _, None) => not_found(),
        (Route::GitHook, "POST", Some(hooks)) => {
            hooks::receive(&parsed.headers, rest, stream, hooks, &options.limits, &tell)
        }
        (Route::GitHook, _, Some(_)) => method_not_allowed("POST"),
        (route, "GET" | "HEAD", _) => match &options.access {
            Some(access)
                if route != Route::Healthz
                    && !access.allows(parsed.headers.get("authorization")) =>
            {
                Reply::new(401, TEXT_CONTENT_TYPE, "unauthorized\n")
                    .with_header("WWW-Authenticate", access.challenge())
            }
            _ => {
                rendering();
                source(&request, unix_now())
            }
        },
        _ => method_not_allowed("GET, HEAD"),
    };
    (reply, parsed.method != "HEAD")
}

fn method_not_allowed(allow: &str) -> Reply {
    Reply::new(
        405,
        TEXT_CONTENT_TYPE,
        format!("method not allowed: only {allow}\n"),
    )
    .with_header("Allow", allow)
}

/// A request head's header fields, names compared ignoring case.
#[derive(Debug, Default)]
pub(crate) struct Headers<'h> {
    fields: Vec<(&'h str, &'h str)>,
}

impl<'h> Headers<'h> {
    /// The value of the first field named `name` (lower-case).
    pub(crate) fn get(&self, name: &str) -> Option<&'h str> {
        self.fields
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| *v)
    }
}

/// A request head, parsed.
struct Parsed<'h> {
    method: &'h str,
    target: &'h str,
    headers: Headers<'h>,
}

/// The request line and header fields of a complete head, or the `400`
/// (or `505`) to answer.
fn parse(head: &[u8]) -> Result<Parsed<'_>, Reply> {
    let bad = |why: &str| Reply::new(400, TEXT_CONTENT_TYPE, format!("bad request: {why}\n"));
    let not_http = || bad("the request line is not METHOD TARGET HTTP/1.1");
    let text = std::str::from_utf8(head).map_err(|_| bad("the request head is not UTF-8"))?;
    let mut lines = text.trim_start_matches(['\r', '\n']).lines();
    let line = lines.next().unwrap_or("");
    let mut parts = line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(not_http());
    };
    if method.is_empty() || !method.bytes().all(is_token_byte) || target.is_empty() {
        return Err(not_http());
    }
    match version {
        "HTTP/1.1" | "HTTP/1.0" => {}
        v if v.starts_with("HTTP/") => {
            return Err(Reply::new(
                505,
                TEXT_CONTENT_TYPE,
                "only HTTP/1.1 is served\n",
            ));
        }
        _ => return Err(not_http()),
    }
    let mut fields = Vec::new();
    for l in lines.map(|l| l.trim_end_matches('\r')) {
        if l.is_empty() {
            break;
        }
        let Some((name, value)) = l.split_once(':') else {
            return Err(bad("a header line has no colon"));
        };
        if name.is_empty() || !name.bytes().all(is_token_byte) {
            return Err(bad("a header name is not a token"));
        }
        fields.push((name, value.trim()));
    }
    let headers = Headers { fields };
    let lengths = headers
        .fields
        .iter()
        .filter(|(k, _)| k.eq_ignore_ascii_case("content-length"))
        .count();
    if lengths > 1 {
        return Err(bad("more than one Content-Length"));
    }
    Ok(Parsed {
        method,
        target,
        headers,
    })
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
                    let rest = head.split_off(end);
                    return Head::Complete { head, rest };
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
pub(crate) trait ReadWithTimeout: Read {
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

/// RFC 9110 `tchar`.
fn is_token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// The bytes of an HTTP/1.1 answer that closes the connection.
fn encode(reply: &Reply, with_body: bool) -> Vec<u8> {
    let mut out = format!(
        "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n\
         Cache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\n",
        reply.status,
        reason_phrase(reply.status),
        one_line(&reply.content_type),
        reply.body.len()
    );
    for (name, value) in &reply.headers {
        out.push_str(&format!("{}: {}\r\n", one_line(name), one_line(value)));
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
        202 => "Accepted",
        400 => "Bad Request",
        401 => "Unauthorized",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        411 => "Length Required",
        413 => "Content Too Large",
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
        Arc::new(|request, _| Reply::new(200, "text/plain", format!("{:?}", request.route)))
    }

    /// The answer to `head` with default options, no body to read.
    fn answer(head: &[u8], source: &Source) -> (Reply, bool) {
        answer_with(head, source, &ServerOptions::default())
    }

    fn answer_with(head: &[u8], source: &Source, options: &ServerOptions) -> (Reply, bool) {
        let mut body = Scripted {
            bytes: Cursor::new(Vec::new()),
        };
        respond(head, &[], &mut body, &|| {}, source, options)
    }

    #[test]
    fn a_head_ends_at_its_empty_line_and_the_body_is_not_read_into_it() {
        let (head, _) = head_of(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\nBODY", 8192);
        assert_eq!(
            head,
            Head::Complete {
                head: b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(),
                rest: b"BODY".to_vec()
            }
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
        assert!(matches!(head_of(&exact, 100).0, Head::Complete { .. }));
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
            Head::Complete { .. }
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
            text.ends_with(
                "Content-Length: 7\r\nConnection: close\r\nCache-Control: no-store\r\n\
                 X-Content-Type-Options: nosniff\r\n\r\n"
            ),
            "{text}"
        );
    }

    #[test]
    fn header_lines_without_a_colon_and_two_content_lengths_are_400() {
        for head in [
            &b"GET /status HTTP/1.1\r\nHost x\r\n\r\n"[..],
            b"GET /status HTTP/1.1\r\nBad Name: x\r\n\r\n",
            b"GET /status HTTP/1.1\r\nContent-Length: 1\r\ncontent-length: 2\r\n\r\n",
        ] {
            assert_eq!(answer(head, &source()).0.status, 400, "{head:?}");
        }
    }

    #[test]
    fn the_access_credential_guards_every_route_but_healthz() {
        let options = ServerOptions {
            access: Some(crate::Access::Bearer(proxops_core::secret::Secret::new(
                "t0k",
            ))),
            ..ServerOptions::default()
        };
        for path in ["/status", "/metrics", "/", "/objects/home/VM/web"] {
            let head = format!("GET {path} HTTP/1.1\r\n\r\n");
            let (reply, _) = answer_with(head.as_bytes(), &source(), &options);
            assert_eq!(reply.status, 401, "{path}");
            assert!(
                reply
                    .headers
                    .contains(&("WWW-Authenticate".into(), "Bearer realm=\"proxops\"".into()))
            );
            let head = format!("GET {path} HTTP/1.1\r\nAuthorization: Bearer t0k\r\n\r\n");
            assert_eq!(
                answer_with(head.as_bytes(), &source(), &options).0.status,
                200
            );
        }
        let (healthz, _) = answer_with(b"GET /healthz HTTP/1.1\r\n\r\n", &source(), &options);
        assert_eq!(healthz.status, 200);
    }

    #[test]
    fn the_webhook_path_is_404_unless_configured_and_post_only_when_it_is() {
        assert_eq!(
            answer(b"POST /hooks/git HTTP/1.1\r\n\r\n", &source())
                .0
                .status,
            404
        );
        let options = ServerOptions {
            hooks: Some(crate::GitHooks {
                secret: proxops_core::secret::Secret::new("s"),
                on_push: Arc::new(|_| {}),
            }),
            ..ServerOptions::default()
        };
        let (reply, _) = answer_with(b"GET /hooks/git HTTP/1.1\r\n\r\n", &source(), &options);
        assert_eq!(reply.status, 405);
        assert!(reply.headers.contains(&("Allow".into(), "POST".into())));
        let (reply, _) = answer_with(b"POST /status HTTP/1.1\r\n\r\n", &source(), &options);
        assert_eq!(reply.status, 405);
        assert!(
            reply
                .headers
                .contains(&("Allow".into(), "GET, HEAD".into()))
        );
    }

    #[test]
    fn a_content_type_cannot_split_the_answer() {
        let reply = Reply::new(200, "text/plain\r\nX-Evil: 1", "x");
        let text = String::from_utf8(encode(&reply, true)).unwrap();
        assert!(!text.contains("\r\nX-Evil"), "{text}");
    }
}
