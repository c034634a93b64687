//! The replay transport: answers requests from a recording.
//!
//! **Architecture Invariant:** a request the recording lacks is an error
//! (`TransportError::NotRecorded`), never an empty answer: an invented
//! "nothing there" would look like absence and drive creates or prunes.

use std::collections::BTreeMap;
use std::path::Path;

use proxops_core::names::ClusterName;
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::recording::{Recording, RecordingError, query_string};
use crate::transport::{Method, Request, Response, Transport, TransportError};

/// Serves recorded answers keyed by (method, path, query). When a recording
/// holds the same request twice, the first answer wins.
#[derive(Debug, Clone)]
pub struct ReplayTransport {
    cluster: ClusterName,
    answers: BTreeMap<(Method, String, String), Answer>,
    /// The recording's text, when the bodies are kept as ranges of it.
    text: std::sync::Arc<String>,
}

#[derive(Debug, Clone)]
struct Answer {
    status: u16,
    reason: String,
    body: Body,
}

/// A body read from a file stays JSON text until it is asked for: a
/// recording of 10,000 guests as value trees took about as much memory as
/// everything else a diff holds, and each answer was cloned when served
/// anyway.
#[derive(Debug, Clone)]
enum Body {
    Parsed(Value),
    Text(Box<RawValue>),
    /// Bytes `start..end` of the recording's text.
    Range(usize, usize),
}

impl ReplayTransport {
    pub fn from_recording(recording: Recording) -> ReplayTransport {
        let bodies = recording.responses.into_iter().map(|r| {
            let key = (r.method, r.path, r.query);
            let answer = Answer {
                status: r.status,
                reason: r.reason.unwrap_or_default(),
                body: Body::Parsed(r.body),
            };
            (key, answer)
        });
        ReplayTransport::from_answers(recording.cluster, bodies)
    }

    fn from_answers(
        cluster: ClusterName,
        items: impl Iterator<Item = ((Method, String, String), Answer)>,
    ) -> ReplayTransport {
        let mut answers = BTreeMap::new();
        for (key, answer) in items {
            answers.entry(key).or_insert(answer);
        }
        ReplayTransport {
            cluster,
            answers,
            text: std::sync::Arc::new(String::new()),
        }
    }

    pub fn from_json(bytes: &[u8]) -> Result<ReplayTransport, RecordingError> {
        ReplayTransport::from_bytes(bytes.to_vec())
    }

    /// [`ReplayTransport::from_json`] of bytes it may keep: a recording in
    /// ProxOps' own shape keeps them as its bodies' text, without a copy.
    fn from_bytes(bytes: Vec<u8>) -> Result<ReplayTransport, RecordingError> {
        let bytes = match String::from_utf8(bytes).map(with_body_ranges) {
            Ok(Ok(read)) => return Ok(read),
            Ok(Err(text)) => text.into_bytes(),
            Err(e) => e.into_bytes(),
        };
        match with_text_bodies(&bytes) {
            Some(read) => read,
            None => Recording::from_json(&bytes).map(ReplayTransport::from_recording),
        }
    }

    pub fn load(path: &Path) -> Result<ReplayTransport, RecordingError> {
        let bytes = std::fs::read(path).map_err(|e| RecordingError::Io {
            path: path.display().to_string(),
            message: e.to_string(),
        })?;
        ReplayTransport::from_bytes(bytes)
    }

    /// The cluster the recording was made of.
    pub fn cluster(&self) -> &ClusterName {
        &self.cluster
    }

    pub fn len(&self) -> usize {
        self.answers.len()
    }

    pub fn is_empty(&self) -> bool {
        self.answers.is_empty()
    }
}

impl ReplayTransport {
    /// A request's key among the recorded answers.
    fn key(request: &Request) -> (Method, String, String) {
        (
            request.method,
            request.path.clone(),
            query_string(&request.params),
        )
    }

    /// The text of a body kept as text (`None`: a parsed body).
    fn text_of<'a>(&'a self, body: &'a Body) -> Option<&'a str> {
        match body {
            Body::Parsed(_) => None,
            Body::Text(t) => Some(t.get()),
            Body::Range(start, end) => Some(self.text.get(*start..*end).unwrap_or_default()),
        }
    }
}

impl Transport for ReplayTransport {
    fn call(&self, request: &Request) -> Result<Response, TransportError> {
        let key = ReplayTransport::key(request);
        match self.answers.get(&key) {
            Some(a) => Ok(Response {
                status: a.status,
                reason: a.reason.clone(),
                body: match &a.body {
                    Body::Parsed(v) => v.clone(),
                    kept => parsed(self.text_of(kept).unwrap_or_default(), request)?,
                },
            }),
            None => {
                let path = if key.2.is_empty() {
                    key.1
                } else {
                    format!("{}?{}", key.1, key.2)
                };
                Err(TransportError::NotRecorded {
                    method: request.method,
                    path,
                })
            }
        }
    }

    fn is_local(&self) -> bool {
        true
    }

    fn recorded_body(&self, request: &Request) -> Option<(u16, &str)> {
        let answer = self.answers.get(&ReplayTransport::key(request))?;
        Some((answer.status, self.text_of(&answer.body)?))
    }
}

