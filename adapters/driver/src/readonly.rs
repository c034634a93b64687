//! A transport that passes GETs through and refuses every other request:
//! what an observing or checking read goes through (`run --dry-run`,
//! `adopt`, the check read of `apply --plan`), so it cannot write to PVE.

use std::sync::atomic::{AtomicU64, Ordering};

use proxops_pve::transport::{Method, Request, Response, Transport, TransportError};

/// Passes GETs through and refuses (and counts) everything else.
pub struct ReadOnly<'t> {
    inner: &'t dyn Transport,
    refused: AtomicU64,
}

impl<'t> ReadOnly<'t> {
    pub fn new(inner: &'t dyn Transport) -> ReadOnly<'t> {
        ReadOnly {
            inner,
            refused: AtomicU64::new(0),
        }
    }

    pub fn refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }
}

impl Transport for ReadOnly<'_> {
    fn call(&self, request: &Request) -> Result<Response, TransportError> {
        if request.method != Method::Get {
            self.refused.fetch_add(1, Ordering::Relaxed);
            return Err(TransportError::ReadOnly {
                method: request.method,
                path: request.path.clone(),
            });
        }
        self.inner.call(request)
    }

    fn acting_as(&self) -> Option<String> {
        self.inner.acting_as()
    }

    fn is_local(&self) -> bool {
        self.inner.is_local()
    }

    fn recorded_body(&self, request: &Request) -> Option<(u16, &str)> {
        // Only a GET passes: anything else is refused by `call`.
        (request.method == Method::Get)
            .then(|| self.inner.recorded_body(request))
            .flatten()
    }
}
