//! Reads of the store's clock shared between concurrent callers, never older than the asking.
//!
//! Every use case reads the store's `now` (and a gate run the audit chain's head with it), and
//! on PostgreSQL each such read is a round trip. Fifty clients asking at once would make fifty
//! reads whose answers differ by microseconds. A [`FreshRead`] lets them share: a caller is
//! answered by a read that *began after it asked*, its own or one it joined. So a shared
//! answer is as fresh as the caller's own read would have been (what it reads was true at some
//! instant between its asking and its answer), and authority still runs on the store's clock:
//! a grant revoked before a caller asked is never judged by a time read before the revocation.
//!
//! A read that is under way when a caller asks began before it, so that caller waits for it to
//! end and then shares the next one (at most two reads' time). A failed read answers only its
//! own caller; the others read again. A reader whose future is dropped mid-read hands the turn
//! on, so nobody waits on a read that will never end.

use std::future::Future;
use std::sync::{Mutex, MutexGuard, PoisonError};
use tokio::sync::Notify;

/// One kind of read, shared as the module says.
#[derive(Debug)]
pub(crate) struct FreshRead<T> {
    state: Mutex<State<T>>,
    ended: Notify,
}

impl<T> Default for FreshRead<T> {
    fn default() -> Self {
        Self {
            state: Mutex::new(State::default()),
            ended: Notify::new(),
        }
    }
}

#[derive(Debug)]
struct State<T> {
    /// Tickets given out so far: the `n`-th caller to ask holds ticket `n`.
    asked: u64,
    /// Whether a read is under way.
    reading: bool,
    /// The latest read's answer, with the number of tickets given out when it began: it
    /// answers exactly the callers holding a lower ticket.
    last: Option<(u64, T)>,
}

impl<T> Default for State<T> {
    fn default() -> Self {
        Self {
            asked: 0,
            reading: false,
            last: None,
        }
    }
}

/// Hands the turn on when the reader's future ends or is dropped mid-read.
struct Turn<'a, T> {
    shared: &'a FreshRead<T>,
}

impl<T> Drop for Turn<'_, T> {
    fn drop(&mut self) {
        self.shared.lock().reading = false;
        self.shared.ended.notify_waiters();
    }
}

