//! The rate limit on failed authentication. Every request with no valid token is refused and
//! written to the store as a denial, so an unbounded stream of them would fill the store. Two
//! kinds of token bucket hold it back: one per peer (an IPv4 address, or the /64 prefix of an
//! IPv6 one, since a single host is commonly handed a whole /64), and one that every failed
//! authentication of the server shares, so that a client with many addresses (all of
//! 127.0.0.0/8, or many /64s) is still held to one total. A failed authentication takes one
//! token from its peer's bucket and one from the shared bucket; while either is empty, the
//! peer's requests whose token no principal holds are refused with `429` and `Retry-After`,
//! before the engine sees them and with no denial written. A request whose token is valid is
//! never limited, so a client sharing an address with an attacker, or a server under a flood
//! from everywhere, still works for the principals it serves.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How many failed authentications a peer, and the whole server, may make in a burst, and how
/// fast each earns more.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AuthLimit {
    /// A peer's bucket size: failures allowed back to back from one address (or IPv6 /64).
    pub burst: u32,
    /// Failures a peer earns back per minute.
    pub per_minute: u32,
    /// The shared bucket's size: failures allowed back to back from every address together.
    pub server_burst: u32,
    /// Failures the whole server earns back per minute.
    pub server_per_minute: u32,
}

impl Default for AuthLimit {
    fn default() -> Self {
        // The shared bucket lets a few peers fail at their full rate at once, and bounds the
        // denials a flood from any number of addresses writes to about 170,000 a day.
        Self {
            burst: 20,
            per_minute: 60,
            server_burst: 100,
            server_per_minute: 120,
        }
    }
}

/// Which bucket turned a request away.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// The peer's own.
    Peer,
    /// The one every peer shares.
    Server,
}

/// A refusal by the limiter: how long until a failure may be tried again, and which bucket
/// is empty.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limited {
    /// How long until the empty bucket holds a token again (at least a second).
    pub wait: Duration,
    /// The bucket that is empty (the server's when both are).
    pub scope: Scope,
}

/// The most peers tracked at once; past it, untracked peers share one bucket, so a flood of
/// addresses cannot grow the table without bound.
const MAX_PEERS: usize = 4096;

#[derive(Debug)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

impl Bucket {
    fn full(burst: u32, now: Instant) -> Self {
        Self {
            tokens: f64::from(burst),
            at: now,
        }
    }

    fn refill(&mut self, burst: u32, per_minute: u32, now: Instant) {
        let earned = now.duration_since(self.at).as_secs_f64() * f64::from(per_minute) / 60.0;
        self.tokens = (self.tokens + earned).min(f64::from(burst));
        self.at = now;
    }

    /// `None` while a token is left; else how long until one is.
    fn wait(&self, per_minute: u32) -> Option<Duration> {
        if self.tokens >= 1.0 {
            return None;
        }
        let rate = f64::from(per_minute) / 60.0;
        let wait = if rate > 0.0 {
            (1.0 - self.tokens) / rate
        } else {
            f64::from(u32::MAX)
        };
        Some(Duration::from_secs_f64(wait.max(1.0)))
    }

    /// Takes one token. The check before a request and the charge after it are apart, so
    /// failures that were in flight together when the bucket ran dry each still cost a
    /// token: the bucket goes into debt (at most one burst deep) and waits it off.
    fn take(&mut self, burst: u32) {
        self.tokens = (self.tokens - 1.0).max(-f64::from(burst));
    }
}

#[derive(Debug)]
struct Buckets {
    server: Bucket,
    peers: HashMap<IpAddr, Bucket>,
}

/// The buckets of every peer, and the one they share.
#[derive(Debug)]
pub struct Limiter {
    limit: AuthLimit,
    buckets: Mutex<Buckets>,
}

/// The key that peers share once the table is full, and that a request without a known
/// peer address uses.
const OVERFLOW: IpAddr = IpAddr::V4(Ipv4Addr::UNSPECIFIED);

/// The key of `peer`'s bucket: an IPv4 address as it is (an IPv4 client of a dual-stack
/// listener included, which arrives mapped into IPv6), an IPv6 address by its /64 prefix.
#[must_use]
pub fn peer_key(peer: IpAddr) -> IpAddr {
    match peer {
        IpAddr::V4(v4) => IpAddr::V4(v4),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let prefix = u128::from(v6) & !u128::from(u64::MAX);
                IpAddr::V6(Ipv6Addr::from(prefix))
            }
        },
    }
}

impl Limiter {
    /// Buckets for `limit`.
    #[must_use]
    pub fn new(limit: AuthLimit) -> Self {
        Self {
            limit,
            buckets: Mutex::new(Buckets {
                server: Bucket::full(limit.server_burst, Instant::now()),
                peers: HashMap::new(),
            }),
        }
    }

    /// `None` when `peer` may still fail authentication; else how long until it may, and
    /// whether its own bucket or the shared one is empty.
    pub fn exhausted(&self, peer: IpAddr) -> Option<Limited> {
        let now = Instant::now();
        let peer = peer_key(peer);
        let mut buckets = self.buckets.lock().unwrap_or_else(|p| p.into_inner());
        let l = self.limit;
        buckets
            .server
            .refill(l.server_burst, l.server_per_minute, now);
        let server = buckets.server.wait(l.server_per_minute);
        let key = if buckets.peers.contains_key(&peer) {
            Some(peer)
        } else if buckets.peers.len() >= MAX_PEERS {
            Some(OVERFLOW)
        } else {
            None
        };
        let own = key.and_then(|k| buckets.peers.get_mut(&k)).and_then(|b| {
            b.refill(l.burst, l.per_minute, now);
            b.wait(l.per_minute)
        });
        // Told the longer wait: a retry before it would be refused by the other bucket.
        match (own, server) {
            (None, None) => None,
            (Some(wait), None) => Some(Limited {
                wait,
                scope: Scope::Peer,
            }),
            (own, Some(wait)) => Some(Limited {
                wait: own.map_or(wait, |o| o.max(wait)),
                scope: Scope::Server,
            }),
        }
    }

