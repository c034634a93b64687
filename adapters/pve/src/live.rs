//! The live transport: PVE API calls over HTTPS with ureq.
//!
//! Owns the request shape (§18.1), authentication per request (API token, or
//! a ticket it logs in for, renews and re-acquires once on 401), the retry
//! loop around `retry::classify`, the write circuit breaker, one log record
//! per HTTP request, and request counters.
//!
//! **Architecture Invariant:** an HTTP answer is `Ok(Response)` whatever its
//! status; only "no usable answer" is `Err`. The caller (reader, runner)
//! decides what a 4xx/5xx means for it. No body, header value or credential
//! is ever logged or put into an error.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use ureq::Agent;
use ureq::unversioned::resolver::DefaultResolver;
use ureq::unversioned::transport::{Connector, TcpConnector};

use crate::auth::{CredentialError, Credentials, TicketLogin, TicketSession};
use crate::breaker::{BreakerPolicy, WriteBreaker};
use crate::connector::{PveConnector, REASON_HEADER, TlsRefused};
use crate::resolve::{Addresses, OncePerCycle};
use crate::retry::{Class, Jitter, RetryPolicy, classify, pve_message, refusal_hint};
use crate::tls::{TlsError, TlsTrust, client_config};
use crate::transport::{Method, Request, Response, Transport, TransportError};

/// Default per-request timeout (§18.1); task waits are separate.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// Largest response body read (a big cluster's /cluster/resources is a few MiB).
const BODY_LIMIT: u64 = 64 * 1024 * 1024;

/// Everything needed to build a `LiveTransport` for one cluster endpoint.
#[derive(Debug, Clone)]
pub struct LiveConfig {
    /// `https://host:8006` (`pve.clusters.<name>.base-url`); no path.
    pub base_url: String,
    pub credentials: Credentials,
    pub tls: TlsTrust,
    /// Per HTTP request, connect to last body byte (default 30 s).
    pub timeout: Duration,
    pub retry: RetryPolicy,
    pub breaker: BreakerPolicy,
    /// Connections kept open to the endpoint between requests: at least
    /// as many as requests in flight at once (the reader's
    /// `read-concurrency`, the runner's `tasks-per-cluster`), or every
    /// request beyond them opens a connection and its TLS handshake anew.
    pub connections: usize,
}

/// Default [`LiveConfig::connections`]: the most the default limits have
/// in flight (8 actions per cluster).
pub const DEFAULT_CONNECTIONS: usize = 8;

impl LiveConfig {
    /// The defaults: 30 s timeout, 1 s/2 s/4 s retries, breaker 20 / 10 min,
    /// 8 connections kept.
    pub fn new(base_url: impl Into<String>, credentials: Credentials, tls: TlsTrust) -> LiveConfig {
        LiveConfig {
            base_url: base_url.into(),
            credentials,
            tls,
            timeout: DEFAULT_TIMEOUT,
            retry: RetryPolicy::default(),
            breaker: BreakerPolicy::default(),
            connections: DEFAULT_CONNECTIONS,
        }
    }
}

/// A live transport that cannot be built from its configuration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LiveError {
    #[error("PVE base URL {shown}: {why}")]
    BaseUrl { shown: String, why: String },
    #[error("PVE TLS: {0}")]
    Tls(#[from] TlsError),
    #[error("PVE credentials: {0}")]
    Credentials(#[from] CredentialError),
}

/// What one HTTP request came to, for `proxops_pve_requests_total{result}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RequestResult {
    /// 2xx.
    Success,
    /// 404, or a 5xx saying the object does not exist.
    NotFound,
    /// Any other 4xx.
    ClientError,
    /// Any other 5xx (and 1xx/3xx, which PVE does not send).
    ServerError,
    /// No usable answer (connection, TLS, timeout).
    TransportError,
    /// Not sent: the write circuit breaker is open.
    ReadOnly,
}

