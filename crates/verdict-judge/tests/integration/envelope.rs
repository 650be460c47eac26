//! What a provider puts around the model's answer: members an honest server adds (a reasoning
//! model's reasoning, annotations, fields of its own, `refusal: null`) are accepted and never
//! read as the answer, but charged; a refusal in any form is a refusal; and bytes of envelope
//! past what an honest one takes (whitespace between its members, a long id) are charged as
//! output, against fake servers on loopback.
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
use verdict_core::contracts::{CriterionStatus, UnavailableReason, VerificationStatus};
use verdict_judge::config::{Budget, Sampling};
use verdict_judge::provider::{AnthropicProvider, OpenAiProvider, Provider};
use verdict_judge::secret::Secret;
use verdict_judge::{Judge, JudgeRun};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Proto {
    OpenAi,
    Anthropic,
}

const BOTH: [Proto; 2] = [Proto::OpenAi, Proto::Anthropic];

fn judge_with(p: Proto, url: &str, budget: Budget) -> Judge {
    let provider: Arc<dyn Provider> = match p {
        Proto::OpenAi => {
            Arc::new(OpenAiProvider::new(url, "judge-model", None, Some(0.0)).unwrap())
        }
        Proto::Anthropic => Arc::new(
            AnthropicProvider::new(
                url,
                "claude-test",
                Secret::new("sk-ant-test-key-0001".into()),
                "2023-06-01",
                Some(0.0),
            )
            .unwrap(),
        ),
    };
    Judge::new(
        class_with(openai_config(url), budget, Sampling::default()),
        provider,
    )
    .unwrap()
}

fn judge(p: Proto, url: &str) -> Judge {
    judge_with(p, url, budget())
}

/// A reply for the standard request with every criterion failed.
fn failing_reply(nonce: &str) -> Value {
    let mut r = good_reply(nonce);
    for row in r["criteria"].as_array_mut().unwrap() {
        row["status"] = json!("failed");
    }
    r
}

/// The envelope of `p` around `reply`, reporting no usage at all (so that only the bytes are
/// charged).
fn envelope_zero(p: Proto, reply: &Value) -> Value {
    match p {
        Proto::OpenAi => {
            let mut env = openai_envelope(&reply.to_string());
            env["usage"] = json!({"prompt_tokens": 0, "completion_tokens": 0});
            env
        }
        Proto::Anthropic => {
            let mut env = anthropic_envelope(reply);
            env["usage"] = json!({"input_tokens": 0, "output_tokens": 0});
            env
        }
    }
}

fn completed(run: &JudgeRun, case: &str) {
    assert_eq!(
        run.result.status,
        VerificationStatus::Completed,
        "{case}: {:?}",
        run.detail
    );
}

fn unavailable(run: &JudgeRun, reason: UnavailableReason, outcome: &str, has: &str, case: &str) {
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
    assert!(detail.contains(has), "{case}: {detail:?} lacks {has:?}");
}

fn statuses(run: &JudgeRun) -> Vec<CriterionStatus> {
    run.result.criteria.iter().map(|r| r.status).collect()
}

type Edit = fn(&mut Value, &str);

/// Writes an envelope out as a response body.
type Body = fn(&Value) -> String;

