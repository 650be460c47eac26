//! The principal cache: per engine (and so per process), who holds a token, kept once the
//! store said so.
//!
//! Which principal holds a token is a fact the store never revises: a principal's record (its
//! name, role and token's SHA-256) is appended once and never changed or removed (on
//! PostgreSQL no identity may update or delete a row of `principals`, on SQLite triggers refuse
//! both, and either would break the audit chain), a name is stored once, and a token's hash
//! belongs to one principal at most (a unique index). So an answer "this token is principal P in
//! role R", once read, is the answer every later read would give, and keeping it cannot outlive
//! any change: there is no change to outlive. What can change is kept nowhere here:
//!
//! - what a principal may do (its grants, their revocations and expiry) is read from the store
//!   by every use case, at the store's time, on every call, so a revoked grant is refused on the
//!   very next request;
//! - a token no principal holds is never kept, so a principal added later authenticates at
//!   once, and every unknown token is looked up (and its denial recorded) each time.
//!
//! The cache is keyed by the token's SHA-256, never the token itself, and bounded: once full it
//! starts over empty. If the store ever comes to retire principals or change tokens, that
//! change must move something this cache checks before it answers.

use crate::engine::Principal;
use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use verdict_core::digest::Digest;

/// How many token holders the cache keeps, by default.
pub const PRINCIPAL_CACHE_ENTRIES: usize = 4096;

/// A bounded map from a token's SHA-256 to the principal holding it.
#[derive(Debug)]
pub(crate) struct PrincipalCache {
    capacity: usize,
    entries: Mutex<HashMap<Digest, Principal>>,
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

    /// The principal holding the token hashed to `token_sha256`, if the store said so before.
    /// A poisoned lock is a miss: the store is asked.
    pub(crate) fn get(&self, token_sha256: &Digest) -> Option<Principal> {
        if self.capacity == 0 {
            return None;
        }
        let found = self.entries.lock().ok()?.get(token_sha256).cloned();
        if found.is_some() {
            self.hits.fetch_add(1, Ordering::Relaxed);
        }
        found
    }

    /// Keeps `principal` as the holder of the token hashed to `token_sha256`, as the store
    /// just answered.
    pub(crate) fn put(&self, token_sha256: Digest, principal: &Principal) {
        if self.capacity == 0 {
            return;
        }
        let Ok(mut entries) = self.entries.lock() else {
            return;
        };
        if entries.len() >= self.capacity && !entries.contains_key(&token_sha256) {
            entries.clear();
        }
        entries.insert(token_sha256, principal.clone());
    }

    /// How many authentications it answered since it was made.
    pub(crate) fn hits(&self) -> u64 {
        self.hits.load(Ordering::Relaxed)
    }
}
