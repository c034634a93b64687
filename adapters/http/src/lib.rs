//! HTTP both ways for `proxops run`: the status server (`/healthz`,
//! `/metrics`, `/status`, the dashboard and `POST /hooks/git`, over plain
//! HTTP/1.1 on its own threads), and the notifier that sends events to
//! chat and push targets ([`Notifier`], on a thread of its own).
//!
//! It only serves what it is handed: every answer comes from a [`Source`]
//! (usually [`store_source`], which asks core's renderings), so the server
//! decides nothing and knows nothing of reconciling. `GET` (and `HEAD`,
//! which HTTP requires to behave like `GET` without a body) on every path
//! but the webhook's, which takes `POST` only; any other method is `405`.
//! An [`Access`] credential, when set, guards every path but `/healthz`
//! and the webhook (which proves itself by its signature, [`GitHooks`]).
//!
//! A small std::net server of its own, not a framework: it must survive
//! what a listener on a network meets — a full file-descriptor table
//! (back off, keep accepting), many idle or trickling connections (a cap,
//! [`ServerLimits::max_connections`], under which a new connection pushes
//! out the one that has waited longest for its client), huge or endless
//! request heads (a size and a time limit, `431`/`408`) — and say so when its serving
//! thread ends anyway ([`StatusServer::failure`], [`ServerEvent::Ended`])
//! so the process can exit and be restarted rather than reconcile on with
//! nobody watching.
//!
//! **Architecture Invariant:** it binds exactly the address it is told
//! (the default, [`DEFAULT_LISTEN`], is loopback only), renders nothing
//! itself, and holds only the secrets it checks (the access credential, the
//! webhook secret) or sends (a notification target's URL and token), none
//! of which it ever logs or echoes. It reads the clock once per request, to hand
//! `now` to the source. It never logs: what happens is handed to the
//! caller's observer as a [`ServerEvent`].

mod accept;
mod access;
mod conn;
mod hooks;
mod notifier;
mod slots;

pub use access::Access;
pub use hooks::{Forge, GitHooks};
pub use notifier::{DeliveryObserver, Notifier, SEND_TIMEOUT, Target};

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use proxops_core::dashboard;
use proxops_core::exec::Timestamp;
use proxops_core::report::{
    METRICS_CONTENT_TYPE, StatusStore, healthz, render_metrics, render_status_json,
};

/// Where the server listens unless configured otherwise: loopback only.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:9494";

/// How long shutdown tries to wake the serving thread out of `accept`.
const CLOSE_WAIT: Duration = Duration::from_secs(2);

/// What a request asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Route {
    /// `GET /healthz`: never behind the access credential.
    Healthz,
    /// `GET /metrics`
    Metrics,
    /// `GET /status`
    Status,
    /// `POST /hooks/git`: a forge's push notice, verified by its own
    /// signature ([`GitHooks`]), never by the access credential.
    GitHook,
    /// Any other `GET` path: the dashboard's pages, which the [`Source`]
    /// knows (it answers `404` for a path that is none of them).
    Page,
}

impl Route {
    /// The route of a request path (no query string).
    pub fn from_path(path: &str) -> Route {
        match path {
            "/healthz" => Route::Healthz,
            "/metrics" => Route::Metrics,
            "/status" => Route::Status,
            "/hooks/git" => Route::GitHook,
            _ => Route::Page,
        }
    }
}

/// A request as the [`Source`] sees it: its route, its path and its query
/// string (without the `?`). Headers and bodies stay in the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request<'a> {
    pub route: Route,
    pub path: &'a str,
    pub query: &'a str,
}

