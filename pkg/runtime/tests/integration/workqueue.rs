#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! One test per work-queue property, on tokio's paused clock.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kinject_runtime::controller::{
    Action, ControllerOptions, Error, Impl, ItemExponentialFailureRateLimiter, ObjectKey, Reason, Reconciler,
    Request, WorkQueue, default_controller_rate_limiter,
};
use tokio::time::{Instant, advance, timeout};
use tokio_util::sync::CancellationToken;

fn key(name: &str) -> ObjectKey {
    ObjectKey::new("ns", name)
}

fn queue() -> WorkQueue {
    WorkQueue::new("test", default_controller_rate_limiter())
}

/// Takes the next key without waiting (the test has made sure one is queued).
async fn next(q: &WorkQueue) -> ObjectKey {
    next_request(q).await.key
}

async fn next_request(q: &WorkQueue) -> Request {
    timeout(Duration::ZERO, q.get())
        .await
        .expect("a key should be ready")
        .expect("the queue should not be shut down")
}

/// The reason reaches the worker with the key: the first one for a key
/// queued twice, unless the second moved it to the fast lane; a delayed key
/// keeps the reason it was delayed for, and a key added while processed the
/// reason it was added for.
#[tokio::test(start_paused = true)]
async fn each_key_carries_why_it_was_queued() {
    let q = queue();
    let (a, b, c) = (
        ObjectKey::new("ns", "a"),
        ObjectKey::new("ns", "b"),
        ObjectKey::new("ns", "c"),
    );
    q.add_for(a.clone(), Reason::Related);
    q.add(a.clone());
    q.add_slow(b.clone());
    q.add_for(b.clone(), Reason::Related);
    q.add_for(c.clone(), Reason::Promoted);
    q.add_slow(c.clone());
    assert_eq!(
        next_request(&q).await,
        Request::new(a.clone(), Reason::Related),
        "first reason kept"
    );
    assert_eq!(
        next_request(&q).await,
        Request::new(b.clone(), Reason::Related),
        "moved to the fast lane"
    );
    assert_eq!(
        next_request(&q).await,
        Request::new(c.clone(), Reason::Promoted),
        "slow, first reason kept"
    );

    q.add_for(a.clone(), Reason::Resync);
    q.done(&a);
    assert_eq!(
        next_request(&q).await,
        Request::new(a.clone(), Reason::Resync),
        "added while processed"
    );
    q.done(&a);
    q.done(&b);
    q.done(&c);

    q.add_after(a.clone(), Duration::from_secs(1));
    q.add_rate_limited(b.clone());
    advance(Duration::from_secs(1)).await;
    let mut due = vec![next_request(&q).await, next_request(&q).await];
    due.sort_by(|x, y| x.key.cmp(&y.key));
    assert_eq!(
        due,
        [Request::new(a, Reason::Requeue), Request::new(b, Reason::Retry)]
    );
}

#[tokio::test(start_paused = true)]
async fn dedupes_keys_while_queued() {
    let q = queue();
    q.add(key("a"));
    q.add(key("a"));
    q.add(key("b"));
    q.add(key("a"));
    assert_eq!(q.len(), 2);
    assert_eq!(
        q.snapshot().fast,
        [key("a"), key("b")],
        "first add decides the order"
    );

    let a = next(&q).await;
    assert_eq!(a, key("a"));
    q.done(&a);
    let b = next(&q).await;
    assert_eq!(b, key("b"));
    q.done(&b);
    assert!(q.is_empty());
    assert!(
        timeout(Duration::from_secs(60), q.get()).await.is_err(),
        "nothing left"
    );
}

#[tokio::test(start_paused = true)]
async fn a_key_being_processed_is_not_handed_out_again_until_done() {
    let q = queue();
    q.add(key("a"));
    let a = next(&q).await;

    // Added again (in either lane) while processing: marked, not queued.
    q.add(key("a"));
    q.add_slow(key("a"));
    let snap = q.snapshot();
    assert!(snap.fast.is_empty() && snap.slow.is_empty());
    assert_eq!(snap.processing, [key("a")]);
    assert_eq!(snap.requeued_after_processing, [key("a")]);
    assert!(timeout(Duration::from_secs(60), q.get()).await.is_err());

    // Done queues it once more, in the fast lane it was first re-added to.
    q.done(&a);
    assert_eq!(q.snapshot().fast, [key("a")]);
    assert_eq!(next(&q).await, key("a"));
}