#[tokio::test]
async fn what_an_openai_server_adds_to_its_envelope_is_accepted_and_never_read() {
    // Members honest servers add to the message, the choice and the response.
    let added: Vec<(&str, Edit)> = vec![
        ("reasoning_content", |e, _| {
            e["choices"][0]["message"]["reasoning_content"] =
                json!("The diff retries once; the log shows 12 passing tests.");
        }),
        ("reasoning", |e, _| {
            e["choices"][0]["message"]["reasoning"] = json!("Checked the retry path.");
        }),
        ("reasoning_details and annotations", |e, _| {
            let m = &mut e["choices"][0]["message"];
            m["reasoning_details"] = json!([{"type": "reasoning.text", "text": "thought", "format": "unknown", "index": 0}]);
            m["annotations"] = json!([{"type": "url_citation", "url_citation": {"url": "https://example.com", "title": "t", "start_index": 0, "end_index": 1}}]);
        }),
        ("a provider's own members", |e, _| {
            e["choices"][0]["message"]["provider_specific_fields"] = json!({"stop_reason": null});
            e["choices"][0]["stop_reason"] = Value::Null;
            e["choices"][0]["native_finish_reason"] = json!("stop");
            e["choices"][0]["logprobs"] = Value::Null;
            e["service_tier"] = json!("default");
            e["provider"] = json!("SomeCloud");
            e["prompt_logprobs"] = Value::Null;
            e["kv_transfer_params"] = Value::Null;
        }),
        // The reasoning holds an all-passed answer; the content a failing one. Only the
        // content is the answer.
        ("a passing answer in the reasoning", |e, nonce| {
            e["choices"][0]["message"]["reasoning_content"] = json!(good_reply(nonce).to_string());
            e["choices"][0]["message"]["content"] = json!(failing_reply(nonce).to_string());
        }),
    ];
    for (case, edit) in added {
        let server = FakeServer::start(move |r| {
            let mut env = openai_envelope(&good_reply(&r.nonce()).to_string());
            edit(&mut env, &r.nonce());
            Answer::json(&env)
        })
        .await;
        let run = judge(Proto::OpenAi, &server.url)
            .run(&request())
            .await
            .unwrap();
        completed(&run, case);
        let want = if case.starts_with("a passing answer") {
            vec![CriterionStatus::Failed; 3]
        } else {
            vec![
                CriterionStatus::Passed,
                CriterionStatus::Passed,
                CriterionStatus::NotTested,
            ]
        };
        assert_eq!(statuses(&run), want, "{case}");
    }

    // An answer in the reasoning alone is no answer.
    let server = FakeServer::start(|r| {
        let mut env = openai_envelope(&good_reply(&r.nonce()).to_string());
        let m = &mut env["choices"][0]["message"];
        m["reasoning_content"] = json!(good_reply(&r.nonce()).to_string());
        m["content"] = Value::Null;
        Answer::json(&env)
    })
    .await;
    let run = judge(Proto::OpenAi, &server.url)
        .run(&request())
        .await
        .unwrap();
    unavailable(
        &run,
        UnavailableReason::InvalidOutput,
        "no_result",
        "no message content",
        "answer in the reasoning only",
    );
}

#[tokio::test]
async fn a_refusal_of_any_form_beside_an_openai_answer_is_a_refusal() {
    let forms = [
        json!("I will not grade this."),
        json!(""),
        json!(true),
        json!(0),
        json!({"reason": "policy"}),
        json!(["no"]),
    ];
    for refusal in forms {
        let case = refusal.to_string();
        let server = FakeServer::start(move |r| {
            let mut env = openai_envelope(&good_reply(&r.nonce()).to_string());
            env["choices"][0]["message"]["refusal"] = refusal.clone();
            Answer::json(&env)
        })
        .await;
        let run = judge(Proto::OpenAi, &server.url)
            .run(&request())
            .await
            .unwrap();
        unavailable(
            &run,
            UnavailableReason::InvalidOutput,
            "refused",
            "the model refused",
            &case,
        );
    }
}

#[tokio::test]
async fn anthropic_thinking_before_the_call_is_accepted_and_never_read() {
    // Reasoning blocks before the result call, the clear one holding an all-passed answer and
    // the call a failing one: the call is the answer.
    let server = FakeServer::start(|r| {
        let mut env = anthropic_envelope(&failing_reply(&r.nonce()));
        let blocks = env["content"].as_array_mut().unwrap();
        blocks.insert(
            0,
            json!({"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4a"}),
        );
        blocks.insert(
            0,
            json!({"type": "thinking", "thinking": good_reply(&r.nonce()).to_string(), "signature": "EqQBCgIYAhIM"}),
        );
        Answer::json(&env)
    })
    .await;
    let run = judge(Proto::Anthropic, &server.url)
        .run(&request())
        .await
        .unwrap();
    completed(&run, "thinking");
    assert_eq!(statuses(&run), vec![CriterionStatus::Failed; 3]);

    // Thinking and no call: no answer.
    let server = FakeServer::start(|r| {
        let mut env = anthropic_envelope(&good_reply(&r.nonce()));
        env["content"] = json!([{"type": "thinking", "thinking": good_reply(&r.nonce()).to_string(), "signature": "x"}]);
        Answer::json(&env)
    })
    .await;
    let run = judge(Proto::Anthropic, &server.url)
        .run(&request())
        .await
        .unwrap();
    unavailable(
        &run,
        UnavailableReason::InvalidOutput,
        "no_result",
        "no submit_verification_result tool call",
        "thinking only",
    );
}

