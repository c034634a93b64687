//! Config and content reads never exceed the concurrency bound.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use proxops_core::names::{NodeName, StorageId};
use proxops_pve::reader::{ReadScope, read_snapshot};
use proxops_pve::transport::{Request, Response, Transport, TransportError};
use serde_json::json;

const GUESTS: u64 = 24;

struct Gauge {
    in_flight: AtomicUsize,
    max: AtomicUsize,
    calls: AtomicUsize,
}

impl Transport for Gauge {
    fn call(&self, r: &Request) -> Result<Response, TransportError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.max.fetch_max(now, Ordering::SeqCst);
        let data = if r.path == "/cluster/resources" {
            let mut rows = vec![json!({"type": "node", "node": "pve1", "status": "online"})];
            rows.extend((0..GUESTS).map(
                |i| json!({"type": "qemu", "node": "pve1", "vmid": 100 + i, "status": "stopped"}),
            ));
            json!(rows)
        } else if matches!(
            r.path.as_str(),
            "/cluster/replication"
                | "/pools"
                | "/cluster/backup"
                | "/cluster/ha/resources"
                | "/cluster/ha/rules"
        ) {
            json!([])
        } else if r.path.ends_with("/content") {
            std::thread::sleep(Duration::from_millis(5));
            json!([])
        } else {
            // `…/pending`: one entry per key.
            std::thread::sleep(Duration::from_millis(5));
            json!([{"key": "memory", "value": "1024"}])
        };
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
        Ok(Response {
            status: 200,
            reason: "OK".into(),
            body: json!({"data": data}),
        })
    }
}

fn read_with(bound: usize) -> (usize, usize) {
    let g = Gauge {
        in_flight: AtomicUsize::new(0),
        max: AtomicUsize::new(0),
        calls: AtomicUsize::new(0),
    };
    let scope = ReadScope {
        allowlist: None,
        storages: BTreeSet::from([
            (
                NodeName::new("pve1").unwrap(),
                StorageId::new("local").unwrap(),
            ),
            (
                NodeName::new("pve1").unwrap(),
                StorageId::new("nfs-iso").unwrap(),
            ),
        ]),
        concurrency: bound,
        firewall: None,
    };
    let snap = read_snapshot(&g, &scope).unwrap();
    assert_eq!(snap.guests.len() as u64, GUESTS);
    assert!(snap.failures.is_empty());
    (g.max.load(Ordering::SeqCst), g.calls.load(Ordering::SeqCst))
}

#[test]
fn reads_never_exceed_the_concurrency_bound() {
    for bound in [1, 3, 4] {
        let (max, calls) = read_with(bound);
        assert!(max <= bound, "bound {bound}, saw {max} in flight");
        // The guests are stopped: no VM list is read for QEMU's status.
        // One listing per cluster-level kind (K, the replication jobs
        // among them) besides.
        let kinds = proxops_core::cluster::KINDS.len();
        assert_eq!(
            calls,
            1 + kinds + GUESTS as usize + 2,
            "1 + K + N + S requests"
        );
    }
}

#[test]
fn reads_do_run_in_parallel_up_to_the_bound() {
    let (max, _) = read_with(4);
    assert!(max > 1, "expected parallel reads, saw {max}");
}

#[test]
fn zero_concurrency_still_reads_one_at_a_time() {
    let (max, _) = read_with(0);
    assert_eq!(max, 1);
}

/// Answers like [`Gauge`]'s, but a cluster-level listing (`/pools`, …)
/// answers only once a guest's config read has started: read one at a
/// time before the config reads, as they once were, each would wait for
/// a read that never comes. The wait ends after a while all the same
/// (then noted), so a failing run ends instead of hanging.
struct ListingsWaitForConfigs {
    gauge: Gauge,
    config_started: (std::sync::Mutex<bool>, std::sync::Condvar),
    listings_alone: AtomicUsize,
}

