//! OpenAI-compatible chat completions (`POST {base_url}/chat/completions`), which vLLM,
//! Ollama, llama.cpp's server and LiteLLM also speak. Structured output is requested with
//! `response_format: {type: json_schema, strict: true}`; the snapshot is the response's
//! `system_fingerprint`, or the model name it reports when there is none.

use super::http::{self, text, uint};
use super::{CallFailure, CallFuture, CallInput, CallReply, Output, Provider};
use crate::secret::Secret;
use serde_json::{Value, json};

/// An OpenAI-compatible endpoint.
#[derive(Debug)]
pub struct OpenAiProvider {
    base_url: String,
    model: String,
    key: Option<Secret>,
    temperature: Option<f64>,
    client: reqwest::Client,
}

impl OpenAiProvider {
    /// A provider for `model` at `base_url` (for example `http://127.0.0.1:8000/v1`). No key is
    /// sent when `key` is `None` (local servers); with a key, plain `http` is refused for any
    /// host but the loopback. `temperature: None` omits the parameter for models that refuse
    /// it.
    pub fn new(
        base_url: &str,
        model: &str,
        key: Option<Secret>,
        temperature: Option<f64>,
    ) -> Result<Self, String> {
        Ok(Self {
            base_url: base_url.trim_end_matches('/').to_owned(),
            model: model.to_owned(),
            client: http::client(base_url, key.is_some())?,
            key,
            temperature,
        })
    }

    async fn run(&self, input: CallInput<'_>) -> Result<CallReply, CallFailure> {
        let mut body = json!({
            "model": self.model,
            "messages": [
                {"role": "system", "content": input.system},
                {"role": "user", "content": input.user},
            ],
            "max_tokens": input.max_output_tokens,
            "n": 1,
            "stream": false,
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": "verdict_result", "strict": true, "schema": input.schema},
            },
        });
        if let (Some(t), Some(obj)) = (self.temperature, body.as_object_mut()) {
            obj.insert("temperature".into(), json!(t));
        }
        let auth = self.key.as_ref().map(|k| format!("Bearer {}", k.expose()));
        let headers: Vec<(&str, &str)> = auth
            .as_deref()
            .map(|a| ("authorization", a))
            .into_iter()
            .collect();
        let secrets: Vec<&Secret> = self.key.iter().collect();
        let url = format!("{}/chat/completions", self.base_url);
        let (resp, body_bytes) =
            http::post_json(&self.client, &url, &headers, &body, &secrets).await?;
        Ok(parse_response(&resp, body_bytes))
    }
}

/// The message members that are answers of another form than the text (a `tool_calls` array
/// is counted on its own; any other value of it that says something is an answer too): a reply
/// holding one with a value has answered twice, and is not read. Any other member a server adds
/// (`reasoning_content` or `reasoning` from reasoning models, `reasoning_details`,
/// `annotations`, fields of its own) is not an answer: it is never read, and its bytes are
/// charged like the rest of what the model wrote.
const OTHER_ANSWERS: [&str; 3] = ["tool_calls", "function_call", "audio"];

/// Whether a field's value says nothing: providers send `null`, `[]` or `{}` for what they
/// leave out (vLLM sends `"tool_calls": []` with every reply).
fn is_empty(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        Value::String(s) => s.is_empty(),
        Value::Bool(_) | Value::Number(_) => false,
    }
}

fn parse_response(resp: &Value, body_bytes: usize) -> CallReply {
    // One answer per reply: `n: 1` was asked, so a second choice breaks the protocol and no
    // choice is read (reading the first would let a provider put its answer wherever it likes).
    let choices = resp
        .get("choices")
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    let choice = resp.pointer("/choices/0").filter(|_| choices == 1);
    let finish = choice.and_then(|c| text(c, "/finish_reason"));
    // Any refusal but `null` is one, whatever its form: `true`, `""` or an object must not let
    // the content beside it be read as an answer.
    let refusal = choice
        .and_then(|c| c.pointer("/message/refusal"))
        .filter(|r| !r.is_null())
        .map(|r| match r {
            Value::String(t) if !t.is_empty() => t.clone(),
            Value::String(_) => "(an empty refusal)".to_owned(),
            other => other.to_string(),
        });
    let content = choice.and_then(|c| text(c, "/message/content"));
    // No tool was offered, so a tool call is an answer besides the content: a second one.
    let tool_calls = choice
        .and_then(|c| c.pointer("/message/tool_calls"))
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    let extra: Vec<&str> = choice
        .and_then(|c| c.pointer("/message"))
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter(|(k, v)| OTHER_ANSWERS.contains(&k.as_str()) && !is_empty(v))
                .map(|(k, _)| k.as_str())
                .collect()
        })
        .unwrap_or_default();
    let output = match (choice, refusal, finish, content) {
        (Some(_), ..) if tool_calls > 0 => Output::OffProtocol(format!(
            "the choice holds {tool_calls} tool call(s) besides its content; one answer was asked for"
        )),
        (Some(_), ..) if !extra.is_empty() => Output::OffProtocol(format!(
            "the message holds {} besides its text; only text was asked for",
            extra.join(", ")
        )),
        (None, ..) if choices > 1 => Output::OffProtocol(format!(
            "the response has {choices} choices; exactly one was asked for (n: 1)"
        )),
        (None, ..) => Output::Missing("the response has no choices".into()),
        (_, Some(r), ..) => Output::Refused(r),
        (_, _, Some("content_filter"), _) => {
            Output::Refused("stopped by the provider's content filter".into())
        }
        (_, _, Some("length"), _) => Output::Truncated,
        // Only a reply that ended on its own is an answer; any other end (a tool or function
        // call, a reason this adapter does not know, none at all) is not one.
        (_, _, Some("stop"), Some(c)) => Output::Document(c.to_owned()),
        (_, _, Some("stop"), None) => {
            Output::Missing("the first choice has no message content".into())
        }
        (_, _, other, _) => Output::Unfinished(format!(
            "the choice ended with finish_reason {}; only \"stop\" ends an answer",
            other.map_or_else(|| "(none)".to_owned(), |r| format!("{r:?}"))
        )),
    };
    let snapshot = text(resp, "/system_fingerprint")
        .filter(|s| !s.is_empty())
        .or_else(|| text(resp, "/model"))
        .map(str::to_owned);
    // Everything the model wrote, whatever became of it: the budget floor is taken over it.
    let written = resp
        .get("choices")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|c| c.get("message").and_then(Value::as_object))
        .flat_map(|m| m.iter())
        .filter(|(k, v)| k.as_str() != "role" && !is_empty(v))
        .map(|(_, v)| v.as_str().map_or_else(|| v.to_string().len(), str::len))
        .sum();
    CallReply {
        output,
        snapshot,
        tokens_in: uint(resp, "/usage/prompt_tokens"),
        tokens_out: uint(resp, "/usage/completion_tokens"),
        tokens_estimated: false,
        reply_bytes: written,
        body_bytes,
    }
}

impl Provider for OpenAiProvider {
    fn name(&self) -> &str {
        "openai-compatible"
    }

    fn model(&self) -> &str {
        &self.model
    }

    fn identity(&self) -> Value {
        json!({"provider": self.name(), "base_url": self.base_url, "model": self.model, "temperature": self.temperature})
    }

    fn call<'a>(&'a self, input: CallInput<'a>) -> CallFuture<'a> {
        Box::pin(self.run(input))
    }

    fn redact(&self, text: &str) -> String {
        crate::secret::redact_all(text, self.key.as_ref())
    }
}