impl<'a> Request<'a> {
    /// The request for a target (`/path?query#fragment`).
    pub fn from_target(target: &'a str) -> Request<'a> {
        let target = target.split('#').next().unwrap_or(target);
        let (path, query) = target.split_once('?').unwrap_or((target, ""));
        Request {
            route: Route::from_path(path),
            path,
            query,
        }
    }
}

/// One answer: status code, content type, extra header fields, body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    pub status: u16,
    pub content_type: String,
    /// Header fields beyond `Content-Type`, `Content-Length` and
    /// `Connection` (a value with a line break is sent on one line).
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Reply {
    pub fn new(status: u16, content_type: impl Into<String>, body: impl Into<String>) -> Reply {
        Reply {
            status,
            content_type: content_type.into(),
            headers: Vec::new(),
            body: body.into(),
        }
    }

    /// The reply with one more header field.
    pub fn with_header(mut self, name: impl Into<String>, value: impl Into<String>) -> Reply {
        self.headers.push((name.into(), value.into()));
        self
    }
}

/// What the server serves: called on the serving thread for every `GET`
/// or `HEAD` of a route other than [`Route::GitHook`] (after the access
/// check), with the current time.
pub type Source = Arc<dyn Fn(&Request<'_>, Timestamp) -> Reply + Send + Sync>;

/// The content type of `/status`.
pub const STATUS_CONTENT_TYPE: &str = "application/json";
/// The content type of `/healthz` and of error answers.
pub const TEXT_CONTENT_TYPE: &str = "text/plain; charset=utf-8";

/// Whether the store source serves the dashboard's pages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dashboard {
    /// `/` and `/objects/…` are the dashboard ([`proxops_core::dashboard`]).
    On,
    /// Every page path is `404`, as if there were none.
    Off,
}

/// A [`Source`] over a shared store: `/healthz` from core's `healthz` with
/// `poll_interval_secs`, `/metrics` and `/status` from core's renderings,
/// and (unless `dashboard` is `Off`) the dashboard's pages from the same
/// store. The lock is held only while rendering; a poisoned lock (a panic
/// while recording a cycle) answers 500 rather than serving a
/// half-written store.
pub fn store_source(
    store: Arc<Mutex<StatusStore>>,
    poll_interval_secs: u64,
    dashboard: Dashboard,
) -> Source {
    Arc::new(move |request, now| {
        let Ok(store) = store.lock() else {
            return Reply::new(500, TEXT_CONTENT_TYPE, "status store unavailable\n");
        };
        match request.route {
            Route::Healthz => {
                let (status, body) = healthz(&store, now, poll_interval_secs);
                Reply::new(status, TEXT_CONTENT_TYPE, body)
            }
            Route::Metrics => Reply::new(200, METRICS_CONTENT_TYPE, render_metrics(&store, now)),
            Route::Status => Reply::new(200, STATUS_CONTENT_TYPE, render_status_json(&store, now)),
            Route::Page if dashboard == Dashboard::On => {
                let page = dashboard::render(&store, now, request.path, request.query);
                Reply::new(page.status, dashboard::CONTENT_TYPE, page.body)
                    .with_header("Content-Security-Policy", page_policy())
                    .with_header("X-Frame-Options", "DENY")
                    .with_header("Referrer-Policy", "no-referrer")
            }
            Route::GitHook | Route::Page => not_found(),
        }
    })
}

/// The Content-Security-Policy of the dashboard's pages: nothing but the
/// page itself, its embedded style and its one script (each allowed by
/// its SHA-256), and forms sent back to it.
pub fn page_policy() -> &'static str {
    static POLICY: OnceLock<String> = OnceLock::new();
    POLICY.get_or_init(|| {
        let hash = |text: &str| {
            use base64::Engine as _;
            let digest = <sha2::Sha256 as sha2::Digest>::digest(text.as_bytes());
            format!(
                "'sha256-{}'",
                base64::engine::general_purpose::STANDARD.encode(digest)
            )
        };
        format!(
            "default-src 'none'; style-src {}; script-src {}; form-action 'self'; base-uri 'none'; frame-ancestors 'none'",
            hash(dashboard::STYLE),
            hash(dashboard::SCRIPT)
        )
    })
}

/// The answer to a path nothing serves.
pub fn not_found() -> Reply {
    Reply::new(
        404,
        TEXT_CONTENT_TYPE,
        "not found: try /healthz, /metrics or /status\n",
    )
}

/// Errors of the status server.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HttpError {
    #[error("status server: cannot listen on {listen}: {reason}")]
    Bind { listen: String, reason: String },
}

/// The bounds that keep the server alive under load or abuse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerLimits {
    /// Connections held at once. When all are taken, a new connection
    /// takes the slot of an idle or slow one (the one waiting longest for
    /// its client), never of one whose answer is being rendered, so idle
    /// and trickling peers cannot keep a probe out. A scraper and a probe
    /// need two; 64 leaves room for several of each while keeping the
    /// server's descriptors far below the unit's `LimitNOFILE`.
    pub max_connections: usize,
    /// Request line plus header fields, in bytes; a longer head is
    /// answered `431` after reading at most one byte more. Scrapers send
    /// a few hundred bytes; 8 KiB is what common servers allow.
    pub max_header_bytes: usize,
    /// From accept to the end of the request head; a slower client is
    /// answered `408` and closed. Scrapers, probes and browsers send
    /// their head in one packet, within milliseconds; 3 s leaves a slow
    /// link room while a trickling client holds a slot no longer than
    /// that (and less when others need it).
    pub header_timeout: Duration,
    /// Writing the answer to a client that does not read.
    pub write_timeout: Duration,
    /// A webhook's body, in bytes: GitHub's own cap on what it sends
    /// (25 MB). The body is hashed as it arrives, never held whole.
    pub max_body_bytes: u64,
    /// From the end of the head to the end of a webhook's body.
    pub body_timeout: Duration,
}

impl Default for ServerLimits {
    fn default() -> ServerLimits {
        ServerLimits {
            max_connections: 64,
            max_header_bytes: 8 * 1024,
            header_timeout: Duration::from_secs(3),
            write_timeout: Duration::from_secs(10),
            max_body_bytes: 25 << 20,
            body_timeout: Duration::from_secs(10),
        }
    }
}