impl RequestResult {
    pub fn as_str(self) -> &'static str {
        match self {
            RequestResult::Success => "success",
            RequestResult::NotFound => "not_found",
            RequestResult::ClientError => "client_error",
            RequestResult::ServerError => "server_error",
            RequestResult::TransportError => "transport_error",
            RequestResult::ReadOnly => "read_only",
        }
    }

    fn of(outcome: Result<&Response, &TransportError>) -> RequestResult {
        match (classify(outcome), outcome) {
            (_, Err(TransportError::ReadOnly { .. })) => RequestResult::ReadOnly,
            (_, Err(_)) => RequestResult::TransportError,
            (Class::Success, _) => RequestResult::Success,
            (Class::NotFound, _) => RequestResult::NotFound,
            (_, Ok(r)) if (400..500).contains(&r.status) => RequestResult::ClientError,
            (_, Ok(_)) => RequestResult::ServerError,
        }
    }
}

impl fmt::Display for RequestResult {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One HTTP request as the request log sees it: never a body, never a
/// header value, never the query string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestLog {
    pub method: Method,
    /// Below `/api2/json`, without the query string.
    pub path: String,
    /// `None` when no answer came (or the request was not sent).
    pub status: Option<u16>,
    pub result: RequestResult,
    pub duration: Duration,
    /// 0 for the first attempt of a call, then 1, 2, … for retries.
    pub attempt: u32,
}

/// `GET /cluster/resources -> 200 success in 12 ms (attempt 0)`
impl fmt::Display for RequestLog {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {} -> ", self.method, self.path)?;
        match self.status {
            Some(status) => write!(f, "{status} ")?,
            None => f.write_str("no answer ")?,
        }
        write!(
            f,
            "{} in {} ms (attempt {})",
            self.result,
            self.duration.as_millis(),
            self.attempt
        )
    }
}

/// Requests counted by method and result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestCount {
    pub method: Method,
    pub result: RequestResult,
    pub count: u64,
}

type Clock = Arc<dyn Fn() -> Instant + Send + Sync>;
type Sleep = Arc<dyn Fn(Duration) + Send + Sync>;
type LogHook = Arc<dyn Fn(&RequestLog) + Send + Sync>;

/// Headers that authenticate one request. Secret: never log them.
enum AuthHeaders {
    None,
    Token(crate::auth::Secret),
    Ticket {
        cookie: crate::auth::Secret,
        csrf: Option<crate::auth::Secret>,
    },
}

/// The `Transport` that talks to a real PVE endpoint.
pub struct LiveTransport {
    agent: Agent,
    addresses: Arc<Addresses>,
    opened: Arc<AtomicU64>,
    base_url: String,
    credentials: Credentials,
    insecure: bool,
    session: Mutex<Option<TicketSession>>,
    retry: RetryPolicy,
    jitter: Jitter,
    breaker: WriteBreaker,
    clock: Clock,
    sleep: Sleep,
    log: Option<LogHook>,
    counts: Mutex<BTreeMap<(Method, RequestResult), u64>>,
    last_successful_read: Mutex<Option<Instant>>,
    write_calls: AtomicU64,
}

impl fmt::Debug for LiveTransport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LiveTransport")
            .field("base_url", &self.base_url)
            .field("credentials", &self.credentials)
            .field("insecure", &self.insecure)
            .field("retry", &self.retry)
            .finish_non_exhaustive()
    }
}

