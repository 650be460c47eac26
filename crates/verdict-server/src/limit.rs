//! The rate limit on failed authentication. Every request with no valid token is refused and
//! written to the store as a denial, so an unbounded stream of them would fill the store. Each
//! peer address has a token bucket: a failed authentication takes one token, and while a
//! peer's bucket is empty its requests whose token no principal holds are refused with `429`
//! and `Retry-After`, before the engine sees them and with no denial written. A request whose
//! token is valid is never limited, so a client sharing an address with an attacker still
//! works.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How many failed authentications a peer may make in a burst, and how fast it earns more.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AuthLimit {
    /// The bucket's size: failures allowed back to back.
    pub burst: u32,
    /// Failures earned back per minute.
    pub per_minute: u32,
}

impl Default for AuthLimit {
    fn default() -> Self {
        Self {
            burst: 20,
            per_minute: 60,
        }
    }
}

/// The most peers tracked at once; past it, untracked peers share one bucket, so a flood of
/// addresses cannot grow the table without bound.
const MAX_PEERS: usize = 4096;

#[derive(Debug)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

/// The buckets of every peer.
#[derive(Debug)]
pub struct Limiter {
    limit: AuthLimit,
    buckets: Mutex<HashMap<IpAddr, Bucket>>,
}

/// The key that peers share once the table is full, and that a request without a known
/// peer address uses.
const SHARED: IpAddr = IpAddr::V4(Ipv4Addr::UNSPECIFIED);

impl Limiter {
    /// Buckets for `limit`.
    #[must_use]
    pub fn new(limit: AuthLimit) -> Self {
        Self {
            limit,
            buckets: Mutex::new(HashMap::new()),
        }
    }

    fn rate(&self) -> f64 {
        f64::from(self.limit.per_minute) / 60.0
    }

    fn refill(&self, b: &mut Bucket, now: Instant) {
        let earned = now.duration_since(b.at).as_secs_f64() * self.rate();
        b.tokens = (b.tokens + earned).min(f64::from(self.limit.burst));
        b.at = now;
    }

    /// `None` when `peer` may still fail authentication; else how long until it may.
    pub fn exhausted(&self, peer: IpAddr) -> Option<Duration> {
        let now = Instant::now();
        let mut buckets = self.buckets.lock().unwrap_or_else(|p| p.into_inner());
        let key = if buckets.contains_key(&peer) {
            peer
        } else if buckets.len() >= MAX_PEERS {
            SHARED
        } else {
            return None;
        };
        let b = buckets.get_mut(&key)?;
        self.refill(b, now);
        if b.tokens >= 1.0 {
            return None;
        }
        let rate = self.rate();
        let wait = if rate > 0.0 {
            (1.0 - b.tokens) / rate
        } else {
            f64::from(u32::MAX)
        };
        Some(Duration::from_secs_f64(wait.max(1.0)))
    }

    /// Takes one token from `peer`'s bucket: it failed authentication.
    pub fn charge(&self, peer: IpAddr) {
        let now = Instant::now();
        let mut buckets = self.buckets.lock().unwrap_or_else(|p| p.into_inner());
        if !buckets.contains_key(&peer) && buckets.len() >= MAX_PEERS {
            // Forget peers whose buckets have refilled: they are as if never seen.
            let burst = f64::from(self.limit.burst);
            buckets.retain(|_, b| {
                self.refill(b, now);
                b.tokens < burst
            });
        }
        let key = if buckets.contains_key(&peer) || buckets.len() < MAX_PEERS {
            peer
        } else {
            SHARED
        };
        let b = buckets.entry(key).or_insert(Bucket {
            tokens: f64::from(self.limit.burst),
            at: now,
        });
        self.refill(b, now);
        b.tokens = (b.tokens - 1.0).max(0.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_peer_is_stopped_after_its_burst_and_others_are_not() {
        let l = Limiter::new(AuthLimit {
            burst: 2,
            per_minute: 1,
        });
        let a: IpAddr = [10, 0, 0, 1].into();
        let b: IpAddr = [10, 0, 0, 2].into();
        assert!(l.exhausted(a).is_none());
        l.charge(a);
        assert!(l.exhausted(a).is_none());
        l.charge(a);
        let wait = l.exhausted(a);
        assert!(wait.is_some_and(|w| w.as_secs() >= 50), "{wait:?}");
        assert!(l.exhausted(b).is_none());
    }
}