    /// Takes one token from `peer`'s bucket and one from the shared bucket: it failed
    /// authentication.
    pub fn charge(&self, peer: IpAddr) {
        let now = Instant::now();
        let peer = peer_key(peer);
        let l = self.limit;
        let mut guard = self.buckets.lock().unwrap_or_else(|p| p.into_inner());
        let buckets = &mut *guard;
        buckets
            .server
            .refill(l.server_burst, l.server_per_minute, now);
        buckets.server.take(l.server_burst);
        let peers = &mut buckets.peers;
        if !peers.contains_key(&peer) && peers.len() >= MAX_PEERS {
            // Forget peers whose buckets have refilled: they are as if never seen.
            let burst = f64::from(l.burst);
            peers.retain(|_, b| {
                b.refill(l.burst, l.per_minute, now);
                b.tokens < burst
            });
        }
        let key = if peers.contains_key(&peer) || peers.len() < MAX_PEERS {
            peer
        } else {
            OVERFLOW
        };
        let b = peers
            .entry(key)
            .or_insert_with(|| Bucket::full(l.burst, now));
        b.refill(l.burst, l.per_minute, now);
        b.take(l.burst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limiter(burst: u32, server_burst: u32) -> Limiter {
        Limiter::new(AuthLimit {
            burst,
            per_minute: 1,
            server_burst,
            server_per_minute: 1,
        })
    }

    #[test]
    fn a_peer_is_stopped_after_its_burst_and_others_are_not() {
        let l = limiter(2, 100);
        let a: IpAddr = [10, 0, 0, 1].into();
        let b: IpAddr = [10, 0, 0, 2].into();
        assert!(l.exhausted(a).is_none());
        l.charge(a);
        assert!(l.exhausted(a).is_none());
        l.charge(a);
        let limited = l.exhausted(a);
        assert!(
            limited.is_some_and(|x| x.wait.as_secs() >= 50 && x.scope == Scope::Peer),
            "{limited:?}"
        );
        assert!(l.exhausted(b).is_none());
    }

    #[test]
    fn the_shared_bucket_stops_every_address_once_many_have_failed() {
        let l = limiter(2, 5);
        // Five addresses fail once each: none spent its own burst, together they spent the
        // server's.
        for i in 1..=5u8 {
            let peer: IpAddr = [127, 0, 0, i].into();
            assert!(l.exhausted(peer).is_none(), "{peer}");
            l.charge(peer);
        }
        for peer in [
            IpAddr::from([127, 0, 0, 1]),
            IpAddr::from([127, 0, 0, 200]),
            IpAddr::from([192, 0, 2, 7]),
            "2001:db8::1".parse().unwrap(),
        ] {
            let limited = l.exhausted(peer);
            assert!(
                limited.is_some_and(|x| x.wait.as_secs() >= 50 && x.scope == Scope::Server),
                "{peer}: {limited:?}"
            );
        }
    }

    #[test]
    fn failures_in_flight_when_the_bucket_empties_are_charged_as_debt() {
        let l = limiter(100, 2);
        let peer: IpAddr = [10, 0, 0, 1].into();
        // Four failures passed the check together, before any was charged.
        for _ in 0..4 {
            l.charge(peer);
        }
        // Two over the burst: three tokens to earn back at one a minute before the next.
        let limited = l.exhausted(peer);
        assert!(
            limited.is_some_and(|x| x.wait.as_secs() >= 170),
            "{limited:?}"
        );
    }

    #[test]
    fn an_ipv6_peer_is_keyed_by_its_64_prefix() {
        let key = |s: &str| peer_key(s.parse().unwrap());
        assert_eq!(key("2001:db8:1:2:aaaa::1"), key("2001:db8:1:2:ffff:1:2:3"));
        assert_eq!(key("2001:db8:1:2:aaaa::1"), key("2001:db8:1:2::"));
        assert_ne!(key("2001:db8:1:2::1"), key("2001:db8:1:3::1"));
        assert_eq!(
            key("2001:db8:1:2:aaaa::1"),
            "2001:db8:1:2::".parse::<IpAddr>().unwrap()
        );
        // IPv4 addresses stay apart, also when a dual-stack listener sees them mapped.
        assert_ne!(key("10.0.0.1"), key("10.0.0.2"));
        assert_eq!(key("::ffff:10.0.0.1"), key("10.0.0.1"));
        assert_ne!(key("::ffff:10.0.0.1"), key("::ffff:10.0.0.2"));
    }

    #[test]
    fn addresses_of_one_64_share_a_bucket_and_another_64_has_its_own() {
        let l = limiter(2, 100);
        let a: IpAddr = "2001:db8:0:1::1".parse().unwrap();
        let b: IpAddr = "2001:db8:0:1:ffff::9".parse().unwrap();
        let other: IpAddr = "2001:db8:0:2::1".parse().unwrap();
        l.charge(a);
        l.charge(b);
        for peer in [a, b] {
            let limited = l.exhausted(peer);
            assert!(
                limited.is_some_and(|x| x.scope == Scope::Peer),
                "{peer}: {limited:?}"
            );
        }
        assert!(l.exhausted(other).is_none());
    }
}
