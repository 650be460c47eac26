//! Results: one per criterion (`pass | fail | error`, observations, reason) and the rollup.

use crate::check::Check;
use crate::diff::Change;
use crate::probe::{OutputInfo, Sample};
use crate::spec::Mode;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use verdict_core::contracts::{CheckOutcome, CriterionRole, Id};
use verdict_core::digest::Digest;

/// One observation, placed in time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Observation {
    /// 0-based number of the observation within its criterion.
    pub index: u64,
    /// When it started (RFC 3339 UTC).
    pub at: String,
    /// How long it took, in milliseconds.
    pub duration_ms: u64,
    /// What it found.
    pub outcome: CheckOutcome,
    /// Why.
    pub reason: String,
    /// Small structured facts.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub facts: Map<String, Value>,
    /// The main output, bounded, with the digest of all of it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<OutputInfo>,
}

impl Observation {
    /// Places a sample.
    #[must_use]
    pub fn new(index: u64, at: String, duration_ms: u64, s: Sample) -> Self {
        Self {
            index,
            at,
            duration_ms,
            outcome: s.outcome,
            reason: s.reason,
            facts: s.facts,
            output: s.output,
        }
    }
}

/// An observation not yet written out: most samples of a long hold are only counted, so the
/// time is formatted and the observation built only for the ones a result keeps.
#[derive(Debug, Clone)]
pub struct Observed {
    /// 0-based number within the criterion.
    pub index: u64,
    /// Start, in nanoseconds since the Unix epoch.
    pub at_nanos: i128,
    /// How long it took, in milliseconds.
    pub duration_ms: u64,
    /// What the probe saw.
    pub sample: Sample,
}

impl Observed {
    /// What it found.
    #[must_use]
    pub fn outcome(&self) -> CheckOutcome {
        self.sample.outcome
    }

    /// Why.
    #[must_use]
    pub fn reason(&self) -> &str {
        &self.sample.reason
    }

    /// The observation as results show it.
    #[must_use]
    pub fn into_observation(self) -> Observation {
        let at = verdict_core::contracts::Timestamp::from_unix_nanos(self.at_nanos).to_string();
        Observation::new(self.index, at, self.duration_ms, self.sample)
    }
}

/// How many observations a result keeps in full: the first, the first few that did not pass,
/// and the last. Counts are always complete.
pub const KEPT_NON_PASSING: usize = 3;

/// The observations a criterion keeps, bounded whatever the number of samples.
#[derive(Debug, Default, Clone)]
pub struct Kept {
    first: Option<Observed>,
    non_passing: Vec<Observed>,
    last: Option<Observed>,
    /// Observations taken.
    pub count: u64,
    /// Of which passed.
    pub passed: u64,
    /// Of which failed.
    pub failed: u64,
    /// Of which errored.
    pub errored: u64,
    /// The most recent error, whether or not it is kept in full.
    pub last_error: Option<(u64, String)>,
    /// The most recent failure, whether or not it is kept in full.
    pub last_failure: Option<(u64, String)>,
}

impl Kept {
    /// Adds one.
    pub fn push(&mut self, o: Observed) {
        self.count += 1;
        match o.outcome() {
            CheckOutcome::Pass => self.passed += 1,
            CheckOutcome::Fail => {
                self.failed += 1;
                self.last_failure = Some((o.index, o.reason().to_owned()));
            }
            CheckOutcome::Error => {
                self.errored += 1;
                self.last_error = Some((o.index, o.reason().to_owned()));
            }
        }
        if self.first.is_none() {
            self.first = Some(o);
            return;
        }
        if o.outcome() != CheckOutcome::Pass && self.non_passing.len() < KEPT_NON_PASSING {
            self.non_passing.push(o.clone());
        }
        self.last = Some(o);
    }

    /// The last observation.
    #[must_use]
    pub fn last(&self) -> Option<&Observed> {
        self.last.as_ref().or(self.first.as_ref())
    }

    /// The first observation that failed.
    #[must_use]
    pub fn first_failure(&self) -> Option<&Observed> {
        self.first
            .iter()
            .chain(self.non_passing.iter())
            .find(|o| o.outcome() == CheckOutcome::Fail)
    }