/// `processed` waits for the matching keys a worker holds, and for nothing
/// else: neither other keys being processed nor matching keys still queued.
#[tokio::test(start_paused = true)]
async fn processed_waits_out_the_matching_keys_being_processed() {
    let q = queue();
    q.add(key("a"));
    q.add(key("b"));
    let (a, b) = (next(&q).await, next(&q).await);
    q.add(key("c"));
    let not_b = |k: &ObjectKey| k.name != "b";
    assert!(
        timeout(Duration::from_secs(60), q.processed(not_b))
            .await
            .is_err()
    );

    let waited = async {
        q.processed(not_b).await;
        Instant::now()
    };
    let finished = async {
        tokio::time::sleep(Duration::from_secs(1)).await;
        q.done(&a);
        Instant::now()
    };
    let (returned, done) = tokio::join!(waited, finished);
    assert!(returned >= done, "returned before `a` was done");
    // "b" is still processed, "c" still queued: neither is waited for.
    timeout(Duration::ZERO, q.processed(not_b)).await.unwrap();
    q.done(&b);
}

/// Records how many reconciles of each key run at once, and how many ran.
#[derive(Default)]
struct SlowReconciler {
    running: Mutex<HashMap<String, usize>>,
    max_parallel_same_key: Mutex<usize>,
    calls: Mutex<Vec<String>>,
}

