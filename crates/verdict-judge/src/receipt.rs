//! Per-call receipts: what each provider call cost and how it ended.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// One provider call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Receipt {
    /// Which sample (0-based) the call was for.
    pub sample: u32,
    /// Which attempt (1-based) of that sample.
    pub attempt: u32,
    /// Provider name.
    pub provider: String,
    /// Model requested.
    pub model: String,
    /// The provider's model snapshot or fingerprint, when it reported one.
    pub snapshot: Option<String>,
    /// The nonce the call carried.
    pub nonce: String,
    /// Input tokens.
    pub tokens_in: Option<u64>,
    /// Output tokens.
    pub tokens_out: Option<u64>,
    /// Whether the token counts are the deterministic estimate rather than the provider's.
    pub tokens_estimated: bool,
    /// Tokens charged against the budget for the call: the reported usage, raised to the
    /// estimate of the prompt's and the reply's bytes where it is lower. `None` when no reply
    /// came back.
    #[serde(default)]
    pub tokens_charged: Option<u64>,
    /// Estimated cost, when prices are configured.
    pub cost_estimate: Option<f64>,
    /// Wall time of the call in milliseconds.
    pub latency_ms: u64,
    /// How it ended: `valid`, `invalid_output`, `refused`, `truncated`, `no_result`,
    /// `unfinished` (a stop reason other than the protocol's normal one), `budget_exhausted`, `timeout`, `http_<status>`, `transport_error`, `protocol_error`,
    /// `command_failed`.
    pub outcome: String,
    /// The full failure detail of a call that did not give a valid result, with the provider's
    /// secrets redacted; `None` for a valid one.
    #[serde(default)]
    pub detail: Option<String>,
}
