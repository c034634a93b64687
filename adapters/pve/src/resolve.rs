//! Name resolution for the live transport: the endpoint's host is looked
//! up once and the answer kept until the caller starts its next cycle.
//!
//! ureq's own resolver looks the host up for every connection, and with a
//! timeout set (ours always is) it starts a thread for each look-up: 204
//! thread starts for a 201-request cycle. A cluster has one endpoint, so
//! one look-up per cycle is enough; a new cycle looks again, so a changed
//! DNS record is followed from the next cycle on.

use std::sync::{Arc, Mutex, PoisonError};

use ureq::config::Config;
use ureq::http::Uri;
use ureq::unversioned::resolver::{DefaultResolver, ResolvedSocketAddrs, Resolver};
use ureq::unversioned::transport::NextTimeout;

/// The addresses of the one host this transport talks to, once looked up.
#[derive(Debug, Default)]
pub(crate) struct Addresses {
    /// `host:port` as asked, and its addresses.
    known: Mutex<Option<(String, ResolvedSocketAddrs)>>,
    /// Look-ups made (each one a thread of ureq's resolver).
    lookups: std::sync::atomic::AtomicU64,
}

impl Addresses {
    /// Forgets the addresses: the next connection looks the host up again.
    pub(crate) fn forget(&self) {
        *self.known.lock().unwrap_or_else(PoisonError::into_inner) = None;
    }

    pub(crate) fn lookups(&self) -> u64 {
        self.lookups.load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// The resolver handed to ureq: answers from [`Addresses`], asking ureq's
/// default resolver only when they are not known.
#[derive(Debug)]
pub(crate) struct OncePerCycle {
    pub(crate) addresses: Arc<Addresses>,
    pub(crate) lookup: DefaultResolver,
}

impl Resolver for OncePerCycle {
    fn resolve(
        &self,
        uri: &Uri,
        config: &Config,
        timeout: NextTimeout,
    ) -> Result<ResolvedSocketAddrs, ureq::Error> {
        let asked = match (uri.scheme(), uri.authority()) {
            (Some(scheme), Some(authority)) => DefaultResolver::host_and_port(scheme, authority),
            _ => None,
        };
        let known = self
            .addresses
            .known
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        if let (Some(asked), Some((host, addrs))) = (&asked, known)
            && *asked == host
        {
            return Ok(addrs);
        }
        self.addresses
            .lookups
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let addrs = self.lookup.resolve(uri, config, timeout)?;
        if let Some(asked) = asked {
            *self
                .addresses
                .known
                .lock()
                .unwrap_or_else(PoisonError::into_inner) = Some((asked, addrs.clone()));
        }
        Ok(addrs)
    }
}
