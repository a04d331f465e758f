//! A watch's buffer: the encoded events waiting for its client, bounded in
//! events and in bytes.
//!
//! kube-apiserver's watch cache gives each watcher a channel of a few events
//! and drops a watcher whose channel stays full. The events of a large object
//! make a few events a lot of memory, and every watch holds its own copy, so
//! here the bound is in bytes as well. A watch closed for falling behind
//! drops what its client has not taken at once: the client gets those
//! events again when it watches from the last revision it saw, and a client
//! that never reads again would otherwise hold them until its connection
//! dies.

use std::collections::VecDeque;
use std::pin::pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Waker};

use bytes::Bytes;
use tokio::sync::Notify;

struct Shared {
    state: Mutex<State>,
    /// Wakes the sender when the client takes a line or goes away.
    taken: Notify,
    max_events: usize,
    max_bytes: usize,
    /// What the server's watches buffer together, for `TestEnv::held_bytes`.
    total: Arc<AtomicUsize>,
}

#[derive(Default)]
struct State {
    lines: VecDeque<Bytes>,
    bytes: usize,
    /// No line comes after those queued.
    ended: bool,
    /// The client is gone.
    gone: bool,
    waker: Option<Waker>,
}

impl Shared {
    /// Nothing panics while holding the lock, so a poisoned one still holds
    /// consistent data.
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Drops every queued line, keeping the server's total right.
    fn clear(&self, state: &mut State) {
        self.total.fetch_sub(state.bytes, Ordering::Relaxed);
        state.lines.clear();
        state.bytes = 0;
    }
}

/// A new buffer of at most `max_events` lines and `max_bytes` bytes; a line
/// larger than `max_bytes` still goes into an empty buffer, so any event can
/// be sent. What it holds is added to `total`.
pub(crate) fn channel(max_events: usize, max_bytes: usize, total: Arc<AtomicUsize>) -> (Sender, Receiver) {
    let shared = Arc::new(Shared {
        state: Mutex::new(State::default()),
        taken: Notify::new(),
        max_events: max_events.max(1),
        max_bytes,
        total,
    });
    (
        Sender {
            shared: Arc::clone(&shared),
        },
        Receiver { shared },
    )
}

/// Why a line was not queued.
#[derive(Debug)]
pub(crate) enum TrySendError {
    /// The buffer has no room for it; the line comes back.
    Full(Bytes),
    /// The client is gone.
    Closed,
}

/// The client is gone.
#[derive(Debug)]
pub(crate) struct Closed;

/// The watch's end: it queues lines, and the stream ends when it is dropped.
pub(crate) struct Sender {
    shared: Arc<Shared>,
}

impl Sender {
    /// Queues `line` if the buffer has room for it now.
    pub(crate) fn try_send(&self, line: Bytes) -> Result<(), TrySendError> {
        let shared = &self.shared;
        let mut state = shared.lock();
        if state.gone {
            return Err(TrySendError::Closed);
        }
        let room = state.lines.is_empty()
            || (state.lines.len() < shared.max_events
                && state.bytes.saturating_add(line.len()) <= shared.max_bytes);
        if !room {
            return Err(TrySendError::Full(line));
        }
        state.bytes += line.len();
        shared.total.fetch_add(line.len(), Ordering::Relaxed);
        state.lines.push_back(line);
        let waker = state.waker.take();
        drop(state);
        if let Some(w) = waker {
            w.wake();
        }
        Ok(())
    }

    /// Queues `line` once the client has made room for it, however long that takes.
    pub(crate) async fn send(&self, mut line: Bytes) -> Result<(), Closed> {
        loop {
            // Registered before looking, so a line taken in between still wakes us.
            let mut taken = pin!(self.shared.taken.notified());
            taken.as_mut().enable();
            match self.try_send(line) {
                Ok(()) => return Ok(()),
                Err(TrySendError::Closed) => return Err(Closed),
                Err(TrySendError::Full(l)) => line = l,
            }
            taken.await;
        }
    }

    /// Resolves once the client is gone.
    pub(crate) async fn closed(&self) {
        loop {
            let mut taken = pin!(self.shared.taken.notified());
            taken.as_mut().enable();
            if self.shared.lock().gone {
                return;
            }
            taken.await;
        }
    }

