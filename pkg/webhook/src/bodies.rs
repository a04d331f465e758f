//! The memory request bodies may hold, shared by every connection.
//!
//! A body draws on the budget as its bytes arrive, never for what its
//! `Content-Length` promises: a client that announces 15 MiB and trickles a
//! byte a second holds a few bytes, not 15 MiB. What a body has drawn stays
//! drawn until its review is answered, since its bytes are in memory until
//! then.
//!
//! When a body's next bytes do not fit, it waits (at most twice
//! [`stalled_body`](crate::server::Limits::stalled_body), then 429) while
//! room is made for it:
//!
//! * a body that has gone `stalled_body` without a byte gives its bytes back
//!   (408): kube-apiserver sends a review in one go, and a client that sends
//!   most of a large body and then stalls would otherwise hold it until the
//!   body deadline;
//! * then bodies that promised more than the waiting one give theirs back
//!   (429), the largest promise first, only as many as the waiting body
//!   needs: under pressure the smaller reviews, which finish and free their
//!   memory soonest, go first, so uploads that fill the budget together and
//!   then all wait for more cannot lock each other and every review out.
//!   A body without a `Content-Length` counts as promising the most a
//!   review may be.
//!
//! The budget is a fair (FIFO) semaphore of bytes: bytes freed go to the
//! bodies already waiting before anyone new.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// The budget and the bodies drawing on it.
pub(crate) struct Bodies {
    shared: Arc<Shared>,
}

struct Shared {
    budget: Arc<Semaphore>,
    stalled_body: Duration,
    /// What the readers' progress times count from.
    epoch: Instant,
    readers: Mutex<HashMap<u64, Arc<Reader>>>,
    next_id: AtomicU64,
}

/// One body being read, as the others see it.
struct Reader {
    /// What its `Content-Length` promised, or the most a review may be.
    promised: usize,
    /// Why it was cut off: [`NOT_CUT`], [`STALLED`] or [`MADE_ROOM`].
    cut_because: AtomicU8,
    /// Milliseconds from the epoch to the last byte, or to the end of its
    /// last wait for the budget.
    last_progress_ms: AtomicU64,
    waiting: AtomicBool,
    held_bytes: AtomicUsize,
    cut: CancellationToken,
}

const NOT_CUT: u8 = 0;
const STALLED: u8 = 1;
const MADE_ROOM: u8 = 2;

/// Why a body was cut off.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CutOff {
    /// It went the stall period without a byte while others waited.
    Stalled,
    /// It promised more than a body that waited, and gave way to it.
    MadeRoom,
}

impl Reader {
    fn cut(&self, because: u8) {
        if self
            .cut_because
            .compare_exchange(NOT_CUT, because, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
        {
            self.cut.cancel();
        }
    }

    fn is_cut(&self) -> bool {
        self.cut_because.load(Ordering::Relaxed) != NOT_CUT
    }
}

/// Whether a body got the bytes it asked for.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Taken {
    Yes,
    /// The budget stayed short for the whole wait.
    Short,
    /// The body was cut off while it waited; [`Reading::cut_off`] is ready.
    CutOff,
}

