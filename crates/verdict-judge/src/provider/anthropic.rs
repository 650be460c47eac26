//! Anthropic messages (`POST {base_url}/messages`, `x-api-key`, `anthropic-version`).
//! Structured output is a forced call of one tool whose `input_schema` is the result schema;
//! the tool input is the reply document. The snapshot is the exact model id the response
//! reports.

use super::http::{self, text, uint};
use super::{CallFailure, CallFuture, CallInput, CallReply, Output, Provider};
use crate::secret::Secret;
use serde_json::{Value, json};

/// The tool the model is made to call with its result.
pub const TOOL_NAME: &str = "submit_verification_result";
/// The API version header sent when none is configured.
pub const DEFAULT_VERSION: &str = "2023-06-01";

/// An Anthropic messages endpoint.
#[derive(Debug)]
pub struct AnthropicProvider {
    base_url: String,
    model: String,
    key: Secret,
    version: String,
    temperature: Option<f64>,
    client: reqwest::Client,
}

impl AnthropicProvider {
    /// A provider for `model` at `base_url` (for example `https://api.anthropic.com/v1`).
    /// The key is sent with every call, so plain `http` is refused for any host but the
    /// loopback.
    pub fn new(
        base_url: &str,
        model: &str,
        key: Secret,
        version: &str,
        temperature: Option<f64>,
    ) -> Result<Self, String> {
        Ok(Self {
            base_url: base_url.trim_end_matches('/').to_owned(),
            model: model.to_owned(),
            key,
            version: version.to_owned(),
            temperature,
            client: http::client(base_url, true)?,
        })
    }

    async fn run(&self, input: CallInput<'_>) -> Result<CallReply, CallFailure> {
        let mut body = json!({
            "model": self.model,
            "max_tokens": input.max_output_tokens,
            "system": input.system,
            "messages": [{"role": "user", "content": input.user}],
            "tools": [{
                "name": TOOL_NAME,
                "description": "Submit the verification result. Call exactly once.",
                "input_schema": input.schema,
            }],
            // One result per reply: the forced tool, and no parallel calls of it.
            "tool_choice": {"type": "tool", "name": TOOL_NAME, "disable_parallel_tool_use": true},
        });
        if let (Some(t), Some(obj)) = (self.temperature, body.as_object_mut()) {
            obj.insert("temperature".into(), json!(t));
        }
        let headers = [
            ("x-api-key", self.key.expose()),
            ("anthropic-version", self.version.as_str()),
        ];
        let url = format!("{}/messages", self.base_url);
        let (resp, body_bytes) =
            http::post_json(&self.client, &url, &headers, &body, &[&self.key]).await?;
        Ok(parse_response(&resp, body_bytes))
    }
}

/// The blocks of the model's reasoning (extended thinking, in clear or encrypted): not an
/// answer and never read as one, but charged like the rest of what the model wrote.
const REASONING_BLOCKS: [&str; 2] = ["thinking", "redacted_thinking"];

fn parse_response(resp: &Value, body_bytes: usize) -> CallReply {
    let stop = text(resp, "/stop_reason");
    let blocks: &[Value] = resp
        .get("content")
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice);
    // Exactly one tool call, and it must be the result tool: a second call (of any tool) is a
    // second answer, and no answer of such a reply is read.
    let calls: Vec<&Value> = blocks
        .iter()
        .filter(|b| text(b, "/type") == Some("tool_use"))
        .collect();
    let tool_input = match calls.as_slice() {
        [only] if text(only, "/name") == Some(TOOL_NAME) => only.get("input"),
        _ => None,
    };
    // The forced call is the whole answer: text beside it (which may contradict it), a server
    // tool's call or any block of another type is a second say, and the reply is not read. The
    // model's reasoning before the call is not a say: it is left unread.
    let others: Vec<&str> = blocks
        .iter()
        .map(|b| text(b, "/type").unwrap_or("(untyped)"))
        .filter(|t| *t != "tool_use" && !REASONING_BLOCKS.contains(t))
        .collect();
    let said: String = blocks
        .iter()
        .filter_map(|b| text(b, "/text"))
        .collect::<Vec<_>>()
        .join(" ");
    // The answer is the assistant's message: an envelope that says it is something else (an
    // `error`, a `user` turn) is not read, whatever it holds.
    let not_the_message = text(resp, "/type")
        .filter(|t| *t != "message")
        .map(|t| format!("of type {t:?}"))
        .or_else(|| {
            text(resp, "/role")
                .filter(|r| *r != "assistant")
                .map(|r| format!("in the role {r:?}"))
        });
    let output = match (stop, tool_input) {
        _ if let Some(what) = not_the_message => Output::OffProtocol(format!(
            "the response is {what}, not the assistant's message"
        )),
        _ if calls.len() > 1 => Output::OffProtocol(format!(
            "the response has {} tool calls; exactly one {TOOL_NAME} call was asked for",
            calls.len()
        )),
        (Some("refusal"), _) => Output::Refused(if said.is_empty() {
            "refusal".into()
        } else {
            said
        }),
        (Some("max_tokens"), _) => Output::Truncated,
        (_, None) => Output::Missing(format!("no {TOOL_NAME} tool call in the response")),
        _ if !others.is_empty() => Output::OffProtocol(format!(
            "the response holds {} block(s) of type {} besides the {TOOL_NAME} call; only the call was asked for",
            others.len(),
            others.join(", ")
        )),
        // The tool was forced, so a reply that ended normally ended on that call; any other end
        // (`end_turn`, `pause_turn`, `stop_sequence`, a reason not known here, none) is not an
        // answer, whatever its blocks hold.
        (Some("tool_use"), Some(input)) => Output::Document(input.to_string()),
        (other, _) => Output::Unfinished(format!(
            "the response ended with stop_reason {}; only \"tool_use\" ends the forced {TOOL_NAME} call",
            other.map_or_else(|| "(none)".to_owned(), |r| format!("{r:?}"))
        )),
    };
    // Everything the model wrote, whatever became of it: the budget floor is taken over it.
    let written = blocks
        .iter()
        .map(|b| {
            text(b, "/text").map_or(0, str::len)
                + b.get("input").map_or(0, |i| i.to_string().len())
                + text(b, "/thinking").map_or(0, str::len)
                + text(b, "/data").map_or(0, str::len)
        })
        .sum();
    CallReply {
        output,
        snapshot: text(resp, "/model").map(str::to_owned),
        tokens_in: uint(resp, "/usage/input_tokens"),
        tokens_out: uint(resp, "/usage/output_tokens"),
        tokens_estimated: false,
        reply_bytes: written,
        body_bytes,
    }
}

impl Provider for AnthropicProvider {
    fn name(&self) -> &str {
        "anthropic"
    }

    fn model(&self) -> &str {
        &self.model
    }

    fn identity(&self) -> Value {
        json!({"provider": self.name(), "base_url": self.base_url, "model": self.model,
               "version": self.version, "temperature": self.temperature})
    }

    fn call<'a>(&'a self, input: CallInput<'a>) -> CallFuture<'a> {
        Box::pin(self.run(input))
    }

    fn redact(&self, text: &str) -> String {
        crate::secret::redact_all(text, Some(&self.key))
    }
}