/// What the server tells its observer. It calls the observer on its own
/// threads; the observer must not block for long.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ServerEvent {
    /// `accept` failed; the server waits `retry_in` and tries again
    /// (doubling the wait up to a second while it keeps failing). Told
    /// once per run of failures. `out_of_resources`: file descriptors or
    /// memory ran out (`EMFILE` and kin).
    AcceptFailing {
        error: String,
        out_of_resources: bool,
        retry_in: Duration,
    },
    /// `accept` works again after `failures` failures in a row.
    AcceptRecovered { failures: u64 },
    /// The serving thread ended without being asked to: nothing answers
    /// on the port any more. The process should exit non-zero.
    Ended { reason: String },
    /// A forge's webhook whose signature or token checked out. `woke`:
    /// it was a push, and [`GitHooks::on_push`] was called.
    HookAccepted {
        forge: Forge,
        event: String,
        woke: bool,
    },
    /// A webhook refused (`401`, or `400`/`411`/`413` for a body that
    /// could not be checked); `forge` when its headers said which. The
    /// reason never holds the body or a header's value.
    HookRefused {
        forge: Option<Forge>,
        status: u16,
        reason: String,
    },
}

/// Receives [`ServerEvent`]s (to log them; to stop the process on `Ended`).
pub type Observer = Arc<dyn Fn(&ServerEvent) + Send + Sync>;

/// How [`StatusServer::start_with`] runs the server.
#[derive(Clone, Default)]
pub struct ServerOptions {
    pub limits: ServerLimits,
    pub observer: Option<Observer>,
    /// The credential every request but `/healthz` and `/hooks/git` must
    /// carry; `None`: none asked.
    pub access: Option<Access>,
    /// `POST /hooks/git`; `None`: that path is `404`.
    pub hooks: Option<GitHooks>,
}

/// A running status server. Dropping it stops it, as [`shutdown`](Self::shutdown) does.
pub struct StatusServer {
    addr: SocketAddr,
    shared: Arc<accept::Shared>,
    thread: Option<JoinHandle<()>>,
}

impl StatusServer {
    /// Binds `listen` (`host:port`; port 0 picks a free one) and serves
    /// `source` with the default limits and no observer.
    pub fn start(listen: &str, source: Source) -> Result<StatusServer, HttpError> {
        StatusServer::start_with(listen, source, ServerOptions::default())
    }

    /// Binds `listen` and serves `source` on a new thread, with `options`.
    pub fn start_with(
        listen: &str,
        source: Source,
        options: ServerOptions,
    ) -> Result<StatusServer, HttpError> {
        let bind_error = |reason: String| HttpError::Bind {
            listen: listen.to_owned(),
            reason,
        };
        let listener = TcpListener::bind(listen).map_err(|e| bind_error(e.to_string()))?;
        let addr = listener
            .local_addr()
            .map_err(|e| bind_error(e.to_string()))?;
        StatusServer::serve(Box::new(listener), addr, source, options)
            .map_err(|e| bind_error(format!("cannot start the serving thread: {e}")))
    }

    /// Serves connections from `incoming` (bound to `addr`) on a new thread.
    fn serve(
        incoming: Box<dyn accept::Incoming>,
        addr: SocketAddr,
        source: Source,
        options: ServerOptions,
    ) -> std::io::Result<StatusServer> {
        let shared = Arc::new(accept::Shared::new(source, options));
        let thread = {
            let shared = Arc::clone(&shared);
            std::thread::Builder::new()
                .name("proxops-http".into())
                .spawn(move || accept::run(incoming, shared))?
        };
        Ok(StatusServer {
            addr,
            shared,
            thread: Some(thread),
        })
    }

    /// The address actually bound (the real port when 0 was asked for).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Why the serving thread ended without being asked to (the listener
    /// failed, or the thread panicked); `None` while it serves.
    pub fn failure(&self) -> Option<String> {
        self.shared.failure()
    }

    /// Stops accepting and returns once the port is closed. Answers in
    /// progress finish on their own threads (each bounded by the limits).
    pub fn shutdown(mut self) {
        self.stop_and_join();
    }

    fn stop_and_join(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        let Some(thread) = self.thread.take() else {
            return;
        };
        // The thread may be blocked in `accept`: a connection wakes it.
        // If none can be made (no descriptor left), it is left to end on
        // its own rather than waited for forever.
        let deadline = Instant::now() + CLOSE_WAIT;
        while !thread.is_finished() && Instant::now() < deadline {
            let _ = TcpStream::connect_timeout(&loopback(self.addr), Duration::from_millis(100));
            std::thread::sleep(Duration::from_millis(5));
        }
        if thread.is_finished() {
            let _ = thread.join();
        }
    }
}

/// The address to reach `addr` on this host (loopback for a wildcard).
fn loopback(addr: SocketAddr) -> SocketAddr {
    let mut probe = addr;
    if probe.ip().is_unspecified() {
        probe.set_ip(match addr {
            SocketAddr::V4(_) => Ipv4Addr::LOCALHOST.into(),
            SocketAddr::V6(_) => Ipv6Addr::LOCALHOST.into(),
        });
    }
    probe
}

impl Drop for StatusServer {
    fn drop(&mut self) {
        self.stop_and_join();
    }
}

fn unix_now() -> Timestamp {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}