/// A recorded body, checked as JSON when the recording was read.
fn parsed(text: &str, request: &Request) -> Result<Value, TransportError> {
    serde_json::from_str(text).map_err(|e| TransportError::Io {
        method: request.method,
        path: request.path.clone(),
        message: format!("recorded body is not JSON: {e}"),
    })
}

/// The fast reading of a recording in the shape ProxOps writes: the
/// document read once into borrowed parts, each body kept as the range of
/// the text it stands at (no copy), the other members checked as
/// [`Recording::from_value`] checks them. `None` for anything else (a
/// member of another type, a repeated member, a check that fails), which
/// the readers below then accept or refuse exactly as before: reading a
/// 10,000-guest recording member by member into maps was 0.3 G
/// instructions, and its bodies' copies 12 MB. The text comes back when
/// the recording is not of that shape.
fn with_body_ranges(text: String) -> Result<ReplayTransport, String> {
    match body_ranges(&text) {
        Some((cluster, items)) => {
            let mut read = ReplayTransport::from_answers(cluster, items.into_iter());
            read.text = std::sync::Arc::new(text);
            Ok(read)
        }
        None => Err(text),
    }
}

/// Recorded answers by request (method, path, query).
type Answers = Vec<((Method, String, String), Answer)>;

/// The answers of [`with_body_ranges`], each body as a range of `text`.
fn body_ranges(text: &str) -> Option<(ClusterName, Answers)> {
    #[derive(serde::Deserialize)]
    struct Doc<'a> {
        format: &'a str,
        cluster: &'a str,
        #[serde(borrow)]
        responses: Vec<Item<'a>>,
    }
    #[derive(serde::Deserialize)]
    struct Item<'a> {
        method: &'a str,
        path: &'a str,
        #[serde(default)]
        query: Option<&'a str>,
        status: u64,
        #[serde(default)]
        reason: Option<&'a str>,
        #[serde(borrow)]
        body: &'a RawValue,
    }
    let doc: Doc<'_> = serde_json::from_str(text).ok()?;
    if doc.format != crate::recording::RECORDING_FORMAT {
        return None;
    }
    let cluster = ClusterName::new(doc.cluster).ok()?;
    let base = text.as_ptr() as usize;
    let mut items = Vec::with_capacity(doc.responses.len());
    for item in &doc.responses {
        let method = Method::parse(item.method)?;
        if !item.path.starts_with('/') || item.path.contains('?') {
            return None;
        }
        let status = u16::try_from(item.status)
            .ok()
            .filter(|s| (100..=999).contains(s))?;
        let body = item.body.get();
        let start = body.as_ptr() as usize - base;
        let key = (
            method,
            item.path.to_owned(),
            item.query.unwrap_or("").to_owned(),
        );
        let answer = Answer {
            status,
            reason: item.reason.unwrap_or("").to_owned(),
            body: Body::Range(start, start + body.len()),
        };
        items.push((key, answer));
    }
    Some((cluster, items))
}

/// Reads a recording keeping each body as JSON text. Everything but the
/// bodies goes through [`Recording::from_value`], with each body replaced by
/// `null`, so a recording is accepted or refused exactly as
/// [`Recording::from_json`] would; `None` when the document does not have
/// the expected shape, and the caller lets `from_json` name the problem.
fn with_text_bodies(bytes: &[u8]) -> Option<Result<ReplayTransport, RecordingError>> {
    let TextBodies { mut doc, items } = serde_json::from_slice(bytes).ok()?;
    let mut bodies: Vec<Box<RawValue>> = Vec::new();
    if let Some(items) = items {
        bodies.reserve(items.len());
        let mut heads = Vec::with_capacity(items.len());
        for mut item in items {
            let body = item.remove("body")?;
            let mut head = Map::new();
            for (k, v) in item {
                head.insert(k, serde_json::from_str(v.get()).ok()?);
            }
            head.insert("body".into(), Value::Null);
            heads.push(Value::Object(head));
            bodies.push(body);
        }
        doc.insert("responses".into(), Value::Array(heads));
    }
    let recording = match Recording::from_value(Value::Object(doc)) {
        Ok(r) => r,
        Err(e) => return Some(Err(e)),
    };
    if recording.responses.len() != bodies.len() {
        return None;
    }
    let items = recording
        .responses
        .into_iter()
        .zip(bodies)
        .map(|(r, body)| {
            let key = (r.method, r.path, r.query);
            let answer = Answer {
                status: r.status,
                reason: r.reason.unwrap_or_default(),
                body: Body::Text(body),
            };
            (key, answer)
        });
    Some(Ok(ReplayTransport::from_answers(recording.cluster, items)))
}

/// A recording's top level read in one pass: `responses` as entries whose
/// members stay JSON text, every other member as a value. A repeated member
/// keeps its last value, as `serde_json::Value` does.
struct TextBodies {
    doc: Map<String, Value>,
    items: Option<Vec<BTreeMap<String, Box<RawValue>>>>,
}

