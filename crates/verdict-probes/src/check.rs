//! A criterion compiled from a spec: its normalised definition, digest, mode plan and probe.

use crate::duration::Dur;
use crate::probe::Probe;
use crate::spec::Mode;
use serde_json::Value;
use serde_json_path::JsonPath;
use verdict_core::contracts::{CriterionRole, Freshness, Id};
use verdict_core::digest::Digest;

/// Default evidence freshness: 15 minutes.
pub const DEFAULT_MAX_AGE: Dur = Dur::from_secs(15 * 60);
/// Default converge deadline.
pub const DEFAULT_TIMEOUT: Dur = Dur::from_secs(60);
/// Default converge and hold interval.
pub const DEFAULT_INTERVAL: Dur = Dur::from_secs(1);
/// The converge back-off cap, as a multiple of the interval, when the spec gives none.
pub const DEFAULT_BACKOFF_FACTOR: u64 = 8;

/// How a criterion's observations are placed in time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Plan {
    /// One observation.
    Assert,
    /// Observe until pass or `timeout`, waiting `interval` doubling up to `max_interval`.
    Converge {
        /// Deadline from the criterion's start.
        timeout: Dur,
        /// First wait.
        interval: Dur,
        /// Longest wait.
        max_interval: Dur,
    },
    /// Observe every `interval` for `window`; the whole must finish by `timeout`.
    Hold {
        /// How long the fact must hold.
        window: Dur,
        /// Sampling interval (> 0).
        interval: Dur,
        /// Deadline for the whole window, from the criterion's start.
        timeout: Dur,
    },
    /// Compare with a baseline snapshot.
    Unchanged,
}

/// One criterion ready to run.
#[derive(Debug)]
pub struct Check {
    /// Identifier; the check id of its evidence.
    pub id: Id,
    /// For people.
    pub description: Option<String>,
    /// Score role.
    pub role: CriterionRole,
    /// Score weight.
    pub weight: f64,
    /// Whether the exit status and the rollup require it.
    pub required: bool,
    /// Timing.
    pub plan: Plan,
    /// Evidence freshness.
    pub max_age: Dur,
    /// The probe.
    pub probe: Probe,
    /// `unchanged`: locations not compared, as written and compiled.
    pub ignore: Vec<(String, JsonPath)>,
    /// The normalised definition (what the digest is of).
    pub definition: Value,
    /// `sha256` of the canonical form of `definition`: what a subject pins.
    pub definition_digest: Digest,
}

impl Check {
    /// The mode.
    #[must_use]
    pub fn mode(&self) -> Mode {
        match self.plan {
            Plan::Assert => Mode::Assert,
            Plan::Converge { .. } => Mode::Converge,
            Plan::Hold { .. } => Mode::Hold,
            Plan::Unchanged => Mode::Unchanged,
        }
    }

    /// Whether it samples while an agent runs under `--during`: safety and catastrophic
    /// criteria in hold mode.
    #[must_use]
    pub fn samples_during(&self) -> bool {
        matches!(self.plan, Plan::Hold { .. }) && self.role != CriterionRole::Correctness
    }

    /// The freshness its evidence carries.
    #[must_use]
    pub fn freshness(&self) -> Freshness {
        if self.probe.is_content_fact() && matches!(self.plan, Plan::Assert | Plan::Converge { .. })
        {
            Freshness::Content
        } else {
            Freshness::Time {
                max_age_s: self.max_age.as_secs(),
            }
        }
    }
}

impl Check {
    /// The probe's kind name.
    #[must_use]
    pub fn probe_kind(&self) -> &'static str {
        self.probe.kind()
    }
}
