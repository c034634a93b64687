//! The status server under slow clients, on loopback: 200 connections
//! that trickle their request heads a byte at a time and 130 idle ones
//! that reconnect as soon as they are closed must not keep a health probe
//! waiting. With a plain cap of 64 slots and a 10 s head deadline, the
//! probe once waited 23 s.
//!
//! Every loop here is bounded: the clients stop when the test says so or
//! after [`CLIENTS_FOR_AT_MOST`], whichever comes first.

#![allow(clippy::unwrap_used)]

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use proxops_http::{Reply, Request, Route, StatusServer};

const TRICKLING: usize = 200;
const IDLE: usize = 130;
/// The clients stop on their own after this, whatever the test does.
const CLIENTS_FOR_AT_MOST: Duration = Duration::from_secs(60);
/// What a probe takes, from connect to the last byte of the answer, in
/// the middle of the probes: a few milliseconds when nothing holds it up.
const PROBE_BUDGET: Duration = Duration::from_millis(100);
/// What the slowest probe may take. A probe that waited for a slot would
/// wait for a slow client's head deadline (3 s); one scheduler hiccup on
/// a busy two-core machine (tests run beside this one) is far less.
const SLOWEST_BUDGET: Duration = Duration::from_secs(1);

fn source() -> proxops_http::Source {
    Arc::new(|request: &Request<'_>, _now| match request.route {
        Route::Healthz => Reply::new(200, "text/plain; charset=utf-8", "ok\n"),
        _ => Reply::new(200, "text/plain; charset=utf-8", "other\n"),
    })
}

/// Connections the clients hold open right now, and whether to go on.
#[derive(Default)]
struct Crowd {
    stop: AtomicBool,
    open: AtomicUsize,
    reconnects: AtomicUsize,
}

impl Crowd {
    fn going(&self, started: Instant) -> bool {
        !self.stop.load(Ordering::SeqCst) && started.elapsed() < CLIENTS_FOR_AT_MOST
    }
}

/// A connection that sends nothing (`trickle: false`) or a request head one
/// byte per round (`trickle: true`), never finishing it.
struct Peer {
    stream: Option<TcpStream>,
    sent: usize,
}

const ENDLESS_HEAD: &[u8] = b"GET /status HTTP/1.1\r\nHost: x\r\nX-Slow: ";

impl Peer {
    fn connect(addr: SocketAddr) -> Option<TcpStream> {
        let s = TcpStream::connect_timeout(&addr, Duration::from_secs(1)).ok()?;
        s.set_nonblocking(true).ok()?;
        Some(s)
    }

    /// One round: notices a close by the server and reconnects; sends one
    /// byte if trickling. Returns whether it is connected afterwards.
    fn round(&mut self, addr: SocketAddr, trickle: bool, crowd: &Crowd) -> bool {
        if let Some(s) = &mut self.stream {
            let mut buf = [0u8; 512];
            let closed = match s.read(&mut buf) {
                Ok(_) => true, // an answer (408) or end of stream: done with it
                Err(e) if e.kind() == ErrorKind::WouldBlock => false,
                Err(_) => true,
            };
            let failed = trickle && {
                let byte = ENDLESS_HEAD.get(self.sent).copied().unwrap_or(b'a');
                match s.write(&[byte]) {
                    Ok(n) => {
                        self.sent += n;
                        false
                    }
                    Err(e) => e.kind() != ErrorKind::WouldBlock,
                }
            };
            if closed || failed {
                self.stream = None;
                crowd.open.fetch_sub(1, Ordering::SeqCst);
            }
        }
        if self.stream.is_none() {
            self.stream = Peer::connect(addr);
            self.sent = 0;
            if self.stream.is_some() {
                crowd.open.fetch_add(1, Ordering::SeqCst);
                crowd.reconnects.fetch_add(1, Ordering::SeqCst);
            }
        }
        self.stream.is_some()
    }
}

/// `n` peers driven by one thread, a round every `every`, until told to stop.
fn crowd_of(
    n: usize,
    trickle: bool,
    every: Duration,
    addr: SocketAddr,
    crowd: Arc<Crowd>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let started = Instant::now();
        let mut peers: Vec<Peer> = (0..n)
            .map(|_| Peer {
                stream: None,
                sent: 0,
            })
            .collect();
        while crowd.going(started) {
            for p in &mut peers {
                p.round(addr, trickle, &crowd);
            }
            std::thread::sleep(every);
        }
    })
}

/// One probe: connect, ask `/healthz`, read the whole answer; how long it
/// took and what came back.
fn probe(addr: SocketAddr) -> (Duration, String) {
    let started = Instant::now();
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s.write_all(b"GET /healthz HTTP/1.1\r\nHost: probe\r\n\r\n")
        .unwrap();
    let mut answer = String::new();
    let _ = s.read_to_string(&mut answer);
    (started.elapsed(), answer)
}

#[test]
fn healthz_is_answered_in_milliseconds_while_200_slow_and_130_idle_clients_hold_on() {
    let server = StatusServer::start("127.0.0.1:0", source()).unwrap();
    let addr = server.local_addr();
    assert!(addr.ip().is_loopback());

    let crowd = Arc::new(Crowd::default());
    let trickling = crowd_of(
        TRICKLING,
        true,
        Duration::from_millis(50),
        addr,
        Arc::clone(&crowd),
    );
    let idle = crowd_of(
        IDLE,
        false,
        Duration::from_millis(20),
        addr,
        Arc::clone(&crowd),
    );

    // Wait until the crowd is in: far more connections than the 64 slots.
    let deadline = Instant::now() + Duration::from_secs(20);
    while crowd.open.load(Ordering::SeqCst) < TRICKLING + IDLE - 10 {
        assert!(
            Instant::now() < deadline,
            "only {} of {} clients connected",
            crowd.open.load(Ordering::SeqCst),
            TRICKLING + IDLE
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // Let the slots fill and the churn start: every slot is taken by an
    // idle or trickling client from here on.
    std::thread::sleep(Duration::from_millis(500));

    let mut took = Vec::new();
    for _ in 0..20 {
        let (elapsed, answer) = probe(addr);
        assert!(
            answer.starts_with("HTTP/1.1 200 OK\r\n") && answer.ends_with("\r\n\r\nok\n"),
            "{answer:?}"
        );
        took.push(elapsed);
        std::thread::sleep(Duration::from_millis(25));
    }
    let still_open = crowd.open.load(Ordering::SeqCst);
    crowd.stop.store(true, Ordering::SeqCst);
    trickling.join().unwrap();
    idle.join().unwrap();

    let mut sorted = took.clone();
    sorted.sort();
    let (median, slowest) = (sorted[sorted.len() / 2], sorted[sorted.len() - 1]);
    eprintln!(
        "{} probes with {still_open} slow and idle clients connected: median {median:?}, slowest {slowest:?}",
        took.len()
    );
    assert!(
        median < PROBE_BUDGET && slowest < SLOWEST_BUDGET,
        "probes took {median:?} in the middle and {slowest:?} at most with {still_open} slow and idle clients connected (all: {took:?})"
    );
    // The crowd really was there while the probes ran.
    assert!(
        still_open > 64,
        "only {still_open} clients were connected at the end"
    );
    server.shutdown();
}