impl LiveTransport {
    /// Checks the base URL, loads the TLS trust (CA file, system roots) and
    /// builds the HTTP agent. Sends nothing: a ticket login happens on the
    /// first call.
    pub fn new(config: LiveConfig) -> Result<LiveTransport, LiveError> {
        let base_url = parse_base_url(&config.base_url)?;
        let tls = client_config(&config.tls)?;
        let agent_config = Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(config.timeout))
            .max_redirects(0)
            // The connector chain has no proxy support: ignore *_PROXY
            // variables rather than half-follow them.
            .proxy(None)
            .accept("application/json")
            .user_agent(concat!("proxops/", env!("CARGO_PKG_VERSION")))
            // ureq keeps 3 idle connections per host by default: with 4
            // reads in flight, one connection in four was closed after its
            // answer and the next request paid a new TCP and TLS handshake.
            .max_idle_connections(config.connections.max(1))
            .max_idle_connections_per_host(config.connections.max(1))
            .build();
        let opened = Arc::new(AtomicU64::new(0));
        let connector = ().chain(TcpConnector::default()).chain(PveConnector {
            tls,
            opened: Arc::clone(&opened),
        });
        let addresses = Arc::new(Addresses::default());
        let resolver = OncePerCycle {
            addresses: Arc::clone(&addresses),
            lookup: DefaultResolver::default(),
        };
        let agent = Agent::with_parts(agent_config, connector, resolver);
        Ok(LiveTransport {
            agent,
            addresses,
            opened,
            base_url,
            credentials: config.credentials,
            insecure: config.tls.is_insecure(),
            session: Mutex::new(None),
            retry: config.retry,
            jitter: Jitter::new(),
            breaker: WriteBreaker::new(config.breaker),
            clock: Arc::new(Instant::now),
            sleep: Arc::new(std::thread::sleep),
            log: None,
            counts: Mutex::new(BTreeMap::new()),
            last_successful_read: Mutex::new(None),
            write_calls: AtomicU64::new(0),
        })
    }

    /// Calls `hook` once per HTTP request (and per write refused by the
    /// breaker), after it ended. The binary decides how to print it (debug).
    pub fn with_request_log(
        mut self,
        hook: impl Fn(&RequestLog) + Send + Sync + 'static,
    ) -> LiveTransport {
        self.log = Some(Arc::new(hook));
        self
    }

    /// The clock for ticket renewal and the breaker window (default
    /// `Instant::now`).
    pub fn with_clock(
        mut self,
        clock: impl Fn() -> Instant + Send + Sync + 'static,
    ) -> LiveTransport {
        self.clock = Arc::new(clock);
        self
    }

    /// How to wait between retries (default `std::thread::sleep`).
    pub fn with_sleep(mut self, sleep: impl Fn(Duration) + Send + Sync + 'static) -> LiveTransport {
        self.sleep = Arc::new(sleep);
        self
    }

    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// True when built with `TlsTrust::DangerInsecure`: the caller should warn.
    pub fn is_insecure(&self) -> bool {
        self.insecure
    }

    /// True while the write circuit breaker refuses writes (gauge
    /// `proxops_read_only`, `/status`).
    pub fn is_read_only(&self) -> bool {
        self.breaker.is_open((self.clock)())
    }

    /// HTTP requests so far by method and result, sorted; refused writes
    /// count as `read_only`.
    pub fn request_counts(&self) -> Vec<RequestCount> {
        lock(&self.counts)
            .iter()
            .map(|(&(method, result), &count)| RequestCount {
                method,
                result,
                count,
            })
            .collect()
    }

    /// When a GET last got a 2xx answer (readiness, metrics).
    pub fn last_successful_read(&self) -> Option<Instant> {
        *lock(&self.last_successful_read)
    }

    /// A new cycle begins: the endpoint's host is looked up again at its
    /// first request (and only then: once per cluster per cycle).
    pub fn new_cycle(&self) {
        self.addresses.forget();
    }

    /// Host look-ups made so far.
    pub fn lookups(&self) -> u64 {
        self.addresses.lookups()
    }

    /// Connections opened so far (each a TCP and TLS handshake).
    pub fn connections_opened(&self) -> u64 {
        self.opened.load(Ordering::Relaxed)
    }

    /// Write calls made (POST/PUT/DELETE, one per call, not per retry;
    /// ticket logins excluded). Adopt checks it stays 0.
    pub fn write_calls(&self) -> u64 {
        self.write_calls.load(Ordering::Relaxed)
    }

    fn call_with_retries(&self, request: &Request) -> Result<Response, TransportError> {
        let mut retries = 0u32;
        let mut logged_in_again = false;
        loop {
            let outcome = self.attempt(request, retries);
            // An expired or revoked ticket: log in once more and repeat.
            if !logged_in_again
                && matches!(self.credentials, Credentials::Ticket(_))
                && matches!(&outcome, Ok(response) if response.status == 401)
            {
                logged_in_again = true;
                *lock(&self.session) = None;
                continue;
            }
            if classify(outcome.as_ref()) == Class::Retry && retries < self.retry.max_retries {
                (self.sleep)(self.retry.delay(retries, self.jitter.next()));
                retries += 1;
                continue;
            }
            return outcome.map_err(|e| e.after_attempts(retries + 1));
        }
    }

    fn attempt(&self, request: &Request, attempt: u32) -> Result<Response, TransportError> {
        let auth = self.authenticate(request.method, attempt)?;
        self.send_logged(request, &auth, attempt)
    }

    fn authenticate(&self, method: Method, attempt: u32) -> Result<AuthHeaders, TransportError> {
        let login = match &self.credentials {
            Credentials::Token(token) => return Ok(AuthHeaders::Token(token.authorization())),
            Credentials::Ticket(login) => login,
        };
        // Held across the login so concurrent callers wait for one login.
        let mut session = lock(&self.session);
        let now = (self.clock)();
        let current = match session.take() {
            Some(s) if !s.due_for_renewal(now) => s,
            _ => self.login(login, attempt)?,
        };
        let headers = AuthHeaders::Ticket {
            cookie: crate::auth::Secret::new(format!("PVEAuthCookie={}", current.ticket.expose())),
            csrf: method.is_write().then(|| current.csrf.clone()),
        };
        *session = Some(current);
        Ok(headers)
    }

    fn login(&self, login: &TicketLogin, attempt: u32) -> Result<TicketSession, TransportError> {
        let request = Request::new(Method::Post, "/access/ticket", login.form());
        let response = self.send_logged(&request, &AuthHeaders::None, attempt)?;
        if !response.is_success() {
            let message = pve_message(&response);
            let hint = refusal_hint(
                response.status,
                &message,
                Some(&format!("user {}", login.shown())),
            )
            .map(|h| format!(". {h}"))
            .unwrap_or_default();
            return Err(TransportError::Auth(format!(
                "PVE refused the login of {}: HTTP {} {message}{hint}",
                login.shown(),
                response.status,
            )));
        }
        TicketSession::from_login(&response.body, (self.clock)()).ok_or_else(|| {
            TransportError::Auth(format!(
                "the login answer for {} holds no usable ticket",
                login.shown()
            ))
        })
    }

    fn send_logged(
        &self,
        request: &Request,
        auth: &AuthHeaders,
        attempt: u32,
    ) -> Result<Response, TransportError> {
        let started = Instant::now();
        let outcome = self.send(request, auth);
        let result = RequestResult::of(outcome.as_ref());
        self.count(request.method, result);
        if request.method == Method::Get && result == RequestResult::Success {
            *lock(&self.last_successful_read) = Some((self.clock)());
        }
        if let Some(hook) = &self.log {
            hook(&RequestLog {
                method: request.method,
                path: request.path.clone(),
                status: outcome.as_ref().ok().map(|r| r.status),
                result,
                duration: started.elapsed(),
                attempt,
            });
        }
        outcome
    }

    fn count(&self, method: Method, result: RequestResult) {
        *lock(&self.counts).entry((method, result)).or_insert(0) += 1;
    }

    /// One HTTP exchange. GET and DELETE carry their parameters in the query
    /// string (PVE reads a body only for POST and PUT); POST and PUT send them
    /// as a form, with a Content-Type only when there is a body.
    fn send(&self, request: &Request, auth: &AuthHeaders) -> Result<Response, TransportError> {
        let mut url = format!("{}/api2/json", self.base_url);
        if !request.path.starts_with('/') {
            url.push('/');
        }
        url.push_str(&request.path);
        let form = form_encode(&request.params);
        let in_query = matches!(request.method, Method::Get | Method::Delete);
        if in_query && !form.is_empty() {
            url.push('?');
            url.push_str(&form);
        }
        let answer = match request.method {
            Method::Get => with_auth(self.agent.get(&url), auth).call(),
            Method::Delete => with_auth(self.agent.delete(&url), auth).call(),
            Method::Post | Method::Put => {
                let builder = match request.method {
                    Method::Post => self.agent.post(&url),
                    _ => self.agent.put(&url),
                };
                let builder = with_auth(builder, auth);
                if form.is_empty() {
                    builder.send_empty()
                } else {
                    builder
                        .header("Content-Type", "application/x-www-form-urlencoded")
                        .send(form.as_bytes())
                }
            }
        };
        let no_answer = |e: ureq::Error| no_answer(request, &self.base_url, e);
        let mut answer = answer.map_err(no_answer)?;
        let status = answer.status();
        let reason = answer
            .headers()
            .get(REASON_HEADER)
            .map(|v| String::from_utf8_lossy(v.as_bytes()).trim().to_owned())
            .filter(|r| !r.is_empty())
            .or_else(|| status.canonical_reason().map(str::to_owned))
            .unwrap_or_default();
        let bytes = answer
            .body_mut()
            .with_config()
            .limit(BODY_LIMIT)
            .read_to_vec()
            .map_err(no_answer)?;
        let body = serde_json::from_slice(&bytes).unwrap_or_else(|_| {
            serde_json::Value::String(String::from_utf8_lossy(&bytes).into_owned())
        });
        Ok(Response {
            status: status.as_u16(),
            reason,
            body,
        })
    }
}

