//! Recordings of PVE answers (`proxops-recording/v1`, see
//! docs/recording-format.md) and the transport that makes them.
//!
//! A `RecordingTransport` forwards every call to an inner transport and
//! keeps each GET's method, path, query, status, reason phrase and body.
//!
//! **Architecture Invariant:** a recording never holds a secret. Requests
//! below `/access` (where tickets are issued) are never recorded, and no
//! header is ever recorded: only what PVE answered.

use std::collections::BTreeSet;
use std::sync::Mutex;

use proxops_core::names::ClusterName;
use serde_json::{Map, Value, json};

use crate::transport::{Method, Request, Response, Transport, TransportError, encode_segment};

/// The `format` marker of the only recording version.
pub const RECORDING_FORMAT: &str = "proxops-recording/v1";

/// Why a recording could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RecordingError {
    #[error("recording is not valid JSON: {0}")]
    Json(String),
    #[error("recording {field}: {message}")]
    Format { field: String, message: String },
    #[error("cannot read recording {path}: {message}")]
    Io { path: String, message: String },
}

fn format_err(field: impl Into<String>, message: impl Into<String>) -> RecordingError {
    RecordingError::Format {
        field: field.into(),
        message: message.into(),
    }
}

/// One recorded answer.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedResponse {
    pub method: Method,
    /// Below `/api2/json`, starting with `/`.
    pub path: String,
    /// The URL query string without `?`, params in the order sent; `""`
    /// when none.
    pub query: String,
    pub status: u16,
    /// The HTTP reason phrase (PVE puts its error text there).
    pub reason: Option<String>,
    /// PVE's whole JSON body.
    pub body: Value,
}

/// One cluster's recorded answers.
#[derive(Debug, Clone, PartialEq)]
pub struct Recording {
    pub cluster: ClusterName,
    pub responses: Vec<RecordedResponse>,
}

/// The query string a request is recorded and replayed under: `k=v` pairs
/// in the order sent, joined by `&`, each key and value percent-encoded.
pub fn query_string(params: &[(String, String)]) -> String {
    params
        .iter()
        .map(|(k, v)| format!("{}={}", encode_segment(k), encode_segment(v)))
        .collect::<Vec<_>>()
        .join("&")
}

impl Recording {
    pub fn new(cluster: ClusterName) -> Recording {
        Recording {
            cluster,
            responses: Vec::new(),
        }
    }

    /// Reads `proxops-recording/v1` JSON.
    pub fn from_json(bytes: &[u8]) -> Result<Recording, RecordingError> {
        let v: Value =
            serde_json::from_slice(bytes).map_err(|e| RecordingError::Json(e.to_string()))?;
        Recording::from_value(v)
    }

    /// Reads a `proxops-recording/v1` document already parsed.
    pub(crate) fn from_value(mut v: Value) -> Result<Recording, RecordingError> {
        let obj = v
            .as_object_mut()
            .ok_or_else(|| format_err("(top level)", "expected a JSON object"))?;
        match obj.get("format").and_then(Value::as_str) {
            Some(RECORDING_FORMAT) => {}
            other => {
                return Err(format_err(
                    "format",
                    format!("expected {RECORDING_FORMAT:?}, found {other:?}"),
                ));
            }
        }
        let cluster = obj
            .get("cluster")
            .and_then(Value::as_str)
            .ok_or_else(|| format_err("cluster", "expected a cluster name string"))?;
        let cluster =
            ClusterName::new(cluster).map_err(|e| format_err("cluster", e.to_string()))?;
        // The bodies are moved out, not cloned: a large recording's answers
        // would otherwise sit in memory twice.
        let items = obj
            .get_mut("responses")
            .and_then(Value::as_array_mut)
            .map(std::mem::take)
            .ok_or_else(|| format_err("responses", "expected an array"))?;
        let mut responses = Vec::with_capacity(items.len());
        for (i, mut item) in items.into_iter().enumerate() {
            let field = |name: &str| format!("responses[{i}].{name}");
            let text = |name: &str| -> Result<String, RecordingError> {
                item.get(name)
                    .and_then(Value::as_str)
                    .map(str::to_owned)
                    .ok_or_else(|| format_err(field(name), "expected a string"))
            };
            let method_text = text("method")?;
            let method = Method::parse(&method_text).ok_or_else(|| {
                format_err(field("method"), format!("unknown method {method_text:?}"))
            })?;
            let path = text("path")?;
            if !path.starts_with('/') || path.contains('?') {
                return Err(format_err(
                    field("path"),
                    "expected a path below /api2/json starting with / and without ?",
                ));
            }
            let query = match item.get("query") {
                None | Some(Value::Null) => String::new(),
                Some(Value::String(q)) => q.clone(),
                Some(_) => return Err(format_err(field("query"), "expected a string")),
            };
            let status = item
                .get("status")
                .and_then(Value::as_u64)
                .and_then(|s| u16::try_from(s).ok())
                .filter(|s| (100..=999).contains(s))
                .ok_or_else(|| format_err(field("status"), "expected an HTTP status number"))?;
            let reason = match item.get("reason") {
                None | Some(Value::Null) => None,
                Some(Value::String(r)) => Some(r.clone()),
                Some(_) => return Err(format_err(field("reason"), "expected a string")),
            };
            let body = item
                .get_mut("body")
                .map(Value::take)
                .ok_or_else(|| format_err(field("body"), "missing"))?;
            responses.push(RecordedResponse {
                method,
                path,
                query,
                status,
                reason,
                body,
            });
        }
        Ok(Recording { cluster, responses })
    }