impl Reconciler for SlowReconciler {
    async fn reconcile(&self, key: &ObjectKey) -> Result<Action, Error> {
        let key = key.to_string();
        let key = key.as_str();
        {
            let mut running = self.running.lock().unwrap();
            let n = running.entry(key.to_owned()).or_default();
            *n += 1;
            let mut max = self.max_parallel_same_key.lock().unwrap();
            *max = (*max).max(*n);
            self.calls.lock().unwrap().push(key.to_owned());
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
        *self.running.lock().unwrap().get_mut(key).unwrap() -= 1;
        Ok(Action::await_change())
    }
}

#[tokio::test(start_paused = true)]
async fn never_reconciles_one_key_in_two_workers() {
    let reconciler = Arc::new(SlowReconciler::default());
    let controller = Impl::new(
        "slow",
        reconciler.clone(),
        ControllerOptions::default().concurrency(4),
    );
    let shutdown = CancellationToken::new();
    let run = tokio::spawn({
        let (c, s) = (controller.clone(), shutdown.clone());
        async move { c.run(s).await }
    });

    controller.enqueue_key(key("a"));
    tokio::time::sleep(Duration::from_millis(100)).await;
    // Re-added repeatedly while the first reconcile sleeps, with idle workers.
    for _ in 0..5 {
        controller.enqueue_key(key("a"));
        controller.enqueue_slow_key(key("a"));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    controller.enqueue_key(key("b"));
    tokio::time::sleep(Duration::from_secs(5)).await;

    assert_eq!(*reconciler.max_parallel_same_key.lock().unwrap(), 1);
    let calls = reconciler.calls.lock().unwrap().clone();
    assert_eq!(
        calls.iter().filter(|k| *k == "ns/a").count(),
        2,
        "re-adds collapse into one more run"
    );
    assert_eq!(calls.iter().filter(|k| *k == "ns/b").count(), 1);

    shutdown.cancel();
    run.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn backoff_doubles_per_key_until_forgotten() {
    let q = WorkQueue::new(
        "backoff",
        ItemExponentialFailureRateLimiter::new(Duration::from_millis(5), Duration::from_secs(1000)),
    );
    let a = key("a");
    for (attempt, want_ms) in [5u64, 10, 20, 40].into_iter().enumerate() {
        q.add_rate_limited(a.clone());
        assert_eq!(
            q.snapshot().waiting,
            [(a.clone(), Duration::from_millis(want_ms))]
        );
        assert_eq!(q.num_requeues(&a), u32::try_from(attempt).unwrap() + 1);
        advance(Duration::from_millis(want_ms - 1)).await;
        assert!(q.is_empty(), "not before the backoff");
        advance(Duration::from_millis(1)).await;
        assert_eq!(q.len(), 1, "due after {want_ms}ms");
        let got = next(&q).await;
        q.done(&got);
    }
    q.forget(&a);
    assert_eq!(q.num_requeues(&a), 0);
    q.add_rate_limited(a.clone());
    assert_eq!(
        q.snapshot().waiting,
        [(a, Duration::from_millis(5))],
        "back to the base delay"
    );
}

#[tokio::test(start_paused = true)]
async fn the_global_bucket_allows_a_burst_of_100_then_10_per_second() {
    let q = queue();
    for i in 0..110 {
        q.add_rate_limited(key(&format!("k{i:03}")));
    }
    // The first 100 get only the per-key base delay.
    advance(Duration::from_millis(5)).await;
    assert_eq!(q.len(), 100);
    // Each further key waits one more token: 100ms, 200ms, … 1s.
    let waiting: Vec<Duration> = q.snapshot().waiting.into_iter().map(|(_, d)| d).collect();
    let want: Vec<Duration> = (1..=10).map(|n| Duration::from_millis(100 * n - 5)).collect();
    assert_eq!(waiting, want);
    for n in 1..=10 {
        advance(Duration::from_millis(100)).await;
        assert_eq!(q.len(), 100 + n, "one more key every 100ms");
    }
}

#[tokio::test(start_paused = true)]
async fn delayed_keys_come_out_in_due_order_and_the_earlier_time_wins() {
    let q = queue();
    q.add_after(key("a"), Duration::from_secs(3));
    q.add_after(key("b"), Duration::from_secs(1));
    q.add_after(key("c"), Duration::from_secs(2));
    // An earlier time replaces a later one; a later one is ignored.
    q.add_after(key("d"), Duration::from_secs(10));
    q.add_after(key("d"), Duration::from_millis(1500));
    q.add_after(key("b"), Duration::from_secs(30));
    assert_eq!(
        q.snapshot().waiting,
        [
            (key("b"), Duration::from_secs(1)),
            (key("d"), Duration::from_millis(1500)),
            (key("c"), Duration::from_secs(2)),
            (key("a"), Duration::from_secs(3)),
        ]
    );
    assert!(q.is_empty());

    let start = Instant::now();
    let mut order = Vec::new();
    for _ in 0..4 {
        // get() sleeps until the next key is due; the paused clock jumps there.
        let k = q.get().await.unwrap().key;
        order.push((k.name.clone(), start.elapsed()));
        q.done(&k);
    }
    assert_eq!(
        order,
        [
            ("b".to_owned(), Duration::from_secs(1)),
            ("d".to_owned(), Duration::from_millis(1500)),
            ("c".to_owned(), Duration::from_secs(2)),
            ("a".to_owned(), Duration::from_secs(3)),
        ]
    );

    // A zero delay is an immediate add.
    q.add_after(key("now"), Duration::ZERO);
    assert_eq!(q.snapshot().fast, [key("now")]);
}

#[tokio::test(start_paused = true)]
async fn the_fast_lane_drains_before_the_slow_lane() {
    let q = queue();
    q.add_slow(key("s1"));
    q.add(key("f1"));
    q.add_slow(key("s2"));
    q.add(key("f2"));
    assert_eq!((q.len(), q.slow_len()), (4, 2));
    let mut order = Vec::new();
    for _ in 0..4 {
        let k = next(&q).await;
        order.push(k.name.clone());
        q.done(&k);
    }
    assert_eq!(order, ["f1", "f2", "s1", "s2"]);
}

#[tokio::test(start_paused = true)]
async fn a_slow_key_added_to_the_fast_lane_moves_there() {
    let q = queue();
    q.add_slow(key("a"));
    q.add_slow(key("b"));
    q.add_slow(key("c"));
    q.add(key("b"));
    let snap = q.snapshot();
    assert_eq!(snap.fast, [key("b")]);
    assert_eq!(snap.slow, [key("a"), key("c")]);
    assert_eq!(q.len(), 3, "moved, not duplicated");

    // A fast key added to the slow lane stays fast.
    q.add_slow(key("b"));
    assert_eq!(q.snapshot().fast, [key("b")]);
    assert_eq!(next(&q).await, key("b"));

    // A key marked slow while processing is promoted by a fast add too.
    let a = next(&q).await;
    q.add_slow(a.clone());
    q.add(a.clone());
    q.done(&a);
    assert_eq!(q.snapshot().fast, [key("a")]);
}

/// Blocks reconciles of `ns/hold` until released; records what ran.
#[derive(Default)]
struct Gate {
    started: tokio::sync::Notify,
    release: tokio::sync::Notify,
    finished: Mutex<Vec<String>>,
}

impl Reconciler for Gate {
    async fn reconcile(&self, key: &ObjectKey) -> Result<Action, Error> {
        let key = key.to_string();
        let key = key.as_str();
        if key == "ns/hold" {
            self.started.notify_one();
            self.release.notified().await;
        }
        self.finished.lock().unwrap().push(key.to_owned());
        Ok(Action::await_change())
    }
}

#[tokio::test(start_paused = true)]
async fn shutdown_stops_intake_and_run_returns_after_in_flight_reconciles() {
    let gate = Arc::new(Gate::default());
    let controller = Impl::new("drain", gate.clone(), ControllerOptions::default().concurrency(1));
    let shutdown = CancellationToken::new();
    let run = tokio::spawn({
        let (c, s) = (controller.clone(), shutdown.clone());
        async move { c.run(s).await }
    });

    controller.enqueue_key(key("hold"));
    gate.started.notified().await;
    controller.enqueue_key(key("queued"));
    controller.enqueue_key_after(key("delayed"), Duration::from_secs(1));

    shutdown.cancel();
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(!run.is_finished(), "run waits for the in-flight reconcile");
    let snap = controller.work_queue().snapshot();
    assert!(snap.shutting_down);
    assert_eq!(snap.processing, [key("hold")]);
    assert!(
        snap.fast.is_empty() && snap.waiting.is_empty(),
        "queued and delayed keys are dropped"
    );

    // Intake is closed.
    controller.enqueue_key(key("late"));
    controller.enqueue_slow_key(key("late"));
    controller.global_resync([key("late")]);
    assert_eq!(controller.work_queue().len(), 0);

    gate.release.notify_one();
    timeout(Duration::from_secs(1), run)
        .await
        .expect("run returns")
        .unwrap();
    assert_eq!(*gate.finished.lock().unwrap(), ["ns/hold"]);
    assert!(controller.work_queue().get().await.is_none());
}

/// Counts concurrent reconciles per key on a multi-threaded runtime.
#[derive(Default)]
struct Counting {
    running: Mutex<HashMap<String, usize>>,
    overlaps: std::sync::atomic::AtomicUsize,
    seen: Mutex<std::collections::BTreeSet<String>>,
}

impl Reconciler for Counting {
    async fn reconcile(&self, key: &ObjectKey) -> Result<Action, Error> {
        let key = key.to_string();
        let key = key.as_str();
        use std::sync::atomic::Ordering::SeqCst;
        self.seen.lock().unwrap().insert(key.to_owned());
        {
            let mut running = self.running.lock().unwrap();
            let n = running.entry(key.to_owned()).or_default();
            *n += 1;
            if *n > 1 {
                self.overlaps.fetch_add(1, SeqCst);
            }
        }
        for _ in 0..3 {
            tokio::task::yield_now().await;
        }
        *self.running.lock().unwrap().get_mut(key).unwrap() -= 1;
        Ok(Action::await_change())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stress_many_workers_many_adds_no_overlap_and_nothing_lost() {
    let reconciler = Arc::new(Counting::default());
    let controller = Impl::new(
        "stress",
        reconciler.clone(),
        ControllerOptions::default().concurrency(8),
    );
    let shutdown = CancellationToken::new();
    let run = tokio::spawn({
        let (c, s) = (controller.clone(), shutdown.clone());
        async move { c.run(s).await }
    });

    let producers: Vec<_> = (0..4)
        .map(|p| {
            let c = controller.clone();
            tokio::spawn(async move {
                for i in 0..500 {
                    let k = key(&format!("k{}", (i * 7 + p) % 20));
                    match i % 3 {
                        0 => c.enqueue_key(k),
                        1 => c.enqueue_slow_key(k),
                        _ => c.work_queue().add_after(k, Duration::ZERO),
                    }
                    if i % 50 == 0 {
                        tokio::task::yield_now().await;
                    }
                }
            })
        })
        .collect();
    for p in producers {
        p.await.unwrap();
    }

    // Wait (bounded) until every key has been processed and nothing is queued.
    let idle = async {
        loop {
            let snap = controller.work_queue().snapshot();
            if snap.fast.is_empty()
                && snap.slow.is_empty()
                && snap.processing.is_empty()
                && snap.requeued_after_processing.is_empty()
            {
                break;
            }
            tokio::task::yield_now().await;
        }
    };
    timeout(Duration::from_secs(30), idle)
        .await
        .expect("the queue drains");

    use std::sync::atomic::Ordering::SeqCst;
    assert_eq!(
        reconciler.overlaps.load(SeqCst),
        0,
        "a key ran in two workers at once"
    );
    assert_eq!(
        reconciler.seen.lock().unwrap().len(),
        20,
        "every key was reconciled"
    );
    shutdown.cancel();
    timeout(Duration::from_secs(30), run)
        .await
        .expect("run returns")
        .unwrap();
}