impl Transport for LiveTransport {
    fn acting_as(&self) -> Option<String> {
        Some(self.credentials.acting_as())
    }

    fn call(&self, request: &Request) -> Result<Response, TransportError> {
        let write = request.method.is_write();
        if write {
            if !self.breaker.admit((self.clock)()) {
                self.count(request.method, RequestResult::ReadOnly);
                if let Some(hook) = &self.log {
                    hook(&RequestLog {
                        method: request.method,
                        path: request.path.clone(),
                        status: None,
                        result: RequestResult::ReadOnly,
                        duration: Duration::ZERO,
                        attempt: 0,
                    });
                }
                return Err(TransportError::ReadOnly {
                    method: request.method,
                    path: request.path.clone(),
                });
            }
            self.write_calls.fetch_add(1, Ordering::Relaxed);
        }
        let outcome = self.call_with_retries(request);
        if write {
            // "Does not exist" on a write (a delete of a gone guest) is a
            // healthy cluster answering, not a failure to write.
            let healthy = matches!(classify(outcome.as_ref()), Class::Success | Class::NotFound);
            self.breaker.record(healthy, (self.clock)());
        }
        outcome
    }
}

fn with_auth<B>(builder: ureq::RequestBuilder<B>, auth: &AuthHeaders) -> ureq::RequestBuilder<B> {
    match auth {
        AuthHeaders::None => builder,
        AuthHeaders::Token(value) => builder.header("Authorization", value.expose()),
        AuthHeaders::Ticket { cookie, csrf } => {
            let builder = builder.header("Cookie", cookie.expose());
            match csrf {
                Some(csrf) => builder.header("CSRFPreventionToken", csrf.expose()),
                None => builder,
            }
        }
    }
}

