//! Only a reply that ended as an answer ends is read: an OpenAI-compatible choice that ended
//! with `stop` and holds its answer as text only, an Anthropic message that ended on its forced
//! result call and holds no other say. Every other end, and every other kind of answer, leaves
//! the run unavailable, with the reason in its receipt, against fake servers on loopback.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use crate::common;

use common::*;
use serde_json::{Value, json};
use std::sync::Arc;
use verdict_core::contracts::{UnavailableReason, VerificationStatus};
use verdict_judge::config::Sampling;
use verdict_judge::provider::{AnthropicProvider, OpenAiProvider, Provider};
use verdict_judge::secret::Secret;
use verdict_judge::{Judge, JudgeRun};

fn openai(url: &str) -> Judge {
    let p: Arc<dyn Provider> =
        Arc::new(OpenAiProvider::new(url, "judge-model", None, Some(0.0)).unwrap());
    Judge::new(
        class_with(openai_config(url), budget(), Sampling::default()),
        p,
    )
    .unwrap()
}

fn anthropic(url: &str) -> Judge {
    let p: Arc<dyn Provider> = Arc::new(
        AnthropicProvider::new(
            url,
            "claude-test",
            Secret::new("sk-ant-test-key-0001".into()),
            "2023-06-01",
            Some(0.0),
        )
        .unwrap(),
    );
    Judge::new(
        class_with(openai_config(url), budget(), Sampling::default()),
        p,
    )
    .unwrap()
}

/// The run must not count: unavailable with `reason`, no rows, and a receipt with `outcome`
/// whose detail names `detail_has`.
fn refused(run: &JudgeRun, reason: UnavailableReason, outcome: &str, detail_has: &str, case: &str) {
    assert_eq!(
        run.result.status,
        VerificationStatus::Unavailable,
        "{case}: {:?}",
        run.detail
    );
    assert_eq!(run.result.unavailable_reason, Some(reason), "{case}");
    assert!(run.result.criteria.is_empty(), "{case}: rows kept");
    assert_eq!(run.receipts.len(), 1, "{case}: not retried");
    assert_eq!(run.receipts[0].outcome, outcome, "{case}");
    let detail = run.receipts[0].detail.as_deref().unwrap_or_default();
    assert!(
        detail.contains(detail_has),
        "{case}: receipt detail {detail:?} lacks {detail_has:?}"
    );
}

type Edit = fn(&mut Value);

#[tokio::test]
async fn an_openai_reply_that_did_not_stop_or_holds_more_than_text_is_not_read() {
    let unfinished: Vec<(&str, Edit, &str)> = vec![
        (
            "tool_calls",
            |e| e["choices"][0]["finish_reason"] = json!("tool_calls"),
            "\"tool_calls\"",
        ),
        (
            "function_call",
            |e| e["choices"][0]["finish_reason"] = json!("function_call"),
            "\"function_call\"",
        ),
        (
            "unknown",
            |e| e["choices"][0]["finish_reason"] = json!("length_exceeded"),
            "\"length_exceeded\"",
        ),
        (
            "none",
            |e| {
                e["choices"][0]
                    .as_object_mut()
                    .unwrap()
                    .remove("finish_reason");
            },
            "(none)",
        ),
        (
            "null",
            |e| e["choices"][0]["finish_reason"] = Value::Null,
            "(none)",
        ),
    ];
    for (case, edit, detail) in unfinished {
        let server = FakeServer::start(move |r| {
            let mut env = openai_envelope(&good_reply(&r.nonce()).to_string());
            edit(&mut env);
            Answer::json(&env)
        })
        .await;
        let run = openai(&server.url).run(&request()).await.unwrap();
        refused(
            &run,
            UnavailableReason::ProviderError,
            "unfinished",
            detail,
            case,
        );
    }
    let other_forms: Vec<(&str, Edit, &str)> = vec![
        (
            "legacy function_call beside the content",
            |e| {
                e["choices"][0]["message"]["function_call"] =
                    json!({"name": "approve", "arguments": "{}"});
            },
            "function_call",
        ),
        (
            "audio beside the content",
            |e| {
                e["choices"][0]["message"]["audio"] =
                    json!({"id": "audio_1", "data": "AAAA", "transcript": "all passed"});
            },
            "audio",
        ),
        (
            "tool_calls as an object beside the content",
            |e| {
                e["choices"][0]["message"]["tool_calls"] =
                    json!({"0": {"function": {"name": "approve", "arguments": "{}"}}});
            },
            "tool_calls",
        ),
        (
            "tool_calls as a string beside the content",
            |e| e["choices"][0]["message"]["tool_calls"] = json!("approve"),
            "tool_calls",
        ),
        (
            "tool_calls as a number beside the content",
            |e| e["choices"][0]["message"]["tool_calls"] = json!(1),
            "tool_calls",
        ),
    ];
    for (case, edit, detail) in other_forms {
        let server = FakeServer::start(move |r| {
            let mut env = openai_envelope(&good_reply(&r.nonce()).to_string());
            edit(&mut env);
            Answer::json(&env)
        })
        .await;
        let run = openai(&server.url).run(&request()).await.unwrap();
        refused(
            &run,
            UnavailableReason::InvalidOutput,
            "invalid_output",
            detail,
            case,
        );
    }
    // `length` and `content_filter` are not answers either (each has its own outcome).
    for (finish, outcome) in [("length", "truncated"), ("content_filter", "refused")] {
        let server = FakeServer::start(move |r| {
            let mut env = openai_envelope(&good_reply(&r.nonce()).to_string());
            env["choices"][0]["finish_reason"] = json!(finish);
            Answer::json(&env)
        })
        .await;
        let run = openai(&server.url).run(&request()).await.unwrap();
        refused(&run, UnavailableReason::InvalidOutput, outcome, "", finish);
    }
    // What providers send for what they leave out is not a second answer: such a reply counts.
    let server = FakeServer::start(|r| {
        let mut env = openai_envelope(&good_reply(&r.nonce()).to_string());
        let m = &mut env["choices"][0]["message"];
        m["tool_calls"] = json!([]);
        m["function_call"] = Value::Null;
        m["audio"] = Value::Null;
        m["annotations"] = json!([]);
        Answer::json(&env)
    })
    .await;
    let run = openai(&server.url).run(&request()).await.unwrap();
    assert_eq!(
        run.result.status,
        VerificationStatus::Completed,
        "{:?}",
        run.detail
    );
}

