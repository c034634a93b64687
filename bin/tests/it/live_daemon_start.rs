//! The daemon's first minute: the status server answers at once, saying
//! `starting`, while each PVE is still asked which it is; and `/healthz`
//! stays 503 until every cluster has completed a turn, however many turns
//! a faster cluster completes meanwhile.

#![allow(clippy::unwrap_used)]

use crate::live_support;

use std::time::{Duration, Instant};

use live_support::daemon::get;
use live_support::*;
use serde_json::{Value, json};

const DEADLINE: Duration = Duration::from_secs(90);

fn status(addr: std::net::SocketAddr) -> Value {
    let answer = get(addr, "/status");
    assert_eq!(answer.status, 200, "{}", answer.body);
    serde_json::from_str(&answer.body).unwrap()
}

#[test]
fn healthz_waits_for_every_cluster_and_the_server_answers_while_pves_are_asked() {
    let deadline = Instant::now() + DEADLINE;
    let fast = two_clusters::fake();
    let slow = two_clusters::fake();
    let repo = two_clusters::repo(&fast, &slow);
    // Every answer of the lab PVE takes 1.5 s, from the first one on.
    slow.settings(json!({"time_scale": 1})).unwrap();
    slow.call("slow_network", json!([1.5]), Value::Null)
        .unwrap();

    let mut daemon = two_clusters::start(&repo);
    let addr = daemon.address(deadline);
    // Serving before the lab PVE said which it is: starting, not healthy.
    let health = get(addr, "/healthz");
    assert_eq!(health.status, 503, "{}", health.body);
    assert!(health.body.starts_with("starting: "), "{}", health.body);
    assert_eq!(status(addr)["state"], "starting");

    // home completes turns; lab is still in its first: still 503, naming it.
    daemon.wait_for(addr, "/status", deadline, "a turn of home", |a| {
        serde_json::from_str::<Value>(&a.body).is_ok_and(|s| {
            s["clusters"]
                .as_array()
                .is_some_and(|c| c.iter().any(|c| c["name"] == "home"))
        })
    });
    let health = get(addr, "/healthz");
    assert_eq!(
        (health.status, health.body.as_str()),
        (
            503,
            "starting: waiting for the first complete turn of lab\n"
        ),
        "{}",
        daemon.stderr()
    );
    let s = status(addr);
    assert_eq!(
        (&s["state"], &s["starting"]),
        (&json!("starting"), &json!(["lab"]))
    );

    // Once lab has had its turn, the process is healthy and running.
    slow.clear().unwrap();
    daemon.wait_for(addr, "/healthz", deadline, "healthy", |a| a.status == 200);
    let s = status(addr);
    assert_eq!(
        (&s["state"], &s["starting"]),
        (&json!("running"), &json!([]))
    );
    let exit = daemon.terminate(deadline);
    assert_eq!(exit.code(), Some(0), "{}", daemon.stderr());
}
