//! What a cycle costs in connections and name look-ups: the endpoint is
//! looked up once per cycle, and reads in flight reuse their connections.
#![allow(clippy::unwrap_used)]

use proxops_pve::fakepve::FakePve;
use proxops_pve::live::LiveTransport;
use proxops_pve::reader::{ReadScope, read_snapshot};
use serde_json::{Value, json};

const GUESTS: u64 = 40;

fn seed() -> Value {
    let guests: Vec<Value> = (0..GUESTS)
        .map(|i| {
            json!({"vmid": 100 + i, "name": format!("vm{i}"), "status": "running",
                   "config": {"memory": 1024, "cores": 1}})
        })
        .collect();
    json!({ "guests": guests })
}

fn read(t: &LiveTransport, concurrency: usize) {
    let scope = ReadScope {
        concurrency,
        ..ReadScope::default()
    };
    let snap = read_snapshot(t, &scope).unwrap();
    assert_eq!(snap.guests.len() as u64, GUESTS);
    assert!(snap.failures.is_empty(), "{:?}", snap.failures);
}

#[test]
fn the_endpoint_is_looked_up_once_per_cycle() {
    let pve = FakePve::start(&seed()).unwrap();
    let t = LiveTransport::new(pve.live_config()).unwrap();
    read(&t, 4);
    assert_eq!(t.lookups(), 1, "one look-up for the cycle's 41 requests");
    read(&t, 4);
    assert_eq!(t.lookups(), 1, "the same cycle: no new look-up");
    t.new_cycle();
    read(&t, 4);
    assert_eq!(t.lookups(), 2, "a new cycle looks the host up again");
}

#[test]
fn reads_in_flight_keep_their_connections() {
    let pve = FakePve::start(&seed()).unwrap();
    // Each answer 20 ms late, so the reads really are in flight together.
    pve.settings(json!({"time_scale": 1.0})).unwrap();
    pve.call("slow_network", json!([0.02]), json!({})).unwrap();
    for concurrency in [4, 8] {
        let mut config = pve.live_config();
        config.connections = concurrency;
        let t = LiveTransport::new(config).unwrap();
        read(&t, concurrency);
        let opened = t.connections_opened();
        assert!(
            opened <= concurrency as u64,
            "{concurrency} reads in flight opened {opened} connections for {} requests",
            GUESTS + 1
        );
    }
}
