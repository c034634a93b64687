//! The seam between ProxOps and a PVE API endpoint.
//!
//! A `Transport` sends one request below `/api2/json` and returns PVE's
//! status and whole JSON body. The live transport (ureq, auth, TLS, retries)
//! and the replay transport (recorded fixtures) both implement it, so the
//! snapshot reader and the runner are the same code offline and live.
//!
//! **Architecture Invariant:** only this crate knows PVE's JSON envelope.

pub use proxops_core::step::{Method, encode_segment};

/// One API call. `path` is below `/api2/json` and starts with `/`; each path
/// segment that came from data is already percent-encoded. `params` go into
/// the query string for GET and DELETE (PVE reads a body only for POST and
/// PUT) and into a form body for POST and PUT, in this order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub method: Method,
    pub path: String,
    pub params: Vec<(String, String)>,
}

impl Request {
    pub fn get(path: impl Into<String>) -> Request {
        Request {
            method: Method::Get,
            path: path.into(),
            params: Vec::new(),
        }
    }

    pub fn new(method: Method, path: impl Into<String>, params: Vec<(String, String)>) -> Request {
        Request {
            method,
            path: path.into(),
            params,
        }
    }
}

/// PVE's answer: the HTTP status, the reason phrase (PVE puts its
/// human-readable error there, not in the body) and the whole JSON body
/// (`{"data": …}` and, on 400, `errors`). A body that was not JSON is kept
/// as a JSON string.
#[derive(Debug, Clone, PartialEq)]
pub struct Response {
    pub status: u16,
    pub reason: String,
    pub body: serde_json::Value,
}

impl Response {
    pub fn is_success(&self) -> bool {
        (200..300).contains(&self.status)
    }

    /// The `data` member of the envelope (`null` when absent).
    pub fn data(&self) -> &serde_json::Value {
        self.body.get("data").unwrap_or(&serde_json::Value::Null)
    }
}

/// A call that produced no HTTP answer at all (or none we may use).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TransportError {
    /// Connection refused, reset, dropped, timed out, TLS failure …
    #[error("{method} {path}: transport error: {message}")]
    Io {
        method: Method,
        path: String,
        message: String,
    },
    /// A replayed recording has no response for this request: fail closed.
    #[error("{method} {path}: not in the recording")]
    NotRecorded { method: Method, path: String },
    /// The write circuit breaker is open (§18.3): running read-only.
    #[error("{method} {path}: refused, the write circuit breaker is open (running read-only)")]
    ReadOnly { method: Method, path: String },
    /// The TLS handshake was refused: the server's certificate is not trusted
    /// (wrong CA, wrong pinned fingerprint, wrong name) or no TLS version or
    /// cipher was agreed. Nothing was sent; another attempt would not help.
    #[error("{method} {path}: TLS: {message}")]
    Tls {
        method: Method,
        path: String,
        message: String,
    },
    /// Credentials were missing or refused before any request was sent.
    #[error("authentication: {0}")]
    Auth(String),
}

impl TransportError {
    /// Why, without the request in front: for a message that already names
    /// the request (a read failure says `GET /cluster/status: …` once).
    pub fn cause(&self) -> String {
        match self {
            TransportError::Io { message, .. } => format!("transport error: {message}"),
            TransportError::NotRecorded { .. } => "not in the recording".into(),
            TransportError::ReadOnly { .. } => {
                "refused, the write circuit breaker is open (running read-only)".into()
            }
            TransportError::Tls { message, .. } => format!("TLS: {message}"),
            TransportError::Auth(message) => format!("authentication: {message}"),
        }
    }

    /// The same error, saying it held over `attempts` tries when there was
    /// more than one (retries are otherwise silent).
    pub fn after_attempts(self, attempts: u32) -> TransportError {
        match self {
            TransportError::Io {
                method,
                path,
                message,
            } if attempts > 1 => TransportError::Io {
                method,
                path,
                message: format!("after {attempts} attempts: {message}"),
            },
            other => other,
        }
    }
}

/// Sends PVE API calls. Implementations are shared between reader threads,
/// hence `Send + Sync` and `&self`.
pub trait Transport: Send + Sync {
    fn call(&self, request: &Request) -> Result<Response, TransportError>;

    /// Whom the requests authenticate as, for messages about a refusal
    /// (`API token proxops@pve!reconcile`, `user alice@pve`); never a
    /// secret. `None` when there are no credentials (a replay).
    fn acting_as(&self) -> Option<String> {
        None
    }

    /// Whether the answers come from memory (a recording being replayed)
    /// rather than over a network: there is no round trip for concurrent
    /// reads to overlap, so [`crate::reader`] reads them on the calling
    /// thread (and what it does read in a pool starts together, not
    /// spread).
    fn is_local(&self) -> bool {
        false
    }

    /// The status and body, as JSON text, of the answer this transport
    /// holds for `request` (a recording being replayed), for a reader that
    /// reads it without a `Value` tree; `None` when it holds none as text,
    /// and the answer is [`Transport::call`]'s.
    fn recorded_body(&self, _request: &Request) -> Option<(u16, &str)> {
        None
    }
}
