//! Baselines for `unchanged` criteria: snapshots taken before the agent acts.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use verdict_core::contracts::Timestamp;
use verdict_core::digest::Digest;

/// The schema tag of a baseline file.
pub const BASELINE_SCHEMA: &str = "verdict.check-baseline/v1";

/// One criterion's snapshot.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Snapshot {
    /// The definition it was taken with; a baseline of another definition is not comparable.
    pub definition_digest: Digest,
    /// When (RFC 3339 UTC), before the run that compares with it.
    pub taken_at: Timestamp,
    /// What was observed.
    pub snapshot: Value,
}

impl Snapshot {
    /// The SHA-256 of the snapshot's canonical JSON: what `--baseline-out` prints and a
    /// comparison records, so the two can be matched.
    #[must_use]
    pub fn digest(&self) -> Digest {
        verdict_core::digest::raw(&verdict_core::canonical::to_vec(&self.snapshot))
    }
}

/// Why a baseline file is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BaselineError {
    /// Not JSON.
    #[error("baseline is not valid json: {0}")]
    NotJson(String),
    /// Not a baseline (a field missing, unknown or of the wrong type; a bad `taken_at`).
    #[error("invalid baseline: {0}")]
    Invalid(String),
    /// Another schema tag.
    #[error("baseline schema is {found:?}, expected {BASELINE_SCHEMA:?}")]
    Schema {
        /// The tag found.
        found: String,
    },
    /// A snapshot said to be taken after the run began.
    #[error(
        "the baseline of {criterion} says it was taken at {taken_at}, after this run began ({started}): a baseline comes from before the agent acts"
    )]
    TakenLater {
        /// The criterion.
        criterion: String,
        /// Its `taken_at`.
        taken_at: Timestamp,
        /// When the run began.
        started: Timestamp,
    },
}

/// Snapshots by criterion id.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Baseline {
    /// `verdict.check-baseline/v1`.
    pub schema: String,
    /// The snapshots.
    pub criteria: BTreeMap<String, Snapshot>,
}

impl Baseline {
    /// An empty baseline.
    #[must_use]
    pub fn new() -> Self {
        Self {
            schema: BASELINE_SCHEMA.into(),
            criteria: BTreeMap::new(),
        }
    }

    /// Reads a baseline file strictly, for a run that began at `started`: every snapshot must
    /// have been taken before it.
    pub fn from_bytes(bytes: &[u8], started: &Timestamp) -> Result<Self, BaselineError> {
        let v =
            verdict_core::json::parse(bytes).map_err(|e| BaselineError::NotJson(e.to_string()))?;
        let b: Self = verdict_core::contracts::decode_plain(&v)
            .map_err(|e| BaselineError::Invalid(e.to_string()))?;
        if b.schema != BASELINE_SCHEMA {
            return Err(BaselineError::Schema { found: b.schema });
        }
        // The time is copied into the evidence's facts: one from the future would claim a
        // snapshot the run could not have had.
        if let Some((id, s)) = b.criteria.iter().find(|(_, s)| s.taken_at > *started) {
            return Err(BaselineError::TakenLater {
                criterion: crate::report::table::terminal_text(id).into_owned(),
                taken_at: s.taken_at.clone(),
                started: started.clone(),
            });
        }
        Ok(b)
    }
}

impl Default for Baseline {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(taken_at: &str) -> Vec<u8> {
        serde_json::to_vec(&serde_json::json!({
            "schema": BASELINE_SCHEMA,
            "criteria": {"cfg": {
                "definition_digest": verdict_core::digest::raw(b"definition").as_str(),
                "taken_at": taken_at,
                "snapshot": {"replicas": 2},
            }},
        }))
        .unwrap()
    }

    /// `taken_at` is copied into the evidence's facts, so only a time before the run is taken.
    #[test]
    fn taken_at_must_be_an_rfc3339_utc_time_before_the_run() {
        let started: Timestamp = "2026-05-01T12:00:00Z".parse().unwrap();
        let b = Baseline::from_bytes(&file("2026-05-01T11:59:59.5Z"), &started).unwrap();
        assert_eq!(
            b.criteria["cfg"].taken_at.as_str(),
            "2026-05-01T11:59:59.5Z"
        );
        for bad in [
            "yesterday",
            "\u{1b}[2K\rPASS",
            "2026-05-01T11:00:00+01:00",
            "",
        ] {
            let e = Baseline::from_bytes(&file(bad), &started).unwrap_err();
            assert!(matches!(e, BaselineError::Invalid(_)), "{bad:?}: {e}");
            let shown = e.to_string();
            assert!(shown.contains("rfc 3339"), "{shown}");
            assert!(
                !shown.contains('\u{1b}') && !shown.contains('\r'),
                "{shown:?}"
            );
        }
        let e = Baseline::from_bytes(&file("2026-05-01T12:00:01Z"), &started).unwrap_err();
        assert!(matches!(e, BaselineError::TakenLater { .. }), "{e}");
        assert!(e.to_string().contains("after this run began"), "{e}");
    }
}
