//! The replay transport: answers requests from a recording.
//!
//! **Architecture Invariant:** a request the recording lacks is an error
//! (`TransportError::NotRecorded`), never an empty answer: an invented
//! "nothing there" would look like absence and drive creates or prunes.

use std::collections::BTreeMap;
use std::path::Path;

use proxops_core::names::ClusterName;

use crate::recording::{Recording, RecordingError, query_string};
use crate::transport::{Method, Request, Response, Transport, TransportError};

/// Serves recorded answers keyed by (method, path, query). When a recording
/// holds the same request twice, the first answer wins.
#[derive(Debug, Clone)]
pub struct ReplayTransport {
    cluster: ClusterName,
    answers: BTreeMap<(Method, String, String), Response>,
}

impl ReplayTransport {
    pub fn from_recording(recording: Recording) -> ReplayTransport {
        let mut answers = BTreeMap::new();
        for r in recording.responses {
            answers
                .entry((r.method, r.path, r.query))
                .or_insert(Response {
                    status: r.status,
                    reason: r.reason.unwrap_or_default(),
                    body: r.body,
                });
        }
        ReplayTransport {
            cluster: recording.cluster,
            answers,
        }
    }

    pub fn from_json(bytes: &[u8]) -> Result<ReplayTransport, RecordingError> {
        Recording::from_json(bytes).map(ReplayTransport::from_recording)
    }

    pub fn load(path: &Path) -> Result<ReplayTransport, RecordingError> {
        let bytes = std::fs::read(path).map_err(|e| RecordingError::Io {
            path: path.display().to_string(),
            message: e.to_string(),
        })?;
        ReplayTransport::from_json(&bytes)
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

impl Transport for ReplayTransport {
    fn call(&self, request: &Request) -> Result<Response, TransportError> {
        let query = query_string(&request.params);
        let key = (request.method, request.path.clone(), query);
        match self.answers.get(&key) {
            Some(r) => Ok(r.clone()),
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
}
