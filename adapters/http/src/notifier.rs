//! The notifier: a thread of its own that sends the events core's
//! [`Tracker`](proxops_core::notify::Tracker) finds to every target that
//! wants them, paced by core's [`Outbox`] (rate limit, retry with backoff).
//!
//! A cycle hands its events over a channel and goes on: nothing here can
//! block or fail a cycle. A target that does not answer costs this thread
//! at most [`SEND_TIMEOUT`] per attempt. What happens to every attempt is
//! told to the caller's [`DeliveryObserver`] (to log it and to put it in
//! the status store).
//!
//! Must never: log, echo or keep in an error a target's URL or token
//! (errors are classified into words of our own: `HTTP 500`, `connection
//! refused`, `timed out`), follow a redirect (it could carry the token
//! elsewhere), or read a body larger than it needs.

use std::sync::Arc;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::thread::JoinHandle;
use std::time::Duration;

use proxops_core::config::TargetKind;
use proxops_core::notify::{Event, Outbox, Retry, message};
use proxops_core::report::Delivery;
use proxops_core::secret::Secret;
use ureq::Agent;
use ureq::tls::{Certificate, RootCerts, TlsConfig};

use crate::unix_now;

/// One attempt's longest wait for an answer.
pub const SEND_TIMEOUT: Duration = Duration::from_secs(10);

/// The longest sleep of the thread when nothing is due.
const IDLE: Duration = Duration::from_secs(60);

/// Where to send: a target as configured, with its secrets.
#[derive(Clone, Debug)]
pub struct Target {
    pub name: String,
    pub kind: TargetKind,
    pub url: Secret,
    pub token: Option<Secret>,
    /// Only these clusters' events; empty: every cluster's.
    pub clusters: Vec<String>,
}

impl Target {
    fn wants(&self, e: &Event) -> bool {
        self.clusters.is_empty() || self.clusters.contains(&e.cluster)
    }
}

/// Told of every attempt: the target's name, the event, what became of
/// it, and how many messages wait for that target after it.
pub type DeliveryObserver = Arc<dyn Fn(&str, &Event, &Delivery, usize) + Send + Sync>;

/// The running notifier. Dropping it ends the thread once its current
/// attempt is over; messages still waiting are not sent.
pub struct Notifier {
    events: Sender<Vec<Event>>,
    _thread: JoinHandle<()>,
}

impl Notifier {
    /// Starts the thread for `targets`.
    pub fn start(targets: Vec<Target>, observer: DeliveryObserver) -> std::io::Result<Notifier> {
        let (events, rx) = mpsc::channel();
        let agent = agent();
        let thread = std::thread::Builder::new()
            .name("proxops-notify".into())
            .spawn(move || run(&agent, targets, &rx, &observer))?;
        Ok(Notifier {
            events,
            _thread: thread,
        })
    }

    /// Hands events over; returns at once.
    pub fn tell(&self, events: Vec<Event>) {
        if !events.is_empty() {
            // A thread that ended has nobody to tell: the events are lost,
            // never the cycle.
            let _ = self.events.send(events);
        }
    }
}

fn run(
    agent: &Agent,
    targets: Vec<Target>,
    rx: &Receiver<Vec<Event>>,
    observer: &DeliveryObserver,
) {
    let now = unix_now();
    let mut boxes: Vec<(Target, Outbox)> =
        targets.into_iter().map(|t| (t, Outbox::new(now))).collect();
    loop {
        let now = unix_now();
        for (target, outbox) in &mut boxes {
            while let Some(q) = outbox.next(now) {
                let event = q.event.clone();
                let delivery = match send(agent, target, &event) {
                    Ok(()) => {
                        outbox.sent();
                        Delivery::Sent
                    }
                    Err((error, retryable)) => Delivery::Failed {
                        gave_up: outbox.failed(unix_now(), retryable) == Retry::GaveUp,
                        error,
                    },
                };
                observer(&target.name, &event, &delivery, outbox.len());
            }
        }
        let wake = boxes.iter().filter_map(|(_, o)| o.wake_at(now)).min();
        let wait = wake.map_or(IDLE, |at| {
            Duration::from_secs(at.saturating_sub(now)).clamp(Duration::from_millis(200), IDLE)
        });
        match rx.recv_timeout(wait) {
            Ok(events) => {
                let now = unix_now();
                for e in events {
                    for (target, outbox) in boxes.iter_mut().filter(|(t, _)| t.wants(&e)) {
                        if let Some(lost) = outbox.push(e.clone(), now) {
                            observer(&target.name, &lost, &Delivery::Dropped, outbox.len());
                        }
                    }
                }
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return,
        }
    }
}

/// One attempt: `Err` with words of our own and whether a repeat may help.
fn send(agent: &Agent, target: &Target, event: &Event) -> Result<(), (String, bool)> {
    let m = message(target.kind, event);
    let url = format!("{}{}", target.url.expose().trim_end_matches('/'), m.path);
    let mut request = agent.post(&url).header("Content-Type", m.content_type);
    for (k, v) in &m.headers {
        request = request.header(*k, one_line(v));
    }
    if let Some(token) = &target.token {
        let (header, prefix) = m.token_header;
        request = request.header(header, format!("{prefix}{}", token.expose()));
    }
    match request.send(m.body.as_bytes()) {
        Ok(answer) => {
            let status = answer.status().as_u16();
            match status {
                200..=299 => Ok(()),
                429 | 500..=599 => Err((format!("HTTP {status}"), true)),
                _ => Err((format!("HTTP {status}"), false)),
            }
        }
        Err(e) => Err((classify(&e), true)),
    }
}

/// A transport error in our words: never ureq's text, which may hold the URL.
fn classify(e: &ureq::Error) -> String {
    match e {
        ureq::Error::Timeout(_) => "timed out".into(),
        ureq::Error::HostNotFound => "host not found".into(),
        ureq::Error::ConnectionFailed => "connection failed".into(),
        ureq::Error::Io(io) => match io.kind() {
            std::io::ErrorKind::ConnectionRefused => "connection refused".into(),
            std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock => "timed out".into(),
            std::io::ErrorKind::ConnectionReset => "connection reset".into(),
            _ => "network error".into(),
        },
        ureq::Error::Tls(_) | ureq::Error::Rustls(_) => "TLS handshake failed".into(),
        ureq::Error::BadUri(_) | ureq::Error::Http(_) => "the URL is not usable".into(),
        _ => "the request failed".into(),
    }
}

/// A header value on one line.
fn one_line(s: &str) -> String {
    s.replace(['\r', '\n'], " ")
}

/// The HTTP agent: the host's trust store (as for PVE's default), no
/// redirects, answers read whatever their status.
fn agent() -> Agent {
    let found = rustls_native_certs::load_native_certs();
    let certs: Vec<Certificate<'static>> = found
        .certs
        .iter()
        .map(|c| Certificate::from_der(c.as_ref()).to_owned())
        .collect();
    let roots = if certs.is_empty() {
        RootCerts::WebPki
    } else {
        RootCerts::new_with_certs(&certs)
    };
    let config = Agent::config_builder()
        .tls_config(TlsConfig::builder().root_certs(roots).build())
        .timeout_global(Some(SEND_TIMEOUT))
        .http_status_as_error(false)
        .max_redirects(0)
        .user_agent(concat!("proxops/", env!("CARGO_PKG_VERSION")))
        .build();
    Agent::new_with_config(config)
}
