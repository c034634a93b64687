//! Shared pieces of the live transport tests: a small seeded cluster, a
//! transport with recording hooks, and request-log helpers.
#![allow(dead_code, clippy::unwrap_used)]

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use proxops_pve::fakepve::FakePve;
use proxops_pve::live::{LiveConfig, LiveTransport, RequestLog};
use serde_json::{Value, json};

/// Two VMs on pve1: 100 running, 101 stopped.
pub fn seed() -> Value {
    json!({
        "guests": [
            {"vmid": 100, "name": "web1", "status": "running",
             "config": {"memory": 2048, "cores": 2, "scsihw": "virtio-scsi-pci",
                        "net0": "virtio=BC:24:11:00:00:01,bridge=vmbr0",
                        "scsi0": "local-lvm:vm-100-disk-0,size=32G"}},
            {"vmid": 101, "name": "db1", "status": "stopped",
             "config": {"memory": 1024, "cores": 1,
                        "net0": "virtio=BC:24:11:00:00:02,bridge=vmbr0",
                        "scsi0": "local-lvm:vm-101-disk-0,size=8G"}}
        ]
    })
}

pub fn start() -> FakePve {
    FakePve::start(&seed()).unwrap()
}

/// A transport plus what its hooks saw.
pub struct Probe {
    pub transport: LiveTransport,
    pub sleeps: Arc<Mutex<Vec<Duration>>>,
    pub log: Arc<Mutex<Vec<RequestLog>>>,
    pub now: Arc<Mutex<Instant>>,
}

impl Probe {
    /// Builds the transport; `on_sleep` runs at each retry wait (after it is recorded).
    pub fn new(config: LiveConfig, on_sleep: impl Fn(usize) + Send + Sync + 'static) -> Probe {
        let sleeps = Arc::new(Mutex::new(Vec::new()));
        let log = Arc::new(Mutex::new(Vec::new()));
        let now = Arc::new(Mutex::new(Instant::now()));
        let (s, l, n) = (sleeps.clone(), log.clone(), now.clone());
        let transport = LiveTransport::new(config)
            .unwrap()
            .with_sleep(move |d| {
                let count = {
                    let mut v = s.lock().unwrap();
                    v.push(d);
                    v.len()
                };
                on_sleep(count);
            })
            .with_request_log(move |line| l.lock().unwrap().push(line.clone()))
            .with_clock(move || *n.lock().unwrap());
        Probe {
            transport,
            sleeps,
            log,
            now,
        }
    }

    pub fn plain(config: LiveConfig) -> Probe {
        Probe::new(config, |_| {})
    }

    pub fn sleeps(&self) -> usize {
        self.sleeps.lock().unwrap().len()
    }

    pub fn advance(&self, by: Duration) {
        *self.now.lock().unwrap() += by;
    }
}

/// How many requests with this method reached the fake at a path ending so.
pub fn sent(fake: &FakePve, method: &str, path_suffix: &str) -> usize {
    fake.requests()
        .unwrap()
        .iter()
        .filter(|(m, p, _)| m == method && p.ends_with(path_suffix))
        .count()
}