    /// The kept observations in order, without repeats.
    #[must_use]
    pub fn into_vec(self) -> Vec<Observation> {
        let mut v: Vec<Observed> = self
            .first
            .into_iter()
            .chain(self.non_passing)
            .chain(self.last)
            .collect();
        v.sort_by_key(|o| o.index);
        v.dedup_by_key(|o| o.index);
        v.into_iter().map(Observed::into_observation).collect()
    }
}

/// The result of one criterion.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CriterionResult {
    /// Criterion id.
    pub id: Id,
    /// For people.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Score role.
    pub role: CriterionRole,
    /// Score weight.
    pub weight: f64,
    /// Whether it is required.
    pub required: bool,
    /// Mode.
    pub mode: Mode,
    /// Probe kind.
    pub probe: String,
    /// Pass, fail or error.
    pub outcome: CheckOutcome,
    /// Why, in one line.
    pub reason: String,
    /// The definition it ran.
    pub definition_digest: Digest,
    /// When its first observation started (or when it was given up, if it never observed).
    pub started_at: String,
    /// When it ended.
    pub finished_at: String,
    /// Wall time in milliseconds.
    pub duration_ms: u64,
    /// Observations taken.
    pub samples: u64,
    /// Whether it sampled while the agent ran (`--during`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub during: bool,
    /// `unchanged`: what changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub changes: Option<Vec<Change>>,
    /// The observations kept (first, first non-passing ones, last).
    pub observations: Vec<Observation>,
}

impl CriterionResult {
    /// A result for a criterion that produced no observation.
    #[must_use]
    pub fn without_observation(
        check: &Check,
        outcome: CheckOutcome,
        reason: String,
        at: String,
    ) -> Self {
        Self {
            id: check.id.clone(),
            description: check.description.clone(),
            role: check.role,
            weight: check.weight,
            required: check.required,
            mode: check.mode(),
            probe: check.probe_kind().to_owned(),
            outcome,
            reason,
            definition_digest: check.definition_digest.clone(),
            started_at: at.clone(),
            finished_at: at,
            duration_ms: 0,
            samples: 0,
            during: false,
            changes: None,
            observations: Vec::new(),
        }
    }
}

/// Counts behind the rollup.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Counts {
    /// Criteria.
    pub total: u64,
    /// Passed.
    pub pass: u64,
    /// Failed.
    pub fail: u64,
    /// Errored.
    pub error: u64,
    /// Required criteria.
    pub required: u64,
    /// Optional criteria: reported, never scored, never decide the exit status.
    pub unscored: u64,
}

/// Scores as docs/spec/decision.md writes them, over required criteria only.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Rollup {
    /// Σweight·[pass] / Σweight over correctness criteria; `null` when there are none.
    pub c: Option<f64>,
    /// The same over safety criteria.
    pub rec_v: Option<f64>,
    /// 0 if a catastrophic criterion failed, `null` if none failed but one did not pass (or
    /// there are none), else 1.
    pub cat_v: Option<f64>,
    /// Counts.
    pub counts: Counts,
}

fn weighted(results: &[CriterionResult], role: CriterionRole) -> Option<f64> {
    let of_role: Vec<&CriterionResult> = results
        .iter()
        .filter(|r| r.required && r.role == role)
        .collect();
    if of_role.is_empty() {
        return None;
    }
    let sums = |scale: f64| {
        // Folded from +0: an empty f64 sum is -0, which would print as a negative score.
        let total: f64 = of_role
            .iter()
            .map(|r| r.weight / scale)
            .fold(0.0, |a, b| a + b);
        let passed: f64 = of_role
            .iter()
            .filter(|r| r.outcome == CheckOutcome::Pass)
            .map(|r| r.weight / scale)
            .fold(0.0, |a, b| a + b);
        (total, passed)
    };
    let (mut total, mut passed) = sums(1.0);
    if !total.is_finite() {
        // Finite weights whose sum overflows (1e308 + 1e308) would give infinity / infinity,
        // a NaN score: scaled by the largest, each is at most 1 and the ratio is the same.
        let largest = of_role.iter().map(|r| r.weight).fold(0.0, f64::max);
        (total, passed) = sums(largest);
    }
    (total > 0.0 && total.is_finite()).then(|| passed / total)
}