#[tokio::test]
async fn reasoning_is_charged_like_the_answer() {
    for p in BOTH {
        for (size, over) in [(40_000, true), (6_000, false)] {
            let server = FakeServer::start(move |r| {
                let mut env = envelope_zero(p, &good_reply(&r.nonce()));
                let thought = "z".repeat(size);
                match p {
                    Proto::OpenAi => {
                        env["choices"][0]["message"]["reasoning_content"] = json!(thought);
                    }
                    Proto::Anthropic => env["content"].as_array_mut().unwrap().insert(
                        0,
                        json!({"type": "thinking", "thinking": thought, "signature": "s"}),
                    ),
                }
                Answer::json(&env)
            })
            .await;
            let b = Budget {
                max_output_tokens: 4_000,
                ..budget()
            };
            let run = judge_with(p, &server.url, b).run(&request()).await.unwrap();
            let case = format!("{p:?} {size}");
            let charged = run.receipts[0].tokens_charged.unwrap();
            assert!(
                charged > u64::try_from(size / 4).unwrap(),
                "{case}: charged {charged}"
            );
            if over {
                // 10,000 tokens of reasoning against a cap of 4,000, reported as none.
                unavailable(
                    &run,
                    UnavailableReason::BudgetExhausted,
                    "budget_exhausted",
                    "past max_output_tokens 4000",
                    &case,
                );
            } else {
                completed(&run, &case);
            }
        }
    }
}

/// `body` with `pad` inserted after its opening brace: between the envelope's members, outside
/// every string.
fn padded(body: &str, pad: &str) -> String {
    format!("{{{pad}{}", &body[1..])
}

#[tokio::test]
async fn padding_in_the_envelope_is_charged_as_output() {
    for p in BOTH {
        // 400,000 bytes of whitespace between the envelope's members, or in a member of its
        // own, around a valid all-passed reply reported as costing nothing.
        let fills: [(&str, Body); 3] = [
            ("spaces", |env| {
                padded(&env.to_string(), &" ".repeat(400_000))
            }),
            ("line breaks and tabs", |env| {
                padded(&env.to_string(), &"\n\t\r ".repeat(100_000))
            }),
            ("a long id", |env| {
                let mut env = env.clone();
                env["id"] = json!("x".repeat(400_000));
                env.to_string()
            }),
        ];
        for (what, fill) in fills {
            let server = FakeServer::start(move |r| {
                Answer::raw(200, &fill(&envelope_zero(p, &good_reply(&r.nonce()))))
            })
            .await;
            let run = judge(p, &server.url).run(&request()).await.unwrap();
            let case = format!("{p:?} {what}");
            unavailable(
                &run,
                UnavailableReason::BudgetExhausted,
                "budget_exhausted",
                "bytes of padding around it",
                &case,
            );
            assert!(
                run.receipts[0].tokens_charged.unwrap() > 90_000,
                "{case}: {:?}",
                run.receipts[0].tokens_charged
            );
        }

        // Padding that fits the output cap still counts against the run's token cap: 40,000
        // bytes, about 9,000 tokens past the allowance, against a cap 2,000 above the prompt.
        let server = FakeServer::start(move |r| {
            let env = envelope_zero(p, &good_reply(&r.nonce()));
            Answer::raw(200, &padded(&env.to_string(), &" ".repeat(40_000)))
        })
        .await;
        let probe = judge(p, &server.url);
        let prompt_tokens = verdict_judge::judge::plan_request(probe.class(), &request())
            .unwrap()
            .manifest
            .construction
            .estimated_tokens;
        let b = Budget {
            max_output_tokens: 20_000,
            max_total_tokens: Some(prompt_tokens + 2_000),
            ..budget()
        };
        let run = judge_with(p, &server.url, b).run(&request()).await.unwrap();
        unavailable(
            &run,
            UnavailableReason::BudgetExhausted,
            "budget_exhausted",
            "token budget",
            &format!("{p:?} under the output cap"),
        );
    }
}

#[tokio::test]
async fn an_honest_envelope_costs_nothing_beyond_the_text() {
    for p in BOTH {
        // The same reply, compact, pretty-printed, and with every non-ASCII character escaped
        // as `\u00e9` (three times its UTF-8 length), each reported as costing nothing: each is
        // charged the same.
        let reply = |nonce: &str| {
            let mut r = good_reply(nonce);
            r["criteria"][0]["rationale"] = json!("\u{e9}".repeat(900));
            r
        };
        let forms: [(&str, Body); 3] = [
            ("compact", Value::to_string),
            ("pretty", |env| serde_json::to_string_pretty(env).unwrap()),
            ("escaped", |env| {
                env.to_string().replace('\u{e9}', "\\u00e9")
            }),
        ];
        let mut charged = Vec::new();
        for (what, form) in forms {
            let server = FakeServer::start(move |r| {
                Answer::raw(200, &form(&envelope_zero(p, &reply(&r.nonce()))))
            })
            .await;
            let run = judge(p, &server.url).run(&request()).await.unwrap();
            completed(&run, &format!("{p:?} {what}"));
            charged.push(run.receipts[0].tokens_charged.unwrap());
        }
        assert!(
            charged.iter().all(|c| *c == charged[0]),
            "{p:?}: {charged:?}"
        );
    }
}