    /// Sorts by path, then query, then method, and keeps the first answer
    /// for each request.
    pub fn normalise(&mut self) {
        self.responses
            .sort_by(|a, b| (&a.path, &a.query, a.method).cmp(&(&b.path, &b.query, b.method)));
        let mut seen = BTreeSet::new();
        self.responses
            .retain(|r| seen.insert((r.path.clone(), r.query.clone(), r.method)));
    }

    /// Pretty-printed JSON with a stable key order (bodies' object keys
    /// sorted), responses sorted: the same answers give the same bytes.
    pub fn to_json(&self) -> String {
        let mut sorted = self.clone();
        sorted.normalise();
        let responses: Vec<Value> = sorted
            .responses
            .iter()
            .map(|r| {
                let mut o = Map::new();
                o.insert("method".into(), json!(r.method.as_str()));
                o.insert("path".into(), json!(r.path));
                o.insert("query".into(), json!(r.query));
                o.insert("status".into(), json!(r.status));
                if let Some(reason) = &r.reason {
                    o.insert("reason".into(), json!(reason));
                }
                o.insert("body".into(), sort_keys(&r.body));
                Value::Object(o)
            })
            .collect();
        let mut top = Map::new();
        top.insert("format".into(), json!(RECORDING_FORMAT));
        top.insert("cluster".into(), json!(self.cluster.as_str()));
        top.insert("responses".into(), Value::Array(responses));
        let mut out = serde_json::to_string_pretty(&Value::Object(top)).unwrap_or_default();
        out.push('\n');
        out
    }
}

fn sort_keys(v: &Value) -> Value {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            Value::Object(
                keys.into_iter()
                    .map(|k| (k.clone(), sort_keys(&m[k])))
                    .collect(),
            )
        }
        Value::Array(a) => Value::Array(a.iter().map(sort_keys).collect()),
        other => other.clone(),
    }
}

/// True for requests that must never reach a recording.
fn is_secret_path(path: &str) -> bool {
    path == "/access" || path.starts_with("/access/")
}

/// Forwards to `inner` and records every GET answer (never `/access`, never
/// headers). A call without an HTTP answer (transport error) is not
/// recorded, so replaying it fails closed.
pub struct RecordingTransport<T: Transport> {
    inner: T,
    recording: Mutex<Recording>,
}

impl<T: Transport> RecordingTransport<T> {
    pub fn new(cluster: ClusterName, inner: T) -> RecordingTransport<T> {
        RecordingTransport {
            inner,
            recording: Mutex::new(Recording::new(cluster)),
        }
    }

    /// What was recorded so far, sorted and de-duplicated.
    pub fn recording(&self) -> Recording {
        // A poisoned lock only means another reader thread panicked after
        // pushing a complete entry; the data is still whole.
        let mut r = self
            .recording
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        r.normalise();
        r
    }

    pub fn into_recording(self) -> Recording {
        let mut r = self
            .recording
            .into_inner()
            .unwrap_or_else(|e| e.into_inner());
        r.normalise();
        r
    }

    pub fn to_json(&self) -> String {
        self.recording().to_json()
    }
}

impl<T: Transport> Transport for RecordingTransport<T> {
    fn call(&self, request: &Request) -> Result<Response, TransportError> {
        let response = self.inner.call(request)?;
        if request.method == Method::Get && !is_secret_path(&request.path) {
            let entry = RecordedResponse {
                method: request.method,
                path: request.path.clone(),
                query: query_string(&request.params),
                status: response.status,
                reason: Some(response.reason.clone()).filter(|r| !r.is_empty()),
                body: response.body.clone(),
            };
            self.recording
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .responses
                .push(entry);
        }
        Ok(response)
    }

    fn acting_as(&self) -> Option<String> {
        self.inner.acting_as()
    }

    fn is_local(&self) -> bool {
        self.inner.is_local()
    }
}