/// A body's share of the budget, given back when dropped.
#[derive(Debug)]
pub(crate) struct Held(#[allow(dead_code, reason = "held for its drop")] Option<OwnedSemaphorePermit>);

/// One body being read: registered with the others until it is dropped or
/// [finished](Reading::finish).
pub(crate) struct Reading {
    shared: Arc<Shared>,
    id: u64,
    me: Arc<Reader>,
    held: Option<OwnedSemaphorePermit>,
}

impl Bodies {
    /// A budget of `bytes`, shared by bodies that may stall for
    /// `stalled_body` while others wait.
    pub(crate) fn new(bytes: usize, stalled_body: Duration) -> Self {
        Bodies {
            shared: Arc::new(Shared {
                budget: Arc::new(Semaphore::new(bytes.clamp(1, Semaphore::MAX_PERMITS))),
                stalled_body,
                epoch: Instant::now(),
                readers: Mutex::new(HashMap::new()),
                next_id: AtomicU64::new(0),
            }),
        }
    }

    /// Registers a body about to be read, which promised `promised` bytes.
    pub(crate) fn start(&self, promised: usize) -> Reading {
        let id = self.shared.next_id.fetch_add(1, Ordering::Relaxed);
        let me = Arc::new(Reader {
            promised,
            cut_because: AtomicU8::new(NOT_CUT),
            last_progress_ms: AtomicU64::new(self.shared.now_ms()),
            waiting: AtomicBool::new(false),
            held_bytes: AtomicUsize::new(0),
            cut: CancellationToken::new(),
        });
        self.shared.readers.lock().insert(id, me.clone());
        Reading {
            shared: self.shared.clone(),
            id,
            me,
            held: None,
        }
    }
}

impl Shared {
    fn now_ms(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// Cuts off the bodies that must give way to `me`, which waits for
    /// `needed` bytes: every stalled one, then those that promised more than
    /// `me`, the largest promise first, until enough is on its way back.
    fn make_room(&self, me: &Reader, needed: usize) {
        let now = self.now_ms();
        let stalled = u64::try_from(self.stalled_body.as_millis()).unwrap_or(u64::MAX);
        let readers = self.readers.lock();
        let others = || {
            readers
                .values()
                .filter(|r| !std::ptr::eq(r.as_ref(), me) && r.held_bytes.load(Ordering::Relaxed) > 0)
        };
        for reader in others() {
            if !reader.waiting.load(Ordering::Relaxed)
                && now.saturating_sub(reader.last_progress_ms.load(Ordering::Relaxed)) >= stalled
            {
                reader.cut(STALLED);
            }
        }
        // Bodies already cut give their bytes back once their readers see it.
        let mut coming: usize = self.budget.available_permits()
            + others()
                .filter(|r| r.is_cut())
                .map(|r| r.held_bytes.load(Ordering::Relaxed))
                .sum::<usize>();
        if coming >= needed {
            return;
        }
        let mut larger: Vec<&Arc<Reader>> = others()
            .filter(|r| !r.is_cut() && r.promised > me.promised)
            .collect();
        larger.sort_by_key(|r| std::cmp::Reverse((r.promised, r.held_bytes.load(Ordering::Relaxed))));
        for reader in larger {
            if coming >= needed {
                break;
            }
            reader.cut(MADE_ROOM);
            coming += reader.held_bytes.load(Ordering::Relaxed);
        }
    }

    /// Makes room for `me` as bodies stall or start to wait, until `until`.
    async fn make_room_until(&self, me: &Reader, needed: usize, until: Instant) {
        // Short: a small review waits this long at most for a large upload
        // to start waiting itself.
        let tick = Duration::from_millis(10).min(self.stalled_body);
        loop {
            self.make_room(me, needed);
            let now = Instant::now();
            if now >= until {
                return;
            }
            tokio::time::sleep_until((now + tick).min(until)).await;
        }
    }
}

impl Reading {
    /// Ready once this body has been cut off, with why.
    pub(crate) async fn cut_off(&self) -> CutOff {
        self.me.cut.cancelled().await;
        if self.me.cut_because.load(Ordering::Relaxed) == STALLED {
            CutOff::Stalled
        } else {
            CutOff::MadeRoom
        }
    }

    /// Draws `bytes` that just arrived from the budget, waiting (at most
    /// twice the stall period, and not past `deadline`) while room is made
    /// when it is short.
    pub(crate) async fn take(&mut self, bytes: usize, deadline: Instant) -> Taken {
        self.me
            .last_progress_ms
            .store(self.shared.now_ms(), Ordering::Relaxed);
        // A frame is at most a few hundred KiB; the clamp only keeps the
        // conversion total.
        let permits = u32::try_from(bytes).unwrap_or(u32::MAX);
        if permits == 0 {
            return Taken::Yes;
        }
        let permit = match self.shared.budget.clone().try_acquire_many_owned(permits) {
            Ok(permit) => permit,
            Err(_) => {
                self.me.waiting.store(true, Ordering::Relaxed);
                let give_up = (Instant::now() + self.shared.stalled_body * 2).min(deadline);
                let waited = tokio::select! {
                    biased;
                    () = self.me.cut.cancelled() => Err(Taken::CutOff),
                    permit = self.shared.budget.clone().acquire_many_owned(permits) => permit.map_err(|_| Taken::Short),
                    () = self.shared.make_room_until(&self.me, bytes, give_up) => Err(Taken::Short),
                };
                self.me.waiting.store(false, Ordering::Relaxed);
                // Time spent waiting for the budget is not the client's stall.
                self.me
                    .last_progress_ms
                    .store(self.shared.now_ms(), Ordering::Relaxed);
                match waited {
                    Ok(permit) => permit,
                    Err(why) => return why,
                }
            }
        };
        self.me.held_bytes.fetch_add(bytes, Ordering::Relaxed);
        match &mut self.held {
            Some(held) => held.merge(permit),
            None => self.held = Some(permit),
        }
        Taken::Yes
    }

    /// The body is read: its bytes stay drawn, but it can no longer stall.
    pub(crate) fn finish(mut self) -> Held {
        Held(self.held.take())
    }
}

impl Drop for Reading {
    fn drop(&mut self) {
        self.shared.readers.lock().remove(&self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KIB: usize = 1024;

    #[tokio::test(start_paused = true)]
    async fn bytes_are_drawn_as_they_arrive_not_as_promised() {
        let bodies = Bodies::new(100 * KIB, Duration::from_secs(1));
        let far = Instant::now() + Duration::from_secs(30);
        // Twenty bodies that each sent a little hold a little each.
        let mut trickles: Vec<Reading> = (0..20).map(|_| bodies.start(100 * KIB)).collect();
        for reading in &mut trickles {
            assert_eq!(reading.take(10, far).await, Taken::Yes);
        }
        let mut large = bodies.start(100 * KIB);
        assert_eq!(large.take(99 * KIB, far).await, Taken::Yes);
        let held = large.finish();
        assert_eq!(
            bodies.shared.budget.available_permits(),
            100 * KIB - 99 * KIB - 200
        );
        drop(held);
        assert_eq!(bodies.shared.budget.available_permits(), 100 * KIB - 200);
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_that_stalls_while_another_waits_is_cut_off_and_its_bytes_freed() {
        let bodies = Bodies::new(100 * KIB, Duration::from_secs(1));
        let far = Instant::now() + Duration::from_secs(30);
        let mut stalled = bodies.start(100 * KIB);
        assert_eq!(stalled.take(90 * KIB, far).await, Taken::Yes);
        tokio::time::sleep(Duration::from_millis(300)).await;

        let mut arriving = bodies.start(100 * KIB);
        let started = Instant::now();
        let taken = tokio::spawn(async move {
            let taken = arriving.take(50 * KIB, far).await;
            (taken, arriving)
        });
        // The stalled body is cut once it has gone a whole stall period
        // without a byte; the caller then drops it, freeing its bytes.
        assert_eq!(stalled.cut_off().await, CutOff::Stalled);
        assert_eq!(started.elapsed(), Duration::from_millis(700));
        drop(stalled);
        let (taken, _arriving) = taken.await.unwrap();
        assert_eq!(taken, Taken::Yes);
    }

    #[tokio::test(start_paused = true)]
    async fn bodies_that_keep_arriving_are_not_cut_and_a_wait_ends_in_short() {
        let bodies = Bodies::new(100 * KIB, Duration::from_secs(1));
        let far = Instant::now() + Duration::from_secs(30);
        let mut busy = bodies.start(100 * KIB);
        assert_eq!(busy.take(90 * KIB, far).await, Taken::Yes);
        let keep_arriving = tokio::spawn(async move {
            for _ in 0..10 {
                tokio::time::sleep(Duration::from_millis(500)).await;
                assert_eq!(busy.take(1, far).await, Taken::Yes);
            }
            busy
        });
        let mut waiting = bodies.start(100 * KIB);
        let started = Instant::now();
        assert_eq!(waiting.take(50 * KIB, far).await, Taken::Short);
        assert_eq!(started.elapsed(), Duration::from_secs(2));
        let busy = keep_arriving.await.unwrap();
        assert!(
            !busy.me.cut.is_cancelled(),
            "a body that keeps arriving is never cut"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_wait_ends_at_the_body_deadline() {
        let bodies = Bodies::new(10, Duration::from_secs(1));
        let deadline = Instant::now() + Duration::from_millis(100);
        let mut full = bodies.start(10);
        assert_eq!(full.take(10, deadline).await, Taken::Yes);
        let mut waiting = bodies.start(10);
        // `full` is not stalled yet at the deadline.
        assert_eq!(waiting.take(5, deadline).await, Taken::Short);
        assert!(!full.me.cut.is_cancelled());
    }

    #[tokio::test(start_paused = true)]
    async fn larger_promises_give_way_to_a_smaller_body_largest_first_and_only_as_needed() {
        let bodies = Bodies::new(100 * KIB, Duration::from_secs(1));
        let far = Instant::now() + Duration::from_secs(30);
        // Three uploads fill the budget together and keep arriving.
        let mut largest = bodies.start(15 * 1024 * KIB);
        let mut large = bodies.start(10 * 1024 * KIB);
        let mut smaller = bodies.start(5 * 1024 * KIB);
        for reading in [&mut largest, &mut large, &mut smaller] {
            assert_eq!(reading.take(33 * KIB, far).await, Taken::Yes);
        }
        // A review of 3 MiB needs 20 KiB more than is free: the largest
        // promise alone gives way, at once.
        let mut review = bodies.start(3 * 1024 * KIB);
        let started = Instant::now();
        let taken = tokio::spawn(async move { (review.take(21 * KIB, far).await, review) });
        assert_eq!(largest.cut_off().await, CutOff::MadeRoom);
        assert_eq!(started.elapsed(), Duration::ZERO);
        drop(largest);
        let (taken, _review) = taken.await.unwrap();
        assert_eq!(taken, Taken::Yes);
        assert!(
            !large.me.is_cut() && !smaller.me.is_cut(),
            "only as many as needed give way"
        );
    }
}
