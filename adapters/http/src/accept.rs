//! The accept loop: takes every connection, gives it a slot (pushing out
//! an idle or slow one when all are taken, [`crate::slots`]), hands it to
//! its own short-lived thread, and outlives running out of file
//! descriptors.
//!
//! Owns the back-off when `accept` fails for want of a
//! resource (`EMFILE`, `ENFILE`, `ENOBUFS`, `ENOMEM`: the connection stays
//! queued in the kernel; retrying at once would spin), and the notice that
//! the loop ended without being asked to, which the process turns into a
//! non-zero exit so its service manager restarts it.
//!
//! Must never: end because one connection or one `accept` failed, hold
//! more connections than the cap, or wait on anything without looking at
//! the stop flag at least every [`POLL`].

use std::io;
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::slots::{Slot, Slots};
use crate::{ServerEvent, ServerOptions, Source, conn};

/// How long a wait (for a slot, or out a back-off) goes before it looks at
/// the stop flag again.
pub(crate) const POLL: Duration = Duration::from_millis(100);

/// The first wait after a failed `accept`, doubled on each failure in a
/// row up to [`BACKOFF_MAX`] (the values of Go's net/http: short enough
/// that a freed descriptor is used within a second, long enough not to
/// spin on a full table).
const BACKOFF_FIRST: Duration = Duration::from_millis(5);
const BACKOFF_MAX: Duration = Duration::from_secs(1);

/// A connection thread needs little stack: it parses one request line and
/// writes one answer rendered elsewhere.
const CONNECTION_STACK: usize = 256 * 1024;

/// Linux `errno` values of `accept(2)` that mean the listener itself is
/// unusable (`EBADF`, `EINVAL`: not listening, `ENOTSOCK`, `EFAULT`):
/// retrying cannot help, so the loop ends and the process restarts.
const FATAL_ERRNO: [i32; 4] = [9, 22, 88, 14];

/// Linux `errno` values of `accept(2)` that mean "out of a resource"
/// (`EMFILE`, `ENFILE`, `ENOBUFS`, `ENOMEM`).
const RESOURCE_ERRNO: [i32; 4] = [24, 23, 105, 12];

/// Where the loop takes connections from: the listener, or in tests a
/// scripted source of failures.
pub(crate) trait Incoming: Send + 'static {
    fn accept(&self) -> io::Result<TcpStream>;
}

impl Incoming for TcpListener {
    fn accept(&self) -> io::Result<TcpStream> {
        TcpListener::accept(self).map(|(stream, _)| stream)
    }
}

/// What the loop, its connections and the [`crate::StatusServer`] share.
pub(crate) struct Shared {
    pub(crate) stop: AtomicBool,
    source: Source,
    options: ServerOptions,
    slots: Arc<Slots>,
    failure: Mutex<Option<String>>,
}

impl Shared {
    pub(crate) fn new(source: Source, options: ServerOptions) -> Shared {
        Shared {
            stop: AtomicBool::new(false),
            source,
            slots: Arc::new(Slots::new(options.limits.max_connections)),
            options,
            failure: Mutex::new(None),
        }
    }