fn no_answer(request: &Request, base_url: &str, e: ureq::Error) -> TransportError {
    let (method, path) = (request.method, request.path.clone());
    if let ureq::Error::Io(io) = &e
        && let Some(refused) = io
            .get_ref()
            .and_then(|inner| inner.downcast_ref::<TlsRefused>())
    {
        return TransportError::Tls {
            method,
            path,
            message: refused.to_string(),
        };
    }
    TransportError::Io {
        method,
        path,
        message: unreachable_hint(base_url, &e).unwrap_or_else(|| e.to_string()),
    }
}

/// What a newcomer needs when nothing answered at `base_url`: the address
/// dialled, and where PVE's API listens (pveproxy serves it on port 8006
/// only, over https).
fn unreachable_hint(base_url: &str, e: &ureq::Error) -> Option<String> {
    let dialled = base_url
        .split_once("://")
        .map_or(base_url, |(_, rest)| rest);
    let why = match e {
        ureq::Error::Io(io) if io.kind() == std::io::ErrorKind::ConnectionRefused => {
            "connection refused: nothing listens there"
        }
        ureq::Error::HostNotFound => "host not found: the name does not resolve",
        _ => return None,
    };
    Some(format!(
        "{why} (dialled {dialled}, from base-url {base_url}); PVE's API listens on https port 8006, e.g. base-url: https://pve1.example.com:8006"
    ))
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Counters and a ticket: valid whatever a panicking holder did.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// `https://host[:port]`, without a trailing slash. A URL with user info is
/// not echoed back (it may hold a password).
fn parse_base_url(text: &str) -> Result<String, LiveError> {
    let trimmed = text.trim().trim_end_matches('/');
    let shown = if trimmed.contains('@') {
        "<url with user info>".to_owned()
    } else {
        format!("{trimmed:?}")
    };
    let fail = |why: &str| LiveError::BaseUrl {
        shown: shown.clone(),
        why: why.to_owned(),
    };
    let uri: ureq::http::Uri = trimmed.parse().map_err(|_| fail("not a URL"))?;
    match uri.scheme_str() {
        Some("https") | Some("http") => {}
        _ => return Err(fail("the scheme must be https (or http)")),
    }
    let authority = uri.authority().ok_or_else(|| fail("no host"))?;
    if authority.as_str().contains('@') {
        return Err(fail(
            "user info in the URL is not allowed; use the credential settings",
        ));
    }
    if authority.host().is_empty() {
        return Err(fail("no host"));
    }
    if !matches!(uri.path(), "" | "/") || uri.query().is_some() {
        return Err(fail(
            "give only scheme, host and port (e.g. https://pve1:8006); /api2/json is added",
        ));
    }
    Ok(trimmed.to_owned())
}

/// `k=v&k=v`, every byte outside `A-Za-z0-9-_.~` percent-encoded.
fn form_encode(params: &[(String, String)]) -> String {
    let mut out = String::new();
    for (i, (key, value)) in params.iter().enumerate() {
        if i > 0 {
            out.push('&');
        }
        percent_encode(key, &mut out);
        out.push('=');
        percent_encode(value, &mut out);
    }
    out
}

fn percent_encode(text: &str, out: &mut String) {
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn form_encoding_escapes_everything_but_unreserved() {
        let params = vec![
            (
                "net0".to_owned(),
                "virtio=BC:24:11:00:00:01,bridge=vmbr0".to_owned(),
            ),
            ("description".to_owned(), "a b&c\u{e9}".to_owned()),
        ];
        assert_eq!(
            form_encode(&params),
            "net0=virtio%3DBC%3A24%3A11%3A00%3A00%3A01%2Cbridge%3Dvmbr0&description=a%20b%26c%C3%A9"
        );
    }

    #[test]
    fn base_url_takes_scheme_host_port_only() {
        assert_eq!(
            parse_base_url("https://pve1:8006/").unwrap(),
            "https://pve1:8006"
        );
        assert_eq!(
            parse_base_url(" https://[::1]:8006 ").unwrap(),
            "https://[::1]:8006"
        );
        assert!(parse_base_url("pve1:8006").is_err());
        assert!(parse_base_url("ftp://pve1").is_err());
        assert!(parse_base_url("https://pve1:8006/api2/json").is_err());
        let err = parse_base_url("https://root:hunter2@pve1:8006").unwrap_err();
        assert!(!err.to_string().contains("hunter2"), "{err}");
    }

    #[test]
    fn request_log_line_has_method_path_status_and_duration_only() {
        let line = RequestLog {
            method: Method::Get,
            path: "/cluster/resources".into(),
            status: Some(200),
            result: RequestResult::Success,
            duration: Duration::from_millis(12),
            attempt: 0,
        };
        assert_eq!(
            line.to_string(),
            "GET /cluster/resources -> 200 success in 12 ms (attempt 0)"
        );
    }
}
