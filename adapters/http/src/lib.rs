//! The status server: serves `/healthz`, `/metrics` and `/status` over
//! plain HTTP, on its own thread.
//!
//! It only serves what it is handed: every answer comes from a [`Source`]
//! (usually [`store_source`], which asks core's renderings), so the server
//! decides nothing and knows nothing of reconciling. `GET` (and `HEAD`, which
//! HTTP requires to behave like `GET` without a body) on the three paths;
//! any other method is `405`, any other path `404`.
//!
//! **Architecture Invariant:** it binds exactly the address it is told
//! (the default, [`DEFAULT_LISTEN`], is loopback only), holds no secret and
//! renders nothing itself. It reads the clock once per request, to hand
//! `now` to the source.

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use proxops_core::exec::Timestamp;
use proxops_core::report::{
    METRICS_CONTENT_TYPE, StatusStore, healthz, render_metrics, render_status_json,
};

/// Where the server listens unless configured otherwise: loopback only.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:9494";

/// How long the serving thread waits for a request before it looks at the
/// stop flag again (bounds how long [`StatusServer::shutdown`] takes).
const POLL: Duration = Duration::from_millis(200);

/// How long shutdown waits for the listening socket to close.
const CLOSE_WAIT: Duration = Duration::from_secs(2);

/// The paths the server answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Route {
    /// `GET /healthz`
    Healthz,
    /// `GET /metrics`
    Metrics,
    /// `GET /status`
    Status,
}

impl Route {
    /// The route of a request target (query string ignored).
    pub fn from_target(target: &str) -> Option<Route> {
        let path = target.split(['?', '#']).next().unwrap_or(target);
        match path {
            "/healthz" => Some(Route::Healthz),
            "/metrics" => Some(Route::Metrics),
            "/status" => Some(Route::Status),
            _ => None,
        }
    }
}

/// One answer: status code, content type, body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    pub status: u16,
    pub content_type: String,
    pub body: String,
}

impl Reply {
    pub fn new(status: u16, content_type: impl Into<String>, body: impl Into<String>) -> Reply {
        Reply {
            status,
            content_type: content_type.into(),
            body: body.into(),
        }
    }
}

/// What the server serves: called on the serving thread for every request
/// to a known route, with the current time.
pub type Source = Arc<dyn Fn(Route, Timestamp) -> Reply + Send + Sync>;

/// The content type of `/status`.
pub const STATUS_CONTENT_TYPE: &str = "application/json";
/// The content type of `/healthz` and of error answers.
pub const TEXT_CONTENT_TYPE: &str = "text/plain; charset=utf-8";

/// A [`Source`] over a shared store: `/healthz` from core's `healthz` with
/// `poll_interval_secs`, `/metrics` and `/status` from core's renderings.
/// The lock is held only while rendering; a poisoned lock (a panic while
/// recording a cycle) answers 500 rather than serving a half-written store.
pub fn store_source(store: Arc<Mutex<StatusStore>>, poll_interval_secs: u64) -> Source {
    Arc::new(move |route, now| {
        let Ok(store) = store.lock() else {
            return Reply::new(500, TEXT_CONTENT_TYPE, "status store unavailable\n");
        };
        match route {
            Route::Healthz => {
                let (status, body) = healthz(&store, now, poll_interval_secs);
                Reply::new(status, TEXT_CONTENT_TYPE, body)
            }
            Route::Metrics => Reply::new(200, METRICS_CONTENT_TYPE, render_metrics(&store, now)),
            Route::Status => Reply::new(200, STATUS_CONTENT_TYPE, render_status_json(&store, now)),
        }
    })
}

/// Errors of the status server.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HttpError {
    #[error("status server: cannot listen on {listen}: {reason}")]
    Bind { listen: String, reason: String },
}

/// A running status server. Dropping it stops it, as [`shutdown`](Self::shutdown) does.
pub struct StatusServer {
    addr: SocketAddr,
    server: Option<Arc<tiny_http::Server>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl StatusServer {
    /// Binds `listen` (`host:port`; port 0 picks a free one) and serves
    /// `source` on a new thread.
    pub fn start(listen: &str, source: Source) -> Result<StatusServer, HttpError> {
        let bind_error = |reason: String| HttpError::Bind {
            listen: listen.to_owned(),
            reason,
        };
        let server = tiny_http::Server::http(listen).map_err(|e| bind_error(e.to_string()))?;
        let addr = server
            .server_addr()
            .to_ip()
            .ok_or_else(|| bind_error("not an IP address".into()))?;
        let server = Arc::new(server);
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let server = Arc::clone(&server);
            let stop = Arc::clone(&stop);
            std::thread::Builder::new()
                .name("proxops-http".into())
                .spawn(move || serve(&server, &stop, &source))
                .map_err(|e| bind_error(format!("cannot start the serving thread: {e}")))?
        };
        Ok(StatusServer {
            addr,
            server: Some(server),
            stop,
            thread: Some(thread),
        })
    }

    /// The address actually bound (the real port when 0 was asked for).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops serving and returns once the port is closed: the request being
    /// answered, if any, completes first.
    pub fn shutdown(mut self) {
        self.stop_and_join();
    }

    fn stop_and_join(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let Some(server) = self.server.take() else {
            return;
        };
        server.unblock();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        // The last reference: dropping it tells tiny_http's accept thread to
        // close the listener, which it does on its own time; wait for that
        // so a restart can bind the same port again.
        drop(server);
        wait_closed(self.addr);
    }
}

/// Waits (at most [`CLOSE_WAIT`]) until nothing accepts on `addr`.
fn wait_closed(addr: SocketAddr) {
    let mut probe = addr;
    if probe.ip().is_unspecified() {
        probe.set_ip(match addr {
            SocketAddr::V4(_) => Ipv4Addr::LOCALHOST.into(),
            SocketAddr::V6(_) => Ipv6Addr::LOCALHOST.into(),
        });
    }
    let deadline = Instant::now() + CLOSE_WAIT;
    while Instant::now() < deadline {
        if TcpStream::connect_timeout(&probe, Duration::from_millis(100)).is_err() {
            return;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

impl Drop for StatusServer {
    fn drop(&mut self) {
        self.stop_and_join();
    }
}

fn serve(server: &tiny_http::Server, stop: &AtomicBool, source: &Source) {
    while !stop.load(Ordering::SeqCst) {
        // `Ok(None)`: no request yet; `Err`: one connection failed. Either
        // way, keep serving.
        if let Ok(Some(request)) = server.recv_timeout(POLL) {
            answer(request, source);
        }
    }
}

fn answer(request: tiny_http::Request, source: &Source) {
    let reply = match request.method() {
        tiny_http::Method::Get | tiny_http::Method::Head => match Route::from_target(request.url())
        {
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
    let mut response = tiny_http::Response::from_string(reply.body).with_status_code(reply.status);
    if let Ok(h) =
        tiny_http::Header::from_bytes(&b"Content-Type"[..], reply.content_type.as_bytes())
    {
        response.add_header(h);
    }
    if reply.status == 405
        && let Ok(h) = tiny_http::Header::from_bytes(&b"Allow"[..], &b"GET, HEAD"[..])
    {
        response.add_header(h);
    }
    // A client that went away is not our problem.
    let _ = request.respond(response);
}

fn unix_now() -> Timestamp {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}