    /// Ends the stream now, dropping what the client has not taken: for a
    /// client too far behind to be waited for.
    pub(crate) fn abandon(&self) {
        let mut state = self.shared.lock();
        self.shared.clear(&mut state);
        state.ended = true;
        let waker = state.waker.take();
        drop(state);
        if let Some(w) = waker {
            w.wake();
        }
    }
}

impl Drop for Sender {
    fn drop(&mut self) {
        let mut state = self.shared.lock();
        state.ended = true;
        let waker = state.waker.take();
        drop(state);
        if let Some(w) = waker {
            w.wake();
        }
    }
}

/// The client's end: the lines in order, then the end of the stream.
pub(crate) struct Receiver {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Receiver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = self.shared.lock();
        f.debug_struct("Receiver")
            .field("lines", &state.lines.len())
            .field("bytes", &state.bytes)
            .field("ended", &state.ended)
            .finish()
    }
}

impl Receiver {
    /// The next line, `None` once the watch has ended and every line is taken.
    pub(crate) fn poll_recv(&mut self, cx: &mut Context<'_>) -> Poll<Option<Bytes>> {
        let shared = &self.shared;
        let mut state = shared.lock();
        if let Some(line) = state.lines.pop_front() {
            state.bytes -= line.len();
            shared.total.fetch_sub(line.len(), Ordering::Relaxed);
            drop(state);
            shared.taken.notify_waiters();
            return Poll::Ready(Some(line));
        }
        if state.ended {
            return Poll::Ready(None);
        }
        state.waker = Some(cx.waker().clone());
        Poll::Pending
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let mut state = self.shared.lock();
        self.shared.clear(&mut state);
        state.gone = true;
        drop(state);
        self.shared.taken.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn recv(rx: &mut Receiver) -> Poll<Option<Bytes>> {
        rx.poll_recv(&mut Context::from_waker(Waker::noop()))
    }

    #[test]
    fn the_buffer_holds_at_most_its_bytes_but_always_one_line() {
        let total = Arc::new(AtomicUsize::new(0));
        let (tx, mut rx) = channel(1000, 10, Arc::clone(&total));
        assert!(tx.try_send(Bytes::from_static(b"0123456")).is_ok());
        assert!(matches!(
            tx.try_send(Bytes::from_static(b"0123")),
            Err(TrySendError::Full(_))
        ));
        assert!(tx.try_send(Bytes::from_static(b"012")).is_ok());
        assert_eq!(total.load(Ordering::Relaxed), 10);
        assert!(matches!(recv(&mut rx), Poll::Ready(Some(l)) if l.len() == 7));
        assert!(matches!(recv(&mut rx), Poll::Ready(Some(l)) if l.len() == 3));
        // Larger than the whole budget: it waits for an empty buffer, then goes.
        assert!(tx.try_send(Bytes::from(vec![b'x'; 100])).is_ok());
        assert_eq!(total.load(Ordering::Relaxed), 100);
        assert!(matches!(recv(&mut rx), Poll::Ready(Some(_))));
        assert!(recv(&mut rx).is_pending());
        drop(tx);
        assert!(matches!(recv(&mut rx), Poll::Ready(None)));
    }

    #[test]
    fn an_abandoned_watch_ends_at_once_and_frees_its_lines() {
        let total = Arc::new(AtomicUsize::new(0));
        let (tx, mut rx) = channel(1000, 100, Arc::clone(&total));
        assert!(tx.try_send(Bytes::from_static(b"one")).is_ok());
        assert!(tx.try_send(Bytes::from_static(b"two")).is_ok());
        tx.abandon();
        assert_eq!(total.load(Ordering::Relaxed), 0);
        assert!(matches!(recv(&mut rx), Poll::Ready(None)));
    }

    #[test]
    fn a_client_that_goes_away_frees_its_lines() {
        let total = Arc::new(AtomicUsize::new(0));
        let (tx, rx) = channel(2, usize::MAX, Arc::clone(&total));
        assert!(tx.try_send(Bytes::from_static(b"one")).is_ok());
        assert!(tx.try_send(Bytes::from_static(b"two")).is_ok());
        assert!(matches!(
            tx.try_send(Bytes::from_static(b"three")),
            Err(TrySendError::Full(_))
        ));
        drop(rx);
        assert_eq!(total.load(Ordering::Relaxed), 0);
        assert!(matches!(
            tx.try_send(Bytes::from_static(b"four")),
            Err(TrySendError::Closed)
        ));
    }
}
