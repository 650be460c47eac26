//! Wake-ups of waiting workers on one store handle: for each job kind a generation that every
//! signal moves on, with the reason of the last one. A wait ends as soon as its kind's
//! generation passes the last one a wait of this handle saw, so a signal that came while no
//! wait was running (between a claim that found nothing and the next wait, say) ends the next
//! wait at once, and one that came while waits were running ends them all and nothing more.

use super::{JobKind, Wakeup};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::sync::watch;

/// One kind's generation, the reason of its last move, and the last generation a wait saw.
struct Generation {
    now: watch::Sender<(u64, Wakeup)>,
    seen: AtomicU64,
}

impl Generation {
    fn new() -> Self {
        Self {
            now: watch::Sender::new((0, Wakeup::TimedOut)),
            seen: AtomicU64::new(0),
        }
    }
}

/// The wake-ups of one handle, by kind.
pub(crate) struct Signals {
    checks: Generation,
    verify: Generation,
    gate: Generation,
}

impl Signals {
    pub(crate) fn new() -> Self {
        Self {
            checks: Generation::new(),
            verify: Generation::new(),
            gate: Generation::new(),
        }
    }

    const fn of(&self, kind: JobKind) -> &Generation {
        match kind {
            JobKind::Checks => &self.checks,
            JobKind::Verify => &self.verify,
            JobKind::Gate => &self.gate,
        }
    }

    /// Moves `kind`'s generation on, for `why`.
    pub(crate) fn signal(&self, kind: JobKind, why: Wakeup) {
        self.of(kind).now.send_modify(|(generation, reason)| {
            *generation += 1;
            *reason = why;
        });
    }

    /// Moves every kind's generation on, for `why`.
    pub(crate) fn signal_all(&self, why: Wakeup) {
        for kind in JobKind::ALL {
            self.signal(kind, why);
        }
    }

    /// Waits until `kind`'s generation passes the last one a wait saw, for at most
    /// `max_wait`; returns the reason of the last signal, or [`Wakeup::TimedOut`].
    pub(crate) async fn wait(&self, kind: JobKind, max_wait: Duration) -> Wakeup {
        let g = self.of(kind);
        let mut rx = g.now.subscribe();
        let (generation, why) = *rx.borrow_and_update();
        if generation > g.seen.load(Ordering::SeqCst) {
            g.seen.fetch_max(generation, Ordering::SeqCst);
            return why;
        }
        match tokio::time::timeout(max_wait, rx.changed()).await {
            Ok(Ok(())) => {
                let (generation, why) = *rx.borrow_and_update();
                g.seen.fetch_max(generation, Ordering::SeqCst);
                why
            }
            // The sender lives as long as `self`; a timeout is the only other way out.
            Ok(Err(_)) | Err(_) => Wakeup::TimedOut,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_signal_before_the_wait_ends_it_once_and_one_during_it_ends_every_wait() {
        let s = std::sync::Arc::new(Signals::new());
        s.signal(JobKind::Verify, Wakeup::Signalled);
        let long = Duration::from_secs(60);
        assert_eq!(s.wait(JobKind::Verify, long).await, Wakeup::Signalled);
        // Consumed: the next wait of the kind waits, and other kinds were never signalled.
        let short = Duration::from_millis(20);
        assert_eq!(s.wait(JobKind::Verify, short).await, Wakeup::TimedOut);
        assert_eq!(s.wait(JobKind::Gate, short).await, Wakeup::TimedOut);
        let (a, b) = (s.clone(), s.clone());
        let waits = [
            tokio::spawn(async move { a.wait(JobKind::Checks, long).await }),
            tokio::spawn(async move { b.wait(JobKind::Checks, long).await }),
        ];
        while s.checks.now.receiver_count() < 2 {
            tokio::task::yield_now().await;
        }
        s.signal_all(Wakeup::Resumed);
        for w in waits {
            assert_eq!(w.await.unwrap(), Wakeup::Resumed);
        }
        // Both waits saw it: nothing is left over for a third.
        assert_eq!(s.wait(JobKind::Checks, short).await, Wakeup::TimedOut);
    }
}
