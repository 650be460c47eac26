//! The principal cache: per engine (and so per process), who holds a token, kept once the
//! store said so, for as long as nothing says a token may have changed.
//!
//! A principal's record (its name, role and first token's SHA-256) is appended once and never
//! changed or removed (on PostgreSQL no identity may update or delete a row of `principals`, on
//! SQLite triggers refuse both, and either would break the audit chain), a name is stored once,
//! and a token's hash is held by one principal at most, once. What can change is which token a
//! principal holds: since schema version 30 a token is revoked or replaced by appending a
//! change of token (`credential_changes`), after which the token it retired authenticates
//! nobody. So an answer "this token is principal P in role R" holds until the next change of
//! P's token, and the cache keeps it only while it can tell that none was made:
//!
//! - each answer is kept with the store handle's credential epoch read before the store was
//!   asked (`Store::credential_epoch`, no round trip), and is given only while the epoch is
//!   the same. The epoch moves at once when this handle changes a token (so on this engine, and
//!   every engine sharing its store handle, a revoked token is refused on the very next
//!   request: no window), and on PostgreSQL when the notification the change's routine sends
//!   in its transaction reaches this handle's listening connection (so another engine or server
//!   on the same store refuses it as soon as the notification arrives), and when that
//!   connection starts listening, at first or after it was lost (changes before were not
//!   heard, so what was kept before it listened is asked again);
//! - each answer is also kept at most [`PRINCIPAL_CACHE_BOUND`]: the bound for what no
//!   notification reaches (a SQLite file written by another process, a PostgreSQL listener
//!   whose connection is cut and not back). After it the store is asked again.
//!
//! What a principal may do (its grants, their revocations and expiry) is kept nowhere here: it
//! is read from the store by every use case, at the store's time, on every call, so a revoked
//! grant is refused on the very next request. A token no principal holds is never kept, so a
//! principal added later authenticates at once, and every unknown token is looked up (and its
//! denial recorded) each time.
//!
//! The cache is keyed by the token's SHA-256, never the token itself, and bounded: once full it
//! starts over empty.

use crate::engine::Principal;
use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use verdict_core::digest::Digest;

/// How many token holders the cache keeps, by default.
pub const PRINCIPAL_CACHE_ENTRIES: usize = 4096;

/// The longest the cache answers for a token without asking the store again: the bound on how
/// late an engine that heard nothing of a token's change refuses it.
pub const PRINCIPAL_CACHE_BOUND: Duration = Duration::from_secs(2);

/// One answer: who, the credential epoch it was read under, and when it was read.
#[derive(Debug)]
struct Held {
    principal: Principal,
    epoch: u64,
    read: Instant,
}

/// A bounded map from a token's SHA-256 to the principal holding it.
#[derive(Debug)]
pub(crate) struct PrincipalCache {
    capacity: usize,
    entries: Mutex<HashMap<Digest, Held>>,
    /// How many authentications it answered.
    hits: AtomicU64,
}

impl PrincipalCache {
    /// A cache of at most `capacity` tokens; 0 keeps nothing.
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            capacity,
            entries: Mutex::new(HashMap::new()),
            hits: AtomicU64::new(0),
        }
    }

    /// The principal holding the token hashed to `token_sha256`, if the store said so under
    /// credential epoch `epoch` less than [`PRINCIPAL_CACHE_BOUND`] ago. A poisoned lock is a
    /// miss: the store is asked.
    pub(crate) fn get(&self, token_sha256: &Digest, epoch: u64) -> Option<Principal> {
        if self.capacity == 0 {
            return None;
        }
        let found = self
            .entries
            .lock()
            .ok()?
            .get(token_sha256)
            .filter(|h| h.epoch == epoch && h.read.elapsed() < PRINCIPAL_CACHE_BOUND)
            .map(|h| h.principal.clone());
        if found.is_some() {
            self.hits.fetch_add(1, Ordering::Relaxed);
        }
        found
    }

    /// Keeps `principal` as the holder of the token hashed to `token_sha256`, as the store
    /// just answered, asked under credential epoch `epoch`.
    pub(crate) fn put(&self, token_sha256: Digest, principal: &Principal, epoch: u64) {
        if self.capacity == 0 {
            return;
        }
        let Ok(mut entries) = self.entries.lock() else {
            return;
        };
        if entries.len() >= self.capacity && !entries.contains_key(&token_sha256) {
            entries.clear();
        }
        entries.insert(
            token_sha256,
            Held {
                principal: principal.clone(),
                epoch,
                read: Instant::now(),
            },
        );
    }

    /// Forgets every holder: what a change of token made through this engine does, whatever
    /// the store's epoch says.
    pub(crate) fn clear(&self) {
        if let Ok(mut entries) = self.entries.lock() {
            entries.clear();
        }
    }

    /// How many authentications it answered since it was made.
    pub(crate) fn hits(&self) -> u64 {
        self.hits.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use verdict_core::contracts::Role;

    #[test]
    fn an_answer_is_given_only_under_the_epoch_it_was_read_in() {
        let cache = PrincipalCache::new(8);
        let hash = verdict_core::digest::raw(b"token");
        let p = Principal::new("ci".parse().unwrap(), Role::Runner);
        cache.put(hash.clone(), &p, 3);
        assert_eq!(cache.get(&hash, 3), Some(p.clone()));
        assert_eq!(cache.get(&hash, 4), None);
        cache.clear();
        assert_eq!(cache.get(&hash, 3), None);
        assert_eq!(cache.hits(), 1);
    }
}