    /// Why the loop ended without being asked to, if it did.
    pub(crate) fn failure(&self) -> Option<String> {
        self.failure
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn stopping(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }

    fn tell(&self, event: &ServerEvent) {
        if let Some(observer) = &self.options.observer {
            observer(event);
        }
    }
}

/// The body of the serving thread: the loop, watched.
pub(crate) fn run(incoming: Box<dyn Incoming>, shared: Arc<Shared>) {
    let mut watch = EndWatch {
        shared: Arc::clone(&shared),
        outcome: None,
    };
    watch.outcome = Some(accept_loop(incoming.as_ref(), &shared));
}

/// Records why the serving thread ended, whether the loop returned or
/// panicked: a drop guard, so a panic is seen too.
struct EndWatch {
    shared: Arc<Shared>,
    /// `None` while the loop runs (still `None` after a panic).
    outcome: Option<Result<(), String>>,
}

impl Drop for EndWatch {
    fn drop(&mut self) {
        let reason = match self.outcome.take() {
            Some(Ok(())) => return,
            Some(Err(reason)) => reason,
            None => "the serving thread panicked".to_owned(),
        };
        *self
            .shared
            .failure
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(reason.clone());
        self.shared.tell(&ServerEvent::Ended { reason });
    }
}

/// Accepts until asked to stop (`Ok`) or the listener is unusable (`Err`
/// with the reason).
fn accept_loop(incoming: &dyn Incoming, shared: &Arc<Shared>) -> Result<(), String> {
    let mut backoff = Backoff::default();
    loop {
        if shared.stopping() {
            return Ok(());
        }
        match incoming.accept() {
            Ok(stream) => {
                if shared.stopping() {
                    // The connection that woke us to stop.
                    return Ok(());
                }
                if let Some(failures) = backoff.reset() {
                    shared.tell(&ServerEvent::AcceptRecovered { failures });
                }
                let Some(slot) = claim(shared, &stream) else {
                    // Stopping while every slot was rendering.
                    return Ok(());
                };
                let conn_shared = Arc::clone(shared);
                let spawned = std::thread::Builder::new()
                    .name("proxops-http-conn".into())
                    .stack_size(CONNECTION_STACK)
                    .spawn(move || {
                        let s = &conn_shared;
                        conn::serve(stream, &slot, &s.source, &s.options);
                    });
                if let Err(e) = spawned {
                    // Out of threads is out of a resource: the connection
                    // is dropped (closed), the loop backs off.
                    wait_out(shared, &mut backoff, &e);
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if e.raw_os_error().is_some_and(|n| FATAL_ERRNO.contains(&n)) => {
                return Err(format!("accept failed: {e}"));
            }
            Err(e) => wait_out(shared, &mut backoff, &e),
        }
    }
}

/// A slot for a connection just accepted: a free one, or the one of the
/// connection that has waited longest in the cheapest phase to lose
/// ([`crate::slots`]). Waits only while every slot is rendering an answer;
/// `None` once asked to stop.
fn claim(shared: &Shared, stream: &TcpStream) -> Option<Slot> {
    loop {
        if let Some((slot, _)) = shared.slots.claim(stream, POLL) {
            return Some(slot);
        }
        if shared.stopping() {
            return None;
        }
    }
}

/// One failure more: say so on the first of a run, then wait.
fn wait_out(shared: &Shared, backoff: &mut Backoff, error: &io::Error) {
    let delay = backoff.next();
    if backoff.failures == 1 {
        let resource = error
            .raw_os_error()
            .is_some_and(|n| RESOURCE_ERRNO.contains(&n));
        shared.tell(&ServerEvent::AcceptFailing {
            error: error.to_string(),
            out_of_resources: resource,
            retry_in: delay,
        });
    }
    let until = Instant::now() + delay;
    while !shared.stopping() {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return;
        }
        std::thread::sleep(left.min(POLL));
    }
}

/// Failures of `accept` in a row and the next wait.
#[derive(Default)]
struct Backoff {
    failures: u64,
    delay: Duration,
}

impl Backoff {
    fn next(&mut self) -> Duration {
        self.failures += 1;
        self.delay = if self.delay.is_zero() {
            BACKOFF_FIRST
        } else {
            (self.delay * 2).min(BACKOFF_MAX)
        };
        self.delay
    }

    /// Clears the run; `Some(failures)` if there was one.
    fn reset(&mut self) -> Option<u64> {
        let failures = std::mem::take(&mut self.failures);
        self.delay = Duration::ZERO;
        (failures > 0).then_some(failures)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::collections::VecDeque;
    use std::io::{Read, Write};
    use std::net::SocketAddr;

    use super::*;
    use crate::{Reply, StatusServer};

    /// One scripted answer of `accept`.
    enum Step {
        Errno(i32),
        /// A real connection from this listener.
        Accept,
        Panic,
    }

    struct Scripted {
        listener: TcpListener,
        steps: Mutex<VecDeque<Step>>,
    }

    impl Incoming for Scripted {
        fn accept(&self) -> io::Result<TcpStream> {
            let step = self.steps.lock().unwrap().pop_front();
            match step {
                Some(Step::Errno(n)) => Err(io::Error::from_raw_os_error(n)),
                Some(Step::Accept) => self.listener.accept().map(|(s, _)| s),
                Some(Step::Panic) => panic!("injected failure in accept"),
                // EBADF: the listener is gone.
                None => Err(io::Error::from_raw_os_error(9)),
            }
        }
    }

    type Events = Arc<Mutex<Vec<ServerEvent>>>;

    /// Default limits, an observer that keeps every event, and a source
    /// that answers `ok`.
    fn recorded() -> (ServerOptions, Events, Source) {
        let events = Arc::new(Mutex::new(Vec::new()));
        let seen = Arc::clone(&events);
        let options = ServerOptions {
            observer: Some(Arc::new(move |e: &ServerEvent| {
                seen.lock().unwrap().push(e.clone());
            })),
            ..ServerOptions::default()
        };
        let source: Source = Arc::new(|_, _| Reply::new(200, "text/plain", "ok\n"));
        (options, events, source)
    }

    /// A server over `steps`, its address, and the events it told.
    fn scripted(steps: Vec<Step>) -> (StatusServer, SocketAddr, Events) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let (options, events, source) = recorded();
        let incoming = Scripted {
            listener,
            steps: Mutex::new(steps.into()),
        };
        let server = StatusServer::serve(Box::new(incoming), addr, source, options).unwrap();
        (server, addr, events)
    }

    fn wait_for_failure(server: &StatusServer) -> String {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(f) = server.failure() {
                return f;
            }
            assert!(Instant::now() < deadline, "the serving thread did not end");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    #[test]
    fn running_out_of_descriptors_is_waited_out_and_the_next_connection_is_served() {
        const EMFILE: i32 = 24;
        // The connection is made before the loop reaches it: it waits in
        // the kernel's queue through the failures, as in real life.
        let (server, addr, events) = scripted(vec![
            Step::Errno(EMFILE),
            Step::Errno(EMFILE),
            Step::Errno(EMFILE),
            Step::Accept,
        ]);
        let mut client = TcpStream::connect(addr).unwrap();
        client
            .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            .unwrap();
        let mut answer = String::new();
        client.read_to_string(&mut answer).unwrap();
        assert!(answer.starts_with("HTTP/1.1 200 OK\r\n"), "{answer}");
        assert!(answer.ends_with("\r\n\r\nok\n"), "{answer}");

        // Then the script runs out: EBADF ends the loop.
        let failure = wait_for_failure(&server);
        assert!(failure.starts_with("accept failed: "), "{failure}");
        let events = events.lock().unwrap().clone();
        assert_eq!(events.len(), 3, "{events:?}");
        assert!(
            matches!(
                &events[0],
                ServerEvent::AcceptFailing { out_of_resources: true, retry_in, error }
                    if *retry_in == BACKOFF_FIRST && error.contains("Too many open files")
            ),
            "{events:?}"
        );
        assert_eq!(events[1], ServerEvent::AcceptRecovered { failures: 3 });
        assert_eq!(events[2], ServerEvent::Ended { reason: failure });
    }

    #[test]
    fn a_panic_in_the_serving_thread_is_reported_as_its_end() {
        let (server, _, events) = scripted(vec![Step::Panic]);
        assert_eq!(wait_for_failure(&server), "the serving thread panicked");
        assert_eq!(
            events.lock().unwrap().clone(),
            vec![ServerEvent::Ended {
                reason: "the serving thread panicked".into()
            }]
        );
    }

    #[test]
    fn an_asked_for_stop_is_not_a_failure() {
        let (options, events, source) = recorded();
        let server = StatusServer::start_with("127.0.0.1:0", source, options).unwrap();
        let shared = Arc::clone(&server.shared);
        server.shutdown();
        assert_eq!(shared.failure(), None);
        assert!(events.lock().unwrap().is_empty());
    }

    #[test]
    fn the_backoff_doubles_to_a_second_and_a_success_resets_it() {
        let mut b = Backoff::default();
        let waits: Vec<u128> = (0..10).map(|_| b.next().as_millis()).collect();
        assert_eq!(waits, [5, 10, 20, 40, 80, 160, 320, 640, 1000, 1000]);
        assert_eq!(b.reset(), Some(10));
        assert_eq!(b.reset(), None);
        assert_eq!(b.next(), BACKOFF_FIRST);
    }
}
