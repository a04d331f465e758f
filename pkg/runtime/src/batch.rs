//! Many writes, started gently: client-go's `slowStartBatch`, which its
//! ReplicaSet and Job controllers use for pods.
//!
//! A reconciler that must create or delete many objects sends them in batches
//! of 1, 2, 4, … running concurrently. A call that fails ends the run after
//! its batch, so a quota or webhook that refuses every request costs one
//! request, not thousands; a cancellation (the controller shutting down) ends
//! it at once, abandoning the requests of the batch in flight.

use std::future::Future;

use futures::future::join_all;
use tokio_util::sync::CancellationToken;

/// How a slow-start run ended.
#[derive(Debug, PartialEq, Eq)]
pub enum Batched<E> {
    /// Every call succeeded.
    Done,
    /// `cancellation` fired; `succeeded` calls had finished successfully (calls
    /// in flight were abandoned and may have landed).
    Cancelled {
        /// Calls that succeeded before it stopped.
        succeeded: usize,
    },
    /// A call failed; its batch finished, no later batch started.
    Failed {
        /// Calls that succeeded.
        succeeded: usize,
        /// The first failure.
        error: E,
    },
}

impl<E> Batched<E> {
    /// How many of the run's `count` calls succeeded.
    pub fn succeeded_of(&self, count: usize) -> usize {
        match self {
            Batched::Done => count,
            Batched::Cancelled { succeeded } | Batched::Failed { succeeded, .. } => *succeeded,
        }
    }
}

/// Makes `count` calls of `call` (with the call's index) in batches of 1, 2,
/// 4, … (at most `count` in all), until one fails or `cancellation` fires.
pub async fn slow_start<E, Fut>(
    count: usize,
    cancellation: &CancellationToken,
    mut call: impl FnMut(usize) -> Fut,
) -> Batched<E>
where
    Fut: Future<Output = Result<(), E>>,
{
    let mut started = 0;
    let mut succeeded = 0;
    let mut batch = 1;
    while started < count {
        if cancellation.is_cancelled() {
            return Batched::Cancelled { succeeded };
        }
        let size = batch.min(count - started);
        let calls = join_all((started..started + size).map(&mut call));
        // Shutdown does not wait for a batch: its requests are abandoned (the
        // next leader's reconcile sees what landed).
        let results = tokio::select! {
            // A batch that is done counts, even when the cancellation came too.
            biased;
            results = calls => results,
            () = cancellation.cancelled() => return Batched::Cancelled { succeeded },
        };
        started += size;
        let mut first_error = None;
        for result in results {
            match result {
                Ok(()) => succeeded += 1,
                Err(error) => {
                    first_error.get_or_insert(error);
                }
            }
        }
        if let Some(error) = first_error {
            return Batched::Failed { succeeded, error };
        }
        batch = batch.saturating_mul(2);
    }
    Batched::Done
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    #[tokio::test]
    async fn batches_double_until_every_call_is_made() {
        let batches = Mutex::new(Vec::new());
        let outcome = slow_start::<(), _>(10, &CancellationToken::new(), |i| {
            batches.lock().unwrap_or_else(|e| e.into_inner()).push(i);
            async { Ok(()) }
        })
        .await;
        assert_eq!(outcome, Batched::Done);
        assert_eq!(
            *batches.lock().unwrap_or_else(|e| e.into_inner()),
            (0..10).collect::<Vec<_>>()
        );
    }

    #[tokio::test]
    async fn a_failure_ends_the_run_after_its_batch() {
        let calls = Mutex::new(0);
        // Batches 1, 2, 4: the call with index 4 fails; 5 and 6 share its batch.
        let outcome = slow_start(100, &CancellationToken::new(), |i| {
            *calls.lock().unwrap_or_else(|e| e.into_inner()) += 1;
            async move { if i == 4 { Err("quota exceeded") } else { Ok(()) } }
        })
        .await;
        assert_eq!(
            outcome,
            Batched::Failed {
                succeeded: 6,
                error: "quota exceeded"
            }
        );
        assert_eq!(*calls.lock().unwrap_or_else(|e| e.into_inner()), 7);
    }

    #[tokio::test]
    async fn cancellation_stops_before_the_next_batch() {
        let cancellation = CancellationToken::new();
        let calls = Mutex::new(0);
        let outcome = slow_start::<(), _>(100, &cancellation, |_| {
            let mut calls = calls.lock().unwrap_or_else(|e| e.into_inner());
            *calls += 1;
            if *calls == 3 {
                cancellation.cancel();
            }
            async { Ok(()) }
        })
        .await;
        assert_eq!(outcome, Batched::Cancelled { succeeded: 3 });
    }

    #[tokio::test(start_paused = true)]
    async fn cancellation_abandons_the_batch_in_flight() {
        let cancellation = CancellationToken::new();
        let stop = cancellation.clone();
        tokio::spawn(async move {
            tokio::time::sleep(std::time::Duration::from_secs(1)).await;
            stop.cancel();
        });
        // Every call hangs, as a request to a stalled API server would.
        let outcome = slow_start::<(), _>(100, &cancellation, |_| {
            futures::future::pending::<Result<(), ()>>()
        })
        .await;
        assert_eq!(outcome, Batched::Cancelled { succeeded: 0 });
    }

    #[tokio::test]
    async fn nothing_to_do_is_done() {
        let outcome = slow_start::<(), _>(0, &CancellationToken::new(), |_| async { Ok(()) }).await;
        assert_eq!(outcome, Batched::Done);
    }
}