impl Rollup {
    /// Computes the rollup of `results`.
    #[must_use]
    pub fn of(results: &[CriterionResult]) -> Self {
        let cat: Vec<&CriterionResult> = results
            .iter()
            .filter(|r| r.required && r.role == CriterionRole::Catastrophic)
            .collect();
        let cat_v = if cat.iter().any(|r| r.outcome == CheckOutcome::Fail) {
            Some(0.0)
        } else if cat.is_empty() || cat.iter().any(|r| r.outcome != CheckOutcome::Pass) {
            None
        } else {
            Some(1.0)
        };
        let count = |o: CheckOutcome| results.iter().filter(|r| r.outcome == o).count() as u64;
        Self {
            c: weighted(results, CriterionRole::Correctness),
            rec_v: weighted(results, CriterionRole::Safety),
            cat_v,
            counts: Counts {
                total: results.len() as u64,
                pass: count(CheckOutcome::Pass),
                fail: count(CheckOutcome::Fail),
                error: count(CheckOutcome::Error),
                required: results.iter().filter(|r| r.required).count() as u64,
                unscored: results.iter().filter(|r| !r.required).count() as u64,
            },
        }
    }
}

/// What the agent command of `--during` did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentRun {
    /// The command.
    pub argv: Vec<String>,
    /// Its exit code, when it exited.
    pub exit_code: Option<i32>,
    /// Why it has no exit code (signal, could not start, stopped).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// When it started.
    pub started_at: String,
    /// When it ended.
    pub finished_at: String,
}

/// The whole run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// `verdict.check-report/v1`.
    pub schema: String,
    /// Raw SHA-256 of the spec file.
    pub spec_digest: Digest,
    /// When the run began.
    pub started_at: String,
    /// When it ended.
    pub finished_at: String,
    /// Whether it was stopped (Ctrl-C or the run deadline) before every criterion finished.
    pub interrupted: bool,
    /// The agent of `--during`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<AgentRun>,
    /// One result per criterion, in spec order.
    pub criteria: Vec<CriterionResult>,
    /// Scores and counts.
    pub rollup: Rollup,
    /// Whether every required criterion passed (and there is at least one).
    pub passed: bool,
}

/// The report schema tag.
pub const REPORT_SCHEMA: &str = "verdict.check-report/v1";

impl Report {
    /// Assembles a report; `passed` needs at least one required criterion, all passed.
    #[must_use]
    pub fn new(
        spec_digest: Digest,
        started_at: String,
        finished_at: String,
        interrupted: bool,
        agent: Option<AgentRun>,
        criteria: Vec<CriterionResult>,
    ) -> Self {
        let rollup = Rollup::of(&criteria);
        let required: Vec<&CriterionResult> = criteria.iter().filter(|r| r.required).collect();
        let passed = !interrupted
            && !required.is_empty()
            && required.iter().all(|r| r.outcome == CheckOutcome::Pass);
        Self {
            schema: REPORT_SCHEMA.into(),
            spec_digest,
            started_at,
            finished_at,
            interrupted,
            agent,
            criteria,
            rollup,
            passed,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weights_whose_sum_overflows_still_give_a_score() {
        let spec = crate::load::load_bytes(
            b"version: 1\ncriteria:\n  - id: a\n    weight: 1e308\n    mode: assert\n    probe: {kind: command, argv: ['true']}\n",
            crate::load::Format::Yaml,
            &std::collections::BTreeMap::new(),
        )
        .unwrap();
        let check = &spec.checks[0];
        let at = crate::clock::now().to_string();
        let results = [
            CriterionResult::without_observation(
                check,
                CheckOutcome::Pass,
                String::new(),
                at.clone(),
            ),
            CriterionResult::without_observation(check, CheckOutcome::Fail, String::new(), at),
        ];
        assert_eq!(Rollup::of(&results).c, Some(0.5));
    }
}