impl<'de> serde::Deserialize<'de> for TextBodies {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<TextBodies, D::Error> {
        struct Members;
        impl<'de> serde::de::Visitor<'de> for Members {
            type Value = TextBodies;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a recording object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<TextBodies, A::Error> {
                let mut out = TextBodies {
                    doc: Map::new(),
                    items: None,
                };
                while let Some(key) = map.next_key::<String>()? {
                    if key == "responses" {
                        out.items = Some(map.next_value()?);
                    } else {
                        out.doc.insert(key, map.next_value()?);
                    }
                }
                Ok(out)
            }
        }
        d.deserialize_map(Members)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    const RECORDING: &str = r#"{
      "format": "proxops-recording/v1",
      "cluster": "lab",
      "responses": [
        {"method": "GET", "path": "/cluster/resources", "query": "", "status": 200,
         "reason": "OK", "body": {"data": [{"type": "node", "node": "pve1", "z": 1, "a": [1.5, null]}]}},
        {"method": "GET", "path": "/nodes/pve1/qemu/100/config", "status": 500,
         "reason": "got timeout", "body": {"data": null}},
        {"method": "GET", "path": "/nodes/pve1/qemu/100/config", "status": 200, "body": {"data": {}}},
        {"method": "GET", "path": "/version", "query": "full=1", "status": 200, "body": "plain"}
      ]
    }"#;

    fn both(text: &str) -> (ReplayTransport, ReplayTransport) {
        let text_bodies = ReplayTransport::from_json(text.as_bytes()).unwrap();
        let parsed =
            ReplayTransport::from_recording(Recording::from_json(text.as_bytes()).unwrap());
        (text_bodies, parsed)
    }

    #[test]
    fn bodies_kept_as_text_replay_as_the_parsed_recording_does() {
        let (text_bodies, parsed) = both(RECORDING);
        assert_eq!(text_bodies.len(), 3);
        assert!(matches!(
            text_bodies.answers.values().next().map(|a| &a.body),
            Some(Body::Range(..))
        ));
        let requests = [
            Request::get("/cluster/resources"),
            Request::get("/nodes/pve1/qemu/100/config"),
            Request::new(Method::Get, "/version", vec![("full".into(), "1".into())]),
            Request::get("/version"),
        ];
        for r in &requests {
            assert_eq!(text_bodies.call(r), parsed.call(r), "{}", r.path);
        }
        let first = text_bodies.call(&requests[0]).unwrap();
        let keys: Vec<&String> = first.data()[0].as_object().unwrap().keys().collect();
        assert_eq!(keys, ["type", "node", "z", "a"], "key order is kept");
        assert_eq!(text_bodies.call(&requests[1]).unwrap().status, 500);
    }

    #[test]
    fn a_recorded_body_is_the_text_its_answer_is_parsed_from() {
        let (text_bodies, parsed) = both(RECORDING);
        for r in [
            Request::get("/cluster/resources"),
            Request::get("/nodes/pve1/qemu/100/config"),
            Request::new(Method::Get, "/version", vec![("full".into(), "1".into())]),
        ] {
            let (status, body) = text_bodies.recorded_body(&r).unwrap();
            let answer = text_bodies.call(&r).unwrap();
            assert_eq!(status, answer.status, "{}", r.path);
            let read: Value = serde_json::from_str(body).unwrap();
            assert_eq!(read, answer.body, "{}", r.path);
            assert_eq!(
                parsed.recorded_body(&r),
                None,
                "a parsed recording has no text"
            );
        }
        assert_eq!(text_bodies.recorded_body(&Request::get("/version")), None);
    }

    #[test]
    fn a_repeated_member_keeps_its_last_value_either_way() {
        let repeated = RECORDING.replacen(
            "\"responses\": [",
            "\"responses\": 1, \"cluster\": \"other\", \"cluster\": \"lab\", \"responses\": [",
            1,
        );
        let (text_bodies, parsed) = both(&repeated);
        assert_eq!(text_bodies.cluster().as_str(), "lab");
        assert_eq!(text_bodies.len(), parsed.len());
    }

    #[test]
    fn a_bad_recording_is_refused_with_the_same_error_either_way() {
        for bad in [
            RECORDING.replace("proxops-recording/v1", "v2"),
            RECORDING.replace("\"status\": 500", "\"status\": 5000"),
            RECORDING.replace("\"path\": \"/version\"", "\"path\": \"version\""),
            RECORDING.replace("\"body\": \"plain\"", "\"bodx\": 1"),
            RECORDING.replace("\"cluster\": \"lab\"", "\"cluster\": 7"),
            RECORDING.replace("\"responses\"", "\"answers\""),
            RECORDING.replace("\"reason\": \"OK\"", "\"reason\": 1"),
            RECORDING.replace("{\"method\": \"GET\", \"path\": \"/version\"", "[{"),
            "[]".to_owned(),
            "{".to_owned(),
        ] {
            let want = Recording::from_json(bad.as_bytes()).unwrap_err();
            let got = ReplayTransport::from_json(bad.as_bytes()).unwrap_err();
            assert_eq!(got, want, "{bad}");
        }
    }
}
