//! The connections in flight: a capped table of slots, and who gives way
//! when it is full.
//!
//! A slot is held from `accept` to close. Each connection says which
//! phase it is in ([`Phase`]); when the table is full, a new connection
//! takes the slot of the one that has waited longest in the phase that
//! costs the server least to lose: first a connection whose answer is
//! already sent (lingering for the client to close), then one still
//! sending its request head (idle or trickling), then one the server is
//! writing an answer to that the client does not read. A connection whose
//! answer is being rendered is never pushed out.
//!
//! So idle and slow peers can fill the table but cannot keep it: a health
//! probe that sends its head at once is served within milliseconds
//! whatever 200 trickling or idle clients do, where a plain cap made it
//! wait for a slot to time out (64 slots × the header deadline).
//!
//! Must never: count more slots than the cap, push out a connection whose
//! answer is being rendered, or block while holding the table's lock.

use std::collections::BTreeMap;
use std::net::{Shutdown, TcpStream};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// Where a connection is in its short life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Phase {
    /// The answer is sent; reading what the client still sends.
    Linger,
    /// Reading the request head (and a webhook's body).
    Head,
    /// Writing the answer.
    Write,
    /// Rendering the answer: never pushed out.
    Render,
}

impl Phase {
    /// Whether a connection in this phase may be pushed out for a new one.
    fn evictable(self) -> bool {
        self != Phase::Render
    }
}

/// The table of slots, shared by the accept loop and the connections.
pub(crate) struct Slots {
    cap: usize,
    table: Mutex<Table>,
    freed: Condvar,
}

#[derive(Default)]
struct Table {
    next_id: u64,
    held: BTreeMap<u64, Held>,
}

struct Held {
    phase: Phase,
    since: Instant,
    /// A second handle on the connection's socket: shutting it down ends
    /// whatever read or write the connection's thread is blocked in.
    handle: Option<TcpStream>,
}

/// What [`Slots::claim`] did to make room.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Claimed {
    /// A slot was free.
    Free,
    /// The table was full: the connection that had waited longest in
    /// this phase was closed to make room.
    PushedOut(Phase),
}

impl Slots {
    pub(crate) fn new(cap: usize) -> Slots {
        Slots {
            cap: cap.max(1),
            table: Mutex::new(Table::default()),
            freed: Condvar::new(),
        }
    }

    fn table(&self) -> std::sync::MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A slot for `stream` (in [`Phase::Head`]), pushing out another
    /// connection when the table is full; `None` when it is full of
    /// connections being rendered and none ended within `wait`.
    pub(crate) fn claim(
        self: &Arc<Slots>,
        stream: &TcpStream,
        wait: Duration,
    ) -> Option<(Slot, Claimed)> {
        let mut table = self.table();
        let mut claimed = Claimed::Free;
        if table.held.len() >= self.cap {
            match table.oldest_evictable() {
                Some(id) => {
                    if let Some(out) = table.held.remove(&id) {
                        claimed = Claimed::PushedOut(out.phase);
                        if let Some(h) = out.handle {
                            let _ = h.shutdown(Shutdown::Both);
                        }
                    }
                }
                None => {
                    table = self
                        .freed
                        .wait_timeout(table, wait)
                        .unwrap_or_else(PoisonError::into_inner)
                        .0;
                    if table.held.len() >= self.cap {
                        return None;
                    }
                }
            }
        }
        let id = table.next_id;
        table.next_id += 1;
        table.held.insert(
            id,
            Held {
                phase: Phase::Head,
                since: Instant::now(),
                handle: stream.try_clone().ok(),
            },
        );
        Some((
            Slot {
                slots: Arc::clone(self),
                id,
            },
            claimed,
        ))
    }

    /// Slots held now.
    #[cfg(test)]
    pub(crate) fn held(&self) -> usize {
        self.table().held.len()
    }
}

impl Table {
    /// The connection to push out: the lowest phase, and in it the one
    /// that has been there longest.
    fn oldest_evictable(&self) -> Option<u64> {
        self.held
            .iter()
            .filter(|(_, h)| h.phase.evictable())
            .min_by_key(|(id, h)| (h.phase, h.since, **id))
            .map(|(id, _)| *id)
    }
}

/// One connection's place in the table, given back on drop (also when its
/// thread panics).
pub(crate) struct Slot {
    slots: Arc<Slots>,
    id: u64,
}

impl Slot {
    /// The connection moves on to `phase` (its wait starts again).
    pub(crate) fn enter(&self, phase: Phase) {
        if let Some(h) = self.slots.table().held.get_mut(&self.id) {
            h.phase = phase;
            h.since = Instant::now();
        }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        // Already gone when it was pushed out.
        self.slots.table().held.remove(&self.id);
        self.slots.freed.notify_one();
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::net::TcpListener;

    use super::*;

    /// A connected pair: (the server's end, the client's end).
    fn pair(listener: &TcpListener) -> (TcpStream, TcpStream) {
        let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, _) = listener.accept().unwrap();
        (server, client)
    }

    fn closed_by_server(client: &mut TcpStream) -> bool {
        use std::io::Read;
        client
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        matches!(client.read(&mut [0u8; 1]), Ok(0) | Err(_))
    }

    #[test]
    fn a_full_table_pushes_out_the_longest_waiting_head_first_and_never_a_render() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let slots = Arc::new(Slots::new(3));
        let (s1, mut c1) = pair(&listener);
        let (s2, _c2) = pair(&listener);
        let (s3, _c3) = pair(&listener);
        let (one, _) = slots.claim(&s1, Duration::ZERO).unwrap();
        let (two, _) = slots.claim(&s2, Duration::ZERO).unwrap();
        let (three, _) = slots.claim(&s3, Duration::ZERO).unwrap();
        two.enter(Phase::Render);
        three.enter(Phase::Write);
        // Full: the head that waited longest (one) gives way, not the
        // answer being written (three) nor the one being rendered (two).
        let (s4, _c4) = pair(&listener);
        let (four, how) = slots.claim(&s4, Duration::ZERO).unwrap();
        assert_eq!(how, Claimed::PushedOut(Phase::Head));
        assert!(closed_by_server(&mut c1));
        assert_eq!(slots.held(), 3);
        drop(one);
        assert_eq!(slots.held(), 3, "a pushed-out slot is not given back twice");
        // Next a slow reader's answer, then nothing: the render stays.
        four.enter(Phase::Render);
        let (s5, _c5) = pair(&listener);
        let (five, how) = slots.claim(&s5, Duration::ZERO).unwrap();
        assert_eq!(how, Claimed::PushedOut(Phase::Write));
        five.enter(Phase::Render);
        let (s6, _c6) = pair(&listener);
        assert!(slots.claim(&s6, Duration::from_millis(10)).is_none());
        drop(two);
        let (_six, how) = slots.claim(&s6, Duration::ZERO).unwrap();
        assert_eq!(how, Claimed::Free);
        drop(three);
    }

    #[test]
    fn a_lingering_connection_gives_way_before_a_head() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let slots = Arc::new(Slots::new(2));
        let (s1, _c1) = pair(&listener);
        let (s2, _c2) = pair(&listener);
        let (_head, _) = slots.claim(&s1, Duration::ZERO).unwrap();
        let (done, _) = slots.claim(&s2, Duration::ZERO).unwrap();
        done.enter(Phase::Linger);
        let (s3, _c3) = pair(&listener);
        let (_new, how) = slots.claim(&s3, Duration::ZERO).unwrap();
        assert_eq!(how, Claimed::PushedOut(Phase::Linger));
    }
}
