//! Baselines for `unchanged` criteria: snapshots taken before the agent acts.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use verdict_core::digest::Digest;

/// The schema tag of a baseline file.
pub const BASELINE_SCHEMA: &str = "verdict.check-baseline/v1";

/// One criterion's snapshot.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Snapshot {
    /// The definition it was taken with; a baseline of another definition is not comparable.
    pub definition_digest: Digest,
    /// When.
    pub taken_at: String,
    /// What was observed.
    pub snapshot: Value,
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

    /// Reads a baseline file strictly.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, String> {
        let v = verdict_core::json::parse(bytes)
            .map_err(|e| format!("baseline is not valid json: {e}"))?;
        let b: Self = verdict_core::contracts::decode_plain(&v)
            .map_err(|e| format!("invalid baseline: {e}"))?;
        if b.schema != BASELINE_SCHEMA {
            return Err(format!(
                "baseline schema is {:?}, expected {BASELINE_SCHEMA:?}",
                b.schema
            ));
        }
        Ok(b)
    }
}

impl Default for Baseline {
    fn default() -> Self {
        Self::new()
    }
}