impl Transport for ListingsWaitForConfigs {
    fn call(&self, r: &Request) -> Result<Response, TransportError> {
        let (started, cv) = &self.config_started;
        if r.path.ends_with("/pending") {
            *started.lock().unwrap() = true;
            cv.notify_all();
        } else if proxops_core::cluster::KINDS
            .iter()
            .any(|ep| ep.collection == r.path)
        {
            let guard = started.lock().unwrap();
            let (guard, waited) = cv
                .wait_timeout_while(guard, Duration::from_secs(5), |s| !*s)
                .unwrap();
            if waited.timed_out() {
                self.listings_alone.fetch_add(1, Ordering::SeqCst);
            }
            drop(guard);
        }
        self.gauge.call(r)
    }
}

#[test]
fn cluster_listings_are_read_beside_the_config_reads() {
    let t = ListingsWaitForConfigs {
        gauge: Gauge {
            in_flight: AtomicUsize::new(0),
            max: AtomicUsize::new(0),
            calls: AtomicUsize::new(0),
        },
        config_started: Default::default(),
        listings_alone: AtomicUsize::new(0),
    };
    // The default bound: more than the listings, so a config read is
    // among the first reads the pool starts.
    let scope = ReadScope {
        concurrency: 8,
        ..ReadScope::default()
    };
    let snap = read_snapshot(&t, &scope).unwrap();
    assert_eq!(snap.guests.len() as u64, GUESTS);
    assert!(snap.failures.is_empty(), "{:?}", snap.failures);
    assert_eq!(
        t.listings_alone.load(Ordering::SeqCst),
        0,
        "a cluster listing was read with no config read under way"
    );
    let max = t.gauge.max.load(Ordering::SeqCst);
    assert!(max <= 8, "bound 8, saw {max} in flight");
    let kinds = proxops_core::cluster::KINDS.len();
    assert_eq!(
        t.gauge.calls.load(Ordering::SeqCst),
        1 + kinds + GUESTS as usize
    );
}

/// Answers like [`Gauge`]'s, the inventory after `inventory_takes`, every
/// later read after 40 ms; notes when each reading thread started its
/// first read. `local` says what [`Transport::is_local`] answers.
struct FirstStarts {
    gauge: Gauge,
    local: bool,
    inventory_takes: Duration,
    first: std::sync::Mutex<std::collections::HashMap<std::thread::ThreadId, std::time::Instant>>,
}

impl Transport for FirstStarts {
    fn call(&self, r: &Request) -> Result<Response, TransportError> {
        if r.path == "/cluster/resources" {
            std::thread::sleep(self.inventory_takes);
        } else {
            let at = std::time::Instant::now();
            let id = std::thread::current().id();
            self.first.lock().unwrap().entry(id).or_insert(at);
            std::thread::sleep(Duration::from_millis(40));
        }
        self.gauge.call(r)
    }

    fn is_local(&self) -> bool {
        self.local
    }
}

/// How far apart the reading threads started, and how many read.
fn first_reads_apart(local: bool) -> (Duration, usize) {
    let t = FirstStarts {
        gauge: Gauge {
            in_flight: AtomicUsize::new(0),
            max: AtomicUsize::new(0),
            calls: AtomicUsize::new(0),
        },
        local,
        // Over the most the starts are spread over (100 ms).
        inventory_takes: Duration::from_millis(150),
        first: Default::default(),
    };
    let scope = ReadScope {
        concurrency: 8,
        ..ReadScope::default()
    };
    let snap = read_snapshot(&t, &scope).unwrap();
    assert!(snap.failures.is_empty(), "{:?}", snap.failures);
    let first = t.first.into_inner().unwrap();
    let earliest = first.values().min().unwrap();
    let latest = first.values().max().unwrap();
    (latest.duration_since(*earliest), first.len())
}

/// Over a network the reading threads start spread over the inventory's
/// round trip (at most 100 ms: thread 7 of 8 after 87.5 ms), so their
/// requests do not reach the server together; from a recording the
/// inventory's "round trip" was parsing it, nothing to overlap, and its
/// answers are read on the calling thread alone (a second thread's heap
/// cost memory and no time).
#[test]
fn reads_from_memory_stay_on_one_thread_and_network_reads_spread() {
    let (network, threads) = first_reads_apart(false);
    assert_eq!(threads, 8, "every network thread reads");
    assert!(
        network >= Duration::from_millis(85),
        "network reads started {network:?} apart"
    );
    let (_, threads) = first_reads_apart(true);
    assert_eq!(threads, 1, "reads from memory ran on {threads} threads");
}
