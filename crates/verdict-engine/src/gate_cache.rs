//! The gate-run cache: per engine (and so per process), the decision a gate run of an execution
//! answered with, kept only while it is proven current.
//!
//! A gate run's decision depends on what the store holds (the execution's subject, the gate's
//! policy, the evidence, the results and their runs, the human decisions, the prior findings,
//! the cancellations) and on the store's `now`, through the evaluation key's `stale` and
//! `future` sets alone (docs/spec/decision.md, "Evaluation key"). So an entry answers a later
//! run only when both are as they were:
//!
//! - the audit chain's head is the same one, read before the entry was computed and again after
//!   its decision was found stored: every write to the store appends to that chain in the
//!   write's own transaction, so an unmoved head means nothing the run read has changed;
//! - the store's `now` lies in the window in which no counted item changes sides: at or after
//!   the `now` the entry was computed at, and before the first instant at which any evidence
//!   turns stale (`observed_at + max_age_s`) or any evidence or human decision dated in the
//!   future stops being so (its date less [`FUTURE_TOLERANCE_S`]).
//!
//! Only a decision already stored under its evaluation key is ever kept, so an answer from the
//! cache is exactly what an uncached run would return: that stored decision, not inserted.

use crate::gate_run::{Collected, GateRun};
use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use verdict_core::contracts::{CheckEvidence, Freshness, HumanDecision, Timestamp};
use verdict_core::gate::FUTURE_TOLERANCE_S;
use verdict_store::ChainHead;

/// How many executions the cache keeps an answer for, by default.
pub const GATE_CACHE_ENTRIES: usize = 1024;

const NANOS: i128 = 1_000_000_000;

/// 9999-12-31T23:59:59.999999999Z: the Gate brings any later expiry back to it.
const LAST_WRITABLE_NANOS: i128 = 253_402_300_799 * NANOS + (NANOS - 1);

/// One execution's answer and the proof that it is current.
#[derive(Debug, Clone)]
struct Entry {
    /// The audit chain's head it was computed under.
    head: Option<ChainHead>,
    /// The `now` it was computed at, in nanoseconds since the epoch.
    from: i128,
    /// The first instant at which the evaluation key could change with time (exclusive).
    until: i128,
    /// The stored decision.
    run: GateRun,
    /// When it was last used, for eviction.
    used: u64,
}

#[derive(Debug, Default)]
struct Entries {
    map: HashMap<String, Entry>,
    tick: u64,
}

/// A bounded map from execution to the stored decision a gate run of it answered with.
#[derive(Debug)]
pub(crate) struct GateCache {
    capacity: usize,
    entries: Mutex<Entries>,
    /// How many gate runs it answered.
    hits: AtomicU64,
}

impl GateCache {
    /// A cache of at most `capacity` executions; 0 keeps nothing.
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            capacity,
            entries: Mutex::new(Entries::default()),
            hits: AtomicU64::new(0),
        }
    }

    /// The cached answer for `execution`, when it was computed under `head` and `now` lies in
    /// its window. A poisoned lock is a miss: the run evaluates.
    pub(crate) fn get(
        &self,
        execution: &str,
        head: Option<&ChainHead>,
        now: &Timestamp,
    ) -> Option<GateRun> {
        if self.capacity == 0 {
            return None;
        }
        let mut entries = self.entries.lock().ok()?;
        entries.tick += 1;
        let tick = entries.tick;
        let at = now.unix_nanos();
        let entry = entries.map.get_mut(execution)?;
        if entry.head.as_ref() != head || at < entry.from || at >= entry.until {
            return None;
        }
        entry.used = tick;
        self.hits.fetch_add(1, Ordering::Relaxed);
        Some(entry.run.clone())
    }

    /// Keeps `run` (a decision found stored) for `execution`, computed from `collected` at
    /// `now` under `head`, the least recently used entry making room. Nothing is kept when a
    /// counted item cannot be read for its dates.
    pub(crate) fn put(
        &self,
        execution: &str,
        head: Option<ChainHead>,
        now: &Timestamp,
        collected: &Collected,
        run: &GateRun,
    ) {
        if self.capacity == 0 || run.inserted {
            return;
        }
        let Some(until) = stable_until(collected, now) else {
            return;
        };
        let Ok(mut entries) = self.entries.lock() else {
            return;
        };
        entries.tick += 1;
        let tick = entries.tick;
        if !entries.map.contains_key(execution) && entries.map.len() >= self.capacity {
            let oldest = entries
                .map
                .iter()
                .min_by_key(|(_, e)| e.used)
                .map(|(k, _)| k.clone());
            if let Some(k) = oldest {
                entries.map.remove(&k);
            }
        }
        entries.map.insert(
            execution.to_owned(),
            Entry {
                head,
                from: now.unix_nanos(),
                until,
                run: run.clone(),
                used: tick,
            },
        );
    }

    /// How many gate runs it answered since it was made.
    pub(crate) fn hits(&self) -> u64 {
        self.hits.load(Ordering::Relaxed)
    }

    /// How many executions have an entry.
    pub(crate) fn len(&self) -> usize {
        self.entries.lock().map_or(0, |e| e.map.len())
    }
}

/// The first instant after `now` at which the evaluation key of `collected` could change with
/// time alone (`i128::MAX`: never), or `None` when an item cannot be read for its dates. The
/// instants are those the Gate's own rules turn on: evidence is stale at and after
/// `observed_at + max_age_s` (brought back to the last writable instant, as the Gate does), and
/// an item dated `t` is in the future while `t > now + FUTURE_TOLERANCE_S`, so until
/// `now = t - FUTURE_TOLERANCE_S`. Every such instant later than `now` bounds the window, which
/// only ever makes it shorter than the Gate's rules allow.
pub(crate) fn stable_until(collected: &Collected, now: &Timestamp) -> Option<i128> {
    let now = now.unix_nanos();
    let tolerance = i128::from(FUTURE_TOLERANCE_S) * NANOS;
    let mut until = i128::MAX;
    let mut bound = |instant: i128| {
        if instant > now && instant < until {
            until = instant;
        }
    };
    for row in &collected.evidence {
        let e: CheckEvidence = row.decode().ok()?;
        let observed = e.observed_at.unix_nanos();
        if let Freshness::Time { max_age_s } = e.freshness {
            bound((observed + i128::from(max_age_s) * NANOS).min(LAST_WRITABLE_NANOS));
        }
        bound(observed - tolerance);
    }
    for row in &collected.human_decisions {
        let h: HumanDecision = row.decode().ok()?;
        bound(h.decided_at.unix_nanos() - tolerance);
    }
    Some(until)
}
