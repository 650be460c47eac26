//! Model providers behind one small trait.
//!
//! A provider makes exactly one call and reports what happened; it does not retry, wait or
//! validate. The run loop in [`crate::judge`] owns the deadline, the bounded retries and the
//! budget, so every provider gets the same treatment and the same tests apply to all.

mod anthropic;
mod command;
mod http;
mod openai;

pub use anthropic::{
    AnthropicProvider, DEFAULT_VERSION as ANTHROPIC_VERSION, TOOL_NAME as ANTHROPIC_TOOL,
};
pub use command::CommandProvider;
pub(crate) use http::plain_http_refusal;
pub use openai::OpenAiProvider;

use serde_json::Value;
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

/// What one call sends.
#[derive(Debug, Clone, Copy)]
pub struct CallInput<'a> {
    /// The system message.
    pub system: &'a str,
    /// The user message.
    pub user: &'a str,
    /// The result schema the reply must follow.
    pub schema: &'a Value,
    /// Cap on the reply's tokens.
    pub max_output_tokens: u32,
    /// Time left for this call. The run loop's deadline is the only timer (the call is dropped
    /// when it passes); a provider must not race it with a timer of its own.
    pub timeout: Duration,
}

/// What the model produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Output {
    /// A reply document (JSON text), to be validated.
    Document(String),
    /// The model declined; the text says what it said.
    Refused(String),
    /// The reply was cut off at the output limit.
    Truncated,
    /// The response was well-formed but held no result (no tool call, no content).
    Missing(String),
    /// The response broke its own protocol by holding more than one answer (two choices, two
    /// tool calls); none of them is read.
    OffProtocol(String),
    /// The reply did not end as an answer ends (a stop reason other than the protocol's normal
    /// one, or none); nothing in it is read.
    Unfinished(String),
}

impl Output {
    /// The length in bytes of the text the model produced, for estimating unreported usage.
    #[must_use]
    pub fn text_len(&self) -> usize {
        match self {
            Self::Document(t) | Self::Refused(t) => t.len(),
            Self::Truncated | Self::Missing(_) | Self::OffProtocol(_) | Self::Unfinished(_) => 0,
        }
    }
}

/// One successful exchange with a provider.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallReply {
    /// What the model produced.
    pub output: Output,
    /// The provider's model snapshot or fingerprint, if it reported one.
    pub snapshot: Option<String>,
    /// Input tokens as reported (or estimated, see `tokens_estimated`).
    pub tokens_in: Option<u64>,
    /// Output tokens as reported (or estimated).
    pub tokens_out: Option<u64>,
    /// Whether the token counts are the deterministic estimate rather than the provider's.
    pub tokens_estimated: bool,
    /// Bytes of text the model wrote in the reply, whether or not it was read as an answer
    /// (content, refusal, reasoning, tool inputs, other blocks): the floor its usage is charged
    /// at.
    pub reply_bytes: usize,
    /// Bytes of the response as the provider sent it, envelope included (0 when the model's
    /// text is the whole response, as with `command`); see [`CallReply::padding_bytes`].
    pub body_bytes: usize,
}

/// Bytes an envelope may take around the model's text without being charged: its own members
/// (ids, usage, fingerprints, signatures) and the pretty-printing some servers add.
pub const ENVELOPE_ALLOWANCE: usize = 4096;

/// How many times its own length the model's text may take inside a response body without
/// being charged again: JSON escapes (`\"` for `"`, `\u00e9` for `é`, a surrogate pair of
/// twelve bytes for a four-byte character) take up to three times the text they stand for.
pub const ESCAPED_TEXT_FACTOR: usize = 3;

impl CallReply {
    /// The bytes of the response beyond what an honest envelope around the model's text takes
    /// ([`ENVELOPE_ALLOWANCE`] and the text at [`ESCAPED_TEXT_FACTOR`] times its length):
    /// whitespace between the envelope's members, long ids, members nobody asked for. A
    /// provider sends them at no cost to itself, so they are charged as output.
    #[must_use]
    pub fn padding_bytes(&self) -> usize {
        let free = self
            .reply_bytes
            .saturating_mul(ESCAPED_TEXT_FACTOR)
            .saturating_add(ENVELOPE_ALLOWANCE);
        self.body_bytes.saturating_sub(free)
    }

    /// The bytes the call's output is charged for at the least: what the model wrote and the
    /// response's padding.
    #[must_use]
    pub fn charged_bytes(&self) -> usize {
        self.reply_bytes.saturating_add(self.padding_bytes())
    }
}

/// Why a call failed. Every text in it has had the provider's secrets removed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallFailure {
    /// The call did not finish in time.
    #[error("timed out after {0} ms")]
    Timeout(u64),
    /// The provider answered with an error status.
    #[error("http status {status}: {detail}")]
    Status {
        /// HTTP status.
        status: u16,
        /// Seconds the provider asked to wait (`Retry-After`).
        retry_after: Option<u64>,
        /// An excerpt of the error body.
        detail: String,
    },
    /// The request could not be sent or the response not read.
    #[error("transport error: {0}")]
    Transport(String),
    /// The response broke the provider's protocol.
    #[error("protocol error: {0}")]
    Protocol(String),
    /// The external program failed.
    #[error("command failed: {0}")]
    Command(String),
}

impl CallFailure {
    /// Whether the run loop may retry: rate limiting and server errors only.
    #[must_use]
    pub fn retryable(&self) -> bool {
        matches!(self, Self::Status { status, .. } if *status == 429 || (500..=599).contains(status))
    }

    /// A short label for receipts.
    #[must_use]
    pub fn label(&self) -> String {
        match self {
            Self::Timeout(_) => "timeout".into(),
            Self::Status { status, .. } => format!("http_{status}"),
            Self::Transport(_) => "transport_error".into(),
            Self::Protocol(_) => "protocol_error".into(),
            Self::Command(_) => "command_failed".into(),
        }
    }
}

/// The future a provider call returns.
pub type CallFuture<'a> = Pin<Box<dyn Future<Output = Result<CallReply, CallFailure>> + Send + 'a>>;

/// A model provider.
pub trait Provider: Send + Sync + std::fmt::Debug {
    /// The provider's name as recorded in results and receipts (`openai-compatible`,
    /// `anthropic`, `command`).
    fn name(&self) -> &str;
    /// The model requested.
    fn model(&self) -> &str;
    /// What identifies this provider's behaviour for caching: endpoint or program, model and
    /// sampling parameters. Never contains a secret.
    fn identity(&self) -> Value;
    /// Makes one call.
    fn call<'a>(&'a self, input: CallInput<'a>) -> CallFuture<'a>;
    /// `text` with this provider's secrets removed; applied to everything a run keeps that a
    /// provider or model could have written.
    fn redact(&self, text: &str) -> String {
        text.to_owned()
    }
}