#[tokio::test]
async fn an_anthropic_reply_that_did_not_end_on_its_call_or_holds_more_is_not_read() {
    let unfinished: Vec<(&str, Edit, &str)> = vec![
        (
            "pause_turn",
            |e| e["stop_reason"] = json!("pause_turn"),
            "\"pause_turn\"",
        ),
        (
            "end_turn",
            |e| e["stop_reason"] = json!("end_turn"),
            "\"end_turn\"",
        ),
        (
            "stop_sequence (none was asked for)",
            |e| e["stop_reason"] = json!("stop_sequence"),
            "\"stop_sequence\"",
        ),
        (
            "unknown",
            |e| e["stop_reason"] = json!("model_context_window_exceeded"),
            "\"model_context_window_exceeded\"",
        ),
        (
            "none",
            |e| {
                e.as_object_mut().unwrap().remove("stop_reason");
            },
            "(none)",
        ),
    ];
    for (case, edit, detail) in unfinished {
        let server = FakeServer::start(move |r| {
            let mut env = anthropic_envelope(&good_reply(&r.nonce()));
            edit(&mut env);
            Answer::json(&env)
        })
        .await;
        let run = anthropic(&server.url).run(&request()).await.unwrap();
        refused(
            &run,
            UnavailableReason::ProviderError,
            "unfinished",
            detail,
            case,
        );
    }
    let other_blocks: Vec<(&str, Edit, &str)> = vec![
        (
            "contradicting text",
            |e| {
                e["content"].as_array_mut().unwrap().insert(
                    0,
                    json!({"type": "text", "text": "Every criterion FAILED. Do not merge."}),
                );
            },
            "type text",
        ),
        (
            "server tool call",
            |e| {
                e["content"].as_array_mut().unwrap().push(json!({
                    "type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search",
                    "input": {"query": "approve"}}));
            },
            "type server_tool_use",
        ),
        (
            "pause_turn with text and a server call",
            |e| {
                e["stop_reason"] = json!("pause_turn");
                e["content"].as_array_mut().unwrap().push(json!({
                    "type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search",
                    "input": {}}));
            },
            "server_tool_use",
        ),
        (
            "an envelope of type error around the call",
            |e| e["type"] = json!("error"),
            "of type \"error\"",
        ),
        (
            "an envelope in the user's role around the call",
            |e| e["role"] = json!("user"),
            "in the role \"user\"",
        ),
    ];
    for (case, edit, detail) in other_blocks {
        let server = FakeServer::start(move |r| {
            let mut env = anthropic_envelope(&good_reply(&r.nonce()));
            edit(&mut env);
            Answer::json(&env)
        })
        .await;
        let run = anthropic(&server.url).run(&request()).await.unwrap();
        refused(
            &run,
            UnavailableReason::InvalidOutput,
            "invalid_output",
            detail,
            case,
        );
    }
    for (stop, outcome) in [("max_tokens", "truncated"), ("refusal", "refused")] {
        let server = FakeServer::start(move |r| {
            let mut env = anthropic_envelope(&good_reply(&r.nonce()));
            env["stop_reason"] = json!(stop);
            Answer::json(&env)
        })
        .await;
        let run = anthropic(&server.url).run(&request()).await.unwrap();
        refused(&run, UnavailableReason::InvalidOutput, outcome, "", stop);
    }
    // The reply as the API sends it for a forced call counts.
    let server =
        FakeServer::start(|r| Answer::json(&anthropic_envelope(&good_reply(&r.nonce())))).await;
    let run = anthropic(&server.url).run(&request()).await.unwrap();
    assert_eq!(
        run.result.status,
        VerificationStatus::Completed,
        "{:?}",
        run.detail
    );
}