impl<T> FreshRead<T> {
    fn lock(&self) -> MutexGuard<'_, State<T>> {
        // The state is a counter, a flag and a finished answer: a panic elsewhere cannot leave
        // it half-written.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl<T: Clone> FreshRead<T> {
    /// The answer of a `read` that began after this call did: a read under way among other
    /// callers if it began after this one asked, else one this caller makes.
    pub(crate) async fn get<E, F, Fut>(&self, read: F) -> Result<T, E>
    where
        F: Fn() -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        let ticket = {
            let mut state = self.lock();
            let ticket = state.asked;
            state.asked += 1;
            ticket
        };
        loop {
            // Registered before the state is looked at, so an end signalled after the look is
            // not missed.
            let ended = self.ended.notified();
            tokio::pin!(ended);
            ended.as_mut().enable();
            let begins = {
                let mut state = self.lock();
                if let Some((covers, answer)) = &state.last
                    && ticket < *covers
                {
                    return Ok(answer.clone());
                }
                if state.reading {
                    None
                } else {
                    state.reading = true;
                    // Every ticket below this was given out before the read below begins.
                    Some(state.asked)
                }
            };
            let Some(covers) = begins else {
                ended.await;
                continue;
            };
            let turn = Turn { shared: self };
            let answer = read().await;
            if let Ok(value) = &answer {
                self.lock().last = Some((covers, value.clone()));
            }
            drop(turn);
            return answer;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::FreshRead;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::time::Duration;
    use tokio::sync::Semaphore;

    /// A read that counts its beginnings and answers with its number once let through.
    struct Gated {
        began: AtomicU64,
        gate: Semaphore,
    }

    impl Gated {
        fn new() -> Arc<Self> {
            Arc::new(Self {
                began: AtomicU64::new(0),
                gate: Semaphore::new(0),
            })
        }

        async fn read(&self) -> Result<u64, String> {
            let n = self.began.fetch_add(1, Ordering::SeqCst) + 1;
            let permit = self.gate.acquire().await.map_err(|e| e.to_string())?;
            permit.forget();
            Ok(n)
        }

        async fn until_begun(&self, n: u64) {
            within(async {
                while self.began.load(Ordering::SeqCst) < n {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
            })
            .await;
        }
    }

    /// A caller of `shared` whose reads are `gated`'s, asking now.
    fn ask(
        shared: &Arc<FreshRead<u64>>,
        gated: &Arc<Gated>,
    ) -> tokio::task::JoinHandle<Result<u64, String>> {
        let (shared, gated) = (shared.clone(), gated.clone());
        tokio::spawn(async move { shared.get(|| gated.read()).await })
    }

    async fn within<T>(f: impl std::future::Future<Output = T>) -> T {
        match tokio::time::timeout(Duration::from_secs(10), f).await {
            Ok(v) => v,
            Err(_) => panic!("waited ten seconds for a read"),
        }
    }

    #[tokio::test]
    async fn a_caller_is_never_answered_by_a_read_begun_before_it_asked() {
        let shared = Arc::new(FreshRead::<u64>::default());
        let gated = Gated::new();
        let first = ask(&shared, &gated);
        gated.until_begun(1).await;
        // Asks while read 1 is under way: read 1 began before it asked.
        let second = ask(&shared, &gated);
        tokio::time::sleep(Duration::from_millis(20)).await;
        gated.gate.add_permits(1);
        assert_eq!(within(first).await.unwrap(), Ok(1));
        gated.until_begun(2).await;
        gated.gate.add_permits(1);
        assert_eq!(within(second).await.unwrap(), Ok(2));
    }

    #[tokio::test]
    async fn callers_that_asked_before_a_read_began_share_it() {
        let shared = Arc::new(FreshRead::<u64>::default());
        let gated = Gated::new();
        let first = ask(&shared, &gated);
        gated.until_begun(1).await;
        let waiting: Vec<_> = (0..8).map(|_| ask(&shared, &gated)).collect();
        tokio::time::sleep(Duration::from_millis(20)).await;
        gated.gate.add_permits(1);
        assert_eq!(within(first).await.unwrap(), Ok(1));
        // All eight asked during read 1: one of them reads again and the rest share it.
        gated.until_begun(2).await;
        tokio::time::sleep(Duration::from_millis(20)).await;
        gated.gate.add_permits(1);
        for w in waiting {
            assert_eq!(within(w).await.unwrap(), Ok(2));
        }
        assert_eq!(gated.began.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn a_reader_dropped_mid_read_hands_the_turn_on() {
        let shared = Arc::new(FreshRead::<u64>::default());
        let gated = Gated::new();
        let abandoned = ask(&shared, &gated);
        gated.until_begun(1).await;
        let waiting = ask(&shared, &gated);
        tokio::time::sleep(Duration::from_millis(20)).await;
        abandoned.abort();
        gated.until_begun(2).await;
        gated.gate.add_permits(1);
        assert_eq!(within(waiting).await.unwrap(), Ok(2));
    }

    #[tokio::test]
    async fn a_failed_read_answers_only_its_own_caller() {
        let shared = Arc::new(FreshRead::<u64>::default());
        let calls = Arc::new(AtomicU64::new(0));
        let gate = Arc::new(Semaphore::new(0));
        let read = {
            let (calls, gate) = (calls.clone(), gate.clone());
            move || {
                let (calls, gate) = (calls.clone(), gate.clone());
                async move {
                    let n = calls.fetch_add(1, Ordering::SeqCst) + 1;
                    gate.acquire().await.map_err(|e| e.to_string())?.forget();
                    if n == 1 {
                        Err("down".to_owned())
                    } else {
                        Ok(n)
                    }
                }
            }
        };
        let first = tokio::spawn({
            let (shared, read) = (shared.clone(), read.clone());
            async move { shared.get(read).await }
        });
        within(async {
            while calls.load(Ordering::SeqCst) < 1 {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        })
        .await;
        let second = tokio::spawn({
            let (shared, read) = (shared.clone(), read.clone());
            async move { shared.get(read).await }
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        gate.add_permits(2);
        assert_eq!(within(first).await.unwrap(), Err("down".to_owned()));
        assert_eq!(within(second).await.unwrap(), Ok(2));
    }

    #[tokio::test]
    async fn a_lone_caller_reads_every_time() {
        let shared = FreshRead::<u64>::default();
        let n = AtomicU64::new(0);
        for expect in 1..=3 {
            let got: Result<u64, ()> = shared
                .get(|| async { Ok(n.fetch_add(1, Ordering::SeqCst) + 1) })
                .await;
            assert_eq!(got, Ok(expect));
        }
    }
}
