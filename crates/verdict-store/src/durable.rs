//! Group flushes: appends that commit without waiting for their WAL flush, and are reported
//! done only once a later flush covers them.
//!
//! Every append takes the audit chain's lock and holds it until its transaction ends. A commit
//! that waited for its own WAL flush held the lock through that wait, so every concurrent
//! writer queued behind one disk flush per append. On PostgreSQL a write transaction therefore
//! commits with `synchronous_commit` off (its commit record is in the WAL, the lock is released
//! and the rows are visible at once), and its caller is answered only after a flush that began
//! after the commit has finished: the WAL is one sequence, so a flush of a later record covers
//! every earlier one, and one flush covers every commit that finished before it began. Writers
//! that commit while a flush is running share the next one.
//!
//! So nothing is reported stored before it is durable, as before; what changes is that another
//! reader may see a row for the few milliseconds between its commit and the flush, and that a
//! crash in those milliseconds loses it (its writer was told of no success). Whatever a reader
//! then writes commits later in the same WAL, so it is durable only if what it read is too;
//! what leaves the store without a write (the lifecycle events pushed to subscribers and
//! webhooks) is made durable before it is handed out ([`crate::Store::make_durable`]).

use std::sync::atomic::{AtomicU64, Ordering};
use tokio::sync::{Mutex, MutexGuard};

/// The flushes of one store handle: how many were begun, and (under the lock that runs them
/// one at a time) the number of the last one that finished, beside what the flush needs
/// (`C`: the connection it runs on).
#[derive(Debug, Default)]
pub(crate) struct GroupFlush<C> {
    begun: AtomicU64,
    state: Mutex<Finished<C>>,
}

#[derive(Debug, Default)]
struct Finished<C> {
    last: u64,
    with: C,
}

impl<C> GroupFlush<C> {
    /// Call after a commit has returned. `None` when a flush that began after this call has
    /// already finished (another caller's covered this commit); else the turn to run one,
    /// which only [`FlushTurn::finished`] records as done: a turn dropped unfinished (the
    /// flush failed) answers no one but its caller, and the next caller runs one of its own.
    pub(crate) async fn turn(&self) -> Option<FlushTurn<'_, C>> {
        // Every flush numbered above what is begun now begins after this point.
        let needed = self.begun.load(Ordering::SeqCst) + 1;
        let state = self.state.lock().await;
        if state.last >= needed {
            return None;
        }
        let number = self.begun.fetch_add(1, Ordering::SeqCst) + 1;
        Some(FlushTurn { state, number })
    }
}

/// The turn to run one flush; flushes run one at a time.
pub(crate) struct FlushTurn<'a, C> {
    state: MutexGuard<'a, Finished<C>>,
    number: u64,
}

impl<C> FlushTurn<'_, C> {
    /// What the flush runs with.
    pub(crate) fn with(&mut self) -> &mut C {
        &mut self.state.with
    }

    /// The flush finished: it answers every caller that came before it began.
    pub(crate) fn finished(mut self) {
        self.state.last = self.number;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Duration;
    use tokio::sync::oneshot;

    /// Runs a flush that counts itself and waits for `hold` (if any) before it finishes;
    /// whether this caller ran one.
    async fn flush(group: &GroupFlush<u32>, hold: Option<oneshot::Receiver<()>>) -> bool {
        let Some(mut turn) = group.turn().await else {
            return false;
        };
        *turn.with() += 1;
        if let Some(hold) = hold {
            hold.await.unwrap();
        }
        turn.finished();
        true
    }

    #[tokio::test]
    async fn callers_alone_each_run_a_flush() {
        let group: GroupFlush<u32> = GroupFlush::default();
        for n in 1..=3 {
            assert!(flush(&group, None).await);
            assert_eq!(group.state.lock().await.with, n);
        }
    }

    #[tokio::test]
    async fn commits_made_while_a_flush_runs_share_the_next_one_and_never_the_running_one() {
        let group: Arc<GroupFlush<u32>> = Arc::default();
        let (release, hold) = oneshot::channel::<()>();
        let first = tokio::spawn({
            let group = Arc::clone(&group);
            async move { flush(&group, Some(hold)).await }
        });
        while group.begun.load(Ordering::SeqCst) == 0 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        // Three commits finish while it runs: it began before them, so it covers none.
        let later: Vec<_> = (0..3)
            .map(|_| {
                let group = Arc::clone(&group);
                tokio::spawn(async move { flush(&group, None).await })
            })
            .collect();
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert_eq!(
            group.begun.load(Ordering::SeqCst),
            1,
            "they wait for the running flush"
        );
        release.send(()).unwrap();
        assert!(first.await.unwrap());
        let mut ran = 0;
        for t in later {
            if t.await.unwrap() {
                ran += 1;
            }
        }
        assert_eq!(
            ran, 1,
            "one flush, begun after the three commits, answers all three"
        );
        assert_eq!(group.state.lock().await.with, 2);
    }

    #[tokio::test]
    async fn a_flush_that_failed_answers_no_one_and_the_next_caller_runs_one() {
        let group: GroupFlush<u32> = GroupFlush::default();
        // The flush fails: its turn is dropped unfinished.
        drop(group.turn().await.unwrap());
        assert_eq!(group.state.lock().await.last, 0);
        assert!(flush(&group, None).await);
        assert!(
            flush(&group, None).await,
            "a later commit needs a later flush"
        );
    }
}
